"""Algorithms 8-10: the encoder-decoder, encoder-only and decoder-only
transformers. Each returns P ∈ (0,1)^{N_V×ℓ}; column t is a distribution
over the token that follows position t (0-based; the paper's t+1).
"""

from __future__ import annotations

from typing import Optional, Sequence

from .embedding import embed
from .errors import in_algorithm
from .functions import apply
from .layers import bert_layer, decoder_layer, encoder_layer, gpt2_layer
from .linalg import Matrix, add_bias, matmul
from .normalization import norm_columns
from .params import DTransformerParams, EDTransformerParams, ETransformerParams
from .functions import softmax_columns
from .unembedding import logits, unembedding_matrix
from .variants import PAPER, VariantSet

__all__ = ["d_transformer", "d_transformer_logits", "e_transformer", "e_transformer_logits",
           "ed_transformer", "ed_transformer_logits"]


def ed_transformer(z: Sequence[int], x: Sequence[int], theta: EDTransformerParams, *,
                   ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Matrix:
    """Algorithm 8: P ← EDTransformer(z, x | θ), encoder-decoder (Vaswani et al.).

    1-3.   Z ← [W_e[:, z[t]] + W_p[:, t]] for t = 0..ℓ_z-1
    4-8.   for l = 0..L_enc-1: Z ← encoder_layer(Z | W^enc_l, ...)   (lines 5-8)
    10-12. X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ_x-1
    13-19. for l = 0..L_dec-1: X ← decoder_layer(X, Z | W^dec_l, ...)  (lines 14-19)
    21.    return P = softmax(W_u X)

    Variants beyond the layers': ``embedding_norm`` (after lines 3 and 12,
    γ/β_emb_enc and _dec), ``final_norm="final"`` (after lines 8 and 19,
    γ/β_enc and _dec), ``unembedding``, ``logit_bias``. ``ell_max`` is needed
    when W_p is not learned.
    """
    with in_algorithm("ed_transformer"):
        return softmax_columns(ed_transformer_logits(z, x, theta, ell_max=ell_max, variant=variant))  # line 21


def ed_transformer_logits(z: Sequence[int], x: Sequence[int], theta: EDTransformerParams, *,
                          ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Matrix:
    """Algorithm 8 up to the final softmax: lines 1-20 and W_u X of line 21."""
    with in_algorithm("ed_transformer"):
        Z = embed(z, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
                  gamma=theta.gamma_emb_enc, beta=theta.beta_emb_enc)  # lines 1-3
        for layer in theta.enc_layers:  # line 4
            Z = encoder_layer(Z, layer, variant=variant)  # lines 5-8
        if variant.resolved_final_norm("ed_encoder"):
            Z = norm_columns(Z, theta.gamma_enc, theta.beta_enc, variant)
        X = embed(x, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
                  gamma=theta.gamma_emb_dec, beta=theta.beta_emb_dec)  # lines 10-12
        for dec_layer in theta.dec_layers:  # line 13
            X = decoder_layer(X, Z, dec_layer, variant=variant)  # lines 14-19
        if variant.resolved_final_norm("ed_decoder"):
            X = norm_columns(X, theta.gamma_dec, theta.beta_dec, variant)
        W_u = unembedding_matrix(theta.W_u, theta.W_e, variant)
        return logits(X, W_u, theta.b_u)  # line 21, before the softmax


def e_transformer(x: Sequence[int], theta: ETransformerParams, *,
                  ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Matrix:
    """Algorithm 9: P ← ETransformer(x | θ), encoder-only (BERT).

    1-3. X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ-1
    4-8. for l = 0..L-1: X ← bert_layer(X | W_l, ...)   (lines 5-8)
    10.  X ← GELU(W_f X + b_f 1ᵀ)
    11.  X[:, t] ← layer_norm(X[:, t] | γ, β)
    12.  return P = softmax(W_u X)

    Variants beyond the layers': ``embedding_norm`` (γ/β_emb), ``final_norm=
    "final"`` (a norm before line 10, γ/β_final), ``activation`` (also line
    10), ``unembedding`` (tied needs d_f = d_e), ``logit_bias``.
    """
    with in_algorithm("e_transformer"):
        return softmax_columns(e_transformer_logits(x, theta, ell_max=ell_max, variant=variant))  # line 12


def e_transformer_logits(x: Sequence[int], theta: ETransformerParams, *,
                         ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Matrix:
    """Algorithm 9 up to the final softmax: lines 1-11 and W_u X of line 12."""
    with in_algorithm("e_transformer"):
        X = embed(x, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
                  gamma=theta.gamma_emb, beta=theta.beta_emb)  # lines 1-3
        for layer in theta.layers:  # line 4
            X = bert_layer(X, layer, variant=variant)  # lines 5-8
        if variant.resolved_final_norm("bert"):
            X = norm_columns(X, theta.gamma_final, theta.beta_final, variant)
        X = apply(variant.resolved_activation("bert"), add_bias(matmul(theta.W_f, X), theta.b_f))  # line 10
        X = norm_columns(X, theta.gamma, theta.beta, variant)  # line 11
        W_u = unembedding_matrix(theta.W_u, theta.W_e, variant)
        return logits(X, W_u, theta.b_u)  # line 12, before the softmax


def d_transformer(x: Sequence[int], theta: DTransformerParams, *,
                  ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Matrix:
    """Algorithm 10: P ← DTransformer(x | θ), decoder-only (GPT-2).

    1-3. X ← [W_e[:, x[t]] + W_p[:, t]] for t = 0..ℓ-1
    4-8. for l = 0..L-1: X ← gpt2_layer(X | W_l, ...)   (lines 5-8)
    10.  X[:, t] ← layer_norm(X[:, t] | γ, β)
    11.  return P = softmax(W_u X)

    Variants beyond the layers': ``embedding_norm`` (γ/β_emb), ``final_norm=
    "none"`` (drops line 10), ``unembedding``, ``logit_bias``.
    """
    with in_algorithm("d_transformer"):
        return softmax_columns(d_transformer_logits(x, theta, ell_max=ell_max, variant=variant))  # line 11


def d_transformer_logits(x: Sequence[int], theta: DTransformerParams, *,
                         ell_max: Optional[int] = None, variant: VariantSet = PAPER) -> Matrix:
    """Algorithm 10 up to the final softmax: lines 1-10 and W_u X of line 11."""
    with in_algorithm("d_transformer"):
        X = embed(x, theta.W_e, theta.W_p, ell_max=ell_max, variant=variant,
                  gamma=theta.gamma_emb, beta=theta.beta_emb)  # lines 1-3
        for layer in theta.layers:  # line 4
            X = gpt2_layer(X, layer, variant=variant)  # lines 5-8
        if variant.resolved_final_norm("gpt2"):
            X = norm_columns(X, theta.gamma, theta.beta, variant)  # line 10
        W_u = unembedding_matrix(theta.W_u, theta.W_e, variant)
        return logits(X, W_u, theta.b_u)  # line 11, before the softmax
