"""Seeds 000 and 002 as a reader would implement them from the documents, and
as ftspec plugins of the entry ``next_token_encoder``.

Each model is written in NumPy from its document alone, in the document's
notation (tokens are rows, weights as the document types them), with no
reference to ``spec/`` or ``impls/`` numerics. The adapter is the only place
that knows ftspec: it maps ftspec's flat parameters (tokens as columns,
weights out × in, ``layers.{l}.attn.heads.{h}.W_q`` ..., docs/spec.md
"Parameters and their flat names") onto the document's, and the plugin
declares the preset that names the document's conventions.

Both documents divide by √var in their LayerNorm (seed 000 eq. 2, seed 002
eq. 8) and take tokens from a finite vocabulary, so both refuse what has no
value: a constant vector under LayerNorm, a token outside the vocabulary; the
adapters also refuse a sequence longer than ℓ_max (the document's W^pos of
seed 000 has T rows) and parameters whose shapes disagree.

``seed000(...)`` and ``seed002()`` build the plugins; ``seed000``'s keywords
plant one departure from the document each (the tests check that the suite
refuses to certify them).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ftspec.impls.api import Context, Implementation, Limits
from ftspec.spec.variants import preset

__all__ = ["seed000", "seed002"]

Arrays = Mapping[str, np.ndarray]


# ==========================================================================
# seed 000: "Compact precise definition of a transformer function"
# ==========================================================================


def softmax(z: np.ndarray) -> np.ndarray:
    """Eq. (3) over the last axis; exp(z − max z) gives the same quotient without overflow."""
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def relu(z: np.ndarray) -> np.ndarray:
    """Eq. (1), element-wise."""
    return np.maximum(z, 0.0)


def refuse_constant(z: np.ndarray) -> None:
    """var(z) = 0: the LayerNorm of eqs. (2) (seed 000) and (7)-(8) (seed 002) divides by √0."""
    if np.any(np.all(z == z[..., :1], axis=-1)):
        raise ValueError("LayerNorm of a constant vector: var(z) = 0 and there is no ε")


def layer_norm_000(z: np.ndarray, ddof: int = 0) -> np.ndarray:
    """Eq. (2) on every row: (z − mean(z)) / √var(z), var = N⁻¹ Σ (z_n − mean(z))² (ddof = 0)."""
    refuse_constant(z)
    centred = z - z.mean(axis=-1, keepdims=True)  # (T, D_E)
    var = (centred ** 2).sum(axis=-1, keepdims=True) / (z.shape[-1] - ddof)  # (T, 1)
    return centred / np.sqrt(var)


def attn_000(layer: Mapping[str, Any], X: np.ndarray) -> np.ndarray:
    """Eq. (4) for every query z = X_t at once: Σ_h softmax(z W_Q W_Kᵀ Xᵀ / √D_QK) X W_V W_Oᵀ.
    X: (T, D_E) → (T, D_E); the softmax runs over the T rows of X (bidirectional)."""
    out = np.zeros_like(X)
    for W_Q, W_K, W_V, W_O in zip(layer["W_Q"], layer["W_K"], layer["W_V"], layer["W_O"]):
        scores = (X @ W_Q) @ (X @ W_K).T / math.sqrt(W_Q.shape[1])  # (T, T): row t is z = X_t
        out = out + softmax(scores) @ X @ W_V @ W_O.T  # (T, D_E)
    return out


def ffn_000(layer: Mapping[str, Any], Y: np.ndarray) -> np.ndarray:
    """Eq. (5) on every row: W_FF2 ReLU(W_FF1 z + b_FF1) + b_FF2 (column form: z is a column)."""
    hidden = relu(Y @ layer["W_FF1"].T + layer["b_FF1"])  # (T, D_FF)
    return hidden @ layer["W_FF2"].T + layer["b_FF2"]  # (T, D_E)


def G(s: np.ndarray, W_emb: np.ndarray, W_pos: np.ndarray, layers: list[dict], W_une: np.ndarray, *,
      ddof: int = 0, read: int = -1) -> np.ndarray:
    """Eq. (6): p = G(s) for s = [s_1 … s_T], tokens in [V] = {1, …, V}. → p: (V,).

    ``ddof`` and ``read`` are planted departures (the document: 0, and the last row T)."""
    V = W_emb.shape[0]
    if s.size and (s.min() < 1 or s.max() > V):
        raise ValueError(f"a token outside the vocabulary [V] = {{1, …, {V}}}")
    X = W_emb[s - 1] + W_pos  # X^(0)_t = W^emb_{s_t} + W^pos_t: (T, D_E)
    for layer in layers:
        Y = layer_norm_000(X + attn_000(layer, X), ddof)  # Y^(ℓ)
        X = layer_norm_000(Y + ffn_000(layer, Y), ddof)  # X^(ℓ)
    return softmax(X[read] @ W_une)  # G = softmax(X^(L)_T · W^une)


# ==========================================================================
# seed 002: Thickstun, "Transformer Networks"
# ==========================================================================


def layer_norm_002(z: np.ndarray, gamma: Any, beta: Any) -> np.ndarray:
    """Eqs. (7)-(8) on every row: γ (z − μ_z)/σ_z + β, σ_z = √(k⁻¹ Σ (z_i − μ_z)²)."""
    refuse_constant(z)
    mu = z.mean(axis=-1, keepdims=True)  # (p, 1)
    sigma = np.sqrt(((z - mu) ** 2).mean(axis=-1, keepdims=True))  # (p, 1)
    return gamma * (z - mu) / sigma + beta


def block_002(x: np.ndarray, th: Mapping[str, Any]) -> np.ndarray:
    """f_θ(x) = z, eqs. (1)-(6), for x ∈ R^{p×d} (rows are the p objects)."""
    u_prime = np.zeros_like(x)  # (p, d)
    for W_q, W_k, W_v, W_c in zip(th["W_q"], th["W_k"], th["W_v"], th["W_c"]):
        Q, K, V = x @ W_q, x @ W_k, x @ W_v  # eq. (1): Q(x_i) = W_qᵀ x_i as rows, (p, k)
        alpha = softmax(Q @ K.T / math.sqrt(W_q.shape[1]))  # eq. (2): α_ij, softmax over j, (p, p)
        u_prime = u_prime + (alpha @ V) @ W_c  # eq. (3): Σ_h W_cᵀ Σ_j α_ij V(x_j) as rows
    u = layer_norm_002(x + u_prime, th["gamma1"], th["beta1"])  # eq. (4)
    z_prime = relu(u @ th["W_1"]) @ th["W_2"]  # eq. (5): W_2ᵀ ReLU(W_1ᵀ u_i) as rows
    return layer_norm_002(u + z_prime, th["gamma2"], th["beta2"])  # eq. (6)


def positions_002(p: int, d: int) -> np.ndarray:
    """p_{k,2i} = sin(k / 10000^{2i/d}), p_{k,2i+1} = cos(k / 10000^{2i/d}) for k = 0..p−1 (the
    document does not say where k starts; Vaswani et al.'s positions start at 0). → (p, d)."""
    k = np.arange(p, dtype=np.float64)[:, None]  # (p, 1)
    col = np.arange(d)[None, :]  # (1, d)
    angle = k / 10000.0 ** (2 * (col // 2) / d)  # (p, d)
    return np.where(col % 2 == 0, np.sin(angle), np.cos(angle))


def model_002(tokens: np.ndarray, W_x: np.ndarray, W_zx: np.ndarray, blocks: list[dict],
              W_z: np.ndarray) -> np.ndarray:
    """ŷ = softmax(W_zᵀ z) (eq. 9), z ≡ f_θ(x)_p the p'th output, f_θ = f_{θ_L} ∘ … ∘ f_{θ_1}, on
    the input of eq. (12): z_k = W_zxᵀ ReLU(W_xᵀ x_k) + p_k with x_k the one-hot vector of token
    k. tokens: (p,) in [0, dim(x)) → ŷ: (o,)."""
    vocab = W_x.shape[0]
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
        raise ValueError(f"a token with no one-hot vector in R^{vocab}")
    x = np.eye(vocab)[tokens]  # x_k = e_{v_k}: (p, dim(x))
    z = relu(x @ W_x) @ W_zx + positions_002(len(tokens), W_zx.shape[1])  # eq. (12): (p, d)
    for th in blocks:
        z = block_002(z, th)
    return softmax(z[-1] @ W_z)  # eq. (9) on the p'th output: (o,)


# ==========================================================================
# the adapters: ftspec's flat parameters → the documents'
# ==========================================================================


def _count(params: Arrays, prefix: str) -> int:
    n = 0
    while any(name.startswith(f"{prefix}{n}.") for name in params):
        n += 1
    return n


def _check_shapes(params: Arrays, ctx: Context) -> None:
    """Refuse parameters whose shapes are not the ones ftspec names for this configuration (a
    row too many would otherwise broadcast, or be sliced away, silently)."""
    h = ctx.hyper
    d_e, H = h["d_e"], h["H"]
    expect = {"W_e": (d_e, h["N_V"]), "W_p": (d_e, h["ell_max"]), "W_u": (h["N_V"], d_e)}
    for l in range(h["L"]):
        pre = f"layers.{l}."
        expect.update({pre + "attn.W_o": (d_e, H * h["d_mid"]), pre + "W_mlp1": (h["d_mlp"], d_e),
                       pre + "b_mlp1": (h["d_mlp"],), pre + "W_mlp2": (d_e, h["d_mlp"]), pre + "b_mlp2": (d_e,)})
        expect.update({f"{pre}gamma{i}": (d_e,) for i in (1, 2)} | {f"{pre}beta{i}": (d_e,) for i in (1, 2)})
        for hh in range(H):
            head = f"{pre}attn.heads.{hh}."
            expect.update({head + "W_q": (h["d_attn"], d_e), head + "W_k": (h["d_attn"], d_e),
                           head + "W_v": (h["d_mid"], d_e)})
    for name, array in params.items():
        if name in expect and tuple(array.shape) != expect[name]:
            raise ValueError(f"{name} has shape {tuple(array.shape)}, expected {expect[name]}")


def _layers_000(params: Arrays) -> list[dict]:
    """W_Q^{(ℓ,h)} = (W^h_q)ᵀ, W_K = (W^h_k)ᵀ, W_V = (W^h_v)ᵀ (D_E × D_QK | D_VO); W_O^{(ℓ,h)} is
    the h'th block of D_VO columns of W_o (Σ_h y^h W_O^{(h)ᵀ} = W_o [y^1; …; y^H]); the FFN as written."""
    out = []
    for l in range(_count(params, "layers.")):
        pre = f"layers.{l}."
        heads = range(_count(params, pre + "attn.heads."))
        W_o = params[pre + "attn.W_o"]  # (D_E, H·D_VO)
        d_vo = W_o.shape[1] // len(heads)
        out.append({
            "W_Q": [params[f"{pre}attn.heads.{h}.W_q"].T for h in heads],
            "W_K": [params[f"{pre}attn.heads.{h}.W_k"].T for h in heads],
            "W_V": [params[f"{pre}attn.heads.{h}.W_v"].T for h in heads],
            "W_O": [W_o[:, h * d_vo:(h + 1) * d_vo] for h in heads],
            "W_FF1": params[pre + "W_mlp1"], "b_FF1": params[pre + "b_mlp1"],
            "W_FF2": params[pre + "W_mlp2"], "b_FF2": params[pre + "b_mlp2"]})
    return out


def _blocks_002(params: Arrays) -> list[dict]:
    """W_{h,q} = (W^h_q)ᵀ, … (d × k); W_{c,h} = the h'th block of k columns of W_o, transposed
    (k × d); W_1 = W_mlp1ᵀ, W_2 = W_mlp2ᵀ; γ, β as ftspec passes them (vectors, eq. 7)."""
    out = []
    for l in range(_count(params, "layers.")):
        pre = f"layers.{l}."
        heads = range(_count(params, pre + "attn.heads."))
        W_o = params[pre + "attn.W_o"]  # (d, H·k)
        k = W_o.shape[1] // len(heads)
        out.append({
            "W_q": [params[f"{pre}attn.heads.{h}.W_q"].T for h in heads],
            "W_k": [params[f"{pre}attn.heads.{h}.W_k"].T for h in heads],
            "W_v": [params[f"{pre}attn.heads.{h}.W_v"].T for h in heads],
            "W_c": [W_o[:, h * k:(h + 1) * k].T for h in heads],
            "W_1": params[pre + "W_mlp1"].T, "W_2": params[pre + "W_mlp2"].T,
            **{name: params[pre + name] for name in ("gamma1", "beta1", "gamma2", "beta2")}})
    return out


def _per_example(x: np.ndarray, ctx: Context, one) -> np.ndarray:
    """``one`` on each sequence of a batch (``ctx.batched``), after ftspec's ℓ ≤ ℓ_max."""
    if x.shape[-1] > ctx.hyper["ell_max"]:
        raise ValueError(f"a sequence of {x.shape[-1]} tokens; ell_max = {ctx.hyper['ell_max']}")
    return np.stack([one(seq) for seq in x]) if ctx.batched else one(x)


def _entry_000(ddof: int, read: int):
    def next_token_encoder(inputs: Arrays, params: Arrays, ctx: Context) -> np.ndarray:
        _check_shapes(params, ctx)
        layers, W_emb, W_une = _layers_000(params), params["W_e"].T, params["W_u"].T  # (V, D_E), (D_E, V)

        def one(x: np.ndarray) -> np.ndarray:
            W_pos = params["W_p"].T[: x.shape[-1]]  # the document's W^pos ∈ R^{T×D_E}, T = ℓ
            return G(x + 1, W_emb, W_pos, layers, W_une, ddof=ddof, read=read)  # tokens 1..V

        return _per_example(inputs["x"], ctx, one)
    return next_token_encoder


def _entry_002(inputs: Arrays, params: Arrays, ctx: Context) -> np.ndarray:
    """Eq. (12) with W_x = I_V (dim(x) = m = V: ReLU(e_v) = e_v) and W_zx = W_eᵀ, so that
    W_zxᵀ ReLU(W_xᵀ e_v) = W_e[:, v]; W_z = W_uᵀ."""
    _check_shapes(params, ctx)
    W_x, W_zx, W_z = np.eye(params["W_e"].shape[1]), params["W_e"].T, params["W_u"].T
    blocks = _blocks_002(params)
    return _per_example(inputs["x"], ctx, lambda x: model_002(x, W_x, W_zx, blocks, W_z))


def _implementation(name: str, fn, variant: str, limits: Limits = Limits()) -> Implementation:
    return Implementation(
        name=name, version="0.1.0", algorithms={"next_token_encoder": fn}, dtypes=("float64",),
        devices=lambda: ["cpu"], from_numpy=lambda a, dtype, device: np.array(a, dtype=dtype, copy=True),
        to_numpy=lambda a: np.array(a, copy=True), variants=[preset(variant)], limits=limits,
        description=f"the whole model of the document, under {variant}")


def seed000(*, ddof: int = 0, read: int = -1) -> Implementation:
    """Seed 000's G(s) under ``compact-000``. ``ddof=1``: LayerNorm's variance over N − 1;
    ``read=0``: G read at the first position (both departures from the document)."""
    name = "seed-000" + ("" if (ddof, read) == (0, -1) else f"-ddof{ddof}-read{read}")
    return _implementation(name, _entry_000(ddof, read), "compact-000")


def seed002() -> Implementation:
    """Seed 002's model under ``thickstun-002``; one k for queries and values (eq. 1: d_attn = d_mid)."""
    return _implementation("seed-002", _entry_002, "thickstun-002", Limits(equal=(("d_attn", "d_mid"),)))
