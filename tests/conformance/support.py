"""Running the harness on a few implementations, for the conformance tests."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import RunResult, Runner
from ftspec.impls.api import Implementation
from ftspec.tools.zoo import build, mutant


def run(plugins: Sequence[tuple[str, Implementation]], algorithms: Sequence[str], dtypes: Sequence[str],
        tmp_path: Path, *, examples: int = 60, seed: int = 0, timeout: float | None = None,
        distinct: int = 0, refusals: bool = True) -> RunResult:
    """``distinct``: further distinct failures to look for after the first (forensics/distinct_failures/); 0 by
    default, since these tests ask whether and how a cell fails (tests/conformance/forensics/test_distinct.py
    tests the further search). ``refusals``: check that the plugin refuses what the spec refuses
    (Runner.refusals)."""
    runner = Runner(plugins, RunConfig(seed=seed, case_dir=tmp_path / "cases", examples=examples, call_timeout=timeout))
    runner.distinct_failures = distinct
    runner.refusals = refusals
    return runner.run(algorithms, dtypes)


def run_mutant(mutant_id: str, algorithms: Sequence[str], dtypes: Sequence[str], tmp_path: Path,
               **kw) -> RunResult:
    m = mutant(mutant_id)
    return run([(f"mutant:{m.id}", build(m))], algorithms, dtypes, tmp_path, **kw)


def failed(result: RunResult) -> dict[str, str]:
    """{algorithm: failed check} for the cells that failed."""
    return {c.algorithm: c.failure.check for c in result.cells if c.status == "fail" and c.failure}


def counted_confirmations(monkeypatch) -> list[tuple]:
    """Record every ``Runner.alone`` call (a failure against a block's or the screen's bound, judged
    again on the value set's own reference) while the test runs; the calls are still made."""
    confirmed: list[tuple] = []
    alone = Runner.alone

    def counting(self, *args):
        confirmed.append(args)
        return alone(self, *args)

    monkeypatch.setattr(Runner, "alone", counting)
    return confirmed


def counted_evaluations(monkeypatch) -> list[tuple]:
    """Record every evaluation ``tolerances.reference`` makes (those it does not take from the
    references it keeps, ``tolerances.keeping_references``) while the test runs; the evaluations
    are still made."""
    from ftspec.conformance.core import tolerances

    evaluated: list[tuple] = []
    evaluate = tolerances._evaluated

    def counting(entry, inputs, params, **how):
        evaluated.append((entry.name, how))
        return evaluate(entry, inputs, params, **how)

    monkeypatch.setattr(tolerances, "_evaluated", counting)
    return evaluated


#: plugin source appended to the example plugin (examples/minimal_plugin): its layer norm with ε = 1e-5
#: inside the root, wrong for the paper's set and refusing only what the spec refuses, so that a search
#: fails it on values alone (the worker and parallel-run tests' failing plugin)
EPSILON_INSIDE_SOURCE = """
import numpy as np

def layer_norm(inputs, params, ctx):  # epsilon 1e-5 inside the root: wrong for the paper's set
    X = inputs["X"]
    if np.all(X == X[..., :1, :], axis=-2).any():  # refuses what the spec refuses: only ε is wrong
        raise ValueError("layer_norm: a column of zero variance")
    m = X.mean(axis=-2, keepdims=True)
    v = ((X - m) ** 2).mean(axis=-2, keepdims=True)
    return (X - m) / np.sqrt(v + 1e-5) * params["gamma"][:, None] + params["beta"][:, None]

implementation.algorithms["layer_norm"] = layer_norm
"""
