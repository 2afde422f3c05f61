"""Every distinct failure of a cell, not only the smallest one a search shrinks to.

A search stops an implementation at its first failure and shrinks it. An
implementation with several independent bugs then shows one of them: the
one the smallest case reaches (a softmax axis at ℓ = ℓ_max = 1) hides the
others (a residual taken from the normalised input, a crash whenever
ℓ < ℓ_max) until it is fixed.

After the first failure, ``search_distinct`` keeps searching for that
implementation for failures whose *signature* differs from every failure
found so far:

- the check that failed (``spec``, ``nan``, ``exception``, ``refusal``, ...);
- for an exception, its type;
- for a value check of a model (its loss, gradient, step) or a layer, the
  **places** where it departs (``places_of``): every piece of code that
  departs *on its own*, found with ``divergence``'s public ``locate``:

  * each step of the model (embedding, each layer, final and head norms,
    unembedding) is checked through the implementation's own entry, fed the
    spec's value at its input: a bug upstream or downstream of a step
    cannot make that step depart;
  * inside every departing layer, ``locate`` names the first sublayer that
    departs; that sublayer is then *silenced* (its output weights W_o, b_o
    or the MLP's second W, b set to 0: whatever its code does, it adds
    zero) and the layer located again, until it agrees or what departs
    cannot be silenced (a norm, the residual path). A pre-LN layer whose
    norm departs has its residual path checked on its own as well: with
    every sublayer silenced the spec's layer is X + 0 = X and reads no norm;
  * a place is named by the *kind* of code it is (``PLACE_KINDS``), never by
    a layer index or a stack: the code of one layer entry runs in every
    layer, one norm entry in every norm, one attention in self- and
    cross-attention. ``model`` is the model's own code (it departs while
    every entry agrees): whole-model ablations may name different places
    for it on different cases, so they are one place;

- otherwise (entries that are no model or layer) where it first departs and
  the simplest variant set the output matches (``diagnosis.py``).

Each failure is reported for **one** place (the cell's first failure: the
first place its case departs at, in the walk's order), and covers it. A
failing example is new when it departs at a place no failure covers
(``fresh_places``); an example that departs at a covered place as well is
passed over (``ISOLATION_TRIES`` per round; a round that ends so is followed
by one that takes such an example) while one that departs at new places
only is looked for, and while the new failure is shrunk a candidate
counts only if it departs at one of its new places (and, when it was found
alone, at no covered one): its shrunk case file shows the new bug, alone
where the search could find it so. Each report then says the place it is
reported for ("distinct failure: reported for where its case departs at
..."), since its first divergence may name another.

Why this does not report one bug twice. A place departs on its own only
through a bug in its own code (each piece judged on the spec's values, a
silenced sublayer adding nothing), so a failure at a new place has a bug
there that no earlier failure was reported for. One bug could still show
at two places in two ways, and both are closed: code one entry runs in many
places is one place (the kinds above); code that two kinds share (a GELU
helper behind the MLP and the ETransformer's head, seen as ``MLP`` and as
``model``) is merged when one variant set explains both failures
(``explanations``: the sets that fit each failure's own case, those the
diagnosis excluded on other cases of the cell included, since those cases
may carry the other bug), provided one of the two diagnoses kept that set
(``one_bug``): a set both excluded fits each tiny shrunk case vacuously
(``embedding_norm=True`` on a d_e = 2 case) and would merge a missing
score scale into a residual bug. An example whose places cannot be found is no
new failure, and a reported failure whose places cannot be found covers all
of them. The price is paid on the side of silence: two bugs of one kind
(two norm bugs, two in the model's own code, one explained by the other's
convention) are reported as one failure.

A failing example whose signature is already known counts as passing for
this search, and so does, while one new failure is being shrunk, a failure
with yet another signature (found in the next round). Whether a failing
example is new is decided as cheaply as possible: by its check and
exception type, else by its places, else (for at most
``DIAGNOSED_SIGNATURES`` examples) by a short diagnosis
(``SIGNATURE_SECONDS``). When every failure found departs at a residual
path or a norm (which hide a pre-LN layer's sublayers from its probes),
one more round draws the entry under each norm placement (``PLACEMENTS``),
where such a bug's code is not run. The search draws at least ``MIN_EXAMPLES``
examples (shrinking the first failure may have spent the cell's budget:
this search is forensics, like the diagnosis, and bounded by time), and
stops after ``MAX_DISTINCT`` further failures, after ``SATURATION`` failing
examples in a row that are all known, after ``SECONDS`` (a shrink the time
cap interrupts reports the smallest case seen so far, marked not shrunk),
or when its examples are spent. Batched calls are not made here (the first
search already checked batching).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import numpy as np
from hypothesis import HealthCheck, Phase, given, reject, seed, settings, target

from ftspec.spec import SpecError
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER

from ..core.calling import Prepared
from ..core.case import Case
from .diagnosis import DIAGNOSED_CHECKS
from ..core.judge import Finding
from ..core.timecap import TimeCap, TimeUp

__all__ = ["ALL", "DIAGNOSED_SIGNATURES", "ISOLATION_TRIES", "KNOWN_PLACES_SECONDS", "MAX_DISTINCT", "MIN_EXAMPLES",
           "PLACES_SECONDS", "PLACE_KINDS", "SATURATION", "SECONDS", "SIGNATURE_SECONDS", "Signature", "describe",
           "explanations", "fresh_places", "places_of", "same", "search_distinct", "signature", "signature_of_failure"]

#: further failures reported per cell at most
MAX_DISTINCT = 4
#: wall seconds per cell for the search after the first failure (shrinking included) when the
#: runner has no time cap of its own (its budget is then the examples left; this only bounds a
#: slow implementation); with one (the profiles' ``seconds``), that cap
SECONDS = 30.0
#: the variant search's budget when computing a signature (a full diagnosis follows for the report)
SIGNATURE_SECONDS = 1.0
#: known failures in a row after which the search stops (a bug that fails every example would
#: otherwise spend the whole budget proving it is the same bug; a second bug that one example in
#: four shows is missed with chance 0.75^10 = 6%)
SATURATION = 10
#: failing examples per cell whose signature is diagnosed (about 1 s each on a model); after that a
#: failure of an already-seen check and exception type counts as known
DIAGNOSED_SIGNATURES = 4
#: failing examples per round passed over for departing at a place already reported as well as at a
#: new one, while one that departs at new places only is looked for
ISOLATION_TRIES = 8
#: ``new_signature``'s level for such an example
_DEFERRED = -1
#: examples the search draws at least, whatever the first search left of the cell's budget
MIN_EXAMPLES = 60
#: wall seconds for the places of one failing example (its walk, each departing layer located again)
PLACES_SECONDS = 4.0
#: the same for a reported failure (once per failure: what later examples are compared with)
KNOWN_PLACES_SECONDS = 20.0

#: the kinds of code a place names: a model's steps, a layer's sublayers, and the model's own code
#: (``model``: it departs while every entry agrees) or what is built on it (``loss``); ``layer``: a
#: layer departs but no sublayer could be named
PLACE_KINDS = ("embedding", "norm", "attention", "MLP", "residual", "layer", "unembedding", "model", "loss")
#: what a failure whose places could not be found covers: every place (the side of silence)
ALL = "*"
#: the kinds inside a layer (an unlocated ``layer`` place may be any of them)
_IN_LAYER = frozenset({"norm", "attention", "MLP", "residual", "layer"})
#: each silenceable sublayer's output weights, per layer entry (the registry's parameter names):
#: zero, they make the sublayer add nothing whatever its code does
_OUTPUT_WEIGHTS: dict[str, dict[str, tuple[str, ...]]] = {
    **{name: {"self-attention": ("attn.W_o", "attn.b_o"), "MLP": ("W_mlp2", "b_mlp2")}
       for name in ("gpt2_layer", "bert_layer", "encoder_layer")},
    "decoder_layer": {"self-attention": ("self_attn.W_o", "self_attn.b_o"),
                      "cross-attention": ("cross_attn.W_o", "cross_attn.b_o"), "MLP": ("W_mlp4", "b_mlp4")},
}

#: (check, exception type, matched convention, first divergence, places)
Signature = tuple[str, str, str, str, tuple[str, ...]]


def _exception_type(message: str) -> str:
    """``raised ValueError: ...`` -> ``ValueError`` (the execute module's wording)."""
    text = message.split("raised ", 1)[1] if "raised " in message else ""
    name = text.split(":", 1)[0].strip()
    return name if name.isidentifier() else ""


def _convention(diagnosis: Optional[Mapping[str, Any]]) -> str:
    if not diagnosis:
        return ""
    if diagnosis.get("recurred") is False:
        return "did not recur"
    matches = diagnosis.get("matches") or []
    if not matches:  # "?": the search ran out of time before it could say (see ``same``)
        return "?" if diagnosis.get("gave_up") else "no neighbouring set"
    simplest = min(matches, key=lambda m: (len(m["changes"]), str(sorted(m["changes"].items()))))
    return ", ".join(f"{k}={v}" for k, v in sorted(simplest["changes"].items()))


def _where(diagnosis: Optional[Mapping[str, Any]]) -> str:
    div = (diagnosis or {}).get("divergence") or {}
    where, sub = div.get("where", ""), div.get("sublayer", "")
    return f"{where} / {sub}" if sub else where


def signature(check: str, message: str, diagnosis: Optional[Mapping[str, Any]],
              places: tuple[str, ...] | list[str] = ()) -> Signature:
    """(check, exception type, matched convention, first divergence, places): what makes two
    failures the same or different (``places``: ``places_of``, for a value check)."""
    valued = check in DIAGNOSED_CHECKS  # an exception is told apart by its type, not where it raises
    return (check, _exception_type(message) if check in ("exception", "determinism") else "",
            _convention(diagnosis) if valued else "", _where(diagnosis) if valued else "",
            tuple(dict.fromkeys(places)) if valued else ())


def _definite(convention: str) -> bool:
    return convention not in ("", "?", "no neighbouring set", "did not recur")


def same(a: tuple, b: tuple) -> bool:
    """Whether two signatures name the same failure by their diagnoses alone (places aside: see
    ``fresh_places``): the same check and exception type, and either the same matched convention (one
    convention explains both, wherever they were first seen) or the same first divergence with
    conventions that agree (a convention the diagnosis had no time to find, "?", agrees with any)."""
    if a[:2] != b[:2]:
        return False
    if _definite(a[2]) and a[2] == b[2]:
        return True
    return a[3] == b[3] and (a[2] == b[2] or "?" in (a[2], b[2]))


def _changes(changes: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))


