"""``ftspec list``: every implementation, what it declares, or why it failed to load.

Prints ``impls.discovery.listing()``."""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="show the registered implementations",
                       description="Show every registered implementation: name, version, devices, dtypes, "
                                   "variant sets, algorithms covered and their shape limits, or why it "
                                   "failed to load.")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftspec.impls.discovery import PluginConflict, listing

    try:
        rows = listing()
    except PluginConflict as exc:
        from .console import error

        return error(str(exc))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0 if all(r["loaded"] for r in rows) else 1
    from rich.markup import escape as e
    from rich.table import Table

    from .console import console

    t = Table(title="ftspec implementations")
    for col in ("name", "version", "devices", "dtypes", "variants", "algorithms"):
        t.add_column(col)
    for r in rows:  # everything here is the plugin's: escaped for rich
        if not r["loaded"]:
            hint = f"\n[dim]hint: {e(r['hint'])}[/]" if r.get("hint") else ""
            t.add_row(e(r["name"]), "[red]failed to load[/]", f"[red]{e(str(r['error']))}[/]{hint}", "", "", "")
            continue
        algs = r["coverage"] + (" (all)" if not r["missing"] else "\nmissing: " + ", ".join(r["missing"]))
        algs = e(algs) + "".join(f"\nlimits {e(a)}: {e(text)}" for a, text in r.get("limits", {}).items())
        variants = r["variants"] if isinstance(r["variants"], str) else ", ".join(r["variants"])
        t.add_row(e(r["name"]), e(str(r["version"])), e(", ".join(r["devices"])), e(", ".join(r["dtypes"])),
                  e(variants), algs)
    console.print(t)
    return 0 if all(r["loaded"] for r in rows) else 1
