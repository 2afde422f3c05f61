"""One case the variant sets are judged on (``_Site``), and what makes a set explain its numbers.

A set explains the outputs only if it resolves the departure from the declared set at the
failing elements (``_resolves``), within a bound that is not as large as the output itself.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError, evaluate

from ...core.case import Case
from ...core.examining import judged_case, rounded
from ...core.judge import judge
from ...core.tolerances import Reference, ToleranceModelError, reference
from .candidates import _adapt_params, _readings

if TYPE_CHECKING:
    from .search import _Search


class _Site:
    """One case the sets are judged on: its inputs and parameters as the call received them, the
    implementation's outputs there (None: it raised), and the declared set's reference with, per
    output, the elements the declared set finds wrong (``failing``)."""

    def __init__(self, search: "_Search", case: Case, outputs: Optional[Mapping[str, np.ndarray]]) -> None:
        self.search, self.case, self.outputs = search, case, outputs
        self.prepared = rounded(case, search.dtype)
        self.declared_ref: Optional[Reference] = None
        self.declared_ok = False
        self.failing: dict[str, np.ndarray] = {}
        #: the case's own declared set: a failing example of the cell may have drawn another one than the
        #: shrunk case (a set's changes are applied to it: the bug is the same wherever it shows)
        self.declared = search.declared if case is search.case else case.variant
        #: the spec's binary64 values under a set (and reading) here: (variant hash, reading) -> outputs
        self._values: dict[tuple, Optional[dict[str, np.ndarray]]] = {}
        try:
            self.declared_ref = judged_case(case, search.dtype, search.precision, variant=self.declared,
                                            batch=False).reference
        except (SpecError, ToleranceModelError):
            return
        if outputs is None:
            return
        try:
            self.declared_ok = judge(search.entry, outputs, self.declared_ref).ok
        except Exception:  # noqa: BLE001 - outputs the judge cannot read fit nothing
            return
        self.failing = _failing_elements(outputs, self.declared_ref)

    def reading(self, reading: Optional[tuple[str, str]]) -> Optional[Mapping[str, np.ndarray]]:
        """The site's inputs with an input read another way (None: the reading does not apply here)."""
        inputs = self.prepared.inputs
        if reading is None:
            return inputs
        name, how = reading
        for n, h, value in _readings(self.search.entry, inputs):
            if (n, h) == (name, how):
                return {**inputs, name: value}
        return None

    def values(self, changes: Mapping[str, Any], reading: Optional[tuple[str, str]]
               ) -> tuple[bool, Optional[dict[str, np.ndarray]]]:
        """The spec's binary64 outputs here under the case's declared set with ``changes`` (and
        ``reading``), without a bound: (whether it is a set that applies here, its outputs or None
        where the spec refuses the case). Twenty times cheaper than a reference (no Monte Carlo
        lanes), enough to tell whether a set moves the output at all, and where to."""
        inputs = self.reading(reading)
        try:
            variant = self.declared.replace(**changes)
        except ValueError:
            return False, None
        if inputs is None:
            return False, None
        key = (variant.hash, reading)
        if key not in self._values:
            fitted = _adapt_params(self.search.entry, self.case.hyper, variant, self.prepared.params)
            if fitted is None:
                return False, None
            try:
                raw = evaluate(self.search.entry.name, _as_lists(inputs), _as_lists(fitted[0]), hyper=self.case.hyper,
                               variant=variant)
            except SpecError:
                self._values[key] = None
            else:
                self._values[key] = {k: np.asarray(v) for k, v in raw.items()}
        return True, self._values[key]

    def judge(self, changes: Mapping[str, Any], reading: Optional[tuple[str, str]]) -> Optional[dict[str, Any]]:
        """Whether the case's declared set with ``changes`` (and ``reading``) explains the outputs here:
        {"fits", "ratio", and "refused" or "parameters" where they apply}; None when it cannot be
        judged on this site (no variant set here, a reading that does not apply)."""
        s = self.search
        inputs = self.reading(reading)
        try:
            variant = self.declared.replace(**changes)
        except ValueError:
            return None
        if inputs is None:
            return None
        fitted = _adapt_params(s.entry, self.case.hyper, variant, self.prepared.params)
        if fitted is None:  # the set needs weights the case never gave (a deeper or gated MLP)
            return None
        params, adapted = fitted
        out: dict[str, Any] = {"fits": False, "ratio": math.inf}
        if adapted:
            out["parameters"] = adapted
        try:
            ref = reference(s.entry, inputs, params, hyper=self.case.hyper, variant=variant, dtype=s.dtype,
                            precision=s.precision)
        except SpecError:
            out["fits"] = self.outputs is None  # the spec refuses the case under this set, as the implementation did
            out["ratio"] = 0.0 if out["fits"] else math.inf
            out["refused"] = True
            return out
        except ToleranceModelError:
            return out
        if self.outputs is None:
            return out
        out["_values"] = ref.outputs  # what the set computes here: the pairs are ranked by it
        out["fits"], out["ratio"], why = self.explains(ref)
        if why:
            out["excluded"] = why
            # within a bound as large as the output: this case cannot tell, which is no evidence either
            # way (a set no closer to the output than the declared one is evidence against it)
            out["uninformative"] = any(w in why for w in _CANNOT_TELL)
        return out

    def explains(self, ref: Reference) -> tuple[bool, float, str]:
        """(fits, error/bound, why not where it is within its bound) of the outputs against ``ref``:
        judged as the search judges, and resolving the departure from the declared set in every
        output the declared set finds wrong (``_resolves``), which it must compare with the same
        shape."""
        entry, outputs = self.search.entry, self.outputs
        assert outputs is not None
        try:
            j = judge(entry, outputs, ref)
        except Exception:  # noqa: BLE001 - outputs the judge cannot read fit nothing
            return False, math.inf, ""
        # a NaN, shape or infinity mismatch is no near miss: only value differences get a finite ratio
        ratio = j.ratio if all(f.check == "spec" for f in j.findings) else math.inf
        if not j.ok:
            return False, ratio, ""
        d = self.declared_ref
        if d is None:  # the declared set refuses or cannot bound the case: nothing to separate from
            vacuous = not _not_vacuous(ref)
            return not vacuous, ratio, "within a bound as large as the output itself (vacuous)" if vacuous else ""
        for name, where in self.failing.items():
            if name not in ref.outputs or np.shape(ref.outputs[name]) != where.shape:
                return False, math.inf, f"it drops or reshapes the failing output {name!r}"
            why = _resolves(outputs[name], ref, d, name, where)
            if why:
                return False, ratio, why
        return True, ratio, ""


