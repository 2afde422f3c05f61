"""The boundary between ftspec's canonical layout and torch.nn's modules.

Pure re-indexing and parameter loading, no arithmetic, so a layout bug cannot
hide as a rounding difference:

- Canonical sequences are columns, X (…, d, ℓ); torch.nn wants rows
  (…, ℓ, d) (``batch_first=True``).
- The canonical Mask is indexed [t_z, t_x] with True = "t_x may attend to
  t_z". ``F.scaled_dot_product_attention`` takes [query, key] = [t_x, t_z]
  with True = may attend (transpose only); ``nn.MultiheadAttention`` takes
  [query, key] with True = *blocked* (transpose and negate), and a batched
  mask as (N·H, ℓ_x, ℓ_z), batch-major.
- ftspec's per-head projections ``heads.h.W_q`` (d_attn, d_x) are packed
  head-major into one (H·d_attn, d_x) matrix: rows h·d_attn … (h+1)·d_attn
  are head h, which is how ``nn.MultiheadAttention`` splits its projection
  (``q.view(ℓ, N·H, head_dim)``). W_o (d_out, H·d_mid) is ``out_proj.weight``
  as it stands.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor, nn

__all__ = ["cols_to_rows", "rows_to_cols", "sdpa_mask", "mha_mask", "pack_heads", "load_mha",
           "copy_mha", "load_norm", "load_linear", "sub"]


def cols_to_rows(X: Tensor) -> Tensor:
    """Canonical (…, d, ℓ) → native (…, ℓ, d)."""
    return X.transpose(-1, -2)


def rows_to_cols(X: Tensor) -> Tensor:
    """Native (…, ℓ, d) → canonical (…, d, ℓ)."""
    return X.transpose(-1, -2)


def sdpa_mask(Mask: Tensor) -> Tensor:
    """Canonical Mask[…, t_z, t_x] → SDPA's bool mask[…, t_x, t_z], True = may attend."""
    return Mask.transpose(-1, -2)


def mha_mask(Mask: Tensor, H: int) -> Tensor:
    """Canonical Mask[…, t_z, t_x] → ``nn.MultiheadAttention``'s attn_mask.

    Unbatched: (ℓ_x, ℓ_z); batched (N, ℓ_z, ℓ_x): (N·H, ℓ_x, ℓ_z) with the
    heads of one batch element adjacent. True = blocked: the polarity flips."""
    blocked = ~Mask.transpose(-1, -2)  # (…, ℓ_x, ℓ_z)
    if blocked.dim() == 3:
        blocked = blocked.repeat_interleave(H, dim=0)  # (N·H, ℓ_x, ℓ_z)
    return blocked


def pack_heads(p: Mapping[str, Tensor], name: str, H: int) -> Tensor:
    """``heads.0.<name>`` … ``heads.{H-1}.<name>`` stacked head-major on axis 0."""
    return torch.cat([p[f"heads.{h}.{name}"] for h in range(H)], dim=0)


def load_mha(p: Mapping[str, Tensor], H: int, d_x: int, d_z: int, dtype: torch.dtype,
             device: str) -> nn.MultiheadAttention:
    """A ``nn.MultiheadAttention`` (batch_first, eval mode) holding ftspec's weights."""
    mha = nn.MultiheadAttention(d_x, H, bias=True, kdim=d_z, vdim=d_z, batch_first=True,
                                dtype=dtype, device=device)
    return copy_mha(mha, p, H)


def sub(p: Mapping[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """The parameters under ``prefix`` (e.g. ``attn.``), with the prefix removed."""
    return {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}


def copy_mha(mha: nn.MultiheadAttention, p: Mapping[str, Tensor], H: int) -> nn.MultiheadAttention:
    """Copy ftspec's heads into an existing ``nn.MultiheadAttention`` (a layer's
    own ``self_attn``/``multihead_attn``) and put it in eval mode.

    The library's own packing: one ``in_proj_weight`` (3E, E) when
    d_z = d_x = E, separate ``q/k/v_proj_weight`` otherwise; ``in_proj_bias``
    (3E) in both cases."""
    Wq, Wk, Wv = (pack_heads(p, n, H) for n in ("W_q", "W_k", "W_v"))  # (E, d_x), (E, d_z), (E, d_z)
    b = torch.cat([pack_heads(p, n, H) for n in ("b_q", "b_k", "b_v")])  # (3E,)
    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            mha.in_proj_weight.copy_(torch.cat([Wq, Wk, Wv], dim=0))  # (3E, E)
        else:
            mha.q_proj_weight.copy_(Wq)
            mha.k_proj_weight.copy_(Wk)
            mha.v_proj_weight.copy_(Wv)
        assert mha.in_proj_bias is not None and mha.out_proj.bias is not None
        mha.in_proj_bias.copy_(b)
        mha.out_proj.weight.copy_(p["W_o"])  # (d_out = E, H·d_mid = E)
        mha.out_proj.bias.copy_(p["b_o"])
    return mha.train(False)  # inference mode


def load_norm(module: nn.Module, p: Mapping[str, Tensor]) -> nn.Module:
    """Copy γ (and β where the module has one) into a LayerNorm/RMSNorm."""
    with torch.no_grad():
        module.weight.copy_(p["gamma"])
        bias = getattr(module, "bias", None)  # LayerNorm's β, or None (RMSNorm has none)
        if bias is not None:
            bias.copy_(p["beta"])
    return module.train(False)  # inference mode


def load_linear(module: nn.Linear, W: Tensor, b: Tensor) -> nn.Linear:
    """Copy W (out × in, the spec's orientation and nn.Linear's) and b into a Linear."""
    with torch.no_grad():
        module.weight.copy_(W)
        assert module.bias is not None
        module.bias.copy_(b)
    return module
