"""``ftspec identify``: which conventions an implementation, or a table of numbers, follows.

Parses arguments into ``conformance.session.identify`` and prints what it
returns; the work is the library's. ``ftspec identify TARGET`` calls the
implementation on a few designed cases per entry and searches the variant
switches the entry reads (``conformance/forensics/identify.py``); ``ftspec
identify --table FILE`` does the same for published numbers
(``conformance/forensics/identify_table.py``). Both print a table
per entry (each switch: the value found, decided or not, the values
consistent and excluded, the declared value), a ready ``PAPER.replace(...)``
expression, the time per entry, and optionally JSON. Exit codes: 0 every
entry's identified set fits its cases, 1 some entry has no set in the search
that fits, 2 bad input, 4 inconclusive: some entry has no fitting set and
candidates that could not be judged (a table whose printed inputs leave them
unbounded; every candidate unbounded: nothing was tested), so neither a fit
nor "nothing fits" can be said.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Optional

__all__ = ["register"]


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, given {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, given {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("identify", help="infer the conventions (variant set) an implementation or a table follows",
                       description="Infer which value of each variant switch an implementation follows, entry by "
                                   "entry, from a few designed cases, without trusting its declaration; or, with "
                                   "--table, which variant sets reproduce published numbers within their printed "
                                   "precision. Exit codes: 0 identified, 1 no set in the search fits some entry, "
                                   "2 bad input, 4 inconclusive (a table whose printed inputs leave the "
                                   "candidates unbounded: cannot tell) (docs/diagnosis.md).")
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="a registered implementation name or module:object")
    p.add_argument("--table", metavar="FILE", help="identify from a table of numbers (format: docs/diagnosis.md)")
    p.add_argument("--algorithm", action="append", metavar="NAME",
                   help="only this entry (repeatable; default: every component, layer and architecture the "
                        "implementation offers)")
    p.add_argument("--dtype", choices=["float64", "float32", "bfloat16", "float16"],
                   help="the dtype of the calls (default: float64 where the implementation has it)")
    p.add_argument("--device", metavar="DEVICE", help="the device (default: the implementation's first)")
    p.add_argument("--variant", metavar="SET",
                   help="the set to call the implementation with (one it declares; e.g. hf-gpt2 or "
                        "phuong-hutter+epsilon=1e-5,epsilon_placement=inside_root); it decides only which "
                        "parameters are passed (default: its first declared set, or the paper's)")
    p.add_argument("--seconds", type=_positive, default=None, metavar="S",
                   help="budget per entry in seconds, calls included (default: 60)")
    p.add_argument("--call-timeout", type=_positive, default=60.0, metavar="S",
                   help="one call taking longer is recorded as a refusal (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftspec.conformance.session import SessionError, identify
    from ftspec.conformance.session.report import OutputPathError, check_writable

    from .console import console, error

    if args.table and (args.target or args.algorithm or args.variant or args.device or args.dtype):
        return error("--table takes no TARGET, --algorithm, --variant, --device or --dtype (the table "
                     "names its entry and dtype)")
    if not args.table and not args.target:
        return error("give a TARGET (a registered name or module:object) or --table FILE")
    try:
        if args.json:
            check_writable(args.json)
        variant = _variant(args.variant)
        found = identify(args.target, table=args.table, algorithms=args.algorithm, dtype=args.dtype,
                         device=args.device, variant=variant, seconds=args.seconds, call_timeout=args.call_timeout,
                         progress=_progress)
    except (SessionError, OutputPathError) as exc:
        return error(str(exc))
    if found.table is None:
        _print_summary(found)
    if not _write(args.json, found.to_dict()):
        return 2
    if found.fits:
        return 0
    if found.untested:
        console.print("[bold yellow]inconclusive: nothing was tested[/] (the printed inputs leave every candidate "
                      "unbounded: cannot tell whether any variant set reproduces the numbers)", soft_wrap=True)
        return 4
    if found.inconclusive:
        console.print("[bold yellow]inconclusive[/]: no variant set judged fits, and some could not be judged "
                      "(cannot tell)", soft_wrap=True)
        return 4
    if found.table is not None:
        console.print("[bold red]no variant set in the search reproduces the table[/]")
    return 1


def _variant(text: Optional[str]) -> Any:
    """``--variant``, parsed (SessionError naming the option)."""
    if not text:
        return None
    from ftspec.conformance.session import SessionError
    from ftspec.spec.variants import parse

    try:
        return parse(text)
    except ValueError as exc:
        raise SessionError(f"--variant: {exc}") from None


def _progress(event: str, **info: Any) -> None:
    """What ``session.identify`` reports as it goes: what it identifies, then each entry's table."""
    from rich.markup import escape

    from .console import console

    if event == "entry":
        _print_identity(info["identity"])
    elif event == "start" and "table" in info:
        console.print(f"identifying the table {escape(info['table'])}: {escape(info['describe'])}", soft_wrap=True)
    elif event == "start":
        console.print(f"identifying [bold]{escape(info['subject'])}[/] ({escape(info['version'])}) at "
                      f"{info['dtype']} on {escape(info['device'])}: "
                      f"{_count(len(info['entries']), 'entry', 'entries')}", soft_wrap=True)
        if info["not_identified"]:
            console.print(f"  not identified by default (name them with --algorithm): "
                          f"{', '.join(info['not_identified'])}", soft_wrap=True)


