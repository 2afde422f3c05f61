"""The registry entries, each a call into Hugging Face's own modules.

Nothing here computes the algorithm: ``adapter`` builds a tiny config,
loads ftspec's parameters into the library's module, and the library does
the maths. The one operation added at the boundary is the final softmax of
the architectures (the models return logits; Algorithms 9 and 10 return
P = softmax(logits)), done with ``torch.softmax`` at the call's dtype, as a
user of the logits would.

The configuration follows the case's sizes; a module built for one set of
sizes is reused for the next case with the same sizes, every parameter
loaded again (``adapter.loaded``): ~4 ms a call instead of ~11 ms.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ftspec.impls.api import Context

from . import adapter as A

__all__ = ["gpt2_algorithms", "bert_algorithms", "llama_algorithms", "decoder_algorithms", "Decoder", "LLAMA",
           "MISTRAL", "QWEN2", "QWEN2_WINDOWED", "NEOX", "GEMMA", "GEMMA2", "GEMMA2_27B", "GEMMA3", "GEMMA3_27B",
           "QWEN3", "PHI3", "GPTJ", "OPT", "FALCON", "FALCON7B", "BLOOM", "MPT"]

In = Mapping[str, torch.Tensor]
Fn = Callable[[In, In, Context], Any]


def _dtype(ctx: Context) -> torch.dtype:
    return getattr(torch, ctx.dtype)


def _key(name: str, attn: str, hyper: Mapping[str, int]) -> tuple:
    """What a module's construction depends on: its class, attention path and
    config sizes (not the sequence length)."""
    return (name, attn) + tuple(hyper.get(k, 0) for k in ("N_V", "ell_max", "L", "H", "d_e", "d_mlp"))


def _probabilities(logits: torch.Tensor, batched: bool) -> torch.Tensor:
    """Logits (B, ℓ, N_V) → P (…, N_V, ℓ): softmax over the vocabulary."""
    return A.rows_to_cols(A.unbatch(torch.softmax(logits, dim=-1), batched))


def _layer_norm(default_epsilon: Callable[[], float]) -> Fn:
    def layer_norm(i: In, p: In, ctx: Context) -> Any:
        d_e = ctx.hyper["d_e"]
        with A.loaded(("layer_norm", default_epsilon(), d_e), lambda: nn.LayerNorm(d_e, eps=default_epsilon()),
                      {"weight": p["gamma"], "bias": p["beta"]}, _dtype(ctx), ctx.device) as ln:
            return A.rows_to_cols(ln(A.cols_to_rows(i["X"])))  # (…, ℓ, d_e) → (…, d_e, ℓ)
    return layer_norm


@cache
def _gpt2_epsilon() -> float:
    from transformers import GPT2Config

    return float(GPT2Config().layer_norm_epsilon)


@cache
def _bert_epsilon() -> float:
    from transformers import BertConfig

    return float(BertConfig().layer_norm_eps)


def gpt2_algorithms(attn: str, with_norm: bool) -> dict[str, Fn]:
    """d_transformer (``GPT2LMHeadModel``) and gpt2_layer (``GPT2Block``) with
    ``attn_implementation=attn``; layer_norm is ``nn.LayerNorm`` at GPT-2's
    ``layer_norm_epsilon`` (what ``GPT2Block.ln_1`` is)."""

    def d_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 via ``GPT2LMHeadModel(config)(input_ids).logits``."""
        from transformers import GPT2LMHeadModel

        h = ctx.hyper
        A.check_tokens(i["x"], h)
        x = A.batch(i["x"], ctx.batched)  # (B, ℓ) token IDs
        with A.loaded(_key("gpt2_lm", attn, h), lambda: GPT2LMHeadModel(A.gpt2_config(h, attn)),
                      A.gpt2_lm_weights(p, h["L"], h["H"]), _dtype(ctx), ctx.device) as model:
            logits = model(input_ids=x, use_cache=False).logits  # (B, ℓ, N_V)
        return _probabilities(logits, ctx.batched)

    def gpt2_layer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 lines 5-8 via ``GPT2Block``, with the causal mask from
        ``masking_utils.create_causal_mask``, the call ``GPT2Model.forward``
        makes: a 4-D additive mask for eager, None (SDPA's is_causal) for
        sdpa. A block called with no mask would attend both ways in eager."""
        from transformers.masking_utils import create_causal_mask
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block

        h = ctx.hyper
        config = A.gpt2_config(h, attn)
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ, d_e)
        positions = torch.arange(X.shape[1], device=X.device).unsqueeze(0)  # (1, ℓ)
        with A.loaded(_key("gpt2_block", attn, h), lambda: GPT2Block(config, layer_idx=0),
                      A.gpt2_block_weights(p, h["H"]), _dtype(ctx), ctx.device) as block:
            mask = create_causal_mask(config=config, inputs_embeds=X, attention_mask=None, cache=None,
                                      position_ids=positions)
            Y = block(X, attention_mask=mask)  # (B, ℓ, d_e)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    out: dict[str, Fn] = {"d_transformer": d_transformer, "gpt2_layer": gpt2_layer}
    if with_norm:
        out["layer_norm"] = _layer_norm(_gpt2_epsilon)
    return out


def bert_algorithms(attn: str, with_norm: bool) -> dict[str, Fn]:
    """e_transformer and padded_e_transformer (``BertForMaskedLM``), bert_layer (``BertLayer``)
    and padded_self_attention (``BertSelfAttention`` with BertSelfOutput's dense) with
    ``attn_implementation=attn``; layer_norm is ``nn.LayerNorm`` at BERT's
    ``layer_norm_eps`` (what every BERT LayerNorm is)."""

    def e_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 9 via ``BertForMaskedLM(config)(input_ids).logits``: the MLM
        head's transform (dense, GELU, LayerNorm) is lines 10-11, its tied
        decoder with bias is line 12 under ``logit_bias``."""
        from transformers import BertForMaskedLM

        h = ctx.hyper
        A.check_tokens(i["x"], h)  # at ℓ_max = 1 BERT would answer a longer sequence
        x = A.batch(i["x"], ctx.batched)  # (B, ℓ)
        with A.loaded(_key("bert_mlm", attn, h), lambda: BertForMaskedLM(A.bert_config(h, attn)),
                      A.bert_mlm_weights(p, h["L"], h["H"]), _dtype(ctx), ctx.device) as model:
            logits = model(input_ids=x).logits  # (B, ℓ, N_V)
        return _probabilities(logits, ctx.batched)

    def bert_layer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 9 lines 5-8 via ``BertLayer`` with no attention mask (Mask ≡ 1,
        what ``BertModel`` passes when every token is real)."""
        from transformers.models.bert.modeling_bert import BertLayer

        h = ctx.hyper
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ, d_e)
        with A.loaded(_key("bert_layer", attn, h), lambda: BertLayer(A.bert_config(h, attn), layer_idx=0),
                      A.bert_layer_weights(p, h["H"]), _dtype(ctx), ctx.device) as layer:
            Y = layer(X, attention_mask=None)  # (B, ℓ, d_e)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    def padded_e_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 9 with padding via ``BertForMaskedLM(input_ids, attention_mask=pad).logits``: the
        2-D mask a tokenizer returns (1 = token, 0 = padding), from which ``BertModel`` builds every
        layer's mask (``create_bidirectional_mask``: keys masked, queries not)."""
        from transformers import BertForMaskedLM

        h = ctx.hyper
        A.check_tokens(i["x"], h)
        x = A.batch(i["x"], ctx.batched)  # (B, ℓ)
        mask = A.batch(i["pad"], ctx.batched).to(torch.long)  # (B, ℓ): 1 = a token, 0 = padding
        with A.loaded(_key("bert_mlm", attn, h), lambda: BertForMaskedLM(A.bert_config(h, attn)),
                      A.bert_mlm_weights(p, h["L"], h["H"]), _dtype(ctx), ctx.device) as model:
            logits = model(input_ids=x, attention_mask=mask).logits  # (B, ℓ, N_V)
        return _probabilities(logits, ctx.batched)

    def padded_self_attention(i: In, p: In, ctx: Context) -> Any:
        """Alg. 5 with Mask ≡ 1 ∧ pad[t_z] via ``BertSelfAttention`` and BertSelfOutput's
        ``dense`` (``adapter.BertSelfAttentionOnly``), given the mask ``BertModel.forward`` builds
        from the 2-D padding mask (``create_bidirectional_mask``: an additive finfo(dtype).min mask
        for eager, a boolean one for sdpa, None when nothing is padded)."""
        from transformers.masking_utils import create_bidirectional_mask

        h = ctx.hyper
        config = A.bert_config(h, attn)
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ, d_e)
        pad = A.batch(i["pad"], ctx.batched).to(torch.long)  # (B, ℓ)
        with A.loaded(_key("bert_self_attention", attn, h), lambda: A.BertSelfAttentionOnly(config),
                      A.bert_self_attention_weights(p, h["H"]), _dtype(ctx), ctx.device) as attention:
            mask = create_bidirectional_mask(config=config, inputs_embeds=X, attention_mask=pad)
            Y = attention(X, mask)  # (B, ℓ, d_e)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    out: dict[str, Fn] = {"e_transformer": e_transformer, "bert_layer": bert_layer,
                          "padded_e_transformer": padded_e_transformer,
                          "padded_self_attention": padded_self_attention}
    if with_norm:
        out["layer_norm"] = _layer_norm(_bert_epsilon)
    return out


