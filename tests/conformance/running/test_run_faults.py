"""Faults around the searches rather than in a call (issue 22): a plugin whose loading or
``devices()`` hangs or crashes, a plugin that leaves a child process running, a JSON report
that cannot be written, an absurd ``--jobs``.

Each fault costs only its plugin (one line, or an error on its own cells) and the rest of the
run goes on, with its report written. The runs are real ``ftspec run`` commands in a
subprocess, with stdout and stderr in files (a child left holding a pipe would otherwise keep
the test waiting) and a timeout, so a run that would hang fails the test instead. The plugins
are in ``misbehaving_plugins.py``; ``good`` runs beside the faulty one and must still pass.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ftspec.conformance.running.isolation import IsolatedPool, WorkerLost
from ftspec.conformance.running.parallel import MAX_JOBS_PER_CPU, jobs_cap, usable_cpus
from ftspec.tools.cli import main

from .. import misbehaving_plugins as mp

ROOT = Path(__file__).resolve().parents[3]
LINUX = sys.platform.startswith("linux")
#: seconds: loading a plugin or its devices() (small: each hang below costs it, plus a grace
#: of 1 s + 10% when the watchdog has to kill the worker)
LOAD = 2
GOOD = mp.label("good")


def _ftspec(tmp_path: Path, *names: str, args: tuple[str, ...] = (), env: dict | None = None,
            timeout: float = 120) -> dict:
    """``ftspec run`` on the plugins ``names`` of misbehaving_plugins.py and ``good`` (layer_norm
    and rms_norm at float32, the quick profile, 3 examples, no fixtures): exit code, stdout, stderr, seconds, and
    the JSON report (None when none was written)."""
    report = tmp_path / "r.json"
    impls = [f"--impl={mp.label(n)}" for n in names]
    command = [sys.executable, "-m", "ftspec.tools.cli", "run", "--profile", "quick", *impls, "--impl", GOOD,
               "--algorithm", "layer_norm",
               "--algorithm", "rms_norm", "--dtype", "float32", "--examples", "3", "--call-timeout", "2",
               "--load-timeout", str(LOAD), "--no-fixtures", "--quiet", "--case-dir", str(tmp_path / "cases"),
               "--json-report", str(report), *args]
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    started = time.monotonic()
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.run(command, cwd=ROOT, stdout=o, stderr=e, timeout=timeout,
                              env={**os.environ, **(env or {})})
    return {"rc": proc.returncode, "out": out.read_text(), "err": err.read_text(),
            "seconds": time.monotonic() - started,
            "report": json.loads(report.read_text()) if report.exists() else None}


def _cells(report: dict, name: str) -> list[dict]:
    return [c for c in report["cells"] if c["implementation"] == mp.label(name)]


def _good_passed(report: dict) -> None:
    good = [c for c in report["cells"] if c["implementation"] == GOOD]
    assert {c["algorithm"] for c in good} == {"layer_norm", "rms_norm"}
    assert all(c["status"] == "pass" and c["examples"] == 3 for c in good), good


# -- a plugin whose loading hangs or crashes ------------------------------------------------------

@pytest.mark.parametrize("bad, mode, needle", [
    ("load_sleep", "--jobs=1", f"(load timeout {LOAD} s)"),
    pytest.param("load_gil_hang", "--jobs=1", f"(load timeout {LOAD} s)",
                 marks=pytest.mark.skipif(not LINUX, reason="ctypes.PyDLL(None) needs a libc in the program")),
    ("load_exit", "--jobs=2", "exited with status 3"),
    ("load_sleep", "--in-process", f"no result after {LOAD} s (load timeout)"),
], ids=["sleep-jobs-1", "gil-hang-jobs-1", "os-exit-jobs-2", "sleep-in-process"])
def test_a_plugin_whose_loading_hangs_or_crashes_fails_to_load_and_the_run_goes_on(tmp_path, bad, mode, needle):
    """Loading (import, factory) ran in ftspec's own process, unguarded: a hang froze the run with
    no output and no report, an os._exit ended it. Now it is loaded in a worker first, under the
    watchdog (``--in-process``: in a helper thread); it is reported as failed to load, in one line."""
    run = _ftspec(tmp_path, bad, args=(mode,))
    assert run["rc"] == 1, run  # non-conformant: a plugin failed to load
    lines = run["err"].strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run["err"], run["err"]
    assert f"plugin '{mp.label(bad)}' failed to load" in lines[0] and needle in lines[0], lines[0]
    waited = re.search(r"no result after ([0-9.]+) s \(load timeout \d", lines[0])
    if waited:  # killed by the watchdog at the load timeout plus its grace (1 s + 10%), not later
        assert LOAD + 1 + 0.1 * LOAD <= float(waited.group(1)) < LOAD + 10, lines[0]
    report = run["report"]
    assert report is not None and report["verdict"] == "non-conformant"
    assert [b["name"] for b in report["broken"]] == [mp.label(bad)] and needle in report["broken"][0]["error"]
    assert not _cells(report, bad)  # never loaded by ftspec: no cells of its own
    _good_passed(report)
    assert run["seconds"] < 60


# -- a plugin whose devices() hangs or crashes ----------------------------------------------------

@pytest.mark.parametrize("bad, mode, needle", [
    ("devices_sleep", "--jobs=1", "the worker process was killed during devices() of"),
    pytest.param("devices_gil_hang", "--jobs=2", "the worker process was killed during devices() of",
                 marks=pytest.mark.skipif(not LINUX, reason="ctypes.PyDLL(None) needs a libc in the program")),
    ("devices_exit", "--jobs=1", "exited with status 3"),
    ("devices_sleep", "--in-process", f"devices() raised PluginTimeout: no result after {LOAD} s (load timeout)"),
], ids=["sleep-jobs-1", "gil-hang-jobs-2", "os-exit-jobs-1", "sleep-in-process"])
def test_a_plugin_whose_devices_hangs_or_crashes_gets_an_error_on_its_cells_only(tmp_path, bad, mode, needle):
    """devices() is called to plan the run; it hung the run (or, in a worker, the task for good).
    Now each of that plugin's cells is an error saying why, and the others are searched."""
    run = _ftspec(tmp_path, bad, args=(mode,))
    assert run["rc"] == 1, run
    assert "Traceback" not in run["err"], run["err"]
    report = run["report"]
    assert report is not None and report["verdict"] == "non-conformant" and not report["broken"]
    mine = _cells(report, bad)
    assert {c["algorithm"] for c in mine} == {"layer_norm", "rms_norm"}
    for c in mine:
        assert c["status"] == "error" and c["examples"] == 0, c
        assert c["note"].startswith("devices() raised Plugin") and needle in c["note"], c["note"]
        assert "\n" not in c["note"]
    _good_passed(report)
    assert run["seconds"] < 60


