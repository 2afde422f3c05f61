"""Algorithm 5 (MHAttention) and the layers of Algorithms 8-10, in NumPy.

Parameters arrive flat (``layers.0.attn.heads.1.W_q``); ``gather_*`` read
them by name and stack the H heads into one leading axis so that all heads
run in one batched matmul (no Python loop over heads or tokens). Which
parameters exist is decided from the variant set, not from what happens to be
present, so a missing parameter is a KeyError rather than a silent default.

Line numbers cite the restatement in ALGORITHMS.md. X is (..., d_e, ℓ).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from .components import activation, attention_core, norm_columns, unidirectional_mask

__all__ = [
    "MHA",
    "decoder_layer",
    "gather_mha",
    "mh_attention",
    "norm",
    "stack_layer",
]

Params = Mapping[str, Any]


class MHA(NamedTuple):
    """W of Algorithm 5 with the heads stacked on axis 0 (head 0 = the paper's head 1)."""

    W_q: np.ndarray  # (H, d_attn, d_x)
    b_q: Optional[np.ndarray]  # (H, d_attn)
    W_k: np.ndarray  # (H, d_attn, d_z)
    b_k: Optional[np.ndarray]  # (H, d_attn)
    W_v: np.ndarray  # (H, d_mid, d_z)
    b_v: Optional[np.ndarray]  # (H, d_mid)
    W_o: np.ndarray  # (d_out, H*d_mid)
    b_o: Optional[np.ndarray]  # (d_out,)


def gather_mha(params: Params, prefix: str, H: int, bias: bool) -> MHA:
    """Stack ``{prefix}heads.{h}.*`` for h = 0..H−1 and read ``W_o``/``b_o``."""
    def stack(leaf: str) -> np.ndarray:
        return np.stack([params[f"{prefix}heads.{h}.{leaf}"] for h in range(H)])  # (H, ...)
    return MHA(
        stack("W_q"), stack("b_q") if bias else None,
        stack("W_k"), stack("b_k") if bias else None,
        stack("W_v"), stack("b_v") if bias else None,
        params[prefix + "W_o"], params[prefix + "b_o"] if bias else None,
    )


def mh_attention(X: np.ndarray, Z: np.ndarray, W: MHA, Mask: Optional[np.ndarray], variant) -> np.ndarray:
    """Algorithm 5: Ṽ ← W_o [Y^1; …; Y^H] + b_o 1ᵀ with Y^h = Attention(X, Z | W^h_qkv, Mask).

    X: (..., d_x, ℓ_x), Z: (..., d_z, ℓ_z), Mask: (..., ℓ_z, ℓ_x) or None (≡ 1).
    """
    Xh = X[..., None, :, :]  # (..., 1, d_x, ℓ_x)  broadcast against the head axis
    Zh = Z[..., None, :, :]  # (..., 1, d_z, ℓ_z)
    Mh = None if Mask is None else Mask[..., None, :, :]  # (..., 1, ℓ_z, ℓ_x)
    Y = attention_core(Xh, Zh, W.W_q, W.b_q, W.W_k, W.b_k, W.W_v, W.b_v, Mh, variant)  # lines 1-2: (..., H, d_mid, ℓ_x)
    H, d_mid, ell_x = Y.shape[-3:]
    Y = Y.reshape(Y.shape[:-3] + (H * d_mid, ell_x))  # (..., H*d_mid, ℓ_x)  line 3: heads stacked, head 1 on top
    out = W.W_o @ Y  # (..., d_out, ℓ_x)  line 4
    if W.b_o is not None:
        out = out + W.b_o[:, None]  # + b_o 1ᵀ
    return out


def norm(X: np.ndarray, params: Params, gamma: str, beta: str, variant, kind: Optional[str] = None) -> np.ndarray:
    """Apply the norm named by ``kind`` (default ``variant.norm``) per column, with γ/β by the affine switch."""
    kind = kind or variant.norm
    g = params[gamma] if variant.affine in ("scale_shift", "scale") else None
    b = params[beta] if variant.affine == "scale_shift" and kind == "layer_norm" else None
    return norm_columns(X, g, b, variant, kind)


def _mlp(X: np.ndarray, params: Params, prefix: str, first: str, second: str, variant, act) -> np.ndarray:
    """W_mlp{second} act(W_mlp{first} X + b 1ᵀ) + b 1ᵀ (Alg. 8 lines 7, 18; Alg. 9 line 7; Alg. 10 line 8)."""
    H1 = params[f"{prefix}W_mlp{first}"] @ X  # (..., d_mlp, ℓ)
    if variant.mlp_bias:
        H1 = H1 + params[f"{prefix}b_mlp{first}"][:, None]
    out = params[f"{prefix}W_mlp{second}"] @ act(H1)  # (..., d_e, ℓ)
    if variant.mlp_bias:
        out = out + params[f"{prefix}b_mlp{second}"][:, None]
    return out


def _causal(ell: int, variant) -> np.ndarray:
    """The self-attention mask Mask[t, t'] = [[t ≤ t']] (square, so alignment does not matter)."""
    return unidirectional_mask(ell, ell, variant.causal_alignment)


def stack_layer(X: np.ndarray, params: Params, prefix: str, variant, H: int, arch: str) -> np.ndarray:
    """One encoder (Alg. 8 lines 5-8), BERT (Alg. 9 lines 5-8) or GPT-2 (Alg. 10 lines 5-8) layer.

    arch ∈ {"ed_encoder", "bert", "gpt2"} picks the paper's norm placement and
    activation (``VariantSet.resolved_*``) and the mask: Mask ≡ 1 for the
    encoder and BERT, causal for GPT-2.
    post: X ← norm(X + f(X)) for each sublayer f (Alg. 8/9 lines 5-8);
    pre:  X ← X + f(norm(X)) (Alg. 10 lines 5-8; the residual adds the
    un-normalised X).
    """
    placement = variant.resolved_norm_placement(arch)
    act = activation(variant.resolved_activation(arch))
    Mask = _causal(X.shape[-1], variant) if arch == "gpt2" else None
    W = gather_mha(params, prefix + "attn.", H, variant.attn_bias)

    def attn(Y: np.ndarray) -> np.ndarray:
        return mh_attention(Y, Y, W, Mask, variant)

    def mlp(Y: np.ndarray) -> np.ndarray:
        return _mlp(Y, params, prefix, "1", "2", variant, act)

    if placement == "post":
        X = norm(X + attn(X), params, prefix + "gamma1", prefix + "beta1", variant)  # lines 5-6
        X = norm(X + mlp(X), params, prefix + "gamma2", prefix + "beta2", variant)  # lines 7-8
    elif placement == "pre":
        X = X + attn(norm(X, params, prefix + "gamma1", prefix + "beta1", variant))  # lines 5-6 (Alg. 10)
        X = X + mlp(norm(X, params, prefix + "gamma2", prefix + "beta2", variant))  # lines 7-8 (Alg. 10)
    else:
        raise ValueError(f"unknown norm placement {placement!r}")
    return X


def decoder_layer(X: np.ndarray, Z: np.ndarray, params: Params, prefix: str, variant, H: int) -> np.ndarray:
    """Algorithm 8 lines 14-19: causal self-attention, cross-attention to Z (Mask ≡ 1), MLP.

    X: (..., d_e, ℓ_x) decoder stream, Z: (..., d_e, ℓ_z) encoder output.
    post (paper): X ← norm(X + f(X)) after each of the three sublayers.
    pre: X += SelfAttn(LN3 X); X += CrossAttn(LN4 X, Z); X += MLP(LN5 X),
    with Z used as given (a pre-LN encoder ends in its own final norm).
    """
    placement = variant.resolved_norm_placement("ed_decoder")
    act = activation(variant.resolved_activation("ed_decoder"))
    Mask = _causal(X.shape[-1], variant)  # (ℓ_x, ℓ_x)  line 14
    W_self = gather_mha(params, prefix + "self_attn.", H, variant.attn_bias)
    W_cross = gather_mha(params, prefix + "cross_attn.", H, variant.attn_bias)

    def n(Y: np.ndarray, k: int) -> np.ndarray:
        return norm(Y, params, f"{prefix}gamma{k}", f"{prefix}beta{k}", variant)

    def mlp(Y: np.ndarray) -> np.ndarray:
        return _mlp(Y, params, prefix, "3", "4", variant, act)

    if placement == "post":
        X = n(X + mh_attention(X, X, W_self, Mask, variant), 3)  # lines 14-15
        X = n(X + mh_attention(X, Z, W_cross, None, variant), 4)  # lines 16-17
        X = n(X + mlp(X), 5)  # lines 18-19
    elif placement == "pre":
        Y = n(X, 3)
        X = X + mh_attention(Y, Y, W_self, Mask, variant)  # line 14, pre-LN
        X = X + mh_attention(n(X, 4), Z, W_cross, None, variant)  # line 16, pre-LN
        X = X + mlp(n(X, 5))  # line 18, pre-LN
    else:
        raise ValueError(f"unknown norm placement {placement!r}")
    return X
