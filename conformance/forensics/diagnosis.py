"""Naming the likely cause of a failure: which convention the output matches.

A failing cell usually means that the implementation follows another
convention than the one declared (ε inside the root, an unbiased variance,
GELU's tanh form, no score scale, zeros for an empty query, ...). The spec
can evaluate every convention, so on the shrunk case the harness evaluates
it under the *neighbouring* variant sets and says which of them the
implementation's output agrees with, judged exactly as the search judges
(``tolerances.reference`` at the cell's dtype, ``judge.judge``):

1. every single-switch change of the declared set (each value of each switch
   the entry reads; ε with each placement and each value of
   ``values.EPSILON_CANDIDATES``: the strategies' values, 1e-4 and the
   machine epsilons of float32 and float64, moved together as one switch);
2. the named presets, projected onto the entry's switches;
3. only if none of those fits every case tried: every pair of single changes,
   ranked by what each single change did to the output on the case (the pair
   whose two moves, added, land closest to the output first) and screened on
   the spec's binary64 values (a pair no closer to the output than half the
   declared set's distance cannot fit, bound or not); the pairs that pass are
   evaluated with their bounds.

A set **fits** only if it explains the numbers, not merely if nothing is left to
fail (``_Site.explains``):

- every output the declared set finds wrong is compared under it, with the same
  shape (a set that drops or reshapes the failing output is no match: without
  ``b_k``, a gradient bug seen only in ``grad b_k`` is no longer compared);
- the output agrees with it as the search judges (within its own bound);
- where the output fails the declared set, its bound is below half the
  output's own size (a set whose bound is vacuous on the case, as one-pass
  variance on a nearly constant column at float32, fits anything), and it is
  at least twice as close to the output as the declared set at the worst
  failing element (it resolves the departure it claims to explain).

A set that fits the shrunk case must fit every other failing example the
search kept (the cell's worst among them), and when more than one set fits, the
implementation is called again on fresh cases of the same structure and at the
entry's default sizes (a shrunk case at d_e = 2 lets unrelated sets give the
same numbers) until one remains: the others are excluded, or the diagnosis says
that it is **ambiguous** between the survivors (no case tried separates them).
A change that moves nothing on the cases tried (β of a norm that has none,
``norm_placement='paper'`` where it is ``'pre'``) is taken out of a set, and a
set left with none is no alternative. When no set fits, an output within the
bound of a narrower dtype (the declared set with that dtype's arithmetic) is
named as "computes in float32 inside", whether or not its values are float32
ones (a norm on ``x.float()`` multiplied by a float64 weight); otherwise the
closest set is shown with its error/bound factor.

The search is bounded (``seconds`` and ``evaluations``: the evaluations with a
bound) and says when it gave up, with how many pairs it screened of how many.
It also describes the shrunk case's salient structure in words (an empty
query column, a constant column, a repeated token, ℓ = 1, ...), since that is
often what makes two conventions differ. For a model, layer, loss, gradient
or step it adds where the implementation first departs from the spec
(``conformance/forensics/divergence/``: which layer, which sublayer). Everything is
plain data (``Diagnosis.to_dict``) for the JSON report and certificates.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec import SpecError, evaluate
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PRESETS, ROUNDING_ONLY, SWITCHES, VariantSet

from ..core.blocks import value_sets
from ..core.calling import Prepared
from ..core.case import Case
from ..core.dtypes import round_to
from ..core.judge import judge
from ..core.tolerances import Reference, ToleranceModelError, reference
from ..core.values import EPSILON_CANDIDATES, default_hyper

__all__ = ["DIAGNOSED_CHECKS", "LOCATED_CHECKS", "Diagnosis", "diagnose", "diagnose_failure", "number", "structure"]

#: the checks whose failure compares the implementation's output with the spec's (or its refusal)
DIAGNOSED_CHECKS = frozenset({"spec", "nan", "overflow", "refusal"})
#: checks with no value to match, where a model or layer is still located (which piece raises or
#: returns the wrong shape: conformance/forensics/divergence/)
LOCATED_CHECKS = frozenset({"exception", "shape"})

_PLACED = ("inside_root", "outside_root")

#: the search's budget per failure: wall seconds and spec evaluations (each a binary64 evaluation
#: plus the Monte Carlo lanes of the tolerance), checked before each evaluation
SECONDS = 10.0
EVALUATIONS = 400

#: the share of what is left of the time budget that screening the pairs may take (the rest evaluates
#: the pairs that pass with their bounds)
SCREEN_SHARE = 0.7

#: pairs ruled out by their exact values that are evaluated with their bounds all the same, the closest
#: first: where nothing fits, the closest set is shown with its error/bound factor
NEAREST_EVALUATED = 3

#: where nothing fits, the closest set is shown with its error/bound factor, and beyond this factor
#: marked as no hint (a set off by 1e10 tolerances explains nothing); the JSON has the three closest
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


def _items(rec: Mapping[str, Any]) -> frozenset:
    """A record's set as (switch, value) pairs: only the changes that differ from the declared set (a
    single ε change lists the declared placement beside the new ε; a preset lists only what
    differs), with the input reading, so that two records of one set compare equal."""
    reading = rec.get("_reading")
    extra = {(f"input {reading[0]}", reading[1])} if reading else set()
    return frozenset({(k, str(v)) for k, v in rec["_changes"].items()} | extra)


def _simplest(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The matches no other match explains with fewer changes (a subset of its changes, as listed: ε
    with its placement is one change, so ε = 1e-6 inside the root and ε = 1e-6 outside it are two
    alternatives, not one and a refinement)."""
    def listed(m: Mapping[str, Any]) -> set:
        return {(k, str(v)) for k, v in m["changes"].items()}

    return [m for m in matches if not any(listed(o) < listed(m) for o in matches)]


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
    #: pairs of single changes screened on the spec's binary64 values (no bound needed to rule out a
    #: pair that is no closer to the output than the declared set), and pairs there were
    screened: int = 0
    pairs: int = 0
    gave_up: bool = False  # the time or evaluation budget ended the search early
    #: False when a repeat call's output agrees with the declared set (the failure did not recur)
    recurred: bool = True
    seconds: float = 0.0
    budget: dict[str, Any] = field(default_factory=dict)  # {"seconds": s, "evaluations": n}
    #: where a model or layer first departs (conformance/forensics/divergence/), or None
    divergence: Optional[dict[str, Any]] = None
    divergence_lines: list[str] = field(default_factory=list)
    #: more than one set fits and no case tried separates them: ``matches`` are the survivors
    ambiguous: bool = False
    #: what the confirmation on other cases did: {"failing": examples the search kept, "fresh": fresh
    #: cases tried, "excluded": [{"changes", "by"}]} (empty when one set fit at once)
    confirmed: dict[str, Any] = field(default_factory=dict)
    #: the narrowest dtype whose bound the output lies within, when no set fits (else None)
    lower_precision: Optional[str] = None
    #: whether every output is also a value of ``lower_precision`` (computed there and widened at the
    #: end), rather than only within its bound (computed there inside: a norm on ``x.float()``)
    lower_values: bool = False
    #: the other narrower dtypes whose bound the outputs also lie within (the case cannot tell them apart)
    lower_also: list[str] = field(default_factory=list)
    #: the case diagnosed when it is not the failure's recorded one (a refusal's transformed case)
    on: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm, "dtype": self.dtype, "declared": self.declared,
            "matches": self.matches, "near_misses": self.near_misses, "structure": self.structure,
            "searched": self.searched, "evaluated": self.evaluated, "candidates": self.candidates,
            "screened": self.screened, "pairs": self.pairs,
            "gave_up": self.gave_up, "recurred": self.recurred, "seconds": round(self.seconds, 3),
            "budget": self.budget, "divergence": self.divergence, "ambiguous": self.ambiguous,
            "confirmed": self.confirmed, "lower_precision": self.lower_precision,
            "lower_values": self.lower_values, "lower_also": self.lower_also, "on": self.on,
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
            if self.ambiguous and len(simplest) > 1:
                return ("ambiguous between " + " | and ".join(parts) + more
                        + " (each fits every case tried; none separates them)")
            return "matches " + " | or ".join(parts) + more
        if self.lower_precision:
            low = self.lower_precision
            how = (f"its outputs are {low} values" if self.lower_values
                   else f"its outputs are {self.dtype} values carrying {low} rounding")
            also = "".join(f" (or {a}: within its bound too)" for a in self.lower_also)
            return (f"computes in {low} inside{also}: the output lies within {low}'s bound (the declared "
                    f"set with {low} arithmetic), not within {self.dtype}'s; {how}; no neighbouring "
                    f"variant set fits")
        text = f"no neighbouring variant set fits (declared {self.declared})"
        if self.near_misses and self.near_misses[0].get("excluded"):
            n = self.near_misses[0]
            text += f"; {_changes_text(n['changes'])} is within its bound but excluded: {n['excluded']}"
        elif self.near_misses:  # the closest set, with its factor: how far from fitting it is
            n = self.near_misses[0]
            far = "" if float(n["ratio"]) <= NEAREST_SHOWN else ", no hint"  # the JSON form: "inf" too
            text += f"; closest: {_changes_text(n['changes'])} (error/bound {_ratio(n['ratio'])}{far})"
        return text

    def lines(self) -> list[str]:
        """The report's lines (without indentation)."""
        if not self.searched and self.divergence is not None:  # a located exception: no variant search
            return list(self.divergence_lines)
        out = [f"likely cause: {self.summary()}"]
        if self.on:
            out.append(f"diagnosed on {self.on}")
        if self.structure:
            out.append("case structure: " + "; ".join(self.structure))
        how = " + ".join(self.searched) or "nothing"
        pairs = f", {self.screened} of {self.pairs} pairs screened" if self.pairs else ""
        tail = (f"gave up after {self.seconds:.1f} s, {self.evaluated} of {self.candidates} variant sets "
                f"evaluated{pairs}" if self.gave_up
                else f"{self.evaluated} variant sets evaluated{pairs} in {self.seconds:.1f} s")
        out.append(f"(searched {how}; {tail})")
        c = self.confirmed
        if c:
            out.append(f"(confirmed on {c['failing']} other failing example{'s' if c['failing'] != 1 else ''} "
                       f"and {c['fresh']} fresh case{'s' if c['fresh'] != 1 else ''}; "
                       f"{len(c['excluded'])} set{'s' if len(c['excluded']) != 1 else ''} excluded)")
        return out + list(self.divergence_lines)


