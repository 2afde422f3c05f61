"""Algorithms 3-5 related to one another, the masks, permutation
equivariance, and the documented behaviours for a query with nothing to
attend to.

Exact equalities. The spec's binary64 mode rounds every product once and
every sum once (``math.fsum``, correctly rounded, so independent of the
order of its terms). Two evaluations that form the same products and sum
the same multisets of them - up to extra terms that are exactly ±0 -
therefore agree exactly, and the tests below say so with ``==`` rather than
a tolerance wherever that reasoning applies (the docstring says why).
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import (
    SpecError,
    attention,
    basic_single_query_attention,
    bert_layer,
    encoder_layer,
    evaluate,
    mh_attention,
    unidirectional_mask,
)
from ftspec.spec.params import MHAttentionParams
from ftspec.spec.variants import PAPER

from .helpers import (
    FAST,
    U,
    attention_params,
    case,
    columns,
    identity,
    layer_params,
    matrix,
    mh_params,
    same_values,
    seeds,
)

ATTENTION_VARIANTS = [
    PAPER.replace(attn_scale=s, scale_placement=p, attn_bias=b)
    for s, p, b in itertools.product(("sqrt_d_attn", "sqrt_d_model", "none"),
                                     ("scores", "query", "query_key_sqrt"), (True, False))
]
variants = st.sampled_from(ATTENTION_VARIANTS)
dims = st.integers(1, 4)
lengths = st.integers(1, 4)


def ones(m: int, n: int) -> list[list[int]]:
    return [[1] * n for _ in range(m)]


def permute_columns(A, perm):
    return [[row[p] for p in perm] for row in A]


# --------------------------------------------------------------------------
# Algorithm 3 is one column of Algorithm 4
# --------------------------------------------------------------------------


@FAST
@given(seeds, dims, dims, dims, lengths, variants)
def test_basic_attention_is_one_column_of_attention(seed, d_in, d_attn, d_out, T, variant):
    """Algorithm 3 (e; e_1..e_T) = Algorithm 4 (X = [e], Z = E = [e_1 … e_T], Mask ≡ 1).

    Same W_q, b_q, W_k, b_k, W_v, b_v; d_x = d_z = d_in, so every attn_scale
    divisor (√d_attn, √d_model = √d_in, none) and every scale placement is
    the same on both sides. Exact: line by line the two form the same
    products and fsum them (qᵀk_t is the dot of the same two vectors, and
    Σ_t α_t v_t is Ṽ = V·softmax(…) for the single column).
    """
    rng = random.Random(seed)
    W = attention_params(rng, d_in, d_in, d_attn, d_out, variant.attn_bias)
    e = [rng.uniform(-2, 2) for _ in range(d_in)]
    E = matrix(rng, d_in, T, 2.0)
    v3 = basic_single_query_attention(e, E, W, variant=variant)
    V4 = attention([[x] for x in e], E, W, ones(T, 1), variant=variant)
    assert v3 == [row[0] for row in V4]
    # the same through the registry, with flat parameters
    flat = {k: v for k, v in vars(W).items() if v is not None}
    r3 = evaluate("basic_single_query_attention", {"e": e, "E": E}, flat, variant=variant)["v_tilde"]
    assert r3 == v3


@FAST
@given(seeds, dims, dims, dims, lengths, lengths, variants)
def test_masked_attention_is_basic_attention_over_the_allowed_keys(seed, d_x, d_attn, d_out, ell_x, ell_z, variant):
    """Column t_x of Attention(X, Z | Mask) is Algorithm 3 with e = X[:, t_x]
    and context the columns t_z of Z with Mask[t_z, t_x] = 1 (line 5: masked
    scores are −∞, so their weights are exactly 0 and drop out of every sum)."""
    rng = random.Random(seed)
    d_z = d_x  # Algorithm 3 has one input width
    W = attention_params(rng, d_x, d_z, d_attn, d_out, variant.attn_bias)
    X, Z = matrix(rng, d_x, ell_x, 2.0), matrix(rng, d_z, ell_z, 2.0)
    Mask = [[rng.random() < 0.6 for _ in range(ell_x)] for _ in range(ell_z)]
    for tx in range(ell_x):  # every query keeps at least one key
        Mask[rng.randrange(ell_z)][tx] = True
    out = attention(X, Z, W, Mask, variant=variant)
    for tx in range(ell_x):
        keep = [tz for tz in range(ell_z) if Mask[tz][tx]]
        E = [[row[tz] for tz in keep] for row in Z]
        want = basic_single_query_attention([row[tx] for row in X], E, W, variant=variant)
        assert [row[tx] for row in out] == want


# --------------------------------------------------------------------------
# Algorithm 5 with one head and W_o = I is Algorithm 4
# --------------------------------------------------------------------------


@FAST
@given(seeds, dims, dims, dims, dims, lengths, lengths, variants)
def test_one_head_with_identity_output_is_attention(seed, d_x, d_z, d_attn, d_mid, ell_x, ell_z, variant):
    """MHAttention(X, Z | {W^1}, W_o = I, b_o = 0, Mask) = Attention(X, Z | W^1, Mask).

    Exact: line 3 stacks a single head, and line 4 forms (I Y)[i, t] as the
    fsum of Y[i, t]·1 and terms ±0, then adds b_o[i] = 0."""
    rng = random.Random(seed)
    head = attention_params(rng, d_x, d_z, d_attn, d_mid, variant.attn_bias)
    W = MHAttentionParams(heads=(head,), W_o=identity(d_mid),
                          b_o=[0.0] * d_mid if variant.attn_bias else None)
    X, Z = matrix(rng, d_x, ell_x, 2.0), matrix(rng, d_z, ell_z, 2.0)
    Mask = unidirectional_mask(ell_z, ell_x) if ell_z == ell_x else ones(ell_z, ell_x)
    assert same_values(mh_attention(X, Z, W, Mask, variant=variant), attention(X, Z, head, Mask, variant=variant))


@FAST
@given(seeds, st.integers(1, 3), dims, dims, lengths)
def test_heads_are_stacked_in_order(seed, H, d_attn, d_mid, ell):
    """Line 3 stacks head h in rows h·d_mid … (h+1)·d_mid − 1 (head 1 on top):
    with W_o = I the output is exactly the heads' outputs, one under another."""
    rng = random.Random(seed)
    d = 3
    W = mh_params(rng, H, d, d, d_attn, d_mid, H * d_mid)
    W = MHAttentionParams(W.heads, identity(H * d_mid), [0.0] * (H * d_mid))
    X = matrix(rng, d, ell, 2.0)
    out = mh_attention(X, X, W, ones(ell, ell))
    want = [row for head in W.heads for row in attention(X, X, head, ones(ell, ell))]
    assert same_values(out, want)


