"""RoPE's frequency scaling (``rope_scaling``, spec/rotary.py ``frequencies``): linear (position
interpolation) and Llama 3.1's bands, against Hugging Face transformers' own functions and the
definition's properties (its bands, where it changes nothing)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from ftspec.spec import evaluate, numbers
from ftspec.spec.rotary import LLAMA3, frequencies
from ftspec.spec.variants import PAPER, VariantSet

BASES = (10000.0, 500000.0, 1000000.0)
WIDTHS = (2, 4, 6, 8, 16)


def _spec(r: int, base: float, scaling: str) -> list[float]:
    with numbers.using(numbers.FLOAT):
        return [float(x) for x in frequencies(r, PAPER.replace(rotary="half", rope_base=base, rope_scaling=scaling))]


def _transformers(r: int, base: float, scaling: str, monkeypatch) -> list[float]:
    """transformers 5.24's inv_freq (``_compute_linear_scaling_rope_parameters`` with factor 2,
    ``_compute_llama3_parameters`` with Llama 3.1's published parameters), computed in binary64: the
    functions build their tables with ``dtype=torch.float``, read from the torch module at call time."""
    params: dict = {"rope_theta": base}
    if scaling == "linear-2":
        params.update(rope_type="linear", factor=2.0)
    else:
        params.update(rope_type="llama3", **{k: float(v) for k, v in LLAMA3.items()})
    config = LlamaConfig(hidden_size=2 * r, num_attention_heads=2, head_dim=r, rope_parameters=params,
                         max_position_embeddings=16384)
    monkeypatch.setattr(torch, "float", torch.float64)
    inv_freq, _ = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu")
    assert inv_freq.dtype == torch.float64
    return inv_freq.tolist()


@pytest.mark.parametrize("scaling", ["linear-2", "llama3"])
@pytest.mark.parametrize("base", BASES)
def test_the_frequencies_are_transformers(scaling, base, monkeypatch):
    # Both compute in binary64 (unit roundoff u = 2^-53), in different orders. First-order error of one
    # against the exact θ'_i: θ_i = base^(−2i/r) carries δ ≤ (ln base + 2)·u (the exponent's rounding
    # times ln base, the power, the reciprocal); llama3's blend ρ = 1/8 + (7/8)·γ ≥ 1/8 with
    # γ = (L/λ − 1)/3, L/λ ≤ 4, moves by dρ/ρ ≤ 7·dγ ≤ 14·δ + 35·u; with the last product's 2·u,
    # |Δθ'|/θ' ≤ 15·(ln base + 2)·u + 37·u, for each of the two.
    bound = 2 * (15 * (math.log(base) + 2) + 37) * 2.0 ** -53
    for r in WIDTHS:
        spec, theirs = _spec(r, base, scaling), _transformers(r, base, scaling, monkeypatch)
        assert len(spec) == len(theirs) == r // 2
        for i, (a, b) in enumerate(zip(spec, theirs)):
            assert abs(a - b) <= bound * abs(b), (r, i, a, b)


def _bands(r: int, base: float) -> list[str]:
    """Each pair's llama3 band from its wavelength 2π·base^(2i/r) (the bounds 8192/4 and 8192/1)."""
    out = []
    for i in range(r // 2):
        wavelength = 2 * math.pi * base ** (2 * i / r)
        out.append("kept" if wavelength < 2048 else "slowed" if wavelength > 8192 else "blended")
    return out


def test_llama3_keeps_slows_and_blends_by_wavelength():
    for base in BASES:
        for r in WIDTHS:
            plain, scaled = _spec(r, base, "none"), _spec(r, base, "llama3")
            for band, p, s in zip(_bands(r, base), plain, scaled):
                if band == "kept":
                    assert s == p
                elif band == "slowed":
                    assert s == p / 8
                else:
                    assert p / 8 < s < p
    # the drawn cases: base 500000 at width 4 blends pair 1 (λ ≈ 4443), at width 6 slows pair 2 (≈ 39584)
    assert _bands(4, 500000.0) == ["kept", "blended"]
    assert _bands(6, 500000.0) == ["kept", "kept", "slowed"]


def test_llama3_changes_nothing_at_base_10000_and_small_widths():
    """At base 10000 every wavelength of a width ≤ 4 is below 2048 (pair 1 of width 4: 2π·100 ≈ 628):
    llama3 is the identity there, at the strategies' structural width 4, hence they draw it at base 500000
    and more. Width 6 blends pair 2 (2π·10000^(2/3) ≈ 2916)."""
    for r in (2, 4):
        assert _spec(r, 10000.0, "llama3") == _spec(r, 10000.0, "none")
    assert _bands(6, 10000.0)[2] == "blended"
    assert _spec(6, 10000.0, "llama3") != _spec(6, 10000.0, "none")


def test_scaling_moves_an_attention_output_only_where_read():
    """The switch is read by Algorithm 4 through RoPE: without a pairing it changes nothing."""
    rng = np.random.default_rng(0)
    X, Z = rng.normal(size=(4, 3)).tolist(), rng.normal(size=(4, 3)).tolist()
    params = {"W_q": rng.normal(size=(4, 4)).tolist(), "b_q": [0.0] * 4, "W_k": rng.normal(size=(4, 4)).tolist(),
              "b_k": [0.0] * 4, "W_v": rng.normal(size=(2, 4)).tolist(), "b_v": [0.0] * 2}
    hyper = {"d_x": 4, "d_z": 4, "d_attn": 4, "d_out": 2, "ell_x": 3, "ell_z": 3}
    mask = [[True] * 3 for _ in range(3)]

    def run(v: VariantSet):
        return evaluate("attention", {"X": X, "Z": Z, "Mask": mask}, params, hyper=hyper, variant=v)

    base = PAPER.replace(rope_base=500000.0)
    assert run(base.replace(rope_scaling="llama3")) == run(base)
    rotated = base.replace(rotary="half")
    assert run(rotated.replace(rope_scaling="llama3")) != run(rotated)
    assert run(rotated.replace(rope_scaling="linear-2")) != run(rotated)
