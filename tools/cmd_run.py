"""``ftspec run``: the conformance suite on every registered implementation.

Parses arguments into ``conformance.session.Settings``, calls
``session.run`` and prints; the work is the library's.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

__all__ = ["add_output_options", "add_selection_options", "check_outputs", "register", "settings_from", "write_outputs"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, given {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, given {value}")
    return value


def add_selection_options(p: argparse.ArgumentParser) -> None:
    from ftspec.conformance.core.profiles import PROFILES
    from ftspec.conformance.running.config import FIXTURE_CHOICES

    p.add_argument("--profile", choices=sorted(PROFILES), default="default",
                   help="Hypothesis profile: quick (CI), default, thorough (default: %(default)s)")
    p.add_argument("--algorithm", action="append", metavar="NAME",
                   help="only this algorithm (repeatable; the verdict is then at best partial)")
    p.add_argument("--dtype", action="append", metavar="DTYPE",
                   choices=["float64", "float32", "bfloat16", "float16"],
                   help="only this dtype (repeatable; the verdict is then at best partial)")
    p.add_argument("--device", action="append", metavar="DEVICE",
                   help="only this device, e.g. cpu or cuda:0 (repeatable; the verdict is then at best partial)")
    p.add_argument("--examples", type=_positive_int, metavar="N",
                   help="examples per (algorithm, dtype) search (overrides the profile; below the profile's "
                        "minimum per cell the verdict is inconclusive)")
    p.add_argument("--seconds", type=float, metavar="S",
                   help="wall-time cap per search; 0: none (default: the profile's, none with --examples)")
    p.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default: %(default)s)")
    p.add_argument("--call-timeout", type=float, metavar="SECONDS",
                   help="a single implementation call taking longer fails as a hang (default: the profile's)")
    p.add_argument("--load-timeout", type=float, metavar="SECONDS", default=None,
                   help="loading one plugin (import, factory), or its devices(), taking longer fails that plugin, "
                        "not the run (default: 60)")
    p.add_argument("--case-dir", default=None, metavar="DIR",
                   help="where shrunk failing cases are written (default: reports/cases; for certify, the "
                        "certificate's folder's cases/)")
    p.add_argument("--fixtures", choices=list(FIXTURE_CHOICES), default=None,
                   help="golden fixtures to replay: all, a fixed sample (each algorithm's paper case and about "
                        "one in four of the rest), or none (default: the profile's for run, all for certify)")
    p.add_argument("--no-fixtures", action="store_const", const="none", dest="fixtures",
                   help="same as --fixtures none")
    p.add_argument("--jobs", "-j", type=_positive_int, metavar="N", default=None,
                   help="worker processes for the searches and the fixture replay (default: one per CPU, "
                        "at most 8; at most 4 per CPU); 1 is one worker: at every N a plugin that crashes or "
                        "hangs fails its algorithm, not the run")
    p.add_argument("--shards", type=_positive_int, metavar="N", default=None,
                   help="split every search into N by seed (each shard runs its share of the examples, and "
                        "under a time cap the whole cap): more examples per cell on more workers; the same "
                        "--seed and --shards give the same cases (default: 1)")
    blocks = ", ".join(f"{name} {prof.block}" for name, prof in PROFILES.items())  # read, never restated
    p.add_argument("--block", type=_positive_int, metavar="B", default=None,
                   help="value sets per drawn case: B examples of one structure judged at the cost of a few "
                        f"(1: one example per draw; default: the profile's: {blocks}; docs/tolerances.md, "
                        "\"Blocks\")")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run the searches and the fixture replay on the Dask cluster whose scheduler is at "
                        "ADDRESS, e.g. tcp://host:8786 (needs ftspec[dask] here and on the workers; "
                        "docs/scaleout.md)")
    p.add_argument("--in-process", action="store_true",
                   help="search and replay the fixtures in this process, no workers (debugging: a plugin "
                        "that crashes or hangs in native code ends the run)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def _capped_jobs(jobs: Any, scheduler: Any) -> Any:
    """``--jobs`` within the session's cap, with a one-line note on stderr when it was cut (not
    with ``--scheduler``: the cluster's threads are the workers there)."""
    from ftspec.conformance.session.commands import capped_jobs

    if scheduler:
        return jobs
    jobs, note = capped_jobs(jobs)
    if note:
        from .console import err_console

        err_console.print(f"note: {note}", soft_wrap=True, markup=False)
    return jobs


