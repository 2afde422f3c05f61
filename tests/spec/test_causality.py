"""Causal models: output column t does not depend on anything after t.

Algorithms 8 (decoder side) and 10 use Mask[t_z, t_x] = [[t_z ≤ t_x]];
everything else they do acts on each column separately. So column t of the
output is a function of columns (tokens) 0..t only.

Why the equality is bit for bit in the spec's binary64 mode, not merely
within rounding: a later column enters column t's computation only through
line 6 of Algorithm 4. There its score is −∞, its weight exp(−∞ − m) is
exactly +0.0, and its product with a (finite) value V[i, t_z] is ±0.0. Every
sum is ``math.fsum``, which returns the correctly rounded *exact* sum of its
terms, and +0.0 for an exact zero even when the terms are −0.0 (CPython's
fsum never returns −0.0), so ±0.0 terms cannot change a single bit of any
sum. The softmax denominator and max are likewise unchanged. Hence the tests
assert identical bits; they also check a truncated input (the prefix
x[0..t]), whose sums simply lack those terms.
"""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import decoder_layer, evaluate, encoder_layer, gpt2_layer
from ftspec.spec.variants import PAPER, PRESETS

from .helpers import FAST, case, decoder_layer_params, layer_params, matrix, same_bits, seeds

DECODER_VARIANTS = st.sampled_from([
    PAPER,
    PRESETS["hf-gpt2"],
    PRESETS["nanogpt"],
    PRESETS["annotated-transformer"],
    PAPER.replace(norm="rms_norm", activation="gelu_tanh", attn_scale="sqrt_d_model",
                  scale_placement="query_key_sqrt", embedding_norm=True, logit_bias=True),
])
ED_VARIANTS = st.sampled_from([
    PAPER,
    PRESETS["torch-transformer"],
    PRESETS["hf-bart"],
    PRESETS["annotated-transformer"],
    PAPER.replace(norm_placement="pre", final_norm="final", positions="sinusoidal_paper"),
])


def col(A, t):
    return [row[t] for row in A]


def changed_after(rng: random.Random, x: list[int], t: int, N_V: int) -> list[int]:
    """x with every token after t replaced by a different one."""
    return x[: t + 1] + [(v + 1 + rng.randrange(N_V - 1)) % N_V for v in x[t + 1:]]


@FAST
@given(seeds, st.integers(2, 5), st.data(), DECODER_VARIANTS)
def test_d_transformer_is_causal(seed, ell, data, variant):
    """Algorithm 10: P(x)[:, t] depends on x[0..t] only."""
    inputs, params, hyper = case("d_transformer", variant, seed, ell=ell, ell_max=5, L=2)
    t = data.draw(st.integers(0, ell - 2))
    x = inputs["x"]
    x2 = changed_after(random.Random(seed), x, t, hyper["N_V"])
    P = evaluate("d_transformer", {"x": x}, params, hyper=hyper, variant=variant)["P"]
    P2 = evaluate("d_transformer", {"x": x2}, params, hyper=hyper, variant=variant)["P"]
    for s in range(t + 1):
        assert same_bits(col(P2, s), col(P, s)), (s, t)
    # the prefix alone gives the same columns
    Pt = evaluate("d_transformer", {"x": x[: t + 1]}, params, hyper=dict(hyper, ell=t + 1), variant=variant)["P"]
    for s in range(t + 1):
        assert same_bits(col(Pt, s), col(P, s)), (s, t)


@FAST
@given(seeds, st.integers(2, 5), st.integers(1, 4), st.data(), ED_VARIANTS)
def test_ed_transformer_decoder_is_causal(seed, ell_x, ell_z, data, variant):
    """Algorithm 8: P(z, x)[:, t] depends on x[0..t] (and all of z) only."""
    inputs, params, hyper = case("ed_transformer", variant, seed, ell_x=ell_x, ell_z=ell_z, ell_max=5,
                                 L_enc=1, L_dec=2)
    t = data.draw(st.integers(0, ell_x - 2))
    z, x = inputs["z"], inputs["x"]
    x2 = changed_after(random.Random(seed), x, t, hyper["N_V"])
    P = evaluate("ed_transformer", {"z": z, "x": x}, params, hyper=hyper, variant=variant)["P"]
    P2 = evaluate("ed_transformer", {"z": z, "x": x2}, params, hyper=hyper, variant=variant)["P"]
    for s in range(t + 1):
        assert same_bits(col(P2, s), col(P, s)), (s, t)
    Pt = evaluate("ed_transformer", {"z": z, "x": x[: t + 1]}, params, hyper=dict(hyper, ell_x=t + 1),
                  variant=variant)["P"]
    for s in range(t + 1):
        assert same_bits(col(Pt, s), col(P, s)), (s, t)


