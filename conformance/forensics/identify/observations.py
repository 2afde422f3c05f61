"""What was observed on one case (``Observation``) and a candidate judged on it (``Fit``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet


@dataclass
class Fit:
    """One candidate set judged on one observation.

    ``centre`` ± ``allowance`` (per output element) is where an observed output fits the
    candidate: the spec's value and its bound for an implementation, the enclosure's centre and
    the printed half-step, bound and enclosure radius for a table. Two candidates whose intervals
    are disjoint somewhere on a case *separate* there (``separates``): no output fits both, so the
    case can decide between them. ``unknown``: the candidate could not be judged on this
    observation (a table's printed inputs leave its outputs unbounded): neither a fit nor a miss."""

    fits: bool
    ratio: float  # worst error/bound (inf: a NaN, refusal or shape mismatch)
    outputs: Optional[dict[str, np.ndarray]] = None  # the spec's outputs under the candidate
    note: str = ""
    allowance: Optional[dict[str, Any]] = None  # per output: how far from ``centre`` a fitting value may lie
    centre: Optional[dict[str, np.ndarray]] = None  # None: ``outputs``
    unknown: bool = False
    refused: bool = False  # the spec refuses the case under this candidate
    #: no observation of this case could fit the candidate (a table printing a number where it gives
    #: NaN, or a step it does not compute): it is apart from every candidate that can fit one
    impossible: bool = False


def separates(a: Optional[Fit], b: Optional[Fit]) -> bool:
    """Whether the two candidates' spec outputs differ beyond their bounds on this observation: one
    refuses and the other answers, an exact output differs, a real element is NaN under one and a
    number under the other, or its intervals (``centre`` ± ``allowance``) are disjoint. Then an
    output that fits one and misses the other does so by what the candidates compute, not by where
    the rounding happened to put it. False wherever either could not be judged (no allowance:
    nothing is known of where its outputs lie)."""
    if a is None or b is None or a.unknown or b.unknown:
        return False
    if a.impossible or b.impossible:
        return a.impossible != b.impossible
    if a.refused or b.refused:
        return a.refused != b.refused and (a.refused or a.allowance is not None) and \
            (b.refused or b.allowance is not None)
    ca = a.centre if a.centre is not None else a.outputs
    cb = b.centre if b.centre is not None else b.outputs
    if ca is None or cb is None or a.allowance is None or b.allowance is None:
        return False
    for name in ca.keys() & cb.keys():
        x, y = np.asarray(ca[name]), np.asarray(cb[name])
        if x.shape != y.shape:
            return True
        if x.dtype.kind not in "fc" or y.dtype.kind not in "fc":
            if not np.array_equal(x, y):
                return True
            continue
        wa = np.broadcast_to(np.asarray(a.allowance.get(name, 0.0), dtype=np.float64), x.shape)
        wb = np.broadcast_to(np.asarray(b.allowance.get(name, 0.0), dtype=np.float64), y.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            apart = np.abs(x - y) > wa + wb
            nan_x, nan_y = np.isnan(x), np.isnan(y)
        if np.any(apart & ~nan_x & ~nan_y) or np.any(nan_x != nan_y):
            return True
    return False


@dataclass
class Observation:
    """One case and what was observed on it: the outputs (None: the implementation refused it).

    ``inputs``/``params`` are the judged values (already rounded to ``dtype``). ``judge`` turns the
    spec's ``Reference`` into a ``Fit``; the default is the search's judge."""

    label: str
    entry: Entry
    hyper: dict[str, int]
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    outputs: Optional[dict[str, np.ndarray]]
    dtype: str
    precision: str = "highest"
    error: str = ""  # what the implementation raised, when it refused
    words: list[str] = field(default_factory=list)  # the case's salient structure
    #: (reference, candidate set, its parameters) -> Fit; None: ``judge.judge`` on ``outputs``
    judge: Optional[Callable[[Any, VariantSet, Mapping[str, np.ndarray]], Fit]] = None
    #: the judge's intervals are rigorous and the observation is fixed data (a printed table): a miss
    #: is an exclusion as it stands. Otherwise (an implementation's outputs, judged against a
    #: rounding model's bound) a miss excludes only where a case separates the values
    rigorous: bool = False
    #: (candidate set, its parameters) -> the Fit when the spec refuses the case under the
    #: candidate, or None for the usual one (fits iff the implementation refused too). A table with
    #: printed inputs: a refusal of the printed point alone is not a refusal of the numbers
    on_refusal: Optional[Callable[[VariantSet, Mapping[str, np.ndarray]], Optional[Fit]]] = None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "hyper": dict(self.hyper), "refused": self.outputs is None,
                **({"error": self.error} if self.error else {}), "structure": list(self.words)}


def _params_for(entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
                params: Mapping[str, np.ndarray]) -> tuple[Optional[dict[str, np.ndarray]], list[str]]:
    """The given parameters fitted to ``variant``: unchanged when it takes the same ones, the ones it
    does not take dropped (the implementation would have ignored them), None when it needs one that
    was not given (not testable: the implementation takes no such parameter)."""
    try:
        shapes = entry.param_shapes(dict(hyper), variant)
    except (SpecError, KeyError, ValueError):
        return None, []
    if any(n not in params or tuple(np.shape(params[n])) != tuple(s) for n, s in shapes.items()):
        return None, []
    dropped = sorted(set(params) - set(shapes))
    return {n: params[n] for n in shapes}, dropped
