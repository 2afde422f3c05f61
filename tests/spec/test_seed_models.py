"""The whole models of seeds 000 and 002, transcribed from their text, are the
registry entry ``next_token_encoder`` under their presets.

tests/spec/test_seeds.py checks the seeds' parts (a layer, a block, the
sinusoid); here each document's complete next-token predictor, from token
IDs to the output distribution, is compared with the entry's reference
(``evaluate``, so its parameter schema and flat names are checked too) in
``MpNumbers(40)``, the transcription in mpmath at 50 digits, to 1e-25 (see
test_seeds.py's docstring for why that separates mathematics from rounding).
The transcriptions are test_seeds.py's (``seed000_G``, ``thickstun_block``,
``thickstun_positions``), written from the documents and not from ``spec/``.
"""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import MpNumbers, embed, encoder_layer, evaluate, unembedding
from ftspec.spec.params import AttentionParams, DTransformerParams, LayerParams, MHAttentionParams, to_flat
from ftspec.spec.variants import PRESETS

from .helpers import SLOW, gamma, matrix, seeds, transpose, vector, weight
from .test_seeds import DPS, assert_close, mp, seed000_G, seed_softmax, thickstun_block, thickstun_positions

ENTRY = "next_token_encoder"


def _heads_side_by_side(blocks: list[list[list[float]]]) -> list[list[float]]:
    """[B_1 … B_H] for H matrices of the same number of rows (Algorithm 5's W_o)."""
    return [sum((b[i] for b in blocks), []) for i in range(len(blocks[0]))]


def _spec(flat: dict, x: list[int], hyper: dict, preset: str) -> list:
    """The entry's p in MpNumbers(40)."""
    return evaluate(ENTRY, {"x": x}, flat, hyper=hyper, variant=PRESETS[preset], numbers=MpNumbers(40))["p"]


# ==========================================================================
# seed 000: G(s), eq. (6)
# ==========================================================================


@SLOW
@given(seeds, st.integers(1, 2), st.integers(1, 2), st.integers(2, 4), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 4), st.integers(1, 4), st.integers(2, 5))
def test_seed000_G_is_next_token_encoder(seed, L, H, D_E, D_QK, D_VO, D_FF, T, V):
    """seed 000's p = G(s) (eq. 6) = ``next_token_encoder`` under ``compact-000``.

    Correspondence (test_seeds.py's, for the whole model): x[t] = s_t − 1
    (tokens 1..V), ℓ = ℓ_max = T; W_e = (W^emb)ᵀ, W_p = (W^pos)ᵀ; per layer
    W^h_q = (W_Q^{(ℓ,h)})ᵀ, W^h_k = (W_K^{(ℓ,h)})ᵀ, W^h_v = (W_V^{(ℓ,h)})ᵀ
    (d_attn = D_QK, d_mid = D_VO), W_o = [W_O^{(ℓ,1)} … W_O^{(ℓ,H)}], no
    attention biases, W_mlp1/2 = W_FF1/2 and b_mlp1/2 = b_FF1/2 as written
    (eq. 5 is in column form); LayerNorm without γ, β or ε; W_u = (W^une)ᵀ.
    G reads the last row X^(L)_T, the entry the last column X[:, ℓ−1].
    """
    rng = random.Random(seed)
    W_emb, W_pos = matrix(rng, V, D_E, 1.0), matrix(rng, T, D_E, 1.0)
    layers = [{"W_Q": [weight(rng, D_E, D_QK) for _ in range(H)], "W_K": [weight(rng, D_E, D_QK) for _ in range(H)],
               "W_V": [weight(rng, D_E, D_VO) for _ in range(H)], "W_O": [weight(rng, D_E, D_VO) for _ in range(H)],
               "W_FF1": weight(rng, D_FF, D_E), "b_FF1": vector(rng, D_FF, -0.5, 0.5),
               "W_FF2": weight(rng, D_E, D_FF), "b_FF2": vector(rng, D_E, -0.5, 0.5)} for _ in range(L)]
    W_une = weight(rng, D_E, V)
    s = [rng.randint(1, V) for _ in range(T)]
    with mpmath.workdps(DPS):
        want = seed000_G(s, mp(W_emb), mp(W_pos), [{k: mp(v) for k, v in lay.items()} for lay in layers], mp(W_une))

    theta = DTransformerParams(
        W_e=transpose(W_emb), W_p=transpose(W_pos),
        layers=tuple(LayerParams(
            attn=MHAttentionParams(
                heads=tuple(AttentionParams(transpose(lay["W_Q"][h]), None, transpose(lay["W_K"][h]), None,
                                            transpose(lay["W_V"][h]), None) for h in range(H)),
                W_o=_heads_side_by_side(lay["W_O"]), b_o=None),
            gamma1=None, beta1=None, W_mlp1=lay["W_FF1"], b_mlp1=lay["b_FF1"], W_mlp2=lay["W_FF2"],
            b_mlp2=lay["b_FF2"], gamma2=None, beta2=None) for lay in layers),
        gamma=None, beta=None, W_u=transpose(W_une))
    hyper = dict(N_V=V, ell_max=T, L=L, H=H, d_e=D_E, d_attn=D_QK, d_mid=D_VO, d_mlp=D_FF, ell=T)
    got = _spec(to_flat(theta), [v - 1 for v in s], hyper, "compact-000")
    with mpmath.workdps(DPS):
        assert_close(got, want)


