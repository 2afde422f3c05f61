"""The switches of an entry as identify searches them, and their candidate values."""

from __future__ import annotations

from typing import Any, Mapping

from ftspec.spec.registry import Entry
from ftspec.spec.variants import SWITCHES, VariantSet

from ...core.values import EPSILON_CANDIDATES


#: ε values tried: ``values.EPSILON_CANDIDATES``
_PLACED = ("inside_root", "outside_root")


class IdentifyError(ValueError):
    """Identification cannot start (no case within the implementation's limits, bad options)."""


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
