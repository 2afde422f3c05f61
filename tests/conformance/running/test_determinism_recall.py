"""The determinism check's second call: once per drawn case, on the first value set of its block.

A block's further value sets share the drawn case's structure (``conformance/core/blocks.py``);
calling each of them twice cost as much as its own call (docs/benchmarks.md, "Against a plain
check"). Here a search's counts say what ran (the verdict claims no more: ``checks`` counts one
determinism check per drawn case, a spec check per value set), and a plugin whose bits change
from call to call is still caught on the first example.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.discovery import load

NUMPY = load("numpy")


def _search(plugin, tmp_path, block: int, examples: int = 24):
    runner = Runner([(plugin.name, plugin)], RunConfig(seed=0, case_dir=tmp_path, examples=examples, block=block,
                                                       devices=("cpu",)))
    runner.distinct_failures = 0
    (cell,) = runner.run(["layer_norm"], ["float64"]).cells
    return cell


def test_the_determinism_check_runs_once_per_drawn_case(tmp_path):
    blocked = _search(NUMPY, tmp_path / "b", block=4, examples=128)  # 128 // MIN_DRAWS: blocks of 4
    assert blocked.ok and blocked.examples >= 128
    assert blocked.checks["spec"] == blocked.examples
    # one second call per block of up to 4 value sets: at least a quarter, fewer than all
    assert blocked.examples / 4 <= blocked.checks["determinism"] < blocked.examples
    alone = _search(NUMPY, tmp_path / "a", block=1)
    assert alone.ok and alone.checks["determinism"] == alone.checks["spec"] == alone.examples


def test_a_nondeterministic_plugin_fails_on_its_first_example(tmp_path):
    calls = itertools.count()
    base = NUMPY.algorithms["layer_norm"]

    def flickering(inputs, params, ctx):  # every other call one ulp off: an atomic-add reduction's kind of bug
        out = np.array(base(inputs, params, ctx), copy=True)
        if next(calls) % 2:
            out.flat[0] = np.nextafter(out.flat[0], np.inf)
        return out

    plugin = dataclasses.replace(NUMPY, name="numpy-flickering", algorithms={"layer_norm": flickering})
    cell = _search(plugin, tmp_path, block=8, examples=256)
    assert not cell.ok
    assert cell.failure is not None and cell.failure.check == "determinism"
    assert cell.first_failure_examples == 1
