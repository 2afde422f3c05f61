"""The bench as library calls: each section of the results document, and the document itself.

``ftspec bench`` (tools/cmd_bench.py) parses its arguments into these calls
and writes or prints what they return:

- ``power_section``, ``diagnosis_section``, ``false_failures_section``,
  ``speed_section``: one section of the results each (``results["power"]``,
  ...), measured by tools/bench/power.py, diagnosis.py, falsefail.py and
  speed.py; ``all_sections`` runs the four in the order ``make bench`` needs;
- ``document``: the results with their ``meta`` (date, machine, versions, the
  budgets in words, the load average before and after), as plain JSON values;
- ``rerender``: the Markdown of saved results, their summaries recomputed.

``say(message)`` receives one progress line at a time.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .power import PowerOptions

__all__ = ["BenchError", "Budgets", "all_sections", "diagnosis_section", "document", "false_failures_section",
           "json_text", "load_average", "plain", "power_section", "rerender", "select_mutants", "speed_section"]

Say = Callable[[str], None]


class BenchError(ValueError):
    """Bad input to the bench (an unknown mutant or plugin): one line."""


def _quiet(message: str) -> None:
    pass


def load_average() -> Optional[list[float]]:
    """The 1, 5 and 15 minute load averages (None where the system has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _json_default(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


def plain(x: Any) -> Any:
    """Non-finite floats as strings, so the JSON is standard."""
    if isinstance(x, float) and not math.isfinite(x):
        return _json_default(x)
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def json_text(x: Any) -> str:
    """The JSON of bench results (NumPy scalars as numbers, sets as lists), ending in a newline."""
    return json.dumps(plain(x), indent=1, default=_json_default) + "\n"


# -- sections ---------------------------------------------------------------------------------------

def select_mutants(ids: Optional[Sequence[str]] = None, families: Optional[Sequence[str]] = None) -> list[str]:
    """The mutants ``ids`` (None: every mutant of the zoo), only those whose first target is in
    ``families`` when given; BenchError for an unknown id."""
    from ftspec.tools.zoo import MUTANTS

    chosen = list(ids or MUTANTS)
    unknown = [i for i in chosen if i not in MUTANTS]
    if unknown:
        raise BenchError(f"unknown mutant(s) {unknown}; `ftspec bench power --list` lists them")
    if families:
        chosen = [i for i in chosen if MUTANTS[i].family in families]
    return chosen


def power_section(ids: Sequence[str], options: PowerOptions, *, jobs: int, calibrate: bool = False,
                  say: Say = _quiet) -> dict[str, Any]:
    """The bug zoo through the harness and the baselines (``results["power"]``); with ``calibrate``
    (and the baselines on), the assert_close judgement on the correct base implementations too."""
    from .power import calibrate as run_calibration
    from .power import run_power, summarise

    say(f"bench power: {len(ids)} mutants, {options.examples} examples per search, {jobs} job(s)")
    started = time.perf_counter()
    done = [0]

    def progress(rec: dict[str, Any]) -> None:
        done[0] += 1
        if "error" in rec:
            say(f"[{done[0]}/{len(ids)}] {rec['id']}: ERROR {rec['error']}")
            return
        verdict = ", ".join(f"{c['algorithm']} {c['dtype']} {c['status']}" for c in rec["harness"]["cells"])
        say(f"[{done[0]}/{len(ids)}] {rec['id']} ({rec['seconds']:.0f} s): {verdict}")

    records = run_power(ids, options, jobs=jobs, progress=progress)
    calibration = None
    if calibrate and options.baselines:
        t0 = time.perf_counter()
        calibration = run_calibration(records, options, progress=lambda msg: say(f"bench power: {msg}"))
        calibration["seconds"] = time.perf_counter() - t0
    return {"records": records, "summary": summarise(records, calibration),
            "seconds": time.perf_counter() - started, "options": vars(options), "calibration": calibration}


def diagnosis_section(examples: int, *, seed: int, jobs: int, only: Optional[Sequence[str]] = None,
                      say: Say = _quiet, zoo: Optional[str] = None, only_names: bool = False) -> dict[str, Any]:
    """How often a failure names its convention, its first divergence and every bug
    (``results["diagnosis"]``); ``only``: these mutants; ``zoo``/``only_names``: the wrong-names
    measurement too / alone (tools/bench/diagnosis.py)."""
    from .diagnosis import run_diagnosis

    what = "conventions, first divergence, distinct failures"
    if zoo or only_names:
        names = f"names on the {zoo or 'both'} zoo(s)"
        what = names if only_names else f"{what}, {names}"
    say(f"bench diagnosis: {what} ({examples} examples per search, {jobs} job(s))")

    def progress(rec: dict[str, Any]) -> None:
        zoo_of = f" ({rec['zoo']} zoo)" if "zoo" in rec else ""
        say(f"bench diagnosis: {rec['kind']} {rec['id']}{zoo_of} ({rec['seconds']:.0f} s)"
            + (f": ERROR {rec['error']}" if "error" in rec else ""))

    return run_diagnosis(examples, seed=seed, jobs=jobs, progress=progress, only=only, zoo=zoo,
                         only_names=only_names)


def false_failures_section(examples: Optional[int], *, seed: int, jobs: int, fixtures: bool = False,
                           say: Say = _quiet) -> dict[str, Any]:
    """The correct bundled implementations at the thorough profile (``results["false_failures"]``)."""
    from .falsefail import run_false_failures

    say(f"bench falsefail: numpy, torch, jax at the thorough profile, {examples or 'all'} examples per search")
    return run_false_failures(examples, seed=seed, jobs=jobs, fixtures=fixtures)


def speed_section(examples: int, *, dtype: str, seed: int, xdist_command: Optional[str] = None,
                  say: Say = _quiet) -> dict[str, Any]:
    """Examples per second, where the time goes, the spec's cost growth and, given
    ``xdist_command`` (python's arguments, as a shell would split them), pytest-xdist scaling
    (``results["speed"]``)."""
    import shlex

    from .levels import level_groups
    from .speed import blocks, growth, plain_checks, rate, throughput, xdist

    speed: dict[str, Any] = {"throughput_examples": examples}
    say("bench speed: blocks against one value set per draw (numpy, float32, back to back)")
    speed["blocks"] = blocks(examples=max(16 * examples, 256), seed=seed)  # blocks of 8: impl_search.MIN_DRAWS
    say("bench speed: ftspec against a plain Hypothesis + NumPy check, five entries")
    speed["plain"] = plain_checks(max(10 * examples, 200), seed=seed)
    say("bench speed: the computation's levels (operations a replay by levels would group)")
    speed["levels"] = level_groups()
    say(f"bench speed: throughput ({examples} examples per search at {dtype})")
    speed["throughput"] = throughput(examples=examples, dtype=dtype, seed=seed)
    say(f"bench speed: numpy over every algorithm at float32 and float64 ({examples} examples per search)")
    speed["rate"] = rate(examples=examples, seed=seed)
    say("bench speed: spec cost growth")
    speed["growth"] = growth()
    if xdist_command is not None:
        say(f"bench speed: pytest-xdist scaling of `python {xdist_command}` (slow)")
        speed["xdist"] = xdist(shlex.split(xdist_command))
    return speed


@dataclass(frozen=True)
class Budgets:
    """What each section was given, as the results' ``meta.budgets`` say it in words."""

    seed: int = 0
    power: Optional[PowerOptions] = None
    jobs: int = 1
    false_failure_examples: Optional[int] = None
    diagnosis_examples: Optional[int] = None
    speed_examples: Optional[int] = None
    speed_dtype: str = "float32"
    #: the python arguments the xdist measurement timed (None: skipped)
    xdist_command: Optional[str] = None
    sections: tuple[str, ...] = field(default=())

    def words(self) -> dict[str, Any]:
        b: dict[str, Any] = {"seed": self.seed}
        if "power" in self.sections and self.power is not None:
            p = self.power
            b["power"] = (f"{p.examples} examples per (algorithm, dtype) search (default profile's sizes), "
                          f"call timeout {p.call_timeout:g} s, {self.jobs} worker process(es); baselines "
                          f"{'on' if p.baselines else 'off'}")
        if "false_failures" in self.sections:
            b["false failures"] = f"thorough profile capped at {self.false_failure_examples} examples per search"
        if "diagnosis" in self.sections:
            b["diagnosis"] = (f"{self.diagnosis_examples} examples per search (tools/bench/diagnosis.py), "
                              f"{self.jobs} worker process(es)")
        if "speed" in self.sections:
            b["speed"] = (f"{self.speed_examples} examples per throughput search at {self.speed_dtype}; "
                          "pytest-xdist " + ("skipped" if self.xdist_command is None
                                             else f"`python {self.xdist_command}` with and without -n 2"))
        return b


def all_sections(options: PowerOptions, *, ids: Sequence[str], jobs: int, false_failure_examples: Optional[int],
                 speed_examples: int, speed_dtype: str, xdist_command: Optional[str],
                 say: Say = _quiet) -> dict[str, Any]:
    """Every section, as ``make bench`` runs them: speed first and alone (its timings must not share
    the CPUs with worker processes), then the false failures, the zoo's power (calibrated) and the
    diagnosis; ``results["seconds"]`` is the whole."""
    results: dict[str, Any] = {"load_before": load_average()}
    started = time.perf_counter()
    results["speed"] = speed_section(speed_examples, dtype=speed_dtype, seed=options.seed,
                                     xdist_command=xdist_command, say=say)
    results["false_failures"] = false_failures_section(false_failure_examples, seed=options.seed, jobs=jobs, say=say)
    results["power"] = power_section(ids, options, jobs=jobs, calibrate=True, say=say)
    results["diagnosis"] = diagnosis_section(options.examples, seed=options.seed, jobs=jobs, say=say)
    results["seconds"] = time.perf_counter() - started
    return results


# -- the document ---------------------------------------------------------------------------------

def document(results: dict[str, Any], budgets: Budgets) -> dict[str, Any]:
    """``results`` with their ``meta`` (the load average before, from ``results["load_before"]``,
    and now), as plain JSON values."""
    from .report import meta

    results = dict(results)
    results["meta"] = meta(budgets.words())
    results["meta"]["load_before"] = results.get("load_before")
    results["meta"]["load_after"] = load_average()
    return plain(results)


def rerender(results: dict[str, Any]) -> str:
    """The Markdown of saved results; the zoo's summaries are recomputed, so a newer report reads
    older results."""
    from .report import markdown

    if "power" in results:
        from .power import summarise

        power = results["power"]
        power["summary"] = summarise(power["records"], power.get("calibration"))
    return markdown(results)
