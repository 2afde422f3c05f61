"""Hugging Face transformers' T5 attention as an implementation of the self-attention entries with T5's
bucketed relative position bias (spec 2.13; plugin ``transformers-t5``), its blocks (``transformers-t5-layers``)
and its whole model, ``T5ForConditionalGeneration``, as the encoder-decoder entries (issue 38: ``transformers-t5``'s
``ed_transformer`` and ``padded_ed_transformer``; ``model_weights``, ``_ed_transformer``), reading
``T5Stack``, ``T5ForConditionalGeneration.forward`` and ``T5Config.__post_init__`` as well.

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
from transformers.models.t5.modeling_t5 import T5Attention, T5Block, T5ForConditionalGeneration

from ftspec.impls.api import Context, Implementation, Limits
from ftspec.spec.variants import PAPER, VariantSet

from .._torch_boundary import devices, from_numpy, to_numpy
from . import adapter as A

__all__ = ["T5_ATTENTION", "T5_BUCKETS", "T5_LAYER", "T5_MODEL", "T5_V1_1_LAYER", "T5_V1_1_MODEL", "implementation_t5",
           "implementation_t5_layers", "model_weights"]

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


# --------------------------------------------------------------------------
# the whole model: T5ForConditionalGeneration (issue 38)
# --------------------------------------------------------------------------


def _model_config(ctx: Context) -> T5Config:
    """A tiny T5Config for ``T5ForConditionalGeneration``: the block config's sizes and conventions, L_enc
    encoder blocks (``num_layers``) and L_dec decoder blocks (``num_decoder_layers``), the vocabulary N_V.
    ``tie_word_embeddings`` is what T5Config reads for the head's scale alone in 5.24: passed False (T5 v1.1's
    configs) it sets ``scale_decoder_outputs`` False; the head stays tied either way (``self.tie_word_embeddings
    = True`` in ``T5Config.__post_init__``). No pad or eos id: nothing in the forward reads them."""
    h, v = ctx.hyper, ctx.variant
    return T5Config(vocab_size=h["N_V"], d_model=h["d_e"], d_kv=h["d_attn"], d_ff=h["d_mlp"],
                    num_layers=h["L_enc"], num_decoder_layers=h["L_dec"], num_heads=h["H"],
                    relative_attention_num_buckets=v.rel_buckets, relative_attention_max_distance=v.rel_max_distance,
                    feed_forward_proj="gated-gelu" if v.mlp == "gated" else "relu", layer_norm_epsilon=v.epsilon,
                    tie_word_embeddings=v.unembedding_scale == "inv_sqrt_d_e", pad_token_id=None, eos_token_id=None,
                    dropout_rate=0.0, attn_implementation="eager")


def _attention_weights(p: Mapping[str, torch.Tensor], src: str, dst: str, H: int, table: str | None) -> dict:
    """q, k, v (the heads stacked, head 0 first), o, and the stack's table where this attention holds it."""
    out = {f"{dst}{name}.weight": torch.cat([p[f"{src}heads.{h}.{leaf}"] for h in range(H)], dim=0)
           for name, leaf in (("q", "W_q"), ("k", "W_k"), ("v", "W_v"))}
    out[dst + "o.weight"] = p[src + "W_o"]
    if table is not None:
        out[dst + "relative_attention_bias.weight"] = p[table]
    return out


def _ff_weights(p: Mapping[str, torch.Tensor], src: str, dst: str, first: str, second: str, gated: bool) -> dict:
    dense = dst + "DenseReluDense."
    if gated:  # T5DenseGatedActDense: wo(act(wi_0 x) ⊙ wi_1 x)
        return {dense + "wi_0.weight": p[f"{src}W_mlp{first}"], dense + "wi_1.weight": p[f"{src}W_mlp{first}_lin"],
                dense + "wo.weight": p[f"{src}W_mlp{second}"]}
    return {dense + "wi.weight": p[f"{src}W_mlp{first}"], dense + "wo.weight": p[f"{src}W_mlp{second}"]}


