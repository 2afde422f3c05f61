"""False failures: the three correct bundled implementations at the thorough profile.

A correct implementation must never fail. This runs numpy, torch and jax
together (as ``ftspec run --profile thorough`` does: one search per
algorithm × dtype, every implementation on every example) over every entry
of the registry (training and inference included), optionally
capped at ``examples`` per search, then replays the golden fixtures on them.
With ``judge="assert_close"`` it runs the assert_close baseline's judgement
instead, which says where that baseline would fail correct code.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any, Optional, Sequence

from ftspec.conformance.core.status import Status

__all__ = ["run_false_failures"]

IMPLS = ("numpy", "torch", "jax")


def _algorithms() -> list[str]:
    from ftspec.spec.registry import REGISTRY

    return list(REGISTRY)


def _run(args: tuple) -> dict[str, Any]:
    """One process's share: a Runner over some algorithms (plain dictionaries back)."""
    import warnings

    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.impls.discovery import load

    from .baselines import AssertCloseRunner


    warnings.filterwarnings("ignore")
    impls, examples, seed, algorithms, dtypes, judge, profile_name = args
    plugins = [(name, load(name)) for name in impls]
    cls = AssertCloseRunner if judge == "assert_close" else Runner
    with tempfile.TemporaryDirectory(prefix="ftspec-falsefail-") as scratch:
        runner = cls(plugins, RunConfig(profile=profile_name, seed=seed, case_dir=scratch, examples=examples))
        result = runner.run(list(algorithms), list(dtypes) if dtypes else None)
    cells = []
    for c in result.cells:
        rec = {"algorithm": c.algorithm, "impl": c.impl, "device": c.device, "dtype": c.dtype, "status": c.status.value,
               "examples": c.examples, "worst_ratio": c.worst_ratio if c.worst_ratio != float("inf") else "inf",
               "note": c.note[:300]}
        if c.failure is not None:
            rec["check"] = c.failure.check
            rec["message"] = c.failure.message[:400]
            if c.failure.case is not None:  # None: no case to describe (a lost worker)
                rec["case"] = c.failure.case.describe()[:300]
        cells.append(rec)
    return {"cells": cells}


def run_false_failures(examples: Optional[int] = None, *, impls: Sequence[str] = IMPLS, seed: int = 0,
                       algorithms: Optional[Sequence[str]] = None, dtypes: Optional[Sequence[str]] = None,
                       judge: str = "harness", fixtures: bool = True, profile_name: str = "thorough",
                       jobs: int = 1) -> dict[str, Any]:
    """Run the correct implementations; counts of examples run and failed, per cell.

    ``jobs`` > 1 splits the algorithms over worker processes (each runs every implementation on its share,
    so references are still shared between implementations within a search)."""
    from ftspec.conformance.core.profiles import profile

    names = list(algorithms or _algorithms())
    prof = profile(profile_name)
    started = time.perf_counter()
    shares = [names[i::jobs] for i in range(max(jobs, 1))]
    shares = [sh for sh in shares if sh]
    tasks = [(tuple(impls), examples, seed, tuple(sh), tuple(dtypes) if dtypes else None, judge, profile_name)
             for sh in shares]
    if len(tasks) <= 1:
        parts = [_run(t) for t in tasks]
    else:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        with ProcessPoolExecutor(max_workers=len(tasks), mp_context=get_context("spawn")) as pool:
            parts = list(pool.map(_run, tasks))
    order = {n: i for i, n in enumerate(names)}
    cells = sorted((c for part in parts for c in part["cells"]), key=lambda c: order.get(c["algorithm"], 0))
    out: dict[str, Any] = {
        "judge": judge, "profile": profile_name, "examples_cap": examples or prof.examples, "seed": seed,
        "jobs": jobs, "seconds": time.perf_counter() - started, "cells": cells,
        "examples": sum(c["examples"] for c in cells), "failed_cells": [c for c in cells if c["status"] == Status.FAIL],
        "error_cells": [c for c in cells if c["status"] in (Status.ERROR, Status.NO_EXAMPLES)],
    }
    if fixtures and judge == "harness":
        try:
            from ftspec.conformance.running.fixture_replay import replay_fixtures
            from ftspec.impls.discovery import load
        except ImportError:
            out["fixtures"] = None
        else:
            t = time.perf_counter()
            res = replay_fixtures([(name, load(name)) for name in impls],
                                  algorithms=list(algorithms) if algorithms else None)
            out["fixtures"] = {"ran": len(res), "failed": [r.to_dict() for r in res if not r.ok],
                               "seconds": time.perf_counter() - t}
    return out
