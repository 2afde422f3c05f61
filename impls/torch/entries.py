"""The registry entries: canonical in, native compute, canonical out.

The 32 forward entries (Alg. 1-10, the layers' self-attention on its own,
with and without padding, the encoder read as a next-token predictor, every
layer and model with padding, and the decoder run with a key/value cache) are here; training
(Alg. 11-13) is in ``training`` and inference (Alg. 14-15) in
``inference``, merged below.

Each function has the plugin calling convention ``fn(inputs, params, ctx)``
(impls/api.py). It converts with ``adapter`` only, calls the native code, and
converts back; nothing else here touches layout. With ``ctx.batched`` every
input has one leading batch axis; the native code broadcasts over any
leading axes, so no entry needs to look at the flag.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ftspec.impls.api import Context

from . import adapter as A
from . import components as C, layers, models
from .inference import INFERENCE
from .training import TRAINING

__all__ = ["ALGORITHMS"]

In = Mapping[str, torch.Tensor]


def _dtype(ctx: Context) -> torch.dtype:
    return getattr(torch, ctx.dtype)


def token_embedding(i: In, p: In, ctx: Context) -> Any:
    """Alg. 1: e = W_e[:, v]; a vector is the same in both layouts."""
    return C.lookup(i["v"], A.table_to_native(p["W_e"]), "token ID")  # (…, d_e)


def positional_embedding(i: In, p: In, ctx: Context) -> Any:
    """Alg. 2 line 1: e = W_p[:, t]."""
    return C.lookup(i["t"], A.table_to_native(p["W_p"]), "position")  # (…, d_e)


def _sinusoid(form: str):
    def fn(i: In, p: In, ctx: Context) -> Any:
        h = ctx.hyper
        return A.table_to_canonical(C.sinusoid_table(h["d_e"], h["ell_max"], form, _dtype(ctx), ctx.device))
    fn.__doc__ = f"Alg. 2, fixed alternative ({form}): W_p (d_e, ℓ_max)."
    return fn


def embedding(i: In, p: In, ctx: Context) -> Any:
    """Alg. 8-10 lines 1-3 → X (…, d_e, ℓ)."""
    e = A.embedding_params(p)
    X = C.embed(i["x"], e.table, e.positions, ctx.variant, ctx.hyper["ell_max"], e.norm)  # (…, ℓ, d_e)
    return A.rows_to_cols(X)


def basic_single_query_attention(i: In, p: In, ctx: Context) -> Any:
    """Alg. 3: one query e (…, d_in) over the columns of E (…, d_in, T)."""
    e = i["e"].unsqueeze(-2)  # (…, 1, d_in): a sequence of one token
    Y = C.attention_heads(e, A.cols_to_rows(i["E"]), A.attn_params(p, multi_head=False), ctx.variant,
                          rotary=False)  # Alg. 3 has no positions: no RoPE
    return Y.squeeze(-3).squeeze(-2)  # (…, 1 head, 1, d_out) → (…, d_out)


def attention(i: In, p: In, ctx: Context) -> Any:
    """Alg. 4 → Ṽ (…, d_out, ℓ_x)."""
    Y = C.attention_heads(A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"]), A.attn_params(p, multi_head=False),
                          ctx.variant, mask=A.mask_to_native(i["Mask"]))  # (…, 1, ℓ_x, d_out)
    return A.rows_to_cols(Y.squeeze(-3))


def mh_attention(i: In, p: In, ctx: Context) -> Any:
    """Alg. 5 → Ṽ (…, d_out, ℓ_x)."""
    Y = C.mh_attention(A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"]), A.attn_params(p), ctx.variant,
                       mask=A.mask_to_native(i["Mask"]))  # (…, ℓ_x, d_out)
    return A.rows_to_cols(Y)


def _self_attention_entry(causal: bool, padding: bool = False):
    def fn(i: In, p: In, ctx: Context) -> Any:
        X = A.cols_to_rows(i["X"])  # (…, ℓ, d_e): the sequence and its own context
        if p["W_o"].shape[0] != X.shape[-1]:  # d_out = d_e: a layer's residual sum would check it
            raise ValueError(f"W_o has {p['W_o'].shape[0]} rows; self-attention returns d_e = {X.shape[-1]}")
        attn = A.attn_params(p)
        ell = X.shape[-2]
        # T5's relative bias (spec 2.13): bidirectional buckets in the encoder's attention, causal in the decoder's
        bias = C.t5_bias(p["rel_bias"], ell, ell, not causal, ctx.variant) \
            if ctx.variant.rel_bias == "t5_buckets" else None
        if padding:  # the layer's mask ∧ pad[t_z]
            mask = layers.self_attention_mask(ell, causal, i["pad"], X.device, window=ctx.variant.window)
            return A.rows_to_cols(C.mh_attention(X, X, attn, ctx.variant, mask=mask, alibi=causal,
                                                 pos_bias=bias))  # (…, d_e, ℓ)
        return A.rows_to_cols(C.mh_attention(X, X, attn, ctx.variant, causal=causal, alibi=causal,
                                             pos_bias=bias))  # (…, d_e, ℓ)
    mask = "Mask[t_z, t_x] = [[t_z ≤ t_x]] built from ℓ (Alg. 10 line 6)" if causal else \
        "Mask ≡ 1 (Alg. 8 and 9 line 5)"
    fn.__doc__ = (f"Alg. 5 with Z = X and {mask}{' ∧ pad[t_z] (pad (…, ℓ), True = a real token)' if padding else ''}"
                  ": X (…, d_e, ℓ) → Ṽ (…, d_e, ℓ).")
    return fn


def unidirectional_mask(i: In, p: In, ctx: Context) -> Any:
    """Alg. 4's causal Mask, canonical [t_z, t_x] (ℓ_z, ℓ_x), True = may attend."""
    h = ctx.hyper
    return A.mask_to_canonical(C.causal_mask(h["ell_x"], h["ell_z"], ctx.variant.causal_alignment, ctx.device,
                                             ctx.variant.window))


