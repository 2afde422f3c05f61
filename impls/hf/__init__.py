"""Hugging Face transformers as an implementation (plugins ``transformers``,
``transformers-sdpa``, ``transformers-bert``, ``transformers-bert-sdpa``, and per family
``transformers-mistral``, ``-qwen2``, ``-qwen2-window``, ``-gpt-neox``, ``-gemma``, ``-qwen3``,
``-phi3``, ``-gpt-j``, ``-opt``, ``-falcon``, ``-gemma3``, each with ``-sdpa``, and ``-gemma2``, ``-bloom`` and
``-mpt``, eager only).

Boundary only: tiny configs built from the case's sizes, ftspec's parameters
loaded into the library's own modules, layout and head packing
(``adapter``); nothing is downloaded and the maths is the library's. Written
against transformers 5.24.0 with torch 2.13.0, reading
models/gpt2/modeling_gpt2.py (GPT2Attention, GPT2MLP, GPT2Block, GPT2Model,
GPT2LMHeadModel), models/bert/modeling_bert.py (BertEmbeddings,
BertSelfAttention, BertLayer, BertLMPredictionHead, BertForMaskedLM),
models/llama/modeling_llama.py (LlamaRMSNorm, LlamaRotaryEmbedding,
apply_rotary_pos_emb, LlamaMLP, repeat_kv, eager_attention_forward,
LlamaAttention, LlamaDecoderLayer, LlamaModel, LlamaForCausalLM),
models/gpt2/configuration_gpt2.py, models/bert/configuration_bert.py and
models/llama/configuration_llama.py (defaults), cache_utils.py
(DynamicCache), masking_utils.py (create_causal_mask, sdpa_mask,
eager_mask), integrations/
sdpa_attention.py (sdpa_attention_forward), activations.py (gelu_new is
the tanh GELU, gelu the erf one) and pytorch_utils.py (Conv1D stores W
transposed).

One plugin holds the three models: variant sets are declared per algorithm
(``Implementation.variants`` as a mapping), so GPT-2's entries are searched,
replayed and certified under ``hf-gpt2``, BERT's under ``hf-bert`` and
Llama's under ``llama`` and ``llama`` with kv_group = 1, in one
certificate. The registry has one ``layer_norm``, and GPT-2's LayerNorm
(ε 1e-5) and BERT's (ε 1e-12) are two configurations of it: the merged
plugins keep GPT-2's; BERT's is certified by ``transformers-bert``.

``transformers``            GPT2LMHeadModel (d_transformer), GPT2Block
                            (gpt2_layer), nn.LayerNorm at GPT-2's ε
                            (layer_norm), under hf-gpt2; BertForMaskedLM
                            (e_transformer, padded_e_transformer), BertLayer
                            (bert_layer), BertSelfAttention
                            (padded_self_attention), under hf-bert (the
                            padded ones with empty_query="uniform");
                            LlamaForCausalLM (padded_d_transformer,
                            cached_decoding), LlamaAttention
                            (padded_causal_self_attention), LlamaRMSNorm
                            (rms_norm), under the Llama sets;
                            attn_implementation="eager".
``transformers-sdpa``       the same models, attn_implementation="sdpa" (no
                            layer_norm or rms_norm: they have no attention);
                            the padded BERT and Llama entries with
                            empty_query="zeros".
``transformers-bert``       BERT alone, as before the merge (kept so that
                            scripts naming it still run): e_transformer,
                            bert_layer, the two padded BERT entries and
                            nn.LayerNorm at BERT's ε; eager.
``transformers-bert-sdpa``  BERT alone with "sdpa" (the same less layer_norm).

``transformers-mistral``     MistralForCausalLM (padded_d_transformer, cached_decoding),
                            MistralAttention (padded_causal_self_attention) with
                            sliding_window = ``adapter.MISTRAL_WINDOW``, under
                            llama+window=2 with kv_group 2 and 1.
``transformers-qwen2``       Qwen2ForCausalLM, Qwen2Attention: llama+attn_bias=True,
                            attn_bias_at=qkv, kv_group 2 and 1.
``transformers-qwen2-window`` the same with use_sliding_window on every layer
                            (max_window_layers = 0), window=2 declared.
``transformers-gpt-neox``    GPTNeoXForCausalLM, GPTNeoXAttention, GPTNeoXLayer
                            (gpt2_layer): the gpt-neox preset.
``transformers-gemma``       GemmaForCausalLM, GemmaAttention: gemma+kv_group=2 and gemma;
                            d_e free of H·d_attn (Gemma's own head_dim).
``transformers-gemma2``      Gemma2ForCausalLM, Gemma2Attention, Gemma2DecoderLayer (gpt2_layer):
                            gemma+norm_placement=sandwich,attn_softcap=50.0,logit_softcap=30.0,
                            kv_group 2 and 1 (the caps Gemma2Config's defaults; query_pre_attn_scalar
                            = head_dim; the models with sliding_window MISTRAL_WINDOW and the library's
                            layer_types, sliding and full in turn: +window=2,global_every=2; the lone layer
                            and attention full, as a global layer; d_e = H·d_attn, as Llama's: Gemma2Config
                            refuses a hidden_size that H does not divide). Eager only: Gemma2PreTrainedModel's
                            _supports_sdpa is False ("sdpa does not support softcapping"), and
                            sdpa_attention_forward refuses a softcap.
``transformers-gemma2-27b``  the same classes built with Gemma 2 9B's and 27B's query scale,
                            query_pre_attn_scalar = hidden_size / num_attention_heads: the same sets with
                            attn_scale=sqrt_d_model_per_head; d_e free of H·d_attn (a multiple of 12, H ≤ 4:
                            ``GEMMA2_27B_LIMITS``), so that d_e/H and d_attn differ. Eager only.
``transformers-gemma3``      Gemma3ForCausalLM (padded_d_transformer, cached_decoding), Gemma3Attention
                            (padded_causal_self_attention), Gemma3DecoderLayer (gpt2_layer):
                            gemma+norm_placement=sandwich,qk_norm=rms,rope_base=1000000.0, kv_group 2 and 1
                            (Gemma3RMSNorm's 1 + w in every norm and the QK-norm;
                            query_pre_attn_scalar = head_dim; no caps; the models with sliding_window
                            MISTRAL_WINDOW and sliding_window_pattern GEMMA3_GLOBAL_EVERY, the library's
                            layer_types from it, the bases default_theta's, 1e6 global and 10000 local:
                            +window=2,global_every=2,rope_local_base=10000.0; the lone layer full, a global
                            one; the attention too, spec 2.12). With an ``-sdpa`` twin
                            (Gemma3PreTrainedModel._supports_sdpa; no softcap for sdpa to refuse).
``transformers-gemma3-27b``  the same classes built as the released 27B: query_pre_attn_scalar =
                            hidden_size / num_attention_heads (168 = 5376/32) and rope_scaling linear,
                            factor 8 (in the full-attention layers alone): the same sets with
                            attn_scale=sqrt_d_model_per_head,rope_scaling=linear-8, d_e free of H·d_attn
                            (``GEMMA2_27B_LIMITS``). Eager only.
``transformers-qwen3``       Qwen3ForCausalLM (padded_d_transformer, cached_decoding), Qwen3Attention
                            (padded_causal_self_attention: the causal self-attention entries read
                            QK-norm since spec 2.12), Qwen3DecoderLayer (gpt2_layer):
                            llama+qk_norm=rms,rope_base=1e6, kv_group 2 and 1.
``transformers-phi3``        Phi3ForCausalLM, Phi3Attention, Phi3DecoderLayer (gpt2_layer):
                            llama+epsilon=1e-5, kv_group 2 and 1 (fused qkv_proj, gate_up_proj), and
                            the 128k models' LongRoPE at kv_group 1 (rope_factors=longrope, spec 2.17:
                            the drawn factors in the config's long_factor, adapter.phi3_config).
``transformers-gpt-j``       GPTJForCausalLM, GPTJAttention, GPTJBlock (gpt2_layer): gpt-neox+
                            residual=parallel_shared,activation=gelu_tanh,rotary=interleaved,
                            attn_bias=False,logit_bias=True (rotary_dim = head_dim / 4).
``transformers-opt``         OPTForCausalLM (d_transformer, cached_decoding, and padded_d_transformer
                            under pad_positions=real: its positions under padding are counted among the
                            real tokens), OPTAttention, OPTDecoderLayer (gpt2_layer): hf-gpt2+activation=relu,
                            scale_placement=query; its sdpa twin also at float64 (FLOAT64_SDPA).
``transformers-falcon``      FalconForCausalLM, FalconAttention, FalconDecoderLayer (gpt2_layer), the new
                            decoder architecture with two norms: nanogpt+residual=parallel,attn_bias=False,
                            mlp_bias=False,positions=none,rotary=half,empty_query=uniform, kv_group 2 and 1.
``transformers-falcon-7b``   FalconForCausalLM, FalconAttention, FalconDecoderLayer in the old architecture
                            (FalconConfig's defaults, Falcon-7B: multi_query, one input_layernorm):
                            nanogpt+residual=parallel_shared,attn_bias=False,mlp_bias=False,positions=none,
                            rotary=half,empty_query=uniform,kv_heads=one (one key/value head at every H:
                            multi-query attention; H drawn freely).
``transformers-bloom``       BloomForCausalLM (d_transformer, cached_decoding, and padded_d_transformer under
                            pad_positions=real: build_alibi_tensor counts its ALiBi positions among the real
                            tokens), BloomAttention (padded_causal_self_attention), BloomBlock (gpt2_layer): the
                            bloom preset (pre-LN, an embedding LayerNorm, biases everywhere, tanh GELU, ALiBi, tied
                            lm_head, empty_query=uniform); d_mlp = 4·d_e (BloomMLP's width is hard-coded). The lone
                            layer and attention are given the ALiBi tensor BloomModel builds without padding
                            (m_h·t_z, index positions). Eager only: BloomPreTrainedModel leaves _supports_sdpa
                            False and BloomAttention has one path (baddbmm, softmax in float32).
``transformers-mpt``         MptForCausalLM (d_transformer, padded_d_transformer, cached_decoding), MptAttention,
                            MptBlock (gpt2_layer): bloom+affine=scale,attn_bias=False,mlp_bias=False,
                            activation=gelu_erf,embedding_norm=False (no biases, LayerNorms without β, exact GELU,
                            no embedding norm; build_mpt_alibi_tensor's m_h·(t_z − ℓ_max + 1), the same slopes;
                            its padded model on index distances: the mask does not reach the tensor);
                            d_mlp = 4·d_e. Eager only (MptPreTrainedModel has no sdpa either).
Each of these but BLOOM and MPT with an ``-sdpa`` twin (padded entries under empty_query="zeros"), with Llama's
per-algorithm dtypes (``LLAMA_DTYPES``; models/gpt_neox and models/gemma compute RoPE's cos/sin
and eager softmax in float32, GemmaRMSNorm in float32, as Llama does). The families are plugins
of their own, not more variant sets in ``transformers``: a plugin maps each entry name to one
function, and a family choosing its library class from the declared set would let a declaration
change what runs. For the same reason the conventions a family fixes (Mistral's window, GPT-NeoX's
rotary fraction, Qwen2's biases, Gemma's gain and embedding scale) are the library's, never read
from the declared set; sizes (kv heads, widths) and ε and the RoPE base are, as for Llama. Read
in models/{mistral,qwen2,gpt_neox,gemma,gemma2,gemma3,qwen3,phi3,gptj,opt,falcon,bloom,mpt}/modeling_*.py and
configuration_*.py,
masking_utils.py
(create_sliding_window_causal_mask, sliding_window_overlay) and cache_utils.py
(DynamicSlidingWindowLayer), transformers 5.24.0.

GPT-2 alone is ``ftspec certify transformers --algorithm d_transformer
--algorithm gpt2_layer --algorithm layer_norm`` (a ``partial`` verdict: it
selects part of what the plugin declares).

Both attention paths scale the scores (eager: ``matmul(q, kᵀ) * scaling``;
sdpa: torch's CPU flash kernel, which ``torch._fused_sdp_choice`` picks for
these inputs, multiplies q·kᵀ by the scale), so eager and sdpa share the
GPT-2 and BERT presets unchanged; those leave ``empty_query`` and
``causal_alignment`` at the paper's values: their entries have no Mask
input or unequal lengths. The padded entries do leave a query with no key
(BERT: a fully padded sequence; Llama: left padding), and the two paths
answer it differently (measured, docs/libraries.md "Hugging Face
transformers" and "Llama"): eager adds ``finfo(dtype).min`` to the masked
scores, so they are equal and the weights uniform (``empty_query="uniform"``,
the ``llama`` preset; hf-bert with it for BERT); sdpa hands torch a boolean
mask and its CPU kernel gives zero weights (``"zeros"``). BERT's eager
softmax runs in the model's dtype, so only float16 is lost there
(``BERT_DTYPES``, below).

Llama's dtypes: LlamaRMSNorm casts its input to float32, LlamaRotaryEmbedding
computes cos/sin in float32 and eager attention's softmax runs in float32,
whatever the model's dtype, so a float64 Llama is float32-accurate (errors
~1e-8, six to seven orders above float64's bounds), and eager float64
turns an empty query's ``finfo(float64).min`` scores into -inf (NaN
weights). In float16, eager's ``s + finfo(float16).min`` keeps the scores
of an empty query equal only while |s| < 16 (ulp(65504) = 32): larger
logits make the weights non-uniform or NaN. ``LLAMA_DTYPES`` holds the
dtypes at which the Llama entries compute what the spec states, declared
per algorithm (``Implementation.dtypes_by_algorithm``): their cells run at
those dtypes only, and the certificate records it.

Shape limits: the libraries tie d_attn = d_mid (one head_dim) and d_e =
H·d_attn (hidden_size split over the heads; LlamaConfig takes a head_dim of
its own but still refuses a hidden_size that H does not divide, so Llama
keeps the same ties); BERT's head transform is
hidden_size × hidden_size, so d_f = d_e (which ``unembedding="tied"``
requires anyway). ℓ ≤ ℓ_max = n_positions is the spec's own check.

Threads and precision as in the ``torch`` plugin: one intra-op thread
(``FTSPEC_TORCH_THREADS``), float32 matmul precision "highest".
"""

