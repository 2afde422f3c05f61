"""The seeds' definitions, transcribed independently, equal the spec under their presets.

Each seed is transcribed here in its own notation (row vectors for seeds/000
and seeds/002, named tensors for seeds/003), from the seed's text and not
from ``spec/``, and evaluated in mpmath at 50 significant digits. The spec is
evaluated in ``MpNumbers(40)`` on the same exactly representable
parameters. Agreement to 1e-25 is agreement of the mathematics: rounding in
either evaluation is below 1e-35 for these small, well-scaled models, while
any real difference (a transposed weight, a missing bias, a different
normalisation) shows up at the size of the parameters, 1e-3 or more.

The docstring of each test states the correspondence of parameters.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import (
    MpNumbers,
    TrackedNumbers,
    embed,
    encoder_layer,
    sinusoidal_vaswani,
    unembedding,
    using,
)
from ftspec.spec.params import AttentionParams, LayerParams, MHAttentionParams
from ftspec.spec.variants import PRESETS

from .helpers import FAST, SLOW, U, gamma, identity, leaves, matrix, seeds, to_numbers, transpose, vector, weight

DPS = 50
TOL = mpmath.mpf("1e-25")


def mp(x: Any) -> Any:
    """Nested floats (or spec mpf values) -> nested mpmath numbers of the global context."""
    if isinstance(x, (list, tuple)):
        return [mp(v) for v in x]
    return mpmath.mpf(x)


def assert_close(got: Any, want: Any) -> None:
    g, w = list(leaves(got)), list(leaves(want))
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert abs(mpmath.mpf(a) - mpmath.mpf(b)) <= TOL * (1 + abs(mpmath.mpf(b))), (a, b)


def spec_mp(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Call a spec function in MpNumbers(40) with its numbers converted."""
    N = MpNumbers(40)
    with using(N):
        return fn(*[a if _keep(a) else to_numbers(a, N) for a in args], **kw)


def _keep(a: Any) -> bool:
    """Sizes (ints), token lists and None pass through unconverted."""
    if a is None or isinstance(a, int):
        return True
    return isinstance(a, list) and len(a) > 0 and all(type(v) is int for v in a)


# ==========================================================================
# seeds/000: a compact definition of a transformer function (row vectors)
# ==========================================================================
#
# Row-vector linear algebra, as the seed writes it: a vector is a row
# (a list), a matrix a list of rows, and z·W is the row-vector product.


def rv_times(z: list, W: list) -> list:
    """z · W for a row vector z and matrix W."""
    return [mpmath.fsum(z[i] * W[i][j] for i in range(len(z))) for j in range(len(W[0]))]


def T_(W: list) -> list:
    return [list(c) for c in zip(*W)]


def mv(W: list, z: list) -> list:
    """W · z for a column vector z (eq. 5 writes the FFN this way)."""
    return [mpmath.fsum(w * x for w, x in zip(row, z)) for row in W]


def seed_softmax(z: list) -> list:
    # eq. (3)
    ex = [mpmath.exp(v) for v in z]
    s = mpmath.fsum(ex)
    return [v / s for v in ex]


def seed000_layernorm(z: list) -> list:
    # eq. (2): (z − mean z)/√var z, var with 1/N
    n = len(z)
    m = mpmath.fsum(z) / n
    var = mpmath.fsum((v - m) ** 2 for v in z) / n
    return [(v - m) / mpmath.sqrt(var) for v in z]


def seed000_attn(lay: dict, X: list, z: list) -> list:
    # eq. (4): Σ_h softmax(z W_Q W_K^T X^T / √D_QK) X W_V W_O^T
    D_QK = len(lay["W_Q"][0][0])
    total = [mpmath.mpf(0)] * len(z)
    for W_Q, W_K, W_V, W_O in zip(lay["W_Q"], lay["W_K"], lay["W_V"], lay["W_O"]):
        scores = rv_times(rv_times(rv_times(z, W_Q), T_(W_K)), T_(X))
        a = seed_softmax([s / mpmath.sqrt(D_QK) for s in scores])
        head = rv_times(rv_times(rv_times(a, X), W_V), T_(W_O))
        total = [u + v for u, v in zip(total, head)]
    return total


