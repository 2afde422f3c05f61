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

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp

from ftspec.spec.variants import VariantSet

from .components import (
    Array,
    Params,
    activation,
    alibi_bias,
    attend,
    embed,
    heads_out,
    kv_index,
    linear,
    norm,
    project_kv,
    project_q,
    real_positions,
    rope,
    rope_rows,
    softcap,
)
from .layers import valid_rows, block, decoder_block, encoder_block, self_mask


def _logits(X: Array, theta: Params, variant: VariantSet) -> Array:
    """Alg. 7 before the softmax: W_u X[t] + b_u for every row. X: (ℓ, d) → (ℓ, N_V)."""
    W_u = theta["tok"] if variant.unembedding == "tied" else theta["unembed"]["W_u"]  # (N_V, d)
    z = linear(X, W_u, theta["unembed"].get("b_u"))  # (ℓ, N_V)
    return softcap(z, variant.logit_softcap) if variant.logit_softcap else z  # Gemma 2's final cap


def _softmax(logits: Array) -> Array:
    return jax.nn.softmax(logits, axis=-1)  # Alg. 7: P = softmax(W_u X), per row


def ed_encode(z: Array, theta: Params, ell_max: int, variant: VariantSet, pad_z: Optional[Array] = None) -> Array:
    """Alg. 8 lines 1-9 (the encoder). z: (ℓ_z,) source tokens → Z: (ℓ_z, d_e). ``pad_z`` (ℓ_z,)
    bool: the source's padding positions, masked as keys in every layer (Mask ≡ 1 ∧ pad_z[t_z])."""
    Z = embed(z, theta, ell_max, variant, theta.get("norm_emb_enc"))  # (ℓ_z, d_e)  lines 1-3
    for layer in theta["enc_layers"]:  # lines 4-8
        Z = encoder_block(Z, _with_stack_table(layer, "attn", theta.get("rel_enc"), variant), variant,
                          "ed_encoder", pad=pad_z)
    if variant.resolved_final_norm("ed_encoder"):
        Z = norm(Z, theta["norm_enc"], variant)  # γ_enc, β_enc (final_norm="final")
    return Z


def ed_decode_logits(x: Array, Z: Array, theta: Params, ell_max: int, variant: VariantSet,
                     valid: Optional[Array] = None, pad_x: Optional[Array] = None,
                     pad_z: Optional[Array] = None) -> Array:
    """Alg. 8 lines 10-21 before the softmax. x: (ℓ_x,) target tokens, Z: (ℓ_z, d_e) → (ℓ_x, N_V).
    ``pad_x`` (ℓ_x,) / ``pad_z`` (ℓ_z,) bool: padding masked as keys of every layer's
    self-attention (line 14, ∧ pad_x[t_z]) and cross-attention (line 16, ∧ pad_z[t_z])."""
    rows = valid_rows(x.shape[0], valid)
    if variant.ed_positions == "separate" and variant.positions == "learned":  # BART: the target's own table
        theta = {**theta, "pos": theta["pos_dec"]}
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb_dec"), rows=rows)  # (ℓ_x, d_e)  lines 10-12
    for layer in theta["dec_layers"]:  # lines 13-19
        X = decoder_block(X, Z, _with_stack_table(layer, "self_attn", theta.get("rel_dec"), variant), variant,
                          valid, pad_x=pad_x, pad_z=pad_z)
    if variant.resolved_final_norm("ed_decoder"):
        X = norm(X, theta["norm_dec"], variant, rows=rows)  # γ_dec, β_dec
    if variant.unembedding_scale == "inv_sqrt_d_e":  # T5 v1.0's d_model**-0.5 ahead of its tied lm_head
        X = X * (1.0 / math.sqrt(X.shape[-1]))
    return _logits(X, theta, variant)  # (ℓ_x, N_V)  line 21 before the softmax


def _with_stack_table(layer: Params, attn: str, table: Optional[Array], variant: VariantSet) -> Params:
    """A layer of a T5 stack (rel_bias="t5_buckets"): its self-attention (``attn``) reads the stack's table,
    which only the first layer holds (transformers 5.24 ``T5Stack``: ``has_relative_attention_bias=bool(i == 0)``,
    the first block's ``position_bias`` reused by the rest); the cross-attention reads none."""
    if variant.rel_bias != "t5_buckets" or table is None:
        return layer
    return {**layer, attn: {**layer[attn], "rel_bias": table}}


