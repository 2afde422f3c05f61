"""Verdicts: what a run or a certificate may claim, derived from its per-cell results.

One function, ``derive``, turns recorded results (cells and fixture replays
as plain dicts, the form reports and certificates store) into one of four
verdicts, so that ``ftspec run``, ``ftspec certify`` and ``certify --verify``
judge alike, and a verdict edited in a certificate is caught by re-deriving
it from the cells it rests on:

- ``non-conformant``: a cell failed or errored, a fixture replay failed, or a
  plugin failed to load;
- ``inconclusive``: nothing failed, but a cell ran fewer examples than the
  minimum, or the run was interrupted;
- ``partial``: nothing failed and every cell ran enough examples, but the run
  covered a selection of what the implementations declare (``--algorithm``,
  ``--dtype``, ``--device``) or fewer golden fixtures than the command
  requires;
- ``conformant``: every declared algorithm × dtype × device was searched with
  at least the minimum examples and passed, and its fixtures were replayed
  and passed.

A run that tested nothing (no example, no fixture replay) has no verdict:
``NothingTested`` is raised, and the command exits with ``EXIT_ERROR``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from .status import Status

__all__ = [
    "EXIT_CODES",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "FIXTURE_LEVELS",
    "VERDICTS",
    "NothingTested",
    "derive",
    "exit_code",
    "narrowing",
]

VERDICTS = ("conformant", "partial", "inconclusive", "non-conformant")
#: the exit code of each verdict (docs/reports.md)
EXIT_CODES = {"conformant": 0, "non-conformant": 1, "partial": 3, "inconclusive": 4}
#: bad input, nothing tested, no implementation to run
EXIT_ERROR = 2
#: Ctrl-C (the partial report is written)
EXIT_INTERRUPTED = 130
#: fixture selections, least to most
FIXTURE_LEVELS = ("none", "sample", "all")


class NothingTested(ValueError):
    """The selection left nothing to run: no example was drawn and no fixture replayed."""


def narrowing(selection: Mapping[str, Any], declared: Mapping[str, Sequence[str]]) -> list[str]:
    """What a selection leaves out of what the implementations declare, one phrase per narrowing.

    ``selection``: ``algorithms``, ``dtypes``, ``devices`` (None: all), ``fixtures`` (the selection
    replayed) and ``fixtures_required`` (the least a complete run replays). ``declared``: the
    ``algorithms``, ``dtypes`` and ``devices`` the implementations declare."""
    out = []
    for key in ("algorithms", "dtypes"):
        chosen = selection.get(key)
        if chosen is None:
            continue
        left_out = [d for d in declared.get(key, ()) if d not in chosen]
        if len(left_out) > 3:
            kept = [d for d in declared.get(key, ()) if d in chosen]
            out.append(f"--{key[:-1]} selects {len(kept)} of {len(declared.get(key, ()))} declared {key}")
        elif left_out:
            out.append(f"--{key[:-1]} leaves out {', '.join(left_out)}")
    chosen = selection.get("devices")
    if chosen is not None:
        left_out = [d for d in declared.get("devices", ())
                    if d not in chosen and d.partition(":")[0] not in chosen]
        if left_out:
            out.append(f"--device leaves out {', '.join(left_out)}")
    replayed = selection.get("fixtures", "all")
    required = selection.get("fixtures_required", "all")
    if FIXTURE_LEVELS.index(replayed) < FIXTURE_LEVELS.index(required):
        out.append(f"fixtures: {replayed} replayed, {required} required")
    return out


def derive(cells: Sequence[Mapping[str, Any]], fixtures: Sequence[Mapping[str, Any]], *, minimum: int,
           selection: Mapping[str, Any], declared: Mapping[str, Sequence[str]], interrupted: bool = False,
           broken: Sequence[Any] = ()) -> tuple[str, list[str]]:
    """(verdict, reasons) from recorded results; reasons say why it is not ``conformant``.

    Cells are ``report.cell_dict`` dicts (``status``, ``examples``, ``algorithm``, ``implementation``,
    ``dtype``, ``device``); fixtures are ``FixtureResult.to_dict`` dicts (``ok``, ``device``).
    Raises NothingTested when nothing ran (and the run was not interrupted)."""
    considered = [c for c in cells if c.get("status") != Status.NOT_IMPLEMENTED]
    replayed = [f for f in fixtures if f.get("device", "-") != "-"]
    ran = (any(int(c.get("examples") or 0) > 0 or c.get("status") in (Status.FAIL, Status.ERROR) for c in considered)
           or bool(replayed))
    if not ran and not interrupted and not broken:
        if considered:
            why = "; ".join(sorted({f"{c.get('status')}: {c.get('note') or 'no example ran'}" for c in considered}))
        else:
            why = "no implementation declares the selected algorithm × dtype × device"
        raise NothingTested(f"nothing was tested ({why})")
    reasons: list[str] = []
    for name, error in broken:
        reasons.append(f"plugin {name!r} failed to load: {error}")
    for c in considered:
        if c.get("status") in (Status.FAIL, Status.ERROR):
            more = len(c.get("more_failures") or [])  # forensics/distinct_failures/: other signatures
            reasons.append(f"{c.get('algorithm')} {c.get('implementation')} {c.get('dtype')} {c.get('device')}: "
                           f"{c.get('status')}" + (f" ({1 + more} distinct failures)" if more else ""))
    bad_fixtures = [f for f in fixtures if not f.get("ok", False)]
    if bad_fixtures:
        reasons.append(f"{len(bad_fixtures)} of {len(fixtures)} fixture replays failed")
    if reasons:
        return "non-conformant", reasons
    if interrupted:
        return "inconclusive", ["interrupted before every search and fixture replay ended"]
    short = [c for c in considered if int(c.get("examples") or 0) < minimum and not _exhausted(c)]
    if short:
        reasons = [f"{c.get('algorithm')} {c.get('implementation')} {c.get('dtype')} {c.get('device')}: "
                   f"{c.get('examples')} of {minimum} examples" for c in short]
        return "inconclusive", reasons
    narrowed = narrowing(selection, declared)
    if narrowed:
        return "partial", narrowed
    return "conformant", []


def _exhausted(cell: Mapping[str, Any]) -> bool:
    """Whether a cell judged every case its search can draw (``exhausted``, the count of them): complete
    below the minimum, since no further example exists. It must have run at least that many."""
    n = cell.get("exhausted")
    return isinstance(n, int) and not isinstance(n, bool) and 0 < n <= int(cell.get("examples") or 0)


def exit_code(verdict: Optional[str]) -> int:
    """The exit code of a verdict (``EXIT_ERROR`` for anything else)."""
    return EXIT_CODES.get(verdict or "", EXIT_ERROR)
