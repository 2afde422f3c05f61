"""Hugging Face transformers' BART and Marian (MarianMT) as implementations of the encoder-decoder entries
(plugins ``transformers-bart`` and ``transformers-marian``).

Boundary only: a tiny ``BartConfig`` / ``MarianConfig`` from the case's sizes, ftspec's parameters loaded into
the library's own modules (``adapter.loaded``), layout (tokens as rows); nothing is downloaded and the
mathematics is the library's. Written against transformers 5.24.0 with torch 2.13.0, reading
models/bart/modeling_bart.py and models/marian/modeling_marian.py (``BartAttention`` / ``MarianAttention``:
``self.scaling = self.head_dim**-0.5`` passed to ``eager_attention_forward``, which multiplies the scores
``matmul(query, key.T) * scaling``: scale_placement "scores"; q/k/v/out_proj ``nn.Linear(bias=True)``;
``BartEncoderLayer`` / ``BartDecoderLayer`` and the Marian twins: the residual added, then
``self_attn_layer_norm`` / ``encoder_attn_layer_norm`` / ``final_layer_norm``, ``nn.LayerNorm`` at its default
eps 1e-5: post-LN, no ``normalize_before`` in either module; ``activation_fn = ACT2FN[config.activation_function]``,
activations.py ``"gelu"`` = GELUActivation (erf), ``"swish"`` = nn.SiLU; ``BartLearnedPositionalEmbedding``
(its ids offset by 2: row t + 2 is position t), ``BartEncoder.layernorm_embedding`` and ``BartDecoder``'s
(embedding_norm), ``BartScaledWordEmbedding`` with ``embed_scale`` 1 (``scale_embedding`` False);
``MarianSinusoidalPositionalEmbedding`` (a frozen ``nn.Embedding``), ``MarianEncoder.embed_scale`` √d_model
under ``scale_embedding``, no embedding LayerNorm; ``BartForConditionalGeneration`` / ``MarianMTModel``:
``lm_head`` tied to ``model.shared`` and ``lm_logits + final_logits_bias`` (a buffer: logit_bias)) and
configuration_bart.py / configuration_marian.py (defaults).

Entries (both plugins): ``encoder_layer`` (Algorithm 8 lines 5-8: ``BartEncoderLayer(X, attention_mask=None)``,
what ``BartEncoder`` passes for an unpadded source), ``decoder_layer`` (lines 14-19: ``BartDecoderLayer`` with the
causal mask as ``create_causal_mask`` gives eager attention, finfo(dtype).min above the diagonal, and the
encoder output as ``encoder_hidden_states`` with no mask), ``ed_transformer`` (Algorithm 8:
``BartForConditionalGeneration(input_ids=z, decoder_input_ids=x, use_cache=False).logits``, softmax over the
vocabulary). BART's encoder and decoder position tables are two parameters (``ed_positions="separate"``): the
encoder's loaded from W_p, the decoder's from W_p_dec (rows 2.., rows 0 and 1 zero: the offset is a
reparametrisation). Marian's are the library's own: each is
``MarianSinusoidalPositionalEmbedding.create_weight()`` (what ``_init_weights`` copies in), sin | cos in
halves, ``positions="sinusoidal_halves"`` (spec 2.15; not ``sinusoidal_vaswani``'s interleaved rows).
``create_weight`` computes in float64 NumPy but stores through ``torch.FloatTensor``: the table is
float32 whatever the model's dtype, so Marian's model is not declared at float64 (``DTYPES_MARIAN``).

Declared sets: BART the preset ``hf-bart`` for its layers, ``hf-bart+ed_positions=separate`` for its model
(``VARIANT_BART_MODEL``); Marian ``VARIANT_MARIAN`` = hf-bart+activation=silu,
embedding_norm=False,embedding_scale=sqrt_d_e,positions=sinusoidal_halves, the released Helsinki-NLP/opus-mt-*
checkpoints' config (activation_function "swish", scale_embedding true; MarianConfig's own defaults, "gelu" and
False, are BART's activation and no scale) with the library's own sinusoid. Not a preset of its own: its 28
fixture cases would pass the fixtures' size bound (spec/variants.py, docs/spec.md).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
import transformers
from torch import Tensor

from ftspec.impls.api import Context, Implementation, Limits
from ftspec.spec.variants import VariantSet, preset

from .._torch_boundary import devices, from_numpy, to_numpy
from . import adapter as A

__all__ = ["VARIANT_BART", "VARIANT_BART_MODEL", "VARIANT_MARIAN", "implementation_bart", "implementation_marian"]

In = Mapping[str, Tensor]

#: BART (BartConfig defaults, transformers 5.24): the preset
VARIANT_BART: VariantSet = preset("hf-bart")
#: ... and its model: BartEncoder and BartDecoder each learn their own ``embed_positions``
#: (``ed_positions="separate"``, listed by the model alone; the preset keeps its hash)
VARIANT_BART_MODEL: VariantSet = VARIANT_BART.replace(ed_positions="separate")
#: MarianMT as released (opus-mt config.json: activation_function "swish", scale_embedding true): no embedding
#: LayerNorm (MarianEncoder has no layernorm_embedding), the token embedding times √d_model, and the fixed
#: sinusoid of MarianSinusoidalPositionalEmbedding in halves
VARIANT_MARIAN: VariantSet = VARIANT_BART.replace(activation="silu", embedding_norm=False,
                                                  embedding_scale="sqrt_d_e", positions="sinusoidal_halves")

#: float64, float32 and bfloat16: nn.LayerNorm, nn.Linear and eager attention compute in the tensors' dtype
#: (no upcast in these modules; the float64 cells pass at float64's bounds); float16 is not declared (not
#: certified here; BartEncoderLayer alone clamps a non-finite float16 output)
DTYPES = ("float64", "float32", "bfloat16")
#: Marian's model: create_weight stores its sinusoid through torch.FloatTensor, so a float64 MarianMTModel's
#: positions are float32-rounded (errors ~1e-8, far above float64's bounds); its layers hold no table
DTYPES_MARIAN = {"ed_transformer": ("float32", "bfloat16")}

_TIED = (("d_attn", "d_mid"), ("d_e", "H*d_attn"))  # BartAttention: head_dim = embed_dim // num_heads


def _config(family: str, h: Mapping[str, int], variant: VariantSet) -> Any:
    """A tiny BartConfig / MarianConfig: d_model = d_e, heads H, ffn d_mlp, layers L_enc/L_dec (1 where the
    entry has none), max_position_embeddings ℓ_max (ℓ where the entry has none), activation from the declared
    set (``gelu`` erf, ``swish`` SiLU, ``gelu_new`` tanh: the last only for the wrong-declaration tests), dropout
    off, no special token ids (their defaults lie outside a tiny vocabulary), eager attention."""
    act = {"gelu_erf": "gelu", "silu": "swish", "gelu_tanh": "gelu_new", "relu": "relu"}[
        variant.resolved_activation("ed_encoder")]
    kw = dict(vocab_size=h.get("N_V", 1), d_model=h["d_e"], encoder_layers=h.get("L_enc", 1),
              decoder_layers=h.get("L_dec", 1), encoder_attention_heads=h["H"], decoder_attention_heads=h["H"],
              encoder_ffn_dim=h["d_mlp"], decoder_ffn_dim=h["d_mlp"],
              max_position_embeddings=h.get("ell_max", max(h.get("ell_x", 1), h.get("ell_z", 1), h.get("ell", 1))),
              dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, activation_function=act,
              scale_embedding=variant.embedding_scale == "sqrt_d_e", pad_token_id=None, bos_token_id=None,
              eos_token_id=None, forced_eos_token_id=None, decoder_start_token_id=0, attn_implementation="eager")
    if family == "bart":
        return transformers.BartConfig(**kw)
    return transformers.MarianConfig(**kw)


def _attention_weights(p: In, H: int, src: str, dst: str) -> dict[str, Tensor]:
    out = {}
    for mine, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj")):
        out[f"{dst}{theirs}.weight"] = A.pack_heads(p, src, f"W_{mine}", H)  # (H·d_attn, d_e), head 0 first
        out[f"{dst}{theirs}.bias"] = A.pack_heads(p, src, f"b_{mine}", H)
    return out | {f"{dst}out_proj.weight": p[src + "W_o"], f"{dst}out_proj.bias": p[src + "b_o"]}


def _norm(p: In, gamma: str, beta: str, dst: str) -> dict[str, Tensor]:
    return {dst + "weight": p[gamma], dst + "bias": p[beta]}


def encoder_layer_weights(p: In, H: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One BartEncoderLayer / MarianEncoderLayer: self_attn (attn.), self_attn_layer_norm γ¹/β¹, fc1/fc2
    (W_mlp1, W_mlp2), final_layer_norm γ²/β²."""
    return (_attention_weights(p, H, src + "attn.", dst + "self_attn.")
            | _norm(p, src + "gamma1", src + "beta1", dst + "self_attn_layer_norm.")
            | {dst + "fc1.weight": p[src + "W_mlp1"], dst + "fc1.bias": p[src + "b_mlp1"],
               dst + "fc2.weight": p[src + "W_mlp2"], dst + "fc2.bias": p[src + "b_mlp2"]}
            | _norm(p, src + "gamma2", src + "beta2", dst + "final_layer_norm."))