def model_weights(p: Mapping[str, torch.Tensor], h: Mapping[str, int], v: VariantSet) -> dict[str, torch.Tensor]:
    """T5ForConditionalGeneration's parameters from ftspec's: ``shared`` = W_eᵀ (the encoder's and decoder's
    ``embed_tokens`` and ``lm_head`` are that tensor); ``encoder.block.{l}``: layer.0 (SelfAttention, layer_norm
    γ1), layer.1 (DenseReluDense, layer_norm γ2); ``decoder.block.{l}``: layer.0 (SelfAttention, γ3), layer.1
    (EncDecAttention, γ4), layer.2 (DenseReluDense, γ5); ``final_layer_norm`` γ_enc, γ_dec. Each stack's table
    goes to its block 0's ``SelfAttention.relative_attention_bias`` alone, the one a T5Stack builds
    (``has_relative_attention_bias=bool(i == 0)``): enc_layers.0.attn.rel_bias and
    dec_layers.0.self_attn.rel_bias."""
    H, gated = h["H"], v.mlp == "gated"
    out: dict[str, torch.Tensor] = {"shared.weight": p["W_e"].T}
    for l in range(h["L_enc"]):
        src, dst = f"enc_layers.{l}.", f"encoder.block.{l}.layer."
        out |= _attention_weights(p, src + "attn.", dst + "0.SelfAttention.", H,
                                  "enc_layers.0.attn.rel_bias" if l == 0 else None)
        out |= {dst + "0.layer_norm.weight": p[src + "gamma1"], dst + "1.layer_norm.weight": p[src + "gamma2"]}
        out |= _ff_weights(p, src, dst + "1.", "1", "2", gated)
    for l in range(h["L_dec"]):
        src, dst = f"dec_layers.{l}.", f"decoder.block.{l}.layer."
        out |= _attention_weights(p, src + "self_attn.", dst + "0.SelfAttention.", H,
                                  "dec_layers.0.self_attn.rel_bias" if l == 0 else None)
        out |= _attention_weights(p, src + "cross_attn.", dst + "1.EncDecAttention.", H, None)
        out |= {dst + f"{k - 3}.layer_norm.weight": p[f"{src}gamma{k}"] for k in (3, 4, 5)}
        out |= _ff_weights(p, src, dst + "2.", "3", "4", gated)
    return out | {"encoder.final_layer_norm.weight": p["gamma_enc"], "decoder.final_layer_norm.weight": p["gamma_dec"]}


def _model_key(ctx: Context) -> tuple:
    return ("t5_model", ctx.variant.hash) + tuple(ctx.hyper[k] for k in ("N_V", "L_enc", "L_dec", "H", "d_e",
                                                                          "d_attn", "d_mlp"))


def _ed_transformer(i: Mapping[str, torch.Tensor], p: Mapping[str, torch.Tensor], ctx: Context) -> Any:
    """Algorithm 8 via ``T5ForConditionalGeneration(input_ids=z, decoder_input_ids=x).logits``, softmax over the
    vocabulary; the padded entry passes pad_z as ``attention_mask`` (the encoder's keys and every
    cross-attention's) and pad_x as ``decoder_attention_mask`` (the decoder's self-attention keys, with the
    causal mask: ``create_causal_mask``, eager, ``finfo(dtype).min`` where masked). (…, ℓ) tokens → P (…, N_V, ℓ_x)."""
    h = ctx.hyper
    A.check_tokens(i["z"], h)
    A.check_tokens(i["x"], h)
    z, x = A.batch(i["z"], ctx.batched), A.batch(i["x"], ctx.batched)  # (B, ℓ_z), (B, ℓ_x)
    masks = {}
    if "pad_z" in i:
        masks = {"attention_mask": A.batch(i["pad_z"], ctx.batched).to(torch.long),
                 "decoder_attention_mask": A.batch(i["pad_x"], ctx.batched).to(torch.long)}
    with A.loaded(_model_key(ctx), lambda: T5ForConditionalGeneration(_model_config(ctx)),
                  model_weights(p, h, ctx.variant), getattr(torch, ctx.dtype), ctx.device) as model:
        logits = model(input_ids=z, decoder_input_ids=x, use_cache=False, **masks).logits  # (B, ℓ_x, N_V)
    return A.rows_to_cols(A.unbatch(torch.softmax(logits, dim=-1), ctx.batched))


