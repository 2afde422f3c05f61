"""``ftspec run``: the conformance suite on every registered implementation."""

from __future__ import annotations

import argparse
import datetime as dt
import math
from pathlib import Path
from typing import Optional

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
    p.add_argument("--seconds", type=float, metavar="S",
                   help="wall-time cap per search; 0: none (default: the profile's, none with --examples)")
    p.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default: %(default)s)")
    p.add_argument("--call-timeout", type=float, metavar="SECONDS",
                   help="a single implementation call taking longer fails as a hang (default: the profile's)")
    p.add_argument("--case-dir", default="reports/cases", metavar="DIR",
                   help="where shrunk failing cases are written (default: %(default)s)")
    p.add_argument("--fixtures", choices=["all", "sample", "none"], default=None,
                   help="golden fixtures to replay: all, a fixed sample (each algorithm's paper case and about "
                        "one in four of the rest), or none (default: the profile's for run, all for certify)")
    p.add_argument("--no-fixtures", action="store_const", const="none", dest="fixtures",
                   help="same as --fixtures none")
    p.add_argument("--jobs", "-j", type=int, metavar="N", default=None,
                   help="worker processes for the searches and the fixture replay (default: one per CPU, "
                        "at most 8; 1 runs everything in this process)")
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


def execute(plugins, args: argparse.Namespace, *, fixtures: Optional[str] = None):
    """Run the search (and fixture replay) for ``plugins`` with the shared options.

    ``fixtures`` ("all", "sample", "none") applies when the command line does not choose."""
    from ftspec.conformance.parallel import RunSettings, default_jobs, run_parallel
    from ftspec.conformance.profiles import profile
    from ftspec.conformance.runner import Runner

    from .console import RunProgress

    prof = profile(args.profile)
    jobs = args.jobs if args.jobs is not None else default_jobs()
    if jobs < 1:
        raise SystemExit("ftspec: --jobs must be at least 1")
    seconds = None if args.seconds is None else (args.seconds or math.inf)  # 0: no cap
    progress = RunProgress(quiet=args.quiet)
    if jobs == 1:
        runner = Runner(plugins, profile=prof, seed=args.seed, case_dir=args.case_dir,
                        examples=args.examples, call_timeout=args.call_timeout, devices=args.device,
                        progress=progress, seconds=seconds)
        result = runner.run(args.algorithm, args.dtype)
    else:
        settings = RunSettings(tuple(label for label, _ in plugins), prof.name, args.seed, str(args.case_dir),
                               args.examples, args.call_timeout, tuple(args.device) if args.device else None,
                               seconds)
        result = run_parallel(settings, plugins, jobs=jobs, algorithms=args.algorithm, dtypes=args.dtype,
                              progress=progress)
    which = args.fixtures or fixtures or prof.fixtures
    result.jobs, result.fixture_selection = jobs, which
    if which != "none":
        result.fixtures = _replay(plugins, args, which, jobs, progress)
    return result


def _replay(plugins, args: argparse.Namespace, which: str, jobs: int, progress) -> list:
    """The fixture replay: every case of the chosen algorithms, or the fixed sample of them."""
    try:
        from ftspec.conformance.fixture_replay import FixtureResult, replay_fixtures, sample_cases
        from ftspec.fixtures import FixtureError, load_manifest
    except ImportError:  # fixtures not available in this build
        return []
    try:
        records = load_manifest()["cases"]
    except FixtureError:  # replay_fixtures reports the unreadable set as a failed result
        return replay_fixtures(plugins, algorithms=args.algorithm, dtypes=args.dtype, devices=args.device)
    if args.algorithm:
        records = [r for r in records if r["algorithm"] in args.algorithm]
    chosen = set(sample_cases(records)) if which == "sample" else {r["id"] for r in records}
    cases = [(r["id"], r["algorithm"]) for r in records if r["id"] in chosen]
    progress("fixtures", done=0, total=len(cases), which=which)
    if jobs == 1 or len(cases) <= 1:
        seen: set[str] = set()

        def each(r: FixtureResult) -> None:
            if r.case not in seen:
                seen.add(r.case)
                progress("fixtures", done=len(seen), total=len(cases), which=which)

        results = replay_fixtures(plugins, dtypes=args.dtype, devices=args.device, cases=chosen, progress=each)
        if len(seen) < len(cases):  # cases no implementation covers give no result: finish the count
            progress("fixtures", done=len(cases), total=len(cases), which=which)
        return results
    from ftspec.conformance.parallel import replay_fixtures_parallel

    return replay_fixtures_parallel([label for label, _ in plugins], jobs=jobs, cases=cases, dtypes=args.dtype,
                                    devices=args.device,
                                    progress=lambda done, total: progress("fixtures", done=done, total=total,
                                                                          which=which))


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
