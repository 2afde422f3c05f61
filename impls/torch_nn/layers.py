"""The layer entries, each one call of ``nn.TransformerEncoderLayer`` or
``nn.TransformerDecoderLayer`` (torch 2.13.0, nn/modules/transformer.py).

Each entry hard-wires the module's configuration (``norm_first``,
``activation``) and the path it runs; nothing here reads ``ctx.variant``,
so a plugin whose declared variant set is wrong fails instead of
reconfiguring itself to match it.

Two paths through ``TransformerEncoderLayer.forward``:

slow  autograd on, parameters requiring grad (as in training, without
      dropout): ``why_not_sparsity_fast_path`` is "grad is enabled and at
      least one of ... requires_grad", so forward composes
      ``MultiheadAttention`` (→ ``F.multi_head_attention_forward`` → SDPA),
      ``LayerNorm`` and the two ``Linear``; MultiheadAttention's own fast
      path is refused for the same reason.
fast  ``torch.no_grad()``, eval mode, batch_first, a 3-D input, even H,
      ReLU or GELU, equal norm ε: forward returns
      ``torch._transformer_encoder_layer_fwd`` (one fused op).
      Its attention is ``_native_multi_head_attention``, whose
      ``_transform_bias_rescale_qkv`` scales q by 1/√d_head before q·kᵀ.
      An unbatched input gets a batch axis of 1 here (a 2-D input would
      silently take the slow path); odd H is refused by the plugin's limits.

Padding (the ``padded_*`` entries): ``pad`` (True = a real token) goes in as the module's
``src_key_padding_mask`` / ``tgt_key_padding_mask`` / ``memory_key_padding_mask`` in torch's
polarity, ``~pad`` (True = not attended), next to the same causal ``src_mask``/``tgt_mask`` as
the unpadded entry. What torch 2.13.0 does with it (transformer.py, activation.py
``merge_masks``, functional.py ``multi_head_attention_forward``; profiled and checked at all four
dtypes, tests/impls/test_torch_nn.py):

slow  ``_canonical_mask`` turns each bool mask into an additive float one (0 / −inf);
      ``multi_head_attention_forward`` views the key padding mask as (N·H, 1, ℓ_z), adds it to
      the attn_mask (a padded key under the causal mask: −inf + −inf = −inf), drops any
      is_causal hint and hands SDPA one float mask; CPU runs
      ``_scaled_dot_product_flash_attention_for_cpu`` (scores scaled), whose fully masked row
      gives ṽ = 0: a query with no key (every key padding, or a padded start under the causal
      mask) has attention output b_o, ``empty_query="zeros"``, at every dtype. The decoder's
      two MultiheadAttention calls (self with ``tgt_key_padding_mask``, cross with
      ``memory_key_padding_mask``, no memory_mask) go the same way. A padding position's own
      query is not masked: its column is computed like any other (the spec's ``padded``).
fast  ``TransformerEncoderLayer.forward`` does not touch nested tensors: it canonicalises the
      masks, ``self_attn.merge_masks`` gives mask_type 1 (the (N, ℓ) padding mask alone) or
      2 (causal and padding expanded to (N, H, ℓ, ℓ) and added), and the fused
      ``torch._transformer_encoder_layer_fwd`` still runs (counted by the tests).
      ``_native_multi_head_attention`` with a mask leaves its SDPA branch (taken only when
      ``mask`` is absent) for q·kᵀ (q scaled) → ``_masked_softmax`` → ·v (the aten
      source is not in the wheel: seen with torch.profiler); ``torch._masked_softmax`` of a
      fully masked row is 0/0 = NaN at all four dtypes, so an empty query's column is NaN
      through the rest of the layer: ``empty_query="nan"``. Padding positions are computed
      as on the slow path (equal in float64).
      The spec cannot answer "nan" for a layer: the NaN column reaches a layer norm, whose
      variance check (spec/normalization.py) raises SpecError, so the harness counts such a
      case "refused_by_spec" and judges the fast plugins on pads that leave every query a
      key; the NaN itself is pinned by tests/impls/test_torch_nn.py.
      Not used here: ``nn.TransformerEncoder`` (the stack) converts a *right*-aligned padded
      batch to a nested tensor on its own sparsity fast path (``_nested_tensor_from_mask``),
      runs the layers on the real tokens only and pads back with zeros: padding positions come
      out 0, not their column as the spec computes it; a left-padded batch fails its
      ``mask_check`` and takes the slow path. The layer plugins call the layer, so neither
      happens here.
      The decoder layer has no fused path of its own, but under no_grad in eval its
      self-attention MultiheadAttention takes ``_native_multi_head_attention`` (NaN for an
      empty query) while the cross-attention stays on SDPA (zeros): one call could mix the
      two conventions, so the decoder entries are called with autograd on (slow) only.

Parameter names (spec/params.py ``layer_schema``/``decoder_layer_schema``)
map to the modules: attn → self_attn, γ1/β1 → norm1, γ2/β2 → norm2,
W_mlp1 → linear1, W_mlp2 → linear2; in the decoder self_attn → self_attn,
cross_attn → multihead_attn, γ3/4/5 → norm1/2/3, W_mlp3/4 → linear1/2.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ftspec.impls.api import Context

from . import adapter as A

__all__ = ["LAYERS_FAST", "LAYERS_FAST_PRE", "LAYERS_SLOW", "LAYERS_SLOW_PRE", "causal_blocked"]

In = Mapping[str, torch.Tensor]
#: the ε of every LayerNorm (the modules' default layer_norm_eps)
LAYER_EPS = 1e-5


def causal_blocked(ell: int, device: Any) -> torch.Tensor:
    """The unidirectional mask in torch's polarity: [t_x, t_z] True = blocked,
    i.e. t_z > t_x (the spec's Mask[t_z, t_x] = [[t_z ≤ t_x]], transposed and
    negated)."""
    return torch.ones(ell, ell, dtype=torch.bool, device=device).triu(1)  # (ℓ, ℓ)


def _norm(module: nn.LayerNorm, p: In, k: str) -> None:
    A.load_norm(module, {"gamma": p[f"gamma{k}"], "beta": p[f"beta{k}"]})


def _encoder(p: In, ctx: Context, norm_first: bool, activation: str) -> nn.TransformerEncoderLayer:
    h = ctx.hyper
    layer = nn.TransformerEncoderLayer(h["d_e"], h["H"], dim_feedforward=h["d_mlp"], dropout=0.0,
                                       activation=activation, layer_norm_eps=LAYER_EPS, batch_first=True,
                                       norm_first=norm_first, dtype=getattr(torch, ctx.dtype), device=ctx.device)
    A.copy_mha(layer.self_attn, A.sub(p, "attn."), h["H"])
    _norm(layer.norm1, p, "1")
    _norm(layer.norm2, p, "2")
    A.load_linear(layer.linear1, p["W_mlp1"], p["b_mlp1"])
    A.load_linear(layer.linear2, p["W_mlp2"], p["b_mlp2"])
    return layer.train(False)


def _decoder(p: In, ctx: Context, norm_first: bool, activation: str) -> nn.TransformerDecoderLayer:
    h = ctx.hyper
    layer = nn.TransformerDecoderLayer(h["d_e"], h["H"], dim_feedforward=h["d_mlp"], dropout=0.0,
                                       activation=activation, layer_norm_eps=LAYER_EPS, batch_first=True,
                                       norm_first=norm_first, dtype=getattr(torch, ctx.dtype), device=ctx.device)
    A.copy_mha(layer.self_attn, A.sub(p, "self_attn."), h["H"])
    A.copy_mha(layer.multihead_attn, A.sub(p, "cross_attn."), h["H"])
    for module, k in ((layer.norm1, "3"), (layer.norm2, "4"), (layer.norm3, "5")):
        _norm(module, p, k)
    A.load_linear(layer.linear1, p["W_mlp3"], p["b_mlp3"])
    A.load_linear(layer.linear2, p["W_mlp4"], p["b_mlp4"])
    return layer.train(False)


def _mode(fast: bool) -> Any:
    """no_grad for the fast path; autograd on (parameters require grad) for the slow one."""
    return torch.no_grad() if fast else contextlib.nullcontext()


def _encoder_entry(name: str, *, norm_first: bool, activation: str, causal: bool, fast: bool,
                   padded: bool = False) -> Callable[[In, In, Context], Any]:
    io = "Z" if name.endswith("encoder_layer") else "X"  # encoder_layer's stream is Z, bert/gpt2's X

    def fn(i: In, p: In, ctx: Context) -> Any:
        layer = _encoder(p, ctx, norm_first, activation)
        X = A.cols_to_rows(i[io])  # (…, ℓ, d_e)
        ignore = ~i["pad"] if padded else None  # (…, ℓ): src_key_padding_mask, True = padding (pad = 0)
        if fast and not ctx.batched:
            X = X.unsqueeze(0)  # (1, ℓ, d_e): the fast path needs a 3-D input
            ignore = None if ignore is None else ignore.unsqueeze(0)  # (1, ℓ)
        mask = causal_blocked(X.shape[-2], X.device) if causal else None  # (ℓ, ℓ) or none (Mask ≡ 1)
        with _mode(fast):
            Y = layer(X, src_mask=mask, src_key_padding_mask=ignore).detach()  # (…, ℓ, d_e)
        if fast and not ctx.batched:
            Y = Y.squeeze(0)
        return A.rows_to_cols(Y)  # (…, d_e, ℓ)

    fn.__name__ = name
    fn.__doc__ = (f"nn.TransformerEncoderLayer(norm_first={norm_first}, activation={activation!r})"
                  f"{' with a causal src_mask' if causal else ''}"
                  f"{' and src_key_padding_mask=~pad' if padded else ''}, {'fast' if fast else 'slow'} path.")
    return fn


def _decoder_entry(*, norm_first: bool, activation: str, padded: bool = False) -> Callable[[In, In, Context], Any]:
    def fn(i: In, p: In, ctx: Context) -> Any:
        layer = _decoder(p, ctx, norm_first, activation)
        X, Z = A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"])  # (…, ℓ_x, d_e), (…, ℓ_z, d_e)
        pads = dict(tgt_key_padding_mask=~i["pad_x"],  # (…, ℓ_x): line 14's keys, True = padding
                    memory_key_padding_mask=~i["pad_z"]) if padded else {}  # (…, ℓ_z): line 16's keys
        Y = layer(X, Z, tgt_mask=causal_blocked(X.shape[-2], X.device), **pads).detach()  # (…, ℓ_x, d_e)
        return A.rows_to_cols(Y)  # (…, d_e, ℓ_x)

    fn.__name__ = ("padded_" if padded else "") + "decoder_layer"
    fn.__doc__ = (f"nn.TransformerDecoderLayer(norm_first={norm_first}, activation={activation!r}), "
                  "causal tgt_mask, no memory_mask"
                  + (", tgt_key_padding_mask=~pad_x, memory_key_padding_mask=~pad_z" if padded else "")
                  + ", autograd on (the slow path).")
    return fn


def _encoders(fast: bool, pre_relu: bool, padded: bool) -> dict[str, Callable[[In, In, Context], Any]]:
    """The encoder-layer entries of one plugin, or (``padded``) their ``padded_`` forms: the same
    module and path, given ``src_key_padding_mask``."""
    if pre_relu:  # norm_first=True, ReLU: the layer entries under norm_placement=pre, activation=relu
        config = {"encoder_layer": (True, "relu", False), "gpt2_layer": (True, "relu", True)}
    else:  # the paper's placement and activation per architecture
        config = {"encoder_layer": (False, "relu", False), "bert_layer": (False, "gelu", False),
                  "gpt2_layer": (True, "gelu", True)}
    prefix = "padded_" if padded else ""
    return {prefix + name: _encoder_entry(prefix + name, norm_first=norm_first, activation=activation,
                                          causal=causal, fast=fast, padded=padded)
            for name, (norm_first, activation, causal) in config.items()}


def _layers(fast: bool, pre: bool) -> dict[str, Callable[[In, In, Context], Any]]:
    """One plugin's entries: the encoder layers and, on the slow path, the decoder layer, then
    their padded forms."""
    out: dict[str, Callable[[In, In, Context], Any]] = {}
    for padded in (False, True):
        out |= _encoders(fast, pre, padded)
        if not fast:  # the decoder layer has no fused path (module docstring)
            out[("padded_" if padded else "") + "decoder_layer"] = _decoder_entry(
                norm_first=pre, activation="relu", padded=padded)
    return out


#: Plugin ``torch-nn-layers``: the slow path, the paper's placement and activation.
LAYERS_SLOW = _layers(fast=False, pre=False)
#: Plugin ``torch-nn-layers-pre``: the slow path, norm_first=True and ReLU everywhere.
LAYERS_SLOW_PRE = _layers(fast=False, pre=True)
#: Plugin ``torch-nn-layers-fast``: ``torch._transformer_encoder_layer_fwd``, paper placement/activation.
LAYERS_FAST = _layers(fast=True, pre=False)
#: Plugin ``torch-nn-layers-fast-pre``: the fast path, norm_first=True and ReLU.
LAYERS_FAST_PRE = _layers(fast=True, pre=True)
