"""``ftspec run --jobs N``: searches and fixture replay in worker processes.

The workers must give the run the serial run gives (same examples, same
verdicts), carry a failure's shrunk case back, and survive a plugin that
kills its process (that one cell fails with the check ``crash``; the
isolation tests are in test_isolation.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from ftspec.conformance.running import parallel
from ftspec.conformance.running.fixture_replay import replay_fixtures, sample_cases
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.parallel import replay_fixtures_parallel, run_parallel
from ftspec.conformance.running.runner import Runner
from ftspec.fixtures import load_manifest
from ftspec.impls.discovery import load_target

from ..support import EPSILON_INSIDE_SOURCE

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()


def _module(tmp_path: Path, monkeypatch, name: str, extra: str) -> str:
    """An unregistered plugin ``name:implementation``: the example plugin with ``extra`` appended."""
    (tmp_path / f"{name}.py").write_text(EXAMPLE + "\n" + extra)
    monkeypatch.chdir(tmp_path)  # module:object targets import from the current directory, workers too
    return f"{name}:implementation"


def _settings(labels, tmp_path, examples=6) -> RunConfig:
    return RunConfig(tuple(labels), "default", seed=3, case_dir=str(tmp_path / "cases"), examples=examples)


def _summary(result):
    return [(c.algorithm, c.impl, c.dtype, c.device, c.status, c.examples, c.worst_ratio) for c in result.cells]


def test_the_parallel_run_is_the_serial_run(tmp_path):
    plugins = [("numpy", load_target("numpy"))]
    algorithms, dtypes = ["layer_norm", "attention", "embedding"], ["float64", "float32"]
    serial = Runner(plugins, RunConfig(seed=3, case_dir=tmp_path / "s", examples=6)).run(algorithms, dtypes)
    parallel = run_parallel(_settings(["numpy"], tmp_path), plugins, jobs=2, algorithms=algorithms, dtypes=dtypes)
    assert _summary(parallel) == _summary(serial)
    assert parallel.generated == serial.generated and parallel.ok
    assert all(c.examples == 6 for c in parallel.cells if c.status == "pass")


def test_a_failure_comes_back_with_its_shrunk_case_and_reproducer(tmp_path, monkeypatch):
    label = _module(tmp_path, monkeypatch, "eps_inside", EPSILON_INSIDE_SOURCE)

    plugins = [(label, load_target(label))]
    result = run_parallel(_settings([label], tmp_path, examples=40), plugins, jobs=2,
                          algorithms=["layer_norm", "rms_norm"], dtypes=["float32"])
    cells = {c.algorithm: c for c in result.cells}
    assert cells["rms_norm"].status == "pass"
    bad = cells["layer_norm"]
    assert bad.status == "fail" and bad.failure is not None
    assert bad.failure.case is not None and bad.failure.case.algorithm == "layer_norm"  # read back from its file
    assert Path(bad.failure.case_file).exists() and "ftspec replay" in bad.failure.report
    assert not result.ok


def test_a_plugin_that_kills_its_process_costs_only_its_search(tmp_path, monkeypatch):
    label = _module(tmp_path, monkeypatch, "crashes", """
import os

def layer_norm(inputs, params, ctx):
    os._exit(3)  # as a segfaulting extension would

implementation.algorithms["layer_norm"] = layer_norm
""")
    plugins = [(label, load_target(label))]
    result = run_parallel(_settings([label], tmp_path), plugins, jobs=2,
                          algorithms=["layer_norm", "rms_norm"], dtypes=["float64", "float32"])
    by = {(c.algorithm, c.dtype): c for c in result.cells}
    for dtype in ("float64", "float32"):
        crashed = by[("layer_norm", dtype)]
        assert crashed.status == "fail" and crashed.failure.check == "crash"
        assert "exited with status 3" in crashed.failure.message
        assert "during the call of layer_norm" in crashed.failure.message
        assert by[("rms_norm", dtype)].status == "pass" and by[("rms_norm", dtype)].examples == 6


def test_a_hanging_plugin_times_out_in_its_worker_and_the_run_ends(tmp_path, monkeypatch):
    label = _module(tmp_path, monkeypatch, "hangs", """
import time

def layer_norm(inputs, params, ctx):
    time.sleep(3600)

implementation.algorithms["layer_norm"] = layer_norm
""")
    plugins = [(label, load_target(label))]
    settings = RunConfig((label,), "default", seed=3, case_dir=str(tmp_path / "cases"), examples=6,
                         call_timeout=2.0)
    started = time.monotonic()
    result = run_parallel(settings, plugins, jobs=2, algorithms=["layer_norm", "rms_norm"], dtypes=["float32"])
    cells = {c.algorithm: c for c in result.cells}
    assert cells["layer_norm"].status == "fail" and cells["layer_norm"].failure.check == "timeout"
    assert cells["rms_norm"].status == "pass" and cells["rms_norm"].examples == 6
    assert time.monotonic() - started < 120  # the abandoned call does not hold the run


def test_the_fixture_sample_is_fixed_and_covers_every_algorithm():
    records = load_manifest()["cases"]
    ids = sample_cases(records)
    assert ids == sample_cases(records)
    assert {r["algorithm"] for r in records if r["id"] in ids} == {r["algorithm"] for r in records}
    assert 0.2 < len(ids) / len(records) < 0.4


@pytest.mark.slow
def test_parallel_fixture_replay_matches_the_serial_one():
    records = [r for r in load_manifest()["cases"] if r["algorithm"] in ("layer_norm", "unembedding", "sample")]
    cases = [(r["id"], r["algorithm"]) for r in records]
    plugins = [("numpy", load_target("numpy"))]
    serial = replay_fixtures(plugins, cases={c for c, _ in cases})
    parallel = replay_fixtures_parallel(RunConfig(("numpy",), jobs=2), cases)
    key = lambda r: (r.case, r.impl, r.dtype, r.device)  # noqa: E731
    assert sorted((key(r), r.ok, r.ratio) for r in parallel) == sorted((key(r), r.ok, r.ratio) for r in serial)
    assert len(serial) == 2 * len(cases) and all(r.ok for r in serial)


def test_ftspec_run_with_jobs_reports_the_wrong_algorithm_and_carries_on(tmp_path, monkeypatch):
    """The command end to end: two workers, a sample of the fixtures, a JSON report."""
    import json
    import subprocess
    import sys

    label = _module(tmp_path, monkeypatch, "rms_subtracts_mean", """
