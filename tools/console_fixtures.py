"""Console summary of a golden-fixture replay: one row per implementation × dtype × device."""

from __future__ import annotations

import math
from typing import Sequence

from rich.console import JustifyMethod
from rich.markup import escape
from rich.table import Table

__all__ = ["fixture_table"]

#: failing case ids listed per row before "and N more"
SHOWN = 6


def _ratio(r: float) -> str:
    if not math.isfinite(r):
        return "inf"
    return f"{r:.3g}" if r else "0 (exact)"


def fixture_table(results: Sequence, title: str = "Golden fixtures") -> Table:
    """Cases, passed, worst error/bound and the failing cases, per implementation × dtype × device."""
    groups: dict[tuple[str, str, str], list] = {}
    for r in results:
        groups.setdefault((r.impl, r.dtype, r.device), []).append(r)
    total = len(results)
    passed = sum(1 for r in results if r.ok)
    t = Table(title=f"{title}: {passed} of {total} replays pass")
    columns: list[tuple[str, JustifyMethod]] = [
        ("implementation", "left"), ("dtype", "left"), ("device", "left"), ("cases", "right"), ("passed", "right"),
        ("worst error/bound", "right"), ("failures", "left")]
    for col, justify in columns:
        t.add_column(col, justify=justify, overflow="fold")
    for (impl, dtype, device), rows in sorted(groups.items()):
        ok = [r for r in rows if r.ok]
        bad = [r for r in rows if not r.ok]
        worst = max((r.ratio for r in rows), default=0.0)
        if bad:
            listed = escape(", ".join(f"{r.case} ({r.message.split(':', 1)[0] or 'failed'})" for r in bad[:SHOWN]))
            more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
            failures = f"[bold red]{listed}{more}[/]"
        else:
            failures = "[green]none[/]"
        style = "green" if not bad else "bold red"
        t.add_row(escape(impl), dtype, escape(device), str(len(rows)), f"[{style}]{len(ok)}[/]", _ratio(worst),
                  failures)
    return t
