"""Hugging Face transformers' T5 attention as an implementation of the self-attention entries with T5's
bucketed relative position bias (spec 2.13; plugin ``transformers-t5``).

Boundary only: a tiny ``T5Config`` from the case's sizes and the declared set's bucket parameters,
ftspec's parameters loaded into the library's own ``T5Attention(config, has_relative_attention_bias=True)``
(the attention of T5's first layer, which holds the table every layer of its stack then shares), layout
(tokens as rows); the mathematics is the library's. Written against transformers 5.24.0 with torch 2.13.0,
reading models/t5/modeling_t5.py (``T5Attention.__init__``, ``forward``, ``compute_bias``,
``_relative_position_bucket``, ``eager_attention_forward``):

- ``self_attention``: an encoder's attention (``is_decoder=False``: bidirectional buckets), no mask, as
  ``T5Stack`` passes none for an unpadded encoder sequence;
- ``causal_self_attention``: a decoder's (``is_decoder=True``: unidirectional buckets), with the causal
  mask given additively, ``finfo(dtype).min`` above the diagonal (what ``create_causal_mask`` gives the
  eager path; the spec's −∞ gives the same weights wherever a query has a key, which it always has here).

The weights: ``q``/``k``/``v`` (H·d_kv × d_model, bias=False) are the heads' W_q, W_k, W_v stacked, head 0
first; ``o`` (d_model × H·d_kv) is W_o; ``relative_attention_bias`` (an ``nn.Embedding(num_buckets, H)``) has
the spec's table rel_bias (rel_buckets × H) as its weight. T5 has no biases on its projections and no score
scale (``self.scaling = 1.0``): the declared sets are attn_bias=False, attn_scale="none",
rel_bias="t5_buckets", one per drawn pair of bucket parameters (T5's 32 and 128, and the two small pairs at
which the drawn lengths reach the logarithmic buckets), each built into the config
(``relative_attention_num_buckets``, ``relative_attention_max_distance``). d_kv is the head width of q, k and
v alike: d_attn = d_mid; d_model is free of H·d_kv.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import transformers
from transformers import T5Config
from transformers.models.t5.modeling_t5 import T5Attention, T5Block

from ftspec.impls.api import Context, Implementation, Limits
from ftspec.spec.variants import PAPER, VariantSet

from .._torch_boundary import devices, from_numpy, to_numpy

__all__ = ["T5_ATTENTION", "T5_BUCKETS", "T5_LAYER", "T5_V1_1_LAYER", "implementation_t5", "implementation_t5_layers"]

#: T5's attention (T5Config defaults, transformers 5.24: no projection biases, no score scale) with its
#: relative bias; the bucket parameters are T5's (relative_attention_num_buckets 32, max_distance 128)
T5_ATTENTION: VariantSet = PAPER.replace(attn_bias=False, attn_scale="none", rel_bias="t5_buckets")
#: the declared (num_buckets, max_distance): T5's own and the strategies' small pairs (T5_BUCKETS of
#: conformance/core/strategies/_variants.py, stated again here: a plugin declares what it builds)
T5_BUCKETS = ((32, 128), (6, 5), (8, 10))


def _config(ctx: Context, decoder: bool) -> T5Config:
    h, v = ctx.hyper, ctx.variant
    return T5Config(d_model=h["d_e"], d_kv=h["d_attn"], num_heads=h["H"], is_decoder=decoder,
                    relative_attention_num_buckets=v.rel_buckets, relative_attention_max_distance=v.rel_max_distance,
                    dropout_rate=0.0, attn_implementation="eager")


def _stacked(p: Mapping[str, torch.Tensor], H: int, leaf: str) -> torch.Tensor:
    return torch.cat([p[f"heads.{h}.{leaf}"] for h in range(H)], dim=0)  # (H·d_kv, d_model), head 0 first


def _check(p: Mapping[str, torch.Tensor], ctx: Context) -> None:
    h, v = ctx.hyper, ctx.variant
    if any(k.startswith("kv_heads.") or k.startswith("b_") or ".b_" in k for k in p):
        raise ValueError("T5Attention has no projection biases and no shared key/value heads")
    if h["d_attn"] != h["d_mid"]:
        raise ValueError(f"T5Attention's d_kv is the width of q, k and v: d_attn = {h['d_attn']} ≠ "
                         f"d_mid = {h['d_mid']}")
    if "rel_bias" not in p or tuple(p["rel_bias"].shape) != (v.rel_buckets, h["H"]):
        raise ValueError(f"T5's relative bias table rel_bias of shape ({v.rel_buckets}, {h['H']}) is needed")


def _causal_mask(ell: int, x: torch.Tensor) -> torch.Tensor:
    """Additive, finfo.min above the diagonal: (1, 1, ℓ, ℓ) [query, key] (``create_causal_mask``'s eager one)."""
    above = torch.ones(ell, ell, dtype=torch.bool, device=x.device).triu(1)
    mask = torch.zeros(ell, ell, dtype=x.dtype, device=x.device)
    return mask.masked_fill(above, torch.finfo(x.dtype).min)[None, None]


def _attention(causal: bool, decoder: bool | None = None) -> Any:
    """The entry's function: the causal mask where ``causal``; T5Attention built with ``is_decoder`` =
    ``decoder`` (default: ``causal``, T5's own pairing; the other is a wrong build, for the tests)."""
    decoder = causal if decoder is None else decoder

    def run(i: Mapping[str, torch.Tensor], p: Mapping[str, torch.Tensor], ctx: Context) -> Any:
        _check(p, ctx)
        H = ctx.hyper["H"]
        X = i["X"].transpose(-1, -2)  # (…, ℓ, d_e): tokens as rows
        batched = X.dim() == 3
        x = X if batched else X.unsqueeze(0)  # (B, ℓ, d_e)
        ell = x.shape[1]
        with torch.no_grad():
            attention = T5Attention(_config(ctx, decoder), has_relative_attention_bias=True, layer_idx=0)
            attention = attention.to(dtype=x.dtype, device=x.device).train(False)
            attention.q.weight.copy_(_stacked(p, H, "W_q"))
            attention.k.weight.copy_(_stacked(p, H, "W_k"))
            attention.v.weight.copy_(_stacked(p, H, "W_v"))
            attention.o.weight.copy_(p["W_o"])
            attention.relative_attention_bias.weight.copy_(p["rel_bias"])
            y = attention(x, mask=_causal_mask(ell, x) if causal else None)[0]  # (B, ℓ, d_e)
        y = y if batched else y.squeeze(0)
        return y.transpose(-1, -2)  # (…, d_e, ℓ)
    run.__doc__ = (f"Alg. 5 with Z = X via T5Attention (is_decoder={decoder}: "
                   f"{'unidirectional' if decoder else 'bidirectional'} buckets), X (…, d_e, ℓ) → Ṽ (…, d_e, ℓ).")
    return run


def _block_config(ctx: Context, decoder: bool) -> T5Config:
    """A T5Block's config: T5 v1.0's ReLU MLP (``feed_forward_proj="relu"``, T5DenseActDense) or v1.1's
    GeGLU (``"gated-gelu"``: T5DenseGatedActDense, gelu_new) as the declared set's ``mlp`` says; d_ff = d_mlp,
    layer_norm_epsilon the set's ε."""
    h, v = ctx.hyper, ctx.variant
    return T5Config(d_model=h["d_e"], d_kv=h["d_attn"], d_ff=h["d_mlp"], num_heads=h["H"], is_decoder=decoder,
                    relative_attention_num_buckets=v.rel_buckets, relative_attention_max_distance=v.rel_max_distance,
                    feed_forward_proj="gated-gelu" if v.mlp == "gated" else "relu", layer_norm_epsilon=v.epsilon,
                    dropout_rate=0.0, attn_implementation="eager")


def _load_attention(attention: Any, p: Mapping[str, torch.Tensor], prefix: str, H: int) -> None:
    for name, leaf in (("q", "W_q"), ("k", "W_k"), ("v", "W_v")):
        getattr(attention, name).weight.copy_(torch.cat([p[f"{prefix}heads.{h}.{leaf}"] for h in range(H)], dim=0))
    attention.o.weight.copy_(p[prefix + "W_o"])
    if attention.has_relative_attention_bias:
        attention.relative_attention_bias.weight.copy_(p[prefix + "rel_bias"])


def _load_mlp(ff: Any, p: Mapping[str, torch.Tensor], first: str, second: str) -> None:
    """T5LayerFF's weights: wi (or wi_0, the activated branch, and wi_1, the linear one) and wo."""
    dense = ff.DenseReluDense
    if hasattr(dense, "wi_0"):
        dense.wi_0.weight.copy_(p[f"W_mlp{first}"])
        dense.wi_1.weight.copy_(p[f"W_mlp{first}_lin"])
    else:
        dense.wi.weight.copy_(p[f"W_mlp{first}"])
    dense.wo.weight.copy_(p[f"W_mlp{second}"])


def _rows(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """Canonical (…, d, ℓ) → (B, ℓ, d), and whether a batch axis was given."""
    X = x.transpose(-1, -2)
    return (X, True) if X.dim() == 3 else (X.unsqueeze(0), False)


def _encoder_layer(i: Mapping[str, torch.Tensor], p: Mapping[str, torch.Tensor], ctx: Context) -> Any:
    """Alg. 8 lines 5-8 (pre-norm) via ``T5Block(config, has_relative_attention_bias=True)`` of an encoder:
    T5LayerSelfAttention (T5LayerNorm γ1, the attention, the residual), T5LayerFF (γ2, the MLP, the residual).
    Z (…, d_e, ℓ) → (…, d_e, ℓ)."""
    H = ctx.hyper["H"]
    x, batched = _rows(i["Z"])
    with torch.no_grad():
        block = T5Block(_block_config(ctx, False), has_relative_attention_bias=True, layer_idx=0)
        block = block.to(dtype=x.dtype, device=x.device).train(False)
        _load_attention(block.layer[0].SelfAttention, p, "attn.", H)
        block.layer[0].layer_norm.weight.copy_(p["gamma1"])
        block.layer[1].layer_norm.weight.copy_(p["gamma2"])
        _load_mlp(block.layer[1], p, "1", "2")
        y = block(x)[0]
    return (y if batched else y.squeeze(0)).transpose(-1, -2)


def _decoder_layer(i: Mapping[str, torch.Tensor], p: Mapping[str, torch.Tensor], ctx: Context) -> Any:
    """Alg. 8 lines 14-19 (pre-norm) via ``T5Block(config, has_relative_attention_bias=True)`` of a decoder:
    the causal self-attention with T5's causal buckets (γ3), T5LayerCrossAttention to Z as given (γ4;
    ``EncDecAttention`` holds no table: no bias), T5LayerFF (γ5). X (…, d_e, ℓ_x), Z (…, d_e, ℓ_z)."""
    H = ctx.hyper["H"]
    x, batched = _rows(i["X"])
    z, _ = _rows(i["Z"])
    with torch.no_grad():
        block = T5Block(_block_config(ctx, True), has_relative_attention_bias=True, layer_idx=0)
        block = block.to(dtype=x.dtype, device=x.device).train(False)
        _load_attention(block.layer[0].SelfAttention, p, "self_attn.", H)
        _load_attention(block.layer[1].EncDecAttention, p, "cross_attn.", H)
        for k, sub in ((3, 0), (4, 1), (5, 2)):
            block.layer[sub].layer_norm.weight.copy_(p[f"gamma{k}"])
        _load_mlp(block.layer[2], p, "3", "4")
        y = block(x, attention_mask=_causal_mask(x.shape[1], x), encoder_hidden_states=z)[0]
    return (y if batched else y.squeeze(0)).transpose(-1, -2)


def _make(name: str, variants: Mapping[str, tuple[VariantSet, ...]], algorithms: Mapping[str, Any],
          dtypes: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16"),
          layers: bool = False) -> Implementation:
    return Implementation(
        name=name,
        version=f"transformers{transformers.__version__}+torch{torch.__version__}",
        algorithms=dict(algorithms),
        dtypes=dtypes,
        devices=devices,
        from_numpy=from_numpy,
        to_numpy=to_numpy,
        variants={a: list(variants[a]) for a in algorithms},
        precision="highest",
        description=("Hugging Face T5Block (has_relative_attention_bias=True)" if layers else
                     "Hugging Face T5Attention (has_relative_attention_bias=True)") + ", attn_implementation='eager'",
        extra={"transformers": transformers.__version__, "torch": torch.__version__, "attn_implementation": "eager"},
        limits={a: Limits(equal=(("d_attn", "d_mid"),)) for a in algorithms},
    )


#: every declared set: T5's attention at each pair of bucket parameters
T5_SETS = tuple(T5_ATTENTION.replace(rel_buckets=b, rel_max_distance=d) for b, d in T5_BUCKETS)
#: T5 v1.0's layer (T5Config defaults): pre-norm T5LayerNorm, an RMSnorm with γ only and ε 1e-6 inside the root
#: (``hidden_states * torch.rsqrt(variance + eps)``, variance = mean of squares, no mean subtracted), ReLU MLP
#: without biases (T5DenseActDense: wi, wo bias=False), the attention above
T5_LAYER: VariantSet = T5_ATTENTION.replace(norm="rms_norm", epsilon=1e-6, epsilon_placement="inside_root",
                                            affine="scale", norm_placement="pre", activation="relu", mlp_bias=False)
#: T5 v1.1's (google/t5-v1_1-*: feed_forward_proj "gated-gelu", T5DenseGatedActDense: wo(gelu_new(wi_0 x) ⊙ wi_1 x))
T5_V1_1_LAYER: VariantSet = T5_LAYER.replace(mlp="gated", activation="gelu_tanh")
T5_LAYER_SETS = tuple(v.replace(rel_buckets=b, rel_max_distance=d) for v in (T5_LAYER, T5_V1_1_LAYER)
                      for b, d in T5_BUCKETS)

implementation_t5 = _make("transformers-t5", {"self_attention": T5_SETS, "causal_self_attention": T5_SETS},
                          {"self_attention": _attention(False), "causal_self_attention": _attention(True)})
#: T5LayerNorm takes the mean of squares in float32 (``hidden_states.to(torch.float32).pow(2).mean``): not float64
implementation_t5_layers = _make("transformers-t5-layers",
                                 {"encoder_layer": T5_LAYER_SETS, "decoder_layer": T5_LAYER_SETS},
                                 {"encoder_layer": _encoder_layer, "decoder_layer": _decoder_layer},
                                 dtypes=("float32", "bfloat16", "float16"), layers=True)
