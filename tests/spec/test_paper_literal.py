"""The ``phuong-hutter`` preset is the paper as written.

Below is a literal, minimal transcription of Algorithms 4, 5, 6, 8, 9 and 10
(with the embedding lines 1-3 and Algorithm 7's softmax(W_u X) they end
with), line by line from ALGORITHMS.md: explicit loops over indices, plain
Python ``sum``, exp(S)/Σexp(S) without any max shift, 0-based indices. It
runs on any number type through a tiny namespace ``M``.

Two comparisons with the spec under the default variant set:

1. mathematics: the transcription in mpmath at 50 digits against the spec in
   ``MpNumbers(40)``, to 1e-25 (rounding in either is below 1e-35 here;
   any genuine difference is of the size of the parameters);
2. binary64: the transcription in floats against the spec's floats, within
   the spec's own first-order bound u·e (``TrackedNumbers``) on each side,
   so |Δ| ≤ 2·u·e, doubled for second-order terms. The transcription rounds
   no more than the spec's bound allows: its sums are bounded by the
   worst-case-order term (n − 1)·Σ|x| the bound carries, and its un-shifted
   exp(S) has a smaller argument error than the spec's exp(S − max S).
"""

from __future__ import annotations

import math
import random
from typing import Any

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import (
    MpNumbers,
    TrackedNumbers,
    attention,
    d_transformer,
    e_transformer,
    ed_transformer,
    layer_norm,
    mh_attention,
    using,
)
from ftspec.spec.params import DTransformerParams, EDTransformerParams, ETransformerParams

from .helpers import (
    FAST,
    SLOW,
    U,
    attention_params,
    decoder_layer_params,
    gamma,
    layer_params,
    leaves,
    matrix,
    mh_params,
    seeds,
    to_numbers,
    vector,
    weight,
)


class FloatM:
    exp, sqrt, erf = staticmethod(math.exp), staticmethod(math.sqrt), staticmethod(math.erf)
    neg_inf = -math.inf
    num = staticmethod(float)


class MpM:
    exp, sqrt, erf = staticmethod(mpmath.exp), staticmethod(mpmath.sqrt), staticmethod(mpmath.erf)
    neg_inf = mpmath.mpf("-inf")
    num = staticmethod(mpmath.mpf)


# --------------------------------------------------------------------------
# the transcription
# --------------------------------------------------------------------------


def alg4_attention(M, X, Z, W, Mask):
    """Algorithm 4: Ṽ ← Attention(X, Z | W_qkv, Mask)."""
    d_x, l_x = len(X), len(X[0])
    d_z, l_z = len(Z), len(Z[0])
    d_attn, d_out = len(W.W_q), len(W.W_v)
    Q = [[sum(W.W_q[i][j] * X[j][t] for j in range(d_x)) + W.b_q[i] for t in range(l_x)]
         for i in range(d_attn)]  # line 1
    K = [[sum(W.W_k[i][j] * Z[j][t] for j in range(d_z)) + W.b_k[i] for t in range(l_z)]
         for i in range(d_attn)]  # line 2
    V = [[sum(W.W_v[i][j] * Z[j][t] for j in range(d_z)) + W.b_v[i] for t in range(l_z)]
         for i in range(d_out)]  # line 3
    S = [[sum(K[i][tz] * Q[i][tx] for i in range(d_attn)) for tx in range(l_x)]
         for tz in range(l_z)]  # line 4: S = Kᵀ Q
    for tz in range(l_z):  # line 5
        for tx in range(l_x):
            if not Mask[tz][tx]:
                S[tz][tx] = M.neg_inf
    # line 6: Ṽ = V · softmax(S / √d_attn), softmax over each column
    A = [[M.exp(S[tz][tx] / M.sqrt(M.num(d_attn))) for tx in range(l_x)] for tz in range(l_z)]
    colsum = [sum(A[tz][tx] for tz in range(l_z)) for tx in range(l_x)]
    Sm = [[A[tz][tx] / colsum[tx] for tx in range(l_x)] for tz in range(l_z)]
    return [[sum(V[i][tz] * Sm[tz][tx] for tz in range(l_z)) for tx in range(l_x)] for i in range(d_out)]


