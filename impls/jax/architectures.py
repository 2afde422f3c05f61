"""Architectures, Algorithms 8-10, for ONE example (tokens as rows).

Each returns P: (ℓ, N_V), row t the distribution over the next token (the
boundary transposes it to the paper's (N_V, ℓ)). θ is the nested tree built
by ``boundary.py``: "tok" (N_V, d_e) = W_eᵀ, "pos" (ℓ_max, d_e) = W_pᵀ or
None, "layers" (lists of layer trees), norm trees, and "unembed" =
{"W_u": (N_V, d), "b_u"}; under ``unembedding="tied"`` W_u is "tok" itself
(W_u = W_eᵀ), so gradients reach W_e through both uses.
"""

from __future__ import annotations

from ftspec.spec.variants import VariantSet

from .components import Array, Params, activation, embed, linear, norm, unembed
from .layers import decoder_block, encoder_block


def _unembed(X: Array, theta: Params, variant: VariantSet) -> Array:
    W_u = theta["tok"] if variant.unembedding == "tied" else theta["unembed"]["W_u"]  # (N_V, d)
    return unembed(X, W_u, theta["unembed"].get("b_u"))  # (ℓ, N_V)


def ed_transformer(z: Array, x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 8. z: (ℓ_z,) source tokens, x: (ℓ_x,) target tokens → P: (ℓ_x, N_V)."""
    Z = embed(z, theta, ell_max, variant, theta.get("norm_emb_enc"))  # (ℓ_z, d_e)  lines 1-3
    for layer in theta["enc_layers"]:  # lines 4-8
        Z = encoder_block(Z, layer, variant, "ed_encoder")
    if variant.resolved_final_norm("ed_encoder"):
        Z = norm(Z, theta["norm_enc"], variant)  # γ_enc, β_enc (final_norm="final")
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb_dec"))  # (ℓ_x, d_e)  lines 10-12
    for layer in theta["dec_layers"]:  # lines 13-19
        X = decoder_block(X, Z, layer, variant)
    if variant.resolved_final_norm("ed_decoder"):
        X = norm(X, theta["norm_dec"], variant)  # γ_dec, β_dec
    return _unembed(X, theta, variant)  # (ℓ_x, N_V)  line 21


def e_transformer(x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 9 (BERT). x: (ℓ,) tokens → P: (ℓ, N_V)."""
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb"))  # (ℓ, d_e)  lines 1-3
    for layer in theta["layers"]:  # lines 4-8
        X = encoder_block(X, layer, variant, "bert")
    if variant.resolved_final_norm("bert"):
        X = norm(X, theta["norm_final"], variant)  # γ_final, β_final before line 10
    act = activation(variant.resolved_activation("bert"))  # the head follows the MLP activation
    X = act(linear(X, theta["W_f"], theta["b_f"]))  # (ℓ, d_f)  line 10
    X = norm(X, theta["norm_head"], variant)  # (ℓ, d_f)  line 11
    return _unembed(X, theta, variant)  # (ℓ, N_V)  line 12


def d_transformer(x: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Alg. 10 (GPT-2). x: (ℓ,) tokens → P: (ℓ, N_V)."""
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb"))  # (ℓ, d_e)  lines 1-3
    for layer in theta["layers"]:  # lines 4-8
        X = encoder_block(X, layer, variant, "gpt2")
    if variant.resolved_final_norm("gpt2"):
        X = norm(X, theta["norm_final"], variant)  # line 10 (γ, β)
    return _unembed(X, theta, variant)  # (ℓ, N_V)  line 11