def _ratio(r: Any) -> str:
    r = float(r)  # the JSON form writes an infinite ratio as "inf"
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
        options += [{"epsilon": e, "epsilon_placement": p} for p in _PLACED for e in EPSILON_CANDIDATES]
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
             evaluations: int = EVALUATIONS, failing: Sequence[tuple[Case, Optional[Mapping[str, np.ndarray]]]] = (),
             call: Optional[Call] = None, admits: Optional[Callable[[Mapping[str, int]], bool]] = None
             ) -> Diagnosis:
    """Which neighbouring variant sets the implementation's outputs on ``case`` agree with.

    ``impl_outputs``: the implementation's NumPy outputs on the case (inputs rounded to ``dtype``),
    or None when it raised: then the sets under which the spec refuses the case are the matches.
    ``failing``: other failing examples of the cell, (case, outputs) each: a set that fits must fit
    them too. ``call``: the implementation on another case (its outputs; None when it raises),
    to separate the sets that fit on fresh cases, and ``admits``: whether its limits admit sizes
    (the default sizes are tried only then). Stops after ``seconds`` or ``evaluations`` reference
    evaluations (``gave_up``); the confirmation on other cases has its own small allowance
    (``FAILING_KEPT`` failing examples, ``FRESH_CASES`` fresh ones)."""
    declared = declared or case.variant
    started = time.perf_counter()
    search = _Search(entry, case, impl_outputs, dtype, declared, precision, started, seconds, evaluations)
    d = search.d
    if search.declared_fits():  # a repeat call may not fail at all
        d.recurred = False
    else:
        single_recs = search.singles_and_presets()
        search.mask_readings()
        search.confirm(failing, call, admits)
        if not search.live():  # nothing fits every case tried: pairs of single changes
            search.pairs(single_recs)
            search.confirm(failing, call, admits)
        _conclude(d, list(search.tried.values()))
        if not d.matches:
            search.lower_precision()
    d.seconds = time.perf_counter() - started
    return d