def ed_logits(z: Array, x: Array, theta: Params, ell_max: int, variant: VariantSet,
              pad_z: Optional[Array] = None, pad_x: Optional[Array] = None) -> Array:
    """Alg. 8 lines 1-20 and W_u X of line 21. z: (ℓ_z,), x: (ℓ_x,) → (ℓ_x, N_V)."""
    Z = ed_encode(z, theta, ell_max, variant, pad_z)  # (ℓ_z, d_e)
    return ed_decode_logits(x, Z, theta, ell_max, variant, pad_x=pad_x, pad_z=pad_z)


def ed_transformer(z: Array, x: Array, theta: Params, ell_max: int, variant: VariantSet,
                   pad_z: Optional[Array] = None, pad_x: Optional[Array] = None) -> Array:
    """Alg. 8. z: (ℓ_z,) source tokens, x: (ℓ_x,) target tokens → P: (ℓ_x, N_V). ``pad_z`` masks
    the source's padding as keys in the encoder and every cross-attention, ``pad_x`` the target's
    in the decoder's self-attention (Hugging Face's ``attention_mask``, ``decoder_attention_mask``)."""
    return _softmax(ed_logits(z, x, theta, ell_max, variant, pad_z, pad_x))  # line 21


def e_logits(x: Array, theta: Params, ell_max: int, variant: VariantSet, pad: Optional[Array] = None) -> Array:
    """Alg. 9 before the final softmax. x: (ℓ,) tokens → (ℓ, N_V). ``pad`` (ℓ,) bool: False marks
    padding, masked as a key in every layer (Mask ≡ 1 ∧ pad[t_z])."""
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb"), pad=pad)  # (ℓ, d_e)  lines 1-3
    for layer in theta["layers"]:  # lines 4-8
        X = encoder_block(X, layer, variant, "bert", pad=pad)
    if variant.resolved_final_norm("bert"):
        X = norm(X, theta["norm_final"], variant)  # γ_final, β_final before line 10
    act = activation(variant.resolved_activation("bert"))  # the head follows the MLP activation
    X = act(linear(X, theta["W_f"], theta["b_f"]))  # (ℓ, d_f)  line 10
    X = norm(X, theta["norm_head"], variant)  # (ℓ, d_f)  line 11
    return _logits(X, theta, variant)  # (ℓ, N_V)  line 12 before the softmax


def e_transformer(x: Array, theta: Params, ell_max: int, variant: VariantSet, pad: Optional[Array] = None) -> Array:
    """Alg. 9 (BERT). x: (ℓ,) tokens → P: (ℓ, N_V)."""
    return _softmax(e_logits(x, theta, ell_max, variant, pad))  # line 12


def sliding_or_full(variant: VariantSet, l: int) -> VariantSet:
    """The variant set of layer l (from 0) of a GPT stack whose layers take turns: with
    ``global_every`` k ≥ 1 and a ``window``, every k-th layer (l + 1 a multiple of k) attends to the
    whole causal prefix (no window) and the rest to the window alone, those sliding layers rotating
    with ``rope_local_base`` where it is set under RoPE, unscaled (Gemma3TextConfig.convert_rope_params_to_dict
    puts a config's rope_scaling in the "full_attention" parameters alone). Sources: transformers 5.24 Gemma2Config and
    Gemma3TextConfig (layer_types: "full_attention" iff (i + 1) % k == 0; k = 2, and 6 from
    sliding_window_pattern) and Gemma3TextModel (rotary tables per layer type, the sliding type's
    rope_theta 10000, the full type's 1e6). k = 0 (the paper's) or no window: one set for all."""
    k = variant.global_every
    if k < 1 or variant.window < 1:
        return variant
    if (l + 1) % k:  # sliding
        if variant.rotary != "none" and variant.rope_local_base > 0:
            return variant.replace(rope_base=variant.rope_local_base, rope_scaling="none")
        return variant
    return variant.replace(window=0)  # full


def windowed_layers(variant: VariantSet) -> bool:
    """Whether some layer of a GPT stack keeps ``window`` (``sliding_or_full``): every layer with k = 0,
    layer 0 with k ≥ 2, none with k = 1 (every layer full) or without a window."""
    return variant.window > 0 and variant.global_every != 1


