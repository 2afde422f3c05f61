"""Forward passes of Algorithms 8-10 in native layout, and the encoder read
as a next-token predictor (the ``next_token_encoder`` entry).

Tokens are (…, ℓ) integer tensors; every hidden state is (…, ℓ, d); the
result P is (…, ℓ, N_V), row t a distribution over the next token (the
adapter transposes it to the canonical (N_V, ℓ)); ``next_token_encoder``
returns the last row only, p (…, N_V), the same in both layouts.

Each architecture is written once up to its logits (``*_logits``: Alg. 7
before the softmax), which is what the losses of Algorithms 11-13 consume;
``*_transformer`` is the softmax of those. Alg. 8 is also split into its
encoder (lines 1-9) and decoder (lines 10-21) so that EDInference (Alg. 15)
encodes z once and re-runs only the decoder per generated token. Alg. 10 is
also written as a key/value-cache decoder (``d_cached_logits``: a prefill,
then one token per call), the ``cached_decoding`` entry.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ftspec.spec.variants import VariantSet

from .adapter import Block, DecBlock, Embedding, Norm, Unembedding
from .components import activation, embed, logits, norm, real_positions
from .layers import block, cached_block, decoder_block

__all__ = [
    "d_cached_logits", "d_logits", "d_step_logits",
    "d_transformer", "e_logits", "e_transformer", "ed_decode_logits", "ed_encode", "ed_logits",
    "ed_transformer", "layer_conventions", "next_token_encoder", "next_token_logits",
]


def ed_encode(z: Tensor, emb_enc: Embedding, enc: Sequence[Block], final_enc: Norm, v: VariantSet,
              ell_max: int, pad_z: Optional[Tensor] = None) -> Tensor:
    """Alg. 8 lines 1-9 (plus the encoder's final norm under final_norm="final").
    z: (…, ℓ_z) source → Z: (…, ℓ_z, d_e). ``pad_z`` (…, ℓ_z), True = a real token: the
    source's padding positions are masked as keys in every layer (Mask ≡ 1 ∧ pad_z[t_z])."""
    Z = embed(z, emb_enc.table, emb_enc.positions, v, ell_max, emb_enc.norm)  # lines 1-3: (…, ℓ_z, d_e)
    for p in _stack_table(enc, v):  # line 4
        Z = block(Z, p, v, "ed_encoder", pad_z)  # lines 5-8
    if v.resolved_final_norm("ed_encoder"):
        Z = norm(Z, final_enc, v)
    return Z


def ed_decode_logits(x: Tensor, Z: Tensor, emb_dec: Embedding, dec: Sequence[DecBlock], final_dec: Norm,
                     head: Unembedding, v: VariantSet, ell_max: int, pad_x: Optional[Tensor] = None,
                     pad_z: Optional[Tensor] = None) -> Tensor:
    """Alg. 8 lines 10-21 before the softmax. x: (…, ℓ_x) target, Z: (…, ℓ_z,
    d_e) encoder output → logits (…, ℓ_x, N_V). ``pad_x`` (…, ℓ_x) masks the target's padding
    keys in every self-attention (line 14), ``pad_z`` (…, ℓ_z) the source's in every
    cross-attention (line 16); True = a real token."""
    X = embed(x, emb_dec.table, emb_dec.positions, v, ell_max, emb_dec.norm)  # lines 10-12: (…, ℓ_x, d_e)
    for p in _stack_table(dec, v):  # line 13
        X = decoder_block(X, Z, p, v, pad_x, pad_z)  # lines 14-19
    if v.resolved_final_norm("ed_decoder"):
        X = norm(X, final_dec, v)
    if v.unembedding_scale == "inv_sqrt_d_e":  # T5ForConditionalGeneration: sequence_output * d_model**-0.5
        X = X * X.shape[-1] ** -0.5
    return logits(X, head.W_u, head.b_u, v)  # line 21 before softmax: (…, ℓ_x, N_V)


def _stack_table(layers: Sequence, v: VariantSet) -> list:
    """One stack's layers under rel_bias="t5_buckets": T5Stack builds block 0 alone with
    ``has_relative_attention_bias`` and hands its ``position_bias`` to every later block (transformers 5.24
    modeling_t5.py), so each layer's self-attention gets the first layer's table; the cross-attention none."""
    layers = list(layers)
    if v.rel_bias != "t5_buckets" or not layers:
        return layers
    out = []
    for p in layers:
        if isinstance(p, DecBlock):
            out.append(replace(p, self_attn=replace(p.self_attn, rel_bias=layers[0].self_attn.rel_bias)))
        else:
            out.append(replace(p, attn=replace(p.attn, rel_bias=layers[0].attn.rel_bias)))
    return out


def ed_logits(z: Tensor, x: Tensor, emb_enc: Embedding, emb_dec: Embedding, enc: Sequence[Block],
              dec: Sequence[DecBlock], final_enc: Norm, final_dec: Norm, head: Unembedding,
              v: VariantSet, ell_max: int, pad_z: Optional[Tensor] = None,
              pad_x: Optional[Tensor] = None) -> Tensor:
    """Alg. 8 up to the logits. z: (…, ℓ_z), x: (…, ℓ_x) → (…, ℓ_x, N_V).

    ``emb_enc``/``emb_dec`` share W_e (and W_p, unless ``ed_positions="separate"`` gives
    ``emb_dec`` W_p_dec) and differ in their embedding norms (γ_emb_enc, γ_emb_dec); ``final_enc``/``final_dec`` are
    used when the variant resolves to a final norm (γ_enc, γ_dec). ``pad_z`` (…, ℓ_z) and
    ``pad_x`` (…, ℓ_x), True = a real token: the source's padding is no key of the encoder's
    layers nor of any cross-attention, the target's none of the decoder's self-attention."""
    Z = ed_encode(z, emb_enc, enc, final_enc, v, ell_max, pad_z)
    return ed_decode_logits(x, Z, emb_dec, dec, final_dec, head, v, ell_max, pad_x, pad_z)


def ed_transformer(*args, **kwargs) -> Tensor:
    """Alg. 8 (arguments as ``ed_logits``) → P: (…, ℓ_x, N_V)."""
    return torch.softmax(ed_logits(*args, **kwargs), dim=-1)


def e_logits(x: Tensor, emb: Embedding, layers: Sequence[Block], final: Norm, W_f: Tensor, b_f: Tensor,
             head_norm: Norm, head: Unembedding, v: VariantSet, ell_max: int,
             pad: Optional[Tensor] = None) -> Tensor:
    """Alg. 9 up to the logits. x: (…, ℓ) → (…, ℓ, N_V). ``final`` (γ_final)
    only under final_norm="final"; the head's norm (γ, β over d_f) is line 11
    and always there. ``pad`` (…, ℓ), True = a real token: padding positions are
    masked as keys in every layer (BERT's ``attention_mask``), and under ``pad_positions="real"`` the
    positions are counted among the real tokens."""
    X = embed(x, emb.table, emb.positions, v, ell_max, emb.norm, pad=pad)  # lines 1-3: (…, ℓ, d_e)
    for p in layers:  # line 4
        X = block(X, p, v, "bert", pad)  # lines 5-8
    if v.resolved_final_norm("bert"):
        X = norm(X, final, v)
    X = activation(F.linear(X, W_f, b_f), v.resolved_activation("bert"))  # line 10: (…, ℓ, d_f)
    X = norm(X, head_norm, v)  # line 11
    return logits(X, head.W_u, head.b_u, v)  # line 12 before softmax: (…, ℓ, N_V)


def e_transformer(*args, **kwargs) -> Tensor:
    """Alg. 9 (arguments as ``e_logits``) → P: (…, ℓ, N_V)."""
    return torch.softmax(e_logits(*args, **kwargs), dim=-1)


def layer_conventions(v: VariantSet, i: int) -> VariantSet:
    """The switches decoder layer i (from 0) runs with. Gemma 2 and 3 interleave sliding-window
    ("sliding_attention") and full ("full_attention") layers: transformers 5.24 sets
    ``layer_types[i]`` to full when (i + 1) % k == 0, k = 2 (Gemma2Config) or the
    ``sliding_window_pattern`` 6 (Gemma3TextConfig), and builds a separate rotary embedding for each
    type (Gemma3RotaryEmbedding, the sliding one from rope_local_base_freq). Here k is
    ``global_every``: a full layer loses ``window``; a sliding one keeps it and, if
    ``rope_local_base`` is set, rotates with that base and unscaled (a config's ``rope_scaling`` updates
    only ``rope_parameters["full_attention"]``: Gemma3TextConfig.convert_rope_params_to_dict). k = 0 or
    no window: ``v`` unchanged."""
    if v.global_every == 0 or v.window == 0:
        return v
    if (i + 1) % v.global_every == 0:
        return v.replace(window=0)
    if v.rope_local_base and v.rotary != "none":
        return v.replace(rope_base=v.rope_local_base, rope_scaling="none")
    return v


def d_logits(x: Tensor, emb: Embedding, layers: Sequence[Block], final: Norm, head: Unembedding,
             v: VariantSet, ell_max: int, pad: Optional[Tensor] = None) -> Tensor:
    """Alg. 10 up to the logits. x: (…, ℓ) → (…, ℓ, N_V). ``pad`` (…, ℓ), True = a real
    token: padding positions are masked as keys in every layer (causal mask ∧ pad), and under
    ``pad_positions="real"`` W_p's and ALiBi's positions are counted among the real tokens."""
    X = embed(x, emb.table, emb.positions, v, ell_max, emb.norm, pad=pad)  # lines 1-3: (…, ℓ, d_e)
    real = real_positions(pad.to(X.device)) if pad is not None and v.pad_positions == "real" else None  # (…, ℓ)
    for i, p in enumerate(layers):  # line 4
        X = block(X, p, layer_conventions(v, i), "gpt2", pad, real)  # lines 5-8
    if v.resolved_final_norm("gpt2"):
        X = norm(X, final, v)  # line 10
    return logits(X, head.W_u, head.b_u, v)  # line 11 before softmax: (…, ℓ, N_V)


def d_step_logits(x: Tensor, start: int, caches: Sequence[list[Tensor]], emb: Embedding, layers: Sequence[Block],
                  final: Norm, head: Unembedding, v: VariantSet, ell_max: int) -> Tensor:
    """One call of a key/value-cache decoder: Alg. 10 on the new tokens x (…, ℓ) at absolute
    positions start … start + ℓ − 1, layer l reading and extending ``caches[l]`` (the keys and
    values of positions < start) → logits (…, ℓ, N_V) of those positions. start = 0 with empty
    caches is the prefill; then ℓ = 1 per generated token."""
    X = embed(x, emb.table, emb.positions, v, ell_max, emb.norm, start=start)  # lines 1-3 at positions start …
    for i, (p, cache) in enumerate(zip(layers, caches, strict=True)):  # line 4
        X = cached_block(X, p, layer_conventions(v, i), cache, start)  # lines 5-8
    if v.resolved_final_norm("gpt2"):
        X = norm(X, final, v)  # line 10
    return logits(X, head.W_u, head.b_u, v)  # line 11 before softmax


def d_cached_logits(x: Tensor, n_prefill: int, emb: Embedding, layers: Sequence[Block], final: Norm,
                    head: Unembedding, v: VariantSet, ell_max: int) -> Tensor:
    """Alg. 10 decoded as a generator runs it: x[:n_prefill] in one call that fills every layer's
    key/value cache, then each later token x[t] alone (positions t absolute), reading the cache and
    appending its own key and value. x: (ℓ,) → logits (ℓ, N_V): rows < n_prefill from the
    prefill, row t ≥ n_prefill from step t. Causal attention makes these the rows of ``d_logits``."""
    ell = x.shape[-1]
    if not 1 <= n_prefill <= ell:
        raise ValueError(f"n_prefill: a prompt length in [1, {ell}]; given {n_prefill}")
    if ell > ell_max:
        raise ValueError(f"sequence of length {ell} exceeds ell_max = {ell_max}")
    caches: list[list[Tensor]] = [[] for _ in layers]
    rows = [d_step_logits(x[..., :n_prefill], 0, caches, emb, layers, final, head, v, ell_max)]  # the prefill
    for t in range(n_prefill, ell):  # one token per call
        rows.append(d_step_logits(x[..., t:t + 1], t, caches, emb, layers, final, head, v, ell_max))
    return torch.cat(rows, dim=-2)  # (…, ℓ, N_V)


def d_transformer(*args, **kwargs) -> Tensor:
    """Alg. 10 (arguments as ``d_logits``) → P: (…, ℓ, N_V)."""
    return torch.softmax(d_logits(*args, **kwargs), dim=-1)


def next_token_logits(x: Tensor, emb: Embedding, layers: Sequence[Block], final: Norm, head: Unembedding,
                      v: VariantSet, ell_max: int) -> Tensor:
    """Alg. 8's encoder (lines 1-8, no mask), then W_u e + b_u for e the last token's row.
    x: (…, ℓ) → (…, N_V). Under final_norm="final" e is normalised first (γ, β): the norm
    acts per token, so only the last one is needed."""
    X = embed(x, emb.table, emb.positions, v, ell_max, emb.norm)  # lines 1-3: (…, ℓ, d_e)
    for p in layers:  # line 4
        X = block(X, p, v, "ed_encoder")  # lines 5-8
    e = X[..., -1:, :]  # (…, 1, d_e): the last token
    if v.resolved_final_norm("ed_encoder"):
        e = norm(e, final, v)
    return logits(e, head.W_u, head.b_u, v).squeeze(-2)  # (…, N_V)


def next_token_encoder(*args, **kwargs) -> Tensor:
    """p = softmax(W_u e) at the last position (arguments as ``next_token_logits``) → (…, N_V)."""
    return torch.softmax(next_token_logits(*args, **kwargs), dim=-1)