#: the implementation on another case: its outputs, or None when it raises
Call = Callable[[Case], Optional[Mapping[str, np.ndarray]]]

#: other failing examples of the cell a fitting set must also fit (the worst first)
FAILING_KEPT = 2
#: fresh cases the implementation is called on while a set fits: value sets of the
#: shrunk case's structure, and one case at the entry's default sizes (first, when the shrunk case
#: is smaller: a degenerate case is where unrelated sets give the same numbers)
FRESH_CASES = 3
#: sets the shrunk case could not judge carried into the confirmation (the fewest changes first);
#: every set that fits is confirmed (the first fresh case excludes most of those a degenerate case
#: lets fit)
CONFIRMED_MAX = 12

#: the layer entries a first divergence walks (besides the models, their losses, gradients and steps)
_LAYER_ENTRIES = frozenset({"encoder_layer", "bert_layer", "gpt2_layer", "decoder_layer"})

#: narrower dtypes a dtype's output may have been computed in, the finest first (float16 keeps 11
#: significant bits, bfloat16 8). A float64 model is tried at float32 alone: what real code does
#: (``x.float()``), and float16's bound is wide enough to take in a small bug of a float64
#: computation (a weight off by 1e-4) that is no rounding at all
_NARROWER = {"float64": ("float32",), "float32": ("float16", "bfloat16"), "float16": (), "bfloat16": ()}


class _Site:
    """One case the sets are judged on: its inputs and parameters as the call received them, the
    implementation's outputs there (None: it raised), and the declared set's reference with, per
    output, the elements the declared set finds wrong (``failing``)."""

    def __init__(self, search: "_Search", case: Case, outputs: Optional[Mapping[str, np.ndarray]]) -> None:
        self.search, self.case, self.outputs = search, case, outputs
        self.prepared = Prepared(search.entry, case.inputs, case.params, search.dtype)
        self.declared_ref: Optional[Reference] = None
        self.declared_ok = False
        self.failing: dict[str, np.ndarray] = {}
        #: the case's own declared set: a failing example of the cell may have drawn another one than the
        #: shrunk case (a set's changes are applied to it: the bug is the same wherever it shows)
        self.declared = search.declared if case is search.case else case.variant
        #: the spec's binary64 values under a set (and reading) here: (variant hash, reading) -> outputs
        self._values: dict[tuple, Optional[dict[str, np.ndarray]]] = {}
        try:
            self.declared_ref = reference(search.entry, self.prepared.inputs, self.prepared.params,
                                          hyper=case.hyper, variant=self.declared, dtype=search.dtype,
                                          precision=search.precision)
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


