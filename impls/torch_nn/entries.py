"""The registry entries, each a thin call into torch.nn's own code.

Nothing here computes the algorithm: parameters are loaded into the
library's modules (or handed to ``F.linear``/SDPA) by ``adapter`` and the
library does the maths. With ``ctx.batched`` every input has one leading
batch axis; the modules are called ``batch_first``, so no entry branches on
the flag except to shape MultiheadAttention's mask.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ftspec.impls.api import Context

from . import adapter as A
from .layers import causal_blocked

__all__ = ["ALGORITHMS", "ALGORITHMS_RMS_DEFAULT", "ALGORITHMS_WEIGHTS", "RMS_EPS", "gqa_causal_self_attention"]

In = Mapping[str, torch.Tensor]

#: The ε plugin ``torch-nn`` passes to ``nn.RMSNorm``, equal to
#: nn.LayerNorm's default so that one variant set describes both norms. The
#: library's own default, eps=None, is dtype-dependent: plugins
#: ``torch-nn-rms-default*`` (``rms_norm_default``).
RMS_EPS = 1e-5


def _dtype(ctx: Context) -> torch.dtype:
    return getattr(torch, ctx.dtype)


def layer_norm(i: In, p: In, ctx: Context) -> Any:
    """Alg. 6 via ``nn.LayerNorm(d_e)`` at its defaults (eps=1e-5, affine)."""
    ln = A.load_norm(nn.LayerNorm(ctx.hyper["d_e"], dtype=_dtype(ctx), device=ctx.device), p)
    with torch.no_grad():
        return A.rows_to_cols(ln(A.cols_to_rows(i["X"])))  # (…, ℓ, d_e) → (…, d_e, ℓ)


def rms_norm(i: In, p: In, ctx: Context) -> Any:
    """Alg. 6 (RMSnorm) via ``nn.RMSNorm(d_e, eps=RMS_EPS)``."""
    rms = A.load_norm(nn.RMSNorm(ctx.hyper["d_e"], eps=RMS_EPS, dtype=_dtype(ctx), device=ctx.device), p)
    with torch.no_grad():
        return A.rows_to_cols(rms(A.cols_to_rows(i["X"])))  # (…, d_e, ℓ)


def rms_norm_default(i: In, p: In, ctx: Context) -> Any:
    """Alg. 6 (RMSnorm) via ``nn.RMSNorm(d_e)`` at its default eps=None:
    finfo(float32).eps for float32/bfloat16/float16 inputs, finfo(float64).eps
    for float64 (torch 2.13 docs; checked by tests/impls/test_torch_nn.py)."""
    rms = A.load_norm(nn.RMSNorm(ctx.hyper["d_e"], dtype=_dtype(ctx), device=ctx.device), p)
    with torch.no_grad():
        return A.rows_to_cols(rms(A.cols_to_rows(i["X"])))  # (…, d_e, ℓ)


def attention(i: In, p: In, ctx: Context) -> Any:
    """Alg. 4: the projections with ``F.linear``, the rest in
    ``F.scaled_dot_product_attention`` (default scale 1/√d_attn, bool mask)."""
    X, Z = A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"])  # (…, ℓ_x, d_x), (…, ℓ_z, d_z)
    Q = F.linear(X, p["W_q"], p["b_q"])  # (…, ℓ_x, d_attn)
    K = F.linear(Z, p["W_k"], p["b_k"])  # (…, ℓ_z, d_attn)
    V = F.linear(Z, p["W_v"], p["b_v"])  # (…, ℓ_z, d_out)
    Y = F.scaled_dot_product_attention(Q, K, V, attn_mask=A.sdpa_mask(i["Mask"]))  # (…, ℓ_x, d_out)
    return A.rows_to_cols(Y)


def _mh_attention(need_weights: bool) -> Callable[[In, In, Context], Any]:
    def fn(i: In, p: In, ctx: Context) -> Any:
        h = ctx.hyper
        mha = A.load_mha(p, h["H"], h["d_x"], h["d_z"], _dtype(ctx), ctx.device)
        X, Z = A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"])  # (…, ℓ_x, d_x), (…, ℓ_z, d_z)
        with torch.no_grad():
            Y, _ = mha(X, Z, Z, attn_mask=A.mha_mask(i["Mask"], h["H"]), need_weights=need_weights)
        return A.rows_to_cols(Y)  # (…, ℓ_x, d_out) → (…, d_out, ℓ_x)
    fn.__doc__ = (f"Alg. 5 via ``nn.MultiheadAttention(..., need_weights={need_weights})``: "
                  + ("explicit softmax(q·scale kᵀ) in multi_head_attention_forward."
                     if need_weights else "the SDPA kernel inside multi_head_attention_forward."))
    return fn


def _padded_self_attention(*, causal: bool, need_weights: bool) -> Callable[[In, In, Context], Any]:
    """``padded_self_attention`` / ``padded_causal_self_attention`` through
    ``nn.MultiheadAttention(X, X, X, key_padding_mask=~pad[, attn_mask=causal])``.

    need_weights=False (plugin ``torch-nn``): called with autograd on (the
    parameters require grad, as in training without dropout), which refuses
    MultiheadAttention's fast path ("grad is enabled ..."), so every call,
    batched or not, at any H, runs ``F.multi_head_attention_forward`` → SDPA
    with the masks merged into one additive float mask: an all-masked query
    gives ṽ = 0 (column b_o). Under no_grad in eval mode a batched call with
    even H would take ``torch._native_multi_head_attention`` instead, which
    gives NaN (docs/libraries.md): that path is pinned out, not declared.

    need_weights=True (plugin ``torch-nn-weights``): called as at inference
    (eval, no_grad): a batched call with even H takes the native fast path,
    an unbatched one or odd H the Python path's explicit softmax; both give
    NaN for an all-masked query and both scale q before q·kᵀ, so one variant
    set describes either (tests/impls/test_torch_nn.py counts which ran)."""
    def fn(i: In, p: In, ctx: Context) -> Any:
        h = ctx.hyper
        mha = A.load_mha(p, h["H"], h["d_e"], h["d_e"], _dtype(ctx), ctx.device)
        X = A.cols_to_rows(i["X"])  # (…, ℓ, d_e); the same tensor as query, key and value
        ignore = ~i["pad"]  # (…, ℓ): key_padding_mask, True = not attended (the spec's pad = 0)
        mask = causal_blocked(X.shape[-2], X.device) if causal else None  # (ℓ, ℓ) [t_x, t_z], True = blocked
        with torch.no_grad() if need_weights else contextlib.nullcontext():
            Y, _ = mha(X, X, X, key_padding_mask=ignore, attn_mask=mask, need_weights=need_weights)
        return A.rows_to_cols(Y.detach())  # (…, ℓ, d_e) → (…, d_e, ℓ)

    fn.__name__ = ("padded_causal_self_attention" if causal else "padded_self_attention")
    return fn


def gqa_causal_self_attention(i: In, p: In, ctx: Context) -> Any:
    """``causal_self_attention`` under grouped-query attention:
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)``.

    The projections are ``F.linear`` with the query heads (``heads.{h}.W_q``)
    and the key/value heads (``kv_heads.{g}.W_k``, ``W_v``) packed head-major;
    SDPA repeats each kv head for H/H_kv consecutive query heads
    (``repeat_interleave`` on the head axis, its docstring's reference
    code): query head h reads kv head ⌊h/G⌋, the spec's kv_order
    "consecutive". H_kv is the number of ``kv_heads`` given. Heads are
    concatenated (…, ℓ, H·d_mid) and W_o, b_o applied with ``F.linear``.
    Always 4-D (an unbatched call gets a batch axis of 1): with d_attn =
    d_mid (the plugin's limits) CPU SDPA then runs
    ``_scaled_dot_product_flash_attention_for_cpu`` (scores scaled); a 3-D
    call or d_attn ≠ d_mid takes the math kernel (profiled on 2.13.0)."""
    H = ctx.hyper["H"]
    H_kv = sum(1 for k in p if k.startswith("kv_heads.") and k.endswith(".W_k"))
    X = A.cols_to_rows(i["X"])  # (…, ℓ, d_e)
    if not ctx.batched:
        X = X.unsqueeze(0)  # (1, ℓ, d_e)
    N, ell, _ = X.shape

    @torch.no_grad()
    def heads(names: str, count: int, W: str, b: str) -> torch.Tensor:
        Wp = torch.cat([p[f"{names}.{h}.{W}"] for h in range(count)], dim=0)  # (count·d, d_e)
        bp = torch.cat([p[f"{names}.{h}.{b}"] for h in range(count)], dim=0)  # (count·d,)
        Y = F.linear(X, Wp, bp)  # (N, ℓ, count·d)
        return Y.view(N, ell, count, -1).transpose(1, 2)  # (N, count, ℓ, d)

    Q = heads("heads", H, "W_q", "b_q")  # (N, H, ℓ, d_attn)
    K = heads("kv_heads", H_kv, "W_k", "b_k")  # (N, H_kv, ℓ, d_attn)
    V = heads("kv_heads", H_kv, "W_v", "b_v")  # (N, H_kv, ℓ, d_mid)
    with torch.no_grad():
        Y = F.scaled_dot_product_attention(Q, K, V, is_causal=True, enable_gqa=True)  # (N, H, ℓ, d_mid)
        Y = F.linear(Y.transpose(1, 2).reshape(N, ell, -1), p["W_o"], p["b_o"])  # (N, ℓ, d_e)
    if not ctx.batched:
        Y = Y.squeeze(0)
    return A.rows_to_cols(Y)  # (…, d_e, ℓ)


#: Plugin ``torch-nn``: the SDPA-backed paths (empty query → zeros), and
#: grouped-query causal self-attention through SDPA's enable_gqa.
ALGORITHMS = {
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "attention": attention,
    "mh_attention": _mh_attention(need_weights=False),
    "padded_self_attention": _padded_self_attention(causal=False, need_weights=False),
    "padded_causal_self_attention": _padded_self_attention(causal=True, need_weights=False),
    "causal_self_attention": gqa_causal_self_attention,
}

#: Plugin ``torch-nn-weights``: MultiheadAttention's need_weights=True path
#: (empty query → NaN), a different kernel with a different variant set.
ALGORITHMS_WEIGHTS = {
    "mh_attention": _mh_attention(need_weights=True),
    "padded_self_attention": _padded_self_attention(causal=False, need_weights=True),
    "padded_causal_self_attention": _padded_self_attention(causal=True, need_weights=True),
}

#: Plugins ``torch-nn-rms-default`` (float32, bfloat16, float16) and
#: ``torch-nn-rms-default-f64``: RMSNorm with eps=None, whose ε depends on
#: the dtype, so each ε gets a variant set (and a plugin) of its own.
ALGORITHMS_RMS_DEFAULT = {
    "rms_norm": rms_norm_default,
}