def _make(name: str, variants: Mapping[str, tuple[VariantSet, ...]], algorithms: Mapping[str, Any],
          dtypes: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16"),
          layers: bool = False, dtypes_by_algorithm: Mapping[str, tuple[str, ...]] | None = None) -> Implementation:
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
                     "Hugging Face T5Attention (has_relative_attention_bias=True), T5ForConditionalGeneration")
        + ", attn_implementation='eager'",
        extra={"transformers": transformers.__version__, "torch": torch.__version__, "attn_implementation": "eager"},
        limits={a: Limits(equal=(("d_attn", "d_mid"),)) for a in algorithms},
        dtypes_by_algorithm=dict(dtypes_by_algorithm or {}),
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

#: T5 v1.0's whole model (T5ForConditionalGeneration, T5Config defaults): its layer with a final T5LayerNorm per
#: stack (T5Stack.final_layer_norm), no position embeddings (the bias alone), the head tied to ``shared`` and
#: the decoder's output times d_model**-0.5 before it (``scale_decoder_outputs``, T5Config's default)
T5_MODEL: VariantSet = T5_LAYER.replace(final_norm="final", positions="none", unembedding="tied",
                                        unembedding_scale="inv_sqrt_d_e")
#: T5 v1.1's as transformers 5.24 builds it from its configs (feed_forward_proj "gated-gelu",
#: tie_word_embeddings false): the head unscaled, and tied (T5Config sets tie_word_embeddings True whatever is
#: passed; a v1.1 checkpoint's own lm_head is not what this module computes with)
T5_V1_1_MODEL: VariantSet = T5_V1_1_LAYER.replace(final_norm="final", positions="none", unembedding="tied")
T5_MODEL_SETS = tuple(v.replace(rel_buckets=b, rel_max_distance=d) for v in (T5_MODEL, T5_V1_1_MODEL)
                      for b, d in T5_BUCKETS)
#: the padded model: a query whose keys are all padding gets the dtype's minimum on every score, so uniform
#: weights over every key (eager attention adds the additive mask to the scores and the bias)
T5_PADDED_MODEL_SETS = tuple(v.replace(empty_query="uniform") for v in T5_MODEL_SETS)
#: the models' T5LayerNorm takes the mean of squares in float32 (not float64, as for the layers)
DTYPES_MODEL = ("float32", "bfloat16", "float16")

implementation_t5 = _make("transformers-t5", {"self_attention": T5_SETS, "causal_self_attention": T5_SETS,
                                              "ed_transformer": T5_MODEL_SETS,
                                              "padded_ed_transformer": T5_PADDED_MODEL_SETS},
                          {"self_attention": _attention(False), "causal_self_attention": _attention(True),
                           "ed_transformer": _ed_transformer, "padded_ed_transformer": _ed_transformer},
                          dtypes_by_algorithm={"ed_transformer": DTYPES_MODEL, "padded_ed_transformer": DTYPES_MODEL})
#: T5LayerNorm takes the mean of squares in float32 (``hidden_states.to(torch.float32).pow(2).mean``): not float64
implementation_t5_layers = _make("transformers-t5-layers",
                                 {"encoder_layer": T5_LAYER_SETS, "decoder_layer": T5_LAYER_SETS},
                                 {"encoder_layer": _encoder_layer, "decoder_layer": _decoder_layer},
                                 dtypes=("float32", "bfloat16", "float16"), layers=True)
