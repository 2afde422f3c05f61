"""``ftspec replay CASEFILE --impl NAME``: run one saved case against an implementation again.

Case files are passed between people, so the file is untrusted: its
recorded implementation is shown, never loaded; the one to run is named on
the command line. Every refusal (a malformed or out-of-bounds case file, a
tensors path outside its directory, an unknown implementation, a variant
set, dtype or device the implementation does not declare) is one line on
stderr and exit status 2; where an option fixes it, the line ends with the
command to run. ``cpu`` and ``cpu:0`` name one device (conformance/running/replay.py).

A case the spec refuses as it is (a query with no key under
``empty_query="error"``, the case of a search's refusal failure) replays as
a refusal check: exit 1 when the implementation answers it, 0 when it
raises, as the search judged it; not the spec's refusal as an error.
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a saved failing case",
                       description="Load a case file written by run or certify and judge the implementation "
                                   "named by --impl on it (the file's recorded implementation is shown, not "
                                   "loaded). The file is validated first (schema: docs/casefile.md). The "
                                   "implementation must declare the case's variant set, or one that differs "
                                   "from it only in switches that change rounding. A case the spec refuses (a "
                                   "refusal failure's) is a refusal check: the implementation must raise.")
    p.add_argument("case_file", metavar="CASEFILE")
    p.add_argument("--impl", metavar="NAME", required=True,
                   help="the implementation to run: a registered name or module:object (required; the name "
                        "recorded in the file is never imported)")
    p.add_argument("--dtype", help="default: as recorded")
    p.add_argument("--device", help="default: as recorded; a bare platform name and its device 0 are one device "
                                    "(cpu and cpu:0)")
    p.add_argument("--call-timeout", type=float, default=60.0, metavar="SECONDS")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from ftspec.conformance.core.casefile import CaseFileError
    from ftspec.conformance.running.replay import ReplayError, replay
    from ftspec.impls.discovery import PluginError

    from .console import console, err_console

    if not args.call_timeout > 0:
        err_console.print("ftspec replay: error: --call-timeout must be positive", markup=False, soft_wrap=True)
        return 2
    try:
        verdict = replay(args.case_file, impl=args.impl, dtype=args.dtype, device=args.device,
                         timeout=args.call_timeout)
    except (CaseFileError, ReplayError, PluginError) as exc:
        err_console.print(f"ftspec replay: error: {_one_line(exc)}", markup=False, highlight=False, soft_wrap=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - e.g. the spec refuses the case's values: still one line
        err_console.print(f"ftspec replay: error: {type(exc).__name__}: {_one_line(exc)}", markup=False,
                          highlight=False, soft_wrap=True)
        return 2
    console.print(escape(verdict.text), highlight=False, soft_wrap=True)  # a variant set stays one word
    return 0 if verdict.ok else 1


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