@dataclass(frozen=True)
class Decoder:
    """A Llama-like decoder family of transformers 5.24: its module (``models/<module>/
    modeling_<module>.py``, classes ``<prefix>ForCausalLM``, ``<prefix>Attention``,
    ``<prefix>RotaryEmbedding``, ``<prefix>RMSNorm``), its config builder and its attention weights
    (``adapter``). Llama, Mistral and Qwen2 share the layout and the calls; what differs is in the
    config (Mistral's sliding_window, Qwen2's layer_types) and the q/k/v biases (Qwen2). GPT-NeoX
    is called the same way (``GPTNeoXAttention(X, attention_mask=…, position_embeddings=…)``,
    ``GPTNeoXForCausalLM(input_ids, attention_mask=…)``) with weights of its own and a layer
    (``GPTNeoXLayer``: gpt2_layer) that Llama, Mistral, Qwen2 and Gemma do not certify. Qwen3, Phi-3,
    GPT-J and OPT are called the same way, each with its layer (``<prefix>DecoderLayer``,
    ``GPTJBlock``); Qwen3's and Gemma 3's attention with its QK-norm (q_norm, k_norm from γ_q, γ_k: the
    causal self-attention entries read qk_norm since spec 2.12). These switches say where a family
    departs from the calls:

    ``padded``           False: the whole model is certified as d_transformer, without a padding
                         mask (no family now).
    ``plain``            the whole model is certified without a padding mask as well (d_transformer:
                         OPT, whose positions without a mask are 0 … ℓ−1 as with one).
    ``pad_positions``    the padded model's ``pad_positions`` (OPT: "real", its positions under padding
                         counted among the real tokens, ``cumsum(attention_mask)·attention_mask − 1``,
                         ``OPTLearnedPositionalEmbedding.forward``; a padding position reads row −1 + 2 = 1
                         of embed_positions, which ``adapter.opt_lm_weights`` sets to 0 as the spec takes it).
    ``rotary``           False: the attention takes no position embeddings (OPT: learned positions
                         added to the token embeddings).
    ``extra``            keyword arguments the attention and the layer also take (Falcon's
                         ``alibi=None``: a required argument); a layer returning a tuple
                         (FalconDecoderLayer: output, weights) gives its first item.
    ``full_mask``        the mask is materialised for every path (FalconModel's
                         ``allow_is_causal_skip=False``: FalconAttention's eager path adds it
                         unconditionally, and its sdpa path reads None as is_causal).
    ``layer_type``       the layer type a lone layer's ``<prefix>RotaryEmbedding`` is asked for
                         (Gemma 3: ``Gemma3RotaryEmbedding.forward(x, position_ids, layer_type)`` keeps
                         one table per layer type, and Gemma3TextModel hands each layer its type's);
                         "": the rotary embedding has one table.
    ``alibi``            the ALiBi tensor the attention and the layer take instead of position embeddings,
                         as the family's model builds it: "bloom", ``alibi`` (B·H, 1, ℓ) from the library's
                         ``build_alibi_tensor`` over an all-ones mask, m_h·t_z (what BloomModel.forward builds
                         with no padding mask, so a lone layer or attention keeps the spec's index distances;
                         the padded model builds its own from the padding mask, ``pad_positions``), and the
                         attention also the residual it adds itself (BloomAttention's ``dropout_add``): zeros,
                         which add nothing; "mpt", ``position_bias`` (H, 1, ℓ_max) from
                         ``build_mpt_alibi_tensor``, m_h·(t_z − ℓ_max + 1), of which MptAttention reads the
                         last columns, and the mask as booleans (MptModel.forward: ``create_causal_mask(…)
                         .to(torch.bool)``, then ``masked_fill``); "": none."""

    name: str
    module: str
    prefix: str
    config: Callable[[Mapping[str, int], str, Any], Any]
    attention_weights: Callable[..., dict[str, torch.Tensor]] = A.llama_attention_weights
    lm_weights: Callable[..., dict[str, torch.Tensor]] = A.llama_lm_weights
    #: the class suffix of one layer (``GPTNeoXLayer``: "Layer") and its weights; "": no gpt2_layer
    layer: str = ""
    layer_weights: Callable[..., dict[str, torch.Tensor]] | None = None
    padded: bool = True
    plain: bool = False
    pad_positions: str = "index"
    rotary: bool = True
    extra: tuple[tuple[str, Any], ...] = ()
    full_mask: bool = False
    layer_type: str = ""
    alibi: str = ""

    def cls(self, suffix: str) -> Any:
        return getattr(importlib.import_module(f"transformers.models.{self.module}.modeling_{self.module}"),
                       self.prefix + suffix)