class _Search:
    """The variant sets evaluated for one diagnosis (by variant hash and input reading), within a
    budget of ``seconds`` from ``started`` and ``evaluations``; ``d``, the ``Diagnosis`` being built,
    counts them and says when the budget ran out."""

    def __init__(self, entry: Entry, case: Case, impl_outputs: Optional[Mapping[str, np.ndarray]], dtype: str,
                 declared: VariantSet, precision: str, started: float, seconds: float, evaluations: int) -> None:
        self.entry, self.case, self.impl_outputs, self.dtype = entry, case, impl_outputs, dtype
        self.declared, self.precision = declared, precision
        self.started, self.seconds, self.evaluations = started, seconds, evaluations
        self.d = Diagnosis(entry.name, dtype, declared.describe(), structure=structure(entry, case),
                           budget={"seconds": seconds, "evaluations": evaluations})
        self.site = _Site(self, case, impl_outputs)
        self.prepared = self.site.prepared
        self.sites = [self.site]  # every failing example judged so far
        self.tried: dict[str, dict[str, Any]] = {}  # variant hash (and reading) -> result record
        #: the confirmation's cases, built once: the other failing examples (None: not yet), the
        #: fresh cases planned (None: not yet) and those built (index -> site and label, None: unusable)
        self._failing: Optional[list[tuple[_Site, str]]] = None
        self._fresh_planned: Optional[list[Case]] = None
        self._fresh_built: dict[int, Optional[tuple[_Site, str]]] = {}
        self._confirm_until: Optional[float] = None  # when the confirmation's own allowance ends

    def budget_left(self) -> bool:
        return self.d.evaluated < self.evaluations and time.perf_counter() - self.started < self.seconds

    def declared_fits(self) -> bool:
        """Whether the declared set itself fits the outputs (the failure did not recur)."""
        self.d.evaluated += 1
        return self.site.declared_ok

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
        for name, how, _ in readings:
            for ch in eq:
                self.evaluate(ch, reading=(name, how))

    def pairs(self, single_recs: list[tuple[str, Optional[dict[str, Any]]]]) -> None:
        """Only when no set fits after the confirmation: every pair of single changes of two switches.

        Each single change was evaluated once: what it does to the output on this case ranks the
        pairs (``_ranked``: the pair whose two moves, added, come closest to the implementation's
        output first). Every pair is then screened on the spec's binary64 values, without a bound
        (twenty times cheaper than a reference): a set fits only if it is at least twice as close to
        the output as the declared set at the worst failing element (``_resolves``), so a pair that
        is not is ruled out without its bound. The pairs that pass, and the closest few that do not
        (so that the closest set can be shown with its factor), are evaluated with their bounds.
        Only the time budget ends the screening early, and the report says how many pairs it
        screened of how many."""
        d = self.d
        scored = [(g, r) for g, r in single_recs if r is not None]
        pairs = [({**a["changes"], **b["changes"]}, (a, b)) for (ga, a), (gb, b) in itertools.combinations(scored, 2)
                 if ga != gb]
        if d.gave_up or not pairs:
            return
        if self.site.declared_ref is None or self.site.outputs is None:
            # nothing to rank or screen the pairs by (the declared set refuses the case, or the
            # implementation raised): each would need its full bound, and a refused case is one a
            # single convention (ε, an empty query's answer) explains; said, not silently dropped
            d.searched.append("no pairs (the declared set gives no values on the case to screen them by)")
            return
        d.pairs = len(pairs)
        d.candidates += len(pairs)
        d.searched.append("pairs")
        # the screening may take SCREEN_SHARE of what is left of the budget, the bounds the rest
        now = time.perf_counter()
        screen_until = now + SCREEN_SHARE * max(0.0, self.seconds - (now - self.started))
        passed: list[tuple[float, int, dict[str, Any]]] = []
        near: list[tuple[float, int, dict[str, Any]]] = []
        for n, changes in enumerate(self._ranked(pairs)):
            if time.perf_counter() >= screen_until:
                d.gave_up = True
                break
            applies, values = self.site.values(changes, None)
            d.screened += 1
            if not applies:
                continue
            passes, score = self._screen(values)
            if passes:
                passed.append((score, n, changes))
            elif math.isfinite(score):
                near.append((score, n, changes))
        # those that pass, the closest to the output first (on a degenerate case, a flipped
        # two-token softmax, many pairs move the output half-way; few reproduce it); then the
        # closest few that do not, so that the closest set is shown with its factor
        order = sorted(passed, key=lambda t: t[:2]) + sorted(near, key=lambda t: t[:2])[:NEAREST_EVALUATED]
        for _, _, changes in order:
            if self.evaluate(changes) is None and d.gave_up:
                break

    def _ranked(self, pairs: list[tuple[dict[str, Any], tuple[dict[str, Any], dict[str, Any]]]]
                ) -> list[dict[str, Any]]:
        """The pairs' changes, the most promising first: by how far the output lies from the declared
        set's values moved by both members' moves on this case (each member's values minus the
        declared set's, added), in units of the declared bound at the failing elements. A member
        that moves nothing here (a switch the case does not exercise) predicts its partner alone;
        a member with no values (refused, not judged) puts the pair last, in the old order of the
        members' own error/bound ratios."""
        site, ref = self.site, self.site.declared_ref
        assert ref is not None and site.outputs is not None  # ``pairs`` ranks only where both are
        names = [n for n in site.failing if np.asarray(ref.outputs[n]).dtype.kind == "f"]
        if not names:  # only exact outputs fail (tokens, masks): no distance to add moves in
            return [c for c, _ in sorted(pairs, key=lambda p: _score(p[1][0]["ratio"]) + _score(p[1][1]["ratio"]))]
        where = {n: site.failing[n] for n in names}
        got = np.concatenate([np.asarray(site.outputs[n], dtype=np.float64)[where[n]] for n in names])
        dv = np.concatenate([np.asarray(ref.outputs[n], dtype=np.float64)[where[n]] for n in names])
        scale = np.concatenate([np.asarray(ref.bound[n], dtype=np.float64)[where[n]] for n in names])
        scale = np.where(scale > 0, scale, np.finfo(np.float64).tiny)
        moves: dict[int, Optional[np.ndarray]] = {}

        def move(rec: dict[str, Any]) -> Optional[np.ndarray]:
            key = id(rec)
            if key not in moves:
                v = rec.get("_values")
                try:
                    m = None if v is None else np.concatenate(
                        [np.asarray(v[n], dtype=np.float64)[where[n]] for n in names]) - dv
                except (KeyError, IndexError, ValueError):  # the set drops or reshapes an output
                    m = None
                moves[key] = m
            return moves[key]

        def rank(p: tuple[dict[str, Any], tuple[dict[str, Any], dict[str, Any]]]) -> tuple[float, float]:
            a, b = p[1]
            ma, mb = move(a), move(b)
            fallback = _score(a["ratio"]) + _score(b["ratio"])
            if ma is None or mb is None:
                return math.inf, fallback
            with np.errstate(invalid="ignore", over="ignore"):
                off = np.abs(got - (dv + ma + mb)) / scale
            return (float(np.max(off)) if np.all(np.isfinite(off)) else math.inf), fallback

        return [c for c, _ in sorted(pairs, key=rank)]

    def _screen(self, values: Optional[Mapping[str, np.ndarray]]) -> tuple[bool, float]:
        """Whether a set with these binary64 values on the shrunk case may fit it (a necessary
        condition, ``_resolves`` without the bound), and its worst distance to the output at the
        failing elements in units of the declared bound (for showing the closest)."""
        site, ref = self.site, self.site.declared_ref
        if values is None or site.outputs is None or ref is None:  # ``pairs`` screens only where both are
            return False, math.inf
        worst = 0.0  # the distance to the output at the failing elements, in declared bounds
        for name, where in site.failing.items():
            cv = values.get(name)
            if cv is None or np.shape(cv) != where.shape:
                return False, math.inf
            dv = np.asarray(ref.outputs[name])
            if dv.dtype.kind != "f":
                if not np.any(np.asarray(cv)[where] != dv[where]):
                    return False, math.inf
                continue
            g = np.asarray(site.outputs[name], dtype=np.float64)
            c = np.asarray(cv, dtype=np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                spots = where & np.isfinite(g) & np.isfinite(dv) & np.isfinite(c)
                if not spots.any():
                    continue
                off_c, off_d = np.abs(g - c)[spots], np.abs(g - dv)[spots]
                bound = np.asarray(ref.bound[name], dtype=np.float64)[spots]
                off = float(np.max(off_c / np.where(bound > 0, bound, np.finfo(np.float64).tiny)))
                if float(np.max(off_c)) > 0.5 * float(np.max(off_d)):
                    return False, off
                worst = max(worst, off)
        return True, worst

    def evaluate(self, changes: dict[str, Any], preset: Optional[str] = None,
                 reading: Optional[tuple[str, str]] = None) -> Optional[dict[str, Any]]:
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
        rec = _record(changes, preset, reading, self.declared)
        # what other cases apply: only what differs from the declared set (ε = 1e-6 "inside the root"
        # where the root already held ε stays a change of ε alone on a case declared outside it)
        rec["_changes"] = {k: v for k, v in changes.items() if getattr(self.declared, k, None) != v}
        rec["_reading"] = reading
        rec["_origin"] = "preset" if preset else "set"
        self.tried[key] = rec
        rec.update(self.site.judge(changes, reading) or {})
        return rec

    # -- confirmation on other cases -------------------------------------------------------------
    def confirm(self, failing: Sequence[tuple[Case, Optional[Mapping[str, np.ndarray]]]], call: Optional[Call],
                admits: Optional[Callable[[Mapping[str, int]], bool]]) -> None:
        """The sets that fit the shrunk case, judged again: on the other failing examples the search
        kept (each must fit them too), then on fresh cases the implementation is called on (a
        single set that fits is confirmed too: on a degenerate shrunk case, H = 1 and a mask all
        True, a dropped head looks exactly like an inverted mask with zeros for empty queries).
        Excluded sets stop fitting (with the case that excluded them); a change that moves nothing
        on any case tried is taken out of a set (``_strip_inert``); more than one set left makes
        the diagnosis ambiguous. Called again after the pairs: the cases built for the first call
        are reused, and a set is judged once on each."""
        fits = sorted((r for r in self.tried.values() if r["fits"]), key=lambda r: (len(r["changes"]), r["ratio"]))
        # within their bound here but no evidence (uninformative on this case): another failing example
        # may give it, as long as no case contradicts them; those that reproduce the departure within a
        # bound wider than it ("cannot tell") before those whose bound is as large as the output
        pending = sorted((r for r in self.tried.values() if not r["fits"] and r.get("uninformative")),
                         key=lambda r: ("vacuous" in r.get("excluded", ""), len(r["changes"]), r["ratio"]))
        pending = pending[:CONFIRMED_MAX]
        if not fits and not pending:
            return
        info: dict[str, Any] = self.d.confirmed or {"failing": 0, "fresh": 0, "excluded": []}
        if self._confirm_until is None:  # its own allowance, as long as the search's
            self._confirm_until = time.perf_counter() + self.seconds
        for site, label in self._failing_sites(failing):
            self._sift(site, fits, info, label)
            self._contradict(site, pending, label)
            for r in pending:
                if r.get("evidence") and not r.get("contradicted") and not any(r is f for f in fits):
                    r["fits"], r["excluded"] = True, ""  # evidence here, and no case against it
                    fits.append(r)
        if call is not None:
            for site, label in self._fresh_sites(call, admits, fits):
                self._sift(site, fits, info, label)
                self._contradict(site, pending)
        # a set the cases tried cannot judge and none contradicts stays possible beside those that fit
        possible = ([r for r in pending if not r["fits"] and not r.get("contradicted") and not r.get("_unjudged")]
                    if any(r["fits"] for r in fits) else [])
        for r in possible:
            r["fits"], r["possible"] = True, "no case tried could judge it, and none contradicts it"
        self._strip_inert([r for r in fits + possible if r["fits"]])
        live = _simplest([r for r in fits + possible if r["fits"]])
        # a set that fits only with parameters the harness made up for it (γ = 1, β = 0 for a norm the
        # declared set has without them) is the same mathematics as one that needs none
        live = [r for r in live if not r.get("parameters")] or live
        # sets that differ only in switches that change rounding alone are one mathematics
        self.d.ambiguous = len({_mathematics(r) for r in live}) > 1
        info["failing"], info["fresh"] = len(self._failing or []), len(self._fresh)
        if (info["failing"] or info["fresh"]) and "confirmation on other cases" not in self.d.searched:
            self.d.searched.append("confirmation on other cases")
        if info["failing"] or info["fresh"]:
            self.d.confirmed = info

    def _confirm_over(self) -> bool:
        """Whether the confirmation's allowance has run out (then the search gave up)."""
        if self._confirm_until is not None and time.perf_counter() > self._confirm_until:
            self.d.gave_up = True
            return True
        return False

    def live(self) -> bool:
        """Whether any set still fits (after the confirmation)."""
        return any(r["fits"] and not r.get("_merged") for r in self.tried.values())

    def _failing_sites(self, failing: Sequence[tuple[Case, Optional[Mapping[str, np.ndarray]]]]
                       ) -> list[tuple[_Site, str]]:
        """The cell's other failing examples as sites (built once): those that fail the declared set
        the way the shrunk case does (both return, or both raise)."""
        if self._failing is None:
            self._failing = []
            for case, outputs in list(failing)[:FAILING_KEPT]:
                if (outputs is None) != (self.impl_outputs is None):
                    continue  # raised where the shrunk case returned (or the reverse): another failure
                site = _Site(self, case, outputs)
                if site.declared_ref is None or site.declared_ok:
                    continue  # not a failing example under this declared set: it confirms nothing
                self.sites.append(site)
                self._failing.append((site, f"another failing example of the cell ({case.describe()})"))
        return self._failing

    def _fresh_sites(self, call: Call, admits: Optional[Callable[[Mapping[str, int]], bool]],
                     fits: list[dict[str, Any]]) -> Any:
        """The fresh cases as sites, each built (the implementation called) once and only while a set
        still fits; kept for a later call (None: a case that separates nothing, it raised or the
        declared set cannot judge it)."""
        if self._fresh_planned is None:
            self._fresh_planned = self._fresh_cases(admits)
        for i, fresh in enumerate(self._fresh_planned):
            if not any(r["fits"] for r in fits):
                return
            if i not in self._fresh_built:
                try:
                    outputs = call(fresh)
                except Exception:  # noqa: BLE001 - a fresh case the implementation cannot take separates nothing
                    outputs = None
                site = _Site(self, fresh, outputs)
                ok = site.declared_ref is not None and outputs is not None
                self._fresh_built[i] = (site, f"a fresh case ({fresh.describe()})") if ok else None
            built = self._fresh_built[i]
            if built is not None:
                yield built

    @property
    def _fresh(self) -> list[tuple[_Site, str]]:
        return [b for _, b in sorted(self._fresh_built.items()) if b is not None]

    def _strip_inert(self, live: list[dict[str, Any]]) -> None:
        """Take out of each set a change that moves nothing: with it reverted, the spec's binary64
        values are the same on every case tried (β of a norm that has none, ``norm_placement='paper'``
        where it is ``'pre'``); a set with no change left computes the declared set's numbers there
        and is no alternative at all. Two sets that become one keep one record (the other's presets
        join it). The spec decides what moves, on the cases at hand; no list of inert switches is
        kept by hand."""
        sites = [self.site] + [s for s, _ in (self._failing or [])] + [s for s, _ in self._fresh]
        kept: dict[frozenset, dict[str, Any]] = {}
        # a single change or pair before a preset's projection onto the entry: where both are one set,
        # the record kept lists the change as the search made it (ε with its placement)
        for r in sorted(live, key=lambda r: r.get("_origin") == "preset"):
            changes, reading = dict(r["_changes"]), r["_reading"]
            for key in list(changes) + (["input"] if reading else []):
                fewer = {k: v for k, v in changes.items() if k != key}
                less = None if key == "input" else reading
                if self._same(sites, changes, reading, fewer, less):
                    shown = f"input {reading[0]}" if key == "input" and reading else key
                    r["changes"].pop(shown, None)
                    r["declared"].pop(shown, None)
                    r.setdefault("inert", []).append(shown)
                    changes, reading = fewer, less
            r["_changes"], r["_reading"] = changes, reading
            if not changes and reading is None:  # the declared set's own numbers on every case tried
                r["fits"], r["_merged"] = False, True
                continue
            items = _items(r)
            if items in kept:
                other = kept[items]
                other["presets"] += [p for p in r["presets"] if p not in other["presets"]]
                r["fits"], r["_merged"] = False, True
            else:
                kept[items] = r

    def _same(self, sites: list[_Site], a: Mapping[str, Any], ra: Optional[tuple[str, str]],
              b: Mapping[str, Any], rb: Optional[tuple[str, str]]) -> bool:
        """Whether two sets (changes and reading each) give the same binary64 values on every site
        where both apply (the shrunk case at least)."""
        for i, site in enumerate(sites):
            oka, va = site.values(a, ra)
            okb, vb = site.values(b, rb)
            if not (oka and okb):
                if i == 0:
                    return False
                continue
            if (va is None) != (vb is None):
                return False
            if va is None or vb is None:
                continue
            if set(va) != set(vb) or not all(
                    np.shape(va[k]) == np.shape(vb[k]) and np.array_equal(va[k], vb[k], equal_nan=True)
                    for k in va):
                return False
        return True

    def _sift(self, site: _Site, fits: list[dict[str, Any]], info: dict[str, Any], label: str) -> None:
        """Exclude the sets the outputs at ``site`` contradict (outside their bound, or a failing
        output dropped); a set this case cannot judge (vacuous here) stays."""
        for r in fits:
            if not r["fits"] or id(site) in r.setdefault("_seen", set()):
                continue
            r["_seen"].add(id(site))
            if self._confirm_over():  # a set not confirmed is not named (the report says it gave up)
                r["fits"], r["excluded"] = False, "not confirmed: the time budget ran out"
                continue
            got = site.judge(r["_changes"], r["_reading"])
            info["evaluations"] = info.get("evaluations", 0) + 1
            if got is not None and not got["fits"] and not got.get("uninformative"):
                r["fits"], r["excluded"] = False, f"it does not fit {label}"
                info["excluded"].append({"changes": _public(r)["changes"], "by": label})

    def _contradict(self, site: _Site, pending: list[dict[str, Any]], label: str = "") -> None:
        """Judge the sets no case could judge yet: evidence for them (``label``: a failing example),
        or a contradiction."""
        for r in pending:
            if r.get("contradicted") or r["fits"] or id(site) in r.setdefault("_seen", set()):
                continue
            r["_seen"].add(id(site))
            if self._confirm_over():  # not judged on every case: not "possible" either
                r["_unjudged"] = True
                continue
            got = site.judge(r["_changes"], r["_reading"])
            if got is None:
                continue
            if got["fits"] and label:
                r["evidence"] = label
            elif not got["fits"] and not got.get("uninformative"):
                r["contradicted"] = True

    def _fresh_cases(self, admits: Optional[Callable[[Mapping[str, int]], bool]]) -> list[Case]:
        """Cases of the shrunk case's structure with new values, and one at the entry's default sizes
        (first when the shrunk case is smaller somewhere) where the implementation's limits admit it."""
        out = value_sets(self.case, 1 + FRESH_CASES, self.dtype)[1:]
        hyper = default_hyper(self.entry, self.declared)
        if hyper != self.case.hyper and (admits is None or admits(hyper)):
            try:
                big = Case.build(self.entry, hyper, self.declared, seed=1, style=self.case.style, dtype=self.dtype)
            except (SpecError, ValueError, KeyError):
                return out
            smaller = any(self.case.hyper.get(k, v) < v for k, v in hyper.items())
            out = [big] + out if smaller else out + [big]
        return out

    # -- a lower precision ---------------------------------------------------------------------------
    def lower_precision(self) -> None:
        """When no set fits: the narrower dtype (the closest first) within whose bound the outputs lie
        on every failing example, the declared set's reference bounded for that dtype's arithmetic.

        The outputs need not be values of the narrower dtype: a model that computes its norm on
        ``x.float()`` and multiplies the result by a float64 weight (LLaMA's ``RMSNorm`` in Meta's
        ``llama/model.py`` and karpathy's ``llama2.c`` ``model.py``), or keeps RoPE tables in
        float32, returns float64 values that carry float32 rounding inside. The bound is derived at
        the narrower dtype on the case's own inputs (where the model widened them, as those codes do)
        and on the inputs rounded to it (where the model cast its inputs first); either holding is
        the fingerprint. ``lower_values`` says whether every output is also a value of that dtype
        (computed there and widened at the end)."""
        if self.impl_outputs is None:
            return
        self.d.searched.append("lower precisions")
        held = [n for n in _NARROWER.get(self.dtype, ()) if all(self._within_at(site, n) for site in self.sites)]
        if held:
            # float16's bound is SAFETY = 8 times its spread, as wide as bfloat16's rounding: where both
            # hold, the case cannot tell which, and both are said
            self.d.lower_precision, self.d.lower_also = held[0], held[1:]
            self.d.lower_values = all(_values_of(site.outputs, held[0]) for site in self.sites
                                      if site.outputs is not None)

    def _within_at(self, site: _Site, narrow: str) -> bool:
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
                ref = reference(self.entry, inputs, params, hyper=site.case.hyper, variant=site.declared,
                                dtype=narrow, precision=self.precision)
            except (SpecError, ToleranceModelError):
                continue
            if _within(site.outputs, ref) and not _vacuous_at(site.outputs, ref, site.failing):
                return True
        return False


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


def _mathematics(rec: Mapping[str, Any]) -> frozenset:
    """A set's changes without the switches that change rounding alone (``ROUNDING_ONLY``)."""
    return frozenset((k, str(v)) for k, v in rec["changes"].items() if k not in ROUNDING_ONLY)


def _record(changes: dict[str, Any], preset: Optional[str], reading: Optional[tuple[str, str]],
            declared: VariantSet) -> dict[str, Any]:
    """A fresh record (not fitting yet)."""
    rec: dict[str, Any] = {"changes": dict(changes), "declared": {k: getattr(declared, k) for k in changes},
                           "presets": [preset] if preset else [], "ratio": math.inf, "fits": False}
    if reading is not None:  # the same switches, an input read another way (a mask's polarity)
        name, how = reading
        rec["changes"] = {f"input {name}": how, **rec["changes"]}
        rec["declared"] = {f"input {name}": _AS_DECLARED[how], **rec["declared"]}
    return rec


def _conclude(d: Diagnosis, recs: list[dict[str, Any]]) -> None:
    """The matches (fewest changes first) and the three nearest misses among the evaluated sets."""
    recs = [r for r in recs if not r.get("_merged")]  # one record per set: its duplicates are merged
    fits = [r for r in recs if r["fits"]]
    # fewest changes first, a set needing made-up parameters after one that needs none
    fits.sort(key=lambda r: (bool(r.get("parameters")), len(r["changes"]), r["ratio"]))
    d.matches = [_public(r) for r in fits]
    misses = [r for r in recs if not r["fits"] and math.isfinite(r["ratio"])]
    # a set another case excluded first, one the case could not tell before one whose bound is vacuous,
    # then the closest by its error/bound factor
    misses.sort(key=lambda r: (not r.get("excluded"), "vacuous" in r.get("excluded", ""), r["ratio"]))
    d.near_misses = [_public(r) for r in misses[:3]]
    if not d.gave_up:  # every planned set was evaluated (a preset equal to a single change counts once)
        d.candidates = d.evaluated


def _without_neutral_value(name: str) -> bool:
    """A weight no value of which stands for its absence: a further hidden layer of a deeper MLP
    (``mlp_hidden.{k}.W``/``.b``: act(W h + b) is never h for every h) or the linear branch of a gated
    one (``W_mlp{i}_lin``/``b_mlp{i}_lin``: without its bias, no V makes V x = 1)."""
    return name.startswith("mlp_hidden.") or ".mlp_hidden." in name or name.endswith("_lin")


def _adapt_params(entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
                  params: Mapping[str, np.ndarray]) -> Optional[tuple[Mapping[str, np.ndarray], list[str]]]:
    """The case's parameters fitted to ``variant``'s parameter set: those it does not take are
    dropped (the implementation ignored them: no b_u under logit_bias=False, no final γ, β); those
    it takes and the case lacks get the value an implementation without them computes with (γ = 1,
    biases and β = 0, an untied W_u = W_eᵀ). None when ``variant`` takes weights the case lacks
    and that have no such value (``_without_neutral_value``): an implementation called with the
    case's parameters cannot have computed under that set, so it is not judged."""
    try:
        shapes = entry.param_shapes(dict(hyper), variant)
    except (SpecError, KeyError, ValueError):
        return params, []
    if set(shapes) == set(params):
        return params, []
    if any(_without_neutral_value(name) for name in shapes if name not in params):
        return None
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
            **({"refused": True} if rec.get("refused") else {}),
            **({"excluded": rec["excluded"]} if rec.get("excluded") else {}),
            **({"possible": rec["possible"]} if rec.get("possible") else {})}


