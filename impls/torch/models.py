"""Flat canonical parameters → the native architectures, up to the logits.

One place wires ``params`` (flat names, impls/api.py) to the native
functions of ``architectures`` through ``adapter``; the forward entries
(Alg. 8-10), the losses (Alg. 11-13) and inference (Alg. 14-15) all use it.
Tokens are native (…, ℓ) integer tensors; logits come back native
(…, ℓ, N_V), row t the unnormalised log-distribution of column t.
"""

from __future__ import annotations

from typing import Mapping, Optional

from torch import Tensor

from ftspec.impls.api import Context

from . import adapter as A
from . import architectures

__all__ = ["d_cached_logits", "d_logits", "e_logits", "ed_decode_logits", "ed_encode", "ed_logits", "next_token_logits"]

Params = Mapping[str, Tensor]


def _layers(p: Params, prefix: str, build) -> list:
    return [build(p, f"{prefix}{l}.") for l in range(A.count(p, prefix))]


def _head(p: Params, ctx: Context) -> A.Unembedding:
    return A.unembedding_params(p, ctx.variant.unembedding == "tied")


def ed_encode(z: Tensor, p: Params, ctx: Context, pad_z: Optional[Tensor] = None) -> Tensor:
    """Alg. 8 lines 1-9: z (…, ℓ_z) → Z (…, ℓ_z, d_e); ``pad_z`` (…, ℓ_z) masks padding keys."""
    return architectures.ed_encode(z, A.embedding_params(p, "gamma_emb_enc", "beta_emb_enc"),
                                   _layers(p, "enc_layers.", A.block_params),
                                   A.norm_params(p, "gamma_enc", "beta_enc"), ctx.variant, ctx.hyper["ell_max"],
                                   pad_z)


def ed_decode_logits(x: Tensor, Z: Tensor, p: Params, ctx: Context, pad_x: Optional[Tensor] = None,
                     pad_z: Optional[Tensor] = None) -> Tensor:
    """Alg. 8 lines 10-21 before the softmax: x (…, ℓ_x), Z → (…, ℓ_x, N_V); ``pad_x`` (…, ℓ_x)
    masks the target's padding keys (line 14), ``pad_z`` (…, ℓ_z) the source's (line 16)."""
    # ed_positions="separate" (BART's BartDecoder.embed_positions): the target's table is its own
    table = "W_p_dec" if ctx.variant.ed_positions == "separate" else "W_p"
    return architectures.ed_decode_logits(x, Z, A.embedding_params(p, "gamma_emb_dec", "beta_emb_dec", table),
                                          _layers(p, "dec_layers.", A.dec_block_params),
                                          A.norm_params(p, "gamma_dec", "beta_dec"), _head(p, ctx), ctx.variant,
                                          ctx.hyper["ell_max"], pad_x, pad_z)


def ed_logits(z: Tensor, x: Tensor, p: Params, ctx: Context, pad_z: Optional[Tensor] = None,
              pad_x: Optional[Tensor] = None) -> Tensor:
    """Alg. 8 before the softmax: z (…, ℓ_z), x (…, ℓ_x) → (…, ℓ_x, N_V); ``pad_z`` (…, ℓ_z)
    masks the source's padding keys (encoder and cross-attention), ``pad_x`` (…, ℓ_x) the
    target's (decoder self-attention)."""
    return ed_decode_logits(x, ed_encode(z, p, ctx, pad_z), p, ctx, pad_x, pad_z)


def e_logits(x: Tensor, p: Params, ctx: Context, pad: Optional[Tensor] = None) -> Tensor:
    """Alg. 9 before the softmax: x (…, ℓ) → (…, ℓ, N_V); ``pad`` (…, ℓ) masks padding keys."""
    return architectures.e_logits(x, A.embedding_params(p), _layers(p, "layers.", A.block_params),
                                  A.norm_params(p, "gamma_final", "beta_final"), p["W_f"], p["b_f"],
                                  A.norm_params(p, "gamma", "beta"), _head(p, ctx), ctx.variant,
                                  ctx.hyper["ell_max"], pad)


def d_logits(x: Tensor, p: Params, ctx: Context, pad: Optional[Tensor] = None) -> Tensor:
    """Alg. 10 before the softmax: x (…, ℓ) → (…, ℓ, N_V); ``pad`` (…, ℓ) masks padding keys."""
    return architectures.d_logits(x, A.embedding_params(p), _layers(p, "layers.", A.block_params),
                                  A.norm_params(p, "gamma", "beta"), _head(p, ctx), ctx.variant,
                                  ctx.hyper["ell_max"], pad)


def d_cached_logits(x: Tensor, n_prefill: int, p: Params, ctx: Context) -> Tensor:
    """Alg. 10 decoded with a key/value cache (prefill x[:n_prefill], then one token per call):
    x (ℓ,) → (ℓ, N_V), one sequence."""
    return architectures.d_cached_logits(x, n_prefill, A.embedding_params(p), _layers(p, "layers.", A.block_params),
                                         A.norm_params(p, "gamma", "beta"), _head(p, ctx), ctx.variant,
                                         ctx.hyper["ell_max"])


def next_token_logits(x: Tensor, p: Params, ctx: Context) -> Tensor:
    """The encoder read at its last position, before the softmax: x (…, ℓ) → (…, N_V)."""
    return architectures.next_token_logits(x, A.embedding_params(p), _layers(p, "layers.", A.block_params),
                                           A.norm_params(p, "gamma", "beta"), _head(p, ctx), ctx.variant,
                                           ctx.hyper["ell_max"])
