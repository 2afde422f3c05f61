"""Fixed cases that show each mutant is a real bug.

``witness_case(mutant)`` builds one deterministic ``Case`` from the
mutant's ``Witness``: the one value builder (``conformance/core/values.py``) at
the entry's ``DEFAULT_HYPER`` row and the witness's seed, with the
witness's overrides. ``differs(mutant)`` runs the correct base
implementation and the mutant on it and says whether they disagree: an
exception where the base returns, a different shape, exact outputs that
differ, real outputs beyond a relative 1e-11 at float64 (1e-4 at float32,
1e-2 at float16: far above rounding), or, for a nondeterminism bug, two
identical calls of the mutant that differ.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.conformance.core.calling import native_dtype, outputs_to_numpy
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.dtypes import round_to
from ftspec.conformance.core.values import default_hyper
from ftspec.impls.api import Context, Implementation
from ftspec.spec.entry import Kind
from ftspec.spec.registry import entry as registry_entry
from ftspec.spec.variants import PAPER

from .injection import Mutant, build

__all__ = ["Outcome", "differs", "fixed_case", "witness_case"]


def fixed_case(algorithm: str, *, hyper: Optional[Mapping[str, int]] = None,
               variant: Optional[Mapping[str, Any]] = None, inputs: Optional[Mapping[str, Any]] = None,
               params: Optional[Mapping[str, Any]] = None, seed: int = 0, batched: bool = False) -> Case:
    """A deterministic case of ``algorithm``: ``Case.build`` (the one value
    builder, well-scaled) at the entry's ``DEFAULT_HYPER`` row with ``hyper``'s
    overrides, under the paper's variant with ``variant``'s changes.

    ``inputs`` replaces built inputs by given values; ``params`` sets flat
    parameters (a scalar fills one). ``batched``: one further example (seed
    + 1, the same given inputs) in ``Case.batch``; the call stacks them on a
    leading batch axis."""
    e = registry_entry(algorithm)
    h = default_hyper(e, None, **{k: int(v) for k, v in dict(hyper or {}).items() if k in e.hyper})
    v = PAPER.replace(**dict(variant or {})) if variant else PAPER
    if e.check is not None:
        e.check(h, v)
    given = dict(inputs or {})
    case = Case.build(e, h, v, seed=seed, given=given)
    for name, value in dict(params or {}).items():
        case.params[name] = np.broadcast_to(np.asarray(value, dtype=np.float64), case.params[name].shape).copy()
    if batched:
        case.batch = [Case.build(e, h, v, seed=seed + 1, given=given).inputs]
    return case


def witness_case(m: Mutant) -> Case:
    w = m.witness
    return fixed_case(w.algorithm or m.breaks[0], hyper=w.hyper, variant=w.variant, inputs=w.inputs,
                      params=w.params, seed=w.seed, batched=w.batched)


#: differences below these (relative) could be rounding; a bug must exceed them on its witness
_RTOL = {"float64": 1e-11, "float32": 1e-4, "bfloat16": 3e-2, "float16": 1e-2}


@dataclass
class Outcome:
    differs: bool
    detail: str


def _call(impl: Implementation, case: Case, dtype: str = "float64") -> dict[str, np.ndarray]:
    """One call of ``impl`` on ``case`` at ``dtype`` (batched when ``case.batch`` holds examples)."""
    e = registry_entry(case.algorithm)
    kinds = {s.name: s.kind for s in e.inputs}
    batched = bool(case.batch)
    examples = [case.inputs, *case.batch]
    inputs = {k: np.stack([x[k] for x in examples]) if batched else v for k, v in case.inputs.items()}

    def conv(name: str, value: np.ndarray, kind: str) -> Any:
        want = native_dtype(kind, dtype)
        if want == dtype:
            value = round_to(value, dtype)
        return impl.from_numpy(np.array(value, copy=True), want, "cpu")

    ins = {k: conv(k, v, kinds[k]) for k, v in inputs.items()}
    ps = {k: conv(k, v, Kind.REAL) for k, v in case.params.items()}
    ctx = Context(case.algorithm, dtype, "cpu", dict(case.hyper), case.variant, batched)
    out = impl.algorithms[case.algorithm](ins, ps, ctx)
    return outputs_to_numpy(impl, e, out, case.hyper, case.variant)


def differs(m: Mutant, base: Optional[Implementation] = None, case: Optional[Case] = None) -> Outcome:
    """Run the base implementation and the mutant on the witness case (at the
    witness's dtype); do they disagree?"""
    from ftspec.impls.discovery import load

    base = base or load(m.base)
    case = case or witness_case(m)
    dtype = m.witness.dtype
    good = _call(base, case, dtype)
    mutant_impl = build(m, base)
    try:
        bad = _call(mutant_impl, case, dtype)
    except Exception as exc:  # noqa: BLE001 - a raise where the base returns is a difference
        return Outcome(True, f"raises {type(exc).__name__}: {exc}")
    if m.witness.repeat:  # nondeterminism: identical calls must give identical bits
        for _ in range(10):
            again = _call(mutant_impl, case, dtype)
            for name in bad:
                if not np.array_equal(np.asarray(bad[name]), np.asarray(again[name]), equal_nan=True):
                    return Outcome(True, f"two identical calls differ in output {name!r}")
    for name, g in good.items():
        if name not in bad:
            return Outcome(True, f"output {name!r} missing")
        b = np.asarray(bad[name])
        g = np.asarray(g)
        if b.shape != g.shape:
            return Outcome(True, f"output {name!r} shape {b.shape}, expected {g.shape}")
        if g.dtype.kind in "biu" or b.dtype.kind in "biu":
            if not np.array_equal(b, g):
                return Outcome(True, f"output {name!r}: {b.tolist()} vs {g.tolist()}")
            continue
        bf, gf = b.astype(np.float64), g.astype(np.float64)
        if not np.array_equal(np.isnan(bf), np.isnan(gf)):
            return Outcome(True, f"output {name!r}: NaN pattern differs")
        ok = ~np.isnan(gf)
        rtol = _RTOL[dtype]
        if not np.allclose(bf[ok], gf[ok], rtol=rtol, atol=rtol * 1e-3):
            err = float(np.max(np.abs(bf[ok] - gf[ok])))
            return Outcome(True, f"output {name!r}: max |difference| {err:.3g}")
    return Outcome(False, f"identical within a relative {_RTOL[dtype]:g} on the witness case")


def replace_variant(case: Case, **changes: Any) -> Case:
    return dataclasses.replace(case, variant=case.variant.replace(**changes))