# ==========================================================================
# seed 002: eq. (12) input, L blocks (eqs. 1-8), eq. (9) at the p'th output
# ==========================================================================


def thickstun_model(tokens: list[int], V: int, W_x: list, W_zx: list, blocks: list[dict], W_z: list) -> list:
    """ŷ = softmax(W_zᵀ z) (eq. 9) with z ≡ f_{θ_L} ∘ … ∘ f_{θ_1}(z⁰)_p, the p'th (last) output
    ("language applications typically use a single output"), and the input of eq. (12),
    z⁰_k = W_zxᵀ ReLU(W_xᵀ x_k) + p_k, for one-hot tokens x_k = e_{v_k} ∈ R^V (dim(x) = V) and the
    sinusoid p of the same section (rows k = 0..p−1; eq. 12 writes x_1 where x_k is meant)."""
    pos = thickstun_positions(len(tokens), len(W_zx[0]))
    x = []
    for k, v in enumerate(tokens):
        onehot = [mpmath.mpf(int(j == v)) for j in range(V)]
        h = [max(sum(W_x[i][c] * onehot[i] for i in range(V)), mpmath.mpf(0)) for c in range(len(W_x[0]))]
        x.append([mpmath.fsum(W_zx[c][j] * h[c] for c in range(len(h))) + pos[k][j] for j in range(len(W_zx[0]))])
    for th in blocks:  # a transformer: f_{θ_L} ∘ … ∘ f_{θ_1}
        x = thickstun_block(x, th)
    z = x[-1]
    return seed_softmax([mpmath.fsum(W_z[i][o] * z[i] for i in range(len(z))) for o in range(len(W_z[0]))])


def _dyadic(rng: random.Random, rows: int, cols: int, denominator: int) -> list[list[float]]:
    """Entries j / denominator, |j| ≤ denominator: products and short sums of them are exact in binary64."""
    return [[rng.randint(-denominator, denominator) / denominator for _ in range(cols)] for _ in range(rows)]


def _lookup_table(W_x: list, W_zx: list) -> list[list[float]]:
    """W_e = W_zxᵀ ReLU(W_xᵀ) ∈ R^{d×V}, column v = eq. 12's W_zxᵀ ReLU(W_xᵀ e_v), exactly (Fractions)."""
    V, m, d = len(W_x), len(W_zx), len(W_zx[0])
    out = [[sum((Fraction(W_zx[c][j]) * max(Fraction(W_x[v][c]), Fraction(0)) for c in range(m)), Fraction(0))
            for v in range(V)] for j in range(d)]
    exact = [[float(f) for f in row] for row in out]
    assert all(Fraction(a) == f for row_a, row_f in zip(exact, out) for a, f in zip(row_a, row_f))
    return exact


@SLOW
@given(seeds, st.integers(1, 2), st.integers(1, 2), st.integers(2, 4), st.integers(1, 3), st.integers(1, 4),
       st.integers(1, 4), st.integers(1, 4), st.integers(2, 5), st.integers(0, 2), st.booleans())
