"""Seeds 003 and 004 as a reader would implement them from the documents, and
as ftspec plugins: seed 003's block as ``encoder_layer`` under
``named-tensor-003``, seed 004's encoder as ``embedding`` and
``encoder_layer`` under ``tutorial-004``.

Each model is written in NumPy from its document alone, in the document's
notation, with no reference to ``spec/`` or ``impls/`` numerics. The adapter
is the only place that knows ftspec: it maps ftspec's flat parameters (tokens
as columns, weights out × in, ``attn.heads.0.W_q`` ..., docs/spec.md
"Parameters and their flat names") onto the document's, and the plugin
declares the preset that names the document's conventions (the pattern of
tests/tools/seed_plugins.py, seeds 000 and 002).

**Seed 003** (Lelarge, "Transformers using Named Tensor Notation"; Chiang,
Rush and Barak's named tensors). Its "simple Transformer block" is pre-LN,
X_1 = LayerNorm(X), X_2 = X + SelfAttention(X_1), Y = X_2 +
FFN(LayerNorm(X_2)), on X ∈ R^{chans×seq}: its axes are the spec's layout
(tokens are the seq axis, the columns). It is written here with
``np.einsum``, one letter per named axis (c = chans, s = seq, t = seq', the
queries' seq axis, k = key, v = val, h = hidden), each contraction ``·_ax``
an einsum over that letter. Single head ("we omit multiple heads here"),
and no output projection: SelfAttention returns R^{val×seq} with |val| =
|chans|. The harness draws a random W_o for ftspec's layer; for one head
the adapter folds it in exactly, W_V' = (W_o W_v)ᵀ and b_V' = W_o b_v + b_o
(each attention column is a convex combination of value columns: its
weights sum to 1, so a bias on the values passes through unchanged), and
the plugin declares at most one head (``Limits(maximum={"H": 1})``). ε: the
document says only "ε > 0 small"; the plugin takes 1e-5 inside the root, the
preset's value, which is the project's choice, not the document's.

**Seed 004** (Roysdon, "Notes on Transformers (DRAFT)", the numeric
tutorial). Its encoder is the embedding E = W + P (II.D-F: the word vectors
w_k are the columns of W, the positional vectors p_k the columns of P, so
tokens are columns, as in the spec), with P from its ``posenc`` (II.E):
p(pos, 2i) = sin(pos/10000^(2i/d)), p(pos, 2i+1) = cos(pos/10000^(2i/d)),
whose MATLAB code puts the raw row index ii in the exponent
(``10000^(2*ii/d)``, Table II: cos(0/10000^(2*1/6)) in row 1), then one
encoder layer whose tables put tokens in ROWS (II.G-K): Q = A W_Q, A(1) =
Q Kᵀ, A(2) = A(1)/√d (d = 6, the model's width), A(3) the softmax of each
row, A(4) = A(3) V, the heads' A(4) concatenated times W_A (A(5)), A(6) =
A(5) + the input, η(x) = (x − μ)/(σ + ν) on each row with σ over N − 1 (its
code calls MATLAB's ``std``; its printed formula divides by N) and ν =
1e-4, F = ReLU(A(7) W_L + b_L) (one linear layer and one ReLU, no second
map: ``mlp="one_layer"``), A(8) = F + A(7), A(9) = η(A(8)), no γ or β. One
plugin implements both entries; the ``encoder_layer`` adapter transposes at
the boundary (the spec's Z has tokens as columns, the document's encoder
reads them as rows: it is given Zᵀ and its A(9) is transposed back).

The document's own numbers do not compose its two halves that way: it feeds
E, built with tokens as columns, into the row-reading encoder unchanged, so
its printed A(9) is ``encoder_layer`` of Eᵀ (tests/spec/test_seed_004.py),
a layout slip that runs only because d = ℓ = 6. No ftspec entry computes
that composition, and a plugin written that way (``seed004(as_printed=True)``:
the spec's Z passed to the row-reading encoder as it is) is not the
algorithm: the tests show it is not certified. Its decoder (A(10) flattened
into one 1×36 vector before W_v) stays inexpressible.

Both documents refuse what has no value, as ftspec's entries do: a
parameter whose shape is not the one ftspec names for the sizes (a row too
many would broadcast or be sliced away silently); seed 004 also a word
outside its vocabulary, a sequence longer than ℓ_max and η over a row of
one entry (σ over N − 1 = 0 entries).

``seed003(...)`` and ``seed004(...)`` build the plugins; their keywords plant
one departure from the document each (the tests check that the suite
refuses to certify them).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ftspec.impls.api import Context, Implementation, Limits
from ftspec.spec.variants import preset

__all__ = ["seed003", "seed004"]

Arrays = Mapping[str, np.ndarray]


# ==========================================================================
# seed 003: "Transformers using Named Tensor Notation"
# ==========================================================================

#: ε of standardize: "ε > 0 is a small constant"; the value is the project's choice (the
#: preset named-tensor-003's 1e-5, PyTorch's default), not the document's.
EPS_003 = 1e-5


def linear(X: np.ndarray, W: np.ndarray, b: np.ndarray, ax: str, bx: str) -> np.ndarray:
    """LN_W(X) = X ·_ax W + b for W ∈ R^{ax×bx}, b ∈ R^bx: X ∈ R^{ax×seq} → R^{bx×seq}."""
    return np.einsum(f"{ax}s,{ax}{bx}->{bx}s", X, W) + b[:, None]  # b broadcast over seq


def softmax_seq(S: np.ndarray) -> np.ndarray:
    """softmax over the axis seq (the last one here), exp(S)/Σ_seq exp(S); exp(S − max S) gives the
    same quotient without overflow."""
    e = np.exp(S - S.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_003(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Attention(Q, K, V) = (softmax_seq (Q ·_key K)/√|key|) ·_seq V, the query given a seq' axis:
    Q ∈ R^{key×seq'}, K ∈ R^{key×seq}, V ∈ R^{val×seq} → R^{val×seq'}."""
    S = np.einsum("kt,ks->ts", Q, K) / math.sqrt(Q.shape[0])  # (seq', seq)
    return np.einsum("ts,vs->vt", softmax_seq(S), V)  # (val, seq')