def _norm_entry(kind: str):
    def fn(i: In, p: In, ctx: Context) -> Any:
        n = A.norm_params(p, "gamma", "beta")
        return A.rows_to_cols(C.norm(A.cols_to_rows(i["X"]), n, ctx.variant, kind))  # (…, d_e, ℓ)
    fn.__doc__ = f"Alg. 6 ({kind}) on every column of X; the variant's ``norm`` switch is ignored."
    return fn


def unembedding(i: In, p: In, ctx: Context) -> Any:
    """Alg. 7 per column → P (…, N_V, ℓ)."""
    u = A.unembedding_params(p, ctx.variant.unembedding == "tied")
    return A.rows_to_cols(C.unembed(A.cols_to_rows(i["X"]), u.W_u, u.b_u, ctx.variant))


def _block_entry(arch: str, name: str, padding: bool = False):
    def fn(i: In, p: In, ctx: Context) -> Any:
        pad = i["pad"] if padding else None  # (…, ℓ), True = a real token
        X = layers.block(A.cols_to_rows(i[name]), A.block_params(p), ctx.variant, arch, pad)  # (…, ℓ, d_e)
        return A.rows_to_cols(X)
    lines = "Alg. 10 lines 5-8, Mask = [[t_z ≤ t_x]]" if arch == "gpt2" else \
        f"Alg. {8 if arch == 'ed_encoder' else 9} lines 5-8, Mask ≡ 1"
    fn.__doc__ = (f"The {arch} layer ({lines}{' ∧ pad[t_z], pad (…, ℓ)' if padding else ''}): "
                  f"{name} (…, d_e, ℓ) → (…, d_e, ℓ).")
    return fn


def decoder_layer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 8 lines 14-19: X (…, d_e, ℓ_x), Z (…, d_e, ℓ_z) → X."""
    X = layers.decoder_block(A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"]), A.dec_block_params(p), ctx.variant)
    return A.rows_to_cols(X)


def padded_decoder_layer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 8 lines 14-19 with line 14's Mask = [[t_z ≤ t_x]] ∧ pad_x[t_z] and line 16's
    Mask ≡ 1 ∧ pad_z[t_z]: X (…, d_e, ℓ_x), Z (…, d_e, ℓ_z), pad_x (…, ℓ_x), pad_z (…, ℓ_z) → X."""
    X = layers.decoder_block(A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"]), A.dec_block_params(p), ctx.variant,
                             pad_x=i["pad_x"], pad_z=i["pad_z"])  # (…, ℓ_x, d_e)
    return A.rows_to_cols(X)


