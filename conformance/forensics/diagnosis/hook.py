"""The runner's hook: call the member again on a failing case, diagnose it, and locate the failure."""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ...core.case import Case
from ...core.examining import judged_for, precision_of, rounded
from ...core.judge import judge
from ...core.values import default_hyper
from .confirmation import FAILING_KEPT, Call
from .result import Diagnosis
from .search import SECONDS, diagnose

#: the checks whose failure compares the implementation's output with the spec's (or its refusal)
DIAGNOSED_CHECKS = frozenset({"spec", "nan", "overflow", "refusal"})
#: checks with no value to match, where a model or layer is still located (which piece raises or
#: returns the wrong shape: conformance/forensics/divergence/)
LOCATED_CHECKS = frozenset({"exception", "shape"})

#: the layer entries a first divergence walks (besides the models, their losses, gradients and steps)
_LAYER_ENTRIES = frozenset({"encoder_layer", "bert_layer", "gpt2_layer", "decoder_layer"})


def diagnose_failure(member: Any, case: Optional[Case], check: str, dtype: str, *, timeout: float,
                     seconds: float = SECONDS, failing: Sequence[Case] = ()) -> Optional[Diagnosis]:
    """The runner's hook: call the member once more on the shrunk case and diagnose its outputs,
    with the other failing examples the search kept (``failing``: the worst first) and fresh cases
    the member is called on. None when the check is not about values (a timeout, a crash, a
    mutation, ...) or when anything goes wrong (a diagnosis is a help; it must never cost the
    failure its report)."""
    if case is not None and check in LOCATED_CHECKS:  # no value to match; where it raises, for a model
        from ..divergence import locate_failure

        where = locate_failure(member, case, dtype, timeout=timeout, structural=True)
        if where is None:
            return None
        d = Diagnosis(case.algorithm, dtype, case.variant.describe(), divergence=where.to_dict(),
                      divergence_lines=where.lines())
        return d
    if case is None or check not in DIAGNOSED_CHECKS:
        return None
    from ...core.execute import call_member

    entry = case.entry

    def call(c: Case) -> Optional[Mapping[str, np.ndarray]]:
        p = rounded(c, dtype)
        try:
            return call_member(member, entry, p.inputs, p.params, c, dtype, timeout, False)[0]
        except Exception:  # noqa: BLE001 - it raised: the refusal reading of the case
            return None

    try:
        prepared = rounded(case, dtype)
        outputs, _ = call_member(member, entry, prepared.inputs, prepared.params, case, dtype, timeout, False)
        d = diagnose(entry, case, outputs, dtype, case.variant, precision=precision_of(member, dtype),
                     seconds=seconds, failing=[(c, call(c)) for c in list(failing)[:FAILING_KEPT]], call=call,
                     admits=lambda hyper: bool(member.impl.admits(entry.name, hyper)))
    except Exception:  # noqa: BLE001 - see above
        return None
    if d.recurred:  # where inside a model or layer it first departs (None for other entries)
        where = _located(member, case, dtype, timeout, failing, call)
        if where is not None:
            d.divergence = where.to_dict()
            d.divergence_lines = where.lines()
    return d


def _located(member: Any, case: Case, dtype: str, timeout: float, failing: Sequence[Case], call: Call) -> Any:
    """Where the failure first departs, walked on the largest failing case at hand first: the cell's
    worst failing examples larger than the shrunk case, then a case at the entry's default sizes
    if the implementation fails there too, then the shrunk case. A degenerate shrunk case (d_e = 2,
    one layer, ℓ = 1) often cannot tell a norm from the residual beside it, where a larger one can;
    the first walk that names one place is kept (the detail says which case it walked), else the
    shrunk case's (its candidates). Within the divergence module's time budget in all."""
    from ..divergence import MODEL_OF, SECONDS as WALK_SECONDS, locate_failure

    if case.algorithm not in MODEL_OF and case.algorithm not in _LAYER_ENTRIES:
        return None
    started = time.perf_counter()
    walks: list[tuple[str, Case]] = [("the cell's worst failing example", c) for c in failing
                                     if c.size() > case.size()][:1]
    big = _failing_default(member, case, dtype, call)
    if big is not None:
        walks.append(("a failing case at the entry's default sizes", big))
    walks.append(("", case))
    last = None
    for label, c in walks:
        left = WALK_SECONDS - (time.perf_counter() - started)
        if left <= 1.0 and c is not case:
            continue
        where = locate_failure(member, c, dtype, timeout=timeout, seconds=max(left, 1.0))
        if where is None:
            continue
        if label:
            where.detail = f"{where.detail}; walked on {label}, {c.describe()}" if where.detail else \
                f"walked on {label}, {c.describe()}"
        if where.found and not where.candidates:
            return where
        last = where if last is None or c is case else last
    return last


def _failing_default(member: Any, case: Case, dtype: str, call: Call) -> Optional[Case]:
    """A case at the entry's default sizes, of the shrunk case's variant set and style, on which the
    implementation fails the declared set (None: the shrunk case is not smaller, the limits do not
    admit the default sizes, or it passes there)."""
    entry = case.entry
    hyper = default_hyper(entry, case.variant)
    if not any(case.hyper.get(k, v) < v for k, v in hyper.items()) or not member.impl.admits(entry.name, hyper):
        return None
    try:
        big = Case.build(entry, hyper, case.variant, seed=1, style=case.style, dtype=dtype)
        outputs = call(big)
        if outputs is None:
            return None
        ref = judged_for(member, big, dtype, batch=False).reference
        return None if judge(entry, outputs, ref).ok else big
    except Exception:  # noqa: BLE001 - a help: no larger case, the shrunk one is walked
        return None