# --------------------------------------------------------------------------
# permutation equivariance (no mask, no positions)
# --------------------------------------------------------------------------


@FAST
@given(seeds, dims, dims, st.integers(1, 5), variants, st.randoms(use_true_random=False))
def test_self_attention_is_permutation_equivariant(seed, d, d_attn, ell, variant, prng):
    """Attention(Xπ, Xπ | W, Mask ≡ 1) = Attention(X, X | W, Mask ≡ 1)π.

    Permuting tokens permutes the columns of Q, K, V, rows and columns of S,
    and nothing else: each output is an fsum over the same multiset of
    products, so the equality is exact."""
    rng = random.Random(seed)
    W = attention_params(rng, d, d, d_attn, d, variant.attn_bias)
    X = matrix(rng, d, ell, 2.0)
    perm = list(range(ell))
    prng.shuffle(perm)
    got = attention(permute_columns(X, perm), permute_columns(X, perm), W, ones(ell, ell), variant=variant)
    assert same_values(got, permute_columns(attention(X, X, W, ones(ell, ell), variant=variant), perm))


@FAST
@given(seeds, dims, dims, lengths, st.integers(1, 5), st.randoms(use_true_random=False))
def test_attention_ignores_the_order_of_the_context(seed, d, d_attn, ell_x, ell_z, prng):
    """Attention(X, Zπ | W, Mask ≡ 1) = Attention(X, Z | W, Mask ≡ 1): the
    context is a set (Thickstun: "a transformation of a collection of
    objects, not of a sequence")."""
    rng = random.Random(seed)
    W = attention_params(rng, d, d, d_attn, d)
    X, Z = matrix(rng, d, ell_x, 2.0), matrix(rng, d, ell_z, 2.0)
    perm = list(range(ell_z))
    prng.shuffle(perm)
    assert same_values(attention(X, permute_columns(Z, perm), W, ones(ell_z, ell_x)),
                       attention(X, Z, W, ones(ell_z, ell_x)))