@FAST
@given(seeds, st.integers(1, 2), st.integers(2, 4), st.integers(1, 3), st.integers(2, 5), st.data(),
       DECODER_VARIANTS)
def test_gpt2_layer_is_causal(seed, H, d_e, d_attn, ell, data, variant):
    """Algorithm 10, lines 5-8: output column t depends on input columns 0..t only."""
    rng = random.Random(seed)
    W = layer_params(rng, H, d_e, d_attn, 2, 3, variant)
    X = matrix(rng, d_e, ell, 2.0)
    t = data.draw(st.integers(0, ell - 2))
    X2 = [row[: t + 1] + [rng.uniform(-2, 2) for _ in row[t + 1:]] for row in X]
    Y, Y2 = gpt2_layer(X, W, variant=variant), gpt2_layer(X2, W, variant=variant)
    Yt = gpt2_layer([row[: t + 1] for row in X], W, variant=variant)
    for s in range(t + 1):
        assert same_bits(col(Y2, s), col(Y, s)) and same_bits(col(Yt, s), col(Y, s)), (s, t)


@FAST
@given(seeds, st.integers(1, 2), st.integers(2, 4), st.integers(1, 3), st.integers(2, 5), st.integers(1, 4),
       st.data(), ED_VARIANTS)
def test_decoder_layer_is_causal(seed, H, d_e, d_attn, ell_x, ell_z, data, variant):
    """Algorithm 8, lines 14-19: output column t depends on X[:, 0..t] and Z only."""
    rng = random.Random(seed)
    W = decoder_layer_params(rng, H, d_e, d_attn, 2, 3, variant)
    X, Z = matrix(rng, d_e, ell_x, 2.0), matrix(rng, d_e, ell_z, 2.0)
    t = data.draw(st.integers(0, ell_x - 2))
    X2 = [row[: t + 1] + [rng.uniform(-2, 2) for _ in row[t + 1:]] for row in X]
    Y, Y2 = decoder_layer(X, Z, W, variant=variant), decoder_layer(X2, Z, W, variant=variant)
    Yt = decoder_layer([row[: t + 1] for row in X], Z, W, variant=variant)
    for s in range(t + 1):
        assert same_bits(col(Y2, s), col(Y, s)) and same_bits(col(Yt, s), col(Y, s)), (s, t)


@FAST
@given(seeds, st.integers(2, 4))
def test_controls_earlier_tokens_and_bidirectional_layers_do_matter(seed, ell):
    """Controls, so that the tests above can fail: changing token t changes
    column t of Algorithm 10, and the bidirectional encoder layer's column 0
    does depend on later columns."""
    inputs, params, hyper = case("d_transformer", PAPER, seed, ell=ell, ell_max=4)
    x = inputs["x"]
    x2 = x[:-1] + [(x[-1] + 1) % hyper["N_V"]]
    P = evaluate("d_transformer", {"x": x}, params, hyper=hyper)["P"]
    P2 = evaluate("d_transformer", {"x": x2}, params, hyper=hyper)["P"]
    assert not same_bits(col(P2, ell - 1), col(P, ell - 1))
    rng = random.Random(seed)
    W = layer_params(rng, 1, 3, 2, 2, 3)
    X = matrix(rng, 3, ell, 2.0)
    X2 = [row[:-1] + [row[-1] + 0.5] for row in X]
    assert not same_bits(col(encoder_layer(X2, W), 0), col(encoder_layer(X, W), 0))
