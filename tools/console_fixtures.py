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
    counts them and they are listed below it; where an implementation's name does not fit either
    (``ftspec_example:implementation``, 29 characters, beside six columns at 80), the name moves
    out of the table: into its title when it is the only one, else into a numbered key listed
    below. So no identifier is cut (tools/console.py, ``Fitted``)."""
    groups: dict[tuple[str, str, str], list] = {}
    for r in results:
        groups.setdefault((r.impl, r.dtype, r.device), []).append(r)
    total = len(results)
    passed = sum(1 for r in results if r.ok)
    head = f"{escape(title)}: {passed} of {total} replays pass"
    impls = list(dict.fromkeys(impl for impl, _, _ in sorted(groups)))
    #: per row: the implementation, the columns after it, the failing results, where (for the list below)
    rows: list[tuple[str, list[str], list, str]] = []
    for (impl, dtype, device), members in sorted(groups.items()):
        ok = [r for r in members if r.ok]
        bad = [r for r in members if not r.ok]
        worst = max((r.ratio for r in members), default=0.0)
        style = "green" if not bad else "bold red"
        rows.append((impl, [escape(dtype), escape(device), str(len(members)), f"[{style}]{len(ok)}[/]",
                            _ratio(worst)], bad, f"{escape(impl)} {escape(dtype)} {escape(device)}"))

    def listed(bad: list) -> str:
        text = escape(", ".join(f"{r.case} ({r.message.split(':', 1)[0] or 'failed'})" for r in bad[:SHOWN]))
        more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
        return f"[bold red]{text}{more}[/]"

    def counted(bad: list) -> str:
        return f"[bold red]{len(bad)}[/]" if bad else "[green]0[/]"

    def table(last: str, first: str = "implementation", caption: str = head) -> Table:
        t = Table(title=caption)
        columns: list[tuple[str, JustifyMethod]] = [
            (first, "left"), ("dtype", "left"), ("device", "left"), ("cases", "right"),
            ("passed", "right"), ("worst error/bound", "right"), (last, "left")]
        for col, justify in columns if first else columns[1:]:
            t.add_column(col, justify=justify)
        return t

    def below_it() -> list[str]:
        return [f"failures of {where}: {listed(bad)}" for _, _, bad, where in rows if bad]

    def wide() -> Sequence[RenderableType]:
        t = table("failures")
        for impl, cells, bad, _ in rows:
            t.add_row(escape(impl), *cells, listed(bad) if bad else "[green]none[/]")
        return [t]

    def below() -> Sequence[RenderableType]:
        t = table("failed")
        for impl, cells, bad, _ in rows:
            t.add_row(escape(impl), *cells, counted(bad))
        return [t, *below_it()]

    def keyed() -> Sequence[RenderableType]:
        if len(impls) == 1:  # the name in the title, which wraps at spaces only: never cut
            t = table("failed", first="", caption=f"{escape(title)} of {escape(impls[0])}: {passed} of {total} "
                                                  "replays pass")
            for _, cells, bad, _ in rows:
                t.add_row(*cells, counted(bad))
            return [t, *below_it()]
        t = table("failed", first="impl")
        for impl, cells, bad, _ in rows:
            t.add_row(str(impls.index(impl) + 1), *cells, counted(bad))
        return [t, *(f"impl {i}: {escape(name)}" for i, name in enumerate(impls, 1)), *below_it()]

    return Fitted(wide, below, keyed)