@FAST
@given(seeds, st.integers(1, 2), st.integers(2, 4), dims, dims, st.integers(1, 4), st.integers(1, 5),
       st.sampled_from(["encoder_layer", "bert_layer"]),
       st.sampled_from([PAPER, PAPER.replace(norm_placement="pre", norm="rms_norm"),
                        PAPER.replace(activation="gelu_tanh", epsilon=1e-5, epsilon_placement="inside_root")]),
       st.randoms(use_true_random=False))
def test_bidirectional_layers_are_permutation_equivariant(seed, H, d_e, d_attn, d_mid, d_mlp, ell, which, variant,
                                                           prng):
    """encoder_layer and bert_layer (Mask ≡ 1, per-column norms and MLP)
    commute with permuting the tokens, exactly (see the module docstring)."""
    rng = random.Random(seed)
    W = layer_params(rng, H, d_e, d_attn, d_mid, d_mlp, variant)
    f = encoder_layer if which == "encoder_layer" else bert_layer
    X = matrix(rng, d_e, ell, 2.0)
    perm = list(range(ell))
    prng.shuffle(perm)
    assert same_values(f(permute_columns(X, perm), W, variant=variant),
                       permute_columns(f(X, W, variant=variant), perm))


@FAST
@given(seeds, st.integers(1, 5), st.sampled_from([PAPER, PAPER.replace(embedding_norm=True)]),
       st.randoms(use_true_random=False))
def test_e_transformer_without_positions_is_permutation_equivariant(seed, ell, base, prng):
    """Algorithm 9 with positions="none": P(xπ) = P(x)π (BERT without
    positions sees a bag of tokens)."""
    variant = base.replace(positions="none")
    inputs, params, hyper = case("e_transformer", variant, seed, ell=ell, ell_max=5, L=2)
    x = inputs["x"]
    perm = list(range(ell))
    prng.shuffle(perm)
    P = evaluate("e_transformer", {"x": x}, params, hyper=hyper, variant=variant)["P"]
    Pp = evaluate("e_transformer", {"x": [x[p] for p in perm]}, params, hyper=hyper, variant=variant)["P"]
    assert same_values(Pp, permute_columns(P, perm))


def test_learned_positions_break_permutation_equivariance():
    """Control: with learned positions the same check fails (so the test above can fail)."""
    inputs, params, hyper = case("e_transformer", PAPER, 7, ell=3, ell_max=3, N_V=5)
    x = [0, 1, 2]
    perm = [2, 0, 1]
    P = evaluate("e_transformer", {"x": x}, params, hyper=hyper)["P"]
    Pp = evaluate("e_transformer", {"x": [x[p] for p in perm]}, params, hyper=hyper)["P"]
    assert not same_values(Pp, permute_columns(P, perm))


# --------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------


@given(st.integers(1, 6), st.integers(1, 6))
def test_unidirectional_mask_definition(ell_z, ell_x):
    """Mask[t_z, t_x] = [[t_z ≤ t_x]] (top-left, paper) and [[t_z ≤ t_x + ℓ_z − ℓ_x]]
    (bottom-right); the two coincide when ℓ_z = ℓ_x."""
    tl = unidirectional_mask(ell_z, ell_x)
    br = unidirectional_mask(ell_z, ell_x, variant=PAPER.replace(causal_alignment="bottom_right"))
    assert len(tl) == ell_z and all(len(r) == ell_x for r in tl)
    for tz in range(ell_z):
        for tx in range(ell_x):
            assert tl[tz][tx] == (1 if tz <= tx else 0)
            assert br[tz][tx] == (1 if tz <= tx + ell_z - ell_x else 0)
    if ell_z == ell_x:
        assert tl == br
    via_registry = evaluate("unidirectional_mask", hyper={"ell_z": ell_z, "ell_x": ell_x})["Mask"]
    assert via_registry == tl


# --------------------------------------------------------------------------
# a query with nothing to attend to (Algorithm 4 line 6 gives 0/0)
# --------------------------------------------------------------------------


