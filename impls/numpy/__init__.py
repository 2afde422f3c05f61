"""The NumPy implementation of ftspec: the "literal" plugin.

It follows Phuong & Hutter's layout as written: tokens are columns
(X ∈ R^{d×ℓ}), weights are out × in and act as ``W @ X``, Mask is [t_z, t_x]
with True = may attend. Every function handles a leading ``...`` batch axis by
broadcasting, so ``ctx.batched`` needs no special path. Heads are stacked
into one axis and run in one matmul; only layers are looped over.

The mathematics is written from ALGORITHMS.md and docs/spec.md, not from the
spec's code; only the variant set's ``resolved_*`` helpers are imported.

Design choices
  * dtype: arrays are computed in the dtype they arrive in (float64, float32
    or float16); constants are rounded into that dtype first so NumPy never
    promotes to float64. NumPy itself accumulates float16 sums and float16
    matmuls in float32 internally and rounds the result back; that is NumPy's
    arithmetic and is kept. The fixed sinusoid tables are computed in binary64
    and rounded once to the call dtype.
  * GELU (erf): NumPy has no erf. Φ(x) = erfc(−x/√2)/2 is evaluated per
    element with ``math.erfc`` (the C library's, full binary64 precision)
    through ``np.frompyfunc``, then rounded to the call dtype; x·Φ(x) is formed
    in the call dtype. The erfc form avoids the cancellation of 1 + erf(·) for
    negative x. No new dependency.
  * softmax subtracts the column max; masked scores are −∞; a query column
    with no allowed key follows ``empty_query`` (``error`` raises ValueError).
  * Token IDs or positions out of range and sequences longer than ℓ_max
    raise ValueError (NumPy would otherwise wrap negative indices silently).

LLaMA-style decoders (components.py, layers.py)
  * RoPE (``rotary``: Su et al. 2021, RoFormer, eq. 34) rotates each head's Q
    and K by their columns' positions inside Algorithm 4, after the
    projections and before any scaling; grouped-query attention (``kv_group``,
    ``kv_order``: Ainslie et al. 2023) stacks the H/G ``kv_heads`` and lets
    query head h read kv head ⌊h/G⌋ or h mod H/G. Their backward passes: the
    rotation by −angle, and a sum over each kv head's group.
  * ``attn_bias_at`` (under ``attn_bias``) keeps the heads' b_q, b_k, b_v only ("qkv", Qwen2) or
    b_o only ("out") in every multi-head attention (``layers.gather_variant_mha``); a bias left out
    is never read and gets no gradient. Algorithms 3-4 (``_attn_bias``) do not have the switch.
  * Padding (``pad``: True = a real token) masks keys, Mask[t_z, t_x] ∧
    pad[t_z], in every attention of the padded entries (``layers.padded``); the
    encoder-decoder's ``pad_z`` masks the source's keys in the encoder and in every
    cross-attention, ``pad_x`` the target's in the decoder's self-attention.
  * ``cached_decoding`` runs the prompt in one call, then one token per call,
    each layer's attention reading a key/value cache (``components.KVCache``:
    keys after RoPE, per kv head), positions absolute. Batched, each example
    is decoded on its own (prompt lengths differ).

Training and inference (Algorithms 11-15)
  * Gradients are hand-written backward passes, no autodiff library: the
    forward functions ``*_fwd`` (components.py, layers.py, architectures.py)
    return their output and a cache, and each has a matching ``*_bwd``
    (grad_components.py: linear maps, attention, norms, activations,
    embedding, log-softmax loss; grad_layers.py: MHAttention, MLP, residual
    blocks, layers; grad_architectures.py: Algorithms 8-10 from the logits
    back). training.py has the losses, gradients, SGD steps and loops;
    inference.py the sampling rule, DInference and EDInference.
  * Loss and gradient entries broadcast over a leading batch axis and never
    sum over it: per-example losses (B,) and gradients (B, *shape).
  * The losses take log P from the logits (z[y] − max z − log Σ exp(z − max z)).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from ftspec.impls.api import Context, Implementation

from . import architectures as A
from . import components as C
from . import inference as Inf
from . import layers as Lyr
from . import moe as MoE
from . import training as Tr

__all__ = ["implementation"]

_FLOATS = {"float64": np.float64, "float32": np.float32, "float16": np.float16}


def from_numpy(array: Any, dtype: str, device: str) -> np.ndarray:
    """A fresh NumPy array of ``dtype`` (reals are cast; int64 tokens and bool masks stay)."""
    if device != "cpu":
        raise ValueError(f"the NumPy implementation runs on 'cpu' only, not {device!r}")
    if dtype in _FLOATS:
        return np.array(array, dtype=_FLOATS[dtype], copy=True)
    if dtype == "int64":
        return np.array(array, dtype=np.int64, copy=True)
    if dtype == "bool":
        return np.array(array, dtype=np.bool_, copy=True)
    raise ValueError(f"unsupported dtype {dtype!r}; expected one of {sorted(_FLOATS) + ['int64', 'bool']}")


def to_numpy(array: Any) -> np.ndarray:
    return np.array(array, copy=True)


Inputs = Mapping[str, Any]
Params = Mapping[str, Any]


# --- Algorithms 1-2 and the embedding ------------------------------------


def _token_embedding(i: Inputs, p: Params, ctx: Context):
    """Algorithm 1 line 1: e ← W_e[:, v]."""
    C.check_tokens(i["v"], p["W_e"].shape[1], "v")
    return C.columns(p["W_e"], i["v"])  # (..., d_e)


def _positional_embedding(i: Inputs, p: Params, ctx: Context):
    """Algorithm 2 line 1: e_p ← W_p[:, t]."""
    C.check_positions(i["t"], p["W_p"].shape[1], "t")
    return C.columns(p["W_p"], i["t"])  # (..., d_e)


def _sinusoidal_paper(i: Inputs, p: Params, ctx: Context):
    return C.sinusoidal_paper(ctx.hyper["d_e"], ctx.hyper["ell_max"], np.dtype(ctx.dtype))


def _sinusoidal_vaswani(i: Inputs, p: Params, ctx: Context):
    return C.sinusoidal_vaswani(ctx.hyper["d_e"], ctx.hyper["ell_max"], np.dtype(ctx.dtype))


def _embedding(i: Inputs, p: Params, ctx: Context):
    return A.embed_tokens(i["x"], p, ctx.variant, ctx.hyper["ell_max"])  # (..., d_e, ℓ)


# --- Algorithms 3-5 -------------------------------------------------------


def _attn_bias(p: Params, ctx: Context, prefix: str = ""):
    if not ctx.variant.attn_bias:
        return None, None, None
    return p[prefix + "b_q"], p[prefix + "b_k"], p[prefix + "b_v"]


def _basic_single_query_attention(i: Inputs, p: Params, ctx: Context):
    """Algorithm 3 lines 1-5: Algorithm 4 with one query column e and no mask (d_model = d_in)."""
    b_q, b_k, b_v = _attn_bias(p, ctx)
    e = i["e"][..., :, None]  # (..., d_in, 1)  the current token as a one-column X
    v = C.attention_core(e, i["E"], p["W_q"], b_q, p["W_k"], b_k, p["W_v"], b_v, None, ctx.variant,
                         rope=False)  # no positions in Algorithm 3
    return v[..., :, 0]  # (..., d_out)


def _attention(i: Inputs, p: Params, ctx: Context):
    """Algorithm 4 lines 1-6."""
    b_q, b_k, b_v = _attn_bias(p, ctx)
    return C.attention_core(i["X"], i["Z"], p["W_q"], b_q, p["W_k"], b_k, p["W_v"], b_v,
                            i["Mask"], ctx.variant)  # (..., d_out, ℓ_x)


def _mh_attention(i: Inputs, p: Params, ctx: Context):
    """Algorithm 5 lines 1-4."""
    W = Lyr.gather_variant_mha(p, "", ctx.hyper["H"], ctx.variant)
    return Lyr.mh_attention(i["X"], i["Z"], W, i["Mask"], ctx.variant)  # (..., d_out, ℓ_x)


def _self_attention_weights(X: np.ndarray, p: Params, ctx: Context) -> Lyr.MHA:
    """The heads' weights; W_o must give back X's width d_e (d_out = d_e, which a layer's residual
    sum would otherwise check, and nothing here does)."""
    if p["W_o"].shape[0] != X.shape[-2]:
        raise ValueError(f"W_o has {p['W_o'].shape[0]} rows; self-attention returns X's width d_e = {X.shape[-2]}")
    return Lyr.gather_variant_mha(p, "", ctx.hyper["H"], ctx.variant)


def _t5(X: np.ndarray, p: Params, ctx: Context, causal: bool) -> Optional[np.ndarray]:
    """T5's relative bias (H, ℓ, ℓ) under rel_bias="t5_buckets" (spec 2.13): bidirectional buckets in a
    bidirectional self-attention, causal ones in a causal one; None otherwise."""
    if ctx.variant.rel_bias != "t5_buckets":
        return None
    ell = X.shape[-1]
    return C.t5_bias(p["rel_bias"], ell, ell, not causal, ctx.variant)


def _self_attention(i: Inputs, p: Params, ctx: Context):
    """Algorithm 5 with Z = X and Mask ≡ 1 (Alg. 8 and 9 line 5): the layers' attention on its own."""
    X = i["X"]  # (..., d_e, ℓ): the sequence and its own context
    W = _self_attention_weights(X, p, ctx)
    return Lyr.mh_attention(X, X, W, None, ctx.variant, pos_bias=_t5(X, p, ctx, False))  # (..., d_e, ℓ)