def seed000_ffn(lay: dict, z: list) -> list:
    # eq. (5): W_FF2 ReLU(W_FF1 z + b_FF1) + b_FF2
    h = [max(v + b, mpmath.mpf(0)) for v, b in zip(mv(lay["W_FF1"], z), lay["b_FF1"])]
    return [v + b for v, b in zip(mv(lay["W_FF2"], h), lay["b_FF2"])]


def seed000_G(s: list[int], W_emb: list, W_pos: list, layers: list[dict], W_une: list) -> list:
    """Eq. (6), s = [s_1 … s_T] with tokens in [V] = {1, …, V} (1-based)."""
    T = len(s)
    X = [[e + p for e, p in zip(W_emb[s[t] - 1], W_pos[t])] for t in range(T)]  # X^(0)_t
    for lay in layers:
        Y = [seed000_layernorm([a + b for a, b in zip(X[t], seed000_attn(lay, X, X[t]))]) for t in range(T)]
        X = [seed000_layernorm([a + b for a, b in zip(Y[t], seed000_ffn(lay, Y[t]))]) for t in range(T)]
    return seed_softmax(rv_times(X[T - 1], W_une))  # G = softmax(X^(L)_T · W^une)


@SLOW
@given(seeds, st.integers(1, 2), st.integers(1, 2), st.integers(2, 4), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 4), st.integers(1, 4), st.integers(2, 5))
def test_seed000_is_encoder_stack_then_unembedding_of_the_last_column(seed, L, H, D_E, D_QK, D_VO, D_FF, T, V):
    """seeds/000's G(s) = Algorithm 7 on the last column of Algorithm 8's
    encoder stack (lines 1-8), under preset ``compact-000``.

    Correspondence (seed → spec; tokens s_t ∈ {1..V} are the spec's x[t] = s_t − 1;
    ℓ = ℓ_max = T because W^pos ∈ R^{T×D_E}):

    - W^emb ∈ R^{V×D_E} (rows are tokens)       → W_e = (W^emb)ᵀ ∈ R^{D_E×V}
    - W^pos ∈ R^{T×D_E}                         → W_p = (W^pos)ᵀ
    - W_Q^{(ℓ,h)}, W_K^{(ℓ,h)} ∈ R^{D_E×D_QK}   → W^h_q = (W_Q^{(ℓ,h)})ᵀ, W^h_k = (W_K^{(ℓ,h)})ᵀ,
      d_attn = D_QK, so the score z W_Q W_Kᵀ x_tᵀ / √D_QK is (W^h_q z)ᵀ(W^h_k x_t)/√d_attn
    - W_V^{(ℓ,h)} ∈ R^{D_E×D_VO}                → W^h_v = (W_V^{(ℓ,h)})ᵀ, d_mid = D_VO
    - W_O^{(ℓ,h)} ∈ R^{D_E×D_VO}: Σ_h (a X W_V) W_Oᵀ = Σ_h W_O^{(h)} y^h (as columns)
      = [W_O^{(1)} … W_O^{(H)}] [y^1; …; y^H], so W_o = [W_O^{(1)} … W_O^{(H)}] ∈ R^{D_E×H·D_VO}
      (horizontal concatenation; Algorithm 5's stacking of the heads)
    - no attention biases (b_q, b_k, b_v, b_o absent: attn_bias=False)
    - W_FF1, b_FF1, W_FF2, b_FF2 (already in column form in eq. 5) → W_mlp1, b_mlp1, W_mlp2, b_mlp2
    - LayerNorm of eq. (2): biased variance, no ε, no γ/β (affine="none"), post-LN (eq. 6)
    - bidirectional: attn(X^{(ℓ−1)}, X_t) attends to every row of X (Mask ≡ 1)
    - W^une ∈ R^{D_E×V}: X_T W^une = (W_u X[:, T−1])ᵀ with W_u = (W^une)ᵀ ∈ R^{V×D_E}
    """
    rng = random.Random(seed)
    W_emb = matrix(rng, V, D_E, 1.0)
    W_pos = matrix(rng, T, D_E, 1.0)
    layers = []
    for _ in range(L):
        layers.append({
            "W_Q": [weight(rng, D_E, D_QK) for _ in range(H)],
            "W_K": [weight(rng, D_E, D_QK) for _ in range(H)],
            "W_V": [weight(rng, D_E, D_VO) for _ in range(H)],
            "W_O": [weight(rng, D_E, D_VO) for _ in range(H)],
            "W_FF1": weight(rng, D_FF, D_E), "b_FF1": vector(rng, D_FF, -0.5, 0.5),
            "W_FF2": weight(rng, D_E, D_FF), "b_FF2": vector(rng, D_E, -0.5, 0.5),
        })
    W_une = weight(rng, D_E, V)
    s = [rng.randint(1, V) for _ in range(T)]

    with mpmath.workdps(DPS):
        want = seed000_G(s, mp(W_emb), mp(W_pos), [{k: mp(v) for k, v in lay.items()} for lay in layers],
                         mp(W_une))

    variant = PRESETS["compact-000"]
    spec_layers = [
        LayerParams(
            attn=MHAttentionParams(
                heads=tuple(AttentionParams(W_q=transpose(lay["W_Q"][h]), b_q=None,
                                            W_k=transpose(lay["W_K"][h]), b_k=None,
                                            W_v=transpose(lay["W_V"][h]), b_v=None) for h in range(H)),
                W_o=[sum((lay["W_O"][h][i] for h in range(H)), []) for i in range(D_E)],
                b_o=None),
            gamma1=None, beta1=None,
            W_mlp1=lay["W_FF1"], b_mlp1=lay["b_FF1"], W_mlp2=lay["W_FF2"], b_mlp2=lay["b_FF2"],
            gamma2=None, beta2=None)
        for lay in layers]
    N = MpNumbers(40)
    with using(N):
        X = embed([v - 1 for v in s], to_numbers(transpose(W_emb), N), to_numbers(transpose(W_pos), N),
                  variant=variant)  # Algorithm 8, lines 1-3
        for lay in spec_layers:  # lines 4-8
            X = encoder_layer(X, to_numbers(lay, N), variant=variant)
        got = unembedding([row[T - 1] for row in X], to_numbers(transpose(W_une), N))  # Algorithm 7
    with mpmath.workdps(DPS):
        assert_close(got, want)


