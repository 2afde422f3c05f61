"""Gemma 2's and Gemma 3's local and global layers (``global_every``) and Gemma 3's local RoPE base
(``rope_local_base``) on all three bundled implementations at float64, judged by the harness
(``execute.examine``) against the spec, on the paths the fixtures' two cases (``d_transformer``,
``fixtures/cases.py`` ``ONLY_AT``) do not reach: decoding with a key/value cache (one window per
layer), padding, the hand-written NumPy backward and PyTorch's and JAX's autodiff, each on a stack
of two layers, layer 0 local and layer 1 global.

A plugin that ignores the switches (every layer windowed, at one base) is caught: the harness has
something to catch.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.tolerances import reference
from ftspec.conformance.core.values import default_hyper
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER, parse

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}

#: Gemma 2's alternation with Gemma 3's two bases (local 10000, global 1000000), a window of 2
GEMMA3_LAYERS = PAPER.replace(rotary="half", rope_base=1000000.0, window=2, global_every=2, rope_local_base=10000.0)
#: Gemma 2 (docs/spec.md) with its alternation, the caps that bite at these sizes and two kv heads
GEMMA2 = parse("gemma+norm_placement=sandwich,attn_softcap=2.0,logit_softcap=2.0,kv_group=2,window=2,"
               "global_every=2")
CASES = {"d_transformer": GEMMA3_LAYERS, "cached_decoding": GEMMA3_LAYERS, "d_gradient": GEMMA3_LAYERS,
         "padded_d_transformer": GEMMA2}
#: a few CPU-seconds in all (JAX compiles per case)
RUNS = [("numpy", "cached_decoding"), ("numpy", "d_gradient"), ("numpy", "padded_d_transformer"),
        ("torch", "cached_decoding"), ("torch", "d_gradient"), ("torch", "padded_d_transformer"),
        ("jax", "d_transformer"), ("jax", "cached_decoding")]


def _case(algorithm: str, seed: int = 5) -> Case:
    """The algorithm at its default sizes with two layers and ℓ = 4 (a key two places back, past the
    window), d_attn 4 under RoPE; a cached decoding prefills one token, so that its steps are most of
    the case; the padded model's first position is padding (every window keeps a real key)."""
    variant = CASES[algorithm]
    hyper = default_hyper(algorithm, variant, L=2, ell=4)
    given = {"n_prefill": np.array(1)} if algorithm == "cached_decoding" else \
        {"pad": np.array([False, True, True, True])} if algorithm == "padded_d_transformer" else None
    return Case.build(algorithm, hyper, variant, seed=seed, given=given)


def _findings(impl, case: Case) -> list[str]:
    ref = reference(case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member(impl.name, impl, "cpu"), case, case.inputs, case.params, ref, dtype="float64",
                      timeout=120.0)
    return [f"{f.check}: {f.message}" for f in outcome.judgement.findings]


@pytest.mark.parametrize("impl_name,algorithm", RUNS, ids=[f"{i}-{a}" for i, a in RUNS])
def test_each_implementation_computes_local_and_global_layers(impl_name, algorithm):
    case = _case(algorithm)
    assert case.hyper["L"] == 2 and case.hyper["ell"] == 4
    findings = _findings(IMPLS[impl_name], case)
    assert not findings, findings[:2]


def _ignoring(impl, what: str):
    """The plugin with the switches dropped: every layer windowed (``global_every`` ignored), or
    every layer at rope_base (``rope_local_base`` ignored)."""
    def wrap(fn):
        def wrong(i, p, ctx):
            v = ctx.variant.replace(**({"global_every": 0, "rope_local_base": 0.0} if what == "global_every"
                                       else {"rope_local_base": 0.0}))
            return fn(i, p, dataclasses.replace(ctx, variant=v))
        return wrong
    return dataclasses.replace(impl, name=f"{impl.name}-ignoring-{what}",
                               algorithms={k: wrap(f) for k, f in impl.algorithms.items()})


@pytest.mark.parametrize("what", ["global_every", "rope_local_base"])
def test_a_plugin_that_ignores_the_switch_fails(what):
    case = _case("d_transformer")
    assert not _findings(IMPLS["numpy"], case)
    assert _findings(_ignoring(IMPLS["numpy"], what), case)


@pytest.mark.parametrize("impl_name", sorted(IMPLS))
def test_a_stack_of_global_layers_has_no_window_for_padding_to_empty(impl_name):
    """global_every = 1: every layer global, so padding that would leave a windowed query with no key
    (positions 1 and 2 padded: query 2's window of 2) leaves every query a key; each implementation
    answers as the spec does, none refuses (JAX checks padding before tracing: it must count no window)."""
    v = PAPER.replace(window=2, global_every=1)
    hyper = default_hyper("padded_d_transformer", v, L=2, ell=4)
    case = Case.build("padded_d_transformer", hyper, v, seed=5, given={"pad": np.array([True, False, False, True])})
    assert not _findings(IMPLS[impl_name], case)