def _causal_self_attention(i: Inputs, p: Params, ctx: Context):
    """Algorithm 5 with Z = X and Mask[t_z, t_x] = [[t_z ≤ t_x]] built from ℓ (Alg. 10 line 6)."""
    X = i["X"]  # (..., d_e, ℓ): the sequence and its own context
    ell = X.shape[-1]
    Mask = C.unidirectional_mask(ell, ell)  # (ℓ, ℓ) [t_z, t_x]: key t_z ≤ query t_x
    if ctx.variant.window:  # and within the sliding window: t_z > t_x − W
        Mask = Mask & C.unidirectional_mask(ell, ell, window=ctx.variant.window)
    W = _self_attention_weights(X, p, ctx)
    return Lyr.mh_attention(X, X, W, Mask, ctx.variant, causal_self=True,
                            pos_bias=_t5(X, p, ctx, True))  # (..., d_e, ℓ): ALiBi reads it


def _padded_self_attention(i: Inputs, p: Params, ctx: Context):
    """Algorithm 5 with Z = X and Mask[t_z, t_x] = pad[t_z]: padding positions are no query's key."""
    X = i["X"]  # (..., d_e, ℓ)
    Mask = Lyr.padded(None, i["pad"], X.shape[-1])  # (..., ℓ, ℓ) [t_z, t_x]
    W = _self_attention_weights(X, p, ctx)
    return Lyr.mh_attention(X, X, W, Mask, ctx.variant, pos_bias=_t5(X, p, ctx, False))  # (..., d_e, ℓ)


