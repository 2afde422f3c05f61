"""``ftspec list``: every implementation, what it declares, or why it failed to load."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="show the registered implementations",
                       description="Show every registered implementation: name, version, devices, dtypes, "
                                   "variant sets and algorithms covered, or why it failed to load.")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    p.set_defaults(func=run)


def describe() -> list[dict[str, Any]]:
    from ftspec.impls.discovery import discover, load_record
    from ftspec.spec.registry import REGISTRY

    rows = []
    for name, record in sorted(discover().items()):
        load_record(record)
        row: dict[str, Any] = {"name": name, "target": record.target, "distribution": record.distribution,
                               "bundled": record.bundled}
        if record.impl is None:
            row.update(loaded=False, error=record.error, hint=record.hint)
        else:
            impl = record.impl
            try:
                devices = [str(d) for d in impl.devices()]
            except Exception as exc:
                devices = [f"error: {type(exc).__name__}: {exc}"]
            covered = [a for a in REGISTRY if a in impl.algorithms]
            row.update(
                loaded=True, version=impl.version, description=impl.description, devices=devices,
                dtypes=list(impl.dtypes), precision=impl.precision,
                variants="all" if impl.variants == "all" else [v.describe() for v in impl.variants],
                algorithms=covered, missing=[a for a in REGISTRY if a not in impl.algorithms],
                coverage=f"{len(covered)}/{len(REGISTRY)}",
            )
        rows.append(row)
    return rows


def run(args: argparse.Namespace) -> int:
    from ftspec.impls.discovery import PluginConflict

    try:
        rows = describe()
    except PluginConflict as exc:
        print(f"error: {exc}")
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0 if all(r["loaded"] for r in rows) else 1
    from rich.table import Table

    from .console import console

    t = Table(title="ftspec implementations")
    for col in ("name", "version", "devices", "dtypes", "variants", "algorithms"):
        t.add_column(col)
    for r in rows:
        if not r["loaded"]:
            hint = f"\n[dim]hint: {r['hint']}[/]" if r.get("hint") else ""
            t.add_row(r["name"], "[red]failed to load[/]", f"[red]{r['error']}[/]{hint}", "", "", "")
            continue
        algs = r["coverage"] + (" (all)" if not r["missing"] else "\nmissing: " + ", ".join(r["missing"]))
        variants = r["variants"] if isinstance(r["variants"], str) else ", ".join(r["variants"])
        t.add_row(r["name"], r["version"], ", ".join(r["devices"]), ", ".join(r["dtypes"]), variants, algs)
    console.print(t)
    return 0 if all(r["loaded"] for r in rows) else 1
