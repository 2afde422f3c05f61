"""What identify found: per switch (``GroupResult``) and per entry (``Identity``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ftspec.spec.variants import PAPER, VariantSet

from ...core.values import EPSILON_CANDIDATES
from .observations import Observation
from .switches import _key, value_text


@dataclass
class GroupResult:
    """One switch (ε with its placement as one) at the fixed point."""

    group: str
    #: "decided": one value fits (with the values that are the same computation here,
    #: ``same_as``) and a separating case excludes every other (or it needs parameters not given);
    #: "undecided": several fit, or a value missed only where no case separates it
    #: (``unseparated``), or one could not be judged; "cannot tell": no value could be judged
    #: (a table's printed inputs leave them unbounded); "none fits": no value fits with the
    #: other switches as identified
    status: str
    chosen: dict[str, Any]  # the value in the identified set
    consistent: list[dict[str, Any]] = field(default_factory=list)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    untestable: list[dict[str, Any]] = field(default_factory=list)  # needs parameters not given
    #: the consistent values give bit-identical spec outputs on every case (no case can separate them)
    same_outputs: bool = False
    dropped: dict[str, list[str]] = field(default_factory=dict)  # value text -> parameters it drops
    declared: Optional[dict[str, Any]] = None  # the value of the set the implementation was called with
    #: values the budget ran out before judging: not excluded, so the switch is not decided
    unjudged: list[dict[str, Any]] = field(default_factory=list)
    #: consistent values that are the chosen one's computation at this entry (``same_here``, or
    #: "paper" and the value it stands for): never alternatives
    same_as: list[dict[str, Any]] = field(default_factory=list)
    #: outside the bound on some case, but no case separates them from a consistent value: still possible
    unseparated: list[dict[str, Any]] = field(default_factory=list)
    #: judged on no case they miss and unjudgeable on some (unbounded): neither fit nor excluded
    cannot_tell: list[dict[str, Any]] = field(default_factory=list)

    @property
    def possible(self) -> list[dict[str, Any]]:
        """Every value no separating case has excluded: consistent, not separated, cannot tell."""
        return self.consistent + self.unseparated + self.cannot_tell

    @property
    def alternatives(self) -> list[dict[str, Any]]:
        """The possible values other than the chosen one and the values that are it here."""
        same = {_key(v) for v in self.same_as} | {_key(self.chosen)}
        return [v for v in self.possible if _key(v) not in same]

    def to_dict(self) -> dict[str, Any]:
        def plain(vs: list[dict[str, Any]]) -> list[str]:
            return [value_text(self.group, v) for v in vs]

        return {"switch": self.group, "status": self.status, "value": value_text(self.group, self.chosen),
                "changes": {k: _plain(v) for k, v in self.chosen.items()},
                "consistent": plain(self.consistent), "excluded": plain(self.excluded),
                "untestable": plain(self.untestable), "same_outputs": self.same_outputs,
                "same_as_chosen": plain(self.same_as), "not_separated": plain(self.unseparated),
                "cannot_tell": plain(self.cannot_tell),
                **({"dropped": self.dropped} if self.dropped else {}),
                **({"declared": value_text(self.group, self.declared)} if self.declared else {}),
                **({"unjudged": plain(self.unjudged)} if self.unjudged else {})}

    def line(self) -> str:
        """One line: the switch, its status and values."""
        def texts(vs: Sequence[dict[str, Any]]) -> str:
            return ", ".join(value_text(self.group, v) for v in vs)

        chosen = value_text(self.group, self.chosen)
        same = f" (the same here: {texts(self.same_as)})" if self.same_as else ""
        others = self.alternatives
        if self.status == "decided":
            text = f"{self.group}: {chosen}{same}"
        elif self.status == "cannot tell":
            text = f"{self.group}: cannot tell (no value judged fits; not judged: {texts(self.cannot_tell[:4])}" + (
                f" (+{len(self.cannot_tell) - 4} more))" if len(self.cannot_tell) > 4 else ")")
        elif self.status == "undecided" and self.same_outputs and not (self.excluded or self.untestable
                                                                       or self.unseparated or self.cannot_tell):
            text = f"{self.group}: no effect here (every value gives the same outputs on every case)"
        elif self.status == "undecided" and len(self.consistent + self.unseparated) > max(4, len(self.excluded)):
            excl = texts(self.excluded)
            n = len(self.consistent + self.unseparated)
            text = (f"{self.group}: undecided: no case separates any value tried but {excl} (excluded)" if excl
                    and not self.cannot_tell else f"{self.group}: undecided: no case separates {n} values")
        elif self.status == "undecided" and [v for v in others if v not in self.cannot_tell]:
            rivals = [v for v in others if v not in self.cannot_tell]
            why = ("identical outputs on every case" if self.same_outputs and not self.unseparated
                   else "within the bounds")
            text = f"{self.group}: undecided: no case separates {chosen}{same} from {texts(rivals)} ({why})"
        elif self.status == "undecided":
            text = f"{self.group}: undecided: {chosen}{same} fits"
        else:
            text = f"{self.group}: no value fits with the others as identified (nearest: {chosen})"
        if self.cannot_tell and self.status != "cannot tell":
            text += f"; cannot tell: {texts(self.cannot_tell[:4])}" + (
                f" (+{len(self.cannot_tell) - 4} more)" if len(self.cannot_tell) > 4 else "")
        if self.untestable:
            text += f"; not testable: {texts(self.untestable)}"
        if self.unjudged:
            text += f"; {len(self.unjudged)} not judged (budget spent)"
        return text


def _plain(v: Any) -> Any:
    return float(v) if isinstance(v, float) else v


@dataclass
class Identity:
    """What ``identify`` found for one entry; plain data through ``to_dict``."""

    algorithm: str
    subject: str  # the implementation (or the table) identified
    dtype: str
    declared: str  # the set the implementation was called with (``describe``), "" for a table
    variant: VariantSet  # the identified set (undecided switches: see ``GroupResult.chosen``)
    groups: list[GroupResult] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    fits: bool = False  # the identified set fits every case
    cases_fit: int = 0  # how many cases it fits (all when ``fits``; else it is only the nearest set)
    base: str = ""  # the preset the search started from
    presets: list[str] = field(default_factory=list)  # presets (on the entry's switches) that fit every case
    evaluations: int = 0
    seconds: float = 0.0
    seconds_calls: float = 0.0  # of which in the implementation's calls
    gave_up: bool = False
    notes: list[str] = field(default_factory=list)
    #: some candidate could not be judged (``Fit.unknown``) and was not excluded: without a fit,
    #: "nothing fits" is not shown either
    cannot_tell: bool = False
    #: no candidate could be judged on any case: nothing was tested
    untested: bool = False

    @property
    def undecided(self) -> list[str]:
        return [g.group for g in self.groups if g.status in ("undecided", "cannot tell")]

    @property
    def inconclusive(self) -> bool:
        """No set fits, yet some candidate could not be judged: neither a fit nor "nothing fits"."""
        return not self.fits and self.cannot_tell

    def expression(self) -> str:
        return expression(self.variant)

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "subject": self.subject, "dtype": self.dtype,
                "declared": self.declared, "identified": self.variant.describe(),
                "variant": self.variant.to_dict(), "expression": self.expression(), "fits": self.fits,
                "cases_fit": self.cases_fit,
                "base": self.base, "presets": list(self.presets), "switches": [g.to_dict() for g in self.groups],
                "undecided": self.undecided, "cases": [o.to_dict() for o in self.observations],
                "cannot_tell": self.cannot_tell, "untested": self.untested, "inconclusive": self.inconclusive,
                "evaluations": self.evaluations, "seconds": round(self.seconds, 3),
                "seconds_calls": round(self.seconds_calls, 3), "gave_up": self.gave_up,
                "epsilon_candidates": list(EPSILON_CANDIDATES), "notes": list(self.notes)}


def expression(variant: VariantSet) -> str:
    """``PAPER.replace(...)``: the set as Python to declare and certify with."""
    diff = variant.differences(PAPER)
    if not diff:
        return "PAPER"
    return "PAPER.replace(" + ", ".join(f"{k}={v!r}" for k, v in diff.items()) + ")"