def _padded_causal_self_attention(i: Inputs, p: Params, ctx: Context):
    """Algorithm 5 with Z = X and Mask[t_z, t_x] = [[t_z ≤ t_x]] ∧ pad[t_z]."""
    X = i["X"]  # (..., d_e, ℓ)
    ell = X.shape[-1]
    Mask = Lyr.padded(C.unidirectional_mask(ell, ell, window=ctx.variant.window), i["pad"], ell)  # (..., ℓ, ℓ)
    W = _self_attention_weights(X, p, ctx)
    return Lyr.mh_attention(X, X, W, Mask, ctx.variant, causal_self=True,
                            pos_bias=_t5(X, p, ctx, True))  # (..., d_e, ℓ)


def _unidirectional_mask(i: Inputs, p: Params, ctx: Context):
    return C.unidirectional_mask(ctx.hyper["ell_z"], ctx.hyper["ell_x"], ctx.variant.causal_alignment,
                                 ctx.variant.window)


# --- Algorithms 6-7 -------------------------------------------------------


def _layer_norm(i: Inputs, p: Params, ctx: Context):
    return Lyr.norm(i["X"], p, "gamma", "beta", ctx.variant, "layer_norm")  # ignores variant.norm


def _rms_norm(i: Inputs, p: Params, ctx: Context):
    return Lyr.norm(i["X"], p, "gamma", "beta", ctx.variant, "rms_norm")


def _unembedding(i: Inputs, p: Params, ctx: Context):
    return A.unembed_columns(i["X"], p, ctx.variant)  # (..., N_V, ℓ)


# --- layers and architectures ----------------------------------------------


