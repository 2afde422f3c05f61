"""A failing cell's record: its replayable case files (the shrunk case's, and the
worst example's when it fails by more), its report with the diagnosis, and the
``failure`` progress event (``Runner.record_failure``, which the search and the
search for further distinct failures call)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ..core.case import Case
from ..core.casefile import reproducer, write_case
from ..core.execute import Member
from ..core.judge import Finding
from ..core.refusals import answered_refusals
from ..forensics.diagnosis import DIAGNOSED_CHECKS, diagnose_failure
from .results import Cell, Failure, Status

if TYPE_CHECKING:
    from .runner import Runner

__all__ = ["record_failure"]


def _refusal_lines(answered: Sequence[Finding]) -> str:
    """The report's lines on the refusals a member answers: one line per refusal kind (its name; the
    first finding's message is the report's second line)."""
    if not answered:
        return ""
    names = [f.refusal or f.message for f in answered]
    return (f"  refusals it answers instead of refusing ({len(names)}):\n"
            + "".join(f"    - {n}\n" for n in names))


def record_failure(runner: "Runner", cell: Cell, m: Member, finding: Finding, case: Case, dtype: str, *,
                   shrunk: bool, others: Sequence[tuple[float, Case]] = (),
                   refusals: Sequence[Finding] = ()) -> None:
    """``cell`` fails on ``case``: its case file written, its report (diagnosis included) and
    reproducer set, the ``failure`` progress event sent. ``others``: further failing examples
    of the cell, (error/bound, case) each, the worst first: the worst is shown beside the
    shrunk case (with its own case file) when it fails by more, and the diagnosis uses them.

    A ``refusal`` failure (the member answered what the spec refuses) has no values to explain:
    no diagnosis, first divergence or worst example is sought around it. Its report lists every
    refusal the member answers, each kind once (``refusals.answered_refusals``: ``refusals``, the
    search's refusal findings, and a fresh check of every refusal on ``case``), so one run names
    every refusal gap of the cell."""
    cell.status = Status.FAIL
    path = _write_case_file(runner, cell, m, finding, case, dtype)
    command = reproducer(path, m.label, m.device, dtype) if path else "(no case file)"
    refusal = finding.check == "refusal"
    worst = [] if refusal else _worst_line(runner, cell, m, finding, case, dtype, others)
    answered = (answered_refusals(m, case, dtype, timeout=runner.timeout, found=[finding, *refusals])
                if refusal else [])
    report = (f"{case.algorithm}: implementation {m.label!r} ({m.impl.version}) at {dtype} on {m.device} "
              f"fails the {finding.check} check.\n"
              f"  {finding.message}\n"
              f"  case{' (shrunk)' if shrunk else ''}: {case.describe()}\n"
              + "".join(f"  {line}\n" for line in worst)
              + _refusal_lines(answered) +
              f"  reproduce:\n    {command}")
    diagnosis = None if refusal else diagnose_failure(m, case, finding.check, dtype, timeout=runner.timeout,
                                                      failing=[c for _, c in others])
    if diagnosis is not None:  # its lines go before the reproducer, which stays last
        head, _, tail = report.rpartition("\n  reproduce:")
        report = head + "".join(f"\n  {line}" for line in diagnosis.lines()) + "\n  reproduce:" + tail
    cell.failure = Failure(finding.check, finding.message, case, str(path) if path else None, command, report,
                           shrunk, diagnosis.to_dict() if diagnosis is not None else None,
                           [{"refusal": f.refusal, "message": f.message} for f in answered])
    runner.progress("failure", cell=cell)

def _worst_line(runner: "Runner", cell: Cell, m: Member, finding: Finding, case: Case, dtype: str,
                others: Sequence[tuple[float, Case]]) -> list[str]:
    """The report's lines on the cell's worst failing example, when it is another case than the
    shrunk one and fails by more (its case file written beside the shrunk one's)."""
    if not others or finding.check not in DIAGNOSED_CHECKS:
        return []
    ratio, worst = others[0]
    shown = finding.ratio
    if not ratio > shown:  # an unknown ratio (inf: not a value check's) is never exceeded
        return []
    path = _write_case_file(runner, cell, m, finding, worst, dtype, suffix="-worst")
    how = f"error/bound {ratio:.3g}" if math.isfinite(ratio) else "a non-finite error"
    lines = [f"worst example of this cell: {how} (the shrunk case: "
             f"{shown:.3g}): {worst.describe()}"]
    if path is not None:
        lines.append(f"  reproduce it: {reproducer(path, m.label, m.device, dtype)}")
    return lines

def _write_case_file(runner: "Runner", cell: Cell, m: Member, finding: Finding, case: Case, dtype: str,
                     suffix: str = "") -> Optional[Path]:
    """The failing case's replayable file in ``case_dir`` (None, with a note on the cell, when it
    cannot be written: reporting must not end the run)."""
    # the failure's check and message too: two distinct failures of a cell may shrink to one size
    tag = hashlib.sha256(f"{case.algorithm}{m.label}{dtype}{m.device}{case.size()}{finding.check}"
                         f"{finding.message}".encode()).hexdigest()[:8]
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in m.label)
    device = m.device.replace(":", "_")
    path = runner.case_dir / f"{case.algorithm}-{safe}-{dtype}-{device}-{tag}{suffix}.json"
    try:
        write_case(case, path, impl=m.label, impl_version=m.impl.version, dtype=dtype, device=m.device,
                   check=finding.check, message=finding.message)
    except Exception as exc:  # noqa: BLE001 - reporting must not end the run
        cell.note = f"could not write the case file: {exc}"
        return None
    return path