def explanations(diagnosis: Optional[Mapping[str, Any]]) -> frozenset[str]:
    """The simplest variant sets that fit a failure's own case (``diagnosis.py``'s record): among its
    matches and the sets that fit it but were excluded by other cases of the cell (which may carry
    another bug), those with the fewest changes (on a tiny case, wide sets fit vacuously). Two
    failures one of these sets explains are one bug, wherever each departs."""
    if not diagnosis or diagnosis.get("recurred") is False:
        return frozenset()
    sets = [m["changes"] for m in diagnosis.get("matches") or [] if isinstance(m, Mapping) and m.get("changes")]
    confirmed = diagnosis.get("confirmed")
    for x in (confirmed.get("excluded") or []) if isinstance(confirmed, Mapping) else []:
        if isinstance(x, Mapping) and isinstance(x.get("changes"), Mapping) and x["changes"]:
            sets.append(x["changes"])
    fewest = min((len(c) for c in sets), default=0)
    return frozenset(_changes(c) for c in sets if len(c) == fewest)


def confirmed_explanations(diagnosis: Optional[Mapping[str, Any]]) -> frozenset[str]:
    """The sets of ``explanations`` that the diagnosis kept (its matches), not only found to fit the
    failure's own case: a set every diagnosis excluded fits each tiny case vacuously and is no
    evidence that two failures are one bug."""
    if not diagnosis or diagnosis.get("recurred") is False:
        return frozenset()
    return explanations(diagnosis) & frozenset(
        _changes(m["changes"]) for m in diagnosis.get("matches") or [] if isinstance(m, Mapping) and m.get("changes"))


