"""Registry entries of the forward algorithms: Algorithms 1-10, the layers,
RMSnorm, both sinusoids, the unidirectional mask, the layers' self-attention
on its own (bidirectional and causal), and the encoder read as a next-token
predictor (the whole model of seeds 000 and 002)."""

from __future__ import annotations

from typing import Any, Callable

from . import params as P
from .architectures import d_transformer, e_transformer, ed_transformer, next_token_encoder
from .attention import attention, basic_single_query_attention, bidirectional_mask, mh_attention, unidirectional_mask
from .embedding import embed, positional_embedding, sinusoidal_paper, sinusoidal_vaswani, token_embedding
from .entry import (
    ARCHITECTURE,
    ATTENTION,
    BASIC_ATTENTION,
    CAUSAL,
    MH_ATTENTION,
    LAYER_TYPES,
    PARALLEL,
    ED_HEAD,
    ED_POSITIONS,
    ED_POSITIONS_READ_WITH,
    PAD_POSITIONS,
    EMBEDDING,
    LAYER,
    MOE,
    NORM_LN,
    QK_NORM,
    QK_NORM_READ_WITH,
    REL_BIAS,
    REL_BIAS_READ_WITH,
    ROPE_FACTORS,
    ROPE_FACTORS_READ_WITH,
    Entry,
    Hyper,
    Kind,
    TensorSpec,
    all_of,
    d_schema,
    e_schema,
    ed_schema,
    next_token_schema,
    no_params,
    norm_dims,
    sequences_fit,
    tied_needs,
)
from .layers import bert_layer, decoder_layer, encoder_layer, gpt2_layer, padded
from .linalg import shape
from .normalization import norm_columns
from .params import Shape
from .moe import moe_mlp, moe_params, moe_schema, top_k_fits
from .rotary import rope_schema
from .refusals import Refusal, Refused, empty_padding, empty_query, narrow_norm, router_tie, too_long, zero_variance
from .unembedding import unembed, unembedding_matrix
from .variants import VariantSet

__all__ = ["ENTRIES"]

#: the refusals of the entries whose embedding feeds a norm: positions that add a fixed sinusoid
#: leave no column that a transform can make constant exactly
_DATA_POSITIONS = (("positions", ("learned", "none")),)
_LAYER_NORM = (("norm", ("layer_norm",)),)


def _unembedding_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    s = P.unembedding_schema(v)
    if v.unembedding == "tied":
        s = {"W_e": ("d_e", "N_V"), **s}
    return s


def _self_attention(causal: bool) -> Callable[[Any, Any, Hyper, VariantSet], dict[str, Any]]:
    """The reference of ``self_attention`` / ``causal_self_attention`` (and their ``padded_``
    forms): Algorithm 5 with Z = X and the Mask a layer builds from ℓ alone, as the layers do
    (spec/layers.py): Mask ≡ 1 (Alg. 8 line 5, Alg. 9 line 5) or Mask[t_z, t_x] = [[t_z ≤ t_x]]
    (Alg. 8 line 14, Alg. 10 line 6), with padding positions masked as keys when ``pad`` is given."""
    def reference(i: Any, p: Any, h: Hyper, v: VariantSet) -> dict[str, Any]:
        X = i["X"]  # (d_e, ℓ): the sequence and its own context
        _, ell = shape(X)
        Mask = unidirectional_mask(ell, ell, variant=v) if causal else bidirectional_mask(ell, ell)  # (ℓ, ℓ) [t_z, t_x]
        Mask = padded(Mask, i.get("pad"), v)
        return {"V_tilde": mh_attention(X, X, P.from_flat(P.MHAttentionParams, p), Mask, variant=v,
                                        causal_self=causal)}
    return reference


def _self_attention_schema(h: Hyper, v: VariantSet) -> dict[str, Shape]:
    """A layer's ``attn.*`` names without the prefix: d_x = d_z = d_out = d_e; T5's bias table rel_bias
    (rel_buckets × H) last under rel_bias="t5_buckets" (spec 2.13: every other set's parameters as before)."""
    return P.mh_attention_schema(h["H"], v.attn_bias, "d_e", "d_e", "d_attn", "d_mid", "d_e",
                                 kv_group=P.query_group(h["H"], v), bias_at=v.attn_bias_at,
                                 rel_buckets=_rel_buckets(v))


def _rel_buckets(v: VariantSet) -> int:
    """The rows of T5's bias table under rel_bias="t5_buckets"; 0 (no table) otherwise."""
    return v.rel_buckets if v.rel_bias == "t5_buckets" else 0