# ==========================================================================
# seeds/002: Thickstun's transformer block, eqs. (1)-(8) (rows x_i ∈ R^d)
# ==========================================================================


def thickstun_layernorm(z: list, g: Any, b: Any) -> list:
    """Eqs. (7)-(8): γ (z − μ_z)/σ_z + β, σ_z with 1/k. γ, β scalars (eq. 4)
    or vectors (eq. 7), applied elementwise."""
    k = len(z)
    mu = mpmath.fsum(z) / k
    sigma = mpmath.sqrt(mpmath.fsum((v - mu) ** 2 for v in z) / k)
    gs = g if isinstance(g, list) else [g] * k
    bs = b if isinstance(b, list) else [b] * k
    return [gi * (v - mu) / sigma + bi for v, gi, bi in zip(z, gs, bs)]


def WT(W: list, x: list) -> list:
    """Wᵀ x for W ∈ R^{a×b} and x ∈ R^a."""
    return [mpmath.fsum(W[i][j] * x[i] for i in range(len(x))) for j in range(len(W[0]))]


def thickstun_block(x: list, th: dict) -> list:
    """f_θ(x) = z, eqs. (1)-(6); x ∈ R^{p×d} as a list of p rows."""
    p = len(x)
    H = len(th["W_q"])
    k = len(th["W_q"][0][0])
    Q = [[WT(th["W_q"][h], xi) for xi in x] for h in range(H)]  # eq. (1)
    K = [[WT(th["W_k"][h], xi) for xi in x] for h in range(H)]
    Vv = [[WT(th["W_v"][h], xi) for xi in x] for h in range(H)]
    u = []
    for i in range(p):
        u_prime = [mpmath.mpf(0)] * len(x[i])
        for h in range(H):
            # eq. (2): softmax over j of <Q(x_i), K(x_j)>/√k (the seed's "d-dimensional
            # vector indexed by j" is p-dimensional: j runs over the p objects)
            alpha = seed_softmax([mpmath.fsum(a * b for a, b in zip(Q[h][i], K[h][j])) / mpmath.sqrt(k)
                                  for j in range(p)])
            mix = [mpmath.fsum(alpha[j] * Vv[h][j][c] for j in range(p)) for c in range(k)]
            u_prime = [a + b for a, b in zip(u_prime, WT(th["W_c"][h], mix))]  # eq. (3)
        u.append(thickstun_layernorm([a + b for a, b in zip(x[i], u_prime)], th["g1"], th["b1"]))  # (4)
    z = []
    for i in range(p):
        z_prime = WT(th["W_2"], [max(v, mpmath.mpf(0)) for v in WT(th["W_1"], u[i])])  # eq. (5)
        z.append(thickstun_layernorm([a + b for a, b in zip(u[i], z_prime)], th["g2"], th["b2"]))  # (6)
    return z