def settings_from(args: argparse.Namespace, progress: Any = None, **overrides: Any):
    """``Settings`` from the shared options (SessionError on bad values)."""
    from ftspec.conformance.session.commands import Settings

    scheduler = getattr(args, "scheduler", None)
    values = dict(profile=args.profile, algorithms=args.algorithm, dtypes=args.dtype, devices=args.device,
                  examples=args.examples, seconds=args.seconds, seed=args.seed, call_timeout=args.call_timeout,
                  case_dir=args.case_dir, fixtures=args.fixtures, jobs=_capped_jobs(args.jobs, scheduler),
                  in_process=args.in_process, shards=getattr(args, "shards", None), scheduler=scheduler,
                  load_timeout=getattr(args, "load_timeout", None), block=getattr(args, "block", None),
                  progress=progress)
    values.update(overrides)
    return Settings(**values)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the conformance suite on the registered implementations",
                       description="Run every registered implementation × algorithm × dtype × device through the "
                                   "Hypothesis search and the golden fixtures. Exit codes: 0 conformant, "
                                   "1 non-conformant, 2 bad input, nothing tested or a report not written, "
                                   "3 partial (a selection), 4 inconclusive (too few examples), 130 interrupted "
                                   "(docs/reports.md).")
    p.add_argument("--impl", action="append", metavar="NAME",
                   help="only this implementation: a registered name or module:object (repeatable)")
    add_selection_options(p)
    p.add_argument("--json-report", metavar="PATH", help="also write the results as JSON (schema: docs/reports.md); "
                   "a report that cannot be written makes the run exit 2")
    add_output_options(p)
    p.set_defaults(func=run)


def add_output_options(p: argparse.ArgumentParser) -> None:
    """``--junit-xml`` and ``--html`` (run and certify; docs/reports.md)."""
    p.add_argument("--junit-xml", metavar="PATH", help="also write the cells as JUnit XML test results, for CI "
                   "(docs/reports.md, \"JUnit XML\")")
    p.add_argument("--html", metavar="PATH", help="also write a self-contained HTML report with a plot per cell "
                   "(needs matplotlib: pip install 'ftspec[report]')")


def check_outputs(args: argparse.Namespace) -> None:
    """The ``--junit-xml`` and ``--html`` paths can be written, and matplotlib is there for
    ``--html``: checked before the run (OutputPathError, SessionError: one line)."""
    from ftspec.conformance.session.report import check_writable

    for path in (args.junit_xml, args.html):
        if path:
            check_writable(path)
    if args.html:
        from ftspec.conformance.session.html_report import require_matplotlib

        require_matplotlib()


def write_outputs(args: argparse.Namespace, data: dict[str, Any]) -> bool:
    """Write ``--junit-xml`` and ``--html`` from the report or certificate ``data``; False (and a
    one-line error) when one could not be written."""
    from .console import console, error

    ok = True
    for path, what in ((args.junit_xml, "JUnit XML"), (args.html, "HTML report")):
        if not path:
            continue
        try:
            if what == "JUnit XML":
                from ftspec.conformance.session.junit import write_junit as write
            else:
                from ftspec.conformance.session.html_report import write_html as write
            console.print(f"{what}: {_e(str(write(data, path)))}")
        except OSError as exc:  # checked writable before the run, yet it failed (a full disk)
            ok = False
            error(f"cannot write the {what} {path}: {exc.strerror or exc}", code=0)
    return ok


def run(args: argparse.Namespace) -> int:
    from ftspec.conformance.session.report import OutputPathError, check_writable, report_dict, write_json
    from ftspec.conformance.session.commands import NothingTested, SessionError
    from ftspec.conformance.session.commands import run as run_session
    from ftspec.conformance.core.verdict import EXIT_ERROR, EXIT_INTERRUPTED, exit_code

    from .console import RunProgress, error, print_failures, print_verdict, summary_table, console
    from .console_fixtures import fixture_table

    started = dt.datetime.now(dt.timezone.utc)
    try:
        if args.json_report:
            check_writable(args.json_report)  # before the run, not after it
        check_outputs(args)
        settings = settings_from(args, RunProgress(quiet=args.quiet))
        result = run_session(args.impl, settings)
    except (SessionError, NothingTested, OutputPathError) as exc:
        return error(str(exc))
    for name, message in result.broken:
        error(f"plugin {name!r} failed to load: {message}", code=0)
    console.print(summary_table(result))
    if result.fixtures:
        console.print(fixture_table(result.fixtures))
    print_failures(result)
    unwritten = False
    data = report_dict(result, result.plugins, started) if args.json_report or args.junit_xml or args.html else {}
    if args.json_report:
        try:
            path = write_json(args.json_report, data)
            console.print(f"JSON report: {_e(str(path))}")
        except OSError as exc:  # e.g. ENOSPC (/dev/full), EIO: checked writable before the run, yet it failed
            unwritten = True
            error(f"cannot write the JSON report {args.json_report}: {exc.strerror or exc}", code=0)
    if data and not write_outputs(args, data):
        unwritten = True
    print_verdict(result)
    if unwritten:  # the run's record is lost: whatever the verdict, a script must not read success
        return EXIT_ERROR
    if result.interrupted:
        return EXIT_INTERRUPTED
    return exit_code(result.verdict) if result.verdict else EXIT_ERROR


def _e(text: str) -> str:
    from rich.markup import escape

    return escape(text)