def alg5_mh_attention(M, X, Z, W, Mask):
    """Algorithm 5: Ṽ ← MHAttention(X, Z | W, Mask)."""
    Y = []
    for head in W.heads:  # lines 1-2
        Y += alg4_attention(M, X, Z, head, Mask)  # line 3: stack vertically, head 1 on top
    l_x = len(X[0])
    return [[sum(W.W_o[i][j] * Y[j][t] for j in range(len(Y))) + W.b_o[i] for t in range(l_x)]
            for i in range(len(W.W_o))]  # line 4


def alg6_layer_norm(M, e, g, b):
    """Algorithm 6: ê ← layer_norm(e | γ, β)."""
    d_e = len(e)
    m = sum(e) / d_e  # line 1
    v = sum((e[i] - m) ** 2 for i in range(d_e)) / d_e  # line 2
    return [(e[i] - m) / M.sqrt(v) * g[i] + b[i] for i in range(d_e)]  # line 3


def ln_columns(M, X, g, b):
    cols = [alg6_layer_norm(M, [row[t] for row in X], g, b) for t in range(len(X[0]))]
    return [[cols[t][i] for t in range(len(cols))] for i in range(len(X))]


def relu(M, x):
    return x if x > 0 else M.num(0)


def gelu(M, x):
    return x * (1 + M.erf(x / M.sqrt(M.num(2)))) / 2  # x Φ(x)


def mlp(M, X, W1, b1, W2, b2, act):
    """W2 act(W1 X + b1 1ᵀ) + b2 1ᵀ."""
    l = len(X[0])
    Hd = [[act(M, sum(W1[i][j] * X[j][t] for j in range(len(X))) + b1[i]) for t in range(l)]
          for i in range(len(W1))]
    return [[sum(W2[i][j] * Hd[j][t] for j in range(len(Hd))) + b2[i] for t in range(l)] for i in range(len(W2))]


def add(A, B):
    return [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]


def embed(x, W_e, W_p):
    """Lines 1-3: [W_e[:, x[t]] + W_p[:, t]]_t."""
    return [[W_e[i][x[t]] + W_p[i][t] for t in range(len(x))] for i in range(len(W_e))]


def unembed(M, X, W_u):
    """Last line: P = softmax(W_u X), column-wise."""
    logits = [[sum(W_u[v][i] * X[i][t] for i in range(len(X))) for t in range(len(X[0]))] for v in range(len(W_u))]
    E = [[M.exp(z) for z in row] for row in logits]
    s = [sum(E[v][t] for v in range(len(E))) for t in range(len(X[0]))]
    return [[E[v][t] / s[t] for t in range(len(X[0]))] for v in range(len(E))]


def alg8_ed_transformer(M, z, x, th):
    """Algorithm 8: P ← EDTransformer(z, x | θ)."""
    l_z, l_x = len(z), len(x)
    full = [[1] * l_z for _ in range(l_z)]
    Z = embed(z, th.W_e, th.W_p)  # lines 1-3
    for Wl in th.enc_layers:  # line 4
        Z = add(Z, alg5_mh_attention(M, Z, Z, Wl.attn, full))  # line 5
        Z = ln_columns(M, Z, Wl.gamma1, Wl.beta1)  # line 6
        Z = add(Z, mlp(M, Z, Wl.W_mlp1, Wl.b_mlp1, Wl.W_mlp2, Wl.b_mlp2, relu))  # line 7
        Z = ln_columns(M, Z, Wl.gamma2, Wl.beta2)  # line 8
    X = embed(x, th.W_e, th.W_p)  # lines 10-12
    causal = [[1 if tz <= tx else 0 for tx in range(l_x)] for tz in range(l_x)]
    cross = [[1] * l_x for _ in range(l_z)]
    for Wl in th.dec_layers:  # line 13
        X = add(X, alg5_mh_attention(M, X, X, Wl.self_attn, causal))  # line 14
        X = ln_columns(M, X, Wl.gamma3, Wl.beta3)  # line 15
        X = add(X, alg5_mh_attention(M, X, Z, Wl.cross_attn, cross))  # line 16
        X = ln_columns(M, X, Wl.gamma4, Wl.beta4)  # line 17
        X = add(X, mlp(M, X, Wl.W_mlp3, Wl.b_mlp3, Wl.W_mlp4, Wl.b_mlp4, relu))  # line 18
        X = ln_columns(M, X, Wl.gamma5, Wl.beta5)  # line 19
    return unembed(M, X, th.W_u)  # line 21


