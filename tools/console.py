"""Console output: progress while a run goes, the summary table, the verdict.

Everything a plugin controls (its name, version, devices, exception
messages, failure reports) is escaped before rich sees it, and the consoles
have emoji off: an error message holding "[/bold]" must print as written, and
"notimpl:factory" must not become an emoji.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable, Iterator, Optional, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ftspec.conformance.running.results import LEFT_OUT, Status
from ftspec.conformance.running.runner import RunResult

__all__ = ["Fitted", "RunProgress", "console", "err_console", "error", "fit", "print_failures", "print_verdict",
           "summary_table"]

console = Console(stderr=False, highlight=False, emoji=False)
err_console = Console(stderr=True, highlight=False, emoji=False)

#: the colour of each verdict
VERDICT_STYLE = {"conformant": "bold green", "partial": "bold yellow", "inconclusive": "bold yellow",
                 "non-conformant": "bold red"}

_STYLE = {"pass": "green", "fail": "bold red", "error": "bold red", "no examples": "yellow",
          "not implemented": "dim"}


def error(message: str, code: int = 2) -> int:
    """Print a one-line error (escaped) to stderr; returns ``code`` (the exit status)."""
    err_console.print(f"[bold red]error[/]: {escape(message)}", soft_wrap=True)  # one line, however long
    return code


def print_failures(result: RunResult) -> None:
    """One paragraph per failing cell: its report with the reproducer, or its status and note."""
    for cell in result.failures():
        if cell.failure:
            # soft_wrap: the terminal folds long lines, rich inserts no newline (the reproducer stays one line)
            console.print(f"[bold red]FAIL[/] {escape(cell.failure.report)}", soft_wrap=True)
            for more in getattr(cell, "more_failures", []):  # conformance/forensics/distinct_failures.py
                console.print(f"[bold red]FAIL (another failure)[/] {escape(more['report'])}", soft_wrap=True)
        else:
            console.print(f"[bold red]{escape(cell.status.upper())}[/] {escape(cell.algorithm)} {escape(cell.impl)} "
                          f"{cell.dtype} {escape(cell.device)}: {escape(cell.note)}")


def print_verdict(result: RunResult, subject: str = "") -> None:
    """The last line: the verdict, the cells behind it, and why it is not conformant."""
    cells = [c for c in result.cells if c.status != "not implemented"]
    passed = sum(1 for c in cells if c.status == Status.PASS)
    examples = sorted(c.examples for c in cells)
    counts = (f"examples per cell {examples[0]} to {examples[-1]} (at least {result.minimum} required)"
              if examples else "no examples")
    head = f"{escape(subject)}: " if subject else ""
    style = VERDICT_STYLE.get(result.verdict, "bold red")
    line = f"{head}[{style}]{result.verdict or 'no verdict'}[/]: {passed} of {len(cells)} cells pass; {counts}"
    if result.fixtures:
        ok = sum(1 for f in result.fixtures if f.ok)
        line += f"; {ok} of {len(result.fixtures)} fixture replays pass"
    if result.interrupted:
        line += " [bold yellow](interrupted)[/]"
    console.print(line)
    shown = result.reasons[:6]
    for reason in shown:
        console.print(f"  - {escape(str(reason))}")
    if len(result.reasons) > len(shown):
        console.print(f"  - and {len(result.reasons) - len(shown)} more")


def _count(n: int, one: str, many: str = "") -> str:
    """``n`` and the noun, singular for 1 ("1 cell ran", not "1 cells ran")."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def ratio_text(r: float) -> str:
    if not math.isfinite(r):
        return "inf"
    return f"{r:.3g}" if r else "0 (exact)"


