"""Transformer layers (Alg. 8 lines 5-8 and 14-19, Alg. 9 lines 5-8, Alg. 10
lines 5-8) in native layout (…, ℓ, d_e).

One block function serves the encoder, BERT and GPT-2 layers: they differ
only in the mask (GPT-2 is causal) and in what the ``paper`` variant values
resolve to for the architecture (norm placement, activation).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import Tensor

from ftspec.spec.variants import VariantSet

from .adapter import Block, DecBlock, Norm, pad_to_native
from .components import cached_self_attention, causal_mask, mh_attention, mlp, norm

__all__ = ["block", "cached_block", "decoder_block", "self_attention_mask"]


def _sublayer(X: Tensor, f: Callable[[Tensor], Tensor], n: Norm, v: VariantSet, placement: str) -> Tensor:
    """One residual sublayer.

    post:     X ← norm(X + f(X))   (Alg. 8 l. 5-6, Alg. 9 l. 5-6)
    pre:      X ← X + f(norm(X))   (Alg. 10 l. 5-6): the residual adds the
              un-normalised X, so the norm must not overwrite X.
    res_post: X ← X + norm(f(X))   (Swin Transformer v2's "res-post-norm", Liu et
              al. 2022): the residual stream itself is never normalised."""
    if placement == "post":
        return norm(X + f(X), n, v)
    if placement == "res_post":
        return X + norm(f(X), n, v)
    if placement != "pre":
        raise ValueError(f"unknown norm placement {placement!r}")
    return X + f(norm(X, n, v))


def self_attention_mask(ell: int, causal: bool, pad: Optional[Tensor], device) -> Optional[Tensor]:
    """The native mask (…, ℓ, ℓ) [query, key] of a self-attention with padding: the layer's own
    (causal [[t_z ≤ t_x]] or ≡ 1) ∧ pad[t_z]; None without padding (the layer's mask is built
    inside the attention: SDPA's ``is_causal`` or none)."""
    if pad is None:
        return None
    keys = pad_to_native(pad).to(device)  # (…, 1, ℓ): a padding position is no query's key
    if keys.shape[-1] != ell:
        raise ValueError(f"pad has {keys.shape[-1]} flags for a sequence of length {ell}")
    base = causal_mask(ell, ell, "top_left", device) if causal else torch.ones(ell, ell, dtype=torch.bool,
                                                                                  device=device)
    return base & keys  # (…, ℓ, ℓ)


def block(X: Tensor, p: Block, v: VariantSet, arch: str, pad: Optional[Tensor] = None) -> Tensor:
    """Encoder layer (arch "ed_encoder"), BERT layer ("bert") or GPT-2 layer
    ("gpt2", causal self-attention). X: (…, ℓ, d_e) → (…, ℓ, d_e).
    ``pad`` (…, ℓ), True = a real token: padding positions are masked as keys."""
    placement = v.resolved_norm_placement(arch)
    act = v.resolved_activation(arch)
    causal = arch == "gpt2"  # Alg. 10 l. 6: Mask[t, t'] = [[t ≤ t']]; the others Mask ≡ 1
    mask = self_attention_mask(X.shape[-2], causal, pad, X.device)
    if mask is not None:
        def attn(Y: Tensor) -> Tensor:
            return mh_attention(Y, Y, p.attn, v, mask=mask)
    else:
        def attn(Y: Tensor) -> Tensor:
            return mh_attention(Y, Y, p.attn, v, causal=causal)
    X = _sublayer(X, attn, p.norm1, v, placement)  # lines 5-6
    return _sublayer(X, lambda Y: mlp(Y, p.mlp, act, v), p.norm2, v, placement)  # lines 7-8


def cached_block(X: Tensor, p: Block, v: VariantSet, cache: list[Tensor], start: int) -> Tensor:
    """The GPT-2 layer (Alg. 10 lines 5-8) on the new tokens X (…, ℓ, d_e) at positions start …,
    the self-attention reading and extending this layer's key/value ``cache``
    (``components.cached_self_attention``); the norms and the MLP act per token."""
    placement = v.resolved_norm_placement("gpt2")
    act = v.resolved_activation("gpt2")
    X = _sublayer(X, lambda Y: cached_self_attention(Y, p.attn, v, cache, start), p.norm1, v, placement)
    return _sublayer(X, lambda Y: mlp(Y, p.mlp, act, v), p.norm2, v, placement)


def decoder_block(X: Tensor, Z: Tensor, p: DecBlock, v: VariantSet) -> Tensor:
    """Alg. 8 lines 14-19. X: (…, ℓ_x, d_e) decoder stream, Z: (…, ℓ_z, d_e)
    encoder output, used as given (it is never normalised here, even pre-LN)."""
    placement = v.resolved_norm_placement("ed_decoder")
    act = v.resolved_activation("ed_decoder")
    X = _sublayer(X, lambda Y: mh_attention(Y, Y, p.self_attn, v, causal=True), p.norm3, v, placement)  # 14-15
    X = _sublayer(X, lambda Y: mh_attention(Y, Z, p.cross_attn, v), p.norm4, v, placement)  # 16-17
    return _sublayer(X, lambda Y: mlp(Y, p.mlp, act, v), p.norm5, v, placement)  # 18-19
