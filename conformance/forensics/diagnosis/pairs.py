"""Pairs of single changes, tried only when no set fits: ranked, screened without a bound, evaluated.

``try_pairs`` works on a diagnosis's search (``search._Search``): its shrunk case and its records.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import TYPE_CHECKING, Any, Mapping, Optional

import numpy as np

if TYPE_CHECKING:
    from .search import _Search

#: the share of what is left of the time budget that screening the pairs may take (the rest evaluates
#: the pairs that pass with their bounds)
SCREEN_SHARE = 0.7

#: pairs ruled out by their exact values that are evaluated with their bounds all the same, the closest
#: first: where nothing fits, the closest set is shown with its error/bound factor
NEAREST_EVALUATED = 3


def try_pairs(search: "_Search", single_recs: list[tuple[str, Optional[dict[str, Any]]]]) -> None:
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
    d = search.d
    scored = [(g, r) for g, r in single_recs if r is not None]
    pairs = [({**a["changes"], **b["changes"]}, (a, b)) for (ga, a), (gb, b) in itertools.combinations(scored, 2)
             if ga != gb]
    if d.gave_up or not pairs:
        return
    if search.site.declared_ref is None or search.site.outputs is None:
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
    screen_until = now + SCREEN_SHARE * max(0.0, search.seconds - (now - search.started))
    passed: list[tuple[float, int, dict[str, Any]]] = []
    near: list[tuple[float, int, dict[str, Any]]] = []
    for n, changes in enumerate(_ranked(search, pairs)):
        if time.perf_counter() >= screen_until:
            d.gave_up = True
            break
        applies, values = search.site.values(changes, None)
        d.screened += 1
        if not applies:
            continue
        passes, score = _screen(search, values)
        if passes:
            passed.append((score, n, changes))
        elif math.isfinite(score):
            near.append((score, n, changes))
    # those that pass, the closest to the output first (on a degenerate case, a flipped
    # two-token softmax, many pairs move the output half-way; few reproduce it); then the
    # closest few that do not, so that the closest set is shown with its factor
    order = sorted(passed, key=lambda t: t[:2]) + sorted(near, key=lambda t: t[:2])[:NEAREST_EVALUATED]
    for _, _, changes in order:
        if search.evaluate(changes) is None and d.gave_up:
            break


def _ranked(search: "_Search", pairs: list[tuple[dict[str, Any], tuple[dict[str, Any], dict[str, Any]]]]
            ) -> list[dict[str, Any]]:
    """The pairs' changes, the most promising first: by how far the output lies from the declared
    set's values moved by both members' moves on this case (each member's values minus the
    declared set's, added), in units of the declared bound at the failing elements. A member
    that moves nothing here (a switch the case does not exercise) predicts its partner alone;
    a member with no values (refused, not judged) puts the pair last, in the old order of the
    members' own error/bound ratios."""
    site, ref = search.site, search.site.declared_ref
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


def _screen(search: "_Search", values: Optional[Mapping[str, np.ndarray]]) -> tuple[bool, float]:
    """Whether a set with these binary64 values on the shrunk case may fit it (a necessary
    condition, ``_resolves`` without the bound), and its worst distance to the output at the
    failing elements in units of the declared bound (for showing the closest)."""
    site, ref = search.site, search.site.declared_ref
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


def _score(r: float) -> float:
    return math.log10(r) if math.isfinite(r) and r > 0 else (0.0 if r == 0 else 400.0)