class RunProgress:
    """Receives runner events; shows bars on a terminal, a line per search (and per tenth of the
    fixture replay) otherwise."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.live = sys.stderr.isatty() and not quiet
        self.progress: Optional[Progress] = None
        self.task: Any = None
        self.overall: Any = None
        self.total_searches = 0
        self.done = 0
        self.fixture_bar: Optional[Progress] = None
        self.fixture_task: Any = None
        self.fixture_step = 0

    def __call__(self, event: str, **info: Any) -> None:
        getattr(self, f"on_{event}", lambda **_: None)(**info)

    def _bar(self) -> Progress:
        return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err_console, transient=True)

    def on_plan(self, searches: int, examples: int) -> None:
        self.total_searches = searches
        self.done = 0
        if self.quiet:
            return
        err_console.print(f"[bold]ftspec[/]: {_count(searches, 'search', 'searches')} (algorithm × dtype), up to "
                          f"{_count(examples, 'example')} each")
        if self.live:
            self.progress = self._bar()
            self.overall = self.progress.add_task("searches", total=searches)
            self.progress.start()

    def on_start(self, algorithm: str, dtype: str, members: list[str], examples: int) -> None:
        if self.progress is not None:
            label = escape(f"[{self.done + 1}/{self.total_searches}] {algorithm} {dtype} ({len(members)} impl×device)")
            self.task = self.progress.add_task(label, total=examples)

    def on_example(self, algorithm: str, dtype: str) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task)

    def on_failure(self, cell: Any) -> None:
        if self.quiet:
            return
        err_console.print(f"[bold red]FAIL[/] {escape(cell.failure.report)}", soft_wrap=True)  # reproducer unbroken

    def on_end(self, algorithm: str, dtype: str, cells: list) -> None:
        self.done += 1
        if self.progress is not None:
            if self.task is not None:
                self.progress.remove_task(self.task)
                self.task = None
            self.progress.advance(self.overall)
        if not self.quiet and not self.live:
            status = ", ".join(f"{c.impl}@{c.device}: {c.status} ({c.examples})" for c in cells if c.note != LEFT_OUT)
            err_console.print(escape(f"[{self.done}/{self.total_searches}] {algorithm} {dtype}: {status}"))

    def on_done(self, result: RunResult) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def on_extend(self, cells: int, minimum: int, seconds: float) -> None:
        if not self.quiet:
            err_console.print(f"[bold]ftspec[/]: {_count(cells, 'cell')} ran fewer than {minimum} examples: one "
                              f"more round for {'it' if cells == 1 else 'them'} (at most {seconds:g} s per search)")

    def on_fixtures(self, done: int, total: int, which: str) -> None:
        if self.quiet:
            return
        if done == 0:
            err_console.print(f"[bold]ftspec[/]: replaying {_count(total, 'golden fixture case')} ({which})")
            if self.live and total:
                self.fixture_bar = self._bar()
                self.fixture_task = self.fixture_bar.add_task("fixture cases", total=total)
                self.fixture_bar.start()
            return
        if self.fixture_bar is not None:
            self.fixture_bar.update(self.fixture_task, completed=done)
            if done >= total:
                self.fixture_bar.stop()
                self.fixture_bar = None
        elif done >= total or done * 10 // max(total, 1) > self.fixture_step:
            self.fixture_step = done * 10 // max(total, 1)
            err_console.print(f"fixtures: {done}/{total} cases replayed")


# --- tables that never cut a name -------------------------------------------------------------------
#
# rich fits a table to the terminal by cutting cells ("positional…"), which made two rows of a
# summary read the same at 80 columns. Every table here is a ``Fitted``: a few layouts of the same
# content, the first whose every word fits the width it is printed at. rich wraps cells at spaces
# only, and an identifier (algorithm, implementation, variant switch, dtype, device, fixture id) is
# one word, so a layout whose longest words fit cuts none of them.

#: a layout: the table first, then whatever is printed below it
Layout = Callable[[], Sequence[RenderableType]]


def fit(table: Table, console: Console, width: int) -> bool:
    """Fix ``table``'s column widths so that it is at most ``width`` columns wide and no word of a
    cell or header is cut. False, with the table left as it was, when its longest words alone do not
    fit."""
    options = console.options.update_width(1 << 16)
    mins: list[int] = []
    maxs: list[int] = []
    for column in table.columns:
        cells = [column.header, *column.cells] if table.show_header else list(column.cells)
        sizes = [Measurement.get(console, options, cell) for cell in cells]
        mins.append(max((m.minimum for m in sizes), default=0))
        maxs.append(max((m.maximum for m in sizes), default=0))
    overhead = Measurement.get(console, options, table).maximum - sum(maxs)  # rules and padding
    room = width - overhead
    if sum(maxs) <= room:
        return True
    if sum(mins) > room:
        return False
    widths, spare = list(mins), room - sum(mins)
    for i in sorted(range(len(widths)), key=lambda i: maxs[i] - mins[i]):  # unwrap the cheapest columns first
        more = min(maxs[i] - mins[i], spare)
        widths[i] += more
        spare -= more
    for column, w in zip(table.columns, widths):
        column.width = w
    return True


def compact(table: Table) -> Table:
    """``table`` without vertical rules or outer frame: two spaces between columns."""
    table.box = box.SIMPLE_HEAD
    table.show_edge = False
    table.pad_edge = False
    table.collapse_padding = True
    return table


class Fitted:
    """The first of ``layouts`` (each tried framed, then ``compact``) that fits the width it is printed
    at with no word cut; the last one, compact, when none does."""

    def __init__(self, *layouts: Layout) -> None:
        self.layouts = layouts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        parts: Sequence[RenderableType] = ()
        for make in self.layouts:
            for squeeze in (False, True):
                parts = make()
                table = parts[0]
                assert isinstance(table, Table)
                if squeeze:
                    compact(table)
                if fit(table, console, options.max_width):
                    yield from parts
                    return
        yield from parts


def summary_table(result: RunResult, title: str = "Conformance") -> Fitted:
    """Algorithm × implementation × dtype × device: examples, verdict, worst error/bound. Wide: a row
    per cell; narrower: rows grouped under their algorithm's name, then the device beside the implementation."""
    head = f"{escape(title)}: profile {result.profile}, seed {result.seed}, {result.seconds:.1f} s"
    rows: list[tuple[str, str, str, str, str, str, str]] = []
    missing: dict[str, list[str]] = {}
    for c in result.cells:
        if c.status == "not implemented":
            if c.algorithm not in missing.setdefault(c.impl, []):
                missing[c.impl].append(c.algorithm)
            continue
        verdict = c.status if c.status != Status.FAIL else f"fail ({c.failure.check})" if c.failure else "fail"
        extra = f" +{c.out_of_range} out of range" if c.out_of_range else ""
        short = " [yellow](too few)[/]" if c.status == Status.PASS and c.examples < result.minimum else ""
        rows.append((escape(c.algorithm), escape(c.impl), escape(c.dtype), escape(c.device),
                     f"{c.examples}{extra}{short}", f"[{_STYLE.get(c.status, '')}]{escape(verdict)}[/]",
                     ratio_text(c.worst_ratio) if c.examples else "-"))
    caption = escape("; ".join(f"{impl} does not implement {', '.join(algs)}" for impl, algs in missing.items()))
    tail: list[tuple[str, JustifyMethod]] = [("examples", "right"), ("verdict", "left"), ("worst error/bound", "right")]

    def table(columns: Sequence[tuple[str, JustifyMethod]]) -> Table:
        t = Table(title=head, caption=caption or None)
        for name, justify in columns:
            t.add_column(name, justify=justify)
        return t

    def flat() -> Sequence[RenderableType]:
        t = table([("algorithm", "left"), ("implementation", "left"), ("dtype", "left"), ("device", "left"), *tail])
        for row in rows:
            t.add_row(*row)
        return [t]

    def grouped(inline: bool) -> Sequence[RenderableType]:
        where: list[tuple[str, JustifyMethod]] = [("dtype", "left")] if inline else [("dtype", "left"),
                                                                                     ("device", "left")]
        t = table([("algorithm / implementation" + (" on device" if inline else ""), "left"), *where, *tail])
        last = None
        for algorithm, impl, dtype, device, *rest in rows:
            if algorithm != last:
                t.add_row(f"[bold]{algorithm}[/]")
                last = algorithm
            if inline:  # indented as a block: a name that wraps stays under its algorithm
                t.add_row(Padding(f"{impl} on {device}", (0, 0, 0, 2)), dtype, *rest)
            else:
                t.add_row(Padding(impl, (0, 0, 0, 2)), dtype, device, *rest)
        return [t]

    return Fitted(flat, lambda: grouped(False), lambda: grouped(True))
