"""The library API with the isolation layer under it: a hang is paid for once
per run, and Ctrl-C keeps what the searches found (conformance/session/commands.py).

The plugin ``misbehaving_plugins:flagged`` counts its calls in a file and
hangs (releasing the GIL) while a flag file exists, so a test decides when it
hangs and counts how often the harness called it. One algorithm (layer_norm),
one dtype, call timeouts of 0.3 s. Without the session passing on what the
searches found, the count goes up (the hang is paid again) or the fixture
replay waits the default 60 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspec.conformance.session.commands import Settings, run

from .. import misbehaving_plugins as mp

TIMEOUT = 0.3
FLAGGED, GOOD = mp.label("flagged"), mp.label("good")


@pytest.fixture
def flagged(tmp_path: Path, monkeypatch):
    """(calls file, hang flag); worker processes started after this inherit the variables."""
    calls, flag = tmp_path / "calls", tmp_path / "hang"
    monkeypatch.setenv("FTSPEC_TEST_CALLS", str(calls))
    monkeypatch.setenv("FTSPEC_TEST_HANG", str(flag))
    return calls, flag


def _calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _settings(tmp_path: Path, **kw) -> Settings:
    values = dict(profile="quick", algorithms=("layer_norm",), dtypes=("float64",), call_timeout=TIMEOUT,
                  jobs=1, case_dir=str(tmp_path / "cases"))
    values.update(kw)
    return Settings(**values)


def test_the_fixture_replay_uses_the_runs_call_timeout(tmp_path, flagged):
    """A call that first hangs in the replay is given up after --call-timeout, not the default 60 s."""
    calls, flag = flagged

    def progress(event: str, **info) -> None:
        if event == "fixtures":  # the searches are over: from now on every call hangs
            flag.touch()

    result = run([FLAGGED], _settings(tmp_path, fixtures="all", progress=progress))
    assert [c.status for c in result.cells] == ["pass"]  # the search saw no hang
    waited = [r for r in result.fixtures if "no result after" in r.message]
    assert len(waited) == 1, [r.message for r in result.fixtures]
    assert f"no result after {TIMEOUT:g} s" in waited[0].message
    assert all(not r.ok for r in result.fixtures)
    assert all("earlier call" in r.message and "hung" in r.message for r in result.fixtures if r is not waited[0])


@pytest.mark.parametrize("in_process", [False, True])
def test_a_hang_in_the_search_is_not_paid_again_in_the_fixture_replay(tmp_path, flagged, in_process):
    calls, flag = flagged
    flag.touch()
    result = run([FLAGGED], _settings(tmp_path, fixtures="all", in_process=in_process))
    (cell,) = result.cells
    assert cell.status == "fail" and cell.failure.check == "timeout"
    assert len(result.fixtures) >= 2  # the paper variant's layer_norm fixtures
    assert not any(r.ok for r in result.fixtures)
    waited = [r.message for r in result.fixtures if "no result after" in r.message and "not called" not in r.message]
    assert not waited, waited
    assert "not called: an earlier call hung in the search" in result.fixtures[0].message
    assert _calls(calls) == 1  # the search's call only
    assert result.verdict == "non-conformant"


@pytest.mark.parametrize("in_process", [False, True])
def test_the_extra_round_does_not_call_a_hung_plugin_again(tmp_path, flagged, in_process):
    """The time cap leaves the well-behaved plugin short of the minimum: the extra round searches
    layer_norm again, without the plugin whose call hung."""
    calls, flag = flagged
    flag.touch()
    result = run([FLAGGED, GOOD], _settings(tmp_path, fixtures="none", seconds=0.001, in_process=in_process))
    cells = {c.impl: c for c in result.cells}
    assert cells[FLAGGED].status == "fail" and cells[FLAGGED].failure.check == "timeout"
    assert result.extension["searches"] == ["layer_norm/float64"]  # the extra round ran
    assert cells[GOOD].status == "pass" and cells[GOOD].examples >= result.minimum
    assert _calls(calls) == 1


def test_ctrl_c_keeps_the_searches_that_ended(tmp_path):
    """KeyboardInterrupt during the searches: the report keeps run_parallel's partial result (the
    ended search with its counts) and marks the search that had not ended as not run."""
    ended: list[str] = []

    def progress(event: str, **info) -> None:
        if event == "end":
            ended.append(info["algorithm"])
            raise KeyboardInterrupt  # as Ctrl-C would, in the parent, after the first search

    settings = _settings(tmp_path, algorithms=("layer_norm", "rms_norm"), examples=3, fixtures="none",
                         progress=progress)
    result = run([GOOD], settings)
    assert result.interrupted and result.verdict == "inconclusive"
    assert len(ended) == 1
    cells = {c.algorithm: c for c in result.cells}
    assert set(cells) == {"layer_norm", "rms_norm"}
    done, other = cells[ended[0]], cells[({"layer_norm", "rms_norm"} - set(ended)).pop()]
    assert done.status == "pass" and done.examples == 3
    assert result.generated[(done.algorithm, "float64")] >= 3
    assert other.status == "no examples" and other.examples == 0 and "interrupted" in other.note


@pytest.mark.parametrize("in_process", [False, True])
def test_ctrl_c_in_the_fixture_replay_keeps_the_replays_that_ended(tmp_path, in_process):
    """Interrupted after the first of layer_norm's two chunks of fixture cases (or, in this process,
    after a few cases): the report holds those replays, not none."""
    def progress(event: str, **info) -> None:
        if event == "fixtures" and info["done"] >= 3:
            raise KeyboardInterrupt

    settings = _settings(tmp_path, examples=2, fixtures="all", in_process=in_process, progress=progress)
    result = run([GOOD], settings)
    assert result.interrupted and result.verdict == "inconclusive"
    cases = {r.case for r in result.fixtures}
    assert 3 <= len(cases) < 23 and all(r.ok for r in result.fixtures)  # 23 layer_norm cases in all


def test_ctrl_c_in_the_extra_round_keeps_its_examples(tmp_path):
    """The time cap leaves layer_norm short; Ctrl-C once the extra round's search has ended: the
    cell keeps the examples that round ran."""
    events: list[str] = []

    def progress(event: str, **info) -> None:
        events.append(event)
        if event == "end" and "extend" in events:
            raise KeyboardInterrupt

    result = run([GOOD], _settings(tmp_path, seconds=0.001, fixtures="none", progress=progress))
    assert "extend" in events and result.interrupted
    (cell,) = result.cells
    assert cell.status == "pass" and cell.examples >= result.minimum
