"""Phi-3's LongRoPE (``rope_factors="longrope"``, spec 2.17; spec/rotary.py): per-pair factors e and an
attention factor m, parameters of the attention, against Hugging Face transformers 5.24's own functions
(``_compute_longrope_parameters``, ``Phi3RotaryEmbedding``) and the definition's properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import Phi3Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

from ftspec.spec import SpecError, evaluate, numbers
from ftspec.spec.registry import REGISTRY
from ftspec.spec.rotary import frequencies
from ftspec.spec.variants import PAPER, VariantSet

LONGROPE = PAPER.replace(rotary="half", rope_factors="longrope")
#: Phi-3-mini-128k-instruct's published long_factor, its first eight (of 48; config.json on the Hub)
PHI3_LONG = [1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
             1.600000023841858, 1.6200000047683716, 2.620000123977661]


def _spec_frequencies(r: int, base: float, ext: list[float]) -> list[float]:
    with numbers.using(numbers.FLOAT):
        return [float(x) for x in frequencies(r, LONGROPE.replace(rope_base=base), (ext, [1.0]))]


def _phi3(r: int, base: float, short: list[float], long: list[float], original: int, **extra) -> Phi3Config:
    """A Phi3Config with one head of width r and LongRoPE's two lists (the 128k models' rope_scaling)."""
    return Phi3Config(hidden_size=2 * r, num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=131072,
                      original_max_position_embeddings=original,
                      rope_parameters={"rope_type": "longrope", "rope_theta": base, "short_factor": short,
                                       "long_factor": long, **extra})


@pytest.mark.parametrize("base", [10000.0, 500000.0])
@pytest.mark.parametrize("r", [2, 4, 8, 16])
def test_the_frequencies_are_transformers_in_either_list(r, base):
    """inv_freq = 1/(ext·base^(2i/r)): the library computes it in float32 (``torch.tensor(..., dtype=float32)``,
    ``arange(...).float() / dim``), so its relative error is a few float32 units (the exponent's rounding times
    ln base, the power, the product, the reciprocal): ≤ (ln base + 4)·2^-24, doubled for margin. The long list
    is read for a sequence longer than original_max_position_embeddings, the short one otherwise."""
    rng = np.random.default_rng(r)
    short = np.exp(rng.uniform(0.0, math.log(64.0), r // 2)).astype(np.float32).astype(float).tolist()
    long = (PHI3_LONG * 2)[: r // 2]
    config = _phi3(r, base, short, long, original=4096)
    bound = 2 * (math.log(base) + 4) * 2.0 ** -24
    for seq_len, ext in ((None, short), (4096, short), (4097, long)):
        inv_freq, _ = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=seq_len)
        spec = _spec_frequencies(r, base, ext)
        assert len(spec) == len(inv_freq) == r // 2
        for a, b in zip(spec, inv_freq.tolist()):
            assert abs(a - b) <= bound * abs(a), (seq_len, a, b)


def test_the_attention_factor_of_phi3_128k_configs():
    """With no attention_factor in the config the library derives √(1 + ln s / ln L) from s =
    max_position_embeddings / original_max_position_embeddings (Phi-3-mini-128k: 131072 / 4096 = 32, so
    √(1 + 5/12) ≈ 1.190); a given one is taken as it is. The spec takes m as a parameter: the plugin gives it."""
    derived = _phi3(4, 10000.0, [1.0, 1.0], [1.0, 1.0], original=4096)
    _, m = ROPE_INIT_FUNCTIONS["longrope"](derived, "cpu")
    assert m == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)), rel=1e-15)
    assert m == pytest.approx(math.sqrt(17 / 12), rel=1e-15)
    given = _phi3(4, 10000.0, [1.0, 1.0], [1.0, 1.0], original=4096, attention_factor=1.37)
    assert ROPE_INIT_FUNCTIONS["longrope"](given, "cpu")[1] == 1.37


def test_cos_and_sin_carry_the_attention_factor_as_phi3_builds_them():
    """Phi3RotaryEmbedding.forward: cos = m·cos(t·θ'_i), sin = m·sin(t·θ'_i), both halves (rotate_half)."""
    r, m = 4, 1.25
    config = _phi3(r, 10000.0, [2.0, 7.0], [3.0, 40.0], original=4096, attention_factor=m)
    rotary = Phi3RotaryEmbedding(config)
    x = torch.zeros(1, 5, r)
    cos, sin = rotary(x, torch.arange(5).unsqueeze(0))  # short list: the sequence is shorter than 4096
    theta = _spec_frequencies(r, 10000.0, [2.0, 7.0])
    for t in range(5):
        for i in range(r):
            angle = t * theta[i % (r // 2)]
            assert float(cos[0, t, i]) == pytest.approx(m * math.cos(angle), abs=4e-7)
            assert float(sin[0, t, i]) == pytest.approx(m * math.sin(angle), abs=4e-7)


def _attention(v: VariantSet, ext: list[float], m: float, seed: int = 0, d_attn: int = 4):
    rng = np.random.default_rng(seed)
    hyper = dict(H=1, d_e=4, d_attn=d_attn, d_mid=2, ell=5)
    params = {k: rng.normal(size=s).tolist() for k, s in REGISTRY["causal_self_attention"].param_shapes(
        hyper, v.replace(rope_factors="none")).items()}
    if v.rope_factors == "longrope":
        params |= {"rope_ext": ext, "rope_mscale": [m]}
    X = rng.normal(size=(4, 5)).tolist()
    return evaluate("causal_self_attention", {"X": X}, params, hyper=hyper, variant=v)["V_tilde"]


def test_unit_factors_are_plain_rope_and_rope_scaling_is_unread():
    plain = _attention(LONGROPE.replace(rope_factors="none"), [], 1.0)
    assert np.allclose(_attention(LONGROPE, [1.0, 1.0], 1.0), plain, rtol=1e-14, atol=1e-14)
    # longrope replaces rope_scaling: the same factors whatever rope_scaling says
    scaled = LONGROPE.replace(rope_base=500000.0)
    assert _attention(scaled.replace(rope_scaling="llama3"), [3.0, 9.0], 1.2) == \
        _attention(scaled, [3.0, 9.0], 1.2)
    # and the factors move the output, where unit factors did not
    assert not np.allclose(_attention(LONGROPE, [3.0, 9.0], 1.0), plain, rtol=1e-6, atol=1e-6)


def test_a_factor_divides_the_frequency():
    """θ'_i = θ_i / e_i: a factor e on pair i is pair i's angle at positions t/e (frequencies(…)[i] = θ_i/e)."""
    base = _spec_frequencies(6, 10000.0, [1.0, 1.0, 1.0])
    scaled = _spec_frequencies(6, 10000.0, [2.0, 1.0, 16.0])
    assert scaled == [base[0] / 2, base[1], base[2] / 16]


def test_the_attention_factor_scales_the_rotated_rows_only():
    """m multiplies cos and sin: a rotated row of Q and of K grows by m, so with one rotated pair and the rest
    passed (partial rotary) the scores move by m² on the rotated part alone, not by a common factor."""
    v = LONGROPE.replace(rotary_fraction=0.5)
    with numbers.using(numbers.FLOAT):
        from ftspec.spec.rotary import rotate

        M = [[1.0, 2.0, -1.0], [0.5, -3.0, 2.0], [4.0, 1.0, 1.0], [-2.0, 0.0, 3.0]]
        one = rotate(M, v, ([5.0], [1.0]))
        two = rotate(M, v, ([5.0], [2.0]))
    assert two[:2] == [[2 * x for x in row] for row in one[:2]]  # the rotated pair: doubled
    assert two[2:] == one[2:] == M[2:]  # the passed rows: as they were


def test_the_schema_holds_the_factors_last_and_only_under_longrope():
    hyper = dict(N_V=7, ell_max=6, L=2, H=2, d_e=8, d_attn=4, d_mid=4, d_mlp=6, ell=4)
    for name, prefix in (("causal_self_attention", ""), ("padded_causal_self_attention", ""),
                         ("gpt2_layer", "attn."), ("padded_gpt2_layer", "attn."), ("d_transformer", ""),
                         ("padded_d_transformer", ""), ("cached_decoding", "")):
        e = REGISTRY[name]
        h = {k: hyper[k] for k in e.hyper}
        before = e.param_shapes(h, LONGROPE.replace(rope_factors="none"))
        after = e.param_shapes(h, LONGROPE)
        assert list(after)[:-2] == list(before)  # every other parameter, in its order
        assert list(after.items())[-2:] == [(prefix + "rope_ext", (2,)), (prefix + "rope_mscale", (1,))]
        assert e.param_shapes(h, PAPER.replace(rope_factors="longrope")) == e.param_shapes(h, PAPER)  # no RoPE
        assert not any("rope_" in k for k in e.param_shapes(h, PAPER.replace(rotary="half")))
    # partial rotary: r/2 = ⌊f·d_attn⌋/2 factors
    e = REGISTRY["causal_self_attention"]
    assert e.param_shapes(dict(H=1, d_e=4, d_attn=8, d_mid=2, ell=3),
                          LONGROPE.replace(rotary_fraction=0.25))["rope_ext"] == (1,)


def test_the_models_share_one_pair_of_factors():
    """Phi3Model's one rotary_emb: the model's factors reach every layer (changing them moves the output),
    and no layer holds factors of its own."""
    e = REGISTRY["d_transformer"]
    hyper = dict(N_V=7, ell_max=6, L=2, H=2, d_e=8, d_attn=4, d_mid=4, d_mlp=6, ell=4)
    v = LONGROPE
    shapes = e.param_shapes(hyper, v)
    assert [k for k in shapes if "rope_" in k] == ["rope_ext", "rope_mscale"]
    rng = np.random.default_rng(3)
    params = {k: (rng.normal(size=s) / math.sqrt(s[-1])).tolist() for k, s in shapes.items()}
    out = []
    for ext in ([1.0, 1.0], [4.0, 30.0]):
        params |= {"rope_ext": ext, "rope_mscale": [1.0]}
        out.append(evaluate("d_transformer", {"x": [1, 5, 2, 6]}, params, hyper=hyper, variant=v)["P"])
    assert not np.allclose(out[0], out[1], rtol=1e-9, atol=1e-12)
    params |= {"rope_ext": [1.0, 1.0], "rope_mscale": [1.0]}
    plain = {k: p for k, p in params.items() if "rope_" not in k}
    assert np.allclose(evaluate("d_transformer", {"x": [1, 5, 2, 6]}, plain, hyper=hyper,
                                variant=v.replace(rope_factors="none"))["P"], out[0], rtol=1e-13, atol=1e-15)


def test_misshapen_or_missing_factors_are_refused():
    with numbers.using(numbers.FLOAT):
        with pytest.raises(SpecError, match="rope_ext"):
            frequencies(4, LONGROPE, ([1.0], [1.0]))
        with pytest.raises(SpecError, match="rope_ext"):
            frequencies(4, LONGROPE, (None, [1.0]))
        with pytest.raises(SpecError, match="nonzero"):  # a division by zero refused, not raised as one
            frequencies(4, LONGROPE, ([1.0, 0.0], [1.0]))
    hyper = dict(H=1, d_e=4, d_attn=4, d_mid=2, ell=3)
    params = {k: np.ones(s).tolist() for k, s in REGISTRY["causal_self_attention"].param_shapes(hyper, LONGROPE).items()
              if k != "rope_mscale"}
    with pytest.raises(SpecError, match="rope_mscale"):  # the entry's schema asks for both
        evaluate("causal_self_attention", {"X": np.ones((4, 3)).tolist()}, params, hyper=hyper, variant=LONGROPE)
    with pytest.raises(ValueError, match="rope_factors"):
        PAPER.replace(rope_factors="short")


def test_an_entry_without_the_switch_rotates_plainly():
    """Algorithm 5's own entry does not list rope_factors and holds no factors: under the value it is as under
    none (what test_switches asserts of every unlisted switch)."""
    rng = np.random.default_rng(5)
    hyper = dict(H=2, d_x=4, d_z=4, d_attn=4, d_mid=2, d_out=3, ell_x=3, ell_z=3)
    params = {k: rng.normal(size=s).tolist() for k, s in REGISTRY["mh_attention"].param_shapes(hyper, LONGROPE).items()}
    inputs = {"X": rng.normal(size=(4, 3)).tolist(), "Z": rng.normal(size=(4, 3)).tolist(),
              "Mask": [[True] * 3 for _ in range(3)]}
    assert evaluate("mh_attention", inputs, params, hyper=hyper, variant=LONGROPE) == \
        evaluate("mh_attention", inputs, params, hyper=hyper, variant=LONGROPE.replace(rope_factors="none"))


def test_existing_sets_keep_their_hash():
    """A later switch at its default is left out of the canonical form (``LATER``): the paper's hash is as
    before, and the switch shows only when set."""
    assert "rope_factors" not in PAPER.to_json()
    assert "rope_factors" in LONGROPE.to_json()
