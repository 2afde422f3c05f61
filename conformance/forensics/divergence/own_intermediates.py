"""The implementation's own named intermediates, compared with the spec's under derived bounds.

An implementation may offer named intermediates of its model (``Implementation.intermediates``,
docs/plugins.md "Named intermediates"). Each is compared with the spec's value under the bound the
harness gives an output (``core/intermediates.py``, the same Monte Carlo evaluation as
``ftspec spec intermediates``: SAFETY × the rounding spread of the dtype, at the plugin's declared
precision); the first that departs, in the order computed, is reported.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import VariantSet

from ...core.dtypes import FORMATS
from ...core.intermediates import Intermediate, intermediate_references
from .checking import _Budget
from .walk import MODEL_OF, model_inputs


def _intermediates(member: Any, algorithm: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                   hyper: Mapping[str, int], variant: VariantSet, dtype: str, budget: _Budget) -> str:
    """The first of the implementation's own named intermediates that departs from the spec's value
    ("" when it offers none, or none departs): the coarse names of the contract and the fine ones
    inside them (``walk.spec_intermediates``), whichever it offers, compared in the order of the
    computation, each under its derived bound at the dtype and the plugin's declared precision
    (``core.intermediates.intermediate_references``, ``_departs``)."""
    fns = getattr(member.impl, "intermediates", None) or {}
    if algorithm not in MODEL_OF:
        return ""
    _model, model_entry = MODEL_OF[algorithm]
    fn = fns.get(model_entry)
    if fn is None or not budget.left():
        return ""
    from ftspec.impls.api import Context

    from ...core.examining import precision_of, rounded

    x = model_inputs(algorithm, inputs)
    entry = REGISTRY[model_entry]
    prepared = rounded(entry, dtype, inputs=x, params=params)
    h = {k: hyper[k] for k in entry.hyper}
    outputs = {s.name for s in entry.outputs}  # P: the model's output is judged as the model's, not here
    try:
        spec = intermediate_references(entry, prepared.inputs, prepared.params, hyper=h, variant=variant,
                                       dtype=dtype, precision=precision_of(member, dtype))
        ctx = Context(model_entry, dtype, member.device, h, variant)
        native_in = {k: member.impl.from_numpy(np.asarray(v, dtype=np.int64), "int64", member.device)
                     for k, v in prepared.inputs.items()}
        native_p = {k: member.impl.from_numpy(np.asarray(v, dtype=np.float64), dtype, member.device)
                    for k, v in prepared.params.items()}
        got = fn(native_in, native_p, ctx)
        for name, want in spec.items():
            if name not in got or name in outputs:
                continue
            value = np.asarray(member.impl.to_numpy(got[name]), dtype=np.float64)
            if value.shape != want.shape:
                return f"{name} (shape {value.shape}, spec {want.shape})"
            if _departs(value, want):
                return name
    except Exception:  # noqa: BLE001 - an optional help must never cost the failure its report
        return ""
    return ""


def _departs(value: np.ndarray, want: Intermediate) -> bool:
    """Whether an implementation's named intermediate departs from the spec's: where the spec's value
    is finite, by more than its bound (SAFETY × the Monte Carlo rounding spread at the dtype, as an
    output's); NaN exactly where the spec's is NaN. Where the spec's is −∞ (a masked score S), an
    implementation may mask with a large negative number instead: ``value`` must be −∞ or lie so far
    below every finite score that its key's softmax weight, at most e^(value − lowest finite score)
    of the column's sum, is below the dtype's unit roundoff u: lost in rounding, as a weight of 0 is
    (value ≤ lowest − ln(1/u))."""
    spec, bound = want.value, want.bound
    finite = np.isfinite(spec)
    if not np.all(np.isfinite(value[finite])):
        return True
    if bool(np.any(np.abs(value[finite] - spec[finite]) > bound[finite])):
        return True
    masked = np.isneginf(spec)
    if masked.any():
        low = float(np.min(spec[finite])) if finite.any() else 0.0
        below = math.log(1.0 / FORMATS[want.dtype].u)
        if not np.all((value[masked] == -np.inf) | (value[masked] <= low - below)):
            return True
    return bool(np.any(np.isnan(spec) != np.isnan(value)))
