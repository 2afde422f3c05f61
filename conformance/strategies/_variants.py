"""Variant sets: which conventions a case is drawn under.

Only the switches of ``entry.switches`` vary; every other switch stays at the
paper's value, so two cases that mean the same thing carry equal (and equally
hashed) variant sets. The draw is weighted towards what real code uses:

- the paper's set (the shrink target);
- a preset (``PRESETS``) projected onto the entry's switches;
- one switch changed (each non-default value of each switch is reachable);
- several switches changed at once.

ε and its placement move together (ε > 0 exactly when placed): a placement
is drawn with ε from ``EPSILONS``.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, PRESETS, SWITCHES, VariantSet

from ..values import EPSILONS
from ._budgets import resolve_entry

__all__ = ["EPSILONS", "epsilons", "preset_projections", "variant_sets"]

_PLACED = ("inside_root", "outside_root")


def epsilons() -> st.SearchStrategy[dict[str, Any]]:
    """{epsilon, epsilon_placement} with ε > 0 (placed inside or outside the root)."""
    return st.builds(lambda p, e: {"epsilon_placement": p, "epsilon": e},
                     st.sampled_from(_PLACED), st.sampled_from(EPSILONS))


def _groups(entry: Entry) -> list[str]:
    """Switches drawn together: ε and its placement are one group ("epsilon")."""
    names = sorted(entry.switches - {"epsilon", "epsilon_placement"})
    if entry.switches & {"epsilon", "epsilon_placement"}:
        names.append("epsilon")
    return names


def preset_projections(entry: Entry) -> list[VariantSet]:
    """Each preset restricted to the entry's switches (the rest at the paper's
    value), without repeats and without the paper's own set."""
    return list(_projections(entry.switches))


@functools.lru_cache(maxsize=None)
def _projections(switches: frozenset[str]) -> tuple[VariantSet, ...]:
    out: list[VariantSet] = []
    for v in PRESETS.values():
        changes = {k: getattr(v, k) for k in switches if getattr(v, k) != getattr(PAPER, k)}
        try:
            projected = PAPER.replace(**changes)
        except ValueError:  # ε without its placement: the entry lacks one of the pair
            continue
        if projected != PAPER and projected not in out:
            out.append(projected)
    return tuple(out)


def _changed(group: str) -> st.SearchStrategy[dict[str, Any]]:
    """One switch group at a value other than the paper's."""
    if group == "epsilon":
        return epsilons()
    values = [c for c in SWITCHES[group].choices if c != SWITCHES[group].paper]
    return st.sampled_from(values).map(lambda v: {group: v})


def _one_switch(entry: Entry) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(_groups(entry)).flatmap(_changed)


@st.composite
def _several_switches(draw: st.DrawFn, entry: Entry) -> dict[str, Any]:
    """Two or more switch groups (all of them if fewer), each at a non-paper value."""
    groups = _groups(entry)
    chosen = draw(st.lists(st.sampled_from(groups), min_size=min(2, len(groups)), max_size=len(groups),
                           unique=True))
    out: dict[str, Any] = {}
    for group in sorted(chosen):
        out.update(draw(_changed(group)))
    return out


@st.composite
def variant_sets(draw: st.DrawFn, entry: Any) -> VariantSet:
    """A variant set for ``entry`` (an Entry or a registry name).

    Weights (of 10): 2 the paper's set, 3 a preset projection, 3 one switch
    changed, 2 several switches. An entry with fewer than 3 distinct preset
    projections gives the presets 1 per projection and the rest to one-switch
    changes.
    """
    e = resolve_entry(entry)
    if not e.switches:
        return PAPER
    which = draw(st.integers(0, 9))
    if which < 2:
        return PAPER
    presets = preset_projections(e)
    if which < 2 + min(3, len(presets)):
        return draw(st.sampled_from(presets))
    if which < 8:
        return PAPER.replace(**draw(_one_switch(e)))
    return PAPER.replace(**draw(_several_switches(e)))
