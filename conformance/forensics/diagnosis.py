"""Naming the likely cause of a failure: which convention the output matches.

A failing cell usually means that the implementation follows another
convention than the one declared (ε inside the root, an unbiased variance,
GELU's tanh form, no score scale, zeros for an empty query, ...). The spec
can evaluate every convention, so on the shrunk case the harness evaluates
it under the *neighbouring* variant sets and says which of them the
implementation's output agrees with, judged exactly as the search judges
(``tolerances.reference`` at the cell's dtype, ``judge.judge``):

1. every single-switch change of the declared set (each value of each switch
   the entry reads; ε with each placement and each value the strategies draw,
   ``values.EPSILONS``, moved together as one switch);
2. the named presets, projected onto the entry's switches;
3. only if none of those fits: pairs of single changes, the pairs whose
   members came closest first.

The search is bounded (``seconds`` and ``evaluations``) and says when it gave
up. It also describes the shrunk case's salient structure in words (an empty
query column, a constant column, a repeated token, ℓ = 1, ...), since that is
often what makes two conventions differ. For a model, layer, loss, gradient
or step it adds where the implementation first departs from the spec
(``conformance/forensics/divergence.py``: which layer, which sublayer). Everything is
plain data (``Diagnosis.to_dict``) for the JSON report and certificates.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PRESETS, SWITCHES, VariantSet

from ..core.calling import Prepared
from ..core.case import Case
from ..core.judge import judge
from ..core.tolerances import ToleranceModelError, reference
from ..core.values import EPSILONS

__all__ = ["DIAGNOSED_CHECKS", "LOCATED_CHECKS", "Diagnosis", "diagnose", "diagnose_failure", "number", "structure"]

#: the checks whose failure compares the implementation's output with the spec's (or its refusal)
DIAGNOSED_CHECKS = frozenset({"spec", "nan", "overflow", "refusal"})
#: checks with no value to match, where a model or layer is still located (which piece raises or
#: returns the wrong shape: conformance/forensics/divergence.py)
LOCATED_CHECKS = frozenset({"exception", "shape"})

_PLACED = ("inside_root", "outside_root")

#: the search's budget per failure: wall seconds and spec evaluations (each a binary64 evaluation
#: plus the Monte Carlo lanes of the tolerance), checked before each evaluation
SECONDS = 10.0
EVALUATIONS = 400

#: a near miss is named in the text only within this error/bound ratio (the JSON has them all):
#: a set off by 1e10 tolerances is no hint
NEAREST_SHOWN = 100.0


def number(x: Any) -> str:
    """A number as plain text: ``-1.06`` or ``1e-05``, never ``np.float64(...)``."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    try:
        return repr(float(x))
    except (TypeError, ValueError):
        return str(x)


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _changes_text(changes: Mapping[str, Any]) -> str:
    return ", ".join(f"{k[len('input '):]} {v}" if k.startswith("input ") else f"{k} = {_value(v)}"
                     for k, v in changes.items())


