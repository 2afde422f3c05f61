"""Calling an implementation: conversion in and out, batching, copies.

The harness owns every conversion. Real inputs are rounded to the call's
dtype first (so only the computation is judged), moved with the plugin's
``from_numpy``, and results come back through ``to_numpy`` as float64.

Also here, because every call passes through them: the call watch a worker
process publishes for the parent's watchdog (a deadline enforced from
outside a process stuck in C code), and the record of hung (implementation,
algorithm, device) triples that lets a hang be paid for once.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from ftspec.impls.api import Context, Implementation
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry

from .dtypes import round_to

__all__ = ["CallWatch", "Prepared", "call", "earlier_hang", "known_hangs", "native_dtype", "note_hang",
           "skipping_hangs", "to_native", "watch_calls", "watched"]


_INTEGER_KINDS = frozenset({Kind.TOKEN, Kind.POSITION, Kind.LENGTH})
_BOOLEAN_KINDS = frozenset({Kind.MASK, Kind.FLAG, Kind.PADDING})


def native_dtype(kind: str, dtype: str) -> str:
    """The ``from_numpy`` dtype name for an input of ``kind`` (reals go in the call's dtype)."""
    if kind in _INTEGER_KINDS:
        return "int64"
    if kind in _BOOLEAN_KINDS:
        return "bool"
    return dtype


class Prepared:
    """Inputs and parameters rounded to ``dtype``, as NumPy arrays (the judged values). Built by
    ``examining.rounded``, the one place that decides which values a case is judged on."""

    def __init__(self, entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 dtype: str) -> None:
        real = {s.name: s.is_real for s in entry.inputs}
        self.entry = entry
        self.dtype = dtype
        self.inputs = {k: (round_to(v, dtype) if real[k] else np.array(v, copy=True)) for k, v in inputs.items()}
        self.params = {k: round_to(v, dtype) for k, v in params.items()}

    def spec_inputs(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.inputs.items()}

    def spec_params(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.params.items()}


def to_native(impl: Implementation, entry: Entry, arrays: Mapping[str, np.ndarray], dtype: str,
              device: str, *, params: bool = False) -> dict[str, Any]:
    """The plugin's own arrays of ``arrays`` (inputs, or parameters with ``params``), each through its
    ``from_numpy`` from a fresh copy: the harness keeps the arrays it was given, pristine, to see
    whether the call changed what it received (``execute``'s mutation check)."""
    kinds = {s.name: s.kind for s in entry.inputs}
    out = {}
    for name, value in arrays.items():
        kind = Kind.REAL if params else kinds[name]
        want = native_dtype(kind, dtype)
        arr: np.ndarray = np.array(value, dtype={"int64": np.int64, "bool": np.bool_}.get(want, np.float64), copy=True)
        out[name] = impl.from_numpy(arr, want, device)
    return out


def outputs_to_numpy(impl: Implementation, entry: Entry, result: Any, hyper: Mapping[str, int],
                     variant: Any) -> dict[str, np.ndarray]:
    """Normalise a plugin's result to {output name: NumPy array}."""
    names = [o.name for o in entry.output_specs(hyper, variant)]
    if isinstance(result, Mapping):
        missing = [n for n in names if n not in result]
        if missing:
            raise TypeError(f"result lacks outputs {missing}; got keys {sorted(result)}")
        raw = {n: result[n] for n in names}
    elif len(names) == 1:
        raw = {names[0]: result}
    else:
        raise TypeError(f"expected a mapping with outputs {names}, got {type(result).__name__}")
    return {n: np.asarray(impl.to_numpy(v)) for n, v in raw.items()}


def call(impl: Implementation, entry: Entry, inputs: Mapping[str, np.ndarray],
         params: Mapping[str, np.ndarray], *, hyper: Mapping[str, int], variant, dtype: str,
         device: str, batched: bool = False) -> dict[str, np.ndarray]:
    """Run ``impl`` on already-rounded NumPy inputs; returns NumPy outputs. The plugin called directly,
    in this thread, with no timeout and no check (tests and scripts); the harness's call is
    ``execute.call_member``, the same conversions under the call timeout and the mutation check."""
    fn = impl.algorithms[entry.name]
    ctx = Context(entry.name, dtype, device, dict(hyper), variant, batched)
    native_inputs = to_native(impl, entry, inputs, dtype, device)
    native_params = to_native(impl, entry, params, dtype, device, params=True)
    return outputs_to_numpy(impl, entry, fn(native_inputs, native_params, ctx), hyper, variant)


# -- the call in progress, published for a watchdog outside this process --------------------------
#
# A plugin that hangs inside C code holding the GIL cannot be timed out from inside its
# own process: the thread waiting for it never runs again. So a worker process
# (conformance/running/isolation.py) publishes, in memory it shares with the parent, when the
# call in progress began, how long it may take, and what it is; the parent kills the
# worker once that deadline (plus a grace) has passed. In a process without a watch
# (the in-process run) publishing costs one ``None`` test per call.

_WATCH: Optional["CallWatch"] = None


class CallWatch:
    """The worker's side of the watchdog: ``times`` is a shared array of two doubles
    (monotonic start of the call in progress, 0 when none; its timeout in seconds) and
    ``ident`` a shared byte buffer naming the call (JSON, NUL-terminated)."""

    def __init__(self, times: Any, ident: Any) -> None:
        self.times = times
        self.ident = ident
        self._last: Optional[tuple] = None

    def begin(self, what: Mapping[str, str], timeout: float) -> None:
        key = tuple(what.items())
        if key != self._last:  # the name rarely changes: encode and write it only when it does
            self.ident.value = json.dumps(dict(what), sort_keys=True).encode()[: len(self.ident) - 1]
            self._last = key
        self.times[1] = float(timeout)
        self.times[0] = time.monotonic()  # last: the parent reads the start first

    def end(self) -> None:
        self.times[0] = 0.0


def watch_calls(watch: Optional[CallWatch]) -> None:
    """Install (or with ``None`` remove) this process's call watch."""
    global _WATCH
    _WATCH = watch


@contextmanager
def watched(what: Mapping[str, str], timeout: float) -> Iterator[None]:
    """Publish ``what`` (implementation, algorithm, device, dtype) as the call in progress."""
    watch = _WATCH
    if watch is None:
        yield
        return
    watch.begin(what, timeout)
    try:
        yield
    finally:
        watch.end()


# -- hung (implementation, algorithm, device): a hang is paid for once -----------------------------

_HUNG: dict[tuple[str, str, str], tuple[str, str]] = {}
_SKIP_HUNG = [False]


def note_hang(label: str, algorithm: str, device: str, message: str, check: str = "timeout") -> None:
    """Record that a call of ``algorithm`` by ``label`` on ``device`` hung (``check`` "timeout")
    or took its process down ("crash"); the first record is kept."""
    _HUNG.setdefault((label, algorithm, device), (check, message))


def earlier_hang(label: str, algorithm: str, device: str) -> Optional[tuple[str, str]]:
    """(check, message) of this (implementation, algorithm, device)'s recorded hang or crash,
    while skipping is on (``skipping_hangs``); None otherwise."""
    if not _SKIP_HUNG[0]:
        return None
    return _HUNG.get((label, algorithm, device))


def known_hangs() -> list[list[str]]:
    """Every record, as plain values: [label, algorithm, device, check, message]."""
    return [[*key, *value] for key, value in _HUNG.items()]


@contextmanager
def skipping_hangs(hangs: Iterable[Sequence[str]] = ()) -> Iterator[None]:
    """Within this block ``execute.examine`` does not call an (implementation, algorithm,
    device) that hung before (in ``hangs`` or during the block) and reports it as a
    timeout at once: a hung algorithm pays its call timeout once, not on every fixture.
    The outermost block clears the record on entry and exit: nothing leaks between runs."""
    previous = _SKIP_HUNG[0]
    if not previous:
        _HUNG.clear()
    for label, algorithm, device, check, message in hangs:
        note_hang(label, algorithm, device, message, check)
    _SKIP_HUNG[0] = True
    try:
        yield
    finally:
        _SKIP_HUNG[0] = previous
        if not previous:
            _HUNG.clear()