LLAMA = Decoder("llama", "llama", "Llama", A.llama_config)
MISTRAL = Decoder("mistral", "mistral", "Mistral", A.mistral_config)
QWEN2 = Decoder("qwen2", "qwen2", "Qwen2", A.qwen2_config, A.qwen2_attention_weights)
NEOX = Decoder("gpt_neox", "gpt_neox", "GPTNeoX", A.neox_config, A.neox_attention_weights, A.neox_lm_weights,
               layer="Layer", layer_weights=A.neox_layer_weights)
GEMMA = Decoder("gemma", "gemma", "Gemma", A.gemma_config, lm_weights=A.gemma_lm_weights)
#: Gemma 2: Gemma's calls, its own config (caps, query scale, no sliding layers) and four norms per layer
GEMMA2 = Decoder("gemma2", "gemma2", "Gemma2", A.gemma2_config, lm_weights=A.gemma2_lm_weights, layer="DecoderLayer",
                 layer_weights=A.gemma2_layer_weights)
#: Gemma 2 9B's and 27B's query scale: Gemma 2 built with query_pre_attn_scalar = hidden_size / heads
GEMMA2_27B = Decoder("gemma2-27b", "gemma2", "Gemma2",
                     lambda h, attn, v: A.gemma2_config(h, attn, v, per_head_scale=True),
                     lm_weights=A.gemma2_lm_weights, layer="DecoderLayer", layer_weights=A.gemma2_layer_weights)
