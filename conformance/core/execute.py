"""Running one implementation on one device for one case, with every check.

Per example: the call itself (an exception or a hang is a finding, never a
crash of the harness), the judgement against the spec, a second call
(results must be bit for bit identical), inputs and parameters unchanged
after the call, and, when the case has a batch, a batched call whose
elements equal the per-example calls and the spec.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ftspec.impls.api import Context, Implementation
from ftspec.spec.registry import Entry

from .calling import earlier_hang, note_hang, outputs_to_numpy, to_native, watched
from .case import Case
from .interrupts import POLL_S, checkpoint, holding, pending
from .judge import Finding, Judgement, compare_pair, identical, judge
from .tolerances import Reference

__all__ = ["CallTimeout", "Member", "Outcome", "PluginExit", "call_member", "describe_exception", "examine"]


class CallTimeout(Exception):
    pass


class PluginExit(Exception):
    """A call raised ``SystemExit`` (or another exception that is not an ``Exception``, such
    as a ``KeyboardInterrupt`` of its own making): a finding about the plugin, which must
    not end the harness's process, in a worker or in the user's own."""

    def __init__(self, original: BaseException) -> None:
        self.original_name = type(original).__name__
        detail = f"exit status {original.code!r}" if isinstance(original, SystemExit) else str(original)
        super().__init__(f"{detail} (a plugin must raise an ordinary exception, not end the process)")


@dataclass
class Member:
    """One implementation on one device, taking part in a search."""

    label: str  # name in reports: the plugin name, or module:object
    impl: Implementation
    device: str
    hung: bool = False
    seconds: float = 0.0  # time spent in this member's calls (conversions included)
    #: (algorithm, dtype, variant hash, refusal) -> whether every check of it refused (core/refusals.py)
    refusals: dict = field(default_factory=dict, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.label, self.device)


@dataclass
class Outcome:
    judgement: Judgement
    outputs: Optional[dict[str, np.ndarray]] = None
    timed_out: bool = False
    checks: list[str] = field(default_factory=list)


#: The stack of the thread a plugin runs in. A new thread's default is
#: RLIMIT_STACK, or 2 MiB where that limit is "unlimited" (glibc), which is
#: too little for XLA compiling a gradient program: jax segfaulted there on
#: a CI machine. Address space only; pages are committed as they are used.
CALL_STACK_BYTES = 256 * 2**20
_STACK_LOCK = threading.Lock()


class _Caller:
    """A thread that runs plugin calls one after another (made once, not per call: a new thread
    per call cost 7-9% of a search's time). A call that outlives its timeout keeps the thread;
    the thread is then abandoned (it ends after that call, if ever) and the next call gets a new
    one. Plugins thus see one long-lived thread per calling thread, as in ordinary use
    (thread-local state such as torch's grad mode persists between their calls)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.abandoned = False
        with _STACK_LOCK:  # threading.stack_size is process-wide: set it for this thread only
            previous = threading.stack_size(CALL_STACK_BYTES)
            try:
                self.thread = threading.Thread(target=self._loop, daemon=True, name="ftspec-call")
                self.thread.start()
            finally:
                threading.stack_size(previous)

    def _loop(self) -> None:
        while True:
            fn, box, done = self._jobs.get()
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - the plugin's failure, reported, not propagated
                box["error"] = exc
                box["trace"] = traceback.format_exc(limit=6)
            done.set()
            if self.abandoned:
                return

    def run(self, fn: Callable[[], Any], box: dict, timeout: float) -> bool:
        """Run ``fn`` here; False when it did not end within ``timeout`` (this caller is then
        abandoned)."""
        done = threading.Event()
        self._jobs.put((fn, box, done))
        if not holding():
            ended = done.wait(timeout)
        else:  # wake to stop at a held Ctrl-C (conformance/core/interrupts.py); the call keeps this thread
            end = time.monotonic() + timeout
            while not (ended := done.wait(max(0.0, min(POLL_S, end - time.monotonic())))):
                if time.monotonic() >= end:
                    break
                if pending():
                    self.abandoned = True
                    checkpoint()
        if not ended:
            self.abandoned = True
        return ended


_CALLERS = threading.local()  # one caller per calling thread (a Dask worker runs tasks in threads)


def _timed(fn: Callable[[], Any], timeout: float, what: Optional[Mapping[str, str]] = None) -> Any:
    """Run fn in the call thread (``_Caller``); a hung plugin is abandoned, not waited for.

    ``what`` names the call for a watchdog outside this process (calling.watched): a call
    stuck in C code that holds the GIL never lets the wait return, and only that watchdog
    can end it. The watch ends when the wait returns, so an abandoned call that merely
    sleeps does not get the worker killed later."""
    box: dict[str, Any] = {}
    caller = getattr(_CALLERS, "caller", None)
    if caller is None or caller.abandoned or not caller.thread.is_alive():
        caller = _CALLERS.caller = _Caller()
    with watched(what or {}, timeout):
        ended = caller.run(fn, box, timeout)
    if not ended:
        raise CallTimeout(f"no result after {timeout:g} s")
    if "error" in box:
        exc = box["error"]
        if not isinstance(exc, Exception):  # SystemExit and kin: a finding, never the harness's exit
            exc = PluginExit(exc)
        exc.__ftspec_trace__ = box["trace"]
        raise exc
    return box["value"]


def _mutated(m: Member, native: Mapping[str, Any], pristine: Mapping[str, np.ndarray]) -> Optional[str]:
    for name, value in native.items():
        after = np.asarray(m.impl.to_numpy(value))
        before = pristine[name]
        if after.shape != before.shape or not np.array_equal(after.astype(before.dtype), before, equal_nan=True):
            return name
    return None


def call_member(m: Member, entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                case: Case, dtype: str, timeout: float, batched: bool,
                hyper: Optional[Mapping[str, int]] = None) -> tuple[dict[str, np.ndarray], Optional[str]]:
    """One call of a member's implementation of ``entry`` under the call timeout; returns (NumPy outputs,
    name of an argument the call mutated, or None). Public: the runner and the forensics call it too."""
    fn = m.impl.algorithms[entry.name]
    hyper = dict(case.hyper if hyper is None else hyper)
    ctx = Context(entry.name, dtype, m.device, hyper, case.variant, batched)

    def run() -> tuple[dict[str, np.ndarray], Optional[str]]:
        n_in = to_native(m.impl, entry, inputs, dtype, m.device)
        n_par = to_native(m.impl, entry, params, dtype, m.device, params=True)
        result = fn(n_in, n_par, ctx)
        out = outputs_to_numpy(m.impl, entry, result, hyper, case.variant)
        return out, _mutated(m, n_in, inputs) or _mutated(m, n_par, params)

    what = {"implementation": m.label, "algorithm": entry.name, "device": m.device, "dtype": dtype}
    started = time.perf_counter()
    try:
        return _timed(run, timeout, what)
    finally:
        m.seconds += time.perf_counter() - started


def describe_exception(exc: BaseException) -> str:
    trace = getattr(exc, "__ftspec_trace__", "")
    last = trace.strip().splitlines()[-3:] if trace else []
    where = (" | " + " | ".join(s.strip() for s in last[:-1])) if len(last) > 1 else ""
    name = exc.original_name if isinstance(exc, PluginExit) else type(exc).__name__
    return f"raised {name}: {exc}{where}"


def examine(m: Member, case: Case, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
            ref: Reference, *, dtype: str, timeout: float,
            batch: Optional[list[tuple[Mapping[str, np.ndarray], Reference]]] = None, repeat: bool = True) -> Outcome:
    """Every per-example check of member ``m`` on one case (inputs already rounded to ``dtype``).
    ``repeat``: call it a second time on the same arguments (the determinism check); a search
    repeats the first value set of each block only (``running/drawn_case.py``)."""
    entry = case.entry
    j = Judgement()
    outcome = Outcome(j)
    hung = earlier_hang(m.label, entry.name, m.device)
    if hung is not None:  # a hang is paid for once (calling.skipping_hangs)
        check, message = hung
        j.findings.append(Finding(check, f"not called: an earlier call {message}"))
        outcome.timed_out = True
        return outcome
    outcome = _examine(m, case, inputs, params, ref, dtype=dtype, timeout=timeout, batch=batch, repeat=repeat)
    if outcome.timed_out:
        first = next((f.message for f in outcome.judgement.findings if f.check == "timeout"), "timeout")
        note_hang(m.label, entry.name, m.device, f"hung at {dtype}: {first}")
    return outcome


def _examine(m: Member, case: Case, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
             ref: Reference, *, dtype: str, timeout: float,
             batch: Optional[list[tuple[Mapping[str, np.ndarray], Reference]]], repeat: bool) -> Outcome:
    entry = case.entry
    j = Judgement()
    outcome = Outcome(j)
    try:
        out, mutated = call_member(m, entry, inputs, params, case, dtype, timeout, batched=False)
    except CallTimeout as exc:
        j.findings.append(Finding("timeout", f"call {exc}"))
        outcome.timed_out = True
        return outcome
    except Exception as exc:  # noqa: BLE001 - whatever the plugin raises is a finding
        j.findings.append(Finding("exception", describe_exception(exc)))
        return outcome
    outcome.outputs = out
    j.add(judge(entry, out, ref))
    outcome.checks.append("spec")
    if mutated:
        j.findings.append(Finding("mutation", f"the call changed its argument {mutated!r}"))
    if not j.ok:
        return outcome
    if repeat:
        _check_determinism(m, case, inputs, params, out, dtype, timeout, outcome)
        if not j.ok or outcome.timed_out:
            return outcome
    _check_metamorphic(m, case, inputs, params, out, ref, dtype, timeout, outcome)
    if not j.ok:
        return outcome
    if batch:
        _check_batch(m, case, inputs, params, out, ref, batch, dtype, timeout, outcome)
    return outcome


def _check_determinism(m: Member, case: Case, inputs, params, out, dtype: str, timeout: float,
                       outcome: Outcome) -> None:
    """Same call again: a conforming implementation is deterministic (bit for bit)."""
    entry, j = case.entry, outcome.judgement
    try:
        again, _ = call_member(m, entry, inputs, params, case, dtype, timeout, batched=False)
    except CallTimeout as exc:
        j.findings.append(Finding("timeout", f"second call {exc}"))
        outcome.timed_out = True
        return
    except Exception as exc:  # noqa: BLE001 - whatever the plugin raises is a finding
        j.findings.append(Finding("determinism", f"second identical call {describe_exception(exc)}"))
        return
    differs = identical(out, again)
    if differs:
        j.findings.append(Finding("determinism", f"two identical calls gave different bits in output {differs!r}"))
        return
    outcome.checks.append("determinism")


def _check_metamorphic(m: Member, case: Case, inputs, params, out, ref: Reference, dtype: str, timeout: float,
                       outcome: Outcome) -> None:
    from ftspec.spec.registry import entry as registry_entry

    from .metamorphic import metamorphic

    def call(name: str, sub_inputs, sub_params) -> dict[str, np.ndarray]:
        sub = registry_entry(name)
        hyper = {k: case.hyper[k] for k in sub.hyper if k in case.hyper}
        result, _ = call_member(m, sub, sub_inputs, sub_params, case, dtype, timeout, batched=False, hyper=hyper)
        return result

    try:
        j, ran = metamorphic(case, inputs, params, out, ref, call, lambda name: name in m.impl.algorithms)
    except CallTimeout as exc:
        outcome.judgement.findings.append(Finding("timeout", f"metamorphic check call {exc}"))
        outcome.timed_out = True
        return
    except Exception as exc:  # noqa: BLE001 - whatever the plugin raises is a finding
        outcome.judgement.findings.append(Finding("metamorphic", f"a metamorphic check's call "
                                                  f"{describe_exception(exc)}"))
        return
    outcome.judgement.add(j)
    outcome.checks.extend(ran)


def _check_batch(m: Member, case: Case, inputs, params, out, ref, batch, dtype, timeout, outcome: Outcome) -> None:
    entry = case.entry
    j = outcome.judgement
    members = [(inputs, ref, out)]
    for extra_inputs, extra_ref in batch:
        try:
            single, _ = call_member(m, entry, extra_inputs, params, case, dtype, timeout, batched=False)
        except CallTimeout as exc:
            j.findings.append(Finding("timeout", f"call {exc}"))
            outcome.timed_out = True
            return
        except Exception as exc:  # noqa: BLE001 - whatever the plugin raises is a finding
            j.findings.append(Finding("exception", describe_exception(exc)))
            return
        members.append((extra_inputs, extra_ref, single))
    stacked = {k: np.stack([mi[0][k] for mi in members]) for k in inputs}
    try:
        batched, mutated = call_member(m, entry, stacked, params, case, dtype, timeout, batched=True)
    except CallTimeout as exc:
        j.findings.append(Finding("timeout", f"batched call {exc}"))
        outcome.timed_out = True
        return
    except Exception as exc:  # noqa: BLE001 - whatever the plugin raises is a finding
        j.findings.append(Finding("batch", f"batched call (batch of {len(members)}) {describe_exception(exc)}"))
        return
    if mutated:
        j.findings.append(Finding("mutation", f"the batched call changed its argument {mutated!r}"))
    for spec in entry.output_specs(case.hyper, case.variant):
        got = batched[spec.name]
        want_shape = (len(members),) + members[0][1].outputs[spec.name].shape
        if got.shape != want_shape:
            j.findings.append(Finding("batch", f"batched output {spec.name!r} has shape {got.shape}; "
                                      f"expected {want_shape}", spec.name))
            return
    for i, (_, r, single) in enumerate(members):
        element = {k: v[i] for k, v in batched.items()}
        inner = judge(entry, element, r)
        for f in inner.findings:
            f.check, f.message = "batch", f"batch element {i}: {f.message}"
        j.add(inner)
        pair = compare_pair(entry, element, single, r, f"batch element {i} vs the per-example call", "batch")
        j.add(pair)
    outcome.checks.append("batch")