from __future__ import annotations

from typing import Any

import torch
import transformers

from ftspec.impls.api import Implementation, Limits
from ftspec.spec.variants import preset

from .._torch_boundary import configure, devices, from_numpy, to_numpy
from .adapter import GEMMA2_ATTN_SOFTCAP, GEMMA2_LOGIT_SOFTCAP, GEMMA3_GLOBAL_EVERY, GPTJ_ROTARY_SHARE, MISTRAL_WINDOW
from .entries import (BLOOM, FALCON, FALCON7B, GEMMA, GEMMA2, GEMMA2_27B, GEMMA3, GEMMA3_27B, GPTJ, MISTRAL, MPT, NEOX,
                      OPT, PHI3, QWEN2, QWEN2_WINDOWED, QWEN3, Decoder, bert_algorithms, decoder_algorithms,
                      gpt2_algorithms, llama_algorithms)

__all__ = ["implementation", "implementation_sdpa", "implementation_bert", "implementation_bert_sdpa",
           "VARIANT_GPT2", "VARIANT_BERT", "VARIANT_LLAMA", "LLAMA_EAGER", "LLAMA_SDPA", "GPT2_LIMITS",
           "BERT_LIMITS", "BERT_PADDED", "BERT_DTYPES", "LLAMA_LIMITS", "LLAMA_DTYPES", "VARIANT_MISTRAL",
           "VARIANT_QWEN2", "FAMILY_SETS", "implementation_mistral", "implementation_mistral_sdpa",
           "implementation_qwen2", "implementation_qwen2_sdpa", "implementation_qwen2_window",
           "implementation_qwen2_window_sdpa", "VARIANT_NEOX", "implementation_gpt_neox",
           "implementation_gpt_neox_sdpa", "VARIANT_GEMMA", "GEMMA_LIMITS", "implementation_gemma",
           "implementation_gemma_sdpa", "VARIANT_QWEN3", "VARIANT_PHI3", "VARIANT_PHI3_LONGROPE",
           "VARIANT_GPTJ", "VARIANT_OPT",
           "implementation_qwen3", "implementation_qwen3_sdpa", "implementation_phi3", "implementation_phi3_sdpa",
           "implementation_gpt_j", "implementation_gpt_j_sdpa", "implementation_opt", "implementation_opt_sdpa",
           "VARIANT_FALCON", "implementation_falcon", "implementation_falcon_sdpa", "VARIANT_GEMMA2",
           "implementation_gemma2", "VARIANT_GEMMA3", "FAMILY_MODEL_SETS", "implementation_gemma3",
           "implementation_gemma3_sdpa", "VARIANT_GEMMA2_27B", "GEMMA2_27B_LIMITS",
           "implementation_gemma2_27b", "VARIANT_GEMMA3_27B", "implementation_gemma3_27b",
           "VARIANT_FALCON7B", "FALCON7B_LIMITS", "implementation_falcon_7b", "VARIANT_BLOOM", "BLOOM_LIMITS",
           "implementation_bloom", "VARIANT_MPT", "implementation_mpt",
           "implementation_falcon_7b_sdpa"]