def decoder_layer_weights(p: In, H: int, src: str = "", dst: str = "") -> dict[str, Tensor]:
    """One BartDecoderLayer / MarianDecoderLayer: self_attn γ³/β³, encoder_attn (cross_attn.) γ⁴/β⁴, fc1/fc2
    (W_mlp3, W_mlp4), final_layer_norm γ⁵/β⁵."""
    return (_attention_weights(p, H, src + "self_attn.", dst + "self_attn.")
            | _norm(p, src + "gamma3", src + "beta3", dst + "self_attn_layer_norm.")
            | _attention_weights(p, H, src + "cross_attn.", dst + "encoder_attn.")
            | _norm(p, src + "gamma4", src + "beta4", dst + "encoder_attn_layer_norm.")
            | {dst + "fc1.weight": p[src + "W_mlp3"], dst + "fc1.bias": p[src + "b_mlp3"],
               dst + "fc2.weight": p[src + "W_mlp4"], dst + "fc2.bias": p[src + "b_mlp4"]}
            | _norm(p, src + "gamma5", src + "beta5", dst + "final_layer_norm."))


def _marian_table(h: Mapping[str, int]) -> Tensor:
    """Marian's own position table (ℓ_max, d_e): ``create_weight``, which ``_init_weights`` copies into each
    stack's ``embed_positions`` (a parameter, so ``adapter.load`` must be handed it)."""
    cls = transformers.models.marian.modeling_marian.MarianSinusoidalPositionalEmbedding
    return cls(h["ell_max"], h["d_e"]).create_weight()