def one_bug(a: Optional[Mapping[str, Any]], b_sets: frozenset[str] | set[str],
            b_confirmed: frozenset[str] | set[str]) -> bool:
    """Whether the failure diagnosed ``a`` and a known one (its ``explanations`` ``b_sets``, of which
    ``b_confirmed`` were kept by its diagnosis) are one bug: one set explains both and at least one
    of the two diagnoses kept it."""
    shared = explanations(a) & frozenset(b_sets)
    return bool(shared & (confirmed_explanations(a) | frozenset(b_confirmed)))


def fresh_places(places: tuple[str, ...] | list[str], covered: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The ``places`` (in the walk's order) that no failure reported so far covers (``covered``: the
    places reported for, each failure its own; ``ALL``: a failure whose places are unknown, covering
    every one). An unlocated ``layer`` place is covered by any place inside a layer and covers all of
    them (it may be any sublayer: the side of silence)."""
    if ALL in covered:
        return ()
    full = _expanded(covered)
    return tuple(p for p in dict.fromkeys(places) if p not in full)


def _expanded(covered: set[str] | frozenset[str]) -> set[str]:
    """``covered`` with the places an unlocated ``layer`` stands for, or that stand for it."""
    full = set(covered)
    if "layer" in covered:
        full |= _IN_LAYER
    if covered & _IN_LAYER:
        full.add("layer")
    return full


def signature_of_failure(failure: Any) -> Signature:
    """The signature of a recorded failure (``runner.Failure`` or its plain-data form; the places a
    further failure's record carries)."""
    get = failure.get if isinstance(failure, Mapping) else (lambda k, d=None: getattr(failure, k, d))
    return signature(get("check", ""), get("message", ""), get("diagnosis"), get("places", ()) or ())


def describe(sig: tuple) -> str:
    """A signature in words, for reports."""
    check, exc, convention, where = sig[:4]
    parts = [f"check {check}"]
    if exc:
        parts.append(f"raises {exc}")
    if convention:
        parts.append(f"matches {convention}")
    if where:
        parts.append(f"first departs at {where}")
    if len(sig) > 4 and sig[4]:
        parts.append("departs in " + ", ".join(sig[4]))
    return "; ".join(parts)


# -- where a failing example departs, every place ---------------------------------------------------

def _sublayer_kind(sublayer: str) -> str:
    if not sublayer:
        return "layer"
    if sublayer.startswith("MLP"):  # "MLP", "MLP activation": one MLP's code
        return "MLP"
    return "attention" if "attention" in sublayer else sublayer  # norm, residual


def _step_kind(where: str) -> str:
    """A model step's kind ("encoder embedding", "final norm", "head norm", "unembedding", ...)."""
    for kind in ("unembedding", "embedding", "norm"):
        if where.endswith(kind):
            return kind
    return "model"


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _layer_kinds(member: Any, name: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 hyper: Mapping[str, int], variant: Any, dtype: str, timeout: float,
                 deadline: float) -> tuple[str, list[str]]:
    """(first divergence, every kind of sublayer, in the order found) at which the layer entry
    ``name`` departs on the spec's input: locate the first, silence it, locate again, until the layer
    agrees or what departs cannot be silenced. A norm cannot be silenced; a pre-LN layer's residual
    path is then checked on its own (``_pre_ln_residual_departs``)."""
    from .divergence import locate

    first = ""
    kinds: list[str] = []
    p = dict(params)
    silenced: set[str] = set()
    for _ in range(len(_OUTPUT_WEIGHTS[name]) + 1):
        if _left(deadline) <= 0:
            break
        d = locate(member, name, inputs, p, hyper, variant, dtype, timeout=timeout, seconds=_left(deadline))
        if not d.checks or d.checks[0].get("ok") is not False:  # the whole layer, checked first, agrees
            break
        first = first or (f"layer / {d.sublayer}" if d.sublayer else "layer")
        kinds.append(_sublayer_kind(d.sublayer))
        block = "MLP" if d.sublayer.startswith("MLP") else d.sublayer
        weights = _OUTPUT_WEIGHTS[name].get(block)
        if not weights or block in silenced:  # a residual path, a norm, a NaN zeros cannot silence
            break
        silenced.add(block)
        p = _silence(p, weights)
    if kinds and kinds[-1] == "norm" and "residual" not in kinds and _left(deadline) > 0 \
            and _pre_ln_residual_departs(member, name, inputs, p, hyper, variant, dtype, timeout, deadline):
        kinds.append("residual")
    if kinds and kinds[-1] in ("residual", "norm") and _left(deadline) > 0:
        # what cannot be silenced hides every sublayer after it from the layer's probes: the
        # sublayers' own entries, fed the spec's values inside the layer, still show their own bugs
        from .divergence import component_departures

        found = component_departures(member, name, inputs, params, hyper, variant, dtype, timeout=timeout,
                                     seconds=_left(deadline))
        kinds.extend(_sublayer_kind(s) for s in found)
    return first, kinds


def _silence(params: Mapping[str, np.ndarray], weights: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``params`` with ``weights`` zeroed; an MLP without its second map (``mlp="one_layer"``) has its
    last layer zeroed instead (the last ``mlp_hidden.{k}``, else the first): act(0) = 0 then."""
    if weights and weights[0].startswith("W_mlp") and weights[0] not in params:
        hidden = sorted(int(k.split(".")[1]) for k in params if k.startswith("mlp_hidden.") and k.endswith(".W"))
        first = "W_mlp3" if "W_mlp3" in params else "W_mlp1"
        weights = ((f"mlp_hidden.{hidden[-1]}.W", f"mlp_hidden.{hidden[-1]}.b") if hidden
                   else (first, "b" + first[1:]))
    return {**params, **{k: np.zeros_like(params[k]) for k in weights if k in params}}


def _pre_ln_residual_departs(member: Any, name: str, inputs: Mapping[str, np.ndarray],
                             params: Mapping[str, np.ndarray], hyper: Mapping[str, int], variant: Any, dtype: str,
                             timeout: float, deadline: float) -> bool:
    """Whether a pre-LN layer with every sublayer silenced departs with finite values. The spec's
    layer is then X + 0 = X (Algorithm 10 lines 5-6 with zero output weights): its norms are not
    read, so a norm bug cannot make it depart, while a residual path that adds the normalised X
    does; a NaN is left out (zero weights do not silence it)."""
    from .divergence import locate

    arch = {"gpt2_layer": "gpt2", "bert_layer": "bert", "encoder_layer": "ed_encoder",
            "decoder_layer": "ed_decoder"}[name]
    if variant.resolved_norm_placement(arch) != "pre":
        return False
    p = dict(params)
    for weights in _OUTPUT_WEIGHTS[name].values():
        p = _silence(p, weights)
    d = locate(member, name, inputs, p, hyper, variant, dtype, timeout=timeout, seconds=_left(deadline))
    whole = d.checks[0] if d.checks else {}
    return whole.get("ok") is False and isinstance(whole.get("ratio"), float) and math.isfinite(whole["ratio"])


def _model_kinds(member: Any, algorithm: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 hyper: Mapping[str, int], variant: Any, dtype: str, timeout: float,
                 deadline: float) -> tuple[str, list[str]]:
    """(first divergence, kinds in the walk's order) of a model, its loss, gradient or step: the walk
    checks every step on the spec's input; each departing layer is then searched for every sublayer
    (``_layer_kinds``)."""
    from .divergence import MODEL_OF, locate, model_inputs, model_walk

    d = locate(member, algorithm, inputs, params, hyper, variant, dtype, timeout=timeout, seconds=_left(deadline))
    first = f"{d.where} / {d.sublayer}" if d.sublayer else d.where
    model, _ = MODEL_OF[algorithm]
    steps, _ = model_walk(model, model_inputs(algorithm, inputs), params, hyper, variant)
    verdict: dict[tuple[str, str], Any] = {}
    for rec in d.checks:  # a step's own check comes first among the checks at its place
        verdict.setdefault((str(rec.get("where")), str(rec.get("entry"))), rec.get("ok"))
    kinds: list[str] = []
    departed = False
    for step in steps:
        if verdict.get((step.where, step.entry)) is not False:
            continue
        departed = True
        if step.entry in _OUTPUT_WEIGHTS:
            kinds += _layer_kinds(member, step.entry, step.inputs, step.params, step.hyper, variant, dtype,
                                  timeout, deadline)[1]
        else:
            kinds.append(_step_kind(step.where))
    if not departed:  # every step agrees on its own: the model's own code, or what is built on it
        if d.where.startswith("loss"):
            kinds.append("loss")
        elif any(rec.get("ok") is False for rec in d.checks):  # named or not (ambiguous candidates)
            kinds.append("model")
    return first, list(dict.fromkeys(kinds))


def places_of(member: Any, case: Any, dtype: str, *, timeout: float,
              seconds: float = PLACES_SECONDS) -> tuple[str, tuple[str, ...]]:
    """(first divergence, places) of ``member`` on a failing ``case`` of a model or layer entry: the
    kinds of code that depart on their own (module docstring). ("", ()) for other entries, when
    nothing is found, or when anything goes wrong (then the diagnoses decide)."""
    from .divergence import MODEL_OF

    if case is None or (case.algorithm not in MODEL_OF and case.algorithm not in _OUTPUT_WEIGHTS):
        return "", ()
    deadline = time.monotonic() + seconds
    try:
        prepared = Prepared(case.entry, case.inputs, case.params, dtype)
        if case.algorithm in _OUTPUT_WEIGHTS:
            first, kinds = _layer_kinds(member, case.algorithm, prepared.inputs, prepared.params, case.hyper,
                                        case.variant, dtype, timeout, deadline)
        else:
            first, kinds = _model_kinds(member, case.algorithm, prepared.inputs, prepared.params, case.hyper,
                                        case.variant, dtype, timeout, deadline)
        return first, tuple(dict.fromkeys(kinds))
    except Exception:  # noqa: BLE001 - a help; never the reason a failure goes unreported
        return "", ()


class _NewFailure(Exception):
    def __init__(self, finding: Finding, case: Case, sig: tuple) -> None:
        super().__init__(f"{finding.check}: {finding.message}")
        self.finding, self.case, self.sig = finding, case, sig


class _Saturated(BaseException):
    """``SATURATION`` known failures in a row: the search stops (never while shrinking)."""


def _short_diagnosis(member: Any, case: Case, finding: Finding, dtype: str,
                     timeout: float) -> Optional[dict[str, Any]]:
    """A diagnosis of ``SIGNATURE_SECONDS`` (a full one follows for the report), as plain data."""
    from .diagnosis import diagnose_failure

    d = diagnose_failure(member, case, finding.check, dtype, timeout=timeout, seconds=SIGNATURE_SECONDS)
    return d.to_dict() if d is not None else None


def _signature_at(level: int, member: Any, case: Case, finding: Finding, dtype: str, timeout: float) -> Signature:
    """The signature as far as ``level``: 0 the check and exception type (free); 1 also where a model
    or layer first departs and every place it departs at (``places_of``, 0.1 to 2 s; convention "?");
    2 also the convention the output matches (``_short_diagnosis``; no places)."""
    if level == 0 or finding.check not in DIAGNOSED_CHECKS:
        return signature(finding.check, finding.message, None)
    if level == 1:
        where, found = places_of(member, case, dtype, timeout=timeout)
        where_part, _, sub = where.partition(" / ")
        return signature(finding.check, finding.message,
                         {"gave_up": True, "divergence": {"where": where_part, "sublayer": sub}}, found)
    return signature(finding.check, finding.message, _short_diagnosis(member, case, finding, dtype, timeout))


def _matches(level: int, a: tuple, b: tuple, aim: tuple[str, ...] = (), avoid: frozenset[str] = frozenset()) -> bool:
    """Whether ``a`` is the failure ``b`` being shrunk, as far as ``level`` (``_signature_at``); ``aim``:
    the new places ``b`` was found for (``a`` must depart at one of them), ``avoid``: places already
    reported (``a`` must depart at none of them, when ``b`` did not)."""
    if level == 0 or a[:2] != b[:2]:
        return a[:2] == b[:2]
    if aim:
        return bool(set(a[4]) & set(aim)) and not set(a[4]) & avoid
    return same(a, b)


#: the variant sets of the round that moves the norms (``search_distinct``)
PLACEMENTS = tuple(PAPER.replace(norm_placement=p) for p in ("post", "pre", "res_post"))


def search_distinct(runner: Any, entry: Entry, dtype: str, variants: Any, limits: Any, member: Any, cell: Any, *,
                    examples: int, seconds: float = SECONDS, max_failures: int = MAX_DISTINCT,
                    refused: Callable[[Entry, Case, SpecError], bool] = lambda e, c, x: False) -> list[dict[str, Any]]:
    """Search ``member`` again for failures whose signature differs from ``cell.failure``'s and from
    each other; each is recorded through ``runner.record_failure`` (case file, report, diagnosis) and returned
    as plain data (the ``Cell.more_failures`` records, with their ``places`` and the ``new_places``
    each was reported for). ``examples``: the examples left (at least ``MIN_EXAMPLES`` are drawn);
    ``refused``: the runner's ``refused_empty_query`` (a refusal the implementation must share).

    Rounds of one Hypothesis search each, every round finding (and shrinking) at most one new failure,
    until the examples, the failures, the time or the member run out."""
    from ..core.strategies import cases

    if cell.failure is None or max_failures <= 0 or member.hung:
        return []
    examples = max(examples, MIN_EXAMPLES)
    deadline = time.monotonic() + seconds
    search = _DistinctSearch(runner, entry, dtype, member, refused, known=set())
    first = search.located(signature_of_failure(cell.failure), getattr(cell.failure, "case", None))
    search.cover(first, first[4][:1], getattr(cell.failure, "diagnosis", None))
    found: list[dict[str, Any]] = []
    strategy = cases(entry.name, dtype=dtype, variants=variants, max_batch=1, budget=runner.profile.budget,
                     limits=None if limits.unconstrained else limits)
    round_ = 0
    placements_tried = False
    while examples > 0 and len(found) < max_failures and time.monotonic() < deadline and not member.hung:
        outcome = search.round(strategy, examples, runner.seed * 7919 + 104729 + round_, deadline)
        examples = (0 if outcome.broken else examples) - outcome.generated
        round_ += 1
        if outcome.failure is None:
            if search.unisolated and not search.lenient:  # new places seen, never alone: take them so
                search.lenient = True
                continue
            if not placements_tried and variants == "all" and search.only_placement_bound() \
                    and "norm_placement" in entry.switches:
                # every failure departs at a residual path or a norm, which can hide every sublayer of a
                # pre-LN layer; such a bug lives in code one norm placement runs: a round of the other
                # placements shows what the sublayers do behind it
                placements_tried = True
                strategy = cases(entry.name, dtype=dtype, variants=PLACEMENTS, max_batch=1,
                                 budget=runner.profile.budget, limits=None if limits.unconstrained else limits)
                continue
            break
        search.lenient = False
        finding, case, sig = outcome.failure
        sig = search.located(sig, case)
        # the place it is reported for: the first of those it was found for that its case departs at
        own = tuple(p for p in sig[4] if p in outcome.aim)[:1] if outcome.aim else sig[4][:1]
        record = _record(runner, member, cell, finding, case, dtype, sig, outcome.shrunk, own)
        if search.is_new(record, sig, own, [first, *(signature_of_failure(f) for f in found)]):
            found.append(record)
    if found and first[4] and isinstance(getattr(cell.failure, "report", None), str):
        cell.failure.report = _with_place(cell.failure.report, first[4][:1], first[4])
    return found


@dataclass
class _Round:
    """What one round of the search saw: the examples it drew, and the new failure it is shrinking."""

    generated: int = 0  # drawn examples (not shrinking steps): they count against the examples left
    sig: Optional[tuple] = None  # the new failure's signature, once one is found
    level: int = 0  # how far that signature was computed (``_signature_at``)
    aim: tuple[str, ...] = ()  # the new places it was found for (each candidate must depart at one)
    avoid: frozenset[str] = frozenset()  # places reported already (a candidate departs at none of them)
    best: Optional[tuple[Finding, Case, tuple]] = None  # the smallest failing case of that signature


@dataclass
class _Outcome:
    """How a round ended: the failure it found (finding, case, signature) or None, the new places it
    was found for, whether that case was shrunk, whether the search itself broke (no round follows),
    the examples it drew."""

    failure: Optional[tuple[Finding, Case, tuple]]
    shrunk: bool = True
    broken: bool = False
    generated: int = 0
    aim: tuple[str, ...] = ()


class _DistinctSearch:
    """The search for further failures of one member on one cell: the signatures already known, and
    the budget of diagnosed signatures and of known failures in a row, across rounds."""

    def __init__(self, runner: Any, entry: Entry, dtype: str, member: Any,
                 refused: Callable[[Entry, Case, SpecError], bool], known: set[tuple]) -> None:
        self.runner, self.entry, self.dtype, self.member, self.refused = runner, entry, dtype, member, refused
        self.known = known
        #: per (check, exception type): the places failures were reported for (``fresh_places``)
        self.covered: dict[tuple, set[str]] = {}
        #: per (check, exception type): the variant sets that explain a known failure (``explanations``)
        self.explained: dict[tuple, set[str]] = {}
        #: of ``explained``, the sets a diagnosis kept (``confirmed_explanations``)
        self.kept: dict[tuple, set[str]] = {}
        #: a model or a layer: places tell failures apart (else the diagnoses do)
        self.placed = _placed(entry.name)
        self.unisolated = 0  # new failures passed over in this round for departing at a reported place too
        self.lenient = False  # a round after one that saw new places only beside reported ones: take them
        self.diagnosed = 0  # signatures diagnosed so far (at most ``DIAGNOSED_SIGNATURES``)
        self.streak = 0  # known failures in a row (the search stops at ``SATURATION``)

    def round(self, strategy: Any, examples: int, round_seed: int, deadline: float) -> _Outcome:
        """One Hypothesis search of at most ``examples`` examples, until it finds a new failure and
        shrinks it, spends its examples, saturates, or reaches ``deadline``."""
        state = _Round()
        self.unisolated = 0
        # the whole search, shrinking included, in every phase of Hypothesis (timecap.py)
        timecap = TimeCap(lambda: time.monotonic() > deadline)

        @settings(max_examples=examples, deadline=None, database=None, report_multiple_bugs=False,
                  derandomize=False, print_blob=False, phases=(Phase.generate, Phase.target, Phase.shrink),
                  suppress_health_check=list(HealthCheck))
        @seed(round_seed)
        @given(timecap.strategy(strategy))
        def search(case: Case) -> None:
            with timecap.checked():
                self.example(case, state)

        try:
            with timecap.watching():
                search()
            return _Outcome(None, generated=state.generated)  # the examples ran out with no new failure
        except _Saturated:
            return _Outcome(None, generated=state.generated)
        except _NewFailure as exc:
            return _Outcome((exc.finding, exc.case, exc.sig), generated=state.generated, aim=state.aim)
        except TimeUp:
            return _Outcome(state.best, shrunk=False, generated=state.generated, aim=state.aim)
        except Exception:  # noqa: BLE001 - a flaky or broken extra search ends it, never the run
            # the smallest case seen, unshrunk
            return _Outcome(state.best, shrunk=False, broken=state.best is not None, generated=state.generated,
                            aim=state.aim)

    def example(self, case: Case, state: _Round) -> None:
        """One example: the spec's reference (or its refusal), the member's outputs, the judgement;
        a failure goes to ``judge``, a pass steers the search towards larger error/bound ratios."""
        from ..core.execute import examine
        from ..core.tolerances import ToleranceModelError

        if state.sig is None:  # drawn, not a shrinking step: counts against the examples
            state.generated += 1
        member, dtype, timeout = self.member, self.dtype, self.runner.timeout
        prepared = Prepared(self.entry, case.inputs, case.params, dtype)
        try:
            ref = self.runner.reference_for(self.entry, prepared, case, dtype, member.impl.precision_for(dtype))
        except SpecError as exc:
            if not self.refused(self.entry, case, exc):
                reject()
            self._refusal(case, prepared, state)
            return
        except ToleranceModelError:
            reject()
        if not ref.in_range:
            reject()
        outcome = examine(member, case, prepared.inputs, prepared.params, ref, dtype=dtype, timeout=timeout, batch=[])
        if outcome.timed_out:
            member.hung = True
            return
        ratio = outcome.judgement.ratio
        if outcome.judgement.ok:
            target(min(ratio, 1e300) if math.isfinite(ratio) else 1e300, label="error/bound")
            return
        self.judge(outcome.judgement.findings[0], case, state)

    def _refusal(self, case: Case, prepared: Prepared, state: _Round) -> None:
        """The spec refuses the case by definition: the implementation must raise."""
        from ..core.execute import CallTimeout, call_member

        member = self.member
        try:
            call_member(member, self.entry, prepared.inputs, prepared.params, case, self.dtype, self.runner.timeout,
                        False)
        except CallTimeout:
            member.hung = True
            return
        except Exception:  # noqa: BLE001 - raising is what the spec asks for
            return
        finding = Finding("refusal", "returned a result for a case the spec refuses (a query with no key "
                          "it may attend to under empty_query='error'); the implementation must raise")
        self.judge(finding, case, state)

    def judge(self, finding: Finding, case: Case, state: _Round) -> None:
        """A failing example: raise ``_NewFailure`` when its signature is new (or, while shrinking, the
        one being shrunk); return (passing, for this search) when it is known."""
        def at(level: int) -> tuple:
            return _signature_at(level, self.member, case, finding, self.dtype, self.runner.timeout)

        def diagnose() -> Optional[dict[str, Any]]:
            return _short_diagnosis(self.member, case, finding, self.dtype, self.runner.timeout)

        sig: Optional[tuple]
        if state.sig is not None:  # shrinking a new failure: the same test that found it
            sig = at(state.level)
            if not _matches(state.level, sig, state.sig, state.aim, state.avoid):
                return  # another failure (found in a later round) or a known one: passing here
        else:
            sig, level, aim, avoid = self.new_signature(finding, at, diagnose)
            if sig is None and level == _DEFERRED:  # new, but not alone: passing while another is looked for
                return
            if sig is None:  # a failure already reported: passing, for this search
                self.streak += 1
                if self.streak >= SATURATION:
                    raise _Saturated()
                return
            self.streak = 0
            state.sig, state.level, state.aim, state.avoid = sig, level, aim, avoid
        best = state.best
        if best is None or case.size() < best[1].size():
            state.best = (finding, case, sig)
        raise _NewFailure(finding, case, sig)

    def only_placement_bound(self) -> bool:
        """Whether every place reported so far is a residual path or a norm (and there is one)."""
        places = set().union(*self.covered.values()) if self.covered else set()
        return bool(places) and places <= {"residual", "norm"}

    def located(self, sig: tuple, case: Any) -> tuple:
        """``sig`` with its places, computed on ``case`` (``KNOWN_PLACES_SECONDS``) when it has none: a
        failure found by its check alone, or the cell's first one."""
        if sig[0] not in DIAGNOSED_CHECKS or sig[4] or not self.placed:
            return sig
        _, found = places_of(self.member, case, self.dtype, timeout=self.runner.timeout,
                             seconds=KNOWN_PLACES_SECONDS)
        return (*sig[:4], found)

    def cover(self, sig: tuple, own: tuple[str, ...], diagnosis: Optional[Mapping[str, Any]] = None) -> None:
        """A failure is known: its signature, the place it is reported for (``own``; a value failure
        of a model or layer whose places could not be found covers every place) and the sets that
        explain it (``explanations`` of its ``diagnosis``)."""
        self.known.add(sig)
        self.explained.setdefault(sig[:2], set()).update(explanations(diagnosis))
        self.kept.setdefault(sig[:2], set()).update(confirmed_explanations(diagnosis))
        if sig[0] in DIAGNOSED_CHECKS and self.placed:
            self.covered.setdefault(sig[:2], set()).update(own or (ALL,))

    def new_signature(self, finding: Finding, at: Callable[[int], tuple],
                      diagnose: Callable[[], Optional[dict[str, Any]]]) -> tuple[Optional[tuple], int, tuple[str, ...],
                                                                                  frozenset[str]]:
        """(signature, level, new places, places to avoid) when the failure is new, as cheaply as can
        tell: its check and exception type, else (a model or layer) its places, else where it departs
        and its convention; (None, level, (), ()) when known, level ``_DEFERRED`` when it is new but
        departs at a place already reported too (``ISOLATION_TRIES`` such are passed over in a round,
        for one that shows its new places alone: its shrunk case then shows only the new bug; a round
        that ends with such passed over is followed by one that takes them)."""
        known, none = self.known, frozenset[str]()
        sig = at(0)
        if not any(_matches(0, sig, k) for k in known):
            return sig, 0, (), none
        if finding.check not in DIAGNOSED_CHECKS:
            return None, 0, (), none
        sig = at(1)
        if not self.placed:
            found, level = self._by_diagnosis(sig, at, diagnose)
            return found, level, (), none
        covered = self.covered.get(sig[:2], set())
        fresh = fresh_places(sig[4], covered) if sig[4] else ()  # unknown places: no new failure
        if not fresh:
            return None, 1, (), none
        alone = len(fresh) == len(sig[4])
        if not alone and not self.lenient and self.unisolated < ISOLATION_TRIES:
            self.unisolated += 1
            return None, _DEFERRED, (), none
        if self._explained_by_known(sig, diagnose):
            return None, 1, (), none
        return sig, 1, fresh, frozenset(_expanded(covered)) if alone else none

    def _explained_by_known(self, sig: tuple, diagnose: Callable[[], Optional[dict[str, Any]]]) -> bool:
        """Whether a short diagnosis finds a set that explains a known failure too (one bug in code
        that two places share): only while the diagnosis budget lasts."""
        known = self.explained.get(sig[:2])
        if self.diagnosed >= DIAGNOSED_SIGNATURES or not known:
            return False
        self.diagnosed += 1
        return one_bug(diagnose(), known, self.kept.get(sig[:2], set()))

    def _by_diagnosis(self, sig: tuple, at: Callable[[int], tuple],
                      diagnose: Callable[[], Optional[dict[str, Any]]]) -> tuple[Optional[tuple], int]:
        """No model or layer (no places): where it departs, then its convention."""
        known = self.known
        alike = [k for k in known if _matches(1, sig, k)]
        if not alike:
            if self._explained_by_known(sig, diagnose):  # departs elsewhere: a known convention all the same?
                return None, 1
            return sig, 1
        if self.diagnosed >= DIAGNOSED_SIGNATURES or any(k[2] == "?" for k in alike):
            return None, 1  # no budget left, or a known one of any convention
        self.diagnosed += 1
        sig = at(2)
        return (None if any(_matches(2, sig, k) for k in known) else sig), 2

    def is_new(self, record: Mapping[str, Any], sig: tuple, own: tuple[str, ...], earlier: list[tuple]) -> bool:
        """Whether a recorded failure differs from the ``earlier`` ones (their signatures: the cell's
        first failure and those found before) under the report's full diagnosis; either way it becomes
        known, with the place it is reported for (``own``). At a new place: new unless one definite
        convention explains it and an earlier one; else new unless the full diagnoses say it is the
        same (``same``)."""
        full = signature_of_failure(record)  # with the report's full diagnosis budget
        explained = one_bug(record.get("diagnosis"), self.explained.get(full[:2], set()),
                            self.kept.get(full[:2], set()))
        self.cover(sig, own, record.get("diagnosis"))
        self.cover(full, own)
        if own and self.placed:
            return not explained
        # the short budget may tell it apart where the full diagnosis does not: then the same failure
        return not explained and not any(same(full, e) for e in earlier)


def _with_place(report: str, own: tuple[str, ...], places: Any) -> str:
    """``report`` with the place its failure is reported for (its first divergence may name a place
    another failure is reported for, or a walk on another case), before the reproducer (kept last)."""
    others = [p for p in places if p not in own]
    line = (f"  distinct failure: reported for where its case departs at {', '.join(own)}"
            + (f" (it also departs at {', '.join(others)})" if others else ""))
    head, sep, tail = report.rpartition("\n  reproduce:")
    return head + "\n" + line + sep + tail if sep else report + "\n" + line


def _placed(algorithm: str) -> bool:
    """Whether ``places_of`` can place a failure of ``algorithm`` (a model, its loss, gradient or
    step, or a layer entry)."""
    from .divergence import MODEL_OF

    return algorithm in MODEL_OF or algorithm in _OUTPUT_WEIGHTS


def _record(runner: Any, member: Any, cell: Any, finding: Finding, case: Case, dtype: str, sig: tuple,
            shrunk: bool, own: tuple[str, ...] = ()) -> dict[str, Any]:
    """One further failure as plain data, written and reported as the runner writes the first one;
    ``places``: where it departs on its case, ``new_places``: the one it is reported for."""
    scratch = type(cell)(cell.algorithm, cell.impl, cell.dtype, cell.device)  # runner.Cell
    runner.record_failure(scratch, member, finding, case, dtype, shrunk=shrunk)
    f = scratch.failure
    places = list(sig[4]) if len(sig) > 4 else []
    report = _with_place(f.report, own, places) if own else f.report
    record = {"check": f.check, "message": f.message, "case_file": f.case_file, "reproducer": f.reproducer,
              "report": report, "shrunk": f.shrunk, "diagnosis": f.diagnosis, "places": places,
              "new_places": list(own)}
    record["signature"] = describe(signature_of_failure(record))
    record["found_as"] = describe(sig) + (f" (reported for: {', '.join(own)})" if own else "")
    return record
