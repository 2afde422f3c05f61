"""torch.nn itself as an implementation (plugins ``torch-nn``, ``torch-nn-weights``, the
RMSNorm-default pair and the four ``torch-nn-layers*``).

Boundary only: layout, loading ftspec's parameters into the library's own
modules, mask polarity and head packing (``adapter``); the maths is
torch.nn's. Written against torch 2.13.0 (nn/modules/activation.py
MultiheadAttention, nn/functional.py scaled_dot_product_attention and
multi_head_attention_forward, nn/modules/normalization.py LayerNorm and
RMSNorm).

Variant sets (docs/libraries.md says why, switch by switch):

``torch-nn``          LayerNorm/RMSNorm ε = 1e-5 inside the root (biased
                      variance); SDPA's math path on CPU scales √scale into
                      both Q and K (``query_key_sqrt``) and gives a fully
                      masked query zero output (``empty_query="zeros"``).
                      ``mh_attention`` is MultiheadAttention with
                      need_weights=False, which calls SDPA.
                      ``padded_self_attention`` / ``padded_causal_self_attention``:
                      MultiheadAttention(X, X, X, key_padding_mask=~pad
                      [, causal attn_mask]), need_weights=False, pinned to
                      the slow path (autograd on): zeros, flash kernel
                      (``scale_placement="scores"``). ``causal_self_attention``:
                      grouped-query attention, SDPA(enable_gqa=True) with
                      kv_group=2 ("consecutive"), flash kernel.
``torch-nn-weights``  MultiheadAttention with need_weights=True: q is scaled
                      before q·kᵀ (``scale_placement="query"``) and a fully
                      masked query gives NaN (``empty_query="nan"``), on the
                      Python path and, for the padded self-attention entries
                      (batched, even H, eval, no_grad), on the native fast path.

nn.MultiheadAttention ties d_attn = d_mid = d_x / H and d_out = d_x; that is
declared as shape limits where impls/api.py offers ``Limits``.

``torch-nn-rms-default`` / ``-f64``  nn.RMSNorm at its default eps=None,
                      whose ε depends on the dtype (see variant_rms_default):
                      one variant set per ε, so one plugin per dtype group.

``torch-nn-layers`` / ``-pre``  nn.TransformerEncoderLayer/DecoderLayer on the
                      slow path (layers.py): the paper's placement and
                      activation per layer, or norm_first=True with ReLU;
                      SDPA's CPU flash kernel scales the scores (``scores``).
                      The ``padded_*`` layers: the same calls with
                      ``*_key_padding_mask=~pad``; an empty query gives
                      zeros (``empty_query="zeros"``).
``torch-nn-layers-fast`` / ``-fast-pre``  the same encoder layers through
                      ``torch._transformer_encoder_layer_fwd``, which scales
                      q (``query``); H = 2 only (odd H leaves the fast path).
                      Their ``padded_*`` forms stay on the fused op, whose
                      ``_masked_softmax`` gives an empty query NaN: declared
                      per algorithm with ``empty_query="nan"``.

Threads and precision as in the ``torch`` plugin: one intra-op thread
(``FTSPEC_TORCH_THREADS``), float32 matmul precision "highest".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ftspec.impls import api
from ftspec.impls.api import Implementation
from ftspec.spec.variants import PAPER

from .._torch_boundary import configure, devices, from_numpy, to_numpy
from .entries import ALGORITHMS, ALGORITHMS_RMS_DEFAULT, ALGORITHMS_WEIGHTS
from .layers import LAYERS_FAST, LAYERS_FAST_PRE, LAYERS_SLOW, LAYERS_SLOW_PRE

__all__ = ["implementation", "implementation_weights", "implementation_rms_default",
           "implementation_rms_default_f64", "implementation_layers", "implementation_layers_pre",
           "implementation_layers_fast", "implementation_layers_fast_pre", "VARIANT_SDPA",
           "VARIANT_WEIGHTS", "VARIANT_PADDED", "VARIANT_GQA",
           "VARIANT_LAYERS", "VARIANT_LAYERS_PRE", "VARIANT_FAST", "VARIANT_FAST_PRE",
           "VARIANT_FAST_PADDED", "VARIANT_FAST_PRE_PADDED",
           "variant_rms_default"]

configure()  # one intra-op thread, float32 matmuls at "highest" (_torch_boundary.py)

#: Every op used here runs on CPU in all four real dtypes (checked on 2.13.0).
_REAL = ("float64", "float32", "bfloat16", "float16")

_NORM = dict(epsilon=1e-5, epsilon_placement="inside_root", variance="biased", affine="scale_shift")
VARIANT_SDPA = PAPER.replace(empty_query="zeros", scale_placement="query_key_sqrt", **_NORM)
VARIANT_WEIGHTS = PAPER.replace(empty_query="nan", scale_placement="query", **_NORM)
#: ``torch-nn``'s padded self-attention (MultiheadAttention, need_weights=False, slow path):
#: F.multi_head_attention_forward hands SDPA 4-D tensors and one additive float mask, and CPU
#: runs ``_scaled_dot_product_flash_attention_for_cpu`` (scores scaled); an all-masked query
#: gives ṽ = 0.
VARIANT_PADDED = VARIANT_SDPA.replace(scale_placement="scores")
#: ``torch-nn``'s causal_self_attention: SDPA with enable_gqa=True, two query heads per
#: key/value head, kv head ⌊h/2⌋ ("consecutive", repeat_interleave), flash kernel (scores
#: scaled). torch has no RoPE: ``rotary`` stays "none".
VARIANT_GQA = VARIANT_SDPA.replace(kv_group=2, kv_order="consecutive", scale_placement="scores")
#: The layers' slow path: MultiheadAttention hands SDPA 4-D (N, H, ℓ, d_head)
#: tensors, for which CPU picks ``_scaled_dot_product_flash_attention_for_cpu``
#: (seen with torch.profiler on 2.13.0), which scales the scores q·kᵀ.
#: empty_query is no switch of the unpadded layers (their masks leave no query empty); for the
#: ``padded_*`` layer entries it is: a query with no key (every key padding, or a padded start
#: under the causal mask) gets ṽ = 0 from that kernel (float mask, fully masked row), at every
#: dtype, so one set, "zeros", serves every entry of the slow plugins.
VARIANT_LAYERS = PAPER.replace(empty_query="zeros", scale_placement="scores", **_NORM)
VARIANT_LAYERS_PRE = VARIANT_LAYERS.replace(norm_placement="pre", activation="relu")
#: The fast path: ``_transform_bias_rescale_qkv`` computes q = (q + b_q)/√d_head.
VARIANT_FAST = VARIANT_LAYERS.replace(scale_placement="query")
VARIANT_FAST_PRE = VARIANT_FAST.replace(norm_placement="pre", activation="relu")
#: The fast path with a src_key_padding_mask (the ``padded_*`` layer entries): merge_masks hands
#: the fused op mask_type 1 or 2, ``_native_multi_head_attention`` then runs ``_masked_softmax``,
#: whose fully masked row is 0/0: an empty query's column is NaN, at every dtype (layers.py).
#: The spec refuses such a case under "nan" (its layer norm rejects the NaN column), so the
#: harness never judges this empty_query; tests/impls/test_torch_nn.py checks the NaN directly.
VARIANT_FAST_PADDED = VARIANT_FAST.replace(empty_query="nan")
VARIANT_FAST_PRE_PADDED = VARIANT_FAST_PRE.replace(empty_query="nan")
#: the padded entries of the fast plugins (each declared with the ``*_PADDED`` set above)
PADDED_LAYERS = ("padded_encoder_layer", "padded_bert_layer", "padded_gpt2_layer")


def _limits(algorithms: Any, fast: bool = False) -> dict[str, Any]:
    """``limits=`` for MultiheadAttention and the layers, if this ftspec's contract has it.

    The layers' MultiheadAttention ties d_attn = d_mid and d_e = H·d_attn.
    The fast path also needs an even H (odd H silently takes the slow path,
    transformer.py "num_head is odd"); Limits has no parity, so the fast
    plugins are held to H = 2."""
    Limits = getattr(api, "Limits", None)
    has_field = "limits" in {f.name for f in dataclasses.fields(Implementation)}
    if Limits is None or not has_field:
        return {}
    out = {}
    if "mh_attention" in algorithms:
        out["mh_attention"] = Limits(equal=(("d_attn", "d_mid"), ("d_x", "H*d_attn"), ("d_out", "d_x")))
    for name in ("padded_self_attention", "padded_causal_self_attention"):
        if name in algorithms:  # MultiheadAttention(d_e, H): head_dim = d_e / H for q, k and v
            out[name] = Limits(equal=(("d_attn", "d_mid"), ("d_e", "H*d_attn")))
    if "causal_self_attention" in algorithms:  # SDPA's flash kernel on CPU needs equal q/k and v head sizes
        out["causal_self_attention"] = Limits(equal=(("d_attn", "d_mid"),))
    bounds: dict[str, Any] = dict(minimum={"H": 2}, maximum={"H": 2}) if fast else {}
    for name in algorithms:
        if name.endswith("_layer"):
            out[name] = Limits(equal=(("d_attn", "d_mid"), ("d_e", "H*d_attn")), **bounds)
    return {"limits": out} if out else {}


def variant_rms_default(dtype: str) -> Any:
    """The variant set of ``nn.RMSNorm(eps=None)`` at ``dtype``: ε is
    finfo(float64).eps for float64 and finfo(float32).eps for float32,
    bfloat16 and float16 (the reduced types compute in float32)."""
    eps = torch.finfo(torch.float64 if dtype == "float64" else torch.float32).eps
    return PAPER.replace(norm="rms_norm", epsilon=eps, epsilon_placement="inside_root")


def _make(name: str, algorithms: Any, variant: Any, description: str,
          dtypes: tuple[str, ...] = _REAL, fast: bool = False) -> Implementation:
    """One variant set for every algorithm, or ``variant`` as {algorithm | "*": set}."""
    return Implementation(
        name=name,
        version=f"torch{torch.__version__}",
        algorithms=algorithms,
        dtypes=dtypes,
        devices=devices,
        from_numpy=from_numpy,
        to_numpy=to_numpy,
        variants=({a: [v] for a, v in variant.items()} if isinstance(variant, dict) else [variant]),
        precision="highest",
        description=description,
        extra={"torch": torch.__version__},
        **_limits(algorithms, fast),
    )


def _fast_sets(unpadded: Any, padded: Any, algorithms: Any) -> dict[str, Any]:
    """{"*": the fast path's set, each padded entry it implements: the same with empty_query="nan"}."""
    return {"*": unpadded, **{a: padded for a in PADDED_LAYERS if a in algorithms}}


implementation = _make("torch-nn", ALGORITHMS,
                       {"*": VARIANT_SDPA, "padded_self_attention": VARIANT_PADDED,
                        "padded_causal_self_attention": VARIANT_PADDED, "causal_self_attention": VARIANT_GQA},
                       "torch.nn as shipped: LayerNorm, RMSNorm, SDPA (GQA via enable_gqa), "
                       "MultiheadAttention (need_weights=False; key_padding_mask on the slow path)")
implementation_weights = _make("torch-nn-weights", ALGORITHMS_WEIGHTS, VARIANT_WEIGHTS,
                               "torch.nn.MultiheadAttention, need_weights=True path (key_padding_mask: "
                               "fast path when batched with even H)")
implementation_rms_default = _make(
    "torch-nn-rms-default", ALGORITHMS_RMS_DEFAULT, variant_rms_default("float32"),
    "torch.nn.RMSNorm(eps=None): ε = finfo(float32).eps", dtypes=("float32", "bfloat16", "float16"))
implementation_rms_default_f64 = _make(
    "torch-nn-rms-default-f64", ALGORITHMS_RMS_DEFAULT, variant_rms_default("float64"),
    "torch.nn.RMSNorm(eps=None) in float64: ε = finfo(float64).eps", dtypes=("float64",))
implementation_layers = _make(
    "torch-nn-layers", LAYERS_SLOW, VARIANT_LAYERS,
    "nn.TransformerEncoderLayer/DecoderLayer, slow path (autograd on): post-LN ReLU/GELU, pre-LN GELU")
implementation_layers_pre = _make(
    "torch-nn-layers-pre", LAYERS_SLOW_PRE, VARIANT_LAYERS_PRE,
    "nn.TransformerEncoderLayer/DecoderLayer(norm_first=True, relu), slow path")
implementation_layers_fast = _make(
    "torch-nn-layers-fast", LAYERS_FAST, _fast_sets(VARIANT_FAST, VARIANT_FAST_PADDED, LAYERS_FAST),
    "nn.TransformerEncoderLayer fast path (torch._transformer_encoder_layer_fwd): post-LN ReLU/GELU, "
    "pre-LN GELU", fast=True)
implementation_layers_fast_pre = _make(
    "torch-nn-layers-fast-pre", LAYERS_FAST_PRE,
    _fast_sets(VARIANT_FAST_PRE, VARIANT_FAST_PRE_PADDED, LAYERS_FAST_PRE),
    "nn.TransformerEncoderLayer(norm_first=True, relu) fast path", fast=True)
