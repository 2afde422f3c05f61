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


def _encoder_entry(name: str, *, norm_first: bool, activation: str, causal: bool, fast: bool
                   ) -> Callable[[In, In, Context], Any]:
    def fn(i: In, p: In, ctx: Context) -> Any:
        (key,) = i  # "Z" (encoder_layer) or "X" (bert_layer, gpt2_layer)
        layer = _encoder(p, ctx, norm_first, activation)
        X = A.cols_to_rows(i[key])  # (…, ℓ, d_e)
        if fast and not ctx.batched:
            X = X.unsqueeze(0)  # (1, ℓ, d_e): the fast path needs a 3-D input
        mask = causal_blocked(X.shape[-2], X.device) if causal else None  # (ℓ, ℓ) or none (Mask ≡ 1)
        with _mode(fast):
            Y = layer(X, src_mask=mask).detach()  # (…, ℓ, d_e)
        if fast and not ctx.batched:
            Y = Y.squeeze(0)
        return A.rows_to_cols(Y)  # (…, d_e, ℓ)

    fn.__name__ = name
    fn.__doc__ = (f"nn.TransformerEncoderLayer(norm_first={norm_first}, activation={activation!r})"
                  f"{' with a causal src_mask' if causal else ''}, {'fast' if fast else 'slow'} path.")
    return fn


def _decoder_entry(*, norm_first: bool, activation: str) -> Callable[[In, In, Context], Any]:
    def fn(i: In, p: In, ctx: Context) -> Any:
        layer = _decoder(p, ctx, norm_first, activation)
        X, Z = A.cols_to_rows(i["X"]), A.cols_to_rows(i["Z"])  # (…, ℓ_x, d_e), (…, ℓ_z, d_e)
        Y = layer(X, Z, tgt_mask=causal_blocked(X.shape[-2], X.device)).detach()  # (…, ℓ_x, d_e)
        return A.rows_to_cols(Y)  # (…, d_e, ℓ_x)

    fn.__name__ = "decoder_layer"
    fn.__doc__ = (f"nn.TransformerDecoderLayer(norm_first={norm_first}, activation={activation!r}), "
                  "causal tgt_mask, no memory_mask, autograd on (the slow path).")
    return fn


def _encoders(fast: bool, pre_relu: bool) -> dict[str, Callable[[In, In, Context], Any]]:
    if pre_relu:  # norm_first=True, ReLU: the layer entries under norm_placement=pre, activation=relu
        return {"encoder_layer": _encoder_entry("encoder_layer", norm_first=True, activation="relu",
                                                causal=False, fast=fast),
                "gpt2_layer": _encoder_entry("gpt2_layer", norm_first=True, activation="relu",
                                             causal=True, fast=fast)}
    return {  # the paper's placement and activation per architecture
        "encoder_layer": _encoder_entry("encoder_layer", norm_first=False, activation="relu",
                                        causal=False, fast=fast),
        "bert_layer": _encoder_entry("bert_layer", norm_first=False, activation="gelu", causal=False, fast=fast),
        "gpt2_layer": _encoder_entry("gpt2_layer", norm_first=True, activation="gelu", causal=True, fast=fast),
    }


#: Plugin ``torch-nn-layers``: the slow path, the paper's placement and activation.
LAYERS_SLOW = {**_encoders(False, False), "decoder_layer": _decoder_entry(norm_first=False, activation="relu")}
#: Plugin ``torch-nn-layers-pre``: the slow path, norm_first=True and ReLU everywhere.
LAYERS_SLOW_PRE = {**_encoders(False, True), "decoder_layer": _decoder_entry(norm_first=True, activation="relu")}
#: Plugin ``torch-nn-layers-fast``: ``torch._transformer_encoder_layer_fwd``, paper placement/activation.
LAYERS_FAST = _encoders(True, False)
#: Plugin ``torch-nn-layers-fast-pre``: the fast path, norm_first=True and ReLU.
LAYERS_FAST_PRE = _encoders(True, True)