configure()  # one intra-op thread, float32 matmuls at "highest" (_torch_boundary.py)

#: GPT-2 and BERT run on CPU in all four real dtypes, eager and sdpa (Llama: ``LLAMA_DTYPES``; checked
#: with transformers 5.24.0, torch 2.13.0; tests/impls/test_hf.py).
_REAL = ("float64", "float32", "bfloat16", "float16")

#: GPT-2: gelu_new (tanh), LayerNorm ε 1e-5 inside the root, pre-LN with a
#: final LN, lm_head tied to wte, no logit bias (``lm_head`` has bias=False).
VARIANT_GPT2 = preset("hf-gpt2")
#: BERT: erf GELU, ε 1e-12, post-LN, LayerNorm after the embeddings, decoder
#: tied to the word embeddings with a bias of its own.
VARIANT_BERT = preset("hf-bert")

_TIED = (("d_attn", "d_mid"), ("d_e", "H*d_attn"))
GPT2_LIMITS = {"d_transformer": Limits(equal=_TIED), "gpt2_layer": Limits(equal=_TIED)}
BERT_LIMITS = {"e_transformer": Limits(equal=_TIED + (("d_f", "d_e"),)), "bert_layer": Limits(equal=_TIED),
               "padded_e_transformer": Limits(equal=_TIED + (("d_f", "d_e"),)),
               "padded_self_attention": Limits(equal=_TIED)}