#: Gemma 3 (Gemma3ForCausalLM, Gemma3DecoderLayer, Gemma3Attention): Gemma 2's layout with QK-norm; a lone
#: layer or attention is built global ("full_attention") and takes that type's rotary table
GEMMA3 = Decoder("gemma3", "gemma3", "Gemma3", A.gemma3_config, A.qwen3_attention_weights, A.gemma2_lm_weights,
                 layer="DecoderLayer", layer_weights=A.gemma3_layer_weights,
                 layer_type="full_attention")
#: Gemma 3 27B's query scale and its global layers' linear RoPE scaling (factor 8): Gemma 3 built with
#: query_pre_attn_scalar = hidden_size / heads and rope_scaling {"rope_type": "linear", "factor": 8.0}
GEMMA3_27B = Decoder("gemma3-27b", "gemma3", "Gemma3", A.gemma3_27b_config, A.qwen3_attention_weights,
                     A.gemma2_lm_weights, layer="DecoderLayer", layer_weights=A.gemma3_layer_weights,
                     layer_type="full_attention")
QWEN3 = Decoder("qwen3", "qwen3", "Qwen3", A.qwen3_config, A.qwen3_attention_weights, layer="DecoderLayer",
                layer_weights=A.qwen3_layer_weights)
PHI3 = Decoder("phi3", "phi3", "Phi3", A.phi3_config, A.phi3_attention_weights, A.phi3_lm_weights,
               layer="DecoderLayer", layer_weights=A.phi3_layer_weights)
