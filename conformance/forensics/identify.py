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
and for one with ℓ_z and ℓ_x a case with ℓ_z ≠ ℓ_x (the causal alignments).

The search (``Identifier.run``) does not certify every combination:

1. a base: the paper's set and each preset projected onto the entry's
   switches, the one that fits best;
2. coordinate passes: each switch in turn (ε with its placement, one
   group), every value with the others held, the best-fitting value adopted
   (fewer cases outside the bound, or as many and the errors a decade
   closer); repeated to a fixed point;
3. at the fixed point every value of every switch is judged with the others
   held: *consistent* (within the bound on every case), *excluded* (outside
   on some case), or not testable (it needs parameters the implementation
   does not take).

A switch with one consistent value is decided (so is "paper" together with
the one value it stands for at the entry); with several it is *undecided*:
the designed cases cannot tell those values apart at this dtype
(``same_outputs`` says when the spec's outputs are even bit-identical on
every case; with no value excluded, the switch never acted). When nothing fits, the set reported is
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

__all__ = ["EPSILON_CANDIDATES", "EVALUATIONS", "SECONDS", "GroupResult", "Identity", "IdentifyError", "Identifier",
           "Observation", "Verdict", "call_variant", "designed_cases", "expression", "groups", "identify", "merge",
           "observe", "options", "project", "search", "value_text"]

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
class Verdict:
    """One candidate set judged on one observation."""

    fits: bool
    ratio: float  # worst error/bound (inf: a NaN, refusal or shape mismatch)
    outputs: Optional[dict[str, np.ndarray]] = None  # the spec's outputs under the candidate
    note: str = ""