def d_logits(x: Array, theta: Params, ell_max: int, variant: VariantSet, valid: Optional[Array] = None,
             pad: Optional[Array] = None) -> Array:
    """Alg. 10 before the final softmax. x: (ℓ,) tokens → (ℓ, N_V). ``valid``: rows t ≥ valid are
    padding of a fixed-size buffer (inference); ``pad`` (ℓ,) bool: positions masked as keys in
    every layer (Mask = [[t_z ≤ t_x]] ∧ pad[t_z])."""
    rows = valid_rows(x.shape[0], valid)
    X = embed(x, theta, ell_max, variant, theta.get("norm_emb"), rows=rows, pad=pad)  # (ℓ, d_e)  lines 1-3
    # pad_positions="real": ALiBi's positions are the real tokens before each row, as W_p's are
    real = real_positions(pad) if pad is not None and variant.pad_positions == "real" else None  # (ℓ,)
    for l, layer in enumerate(theta["layers"]):  # lines 4-8
        X = encoder_block(X, layer, sliding_or_full(variant, l), "gpt2", valid, pad, real)
    if variant.resolved_final_norm("gpt2"):
        X = norm(X, theta["norm_final"], variant, rows=rows)  # line 10 (γ, β)
    return _logits(X, theta, variant)  # (ℓ, N_V)  line 11 before the softmax


def d_transformer(x: Array, theta: Params, ell_max: int, variant: VariantSet, pad: Optional[Array] = None) -> Array:
    """Alg. 10 (GPT-2). x: (ℓ,) tokens → P: (ℓ, N_V)."""
    return _softmax(d_logits(x, theta, ell_max, variant, pad=pad))  # line 11


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


# --------------------------------------------------------------------------
# Algorithm 10 decoded with a key/value cache (the cached_decoding entry)
# --------------------------------------------------------------------------

#: one layer's cache: K (H_kv, ℓ, d_attn), already rotated under RoPE, and V (H_kv, ℓ, d_mid), one
#: slot per absolute position of the fixed-size buffer (H_kv = H/G under grouped-query attention)
Cache = tuple[Array, Array]


def _cached_layer(X: Array, layer: Params, variant: VariantSet, r: Any, mask: Array, seen: Array,
                  cache: Optional[Cache], t: Optional[Array], rows: Optional[Array]) -> tuple[Array, Cache]:
    """One GPT layer (Alg. 10 lines 5-8) over the rows X, returning the keys and values it cached.

    Prefill (``cache`` None): X holds the whole buffer, its K and V become the cache. Step
    (``cache`` given): X is the one row of position ``t``; its k and v are written into slot t of
    the cache, and its query attends to the cached slots ``seen`` (t_z ≤ t). ``r``: RoPE's angles
    for the rows of X (their absolute positions)."""
    p = layer["attn"]
    out: dict[str, Cache] = {}

    def self_attention(Y: Array) -> Array:
        Q = project_q(Y, p, variant, r)  # (H, ℓ_x, d_attn)  Alg. 4 line 1 (+ RoPE at the rows' positions)
        K, V = project_kv(Y, p, variant, r)  # (H_kv, ℓ_x, ·)  lines 2-3, computed once per position
        if cache is not None:  # append: slot t of the cache (earlier slots hold positions < t)
            K = jax.lax.dynamic_update_slice_in_dim(cache[0], K, t, axis=1)  # (H_kv, ℓ, d_attn)
            V = jax.lax.dynamic_update_slice_in_dim(cache[1], V, t, axis=1)  # (H_kv, ℓ, d_mid)
        out["kv"] = (K, V)
        index = kv_index(Q.shape[0], K.shape[0], variant)
        bias = None
        if variant.position_bias == "alibi":  # keys at slots 0..ℓ−1; the rows of Y at positions t.. (prefill: 0..)
            first = jnp.zeros((), jnp.int32) if t is None else t
            bias = alibi_bias(Q.shape[0], first + jnp.arange(Y.shape[0]), jnp.arange(K.shape[1]), Q.dtype)
        return heads_out(attend(Q, K, V, mask, variant, Y.shape[-1], index, kv_valid=seen, bias=bias), p)

    X = block(X, layer, variant, "gpt2", self_attention, rows)
    return X, out["kv"]


def _final_logits(X: Array, theta: Params, variant: VariantSet, rows: Optional[Array] = None) -> Array:
    if variant.resolved_final_norm("gpt2"):
        X = norm(X, theta["norm_final"], variant, rows=rows)  # line 10 (γ, β)
    return _logits(X, theta, variant)  # (·, N_V)  line 11 before the softmax


