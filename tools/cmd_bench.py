"""``ftspec bench``: the suite's own power (bug zoo, baselines, false failures) and speed.

    ftspec bench power [--mutant ID ...] [--examples N] [--jobs N]
    ftspec bench speed [--examples N] [--no-xdist]
    ftspec bench falsefail [--examples N]
    ftspec bench diagnosis [--mutant ID ...] [--examples N] [--jobs N] [--zoo first|second|both] [--only-names]
    ftspec bench all [--write docs/benchmarks.md] [--json PATH]
    ftspec bench render RESULTS.json --write docs/benchmarks.md
    ftspec bench libraries [--plugin NAME ...] [--write docs/libraries.md] [--json PATH]

Results are one JSON document (``--json``); ``--write`` renders it as
Markdown (docs/benchmarks.md). This module parses arguments into the
library calls of tools/bench/sections.py (and libraries.py) and writes or
prints what they return.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

#: what ``ftspec bench all`` (and ``make bench``) uses; sized to finish in well under an hour on 2 cores.
#: The xdist measurement times a part of the suite by default: the whole of ``pytest tests`` takes
#: hours serially on 2 cores (``--xdist-command "-m pytest tests -x -q"`` times it).
DEFAULTS: dict[str, Any] = {"examples": 30, "ff_examples": 12, "speed_examples": 20, "jobs": 2,
                            "xdist_command": "-m pytest tests/spec tests/tools -x -q"}


def _say(quiet: bool, *msg: Any) -> None:
    if not quiet:
        print(*msg, file=sys.stderr, flush=True)


def _power_options(p: argparse.ArgumentParser, examples: int) -> None:
    p.add_argument("--mutant", action="append", metavar="ID", help="only this mutant (repeatable)")
    p.add_argument("--family", action="append", metavar="FAMILY",
                   help="only mutants whose first target is in this family (component, layer, architecture, "
                        "training, inference; repeatable)")
    p.add_argument("--examples", type=int, default=examples, metavar="N",
                   help="examples per (algorithm, dtype) search (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=DEFAULTS["jobs"], metavar="N",
                   help="mutants run in N worker processes (default: %(default)s)")
    p.add_argument("--no-baselines", action="store_true", help="skip the assert_close and fixture baselines")
    p.add_argument("--call-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="a call taking longer fails as a hang (default: %(default)s)")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="write the raw results as JSON")
    p.add_argument("--write", metavar="PATH", help="render the results as Markdown (docs/benchmarks.md)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def _speed_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--speed-examples", type=int, default=DEFAULTS["speed_examples"], metavar="N",
                   help="examples per throughput search (default: %(default)s)")
    p.add_argument("--speed-dtype", default="float32", help="dtype of the throughput searches (default: %(default)s)")
    p.add_argument("--no-xdist", action="store_true", help="skip the pytest-xdist measurement (slow)")
    p.add_argument("--xdist-command", default=DEFAULTS["xdist_command"], metavar="ARGS",
                   help="python arguments timed with and without -n 2 (default: %(default)r)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure ftspec itself: mutation score, baselines, false failures, speed",
                       description="Measure the suite's power on the bug zoo (tools/zoo) and its speed "
                                   "(docs/benchmarks.md).")
    bs = p.add_subparsers(dest="bench_command", metavar="WHAT", required=True)

    q = bs.add_parser("power", help="run the bug zoo through the harness and the baselines")
    _power_options(q, 40)
    q.add_argument("--list", action="store_true", help="list the mutants and exit")
    q.add_argument("--calibrate", action="store_true",
                   help="also run the assert_close judgement on the correct base implementations")
    _common(q)
    q.set_defaults(func=_cmd_power)

    q = bs.add_parser("speed", help="examples per second, where the time goes, spec cost growth, xdist scaling")
    _speed_options(q)
    _common(q)
    q.set_defaults(func=_cmd_speed)

    q = bs.add_parser("diagnosis", help="how often a failure names its convention, first divergence and every bug")
    q.add_argument("--mutant", action="append", metavar="ID", help="only this mutant (repeatable)")
    q.add_argument("--examples", type=int, default=DEFAULTS["examples"], metavar="N",
                   help="examples per search (default: %(default)s)")
    q.add_argument("--jobs", type=int, default=DEFAULTS["jobs"], metavar="N",
                   help="mutants run in N worker processes (default: %(default)s)")
    q.add_argument("--zoo", choices=("first", "second", "both"),
                   help="also measure wrong names on this zoo's mutants (tools/zoo/second.py: the second)")
    q.add_argument("--only-names", action="store_true",
                   help="only the wrong-names measurement (on both zoos unless --zoo says otherwise)")
    _common(q)
    q.set_defaults(func=_cmd_diagnosis)

    q = bs.add_parser("falsefail", help="the correct implementations at the thorough profile")
    q.add_argument("--examples", type=int, default=None, metavar="N",
                   help="cap on examples per search (default: the thorough profile's)")
    q.add_argument("--jobs", type=int, default=DEFAULTS["jobs"], metavar="N",
                   help="algorithms split over N worker processes (default: %(default)s)")
    q.add_argument("--fixtures", action="store_true",
                   help="also replay every golden fixture on the three implementations (slow)")
    _common(q)
    q.set_defaults(func=_cmd_falsefail)

    q = bs.add_parser("all", help="power, false failures and speed; writes docs/benchmarks.md with --write")
    _power_options(q, DEFAULTS["examples"])
    q.add_argument("--ff-examples", type=int, default=DEFAULTS["ff_examples"], metavar="N",
                   help="false failures: examples per search at the thorough profile (default: %(default)s)")
    _speed_options(q)
    _common(q)
    q.set_defaults(func=_cmd_all)

    q = bs.add_parser("libraries", help="certify every bundled library plugin; the table of docs/libraries.md",
                      description="Certify each bundled library plugin (torch.nn, Hugging Face transformers, "
                                  "Flax) as `ftspec certify NAME` does and write the results table into "
                                  "docs/libraries.md (between its marker lines) with --write.")
    q.add_argument("--plugin", action="append", metavar="NAME", help="only this plugin (repeatable)")
    q.add_argument("--profile", default="quick", choices=("quick", "default", "thorough"),
                   help="Hypothesis profile of the certifications (default: %(default)s)")
    q.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes per certification")
    _common(q)
    q.set_defaults(func=_cmd_libraries)

    q = bs.add_parser("render", help="render saved results (--json of an earlier run) as Markdown")
    q.add_argument("results", help="a JSON file written by --json")
    q.add_argument("--write", metavar="PATH", help="output file (default: stdout)")
    q.set_defaults(func=_cmd_render)


# --------------------------------------------------------------------------


def _say_to(args: argparse.Namespace) -> Any:
    return lambda message: _say(args.quiet, message)


def _selected(args: argparse.Namespace) -> list[str]:
    from ftspec.tools.bench.sections import BenchError, select_mutants

    try:
        return select_mutants(args.mutant, args.family)
    except BenchError as exc:
        raise SystemExit(str(exc)) from None


def _options_of(args: argparse.Namespace) -> Any:
    from ftspec.tools.bench.power import PowerOptions

    return PowerOptions(examples=args.examples, seed=args.seed, call_timeout=args.call_timeout,
                        baselines=not args.no_baselines)


def _budgets(args: argparse.Namespace, sections: tuple[str, ...], **given: Any) -> Any:
    from ftspec.tools.bench.sections import Budgets

    return Budgets(seed=args.seed, jobs=getattr(args, "jobs", 1) or 1, sections=sections, **given)


def _emit(args: argparse.Namespace, results: dict[str, Any], budgets: Any) -> int:
    """The results document written as JSON (``--json``) and as Markdown (``--write``, or printed)."""
    from ftspec.tools.bench.report import markdown
    from ftspec.tools.bench.sections import document, json_text

    doc = document(results, budgets)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json_text(doc))
        _say(args.quiet, f"results: {args.json}")
    text = markdown(doc)
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(text)
        _say(args.quiet, f"report: {args.write}")
    else:
        print(text)
    return 0


def _cmd_power(args: argparse.Namespace) -> int:
    from ftspec.tools.bench.sections import load_average, power_section

    if args.list:
        from ftspec.tools.zoo import MUTANTS

        for m in MUTANTS.values():
            print(f"{m.id:34s} {m.base:6s} {','.join(m.dtypes):24s} {', '.join(m.targets)}")
        return 0
    results: dict[str, Any] = {"load_before": load_average()}
    options = _options_of(args)
    results["power"] = power_section(_selected(args), options, jobs=args.jobs, calibrate=args.calibrate,
                                     say=_say_to(args))
    return _emit(args, results, _budgets(args, ("power",), power=options))


def _cmd_speed(args: argparse.Namespace) -> int:
    from ftspec.tools.bench.sections import load_average, speed_section

    xdist = None if args.no_xdist else args.xdist_command
    results: dict[str, Any] = {"load_before": load_average()}
    results["speed"] = speed_section(args.speed_examples, dtype=args.speed_dtype, seed=args.seed,
                                     xdist_command=xdist, say=_say_to(args))
    return _emit(args, results, _budgets(args, ("speed",), speed_examples=args.speed_examples,
                                         speed_dtype=args.speed_dtype, xdist_command=xdist))


def _cmd_diagnosis(args: argparse.Namespace) -> int:
    from ftspec.tools.bench.sections import diagnosis_section, load_average

    results: dict[str, Any] = {"load_before": load_average()}
    results["diagnosis"] = diagnosis_section(args.examples, seed=args.seed, jobs=args.jobs, only=args.mutant,
                                             say=_say_to(args), zoo=args.zoo, only_names=args.only_names)
    return _emit(args, results, _budgets(args, ("diagnosis",), diagnosis_examples=args.examples))


def _cmd_falsefail(args: argparse.Namespace) -> int:
    from ftspec.tools.bench.sections import false_failures_section, load_average

    results: dict[str, Any] = {"load_before": load_average()}
    results["false_failures"] = false_failures_section(args.examples, seed=args.seed, jobs=args.jobs,
                                                       fixtures=args.fixtures, say=_say_to(args))
    return _emit(args, results, _budgets(args, ("false_failures",), false_failure_examples=args.examples))


def _cmd_all(args: argparse.Namespace) -> int:
    from ftspec.tools.bench.sections import all_sections

    options = _options_of(args)
    xdist = None if args.no_xdist else args.xdist_command
    results = all_sections(options, ids=_selected(args), jobs=args.jobs, false_failure_examples=args.ff_examples,
                           speed_examples=args.speed_examples, speed_dtype=args.speed_dtype, xdist_command=xdist,
                           say=_say_to(args))
    return _emit(args, results, _budgets(args, ("power", "false_failures", "speed", "diagnosis"), power=options,
                                         false_failure_examples=args.ff_examples, diagnosis_examples=args.examples,
                                         speed_examples=args.speed_examples, speed_dtype=args.speed_dtype,
                                         xdist_command=xdist))


def _cmd_libraries(args: argparse.Namespace) -> int:
    from ftspec.tools.bench.libraries import certify_libraries, library_plugins, markdown, write_into
    from ftspec.tools.bench.sections import json_text

    known = library_plugins()
    unknown = [n for n in args.plugin or () if n not in known]
    if unknown:
        raise SystemExit(f"not a bundled library plugin: {', '.join(unknown)} (known: {', '.join(known)})")
    records = certify_libraries(args.plugin, profile=args.profile, seed=args.seed, jobs=args.jobs,
                                progress=lambda msg: _say(args.quiet, f"bench libraries: {msg}"))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json_text(records))
        _say(args.quiet, f"results: {args.json}")
    text = markdown(records, profile=args.profile, seed=args.seed)
    if args.write:
        write_into(args.write, text)
        _say(args.quiet, f"table: {args.write}")
    else:
        print(text)
    failed = [r["plugin"] for r in records if r.get("certificate", {}).get("verdict") == "non-conformant"]
    return 1 if failed else 0


def _cmd_render(args: argparse.Namespace) -> int:
    import json

    from ftspec.tools.bench.sections import rerender

    text = rerender(json.loads(Path(args.results).read_text()))
    if args.write:
        Path(args.write).write_text(text)
    else:
        print(text)
    return 0
