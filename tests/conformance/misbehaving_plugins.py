"""Plugins that misbehave in the ways that used to take a run down, for the isolation tests.

Each is loaded by its ``module:object`` label, e.g.
``tests.conformance.misbehaving_plugins:gil_hang``, in the test process and in
worker processes alike. ``layer_norm`` misbehaves; ``rms_norm`` is correct, so a
test can see that the rest of the run carried on.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import numpy as np

from ftspec.impls.api import Context, Implementation
from ftspec.spec.variants import PAPER

MODULE = __name__


def label(name: str) -> str:
    """The ``module:object`` label of the plugin ``name`` in this module."""
    return f"{MODULE}:{name}"


def _rms_norm(inputs, params, ctx: Context):
    X = inputs["X"]  # (..., d_e, ell)
    return X / np.sqrt((X * X).mean(axis=-2, keepdims=True)) * params["gamma"][:, None]


def _good_layer_norm(inputs, params, ctx: Context):
    X = inputs["X"]  # (..., d_e, ell)
    m = X.mean(axis=-2, keepdims=True)
    v = ((X - m) ** 2).mean(axis=-2, keepdims=True)
    return (X - m) / np.sqrt(v) * params["gamma"][:, None] + params["beta"][:, None]


def _plugin(name: str, layer_norm, variants=(PAPER,)) -> Implementation:
    return Implementation(
        name=name, version="0", algorithms={"layer_norm": layer_norm, "rms_norm": _rms_norm},
        dtypes=("float64", "float32"), devices=lambda: ["cpu"],
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


good = _plugin("good", _good_layer_norm)
flagged = _plugin("flagged", _flagged)
sys_exit = _plugin("sys-exit", _sys_exit)
os_exit = _plugin("os-exit", _os_exit)
segfault = _plugin("segfault", _segfault)
gil_hang = _plugin("gil-hang", _gil_hang)
sleeps = _plugin("sleeps", _sleeps, variants="all")  # every layer_norm fixture applies to it


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
    from ftspec.conformance.execute import _timed

    what = {"implementation": "hangs:impl", "algorithm": "layer_norm", "device": "cpu", "dtype": "float32"}
    return _timed(lambda: ctypes.PyDLL(None).sleep(3600), timeout, what)


def task_pid():
    return os.getpid()
