"""The ``ftspec`` command.

Each subcommand lives in its own module with ``register(subparsers)``; heavy
imports happen inside the command, so ``ftspec --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from typing import NoReturn, Optional, Sequence

#: subcommand modules, in the order ``--help`` lists them
COMMANDS = (
    "ftspec.tools.cmd_list",
    "ftspec.tools.cmd_run",
    "ftspec.tools.cmd_certify",
    "ftspec.tools.cmd_replay",
    "ftspec.tools.cmd_identify",
    "ftspec.tools.cmd_fixtures",
    "ftspec.tools.cmd_spec",
    "ftspec.tools.cmd_bench",
)


class _Parser(argparse.ArgumentParser):
    """Bad arguments: one line naming the problem and where help is, exit 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ftspec",
        description="Differential-testing specification suite for the formal transformer "
                    "algorithms of Phuong & Hutter (2022).",
    )
    from ftspec.spec import SPEC_VERSION

    parser.add_argument("--version", action="version", version=f"ftspec {_version()} (spec {SPEC_VERSION})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a command not written yet
                continue
            raise
        module.register(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ftspec")
    except PackageNotFoundError:
        return "unknown"


def _interruptible() -> None:
    """Make SIGINT raise ``KeyboardInterrupt`` even where it was inherited ignored.

    A job started with ``&`` from a script begins with SIGINT ignored (POSIX), and Python keeps
    that, so ``kill -INT`` could not stop a long run with its partial report (exit 130)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Optional[Sequence[str]] = None) -> int:
    _interruptible()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # outside a run (a run writes what it has and returns 130 itself)
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ftspec ... | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