def alg9_e_transformer(M, x, th):
    """Algorithm 9: P ← ETransformer(x | θ)."""
    l = len(x)
    full = [[1] * l for _ in range(l)]
    X = embed(x, th.W_e, th.W_p)  # lines 1-3
    for Wl in th.layers:  # line 4
        X = add(X, alg5_mh_attention(M, X, X, Wl.attn, full))  # line 5
        X = ln_columns(M, X, Wl.gamma1, Wl.beta1)  # line 6
        X = add(X, mlp(M, X, Wl.W_mlp1, Wl.b_mlp1, Wl.W_mlp2, Wl.b_mlp2, gelu))  # line 7
        X = ln_columns(M, X, Wl.gamma2, Wl.beta2)  # line 8
    X = [[gelu(M, sum(th.W_f[i][j] * X[j][t] for j in range(len(X))) + th.b_f[i]) for t in range(l)]
         for i in range(len(th.W_f))]  # line 10
    X = ln_columns(M, X, th.gamma, th.beta)  # line 11
    return unembed(M, X, th.W_u)  # line 12


def alg10_d_transformer(M, x, th):
    """Algorithm 10: P ← DTransformer(x | θ)."""
    l = len(x)
    causal = [[1 if tz <= tx else 0 for tx in range(l)] for tz in range(l)]
    X = embed(x, th.W_e, th.W_p)  # lines 1-3
    for Wl in th.layers:  # line 4
        Xt = ln_columns(M, X, Wl.gamma1, Wl.beta1)  # line 5
        X = add(X, alg5_mh_attention(M, Xt, Xt, Wl.attn, causal))  # line 6
        Xt = ln_columns(M, X, Wl.gamma2, Wl.beta2)  # line 7
        X = add(X, mlp(M, Xt, Wl.W_mlp1, Wl.b_mlp1, Wl.W_mlp2, Wl.b_mlp2, gelu))  # line 8
    X = ln_columns(M, X, th.gamma, th.beta)  # line 10
    return unembed(M, X, th.W_u)  # line 11


# --------------------------------------------------------------------------
# comparisons
# --------------------------------------------------------------------------


def compare(literal_fn, spec_fn, args_float: tuple, tokens: tuple = (), **spec_kw: Any) -> None:
    """Run the transcription and the spec in both arithmetics and compare.

    ``args_float`` are float structures (converted for mpmath); ``tokens`` go
    first and unconverted."""
    # 1. mathematics
    with mpmath.workdps(50):
        lit_mp = literal_fn(MpM, *tokens, *[to_numbers(a, _MpConv) for a in args_float])
    N = MpNumbers(40)
    with using(N):
        spec_mp = spec_fn(*tokens, *[to_numbers(a, N) for a in args_float], **spec_kw)
    for a, b in zip(leaves(lit_mp), leaves(spec_mp), strict=True):
        assert abs(mpmath.mpf(a) - mpmath.mpf(b)) <= mpmath.mpf("1e-25"), (a, b)
    # 2. binary64, within the spec's own bound
    lit_f = literal_fn(FloatM, *tokens, *args_float)
    spec_f = spec_fn(*tokens, *args_float, **spec_kw)
    T = TrackedNumbers()
    with using(T):
        tr = spec_fn(*tokens, *[to_numbers(a, T) for a in args_float], **spec_kw)
    for a, b, t in zip(leaves(lit_f), leaves(spec_f), leaves(tr), strict=True):
        assert abs(a - b) <= 4 * U * t.e + 1e-300, (a, b, abs(a - b) / (U * t.e))


class _MpConv:
    num = staticmethod(mpmath.mpf)


@FAST
@given(seeds, st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 4), st.integers(1, 4), st.booleans())
def test_attention_is_algorithm_4(seed, d_x, d_z, d_attn, d_out, l_x, l_z, causal):
    rng = random.Random(seed)
    W = attention_params(rng, d_x, d_z, d_attn, d_out)
    X, Z = matrix(rng, d_x, l_x, 2.0), matrix(rng, d_z, l_z, 2.0)
    Mask = [[1 if (tz <= tx or not causal) else 0 for tx in range(l_x)] for tz in range(l_z)]
    compare(lambda M, X, Z, W: alg4_attention(M, X, Z, W, Mask),
            lambda X, Z, W: attention(X, Z, W, Mask), (X, Z, W))