#: BERT's padded entries (padded_e_transformer, padded_self_attention): a fully padded sequence
#: leaves every query with no key, and the two paths answer differently (measured with
#: transformers 5.24.0, torch 2.13.0; docs/libraries.md "Hugging Face transformers"): eager adds
#: finfo(dtype).min to every score, so they are equal and the weights uniform; sdpa passes a
#: boolean mask and torch's CPU kernel gives zero weights.
BERT_PADDED = {"eager": VARIANT_BERT.replace(empty_query="uniform"),
               "sdpa": VARIANT_BERT.replace(empty_query="zeros")}
BERT_PADDED_ENTRIES = ("padded_e_transformer", "padded_self_attention")
#: The dtypes at which BERT's padded entries compute what the spec states, per path: eager not at
#: float16 (s + finfo(float16).min stays -65504 only while |s| < 16, so an empty query's weights
#: are not uniform, or NaN, under larger scores); sdpa's zeros are exact at every dtype.
BERT_DTYPES: dict[str, dict[str, tuple[str, ...]]] = {
    "eager": {a: ("float64", "float32", "bfloat16") for a in BERT_PADDED_ENTRIES},
    "sdpa": {a: _REAL for a in BERT_PADDED_ENTRIES},
}

#: Llama (LlamaConfig defaults: rms_norm_eps 1e-6, SwiGLU, rotate_half RoPE at base 10000, no
#: biases, a separate lm_head), grouped (kv_group = 2: presets fix no size) and with one key/value head per
#: query head (LlamaConfig's default num_key_value_heads = H). Eager attention gives a query with
#: no key uniform weights (masked scores are the dtype's minimum); sdpa gives it zeros (torch's
#: CPU kernel): the padded entries are declared under each path's own rule.
VARIANT_LLAMA = preset("llama").replace(kv_group=2)
LLAMA_EAGER = (VARIANT_LLAMA, VARIANT_LLAMA.replace(kv_group=1))
LLAMA_SDPA = tuple(v.replace(empty_query="zeros") for v in LLAMA_EAGER)
LLAMA_LIMITS = {"padded_d_transformer": Limits(equal=_TIED), "cached_decoding": Limits(equal=_TIED),
                "padded_causal_self_attention": Limits(equal=_TIED)}
#: The dtypes at which the Llama entries compute what the spec states, per attention path
#: (measured with transformers 5.24.0, torch 2.13.0; docs/libraries.md "Llama"): never float64
#: (float32 norm, RoPE and eager softmax inside), and eager's padded entries not at float16 (an
#: empty query's min-filled scores stay equal only for |scores| < 16). Not yet enforced: the plugin
#: API declares one ``dtypes`` for every algorithm (see the module docstring).
LLAMA_DTYPES: dict[str, dict[str, tuple[str, ...]]] = {
    "eager": {"padded_d_transformer": ("float32", "bfloat16"), "padded_causal_self_attention": ("float32", "bfloat16"),
              "cached_decoding": ("float32", "bfloat16", "float16"), "rms_norm": ("float32", "bfloat16", "float16")},
    "sdpa": {"padded_d_transformer": ("float32", "bfloat16", "float16"),
             "padded_causal_self_attention": ("float32", "bfloat16", "float16"),
             "cached_decoding": ("float32", "bfloat16", "float16")},
}


def _make(name: str, algorithms: Any, variants: Any, limits: Any, attn: str, model: str,
          dtypes_by_algorithm: Any = None) -> Implementation:
    return Implementation(
        name=name,
        version=f"transformers{transformers.__version__}+torch{torch.__version__}",
        algorithms=algorithms,
        dtypes=_REAL,
        devices=devices,
        from_numpy=from_numpy,
        to_numpy=to_numpy,
        variants=variants,
        precision="highest",
        description=f"Hugging Face {model}, attn_implementation={attn!r}",
        extra={"transformers": transformers.__version__, "torch": torch.__version__,
               "attn_implementation": attn},
        limits=limits,
        dtypes_by_algorithm=dict(dtypes_by_algorithm or {}),
    )


def _merged(name: str, attn: str) -> Implementation:
    """GPT-2, BERT and Llama in one plugin: each entry under its own model's preset (layer_norm:
    GPT-2's, rms_norm: Llama's, with eager only). cached_decoding reads no empty_query: it is
    declared under the eager sets in both paths."""
    gpt2 = gpt2_algorithms(attn, with_norm=attn == "eager")
    bert = bert_algorithms(attn, with_norm=False)
    llama = llama_algorithms(attn, with_norm=attn == "eager")
    padded = LLAMA_EAGER if attn == "eager" else LLAMA_SDPA
    variants = {**{a: [VARIANT_GPT2] for a in gpt2}, **_bert_variants(bert, attn),
                **{a: list(padded if a.startswith("padded_") else LLAMA_EAGER) for a in llama}}
    if "rms_norm" in llama:
        variants["rms_norm"] = [VARIANT_LLAMA]  # reads ε and affine only: one set
    return _make(name, {**gpt2, **bert, **llama}, variants, {**GPT2_LIMITS, **BERT_LIMITS, **LLAMA_LIMITS}, attn,
                 "GPT2LMHeadModel, GPT2Block, BertForMaskedLM, BertLayer, BertSelfAttention, LlamaForCausalLM, "
                 "LlamaAttention",
                 {**BERT_DTYPES[attn], **{a: d for a, d in LLAMA_DTYPES[attn].items() if a in llama}})