@dataclass
class Observation:
    """One case and what was observed on it: the outputs (None: the implementation refused it).

    ``inputs``/``params`` are the judged values (already rounded to ``dtype``). ``judge`` turns the
    spec's ``Reference`` into a ``Verdict``; the default is the search's judge."""

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
    #: (reference, candidate set, its parameters) -> Verdict; None: ``judge.judge`` on ``outputs``
    judge: Optional[Callable[[Any, VariantSet, Mapping[str, np.ndarray]], Verdict]] = None

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
    #: "decided": one value fits and every other was judged (excluded or not testable), or "paper"
    #: and the one value it stands for at this entry (their outputs bit-identical on every case);
    #: "undecided": several fit (``same_outputs`` and nothing excluded: the switch has no effect
    #: on these cases); "none fits": no value fits with the other switches as identified
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

    def to_dict(self) -> dict[str, Any]:
        def plain(vs: list[dict[str, Any]]) -> list[str]:
            return [value_text(self.group, v) for v in vs]

        return {"switch": self.group, "status": self.status, "value": value_text(self.group, self.chosen),
                "changes": {k: _plain(v) for k, v in self.chosen.items()},
                "consistent": plain(self.consistent), "excluded": plain(self.excluded),
                "untestable": plain(self.untestable), "same_outputs": self.same_outputs,
                **({"dropped": self.dropped} if self.dropped else {}),
                **({"declared": value_text(self.group, self.declared)} if self.declared else {}),
                **({"unjudged": plain(self.unjudged)} if self.unjudged else {})}

    def line(self) -> str:
        """One line: the switch, its status and values."""
        cons = ", ".join(value_text(self.group, v) for v in self.consistent)
        if self.status == "decided" and len(self.consistent) > 1:
            text = f"{self.group}: {cons} (the same outputs on every case)"
        elif self.status == "decided":
            text = f"{self.group}: {cons}"
        elif self.status == "undecided" and self.same_outputs and not (self.excluded or self.untestable):
            text = f"{self.group}: no effect here (every value gives the same outputs on every case)"
        elif self.status == "undecided" and len(self.consistent) > max(4, len(self.excluded)):
            excl = ", ".join(value_text(self.group, v) for v in self.excluded)
            text = (f"{self.group}: undecided: every value tried but {excl} (excluded)" if excl else
                    f"{self.group}: undecided: all {len(self.consistent)} values tried remain possible")
        elif self.status == "undecided":
            why = "identical outputs on every case" if self.same_outputs else "within the tolerance"
            text = f"{self.group}: undecided among {cons} ({why})"
        else:
            text = (f"{self.group}: no value fits with the others as identified (nearest: "
                    f"{value_text(self.group, self.chosen)})")
        if self.untestable:
            text += f"; not testable: {', '.join(value_text(self.group, v) for v in self.untestable)}"
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

    @property
    def undecided(self) -> list[str]:
        return [g.group for g in self.groups if g.status == "undecided"]

    def expression(self) -> str:
        return expression(self.variant)

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "subject": self.subject, "dtype": self.dtype,
                "declared": self.declared, "identified": self.variant.describe(),
                "variant": self.variant.to_dict(), "expression": self.expression(), "fits": self.fits,
                "cases_fit": self.cases_fit,
                "base": self.base, "presets": list(self.presets), "switches": [g.to_dict() for g in self.groups],
                "undecided": self.undecided, "cases": [o.to_dict() for o in self.observations],
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
        self._cache: dict[tuple[str, int], Optional[Verdict]] = {}
        self._dropped: dict[str, list[str]] = {}
        self.presets_fitting: list[str] = []

    # one candidate on one observation
    def verdict(self, variant: VariantSet, i: int) -> Optional[Verdict]:
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
        """(cases outside the bound, Σ log10 of the error/bound ratios above 1); None: not testable."""
        misses, total = 0, 0.0
        for i in range(len(self.observations)):
            v = self.verdict(variant, i)
            if v is None:
                return None
            if not v.fits:
                misses += 1
                total += min(math.log10(v.ratio), _MISMATCH) if math.isfinite(v.ratio) and v.ratio > 1 else \
                    (_MISMATCH if not math.isfinite(v.ratio) else 0.0)
        return misses, total

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
        chosen = _current(g, current)
        r = GroupResult(g, "none fits", chosen)
        refs: list[list[Optional[dict[str, np.ndarray]]]] = []
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
                refs.append([self._outputs(cand, i) for i in range(len(self.observations))])
                if cand.hash in self._dropped:
                    r.dropped[value_text(g, opt)] = self._dropped[cand.hash]
            else:
                r.excluded.append(opt)
        if len(r.consistent) == 1 and not r.unjudged:
            r.status = "decided"
        elif r.consistent:
            r.status = "undecided"
            r.same_outputs = len(refs) > 1 and all(_same(refs[0][i], other[i]) for other in refs[1:]
                                                   for i in range(len(refs[0])))
            paper = _key(_current(g, PAPER))
            if r.same_outputs and len(r.consistent) == 2 and paper in {_key(v) for v in r.consistent} \
                    and g in SWITCHES and SWITCHES[g].paper == "paper":
                r.status = "decided"  # "paper" and the one value it stands for at this entry
        if r.consistent and _key(chosen) not in {_key(v) for v in r.consistent}:
            r.chosen = r.consistent[0]
        return r


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


def _judge_one(entry: Entry, obs: Observation, params: Mapping[str, np.ndarray], variant: VariantSet) -> Verdict:
    try:
        ref = reference(entry, obs.inputs, params, hyper=obs.hyper, variant=variant, dtype=obs.dtype,
                        precision=obs.precision)
    except SpecError:  # the spec refuses the case under this set: fits iff the implementation refused
        return Verdict(obs.outputs is None, 0.0 if obs.outputs is None else math.inf, None, "refused")
    except ToleranceModelError as exc:
        return Verdict(False, math.inf, None, f"no tolerance: {exc}")
    if obs.judge is not None:
        return obs.judge(ref, variant, params)
    if obs.outputs is None:
        return Verdict(False, math.inf, ref.outputs, "the implementation refused")
    try:
        j = judge(entry, obs.outputs, ref)
    except Exception as exc:  # noqa: BLE001 - outputs the judge cannot read fit nothing
        return Verdict(False, math.inf, ref.outputs, f"unjudgeable: {type(exc).__name__}")
    ratio = j.ratio if all(f.check == "spec" for f in j.findings) else math.inf
    return Verdict(j.ok, ratio, ref.outputs)


