"""Ctrl-C during a run (conformance/core/interrupts.py): held, then raised at a checkpoint.

A Ctrl-C raised at an arbitrary bytecode once hung ``ftspec run --jobs 1`` (inside
``concurrent.futures.wait``; test_parallel.py has that case) and once turned into an "error"
verdict for a correct implementation (inside Hypothesis's engine). These tests pin down the
holding itself, and that holding does not make a run wait for a slow call before it stops.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ftspec.conformance.core.interrupts import checkpoint, held_interrupt, holding, pending
from ftspec.conformance.session.commands import Settings, run

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()


def _press() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)  # the handler runs in the main thread at its next bytecode


def test_a_held_ctrl_c_is_raised_at_the_next_checkpoint_and_only_there(python_ctrl_c):
    with held_interrupt():
        assert holding()
        checkpoint()  # nothing pressed: nothing raised
        _press()
        for _ in range(10000):  # bytecode after the press: where Python would have raised it
            pass
        assert pending()
        with pytest.raises(KeyboardInterrupt):
            checkpoint()
        assert not pending()
        checkpoint()  # raised once
    assert not holding()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nested_blocks_share_the_outer_hold(python_ctrl_c):
    with held_interrupt():
        with held_interrupt():
            _press()
        assert pending(), "the inner block's end dropped or raised the outer block's Ctrl-C"
        with pytest.raises(KeyboardInterrupt):
            checkpoint()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_left_when_the_work_has_ended_is_dropped(python_ctrl_c):
    with held_interrupt():
        _press()
    assert not holding() and not pending()


def test_a_handler_the_caller_installed_and_other_threads_are_left_alone():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with held_interrupt():
            assert not holding()
            _press()
            checkpoint()  # a no-op: the caller's handler took the Ctrl-C
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)
    in_thread = []

    def elsewhere():
        with held_interrupt():
            in_thread.append(holding())

    t = threading.Thread(target=elsewhere)
    t.start()
    t.join()
    assert in_thread == [False]  # signals are the main thread's


def test_another_thread_never_takes_the_main_threads_ctrl_c(python_ctrl_c):
    # A Dask worker thread of this process runs searches with checkpoints of their own: a
    # Ctrl-C raised there would end one task and never reach the run.
    seen = []

    def search_in_a_thread():
        try:
            checkpoint()
            seen.append(("no interrupt", holding(), pending()))
        except KeyboardInterrupt:
            seen.append("interrupted")

    with held_interrupt():
        _press()
        t = threading.Thread(target=search_in_a_thread)
        t.start()
        t.join()
        assert seen == [("no interrupt", False, False)]
        with pytest.raises(KeyboardInterrupt):
            checkpoint()  # still the main thread's to raise


def test_a_run_stops_at_a_held_ctrl_c_without_waiting_for_the_call(tmp_path, monkeypatch, python_ctrl_c):
    # The call presses Ctrl-C and then takes 5 s: the run must stop within the poll interval,
    # marked interrupted, with no cell turned into an error by the interrupt.
    (tmp_path / "slowstop.py").write_text(EXAMPLE + '''

import os as _os
import signal as _signal
import time as _time

_plain_layer_norm = layer_norm


def layer_norm(inputs, params, ctx):
    _os.kill(_os.getpid(), _signal.SIGINT)
    _time.sleep(5)
    return _plain_layer_norm(inputs, params, ctx)


implementation.algorithms["layer_norm"] = layer_norm
''')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.monotonic()
    result = run(["slowstop:implementation"], Settings(profile="quick", fixtures="none", in_process=True,
                                                       algorithms=("layer_norm",), dtypes=("float64",),
                                                       case_dir=str(tmp_path / "cases"), call_timeout=30))
    took = time.monotonic() - started
    assert result.interrupted
    assert took < 4, f"the run waited {took:.1f} s for the call before it stopped"
    assert all(c.status != "error" for c in result.cells), [(c.status, c.note) for c in result.cells]
