"""Identifying the conventions an implementation follows (``ftspec identify``).

Finding which convention a library uses used to mean certifying one candidate
variant set after another. The spec evaluates every named convention, so
instead: run the implementation once on each of a handful of *designed* cases
of an entry, then evaluate the spec under candidate variant sets and judge the
recorded outputs against each, exactly as the search judges
(``tolerances.reference`` at the dtype and the implementation's precision tier,
then ``judge.judge``). The implementation's own declaration is used only to
call it (a call needs a variant set in its ``Context``, and the parameters it
is given follow that set's structure); the inference ignores it.

The cases are chosen for what separates conventions, not drawn at random
(``designed_cases``): well-scaled values, near-constant columns (the variance
is tiny relative to the values there, so ε's placement and the variance's
divisor show), wide-range values, the first case times 2⁻¹⁰ (a variance near
1e-6, which ε = 1e-5 or 1e-6 dominates even at bfloat16), for an entry with a
mask an empty query column (the ``empty_query`` settings differ only there),
for one with ℓ_z and ℓ_x a case with ℓ_z ≠ ℓ_x (the causal alignments), and for
one with rotary positions or grouped key/value heads a case with d_attn ≥ 4,
two key/value heads and ℓ ≥ 3 (the pairings, bases and head orders).

The search (``Identifier.run``) does not certify every combination:

1. a base: the paper's set and each preset projected onto the entry's
   switches, the one that fits best;
2. coordinate passes: each switch in turn (ε with its placement, one
   group), every value with the others held, the best-fitting value adopted
   (fewer cases outside the bound, or as many and the errors a decade
   closer); repeated to a fixed point;
3. at the fixed point every value of every switch is judged with the others
   held: *consistent* (within the bound on every case), *excluded* (outside
   on some case, and some case *separates* it from every consistent value:
   their intervals, spec value ± bound, are disjoint there, so no output
   could fit both: ``separates``), *not separated* (outside only where the
   intervals overlap: still possible), *cannot tell* (a table's candidate
   that could not be bounded), or not testable (it needs parameters the
   implementation does not take).

A switch with one consistent value and every other excluded by a separating
case is decided; values that are the same computation at the entry count as
one (``same_here``: "paper" with the one value it stands for, RoPE's base
without rotary, the key/value order with one group, β under RMSnorm).
Otherwise it is *undecided: no case separates* those values at this dtype
(``same_outputs`` says when the spec's outputs are even bit-identical on
every case; with no value excluded, the switch never acted). The switches
one rotary pair, one key/value head or one position cannot show
(``HEAD_SWITCHES``) get a case built on purpose at sizes that separate them
(``separating_hyper``; issue 35: at head width 2 identify recommended
``rotary='half'`` for two interleaved-RoPE LLaMA codes). The merge over
entries (``merge_all``) writes no default and no still-possible declared
value as a change, and names the switches no case separates rather than
picking one. When nothing fits, the set reported is
only the nearest, and ``Identity.fits`` is False. ε is continuous: its
candidates are a finite list (``EPSILON_CANDIDATES``) and the report says so.
Switches that change the parameter set (``attn_bias``, ``affine``,
``mlp_bias``, ``logit_bias``, ``unembedding``, ...) are tested only by
dropping parameters the implementation was given (an implementation that
ignores its biases fits the set without them); a value that needs parameters
the implementation does not take is not testable, and its structure comes
from the declaration: the output says so.

The same engine judges published numbers (``identify_table.py``): only the
observation and its judge differ (``Observation.judge``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, PRESETS, SWITCHES, VariantSet

from ..core.calling import Prepared
from ..core.case import Case
from .diagnosis import structure
from ..core.judge import judge
from ..core.tolerances import ToleranceModelError, reference
from ..core.values import EPSILON_CANDIDATES, default_hyper

__all__ = ["EPSILON_CANDIDATES", "EVALUATIONS", "HEAD_SWITCHES", "SECONDS", "Fit", "GroupResult", "Identity",
           "IdentifyError", "Identifier", "Merged", "Observation", "call_variant", "designed_cases", "expression",
           "groups", "identify", "merge", "merge_all", "observe", "options", "project", "same_here", "search",
           "separates", "separating_hyper", "value_text"]

#: ε values tried: ``values.EPSILON_CANDIDATES``
_PLACED = ("inside_root", "outside_root")

#: budget per entry: wall seconds and spec evaluations (each one ``reference`` on one case)
SECONDS = 60.0
EVALUATIONS = 3000
#: coordinate passes before the search stops looking for a fixed point
PASSES = 4
#: score of a case the candidate cannot match at all (NaN against a number, a refusal against a value)
_MISMATCH = 400.0


class IdentifyError(ValueError):
    """Identification cannot start (no case within the implementation's limits, bad options)."""


# -- switches and their candidate values --------------------------------------------------------

def groups(entry: Entry) -> list[str]:
    """The entry's switches as searched: ε and its placement are one group, ``epsilon``."""
    names = sorted(entry.switches - {"epsilon", "epsilon_placement"})
    if entry.switches & {"epsilon", "epsilon_placement"}:
        names.append("epsilon")
    return names


def options(group: str) -> list[dict[str, Any]]:
    """Every value of one group, as the changes that set it."""
    if group == "epsilon":
        out = [{"epsilon": 0.0, "epsilon_placement": "none"}]
        out += [{"epsilon": e, "epsilon_placement": p} for p in _PLACED for e in EPSILON_CANDIDATES]
        return out
    return [{group: c} for c in SWITCHES[group].choices]


def value_text(group: str, value: Mapping[str, Any]) -> str:
    """A group's value in words: ``1e-05 inside_root``, ``none`` (ε), else the switch's value."""
    if group == "epsilon":
        if value["epsilon_placement"] == "none":
            return "0 (none)"
        return f"{value['epsilon']:g} {value['epsilon_placement']}"
    return str(value[group])


def _key(value: Mapping[str, Any]) -> tuple:
    return tuple(sorted(value.items()))


def _current(group: str, variant: VariantSet) -> dict[str, Any]:
    if group == "epsilon":
        return {"epsilon": variant.epsilon, "epsilon_placement": variant.epsilon_placement}
    return {group: getattr(variant, group)}


# -- observations -------------------------------------------------------------------------------

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


# -- the search ---------------------------------------------------------------------------------

@dataclass
class GroupResult:
    """One switch (ε with its placement as one) at the fixed point."""

    group: str
    #: "decided": one value fits (with the values that are the same computation here,
    #: ``same_as``) and a separating case excludes every other (or it needs parameters not given);
    #: "undecided": several fit, or a value missed only where no case separates it
    #: (``unseparated``), or one could not be judged; "cannot tell": no value could be judged
    #: (a table's printed inputs leave them unbounded); "none fits": no value fits with the
    #: other switches as identified
    status: str
    chosen: dict[str, Any]  # the value in the identified set
    consistent: list[dict[str, Any]] = field(default_factory=list)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    untestable: list[dict[str, Any]] = field(default_factory=list)  # needs parameters not given
    #: the consistent values give bit-identical spec outputs on every case (no case can separate them)
    same_outputs: bool = False
    dropped: dict[str, list[str]] = field(default_factory=dict)  # value text -> parameters it drops
    declared: Optional[dict[str, Any]] = None  # the value of the set the implementation was called with
    #: values the budget ran out before judging: not excluded, so the switch is not decided
    unjudged: list[dict[str, Any]] = field(default_factory=list)
    #: consistent values that are the chosen one's computation at this entry (``same_here``, or
    #: "paper" and the value it stands for): never alternatives
    same_as: list[dict[str, Any]] = field(default_factory=list)
    #: outside the bound on some case, but no case separates them from a consistent value: still possible
    unseparated: list[dict[str, Any]] = field(default_factory=list)
    #: judged on no case they miss and unjudgeable on some (unbounded): neither fit nor excluded
    cannot_tell: list[dict[str, Any]] = field(default_factory=list)

    @property
    def possible(self) -> list[dict[str, Any]]:
        """Every value no separating case has excluded: consistent, not separated, cannot tell."""
        return self.consistent + self.unseparated + self.cannot_tell

    @property
    def alternatives(self) -> list[dict[str, Any]]:
        """The possible values other than the chosen one and the values that are it here."""
        same = {_key(v) for v in self.same_as} | {_key(self.chosen)}
        return [v for v in self.possible if _key(v) not in same]

    def to_dict(self) -> dict[str, Any]:
        def plain(vs: list[dict[str, Any]]) -> list[str]:
            return [value_text(self.group, v) for v in vs]

        return {"switch": self.group, "status": self.status, "value": value_text(self.group, self.chosen),
                "changes": {k: _plain(v) for k, v in self.chosen.items()},
                "consistent": plain(self.consistent), "excluded": plain(self.excluded),
                "untestable": plain(self.untestable), "same_outputs": self.same_outputs,
                "same_as_chosen": plain(self.same_as), "not_separated": plain(self.unseparated),
                "cannot_tell": plain(self.cannot_tell),
                **({"dropped": self.dropped} if self.dropped else {}),
                **({"declared": value_text(self.group, self.declared)} if self.declared else {}),
                **({"unjudged": plain(self.unjudged)} if self.unjudged else {})}

    def line(self) -> str:
        """One line: the switch, its status and values."""
        def texts(vs: Sequence[dict[str, Any]]) -> str:
            return ", ".join(value_text(self.group, v) for v in vs)

        chosen = value_text(self.group, self.chosen)
        same = f" (the same here: {texts(self.same_as)})" if self.same_as else ""
        others = self.alternatives
        if self.status == "decided":
            text = f"{self.group}: {chosen}{same}"
        elif self.status == "cannot tell":
            text = f"{self.group}: cannot tell (no value judged fits; not judged: {texts(self.cannot_tell[:4])}" + (
                f" (+{len(self.cannot_tell) - 4} more))" if len(self.cannot_tell) > 4 else ")")
        elif self.status == "undecided" and self.same_outputs and not (self.excluded or self.untestable
                                                                       or self.unseparated or self.cannot_tell):
            text = f"{self.group}: no effect here (every value gives the same outputs on every case)"
        elif self.status == "undecided" and len(self.consistent + self.unseparated) > max(4, len(self.excluded)):
            excl = texts(self.excluded)
            n = len(self.consistent + self.unseparated)
            text = (f"{self.group}: undecided: no case separates any value tried but {excl} (excluded)" if excl
                    and not self.cannot_tell else f"{self.group}: undecided: no case separates {n} values")
        elif self.status == "undecided" and [v for v in others if v not in self.cannot_tell]:
            rivals = [v for v in others if v not in self.cannot_tell]
            why = ("identical outputs on every case" if self.same_outputs and not self.unseparated
                   else "within the bounds")
            text = f"{self.group}: undecided: no case separates {chosen}{same} from {texts(rivals)} ({why})"
        elif self.status == "undecided":
            text = f"{self.group}: undecided: {chosen}{same} fits"
        else:
            text = f"{self.group}: no value fits with the others as identified (nearest: {chosen})"
        if self.cannot_tell and self.status != "cannot tell":
            text += f"; cannot tell: {texts(self.cannot_tell[:4])}" + (
                f" (+{len(self.cannot_tell) - 4} more)" if len(self.cannot_tell) > 4 else "")
        if self.untestable:
            text += f"; not testable: {texts(self.untestable)}"
        if self.unjudged:
            text += f"; {len(self.unjudged)} not judged (budget spent)"
        return text


def _plain(v: Any) -> Any:
    return float(v) if isinstance(v, float) else v


@dataclass
class Identity:
    """What ``identify`` found for one entry; plain data through ``to_dict``."""

    algorithm: str
    subject: str  # the implementation (or the table) identified
    dtype: str
    declared: str  # the set the implementation was called with (``describe``), "" for a table
    variant: VariantSet  # the identified set (undecided switches: see ``GroupResult.chosen``)
    groups: list[GroupResult] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    fits: bool = False  # the identified set fits every case
    cases_fit: int = 0  # how many cases it fits (all when ``fits``; else it is only the nearest set)
    base: str = ""  # the preset the search started from
    presets: list[str] = field(default_factory=list)  # presets (on the entry's switches) that fit every case
    evaluations: int = 0
    seconds: float = 0.0
    seconds_calls: float = 0.0  # of which in the implementation's calls
    gave_up: bool = False
    notes: list[str] = field(default_factory=list)
    #: some candidate could not be judged (``Fit.unknown``) and was not excluded: without a fit,
    #: "nothing fits" is not shown either
    cannot_tell: bool = False
    #: no candidate could be judged on any case: nothing was tested
    untested: bool = False

    @property
    def undecided(self) -> list[str]:
        return [g.group for g in self.groups if g.status in ("undecided", "cannot tell")]

    @property
    def inconclusive(self) -> bool:
        """No set fits, yet some candidate could not be judged: neither a fit nor "nothing fits"."""
        return not self.fits and self.cannot_tell

    def expression(self) -> str:
        return expression(self.variant)

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "subject": self.subject, "dtype": self.dtype,
                "declared": self.declared, "identified": self.variant.describe(),
                "variant": self.variant.to_dict(), "expression": self.expression(), "fits": self.fits,
                "cases_fit": self.cases_fit,
                "base": self.base, "presets": list(self.presets), "switches": [g.to_dict() for g in self.groups],
                "undecided": self.undecided, "cases": [o.to_dict() for o in self.observations],
                "cannot_tell": self.cannot_tell, "untested": self.untested, "inconclusive": self.inconclusive,
                "evaluations": self.evaluations, "seconds": round(self.seconds, 3),
                "seconds_calls": round(self.seconds_calls, 3), "gave_up": self.gave_up,
                "epsilon_candidates": list(EPSILON_CANDIDATES), "notes": list(self.notes)}


