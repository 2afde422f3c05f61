"""``ftspec bench power``: the harness's power on the bug zoo.

Each mutant (tools/zoo) is run through the same ``Runner`` as ``ftspec
certify`` on the entries it targets (``Mutant.targets``) at each of its
dtypes, then through the two baselines (tools/bench/baselines.py). One
mutant's record says, per (algorithm, dtype): killed or not, by which
check, seconds and examples until the first failing example, and the size
of the shrunk counterexample. Summaries (mutation score, time-to-kill
percentiles, baseline comparison) are computed from the records in
``summarise``.

Mutants run in worker processes (``jobs``); each worker builds its mutant
from the catalogue by id, so nothing but ids and plain dictionaries crosses
a process boundary.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ftspec.conformance.core.status import Status

__all__ = ["PowerOptions", "run_mutant", "run_power", "summarise"]


@dataclass(frozen=True)
class PowerOptions:
    examples: int = 40  # per (algorithm, dtype) search
    seed: int = 0
    call_timeout: float = 10.0
    baselines: bool = True
    profile: str = "default"  # strategies' size budget and batch sizes


def _case_size(case: Any) -> dict[str, Any]:
    shapes = {k: list(v.shape) for k, v in case.inputs.items()}
    return {"scalars": case.size(), "hyper": dict(case.hyper), "inputs": shapes, "params": len(case.params),
            "batch": 1 + len(case.batch), "variant": case.variant.describe(), "style": case.style}


def _cells(result: Any) -> list[dict[str, Any]]:
    out = []
    for c in result.cells:
        rec: dict[str, Any] = {"algorithm": c.algorithm, "dtype": c.dtype, "status": c.status.value,
                               "examples": c.examples, "note": c.note[:300],
                               "first_failure_s": c.first_failure_s,
                               "first_failure_examples": c.first_failure_examples}
        if c.failure is not None:
            rec["check"] = c.failure.check
            rec["message"] = c.failure.message[:400]
            rec["shrunk"] = c.failure.shrunk
            if c.failure.case is not None:  # None: no case (a lost worker)
                rec["case"] = _case_size(c.failure.case)
        out.append(rec)
    return out


def run_mutant(mutant_id: str, options: PowerOptions, case_dir: Optional[str] = None) -> dict[str, Any]:
    """Run one mutant (and its baselines); a plain dictionary."""
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.tools.zoo import build, mutant
    from ftspec.tools.zoo.injection import active_patches

    from .baselines import AssertCloseRunner, fixture_replay


    m = mutant(mutant_id)
    impl = build(m)
    label = f"mutant:{m.id}"
    dtypes = [d for d in m.dtypes if d in impl.dtypes]
    record: dict[str, Any] = {"id": m.id, "description": m.description, "breaks": list(m.breaks),
                              "targets": list(m.targets), "dtypes": dtypes, "equivalent": list(m.equivalent),
                              "equivalence": m.equivalence, "kind": m.kind, "base": m.base, "source": m.source,
                              "where": m.where, "edit": m.edit}
    scratch = None if case_dir else tempfile.TemporaryDirectory(prefix="ftspec-bench-")
    tmp = Path(scratch.name if scratch is not None else str(case_dir))
    config = RunConfig(profile=options.profile, seed=options.seed, case_dir=str(tmp / "ftspec"),
                       examples=options.examples, call_timeout=options.call_timeout)
    started = time.perf_counter()
    runner = Runner([(label, impl)], config)
    runner.distinct_failures = 0  # first failures only; tools/bench/diagnosis.py measures distinct ones
    result = runner.run(list(m.targets), dtypes)
    record["harness"] = {"seconds": result.seconds, "cells": _cells(result)}
    if options.baselines:
        runner = AssertCloseRunner([(label, impl)], replace(config, case_dir=str(tmp / "assert_close")))
        other = runner.run(list(m.targets), dtypes)
        record["assert_close"] = {"seconds": other.seconds, "cells": _cells(other)}
        fixture_dtypes = [d for d in dtypes if d in ("float64", "float32")]
        for key, judge in (("fixtures", "harness"), ("fixtures_assert_close", "assert_close")):
            t = time.perf_counter()
            fx = fixture_replay([(label, impl)], m.targets, fixture_dtypes, judge=judge,
                                timeout=options.call_timeout)
            record[key] = None if fx is None else {**fx, "seconds": time.perf_counter() - t}
    record["seconds"] = time.perf_counter() - started
    record["patches_left"] = active_patches()
    if scratch is not None:  # case files of a bench run are not kept (pass case_dir to keep them)
        scratch.cleanup()
    return record


def _worker(args: tuple[str, PowerOptions]) -> dict[str, Any]:
    import warnings

    warnings.filterwarnings("ignore")
    mutant_id, options = args
    try:
        return run_mutant(mutant_id, options)
    except Exception as exc:  # noqa: BLE001 - one mutant's harness problem must not end the bench
        return {"id": mutant_id, "error": f"{type(exc).__name__}: {exc}"}


def run_power(mutant_ids: Sequence[str], options: PowerOptions, *, jobs: int = 1,
              progress: Optional[Callable[[dict[str, Any]], None]] = None) -> list[dict[str, Any]]:
    """Run every mutant; records in catalogue order."""
    records: dict[str, dict[str, Any]] = {}
    if jobs <= 1:
        for mid in mutant_ids:
            records[mid] = _worker((mid, options))
            if progress:
                progress(records[mid])
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_worker, (mid, options)): mid for mid in mutant_ids}
            for f in as_completed(futures):
                rec = f.result()
                records[futures[f]] = rec
                if progress:
                    progress(rec)
    return [records[mid] for mid in mutant_ids]


def calibrate(records: list[dict[str, Any]], options: PowerOptions,
              progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """The baselines' judgements on the *correct* base implementations, where the zoo used them.

    A baseline kill only counts (is credible) where the same judgement passes the correct plugin the
    mutant was built from: assert_close per (algorithm, dtype) search, the fixture baselines per fixture
    case and dtype. Returns {"assert_close": {"cells": [...]}, "fixtures": {base: [case@dtype]},
    "fixtures_assert_close": {base: [case@dtype]}}.
    """
    from ftspec.impls.discovery import load

    from .baselines import fixture_replay
    from .falsefail import run_false_failures

    pairs = {(r["base"], a, d) for r in records if "error" not in r for a in r["targets"] for d in r["dtypes"]}
    out: dict[str, Any] = {"assert_close": {"cells": [], "seconds": 0.0, "examples_cap": options.examples},
                           "fixtures": {}, "fixtures_assert_close": {}}
    for base in sorted({b for b, _, _ in pairs}):
        algs = sorted({a for b, a, _ in pairs if b == base})
        dts = sorted({d for b, _, d in pairs if b == base})
        if progress:
            progress(f"assert_close and fixtures on the correct {base} ({len(algs)} algorithms)")
        part = run_false_failures(options.examples, impls=[base], seed=options.seed, algorithms=algs, dtypes=dts,
                                  judge="assert_close", fixtures=False, profile_name=options.profile)
        out["assert_close"]["cells"] += [c for c in part["cells"] if (c["impl"], c["algorithm"], c["dtype"]) in pairs]
        out["assert_close"]["seconds"] += part["seconds"]
        impl = load(base)
        for key, judge in (("fixtures", "harness"), ("fixtures_assert_close", "assert_close")):
            fx = fixture_replay([(base, impl)], algs, [d for d in dts if d in ("float64", "float32")], judge=judge,
                                timeout=options.call_timeout)
            out[key][base] = fx["failing"] if fx else []
    return out


def _credible_kill(rec: dict[str, Any], key: str, calibration: Optional[dict[str, Any]]) -> bool:
    """Whether a baseline's kill of this mutant stands where the correct base passes the same judgement."""
    if key == "assert_close":
        fails = [c for c in rec["assert_close"]["cells"] if c["status"] == Status.FAIL]
        if calibration is None:
            return bool(fails)
        bad = {(c["impl"], c["algorithm"], c["dtype"]) for c in calibration["assert_close"]["cells"]
               if c["status"] == Status.FAIL}
        return any((rec["base"], c["algorithm"], c["dtype"]) not in bad for c in fails)
    fx = rec.get(key)
    if not fx:
        return False
    if calibration is None:
        return bool(fx["killed"])
    return bool(set(fx.get("failing", [])) - set(calibration[key].get(rec["base"], [])))


