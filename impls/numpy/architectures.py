"""Algorithms 8-10 (forward passes) in NumPy, and the encoder read as a
next-token predictor (the ``next_token_encoder`` entry).

Each of Algorithms 8-10 returns P ∈ (0,1)^{N_V×ℓ} (with a leading ``...``
batch axis when the tokens have one): column t is a distribution over the
next token; ``next_token_encoder`` returns that column for t = ℓ−1 only. Layers are
looped over in Python (there are L of them, each a different parameter set);
tokens and heads are never looped over.

The ``*_logits_fwd`` functions stop before the final softmax (the losses of
Algorithms 11-13 take log P from the logits) and return a cache for the
hand-written backward passes of ``grad_architectures.py``; the forward
entries are the softmax of the same logits.

Line numbers cite the restatement in ALGORITHMS.md.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .components import EmbedCache, KVCache, activation, embed_fwd, logits, real_positions, softmax_columns
from .layers import LayerCache, NamedNormCache, decoder_layer_fwd, norm_fwd, stack_layer, stack_layer_fwd

__all__ = [
    "DCache",
    "cached_decoding",
    "ECache",
    "EDCache",
    "EmbedTokensCache",
    "UnembedCache",
    "d_logits_fwd",
    "d_transformer",
    "e_logits_fwd",
    "e_transformer",
    "ed_logits_fwd",
    "ed_transformer",
    "embed_tokens",
    "local_or_global",
    "next_token_encoder",
    "next_token_logits",
    "padded_d_transformer",
    "padded_e_transformer",
    "padded_ed_transformer",
    "embed_tokens_fwd",
    "unembed_columns",
    "unembedding_matrix",
]

Params = Mapping[str, Any]
Layers = tuple[tuple[LayerCache, ...], ...]


def unembedding_matrix(params: Params, variant) -> np.ndarray:
    """W_u (N_V × d), or W_eᵀ under ``unembedding='tied'``."""
    return params["W_e"].T if variant.unembedding == "tied" else params["W_u"]


class UnembedCache(NamedTuple):
    X: np.ndarray  # (..., d, ℓ)  the input of Algorithm 7
    W_u: np.ndarray  # (N_V, d)  W_u, or W_eᵀ when tied
    tied: bool
    has_b_u: bool
    capped: Optional[np.ndarray] = None  # (..., N_V, ℓ) tanh(z/c) under ``logit_softcap`` c, else None


def unembed_logits_fwd(X: np.ndarray, params: Params, variant) -> tuple[np.ndarray, UnembedCache]:
    """W_u X + b_u 1ᵀ (Algorithm 7 before the softmax), with the ``unembedding`` and ``logit_bias`` switches;
    under ``logit_softcap`` c > 0 each logit z then becomes c·tanh(z/c) (Gemma 2's final_logit_softcapping,
    applied to lm_head's output before the softmax and the loss)."""
    W_u = unembedding_matrix(params, variant)
    b_u = params["b_u"] if variant.logit_bias else None
    z = logits(X, W_u, b_u)
    capped = None
    if variant.logit_softcap:
        c = np.asarray(variant.logit_softcap, dtype=z.dtype)
        capped = np.tanh(z / c)
        z = c * capped
    return z, UnembedCache(X, W_u, variant.unembedding == "tied", b_u is not None, capped)


def unembed_columns(X: np.ndarray, params: Params, variant) -> np.ndarray:
    """Algorithm 7 per column, with the ``unembedding`` and ``logit_bias`` switches."""
    return softmax_columns(unembed_logits_fwd(X, params, variant)[0])


class EmbedTokensCache(NamedTuple):
    gamma: Optional[str]  # flat names of the embedding norm's γ and β (None when absent)
    beta: Optional[str]
    cache: EmbedCache


def embed_tokens_fwd(x: np.ndarray, params: Params, variant, ell_max: int,
                     emb: str = "emb", *, start: int = 0,
                     pad: Optional[np.ndarray] = None, table: str = "W_p") -> tuple[np.ndarray, EmbedTokensCache]:
    """Lines 1-3 with the embedding norm's parameters ``gamma_{emb}``/``beta_{emb}``; x[0] at
    absolute position ``start`` (decoding); learned positions from the parameter ``table``."""
    has_gamma = variant.embedding_norm and variant.affine in ("scale_shift", "scale")
    has_beta = variant.embedding_norm and variant.affine == "scale_shift" and variant.norm == "layer_norm"
    g_name = f"gamma_{emb}" if has_gamma else None
    b_name = f"beta_{emb}" if has_beta else None
    X, cache = embed_fwd(x, params["W_e"], params[table] if variant.positions == "learned" else None, variant,
                         ell_max=ell_max,
                         gamma=params[g_name] if g_name else None,
                         beta=params[b_name] if b_name else None, start=start, pad=pad)
    return X, EmbedTokensCache(g_name, b_name, cache)


def embed_tokens(x: np.ndarray, params: Params, variant, ell_max: int, emb: str = "emb", *,
                 start: int = 0) -> np.ndarray:
    return embed_tokens_fwd(x, params, variant, ell_max, emb, start=start)[0]


def _final_norm(X: np.ndarray, params: Params, variant, arch: str, gamma: str,
                beta: str) -> tuple[np.ndarray, Optional[NamedNormCache]]:
    if not variant.resolved_final_norm(arch):
        return X, None
    return norm_fwd(X, params, gamma, beta, variant)


# --------------------------------------------------------------------------
# Algorithm 8
# --------------------------------------------------------------------------


class EDCache(NamedTuple):
    enc_embed: EmbedTokensCache
    enc_layers: Layers
    enc_final: Optional[NamedNormCache]
    dec_embed: EmbedTokensCache
    dec_layers: Layers
    dec_final: Optional[NamedNormCache]
    unembed: UnembedCache


def ed_logits_fwd(z: np.ndarray, x: np.ndarray, params: Params, variant, hyper: Mapping[str, int], *,
                  pad_z: Optional[np.ndarray] = None,
                  pad_x: Optional[np.ndarray] = None) -> tuple[np.ndarray, EDCache]:
    """Algorithm 8, lines 1-21 up to the softmax: encoder over z, decoder over x with cross-attention to Z.

    z: (..., ℓ_z), x: (..., ℓ_x) int64 -> logits: (..., N_V, ℓ_x).
    ``final_norm='final'`` adds a norm after each stack (γ_enc/β_enc, γ_dec/β_dec).
    ``pad_z`` (..., ℓ_z), True = a real source token: the source's padding positions are masked as
    keys in every encoder layer (line 5, Mask ≡ 1 ∧ pad_z[t_z]) and every cross-attention (line 16);
    ``pad_x`` (..., ℓ_x) the target's in every decoder self-attention (line 14, [[t_z ≤ t_x]] ∧
    pad_x[t_z]).
    """
    H, ell_max = hyper["H"], hyper["ell_max"]
    Z, enc_embed = embed_tokens_fwd(z, params, variant, ell_max, "emb_enc")  # (..., d_e, ℓ_z)  lines 1-3
    enc_layers = []
    for l in range(hyper["L_enc"]):  # line 4; T5: every layer reads the stack's one table, layer 0's (T5Stack)
        Z, c = stack_layer_fwd(Z, params, f"enc_layers.{l}.", variant, H, "ed_encoder", pad=pad_z,
                               table="enc_layers.0.attn.")  # lines 5-8
        enc_layers.append(c)
    Z, enc_final = _final_norm(Z, params, variant, "ed_encoder", "gamma_enc", "beta_enc")
    # ed_positions="separate" (BART): the target's learned positions are a table of its own
    dec_table = "W_p_dec" if variant.ed_positions == "separate" else "W_p"
    X, dec_embed = embed_tokens_fwd(x, params, variant, ell_max, "emb_dec",
                                    table=dec_table)  # (..., d_e, ℓ_x)  lines 10-12
    dec_layers = []
    for l in range(hyper["L_dec"]):  # line 13
        X, c = decoder_layer_fwd(X, Z, params, f"dec_layers.{l}.", variant, H, pad_x=pad_x, pad_z=pad_z,
                                 table="dec_layers.0.self_attn.")  # lines 14-19
        dec_layers.append(c)
    X, dec_final = _final_norm(X, params, variant, "ed_decoder", "gamma_dec", "beta_dec")
    if variant.unembedding_scale == "inv_sqrt_d_e":  # T5 v1.0: the decoder's output times d_model**-0.5
        X = X * (X.shape[-2] ** -0.5)
    out, unembed = unembed_logits_fwd(X, params, variant)  # (..., N_V, ℓ_x)  line 21
    return out, EDCache(enc_embed, tuple(enc_layers), enc_final, dec_embed, tuple(dec_layers), dec_final, unembed)


def ed_transformer(z: np.ndarray, x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    return softmax_columns(ed_logits_fwd(z, x, params, variant, hyper)[0])


def padded_ed_transformer(z: np.ndarray, x: np.ndarray, pad_z: np.ndarray, pad_x: np.ndarray, params: Params,
                          variant, hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 8 with the source's padding positions (pad_z[t] False) masked as keys in every
    encoder layer and cross-attention, the target's (pad_x[t] False) in every decoder
    self-attention: P (..., N_V, ℓ_x), line 21."""
    return softmax_columns(ed_logits_fwd(z, x, params, variant, hyper, pad_z=pad_z, pad_x=pad_x)[0])


# --------------------------------------------------------------------------
# Algorithm 9
# --------------------------------------------------------------------------


class ECache(NamedTuple):
    embed: EmbedTokensCache
    layers: Layers
    final: Optional[NamedNormCache]
    head_in: np.ndarray  # (..., d_e, ℓ)  X before line 10
    W_f: np.ndarray  # (d_f, d_e)
    head_pre: np.ndarray  # (..., d_f, ℓ)  W_f X + b_f 1ᵀ
    act: str
    head_norm: NamedNormCache  # line 11
    unembed: UnembedCache


def e_logits_fwd(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int], *,
                 pad: Optional[np.ndarray] = None) -> tuple[np.ndarray, ECache]:
    """Algorithm 9, lines 1-12 up to the softmax (BERT): layers, then the head X ← norm(act(W_f X + b_f 1ᵀ)).

    x: (..., ℓ) -> logits: (..., N_V, ℓ). ``final_norm='final'`` adds a norm
    (γ_final, β_final) after the last layer, before line 10. The head's
    activation follows the ``activation`` switch (paper: GELU). ``pad`` (..., ℓ), True = a real
    token: padding positions are masked as keys in every layer (BERT's ``attention_mask``).
    """
    X, emb = embed_tokens_fwd(x, params, variant, hyper["ell_max"], pad=pad)  # (..., d_e, ℓ)  lines 1-3
    layers = []
    for l in range(hyper["L"]):  # line 4
        X, c = stack_layer_fwd(X, params, f"layers.{l}.", variant, hyper["H"], "bert", pad=pad)  # lines 5-8
        layers.append(c)
    X, final = _final_norm(X, params, variant, "bert", "gamma_final", "beta_final")
    act = variant.resolved_activation("bert")
    pre = params["W_f"] @ X + params["b_f"][:, None]  # (..., d_f, ℓ)  line 10
    Xf, head_norm = norm_fwd(activation(act)(pre), params, "gamma", "beta", variant)  # line 11
    out, unembed = unembed_logits_fwd(Xf, params, variant)  # (..., N_V, ℓ)  line 12
    return out, ECache(emb, tuple(layers), final, X, params["W_f"], pre, act, head_norm, unembed)


def e_transformer(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    return softmax_columns(e_logits_fwd(x, params, variant, hyper)[0])


def padded_e_transformer(x: np.ndarray, pad: np.ndarray, params: Params, variant,
                         hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 9 with padding positions (pad[t] False) masked as keys in every layer."""
    return softmax_columns(e_logits_fwd(x, params, variant, hyper, pad=pad)[0])


# --------------------------------------------------------------------------
# Algorithm 10
# --------------------------------------------------------------------------


class DCache(NamedTuple):
    embed: EmbedTokensCache
    layers: Layers
    final: Optional[NamedNormCache]
    unembed: UnembedCache


def local_or_global(variant, l: int):
    """Layer l's conventions in a stack of local and global layers (Gemma 2 and 3).

    With ``global_every`` = k > 0 and a sliding ``window``, the layers numbered l = k−1, 2k−1, ...
    (0-based) see every earlier position: their window is dropped; the others keep the window and,
    when ``rope_local_base`` is set under RoPE, turn with that base instead of ``rope_base`` and unscaled
    (``rope_scaling`` only reaches Gemma 3's "full_attention" rope parameters: transformers 5.24
    ``Gemma3TextConfig.convert_rope_params_to_dict``).
    transformers 5.24 (Gemma2Config, Gemma3TextConfig): layer i is "full_attention" exactly when
    (i + 1) % k == 0; Gemma 3's sliding layers take rope_parameters["sliding_attention"]["rope_theta"].
    Without k or a window every layer has ``variant`` as it is. The backward pass needs nothing more:
    each layer's cache holds the mask and the rotary base its forward pass used.
    """
    k = variant.global_every
    if not (k and variant.window):
        return variant
    is_global = (l + 1) % k == 0
    if is_global:
        return variant.replace(window=0)
    if variant.rotary != "none" and variant.rope_local_base:
        return variant.replace(rope_base=variant.rope_local_base, rope_scaling="none")
    return variant


def d_logits_fwd(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int], *,
                 pad: Optional[np.ndarray] = None, start: int = 0,
                 kv_caches: Optional[Sequence[KVCache]] = None) -> tuple[np.ndarray, DCache]:
    """Algorithm 10, lines 1-11 up to the softmax (GPT-2): pre-LN causal layers, final norm (line 10).

    x: (..., ℓ) -> logits: (..., N_V, ℓ). ``final_norm='none'`` drops line 10. ``pad`` (..., ℓ),
    True = a real token: padding positions are masked as keys in every layer. Decoding
    (``cached_decoding``): x holds the tokens at absolute positions ``start``.., and
    ``kv_caches[l]`` layer l's keys and values of the positions before them (filled as it runs).
    """
    X, emb = embed_tokens_fwd(x, params, variant, hyper["ell_max"], start=start, pad=pad)  # (..., d_e, ℓ)  lines 1-3
    # pad_positions="real": ALiBi's positions are the real tokens before each column, as W_p's are
    real = real_positions(pad) if pad is not None and variant.pad_positions == "real" else None  # (..., ℓ)
    layers = []
    for l in range(hyper["L"]):  # line 4
        X, c = stack_layer_fwd(X, params, f"layers.{l}.", local_or_global(variant, l), hyper["H"], "gpt2",
                               pad=pad, offset=start, alibi_positions=real,
                               kv_cache=None if kv_caches is None else kv_caches[l])  # lines 5-8
        layers.append(c)
    X, final = _final_norm(X, params, variant, "gpt2", "gamma", "beta")  # line 10
    out, unembed = unembed_logits_fwd(X, params, variant)  # (..., N_V, ℓ)  line 11
    return out, DCache(emb, tuple(layers), final, unembed)


def d_transformer(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    return softmax_columns(d_logits_fwd(x, params, variant, hyper)[0])


def padded_d_transformer(x: np.ndarray, pad: np.ndarray, params: Params, variant,
                         hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 10 with padding positions (pad[t] False) masked as keys in every layer."""
    return softmax_columns(d_logits_fwd(x, params, variant, hyper, pad=pad)[0])


def cached_decoding(x: np.ndarray, n_prefill, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 10 run as a generator runs it, with a key/value cache per layer.

    x[:n_prefill] goes through the model in one call (the prompt), which fills each layer's cache
    with its keys (after RoPE) and values, per key/value head; then each later token x[t] goes
    through alone, one column at absolute position t (W_p[:, t], sinusoid t, RoPE angle t·θ_i),
    its attention reading the cached positions < t and its own, and appending its own to the cache.
    Every layer, norm and the unembedding are the forward pass's own code (``d_logits_fwd``).
    Returns P (..., N_V, ℓ): columns < n_prefill from the prefill, column t ≥ n_prefill from step t.

    With a leading batch axis (x (B, ℓ), n_prefill (B,)) each example is decoded on its own, since
    the examples' prompts differ in length.
    """
    x = np.asarray(x)
    n = np.asarray(n_prefill)
    if x.ndim > 1:
        if n.shape != x.shape[:-1]:
            raise ValueError(f"n_prefill: one length per sequence {x.shape[:-1]}; given shape {n.shape}")
        rows = [cached_decoding(x[idx], n[idx], params, variant, hyper) for idx in np.ndindex(*x.shape[:-1])]
        return np.stack(rows).reshape(x.shape[:-1] + rows[0].shape)  # (..., N_V, ℓ)
    ell = x.shape[-1]
    n_pre = int(n)
    if not 1 <= n_pre <= ell:
        raise ValueError(f"n_prefill: a prompt length in [1, {ell}]; given {n_pre}")
    if ell > hyper["ell_max"]:
        raise ValueError(f"x: sequence length {ell} exceeds ell_max = {hyper['ell_max']}")
    caches = [KVCache() for _ in range(hyper["L"])]
    columns = [softmax_columns(d_logits_fwd(x[:n_pre], params, variant, hyper, kv_caches=caches)[0])]  # prefill
    for t in range(n_pre, ell):  # one token per step, at absolute position t
        step = d_logits_fwd(x[t:t + 1], params, variant, hyper, start=t, kv_caches=caches)[0]  # (N_V, 1)
        columns.append(softmax_columns(step))
    return np.concatenate(columns, axis=-1)  # (N_V, ℓ)


# --------------------------------------------------------------------------
# The encoder as a next-token predictor (seeds 000 and 002)
# --------------------------------------------------------------------------


def next_token_logits(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    """Algorithm 8's encoder (lines 1-8, Mask ≡ 1), then W_u e (+ b_u) for e = X[:, ℓ−1].

    x: (..., ℓ) -> logits: (..., N_V). ``final_norm='final'`` normalises e
    first (γ, β): a norm acts per column, so only the last one is needed.
    """
    X, _ = embed_tokens_fwd(x, params, variant, hyper["ell_max"])  # (..., d_e, ℓ)  lines 1-3
    for l in range(hyper["L"]):  # line 4
        X = stack_layer(X, params, f"layers.{l}.", variant, hyper["H"], "ed_encoder")  # lines 5-8
    last, _ = _final_norm(X[..., -1:], params, variant, "ed_encoder", "gamma", "beta")  # (..., d_e, 1)
    return unembed_logits_fwd(last, params, variant)[0][..., 0]  # (..., N_V)


def next_token_encoder(x: np.ndarray, params: Params, variant, hyper: Mapping[str, int]) -> np.ndarray:
    """p = softmax(W_u X[:, ℓ−1]) (Algorithm 7 on the last column): x (..., ℓ) -> p (..., N_V)."""
    z = next_token_logits(x, params, variant, hyper)[..., :, None]  # (..., N_V, 1)
    return softmax_columns(z)[..., 0]  # (..., N_V)