def expression(variant: VariantSet) -> str:
    """``PAPER.replace(...)``: the set as Python to declare and certify with."""
    diff = variant.differences(PAPER)
    if not diff:
        return "PAPER"
    return "PAPER.replace(" + ", ".join(f"{k}={v!r}" for k, v in diff.items()) + ")"


class Identifier:
    """The search over one entry's switches against a list of observations."""

    def __init__(self, entry: Entry, observations: Sequence[Observation], start: VariantSet, *,
                 seconds: float = SECONDS, evaluations: int = EVALUATIONS) -> None:
        self.entry = entry
        self.observations = list(observations)
        self.start = start  # the parameter structure: the set the parameters were built for
        self.seconds = seconds
        self.evaluations = evaluations
        self.evaluated = 0
        self.gave_up = False
        self._started = time.perf_counter()
        self._cache: dict[tuple[str, int], Optional[Fit]] = {}
        self._dropped: dict[str, list[str]] = {}
        self.presets_fitting: list[str] = []
        self.unknown_seen = False  # some candidate could not be judged on some case
        self.judged_seen = False  # some candidate was judged (within its bound) on some case

    # one candidate on one observation
    def verdict(self, variant: VariantSet, i: int) -> Optional[Fit]:
        """None: not testable (parameters missing) or out of budget (``gave_up``)."""
        key = (variant.hash, i)
        if key in self._cache:
            return self._cache[key]
        obs = self.observations[i]
        params, dropped = _params_for(self.entry, obs.hyper, variant, obs.params)
        if params is None:
            self._cache[key] = None
            return None
        if self.evaluated >= self.evaluations or time.perf_counter() - self._started > self.seconds:
            self.gave_up = True
            return None
        self.evaluated += 1
        if dropped:
            self._dropped[variant.hash] = dropped
        v = _judge_one(self.entry, obs, params, variant)
        self._cache[key] = v
        return v

    def score(self, variant: VariantSet) -> Optional[tuple[int, float]]:
        """(cases not fitted, Σ log10 of the error/bound ratios above 1); None: not testable. A case
        the candidate cannot be judged on (``Fit.unknown``) is not fitted and adds nothing to
        the sum: it never makes the candidate fit, nor counts as far from it."""
        misses, total = 0, 0.0
        for i in range(len(self.observations)):
            v = self.verdict(variant, i)
            if v is None:
                return None
            if v.unknown:
                misses += 1
                self.unknown_seen = True
            else:
                self.judged_seen = True
                if not v.fits:
                    misses += 1
                    total += min(math.log10(v.ratio), _MISMATCH) if math.isfinite(v.ratio) and v.ratio > 1 else \
                        (_MISMATCH if not math.isfinite(v.ratio) else 0.0)
        return misses, total

    def misses(self, variant: VariantSet) -> int:
        """The cases on which ``variant`` (already scored) is outside its bound: judged, not fitted."""
        return sum(1 for i in range(len(self.observations))
                   if (v := self._cache.get((variant.hash, i))) is not None and not v.fits and not v.unknown)

    def separated(self, a: VariantSet, b: VariantSet) -> bool:
        """Whether some case separates ``a`` from ``b`` (both already scored; ``separates``), or
        ``b`` misses a rigorous observation (a printed table: no point within its digits fits it)."""
        return any(separates(self._cache.get((a.hash, i)), self._cache.get((b.hash, i))) or (
            self.observations[i].rigorous and (v := self._cache.get((b.hash, i))) is not None
            and not v.fits and not v.unknown) for i in range(len(self.observations)))

    def _budget(self) -> bool:
        return not self.gave_up

    def run(self) -> tuple[VariantSet, str, list[GroupResult]]:
        names = groups(self.entry)
        base_name, current = self._base()
        for _ in range(PASSES):
            changed = False
            for g in names:
                now = self.score(current)
                if now is not None and now[0] == 0:
                    break
                best, best_score = None, now
                for opt in options(g):
                    cand = _replace(current, opt)
                    if cand is None:
                        continue
                    s = self.score(cand)
                    if s is not None and (best_score is None or _better(s, best_score)):
                        best, best_score = cand, s
                if best is not None and best != current:
                    current, changed = best, True
            if not changed or not self._budget():
                break
        return current, base_name, [self._classify(g, current) for g in names]

    def _outputs(self, variant: VariantSet, i: int) -> Optional[dict[str, np.ndarray]]:
        v = self._cache.get((variant.hash, i))
        return None if v is None else v.outputs

    def _base(self) -> tuple[str, VariantSet]:
        """The paper's set or a preset, on the entry's switches, that fits best (parameter structure
        kept as given when a preset's would need other parameters). Records in ``presets_fitting``
        the presets that, projected onto the entry's switches whole, fit every case."""
        best: tuple[Any, str, VariantSet] = (None, "phuong-hutter", self.start)
        for name, p in PRESETS.items():
            cand, whole = self.start, True
            for g in groups(self.entry):
                moved = _replace(cand, _current(g, p))
                if moved is not None and _params_for(self.entry, self.observations[0].hyper, moved,
                                                     self.observations[0].params)[0] is not None:
                    cand = moved
                elif moved != cand:
                    whole = False
            s = self.score(cand)
            if s is not None and whole and s[0] == 0:
                self.presets_fitting.append(name)
            if s is not None and (best[0] is None or s < best[0]):
                best = (s, name, cand)
        return best[1], best[2]

    def _classify(self, g: str, current: VariantSet) -> GroupResult:
        """Every value of ``g`` with the others as in ``current``: consistent (fits every case),
        excluded (outside its bound on some case *and* some case separates it from each consistent
        value, so no output could fit both), *not separated* (outside on some case, yet no case
        separates it from a consistent value: the miss rests on where the output happened to fall
        within overlapping bounds), *cannot tell* (judged on no case it misses, unjudgeable on
        some), not testable, or not judged (budget). Consistent values that are the same
        computation at this entry (``same_here``, or "paper" with the one value it stands for,
        bit-identical outputs on every case) are one value, not alternatives."""
        chosen = _current(g, current)
        r = GroupResult(g, "none fits", chosen)
        refs: list[list[Optional[dict[str, np.ndarray]]]] = []
        sets: dict[tuple, VariantSet] = {}
        missed: list[tuple[dict[str, Any], VariantSet]] = []
        for opt in options(g):
            cand = _replace(current, opt)
            if cand is None:
                continue
            s = self.score(cand)
            if s is None:
                (r.unjudged if self.gave_up else r.untestable).append(opt)
                continue
            if s[0] == 0:
                r.consistent.append(opt)
                sets[_key(opt)] = cand
                refs.append([self._outputs(cand, i) for i in range(len(self.observations))])
                if cand.hash in self._dropped:
                    r.dropped[value_text(g, opt)] = self._dropped[cand.hash]
            elif self.misses(cand) == 0:
                r.cannot_tell.append(opt)
            else:
                missed.append((opt, cand))
        for opt, cand in missed:
            if all(self.separated(sets[_key(c)], cand) for c in r.consistent):
                r.excluded.append(opt)
            else:
                r.unseparated.append(opt)
        if r.consistent and _key(chosen) not in {_key(v) for v in r.consistent}:
            r.chosen = _prefer(r.consistent, _current(g, self.start))
        r.same_outputs = len(refs) > 1 and all(_same(refs[0][i], other[i]) for other in refs[1:]
                                               for i in range(len(refs[0])))
        # values the same computation here as the chosen one: one value, not alternatives
        paper = _key(_current(g, PAPER))
        for opt in r.consistent:
            if _key(opt) == _key(r.chosen):
                continue
            if same_here(self.entry, current, g, opt, r.chosen) or (
                    g in SWITCHES and SWITCHES[g].paper == "paper" and paper in (_key(opt), _key(r.chosen))
                    and all(_same(a, b) for a, b in zip(refs[r.consistent.index(opt)],
                                                        refs[r.consistent.index(r.chosen)]))):
                r.same_as.append(opt)
        alternatives = len(r.consistent) - len(r.same_as)
        if not r.consistent:
            r.status = "cannot tell" if r.cannot_tell else "none fits"
        elif alternatives == 1 and not (r.unjudged or r.cannot_tell or r.unseparated) and (
                r.excluded or r.untestable or not r.same_as):
            r.status = "decided"
        else:
            r.status = "undecided"
        return r