def _causal_self_attention_schema(h: Hyper, v: VariantSet) -> dict[str, Shape]:
    """``_self_attention_schema`` with QK-norm's gains gamma_q, gamma_k (d_attn,) under qk_norm="rms",
    last (spec 2.12): every other set's parameters, and their draws, are as before; LongRoPE's rope_ext (r/2)
    and rope_mscale (1) after them under rope_factors="longrope" (spec 2.17)."""
    return {**P.mh_attention_schema(h["H"], v.attn_bias, "d_e", "d_e", "d_attn", "d_mid", "d_e",
                                    kv_group=P.query_group(h["H"], v), bias_at=v.attn_bias_at,
                                    qk_norm=v.qk_norm == "rms", rel_buckets=_rel_buckets(v)),
            **rope_schema(v)}


def _zero_query() -> Refusal:
    """QK-norm without ε (qk_norm="rms", epsilon_placement="none") of a query column with mean square 0:
    every head's W_q and b_q zeroed, so that Q = 0 and RMSnorm divides by √0 (Qwen3RMSNorm's
    ``rsqrt(variance + eps)`` at eps 0 is inf; a norm without ε is the layers' zero_variance refusal)."""
    def transform(entry: Entry, hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Refused:
        for name, value in params.items():
            if name.startswith("heads.") and name.endswith((".W_q", ".b_q")):
                params[name] = [[0.0] * len(row) for row in value] if isinstance(value[0], list) \
                    else [0.0] * len(value)
        return Refused(hyper, inputs, params, "e")

    return Refusal(name="a zero query column into QK-norm without ε", argument="e", transform=transform,
                   when=(("qk_norm", ("rms",)), ("epsilon_placement", ("none",))))


_PAD = TensorSpec("pad", ("ell",), Kind.PADDING, "pad[t] = 0: position t is padding, no query's key")


def _self_attention_entry(causal: bool, padding: bool) -> Entry:
    """The four self-attention entries: bidirectional or causal, with or without a padding input."""
    name = ("padded_" if padding else "") + ("causal_self_attention" if causal else "self_attention")
    mask = "Mask = [[t_z ≤ t_x]]" if causal else "Mask ≡ 1"
    where = "Alg. 10 line 6" if causal else "Alg. 8 and 9 line 5"
    lines = f"Z = X, {mask}{' ∧ pad[t_z]' if padding else ''}: {where}"
    if padding:
        summary = (f"Ṽ = MHAttention(X, X | W, {mask} ∧ pad[t_z]): the self-attention of a "
                   f"{'decoder (LLaMA, GPT)' if causal else 'BERT'} layer with a padding mask over keys.")
    elif causal:
        summary = ("Ṽ = MHAttention(X, X | W, Mask[t_z, t_x] = [[t_z ≤ t_x]]): GPT's (and the decoder's, "
                   "Alg. 8 line 14) self-attention on its own.")
    else:
        summary = "Ṽ = MHAttention(X, X | W, Mask ≡ 1): the encoder's and BERT's self-attention on its own."
    inputs = (TensorSpec("X", ("d_e", "ell"), doc="the sequence, also its own context (Z = X)"),)
    return Entry(
        name=name, paper_name=("Padded self-attention" if padding else "Self-attention")
        + (" (causal)" if causal else " (bidirectional)"),
        number=5, lines=lines, family="component", summary=summary,
        hyper=("H", "d_e", "d_attn", "d_mid", "ell"),
        sizes=dict(H=2, d_e=4, d_attn=2, d_mid=2, ell=3),
        inputs=inputs + ((_PAD,) if padding else ()),
        outputs=(TensorSpec("V_tilde", ("d_e", "ell")),),
        param_schema=_causal_self_attention_schema if causal else _self_attention_schema,
        # without padding every query sees a key (itself, causally): no empty query; ℓ_z = ℓ_x:
        # no alignment. Padding can leave a query with no key (all padded; causally, a padded start).
        # A causal one reads QK-norm (spec 2.12: a decoder's attention, Qwen3's and Gemma 3's), its norm
        # switches under qk_norm="rms" alone
        # Every one reads T5's bucketed bias (spec 2.13), its bucket parameters under rel_bias="t5_buckets" alone
        # A causal one holds LongRoPE's factors (spec 2.17: Phi3Attention), read in place of rope_scaling
        switches=MH_ATTENTION | REL_BIAS | ({"empty_query"} if padding else set())
        | (CAUSAL | QK_NORM | ROPE_FACTORS if causal else set()),
        read_with={**(QK_NORM_READ_WITH if causal else {}), **REL_BIAS_READ_WITH,
                   **(ROPE_FACTORS_READ_WITH if causal else {})},
        reference=_self_attention(causal=causal),
        structural=("H",),
        refusals=((empty_padding(),) if padding else ()) + ((_zero_query(),) if causal else ()),
    )


#: what the entries of Algorithm 9 (BERT) and Algorithm 10 (GPT) share, the plain models, their
#: padded forms and the cached decoder: sizes, parameters, outputs, checks, the token refusals
_MODEL_SHARED: dict[str, dict[str, Any]] = {
    "e": dict(hyper=("N_V", "ell_max", "L", "H", "d_e", "d_attn", "d_mid", "d_mlp", "d_f", "ell"),
              sizes=dict(N_V=7, ell_max=6, L=2, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, d_f=4, ell=4),
              param_schema=e_schema, check=all_of(sequences_fit("ell"), tied_needs("d_f"), norm_dims("d_e", "d_f"))),
    "d": dict(hyper=("N_V", "ell_max", "L", "H", "d_e", "d_attn", "d_mid", "d_mlp", "ell"),
              sizes=dict(N_V=7, ell_max=6, L=2, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell=4),
              param_schema=lambda h, v: {**d_schema(h, v), **rope_schema(v)},
              check=all_of(sequences_fit("ell"), norm_dims("d_e"))),
}


def _model_entry(model: str, **kw: Any) -> Entry:
    """An architecture entry over ``_MODEL_SHARED[model]``: P (N_V×ℓ) from the token sequence x, its
    layer and head counts read from the parameters, and the refusals of a token model (a
    zero-variance first column, ℓ_max one short) plus ``extra_refusals``."""
    extra = kw.pop("extra_refusals", ())
    shared = dict(family="architecture", outputs=(TensorSpec("P", ("N_V", "ell"), scale="log"),), structural=("L", "H"),
                  refusals=(zero_variance(tokens="x", attention="layers.0.attn.", when=_DATA_POSITIONS),
                            too_long("ell"), *extra), **_MODEL_SHARED[model])
    return Entry(**{**shared, **kw})


_X = TensorSpec

#: the layers of Algorithms 8-10 that differ in name, paper lines, mask and stream name only:
#: {entry: (paper name, algorithm, lines, summary, the stream's name, the spec's layer, causal)}
_STACK_LAYERS: dict[str, tuple[str, int, str, str, str, Callable[..., Any], bool]] = {
    "encoder_layer": ("EDTransformer encoder layer", 8, "lines 5-8", "Post-LN self-attention (Mask ≡ 1) and ReLU MLP.",
                      "Z", encoder_layer, False),
    "bert_layer": ("ETransformer layer", 9, "lines 5-8", "Post-LN self-attention (Mask ≡ 1) and GELU MLP.",
                   "X", bert_layer, False),
    "gpt2_layer": ("DTransformer layer", 10, "lines 5-8", "Pre-LN causal self-attention and GELU MLP.",
                   "X", gpt2_layer, True),
}


def _with_table(schema: dict[str, Shape], v: VariantSet, prefix: str) -> dict[str, Shape]:
    """A layer's parameters with T5's bias table ``<prefix>rel_bias`` (rel_buckets × H) of its self-attention
    last under rel_bias="t5_buckets" (spec 2.13: a T5 stack's first layer, ``T5Block(config,
    has_relative_attention_bias=True)``, whose table every later layer reuses); every other set's as before."""
    if v.rel_bias == "t5_buckets":
        return {**schema, prefix + "rel_bias": (v.rel_buckets, "H")}
    return schema


def _padded_text(causal: bool) -> str:
    return f"Mask {'= [[t_z ≤ t_x]]' if causal else '≡ 1'} ∧ pad[t_z]"


def _stack_layer_entry(name: str, padding: bool) -> Entry:
    """The encoder, BERT and GPT-2 layer entries (``_STACK_LAYERS``), with or without a padding
    input over keys (``padded``: the layer's attention mask; Hugging Face's ``attention_mask``)."""
    paper_name, number, lines, summary, io, layer, causal = _STACK_LAYERS[name]

    def reference(i: Any, p: Any, h: Hyper, v: VariantSet) -> dict[str, Any]:
        return {io: layer(i[io], P.from_flat(P.LayerParams, p), variant=v, pad=i.get("pad"))}

    return Entry(
        name=("padded_" if padding else "") + name,
        paper_name=paper_name + (" with padding" if padding else ""),
        number=number, lines=lines + (f", {_padded_text(causal)}" if padding else ""), family="layer",
        summary=summary + (" Padding positions are no query's key." if padding else ""),
        hyper=("H", "d_e", "d_attn", "d_mid", "d_mlp", "ell"),
        sizes=dict(H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell=3),
        inputs=(_X(io, ("d_e", "ell")),) + ((_PAD,) if padding else ()),
        outputs=(_X(io, ("d_e", "ell")),),
        param_schema=lambda h, v: {**_with_table(P.layer_schema(h["H"], v, arch="gpt2" if causal else "bert"), v,
                                                 "attn."),
                                   **(rope_schema(v, "attn.") if causal else {})},
        # T5's bucketed bias in the layer's self-attention (spec 2.13: a stack's first layer, which holds its
        # table), the bucket parameters under rel_bias="t5_buckets" alone; the GPT-2 layer's LongRoPE factors
        # (spec 2.17: Phi3DecoderLayer), last, read in place of rope_scaling
        switches=LAYER | REL_BIAS | ({"empty_query"} if padding else set())
        | (CAUSAL | PARALLEL | ROPE_FACTORS if causal else set()),
        read_with={**REL_BIAS_READ_WITH, **(ROPE_FACTORS_READ_WITH if causal else {})},
        reference=reference,
        structural=("H",),
        check=norm_dims("d_e"),
        refusals=(zero_variance(column_of=io, attention="attn."), narrow_norm(when=_LAYER_NORM),
                  *((empty_padding(),) if padding else ())),
    )


_PAD_X = TensorSpec("pad_x", ("ell_x",), Kind.PADDING, "pad_x[t] = 0: decoder position t is padding, no query's key")
_PAD_Z = TensorSpec("pad_z", ("ell_z",), Kind.PADDING,
                    "pad_z[t] = 0: source position t is padding, no key of the encoder or cross-attention")


def _decoder_layer_entry(padding: bool) -> Entry:
    """Algorithm 8's decoder layer, with or without the decoder's own padding (``pad_x``, keys of
    the causal self-attention) and the encoder's (``pad_z``, keys of the cross-attention)."""
    def reference(i: Any, p: Any, h: Hyper, v: VariantSet) -> dict[str, Any]:
        return {"X": decoder_layer(i["X"], i["Z"], P.from_flat(P.DecoderLayerParams, p), variant=v,
                                   pad_x=i.get("pad_x"), pad_z=i.get("pad_z"))}

    return Entry(
        name=("padded_" if padding else "") + "decoder_layer",
        paper_name="EDTransformer decoder layer" + (" with padding" if padding else ""),
        number=8, lines="lines 14-19" + (", line 14 Mask ∧ pad_x[t_z], line 16 Mask ∧ pad_z[t_z]" if padding else ""),
        family="layer",
        summary="Post-LN causal self-attention, cross-attention to Z, ReLU MLP."
                + (" Padding positions of either sequence are no query's key." if padding else ""),
        hyper=("H", "d_e", "d_attn", "d_mid", "d_mlp", "ell_x", "ell_z"),
        sizes=dict(H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell_x=3, ell_z=4),
        inputs=(_X("X", ("d_e", "ell_x"), doc="decoder stream"), _X("Z", ("d_e", "ell_z"), doc="encoder output"),
                *((_PAD_X, _PAD_Z) if padding else ())),
        outputs=(_X("X", ("d_e", "ell_x")),),
        param_schema=lambda h, v: _with_table(P.decoder_layer_schema(h["H"], v), v, "self_attn."),
        # T5's bias in the causal self-attention alone (spec 2.13): T5's cross-attention has none
        switches=LAYER | CAUSAL | REL_BIAS | ({"empty_query"} if padding else set()),
        read_with=REL_BIAS_READ_WITH,
        reference=reference,
        structural=("H",),
        check=norm_dims("d_e"),
        refusals=(zero_variance(column_of="X", attention="self_attn."), narrow_norm(when=_LAYER_NORM),
                  *((empty_padding("pad_z"),) if padding else ())),
    )


def _ed_transformer_entry(padding: bool) -> Entry:
    """Algorithm 8, with or without the source's padding (``pad_z``: the encoder's keys and the
    cross-attention's) and the target's (``pad_x``: the decoder's self-attention keys)."""
    def reference(i: Any, p: Any, h: Hyper, v: VariantSet) -> dict[str, Any]:
        return {"P": ed_transformer(i["z"], i["x"], P.from_flat(P.EDTransformerParams, p), ell_max=h["ell_max"],
                                    variant=v, pad_z=i.get("pad_z"), pad_x=i.get("pad_x"))}

    return Entry(
        name=("padded_" if padding else "") + "ed_transformer",
        paper_name="EDTransformer" + (" with padding" if padding else ""),
        number=8, lines="lines 1-21" + (", every Mask ∧ pad_z[t_z] or pad_x[t_z]" if padding else ""),
        family="architecture",
        summary="Encoder-decoder transformer: P over the next decoder token."
                + (" Padding positions of source and target are no query's key." if padding else ""),
        hyper=("N_V", "ell_max", "L_enc", "L_dec", "H", "d_e", "d_attn", "d_mid", "d_mlp", "ell_z", "ell_x"),
        sizes=dict(N_V=7, ell_max=6, L_enc=2, L_dec=2, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell_z=4, ell_x=3),
        inputs=(_X("z", ("ell_z",), Kind.TOKEN, "source sequence"),
                _X("x", ("ell_x",), Kind.TOKEN, "target sequence"), *((_PAD_Z, _PAD_X) if padding else ())),
        outputs=(_X("P", ("N_V", "ell_x"), scale="log"),),
        param_schema=ed_schema,
        # T5's two bias tables, one per stack (issue 38: ``ed_transformer_logits``), and its d_e^(−1/2) before
        # the head; the bucket parameters under rel_bias="t5_buckets" alone
        switches=ARCHITECTURE | CAUSAL | ED_POSITIONS | REL_BIAS | ED_HEAD | ({"empty_query"} if padding else set()),
        read_with={**ED_POSITIONS_READ_WITH, **REL_BIAS_READ_WITH},
        reference=reference,
        structural=("L_enc", "L_dec", "H"),
        check=all_of(sequences_fit("ell_z", "ell_x"), norm_dims("d_e")),
        refusals=(zero_variance(tokens="z", attention="enc_layers.0.attn.", when=_DATA_POSITIONS),
                  too_long("ell_z", "ell_x"), *((empty_padding("pad_z"),) if padding else ())),
    )



ENTRIES: list[Entry] = [
    Entry(
        name="token_embedding", paper_name="Token embedding",
        number=1, lines="line 1", family="component",
        summary="e ← W_e[:, v]: column v of the embedding matrix.",
        hyper=("N_V", "d_e"),
        sizes=dict(N_V=7, d_e=4),
        inputs=(_X("v", (), Kind.TOKEN, "token ID"),),
        outputs=(_X("e", ("d_e",)),),
        param_schema=lambda h, v: {"W_e": ("d_e", "N_V")},
        switches=frozenset(),
        reference=lambda i, p, h, v: {"e": token_embedding(i["v"], p["W_e"])},
    ),
    Entry(
        name="positional_embedding", paper_name="Positional embedding",
        number=2, lines="line 1", family="component",
        summary="e_p ← W_p[:, t]: column t of the learned position matrix.",
        hyper=("ell_max", "d_e"),
        sizes=dict(ell_max=6, d_e=4),
        inputs=(_X("t", (), Kind.POSITION, "position"),),
        outputs=(_X("e", ("d_e",)),),
        param_schema=lambda h, v: {"W_p": ("d_e", "ell_max")},
        switches=frozenset(),
        reference=lambda i, p, h, v: {"e": positional_embedding(i["t"], p["W_p"])},
    ),
    Entry(
        name="sinusoidal_paper", paper_name="Sinusoidal positions (paper)",
        number=2, lines="fixed alternative", family="component",
        summary="W_p[2i−1, t] = sin(t / ℓ_max^{2i/d_e}), W_p[2i, t] = cos(…), 1-based rows and t.",
        hyper=("d_e", "ell_max"),
        sizes=dict(d_e=6, ell_max=8),
        inputs=(),
        outputs=(_X("W_p", ("d_e", "ell_max")),),
        param_schema=no_params,
        switches=frozenset(),
        reference=lambda i, p, h, v: {"W_p": sinusoidal_paper(h["d_e"], h["ell_max"])},
    ),
    Entry(
        name="sinusoidal_vaswani", paper_name="Sinusoidal positions (Vaswani et al.)",
        number=2, lines="fixed alternative", family="component",
        summary="W_p[2i, t] = sin(t / 10000^{2i/d_e}), W_p[2i+1, t] = cos(…), 0-based rows and t.",
        hyper=("d_e", "ell_max"),
        sizes=dict(d_e=6, ell_max=8),
        inputs=(),
        outputs=(_X("W_p", ("d_e", "ell_max")),),
        param_schema=no_params,
        switches=frozenset(),
        reference=lambda i, p, h, v: {"W_p": sinusoidal_vaswani(h["d_e"], h["ell_max"])},
    ),
    Entry(
        name="embedding", paper_name="Sequence embedding",
        number=None, lines="Algorithms 8-10, lines 1-3", family="component",
        summary="X ← [W_e[:, x[t]] + W_p[:, t]] for every position t.",
        hyper=("N_V", "d_e", "ell", "ell_max"),
        sizes=dict(N_V=7, d_e=4, ell=4, ell_max=6),
        inputs=(_X("x", ("ell",), Kind.TOKEN, "token sequence"),),
        outputs=(_X("X", ("d_e", "ell")),),
        param_schema=lambda h, v: P.embedding_schema(v),
        switches=EMBEDDING,
        reference=lambda i, p, h, v: {"X": embed(i["x"], p["W_e"], p.get("W_p"), ell_max=h["ell_max"], variant=v,
                                       gamma=p.get("gamma_emb"), beta=p.get("beta_emb"))},
        check=all_of(sequences_fit("ell"), norm_dims("d_e")),
        refusals=(zero_variance(tokens="x", when=(("embedding_norm", (True,)), *_DATA_POSITIONS)),
                  narrow_norm(when=(*_LAYER_NORM, ("embedding_norm", (True,)))), too_long("ell")),
    ),
    Entry(
        name="basic_single_query_attention", paper_name="Basic single-query attention",
        number=3, lines="lines 1-5", family="component",
        summary="ṽ = Σ_t α_t v_t with α = softmax over t of qᵀk_t / √d_attn.",
        hyper=("d_in", "d_attn", "d_out", "T"),
        sizes=dict(d_in=4, d_attn=3, d_out=2, T=5),
        inputs=(_X("e", ("d_in",), doc="current token"), _X("E", ("d_in", "T"), doc="context tokens e_t as columns")),
        outputs=(_X("v_tilde", ("d_out",)),),
        param_schema=lambda h, v: P.attention_schema(v.attn_bias, "d_in", "d_in", "d_attn", "d_out"),
        switches=BASIC_ATTENTION,
        reference=lambda i, p, h, v: {"v_tilde": basic_single_query_attention(
            i["e"], i["E"], P.from_flat(P.AttentionParams, p), variant=v)},
    ),
    Entry(
        name="attention", paper_name="Attention", number=4, lines="lines 1-6", family="component",
        summary="Ṽ = V softmax(KᵀQ / √d_attn) with masked scores set to −∞.",
        hyper=("d_x", "d_z", "d_attn", "d_out", "ell_x", "ell_z"),
        sizes=dict(d_x=4, d_z=3, d_attn=3, d_out=2, ell_x=3, ell_z=4),
        inputs=(_X("X", ("d_x", "ell_x"), doc="primary sequence"), _X("Z", ("d_z", "ell_z"), doc="context sequence"),
         _X("Mask", ("ell_z", "ell_x"), Kind.MASK, "Mask[t_z, t_x] = 1: t_x may attend to t_z")),
        outputs=(_X("V_tilde", ("d_out", "ell_x")),),
        param_schema=lambda h, v: P.attention_schema(v.attn_bias),
        switches=ATTENTION | {"empty_query"},
        reference=lambda i, p, h, v: {"V_tilde": attention(
            i["X"], i["Z"], P.from_flat(P.AttentionParams, p), i["Mask"], variant=v)},
        refusals=(empty_query(),),
    ),
    Entry(
        name="mh_attention", paper_name="MHAttention",
        number=5, lines="lines 1-4", family="component",
        summary="Ṽ = W_o [Y^1; …; Y^H] + b_o 1ᵀ, each Y^h an Attention head.",
        hyper=("H", "d_x", "d_z", "d_attn", "d_mid", "d_out", "ell_x", "ell_z"),
        sizes=dict(H=2, d_x=4, d_z=3, d_attn=2, d_mid=2, d_out=3, ell_x=3, ell_z=4),
        inputs=(_X("X", ("d_x", "ell_x")), _X("Z", ("d_z", "ell_z")),
         _X("Mask", ("ell_z", "ell_x"), Kind.MASK, "Mask[t_z, t_x] = 1: t_x may attend to t_z")),
        outputs=(_X("V_tilde", ("d_out", "ell_x")),),
        param_schema=lambda h, v: P.mh_attention_schema(h["H"], v.attn_bias, kv_group=P.query_group(h["H"], v),
                                                        bias_at=v.attn_bias_at),
        switches=MH_ATTENTION | {"empty_query"},
        reference=lambda i, p, h, v: {"V_tilde": mh_attention(
            i["X"], i["Z"], P.from_flat(P.MHAttentionParams, p), i["Mask"], variant=v)},
        structural=("H",),
        refusals=(empty_query(),),
    ),
    _self_attention_entry(causal=False, padding=False),
    _self_attention_entry(causal=True, padding=False),
    _self_attention_entry(causal=False, padding=True),
    _self_attention_entry(causal=True, padding=True),
    Entry(
        name="unidirectional_mask", paper_name="Unidirectional mask",
        number=4, lines="Mask[t_z, t_x] = [[t_z ≤ t_x]]", family="component",
        summary="The causal mask; its alignment when ℓ_z ≠ ℓ_x is a variant.",
        hyper=("ell_z", "ell_x"),
        sizes=dict(ell_z=4, ell_x=4),
        inputs=(),
        outputs=(_X("Mask", ("ell_z", "ell_x"), Kind.MASK),),
        param_schema=no_params,
        switches=frozenset({"causal_alignment", "window"}),  # a mask: no scores for a position bias
        reference=lambda i, p, h, v: {"Mask": unidirectional_mask(h["ell_z"], h["ell_x"], variant=v)},
    ),
    Entry(
        name="layer_norm", paper_name="layer_norm",
        number=6, lines="lines 1-3, per column", family="component",
        summary="ê = (e − m) / √v ⊙ γ + β for every column e of X.",
        hyper=("d_e", "ell"),
        sizes=dict(d_e=5, ell=3),
        inputs=(_X("X", ("d_e", "ell")),),
        outputs=(_X("X_hat", ("d_e", "ell")),),
        param_schema=lambda h, v: P.norm_schema(v, "gamma", "beta", norm="layer_norm"),
        switches=NORM_LN,
        reference=lambda i, p, h, v: {"X_hat": norm_columns(i["X"], p.get("gamma"), p.get("beta"), v, "layer_norm")},
        check=norm_dims("d_e", layer_norm_only=True),
        refusals=(zero_variance(column_of="X", kind="layer_norm"), narrow_norm()),
    ),
    Entry(
        name="rms_norm", paper_name="RMSnorm",
        number=6, lines="variant m = 0, β = 0, per column", family="component",
        summary="ê = e / √(Σ e² / d_e) ⊙ γ for every column e of X.",
        hyper=("d_e", "ell"),
        sizes=dict(d_e=5, ell=3),
        inputs=(_X("X", ("d_e", "ell")),),
        outputs=(_X("X_hat", ("d_e", "ell")),),
        param_schema=lambda h, v: P.norm_schema(v, "gamma", "beta", norm="rms_norm"),
        switches=frozenset({"epsilon", "epsilon_placement", "affine", "norm_gain"}),
        reference=lambda i, p, h, v: {"X_hat": norm_columns(i["X"], p.get("gamma"), None, v, "rms_norm")},
        refusals=(zero_variance(column_of="X", kind="rms_norm"),),
    ),
    Entry(
        name="unembedding", paper_name="Unembedding",
        number=7, lines="line 1, per column", family="component",
        summary="P = softmax(W_u X), column by column.",
        hyper=("N_V", "d_e", "ell"),
        sizes=dict(N_V=7, d_e=4, ell=3),
        inputs=(_X("X", ("d_e", "ell")),),
        outputs=(_X("P", ("N_V", "ell"), scale="log"),),
        param_schema=_unembedding_schema,
        switches=frozenset({"unembedding", "logit_bias", "logit_softcap"}),
        reference=lambda i, p, h, v: {"P": unembed(i["X"], unembedding_matrix(p.get("W_u"), p.get("W_e"), v),
                                                   p.get("b_u"), v)},
    ),
    _stack_layer_entry("encoder_layer", padding=False),
    _decoder_layer_entry(padding=False),
    _stack_layer_entry("bert_layer", padding=False),
    _stack_layer_entry("gpt2_layer", padding=False),
    _ed_transformer_entry(padding=False),
    _model_entry(
        "e", name="e_transformer", paper_name="ETransformer", number=9, lines="lines 1-12",
        summary="Encoder-only transformer (BERT): P at every position.",
        inputs=(_X("x", ("ell",), Kind.TOKEN, "token sequence"),),
        switches=ARCHITECTURE,
        reference=lambda i, p, h, v: {"P": e_transformer(i["x"], P.from_flat(P.ETransformerParams, p),
                                               ell_max=h["ell_max"], variant=v)},
    ),
    _model_entry(
        "d", name="d_transformer", paper_name="DTransformer", number=10, lines="lines 1-11",
        summary="Decoder-only transformer (GPT-2): P over the next token at every position.",
        inputs=(_X("x", ("ell",), Kind.TOKEN, "token sequence"),),
        switches=ARCHITECTURE | CAUSAL | PARALLEL | LAYER_TYPES | ROPE_FACTORS,
        read_with=ROPE_FACTORS_READ_WITH,
        reference=lambda i, p, h, v: {"P": d_transformer(i["x"], P.from_flat(P.DTransformerParams, p),
                                               ell_max=h["ell_max"], variant=v)},
    ),
    Entry(
        name="next_token_encoder", paper_name="Encoder next-token predictor",
        number=None, lines="Alg. 8 lines 1-8, Alg. 7 on the last column", family="architecture",
        summary="Bidirectional encoder stack, then p = softmax(W_u X[:, ℓ−1]): seeds 000 and 002.",
        hyper=("N_V", "ell_max", "L", "H", "d_e", "d_attn", "d_mid", "d_mlp", "ell"),
        sizes=dict(N_V=7, ell_max=6, L=2, H=2, d_e=4, d_attn=2, d_mid=2, d_mlp=6, ell=4),
        inputs=(_X("x", ("ell",), Kind.TOKEN, "token sequence"),),
        outputs=(_X("p", ("N_V",), doc="distribution over the token after the last position", scale="log"),),
        param_schema=next_token_schema,
        switches=ARCHITECTURE,
        reference=lambda i, p, h, v: {"p": next_token_encoder(i["x"], P.from_flat(P.DTransformerParams, p),
                                                    ell_max=h["ell_max"], variant=v)},
        structural=("L", "H"),
        check=all_of(sequences_fit("ell"), norm_dims("d_e")),
        refusals=(zero_variance(tokens="x", attention="layers.0.attn.", when=_DATA_POSITIONS), too_long("ell")),
    ),
    _model_entry(
        "e", name="padded_e_transformer", paper_name="ETransformer with padding", number=9,
        lines="lines 1-12, Mask ≡ 1 ∧ pad[t_z]",
        summary="BERT with an attention mask: padding positions are no query's key in any layer.",
        inputs=(_X("x", ("ell",), Kind.TOKEN, "token sequence"), _PAD),
        switches=ARCHITECTURE | PAD_POSITIONS | {"empty_query"},
        reference=lambda i, p, h, v: {"P": e_transformer(i["x"], P.from_flat(P.ETransformerParams, p),
                                               ell_max=h["ell_max"], variant=v, pad=i["pad"])},
        extra_refusals=(empty_padding(),),
    ),
    _model_entry(
        "d", name="padded_d_transformer", paper_name="DTransformer with padding", number=10,
        lines="lines 1-11, Mask = [[t_z ≤ t_x]] ∧ pad[t_z]",
        summary="GPT/LLaMA with an attention mask: padding positions are no query's key in any layer.",
        inputs=(_X("x", ("ell",), Kind.TOKEN, "token sequence"), _PAD),
        switches=ARCHITECTURE | CAUSAL | PARALLEL | LAYER_TYPES | PAD_POSITIONS | ROPE_FACTORS | {"empty_query"},
        read_with=ROPE_FACTORS_READ_WITH,
        reference=lambda i, p, h, v: {"P": d_transformer(i["x"], P.from_flat(P.DTransformerParams, p),
                                               ell_max=h["ell_max"], variant=v, pad=i["pad"])},
        extra_refusals=(empty_padding(),),
    ),
    _model_entry(
        "d", name="cached_decoding", paper_name="DTransformer decoded with a key/value cache", number=10,
        lines="lines 1-11, column by column",
        summary="x[:n_prefill] in one call, then each later token alone with the cached K, V: "
                "the columns of DTransformer(x).",
        inputs=(_X("x", ("ell",), Kind.TOKEN, "token sequence"),
                _X("n_prefill", (), Kind.LENGTH, "tokens run in the first call (the prompt); each later token "
                   "is run alone, reading the keys and values cached so far", bound="ell")),
        outputs=(_X("P", ("N_V", "ell"), scale="log",
                    doc="column t: the prefill's (t < n_prefill) or step t's distribution"),),
        switches=ARCHITECTURE | CAUSAL | PARALLEL | LAYER_TYPES | ROPE_FACTORS,
        read_with=ROPE_FACTORS_READ_WITH,
        # Causal attention makes column t a function of x[:t+1] alone, so decoding with a cache must
        # give the full pass's columns (the cache is how, not what: Algorithm 10 is the reference)
        reference=lambda i, p, h, v: {"P": d_transformer(i["x"], P.from_flat(P.DTransformerParams, p),
                                               ell_max=h["ell_max"], variant=v)},
    ),
    _stack_layer_entry("encoder_layer", padding=True),
    _decoder_layer_entry(padding=True),
    _stack_layer_entry("bert_layer", padding=True),
    _stack_layer_entry("gpt2_layer", padding=True),
    _ed_transformer_entry(padding=True),
    Entry(  # spec 2.11: spec/moe.py
        name="moe_mlp", paper_name="Sparse mixture-of-experts MLP",
        number=None, lines="Alg. 10 line 8's MLP, routed (Mixtral, Qwen2-MoE)", family="component",
        summary="y = Σ_{i ∈ top-k of p} w_i W_2^i (silu(W_1^i x) ⊙ W_3^i x) per column x, p = softmax(W_g x).",
        hyper=("E", "k", "d_e", "d_mlp", "ell"),
        sizes=dict(E=4, k=2, d_e=5, d_mlp=6, ell=3),
        inputs=(_X("X", ("d_e", "ell")),),
        outputs=(_X("Y", ("d_e", "ell")),),
        param_schema=moe_schema,
        switches=MOE,
        reference=lambda i, p, h, v: {"Y": moe_mlp(i["X"], moe_params(p, h["E"], h["d_mlp"]),
                                                      h["k"], variant=v)},
        check=top_k_fits,
        refusals=(router_tie(),),
    ),
]