@FAST
@given(seeds, st.integers(1, 2), st.integers(2, 4), st.integers(1, 3), st.integers(1, 4), st.integers(1, 4),
       st.booleans())
def test_seed002_block_is_encoder_layer(seed, H, d, k, m, p, scalar_affine):
    """seeds/002's transformer block f_θ = ``encoder_layer`` under ``thickstun-002``.

    Correspondence (x ∈ R^{p×d} has objects as rows; the spec's Z = xᵀ):

    - W_{h,q}, W_{h,k}, W_{h,v} ∈ R^{d×k} (Q(x_i) = Wᵀ x_i) → W^h_q = W_{h,q}ᵀ, W^h_k = W_{h,k}ᵀ,
      W^h_v = W_{h,v}ᵀ; d_attn = d_mid = k, scores divided by √k = √d_attn
    - W_{c,h} ∈ R^{k×d}: u'_i = Σ_h W_{c,h}ᵀ (…) → W_o = [W_{c,1}ᵀ … W_{c,H}ᵀ] ∈ R^{d×H·k}
    - no attention biases (no b_o either) and no MLP biases: attn_bias=False, mlp_bias=False
    - W_1 ∈ R^{d×m}, W_2 ∈ R^{m×d} (z' = W_2ᵀ ReLU(W_1ᵀ u)) → W_mlp1 = W_1ᵀ, W_mlp2 = W_2ᵀ, d_mlp = m
    - post-LN (eqs. 4 and 6), σ with 1/k and no ε (eq. 8)
    - γ_1, β_1, γ_2, β_2 → gamma1, beta1, gamma2, beta2. The seed types them
      as scalars in R in eqs. (4) and (6) but as vectors in R^k in eq. (7); the
      spec has vectors (Algorithm 6), of which the scalar reading is the
      special case γ·1, β·1. Both readings are tested (``scalar_affine``).
    """
    rng = random.Random(seed)
    x = matrix(rng, p, d, 2.0)
    th = {
        "W_q": [weight(rng, d, k) for _ in range(H)],
        "W_k": [weight(rng, d, k) for _ in range(H)],
        "W_v": [weight(rng, d, k) for _ in range(H)],
        "W_c": [weight(rng, k, d) for _ in range(H)],
        "W_1": weight(rng, d, m), "W_2": weight(rng, m, d),
    }
    if scalar_affine:
        th.update(g1=rng.uniform(0.5, 1.5), b1=rng.uniform(-0.5, 0.5),
                  g2=rng.uniform(0.5, 1.5), b2=rng.uniform(-0.5, 0.5))
        vec = lambda c: [c] * d  # noqa: E731
    else:
        th.update(g1=gamma(rng, d), b1=vector(rng, d, -0.5, 0.5), g2=gamma(rng, d), b2=vector(rng, d, -0.5, 0.5))
        vec = lambda c: c  # noqa: E731
    with mpmath.workdps(DPS):
        want = thickstun_block(mp(x), {k_: (mp(v) if isinstance(v, (list, float)) else v) for k_, v in th.items()})

    W = LayerParams(
        attn=MHAttentionParams(
            heads=tuple(AttentionParams(transpose(th["W_q"][h]), None, transpose(th["W_k"][h]), None,
                                        transpose(th["W_v"][h]), None) for h in range(H)),
            W_o=[sum((transpose(th["W_c"][h])[i] for h in range(H)), []) for i in range(d)],
            b_o=None),
        gamma1=vec(th["g1"]), beta1=vec(th["b1"]),
        W_mlp1=transpose(th["W_1"]), b_mlp1=None, W_mlp2=transpose(th["W_2"]), b_mlp2=None,
        gamma2=vec(th["g2"]), beta2=vec(th["b2"]))
    got = spec_mp(encoder_layer, transpose(x), W, variant=PRESETS["thickstun-002"])
    with mpmath.workdps(DPS):
        assert_close(transpose(got), want)


