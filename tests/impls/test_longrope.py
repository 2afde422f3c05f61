"""Phi-3's LongRoPE (``rope_factors="longrope"``, spec 2.17) in the NumPy, PyTorch and JAX plugins: each
written on its own (``rope_tables`` of NumPy and PyTorch, ``rope`` of JAX), judged at float64 against the
spec at the entries that hold the factors (a causal self-attention, a GPT-2 layer, the decoder-only models:
the model's one pair of factors in every layer, through the key/value cache too), half and interleaved
pairs, full and partial rotary, grouped heads; and a plugin that ignores the factors is caught.

The cases are the harness's under rope_factors="none" with the factors added (``longrope_case``): e
log-uniform over [1, 64] (Phi-3-mini-128k's long factors run from 1 to about 60), m uniform over [1, 1.5]
(its derived attention factor is √(1 + ln 32 / ln 4096) ≈ 1.19), so these tests do not depend on the
harness's drawing of them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.values import default_hyper
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER, VariantSet

from .cases import answering_as, float64_findings

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}
#: where each entry holds the factors (a layer in its attention; a model at the top, shared by its layers)
PREFIX = {"causal_self_attention": "", "padded_causal_self_attention": "", "gpt2_layer": "attn.",
          "padded_gpt2_layer": "attn.", "d_transformer": "", "padded_d_transformer": "", "cached_decoding": ""}
SETS = {"half": PAPER.replace(rotary="half", rope_factors="longrope"),
        "interleaved-partial-grouped": PAPER.replace(rotary="interleaved", rotary_fraction=0.5, rope_base=500000.0,
                                                     kv_group=2, rope_factors="longrope")}
ENTRIES = ("causal_self_attention", "gpt2_layer", "padded_d_transformer", "cached_decoding")


def longrope_case(entry: str, variant: VariantSet, seed: int = 3, **sizes: int) -> Case:
    """The harness's case under rope_factors="none", with LongRoPE's r/2 factors and attention factor added
    where the entry holds them (``PREFIX``), drawn from their own generator."""
    hyper = default_hyper(entry, variant, **{"H": 2, "d_attn": 4, **sizes})
    base = Case.build(entry, hyper, variant.replace(rope_factors="none"), seed=seed)
    rng = np.random.default_rng(1000 + seed)
    r = int(hyper["d_attn"] * variant.rotary_fraction)
    params = {**base.params, PREFIX[entry] + "rope_ext": np.exp(rng.uniform(0.0, math.log(64.0), r // 2)),
              PREFIX[entry] + "rope_mscale": rng.uniform(1.0, 1.5, 1)}
    return Case(entry, base.hyper, variant, base.inputs, params, style=base.style)


RUNS = [(impl, entry, s) for impl in IMPLS for entry in ENTRIES for s in SETS]


@pytest.mark.parametrize("impl,entry,which", RUNS, ids=["-".join(r) for r in RUNS])
def test_each_implementation_is_the_spec(impl, entry, which):
    findings = float64_findings(IMPLS[impl], longrope_case(entry, SETS[which]))
    assert not findings, findings[:2]


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_plugin_that_ignores_the_factors_is_caught(impl):
    """The plugin answering as under rope_factors="none" (the factors passed, unread) disagrees with the spec:
    the factors matter at the drawn sizes, so the tests above could fail."""
    case = longrope_case("causal_self_attention", SETS["half"])
    assert float64_findings(answering_as(IMPLS[impl], "unscaled", rope_factors="none"), case)
