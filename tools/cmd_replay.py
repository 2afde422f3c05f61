"""``ftspec replay CASEFILE``: run one saved case against an implementation again."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a saved failing case",
                       description="Load a case file written by run or certify and judge an implementation on "
                                   "it again (by default the one, dtype and device recorded in the file).")
    p.add_argument("case_file", metavar="CASEFILE")
    p.add_argument("--impl", metavar="NAME", help="registered name or module:object (default: as recorded)")
    p.add_argument("--dtype", help="default: as recorded")
    p.add_argument("--device", help="default: as recorded")
    p.add_argument("--call-timeout", type=float, default=60.0, metavar="SECONDS")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ftspec.conformance.replay import replay

    from .console import console

    verdict = replay(args.case_file, impl=args.impl, dtype=args.dtype, device=args.device,
                     timeout=args.call_timeout)
    console.print(verdict.text)
    return 0 if verdict.ok else 1