def test_seed002_model_is_next_token_encoder(seed, L, H, d, k, m, m_x, p, V, spare, scalar_affine):
    """seed 002's model, eq. (12) → L blocks → eq. (9) at the p'th output, = ``next_token_encoder``
    under ``thickstun-002``.

    Correspondence: the blocks as in test_seeds.py's ``test_seed002_block_is_encoder_layer``
    (W^h_q = W_{h,q}ᵀ, …, W_o = [W_{c,1}ᵀ … W_{c,H}ᵀ], W_mlp1 = W_1ᵀ, W_mlp2 = W_2ᵀ, no biases,
    d_attn = d_mid = k, d_mlp = m, γ and β scalars γ·1 or vectors), one parameter set per
    block; W_u = W_zᵀ (o = N_V = V); positions: the spec's Vaswani sinusoid, which does not
    depend on ℓ_max ≥ p (``spare``). Eq. (12)'s input is a lookup: with one-hot x_k = e_v,
    W_zxᵀ ReLU(W_xᵀ e_v) is column v of W_e = W_zxᵀ ReLU(W_xᵀ). W_x ∈ R^{V×m_x} and
    W_zx ∈ R^{m_x×d} are drawn general (dyadic, so that W_e is exact in binary64) and the spec
    gets that table; an implementation of eq. 12 itself is certified with W_x = I_V and
    W_zx = W_eᵀ (tests/tools/test_seed_certificates.py).
    """
    rng = random.Random(seed)
    W_x, W_zx = _dyadic(rng, V, m_x, 8), _dyadic(rng, m_x, d, 8)
    blocks = []
    for _ in range(L):
        th = {"W_q": [weight(rng, d, k) for _ in range(H)], "W_k": [weight(rng, d, k) for _ in range(H)],
              "W_v": [weight(rng, d, k) for _ in range(H)], "W_c": [weight(rng, k, d) for _ in range(H)],
              "W_1": weight(rng, d, m), "W_2": weight(rng, m, d)}
        if scalar_affine:
            th.update(g1=rng.uniform(0.5, 1.5), b1=rng.uniform(-0.5, 0.5), g2=rng.uniform(0.5, 1.5),
                      b2=rng.uniform(-0.5, 0.5))
        else:
            th.update(g1=gamma(rng, d), b1=vector(rng, d, -0.5, 0.5), g2=gamma(rng, d), b2=vector(rng, d, -0.5, 0.5))
        blocks.append(th)
    W_z = weight(rng, d, V)
    tokens = [rng.randrange(V) for _ in range(p)]
    with mpmath.workdps(DPS):
        want = thickstun_model(tokens, V, mp(W_x), mp(W_zx),
                               [{n: (mp(v) if isinstance(v, (list, float)) else v) for n, v in th.items()}
                                for th in blocks], mp(W_z))

    def vec(c):
        return [c] * d if scalar_affine else c

    theta = DTransformerParams(
        W_e=_lookup_table(W_x, W_zx), W_p=None,
        layers=tuple(LayerParams(
            attn=MHAttentionParams(
                heads=tuple(AttentionParams(transpose(th["W_q"][h]), None, transpose(th["W_k"][h]), None,
                                            transpose(th["W_v"][h]), None) for h in range(H)),
                W_o=_heads_side_by_side([transpose(th["W_c"][h]) for h in range(H)]), b_o=None),
            gamma1=vec(th["g1"]), beta1=vec(th["b1"]), W_mlp1=transpose(th["W_1"]), b_mlp1=None,
            W_mlp2=transpose(th["W_2"]), b_mlp2=None, gamma2=vec(th["g2"]), beta2=vec(th["b2"])) for th in blocks),
        gamma=None, beta=None, W_u=transpose(W_z))
    hyper = dict(N_V=V, ell_max=p + spare, L=L, H=H, d_e=d, d_attn=k, d_mid=k, d_mlp=m, ell=p)
    got = _spec(to_flat(theta), tokens, hyper, "thickstun-002")
    with mpmath.workdps(DPS):
        assert_close(got, want)


