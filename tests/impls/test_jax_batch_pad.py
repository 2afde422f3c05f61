"""The JAX plugin on CPU compiles one program per structure, whatever the batch size (``BATCH_PAD``).

A default search judges every drawn case singly and, in its batch check, as a batch of 2 or 3
(conformance/core/execute.py ``_check_batch``); a program per batch size made those checks most of
a JAX search's time. These tests hold the plugin to one program for the single call and batches up
to ``BATCH_PAD``, and to the same numbers either way (each example of a vmapped batch is computed on
its own, so the padding copies change nothing)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from ftspec.conformance.core.calling import to_native
from ftspec.impls.api import Context
from ftspec.impls.discovery import load
from ftspec.spec import PAPER
from ftspec.spec.registry import REGISTRY
from tests.impls.cases import make_case

from ftspec.impls.jax import BATCH_PAD, boundary


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
    before = boundary.live_executables()
    for size in range(1, BATCH_PAD + 1):
        members = [case.inputs] + others[:size - 1]
        stacked = {k: np.stack([m[k] for m in members]) for k in case.inputs}
        batched = _call(impl, name, case, stacked, batched=True)
        for k, v in single.items():
            assert batched[k].shape == (size,) + v.shape
            np.testing.assert_array_equal(batched[k][0], v)  # the same program: the same bits
    assert boundary.live_executables() == before, "a batch size compiled a program of its own"