def thickstun_positions(p: int, d: int) -> list:
    """p ∈ R^{p×d}: p_{k,2i} = sin(k / 10000^{2i/d}), p_{k,2i+1} = cos(k / 10000^{2i/d}),
    k = 0..p−1 (Vaswani et al.'s 0-based positions) and columns 0..d−1."""
    out = []
    for kk in range(p):
        row = []
        for j in range(d):
            i = j // 2
            angle = mpmath.mpf(kk) / mpmath.power(10000, mpmath.mpf(2 * i) / d)
            row.append(mpmath.sin(angle) if j % 2 == 0 else mpmath.cos(angle))
        out.append(row)
    return out


@pytest.mark.parametrize("d", [1, 2, 3, 4, 7, 8])
@pytest.mark.parametrize("ell_max", [1, 5, 16])
def test_seed002_sinusoid_is_sinusoidal_vaswani(d, ell_max):
    """Thickstun's p ∈ R^{p×d} is ``sinusoidal_vaswani(d, ℓ_max)`` transposed
    (W_p[r, c] = p_{c, r}). For odd d the formula's last column (2i = d − 1) is
    a sine, which is the spec's decision. In binary64 the spec is within its
    own rounding bound u·e of the exact values."""
    with mpmath.workdps(DPS):
        want = thickstun_positions(ell_max, d)
    got = spec_mp(sinusoidal_vaswani, d, ell_max)
    with mpmath.workdps(DPS):
        assert_close(transpose(got), want)
    f = sinusoidal_vaswani(d, ell_max)
    with using(TrackedNumbers()):
        t = sinusoidal_vaswani(d, ell_max)
    for r in range(d):
        for c in range(ell_max):
            assert abs(f[r][c] - float(want[c][r])) <= 2 * U * t[r][c].e + 1e-300


