"""The registry entries, each a thin call into torch.nn's own code.

Nothing here computes the algorithm: parameters are loaded into the
library's modules (or handed to ``F.linear``/SDPA) by ``adapter`` and the
library does the maths. With ``ctx.batched`` every input has one leading
batch axis; the modules are called ``batch_first``, so no entry branches on
the flag except to shape MultiheadAttention's mask.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ftspec.impls.api import Context

from . import adapter as A

__all__ = ["ALGORITHMS", "ALGORITHMS_RMS_DEFAULT", "ALGORITHMS_WEIGHTS", "RMS_EPS"]

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


#: Plugin ``torch-nn``: the SDPA-backed paths (empty query → zeros).
ALGORITHMS = {
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "attention": attention,
    "mh_attention": _mh_attention(need_weights=False),
}

#: Plugin ``torch-nn-weights``: MultiheadAttention's need_weights=True path
#: (empty query → NaN), a different kernel with a different variant set.
ALGORITHMS_WEIGHTS = {
    "mh_attention": _mh_attention(need_weights=True),
}

#: Plugins ``torch-nn-rms-default`` (float32, bfloat16, float16) and
#: ``torch-nn-rms-default-f64``: RMSNorm with eps=None, whose ε depends on
#: the dtype, so each ε gets a variant set (and a plugin) of its own.
ALGORITHMS_RMS_DEFAULT = {
    "rms_norm": rms_norm_default,
}