def _bert_variants(bert: Any, attn: str) -> dict[str, list]:
    """hf-bert for every BERT entry; the padded ones with the path's ``empty_query``."""
    return {a: [BERT_PADDED[attn] if a in BERT_PADDED_ENTRIES else VARIANT_BERT] for a in bert}


def _bert(name: str, attn: str, with_norm: bool) -> Implementation:
    """BERT alone (``transformers-bert``, ``transformers-bert-sdpa``)."""
    bert = bert_algorithms(attn, with_norm=with_norm)
    return _make(name, bert, _bert_variants(bert, attn), BERT_LIMITS, attn,
                 "BertForMaskedLM, BertLayer, BertSelfAttention", BERT_DTYPES[attn])


implementation = _merged("transformers", "eager")
implementation_sdpa = _merged("transformers-sdpa", "sdpa")
implementation_bert = _bert("transformers-bert", "eager", with_norm=True)
implementation_bert_sdpa = _bert("transformers-bert-sdpa", "sdpa", with_norm=False)


#: Mistral (MistralConfig defaults as Llama's: rms_norm_eps 1e-6, SwiGLU, rotate_half RoPE at base
#: 10000, no biases, separate lm_head) with its sliding window: the plugin builds every config
#: with sliding_window = MISTRAL_WINDOW and declares the same W (adapter.MISTRAL_WINDOW: HF's
#: sliding_window W is the spec's window W, masking_utils.sliding_window_overlay, transformers 5.24).
VARIANT_MISTRAL = VARIANT_LLAMA.replace(window=MISTRAL_WINDOW)
#: Qwen2 (Qwen2Config defaults as Llama's: rms_norm_eps 1e-6, SwiGLU, rotate_half RoPE at base
#: 10000, separate lm_head) with biases on q_proj, k_proj, v_proj and none on o_proj or the MLP
#: (Qwen2Attention.__init__, Qwen2MLP.__init__): attn_bias with attn_bias_at = "qkv".
VARIANT_QWEN2 = VARIANT_LLAMA.replace(attn_bias=True, attn_bias_at="qkv")
#: GPT-NeoX (GPTNeoXConfig defaults): the ``gpt-neox`` preset (parallel residual from two
#: LayerNorms, partial rotary 0.25, biases everywhere, exact GELU, eps 1e-5). One set: the model
#: has no grouped kv heads.
VARIANT_NEOX = preset("gpt-neox")
#: Gemma (GemmaConfig defaults): the ``gemma`` preset (gains 1 + γ, embeddings × √d_e, GeGLU with
#: tanh GELU, tied unembedding), grouped (kv_group = 2) and not.
VARIANT_GEMMA = preset("gemma").replace(kv_group=2)
#: Gemma 2's layer (Gemma2Config defaults, the layer built full: a global one): docs/spec.md's Gemma 2 2B,
#: gemma+norm_placement=sandwich,attn_softcap=50.0,logit_softcap=30.0 (its four RMSNorms per layer,
#: Gemma2DecoderLayer; the caps of eager_attention_forward and Gemma2ForCausalLM.forward; the query scale
#: query_pre_attn_scalar = head_dim, the paper's 1/√d_attn), grouped (kv_group = 2) and not.
VARIANT_GEMMA2 = VARIANT_GEMMA.replace(norm_placement="sandwich", attn_softcap=GEMMA2_ATTN_SOFTCAP,
                                       logit_softcap=GEMMA2_LOGIT_SOFTCAP)
