"""Checking one piece through the implementation, and comparing two calls, by derived bounds.

``_Checker`` calls one of the member's entries on the spec's values and judges its outputs as the
search judges them (``tolerances.reference`` at the cell's dtype and precision, then
``judge.judge``). A probe often asks whether an output *moves* between two calls (another
parameter, another input): ``_apart`` answers with the same Monte Carlo bounds, each call's
outputs may be off by its own reference's bound, so two calls' outputs differ beyond rounding
where they differ by more than the sum of their bounds (as ``judge.compare_pair`` allows two
results of one case 2 × bound). No tolerance is picked by hand here (docs/tolerances.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import VariantSet

if TYPE_CHECKING:
    from ...core.tolerances import Reference


def _apart(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], bound_a: Mapping[str, np.ndarray],
           bound_b: Mapping[str, np.ndarray]) -> bool:
    """Whether two sets of outputs differ beyond rounding: a shape or a NaN pattern differs, or an
    element differs by more than the sum of its two bounds (each set may be off from its own
    reference by that reference's bound, so rounding alone stays within the sum). An output of a
    shape the spec does not give has no bound: any difference there counts. Outputs only one set
    holds are not compared."""
    for k in a:
        if k not in b:
            continue
        u, v = np.asarray(a[k], dtype=np.float64), np.asarray(b[k], dtype=np.float64)
        if u.shape != v.shape:
            return True
        if bool(np.any(np.isnan(u) != np.isnan(v))):
            return True
        allowed = np.zeros(u.shape)
        for bound in (bound_a, bound_b):
            if k in bound and np.shape(bound[k]) == u.shape:
                allowed = allowed + np.asarray(bound[k], dtype=np.float64)
        both = ~np.isnan(u) & ~np.isnan(v)
        with np.errstate(invalid="ignore"):  # ∞ − ∞: the same infinity in both, no move
            gap = np.abs(u[both] - v[both])
        if bool(np.any(gap > allowed[both])):
            return True
    return False


@dataclass(frozen=True)
class _Call:
    """One call ``_Checker`` made: the entry, the spec's reference for it (values and bounds) and the
    implementation's outputs (None when it raised or returned nothing readable)."""

    entry: Entry
    ref: Reference
    out: Optional[dict[str, np.ndarray]] = None

    def impl_moved(self, other: Optional["_Call"]) -> bool:
        """Whether the implementation's outputs moved from this call to ``other`` beyond rounding
        (``_apart`` under the two references' bounds); False when either returned nothing."""
        if other is None or self.out is None or other.out is None:
            return False
        return _apart(self.out, other.out, self.ref.bound, other.ref.bound)

    def spec_moved(self, other: Optional["_Call"]) -> bool:
        """Whether the spec's outputs moved from this call to ``other`` by more than the dtype's rounding
        can hide (``_apart`` under the two references' bounds)."""
        if other is None:
            return False
        return _apart(self.ref.outputs, other.ref.outputs, self.ref.bound, other.ref.bound)


@dataclass
class _Moves:
    """Two runs of one probe: whether each agreed, and whether the implementation's output and the
    spec's moved from the first to the second."""

    first: Optional[bool]
    second: Optional[bool]
    impl: bool
    spec: bool

    def only_spec(self) -> bool:
        """The spec's output moves, the implementation's does not."""
        return self.spec and not self.impl

    def only_impl(self) -> bool:
        """The implementation's output moves, the spec's does not."""
        return self.impl and not self.spec


#: one call made: (its verdict, the call: the spec's reference and the implementation's outputs)
_Ran = tuple[Optional[bool], Optional[_Call]]


def _ran(check: "_Checker", verdict: Optional[bool]) -> _Ran:
    """The call ``check`` just made, kept to be compared with later ones."""
    return verdict, check.last


def _moves(check: "_Checker", first: Callable[[], Optional[bool]] | _Ran,
           second: Callable[[], Optional[bool]]) -> Optional[_Moves]:
    """Run ``first`` (or take a call already made) then ``second`` (two calls of one entry) and compare
    their outputs, the implementation's and the spec's, under their derived bounds; None when either
    could not be made or returned nothing."""
    r1, one = first if isinstance(first, tuple) else _ran(check, first())
    if r1 is None or one is None or one.out is None:
        return None
    r2 = second()
    two = check.last
    if r2 is None or two is None or two.out is None:
        return None
    return _Moves(r1, r2, one.impl_moved(two), one.spec_moved(two))


# -- checking one piece through the implementation ---------------------------------------------

class _Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds
        self.spent = False

    def left(self) -> bool:
        if time.perf_counter() > self.end:
            self.spent = True
        return not self.spent


class _Checker:
    """Calls one of the member's entries on the spec's values and judges it as the search does."""

    def __init__(self, member: Any, variant: VariantSet, dtype: str, timeout: float, budget: _Budget,
                 record: list[dict[str, Any]], structural: bool = False) -> None:
        self.member, self.variant, self.dtype, self.timeout = member, variant, dtype, timeout
        self.budget, self.record = budget, record
        #: locating an exception or a wrong shape: only those depart (other values are noted, not blamed)
        self.structural = structural
        #: the last call made (a probe compares two calls: the implementation's outputs, the spec's
        #: values, each under its reference's bounds; or judges another call's outputs against it)
        self.last: Optional[_Call] = None

    def under(self, variant: VariantSet) -> "_Checker":
        """The same checker (record, budget) judging under another variant set."""
        return _Checker(self.member, variant, self.dtype, self.timeout, self.budget, self.record, self.structural)

    def __call__(self, where: str, name: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 hyper: Mapping[str, int], config: str = "as given",
                 variant: Optional[VariantSet] = None, values: bool = False) -> Optional[bool]:
        """True: agrees; False: departs; None: not checked (not offered, refused, no time).
        ``variant``: another variant set than the case's (an ablation that drops parameters);
        ``values``: judge values even when locating an exception (a component asked why a layer raises)."""
        variant = variant or self.variant
        from ...core.case import Case
        from ...core.examining import judged_for
        from ...core.execute import call_member
        from ...core.judge import judge
        from ...core.tolerances import ToleranceModelError

        rec: dict[str, Any] = {"where": where, "entry": name, "config": config, "ok": None, "ratio": None, "note": ""}
        self.record.append(rec)
        impl = self.member.impl
        entry = REGISTRY[name]
        if name not in impl.algorithms:
            rec["note"] = "not offered by the implementation"
            return None
        if not impl.admits(name, hyper):
            rec["note"] = "outside the implementation's limits"
            return None
        try:
            wanted = entry.param_shapes(dict(hyper), variant)
        except Exception as exc:  # noqa: BLE001 - a refused configuration is no evidence
            rec["note"] = f"the spec refuses the configuration: {exc}"
            return None
        missing = sorted(set(wanted) - set(params))
        if missing:
            rec["note"] = f"parameters missing for the entry: {missing[:3]}"
            return None
        params = {k: params[k] for k in wanted}
        if not self.budget.left():
            rec["note"] = "no time left"
            return None
        try:
            judged = judged_for(impl, Case(name, dict(hyper), variant, dict(inputs), params), self.dtype, batch=False)
        except (SpecError, ToleranceModelError) as exc:
            rec["note"] = f"the spec refuses the case: {exc}"
            return None
        prepared, ref = judged.prepared, judged.reference
        if not ref.in_range:
            rec["note"] = "the spec's values leave the dtype's range"
            return None
        case = Case(name, dict(hyper), variant, prepared.inputs, prepared.params)
        self.last = _Call(entry, ref)
        try:
            out, _ = call_member(self.member, entry, prepared.inputs, prepared.params, case, self.dtype,
                                 self.timeout, False)
        except Exception as exc:  # noqa: BLE001 - the implementation's exception departs from the spec
            rec.update(ok=False, ratio="inf", note=f"raised {type(exc).__name__}: {str(exc)[:120]}")
            return False
        self.last = _Call(entry, ref, out)
        try:
            j = judge(entry, out, ref)
        except Exception as exc:  # noqa: BLE001 - outputs the judge cannot read depart
            rec.update(ok=False, ratio="inf", note=f"unreadable outputs: {str(exc)[:120]}")
            return False
        rec["ok"] = bool(j.ok)
        rec["ratio"] = float(j.ratio) if math.isfinite(j.ratio) else "inf"
        if not j.ok and j.findings:
            rec["note"] = j.findings[0].message.splitlines()[0][:160]
        if (self.structural and not values and not j.ok
                and not any(f.check in ("shape", "missing", "dtype") for f in j.findings)):
            rec["ok"] = True
            rec["note"] = "departs in value only (this failure is an exception or a shape): " + rec["note"]
        return bool(rec["ok"])


def _within(check: _Checker, outputs: Mapping[str, np.ndarray]) -> bool:
    """Whether ``outputs`` (another call's) agree with the last call's reference, judged as the search
    judges (its derived bounds): two configurations meant to compute the same values, one agreeing,
    the other departing with outputs the first's bounds accept, differ in their bound only."""
    from ...core.judge import judge

    if check.last is None:
        return False
    try:
        return bool(judge(check.last.entry, dict(outputs), check.last.ref).ok)
    except Exception:  # noqa: BLE001 - outputs the judge cannot read are not within anything
        return False
