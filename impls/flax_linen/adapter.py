"""The boundary between ftspec's canonical layout and Flax linen's modules.

Pure re-indexing and parameter loading, no arithmetic, so a layout bug cannot
hide as a rounding difference:

- Canonical sequences are columns, X (…, d, ℓ); linen wants rows (…, ℓ, d)
  and normalises / projects the last axis.
- The canonical Mask is indexed [t_z, t_x], True = "t_x may attend to t_z";
  ``nn.dot_product_attention_weights`` takes a mask broadcastable to
  (…, heads, q_length, kv_length) with the same polarity (False = masked
  out), so the mask is transposed and given a heads axis of 1.
- Linen's ``Dense``/``DenseGeneral`` kernels are (in, out…): ftspec's W
  (out × in) is transposed. ``MultiHeadDotProductAttention`` projects with
  ``DenseGeneral(features=(H, head_dim))``, kernel (d_in, H, head_dim) and
  bias (H, head_dim): head h's ``heads.h.W_q`` (d_attn, d_x) becomes
  kernel[:, h, :]. Its output ``DenseGeneral(axis=(-2, -1))`` has kernel
  (H, head_dim, d_out): W_o (d_out, H·d_mid), whose column block h is head
  h (Alg. 5 line 3 stacks head 1 on top), becomes kernel[h, :, :] =
  W_o[:, h·d_mid:(h+1)·d_mid]ᵀ.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax.numpy as jnp

__all__ = ["cols_to_rows", "rows_to_cols", "flax_mask", "padding_mask", "dense", "mha_variables", "norm_variables"]

Arrays = Mapping[str, Any]


def cols_to_rows(X: Any) -> Any:
    """Canonical (…, d, ℓ) → native (…, ℓ, d)."""
    return jnp.swapaxes(X, -1, -2)


def rows_to_cols(X: Any) -> Any:
    """Native (…, ℓ, d) → canonical (…, d, ℓ)."""
    return jnp.swapaxes(X, -1, -2)


def flax_mask(Mask: Any) -> Any:
    """Canonical Mask[…, t_z, t_x] → linen's mask[…, 1, t_x, t_z] (True = may attend)."""
    return jnp.swapaxes(Mask, -1, -2)[..., None, :, :]


def padding_mask(pad: Any, causal: bool = False) -> Any:
    """ftspec's ``pad`` (…, ℓ) (True = a token) → linen's mask (…, 1, ℓ_x, ℓ_z), built with linen's
    own helpers: ``nn.make_attention_mask(query_ok, pad)`` with ``query_ok`` all True, so that
    padding masks keys only, as the spec's ``padded`` does (the common
    ``make_attention_mask(pad, pad)`` also masks a padding position's own query, which then has
    no key and gets uniform weights instead of attending to the real tokens);
    ``causal``: combined with ``nn.make_causal_mask`` (mask[t_x, t_z] = t_z ≤ t_x)."""
    import flax.linen as nn

    mask = nn.make_attention_mask(jnp.ones_like(pad), pad, dtype=jnp.bool_)
    if causal:
        mask = nn.combine_masks(nn.make_causal_mask(pad, dtype=jnp.bool_), mask, dtype=jnp.bool_)
    return mask


def dense(W: Any, b: Any) -> dict:
    """``nn.Dense`` variables for ftspec's (W (out, in), b (out,))."""
    return {"kernel": W.T, "bias": b}  # kernel (in, out)


def _stack_heads(p: Arrays, name: str, H: int) -> Any:
    """``heads.h.<name>`` for h < H stacked on a new axis 0: (H, …)."""
    return jnp.stack([p[f"heads.{h}.{name}"] for h in range(H)])


def mha_variables(p: Arrays, H: int) -> dict:
    """``MultiHeadDotProductAttention`` variables (its submodules query, key,
    value and out) holding ftspec's weights."""
    params = {}
    for sub, n in (("query", "q"), ("key", "k"), ("value", "v")):
        W = _stack_heads(p, f"W_{n}", H)  # (H, head_dim, d_in)
        params[sub] = {"kernel": jnp.transpose(W, (2, 0, 1)),  # (d_in, H, head_dim)
                       "bias": _stack_heads(p, f"b_{n}", H)}  # (H, head_dim)
    W_o = p["W_o"]  # (d_out, H·d_mid)
    d_out = W_o.shape[0]
    params["out"] = {"kernel": W_o.T.reshape(H, -1, d_out),  # (H, d_mid, d_out), head-major rows of W_oᵀ
                     "bias": p["b_o"]}
    return {"params": params}


def norm_variables(p: Arrays) -> dict:
    """``LayerNorm``/``RMSNorm`` variables: γ is ``scale``, β (LayerNorm only) ``bias``."""
    params = {"scale": p["gamma"]}
    if "beta" in p:
        params["bias"] = p["beta"]
    return {"params": params}
