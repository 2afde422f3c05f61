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

from .adapter import Attn, Block, DecBlock, Norm, pad_to_native
from .components import alibi_slopes, cached_self_attention, causal_mask, mh_attention, mlp, norm, t5_bias

__all__ = ["block", "cached_block", "decoder_block", "padding_mask", "self_attention_mask"]


def _sublayer(X: Tensor, f: Callable[[Tensor], Tensor], n: Norm, v: VariantSet, placement: str,
              n_out: Optional[Norm] = None) -> Tensor:
    """One residual sublayer.

    post:     X ← norm(X + f(X))   (Alg. 8 l. 5-6, Alg. 9 l. 5-6)
    pre:      X ← X + f(norm(X))   (Alg. 10 l. 5-6): the residual adds the
              un-normalised X, so the norm must not overwrite X.
    res_post: X ← X + norm(f(X))   (Swin Transformer v2's "res-post-norm", Liu et
              al. 2022): the residual stream itself is never normalised.
    sandwich: X ← X + norm'(f(norm(X)))   with ``n_out`` the second norm's γ/β (Gemma 2's
              post_attention_layernorm, post_feedforward_layernorm: transformers 5.24
              Gemma2DecoderLayer)."""
    if placement == "sandwich":
        if n_out is None:
            raise ValueError("norm_placement='sandwich' needs each sublayer's output norm")
        return X + norm(f(norm(X, n, v)), n_out, v)
    if placement == "post":
        return norm(X + f(X), n, v)
    if placement == "res_post":
        return X + norm(f(X), n, v)
    if placement != "pre":
        raise ValueError(f"unknown norm placement {placement!r}")
    return X + f(norm(X, n, v))


def _parallel(X: Tensor, attn: Callable[[Tensor], Tensor], p: Block, v: VariantSet, placement: str,
              act: str) -> Tensor:
    """Lines 5-8 side by side (``residual``): X + (Attn(N₁X) + MLP(N₂X)), N₂ = N₁ under
    "parallel_shared" (GPT-J's ln_1); the branches are summed first, as GPTNeoXLayer and GPTJBlock
    do. Pre-LN only (every source normalises each branch's input)."""
    if placement != "pre":
        raise ValueError(f"residual={v.residual!r} is defined for pre-LN layers only; given {placement!r}")
    Y1 = norm(X, p.norm1, v)  # (…, ℓ, d_e)
    Y2 = Y1 if v.residual == "parallel_shared" else norm(X, p.norm2, v)
    return X + (attn(Y1) + mlp(Y2, p.mlp, act, v))


def padding_mask(ell_x: int, ell_z: int, causal: bool, pad: Optional[Tensor], device,
                 name: str = "pad", window: int = 0) -> Optional[Tensor]:
    """The native mask (…, ℓ_x, ℓ_z) [query, key] of an attention with padding over its ℓ_z keys:
    the attention's own Mask (causal [[t_z ≤ t_x]], top-left, or ≡ 1) ∧ pad[t_z] (``name``: the
    decoder's ``pad_x`` or ``pad_z``); None without padding (the attention builds its own mask:
    SDPA's ``is_causal`` or none). ``window``: the causal mask's sliding window (0: none)."""
    if pad is None:
        return None
    keys = pad_to_native(pad).to(device)  # (…, 1, ℓ_z): a padding position is no query's key
    if keys.shape[-1] != ell_z:
        raise ValueError(f"{name} has {keys.shape[-1]} flags for a sequence of length {ell_z}")
    base = causal_mask(ell_x, ell_z, "top_left", device, window) if causal else \
        torch.ones(ell_x, ell_z, dtype=torch.bool, device=device)
    return base & keys  # (…, ℓ_x, ℓ_z)


def self_attention_mask(ell: int, causal: bool, pad: Optional[Tensor], device,
                        name: str = "pad", window: int = 0) -> Optional[Tensor]:
    """The native mask (…, ℓ, ℓ) [query, key] of a self-attention with padding: the layer's own
    (causal [[t_z ≤ t_x]], within ``window``, or ≡ 1) ∧ pad[t_z]; None without padding
    (``padding_mask``, ℓ_x = ℓ_z)."""
    return padding_mask(ell, ell, causal, pad, device, name, window)