def test_thickstun_preset_adds_these_positions():
    """Under ``thickstun-002`` the embedding (Algorithms 8-10, lines 1-3) is
    X[:, t] = W_e[:, x[t]] + p_tᵀ with p the seed's sinusoid (eq. 12 adds p to
    the token representation)."""
    rng = random.Random(5)
    d, N_V, ell_max = 4, 6, 5
    W_e = matrix(rng, d, N_V, 1.0)
    x = [3, 0, 5, 3]
    got = spec_mp(embed, x, W_e, None, ell_max=ell_max, variant=PRESETS["thickstun-002"])
    with mpmath.workdps(DPS):
        pos = thickstun_positions(ell_max, d)
        want = [[mpmath.mpf(W_e[r][x[t]]) + pos[t][r] for t in range(len(x))] for r in range(d)]
        assert_close(got, want)


# ==========================================================================
# seeds/003: the pre-LN block in named tensor notation
# ==========================================================================


class Named:
    """A named tensor: sizes of its axes and a value per index assignment.

    Index assignments are frozensets of (axis, index) pairs, so axis order
    never matters, as in the notation of Chiang, Rush and Barak."""

    def __init__(self, sizes: dict[str, int], fn: Callable[[dict[str, int]], Any]) -> None:
        self.sizes = dict(sizes)
        self.data = {}
        for idx in _assignments(self.sizes):
            self.data[frozenset(idx.items())] = fn(idx)

    def __getitem__(self, idx: dict[str, int]) -> Any:
        return self.data[frozenset((a, idx[a]) for a in self.sizes)]

    def _binary(self, other: Any, op: Callable[[Any, Any], Any]) -> "Named":
        if not isinstance(other, Named):
            return Named(self.sizes, lambda i: op(self[i], other))
        sizes = {**self.sizes, **other.sizes}
        for a in self.sizes.keys() & other.sizes.keys():
            assert self.sizes[a] == other.sizes[a], a
        return Named(sizes, lambda i: op(self[i], other[i]))

    def __add__(self, o):
        return self._binary(o, lambda a, b: a + b)

    def __sub__(self, o):
        return self._binary(o, lambda a, b: a - b)

    def __mul__(self, o):  # ⊙ (elementwise, broadcasting)
        return self._binary(o, lambda a, b: a * b)

    def __truediv__(self, o):
        return self._binary(o, lambda a, b: a / b)

    def map(self, f: Callable[[Any], Any]) -> "Named":
        return Named(self.sizes, lambda i: f(self[i]))

    def sum(self, ax: str) -> "Named":
        rest = {a: n for a, n in self.sizes.items() if a != ax}
        return Named(rest, lambda i: mpmath.fsum(self[{**i, ax: j}] for j in range(self.sizes[ax])))

    def rename(self, old: str, new: str) -> "Named":
        sizes = {(new if a == old else a): n for a, n in self.sizes.items()}
        return Named(sizes, lambda i: self[{(old if a == new else a): v for a, v in i.items()}])


def _assignments(sizes: dict[str, int]):
    axes = list(sizes)
    if not axes:
        yield {}
        return
    first, rest = axes[0], {a: sizes[a] for a in axes[1:]}
    for j in range(sizes[first]):
        for r in _assignments(rest):
            yield {first: j, **r}


def ndot(A: Named, B: Named, ax: str) -> Named:
    """A ⊙_ax B = Σ_ax A ⊙ B."""
    return (A * B).sum(ax)


def nsoftmax(X: Named, ax: str) -> Named:
    E = X.map(mpmath.exp)
    return E / E.sum(ax)


def nmean(X: Named, ax: str) -> Named:
    return X.sum(ax).map(lambda v: v / X.sizes[ax])


def standardize(X: Named, ax: str, eps: Any) -> Named:
    """(X − mean_ax X) / √(var_ax X + ε); var is the mean squared deviation (the
    seed defines mean with 1/|ax| and takes var in the same sense)."""
    C = X - nmean(X, ax)
    var = nmean(C * C, ax)
    return C / (var + eps).map(mpmath.sqrt)


