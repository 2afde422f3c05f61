"""Console summary of a golden-fixture replay: one row per implementation × dtype × device."""

from __future__ import annotations

import math
from typing import Sequence

from rich.console import JustifyMethod, RenderableType
from rich.markup import escape
from rich.table import Table

from .console import Fitted

__all__ = ["fixture_table"]

#: failing case ids listed per row before "and N more"
SHOWN = 6


def _ratio(r: float) -> str:
    if not math.isfinite(r):
        return "inf"
    return f"{r:.3g}" if r else "0 (exact)"


def fixture_table(results: Sequence, title: str = "Golden fixtures") -> Fitted:
    """Cases, passed, worst error/bound and the failing cases, per implementation × dtype × device.

    Where the failing cases' ids do not fit in a column (they run to 67 characters), the table
    counts them and they are listed below it, so that no id is cut (tools/console.py, ``Fitted``)."""
    groups: dict[tuple[str, str, str], list] = {}
    for r in results:
        groups.setdefault((r.impl, r.dtype, r.device), []).append(r)
    total = len(results)
    passed = sum(1 for r in results if r.ok)
    head = f"{escape(title)}: {passed} of {total} replays pass"
    rows: list[tuple[list[str], list, str]] = []
    for (impl, dtype, device), members in sorted(groups.items()):
        ok = [r for r in members if r.ok]
        bad = [r for r in members if not r.ok]
        worst = max((r.ratio for r in members), default=0.0)
        style = "green" if not bad else "bold red"
        rows.append(([escape(impl), escape(dtype), escape(device), str(len(members)), f"[{style}]{len(ok)}[/]",
                      _ratio(worst)], bad, f"{escape(impl)} {escape(dtype)} {escape(device)}"))

    def listed(bad: list) -> str:
        text = escape(", ".join(f"{r.case} ({r.message.split(':', 1)[0] or 'failed'})" for r in bad[:SHOWN]))
        more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
        return f"[bold red]{text}{more}[/]"

    def table(last: str) -> Table:
        t = Table(title=head)
        columns: list[tuple[str, JustifyMethod]] = [
            ("implementation", "left"), ("dtype", "left"), ("device", "left"), ("cases", "right"),
            ("passed", "right"), ("worst error/bound", "right"), (last, "left")]
        for col, justify in columns:
            t.add_column(col, justify=justify)
        return t

    def wide() -> Sequence[RenderableType]:
        t = table("failures")
        for cells, bad, _ in rows:
            t.add_row(*cells, listed(bad) if bad else "[green]none[/]")
        return [t]

    def below() -> Sequence[RenderableType]:
        t = table("failed")
        for cells, bad, _ in rows:
            t.add_row(*cells, f"[bold red]{len(bad)}[/]" if bad else "[green]0[/]")
        return [t, *(f"failures of {where}: {listed(bad)}" for _, bad, where in rows if bad)]

    return Fitted(wide, below)