def model_weights(family: str, p: In, h: Mapping[str, int], variant: VariantSet) -> dict[str, Tensor]:
    """BartForConditionalGeneration / MarianMTModel: ``model.shared`` = W_eᵀ (the encoder's and decoder's
    embed_tokens and lm_head are that tensor), the encoder's and decoder's position tables (BART's from W_pᵀ
    and, under ed_positions="separate", W_p_decᵀ, each after 2 offset rows; Marian's its own sinusoid whatever
    the declaration), the embedding LayerNorms (BART), the layers.
    final_logits_bias is a buffer: loaded by the caller."""
    if family == "bart":
        def offset(W_p: Tensor) -> Tensor:  # (ℓ_max + 2, d_e): W_pᵀ after BART's 2 offset rows (never read)
            rows = W_p.T  # (ℓ_max, d_e)
            return torch.cat([torch.zeros_like(rows[:1]).expand(2, -1), rows])
        # two tables, as BartEncoder and BartDecoder each hold one: the target's is W_p_dec under "separate"
        enc = offset(p["W_p"])
        dec = offset(p["W_p_dec"]) if variant.ed_positions == "separate" else enc
    else:
        enc = dec = _marian_table(h)  # (ℓ_max, d_e), float32
    out = {"model.shared.weight": p["W_e"].T, "model.encoder.embed_positions.weight": enc,
           "model.decoder.embed_positions.weight": dec}
    if variant.embedding_norm:
        out |= _norm(p, "gamma_emb_enc", "beta_emb_enc", "model.encoder.layernorm_embedding.")
        out |= _norm(p, "gamma_emb_dec", "beta_emb_dec", "model.decoder.layernorm_embedding.")
    for l in range(h["L_enc"]):
        out |= encoder_layer_weights(p, h["H"], f"enc_layers.{l}.", f"model.encoder.layers.{l}.")
    for l in range(h["L_dec"]):
        out |= decoder_layer_weights(p, h["H"], f"dec_layers.{l}.", f"model.decoder.layers.{l}.")
    return out


def _causal_mask(ell: int, x: Tensor) -> Tensor:
    """Additive, finfo.min above the diagonal: (1, 1, ℓ, ℓ) [query, key] (``create_causal_mask``'s eager one)."""
    above = torch.ones(ell, ell, dtype=torch.bool, device=x.device).triu(1)
    mask = torch.zeros(ell, ell, dtype=x.dtype, device=x.device)
    return mask.masked_fill(above, torch.finfo(x.dtype).min)[None, None]


def _key(name: str, h: Mapping[str, int], variant: VariantSet) -> tuple:
    return (name, variant.hash) + tuple(h.get(k, 0) for k in ("N_V", "ell_max", "L_enc", "L_dec", "H", "d_e", "d_mlp"))


