"""Architectures, Algorithms 8-10, for ONE example (tokens as rows), and the
encoder read as a next-token predictor (``next_token_encoder``).

Each ``*_transformer`` returns P: (ℓ, N_V), row t the distribution over the
next token (the boundary transposes it to the paper's (N_V, ℓ));
``next_token_encoder`` returns the last row only, p: (N_V,); the
``*_logits`` functions stop one step earlier, at W_u X (+ b_u), which the
losses of Algorithms 11-13 need (log P from the logits, never log 0). θ is
the nested tree built by ``boundary.py``: "tok" (N_V, d_e) = W_eᵀ, "pos"
(ℓ_max, d_e) = W_pᵀ or None, "layers" (lists of layer trees), norm trees,
and "unembed" = {"W_u": (N_V, d), "b_u"}; under ``unembedding="tied"`` W_u
is "tok" itself (W_u = W_eᵀ), so gradients reach W_e through both uses.

``valid`` (decoder stacks only, used by inference on a fixed-size token
buffer): rows t ≥ valid are padding. The causal mask already keeps them out
of every row t < valid; ``valid`` also zeroes their attention values, so
that a padding row that happens to be non-finite cannot leak in as 0·inf.
Rows t < valid are then exactly those of the unpadded sequence.
"""

from __future__ import annotations

from typing import Optional

import jax

from ftspec.spec.variants import VariantSet

from .components import Array, Params, activation, embed, linear, norm
from .layers import decoder_block, encoder_block


def _logits(X: Array, theta: Params, variant: VariantSet) -> Array:
    """Alg. 7 before the softmax: W_u X[t] + b_u for every row. X: (ℓ, d) → (ℓ, N_V)."""
    W_u = theta["tok"] if variant.unembedding == "tied" else theta["unembed"]["W_u"]  # (N_V, d)
    return linear(X, W_u, theta["unembed"].get("b_u"))  # (ℓ, N_V)


def _softmax(logits: Array) -> Array:
    return jax.nn.softmax(logits, axis=-1)  # Alg. 7: P = softmax(W_u X), per row


def ed_encode(z: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 8 lines 1-9 (the encoder). z: (ℓ_z,) source tokens → Z: (ℓ_z, d_e)."""
    Z = embed(z, theta, ell_max, variant, theta.get("norm_emb_enc"))  # (ℓ_z, d_e)  lines 1-3
    for layer in theta["enc_layers"]:  # lines 4-8
        Z = encoder_block(Z, layer, variant, "ed_encoder")
    if variant.resolved_final_norm("ed_encoder"):
        Z = norm(Z, theta["norm_enc"], variant)  # γ_enc, β_enc (final_norm="final")
    return Z


def ed_decode_logits(x: Array, Z: Array, theta: Params, ell_max: int, variant: VariantSet,
                     valid: Optional[Array] = None) -> Array:
    """Alg. 8 lines 10-21 before the softmax. x: (ℓ_x,) target tokens, Z: (ℓ_z, d_e) → (ℓ_x, N_V)."""
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb_dec"))  # (ℓ_x, d_e)  lines 10-12
    for layer in theta["dec_layers"]:  # lines 13-19
        X = decoder_block(X, Z, layer, variant, valid)
    if variant.resolved_final_norm("ed_decoder"):
        X = norm(X, theta["norm_dec"], variant)  # γ_dec, β_dec
    return _logits(X, theta, variant)  # (ℓ_x, N_V)  line 21 before the softmax


def ed_logits(z: Array, x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    return ed_decode_logits(x, ed_encode(z, theta, ell_max, variant), theta, ell_max, variant)


def ed_transformer(z: Array, x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 8. z: (ℓ_z,) source tokens, x: (ℓ_x,) target tokens → P: (ℓ_x, N_V)."""
    return _softmax(ed_logits(z, x, theta, ell_max, variant))  # line 21


def e_logits(x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 9 before the final softmax. x: (ℓ,) tokens → (ℓ, N_V)."""
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb"))  # (ℓ, d_e)  lines 1-3
    for layer in theta["layers"]:  # lines 4-8
        X = encoder_block(X, layer, variant, "bert")
    if variant.resolved_final_norm("bert"):
        X = norm(X, theta["norm_final"], variant)  # γ_final, β_final before line 10
    act = activation(variant.resolved_activation("bert"))  # the head follows the MLP activation
    X = act(linear(X, theta["W_f"], theta["b_f"]))  # (ℓ, d_f)  line 10
    X = norm(X, theta["norm_head"], variant)  # (ℓ, d_f)  line 11
    return _logits(X, theta, variant)  # (ℓ, N_V)  line 12 before the softmax


def e_transformer(x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 9 (BERT). x: (ℓ,) tokens → P: (ℓ, N_V)."""
    return _softmax(e_logits(x, theta, ell_max, variant))  # line 12


def d_logits(x: Array, theta: Params, ell_max: int, variant: VariantSet, valid: Optional[Array] = None) -> Array:
    """Alg. 10 before the final softmax. x: (ℓ,) tokens → (ℓ, N_V)."""
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb"))  # (ℓ, d_e)  lines 1-3
    for layer in theta["layers"]:  # lines 4-8
        X = encoder_block(X, layer, variant, "gpt2", valid)
    if variant.resolved_final_norm("gpt2"):
        X = norm(X, theta["norm_final"], variant)  # line 10 (γ, β)
    return _logits(X, theta, variant)  # (ℓ, N_V)  line 11 before the softmax


def d_transformer(x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 10 (GPT-2). x: (ℓ,) tokens → P: (ℓ, N_V)."""
    return _softmax(d_logits(x, theta, ell_max, variant))  # line 11


def next_token_logits(x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 8's encoder (lines 1-8, no mask) read at its last position, before the softmax.
    x: (ℓ,) tokens → (N_V,). Under final_norm="final" that row is normalised first (γ, β):
    the norm acts per row, so only the last one is needed."""
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb"))  # (ℓ, d_e)  lines 1-3
    for layer in theta["layers"]:  # lines 4-8
        X = encoder_block(X, layer, variant, "ed_encoder")
    e = X[-1:]  # (1, d_e): the last token
    if variant.resolved_final_norm("ed_encoder"):
        e = norm(e, theta["norm_final"], variant)  # γ, β
    return _logits(e, theta, variant)[0]  # (N_V,)


def next_token_encoder(x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """p = softmax(W_u e) for e the last row of the encoder. x: (ℓ,) tokens → p: (N_V,)."""
    return _softmax(next_token_logits(x, theta, ell_max, variant))