def diagnose_failure(member: Any, case: Optional[Case], check: str, dtype: str, *, timeout: float,
                     seconds: float = SECONDS, failing: Sequence[Case] = ()) -> Optional[Diagnosis]:
    """The runner's hook: call the member once more on the shrunk case and diagnose its outputs,
    with the other failing examples the search kept (``failing``: the worst first) and fresh cases
    the member is called on. None when the check is not about values (a timeout, a crash, a
    mutation, ...) or when anything goes wrong (a diagnosis is a help; it must never cost the
    failure its report)."""
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

    entry = case.entry

    def call(c: Case) -> Optional[Mapping[str, np.ndarray]]:
        p = Prepared(entry, c.inputs, c.params, dtype)
        try:
            return call_member(member, entry, p.inputs, p.params, c, dtype, timeout, False)[0]
        except Exception:  # noqa: BLE001 - it raised: the refusal reading of the case
            return None

    try:
        prepared = Prepared(entry, case.inputs, case.params, dtype)
        outputs, _ = call_member(member, entry, prepared.inputs, prepared.params, case, dtype, timeout, False)
        d = diagnose(entry, case, outputs, dtype, case.variant, precision=member.impl.precision_for(dtype),
                     seconds=seconds, failing=[(c, call(c)) for c in list(failing)[:FAILING_KEPT]], call=call,
                     admits=lambda hyper: bool(member.impl.admits(entry.name, hyper)))
    except Exception:  # noqa: BLE001 - see above
        return None
    if d.recurred:  # where inside a model or layer it first departs (None for other entries)
        where = _located(member, case, dtype, timeout, failing, call)
        if where is not None:
            d.divergence = where.to_dict()
            d.divergence_lines = where.lines()
    return d


