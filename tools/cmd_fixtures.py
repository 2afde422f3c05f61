"""``ftspec fixtures``: regenerate, check and verify the golden fixtures."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fixtures", help="regenerate, check or verify the golden fixtures",
                       description="Golden fixtures: every registry entry's inputs, parameters, expected outputs "
                                   "(50-digit mpmath, correctly rounded to float64) and tolerances, as safetensors "
                                   "files plus manifest.json (format: ftspec/fixtures/FORMAT.md).")
    fsub = p.add_subparsers(dest="fixtures_command", metavar="ACTION", required=True)

    r = fsub.add_parser("regenerate", help="compute every fixture and write it (or --check for drift)",
                        description="Compute every fixture case from the spec and write the set into DIR "
                                    "(default: the package's fixtures/data), atomically: the new set is built in a "
                                    "temporary directory beside DIR and swapped in only when complete, in one step "
                                    "(renameat2 RENAME_EXCHANGE on Linux), so a run killed at any moment leaves the "
                                    "old or the new complete set (docs/robustness.md). With --check, "
                                    "nothing is written: the fresh set is compared with the committed one and the "
                                    "command exits 1 on any drift.")
    r.add_argument("--out", metavar="DIR", help="where to write (default: the bundled fixtures/data)")
    r.add_argument("--check", action="store_true", help="compare with the committed set instead of writing")
    r.add_argument("--against", metavar="DIR",
                   help="with --check: the set to compare with (default: --out, else the bundled set)")
    r.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="worker processes (default: the CPU count, at most 8); the output does not depend on it")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.set_defaults(func=regenerate)

    v = fsub.add_parser("verify", help="check the manifest and every file's checksum",
                        description="Check DIR's manifest.json (its own checksum and schema) and every case file "
                                    "(present, size, sha256, well-formed safetensors, the tensors listed); report "
                                    "missing and unlisted files. Exit 1 on any problem.")
    v.add_argument("dir", nargs="?", metavar="DIR", help="fixture directory (default: the bundled set)")
    v.set_defaults(func=verify)


class _Progress:
    """One line per case on a terminal (overwritten), every 50 cases otherwise."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total = total
        self.quiet = quiet
        self.done = 0
        self.bytes = 0
        self.started = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def __call__(self, c) -> None:
        self.done += 1
        self.bytes += len(c.data)
        if self.quiet:
            return
        elapsed = time.perf_counter() - self.started
        line = f"[{self.done}/{self.total}] {c.spec.id} ({elapsed:.1f} s, {self.bytes / 1e6:.2f} MB)"
        if self.tty:
            print("\r\033[K" + line, end="" if self.done < self.total else "\n", file=sys.stderr, flush=True)
        elif self.done % 50 == 0 or self.done == self.total:
            print(line, file=sys.stderr, flush=True)


def _jobs(n) -> int:
    if n is not None:
        if n < 1:  # bad input: one line, exit 2 (a bare SystemExit(text) would exit 1)
            print("ftspec fixtures: error: --jobs must be at least 1", file=sys.stderr)
            raise SystemExit(2)
        return n
    return max(1, min(8, os.cpu_count() or 1))


def regenerate(args: argparse.Namespace) -> int:
    from ftspec.fixtures import data_dir
    from ftspec.fixtures.cases import catalogue, uncovered
    from ftspec.fixtures.generate import GenerationError, generate, write_atomic

    specs = catalogue()
    missing = uncovered()
    if missing:
        print(f"ftspec fixtures: warning: no cases are defined for registry entries {', '.join(missing)} "
              "(add a row for each to ftspec/fixtures/edges.py)", file=sys.stderr)
    jobs = _jobs(args.jobs)
    if not args.check:  # the set is written beside --out: refuse a place that cannot take it before computing
        from ftspec.conformance.session.report import OutputPathError, check_writable

        try:
            check_writable((Path(args.out) if args.out else data_dir()).resolve().parent, directory=True)
        except OutputPathError as exc:
            print(f"ftspec fixtures: error: --out: {exc}", file=sys.stderr)
            return 2
    progress = _Progress(len(specs), args.quiet)
    if not args.quiet:
        what = "checking" if args.check else "generating"
        print(f"ftspec fixtures: {what} {len(specs)} cases with {jobs} process(es)", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        if args.check:
            return _check(args, specs, jobs, progress, started)
        target = Path(args.out) if args.out else data_dir()
        summary = write_atomic(target, generate(specs, jobs=jobs), progress=progress)
    except GenerationError as exc:
        print(f"ftspec fixtures: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"ftspec fixtures: error: cannot write {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    notes = summary["disagreements"]
    undecided = sum(1 for n in notes if not n["decided"])
    zeros = sum(1 for n in notes if n.get("resolved") == "exact zero")
    print(f"wrote {summary['cases']} cases ({summary['bytes'] / 1e6:.2f} MB) to {summary['directory']} in "
          f"{seconds:.1f} s; {len(notes)} value(s) rounded differently at 50 and 80 digits "
          f"({zeros} of them exact zeros), {undecided} undecided")
    return 0


def _check(args, specs, jobs, progress, started) -> int:
    from ftspec.fixtures import data_dir
    from ftspec.fixtures.drift import compare
    from ftspec.fixtures.generate import Computed, generate

    directory = Path(args.against or args.out or data_dir())
    computed: list[Computed] = []
    for c in generate(specs, jobs=jobs):
        computed.append(c)
        progress(c)
    report = compare(computed, directory)
    seconds = time.perf_counter() - started
    for d in report.drifted:
        print(f"DRIFT {d.id}: {d.status}: {d.summary()}")
    for key in report.manifest:
        print(f"DRIFT manifest.json: field {key!r} differs")
    if not report.drifted and not report.manifest and not report.manifest_identical:
        print("DRIFT manifest.json: bytes differ from a fresh generation")
    counts = report.counts()
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    if report.ok:
        print(f"no drift: {counts.get('identical', 0)} cases identical to {directory} ({seconds:.1f} s)")
        return 0
    print(f"drift from {directory}: {summary} ({seconds:.1f} s)")
    return 1


def verify(args: argparse.Namespace) -> int:
    from ftspec.fixtures import data_dir
    from ftspec.fixtures.verify import verify as run_verify

    directory = Path(args.dir) if args.dir else data_dir()
    report = run_verify(directory)
    for p in report.problems:
        print(f"error: {p}", file=sys.stderr)
    if report.ok:
        print(f"ok: {directory}: manifest and {report.cases} case files verified ({report.bytes / 1e6:.2f} MB)")
        return 0
    print(f"FAILED: {directory}: {len(report.problems)} problem(s) in {len(report.files())} file(s)", file=sys.stderr)
    return 1