def _encoder_layer(i: Inputs, p: Params, ctx: Context):
    return {"Z": Lyr.stack_layer(i["Z"], p, "", ctx.variant, ctx.hyper["H"], "ed_encoder")}


def _decoder_layer(i: Inputs, p: Params, ctx: Context):
    return {"X": Lyr.decoder_layer(i["X"], i["Z"], p, "", ctx.variant, ctx.hyper["H"])}


def _bert_layer(i: Inputs, p: Params, ctx: Context):
    return {"X": Lyr.stack_layer(i["X"], p, "", ctx.variant, ctx.hyper["H"], "bert")}


def _gpt2_layer(i: Inputs, p: Params, ctx: Context):
    return {"X": Lyr.stack_layer(i["X"], p, "", ctx.variant, ctx.hyper["H"], "gpt2")}


def _padded_encoder_layer(i: Inputs, p: Params, ctx: Context):
    """Algorithm 8 lines 5-8 with Mask ≡ 1 ∧ pad[t_z]: padding positions are no query's key."""
    pad = _pad_of_columns(i, "pad", "Z")  # (..., ℓ)
    return {"Z": Lyr.stack_layer(i["Z"], p, "", ctx.variant, ctx.hyper["H"], "ed_encoder", pad=pad)}  # (..., d_e, ℓ)


def _padded_decoder_layer(i: Inputs, p: Params, ctx: Context):
    """Algorithm 8 lines 14-19 with line 14's Mask = [[t_z ≤ t_x]] ∧ pad_x[t_z] and line 16's
    Mask ≡ 1 ∧ pad_z[t_z]."""
    pad_x = _pad_of_columns(i, "pad_x", "X")  # (..., ℓ_x)
    pad_z = _pad_of_columns(i, "pad_z", "Z")  # (..., ℓ_z)
    X = Lyr.decoder_layer(i["X"], i["Z"], p, "", ctx.variant, ctx.hyper["H"], pad_x=pad_x, pad_z=pad_z)
    return {"X": X}  # (..., d_e, ℓ_x)


def _padded_bert_layer(i: Inputs, p: Params, ctx: Context):
    """Algorithm 9 lines 5-8 with Mask ≡ 1 ∧ pad[t_z]."""
    pad = _pad_of_columns(i, "pad", "X")  # (..., ℓ)
    return {"X": Lyr.stack_layer(i["X"], p, "", ctx.variant, ctx.hyper["H"], "bert", pad=pad)}  # (..., d_e, ℓ)


def _padded_gpt2_layer(i: Inputs, p: Params, ctx: Context):
    """Algorithm 10 lines 5-8 with Mask = [[t_z ≤ t_x]] ∧ pad[t_z]."""
    pad = _pad_of_columns(i, "pad", "X")  # (..., ℓ)
    return {"X": Lyr.stack_layer(i["X"], p, "", ctx.variant, ctx.hyper["H"], "gpt2", pad=pad)}  # (..., d_e, ℓ)


def _ed_transformer(i: Inputs, p: Params, ctx: Context):
    return A.ed_transformer(i["z"], i["x"], p, ctx.variant, ctx.hyper)


def _e_transformer(i: Inputs, p: Params, ctx: Context):
    return A.e_transformer(i["x"], p, ctx.variant, ctx.hyper)


def _d_transformer(i: Inputs, p: Params, ctx: Context):
    return A.d_transformer(i["x"], p, ctx.variant, ctx.hyper)


def _padded_e_transformer(i: Inputs, p: Params, ctx: Context):
    """Algorithm 9 with every layer's Mask ≡ 1 ∧ pad[t_z]."""
    return A.padded_e_transformer(i["x"], _pad_of(i), p, ctx.variant, ctx.hyper)


def _padded_d_transformer(i: Inputs, p: Params, ctx: Context):
    """Algorithm 10 with every layer's Mask = [[t_z ≤ t_x]] ∧ pad[t_z]."""
    return A.padded_d_transformer(i["x"], _pad_of(i), p, ctx.variant, ctx.hyper)


def _padded_ed_transformer(i: Inputs, p: Params, ctx: Context):
    """Algorithm 8 with every encoder layer's Mask ≡ 1 ∧ pad_z[t_z], every decoder layer's line 14
    Mask = [[t_z ≤ t_x]] ∧ pad_x[t_z] and line 16 Mask ≡ 1 ∧ pad_z[t_z]."""
    pad_z = _pad_of(i, "pad_z", "z")  # (..., ℓ_z)
    pad_x = _pad_of(i, "pad_x", "x")  # (..., ℓ_x)
    return A.padded_ed_transformer(i["z"], i["x"], pad_z, pad_x, p, ctx.variant, ctx.hyper)  # (..., N_V, ℓ_x)