#: Gemma 2 9B's and 27B's query scale (their configs' query_pre_attn_scalar = hidden_size / num_attention_heads,
#: 3584/16 and 4608/32, where head_dim is 256 and 128): docs/spec.md's Gemma 2 27B, VARIANT_GEMMA2 with
#: attn_scale=sqrt_d_model_per_head (the plugin builds that scalar, adapter.gemma2_config(per_head_scale=True)).
VARIANT_GEMMA2_27B = VARIANT_GEMMA2.replace(attn_scale="sqrt_d_model_per_head")
#: Gemma 3's layer (Gemma3TextConfig, transformers 5.24, the layer built full: a global one): docs/spec.md's
#: Gemma 3 less its layer pattern, gemma+norm_placement=sandwich,qk_norm=rms,rope_base=1000000.0 (Gemma3DecoderLayer's
#: four norms; Gemma3Attention's q_norm, k_norm = Gemma3RMSNorm(head_dim), gain 1 + w, before
#: apply_rotary_pos_emb; the global layers' base, default_theta["global"]; no soft caps; the query scale
#: query_pre_attn_scalar = head_dim, 1/√d_attn), grouped (kv_group = 2) and not.
VARIANT_GEMMA3 = VARIANT_GEMMA.replace(norm_placement="sandwich", qk_norm="rms", rope_base=1000000.0)
#: Gemma 3 27B (its released config: query_pre_attn_scalar 168 = 5376/32 with head_dim 128, rope_scaling
#: {"rope_type": "linear", "factor": 8.0}, the latter also 4B's and 12B's): VARIANT_GEMMA3 with
#: attn_scale=sqrt_d_model_per_head and rope_scaling=linear-8 (the plugin builds both, adapter.gemma3_27b_config;
#: the factor reaches the full-attention layers alone, as the spec's linear-8 under rope_local_base > 0).
VARIANT_GEMMA3_27B = VARIANT_GEMMA3.replace(attn_scale="sqrt_d_model_per_head", rope_scaling="linear-8")
#: Gemma's head width is its own (head_dim): only d_attn = d_mid is tied, d_e is free of H·d_attn.
GEMMA_LIMITS = {a: Limits(equal=(("d_attn", "d_mid"),)) for a in LLAMA_LIMITS}
#: Qwen3 (Qwen3Config defaults, transformers 5.24): the Llama layer with QK-norm (Qwen3Attention's
#: q_norm, k_norm = Qwen3RMSNorm(head_dim, eps=rms_norm_eps) of each head's q and k before
#: apply_rotary_pos_emb) at the released checkpoints' RoPE base 1e6 (read into the config, as Llama's
#: base is): docs/spec.md's llama+qk_norm=rms,rope_base=1000000.0, grouped (kv_group = 2) and not.
VARIANT_QWEN3 = VARIANT_LLAMA.replace(qk_norm="rms", rope_base=1000000.0)
#: Phi-3 (Phi3Config defaults): the Llama layer (SwiGLU through the fused gate_up_proj, rotate_half RoPE
#: over the whole head, no biases, a separate lm_head) at Phi3Config's rms_norm_eps 1e-5 (Llama's is
#: 1e-6; read into the config as for Llama), grouped and not (Phi-3-medium: 40 heads, 10 kv heads).
VARIANT_PHI3 = VARIANT_LLAMA.replace(epsilon=1e-5)
#: Phi-3's and Phi-3.5's 128k models (Phi-3-mini-128k-instruct, Phi-3.5-mini-instruct: 32 heads, 32 kv heads):
#: rope_scaling {"type": "longrope", "short_factor", "long_factor"}, the spec's rope_factors="longrope" (spec 2.17)
#: with the factors and the attention factor drawn as parameters (adapter.phi3_config loads them)
VARIANT_PHI3_LONGROPE = VARIANT_PHI3.replace(kv_group=1, rope_factors="longrope")
#: GPT-J (GPTJConfig defaults): docs/spec.md's gpt-neox+residual=parallel_shared,activation=gelu_tanh,
#: rotary=interleaved,attn_bias=False,logit_bias=True: one ln_1 feeding attention and MLP in parallel
#: (GPTJBlock.forward: attn_output + feed_forward_hidden_states + residual), gelu_new, adjacent pairs
#: (rotate_every_two) on the first quarter of each head (adapter.GPTJ_ROTARY_SHARE) at base 10000, no
#: attention biases, MLP biases, an untied lm_head with a bias. One set: no grouped kv heads.
VARIANT_GPTJ = preset("gpt-neox").replace(residual="parallel_shared", activation="gelu_tanh", rotary="interleaved",
                                          attn_bias=False, logit_bias=True)
#: OPT (OPTConfig defaults, OPT-125m … 175B; not 350m's post-LN): GPT-2's layer (pre-LN LayerNorms with
#: γ, β at nn.LayerNorm's eps 1e-5, a final LayerNorm, biases everywhere, learned positions, lm_head tied
#: to embed_tokens) with ReLU and the 1/√d scale on the query (OPTAttention.forward:
#: ``q_proj(hidden_states) * self.scaling``, then scaling=1.0 to the attention: scale_placement
#: "query"); masked scores are the dtype's minimum (uniform weights for a query with no key). One set.
VARIANT_OPT = preset("hf-gpt2").replace(activation="relu", scale_placement="query", empty_query="uniform")
#: Falcon, new decoder architecture with two norms (Falcon-40B/180B: FalconDecoderLayer's ln_attn and
#: ln_mlp, attention and MLP in parallel from the same input, ``mlp_output += attention_output`` then the
#: residual): docs/spec.md's Falcon with residual=parallel, i.e. nanogpt+residual=parallel,attn_bias=False,
#: mlp_bias=False,positions=none,rotary=half,empty_query=uniform (bias False everywhere, exact GELU,
#: LayerNorm eps 1e-5, ln_f, tied lm_head, rotate_half RoPE), grouped (kv_group = 2) and not.
VARIANT_FALCON = preset("nanogpt").replace(residual="parallel", attn_bias=False, mlp_bias=False, positions="none",
                                           rotary="half", empty_query="uniform", kv_group=2)
#: Falcon-7B (FalconConfig's defaults: the old decoder architecture, parallel_attn, multi_query): docs/spec.md's
#: Falcon-7B, nanogpt+residual=parallel_shared,attn_bias=False,mlp_bias=False,positions=none,rotary=half,
#: empty_query=uniform,kv_heads=one (one input_layernorm for attention and MLP; one key/value head for every H:
#: multi-query attention, a convention where kv_group is a size, so H is drawn freely).
VARIANT_FALCON7B = VARIANT_FALCON.replace(residual="parallel_shared", kv_group=1, kv_heads="one")
#: Falcon-7B's sizes: Llama's ties (FalconAttention: head_dim = hidden_size / num_heads).
FALCON7B_LIMITS = Limits(equal=_TIED)
#: BLOOM (BloomConfig's defaults, transformers 5.24): the ``bloom`` preset, whose comment in spec/variants.py reads
#: it from models/bloom/modeling_bloom.py (pre-LN LayerNorms ε 1e-5, word_embeddings_layernorm, ln_f, biases on
#: query_key_value, dense and both MLP maps, bloom_gelu_forward's tanh GELU, ALiBi added by
#: ``alibi.baddbmm(Q, Kᵀ, alpha=1/√head_dim)``, lm_head tied, masked scores at the dtype's minimum). One set:
#: no grouped kv heads. Its padded model: +pad_positions=real (``Decoder.pad_positions``).
VARIANT_BLOOM = preset("bloom")
#: BLOOM's sizes: Llama's ties (BloomAttention: head_dim = hidden_size / n_head, refused otherwise) and the MLP's
#: 4·hidden_size (BloomMLP: ``nn.Linear(hidden_size, 4 * hidden_size)``, no config field).
BLOOM_LIMITS = Limits(equal=_TIED + (("d_mlp", "4*d_e"),))
#: MPT (MptConfig's defaults, transformers 5.24): docs/spec.md's bloom+affine=scale,attn_bias=False,mlp_bias=False,
#: activation=gelu_erf,embedding_norm=False (no_bias: every Linear without one; norm_1, norm_2, norm_f with their
#: bias removed; MptMLP's nn.GELU(approximate="none"); no embedding norm; build_mpt_alibi_tensor added after
#: softmax_scale = 1/√head_dim; wte tied to lm_head; masked_fill of finfo.min: uniform weights for a query with
#: no key). One set; its padded model on index distances (the preset's pad_positions).
VARIANT_MPT = VARIANT_BLOOM.replace(affine="scale", attn_bias=False, mlp_bias=False, activation="gelu_erf",
                                    embedding_norm=False)
