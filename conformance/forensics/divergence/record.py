"""What the walk reports: the ``Divergence`` record, its lines, and how a record is read.

``Divergence`` is plain data (``to_dict``) and the report's lines (``lines``); ``expected_matches``
reads a record against an expected place (the bench and the tests); ``_unchecked`` and
``_why_unchecked`` read the list of checks the walk made (``Divergence.checks``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["SECONDS", "Divergence", "expected_matches"]


#: wall seconds per failure (checked before each implementation call)
SECONDS = 20.0


@dataclass
class Divergence:
    """Where the implementation first departs from the spec; every field is plain data."""

    algorithm: str
    dtype: str
    where: str = ""  # "" when nothing departs (or nothing could be checked)
    sublayer: str = ""  # norm | self-attention | cross-attention | residual | MLP | MLP activation | ...
    detail: str = ""  # how it was found, in words
    #: every check made, in order: {"where", "entry", "config", "ok" (True/False/None = not checked),
    #: "ratio", "note"}
    checks: list[dict[str, Any]] = field(default_factory=list)
    #: the implementation's own named intermediates, if it offers them: the first that departs
    intermediate: str = ""
    also: list[str] = field(default_factory=list)  # further pieces that depart on their own
    #: places that remain possible when the case cannot tell them apart ("layer 0/norm", ...); then
    #: ``sublayer`` (or ``where``) is left empty rather than guessed
    candidates: list[str] = field(default_factory=list)
    #: pieces the walk could not check, and why ("final norm: the plugin does not implement layer_norm")
    unchecked: list[str] = field(default_factory=list)
    gave_up: bool = False
    seconds: float = 0.0

    @property
    def found(self) -> bool:
        return bool(self.where)

    def label(self) -> str:
        """``layer 0 / norm``, ``unembedding``, or "" (nothing found)."""
        return f"{self.where} / {self.sublayer}" if self.sublayer else self.where

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "dtype": self.dtype, "where": self.where, "sublayer": self.sublayer,
                "detail": self.detail, "intermediate": self.intermediate, "also": list(self.also),
                "candidates": list(self.candidates), "unchecked": list(self.unchecked),
                "checks": self.checks, "gave_up": self.gave_up, "seconds": round(self.seconds, 3)}

    def made(self) -> int:
        """How many checks gave a verdict (those not made, for want of an entry, time or a case the
        spec accepts, say nothing)."""
        return sum(1 for c in self.checks if c.get("ok") is not None)

    def not_located(self) -> str:
        """Why nothing is named, never claiming more than was checked: agreement only when a check
        was made, and then how many."""
        made = self.made()
        if made == 0:
            why = "the time budget ran out" if self.gave_up else self.detail or "no entry the walk uses answered"
            return f"nothing could be checked ({why})"
        n = f"{made} check{'s' if made != 1 else ''} made"
        if self.gave_up:
            return f"gave up (time budget) after {n}"
        return f"{self.detail}; {n}" if self.detail else f"every piece checked agrees with the spec on its own ({n})"

    def lines(self) -> list[str]:
        """The report's lines (without indentation)."""
        if not self.found and not self.candidates:
            out = [f"first divergence: not located: {self.not_located()}"]
        elif not self.found:
            out = [f"first divergence: one of {', '.join(self.candidates)} ({self.detail})"]
        else:
            out = [f"first divergence: {self.label()} ({self.detail})"]
            if self.candidates:
                out.append("the case cannot tell apart: " + ", ".join(self.candidates))
        if self.intermediate:
            out.append(f"its own intermediates first depart at {self.intermediate!r}")
        if self.also:
            out.append("also departs on its own: " + "; ".join(self.also[:4]))
        if self.unchecked:
            more = f" (and {len(self.unchecked) - 4} more)" if len(self.unchecked) > 4 else ""
            out.append("could not check: " + "; ".join(self.unchecked[:4]) + more)
        return out


def _why_unchecked(record: list[dict[str, Any]], entry: str) -> str:
    """Why the last check of ``entry`` was not made, in words ("" when it was made)."""
    for r in reversed(record):
        if r["entry"] == entry:
            if r["ok"] is not None:
                return ""
            note = str(r.get("note", ""))
            return f"the plugin does not implement {entry}" if note.startswith("not offered") else f"{entry}: {note}"
    return f"{entry} was not called"


def _unchecked(checks: list[dict[str, Any]]) -> list[str]:
    """Each piece the walk asked about but could not check, once, with why (in the walk's order)."""
    out: list[str] = []
    for r in checks:
        if r["ok"] is not None:
            continue
        note = str(r.get("note", ""))
        why = f"the plugin does not implement {r['entry']}" if note.startswith("not offered") else \
            f"{r['entry']}: {note}"
        line = f"{r['where']} ({why})"
        if line not in out:
            out.append(line)
    return out


def expected_matches(expected: str, d: Mapping[str, Any]) -> bool:
    """Whether a divergence record names ``expected`` ("layer 0/norm", "unembedding", "head", ...):
    the where part is a suffix of the record's ``where`` (so "layer 0" matches "encoder layer 0"),
    the sublayer part, when given, equals the record's ``sublayer``; "a|b": either."""
    if "|" in expected:
        return any(expected_matches(e, d) for e in expected.split("|"))
    where, _, sub = expected.partition("/")
    got = str(d.get("where", ""))
    return bool(got) and got.endswith(where.strip()) and (not sub or d.get("sublayer") == sub.strip())