def ed_transformer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 8 → P (…, N_V, ℓ_x)."""
    return A.rows_to_cols(torch.softmax(models.ed_logits(i["z"], i["x"], p, ctx), dim=-1))  # line 21


def padded_ed_transformer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 8 with every encoder layer's Mask ≡ 1 ∧ pad_z[t_z], every decoder layer's line 14
    Mask = [[t_z ≤ t_x]] ∧ pad_x[t_z] and line 16 Mask ≡ 1 ∧ pad_z[t_z] → P (…, N_V, ℓ_x)."""
    logits = models.ed_logits(i["z"], i["x"], p, ctx, pad_z=i["pad_z"], pad_x=i["pad_x"])  # (…, ℓ_x, N_V)
    return A.rows_to_cols(torch.softmax(logits, dim=-1))  # line 21


def e_transformer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 9 → P (…, N_V, ℓ)."""
    return A.rows_to_cols(torch.softmax(models.e_logits(i["x"], p, ctx), dim=-1))  # line 12


def padded_e_transformer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 9 with every layer's Mask ≡ 1 ∧ pad[t_z] → P (…, N_V, ℓ)."""
    return A.rows_to_cols(torch.softmax(models.e_logits(i["x"], p, ctx, pad=i["pad"]), dim=-1))


def d_transformer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 10 → P (…, N_V, ℓ)."""
    return A.rows_to_cols(torch.softmax(models.d_logits(i["x"], p, ctx), dim=-1))  # line 11


def padded_d_transformer(i: In, p: In, ctx: Context) -> Any:
    """Alg. 10 with every layer's Mask = [[t_z ≤ t_x]] ∧ pad[t_z] → P (…, N_V, ℓ)."""
    return A.rows_to_cols(torch.softmax(models.d_logits(i["x"], p, ctx, pad=i["pad"]), dim=-1))


def cached_decoding(i: In, p: In, ctx: Context) -> Any:
    """Alg. 10 decoded with a key/value cache: x[:n_prefill] in one call, then each later token
    alone (architectures.d_cached_logits) → P (…, N_V, ℓ). A batch is decoded sequence by
    sequence: each has its own prompt length, as a generator serving them would have."""
    x, n = i["x"], i["n_prefill"]
    if ctx.batched:
        logits = torch.stack([models.d_cached_logits(x[b], int(n[b]), p, ctx) for b in range(x.shape[0])]) \
            if x.shape[0] else models.d_logits(x, p, ctx)  # an empty batch: (0, ℓ, N_V)
    else:
        logits = models.d_cached_logits(x, int(n), p, ctx)  # (ℓ, N_V)
    return A.rows_to_cols(torch.softmax(logits, dim=-1))


def next_token_encoder(i: In, p: In, ctx: Context) -> Any:
    """The encoder read at its last position → p (…, N_V) (a vector: the same in both layouts)."""
    return torch.softmax(models.next_token_logits(i["x"], p, ctx), dim=-1)


ALGORITHMS = {
    "token_embedding": token_embedding,
    "positional_embedding": positional_embedding,
    "sinusoidal_paper": _sinusoid("sinusoidal_paper"),
    "sinusoidal_vaswani": _sinusoid("sinusoidal_vaswani"),
    "embedding": embedding,
    "basic_single_query_attention": basic_single_query_attention,
    "attention": attention,
    "mh_attention": mh_attention,
    "self_attention": _self_attention_entry(causal=False),
    "causal_self_attention": _self_attention_entry(causal=True),
    "padded_self_attention": _self_attention_entry(causal=False, padding=True),
    "padded_causal_self_attention": _self_attention_entry(causal=True, padding=True),
    "unidirectional_mask": unidirectional_mask,
    "layer_norm": _norm_entry("layer_norm"),
    "rms_norm": _norm_entry("rms_norm"),
    "unembedding": unembedding,
    "encoder_layer": _block_entry("ed_encoder", "Z"),
    "decoder_layer": decoder_layer,
    "bert_layer": _block_entry("bert", "X"),
    "gpt2_layer": _block_entry("gpt2", "X"),
    "ed_transformer": ed_transformer,
    "e_transformer": e_transformer,
    "d_transformer": d_transformer,
    "next_token_encoder": next_token_encoder,
    "padded_e_transformer": padded_e_transformer,
    "padded_d_transformer": padded_d_transformer,
    "cached_decoding": cached_decoding,
    "padded_encoder_layer": _block_entry("ed_encoder", "Z", padding=True),
    "padded_bert_layer": _block_entry("bert", "X", padding=True),
    "padded_gpt2_layer": _block_entry("gpt2", "X", padding=True),
    "padded_decoder_layer": padded_decoder_layer,
    "padded_ed_transformer": padded_ed_transformer,
    **TRAINING,  # Alg. 11-13 and their pieces (training.py)
    **INFERENCE,  # Alg. 14-15 (inference.py)
}
