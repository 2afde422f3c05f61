"""The walk: where an implementation first departs on one case (``locate``, ``locate_failure``).

A layer entry is probed inside itself (``in_layer``); a model, its loss, gradient or step is walked
step by step (``walk.model_walk``), each step through its own entry, the first departing layer
probed inside (``in_layer``), and with every entry agreeing the model entry itself under ablations
(``whole_model``); the implementation's own named intermediates are compared too
(``own_intermediates``).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import VariantSet

from .checking import _Budget, _Checker
from .components import _embedding_parts
from .in_layer import _locate_in_layer
from .layer_probe import _LayerProbe
from .own_intermediates import _intermediates
from .record import SECONDS, Divergence, _unchecked
from .walk import _LAYER_INPUT, _LAYERS, MODEL_OF, _l, _layer_step, model_inputs, model_walk
from .whole_model import _walk_whole
from ...core.tolerances import keeping_references

__all__ = ["locate", "locate_failure"]


def _model_check(check: _Checker, model_entry: str, inputs: Mapping[str, np.ndarray],
                 params: Mapping[str, np.ndarray], hyper: Mapping[str, int], where: str, config: str) -> Optional[bool]:
    h = {k: hyper[k] for k in REGISTRY[model_entry].hyper}
    return check(where, model_entry, inputs, dict(params), h, config)


@keeping_references()  # each piece is judged again under each configuration tried
def locate(member: Any, algorithm: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
           hyper: Mapping[str, int], variant: VariantSet, dtype: str, *, timeout: float = 30.0,
           seconds: float = SECONDS, every: bool = True, structural: bool = False) -> Divergence:
    """Where ``member`` first departs from the spec on this case of ``algorithm`` (a model, its loss,
    gradient or step, or a layer entry). ``inputs``/``params``: already rounded to ``dtype``.
    ``every``: also check the steps after the first departing one (``also``). ``structural``: the
    failure is an exception or a wrong shape: where *that* happens (value departures are noted only)."""
    started = time.perf_counter()
    d = Divergence(algorithm, dtype)
    budget = _Budget(seconds)
    check = _Checker(member, variant, dtype, timeout, budget, d.checks, structural)
    try:
        if algorithm in _LAYERS:
            step = _layer_step("layer", algorithm, _l(inputs[_LAYER_INPUT[algorithm]]), params, "", hyper,
                               _l(inputs["Z"]) if algorithm == "decoder_layer" else None)
            step.inputs = {k: np.asarray(v) for k, v in inputs.items()}
            if check(step.where, algorithm, step.inputs, step.params, step.hyper, "the whole layer") is False:
                probe = _LayerProbe(check, step, variant)
                d.sublayer, d.detail = _locate_in_layer(check, step, variant, probe)
                d.candidates = [f"layer/{c}" for c in probe.candidates]
                d.where = "layer" if d.sublayer or d.candidates else ""
            else:
                d.detail = "the layer agrees with the spec on this case (the failure did not recur here)"
        elif algorithm in MODEL_OF:
            _walk_model(d, check, member, algorithm, inputs, params, hyper, variant, every)
        d.intermediate = _intermediates(member, algorithm, inputs, params, hyper, variant, dtype, budget)
    except SpecError as exc:  # the spec refuses a piece of the walk: say so, never raise
        d.detail = f"the walk stopped: {exc}"
    d.unchecked = _unchecked(d.checks)
    d.gave_up = budget.spent
    d.seconds = time.perf_counter() - started
    return d


def _place(where: str) -> tuple[str, str]:
    """A step's place as (where, sublayer): the head's norm is the head's ("head", "norm")."""
    return ("head", "norm") if where == "head norm" else (where, "")


def _walk_model(d: Divergence, check: _Checker, member: Any, algorithm: str, inputs: Mapping[str, np.ndarray],
                params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: VariantSet, every: bool) -> None:
    model, model_entry = MODEL_OF[algorithm]
    x = model_inputs(algorithm, inputs)
    steps, _ = model_walk(model, x, params, hyper, variant)
    if algorithm != model_entry:  # a loss, gradient or step: is the forward pass itself at fault?
        if _model_check(check, model_entry, x, params, hyper, "forward pass", "the forward model alone") is True:
            d.where = "loss or its gradient"
            d.detail = f"the forward pass ({model_entry}) agrees with the spec; what is built on it departs"
            return
    for step in steps:
        ok = check(step.where, step.entry, step.inputs, step.params, step.hyper)
        if ok is None and step.entry == "embedding":
            ok = _embedding_parts(check, step)
        if ok is not False:
            continue
        if d.where:
            d.also.append(step.where)
            continue
        if step.entry in _LAYERS:
            probe = _LayerProbe(check, step, variant)
            d.sublayer, detail = _locate_in_layer(check, step, variant, probe)
            d.candidates = [f"{step.where}/{c}" for c in probe.candidates]
            d.where = step.where
            d.detail = f"{step.entry} departs on the spec's input; {detail}"
        else:
            d.where, d.sublayer = _place(step.where)
            entry = next((r["entry"] for r in reversed(d.checks) if r["ok"] is False), step.entry)
            d.detail = f"its {entry} entry departs on the spec's input"
        if not every:
            return
    if d.where:
        return
    _walk_whole(d, check, model, model_entry, x, params, hyper, variant)


def locate_failure(member: Any, case: Any, dtype: str, *, timeout: float,
                   seconds: float = SECONDS, structural: bool = False) -> Optional[Divergence]:
    """The runner's hook (through ``diagnosis.diagnose_failure``): None when the case's algorithm is no
    model, layer, loss, gradient or step, or when anything goes wrong."""
    if case is None or (case.algorithm not in MODEL_OF and case.algorithm not in _LAYERS):
        return None
    from ...core.examining import rounded

    try:
        prepared = rounded(case, dtype)
        return locate(member, case.algorithm, prepared.inputs, prepared.params, case.hyper, case.variant, dtype,
                      timeout=timeout, seconds=seconds, structural=structural)
    except Exception:  # noqa: BLE001 - a help; never the reason a failure goes unreported
        return None
