"""Gemma 3's linear RoPE scaling with factor 8 (``rope_scaling="linear-8"``, spec 2.14) on the three bundled
implementations at float64, judged by the harness (``execute.examine``): Algorithm 4 with adjacent pairs
(the fixture case has half pairs), and Gemma 3 27B's local and global stack (docs/spec.md: global layers at
base 1e6 scaled by 8, local ones at ``rope_local_base`` 10000 unscaled, transformers 5.24
``Gemma3TextConfig.convert_rope_params_to_dict``) as a whole model and decoded with a key/value cache.

Each case is first checked, in the spec, to differ from the same set under linear-2 and under no scaling,
and the models also from the stack that scales its local layers too, so a plugin that read linear-8 as
another factor, ignored it, or scaled every layer would fail here; the frequencies themselves are checked
against θ_i/8 from their definition.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import examine_case
from ftspec.conformance.core.execute import Member
from ftspec.impls.discovery import load
from ftspec.spec import architectures, evaluate, numbers
from ftspec.spec.rotary import frequencies
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}

#: Gemma 3 27B's RoPE: global base 1e6 scaled by 8, local layers (0) at 10000 with a window of 2, layer 1 global
GEMMA3_ROPE = PAPER.replace(rotary="half", rope_base=1000000.0, rope_scaling="linear-8", window=2, global_every=2,
                            rope_local_base=10000.0)
SIZES = {"H": 2, "d_e": 8, "d_attn": 4, "d_mid": 4, "d_mlp": 5, "ell": 4, "N_V": 7, "ell_max": 5, "L": 2}
CASES = {
    "causal_self_attention": (PAPER.replace(rotary="interleaved", rope_scaling="linear-8"), None),
    "d_transformer": (GEMMA3_ROPE, {"x": np.array([3, 0, 5, 1])}),
    "cached_decoding": (GEMMA3_ROPE, {"x": np.array([3, 0, 5, 1]), "n_prefill": np.array(1)}),
}


def _case(label: str) -> Case:
    variant, given = CASES[label]
    return Case.build(label, {k: SIZES[k] for k in REGISTRY[label].hyper}, variant, seed=3, given=given)


def test_linear_8_divides_each_frequency_by_8():
    with numbers.using(numbers.FLOAT):
        for r in (2, 4, 8):
            for base in (10000.0, 1000000.0):
                got = frequencies(r, PAPER.replace(rotary="half", rope_base=base, rope_scaling="linear-8"))
                want = [base ** (-2 * i / r) / 8 for i in range(r // 2)]  # RoFormer eq. 15, then inv_freq /= 8
                assert np.allclose([float(x) for x in got], want, rtol=1e-15, atol=0), (r, base)


def test_a_local_layer_is_unscaled_and_a_global_one_scaled():
    local, glob = architectures.layer_variant(GEMMA3_ROPE, 0), architectures.layer_variant(GEMMA3_ROPE, 1)
    assert (local.rope_base, local.rope_scaling, local.window) == (10000.0, "none", 2)
    assert (glob.rope_base, glob.rope_scaling, glob.window) == (1000000.0, "linear-8", 0)
    # without a local base every layer keeps the set's scaling (Gemma 2: one rotary table for the stack)
    assert architectures.layer_variant(GEMMA3_ROPE.replace(rope_local_base=0.0), 0).rope_scaling == "linear-8"


def _spec(case: Case, variant):
    return evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=variant)


@pytest.mark.parametrize("label", sorted(CASES))
def test_the_factor_moves_the_result(label, monkeypatch):
    case = _case(label)
    got = _spec(case, case.variant)
    for other in ("linear-2", "none"):
        assert got != _spec(case, case.variant.replace(rope_scaling=other)), other
    if label != "causal_self_attention":
        rule = architectures.layer_variant
        monkeypatch.setattr(architectures, "layer_variant",
                            lambda v, l: rule(v, l).replace(rope_scaling=v.rope_scaling))  # locals scaled too
        assert got != _spec(case, case.variant)


@pytest.mark.parametrize("impl_name", sorted(IMPLS))
@pytest.mark.parametrize("label", sorted(CASES))
def test_each_implementation_scales_by_8_where_the_spec_does(impl_name, label):
    outcome = examine_case(Member(impl_name, IMPLS[impl_name], "cpu"), _case(label), "float64", timeout=120.0)
    assert not outcome.judgement.findings, [f"{f.check}: {f.message}" for f in outcome.judgement.findings[:2]]
