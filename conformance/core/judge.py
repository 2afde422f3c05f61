"""Judging one implementation's outputs against the spec's reference.

Checks, per output: present, right shape, right dtype (values representable
in the call's dtype), NaN exactly where the spec has NaN, no infinities the
spec does not have, and |got − spec| ≤ bound elementwise. The worst
error/bound ratio is reported whether or not the check passes.

``Finding`` and ``Judgement`` live in ``findings.py`` (the sampled-token
judge reports them too); they are re-exported here.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional

import numpy as np

from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry

from .dtypes import FORMATS, round_to
from .findings import Finding, Judgement
from .tolerances import Reference

__all__ = ["Finding", "Judgement", "compare_pair", "judge"]

_NUMPY_DTYPES = {"float64": {"float64"}, "float32": {"float32"}, "float16": {"float16"},
                 "bfloat16": {"float32"}}


def _ratio(err: np.ndarray, bound: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(err == 0, 0.0, err / bound)
    return np.where(np.isnan(r), math.inf, r)


def _n(x: object) -> str:
    """A NumPy scalar as a plain number (``-1.06``, ``True``), never ``np.float64(-1.06)``."""
    item = getattr(x, "item", None)
    return repr(item() if callable(item) else x)


def _at(index: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def judge(entry: Entry, got: Mapping[str, np.ndarray], ref: Reference) -> Judgement:
    """Compare one call's NumPy outputs with the reference (same dtype). One loop over the outputs
    with a branch per kind of output (missing, shape, exact, NaN pattern, tolerance): kept whole so
    that the order of the checks, which decides the first finding reported, is visible at once."""
    j = Judgement()
    exact_ok = True
    for spec in ref.specs or entry.outputs:
        name = spec.name
        want = ref.outputs[name]
        if name not in got:
            j.findings.append(Finding("missing", f"output {name!r} missing", name))
            continue
        g = np.asarray(got[name])
        if g.shape != want.shape:
            j.findings.append(Finding("shape", f"output {name!r} has shape {g.shape}; expected {want.shape}", name))
            exact_ok = False
            continue
        if spec.kind != Kind.REAL:
            boolean = spec.kind in (Kind.MASK, Kind.BOOL)
            if (boolean and g.dtype != np.bool_) or (not boolean and g.dtype.kind not in "iu"):
                j.findings.append(Finding("dtype", f"output {name!r} has dtype {g.dtype}; expected "
                                          f"{'bool' if boolean else 'an integer dtype'}", name))
                exact_ok = False
                continue
            if ref.sampled is not None:  # sampled: judged against the spec's distributions below
                continue
            differ = np.asarray(g != want)
            if differ.any():  # not np.argwhere(...).size: that is 0 for a differing 0-d output
                at = tuple(np.argwhere(differ)[0])
                j.findings.append(Finding("spec", f"output {name!r} differs at {int(differ.sum())} of {g.size} "
                                          "entries; "
                                          f"first at {_at(at)}: got {_n(g[at])}, spec {_n(want[at])}", name))
            continue
        allowed = _NUMPY_DTYPES[ref.dtype]
        if g.dtype.name not in allowed:
            j.findings.append(Finding("dtype", f"output {name!r} has dtype {g.dtype}; expected {ref.dtype}"
                                      + (" (as float32)" if ref.dtype == "bfloat16" else ""), name))
            continue
        g = g.astype(np.float64)
        finite = np.isfinite(g)
        if ref.dtype == "bfloat16":
            unrepresentable = finite & (round_to(np.where(finite, g, 0.0), "bfloat16") != g)
            if unrepresentable.any():
                at = tuple(np.argwhere(unrepresentable)[0])
                j.findings.append(Finding("dtype", f"output {name!r} holds values that are not bfloat16, "
                                          f"e.g. {_n(g[at])} at {_at(at)}", name))
                continue
        nan_got, nan_want = np.isnan(g), np.isnan(want)
        # Where the tolerance is as large as the value itself, the dtype cannot determine it (e.g. a
        # nearly constant column that rounds to a constant before an ε-free norm): a correct
        # implementation may then divide 0 by 0. Elsewhere a non-finite result is a failure.
        with np.errstate(invalid="ignore"):
            undetermined = np.isfinite(want) & (ref.bound[name] >= np.abs(want)) & (ref.bound[name] > 0)
        excused = ~np.isfinite(g) & undetermined
        j.undetermined += int(excused.sum())
        if ((nan_got != nan_want) & ~excused).any():
            bad = (nan_got != nan_want) & ~excused
            at = tuple(np.argwhere(bad)[0])
            n = int(np.sum(bad & nan_got))
            j.findings.append(Finding("nan", f"output {name!r}: NaN where the spec has a number ({n} entries) or "
                                      f"vice versa; first at {_at(at)}: got {_n(g[at])}, spec {_n(want[at])}", name))
            continue
        inf = np.isinf(g) & ~np.isinf(want) & ~excused
        if inf.any():
            at = tuple(np.argwhere(inf)[0])
            j.findings.append(Finding("overflow", f"output {name!r}: infinite at {_at(at)} where the spec has "
                                      f"{_n(want[at])}", name))
            continue
        check = ~nan_want & ~excused
        err = np.where(check, np.abs(g - np.where(check, want, 0.0)), 0.0)
        ratio = _ratio(err, ref.bound[name])
        worst = float(ratio.max()) if ratio.size else 0.0
        j.ratio = max(j.ratio, worst)
        if worst > 1.0:
            at = tuple(np.unravel_index(int(np.argmax(ratio)), ratio.shape))
            n_bad = int(np.sum(ratio > 1.0))
            j.findings.append(Finding(
                "spec",
                f"output {name!r}: {n_bad} of {g.size} entries outside the tolerance; worst at {_at(at)}: "
                f"got {_n(g[at])}, spec {_n(want[at])}, |diff| {err[at]:.3g} > tolerance {ref.bound[name][at]:.3g} "
                f"(error/bound {worst:.3g}; rounding spread {ref.spread[name][at]:.3g} at {ref.dtype})",
                name, worst))
    if ref.sampled is not None and exact_ok and not any(f.check in ("missing", "shape", "dtype") for f in j.findings):
        j.add(ref.sampled({spec.name: np.asarray(got[spec.name]) for spec in ref.specs if spec.kind != Kind.REAL}))
    return j


def compare_pair(entry: Entry, a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], ref: Reference,
                 label: str, check: str) -> Judgement:
    """Two results for the same case and dtype: each may be off by its bound, so together by 2·bound."""
    j = Judgement()
    for spec in ref.specs or entry.outputs:
        x, y = np.asarray(a[spec.name]), np.asarray(b[spec.name])
        if x.shape != y.shape:
            j.findings.append(Finding(check, f"{label}: output {spec.name!r} shapes {x.shape} and {y.shape}",
                                      spec.name))
            continue
        if spec.kind != Kind.REAL:
            if (x != y).any() and ref.sampled is None:
                j.findings.append(Finding(check, f"{label}: output {spec.name!r} differs", spec.name))
            continue
        x, y = x.astype(np.float64), y.astype(np.float64)
        if (np.isnan(x) != np.isnan(y)).any():
            j.findings.append(Finding(check, f"{label}: output {spec.name!r} NaN in one and not the other", spec.name))
            continue
        both = ~np.isnan(x)
        err = np.where(both, np.abs(np.where(both, x - y, 0.0)), 0.0)
        ratio = _ratio(err, 2.0 * ref.bound[spec.name])
        worst = float(ratio.max()) if ratio.size else 0.0
        j.ratio = max(j.ratio, worst)
        if worst > 1.0:
            at = tuple(np.unravel_index(int(np.argmax(ratio)), ratio.shape))
            j.findings.append(Finding(check, f"{label}: output {spec.name!r} differs at {_at(at)}: {_n(x[at])} vs "
                                      f"{_n(y[at])} (|diff| {err[at]:.3g} > 2 × tolerance "
                                      f"{2 * ref.bound[spec.name][at]:.3g})",
                                      spec.name, worst))
    return j


def identical(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> Optional[str]:
    """None if every output is bitwise equal (NaN equals NaN), else the first output that is not."""
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.shape != y.shape or x.dtype != y.dtype:
            return name
        if x.dtype.kind == "f":
            if not np.array_equal(x, y, equal_nan=True):
                return name
        elif not np.array_equal(x, y):
            return name
    return None


def unit_roundoff(dtype: str) -> float:
    return FORMATS[dtype].u
