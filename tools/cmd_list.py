"""``ftspec list``: every implementation, what it declares, or why it failed to load.

Prints ``impls.discovery.listing()``."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .console import Fitted

__all__ = ["listing_view", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="show the registered implementations",
                       description="Show every registered implementation: name, version, devices, dtypes, "
                                   "variant sets, algorithms covered and their shape limits, or why it "
                                   "failed to load.")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    p.add_argument("--load-timeout", metavar="S", type=float, default=None,
                   help="seconds loading one plugin, or its devices(), may take (default 60)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftspec.impls.discovery import DEFAULT_LOAD_TIMEOUT, PluginConflict, listing

    timeout = args.load_timeout if args.load_timeout and args.load_timeout > 0 else DEFAULT_LOAD_TIMEOUT
    try:
        rows = listing(timeout)
    except PluginConflict as exc:
        from .console import error

        return error(str(exc))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0 if all(r["loaded"] for r in rows) else 1
    from .console import console

    console.print(listing_view(rows))
    return 0 if all(r["loaded"] for r in rows) else 1


def variant_text(variants: Any) -> str:
    """A plugin's variant sets, one a line, each ``preset + switch=value, ...``: spaces where rich
    may wrap, so that a switch is never cut ("phuong-hutter+epsilon=...,..." runs to 130 characters).
    Sets declared per algorithm ({algorithm: sets}): the algorithms that share theirs on one line
    ending in ":", their sets below it, indented."""
    if isinstance(variants, str):
        return variants
    if isinstance(variants, dict):
        groups: dict[tuple[str, ...], list[str]] = {}
        for algorithm, sets in variants.items():
            groups.setdefault((str(sets),) if isinstance(sets, str) else tuple(map(str, sets)), []).append(algorithm)
        lines = []
        for sets, algorithms in groups.items():
            lines.append(", ".join(algorithms) + ":")
            lines += ["  " + line for line in variant_text(list(sets)).splitlines()]
        return "\n".join(lines)
    out = []
    for text in variants:
        base, plus, rest = str(text).partition("+")
        out.append(base + (" + " + ", ".join(rest.split(",")) if plus else ""))
    return "\n".join(out)


def dtype_text(row: dict[str, Any]) -> str:
    """The dtypes, each with the formats a mixed-precision call accumulates and takes its softmax
    in where wider ("bfloat16 (accumulate float32, softmax float32)"), then the algorithms declared
    at fewer dtypes, one a line ("rms_norm: float32, bfloat16")."""
    mixed = row.get("mixed_precision", {})
    lines = [", ".join(d + (" (" + ", ".join(f"{k} {v}" for k, v in mixed[d].items() if v != d) + ")"
                            if d in mixed else "") for d in row["dtypes"])]
    groups: dict[tuple[str, ...], list[str]] = {}
    for algorithm, dtypes in row.get("dtypes_by_algorithm", {}).items():
        groups.setdefault(tuple(dtypes), []).append(algorithm)
    lines += [f"{', '.join(algorithms)}: {', '.join(dtypes)}" for dtypes, algorithms in groups.items()]
    return "\n".join(lines)


def algorithm_text(row: dict[str, Any]) -> str:
    """Coverage, and the shorter of the lists of algorithms implemented and missing."""
    have, missing = list(row["algorithms"]), list(row["missing"])
    if not missing:
        return f"{row['coverage']} (all)"
    if len(have) <= len(missing):
        return f"{row['coverage']}: " + ", ".join(have)
    return f"{row['coverage']}, missing: " + ", ".join(missing)


def listing_view(rows: list[dict[str, Any]]) -> Fitted:
    """The listing for the console: a table of one row per implementation where it fits, else one
    row per field under each implementation's name (no name, switch or algorithm is ever cut)."""
    from rich.markup import escape as e
    from rich.table import Table

    from .console import Fitted

    def fields(r: dict[str, Any]) -> list[tuple[str, str]]:  # everything here is the plugin's: escaped for rich
        if not r["loaded"]:
            out = [("error", f"[red]{e(str(r['error']))}[/]")]
            return out + ([("hint", f"[dim]hint: {e(r['hint'])}[/]")] if r.get("hint") else [])
        limits = "\n".join(f"{a}: {text}" for a, text in r.get("limits", {}).items())
        return [("version", e(str(r["version"]))), ("devices", e(", ".join(r["devices"]))),
                ("dtypes", e(dtype_text(r))), ("variants", e(variant_text(r["variants"]))),
                ("algorithms", e(algorithm_text(r)))] + ([("limits", e(limits))] if limits else [])

    def wide() -> list[Any]:
        t = Table(title="ftspec implementations")
        for col in ("name", "version", "devices", "dtypes", "variants", "algorithms"):
            t.add_column(col)
        for r in rows:
            f = dict(fields(r))
            if not r["loaded"]:
                hint = f"\n{f['hint']}" if "hint" in f else ""
                t.add_row(e(r["name"]), "[red]failed to load[/]", f["error"] + hint)
                continue
            algs = "\n".join([f["algorithms"], *(f"limits {line}" for line in f.get("limits", "").splitlines())])
            t.add_row(e(r["name"]), f["version"], f["devices"], f["dtypes"], f["variants"], algs)
        return [t]

    def per_field() -> list[Any]:
        t = Table(title="ftspec implementations")
        for col in ("name", "", ""):
            t.add_column(col)
        for r in rows:
            items = fields(r) if r["loaded"] else [("", "[red]failed to load[/]"), *fields(r)]
            for i, (key, value) in enumerate(items):
                t.add_row(f"[bold]{e(r['name'])}[/]" if i == 0 else "", key, value, end_section=i == len(items) - 1)
        return [t]

    return Fitted(wide, per_field)
