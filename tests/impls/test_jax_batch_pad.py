"""The JAX plugin on CPU compiles one program per structure, whatever the batch size (``BATCH_PAD``).

A default search judges every drawn case singly and, in its batch check, as a batch of 2 or 3
(conformance/core/execute.py ``_check_batch``); a program per batch size made those checks most of
a JAX search's time. These tests hold the plugin to one program for the single call and batches up
to ``BATCH_PAD``, and to the same numbers either way (each example of a vmapped batch is computed on
its own, so the padding copies change nothing)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("jax")

from ftspec.conformance.core.calling import to_native
from ftspec.impls.api import Context
from ftspec.impls.discovery import load
from ftspec.spec import PAPER
from ftspec.spec.registry import REGISTRY
from tests.impls.cases import make_case

import jax

from ftspec.impls.jax import BATCH_PAD

#: the event an XLA compile reports (jax 0.10.2, jax/_src/dispatch.py ``BACKEND_COMPILE_EVENT``;
#: test_the_compile_counter_sees_a_new_program fails if it is renamed)
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def _call(impl, name: str, case, inputs: dict, batched: bool) -> dict:
    entry = REGISTRY[name]
    ctx = Context(name, "float32", "cpu:0", case.hyper, case.variant, batched=batched)
    native = to_native(impl, entry, inputs, "float32", "cpu:0")
    params = to_native(impl, entry, case.params, "float32", "cpu:0", params=True)
    out = impl.algorithms[name](native, params, ctx)
    return {k: impl.to_numpy(v) for k, v in out.items()}


@pytest.mark.parametrize("name", ["layer_norm", "mh_attention"])
def test_the_single_call_and_every_batch_up_to_the_pad_share_one_program(name: str) -> None:
    impl = load("jax")
    variant = PAPER.replace(empty_query="zeros")
    case = make_case(REGISTRY[name], variant, seed=3)
    others = [make_case(REGISTRY[name], variant, seed=3 + i).inputs for i in range(1, BATCH_PAD)]
    single = _call(impl, name, case, case.inputs, batched=False)
    # XLA's compile events, counted while the batches run (not the plugin's cache sizes: another
    # test's programs may leave its bounded cache meanwhile, and the count would fall)
    compiled: list[str] = []

    def listen(event: str, duration: float, **kw: object) -> None:
        if event == BACKEND_COMPILE_EVENT:
            compiled.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        for size in range(1, BATCH_PAD + 1):
            members = [case.inputs] + others[:size - 1]
            stacked = {k: np.stack([m[k] for m in members]) for k in case.inputs}
            batched = _call(impl, name, case, stacked, batched=True)
            for k, v in single.items():
                assert batched[k].shape == (size,) + v.shape
                np.testing.assert_array_equal(batched[k][0], v)  # the same program: the same bits
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert not compiled, f"batch sizes 1-{BATCH_PAD} compiled {len(compiled)} program(s) of their own"


def test_the_compile_counter_sees_a_new_program() -> None:
    """The count above can fail: a structure the plugin has not met compiles, and is counted."""
    impl = load("jax")
    case = make_case(REGISTRY["layer_norm"], PAPER.replace(empty_query="zeros"), seed=3)
    compiled: list[str] = []

    def listen(event: str, duration: float, **kw: object) -> None:
        if event == BACKEND_COMPILE_EVENT:
            compiled.append(event)

    wider = {k: np.concatenate([v, v], axis=-1) for k, v in case.inputs.items()}  # ℓ doubled: a new shape
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        _call(impl, "layer_norm", dataclasses.replace(case, hyper={**case.hyper, "ell": 2 * case.hyper["ell"]}),
              wider, batched=False)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert compiled