def _pad_of(i: Inputs, name: str = "pad", tokens: str = "x") -> np.ndarray:
    """The padding flags ``name``, one per token of ``tokens`` (the same leading batch axes)."""
    pad = np.asarray(i[name], dtype=bool)
    if pad.shape != np.shape(i[tokens]):
        raise ValueError(f"{name}: one flag per token of {tokens} {np.shape(i[tokens])}; given shape {pad.shape}")
    return pad


def _pad_of_columns(i: Inputs, name: str, stream: str) -> np.ndarray:
    """The padding flags ``name``, one per column of the stream ``stream`` (..., d_e, ℓ): (..., ℓ)."""
    pad = np.asarray(i[name], dtype=bool)
    X = np.asarray(i[stream])
    if pad.shape != X.shape[:-2] + X.shape[-1:]:
        raise ValueError(f"{name}: one flag per column of {stream} {X.shape[:-2] + X.shape[-1:]}; "
                         f"given shape {pad.shape}")
    return pad


def _cached_decoding(i: Inputs, p: Params, ctx: Context):
    """Algorithm 10 decoded with a key/value cache: x[:n_prefill] at once, then one token per call."""
    return A.cached_decoding(i["x"], i["n_prefill"], p, ctx.variant, ctx.hyper)  # (..., N_V, ℓ)


def _next_token_encoder(i: Inputs, p: Params, ctx: Context):
    return A.next_token_encoder(i["x"], p, ctx.variant, ctx.hyper)  # (..., N_V)


def _moe_mlp(i: Inputs, p: Params, ctx: Context):
    """A sparse mixture-of-experts MLP (moe.py; Mixtral, Qwen2-MoE)."""
    return MoE.moe_mlp(i["X"], p, ctx.variant, ctx.hyper["E"], ctx.hyper["k"])  # (..., d_e, ℓ)


ALGORITHMS = {
    "token_embedding": _token_embedding,
    "positional_embedding": _positional_embedding,
    "sinusoidal_paper": _sinusoidal_paper,
    "sinusoidal_vaswani": _sinusoidal_vaswani,
    "embedding": _embedding,
    "basic_single_query_attention": _basic_single_query_attention,
    "attention": _attention,
    "mh_attention": _mh_attention,
    "self_attention": _self_attention,
    "causal_self_attention": _causal_self_attention,
    "padded_self_attention": _padded_self_attention,
    "padded_causal_self_attention": _padded_causal_self_attention,
    "unidirectional_mask": _unidirectional_mask,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "unembedding": _unembedding,
    "encoder_layer": _encoder_layer,
    "decoder_layer": _decoder_layer,
    "bert_layer": _bert_layer,
    "gpt2_layer": _gpt2_layer,
    "ed_transformer": _ed_transformer,
    "e_transformer": _e_transformer,
    "d_transformer": _d_transformer,
    "next_token_encoder": _next_token_encoder,
    "padded_e_transformer": _padded_e_transformer,
    "padded_d_transformer": _padded_d_transformer,
    "cached_decoding": _cached_decoding,
    "padded_encoder_layer": _padded_encoder_layer,
    "padded_bert_layer": _padded_bert_layer,
    "padded_gpt2_layer": _padded_gpt2_layer,
    "padded_decoder_layer": _padded_decoder_layer,
    "padded_ed_transformer": _padded_ed_transformer,
    "moe_mlp": _moe_mlp,
    # Algorithms 11-15 (training.py, inference.py; gradients by the
    # hand-written backward passes of grad_*.py)
    **Tr.ALGORITHMS,
    **Inf.ALGORITHMS,
}

implementation = Implementation(
    name="numpy",
    version=f"0.1.0+numpy{np.__version__}",
    algorithms=ALGORITHMS,
    dtypes=("float64", "float32", "float16"),
    devices=lambda: ["cpu"],
    from_numpy=from_numpy,
    to_numpy=to_numpy,
    variants="all",
    precision="highest",
    description="NumPy, the paper's column layout literally (heads stacked, batch by broadcasting)",
)
