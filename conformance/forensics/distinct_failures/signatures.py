"""A failure's signature (check, exception type, convention, first divergence, places), and when two are one bug."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..diagnosis import DIAGNOSED_CHECKS


#: the kinds of code a place names: a model's steps, a layer's sublayers, and the model's own code
#: (``model``: it departs while every entry agrees) or what is built on it (``loss``); ``layer``: a
#: layer departs but no sublayer could be named
PLACE_KINDS = ("embedding", "norm", "attention", "MLP", "residual", "layer", "unembedding", "model", "loss")
#: what a failure whose places could not be found covers: every place (the side of silence)
ALL = "*"
#: the kinds inside a layer (an unlocated ``layer`` place may be any of them)
_IN_LAYER = frozenset({"norm", "attention", "MLP", "residual", "layer"})

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
    """The simplest variant sets that fit a failure's own case (``diagnosis/``'s record): among its
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


def _matches(level: int, a: tuple, b: tuple, aim: tuple[str, ...] = (), avoid: frozenset[str] = frozenset()) -> bool:
    """Whether ``a`` is the failure ``b`` being shrunk, as far as ``level`` (``_signature_at``); ``aim``:
    the new places ``b`` was found for (``a`` must depart at one of them), ``avoid``: places already
    reported (``a`` must depart at none of them, when ``b`` did not)."""
    if level == 0 or a[:2] != b[:2]:
        return a[:2] == b[:2]
    if aim:
        return bool(set(a[4]) & set(aim)) and not set(a[4]) & avoid
    return same(a, b)
