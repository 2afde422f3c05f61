"""``ftspec certify TARGET``: certify one implementation; verify or reproduce a certificate.

Parses arguments and prints; ``conformance.session.certify`` and
``reproduce`` and ``conformance.certificate.verify`` and
``check_reproduction`` do the work.

A certificate is data from whoever wrote it, like a case file
(docs/robustness.md, "Certificates"): ``--verify`` and ``--reproduce`` read
it as untrusted input, and ``--reproduce CERT --impl NAME`` runs only the
implementation named on the command line (the target the certificate
records is shown, never imported), with the recorded settings bounded and
never in this process. Every refusal is one line on stderr: exit 1 for
``--verify``, 2 for ``--reproduce``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    from .cmd_run import add_output_options, add_selection_options

    p = sub.add_parser(
        "certify", help="certify one implementation and write a certificate",
        description="Run the harness on one implementation against every algorithm, dtype and device it "
                    "declares and every golden fixture, and write a certificate (JSON and Markdown). TARGET is "
                    "a registered plugin name or module:object (the current directory is importable). Exit "
                    "codes: 0 conformant, 1 non-conformant, 2 bad input or nothing tested, 3 partial (a "
                    "selection), 4 inconclusive (too few examples), 130 interrupted (docs/reports.md).")
    p.add_argument("target", nargs="?", metavar="TARGET", help="registered name or module:object")
    p.add_argument("--out", metavar="DIR",
                   help="where to write the certificate (default: certificates/NAME, NAME the implementation's)")
    p.add_argument("--verify", metavar="FILE",
                   help="check a certificate instead of certifying: its content hash, and that it agrees with "
                        "itself (its verdict is what its recorded results give); a forgery that agrees with "
                        "itself passes: only --reproduce shows the results are true")
    p.add_argument("--reproduce", metavar="FILE",
                   help="run a certificate's certification again on the implementation named by --impl, with "
                        "the recorded seed and settings (bounded), and compare the verdicts cell by cell")
    p.add_argument("--impl", metavar="NAME",
                   help="with --reproduce (required): the implementation to run, a registered name or "
                        "module:object; the target the certificate records is shown, never imported")
    add_selection_options(p)
    add_output_options(p)
    p.set_defaults(func=run)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "implementation"


def _one_line(text: str) -> str:
    """Text from a certificate or about one, on one line, control characters shown escaped."""
    return " ".join("".join(ch if ch.isprintable() or ch.isspace() else repr(ch)[1:-1] for ch in str(text)).split())


def _verify(path: str) -> int:
    from rich.markup import escape

    from ftspec.conformance.session.certificate import verify

    from .console import console, error

    ok, message = verify(path)
    if not ok:
        return error(_one_line(message), code=1)
    console.print(f"[green]{escape(_one_line(message))}[/]", soft_wrap=True)
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from ftspec.conformance.session.certificate import (
        CertificateError,
        check_reproduction,
        recorded_target,
        reproduce_command,
    )
    from ftspec.conformance.session.commands import (NothingTested, SessionError, recorded_lines, reproduce,
                                                     reproduction_settings)

    from .console import Fitted, RunProgress, console, error

    if args.target:
        return error("with --reproduce, name the implementation to run with --impl, not as TARGET: "
                     + reproduce_command(args.reproduce, args.target))
    if args.in_process:
        return error("--reproduce runs the implementation in worker processes; --in-process is not available")
    given = _run_options_given(args)
    if given:  # silently ignored, they would make the user believe the reproduction ran with them
        return error(f"{', '.join(given)} cannot be given with --reproduce: it runs with the certificate's "
                     "settings, in local worker processes (it takes --impl, --jobs, --case-dir, --load-timeout "
                     "and --quiet)")
    try:
        doc = check_reproduction(args.reproduce, args.impl)
        recorded = reproduction_settings(doc, args.reproduce)
    except CertificateError as exc:
        return error(_one_line(str(exc)))
    console.print(f"reproducing {escape(str(args.reproduce))} on {escape(args.impl)} (the certificate records "
                  f"{escape(repr(recorded_target(doc)))}, not imported)", soft_wrap=True, highlight=False)
    console.print(escape(f"settings from the certificate: {'; '.join(recorded_lines(recorded))}"),
                  soft_wrap=False, highlight=False)
    try:
        rep = reproduce(args.reproduce, args.impl, jobs=args.jobs, case_dir=args.case_dir,
                        load_timeout=args.load_timeout, progress=RunProgress(quiet=args.quiet))
    except (CertificateError, SessionError, NothingTested) as exc:
        return error(_one_line(str(exc)))
    for line in rep.differences:
        console.print(f"[yellow]version differs[/]: {escape(_one_line(line))}", soft_wrap=True)
    t = Table(title=f"Reproduction of {escape(str(args.reproduce))}")
    for col in ("algorithm", "dtype", "device", "recorded", "now", "same"):
        t.add_column(col)
    for r in rep.rows:
        same = "[green]yes[/]" if r["same"] else "[bold red]no[/]"
        t.add_row(r["algorithm"], r["dtype"], escape(r["device"]), r["recorded"], r["got"], same)
    console.print(Fitted(lambda: [t]))  # no algorithm name cut at 80 columns
    recorded, now = rep.recorded["verdict"], rep.certificate.verdict
    if rep.same:
        console.print(f"[green]reproduced[/]: every cell has its recorded verdict; the certificate's verdict "
                      f"is {recorded}")
        return 0
    differ = sum(1 for r in rep.rows if not r["same"])
    console.print(f"[bold red]not reproduced[/]: {differ} of {len(rep.rows)} cells differ; recorded {recorded}, "
                  f"now {now}")
    return 1


#: the run options a reproduction takes from the certificate, with the value each has when not given
_RECORDED_OPTIONS = {"profile": "default", "algorithm": None, "dtype": None, "device": None, "examples": None,
                     "seconds": None, "seed": 0, "call_timeout": None, "fixtures": None, "shards": None,
                     "block": None, "scheduler": None}


def _run_options_given(args: argparse.Namespace) -> list[str]:
    """The run options on the command line that ``--reproduce`` would otherwise ignore, as typed."""
    return [f"--{name.replace('_', '-')}" for name, unset in _RECORDED_OPTIONS.items()
            if getattr(args, name, unset) != unset]


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from ftspec.conformance.session.report import OutputPathError, check_writable
    from ftspec.conformance.session.commands import NothingTested, SessionError, certify
    from ftspec.conformance.core.verdict import EXIT_ERROR, EXIT_INTERRUPTED
    from .cmd_run import check_outputs, settings_from, write_outputs
    from .console import RunProgress, console, error, print_failures, print_verdict, summary_table
    from .console_fixtures import fixture_table

    if (args.verify or args.reproduce) and (args.junit_xml or args.html):
        return error("--junit-xml and --html are written by a certification, not with --verify or --reproduce")
    if args.verify:
        return _verify(args.verify)
    if args.reproduce:
        return _reproduce(args)
    if not args.target:
        return error("give a TARGET (a registered name or module:object), --verify FILE or --reproduce FILE")
    # the target is loaded once, by the session (in a worker first, under --load-timeout): a plugin
    # whose loading hangs or crashes is refused there in one line, never here; the default folder
    # is named for the implementation, known once it is loaded
    def out_of(name: str) -> Path:
        return Path(args.out) if args.out else Path("certificates") / _safe(name)

    def case_dir_of(impl: Any) -> str:
        return str(out_of(impl.name) / "cases")

    try:
        check_writable(Path(args.out) if args.out else Path("certificates"), directory=True)
        check_outputs(args)
        settings = settings_from(args, RunProgress(quiet=args.quiet), case_dir=args.case_dir)
        cert = certify(args.target, settings, case_dir_of=None if args.case_dir else case_dir_of)
        out = out_of(cert.doc["subject"]["name"])
        check_writable(out, directory=True)
    except (SessionError, NothingTested, OutputPathError) as exc:
        return error(str(exc))
    result = cert.result
    if result is None:  # certify() always keeps the run it judged
        return error("the certification returned no run")
    subject = f"{cert.doc['subject']['name']} {cert.doc['subject']['version']}"
    console.print(summary_table(result, title=f"Certification of {subject}"))
    if result.fixtures:
        console.print(fixture_table(result.fixtures))
    print_failures(result)
    from ftspec.conformance.session.certificate import listing_lines

    for line in listing_lines(cert.doc["results"], width=80, most=6):
        console.print(escape(line), soft_wrap=True)
    try:
        json_path, md_path = cert.write(out)
    except OSError as exc:
        return error(f"cannot write the certificate: {exc}")
    written = write_outputs(args, cert.doc)
    print_verdict(result, subject=subject)
    console.print(f"coverage {cert.doc['coverage']['fraction']} algorithms; certificate: "
                  f"{escape(str(json_path))} and {escape(str(md_path))}")
    if not written:
        return EXIT_ERROR
    return EXIT_INTERRUPTED if result.interrupted else cert.exit_code