def _prefer(values: Sequence[dict[str, Any]], start: dict[str, Any]) -> dict[str, Any]:
    """Of several equally possible values: the starting set's (the declaration), else the first."""
    return next((v for v in values if _key(v) == _key(start)), values[0])


def same_here(entry: Entry, variant: VariantSet, group: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether values ``a`` and ``b`` of ``group`` are the same computation at ``entry`` with the
    other switches as in ``variant``: the spec reads the switch only under another setting that
    ``variant`` does not have. From the switches' definitions (``spec/variants.py``): RoPE's base
    only when ``rotary`` is not none; the key/value head order only when ``kv_group`` > 1; where
    the biases sit only with ``attn_bias``; RMSNorm has no mean and no β, so it ignores
    ``variance`` and its ``affine`` ``scale_shift`` is ``scale`` (spec/normalization.py
    ``_rms_norm``)."""
    moved_a, moved_b = _replace(variant, a), _replace(variant, b)
    if moved_a is None or moved_b is None:
        return False
    return _as_read(entry, moved_a) == _as_read(entry, moved_b)


def _as_read(entry: Entry, v: VariantSet) -> VariantSet:
    """``v`` with every switch the entry does not read under ``v``'s other settings at the paper's
    value (``same_here``)."""
    changes: dict[str, Any] = {}
    if v.rotary == "none":
        changes["rope_base"] = PAPER.rope_base
    if v.kv_group == 1:
        changes["kv_order"] = PAPER.kv_order
    if not v.attn_bias:
        changes["attn_bias_at"] = PAPER.attn_bias_at
    # the ``norm`` switch sets every norm of a layer or architecture; the rms_norm entry is one
    rms = v.norm == "rms_norm" if "norm" in entry.switches else entry.name == "rms_norm"
    if rms:
        changes["variance"] = PAPER.variance
        if v.affine == "scale_shift":
            changes["affine"] = "scale"
    return v.replace(**changes) if changes else v


#: while no candidate fits more cases, a change is adopted only if it brings the errors this many
#: decades closer in all (the search does not wander after rounding-level differences)
IMPROVEMENT = 1.0


def _better(a: tuple[int, float], b: tuple[int, float]) -> bool:
    """Whether score ``a`` is clearly better than ``b``: fewer cases outside, or as many and the
    errors ``IMPROVEMENT`` decades closer."""
    return a[0] < b[0] or (a[0] == b[0] and a[1] < b[1] - IMPROVEMENT)


def _replace(variant: VariantSet, changes: Mapping[str, Any]) -> Optional[VariantSet]:
    try:
        return variant.replace(**changes)
    except ValueError:
        return None


def _same(a: Optional[Mapping[str, np.ndarray]], b: Optional[Mapping[str, np.ndarray]]) -> bool:
    if a is None or b is None:
        return a is b
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k]), equal_nan=True) for k in a)


def _judge_one(entry: Entry, obs: Observation, params: Mapping[str, np.ndarray], variant: VariantSet) -> Fit:
    try:
        ref = reference(entry, obs.inputs, params, hyper=obs.hyper, variant=variant, dtype=obs.dtype,
                        precision=obs.precision)
    except SpecError:  # the spec refuses the case under this set: fits iff the implementation refused
        other = obs.on_refusal(variant, params) if obs.on_refusal is not None else None
        if other is not None:
            return other
        return Fit(obs.outputs is None, 0.0 if obs.outputs is None else math.inf, None, "refused",
                       refused=True)
    except ToleranceModelError as exc:
        return Fit(False, math.inf, None, f"no tolerance: {exc}")
    if obs.judge is not None:
        return obs.judge(ref, variant, params)
    where = dict(ref.bound)  # an output fits where it lies within the bound of the spec's value
    if obs.outputs is None:
        return Fit(False, math.inf, ref.outputs, "the implementation refused", where)
    try:
        j = judge(entry, obs.outputs, ref)
    except Exception as exc:  # noqa: BLE001 - outputs the judge cannot read fit nothing
        return Fit(False, math.inf, ref.outputs, f"unjudgeable: {type(exc).__name__}", where)
    ratio = j.ratio if all(f.check == "spec" for f in j.findings) else math.inf
    return Fit(j.ok, ratio, ref.outputs, allowance=where)


# -- designed cases -----------------------------------------------------------------------------

#: (label, style, seed): the values-builder cases every entry gets
_BUILT = (("well-scaled", "well-scaled", 0), ("near-constant columns", "near-constant", 1),
          ("wide-range", "wide-range", 2), ("well-scaled (seed 3)", "well-scaled", 3))


def designed_cases(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, dtype: str,
                   limits_admit: Callable[[Mapping[str, int]], bool] = lambda h: True,
                   separating: Optional[Mapping[str, int]] = None) -> list[tuple[str, Case]]:
    """The cases that separate conventions, built for the call's variant set (its parameter
    structure): the builder's well-scaled, near-constant and wide-range values, for an entry
    with a mask input the first case again with query column 0 emptied (no key to attend to), and
    for one with rotary positions or grouped key/value heads a case at sizes where their values
    differ (``separating``, default ``separating_hyper``; none where ``hyper`` already does)."""
    out = []
    for label, style, seed in _BUILT:
        if style == "near-constant" and not _has_norm_or_real(entry):
            continue
        out.append((label, Case.build(entry, dict(hyper), variant, seed=seed, style=style, dtype=dtype)))
    if _has_norm_or_real(entry):
        out.append(("small scale (x 2^-10)", _small(out[0][1])))
    if entry.switches & HEAD_SWITCHES and not _separates_heads(entry, hyper, variant):
        wide = dict(separating) if separating is not None else separating_hyper(entry, hyper, variant, limits_admit)
        if wide is not None:
            out.append((f"separating heads ({_sizes_text(entry, wide, variant)})",
                        Case.build(entry, wide, variant, seed=5, dtype=dtype)))
    if {"ell_z", "ell_x"} <= set(hyper) and hyper["ell_z"] == hyper["ell_x"] and limits_admit(
            {**hyper, "ell_x": hyper["ell_z"] + 2}):
        # ℓ_z ≠ ℓ_x: the only place the causal alignments differ
        unequal = {**hyper, "ell_x": hyper["ell_z"] + 2}
        out.append(("unequal lengths (ell_x = ell_z + 2)", Case.build(entry, unequal, variant, seed=4, dtype=dtype)))
    masks = [s.name for s in entry.inputs if s.kind == Kind.MASK]
    if masks:
        base = out[0][1]
        inputs = dict(base.inputs)
        for name in masks:
            m = np.array(inputs[name], dtype=bool)  # [t_z, t_x]
            if m.ndim == 2 and m.shape[1] >= 1:
                m[:, 0] = False
                inputs[name] = m
        out.append(("empty query column 0", Case(base.algorithm, dict(base.hyper), variant, inputs,
                                                 dict(base.params), style=base.style)))
    return out


#: the switches whose values give the same numbers at one rotary pair, one key/value head or one
#: position: RoPE's pairing and base, the key/value head order
HEAD_SWITCHES = frozenset({"rotary", "rope_base", "kv_order"})
#: the least sizes at which they differ: two rotary pairs (half-split pairs (0, 2), (1, 3) against
#: interleaved (0, 1), (2, 3); a second frequency base^(-2/4), the first is 1 for every base), two
#: key/value heads (⌊h/G⌋ against h mod H/G), and a third position (rotation by t = 0, 1, 2)
SEPARATING_WIDTH, SEPARATING_KV_HEADS, SEPARATING_LENGTH = 4, 2, 3


def _kv_group(entry: Entry, variant: VariantSet) -> int:
    return variant.kv_group if "kv_group" in entry.switches else 1


def _separates_heads(entry: Entry, hyper: Mapping[str, int], variant: VariantSet) -> bool:
    """Whether sizes ``hyper`` let the ``HEAD_SWITCHES`` the entry reads differ."""
    if "d_attn" in hyper and entry.switches & {"rotary", "rope_base"} and hyper["d_attn"] < SEPARATING_WIDTH:
        return False
    if "H" in hyper and "kv_order" in entry.switches and hyper["H"] < SEPARATING_KV_HEADS * _kv_group(entry, variant):
        return False
    return all(v >= SEPARATING_LENGTH for n, v in hyper.items() if _is_length(n))


def separating_hyper(entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
                     admits: Callable[[Mapping[str, int]], bool] = lambda h: True,
                     settle: Callable[[dict[str, int]], dict[str, int]] = lambda h: h) -> Optional[dict[str, int]]:
    """``hyper`` raised, on purpose, to sizes where RoPE's pairings and bases and the key/value head
    orders give different numbers (``SEPARATING_*``: an even head width of at least 4, at least two
    key/value heads under the call's ``kv_group``, every length at least 3), with ℓ_max raised to
    hold them and one layer per stack; ``settle`` then ties sizes as the implementation's limits
    require. None when the
    limits (``admits``) or the entry refuse them: no case can then separate those switches."""
    out = dict(hyper)
    if "d_attn" in out and entry.switches & {"rotary", "rope_base"}:
        out["d_attn"] = max(out["d_attn"] + out["d_attn"] % 2, SEPARATING_WIDTH)
    if "H" in out and "kv_order" in entry.switches:
        g = _kv_group(entry, variant)
        out["H"] = max(out["H"] + (-out["H"]) % g, SEPARATING_KV_HEADS * g)
    for n in list(out):
        if _is_length(n):
            out[n] = max(out[n], SEPARATING_LENGTH)
        elif n in ("L", "L_enc", "L_dec"):  # one layer shows them as well as several, at a fraction of the cost
            out[n] = max(1, int(entry.minimum.get(n, 1)))
    if "ell_max" in out:
        out["ell_max"] = max([out["ell_max"], *(v for n, v in out.items() if _is_length(n))])
    out = settle(out)
    if not (_separates_heads(entry, out, variant) and admits(out) and _accepted(entry, out, variant)):
        return None
    return out


def _sizes_text(entry: Entry, hyper: Mapping[str, int], variant: VariantSet) -> str:
    """The sizes that make a case separating, in words: ``d_attn = 4, 2 kv heads, ell = 3``."""
    parts = []
    if "d_attn" in hyper and entry.switches & {"rotary", "rope_base"}:
        parts.append(f"d_attn = {hyper['d_attn']}")
    if "H" in hyper and "kv_order" in entry.switches:
        parts.append(f"{hyper['H'] // _kv_group(entry, variant)} kv heads")
    parts += [f"{n} = {v}" for n, v in hyper.items() if _is_length(n)]
    return ", ".join(parts)


#: the factor of the small-scale case: a power of two, so that rounding to any dtype commutes with it
SMALL = 2.0 ** -10


def _small(case: Case) -> Case:
    """``case`` with its real inputs (or, with none, its embedding tables) times ``SMALL``: a norm then
    sees a variance near 1e-6, where ε = 1e-5 and 1e-6 dominate it even at bfloat16."""
    real = {s.name for s in case.entry.inputs if s.kind == Kind.REAL}
    inputs = {k: (v * SMALL if k in real else v) for k, v in case.inputs.items()}
    params = dict(case.params)
    if not real:
        params = {k: (v * SMALL if k.rsplit(".", 1)[-1] in ("W_e", "W_p") else v) for k, v in params.items()}
    return Case(case.algorithm, dict(case.hyper), case.variant, inputs, params, style=case.style)


def _has_norm_or_real(entry: Entry) -> bool:
    return bool(entry.switches & {"epsilon", "variance", "norm", "embedding_norm", "norm_placement"})


# -- identifying an implementation ---------------------------------------------------------------

def observe(member: Any, entry: Entry, cases: Sequence[tuple[str, Case]], dtype: str, *,
            timeout: float = 60.0) -> list[Observation]:
    """Call the implementation once per case (the harness's call machinery: conversions, a timeout,
    a plugin's exception recorded, never raised)."""
    from ..core.execute import CallTimeout, call_member, describe_exception

    out = []
    for label, case in cases:
        prepared = Prepared(entry, case.inputs, case.params, dtype)
        outputs, error = None, ""
        try:
            outputs, _ = call_member(member, entry, prepared.inputs, prepared.params, case, dtype, timeout, False)
        except CallTimeout as exc:
            error = f"timed out: {exc}"
        except Exception as exc:  # noqa: BLE001 - a refusal is an observation
            error = describe_exception(exc)
        out.append(Observation(label, entry, dict(case.hyper), prepared.inputs, prepared.params, outputs, dtype,
                               member.impl.precision_for(dtype), error, structure(entry, case, limit=4)))
    return out


def call_variant(impl: Any, wanted: Optional[VariantSet] = None, algorithm: str = "") -> VariantSet:
    """The set the implementation is called with at ``algorithm``: ``wanted`` if it declares it
    there, else its first set declared there (the paper's for an implementation of every set)."""
    declared = impl.variants_for(algorithm)
    at = f" for {algorithm}" if impl.per_algorithm else ""
    if wanted is not None:
        if not (declared == "all" or wanted in declared):
            raise IdentifyError(f"{impl.name} does not declare the variant set {wanted.describe()}{at}; "
                                f"it declares {_declared(declared)}")
        return wanted
    if declared == "all":
        return PAPER
    if not declared:
        raise IdentifyError(f"{impl.name} declares no variant set{at} to be called with")
    return declared[0]


def _declared(declared: Any) -> str:
    return "every set" if declared == "all" else ", ".join(v.describe() for v in declared)


def case_hyper(impl: Any, entry: Entry, variant: VariantSet = PAPER) -> dict[str, int]:
    """The sizes of the designed cases, within the implementation's limits (``Limits``,
    impls/api.py) as the search's draws are (conformance/core/strategies/_hyper.py): each default
    size moved into [minimum, maximum] (a length also under an ℓ_max maximum), the equalities
    settled by raising sizes; where that leaves the limits, the least sizes they allow (the
    entry's and the limits' minima, settled). So every set of limits under which ``certify`` can
    draw a case gives identify a case; IdentifyError (one line, naming why) when none exists."""
    limits = impl.limits_for(entry.name)
    low = {n: max(int(entry.minimum.get(n, 1)), int(limits.minimum.get(n, 1))) for n in entry.hyper}
    high = _highest(limits, entry)
    near = {n: min(max(v, low[n]), max(high[n], low[n])) for n, v in default_hyper(entry).items()}
    for start in (near, low):
        hyper = _with_context(entry, limits.settle(start), high, variant)
        if limits.admits(hyper) and _accepted(entry, hyper, variant):
            return hyper
    why = "; ".join(limits.problems(list(entry.hyper), entry.minimum)) or "no sizes satisfy them and the entry"
    raise IdentifyError(f"{entry.name}: {impl.name}'s limits ({limits.describe()}) admit no case: {why}")


def _highest(limits: Any, entry: Entry) -> dict[str, int]:
    """The largest value the limits allow each size (a length: also at most an ℓ_max maximum; a
    size that must be a multiple of k: the largest multiple within its maximum)."""
    out = {}
    for n in entry.hyper:
        most = int(limits.maximum.get(n, 1 << 30))
        if _is_length(n) and "ell_max" in limits.maximum:
            most = min(most, int(limits.maximum["ell_max"]))
        k = int(limits.multiple_of.get(n, 1))
        out[n] = most // k * k if most >= k else most
    return out


def _with_context(entry: Entry, hyper: dict[str, int], high: Mapping[str, int],
                  variant: VariantSet) -> dict[str, int]:
    """``hyper`` with ℓ_max raised (within its maximum) until the entry's check accepts the lengths."""
    if "ell_max" not in hyper:
        return hyper
    longest = max([v for n, v in hyper.items() if _is_length(n)], default=1)
    for ell_max in range(max(hyper["ell_max"], longest), high["ell_max"] + 1):
        if _accepted(entry, {**hyper, "ell_max": ell_max}, variant):
            return {**hyper, "ell_max": ell_max}
        if ell_max > longest + sum(hyper.values()):
            break
    return hyper


def _is_length(name: str) -> bool:
    """A sequence length (ℓ, ℓ_x, ℓ_z, ℓ_gen): at most ℓ_max."""
    return (name == "ell" or name.startswith("ell_")) and name != "ell_max"


def _accepted(entry: Entry, hyper: Mapping[str, int], variant: VariantSet) -> bool:
    if entry.check is None:
        return True
    try:
        entry.check(dict(hyper), variant)
    except SpecError:
        return False
    return True


def identify(member: Any, entry: Entry, dtype: str = "float64", *, variant: Optional[VariantSet] = None,
             seconds: float = SECONDS, evaluations: int = EVALUATIONS, timeout: float = 60.0) -> Identity:
    """Which conventions ``member`` (an ``execute.Member``) follows at ``entry``, at ``dtype``.

    ``variant``: the set to call it with (one it declares; default its first, or the paper's for an
    implementation of every set). ``seconds``: the budget of the whole entry, calls included."""
    started = time.perf_counter()
    impl = member.impl
    called = call_variant(impl, variant, entry.name)
    hyper = case_hyper(impl, entry, called)
    limits = impl.limits_for(entry.name)

    def admits(h: Mapping[str, int]) -> bool:
        return impl.admits(entry.name, h)

    wide = separating_hyper(entry, hyper, called, admits, limits.settle)
    cases = designed_cases(entry, hyper, called, dtype, admits, separating=wide)
    before = member.seconds
    observations = observe(member, entry, cases, dtype, timeout=timeout)
    calls = member.seconds - before
    identity = search(entry, observations, project(called, entry), member.label, dtype,
                      seconds=max(seconds - (time.perf_counter() - started), 1.0), evaluations=evaluations)
    identity.declared = called.describe()
    for r in identity.groups:
        r.declared = _current(r.group, called)
    if all(o.outputs is None for o in observations):
        identity.notes.insert(0, f"the implementation refused every case: {observations[0].error}")
    reads = sorted(entry.switches & HEAD_SWITCHES)
    if reads and not any(_separates_heads(entry, o.hyper, called) for o in observations):
        identity.notes.append(f"no case within {impl.name}'s limits separates {', '.join(reads)} (they need "
                              f"d_attn >= {SEPARATING_WIDTH}, {SEPARATING_KV_HEADS} kv heads, lengths >= "
                              f"{SEPARATING_LENGTH}): they stay undecided")
    identity.seconds_calls = calls
    identity.seconds = time.perf_counter() - started
    return identity


def search(entry: Entry, observations: Sequence[Observation], start: VariantSet, subject: str, dtype: str, *,
           seconds: float = SECONDS, evaluations: int = EVALUATIONS) -> Identity:
    """The search over ``observations`` (``Identifier.run``) as an ``Identity``; ``start`` gives the
    parameter structure of the observations' parameters."""
    started = time.perf_counter()
    engine = Identifier(entry, observations, start, seconds=seconds, evaluations=evaluations)
    found, base, results = engine.run()
    chosen = _prefer_paper(found, results)
    s = engine.score(chosen)
    if s is None or s[0]:  # the paper's values do not fit together: keep the search's own
        chosen = found
        for r in results:
            r.chosen = _current(r.group, found)
            r.same_as = [v for v in r.same_as if _key(v) != _key(r.chosen)]
        s = engine.score(found)
    identity = Identity(entry.name, subject, dtype, "", chosen, groups=results, observations=list(observations),
                        fits=s is not None and s[0] == 0, base=base, presets=list(engine.presets_fitting),
                        cases_fit=len(observations) - (s[0] if s is not None else len(observations)),
                        evaluations=engine.evaluated, gave_up=engine.gave_up, notes=_notes(entry, results),
                        cannot_tell=any(r.cannot_tell or r.status == "cannot tell" for r in results),
                        untested=engine.unknown_seen and not engine.judged_seen)
    identity.seconds = time.perf_counter() - started
    return identity


def project(variant: VariantSet, entry: Entry) -> VariantSet:
    """The paper's set with ``variant``'s values for the switches ``entry`` reads (the others do not
    change its outputs, so nothing about them is identified)."""
    return PAPER.replace(**{k: getattr(variant, k) for k in entry.switches})


def _prefer_paper(found: VariantSet, results: list[GroupResult]) -> VariantSet:
    """The identified set with each switch at the paper's value wherever that is consistent: an
    undecided switch, and a decided one whose value the paper's is here ("paper" and the value it
    stands for; β under RMSNorm). A default is never written as a change: the expression moves only
    what the cases decide or need."""
    out = found
    for r in results:
        paper = _current(r.group, PAPER)
        same = {_key(v) for v in r.same_as} | {_key(r.chosen)}
        if _key(paper) in {_key(v) for v in r.consistent} and (r.status == "undecided" or _key(paper) in same):
            moved = _replace(out, paper)
            if moved is not None:
                out = moved
                if _key(paper) != _key(r.chosen):
                    # the values the same as the old choice are the same as the paper's only if it was one
                    r.same_as = [v for v in r.same_as if _key(v) != _key(paper)] + [r.chosen] if _key(paper) in same \
                        else []
                    r.chosen = paper
        elif r.consistent:
            moved = _replace(out, r.chosen)
            out = moved if moved is not None else out
    return out


def _notes(entry: Entry, results: list[GroupResult]) -> list[str]:
    out = []
    if any(r.group == "epsilon" for r in results):
        out.append("epsilon: a finite candidate list (" + ", ".join(f"{e:g}" for e in EPSILON_CANDIDATES)
                   + ", inside or outside the root, or none)")
    structural = sorted({r.group for r in results if r.untestable})
    if structural:
        out.append("parameter structure (" + ", ".join(structural) + "): values needing parameters that were "
                   "not given are not testable; the structure is that of the parameters given (an "
                   "implementation's: its declared set's)")
    return out


# -- several entries ------------------------------------------------------------------------------

@dataclass
class Merged:
    """The sets of several entries merged (``merge_all``): ``variant``, one set for them all;
    ``conflicts``: switches with no value possible at every entry; ``undecided``: switches with
    several values possible at every entry that no case separates (the set holds the declared
    value among them, else the first: not a finding); ``changes``: {switch: value} where the
    declared value is excluded at some entry (what to change in the declaration)."""

    variant: VariantSet
    conflicts: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"expression": expression(self.variant), "variant": self.variant.to_dict(),
                "describe": self.variant.describe(), "conflicts": list(self.conflicts),
                "undecided": list(self.undecided), "changes_from_declared": {k: _plain(v) for k, v in
                                                                             self.changes.items()}}


def merge_all(identities: Sequence[Identity]) -> Merged:
    """One set for all the entries identified: each switch at a value possible at every entry that
    reads it (``GroupResult.possible``: no separating case excluded it there). Of several: the
    paper's (a default is never written as a change), else the declared one, else the one value;
    where several remain that are not one computation at every entry, the switch is undecided (no
    case separates them) and says so rather than picking one as a finding. A switch whose declared
    value is possible at every entry is never a change from the declaration."""
    out = PAPER
    merged = Merged(PAPER)
    names = sorted({r.group for i in identities for r in i.groups})
    for g in names:
        rows = [(i.algorithm, r) for i in identities for r in i.groups if r.group == g and r.possible]
        if not rows:
            continue
        common = [v for v in rows[0][1].possible
                  if all(_key(v) in {_key(w) for w in r.possible} for _, r in rows[1:])]
        declared = {_key(r.declared): r.declared for _, r in rows if r.declared is not None}
        said = next(iter(declared.values())) if len(declared) == 1 else None
        if not common:
            merged.conflicts.append(f"{g}: " + "; ".join(
                f"{a}: {', '.join(value_text(g, v) for v in r.possible)}" for a, r in rows))
            continue
        keys = {_key(v) for v in common}
        paper = _current(g, PAPER)
        if _key(paper) in keys:
            pick = paper
        elif said is not None and _key(said) in keys:
            pick = said
        else:
            pick = common[0]
        # values that are the picked one's computation at every entry are no alternative to it
        rivals = [v for v in common if _key(v) != _key(pick) and not all(
            _key(v) in {_key(w) for w in [r.chosen, *r.same_as]} and _key(pick) in {_key(w) for w in
                                                                               [r.chosen, *r.same_as]}
            for _, r in rows)]
        if rivals and _key(pick) != _key(paper):
            merged.undecided.append(f"{g}: no case separates {', '.join(value_text(g, v) for v in [pick, *rivals])}")
        if said is not None and _key(said) not in keys:
            merged.changes.update(pick)
        out = _replace(out, pick) or out
    merged.variant = out
    return merged


def merge(identities: Sequence[Identity]) -> tuple[VariantSet, list[str]]:
    """``merge_all``'s set and conflicts."""
    m = merge_all(identities)
    return m.variant, m.conflicts
