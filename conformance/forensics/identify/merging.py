"""Several entries: the identities merged into one variant set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ftspec.spec.variants import PAPER, VariantSet

from .identifier import _replace
from .results import Identity, expression, _plain
from .switches import _current, _key, value_text


@dataclass
class Merged:
    """The sets of several entries merged (``merge_all``): ``variant``, one set for them all;
    ``conflicts``: switches with no value possible at every entry; ``undecided``: switches with
    several values possible at every entry that no case separates (the set holds the declared
    value among them, else the first: not a finding); ``changes``: {switch: value} where the
    declared value is excluded at some entry (what to change in the declaration)."""

    variant: VariantSet
    conflicts: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"expression": expression(self.variant), "variant": self.variant.to_dict(),
                "describe": self.variant.describe(), "conflicts": list(self.conflicts),
                "undecided": list(self.undecided), "changes_from_declared": {k: _plain(v) for k, v in
                                                                             self.changes.items()}}


def merge_all(identities: Sequence[Identity]) -> Merged:
    """One set for all the entries identified: each switch at a value possible at every entry that
    reads it (``GroupResult.possible``: no separating case excluded it there). Of several: the
    paper's (a default is never written as a change), else the declared one, else the one value;
    where several remain that are not one computation at every entry, the switch is undecided (no
    case separates them) and says so rather than picking one as a finding. A switch whose declared
    value is possible at every entry is never a change from the declaration."""
    out = PAPER
    merged = Merged(PAPER)
    names = sorted({r.group for i in identities for r in i.groups})
    for g in names:
        rows = [(i.algorithm, r) for i in identities for r in i.groups if r.group == g and r.possible]
        if not rows:
            continue
        common = [v for v in rows[0][1].possible
                  if all(_key(v) in {_key(w) for w in r.possible} for _, r in rows[1:])]
        declared = {_key(r.declared): r.declared for _, r in rows if r.declared is not None}
        said = next(iter(declared.values())) if len(declared) == 1 else None
        if not common:
            merged.conflicts.append(f"{g}: " + "; ".join(
                f"{a}: {', '.join(value_text(g, v) for v in r.possible)}" for a, r in rows))
            continue
        keys = {_key(v) for v in common}
        paper = _current(g, PAPER)
        if _key(paper) in keys:
            pick = paper
        elif said is not None and _key(said) in keys:
            pick = said
        else:
            pick = common[0]
        # values that are the picked one's computation at every entry are no alternative to it
        rivals = [v for v in common if _key(v) != _key(pick) and not all(
            _key(v) in {_key(w) for w in [r.chosen, *r.same_as]} and _key(pick) in {_key(w) for w in
                                                                               [r.chosen, *r.same_as]}
            for _, r in rows)]
        if rivals and _key(pick) != _key(paper):
            merged.undecided.append(f"{g}: no case separates {', '.join(value_text(g, v) for v in [pick, *rivals])}")
        if said is not None and _key(said) not in keys:
            merged.changes.update(pick)
        out = _replace(out, pick) or out
    merged.variant = out
    return merged


def merge(identities: Sequence[Identity]) -> tuple[VariantSet, list[str]]:
    """``merge_all``'s set and conflicts."""
    m = merge_all(identities)
    return m.variant, m.conflicts
