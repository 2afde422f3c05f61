"""Layers of Algorithms 8-10 for ONE example (tokens as rows: X is (ℓ, d_e)).

Parameters are the nested trees built by ``boundary.py``:
layer = {"attn": mha, "norm1": {gamma, beta}, "mlp": {W1, b1, W2, b2}, "norm2": …}
decoder layer = {"self_attn", "norm3", "cross_attn", "norm4", "mlp", "norm5"}.

``arch`` ("ed_encoder", "ed_decoder", "bert", "gpt2") resolves the switches
whose paper value depends on the algorithm: norm placement (post for the
encoder, decoder and BERT; pre for GPT-2) and activation (ReLU for Alg. 8,
exact GELU for Alg. 9 and 10).
"""

from __future__ import annotations

from typing import Callable, Optional

import jax.numpy as jnp

from ftspec.spec.variants import VariantSet

from .components import Array, Params, activation, linear, mh_attention, norm, unidirectional_mask


def mlp(X: Array, p: Params, act: Callable[[Array], Array]) -> Array:
    """W_mlp2 act(W_mlp1 X + b_mlp1 1ᵀ) + b_mlp2 1ᵀ (Alg. 8 line 7, Alg. 9/10 lines 7-8).
    X: (ℓ, d_e) → (ℓ, d_e); biases absent under ``mlp_bias=False``."""
    hidden = act(linear(X, p["W1"], p.get("b1")))  # (ℓ, d_mlp)
    return linear(hidden, p["W2"], p.get("b2"))  # (ℓ, d_e)


def _sublayer(X: Array, f: Callable[[Array], Array], norm_p: Optional[Params], variant: VariantSet,
              placement: str) -> Array:
    """One residual sublayer. post: X ← norm(X + f(X)); pre: X ← X + f(norm(X)).
    The pre residual adds the UN-normalised X (normalising X in place is a classic bug)."""
    if placement == "pre":
        return X + f(norm(X, norm_p, variant))
    return norm(X + f(X), norm_p, variant)


def _valid_rows(ell: int, valid: Optional[Array]) -> Optional[Array]:
    """(ℓ,) bool: rows t < valid are real, the rest padding (None: every row is real)."""
    return None if valid is None else jnp.arange(ell) < valid


def encoder_block(X: Array, p: Params, variant: VariantSet, arch: str, valid: Optional[Array] = None) -> Array:
    """Alg. 8 lines 5-8 (arch "ed_encoder"), Alg. 9 lines 5-8 ("bert"), Alg. 10 lines 5-8 ("gpt2").

    Self-attention with Mask ≡ 1, except GPT-2's causal Mask[t, t'] = [[t ≤ t']]
    (ℓ_z = ℓ_x, so the causal alignment switch cannot matter here).
    Pre-LN GPT-2 attends from and to the normalised X̃ (MHAttention(X̃, X̃)).
    ``valid`` (causal stacks only): rows t ≥ valid are padding (architectures.py).
    """
    placement = variant.resolved_norm_placement(arch)
    act = activation(variant.resolved_activation(arch))
    ell = X.shape[0]
    mask = unidirectional_mask(ell, ell, variant) if arch == "gpt2" else None  # (ℓ, ℓ) or Mask ≡ 1
    kv = _valid_rows(ell, valid)
    X = _sublayer(X, lambda Y: mh_attention(Y, Y, p["attn"], mask, variant, kv), p["norm1"], variant, placement)
    X = _sublayer(X, lambda Y: mlp(Y, p["mlp"], act), p["norm2"], variant, placement)
    return X  # (ℓ, d_e)


def decoder_block(X: Array, Z: Array, p: Params, variant: VariantSet, valid: Optional[Array] = None) -> Array:
    """Alg. 8 lines 14-19. X: (ℓ_x, d_e) decoder stream, Z: (ℓ_z, d_e) encoder output.

    post (paper): X ← LN3(X + SelfAttn(X, causal)); X ← LN4(X + CrossAttn(X, Z));
    X ← LN5(X + MLP(X)). pre: X += SelfAttn(LN3 X); X += CrossAttn(LN4 X, Z);
    X += MLP(LN5 X), with the context Z used as given. ``valid``: rows t ≥ valid of X
    are padding (architectures.py); Z is never padded.
    """
    placement = variant.resolved_norm_placement("ed_decoder")
    act = activation(variant.resolved_activation("ed_decoder"))
    ell_x = X.shape[0]
    causal = unidirectional_mask(ell_x, ell_x, variant)  # (ℓ_x, ℓ_x), line 14
    kv = _valid_rows(ell_x, valid)
    X = _sublayer(X, lambda Y: mh_attention(Y, Y, p["self_attn"], causal, variant, kv), p["norm3"], variant,
                  placement)  # lines 14-15
    X = _sublayer(X, lambda Y: mh_attention(Y, Z, p["cross_attn"], None, variant), p["norm4"], variant,
                  placement)  # lines 16-17, Mask ≡ 1
    X = _sublayer(X, lambda Y: mlp(Y, p["mlp"], act), p["norm5"], variant, placement)  # lines 18-19
    return X  # (ℓ_x, d_e)