#: Each family's eager sets (grouped, kv_group = 2, and one kv head per query head); sdpa's padded
#: entries take empty_query = "zeros" as Llama's do.
FAMILY_SETS: dict[str, tuple[Any, ...]] = {
    "mistral": (VARIANT_MISTRAL, VARIANT_MISTRAL.replace(kv_group=1)),
    "qwen2": (VARIANT_QWEN2, VARIANT_QWEN2.replace(kv_group=1)),
    "qwen2-windowed": (VARIANT_QWEN2.replace(window=MISTRAL_WINDOW),
                       VARIANT_QWEN2.replace(kv_group=1, window=MISTRAL_WINDOW)),
    "gpt_neox": (VARIANT_NEOX,),
    "gemma": (VARIANT_GEMMA, VARIANT_GEMMA.replace(kv_group=1)),
    "gemma2": (VARIANT_GEMMA2, VARIANT_GEMMA2.replace(kv_group=1)),
    "gemma2-27b": (VARIANT_GEMMA2_27B, VARIANT_GEMMA2_27B.replace(kv_group=1)),
    "gemma3": (VARIANT_GEMMA3, VARIANT_GEMMA3.replace(kv_group=1)),
    "gemma3-27b": (VARIANT_GEMMA3_27B, VARIANT_GEMMA3_27B.replace(kv_group=1)),
    "qwen3": (VARIANT_QWEN3, VARIANT_QWEN3.replace(kv_group=1)),
    "phi3": (VARIANT_PHI3, VARIANT_PHI3.replace(kv_group=1), VARIANT_PHI3_LONGROPE),
    "gptj": (VARIANT_GPTJ,),
    "opt": (VARIANT_OPT,),
    "falcon": (VARIANT_FALCON, VARIANT_FALCON.replace(kv_group=1)),
    "falcon-7b": (VARIANT_FALCON7B,),
    "bloom": (VARIANT_BLOOM,),
    "mpt": (VARIANT_MPT,),
}
#: Each family's sets for its whole models, where they differ from its layers' (``FAMILY_SETS``): Gemma 2's
#: Gemma2ForCausalLM keeps Gemma2Config's layer_types, a sliding layer 0 and full and sliding layers in
#: turn (transformers 5.24: "sliding_attention" if bool((i + 1) % 2) else "full_attention"), with the
#: plugin's sliding_window (adapter.gemma2_config): docs/spec.md's Gemma 2 with window=MISTRAL_WINDOW,
#: global_every=2. Its lone layer and attention are built full, as a global layer. Gemma 3's
#: Gemma3ForCausalLM: the layer types the library derives from sliding_window_pattern =
#: adapter.GEMMA3_GLOBAL_EVERY (layer 0 sliding, layer 1 full, layer 2 sliding), the sliding layers at
#: default_theta["local"] 10000 and the full ones at 1e6: docs/spec.md's Gemma 3 with window=MISTRAL_WINDOW,
#: global_every=GEMMA3_GLOBAL_EVERY (Gemma 3's own 6 is the same rule; L ≤ 3 is drawn). Gemma 3 27B's the same
#: (its linear-8 scaling in the full layers alone: the spec leaves a local layer under rope_local_base unscaled).
FAMILY_MODEL_SETS: dict[str, tuple[Any, ...]] = {
    "gemma2": tuple(v.replace(window=MISTRAL_WINDOW, global_every=2) for v in FAMILY_SETS["gemma2"]),
    "gemma2-27b": tuple(v.replace(window=MISTRAL_WINDOW, global_every=2) for v in FAMILY_SETS["gemma2-27b"]),
    **{f: tuple(v.replace(window=MISTRAL_WINDOW, global_every=GEMMA3_GLOBAL_EVERY, rope_local_base=10000.0)
                for v in FAMILY_SETS[f]) for f in ("gemma3", "gemma3-27b")},
}
#: the whole models a family's plugin runs (the rest of its entries are a layer or its attention)
_MODELS = frozenset({"d_transformer", "padded_d_transformer", "cached_decoding"})


#: The families whose sdpa path computes in float64 at float64 (measured with transformers 5.24.0,
#: torch 2.13.0; docs/libraries.md "Qwen3, Phi-3, GPT-J and OPT"): OPT, which has no RoPE table and no
#: float32 norm; its eager path does not (``eager_attention_forward``: ``softmax(…, dtype=torch.float32)``,
#: errors ~5e-8 at float64). The others compute RoPE's cos/sin in float32 (GPT-J's
#: ``create_sinusoidal_positions`` table; Qwen3's and Phi-3's inv_freq), GPT-J's eager scores in float32
#: (``query.to(torch.float32)``), Qwen3's and Phi-3's RMSNorm in float32.
FLOAT64_SDPA = frozenset({OPT.name})


#: Gemma 2 27B's sizes: its d_e/H must differ from d_attn for the per-head scale to show (the 27B's 4608/32 =
#: 144 against head_dim 128), so d_e is free of H·d_attn; Gemma2Config still refuses a hidden_size the heads do
#: not divide, which no limit states for every H: the heads are at most 4 (the strategies' most, 2·kv_group)
#: and d_e a multiple of 12, which 1, 2, 3 and 4 all divide.
GEMMA2_27B_LIMITS = Limits(equal=(("d_attn", "d_mid"),), maximum={"H": 4}, multiple_of={"d_e": 12})