def test_a_plugin_that_hangs_loading_only_in_a_worker_costs_only_its_own_cells(tmp_path, monkeypatch):
    """Loaded here (and so planned), then hanging while a worker loads it: the search task's worker
    is killed at the load timeout, that plugin's cells become errors, and the search runs again
    without it; the fixture replay leaves it out the same way."""
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.parallel import replay_fixtures_parallel, run_parallel
    from ftspec.fixtures import load_manifest
    from ftspec.impls.discovery import load_target

    flag = tmp_path / "hang"
    monkeypatch.setenv("FTSPEC_TEST_HANG", str(flag))
    labels = [mp.label("load_flagged"), GOOD]
    plugins = [(label, load_target(label)) for label in labels]  # no flag yet: loads here
    flag.touch()  # from now on, loading it hangs (in the workers)
    settings = RunConfig(tuple(labels), "default", seed=1, case_dir=str(tmp_path / "cases"), examples=3,
                         call_timeout=2, load_timeout=1)
    result = run_parallel(settings, plugins, jobs=1, algorithms=["layer_norm"], dtypes=["float64"])
    cells = {c.impl: c for c in result.cells}
    bad = cells[mp.label("load_flagged")]
    assert bad.status == "error" and bad.examples == 0
    assert "during loading of " + mp.label("load_flagged") in bad.note and "(load timeout 1 s)" in bad.note
    assert cells[GOOD].status == "pass" and cells[GOOD].examples == 3

    cases = [(r["id"], r["algorithm"]) for r in load_manifest()["cases"] if r["algorithm"] == "layer_norm"][:3]
    replays = replay_fixtures_parallel(RunConfig(tuple(labels), dtypes=("float64",), call_timeout=2, load_timeout=1),
                                       cases)
    mine = [r for r in replays if r.impl == mp.label("load_flagged")]
    assert len(mine) == 3 and not any(r.ok for r in mine)
    assert all(r.message.startswith("not replayed: the worker process was killed during loading") for r in mine)
    good = [r for r in replays if r.impl == GOOD]
    assert good and all(r.ok for r in good)


# -- a plugin that leaves a process behind --------------------------------------------------------

def _alive(pid: int) -> bool:
    """Running (a zombie is dead: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _gone(pids: list[int], within: float = 10.0) -> list[int]:
    """The pids of ``pids`` still running after up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _kill_all(pids: list[int]) -> None:
    for pid in pids:  # never leave them to the other tests
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.skipif(not LINUX, reason="reads /proc")
@pytest.mark.parametrize("bad, jobs", [("popen_child", "--jobs=1"), ("fork_child", "--jobs=2")],
                         ids=["popen-jobs-1", "fork-jobs-2"])