GPTJ = Decoder("gptj", "gptj", "GPTJ", A.gptj_config, A.gptj_attention_weights, A.gptj_lm_weights, layer="Block",
               layer_weights=A.gptj_layer_weights)
OPT = Decoder("opt", "opt", "OPT", A.opt_config, A.opt_attention_weights, A.opt_lm_weights, layer="DecoderLayer",
              layer_weights=A.opt_layer_weights, plain=True, pad_positions="real", rotary=False)
FALCON = Decoder("falcon", "falcon", "Falcon", A.falcon_config, A.falcon_attention_weights, A.falcon_lm_weights,
                 layer="DecoderLayer", layer_weights=A.falcon_layer_weights, extra=(("alibi", None),),
                 full_mask=True)
#: Falcon-7B: the old decoder architecture, one shared input_layernorm and one key/value head (multi_query)
FALCON7B = Decoder("falcon-7b", "falcon", "Falcon", A.falcon7b_config, A.falcon_attention_weights,
                   A.falcon7b_lm_weights, layer="DecoderLayer", layer_weights=A.falcon7b_layer_weights,
                   extra=(("alibi", None),), full_mask=True)
#: BLOOM: ALiBi instead of rotary, an embedding LayerNorm, the positions of its padded model's ALiBi counted
#: among the real tokens (build_alibi_tensor: (attention_mask.cumsum(-1) − 1)·attention_mask)
BLOOM = Decoder("bloom", "bloom", "Bloom", A.bloom_config, A.bloom_attention_weights, A.bloom_lm_weights,
                layer="Block", layer_weights=A.bloom_layer_weights, plain=True, pad_positions="real", rotary=False,
                alibi="bloom")
#: MPT: MPT's own ALiBi tensor (the same slopes, m_h·(t_z − ℓ_max + 1)), no biases, LayerNorms without β, no
#: embedding norm; its padded model's ALiBi on index distances (the mask does not reach the tensor)
MPT = Decoder("mpt", "mpt", "Mpt", A.mpt_config, A.mpt_attention_weights, A.mpt_lm_weights, layer="Block",
              layer_weights=A.mpt_layer_weights, plain=True, rotary=False, alibi="mpt")
QWEN2_WINDOWED = Decoder("qwen2-windowed", "qwen2", "Qwen2",
                         lambda h, attn, v: A.qwen2_config(h, attn, v, windowed=True), A.qwen2_attention_weights)


def _mask(config: Any, full: bool = False, boolean: bool = False, **kw: Any) -> Any:
    """The 4-D mask (or None) the family's ``<prefix>Model.forward`` builds for its first layer:
    ``create_sliding_window_causal_mask`` where that layer slides (Mistral: ``sliding_window`` set,
    MistralModel.forward; Qwen2: ``layer_types[0] == "sliding_attention"``, Qwen2Model.forward),
    ``create_causal_mask`` otherwise. Every layer of a config built here is of one kind. ``boolean``: as
    booleans, True where masked (MptModel.forward's ``.to(torch.bool)`` of the additive mask)."""
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    types = getattr(config, "layer_types", None)
    sliding = types[0] == "sliding_attention" if types else getattr(config, "sliding_window", None) is not None
    if full:  # FalconModel.forward: create_causal_mask(…, allow_is_causal_skip=False)
        kw["allow_is_causal_skip"] = False
    mask = (create_sliding_window_causal_mask if sliding else create_causal_mask)(config=config, **kw)
    return mask.to(torch.bool) if boolean and mask is not None else mask


