"""Plugins that misbehave in the ways that used to take a run down, for the isolation tests.

Each is loaded by its ``module:object`` label, e.g.
``tests.conformance.misbehaving_plugins:gil_hang``, in the test process and in
worker processes alike. ``layer_norm`` misbehaves; ``rms_norm`` is correct, so a
test can see that the rest of the run carried on. Where they compute, both
refuse what the spec refuses (a zero-variance column without ε): each plugin
shows one misbehaviour, and a refusal failure would hide it.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time

import numpy as np

from ftspec.impls.api import Context, Implementation
from ftspec.spec.variants import PAPER

MODULE = __name__


def label(name: str) -> str:
    """The ``module:object`` label of the plugin ``name`` in this module."""
    return f"{MODULE}:{name}"


def _refuse_zero_variance(X, ctx: Context, kind: str) -> None:
    """The spec refuses a column of zero variance (equal entries; zeros for RMSnorm) without ε."""
    flat = (X == 0) if kind == "rms_norm" else (X == X[..., :1, :])
    if ctx.variant.epsilon_placement == "none" and np.all(flat, axis=-2).any():
        raise ValueError(f"{kind}: a column of zero variance and no epsilon")


def _rms_norm(inputs, params, ctx: Context):
    X = inputs["X"]  # (..., d_e, ell)
    _refuse_zero_variance(X, ctx, "rms_norm")
    return X / np.sqrt((X * X).mean(axis=-2, keepdims=True)) * params["gamma"][:, None]


def _good_layer_norm(inputs, params, ctx: Context):
    X = inputs["X"]  # (..., d_e, ell)
    _refuse_zero_variance(X, ctx, "layer_norm")
    m = X.mean(axis=-2, keepdims=True)
    v = ((X - m) ** 2).mean(axis=-2, keepdims=True)
    return (X - m) / np.sqrt(v) * params["gamma"][:, None] + params["beta"][:, None]


def _cpu() -> list[str]:
    return ["cpu"]


def _plugin(name: str, layer_norm, variants=(PAPER,), devices=_cpu) -> Implementation:
    return Implementation(
        name=name, version="0", algorithms={"layer_norm": layer_norm, "rms_norm": _rms_norm},
        dtypes=("float64", "float32"), devices=devices,
        from_numpy=lambda array, dtype, device: np.array(array, dtype=dtype),
        to_numpy=lambda value: np.asarray(value), variants=variants if variants == "all" else list(variants),
        description="misbehaves for a test")


def _sys_exit(inputs, params, ctx):
    sys.exit(3)


def _os_exit(inputs, params, ctx):
    os._exit(3)


def _segfault(inputs, params, ctx):
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _gil_hang(inputs, params, ctx):
    # libc's sleep called through PyDLL, which keeps the GIL: no thread of this process runs again
    ctypes.PyDLL(None).sleep(3600)


def _sleeps(inputs, params, ctx):
    time.sleep(3600)  # releases the GIL: the call's own timer abandons it


def _flagged(inputs, params, ctx):
    """Counts its calls (a line each in the file named by $FTSPEC_TEST_CALLS) and hangs, releasing
    the GIL, while the file named by $FTSPEC_TEST_HANG exists: a test decides when it hangs."""
    calls = os.environ.get("FTSPEC_TEST_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write(f"{os.getpid()}\n")
    flag = os.environ.get("FTSPEC_TEST_HANG")
    if flag and os.path.exists(flag):
        time.sleep(3600)
    return _good_layer_norm(inputs, params, ctx)


def _record_child(pid: int) -> None:
    """Append ``pid`` to the file named by $FTSPEC_TEST_CHILDREN (a test checks it is gone)."""
    path = os.environ.get("FTSPEC_TEST_CHILDREN")
    if path:
        with open(path, "a") as f:
            f.write(f"{pid}\n")


_STARTED: list[int] = []


def _popen_child(inputs, params, ctx):
    """Starts one long-running child per process (``sleep 300``), then computes correctly."""
    if not _STARTED:
        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
        _STARTED.append(child.pid)
        _record_child(child.pid)
    return _good_layer_norm(inputs, params, ctx)


def _forked_child(inputs, params, ctx):
    """Forks one child per process that sleeps 300 s (a copy of this process, no exec)."""
    if not _STARTED:
        pid = os.fork()
        if pid == 0:  # the child: outlive everyone unless killed
            try:
                time.sleep(300)
            finally:
                os._exit(0)
        _STARTED.append(pid)
        _record_child(pid)
    return _good_layer_norm(inputs, params, ctx)


def _sleeping_devices() -> list[str]:
    time.sleep(3600)  # releases the GIL
    return ["cpu"]


def _gil_devices() -> list[str]:
    ctypes.PyDLL(None).sleep(3600)  # holds the GIL
    return ["cpu"]


def _exiting_devices() -> list[str]:
    os._exit(3)


good = _plugin("good", _good_layer_norm)
flagged = _plugin("flagged", _flagged)
sys_exit = _plugin("sys-exit", _sys_exit)
os_exit = _plugin("os-exit", _os_exit)
segfault = _plugin("segfault", _segfault)
gil_hang = _plugin("gil-hang", _gil_hang)
sleeps = _plugin("sleeps", _sleeps, variants="all")  # every layer_norm fixture applies to it
popen_child = _plugin("popen-child", _popen_child)  # leaves `sleep 300` behind unless its group is killed
fork_child = _plugin("fork-child", _forked_child)  # the same with os.fork
devices_sleep = _plugin("devices-sleep", _good_layer_norm, devices=_sleeping_devices)
devices_gil_hang = _plugin("devices-gil-hang", _good_layer_norm, devices=_gil_devices)
devices_exit = _plugin("devices-exit", _good_layer_norm, devices=_exiting_devices)


# -- plugins whose loading misbehaves: factories (a callable returning an Implementation is a plugin
# target too), so loading ``module:factory`` runs them, as an import of a plugin module would ----

def load_sleep():
    time.sleep(3600)  # releases the GIL
    return good


def load_gil_hang():
    ctypes.PyDLL(None).sleep(3600)  # holds the GIL
    return good


def load_exit():
    os._exit(3)


def load_flagged():
    """Loads at once, unless the file named by $FTSPEC_TEST_HANG exists: then hangs (a test
    decides in which process loading hangs, e.g. in workers only)."""
    flag = os.environ.get("FTSPEC_TEST_HANG")
    if flag and os.path.exists(flag):
        time.sleep(3600)
    return _plugin("load-flagged", _good_layer_norm)


# -- tasks for the worker pool's own tests (module level: a worker imports them by name) -----------

def task_value(x):
    return {"got": (x, np.int64(x + 1))}  # a tuple and a NumPy scalar: come back as a list of ints


def task_object():
    return {"impl": good}  # not a plain value: refused in the worker, never pickled back


def task_raises(message):
    raise KeyError(message)


def task_exits(code):
    os._exit(code)


def task_gil_hang(timeout):
    """A harness-style call (published for the watchdog) that hangs in C holding the GIL."""
    from ftspec.conformance.core.execute import _timed

    what = {"implementation": "hangs:impl", "algorithm": "layer_norm", "device": "cpu", "dtype": "float32"}
    return _timed(lambda: ctypes.PyDLL(None).sleep(3600), timeout, what)


def task_pid():
    return os.getpid()


def task_start_child():
    """Starts ``sleep 300`` and returns its pid (the pool's tests check it is ended with the worker)."""
    return subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL).pid


def task_child_then_gil_hang(timeout):
    """Starts ``sleep 300`` (its pid in $FTSPEC_TEST_CHILDREN), then hangs in a published call
    holding the GIL: the watchdog kills the worker."""
    _record_child(subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL).pid)
    return task_gil_hang(timeout)