def _as_lists(arrays: Mapping[str, Any]) -> dict[str, Any]:
    """Arrays as the spec takes them (nested lists of Python numbers)."""
    return {k: np.asarray(v).tolist() for k, v in arrays.items()}


def _failing_elements(outputs: Mapping[str, np.ndarray], d: Reference) -> dict[str, np.ndarray]:
    """Per output of ``d``, the elements where ``outputs`` depart from it (value beyond the bound, a NaN
    or infinity the reference does not have, a different exact value); only outputs with any."""
    out: dict[str, np.ndarray] = {}
    for name, want in d.outputs.items():
        got = outputs.get(name)
        if got is None or np.shape(got) != np.shape(want):
            continue
        g, w = np.asarray(got), np.asarray(want)
        if w.dtype.kind != "f":
            bad = np.asarray(g != w)
        else:
            g = g.astype(np.float64)
            with np.errstate(invalid="ignore"):
                bad = (np.isnan(g) != np.isnan(w)) | (np.isinf(g) & (g != w)) | (np.abs(g - w) > d.bound[name])
        if bad.any():
            out[name] = bad
    return out


#: why a set within its bound is still no explanation, when the case cannot judge it (no evidence
#: either way: another case may give it) rather than speak against it
_CANNOT_TELL = ("vacuous", "cannot tell")


def _resolves(got: Any, c: Reference, d: Reference, name: str, where: np.ndarray) -> str:
    """Why ``c`` does not resolve the output's departure from the declared ``d`` in output ``name``
    at the failing elements ``where`` ("" when it does):

    - its bound there must be below half the output's own size (a bound as large as the values
      fits anything: the case cannot judge it, "vacuous");
    - it must be at least twice as close to the output as ``d`` at the worst failing element: it
      reproduces the departure (one-pass variance reproduces an implementation's one-pass rounding
      exactly, within a bound as wide as that rounding);
    - where it is not, and its bound is finer than the departure somewhere, that is evidence
      against it; where its bound is wider than the departure everywhere, the case cannot tell it
      from the declared set ("cannot tell").

    Exact outputs (tokens, masks): ``c`` must differ from ``d`` there. A NaN the declared set does
    not have resolves itself (the judge matched the pattern)."""
    g = np.asarray(got)
    cv, dv = np.asarray(c.outputs[name]), np.asarray(d.outputs[name])
    if cv.dtype.kind != "f":
        return "" if np.any(cv[where] != dv[where]) else \
            f"it does not differ from the declared set where {name!r} fails"
    g = g.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(g) & np.isfinite(dv) & np.isfinite(cv)
        size = float(np.max(np.abs(g[np.isfinite(g)]))) if np.isfinite(g).any() else 0.0
        bc = np.asarray(c.bound[name])
        spots = where & finite
        if not spots.any():  # every failing element is a NaN or an infinity: the judge matched their pattern
            return ""
        off_c, off_d = np.abs(g - cv)[spots], np.abs(g - dv)[spots]
        if np.any(bc[spots] > 0.5 * size):
            return f"it fits {name!r} only within a bound as large as the output itself (vacuous)"
        if float(np.max(off_c)) <= 0.5 * float(np.max(off_d)):
            return ""  # it reproduces the output much more closely than the declared set does
        if np.any(off_d > bc[spots]):
            return f"it is not much closer to {name!r} than the declared set where the output fails"
        return f"its bound is wider than the departure from the declared set in {name!r}: the case cannot tell"


def _not_vacuous(c: Reference) -> bool:
    """Without a declared bound to share: every real output's bound is below half its largest value."""
    for name, want in c.outputs.items():
        if want.dtype.kind != "f" or not want.size:
            continue
        with np.errstate(invalid="ignore"):
            top = float(np.nanmax(np.abs(np.where(np.isfinite(want), want, np.nan)))) if np.isfinite(want).any() \
                else 0.0
            b = float(np.nanmax(np.where(np.isfinite(c.bound[name]), c.bound[name], np.inf)))
        if top > 0 and b > 0.5 * top:
            return False
    return True