def _llama_key(name: str, attn: str, hyper: Mapping[str, int], variant: Any) -> tuple:
    """``_key`` plus what a Llama config also takes: head_dim, the kv heads, ε and the RoPE base
    (``inv_freq`` is a buffer fixed at construction)."""
    return _key(name, attn, hyper) + (hyper.get("d_attn", 0), variant.kv_group, variant.epsilon, variant.rope_base,
                                      variant.rotary_fraction)


def _group(hyper: Mapping[str, int], variant: Any) -> int:
    """The query heads per key/value head the weights are laid out for: kv_group, or H under
    kv_heads="one" (multi-query attention: one kv head, ``kv_heads.0``, for any H; Falcon-7B)."""
    return hyper["H"] if variant.kv_heads == "one" else variant.kv_group


def llama_algorithms(attn: str, with_norm: bool) -> dict[str, Fn]:
    """LLaMA (``decoder_algorithms(LLAMA, …)``)."""
    return decoder_algorithms(LLAMA, attn, with_norm)


def decoder_algorithms(family: Decoder, attn: str, with_norm: bool) -> dict[str, Fn]:
    """A Llama-like family through ``<prefix>ForCausalLM`` (padded_d_transformer with an
    attention_mask, cached_decoding with a ``DynamicCache``) and ``<prefix>Attention``
    (padded_causal_self_attention) with ``attn_implementation=attn``; rms_norm is
    ``<prefix>RMSNorm`` (every norm of the model). The config follows the case's sizes and the
    declared set's ε, rope_base and kv_group (``family.config``); a window is the family's own
    (``adapter.MISTRAL_WINDOW``), never the declared one."""
    lm_key = family.name + "_lm"

    def configured(h: Mapping[str, int], v: Any, p: In, prefix: str = "") -> Any:
        """The family's config; under ``rope_factors="longrope"`` (Phi-3) with the call's LongRoPE factors
        (``<prefix>rope_ext``, ``<prefix>rope_mscale``: ``adapter.phi3_config``)."""
        if v.rope_factors == "longrope":
            return family.config(h, attn, v, longrope=A.longrope_of(p, prefix))  # type: ignore[call-arg]
        return family.config(h, attn, v)

    def key(name: str, h: Mapping[str, int], v: Any, p: In, prefix: str = "") -> tuple:
        """``_llama_key`` and, under LongRoPE, the factors and the list they are loaded into: the rotary
        embedding's ``inv_freq`` is a buffer fixed at construction from them."""
        longrope = (A.LONGROPE_LIST, A.longrope_of(p, prefix)) if v.rope_factors == "longrope" else ()
        return _llama_key(name, attn, h, v) + (repr(longrope),)

    def build_lm(h: Mapping[str, int], v: Any, ctx: Context, p: In) -> Any:
        return family.cls("ForCausalLM")._from_config(configured(h, v, p), dtype=_dtype(ctx))

    def lm_weights(p: In, h: Mapping[str, int], v: Any) -> dict[str, torch.Tensor]:
        return family.lm_weights(p, h["L"], h["H"], _group(h, v), family.attention_weights)

    def padded_d_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 with padding via ``<prefix>ForCausalLM(input_ids, attention_mask=pad).logits``:
        the 2-D mask a tokenizer returns (1 = token, 0 = padding), from which the model builds
        the causal (or sliding-window) ∧ padding mask of every layer; positions are the column
        indexes (the model's default position_ids, as the spec's), OPT's the real tokens before
        each column, which it counts from the same mask (``family.pad_positions``)."""
        h, v = ctx.hyper, ctx.variant
        A.check_tokens(i["x"], h)
        x = A.batch(i["x"], ctx.batched)  # (B, ℓ)
        mask = A.batch(i["pad"], ctx.batched).to(torch.long)  # (B, ℓ): 1 = a token, 0 = padding
        with A.loaded(key(lm_key, h, v, p), lambda: build_lm(h, v, ctx, p), lm_weights(p, h, v),
                      _dtype(ctx), ctx.device, cast=False) as lm:
            logits = lm(input_ids=x, attention_mask=mask, use_cache=False).logits  # (B, ℓ, N_V)
        return _probabilities(logits, ctx.batched)

    def d_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 via ``<prefix>ForCausalLM(input_ids).logits``, no attention mask (every token real):
        the model's own position_ids, 0 … ℓ−1 (OPT: ``cumsum`` of an all-ones mask, less 1)."""
        h, v = ctx.hyper, ctx.variant
        A.check_tokens(i["x"], h)
        x = A.batch(i["x"], ctx.batched)  # (B, ℓ)
        with A.loaded(key(lm_key, h, v, p), lambda: build_lm(h, v, ctx, p), lm_weights(p, h, v),
                      _dtype(ctx), ctx.device, cast=False) as lm:
            logits = lm(input_ids=x, use_cache=False).logits  # (B, ℓ, N_V)
        return _probabilities(logits, ctx.batched)

    def cached_decoding(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 as ``generate`` runs it: ``<prefix>ForCausalLM(x[:n], cache=DynamicCache)``
        fills the cache (the prefill), then each later token x[t] alone with that cache, its
        position t taken from the cache's length (the model's own position_ids). A batched
        call decodes each sequence on its own (each has its own n_prefill). Under a sliding
        window the cache is the config's (``DynamicCache(config=…)``: a DynamicSlidingWindowLayer
        keeping the last W − 1 keys), as ``generate`` makes it."""
        from transformers import DynamicCache

        h, v = ctx.hyper, ctx.variant
        A.check_tokens(i["x"], h)
        xs = A.batch(i["x"], ctx.batched)  # (B, ℓ)
        ns = A.batch(i["n_prefill"], ctx.batched).reshape(-1)  # (B,)
        ell = xs.shape[-1]
        out = []
        with A.loaded(key(lm_key, h, v, p), lambda: build_lm(h, v, ctx, p), lm_weights(p, h, v),
                      _dtype(ctx), ctx.device, cast=False) as lm:
            for x, n in zip(xs, ns.tolist()):
                if not 1 <= n <= ell:
                    raise ValueError(f"n_prefill: {n} tokens to prefill of a sequence of {ell}")
                x = x.unsqueeze(0)  # (1, ℓ)
                cache = DynamicCache(config=lm.config)
                logits = [lm(input_ids=x[:, :n], cache=cache, use_cache=True).logits]  # (1, n, N_V)
                for t in range(n, ell):
                    logits.append(lm(input_ids=x[:, t:t + 1], cache=cache, use_cache=True).logits)  # (1, 1, N_V)
                if cache.get_seq_length() != ell:
                    raise RuntimeError(f"hf adapter: the cache holds {cache.get_seq_length()} positions, not {ell}")
                out.append(torch.cat(logits, dim=1)[0])  # (ℓ, N_V)
        return _probabilities(torch.stack(out), True) if ctx.batched else _probabilities(out[0], True)

    def padded_causal_self_attention(i: In, p: In, ctx: Context) -> Any:
        """Alg. 5 with Mask = [[t_z ≤ t_x]] ∧ pad[t_z] (narrowed to the family's window, if any)
        via ``<prefix>Attention``, called as ``<prefix>Model.forward`` calls it: position
        embeddings (cos, sin) from ``<prefix>RotaryEmbedding`` at positions 0 … ℓ−1 and the mask
        from ``create_causal_mask`` or ``create_sliding_window_causal_mask`` (``_mask``) with
        the 2-D padding mask."""
        h, v = ctx.hyper, ctx.variant
        config = configured(h, v, p)
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ, d_e)
        pad = A.batch(i["pad"], ctx.batched).to(torch.long)  # (B, ℓ)
        positions = torch.arange(X.shape[1], device=X.device).unsqueeze(0)  # (1, ℓ)
        with A.loaded(key(family.name + "_attention", h, v, p),
                      lambda: family.cls("Attention")(config, layer_idx=0),
                      family.attention_weights(p, h["H"], _group(h, v)), _dtype(ctx), ctx.device) as attention:
            mask = _mask(config, family.full_mask, family.alibi == "mpt", inputs_embeds=X, attention_mask=pad,
                         cache=None, position_ids=positions)
            residual = {"residual": torch.zeros_like(X)} if family.alibi == "bloom" else {}  # BloomAttention adds it
            Y, _ = attention(X, attention_mask=mask, **dict(family.extra), **_positions(config, X, positions),
                             **residual)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    def rms_norm(i: In, p: In, ctx: Context) -> Any:
        """RMSnorm via ``<prefix>RMSNorm(d_e, eps=ε)``, the norm of every layer and the final one."""
        d_e, eps = ctx.hyper["d_e"], ctx.variant.epsilon
        with A.loaded((family.name + "_rms_norm", eps, d_e), lambda: family.cls("RMSNorm")(d_e, eps=eps),
                      {"weight": p["gamma"]}, _dtype(ctx), ctx.device) as norm:
            return A.rows_to_cols(norm(A.cols_to_rows(i["X"])))  # (…, ℓ, d_e) → (…, d_e, ℓ)

    def gpt2_layer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 lines 5-8 via ``<prefix><layer>`` (GPTNeoXLayer), called as the model calls it:
        position embeddings from ``<prefix>RotaryEmbedding`` at 0 … ℓ−1 and the mask from
        ``create_causal_mask`` with no padding (sdpa: None, its is_causal)."""
        assert family.layer_weights is not None
        h, v = ctx.hyper, ctx.variant
        config = configured(h, v, p, "attn.")
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ, d_e)
        positions = torch.arange(X.shape[1], device=X.device).unsqueeze(0)  # (1, ℓ)
        with A.loaded(key(family.name + "_layer", h, v, p, "attn."),
                      lambda: family.cls(family.layer)(config, layer_idx=0),
                      family.layer_weights(p, h["H"], _group(h, v)), _dtype(ctx), ctx.device) as layer:
            mask = _mask(config, family.full_mask, family.alibi == "mpt", inputs_embeds=X, attention_mask=None,
                         cache=None, position_ids=positions)
            Y = layer(X, attention_mask=mask, **dict(family.extra), **_positions(config, X, positions))
            Y = Y[0] if isinstance(Y, tuple) else Y  # (B, ℓ, d_e)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    def _positions(config: Any, X: torch.Tensor, positions: torch.Tensor) -> dict[str, Any]:
        """What ``<prefix>Model.forward`` hands a layer for its positions: the (cos, sin) of
        ``<prefix>RotaryEmbedding`` at 0 … ℓ−1 (GPT-J's (sin, cos), which GPTJAttention unpacks in
        that order), built outside the module cache in float32 as the library makes it; BLOOM's ALiBi
        tensor (``Decoder.alibi``) in the call's dtype, as BloomModel casts it, MPT's in float32, as MptModel
        leaves it; nothing where the family has neither."""
        if family.alibi == "bloom":
            from transformers.models.bloom.modeling_bloom import build_alibi_tensor

            real = torch.ones(X.shape[:2], dtype=torch.long, device=X.device)  # (B, ℓ): no padding, t_z = index
            return {"alibi": build_alibi_tensor(real, config.n_head, X.dtype)}  # (B·H, 1, ℓ)
        if family.alibi == "mpt":
            from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

            return {"position_bias": build_mpt_alibi_tensor(config.n_heads, config.max_seq_len, device=X.device)}
        if not family.rotary:
            return {}
        rotary = family.cls("RotaryEmbedding")(config).to(device=X.device)
        layer_type = (family.layer_type,) if family.layer_type else ()
        return {"position_embeddings": rotary(X, positions, *layer_type)}

    out: dict[str, Fn] = {"padded_d_transformer": padded_d_transformer, "cached_decoding": cached_decoding}
    if not family.padded:
        out = {"d_transformer": d_transformer, "cached_decoding": cached_decoding}
    elif family.plain:
        out["d_transformer"] = d_transformer
    out["padded_causal_self_attention"] = padded_causal_self_attention
    if family.layer:
        out["gpt2_layer"] = gpt2_layer
    if with_norm:
        out["rms_norm"] = rms_norm
    return out
