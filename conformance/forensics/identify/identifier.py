"""The search over candidate sets (``Identifier.run``): a base, coordinate passes, a verdict per switch."""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, PRESETS, SWITCHES, VariantSet

from ...core.judge import judge
from ...core.tolerances import ToleranceModelError, reference
from .observations import Fit, Observation, _params_for, separates
from .results import GroupResult
from .switches import _current, groups, _key, options, value_text


#: budget per entry: wall seconds and spec evaluations (each one ``reference`` on one case)
SECONDS = 60.0
EVALUATIONS = 3000
#: coordinate passes before the search stops looking for a fixed point
PASSES = 4
#: score of a case the candidate cannot match at all (NaN against a number, a refusal against a value)
_MISMATCH = 400.0


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
            if same_here(self.entry, current, g, opt, r.chosen, sizes=[o.hyper for o in self.observations]) or (
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


def same_here(entry: Entry, variant: VariantSet, group: str, a: Mapping[str, Any], b: Mapping[str, Any],
              sizes: Sequence[Mapping[str, int]] = ()) -> bool:
    """Whether values ``a`` and ``b`` of ``group`` are the same computation at ``entry`` with the
    other switches as in ``variant``: the spec reads the switch only under another setting that
    ``variant`` does not have. From the switches' definitions (``spec/variants.py``): RoPE's base,
    rotated share and scaling only when ``rotary`` is not none; the key/value head order only when
    ``kv_group`` > 1; where the biases sit only with ``attn_bias``; RMSNorm has no mean and no β, so it ignores
    ``variance`` and its ``affine`` ``scale_shift`` is ``scale`` (spec/normalization.py
    ``_rms_norm``). With ``sizes`` (every case observed), also what coincides at those sizes alone:
    Gemma 2's √(d_x/H) is √d_x with one head and √d_attn where d_x = H·d_attn (``_scale_at``)."""
    moved_a, moved_b = _replace(variant, a), _replace(variant, b)
    if moved_a is None or moved_b is None:
        return False
    return _as_read(entry, moved_a, sizes) == _as_read(entry, moved_b, sizes)


def _scale_at(hyper: Mapping[str, int]) -> Optional[str]:
    """The ``attn_scale`` value that ``sqrt_d_model_per_head`` equals at sizes ``hyper``, or None:
    √(d_x/H) is √d_x with one head (or none: Algorithms 3 and 4) and √d_attn where d_x = H·d_attn
    (d_x the attention's input width: ``d_x``, or a layer's and a model's ``d_e``)."""
    heads, width = hyper.get("H", 1), hyper.get("d_x", hyper.get("d_e"))
    if heads == 1:
        return "sqrt_d_model"
    if width is not None and "d_attn" in hyper and width == heads * hyper["d_attn"]:
        return "sqrt_d_attn"
    return None


def _as_read(entry: Entry, v: VariantSet, sizes: Sequence[Mapping[str, int]] = ()) -> VariantSet:
    """``v`` with every switch the entry does not read under ``v``'s other settings at the paper's
    value, and with ``sizes``, a value that another equals at every one of them as that other
    (``same_here``)."""
    changes: dict[str, Any] = {}
    if v.attn_scale == "sqrt_d_model_per_head" and sizes:
        alike = {_scale_at(h) for h in sizes}
        if len(alike) == 1 and None not in alike:
            changes["attn_scale"] = alike.pop()
    if v.rotary == "none":  # RoPE's base, rotated share and scaling are read only with a pairing
        changes.update(rope_base=PAPER.rope_base, rotary_fraction=PAPER.rotary_fraction,
                       rope_scaling=PAPER.rope_scaling)
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