# -- designed cases -----------------------------------------------------------------------------

#: (label, style, seed): the values-builder cases every entry gets
_BUILT = (("well-scaled", "well-scaled", 0), ("near-constant columns", "near-constant", 1),
          ("wide-range", "wide-range", 2), ("well-scaled (seed 3)", "well-scaled", 3))


def designed_cases(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, dtype: str,
                   limits_admit: Callable[[Mapping[str, int]], bool] = lambda h: True) -> list[tuple[str, Case]]:
    """The cases that separate conventions, built for the call's variant set (its parameter
    structure): the builder's well-scaled, near-constant and wide-range values, and for an entry
    with a mask input the first case again with query column 0 emptied (no key to attend to)."""
    out = []
    for label, style, seed in _BUILT:
        if style == "near-constant" and not _has_norm_or_real(entry):
            continue
        out.append((label, Case.build(entry, dict(hyper), variant, seed=seed, style=style, dtype=dtype)))
    if _has_norm_or_real(entry):
        out.append(("small scale (x 2^-10)", _small(out[0][1])))
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
    cases = designed_cases(entry, hyper, called, dtype, lambda h: impl.admits(entry.name, h))
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
        s = engine.score(found)
    identity = Identity(entry.name, subject, dtype, "", chosen, groups=results, observations=list(observations),
                        fits=s is not None and s[0] == 0, base=base, presets=list(engine.presets_fitting),
                        cases_fit=len(observations) - (s[0] if s is not None else len(observations)),
                        evaluations=engine.evaluated, gave_up=engine.gave_up, notes=_notes(entry, results))
    identity.seconds = time.perf_counter() - started
    return identity


def project(variant: VariantSet, entry: Entry) -> VariantSet:
    """The paper's set with ``variant``'s values for the switches ``entry`` reads (the others do not
    change its outputs, so nothing about them is identified)."""
    return PAPER.replace(**{k: getattr(variant, k) for k in entry.switches})


def _prefer_paper(found: VariantSet, results: list[GroupResult]) -> VariantSet:
    """The identified set with each undecided switch at the paper's value where that is consistent
    (the expression then moves only what the cases decide or need)."""
    out = found
    for r in results:
        paper = _current(r.group, PAPER)
        if r.status == "undecided" and _key(paper) in {_key(v) for v in r.consistent}:
            moved = _replace(out, paper)
            if moved is not None:
                out = moved
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

def merge(identities: Sequence[Identity]) -> tuple[VariantSet, list[str]]:
    """One set for all the entries identified: each switch at a value consistent at every entry
    that reads it (the paper's where possible, but the concrete value where "paper" and one
    concrete value are all that fit), and the conflicts: switches with no such value
    (an implementation that is no single variant set, or an entry's "paper" meaning another value)."""
    out = PAPER
    conflicts = []
    names = sorted({r.group for i in identities for r in i.groups})
    for g in names:
        rows = [(i.algorithm, r) for i in identities for r in i.groups if r.group == g and r.consistent]
        if not rows:
            continue
        common = [v for v in rows[0][1].consistent
                  if all(_key(v) in {_key(w) for w in r.consistent} for _, r in rows[1:])]
        if not common:
            conflicts.append(f"{g}: " + "; ".join(
                f"{a}: {', '.join(value_text(g, v) for v in r.consistent)}" for a, r in rows))
            continue
        paper = _current(g, PAPER)
        concrete = [v for v in common if _key(v) != _key(paper)]
        if g in SWITCHES and SWITCHES[g].paper == "paper" and len(concrete) == 1:
            pick = concrete[0]  # "paper" and the one value it stands for: say which
        else:
            pick = paper if _key(paper) in {_key(v) for v in common} else common[0]
        out = _replace(out, pick) or out
    return out, conflicts
