"""The per-search time cap holds in every phase of Hypothesis's engine (conformance/core/timecap.py).

The second thorough run of 2026-11-24 found a training-loop search 15 minutes past its 30-second
cap inside Hypothesis's targeting phase (``Optimiser.hill_climb``), where the engine ran for a long
time without calling the test, the only place the cap was checked. The end-to-end test here puts
the search in that state on purpose: hill climbing replaced by a loop that spins in the engine for
a minute without drawing or calling the test."""

from __future__ import annotations

import os
import signal
import time

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st, target
from hypothesis.internal.conjecture import optimiser

from ftspec.conformance.core.interrupts import held_interrupt
from ftspec.conformance.running.config import NO_CAP, RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.conformance.session.commands import Settings, run
from ftspec.conformance.core.timecap import TimeCap, TimeUp
from ftspec.impls.discovery import load_target

#: how long the stand-in for a runaway hill climb spins when nothing stops it
SPIN_S = 60.0


def _spin(seconds: float) -> None:
    """Busy Python code that never draws and never calls the test, like the engine's own."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _cap_after(seconds: float) -> TimeCap:
    end = time.monotonic() + seconds
    return TimeCap(lambda: time.monotonic() > end, grace=0.3, poll=0.05)


def test_the_watchdog_stops_code_outside_the_search_s_own():
    cap = _cap_after(0.2)
    start = time.monotonic()
    with pytest.raises(TimeUp):
        with cap.watching():
            _spin(SPIN_S)
    assert time.monotonic() - start < 5.0
    assert cap.fired


def test_the_watchdog_never_raises_inside_the_search_s_own_code():
    cap = _cap_after(0.1)
    with cap.watching():
        with cap.user_code():  # a draw or a test body: a plugin call may take this long
            _spin(1.5)
        with pytest.raises(TimeUp):
            cap.check()  # the body's own check stops it, at a safe point
    assert not cap.fired


def test_whatever_the_engine_makes_of_it_comes_out_as_time_up():
    cap = _cap_after(0.1)
    with pytest.raises(TimeUp) as caught:
        with cap.watching():
            try:
                _spin(SPIN_S)
            except TimeUp:
                raise AssertionError("an engine's bookkeeping, interrupted") from None
    assert isinstance(caught.value.__cause__, AssertionError)


def test_a_spent_cap_does_not_fire_once_the_block_has_ended():
    cap = _cap_after(0.0)
    with cap.watching():
        pass
    _spin(1.0)  # would be interrupted if the watchdog outlived the block
    assert not cap.fired


def test_no_cap_no_time_up():
    cap = TimeCap(lambda: False, grace=0.05, poll=0.01)
    with cap.watching():
        _spin(0.5)
    assert not cap.fired


def test_the_capped_strategy_checks_before_every_draw_and_draws_nothing_itself():
    drawn: list[int] = []
    calls = {"n": 0}

    def over() -> bool:
        calls["n"] += 1
        return calls["n"] > 5

    cap = TimeCap(over)

    @settings(max_examples=50, database=None, deadline=None, phases=[Phase.generate])
    @seed(7)
    @given(cap.strategy(st.integers(0, 10**6)))
    def capped(x: int) -> None:
        drawn.append(x)

    with pytest.raises(TimeUp):
        with cap.watching():
            capped()
    assert not cap.fired  # stopped by the check, not by the watchdog
    assert len(drawn) == 5  # the sixth draw was stopped before it reached the body

    plain: list[int] = []

    @settings(max_examples=5, database=None, deadline=None, phases=[Phase.generate])
    @seed(7)
    @given(st.integers(0, 10**6))
    def uncapped(x: int) -> None:
        plain.append(x)

    uncapped()
    assert plain == drawn  # the same seed, the same values: the wrapper draws nothing


def test_a_search_stuck_in_hill_climbing_ends_at_its_cap(tmp_path, monkeypatch):
    """The defect of the second thorough run, end to end: before timecap.py this search took
    SPIN_S seconds (once per targeting pass), far past its 1-second cap."""
    climbs = {"n": 0}

    def runaway(self) -> None:
        climbs["n"] += 1
        _spin(SPIN_S)

    monkeypatch.setattr(optimiser.Optimiser, "hill_climb", runaway)
    config = RunConfig(seed=3, case_dir=tmp_path / "cases", examples=40, seconds=1.0, block=1)  # a draw per example
    run = Runner([("numpy", load_target("numpy"))], config)
    start = time.monotonic()
    result = run.run(["layer_norm"], ["float64"])
    elapsed = time.monotonic() - start
    (cell,) = result.cells
    assert climbs["n"] >= 1, "the search never reached the targeting phase: the test proves nothing"
    assert elapsed < 15.0, f"the search ran {elapsed:.1f} s against a 1 s cap"
    assert result.time_capped[("layer_norm", "float64")]
    assert cell.status == "pass" and cell.examples >= 10, (cell.status, cell.note, cell.examples)


def test_a_cap_that_never_binds_changes_no_case(tmp_path):
    """The cap's strategy wrapper and watchdog draw nothing: with or without a cap (one that
    never binds) the same seed examines the same cases."""
    def digest(seconds: float) -> tuple[int, str]:
        run = Runner([("numpy", load_target("numpy"))],
                     RunConfig(seed=11, case_dir=tmp_path / "cases", examples=12, seconds=seconds))
        (cell,) = run.run(["mh_attention"], ["float32"]).cells
        return cell.examples, cell.cases_digest

    capped, uncapped = digest(3600.0), digest(NO_CAP)
    assert capped == uncapped and capped[0] > 0


def test_a_targeted_search_under_a_cap_that_never_binds_runs_every_example():
    """A cap that never binds leaves an ordinary targeted search alone (no fire, every example)."""
    cap = TimeCap(lambda: False)
    seen: list[float] = []

    @settings(max_examples=30, database=None, deadline=None, phases=(Phase.generate, Phase.target),
              suppress_health_check=list(HealthCheck))
    @seed(1)
    @given(cap.strategy(st.floats(0, 1)))
    def targeted(x: float) -> None:
        with cap.user_code():
            seen.append(x)
            target(x, label="x")

    with cap.watching():
        targeted()
    assert not cap.fired and len(seen) >= 30


def test_a_held_ctrl_c_is_raised_in_hypothesis_s_own_code(python_ctrl_c):
    """In the targeting phase no checkpoint takes a held Ctrl-C for as long as the engine does
    not call the test; the watchdog raises it there (conformance/core/interrupts.py)."""
    cap = TimeCap(lambda: False, grace=10.0, poll=0.05)
    with held_interrupt():
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            with cap.watching():
                try:
                    with cap.user_code():  # a draw or a test body: held until it ends
                        os.kill(os.getpid(), signal.SIGINT)
                        _spin(0.5)
                    _spin(SPIN_S)
                except KeyboardInterrupt:
                    raise AssertionError("an engine's bookkeeping, interrupted") from None
        assert 0.5 <= time.monotonic() - start < 5.0
    assert cap.interrupted and not cap.fired


def test_ctrl_c_stops_a_run_stuck_in_hill_climbing(tmp_path, monkeypatch, python_ctrl_c):
    """End to end, with no time cap: Ctrl-C pressed while the engine hill-climbs stops the run
    with its partial report, promptly, and no cell is turned into an error."""
    def runaway(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        _spin(SPIN_S)

    monkeypatch.setattr(optimiser.Optimiser, "hill_climb", runaway)
    start = time.monotonic()
    result = run(["numpy"], Settings(profile="default", fixtures="none", in_process=True, examples=40, seconds=0,
                                     algorithms=("layer_norm",), dtypes=("float64",), block=1,
                                     case_dir=str(tmp_path / "cases")))
    took = time.monotonic() - start
    assert result.interrupted
    assert took < 15.0, f"Ctrl-C took {took:.1f} s to stop the run"
    assert all(c.status != "error" for c in result.cells), [(c.status, c.note) for c in result.cells]