@FAST
@given(seeds, st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4))
def test_mh_attention_is_algorithm_5(seed, H, d, d_attn, d_mid, ell):
    rng = random.Random(seed)
    W = mh_params(rng, H, d, d, d_attn, d_mid, d)
    X = matrix(rng, d, ell, 2.0)
    Mask = [[1 if tz <= tx else 0 for tx in range(ell)] for tz in range(ell)]
    compare(lambda M, X, W: alg5_mh_attention(M, X, X, W, Mask),
            lambda X, W: mh_attention(X, X, W, Mask), (X, W))


@FAST
@given(seeds, st.integers(2, 8))
def test_layer_norm_is_algorithm_6(seed, d):
    rng = random.Random(seed)
    e, g, b = vector(rng, d, -3, 3), gamma(rng, d), vector(rng, d, -0.5, 0.5)
    compare(alg6_layer_norm, layer_norm, (e, g, b))


def _sizes():
    return st.tuples(seeds, st.integers(1, 2), st.integers(2, 4), st.integers(1, 3), st.integers(1, 3),
                     st.integers(1, 4), st.integers(2, 5), st.integers(1, 4))


@SLOW
@given(_sizes(), st.integers(1, 4), st.integers(1, 2))
def test_ed_transformer_is_algorithm_8(sizes, l_z, L):
    seed, H, d_e, d_attn, d_mid, d_mlp, N_V, l_x = sizes
    rng = random.Random(seed)
    ell_max = max(l_z, l_x)
    th = EDTransformerParams(
        W_e=matrix(rng, d_e, N_V, 1.0), W_p=matrix(rng, d_e, ell_max, 1.0),
        enc_layers=tuple(layer_params(rng, H, d_e, d_attn, d_mid, d_mlp) for _ in range(L)),
        dec_layers=tuple(decoder_layer_params(rng, H, d_e, d_attn, d_mid, d_mlp) for _ in range(L)),
        W_u=weight(rng, N_V, d_e))
    z = [rng.randrange(N_V) for _ in range(l_z)]
    x = [rng.randrange(N_V) for _ in range(l_x)]
    compare(lambda M, z, x, th: alg8_ed_transformer(M, z, x, th),
            lambda z, x, th: ed_transformer(z, x, th), (th,), tokens=(z, x))


@SLOW
@given(_sizes(), st.integers(1, 4), st.integers(1, 2))
def test_e_transformer_is_algorithm_9(sizes, d_f, L):
    seed, H, d_e, d_attn, d_mid, d_mlp, N_V, ell = sizes
    rng = random.Random(seed)
    th = ETransformerParams(
        W_e=matrix(rng, d_e, N_V, 1.0), W_p=matrix(rng, d_e, ell, 1.0),
        layers=tuple(layer_params(rng, H, d_e, d_attn, d_mid, d_mlp) for _ in range(L)),
        W_f=weight(rng, d_f, d_e), b_f=vector(rng, d_f, -0.5, 0.5),
        gamma=gamma(rng, d_f), beta=vector(rng, d_f, -0.5, 0.5), W_u=weight(rng, N_V, d_f))
    x = [rng.randrange(N_V) for _ in range(ell)]
    if d_f == 1:
        # line 11 normalises a single number: variance 0, refused (no ε)
        with pytest.raises(ValueError):
            e_transformer(x, th)
        return
    compare(lambda M, x, th: alg9_e_transformer(M, x, th), lambda x, th: e_transformer(x, th), (th,), tokens=(x,))


@SLOW
@given(_sizes(), st.integers(1, 2))
def test_d_transformer_is_algorithm_10(sizes, L):
    seed, H, d_e, d_attn, d_mid, d_mlp, N_V, ell = sizes
    rng = random.Random(seed)
    th = DTransformerParams(
        W_e=matrix(rng, d_e, N_V, 1.0), W_p=matrix(rng, d_e, ell, 1.0),
        layers=tuple(layer_params(rng, H, d_e, d_attn, d_mid, d_mlp) for _ in range(L)),
        gamma=gamma(rng, d_e), beta=vector(rng, d_e, -0.5, 0.5), W_u=weight(rng, N_V, d_e))
    x = [rng.randrange(N_V) for _ in range(ell)]
    compare(lambda M, x, th: alg10_d_transformer(M, x, th), lambda x, th: d_transformer(x, th), (th,), tokens=(x,))