def cached_decoding(x: Array, n_prefill: Array, theta: Params, ell_max: int, variant: VariantSet) -> Array:
    """Algorithm 10 run as a generator runs it, with a key/value cache. x: (ℓ,) tokens,
    n_prefill: () int in [1, ℓ] → P: (ℓ, N_V), row t the distribution after x[:t+1].

    1. Prefill: the prompt x[:n_prefill] in one call, which stores every layer's K (rotated under
       RoPE) and V, per key/value head. Shapes are static, so the prompt sits in a buffer of ℓ
       slots (as padded prefill does in JAX serving code, e.g. MaxText's ``true_length``): slots
       ≥ n_prefill hold token 0 and are masked as keys, zeroed as values and never checked for
       zero variance; their cache slots are overwritten before any query reads them.
    2. Decoding: for t = n_prefill .. ℓ−1, the token x[t] ALONE (one row) at its absolute position t
       (W_p[:, t], sinusoid row t, RoPE angle t·θ_i): every layer computes its q, k, v, appends k, v at
       slot t and attends to slots ≤ t; the row's distribution is P[t]. The loop is a
       ``lax.fori_loop`` over t = 1 .. ℓ−1 with static bounds (a scan: one compiled program whatever
       n_prefill is, which ``jax.vmap`` batches with a per-example n_prefill and ``checkify`` takes;
       a while loop from a batched start it does not); a step at t < n_prefill keeps the
       prefill's row and cache (a select).

    Causal attention makes row t a function of x[:t+1] alone, so this equals DTransformer(x) up to
    rounding (Pope et al. 2022, "Efficiently Scaling Transformer Inference", §2: the KV cache).
    """
    ell = x.shape[0]
    layers = theta["layers"]
    d_attn = layers[0]["attn"]["W_q"].shape[1] if layers else 2
    kinds = [sliding_or_full(variant, l) for l in range(len(layers))]  # each layer's window and base
    # (ℓ, d_attn/2) angles per slot, or None; LongRoPE's factors are the model's, in every layer's attention
    r = [rope(v, ell, d_attn, theta["tok"].dtype, layers[0]["attn"] if layers else None) for v in kinds]
    emb_norm = theta.get("norm_emb")

    # 1. prefill
    rows = jnp.arange(ell) < n_prefill  # (ℓ,) the prompt's slots
    prompt = jnp.where(rows, x, jnp.zeros((), x.dtype))  # later tokens are not the prefill's to see
    X = embed(prompt, theta, ell_max, variant, emb_norm, rows=rows)  # (ℓ, d_e)  lines 1-3
    caches: list[Cache] = []
    for layer, v, r_l in zip(layers, kinds, r):  # lines 4-8
        mask = self_mask(ell, v, True, rows)  # (ℓ, ℓ) [t_x, t_z]: causal (within v's window) ∧ t_z < n_prefill
        X, kv = _cached_layer(X, layer, v, r_l, mask, rows, None, None, rows)
        caches.append(kv)
    P = _softmax(_final_logits(X, theta, variant, rows))  # (ℓ, N_V): rows < n_prefill are the answer

    # 2. one token at a time
    slots = jnp.arange(ell)

    def step(t: Array, state: tuple[Array, list[Cache]]) -> tuple[Array, list[Cache]]:
        P, caches = state
        token = jax.lax.dynamic_slice_in_dim(x, t, 1)  # (1,) x[t]
        Y = embed(token, theta, ell_max, variant, emb_norm, start=t)  # (1, d_e) at position t
        new = []
        for layer, cache, v, r_l in zip(layers, caches, kinds, r):
            seen = slots <= t  # (ℓ,) cached positions < t and t itself
            if v.window:  # a sliding window: only the W newest, t itself counted
                seen = seen & (slots > t - v.window)
            Y, kv = _cached_layer(Y, layer, v, rope_rows(r_l, t, 1), seen[None, :], seen, cache, t, None)
            new.append(kv)
        row = _softmax(_final_logits(Y, theta, variant))  # (1, N_V)
        # positions of the prompt were the prefill's: keep its rows and cache (a select, not a branch:
        # static loop bounds keep this a scan, which checkify also takes under vmap, unlike a while loop
        # with a per-example start)
        decoding = t >= n_prefill
        P = jnp.where(decoding, jax.lax.dynamic_update_slice_in_dim(P, row, t, axis=0), P)
        return P, [(jnp.where(decoding, K, K0), jnp.where(decoding, V, V0)) for (K, V), (K0, V0) in zip(new, caches)]

    P, _ = jax.lax.fori_loop(1, ell, step, (P, caches))  # position 0 is always the prefill's (n_prefill ≥ 1)
    return P