def self_attention_003(X: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """SelfAttention(X) = Attention(X ·_chans W_Q + b_Q, X ·_chans W_K + b_K, X ·_chans W_V + b_V):
    R^{chans×seq} → R^{val×seq}."""
    return attention_003(linear(X, p["W_Q"], p["b_Q"], "c", "k"), linear(X, p["W_K"], p["b_K"], "c", "k"),
                         linear(X, p["W_V"], p["b_V"], "c", "v"))


def standardize_chans(X: np.ndarray, eps: float, outside: bool = False) -> np.ndarray:
    """standardize_chans(X) = (X − mean_chans(X)) / √(var_chans(X) + ε), mean and var over chans
    (var: the mean of the squared deviations). ``outside``: a planted departure, √var + ε."""
    centred = X - X.mean(axis=0)  # (chans, seq): mean_chans ∈ R^seq, broadcast
    var = (centred ** 2).mean(axis=0)  # (seq,)
    return centred / (np.sqrt(var) + eps if outside else np.sqrt(var + eps))


def layer_norm_003(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, outside: bool) -> np.ndarray:
    """LayerNorm(X) = standardize_chans(X) ⊙ γ + β, γ, β ∈ R^chans (|layer| = 1)."""
    return standardize_chans(X, eps, outside) * gamma[:, None] + beta[:, None]


def ffn_003(X: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """FFN(X) = ReLU(X ·_chans W_1 + b_1) ·_hidden W_2 + b_2: R^{chans×seq} → R^{chans×seq}."""
    return linear(np.maximum(linear(X, p["W_1"], p["b_1"], "c", "h"), 0.0), p["W_2"], p["b_2"], "h", "c")


def block_003(X: np.ndarray, p: Mapping[str, np.ndarray], *, post: bool = False,
              eps_outside: bool = False) -> np.ndarray:
    """The simple (pre-LN) Transformer block, X ∈ R^{chans×seq}:

        X_1 = LayerNorm(X);  X_2 = X + SelfAttention(X_1)_{val→chans};  Y = X_2 + FFN(LayerNorm(X_2)).

    Renaming val → chans is free here (the first axis is both, |val| = |chans|). ``post`` and
    ``eps_outside`` are planted departures (post-LN; ε outside the root)."""
    def ln(Z: np.ndarray, k: int) -> np.ndarray:
        return layer_norm_003(Z, p[f"gamma{k}"], p[f"beta{k}"], EPS_003, eps_outside)

    if post:
        X_2 = ln(X + self_attention_003(X, p), 1)
        return ln(X_2 + ffn_003(X_2, p), 2)
    X_1 = ln(X, 1)
    X_2 = X + self_attention_003(X_1, p)
    return X_2 + ffn_003(ln(X_2, 2), p)


# ==========================================================================
# seed 004: "Notes on Transformers (DRAFT)", the numeric tutorial
# ==========================================================================

#: ν of η (II.I: "the error ν = 0.0001")
NU_004 = 1e-4


def posenc(d: int, n: int) -> np.ndarray:
    """II.E's ``posenc``: B(ii, jj) = sin(jj/10000^(2·ii/d)) for even ii, cos(jj/10000^(2·ii/d)) for
    odd ii, ii = 0..d−1 the row (the raw index, as its code writes the exponent), jj = 0..n−1 the
    position: column jj is p_{jj+1}. Its code builds d columns (d = n = 6); the text builds one
    column per input word. → (d, n)."""
    ii = np.arange(d)[:, None]  # (d, 1)
    jj = np.arange(n, dtype=np.float64)[None, :]  # (1, n)
    angle = jj / 10000.0 ** (2 * ii / d)  # (d, n)
    return np.where(ii % 2 == 0, np.sin(angle), np.cos(angle))


def embedding_004(words: np.ndarray, table: np.ndarray) -> np.ndarray:
    """II.C-F: E = W + P for the input's word numbers ``words`` (1-based, II.C): the columns of W are
    the word vectors w of those words (Table I: one column per input word), of the word table
    ``table`` (one column per word number), and P = posenc. → E (d, ℓ), a column per word."""
    vocab = table.shape[1]
    if words.size and (words.min() < 1 or words.max() > vocab):
        raise ValueError(f"a word number outside the vocabulary 1..{vocab}")
    W = table[:, words - 1]  # (d, ℓ)
    return W + posenc(table.shape[0], len(words))


def softmax_rows(A: np.ndarray) -> np.ndarray:
    """II.G: A(3)_{i,j} = e^{A(2)_{i,j}} / Σ_j e^{A(2)_{i,j}}, row by row (exp(A − max of the row)
    gives the same quotient without overflow)."""
    e = np.exp(A - A.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def eta(A: np.ndarray, ddof: int = 1, nu_inside: bool = False) -> np.ndarray:
    """II.I's η on each row i: (A_{i,j} − μ_i)/(σ_i + ν), μ_i the row's mean over its N columns, σ_i
    its standard deviation as its code's ``std`` takes it, over N − 1 (``ddof`` = 1). ``ddof=0``
    (the printed formula's N) and ``nu_inside`` (√(σ² + ν)) are planted departures."""
    n = A.shape[1]
    if n - ddof < 1:
        raise ValueError(f"η of a row of {n} entries: σ over N − {ddof} = 0 entries")
    mu = A.mean(axis=1, keepdims=True)  # (ℓ, 1)
    var = ((A - mu) ** 2).sum(axis=1, keepdims=True) / (n - ddof)  # (ℓ, 1)
    return (A - mu) / (np.sqrt(var + NU_004) if nu_inside else np.sqrt(var) + NU_004)


def encoder_004(E: np.ndarray, heads: list[tuple[np.ndarray, np.ndarray, np.ndarray]], W_A: np.ndarray,
                W_L: np.ndarray, b_L: np.ndarray, **planted: Any) -> np.ndarray:
    """II.G-K on E (ℓ, d), one token per row: → A(9) (ℓ, d). ``heads``: (W_Q, W_K, W_V) per head,
    each d × 4 in the tutorial; W_A: (h·4, d); W_L: (d, d); b_L: (d,)."""
    d = E.shape[1]  # "the dimension in this example is 6": the width of a row
    A4 = []
    for W_Q, W_K, W_V in heads:
        Q, K, V = E @ W_Q, E @ W_K, E @ W_V  # (ℓ, 4) each
        A1 = Q @ K.T  # (ℓ, ℓ)
        A2 = A1 / math.sqrt(d)
        A3 = softmax_rows(A2)
        A4.append(A3 @ V)  # (ℓ, 4): A(4,h)
    A5 = np.concatenate(A4, axis=1) @ W_A  # II.H: the heads concatenated, times W_A: (ℓ, d)
    A7 = eta(A5 + E, **planted)  # II.I: addnorm(A_5, E)
    F = np.maximum(A7 @ W_L + b_L, 0.0)  # II.J: L = A(7) W_L + b_L, F = ReLU(L)
    return eta(F + A7, **planted)  # II.K: A(8) = A(7) + F, A(9) = η(A(8))


# ==========================================================================
# the adapters: ftspec's flat parameters → the documents'
# ==========================================================================


def _count(params: Arrays, prefix: str) -> int:
    n = 0
    while any(name.startswith(f"{prefix}{n}.") for name in params):
        n += 1
    return n


def _check_shapes(params: Arrays, expect: Mapping[str, tuple[int, ...]]) -> None:
    """Refuse parameters whose names or shapes are not the ones ftspec names for these sizes."""
    if set(params) != set(expect):
        raise ValueError(f"parameters {sorted(set(params) ^ set(expect))} unexpected or missing")
    for name, array in params.items():
        if tuple(array.shape) != expect[name]:
            raise ValueError(f"{name} has shape {tuple(array.shape)}, expected {expect[name]}")


def _layer_shapes(h: Mapping[str, int], *, biases: bool, affine: bool, second_map: bool) -> dict[str, tuple]:
    d_e, d_attn, d_mid, d_mlp, H = h["d_e"], h["d_attn"], h["d_mid"], h["d_mlp"], h["H"]
    out: dict[str, tuple] = {"attn.W_o": (d_e, H * d_mid), "W_mlp1": (d_mlp, d_e), "b_mlp1": (d_mlp,)}
    for hh in range(H):
        head = f"attn.heads.{hh}."
        out.update({head + "W_q": (d_attn, d_e), head + "W_k": (d_attn, d_e), head + "W_v": (d_mid, d_e)})
        if biases:
            out.update({head + "b_q": (d_attn,), head + "b_k": (d_attn,), head + "b_v": (d_mid,)})
    if biases:
        out["attn.b_o"] = (d_e,)
    if affine:
        out.update({name: (d_e,) for name in ("gamma1", "beta1", "gamma2", "beta2")})
    if second_map:
        out.update({"W_mlp2": (d_e, d_mlp), "b_mlp2": (d_e,)})
    return out


def _per_example(x: np.ndarray, ctx: Context, one: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``one`` on each example of a batch (``ctx.batched``: a leading batch axis)."""
    return np.stack([one(example) for example in x]) if ctx.batched else one(x)


def _params_003(params: Arrays) -> dict[str, np.ndarray]:
    """W_Q = W_qᵀ, W_K = W_kᵀ (chans × key); the value map with ftspec's output projection folded
    in, W_V = (W_o W_v)ᵀ (chans × val, |val| = |chans|) and b_V = W_o b_v + b_o: exact for one head,
    since each query's attention weights sum to 1 (W_o(V A + b 1ᵀ) = (W_o V)A + W_o b 1ᵀ);
    LayerNorm's γ, β as passed (γ1, β1 the first, γ2, β2 the second); W_1 = W_mlp1ᵀ, W_2 = W_mlp2ᵀ."""
    W_o = params["attn.W_o"]  # (d_e, d_mid)
    head = "attn.heads.0."
    return {"W_Q": params[head + "W_q"].T, "b_Q": params[head + "b_q"],
            "W_K": params[head + "W_k"].T, "b_K": params[head + "b_k"],
            "W_V": (W_o @ params[head + "W_v"]).T, "b_V": W_o @ params[head + "b_v"] + params["attn.b_o"],
            "W_1": params["W_mlp1"].T, "b_1": params["b_mlp1"], "W_2": params["W_mlp2"].T, "b_2": params["b_mlp2"],
            **{name: params[name] for name in ("gamma1", "beta1", "gamma2", "beta2")}}


def _encoder_layer_003(post: bool, eps_outside: bool):
    def encoder_layer(inputs: Arrays, params: Arrays, ctx: Context) -> np.ndarray:
        if ctx.hyper["H"] != 1:
            raise ValueError("the document's block has one head ('we omit multiple heads here')")
        _check_shapes(params, _layer_shapes(ctx.hyper, biases=True, affine=True, second_map=True))
        p = _params_003(params)
        return _per_example(inputs["Z"], ctx, lambda X: block_003(X, p, post=post, eps_outside=eps_outside))
    return encoder_layer


def _heads_004(params: Arrays) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray]:
    """W_{Q,h} = (W^h_q)ᵀ, W_{K,h} = (W^h_k)ᵀ, W_{V,h} = (W^h_v)ᵀ (d × 4 in the tutorial: in × out, as
    its Q = E W_Q); W_A = W_oᵀ, whose rows take the heads' columns in order ([A(4,1) … A(4,h)] W_A)."""
    heads = [tuple(params[f"attn.heads.{h}.{w}"].T for w in ("W_q", "W_k", "W_v"))
             for h in range(_count(params, "attn.heads."))]
    return heads, params["attn.W_o"].T  # type: ignore[return-value]


def _embedding_004(inputs: Arrays, params: Arrays, ctx: Context) -> np.ndarray:
    """Word number = ftspec's token + 1 (the tutorial numbers words from 1, II.C); the table's columns
    are ftspec's W_e's (the word vectors are columns, Table I)."""
    h = ctx.hyper
    _check_shapes(params, {"W_e": (h["d_e"], h["N_V"])})
    x = inputs["x"]
    if x.shape[-1] > h["ell_max"]:
        raise ValueError(f"a sequence of {x.shape[-1]} words; ell_max = {h['ell_max']}")
    return _per_example(x, ctx, lambda words: embedding_004(words + 1, params["W_e"]))


def _encoder_layer_004(planted: Mapping[str, Any], as_printed: bool):
    def encoder_layer(inputs: Arrays, params: Arrays, ctx: Context) -> np.ndarray:
        """The spec's Z (d, ℓ) is the tutorial's input with tokens as rows, Zᵀ; A(9) back as A(9)ᵀ.
        W_L = W_mlp1ᵀ (d × d: d_mlp = d_e), b_L = b_mlp1. ``as_printed``: Z passed unchanged, the
        composition the tutorial's own numbers make (E fed to the encoder as it was built)."""
        _check_shapes(params, _layer_shapes(ctx.hyper, biases=False, affine=False, second_map=False))
        heads, W_A = _heads_004(params)
        W_L, b_L = params["W_mlp1"].T, params["b_mlp1"]

        def one(Z: np.ndarray) -> np.ndarray:
            if as_printed:
                return encoder_004(Z, heads, W_A, W_L, b_L, **planted)
            return encoder_004(Z.T, heads, W_A, W_L, b_L, **planted).T

        return _per_example(inputs["Z"], ctx, one)
    return encoder_layer


def _implementation(name: str, algorithms: dict, variant: str, limits: Limits = Limits()) -> Implementation:
    return Implementation(
        name=name, version="0.1.0", algorithms=algorithms, dtypes=("float64",),
        devices=lambda: ["cpu"], from_numpy=lambda a, dtype, device: np.array(a, dtype=dtype, copy=True),
        to_numpy=lambda a: np.array(a, copy=True), variants=[preset(variant)], limits=limits,
        description=f"the document's model, under {variant}")


def seed003(*, post: bool = False, eps_outside: bool = False) -> Implementation:
    """Seed 003's block under ``named-tensor-003``, one head. ``post=True``: post-LN;
    ``eps_outside=True``: ε added to √var (both departures from the document)."""
    planted = [k for k, v in (("post", post), ("eps-outside", eps_outside)) if v]
    return _implementation("seed-003" + "".join(f"-{k}" for k in planted),
                           {"encoder_layer": _encoder_layer_003(post, eps_outside)}, "named-tensor-003",
                           Limits(maximum={"H": 1}))


def seed004(*, ddof: int = 1, nu_inside: bool = False, as_printed: bool = False) -> Implementation:
    """Seed 004's encoder under ``tutorial-004``: ``embedding`` and ``encoder_layer``. ``ddof=0``: σ
    over N (the printed formula, not its code and numbers); ``nu_inside=True``: √(σ² + ν);
    ``as_printed=True``: the tutorial's layout slip (both departures from the algorithm)."""
    planted = {"ddof": ddof, "nu_inside": nu_inside}
    label = "".join(f"-{k}" for k, v in (("sigma-over-N", ddof == 0), ("nu-inside", nu_inside),
                                         ("as-printed", as_printed)) if v)
    return _implementation("seed-004" + label, {"embedding": _embedding_004,
                                                "encoder_layer": _encoder_layer_004(planted, as_printed)},
                           "tutorial-004")