def _located(member: Any, case: Case, dtype: str, timeout: float, failing: Sequence[Case], call: Call) -> Any:
    """Where the failure first departs, walked on the largest failing case at hand first: the cell's
    worst failing examples larger than the shrunk case, then a case at the entry's default sizes
    if the implementation fails there too, then the shrunk case. A degenerate shrunk case (d_e = 2,
    one layer, ℓ = 1) often cannot tell a norm from the residual beside it, where a larger one can;
    the first walk that names one place is kept (the detail says which case it walked), else the
    shrunk case's (its candidates). Within the divergence module's time budget in all."""
    from .divergence import MODEL_OF, SECONDS as WALK_SECONDS, locate_failure

    if case.algorithm not in MODEL_OF and case.algorithm not in _LAYER_ENTRIES:
        return None
    started = time.perf_counter()
    walks: list[tuple[str, Case]] = [("the cell's worst failing example", c) for c in failing
                                     if c.size() > case.size()][:1]
    big = _failing_default(member, case, dtype, call)
    if big is not None:
        walks.append(("a failing case at the entry's default sizes", big))
    walks.append(("", case))
    last = None
    for label, c in walks:
        left = WALK_SECONDS - (time.perf_counter() - started)
        if left <= 1.0 and c is not case:
            continue
        where = locate_failure(member, c, dtype, timeout=timeout, seconds=max(left, 1.0))
        if where is None:
            continue
        if label:
            where.detail = f"{where.detail}; walked on {label}, {c.describe()}" if where.detail else \
                f"walked on {label}, {c.describe()}"
        if where.found and not where.candidates:
            return where
        last = where if last is None or c is case else last
    return last


def _failing_default(member: Any, case: Case, dtype: str, call: Call) -> Optional[Case]:
    """A case at the entry's default sizes, of the shrunk case's variant set and style, on which the
    implementation fails the declared set (None: the shrunk case is not smaller, the limits do not
    admit the default sizes, or it passes there)."""
    entry = case.entry
    hyper = default_hyper(entry, case.variant)
    if not any(case.hyper.get(k, v) < v for k, v in hyper.items()) or not member.impl.admits(entry.name, hyper):
        return None
    try:
        big = Case.build(entry, hyper, case.variant, seed=1, style=case.style, dtype=dtype)
        outputs = call(big)
        if outputs is None:
            return None
        p = Prepared(entry, big.inputs, big.params, dtype)
        ref = reference(entry, p.inputs, p.params, hyper=big.hyper, variant=big.variant, dtype=dtype,
                        precision=member.impl.precision_for(dtype))
        return None if judge(entry, outputs, ref).ok else big
    except Exception:  # noqa: BLE001 - a help: no larger case, the shrunk one is walked
        return None


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