def _entries(family: str) -> dict[str, Callable[[In, In, Context], Any]]:
    mod = transformers.models.bart.modeling_bart if family == "bart" else transformers.models.marian.modeling_marian
    prefix = "Bart" if family == "bart" else "Marian"
    enc_cls, dec_cls = getattr(mod, prefix + "EncoderLayer"), getattr(mod, prefix + "DecoderLayer")
    model_cls = transformers.BartForConditionalGeneration if family == "bart" else transformers.MarianMTModel

    def encoder_layer(i: In, p: In, ctx: Context) -> Any:
        h, v, dtype = ctx.hyper, ctx.variant, getattr(torch, ctx.dtype)
        X = A.batch(A.cols_to_rows(i["Z"]), ctx.batched)  # (B, ℓ, d_e)
        with A.loaded(_key("encoder_layer", h, v), lambda: enc_cls(_config(family, h, v), layer_idx=0),
                      encoder_layer_weights(p, h["H"]), dtype, ctx.device) as layer:
            Y = layer(X, attention_mask=None)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    def decoder_layer(i: In, p: In, ctx: Context) -> Any:
        h, v, dtype = ctx.hyper, ctx.variant, getattr(torch, ctx.dtype)
        X = A.batch(A.cols_to_rows(i["X"]), ctx.batched)  # (B, ℓ_x, d_e)
        Z = A.batch(A.cols_to_rows(i["Z"]), ctx.batched)  # (B, ℓ_z, d_e)
        with A.loaded(_key("decoder_layer", h, v), lambda: dec_cls(_config(family, h, v), layer_idx=0),
                      decoder_layer_weights(p, h["H"]), dtype, ctx.device) as layer:
            Y = layer(X, attention_mask=_causal_mask(X.shape[1], X), encoder_hidden_states=Z,
                      encoder_attention_mask=None, cache=None, use_cache=False)
        return A.rows_to_cols(A.unbatch(Y, ctx.batched))

    def ed_transformer(i: In, p: In, ctx: Context) -> Any:
        h, v, dtype = ctx.hyper, ctx.variant, getattr(torch, ctx.dtype)
        A.check_tokens(i["z"], h)
        A.check_tokens(i["x"], h)
        z, x = A.batch(i["z"], ctx.batched), A.batch(i["x"], ctx.batched)  # (B, ℓ_z), (B, ℓ_x)
        with A.loaded(_key("ed_transformer", h, v), lambda: model_cls(_config(family, h, v)),
                      model_weights(family, p, h, v), dtype, ctx.device) as model:
            model.final_logits_bias.copy_(p["b_u"][None].to(model.final_logits_bias.dtype))
            logits = model(input_ids=z, decoder_input_ids=x, use_cache=False).logits  # (B, ℓ_x, N_V)
        return A.rows_to_cols(A.unbatch(torch.softmax(logits, dim=-1), ctx.batched))

    return {"encoder_layer": encoder_layer, "decoder_layer": decoder_layer, "ed_transformer": ed_transformer}


def _make(name: str, family: str, variant: VariantSet, dtypes_by_algorithm: Any = None,
          model_variant: VariantSet | None = None) -> Implementation:
    """``model_variant``: the model's set where it reads more than the layers' (BART's two position tables)."""
    model_variant = model_variant or variant
    algorithms = _entries(family)
    cls = "BartForConditionalGeneration, BartEncoderLayer, BartDecoderLayer" if family == "bart" else \
        "MarianMTModel, MarianEncoderLayer, MarianDecoderLayer"
    return Implementation(
        name=name,
        version=f"transformers{transformers.__version__}+torch{torch.__version__}",
        algorithms=algorithms,
        dtypes=DTYPES,
        devices=devices,
        from_numpy=from_numpy,
        to_numpy=to_numpy,
        variants={a: [model_variant if a == "ed_transformer" else variant] for a in algorithms},
        precision="highest",
        description=f"Hugging Face {cls}, attn_implementation='eager'",
        extra={"transformers": transformers.__version__, "torch": torch.__version__, "attn_implementation": "eager"},
        limits={a: Limits(equal=_TIED) for a in algorithms},
        dtypes_by_algorithm=dict(dtypes_by_algorithm or {}),
    )


implementation_bart = _make("transformers-bart", "bart", VARIANT_BART, model_variant=VARIANT_BART_MODEL)
implementation_marian = _make("transformers-marian", "marian", VARIANT_MARIAN, DTYPES_MARIAN)
