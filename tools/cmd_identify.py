"""``ftspec identify``: which conventions an implementation, or a table of numbers, follows.

``ftspec identify TARGET`` calls the implementation on a few designed cases
per entry and searches the variant switches the entry reads
(``conformance/forensics/identify.py``); ``ftspec identify --table FILE`` does the same
for published numbers (``conformance/forensics/identify_table.py``). Both print a table
per entry (each switch: the value found, decided or not, the values
consistent and excluded, the declared value), a ready ``PAPER.replace(...)``
expression, the time per entry, and optionally JSON. Exit codes: 0 every
entry's identified set fits its cases, 1 some entry has no set in the search
that fits, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Optional

__all__ = ["register"]

#: families identified by default: their entries take seconds; training and inference entries only
#: when named with --algorithm
DEFAULT_FAMILIES = ("component", "layer", "architecture")


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
                                   "2 bad input (docs/diagnosis.md).")
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
    from ftspec.conformance.forensics.identify import SECONDS

    from .console import error

    seconds = args.seconds or SECONDS
    if args.json:
        from ftspec.conformance.session.report import OutputPathError, check_writable

        try:
            check_writable(args.json)
        except OutputPathError as exc:
            return error(str(exc))
    if args.table:
        if args.target or args.algorithm or args.variant or args.device or args.dtype:
            return error("--table takes no TARGET, --algorithm, --variant, --device or --dtype (the table "
                         "names its entry and dtype)")
        return _table(args, seconds)
    if not args.target:
        return error("give a TARGET (a registered name or module:object) or --table FILE")
    return _implementation(args, seconds)


def _table(args: argparse.Namespace, seconds: float) -> int:
    from rich.markup import escape

    from ftspec.conformance.forensics.identify_table import TableError, identify_table, read_table

    from .console import console, error

    try:
        table = read_table(args.table)
    except TableError as exc:
        return error(str(exc))
    console.print(f"identifying the table {escape(str(args.table))}: {escape(table.describe())}", soft_wrap=True)
    identity = identify_table(table, str(args.table), seconds=seconds)
    _print_identity(identity)
    doc = {"format": "ftspec-identify/1", "table": str(args.table), "entries": [identity.to_dict()]}
    if not _write(args.json, doc):
        return 2
    if not identity.fits:
        console.print("[bold red]no variant set in the search reproduces the table[/]")
        return 1
    return 0


def _implementation(args: argparse.Namespace, seconds: float) -> int:
    from rich.markup import escape

    from ftspec.conformance.core.execute import Member
    from ftspec.conformance.forensics.identify import IdentifyError, call_variant, expression, identify, merge
    from ftspec.impls.discovery import PluginError, load_target
    from ftspec.spec.registry import REGISTRY
    from ftspec.spec.variants import parse

    from .console import console, error

    try:
        impl = load_target(args.target)
    except PluginError as exc:
        return error(str(exc))
    variant = None
    if args.variant:
        try:
            variant = parse(args.variant)
        except ValueError as exc:
            return error(f"--variant: {exc}")
    if args.algorithm:
        unknown = [a for a in args.algorithm if a not in REGISTRY]
        if unknown:
            import difflib

            near = difflib.get_close_matches(unknown[0], list(REGISTRY), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else "; see ftspec spec list"
            return error(f"unknown algorithm {unknown[0]!r}{hint}")
        missing = [a for a in args.algorithm if a not in impl.algorithms]
        if missing:
            return error(f"{impl.name} does not implement {', '.join(missing)}")
        names = list(dict.fromkeys(args.algorithm))
        skipped: list[str] = []
    else:
        offered = [a for a in REGISTRY if a in impl.algorithms]
        names = [a for a in offered if REGISTRY[a].family in DEFAULT_FAMILIES and REGISTRY[a].switches]
        skipped = [a for a in offered if a not in names]
    dtype = args.dtype or ("float64" if "float64" in impl.dtypes else list(impl.dtypes)[0])
    if dtype not in impl.dtypes:
        return error(f"{impl.name} does not declare dtype {dtype}; it declares {', '.join(impl.dtypes)}")
    try:
        devices = [str(d) for d in impl.devices()]
    except Exception as exc:  # noqa: BLE001 - the plugin's failure
        return error(f"{impl.name}: devices() raised {type(exc).__name__}: {exc}")
    device = args.device or (devices[0] if devices else "cpu")
    if device not in devices:
        return error(f"{impl.name} has no device {device!r}; it has {', '.join(devices)}")
    try:
        call_variant(impl, variant)  # refused before anything runs
    except IdentifyError as exc:
        return error(str(exc))
    console.print(f"identifying [bold]{escape(args.target)}[/] ({escape(str(impl.version))}) at {dtype} on "
                  f"{escape(device)}: {_count(len(names), 'entry', 'entries')}", soft_wrap=True)
    if skipped:
        console.print(f"  not identified by default (name them with --algorithm): {', '.join(skipped)}",
                      soft_wrap=True)
    started = time.perf_counter()
    member = Member(args.target, impl, device)
    identities = []
    for name in names:
        try:
            identity = identify(member, REGISTRY[name], dtype, variant=variant, seconds=seconds,
                                timeout=args.call_timeout)
        except IdentifyError as exc:
            return error(str(exc))
        except Exception as exc:  # noqa: BLE001 - a harness bug at one entry: one line, not a traceback
            return error(f"{name}: identification failed: {type(exc).__name__}: {exc}")
        identities.append(identity)
        _print_identity(identity)
    merged, conflicts = merge(identities)
    total = time.perf_counter() - started
    if len(identities) > 1:
        console.print(f"[bold]all {len(identities)} entries[/]: {expression(merged)}", soft_wrap=True)
        for c in conflicts:
            console.print(f"  conflict: {escape(c)}", soft_wrap=True)
    console.print(f"{_count(len(identities), 'entry', 'entries')} in {total:.1f} s")
    doc = {"format": "ftspec-identify/1", "implementation": args.target, "version": str(impl.version),
           "dtype": dtype, "device": device, "entries": [i.to_dict() for i in identities],
           "merged": {"expression": expression(merged), "variant": merged.to_dict(),
                      "describe": merged.describe(), "conflicts": conflicts},
           "not_identified": skipped, "seconds": round(total, 3)}
    if not _write(args.json, doc):
        return 2
    return 0 if all(i.fits for i in identities) else 1


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
    t.add_column("also consistent / excluded")
    if declared:
        t.add_column("declared")
    for g in identity.groups:
        found = value_text(g.group, g.chosen) if g.consistent else f"nearest: {value_text(g.group, g.chosen)}"
        others = [value_text(g.group, v) for v in g.consistent if v != g.chosen]
        status = g.status
        if g.status == "undecided" and g.same_outputs:
            # every value tried the same outputs: the switch never acted; else they agree on these cases
            status = "undecided (same outputs)" if g.excluded or g.untestable else "no effect"
        parts = []
        if others:
            parts.append(_few(others, "same as: " if g.status == "decided" else "also "))
        if g.excluded:
            parts.append(f"{len(g.excluded)} excluded")
        if g.untestable:
            parts.append("untestable: " + _few([value_text(g.group, v) for v in g.untestable], ""))
        row = [g.group, escape(found), status, escape("; ".join(parts))]
        if declared:
            d = value_text(g.group, g.declared) if g.declared else "-"
            ok = g.declared is not None and any(v == g.declared for v in g.consistent)
            row.append(escape(d) + ("" if ok else " [red](not consistent)[/]"))
        t.add_row(*row)
    console.print(Fitted(lambda: [t]))  # no switch name cut at 80 columns
    fits = "[green]fits every case[/]" if identity.fits else "[bold red]no set in the search fits every case[/]"
    cases = "; ".join(o.label + (" (refused)" if o.outputs is None else "") for o in identity.observations)
    console.print(f"  cases: {escape(cases)}", soft_wrap=True)
    if identity.fits:
        console.print(f"  declare: {escape(identity.expression())}  ({fits})", soft_wrap=True)
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