def test_a_child_a_plugin_starts_in_a_worker_does_not_outlive_the_run(tmp_path, bad, jobs):
    """`sleep 300` started by a plugin (subprocess.Popen, or os.fork) once kept running after
    ftspec exited. Each worker leads a process group of its own, killed when the worker ends."""
    record = tmp_path / "children"
    try:
        run = _ftspec(tmp_path, bad, args=(jobs,), env={"FTSPEC_TEST_CHILDREN": str(record)})
        assert run["rc"] == 3, run  # partial (a selection): the plugin computes correctly
        pids = _pids(record)
        assert pids, "the plugin started no child"
        left = _gone(pids)
        assert not left, f"processes started by the plugin outlived ftspec: {left}"
    finally:
        _kill_all(_pids(record))


@pytest.mark.skipif(not LINUX, reason="reads /proc; ctypes.PyDLL(None) needs a libc in the program")
def test_a_worker_killed_by_the_watchdog_takes_its_children_with_it(tmp_path, monkeypatch):
    """The child is gone as soon as its worker is killed, not only when the pool is shut down."""
    record = tmp_path / "children"
    monkeypatch.setenv("FTSPEC_TEST_CHILDREN", str(record))
    pool = IsolatedPool(1, grace=lambda timeout: 0.5)
    try:
        with pytest.raises(WorkerLost) as info:
            pool.submit(mp.task_child_then_gil_hang, 0.5).result(60)
        assert info.value.deadline
        pids = _pids(record)
        assert len(pids) == 1
        assert not _gone(pids, within=5), "the child of a killed worker is still running"
        assert pool.submit(mp.task_value, 1).result(60) == {"got": [1, 2]}  # the pool goes on
    finally:
        pool.shutdown()
        _kill_all(_pids(record))


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_shutting_the_pool_down_ends_what_its_workers_started():
    pool = IsolatedPool(1)
    pid = None
    try:
        pid = pool.submit(mp.task_start_child).result(60)
        worker = pool.pids()[0]
        assert _alive(pid) and os.getpgid(pid) == worker  # in its worker's group, running while it works
        pool.shutdown()
        assert not _gone([pid], within=5), "a child started in a worker outlived the pool"
    finally:
        pool.shutdown()
        if pid is not None:
            _kill_all([pid])


# -- a report that cannot be written --------------------------------------------------------------

def test_a_report_that_cannot_be_written_makes_the_run_exit_2(tmp_path, monkeypatch, capsys):
    """The path passed the check before the run, then the write failed (a full disk): the error
    was printed and the exit code was the verdict's, as if the report had been written."""
    from ftspec.conformance.session import report as report_module

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report_module, "write_json", full)
    rc = main(["run", "--profile", "quick", "--impl", GOOD, "--algorithm", "layer_norm", "--dtype", "float64",
               "--examples", "3",
               "--no-fixtures", "--quiet", "--in-process", "--case-dir", str(tmp_path / "cases"),
               "--json-report", str(tmp_path / "r.json")])
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.strip().splitlines()
    assert lines == [f"error: cannot write the JSON report {tmp_path / 'r.json'}: No space left on device"], lines
    assert "partial" in captured.out  # the verdict is still printed


@pytest.mark.skipif(not (LINUX and os.access("/dev", os.W_OK)), reason="needs /dev/full and a writable /dev")
def test_json_report_to_dev_full_exits_2(tmp_path):
    run = _ftspec(tmp_path, args=("--json-report", "/dev/full", "--in-process"))
    assert run["rc"] == 2, run
    assert run["err"].strip().splitlines() == ["error: cannot write the JSON report /dev/full: No space left on device"]


# -- --jobs ---------------------------------------------------------------------------------------

def test_an_absurd_jobs_is_capped_with_a_note(tmp_path):
    run = _ftspec(tmp_path, args=("--jobs", "100000"))
    cap = MAX_JOBS_PER_CPU * usable_cpus()
    assert cap == jobs_cap()
    assert run["rc"] == 3, run
    lines = run["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"note: --jobs 100000 capped at {cap} "), lines
    assert run["report"]["jobs"] == cap


def test_the_library_caps_jobs_too(tmp_path):
    from ftspec.conformance.session.commands import Settings, run

    result = run([GOOD], Settings(algorithms=("layer_norm",), dtypes=("float64",), examples=2, fixtures="none",
                                  jobs=10**6, case_dir=str(tmp_path / "cases")))
    assert result.jobs == jobs_cap()


# -- make run -------------------------------------------------------------------------------------

def test_make_run_writes_its_json_report():
    """`make run` printed a verdict and kept nothing; it now writes reports/run.json (and says so)."""
    recipe = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "ftspec run" in recipe and "--json-report reports/run.json" in recipe, recipe
    from ftspec.tools.cli import build_parser

    args = build_parser().parse_args(["run", "--json-report", "reports/run.json"])
    assert args.json_report == "reports/run.json"