def rms_norm(inputs, params, ctx):  # subtracts the mean: a layer norm without β, not RMSnorm
    X = inputs["X"]
    if np.all(X == 0, axis=-2).any():  # refuses what the spec refuses: only the mean is wrong
        raise ValueError("rms_norm: a column of zeros")
    Xc = X - X.mean(axis=-2, keepdims=True)
    return Xc / np.sqrt((Xc * Xc).mean(axis=-2, keepdims=True)) * params["gamma"][:, None]

implementation.algorithms["rms_norm"] = rms_norm
""")
    done = subprocess.run([sys.executable, "-m", "ftspec.tools.cli", "run", "--impl", label, "--dtype", "float32",
                           "--examples", "30", "--jobs", "2", "--fixtures", "sample", "--json-report", "r.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["jobs"] == 2 and report["fixture_selection"] == "sample"
    status = {c["algorithm"]: c["status"] for c in report["cells"] if c["status"] != "not implemented"}
    assert status == {"layer_norm": "pass", "rms_norm": "fail"}
    replayed = {(f["algorithm"], f["ok"]) for f in report["fixtures"]}
    assert ("layer_norm", True) in replayed and ("rms_norm", False) in replayed
    assert "rms_norm" in done.stdout and "ftspec replay" in done.stdout


class _PendingPool:
    """An executor whose tasks never end; records ``terminate`` (Ctrl-C kills the workers)."""

    def __init__(self):
        self.terminated = False

    def submit(self, fn, /, *args, **kwargs):
        return Future()

    def terminate(self):
        self.terminated = True


def test_ctrl_c_is_never_raised_inside_the_wait_on_the_workers(monkeypatch):
    # concurrent.futures.wait takes every future's lock in a loop with no `finally`: a Ctrl-C
    # raised inside it left a lock held, and the pool's thread waited on it for ever (a run hung
    # instead of writing its report). This wait takes a lock the same way, with Ctrl-C pressed
    # in the middle: the interrupt must come out of _drive, and only after the lock is let go.
    lock = threading.Lock()
    waits = []

    def wait_holding_a_lock(fs, timeout=None, return_when=None):
        lock.acquire()
        if not waits:
            os.kill(os.getpid(), signal.SIGINT)
        for _ in range(20000):  # bytecode: where a raised KeyboardInterrupt would land
            pass
        lock.release()
        waits.append(timeout)
        time.sleep(0.01 if timeout is None else min(timeout, 0.01))
        return set(), set(fs)

    monkeypatch.setattr(parallel, "wait", wait_holding_a_lock)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own Ctrl-C
    try:
        pool = _PendingPool()
        with pytest.raises(KeyboardInterrupt):
            parallel._drive(pool, 3, lambda i: pool.submit(None), lambda i, f: False, window=3)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not lock.locked(), "Ctrl-C was raised inside the wait, with its lock held"
    assert pool.terminated and len(waits) >= 1
    assert signal.getsignal(signal.SIGINT) is previous


def test_an_excluded_member_is_not_planned_and_a_search_with_none_left_is_not_run(tmp_path, monkeypatch):
    """An extra round leaves out the members with enough examples; in worker processes it planned
    every search of its product anyway and listed those with no member left ("no examples (0)"
    for each). Now the plan is the in-process runner's: the left-out cells say so, and a search
    with no member left is neither planned nor announced."""
    label = _module(tmp_path, monkeypatch, "second", "")  # the example plugin: layer_norm, rms_norm
    plugins = [("numpy", load_target("numpy")), (label, load_target(label))]
    events: list[tuple[str, dict]] = []
    exclude = [("numpy", "rms_norm", "float64"), (label, "rms_norm", "float64"), ("numpy", "layer_norm", "float64")]
    result = run_parallel(_settings(["numpy", label], tmp_path), plugins, jobs=1,
                          algorithms=["layer_norm", "rms_norm"], dtypes=["float64"], exclude=exclude,
                          progress=lambda event, **info: events.append((event, info)))
    assert [info["searches"] for event, info in events if event == "plan"] == [1]
    ended = [info for event, info in events if event == "end"]
    assert [(i["algorithm"], [c.impl for c in i["cells"]]) for i in ended] == [("layer_norm", [label])]
    cells = {(c.algorithm, c.impl): c for c in result.cells}
    assert cells[("layer_norm", label)].status == "pass" and cells[("layer_norm", label)].examples == 6
    for key in [("rms_norm", "numpy"), ("rms_norm", label), ("layer_norm", "numpy")]:
        assert cells[key].status == "no examples" and cells[key].examples == 0, key