def test_the_entry_reads_the_last_column_of_the_encoder_not_the_first():
    """Control: the comparisons above can tell which position is read. Composed from the spec's
    own pieces (``embed``, ``encoder_layer``, ``unembedding``), Algorithm 7 on the encoder's last
    column is the entry's p to the last bit, and on its first column it differs by far more than
    the tolerance of 1e-25."""
    rng = random.Random(3)
    V, D_E, T, variant = 5, 3, 4, PRESETS["compact-000"]
    layer = LayerParams(
        attn=MHAttentionParams(heads=(AttentionParams(weight(rng, 2, D_E), None, weight(rng, 2, D_E), None,
                                                      weight(rng, 2, D_E), None),),
                               W_o=weight(rng, D_E, 2), b_o=None),
        gamma1=None, beta1=None, W_mlp1=weight(rng, 4, D_E), b_mlp1=vector(rng, 4), W_mlp2=weight(rng, D_E, 4),
        b_mlp2=vector(rng, D_E), gamma2=None, beta2=None)
    theta = DTransformerParams(W_e=matrix(rng, D_E, V), W_p=matrix(rng, D_E, T), layers=(layer,), gamma=None,
                               beta=None, W_u=weight(rng, V, D_E))
    x = [0, 4, 1, 3]
    hyper = dict(N_V=V, ell_max=T, L=1, H=1, d_e=D_E, d_attn=2, d_mid=2, d_mlp=4, ell=T)
    p = evaluate(ENTRY, {"x": x}, to_flat(theta), hyper=hyper, variant=variant)["p"]
    X = encoder_layer(embed(x, theta.W_e, theta.W_p, variant=variant), layer, variant=variant)
    assert p == unembedding([row[T - 1] for row in X], theta.W_u)
    assert max(abs(a - b) for a, b in zip(p, unembedding([row[0] for row in X], theta.W_u))) > 1e-3


# ==========================================================================
# seed 000's list of variations, each a switch under compact-000
# ==========================================================================


def _silu(v: mpmath.mpf) -> mpmath.mpf:
    """"A different nonlinearity than ReLU": SiLU/Swish, v σ(v)."""
    return v / (1 + mpmath.exp(-v))


def _relu(v: mpmath.mpf) -> mpmath.mpf:
    return max(v, mpmath.mpf(0))


def seed000_G_varied(s: list[int], W_emb: list, W_pos: list, layers: list[dict], W_une: list, *,
                     residual_ln: bool, act) -> list:
    """Eq. (6) with seed 000's variations, read from its list: "LayerNorm-ing only the changes
    ('residuals') from these two mechanisms before they are added to the hidden layer"
    (``residual_ln``: Y_t = X_t + LN(attn(X, X_t)), X_t = Y_t + LN(ffn(Y_t))); "a larger number of
    layers" in the FFN (``lay["hidden"]``: (W, b) pairs between W_FF1 and W_FF2, each act(W h + b));
    "a different nonlinearity than ReLU" (``act``)."""
    from .test_seeds import mv, rv_times, seed000_attn, seed000_layernorm

    def ffn(lay: dict, z: list) -> list:
        h = [act(v + b) for v, b in zip(mv(lay["W_FF1"], z), lay["b_FF1"])]
        for W, b in lay["hidden"]:
            h = [act(v + c) for v, c in zip(mv(W, h), b)]
        return [v + b for v, b in zip(mv(lay["W_FF2"], h), lay["b_FF2"])]

    T = len(s)
    X = [[e + p for e, p in zip(W_emb[s[t] - 1], W_pos[t])] for t in range(T)]
    for lay in layers:
        if residual_ln:
            Y = [[a + b for a, b in zip(X[t], seed000_layernorm(seed000_attn(lay, X, X[t])))] for t in range(T)]
            X = [[a + b for a, b in zip(Y[t], seed000_layernorm(ffn(lay, Y[t])))] for t in range(T)]
        else:
            Y = [seed000_layernorm([a + b for a, b in zip(X[t], seed000_attn(lay, X, X[t]))]) for t in range(T)]
            X = [seed000_layernorm([a + b for a, b in zip(Y[t], ffn(lay, Y[t]))]) for t in range(T)]
    return seed_softmax(rv_times(X[T - 1], W_une))


@SLOW
@given(seeds, st.integers(1, 2), st.integers(3, 4), st.integers(1, 3), st.integers(2, 4), st.integers(0, 2),
       st.booleans(), st.booleans(), st.booleans())
