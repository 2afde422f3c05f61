"""Algorithms 8-10 (forward passes) in NumPy.

Each returns P ∈ (0,1)^{N_V×ℓ} (with a leading ``...`` batch axis when the
tokens have one): column t is a distribution over the next token. Layers are
looped over in Python (there are L of them, each a different parameter set);
tokens and heads are never looped over.

Line numbers cite the restatement in ALGORITHMS.md.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .components import activation, embed, unembed
from .layers import decoder_layer, norm, stack_layer

__all__ = ["d_transformer", "e_transformer", "ed_transformer", "embed_tokens", "unembed_columns", "unembedding_matrix"]

Params = Mapping[str, Any]


def unembedding_matrix(params: Params, variant) -> np.ndarray:
    """W_u (N_V × d), or W_eᵀ under ``unembedding='tied'``."""
    return params["W_e"].T if variant.unembedding == "tied" else params["W_u"]


def unembed_columns(X: np.ndarray, params: Params, variant) -> np.ndarray:
    """Algorithm 7 per column, with the ``unembedding`` and ``logit_bias`` switches."""
    b_u = params["b_u"] if variant.logit_bias else None
    return unembed(X, unembedding_matrix(params, variant), b_u)


def embed_tokens(x: np.ndarray, params: Params, variant, ell_max: int, emb: str = "emb") -> np.ndarray:
    """Lines 1-3 with the embedding norm's parameters ``gamma_{emb}``/``beta_{emb}``."""
    has_gamma = variant.embedding_norm and variant.affine in ("scale_shift", "scale")
    has_beta = variant.embedding_norm and variant.affine == "scale_shift" and variant.norm == "layer_norm"
    return embed(x, params["W_e"], params["W_p"] if variant.positions == "learned" else None, variant,
                 ell_max=ell_max,
                 gamma=params[f"gamma_{emb}"] if has_gamma else None,
                 beta=params[f"beta_{emb}"] if has_beta else None)


def ed_transformer(z: np.ndarray, x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 8, lines 1-21: encoder over z, decoder over x with cross-attention to Z.

    z: (..., ℓ_z), x: (..., ℓ_x) int64 -> P: (..., N_V, ℓ_x).
    ``final_norm='final'`` adds a norm after each stack (γ_enc/β_enc, γ_dec/β_dec).
    """
    H, ell_max = hyper["H"], hyper["ell_max"]
    final = variant.resolved_final_norm("ed_encoder")
    Z = embed_tokens(z, params, variant, ell_max, "emb_enc")  # (..., d_e, ℓ_z)  lines 1-3
    for l in range(hyper["L_enc"]):  # line 4
        Z = stack_layer(Z, params, f"enc_layers.{l}.", variant, H, "ed_encoder")  # lines 5-8
    if final:
        Z = norm(Z, params, "gamma_enc", "beta_enc", variant)
    X = embed_tokens(x, params, variant, ell_max, "emb_dec")  # (..., d_e, ℓ_x)  lines 10-12
    for l in range(hyper["L_dec"]):  # line 13
        X = decoder_layer(X, Z, params, f"dec_layers.{l}.", variant, H)  # lines 14-19
    if final:
        X = norm(X, params, "gamma_dec", "beta_dec", variant)
    return unembed_columns(X, params, variant)  # (..., N_V, ℓ_x)  line 21


def e_transformer(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 9, lines 1-12 (BERT): layers, then the head X ← norm(act(W_f X + b_f 1ᵀ)).

    x: (..., ℓ) -> P: (..., N_V, ℓ). ``final_norm='final'`` adds a norm
    (γ_final, β_final) after the last layer, before line 10. The head's
    activation follows the ``activation`` switch (paper: GELU).
    """
    X = embed_tokens(x, params, variant, hyper["ell_max"])  # (..., d_e, ℓ)  lines 1-3
    for l in range(hyper["L"]):  # line 4
        X = stack_layer(X, params, f"layers.{l}.", variant, hyper["H"], "bert")  # lines 5-8
    if variant.resolved_final_norm("bert"):
        X = norm(X, params, "gamma_final", "beta_final", variant)
    act = activation(variant.resolved_activation("bert"))
    X = act(params["W_f"] @ X + params["b_f"][:, None])  # (..., d_f, ℓ)  line 10
    X = norm(X, params, "gamma", "beta", variant)  # line 11
    return unembed_columns(X, params, variant)  # (..., N_V, ℓ)  line 12


def d_transformer(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 10, lines 1-11 (GPT-2): pre-LN causal layers, final norm (line 10), unembedding.

    x: (..., ℓ) -> P: (..., N_V, ℓ). ``final_norm='none'`` drops line 10.
    """
    X = embed_tokens(x, params, variant, hyper["ell_max"])  # (..., d_e, ℓ)  lines 1-3
    for l in range(hyper["L"]):  # line 4
        X = stack_layer(X, params, f"layers.{l}.", variant, hyper["H"], "gpt2")  # lines 5-8
    if variant.resolved_final_norm("gpt2"):
        X = norm(X, params, "gamma", "beta", variant)  # line 10
    return unembed_columns(X, params, variant)  # (..., N_V, ℓ)  line 11