def _family_limits(family: Decoder) -> Limits:
    """The sizes a family's config can take: Llama's ties, except a head width of its own (Gemma's and
    Qwen3's head_dim: only d_attn = d_mid; not Gemma 2's or 3's: Gemma2Config's and Gemma3TextConfig's
    validate_architecture refuse a hidden_size that the heads do not divide, which no limit can state for
    every H, so Llama's ties hold there), and GPT-J's rotary_dim = head_dim / 4 even (d_attn a multiple of
    8; at an odd rotary_dim ``apply_rotary_pos_emb`` fails on the shapes)."""
    equal = (("d_attn", "d_mid"),) if family.name in (GEMMA.name, QWEN3.name) else _TIED
    multiple = {"d_attn": 2 * GPTJ_ROTARY_SHARE} if family.name == GPTJ.name else {}
    if family.name in (GEMMA2_27B.name, GEMMA3_27B.name):  # Gemma3TextConfig refuses the same hidden sizes
        return GEMMA2_27B_LIMITS
    if family.name == FALCON7B.name:
        return FALCON7B_LIMITS
    if family.name in (BLOOM.name, MPT.name):  # MptMLP is 4·hidden_size wide too
        return BLOOM_LIMITS
    return Limits(equal=equal, multiple_of=multiple)


def _family(name: str, family: Decoder, attn: str) -> Implementation:
    """One Llama-like family in a plugin of its own (``transformers-<family>``, ``…-sdpa``): its
    entries have the names Llama's have, and a plugin maps each name to one function, so a family
    cannot join the merged plugin without the declared set choosing the library class (which would
    let a declaration change what is run). Per-algorithm variant sets and dtypes as Llama's."""
    algorithms = decoder_algorithms(family, attn, with_norm=False)  # norms: inside the whole model
    variants = {}
    for a in algorithms:
        eager = FAMILY_MODEL_SETS.get(family.name, FAMILY_SETS[family.name]) if a in _MODELS else \
            FAMILY_SETS[family.name]
        padded = eager if attn == "eager" else tuple(v.replace(empty_query="zeros") for v in eager)
        variants[a] = list(padded if a.startswith("padded_") else eager)
        if a == "padded_d_transformer" and family.pad_positions != "index":  # OPT: positions among the real tokens
            variants[a] = [v.replace(pad_positions=family.pad_positions) for v in variants[a]]
    limits = {a: _family_limits(family) for a in algorithms}
    # the entries without padding (gpt2_layer, d_transformer) leave no query without a key: cached_decoding's
    dtypes = {a: LLAMA_DTYPES[attn].get(a, LLAMA_DTYPES[attn]["cached_decoding"]) for a in algorithms}
    if attn == "sdpa" and family.name in FLOAT64_SDPA:
        dtypes = {a: ("float64",) + d for a, d in dtypes.items()}
    classes = ", ".join(f"{family.prefix}{c}" for c in ("ForCausalLM", "Attention", family.layer) if c)
    return _make(name, algorithms, variants, limits, attn, classes, dtypes)


implementation_mistral = _family("transformers-mistral", MISTRAL, "eager")
implementation_mistral_sdpa = _family("transformers-mistral-sdpa", MISTRAL, "sdpa")
implementation_qwen2 = _family("transformers-qwen2", QWEN2, "eager")
implementation_qwen2_sdpa = _family("transformers-qwen2-sdpa", QWEN2, "sdpa")
implementation_qwen2_window = _family("transformers-qwen2-window", QWEN2_WINDOWED, "eager")
implementation_qwen2_window_sdpa = _family("transformers-qwen2-window-sdpa", QWEN2_WINDOWED, "sdpa")
implementation_gpt_neox = _family("transformers-gpt-neox", NEOX, "eager")
implementation_gpt_neox_sdpa = _family("transformers-gpt-neox-sdpa", NEOX, "sdpa")
implementation_gemma = _family("transformers-gemma", GEMMA, "eager")
implementation_gemma_sdpa = _family("transformers-gemma-sdpa", GEMMA, "sdpa")
implementation_gemma2 = _family("transformers-gemma2", GEMMA2, "eager")  # no sdpa: the library refuses it
implementation_gemma2_27b = _family("transformers-gemma2-27b", GEMMA2_27B, "eager")  # eager only, as Gemma 2
implementation_gemma3 = _family("transformers-gemma3", GEMMA3, "eager")
implementation_gemma3_sdpa = _family("transformers-gemma3-sdpa", GEMMA3, "sdpa")
implementation_gemma3_27b = _family("transformers-gemma3-27b", GEMMA3_27B, "eager")
implementation_qwen3 = _family("transformers-qwen3", QWEN3, "eager")
implementation_qwen3_sdpa = _family("transformers-qwen3-sdpa", QWEN3, "sdpa")
implementation_phi3 = _family("transformers-phi3", PHI3, "eager")
implementation_phi3_sdpa = _family("transformers-phi3-sdpa", PHI3, "sdpa")
implementation_gpt_j = _family("transformers-gpt-j", GPTJ, "eager")
implementation_gpt_j_sdpa = _family("transformers-gpt-j-sdpa", GPTJ, "sdpa")
implementation_opt = _family("transformers-opt", OPT, "eager")
implementation_opt_sdpa = _family("transformers-opt-sdpa", OPT, "sdpa")
implementation_falcon = _family("transformers-falcon", FALCON, "eager")
implementation_falcon_sdpa = _family("transformers-falcon-sdpa", FALCON, "sdpa")
implementation_falcon_7b = _family("transformers-falcon-7b", FALCON7B, "eager")
implementation_falcon_7b_sdpa = _family("transformers-falcon-7b-sdpa", FALCON7B, "sdpa")
#: no sdpa twin: BloomPreTrainedModel keeps PreTrainedModel's _supports_sdpa = False, and BloomAttention has
#: one path whatever attn_implementation says
implementation_bloom = _family("transformers-bloom", BLOOM, "eager")
#: no sdpa twin: MptPreTrainedModel has no _supports_sdpa either, and MptAttention one path
implementation_mpt = _family("transformers-mpt", MPT, "eager")
