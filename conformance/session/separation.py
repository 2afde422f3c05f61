"""What a low-precision certificate cannot tell apart (``indistinguishable``).

A pass at bfloat16 or float16 proves less than a pass at float32: the bound
(SAFETY × the rounding spread, docs/tolerances.md) is wide enough there that
some *other* conventions fit it too. GELU's tanh form differs from the erf
form by a few thousandths, well inside a bfloat16 bound on a layer's output;
an implementation computing either passes a cell declared with the other.
The certificate says so, per cell, so that no one reads more into it than it
proves.

For a cell (algorithm, dtype) the alternatives are the single switch changes
of the set the cell is judged under (every value of each switch the entry
reads, ε with its placement as one switch: ``identify.groups`` and
``identify.options``). Each is measured on cases: on each the spec is
evaluated in binary64 under the alternative and compared with the cell's
reference under the declared set (the spec's binary64 value and the bound
the search judges with, at the dtype and the plugin's numerics,
``Implementation.precision_for``). The alternative *cannot be told apart*
when it stays within that bound on every case (``diagnosis.site._failing_elements``
finds no element outside it); its ratio is the largest |difference| / bound
over the cases. Alternatives whose outputs are bit-identical to the declared
set's on every case (a switch the case does not exercise) are counted, not
listed; so are those the cases cannot judge (they need other parameters, or
the spec refuses them there).

Which cases. A certificate measures on the examples its search actually ran
and passed (``from_cases``: the runner keeps at most 32 value sets per
bfloat16 and float16 cell when certifying, a uniform sample of all it passed
chosen by a hash of their values, ``running.results.keep_sample``), so a
change is listed only if no kept example separates it (a fixed sample of three or four
well-scaled cases listed ε = 1e-6 as indistinguishable from 1e-5 at bfloat16
where the search told them apart; conversely a designed case the search
never ran says nothing about the plugin, so it separates nothing here).
``indistinguishable`` measures a designed sample instead: one case per value
style the entry shows (``available_styles``, at most ``CASES``, the
``SEPARATING`` styles first), at the sizes identify uses
(``identify.case_hyper``, within the plugin's limits), inputs rounded to the
dtype; it needs no run (tests, a cell whose examples were not kept).

The measurement evaluates the spec only (never the plugin), so it runs in
the certifying process after the searches; it is bounded by ``SECONDS`` per
cell and ``ALTERNATIVES`` alternatives, and a certificate's cells share
``FRACTION`` of the searches' wall time (at least ``MIN_SECONDS``); budgets
are CPU seconds of this process (``time.process_time``), so a machine busy
with other work lists what an idle one lists, only later. An alternative is
dropped at the first case that separates it (the examples of the
``SEPARATING`` styles are tried first). ``complete`` is False when the
budget ended it first (a kept example whose reference it could not compute
in time is not measured, and counts as not done). It is a property of the
spec, the dtype, the declared set, the plugin's numerics and the examples,
so cells on several devices share one measurement.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ftspec.impls.api import Implementation
from ftspec.spec import evaluate
from ftspec.spec.errors import SpecError
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import ROUNDING_ONLY, SAME_MATHEMATICS, VariantSet

from ..core.calling import Prepared
from ..core.case import Case
from ..core.examining import judged_for
from ..core.strategies import available_styles
from ..core.tolerances import Reference, ToleranceModelError
from ..core.values import EPSILONS
from ..forensics.diagnosis.site import _failing_elements
from ..forensics.identify import IdentifyError, call_variant, case_hyper, groups, options, project
from ..forensics.identify.observations import _params_for
from ..running.results import SAMPLED_DTYPES

__all__ = ["ALTERNATIVES", "CASES", "DTYPES", "FRACTION", "MIN_SECONDS", "SECONDS", "SEPARATING", "change_text",
           "from_cases", "from_examples", "indistinguishable", "listings"]

#: the dtypes whose cells get the listing (those whose cells keep their passing examples): at
#: float32 and float64 the bound separates every catalogue difference the search can show
DTYPES = SAMPLED_DTYPES
#: sample cases per cell (one per value style, ``SEPARATING`` first, then in ``STYLES`` order)
CASES = 6
#: the value styles built to tell conventions apart where the dtype can (strategies/_styles.py)
SEPARATING = ("near-epsilon", "near-constant")
#: CPU seconds and alternatives per cell
SECONDS = 3.0
ALTERNATIVES = 64


def change_text(changes: Mapping[str, Any]) -> str:
    """``switch=value[,switch=value]``: what ``spec.variants.parse`` reads after ``preset+``."""
    return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in changes.items())


def _alternatives(entry: Entry, declared: VariantSet) -> list[dict[str, Any]]:
    """Every single switch change of ``declared`` that ``entry`` reads (ε and its placement as one, ε
    from the catalogue the search draws, ``values.EPSILONS``), as the changes that make it."""
    out = []
    for g in groups(entry):
        values = options(g) if g != "epsilon" else [{"epsilon": 0.0, "epsilon_placement": "none"}] + [
            {"epsilon": e, "epsilon_placement": p} for p in ("inside_root", "outside_root") for e in sorted(EPSILONS)]
        for opt in values:
            changes = {k: v for k, v in opt.items() if getattr(declared, k) != v}
            if changes and changes not in out:
                out.append(changes)
    return out


def _same_mathematics(declared: VariantSet, changes: Mapping[str, Any]) -> bool:
    """Whether the change is the same mathematics as ``declared`` (a switch that changes rounding only,
    ``ROUNDING_ONLY``, or a value ``SAME_MATHEMATICS`` equates with the declared one): no dtype can
    tell it apart, so it is counted, not listed."""
    def same(k: str, v: Any) -> bool:
        d = getattr(declared, k)
        return k in ROUNDING_ONLY or SAME_MATHEMATICS.get((k, v)) == d or SAME_MATHEMATICS.get((k, d)) == v

    return all(same(k, v) for k, v in changes.items())


def _ratio(outputs: Mapping[str, np.ndarray], ref: Reference) -> float:
    """max |outputs − ref| / bound over every element (0 where both agree exactly, inf where a bound
    of 0, a NaN or an infinity is not matched)."""
    worst = 0.0
    for name, want in ref.outputs.items():
        got = np.asarray(outputs[name])
        if got.shape != want.shape:
            return math.inf
        if want.dtype.kind != "f":
            if np.any(got != want):
                return math.inf
            continue
        g = got.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            same = (g == want) | (np.isnan(g) & np.isnan(want))
            diff = np.where(same, 0.0, np.abs(g - want))
            b = np.asarray(ref.bound[name], dtype=np.float64)
            r = np.where(diff == 0, 0.0, np.where(b > 0, diff / np.where(b > 0, b, 1.0), math.inf))
        r = np.where(np.isnan(r), math.inf, r)
        if r.size:
            worst = max(worst, float(np.max(r)))
    return worst


def _cases(impl: Implementation, entry: Entry, declared: VariantSet, dtype: str, deadline: float
           ) -> list[tuple[Case, Prepared, Reference]]:
    """The sample: one case per value style, rounded to ``dtype``, with the declared set's reference
    under the plugin's numerics; cases the spec refuses or cannot bound are left out, and so are
    those after the ``deadline`` (``time.process_time``)."""
    try:
        hyper = case_hyper(impl, entry, declared)
    except IdentifyError:
        return []
    out: list[tuple[Case, Prepared, Reference]] = []
    shown = available_styles(entry, declared, hyper, dtype)
    ordered = [s for s in SEPARATING if s in shown] + [s for s in shown if s not in SEPARATING]
    # each style keeps its seed (its place among the styles shown), so the cases of the first four,
    # the sample before SEPARATING, are measured as before: the sample only grows, and a change it
    # separated stays separated
    for style in ordered[:CASES]:
        seed = shown.index(style)
        if out and time.process_time() > deadline:
            break
        try:
            case = Case.build(entry, dict(hyper), declared, seed=seed, style=style, dtype=dtype)
            judged = judged_for(impl, case, dtype, batch=False)
        except (SpecError, ToleranceModelError, ValueError):
            continue
        if judged.reference.in_range and judged.reference.sampled is None:
            out.append((case, judged.prepared, judged.reference))
    return out


def _evaluate(entry: Entry, prepared: Prepared, hyper: Mapping[str, int], variant: VariantSet
              ) -> Optional[dict[str, np.ndarray]]:
    """The spec's binary64 outputs under ``variant`` on the prepared case (None: the case needs other
    parameters under it, or the spec refuses it)."""
    params, _ = _params_for(entry, hyper, variant, prepared.params)
    if params is None:
        return None
    try:
        raw = evaluate(entry.name, {k: v.tolist() for k, v in prepared.inputs.items()},
                       {k: v.tolist() for k, v in params.items()}, hyper=dict(hyper), variant=variant)
    except (SpecError, ValueError, KeyError, ZeroDivisionError, OverflowError):
        return None
    return {k: np.asarray(v) for k, v in raw.items()}


def indistinguishable(impl: Implementation, algorithm: str, dtype: str, *, seconds: float = SECONDS,
                      alternatives: int = ALTERNATIVES) -> Optional[dict[str, Any]]:
    """The record of what a cell of ``impl`` at ``algorithm`` and ``dtype`` cannot tell apart (module
    docstring); None at a dtype of full precision or for an entry without switches.

    {"under": {"name", "json"}: the set the changes are made to (the plugin's first declared set for
    the algorithm, projected on the switches it reads; the paper's for "all"), "cases": the sample
    cases measured, "alternatives": [{"change": "switch=value,...", "ratio": difference/bound}, ...]
    (those within the bound on every case, the nearest to being told apart first), "separated",
    "same", "untestable": counts of the others, "complete": every alternative judged within the
    budget}."""
    found = _declared(impl, algorithm, dtype)
    if found is None:
        return None
    entry, declared = found
    deadline = time.process_time() + seconds
    record = _record(declared)
    if seconds <= 0:
        return record
    return _measure(entry, declared, _cases(impl, entry, declared, dtype, deadline), record, deadline, alternatives)


def _declared(impl: Implementation, algorithm: str, dtype: str) -> Optional[tuple[Entry, VariantSet]]:
    """The entry and the plugin's first set declared for it, projected on the switches it reads;
    None at a dtype of full precision, for an entry without switches or a declaration identify
    cannot read."""
    entry = REGISTRY[algorithm]
    if dtype not in DTYPES or not entry.switches:
        return None
    try:
        return entry, project(call_variant(impl, None, algorithm), entry)
    except IdentifyError:
        return None


def _record(declared: VariantSet) -> dict[str, Any]:
    """A record under ``declared`` with nothing measured yet (``indistinguishable``'s fields)."""
    return {"under": {"name": declared.describe(), "json": json.loads(declared.to_json())}, "cases": 0,
            "alternatives": [], "separated": 0, "same": 0, "untestable": 0, "complete": False}


def from_examples(algorithm: str, declared: VariantSet, dtype: str,
                  examples: Sequence[tuple[Case, Prepared, Reference]], *, seconds: float = SECONDS,
                  alternatives: int = ALTERNATIVES) -> Optional[dict[str, Any]]:
    """``indistinguishable``'s record measured on ``examples``: (case, prepared case, the reference the
    search judged it with) of value sets a search actually ran and passed under ``declared``, in
    place of the designed sample. A change is listed only if no example run separates it; a
    runner that keeps its passing examples (or the first of them) hands them here."""
    entry = REGISTRY[algorithm]
    if dtype not in DTYPES or not entry.switches:
        return None
    declared = project(declared, entry)
    record = _record(declared)
    usable = [(c, p, r) for c, p, r in examples if r.in_range and r.sampled is None]
    return _measure(entry, declared, usable, record, time.process_time() + seconds, alternatives)


def from_cases(impl: Implementation, algorithm: str, dtype: str, cases: Sequence[Case], *,
               seconds: float = SECONDS, alternatives: int = ALTERNATIVES) -> Optional[dict[str, Any]]:
    """``indistinguishable``'s record measured on ``cases``: value sets a search of ``impl`` ran and
    passed at ``dtype`` (``Cell.sample``), each judged again against its reference under its own
    set at the plugin's numerics (evaluated here, as a case file's replay evaluates it: within the
    budget, the examples of the ``SEPARATING`` styles first). The record is under the plugin's
    first set declared for the algorithm, projected on the switches it reads, and uses the cases
    drawn under it (a plugin declaring "all": the set most of them were drawn under). None at a
    dtype of full precision or for an entry without switches."""
    found = _declared(impl, algorithm, dtype)
    if found is None:
        return None
    entry, declared = found
    deadline = time.process_time() + seconds
    mine = [c for c in cases if c.algorithm == algorithm and project(c.variant, entry) == declared]
    if not mine and impl.variants_for(algorithm) == "all" and cases:
        drawn = [project(c.variant, entry) for c in cases if c.algorithm == algorithm]
        if drawn:
            declared = max(drawn, key=lambda v: (drawn.count(v), -drawn.index(v)))
            mine = [c for c, v in zip(cases, drawn) if v == declared]
    record = _record(declared)
    if seconds <= 0:
        return record
    ordered = [c for c in mine if c.style in SEPARATING] + [c for c in mine if c.style not in SEPARATING]
    sample: list[tuple[Case, Prepared, Reference]] = []
    cut = False
    for case in ordered:
        if time.process_time() > deadline:
            cut = True
            break
        try:
            judged = judged_for(impl, case, dtype, batch=False)
        except (SpecError, ToleranceModelError, ValueError):
            continue
        if judged.reference.in_range and judged.reference.sampled is None:
            sample.append((case, judged.prepared, judged.reference))
    record = _measure(entry, declared, sample, record, deadline, alternatives)
    record["complete"] = record["complete"] and not cut
    return record


def _measure(entry: Entry, declared: VariantSet, sample: Sequence[tuple[Case, Prepared, Reference]],
             record: dict[str, Any], deadline: float, alternatives: int) -> dict[str, Any]:
    """``record`` filled in from ``sample``: each single switch change of ``declared`` evaluated on every
    case, dropped at the first that separates it."""
    record["cases"] = len(sample)
    if not sample:
        record["complete"] = True
        return record
    listed = []
    for n, changes in enumerate(_alternatives(entry, declared)):
        if n >= alternatives or time.process_time() > deadline:
            break
        try:
            variant = declared.replace(**changes)
        except ValueError:
            continue
        if _same_mathematics(declared, changes):
            record["same"] += 1
            continue
        worst, identical, judged = 0.0, True, 0
        for case, prepared, ref in sample:
            got = _evaluate(entry, prepared, case.hyper, variant)
            if got is None or set(got) != set(ref.outputs):
                continue
            judged += 1
            if _failing_elements(got, ref):
                worst = math.inf
                break
            r = _ratio(got, ref)
            worst = max(worst, r)
            identical = identical and r == 0.0 and all(
                np.array_equal(got[k], ref.outputs[k], equal_nan=True) for k in ref.outputs)
        if not judged:
            record["untestable"] += 1
        elif not math.isfinite(worst) or worst > 1.0:
            record["separated"] += 1
        elif identical:
            record["same"] += 1
        else:
            listed.append({"change": change_text(changes), "ratio": float(f"{worst:.3g}")})
    else:
        record["complete"] = True
    record["alternatives"] = sorted(listed, key=lambda a: (-a["ratio"], a["change"]))
    return record


#: the share of the searches' wall time the listings of a certificate may take, and the least
#: time they get (a run of a few seconds still lists its cells)
FRACTION = 0.15
MIN_SECONDS = 2.0


def listings(impl: Implementation, cells: list[tuple[str, str]], seconds: float,
             samples: Optional[Mapping[tuple[str, str], Sequence[Case]]] = None
             ) -> dict[tuple[str, str], dict[str, Any]]:
    """The record of each (algorithm, dtype) of ``cells`` (those at ``DTYPES``), in order, sharing
    ``seconds`` in all, each at most ``SECONDS``: a cell the budget does not reach records 0 cases
    and ``complete`` False. With ``samples`` ({(algorithm, dtype): the passing value sets its search
    kept}), measured on those (``from_cases``: a cell that kept none records 0 cases); without,
    on the designed sample (``indistinguishable``)."""
    deadline = time.process_time() + seconds
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for algorithm, dtype in cells:
        if (algorithm, dtype) in out or dtype not in DTYPES:
            continue
        left = min(SECONDS, max(0.0, deadline - time.process_time()))
        record = (indistinguishable(impl, algorithm, dtype, seconds=left) if samples is None
                  else from_cases(impl, algorithm, dtype, samples.get((algorithm, dtype), ()), seconds=left))
        if record is not None:
            out[(algorithm, dtype)] = record
    return out