# --------------------------------------------------------------------------
# summaries
# --------------------------------------------------------------------------


def _killed(cells: list[dict[str, Any]], dtype: Optional[str] = None, algorithm: Optional[str] = None) -> bool:
    return any(c["status"] == Status.FAIL for c in cells
               if (dtype is None or c["dtype"] == dtype) and (algorithm is None or c["algorithm"] == algorithm))


def _percentile(values: list[float], q: float) -> Optional[float]:
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def _status(rec: dict[str, Any], section: str) -> dict[str, Any]:
    """Kill status of one record under one judge ('harness' or 'assert_close')."""
    cells = rec.get(section, {}).get("cells", [])
    dtypes = rec.get("dtypes", [])
    equivalent = set(rec.get("equivalent", []))
    by_dtype = {d: _killed(cells, d) for d in dtypes}
    errors = [c for c in cells if c["status"] == Status.ERROR]
    return {"killed": any(by_dtype.values()), "by_dtype": by_dtype,
            "equivalent_everywhere": bool(dtypes) and all(d in equivalent for d in dtypes),
            "killed_where_equivalent": [d for d in dtypes if by_dtype[d] and d in equivalent],
            "errors": len(errors)}


def summarise(records: list[dict[str, Any]], calibration: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Mutation scores, time-to-kill, counterexample sizes and the baseline comparison.

    With ``calibration`` (``calibrate``), a baseline's kill counts only where that baseline passes
    the correct base implementation; ``raw_killed`` counts every kill."""
    from ftspec.spec.registry import REGISTRY

    rows = []
    for rec in records:
        if "error" in rec:
            rows.append({"id": rec["id"], "error": rec["error"]})
            continue
        h = _status(rec, "harness")
        fails = [c for c in rec["harness"]["cells"] if c["status"] == Status.FAIL]
        ttk = min((c["first_failure_s"] for c in fails if c.get("first_failure_s") is not None), default=None)
        tte = min((c["first_failure_examples"] for c in fails if c.get("first_failure_examples") is not None),
                  default=None)
        smallest = min((c for c in fails if "case" in c), key=lambda c: c["case"]["scalars"], default=None)
        row = {"id": rec["id"], "kind": rec["kind"], "targets": rec["targets"], "dtypes": rec["dtypes"],
               "equivalent": rec["equivalent"], "harness": h, "time_to_kill": ttk, "examples_to_kill": tte,
               "counterexample": smallest and {"algorithm": smallest["algorithm"], "dtype": smallest["dtype"],
                                               "check": smallest["check"], **smallest["case"]},
               "checks": sorted({c["check"] for c in fails if "check" in c}),
               "seconds": rec["seconds"]}
        if "assert_close" in rec:
            row["assert_close"] = {**_status(rec, "assert_close"),
                                   "killed": _credible_kill(rec, "assert_close", calibration),
                                   "raw_killed": _status(rec, "assert_close")["killed"]}
        for key in ("fixtures", "fixtures_assert_close"):
            if rec.get(key) is not None:
                row[key] = {"killed": _credible_kill(rec, key, calibration), "raw_killed": rec[key]["killed"],
                            "ran": rec[key]["ran"], "failed": rec[key]["failed"]}
        rows.append(row)
    ok_rows = [r for r in rows if "error" not in r]
    counted = [r for r in ok_rows if not r["harness"]["equivalent_everywhere"]]
    killed = [r for r in counted if r["harness"]["killed"]]
    dtypes = sorted({d for r in ok_rows for d in r["dtypes"]}, key=["float64", "float32", "bfloat16", "float16"].index)
    by_dtype = {}
    for d in dtypes:
        pool = [r for r in ok_rows if d in r["dtypes"] and d not in r["equivalent"]]
        by_dtype[d] = {"killed": sum(r["harness"]["by_dtype"][d] for r in pool), "mutants": len(pool)}
    by_algorithm = {}
    for name in REGISTRY:
        pool = [r for r in counted if name in r["targets"]]
        recs = {rec["id"]: rec for rec in records if "error" not in rec}
        k = sum(_killed(recs[r["id"]]["harness"]["cells"], algorithm=name) for r in pool)
        by_algorithm[name] = {"killed": k, "mutants": len(pool)}
    by_family: dict[str, dict[str, int]] = {}
    for r in counted:
        fam = r.get("family") or _family(r["targets"][0])
        f = by_family.setdefault(fam, {"killed": 0, "mutants": 0})
        f["mutants"] += 1
        f["killed"] += r["harness"]["killed"]
    times = [r["time_to_kill"] for r in killed if r["time_to_kill"] is not None]
    examples = [r["examples_to_kill"] for r in killed if r["examples_to_kill"] is not None]
    scalars = [r["counterexample"]["scalars"] for r in killed if r["counterexample"]]
    baseline = {}
    for name in ("assert_close", "fixtures", "fixtures_assert_close"):
        have = [r for r in counted if name in r]
        if not have:
            continue
        caught = [r for r in have if r[name]["killed"]]
        baseline[name] = {
            "killed": len(caught), "mutants": len(have), "raw_killed": sum(r[name]["raw_killed"] for r in have),
            "calibrated": calibration is not None,
            "missed_by_baseline_caught_by_harness": sorted(r["id"] for r in have
                                                           if r["harness"]["killed"] and not r[name]["killed"]),
            "caught_by_baseline_missed_by_harness": sorted(r["id"] for r in have
                                                           if r[name]["killed"] and not r["harness"]["killed"]),
        }
    survivors = [r for r in ok_rows if not r["harness"]["killed"]]
    partial = {r["id"]: [d for d in r["dtypes"] if not r["harness"]["by_dtype"][d] and d not in r["equivalent"]]
               for r in ok_rows if r["harness"]["killed"]}
    partial = {k: v for k, v in partial.items() if v}
    return {
        "mutants": len(rows),
        "errors": [r for r in rows if "error" in r],
        "score": {"killed": len(killed), "non_equivalent": len(counted),
                  "value": (len(killed) / len(counted)) if counted else None},
        "by_dtype": by_dtype,
        "by_algorithm": by_algorithm,
        "by_family": by_family,
        "time_to_kill": {"median": _percentile(times, 0.5), "p90": _percentile(times, 0.9),
                         "max": max(times) if times else None, "n": len(times)},
        "examples_to_kill": {"median": _percentile([float(e) for e in examples], 0.5),
                             "p90": _percentile([float(e) for e in examples], 0.9),
                             "max": max(examples) if examples else None},
        "counterexample_scalars": {"median": statistics.median(scalars) if scalars else None,
                                   "max": max(scalars) if scalars else None},
        "baselines": baseline,
        "survivors": [r["id"] for r in survivors],
        "partial_survivors": partial,
        "killed_where_equivalent": {r["id"]: r["harness"]["killed_where_equivalent"] for r in ok_rows
                                    if r["harness"]["killed_where_equivalent"]},
        "rows": rows,
    }


def _family(name: str) -> str:
    from ftspec.spec.registry import entry

    return entry(name).family