def named_tensor_block(X: Named, th: dict, eps: Any) -> Named:
    """seeds/003 'A simple Transformer block' (pre-LN), axes chans, seq."""

    def layer_norm(Y: Named, g: Named, b: Named) -> Named:
        return standardize(Y, "chans", eps) * g + b

    def linear(Y: Named, W: Named, b: Named, ax: str) -> Named:  # LN_W(X) = X ⊙_ax W + b
        return ndot(Y, W, ax) + b

    def attention(Q: Named, K: Named, V: Named) -> Named:
        # (softmax_seq (Q ⊙_key K / √|key|)) ⊙_seq V
        S = ndot(Q, K, "key").map(lambda v: v / mpmath.sqrt(Q.sizes["key"]))
        return ndot(nsoftmax(S, "seq"), V, "seq")

    def self_attention(Y: Named) -> Named:
        # the query gets its own axis seq' so that each position attends over seq
        Q = linear(Y, th["W_Q"], th["b_Q"], "chans").rename("seq", "seq'")
        K = linear(Y, th["W_K"], th["b_K"], "chans")
        V = linear(Y, th["W_V"], th["b_V"], "chans")
        return attention(Q, K, V).rename("seq'", "seq")

    def ffn(Y: Named) -> Named:
        return ndot(linear(Y, th["W_1"], th["b_1"], "chans").map(lambda v: max(v, mpmath.mpf(0))),
                    th["W_2"], "hidden") + th["b_2"]

    X1 = layer_norm(X, th["gamma_1"], th["beta_1"])
    X2 = X + self_attention(X1).rename("val", "chans")
    return X2 + ffn(layer_norm(X2, th["gamma_2"], th["beta_2"]))


def named(M: list, a: str, b: str) -> Named:
    return Named({a: len(M), b: len(M[0])}, lambda i: mpmath.mpf(M[i[a]][i[b]]))


def named_vec(v: list, a: str) -> Named:
    return Named({a: len(v)}, lambda i: mpmath.mpf(v[i[a]]))