def test_seed000_variations_are_switches(seed, H, D_E, D_FF, T, extra, residual_ln, silu, fourier):
    """Each variation of seed 000's list that changes the function is a switch on top of
    ``compact-000``: ``norm_placement="res_post"`` (LayerNorm of the changes only), ``mlp_depth``
    (1 + ``extra`` hidden layers, mlp_hidden.{k}.W = the document's extra W in column form) and
    ``activation="silu"``; and the fixed "discrete Fourier transform of position",
    W_pos[2i, t] = cos(t/T^{2i/D}), W_pos[2i−1, t] = sin(t/T^{2i/D}) for i = 1..D/2 (rows and t from
    1; ``fourier``, D_E = 4), which is ``positions="sinusoidal_paper"`` with ℓ_max = T. One layer,
    D_QK = D_VO = 2, V = 3; D_E ≥ 3, since a LayerNorm over two features leaves only a sign
    (±(1, −1)) and can hide a variation."""
    rng = random.Random(seed)
    V, D_QK = 3, 2
    if fourier:
        D_E = 4
    W_emb, W_pos = matrix(rng, V, D_E, 1.0), matrix(rng, T, D_E, 1.0)
    if fourier:  # the document's rows 2i − 1 and 2i are 0-based rows 2i − 2 and 2i − 1; its t is 1-based
        W_pos = [[0.0] * D_E for _ in range(T)]
        with mpmath.workdps(DPS):  # strings at the transcription's precision (the spec computes its own)
            for t in range(1, T + 1):
                for i in range(1, D_E // 2 + 1):
                    angle = mpmath.mpf(t) / mpmath.mpf(T) ** (mpmath.mpf(2 * i) / D_E)
                    W_pos[t - 1][2 * i - 2], W_pos[t - 1][2 * i - 1] = str(mpmath.sin(angle)), str(mpmath.cos(angle))
    lay = {"W_Q": [weight(rng, D_E, D_QK) for _ in range(H)], "W_K": [weight(rng, D_E, D_QK) for _ in range(H)],
           "W_V": [weight(rng, D_E, D_QK) for _ in range(H)], "W_O": [weight(rng, D_E, D_QK) for _ in range(H)],
           "W_FF1": weight(rng, D_FF, D_E), "b_FF1": vector(rng, D_FF, -0.5, 0.5),
           "hidden": [(weight(rng, D_FF, D_FF), vector(rng, D_FF, -0.5, 0.5)) for _ in range(extra)],
           "W_FF2": weight(rng, D_E, D_FF), "b_FF2": vector(rng, D_E, -0.5, 0.5)}
    W_une = weight(rng, D_E, V)
    s = [rng.randint(1, V) for _ in range(T)]
    act = _silu if silu else _relu
    with mpmath.workdps(DPS):
        mp_lay = {k: (mp(v) if k != "hidden" else [(mp(W), mp(b)) for W, b in v]) for k, v in lay.items()}
        pos = [[mpmath.mpf(v) for v in row] for row in W_pos]  # the Fourier strings at full precision
        want = seed000_G_varied(s, mp(W_emb), pos, [mp_lay], mp(W_une), residual_ln=residual_ln, act=act)

    flat = to_flat(DTransformerParams(
        W_e=transpose(W_emb), W_p=transpose(W_pos),
        layers=(LayerParams(
            attn=MHAttentionParams(
                heads=tuple(AttentionParams(transpose(lay["W_Q"][h]), None, transpose(lay["W_K"][h]), None,
                                            transpose(lay["W_V"][h]), None) for h in range(H)),
                W_o=_heads_side_by_side(lay["W_O"]), b_o=None),
            gamma1=None, beta1=None, W_mlp1=lay["W_FF1"], b_mlp1=lay["b_FF1"], W_mlp2=lay["W_FF2"],
            b_mlp2=lay["b_FF2"], gamma2=None, beta2=None),),
        gamma=None, beta=None, W_u=transpose(W_une)))
    for k, (W, b) in enumerate(lay["hidden"]):
        flat[f"layers.0.mlp_hidden.{k}.W"], flat[f"layers.0.mlp_hidden.{k}.b"] = W, b
    variant = PRESETS["compact-000"].replace(norm_placement="res_post" if residual_ln else "post",
                                             mlp_depth=1 + extra, activation="silu" if silu else "relu")
    if fourier:
        variant = variant.replace(positions="sinusoidal_paper")
        del flat["W_p"]
    hyper = dict(N_V=V, ell_max=T, L=1, H=H, d_e=D_E, d_attn=D_QK, d_mid=D_QK, d_mlp=D_FF, ell=T)
    got = evaluate(ENTRY, {"x": [v - 1 for v in s]}, flat, hyper=hyper, variant=variant,
                   numbers=MpNumbers(40))["p"]
    with mpmath.workdps(DPS):
        assert_close(got, want)
