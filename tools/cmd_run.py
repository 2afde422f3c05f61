"""``ftspec run``: the conformance suite on every registered implementation."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

__all__ = ["add_selection_options", "register"]


def add_selection_options(p: argparse.ArgumentParser) -> None:
    from ftspec.conformance.profiles import PROFILES

    p.add_argument("--profile", choices=sorted(PROFILES), default="default",
                   help="Hypothesis profile: quick (CI), default, thorough (default: %(default)s)")
    p.add_argument("--algorithm", action="append", metavar="NAME", help="only this algorithm (repeatable)")
    p.add_argument("--dtype", action="append", metavar="DTYPE",
                   choices=["float64", "float32", "bfloat16", "float16"], help="only this dtype (repeatable)")
    p.add_argument("--device", action="append", metavar="DEVICE", help="only this device, e.g. cpu or cuda:0 (repeatable)")
    p.add_argument("--examples", type=int, metavar="N", help="examples per (algorithm, dtype) search (overrides the profile)")
    p.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default: %(default)s)")
    p.add_argument("--call-timeout", type=float, metavar="SECONDS",
                   help="a single implementation call taking longer fails as a hang (default: the profile's)")
    p.add_argument("--case-dir", default="reports/cases", metavar="DIR",
                   help="where shrunk failing cases are written (default: %(default)s)")
    p.add_argument("--no-fixtures", action="store_true", help="skip replaying the golden fixtures")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the conformance suite on the registered implementations",
                       description="Run every registered implementation × algorithm × dtype × device through the "
                                   "Hypothesis search and the golden fixtures; exit 0 only if everything conforms.")
    p.add_argument("--impl", action="append", metavar="NAME",
                   help="only this implementation: a registered name or module:object (repeatable)")
    add_selection_options(p)
    p.add_argument("--json-report", metavar="PATH", help="also write the results as JSON (schema: docs/reports.md)")
    p.set_defaults(func=run)


def execute(plugins, args: argparse.Namespace):
    """Run the search (and fixture replay) for ``plugins`` with the shared options."""
    from ftspec.conformance.profiles import profile
    from ftspec.conformance.runner import Runner

    from .console import RunProgress

    runner = Runner(plugins, profile=profile(args.profile), seed=args.seed, case_dir=args.case_dir,
                    examples=args.examples, call_timeout=args.call_timeout, devices=args.device,
                    progress=RunProgress(quiet=args.quiet))
    result = runner.run(args.algorithm, args.dtype)
    if not args.no_fixtures:
        try:
            from ftspec.conformance.fixture_replay import replay_fixtures
        except ImportError:  # fixtures not available in this build
            pass
        else:
            result.fixtures = replay_fixtures(plugins, algorithms=args.algorithm, dtypes=args.dtype,
                                              devices=args.device)
    return result


def run(args: argparse.Namespace) -> int:
    from ftspec.conformance.report import report_dict, write_json
    from ftspec.impls.discovery import PluginError

    from .console import console, err_console, summary_table
    from .plugins import select

    started = dt.datetime.now(dt.timezone.utc)
    try:
        plugins, broken = select(args.impl)
    except PluginError as exc:
        err_console.print(f"[bold red]error[/]: {exc}")
        return 2
    for record in broken:
        hint = f" (hint: {record.hint})" if record.hint else ""
        err_console.print(f"[bold red]plugin {record.name!r} failed to load[/]: {record.error}{hint}")
    if not plugins:
        err_console.print("[bold red]error[/]: no implementation to run")
        return 2
    result = execute(plugins, args)
    console.print(summary_table(result))
    if result.fixtures:
        from .console_fixtures import fixture_table

        console.print(fixture_table(result.fixtures))
    failures = result.failures()
    for cell in failures:
        if cell.failure:
            console.print(f"[bold red]FAIL[/] {cell.failure.report}")
        else:
            console.print(f"[bold red]{cell.status.upper()}[/] {cell.algorithm} {cell.impl} {cell.dtype} "
                          f"{cell.device}: {cell.note}")
    if args.json_report:
        path = write_json(args.json_report, report_dict(result, plugins, started))
        console.print(f"JSON report: {path}")
    ok = result.ok and not broken
    n_cells = sum(1 for c in result.cells if c.status != "not implemented")
    console.print(f"[bold {'green' if ok else 'red'}]{'conformant' if ok else 'NOT conformant'}[/]: "
                  f"{n_cells - len(failures)} of {n_cells} cells pass"
                  + (f", {len(broken)} plugin(s) failed to load" if broken else ""))
    return 0 if ok else 1