def _print_summary(found: Any) -> None:
    """The sets merged over the entries, their conflicts and the time."""
    from rich.markup import escape

    from ftspec.conformance.forensics.identify import expression

    from .console import console

    merging = found.merging
    if len(found.identities) > 1:
        console.print(f"[bold]all {len(found.identities)} entries[/]: {expression(found.merged)}", soft_wrap=True)
        for c in found.conflicts:
            console.print(f"  conflict: {escape(c)}", soft_wrap=True)
    if merging is not None:
        for u in merging.undecided:
            console.print(f"  undecided: {escape(u)} (the set above holds the declared value or the first; "
                          "not a finding)", soft_wrap=True)
        if merging.changes:
            changes = ", ".join(f"{k}={v!r}" for k, v in merging.changes.items())
            console.print(f"  changes from the declared set: {escape(changes)}", soft_wrap=True)
        elif found.identities and any(g.declared for i in found.identities for g in i.groups) \
                and not found.conflicts:
            console.print("  changes from the declared set: none (every declared value is possible)",
                          soft_wrap=True)
    console.print(f"{_count(len(found.identities), 'entry', 'entries')} in {found.seconds:.1f} s")


def _print_identity(identity: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    from ftspec.conformance.forensics.identify import value_text

    from .console import Fitted, console

    declared = any(g.declared for g in identity.groups)
    t = Table(title=f"{identity.algorithm} at {identity.dtype}", title_justify="left")
    t.add_column("switch", no_wrap=True)
    t.add_column("found")
    t.add_column("status")
    t.add_column("other values")
    if declared:
        t.add_column("declared")
    for g in identity.groups:
        found = (value_text(g.group, g.chosen) if g.consistent else "-" if g.status == "cannot tell"
                 else f"nearest: {value_text(g.group, g.chosen)}")
        status = g.status
        if g.status == "undecided" and g.same_outputs and not (g.unseparated or g.cannot_tell):
            # every value tried the same outputs: the switch never acted; else they agree on these cases
            status = "undecided (same outputs)" if g.excluded or g.untestable else "no effect"
        rivals = [value_text(g.group, v) for v in g.alternatives if v not in g.cannot_tell]
        parts = []
        if g.same_as:
            parts.append(_few([value_text(g.group, v) for v in g.same_as], "same here: "))
        if rivals:  # possible too: no case separates them from the value found
            parts.append(_few(rivals, "not separated: "))
        if g.cannot_tell:
            parts.append(f"{len(g.cannot_tell)} cannot tell")
        if g.excluded:
            parts.append(f"{len(g.excluded)} excluded")
        if g.untestable:
            parts.append("untestable: " + _few([value_text(g.group, v) for v in g.untestable], ""))
        row = [g.group, escape(found), status, escape("; ".join(parts))]
        if declared:
            d = value_text(g.group, g.declared) if g.declared else "-"
            ok = g.declared is not None and any(v == g.declared for v in g.consistent)
            possible = g.declared is not None and any(v == g.declared for v in g.possible)
            row.append(escape(d) + ("" if ok else " [yellow](not excluded)[/]" if possible
                                    else " [red](not consistent)[/]"))
        t.add_row(*row)
    console.print(Fitted(lambda: [t]))  # no switch name cut at 80 columns
    fits = "[green]fits every case[/]" if identity.fits else "[bold red]no set in the search fits every case[/]"
    cases = "; ".join(o.label + (" (refused)" if o.outputs is None else "") for o in identity.observations)
    console.print(f"  cases: {escape(cases)}", soft_wrap=True)
    if identity.fits:
        console.print(f"  declare: {escape(identity.expression())}  ({fits})", soft_wrap=True)
    elif identity.untested:
        console.print("  [bold yellow]cannot tell[/]: no candidate could be judged on any case; nothing fits "
                      "and nothing is excluded", soft_wrap=True)
    elif identity.inconclusive:
        console.print("  [bold yellow]cannot tell[/]: no set judged fits every case, and some sets could not "
                      "be judged (see the switches' 'cannot tell')", soft_wrap=True)
    else:
        console.print(f"  {fits}; nearest set (fits {identity.cases_fit} of {len(identity.observations)} "
                      f"cases): {escape(identity.expression())}", soft_wrap=True)
    if identity.presets:
        console.print(f"  presets that fit (on this entry's switches): {', '.join(identity.presets)}", soft_wrap=True)
    for note in identity.notes:
        console.print(f"  note: {escape(note)}", soft_wrap=True)
    calls = f", calls {identity.seconds_calls:.2f} s" if identity.seconds_calls else ""
    gave = " [yellow](budget spent: gave up)[/]" if identity.gave_up else ""
    console.print(f"  {identity.evaluations} spec evaluations in {identity.seconds:.2f} s{calls}{gave}")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _few(values: list[str], prefix: str, limit: int = 4) -> str:
    if not values:
        return ""
    shown = ", ".join(values[:limit])
    return prefix + shown + (f" (+{len(values) - limit} more)" if len(values) > limit else "")


def _write(path: Optional[str], doc: dict[str, Any]) -> bool:
    if not path:
        return True
    from pathlib import Path

    from .console import console, error

    try:
        Path(path).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        error(f"cannot write the JSON: {exc}")
        return False
    console.print(f"JSON: {_escape(path)}")
    return True


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