@FAST
@given(seeds, st.integers(2, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 4))
def test_seed003_block_is_pre_ln_encoder_layer(seed, chans, seq, key, hidden):
    """seeds/003's pre-LN block Y = ``encoder_layer`` under ``named-tensor-003``
    with one head, W_o = I and b_o = 0.

    Correspondence (X ∈ R^{chans×seq} is the spec's Z with rows = chans):

    - W_Q, W_K ∈ R^{chans×key}, X ⊙_chans W_Q + b_Q → W_q = W_Qᵀ, b_q = b_Q (d_attn = |key|), same for K
    - W_V ∈ R^{chans×val}, |val| = |chans| → W_v = W_Vᵀ, b_v = b_V (d_mid = d_e)
    - the seed's block has no output projection (SelfAttention's val axis is
      renamed to chans): in Algorithm 5's terms H = 1, W_o = I, b_o = 0
    - W_1 ∈ R^{chans×hidden}, W_2 ∈ R^{hidden×chans} → W_mlp1 = W_1ᵀ, W_mlp2 = W_2ᵀ; b_1, b_2 as they are
    - the two LayerNorms (γ, β ∈ R^chans each; the seed does not say whether
      they share parameters, so they get their own) → γ^1, β^1 and γ^2, β^2
    - standardize: (X − mean)/√(var + ε) with ε > 0 unspecified by the seed;
      the preset takes ε = 1e-5 inside the root, and so does this transcription
    - pre-LN: X_2 = X + SA(LN(X)), Y = X_2 + FFN(LN(X_2)); ReLU; no mask
    """
    rng = random.Random(seed)
    X = matrix(rng, chans, seq, 2.0)
    p = {
        "W_Q": weight(rng, chans, key), "b_Q": vector(rng, key, -0.5, 0.5),
        "W_K": weight(rng, chans, key), "b_K": vector(rng, key, -0.5, 0.5),
        "W_V": weight(rng, chans, chans), "b_V": vector(rng, chans, -0.5, 0.5),
        "W_1": weight(rng, chans, hidden), "b_1": vector(rng, hidden, -0.5, 0.5),
        "W_2": weight(rng, hidden, chans), "b_2": vector(rng, chans, -0.5, 0.5),
        "gamma_1": gamma(rng, chans), "beta_1": vector(rng, chans, -0.5, 0.5),
        "gamma_2": gamma(rng, chans), "beta_2": vector(rng, chans, -0.5, 0.5),
    }
    with mpmath.workdps(DPS):
        th = {
            "W_Q": named(p["W_Q"], "chans", "key"), "b_Q": named_vec(p["b_Q"], "key"),
            "W_K": named(p["W_K"], "chans", "key"), "b_K": named_vec(p["b_K"], "key"),
            "W_V": named(p["W_V"], "chans", "val"), "b_V": named_vec(p["b_V"], "val"),
            "W_1": named(p["W_1"], "chans", "hidden"), "b_1": named_vec(p["b_1"], "hidden"),
            "W_2": named(p["W_2"], "hidden", "chans"), "b_2": named_vec(p["b_2"], "chans"),
            "gamma_1": named_vec(p["gamma_1"], "chans"), "beta_1": named_vec(p["beta_1"], "chans"),
            "gamma_2": named_vec(p["gamma_2"], "chans"), "beta_2": named_vec(p["beta_2"], "chans"),
        }
        Y = named_tensor_block(named(X, "chans", "seq"), th, mpmath.mpf("1e-5"))
        want = [[Y[{"chans": c, "seq": t}] for t in range(seq)] for c in range(chans)]

    W = LayerParams(
        attn=MHAttentionParams(
            heads=(AttentionParams(transpose(p["W_Q"]), p["b_Q"], transpose(p["W_K"]), p["b_K"],
                                   transpose(p["W_V"]), p["b_V"]),),
            W_o=identity(chans), b_o=[0.0] * chans),
        gamma1=p["gamma_1"], beta1=p["beta_1"],
        W_mlp1=transpose(p["W_1"]), b_mlp1=p["b_1"], W_mlp2=transpose(p["W_2"]), b_mlp2=p["b_2"],
        gamma2=p["gamma_2"], beta2=p["beta_2"])
    got = spec_mp(encoder_layer, X, W, variant=PRESETS["named-tensor-003"])
    with mpmath.workdps(DPS):
        assert_close(got, want)


def test_seed_presets_are_not_the_paper_where_the_seeds_differ():
    """Control: the comparison above can tell a wrong preset. The same layer
    under post-LN (``torch-encoder-layer``, otherwise the same switches as
    ``named-tensor-003``) differs from the pre-LN result by far more than the
    tolerance of 1e-25."""
    rng = random.Random(1)
    chans, seq = 3, 3
    X = matrix(rng, chans, seq, 2.0)
    W = LayerParams(
        attn=MHAttentionParams(heads=(AttentionParams(weight(rng, 2, chans), [0.1, 0.2], weight(rng, 2, chans),
                                                      [0.0, 0.3], weight(rng, chans, chans), [0.1] * chans),),
                               W_o=identity(chans), b_o=[0.0] * chans),
        gamma1=[1.0] * chans, beta1=[0.0] * chans, W_mlp1=weight(rng, 2, chans), b_mlp1=[0.1, 0.1],
        W_mlp2=weight(rng, chans, 2), b_mlp2=[0.0] * chans, gamma2=[1.0] * chans, beta2=[0.0] * chans)
    pre = encoder_layer(X, W, variant=PRESETS["named-tensor-003"])
    post = encoder_layer(X, W, variant=PRESETS["torch-encoder-layer"])
    assert max(abs(a - b) for a, b in zip(leaves(pre), leaves(post))) > 1e-2
    assert math.isfinite(sum(leaves(pre)))