def _empty_query_case(seed: int):
    rng = random.Random(seed)
    d_x, d_z, d_attn, d_out, ell_x, ell_z = 3, 2, 2, 3, 3, 4
    W = attention_params(rng, d_x, d_z, d_attn, d_out)
    X, Z = matrix(rng, d_x, ell_x, 2.0), matrix(rng, d_z, ell_z, 2.0)
    Mask = [[1] * ell_x for _ in range(ell_z)]
    empty = rng.randrange(ell_x)
    for tz in range(ell_z):
        Mask[tz][empty] = 0
    return W, X, Z, Mask, empty


@FAST
@given(seeds)
def test_empty_query_error_is_refused(seed):
    W, X, Z, Mask, empty = _empty_query_case(seed)
    with pytest.raises(SpecError) as info:
        attention(X, Z, W, Mask)
    assert info.value.argument == "Mask" and info.value.algorithm == "attention"
    assert f"t_x={empty}" in str(info.value)


@FAST
@given(seeds, st.sampled_from(["nan", "zeros", "uniform"]))
def test_empty_query_variants(seed, how):
    """nan: that column is NaN; zeros: weights 0, so the column is 0 (after
    W_o in Algorithm 5: b_o); uniform: weight 1/ℓ_z on every key, so the
    column is the mean of V's columns, V = W_v Z + b_v 1ᵀ. The other columns
    are those of ordinary attention."""
    W, X, Z, Mask, empty = _empty_query_case(seed)
    v = PAPER.replace(empty_query=how)
    out = attention(X, Z, W, Mask, variant=v)
    ell_x, ell_z = len(X[0]), len(Z[0])
    others = [t for t in range(ell_x) if t != empty]
    # the other columns: attention of those queries alone, with the full mask
    rest = attention([[row[t] for t in others] for row in X], Z, W, ones(ell_z, len(others)))
    assert same_values([[row[t] for t in others] for row in out], rest)
    col = [row[empty] for row in out]
    if how == "nan":
        assert all(math.isnan(x) for x in col)
    elif how == "zeros":
        assert col == [0.0] * len(col)
    else:
        V = [[math.fsum(w * z for w, z in zip(W.W_v[i], colz)) + W.b_v[i] for colz in columns(Z)]
             for i in range(len(W.W_v))]
        for i, x in enumerate(col):
            mean = math.fsum(V[i]) / ell_z
            # products with fl(1/ℓ_z) and one fsum: |Δ| ≤ 3u Σ|V_i|/ℓ_z
            assert abs(x - mean) <= 3 * U * math.fsum(abs(y) for y in V[i]) / ell_z


@FAST
@given(seeds, st.sampled_from(["nan", "zeros", "uniform"]))
def test_empty_query_variants_after_output_projection(seed, how):
    """In Algorithm 5 the empty column becomes W_o·(NaN) = NaN, W_o·0 + b_o = b_o,
    or W_o·(mean of each head's V) + b_o."""
    rng = random.Random(seed)
    W = mh_params(rng, 2, 3, 2, 2, 2, 3)
    _, X, Z, Mask, empty = _empty_query_case(seed)
    v = PAPER.replace(empty_query=how)
    col = [row[empty] for row in mh_attention(X, Z, W, Mask, variant=v)]
    if how == "nan":
        assert all(math.isnan(x) for x in col)
    elif how == "zeros":
        assert col == W.b_o
    else:
        Ys = [row[empty] for h in W.heads for row in attention(X, Z, h, Mask, variant=v)]
        want = [math.fsum(w * y for w, y in zip(W.W_o[i], Ys)) + W.b_o[i] for i in range(len(W.W_o))]
        assert col == want


def test_empty_query_through_the_registry():
    """evaluate() lets the NaN column of empty_query="nan" through (it
    refuses every other non-finite output)."""
    W, X, Z, Mask, empty = _empty_query_case(3)
    flat = {k: v for k, v in vars(W).items() if v is not None}
    out = evaluate("attention", {"X": X, "Z": Z, "Mask": Mask}, flat,
                   variant=PAPER.replace(empty_query="nan"))["V_tilde"]
    assert all(math.isnan(row[empty]) for row in out)
    with pytest.raises(SpecError):
        evaluate("attention", {"X": X, "Z": Z, "Mask": Mask}, flat)