def _attention(Z: Optional[Tensor], p: Attn, v: VariantSet, mask: Optional[Tensor],
               causal: bool, alibi_positions: Optional[Tensor] = None) -> Callable[[Tensor], Tensor]:
    """The attention sublayer's f(Y) (Alg. 5): self-attention (Z None: the context is Y itself)
    or cross-attention to Z (…, ℓ_z, d_e); ``mask`` (…, ℓ_x, ℓ_z) from ``padding_mask``, or None
    for the attention's own (``causal`` or ≡ 1). ``alibi_positions`` (…, ℓ): ALiBi's positions where a
    padded model counts them among the real tokens (``pad_positions="real"``)."""
    def f(Y: Tensor) -> Tensor:  # Y: (…, ℓ_x, d_e) → (…, ℓ_x, d_e)
        context = Y if Z is None else Z
        alibi = causal and Z is None  # a causal self-attention: where ALiBi's bias is defined
        bias = None  # T5's relative bias: a self-attention holding its table (spec 2.13), its buckets causal or not
        if v.rel_bias == "t5_buckets" and p.rel_bias is not None and Z is None:
            bias = t5_bias(p.rel_bias, Y.shape[-2], Y.shape[-2], not causal, v)
        if alibi and alibi_positions is not None and v.position_bias == "alibi":
            # m_h·(p(t_z) − p(t_x)), native [query, key], one table per sequence: (…, H, ℓ_x, ℓ_z)
            dist = (alibi_positions[..., None, :] - alibi_positions[..., :, None]).to(Y.dtype)  # (…, ℓ_x, ℓ_z)
            slopes = alibi_slopes(p.heads, Y.device).to(Y.dtype)  # (H,) rounded once, as ``alibi_bias``
            real = slopes[:, None, None] * dist.unsqueeze(-3)  # (…, H, ℓ_x, ℓ_z)
            bias, alibi = (real if bias is None else bias + real), False
        if mask is not None:
            return mh_attention(Y, context, p, v, mask=mask, alibi=alibi, pos_bias=bias)
        return mh_attention(Y, context, p, v, causal=causal, alibi=alibi, pos_bias=bias)
    return f


def block(X: Tensor, p: Block, v: VariantSet, arch: str, pad: Optional[Tensor] = None,
          alibi_positions: Optional[Tensor] = None) -> Tensor:
    """Encoder layer (arch "ed_encoder"), BERT layer ("bert") or GPT-2 layer
    ("gpt2", causal self-attention). X: (…, ℓ, d_e) → (…, ℓ, d_e).
    ``pad`` (…, ℓ), True = a real token: padding positions are masked as keys."""
    placement = v.resolved_norm_placement(arch)
    act = v.resolved_activation(arch)
    causal = arch == "gpt2"  # Alg. 10 l. 6: Mask[t, t'] = [[t ≤ t']]; the others Mask ≡ 1
    mask = self_attention_mask(X.shape[-2], causal, pad, X.device, window=v.window)  # (…, ℓ, ℓ) or None
    attn = _attention(None, p.attn, v, mask, causal, alibi_positions)
    if v.residual != "sequential" and arch == "gpt2":  # read by the decoder-only layer alone
        return _parallel(X, attn, p, v, placement, act)
    X = _sublayer(X, attn, p.norm1, v, placement, p.norm1_out)  # lines 5-6
    return _sublayer(X, lambda Y: mlp(Y, p.mlp, act, v), p.norm2, v, placement, p.norm2_out)  # lines 7-8


def cached_block(X: Tensor, p: Block, v: VariantSet, cache: list[Tensor], start: int) -> Tensor:
    """The GPT-2 layer (Alg. 10 lines 5-8) on the new tokens X (…, ℓ, d_e) at positions start …,
    the self-attention reading and extending this layer's key/value ``cache``
    (``components.cached_self_attention``); the norms and the MLP act per token."""
    placement = v.resolved_norm_placement("gpt2")
    act = v.resolved_activation("gpt2")
    if v.residual != "sequential":
        return _parallel(X, lambda Y: cached_self_attention(Y, p.attn, v, cache, start), p, v, placement, act)
    X = _sublayer(X, lambda Y: cached_self_attention(Y, p.attn, v, cache, start), p.norm1, v, placement,
                  p.norm1_out)
    return _sublayer(X, lambda Y: mlp(Y, p.mlp, act, v), p.norm2, v, placement, p.norm2_out)


def decoder_block(X: Tensor, Z: Tensor, p: DecBlock, v: VariantSet, pad_x: Optional[Tensor] = None,
                  pad_z: Optional[Tensor] = None) -> Tensor:
    """Alg. 8 lines 14-19. X: (…, ℓ_x, d_e) decoder stream, Z: (…, ℓ_z, d_e)
    encoder output, used as given (it is never normalised here, even pre-LN).
    ``pad_x`` (…, ℓ_x) and ``pad_z`` (…, ℓ_z), True = a real token, mask padding keys: line 14's
    Mask = [[t_z ≤ t_x]] ∧ pad_x[t_z], line 16's Mask ≡ 1 ∧ pad_z[t_z]."""
    placement = v.resolved_norm_placement("ed_decoder")
    act = v.resolved_activation("ed_decoder")
    ell_x, ell_z = X.shape[-2], Z.shape[-2]
    self_mask = padding_mask(ell_x, ell_x, True, pad_x, X.device, "pad_x", v.window)  # (…, ℓ_x, ℓ_x) or None
    cross_mask = padding_mask(ell_x, ell_z, False, pad_z, X.device, "pad_z")  # (…, ℓ_x, ℓ_z) or None
    X = _sublayer(X, _attention(None, p.self_attn, v, self_mask, True), p.norm3, v, placement,
                  p.norm3_out)  # 14-15
    X = _sublayer(X, _attention(Z, p.cross_attn, v, cross_mask, False), p.norm4, v, placement,
                  p.norm4_out)  # 16-17
    return _sublayer(X, lambda Y: mlp(Y, p.mlp, act, v), p.norm5, v, placement, p.norm5_out)  # 18-19
