"""``ftspec list``: every implementation, one line each; ``ftspec list NAME`` for the details.

The short listing shows each plugin's name, version, algorithms covered and dtypes, or that it
failed to load and why. Those come from loading the plugin, which imports its libraries (torch,
JAX, transformers: 4 s warm, 13 s from a cold disk on 2 cores, 2026-12-06), so the short listing
keeps what each plugin declared in a cache (``plugin_cache.py``), trusted only while nothing it
could depend on changed: the installed distributions, the entry points, the plugin's source files
and ftspec's own, the Python, and the environment variables the libraries read. A plugin whose
record is missing or stale is loaded again. ``--fresh`` loads every plugin;
``ftspec list NAME`` and ``--long`` load what they show and print everything
``impls.discovery.listing()`` gives (devices, variant sets, limits); ``--json`` prints that.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    from .console import Fitted

__all__ = ["detail_rows", "listing_view", "register", "short_rows", "short_view"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="show the registered implementations",
                       description="Show every registered implementation on one line: name, version, "
                                   "algorithms covered, dtypes, or why it failed to load (from a cache of "
                                   "what each plugin declared, kept while nothing it depends on changes). "
                                   "With NAME: everything NAME declares (devices, variant sets, algorithms "
                                   "and their shape limits), loaded now.")
    p.add_argument("names", nargs="*", metavar="NAME", help="show the details of this implementation")
    p.add_argument("--long", action="store_true", help="the details of every implementation (loads each)")
    p.add_argument("--fresh", action="store_true", help="load every plugin now, not from the cache")
    p.add_argument("--json", action="store_true", help="print the details as JSON (every plugin, or NAME's)")
    p.add_argument("--load-timeout", metavar="S", type=float, default=None,
                   help="seconds loading one plugin, or its devices(), may take (default 60)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftspec.impls.discovery import DEFAULT_LOAD_TIMEOUT, PluginConflict, listing

    timeout = args.load_timeout if args.load_timeout and args.load_timeout > 0 else DEFAULT_LOAD_TIMEOUT
    try:
        if args.names:
            rows = detail_rows(args.names, timeout)
        elif args.long or args.json:
            rows = listing(timeout)
        else:
            short, note = short_rows(timeout, fresh=args.fresh)
            from rich.console import Console  # not tools.console: it imports the runner (0.7 s)

            out = Console(highlight=False, emoji=False)
            out.print(short_view(short, note, out.width), soft_wrap=True)
            return 0 if all(r["loaded"] for r in short) else 1
    except (PluginConflict, LookupError) as exc:
        from .console import error

        return error(exc.args[0] if exc.args else str(exc))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0 if all(r["loaded"] for r in rows) else 1
    from .console import console

    console.print(listing_view(rows))
    return 0 if all(r["loaded"] for r in rows) else 1


def detail_rows(names: Sequence[str], timeout: float) -> list[dict[str, Any]]:
    """``listing()``'s rows of the registered plugins ``names`` only, each loaded now (LookupError
    naming the registered ones for an unknown name)."""
    from ftspec.impls.discovery import listing

    return listing(timeout, names=names)


def short_rows(timeout: float, *, fresh: bool = False) -> tuple[list[dict[str, Any]], str]:
    """One short row per registered plugin (name, loaded, version, coverage, dtypes, or error and
    hint), from the cache where its record is current, else loaded now; and a note saying which."""
    from ftspec.impls.discovery import discover, load_record

    from .plugin_cache import PluginCache

    cache = PluginCache()
    rows, loaded_now, cached = [], 0, 0
    for name, record in sorted(discover().items()):
        row = None if fresh else cache.get(record)
        if row is None:
            load_record(record, timeout=timeout)
            row = short_row(record)
            loaded_now += 1
            if not (record.error or "").startswith("PluginTimeout"):  # a hang may not recur: never kept
                cache.put(record, row)
        else:
            cached += 1
        rows.append(row)
    cache.save()
    if not cached:
        note = "every plugin loaded now"
    else:
        note = (f"{cached} of {len(rows)} as declared when last loaded ({cache.oldest(rows)}), nothing they "
                "depend on changed since; --fresh loads every plugin now")
    return rows, note + "; details: ftspec list NAME"


def short_row(record: Any) -> dict[str, Any]:
    """A loaded (or failed) ``discovery.PluginRecord`` as a short row."""
    from ftspec.spec.registry import REGISTRY

    row: dict[str, Any] = {"name": record.name, "loaded": record.impl is not None}
    if record.impl is None:
        row.update(error=record.error, hint=record.hint)
        return row
    impl = record.impl
    covered = sum(1 for a in REGISTRY if a in impl.algorithms)
    row.update(version=str(impl.version), coverage=f"{covered}/{len(REGISTRY)}", dtypes=list(impl.dtypes))
    return row


#: dtypes as XLA names them (HLO's f64, f32, bf16, f16): four fit where the version needs the room
SHORT_DTYPES = {"float64": "f64", "float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def fit_version(version: str, room: int) -> str:
    """``version`` in ``room`` characters: whole ``+``-separated parts and ``+…`` for those left out
    (``transformers5.24.0+…``), never a part cut; the whole of it when not even its first part fits
    (it then wraps)."""
    if len(version) <= room:
        return version
    parts = version.split("+")
    for n in range(len(parts) - 1, 0, -1):
        shown = "+".join(parts[:n]) + "+…"
        if len(shown) <= room:
            return shown
    return version


def short_view(rows: list[dict[str, Any]], note: Optional[str] = None, width: int = 80) -> Any:
    """One line per plugin, aligned, in ``width`` columns: name, algorithms covered, dtypes (XLA's
    short names), version (whole ``+`` parts that fit; the rest in ``ftspec list NAME``). A plugin
    that failed to load says so on its line with the error and hint, never cut (a terminal folds
    a line longer than it is wide). Nothing but a version is shortened. Print with
    ``soft_wrap=True``: rich must not break the lines itself."""
    from rich.text import Text

    names = max([len("name"), *(len(r["name"]) for r in rows)])
    dtypes = {r["name"]: " ".join(SHORT_DTYPES.get(d, d) for d in r.get("dtypes", [])) for r in rows}
    kinds = max([len("dtypes"), *map(len, dtypes.values())])
    counts = len("algorithms")
    room = width - names - counts - kinds - 6
    out = Text(f"{'name':<{names}}  {'algorithms':>{counts}}  {'dtypes':<{kinds}}  version\n", style="bold")
    for r in rows:
        out.append(f"{r['name']:<{names}}  ")
        if r["loaded"]:
            out.append(f"{r['coverage']:>{counts}}  {dtypes[r['name']]:<{kinds}}  "
                       f"{fit_version(str(r['version']), room)}".rstrip() + "\n")
        else:
            hint = f" (hint: {r['hint']})" if r.get("hint") else ""
            out.append(f"failed to load: {r['error']}{hint}\n", style="red")
    if note:
        out.append(note, style="dim")
    return out


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
