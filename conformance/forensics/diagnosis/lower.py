"""A lower precision inside: when no set fits, the narrower dtype whose bound the outputs lie within."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError

from ...core.dtypes import round_to
from ...core.tolerances import Reference, ToleranceModelError, reference
from .site import _Site

if TYPE_CHECKING:
    from .confirmation import Call
    from .search import _Search

#: narrower dtypes a dtype's output may have been computed in, the finest first (float16 keeps 11
#: significant bits, bfloat16 8). A float64 model is tried at float32 alone: what real code does
#: (``x.float()``), and float16's bound is wide enough to take in a small bug of a float64
#: computation (a weight off by 1e-4) that is no rounding at all
_NARROWER = {"float64": ("float32",), "float32": ("float16", "bfloat16"), "float16": (), "bfloat16": ()}


def lower_precision(search: "_Search", call: Optional["Call"] = None,
                    admits: Optional[Callable[[Mapping[str, int]], bool]] = None) -> None:
    """When no set fits: the narrower dtype (the closest first) within whose bound the outputs lie
    on every failing example and on every fresh case the implementation is called on (``call``:
    the confirmation's fresh cases), the declared set's reference bounded for that dtype's
    arithmetic.

    Narrower arithmetic inside holds on any case; a departure that only the failing examples'
    bounds allowed does not. A shrunk case is degenerate (one row, width 1), and there a narrower
    dtype's bound can be wide enough to take in a convention's difference: QK-norm applied after
    RoPE instead of before (the zoo's ``qk-norm-after-rotary``, a rotation that the norm's gain
    does not commute with) was named "computes in float16 inside" on its shrunk gpt2_layer case.
    A dtype that a fresh case refutes is not named (``lower_refuted`` says so).

    The outputs need not be values of the narrower dtype: a model that computes its norm on
    ``x.float()`` and multiplies the result by a float64 weight (LLaMA's ``RMSNorm`` in Meta's
    ``llama/model.py`` and karpathy's ``llama2.c`` ``model.py``), or keeps RoPE tables in
    float32, returns float64 values that carry float32 rounding inside. The bound is derived at
    the narrower dtype on the case's own inputs (where the model widened them, as those codes do)
    and on the inputs rounded to it (where the model cast its inputs first); either holding is
    the fingerprint. ``lower_values`` says whether every output is also a value of that dtype
    (computed there and widened at the end)."""
    if search.impl_outputs is None:
        return
    search.d.searched.append("lower precisions")
    held = [n for n in _NARROWER.get(search.dtype, ()) if all(_within_at(search, site, n) for site in search.sites)]
    if held and call is not None:
        for site, label in search.confirmation.every_fresh_site(call, admits):
            for n in [n for n in held if not _within_at(search, site, n)]:
                held.remove(n)
                search.d.lower_refuted.append({"dtype": n, "by": label})
    if held:
        # float16's bound is SAFETY = 8 times its spread, as wide as bfloat16's rounding: where both
        # hold, the case cannot tell which, and both are said
        search.d.lower_precision, search.d.lower_also = held[0], held[1:]
        search.d.lower_values = all(_values_of(site.outputs, held[0]) for site in search.sites
                                  if site.outputs is not None)


def _within_at(search: "_Search", site: _Site, narrow: str) -> bool:
    """Whether the outputs at ``site`` lie within the bound of ``narrow``'s arithmetic, evaluated on
    the site's inputs as the call received them or on those inputs rounded to ``narrow``."""
    if site.outputs is None:
        return False
    given = (site.prepared.inputs, site.prepared.params)
    rounded = ({k: (round_to(v, narrow) if np.asarray(v).dtype.kind == "f" else v)
                for k, v in given[0].items()},
               {k: round_to(v, narrow) for k, v in given[1].items()})
    for inputs, params in (rounded, given):
        try:
            ref = reference(search.entry, inputs, params, hyper=site.case.hyper, variant=site.declared,
                            dtype=narrow, precision=search.precision)
        except (SpecError, ToleranceModelError):
            continue
        if _within(site.outputs, ref) and not _vacuous_at(site.outputs, ref, site.failing):
            return True
    return False


def _within(outputs: Mapping[str, np.ndarray], ref: Reference) -> bool:
    """Every real output within ``ref``'s bound (NaN where it has NaN), whatever the outputs' dtype."""
    for name, want in ref.outputs.items():
        got = outputs.get(name)
        if got is None or np.shape(got) != want.shape:
            return False
        g = np.asarray(got)
        if want.dtype.kind != "f":
            if np.any(g != want):
                return False
            continue
        g = g.astype(np.float64)
        with np.errstate(invalid="ignore"):
            if np.any(np.isnan(g) != np.isnan(want)) or np.any(np.abs(g - want) > ref.bound[name]):
                return False
    return True


def _vacuous_at(outputs: Mapping[str, np.ndarray], ref: Reference, failing: Mapping[str, np.ndarray]) -> bool:
    """Whether ``ref``'s bound at some failing element is as large as the output itself (above half its
    largest finite value): a narrower dtype's bound that wide holds any value there (a nearly
    constant column at float32 leaves bfloat16 no digit), so it is no evidence of that dtype."""
    for name, where in failing.items():
        g = np.asarray(outputs[name])
        if g.dtype.kind != "f" or name not in ref.bound:
            continue
        g = g.astype(np.float64)
        fin = np.isfinite(g)
        size = float(np.max(np.abs(g[fin]))) if fin.any() else 0.0
        if np.any(np.asarray(ref.bound[name])[where & fin] > 0.5 * size):
            return True
    return False


def _values_of(outputs: Mapping[str, np.ndarray], narrow: str) -> bool:
    """Whether every finite real output is a value of ``narrow`` (it rounds to itself there)."""
    for value in outputs.values():
        a = np.asarray(value)
        if a.dtype.kind != "f":
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            fin = a[np.isfinite(a)].astype(np.float64)
            if not np.array_equal(round_to(fin, narrow), fin):
                return False
    return True
