"""``ftspec bench``: the suite's own power (bug zoo, baselines, false failures) and speed.

    ftspec bench power [--mutant ID ...] [--examples N] [--jobs N]
    ftspec bench speed [--examples N] [--no-xdist]
    ftspec bench falsefail [--examples N]
    ftspec bench diagnosis [--mutant ID ...] [--examples N] [--jobs N]
    ftspec bench all [--write docs/benchmarks.md] [--json PATH]
    ftspec bench render RESULTS.json --write docs/benchmarks.md
    ftspec bench libraries [--plugin NAME ...] [--write docs/libraries.md] [--json PATH]

Results are one JSON document (``--json``); ``--write`` renders it as
Markdown (docs/benchmarks.md). See tools/bench.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["register"]

#: what ``ftspec bench all`` (and ``make bench``) uses; sized to finish in well under an hour on 2 cores.
#: The xdist measurement times a part of the suite by default: the whole of ``pytest tests`` takes
#: hours serially on 2 cores (``--xdist-command "-m pytest tests -x -q"`` times it).
DEFAULTS: dict[str, Any] = {"examples": 30, "ff_examples": 12, "speed_examples": 20, "jobs": 2,
                            "xdist_command": "-m pytest tests/spec tests/tools -x -q"}


def _json_default(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


def _clean(x: Any) -> Any:
    """Non-finite floats as strings, so the JSON is standard."""
    if isinstance(x, float) and not math.isfinite(x):
        return _json_default(x)
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


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


def _selected(args: argparse.Namespace) -> list[str]:
    from ftspec.tools.zoo import MUTANTS

    ids = list(args.mutant or MUTANTS)
    unknown = [i for i in ids if i not in MUTANTS]
    if unknown:
        raise SystemExit(f"unknown mutant(s) {unknown}; `ftspec bench power --list` lists them")
    if args.family:
        ids = [i for i in ids if MUTANTS[i].family in args.family]
    return ids


def _power(args: argparse.Namespace, results: dict[str, Any], calibrate: bool) -> None:
    from ftspec.tools.bench.power import PowerOptions, run_power, summarise

    ids = _selected(args)
    options = PowerOptions(examples=args.examples, seed=args.seed, call_timeout=args.call_timeout,
                           baselines=not args.no_baselines)
    _say(args.quiet, f"bench power: {len(ids)} mutants, {args.examples} examples per search, {args.jobs} job(s)")
    t = time.perf_counter()
    done = [0]

    def progress(rec: dict[str, Any]) -> None:
        done[0] += 1
        if "error" in rec:
            _say(args.quiet, f"[{done[0]}/{len(ids)}] {rec['id']}: ERROR {rec['error']}")
            return
        verdict = ", ".join(f"{c['algorithm']} {c['dtype']} {c['status']}" for c in rec["harness"]["cells"])
        _say(args.quiet, f"[{done[0]}/{len(ids)}] {rec['id']} ({rec['seconds']:.0f} s): {verdict}")

    records = run_power(ids, options, jobs=args.jobs, progress=progress)
    calibration = None
    if calibrate and not args.no_baselines:
        from ftspec.tools.bench.power import calibrate as run_calibration

        t0 = time.perf_counter()
        calibration = run_calibration(records, options, progress=lambda msg: _say(args.quiet, f"bench power: {msg}"))
        calibration["seconds"] = time.perf_counter() - t0
    results["power"] = {"records": records, "summary": summarise(records, calibration),
                        "seconds": time.perf_counter() - t, "options": vars(options), "calibration": calibration}


def _diagnosis(args: argparse.Namespace, results: dict[str, Any]) -> None:
    from ftspec.tools.bench.diagnosis import run_diagnosis

    _say(args.quiet, f"bench diagnosis: conventions, first divergence, distinct failures "
                     f"({args.examples} examples per search, {args.jobs} job(s))")

    def progress(rec: dict[str, Any]) -> None:
        _say(args.quiet, f"bench diagnosis: {rec['kind']} {rec['id']} ({rec['seconds']:.0f} s)"
                         + (f": ERROR {rec['error']}" if "error" in rec else ""))

    results["diagnosis"] = run_diagnosis(args.examples, seed=args.seed, jobs=args.jobs, progress=progress,
                                         only=getattr(args, "mutant", None) if args.bench_command == "diagnosis"
                                         else None)


def _false(args: argparse.Namespace, results: dict[str, Any], examples: Any) -> None:
    from ftspec.tools.bench.falsefail import run_false_failures

    _say(args.quiet, f"bench falsefail: numpy, torch, jax at the thorough profile, "
                     f"{examples or 'all'} examples per search")
    results["false_failures"] = run_false_failures(examples, seed=args.seed, jobs=getattr(args, "jobs", 1),
                                                   fixtures=getattr(args, "fixtures", False))


def _speed(args: argparse.Namespace, results: dict[str, Any]) -> None:
    import shlex

    from ftspec.tools.bench.speed import growth, rate, throughput, xdist

    speed: dict[str, Any] = {"throughput_examples": args.speed_examples}
    _say(args.quiet, f"bench speed: throughput ({args.speed_examples} examples per search at {args.speed_dtype})")
    speed["throughput"] = throughput(examples=args.speed_examples, dtype=args.speed_dtype, seed=args.seed)
    _say(args.quiet, f"bench speed: numpy over every algorithm at float32 and float64 "
                     f"({args.speed_examples} examples per search)")
    speed["rate"] = rate(examples=args.speed_examples, seed=args.seed)
    _say(args.quiet, "bench speed: spec cost growth")
    speed["growth"] = growth()
    if not args.no_xdist:
        _say(args.quiet, f"bench speed: pytest-xdist scaling of `python {args.xdist_command}` (slow)")
        speed["xdist"] = xdist(shlex.split(args.xdist_command))
    results["speed"] = speed


def _budgets(args: argparse.Namespace, sections: list[str]) -> dict[str, Any]:
    b: dict[str, Any] = {"seed": args.seed}
    if "power" in sections:
        b["power"] = (f"{args.examples} examples per (algorithm, dtype) search (default profile's sizes), "
                      f"call timeout {args.call_timeout:g} s, {args.jobs} worker process(es); baselines "
                      f"{'off' if args.no_baselines else 'on'}")
    if "false_failures" in sections:
        b["false failures"] = f"thorough profile capped at {args.ff_examples} examples per search"
    if "diagnosis" in sections:
        b["diagnosis"] = (f"{args.examples} examples per search (tools/bench/diagnosis.py), "
                          f"{args.jobs} worker process(es)")
    if "speed" in sections:
        b["speed"] = (f"{args.speed_examples} examples per throughput search at {args.speed_dtype}; pytest-xdist "
                      + ("skipped" if args.no_xdist else f"`python {args.xdist_command}` with and without -n 2"))
    return b


def _finish(args: argparse.Namespace, results: dict[str, Any], sections: list[str]) -> int:
    from ftspec.tools.bench.report import markdown, meta

    results["meta"] = meta(_budgets(args, sections))
    results["meta"]["load_before"] = results.get("load_before")
    results["meta"]["load_after"] = _load()
    clean = _clean(results)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(clean, indent=1, default=_json_default) + "\n")
        _say(args.quiet, f"results: {args.json}")
    text = markdown(clean)
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(text)
        _say(args.quiet, f"report: {args.write}")
    else:
        print(text)
    return 0


def _load() -> Any:
    import os

    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cmd_power(args: argparse.Namespace) -> int:
    if args.list:
        from ftspec.tools.zoo import MUTANTS

        for m in MUTANTS.values():
            print(f"{m.id:34s} {m.base:6s} {','.join(m.dtypes):24s} {', '.join(m.targets)}")
        return 0
    results: dict[str, Any] = {"load_before": _load()}
    _power(args, results, args.calibrate)
    return _finish(args, results, ["power"])


def _cmd_speed(args: argparse.Namespace) -> int:
    results: dict[str, Any] = {"load_before": _load()}
    _speed(args, results)
    return _finish(args, results, ["speed"])


def _cmd_diagnosis(args: argparse.Namespace) -> int:
    results: dict[str, Any] = {"load_before": _load()}
    _diagnosis(args, results)
    return _finish(args, results, ["diagnosis"])


def _cmd_falsefail(args: argparse.Namespace) -> int:
    results: dict[str, Any] = {"load_before": _load()}
    args.ff_examples = args.examples
    _false(args, results, args.examples)
    return _finish(args, results, ["false_failures"])


def _cmd_all(args: argparse.Namespace) -> int:
    results: dict[str, Any] = {"load_before": _load()}
    started = time.perf_counter()
    # speed first and alone: its timings must not share the CPUs with worker processes
    _speed(args, results)
    _false(args, results, args.ff_examples)
    _power(args, results, calibrate=True)
    _diagnosis(args, results)
    results["seconds"] = time.perf_counter() - started
    return _finish(args, results, ["power", "false_failures", "speed", "diagnosis"])


def _cmd_libraries(args: argparse.Namespace) -> int:
    from ftspec.tools.bench.libraries import certify_libraries, library_plugins, markdown, write_into

    known = library_plugins()
    unknown = [n for n in args.plugin or () if n not in known]
    if unknown:
        raise SystemExit(f"not a bundled library plugin: {', '.join(unknown)} (known: {', '.join(known)})")
    records = certify_libraries(args.plugin, profile=args.profile, seed=args.seed, jobs=args.jobs,
                                progress=lambda msg: _say(args.quiet, f"bench libraries: {msg}"))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(_clean(records), indent=1, default=_json_default) + "\n")
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
    from ftspec.tools.bench.report import markdown

    results = json.loads(Path(args.results).read_text())
    if "power" in results:  # summaries are recomputed, so a newer report reads older results
        from ftspec.tools.bench.power import summarise

        power = results["power"]
        power["summary"] = summarise(power["records"], power.get("calibration"))
    text = markdown(results)
    if args.write:
        Path(args.write).write_text(text)
    else:
        print(text)
    return 0