def _simplest(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The matches no other match explains with fewer changes (a subset of its changes)."""
    def items(m: Mapping[str, Any]) -> set:
        return {(k, str(v)) for k, v in m["changes"].items()}

    return [m for m in matches if not any(items(o) < items(m) for o in matches)]


@dataclass
class Diagnosis:
    """What the search found; every field is plain data (JSON-ready)."""

    algorithm: str
    dtype: str
    declared: str  # the declared variant set (``VariantSet.describe``)
    #: sets the output agrees with: {"changes": {switch: value}, "declared": {switch: declared value},
    #: "presets": [names], "ratio": worst error/bound}
    matches: list[dict[str, Any]] = field(default_factory=list)
    #: the closest sets that do not fit (same keys), at most three
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    structure: list[str] = field(default_factory=list)  # the case's salient features, in words
    searched: list[str] = field(default_factory=list)  # "single switches", "presets", "pairs"
    evaluated: int = 0  # variant sets evaluated
    candidates: int = 0  # variant sets the search had planned
    gave_up: bool = False  # the time or evaluation budget ended the search early
    #: False when a repeat call's output agrees with the declared set (the failure did not recur)
    recurred: bool = True
    seconds: float = 0.0
    budget: dict[str, Any] = field(default_factory=dict)  # {"seconds": s, "evaluations": n}
    #: where a model or layer first departs (conformance/forensics/divergence.py), or None
    divergence: Optional[dict[str, Any]] = None
    divergence_lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm, "dtype": self.dtype, "declared": self.declared,
            "matches": self.matches, "near_misses": self.near_misses, "structure": self.structure,
            "searched": self.searched, "evaluated": self.evaluated, "candidates": self.candidates,
            "gave_up": self.gave_up, "recurred": self.recurred, "seconds": round(self.seconds, 3),
            "budget": self.budget, "divergence": self.divergence,
        }

    def summary(self) -> str:
        """One line: the matched conventions, or that none fits."""
        if not self.recurred:
            return ("none needed: a repeat call's output agrees with the declared set (the failure did not "
                    "recur: nondeterministic or state-dependent)")
        if self.matches:
            parts = []
            simplest = _simplest(self.matches)
            for m in simplest[:4]:
                names = m["presets"][:3] + ([f"{len(m['presets']) - 3} more"] if len(m["presets"]) > 3 else [])
                also = f" (preset {', '.join(names)})" if names else ""
                if m.get("parameters"):  # the parameter set differs under it: say how it was fitted
                    fitted = m["parameters"][:3] + (["..."] if len(m["parameters"]) > 3 else [])
                    also += f" [parameters: {', '.join(fitted)}]"
                parts.append(f"{_changes_text(m['changes'])}{also}; declared: {_changes_text(m['declared'])}")
            more = f" (and {len(simplest) - 4} more)" if len(simplest) > 4 else ""
            return "matches " + " | or ".join(parts) + more
        text = f"no neighbouring variant set fits (declared {self.declared})"
        if self.near_misses and self.near_misses[0]["ratio"] <= NEAREST_SHOWN:
            n = self.near_misses[0]
            text += f"; nearest: {_changes_text(n['changes'])} (error/bound {_ratio(n['ratio'])})"
        return text

    def lines(self) -> list[str]:
        """The report's lines (without indentation)."""
        if not self.searched and self.divergence is not None:  # a located exception: no variant search
            return list(self.divergence_lines)
        out = [f"likely cause: {self.summary()}"]
        if self.structure:
            out.append("case structure: " + "; ".join(self.structure))
        how = " + ".join(self.searched) or "nothing"
        tail = (f"gave up after {self.seconds:.1f} s, {self.evaluated} of {self.candidates} variant sets evaluated"
                if self.gave_up else f"{self.evaluated} variant sets evaluated in {self.seconds:.1f} s")
        out.append(f"(searched {how}; {tail})")
        return out + list(self.divergence_lines)


def _ratio(r: float) -> str:
    return f"{r:.3g}" if math.isfinite(r) else "inf"


# -- candidates ---------------------------------------------------------------------------------

def _groups(entry: Entry) -> list[str]:
    names = sorted(entry.switches - {"epsilon", "epsilon_placement"})
    if entry.switches & {"epsilon", "epsilon_placement"}:
        names.append("epsilon")
    return names


def _group_changes(group: str, declared: VariantSet) -> list[dict[str, Any]]:
    """Every value of one switch (ε: with its placement) other than the declared one."""
    if group == "epsilon":
        options = [{"epsilon": 0.0, "epsilon_placement": "none"}]
        options += [{"epsilon": e, "epsilon_placement": p} for p in _PLACED for e in EPSILONS]
        return [o for o in options
                if (o["epsilon"], o["epsilon_placement"]) != (declared.epsilon, declared.epsilon_placement)]
    return [{group: c} for c in SWITCHES[group].choices if c != getattr(declared, group)]


def _singles(entry: Entry, declared: VariantSet) -> list[tuple[str, dict[str, Any]]]:
    return [(g, ch) for g in _groups(entry) for ch in _group_changes(g, declared)]


def _presets(entry: Entry, declared: VariantSet) -> list[tuple[str, dict[str, Any]]]:
    """Each preset restricted to the entry's switches (the rest as declared)."""
    out = []
    for name, p in PRESETS.items():
        changes = {k: getattr(p, k) for k in sorted(entry.switches) if getattr(p, k) != getattr(declared, k)}
        if changes:
            out.append((name, changes))
    return out


# -- the search ----------------------------------------------------------------------------------

def diagnose(entry: Entry, case: Case, impl_outputs: Optional[Mapping[str, np.ndarray]], dtype: str,
             declared: Optional[VariantSet] = None, *, precision: str = "highest", seconds: float = SECONDS,
             evaluations: int = EVALUATIONS) -> Diagnosis:
    """Which neighbouring variant sets the implementation's outputs on ``case`` agree with.

    ``impl_outputs``: the implementation's NumPy outputs on the case (inputs rounded to ``dtype``),
    or None when it raised: then the sets under which the spec refuses the case are the matches.
    Stops after ``seconds`` or ``evaluations`` reference evaluations (``gave_up``)."""
    declared = declared or case.variant
    started = time.perf_counter()
    search = _Search(entry, case, impl_outputs, dtype, declared, precision, started, seconds, evaluations)
    d = search.d
    if search.declared_fits():  # a repeat call may not fail at all
        d.recurred = False
    else:
        single_recs = search.singles_and_presets()
        search.mask_readings()
        search.pairs(single_recs)
        _conclude(d, list(search.tried.values()))
    d.seconds = time.perf_counter() - started
    return d


class _Search:
    """The variant sets evaluated for one diagnosis (by variant hash and input reading), within a
    budget of ``seconds`` from ``started`` and ``evaluations``; ``d``, the ``Diagnosis`` being built,
    counts them and says when the budget ran out."""

    def __init__(self, entry: Entry, case: Case, impl_outputs: Optional[Mapping[str, np.ndarray]], dtype: str,
                 declared: VariantSet, precision: str, started: float, seconds: float, evaluations: int) -> None:
        self.entry, self.case, self.impl_outputs, self.dtype = entry, case, impl_outputs, dtype
        self.declared, self.precision = declared, precision
        self.started, self.seconds, self.evaluations = started, seconds, evaluations
        self.prepared = Prepared(entry, case.inputs, case.params, dtype)
        self.d = Diagnosis(entry.name, dtype, declared.describe(), structure=structure(entry, case),
                           budget={"seconds": seconds, "evaluations": evaluations})
        self.tried: dict[str, dict[str, Any]] = {}  # variant hash (and reading) -> result record

    def budget_left(self) -> bool:
        return self.d.evaluated < self.evaluations and time.perf_counter() - self.started < self.seconds

    def declared_fits(self) -> bool:
        """Whether the declared set itself fits the outputs (the failure did not recur). Its
        evaluation is then forgotten: it is no match of the search."""
        first = self.evaluate({})
        if first is not None and first["fits"]:
            return True
        self.tried.clear()
        return False

    def singles_and_presets(self) -> list[tuple[str, Optional[dict[str, Any]]]]:
        """Every single-switch change, then every preset; returns the singles' records by group."""
        d, entry, declared = self.d, self.entry, self.declared
        singles = _singles(entry, declared)
        presets = _presets(entry, declared)
        d.candidates = len(singles) + len(presets)
        d.searched.append("single switches")
        single_recs = [(g, self.evaluate(ch)) for g, ch in singles]
        d.searched.append("presets")
        for name, ch in presets:
            self.evaluate(ch, name)
        return single_recs

    def mask_readings(self) -> None:
        """A mask read the other ways real code reads it, with each ``empty_query`` value: cheap, and
        a mask read the other way can look like an empty_query convention."""
        readings = _readings(self.entry, self.prepared.inputs)
        if not readings:
            return
        self.d.searched.append("mask readings")
        eq: list[dict[str, Any]] = [{}]
        if "empty_query" in self.entry.switches:
            eq += [{"empty_query": c} for c in SWITCHES["empty_query"].choices if c != self.declared.empty_query]
        self.d.candidates += len(readings) * len(eq)
        for reading in readings:
            for ch in eq:
                self.evaluate(ch, reading=reading)

    def pairs(self, single_recs: list[tuple[str, Optional[dict[str, Any]]]]) -> None:
        """Only when nothing fits and time is left: pairs of single changes of two switches, the
        pairs whose members came closest first."""
        d = self.d
        if any(r["fits"] for r in self.tried.values()) or d.gave_up or len(single_recs) <= 1:
            return
        scored = [(g, r) for g, r in single_recs if r is not None]
        pairs = [(a, b) for a, b in itertools.combinations(scored, 2) if a[0] != b[0]]
        pairs.sort(key=lambda p: _score(p[0][1]["ratio"]) + _score(p[1][1]["ratio"]))
        d.candidates += len(pairs)
        d.searched.append("pairs")
        for (_, a), (_, b) in pairs:
            if not self.budget_left():
                d.gave_up = True
                break
            self.evaluate({**a["changes"], **b["changes"]})

    def evaluate(self, changes: dict[str, Any], preset: Optional[str] = None,
                 reading: Optional[tuple[str, str, np.ndarray]] = None) -> Optional[dict[str, Any]]:
        """The record of the declared set with ``changes`` (and ``reading`` of an input): evaluated
        once, looked up after; None when it is no variant set or the budget has run out."""
        try:
            variant = self.declared.replace(**changes)
        except ValueError:  # e.g. ε without a placement: not a variant set
            return None
        key = variant.hash + (f"/{reading[0]}:{reading[1]}" if reading else "")
        rec = self.tried.get(key)
        if rec is not None:
            if preset and preset not in rec["presets"]:
                rec["presets"].append(preset)
            return rec
        if not self.budget_left():
            self.d.gave_up = True
            return None
        self.d.evaluated += 1
        rec, inputs = self._record(changes, preset, reading)
        self.tried[key] = rec
        params, adapted = _adapt_params(self.entry, self.case.hyper, variant, self.prepared.params)
        if adapted:
            rec["parameters"] = adapted
        self._judge(rec, variant, inputs, params)
        return rec

    def _record(self, changes: dict[str, Any], preset: Optional[str],
                reading: Optional[tuple[str, str, np.ndarray]]) -> tuple[dict[str, Any], Mapping[str, np.ndarray]]:
        """A fresh record (not fitting yet), and the inputs it is evaluated on."""
        rec: dict[str, Any] = {"changes": dict(changes), "declared": {k: getattr(self.declared, k) for k in changes},
                               "presets": [preset] if preset else [], "ratio": math.inf, "fits": False}
        inputs = self.prepared.inputs
        if reading is not None:  # the same switches, an input read another way (a mask's polarity)
            name, how, value = reading
            inputs = {**inputs, name: value}
            rec["changes"] = {f"input {name}": how, **rec["changes"]}
            rec["declared"] = {f"input {name}": _AS_DECLARED[how], **rec["declared"]}
        return rec, inputs

    def _judge(self, rec: dict[str, Any], variant: VariantSet, inputs: Mapping[str, np.ndarray],
               params: Mapping[str, np.ndarray]) -> None:
        """Fill ``rec``: the spec under ``variant`` against the outputs, judged as the search judges."""
        impl_outputs = self.impl_outputs
        try:
            ref = reference(self.entry, inputs, params, hyper=self.case.hyper, variant=variant,
                            dtype=self.dtype, precision=self.precision)
        except SpecError:
            rec["fits"] = impl_outputs is None  # the spec refuses the case under this set, as the implementation did
            rec["ratio"] = 0.0 if rec["fits"] else math.inf
            rec["refused"] = True
            return
        except ToleranceModelError:
            return
        if impl_outputs is None:
            return
        try:
            j = judge(self.entry, impl_outputs, ref)
        except Exception:  # noqa: BLE001 - outputs the judge cannot read fit nothing
            return
        rec["fits"] = j.ok
        # a NaN, shape or infinity mismatch is no near miss: only value differences get a finite ratio
        rec["ratio"] = j.ratio if all(f.check == "spec" for f in j.findings) else math.inf


def _conclude(d: Diagnosis, recs: list[dict[str, Any]]) -> None:
    """The matches (fewest changes first) and the three nearest misses among the evaluated sets."""
    fits = [r for r in recs if r["fits"]]
    fits.sort(key=lambda r: (len(r["changes"]), r["ratio"]))
    d.matches = [_public(r) for r in fits]
    misses = [r for r in recs if not r["fits"] and math.isfinite(r["ratio"])]
    misses.sort(key=lambda r: r["ratio"])
    d.near_misses = [_public(r) for r in misses[:3]]
    if not d.gave_up:  # every planned set was evaluated (a preset equal to a single change counts once)
        d.candidates = d.evaluated


def _adapt_params(entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
                  params: Mapping[str, np.ndarray]) -> tuple[Mapping[str, np.ndarray], list[str]]:
    """The case's parameters fitted to ``variant``'s parameter set: those it does not take are
    dropped (the implementation ignored them: no b_u under logit_bias=False, no final γ, β); those
    it takes and the case lacks get the value an implementation without them computes with (γ = 1,
    biases and β = 0, an untied W_u = W_eᵀ)."""
    try:
        shapes = entry.param_shapes(dict(hyper), variant)
    except (SpecError, KeyError, ValueError):
        return params, []
    if set(shapes) == set(params):
        return params, []
    out: dict[str, np.ndarray] = {}
    notes = [f"dropped {k}" for k in params if k not in shapes]
    for name, shape in shapes.items():
        if name in params:
            out[name] = params[name]
            continue
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "W_u" and "W_e" in params and tuple(np.shape(params["W_e"])[::-1]) == tuple(shape):
            out[name] = np.ascontiguousarray(np.asarray(params["W_e"]).T)
            notes.append(f"{name} = W_e transposed")
        else:
            out[name] = np.ones(shape) if leaf.startswith("gamma") else np.zeros(shape)
            notes.append(f"{name} = {'1' if leaf.startswith('gamma') else '0'}")
    return out, notes


_AS_DECLARED = {"inverted (True = blocked)": "as declared (True = may attend)",
                "transposed ([query, key])": "as declared ([key, query])"}


def _readings(entry: Entry, inputs: Mapping[str, np.ndarray]) -> list[tuple[str, str, np.ndarray]]:
    """Other readings of a mask input that real code makes: inverted polarity (True = blocked, as
    nn.MultiheadAttention's attn_mask) and, for a square mask, the transposed index order."""
    out = []
    for spec in entry.inputs:
        m = inputs.get(spec.name)
        if spec.kind != Kind.MASK or m is None or np.ndim(m) != 2:
            continue
        m = np.asarray(m, dtype=bool)  # [t_z, t_x]
        out.append((spec.name, "inverted (True = blocked)", ~m))
        if m.shape[0] == m.shape[1] and not np.array_equal(m, m.T):
            out.append((spec.name, "transposed ([query, key])", np.ascontiguousarray(m.T)))
    return out


def _score(r: float) -> float:
    return math.log10(r) if math.isfinite(r) and r > 0 else (0.0 if r == 0 else 400.0)


def _public(rec: Mapping[str, Any]) -> dict[str, Any]:
    def plain(v: Any) -> Any:
        return float(v) if isinstance(v, float) else v

    r = rec["ratio"]
    return {"changes": {k: plain(v) for k, v in rec["changes"].items()},
            "declared": {k: plain(v) for k, v in rec["declared"].items()},
            "presets": list(rec["presets"]), "ratio": float(r) if math.isfinite(r) else "inf",
            **({"parameters": list(rec["parameters"])} if rec.get("parameters") else {}),
            **({"refused": True} if rec.get("refused") else {})}


def diagnose_failure(member: Any, case: Optional[Case], check: str, dtype: str, *, timeout: float,
                     seconds: float = SECONDS) -> Optional[Diagnosis]:
    """The runner's hook: call the member once more on the shrunk case and diagnose its outputs.
    None when the check is not about values (a timeout, a crash, a mutation, ...) or when anything
    goes wrong (a diagnosis is a help; it must never cost the failure its report)."""
    if case is not None and check in LOCATED_CHECKS:  # no value to match; where it raises, for a model
        from .divergence import locate_failure

        where = locate_failure(member, case, dtype, timeout=timeout, structural=True)
        if where is None:
            return None
        d = Diagnosis(case.algorithm, dtype, case.variant.describe(), divergence=where.to_dict(),
                      divergence_lines=where.lines())
        return d
    if case is None or check not in DIAGNOSED_CHECKS:
        return None
    from ..core.execute import call_member

    try:
        entry = case.entry
        prepared = Prepared(entry, case.inputs, case.params, dtype)
        outputs, _ = call_member(member, entry, prepared.inputs, prepared.params, case, dtype, timeout, False)
        d = diagnose(entry, case, outputs, dtype, case.variant, precision=member.impl.precision,
                     seconds=seconds)
    except Exception:  # noqa: BLE001 - see above
        return None
    if d.recurred:  # where inside a model or layer it first departs (None for other entries)
        from .divergence import locate_failure

        where = locate_failure(member, case, dtype, timeout=timeout)
        if where is not None:
            d.divergence = where.to_dict()
            d.divergence_lines = where.lines()
    return d


# -- the case in words ------------------------------------------------------------------------------

def structure(entry: Entry, case: Case, limit: int = 8) -> list[str]:
    """The shrunk case's salient features: sizes of 1, empty or full mask columns, constant or
    zero columns, repeated tokens, ties in a distribution, zero parameters."""
    out: list[str] = []
    kinds = {s.name: s.kind for s in entry.inputs}
    for name, value in case.inputs.items():
        a = np.asarray(value)
        kind = kinds.get(name)
        if kind == Kind.MASK and a.ndim == 2 and a.size:
            out.extend(_mask_words(name, a.astype(bool)))
        elif kind == Kind.TOKEN and a.size:
            out.extend(_token_words(name, a))
        elif a.dtype.kind == "f" and a.size:
            out.extend(_real_words(name, a))
    for name, value in case.params.items():
        a = np.asarray(value)
        if a.size and not np.any(a):
            out.append(f"parameter {name} is all zeros")
    ones = [k for k, v in case.hyper.items() if v == 1]
    if ones:  # sizes last: the features above are usually what separates two conventions
        out.append(" = ".join(ones) + " = 1")
    if len(out) > limit:
        out = out[:limit] + [f"and {len(out) - limit} more"]
    return out


def _mask_words(name: str, m: np.ndarray) -> list[str]:
    words = []
    empty = [int(t) for t in np.flatnonzero(~m.any(axis=0))]
    if empty:
        words.append(f"{name} query column{'s' if len(empty) > 1 else ''} {_list(empty)} "
                     f"{'are' if len(empty) > 1 else 'is'} empty (no key to attend to)")
    if m.all():
        words.append(f"{name} is all True (every query sees every key)")
    return words


def _token_words(name: str, a: np.ndarray) -> list[str]:
    flat = a.reshape(-1)
    values, counts = np.unique(flat, return_counts=True)
    rep = [int(v) for v, c in zip(values, counts) if c > 1]
    return [f"token{'s' if len(rep) > 1 else ''} {_list(rep)} repeated in {name}"] if rep else []


def _real_words(name: str, a: np.ndarray) -> list[str]:
    words = []
    if not np.all(np.isfinite(a)):
        words.append(f"{name} holds non-finite values")
        return words
    if a.ndim == 1:
        if a.size > 1 and np.unique(a).size < a.size:
            words.append(f"ties in {name} (repeated values)")
        if not np.any(a):
            words.append(f"{name} is all zeros")
        return words
    if a.ndim != 2:
        return words
    rows, cols = a.shape
    if rows == 1:
        words.append(f"{name} has one row (each column constant)")
        return words
    zero = [int(t) for t in np.flatnonzero(~a.any(axis=0))]
    if zero:
        words.append(f"{name} column{'s' if len(zero) > 1 else ''} {_list(zero)} all zeros")
    spread = a.max(axis=0) - a.min(axis=0)
    scale = np.maximum(np.abs(a).max(axis=0), np.finfo(float).tiny)
    const = [int(t) for t in np.flatnonzero((spread == 0) & a.any(axis=0))]
    if const:
        words.append(f"{name} column{'s' if len(const) > 1 else ''} {_list(const)} constant (zero variance)")
    near = [int(t) for t in np.flatnonzero((spread > 0) & (spread <= 1e-3 * scale))]
    if near:
        words.append(f"{name} column{'s' if len(near) > 1 else ''} {_list(near)} nearly constant "
                     f"(spread at most 1e-3 of the values)")
    if cols > 1 and np.all(a == a[:, :1]):
        words.append(f"every column of {name} is the same")
    return words


def _list(xs: list[int], limit: int = 6) -> str:
    shown = ", ".join(str(x) for x in xs[:limit])
    return shown + (f", ... ({len(xs)} in all)" if len(xs) > limit else "")
