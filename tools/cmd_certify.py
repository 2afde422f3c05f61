"""``ftspec certify TARGET``: certify one implementation, and verify a certificate."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    from .cmd_run import add_selection_options

    p = sub.add_parser(
        "certify", help="certify one implementation and write a certificate",
        description="Run the harness on one implementation against the variant sets it declares and write a "
                    "certificate (JSON and Markdown). TARGET is a registered plugin name or module:object "
                    "(an unregistered implementation; the current directory is importable). Exit 0 only if "
                    "conformant.")
    p.add_argument("target", nargs="?", metavar="TARGET", help="registered name or module:object")
    p.add_argument("--out", metavar="DIR", help="where to write the certificate (default: certificates/NAME)")
    p.add_argument("--verify", metavar="FILE", help="check a certificate's content hash instead of certifying")
    add_selection_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftspec.conformance import certificate
    from ftspec.conformance.report import write_json
    from ftspec.impls.discovery import PluginError, load_target

    from .cmd_run import execute
    from .console import console, err_console, summary_table

    if args.verify:
        ok, message = certificate.verify(args.verify)
        (console if ok else err_console).print(("[green]" if ok else "[bold red]") + message + "[/]")
        return 0 if ok else 1
    if not args.target:
        err_console.print("[bold red]error[/]: give a TARGET (a registered name or module:object) or --verify FILE")
        return 2
    try:
        impl = load_target(args.target)
    except PluginError as exc:
        err_console.print(f"[bold red]error[/]: {exc}")
        return 2
    issued = dt.datetime.now(dt.timezone.utc)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in impl.name)
    out = Path(args.out or Path("certificates") / safe)
    if args.case_dir == "reports/cases":
        args.case_dir = str(out / "cases")
    result = execute([(args.target, impl)], args, fixtures="all")
    console.print(summary_table(result, title=f"Certification of {impl.name} {impl.version}"))
    if result.fixtures:
        from .console_fixtures import fixture_table

        console.print(fixture_table(result.fixtures))
    from ftspec.conformance.profiles import profile

    doc = certificate.build(args.target, impl, result, examples=args.examples or profile(args.profile).examples,
                            issued=issued)
    json_path = write_json(out / "certificate.json", doc)
    md_path = out / "certificate.md"
    md_path.write_text(certificate.render_markdown(doc))
    for cell in result.failures():
        if cell.failure:
            console.print(f"[bold red]FAIL[/] {cell.failure.report}")
    colour = "green" if doc["verdict"] == "conformant" else "bold red"
    console.print(f"[{colour}]{impl.name} {impl.version}: {doc['verdict']}[/] "
                  f"(coverage {doc['coverage']['fraction']}); certificate: {json_path} and {md_path}")
    return 0 if doc["verdict"] == "conformant" else 1
