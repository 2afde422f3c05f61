"""Parameters θ, named after the paper's symbols, and their flat naming.

Structures (frozen dataclasses) hold nested lists in the paper's orientation
(W is out × in). Their flat form maps dotted names to nested lists, e.g.
``layers.0.attn.heads.1.W_q``: field names join with ``.``, tuple members
(layers, heads) are 0-based indices (the paper's layer l and head h are
``l-1`` and ``h-1``). A parameter that a variant removes (a bias with
``attn_bias=False``, γ with ``affine="none"``, ``W_p`` with sinusoidal
positions, ``W_u`` when tied) is ``None`` in a structure and absent from the
flat form.

``*_schema`` functions give the flat names and symbolic shapes for given
hyperparameters and variant; symbols are hyperparameter names, and
``"H*d_mid"`` means a product. This module does no arithmetic, so
implementations may share it.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .variants import VariantSet

__all__ = [
    "AttentionParams",
    "Dense",
    "DecoderLayerParams",
    "KVHeadParams",
    "DTransformerParams",
    "EDTransformerParams",
    "ETransformerParams",
    "LayerParams",
    "MHAttentionParams",
    "Shape",
    "from_flat",
    "resolve_shape",
    "sandwich_schema",
    "to_flat",
]

Shape = tuple  # of int | str (a hyperparameter name or "a*b")
Matrix = list
Vector = list


@dataclass(frozen=True)
class AttentionParams:
    """W_qkv of Algorithms 3 and 4: W_q, W_k ∈ R^{d_attn×d_x|d_z}, W_v ∈ R^{d_out×d_z}."""

    W_q: Matrix
    b_q: Optional[Vector]
    W_k: Matrix
    b_k: Optional[Vector]
    W_v: Matrix
    b_v: Optional[Vector]


@dataclass(frozen=True)
class KVHeadParams:
    """One key/value head of grouped-query attention (``kv_group`` = G > 1): W_k ∈ R^{d_attn×d_z},
    W_v ∈ R^{d_mid×d_z} and their biases, shared by the G query heads G·g .. G·g + G − 1."""

    W_k: Matrix
    b_k: Optional[Vector]
    W_v: Matrix
    b_v: Optional[Vector]


@dataclass(frozen=True)
class MHAttentionParams:
    """W of Algorithm 5: heads h = 0..H-1 (the paper's 1..H), W_o ∈ R^{d_out×H·d_mid}, b_o.
    Under ``kv_group`` = G > 1 each head holds only W_q, b_q and ``kv_heads`` (H/G of them) hold
    the keys' and values' maps."""

    heads: tuple[AttentionParams, ...]
    W_o: Matrix
    b_o: Optional[Vector]
    kv_heads: tuple[KVHeadParams, ...] = ()
    #: ``qk_norm="rms"`` (a layer's attention): the gains γ_q, γ_k ∈ R^{d_attn} of the RMSNorm of every
    #: head's query and key columns, one pair shared by all heads (Qwen3's q_norm, k_norm)
    gamma_q: Optional[Vector] = None
    gamma_k: Optional[Vector] = None
    #: ``rel_bias="t5_buckets"`` (a self-attention entry, spec 2.13): T5's learned bias table
    #: ∈ R^{rel_buckets×H}, row b the bias of bucket b for every head (``relative_attention_bias.weight``)
    rel_bias: Optional[Matrix] = None
    #: ``rope_factors="longrope"`` (spec 2.17): LongRoPE's per-pair factors e ∈ R^{r/2} (the short_factor or
    #: long_factor in effect) and attention factor m ∈ R^1 (``spec/rotary.py``); a model's are its own fields
    rope_ext: Optional[Vector] = None
    rope_mscale: Optional[Vector] = None


@dataclass(frozen=True)
class Dense:
    """One more hidden layer of a deeper MLP (``mlp_depth`` > 1): h ← act(W h + b), W ∈ R^{d_mlp×d_mlp}."""

    W: Matrix
    b: Optional[Vector]


@dataclass(frozen=True)
class LayerParams:
    """One layer of the encoder (Alg. 8 lines 5-8), BERT (Alg. 9 lines 5-8) or GPT-2 (Alg. 10 lines 5-8):
    W_l (attention), γ^1_l, β^1_l, W^l_mlp1, b^l_mlp1, W^l_mlp2, b^l_mlp2, γ^2_l, β^2_l."""

    attn: MHAttentionParams
    gamma1: Optional[Vector]
    beta1: Optional[Vector]
    W_mlp1: Matrix
    b_mlp1: Optional[Vector]
    W_mlp2: Optional[Matrix]  # None under mlp="one_layer"
    b_mlp2: Optional[Vector]
    gamma2: Optional[Vector]
    beta2: Optional[Vector]
    #: ``mlp="gated"``: the linear branch V, c of act(W_mlp1 x + b_mlp1) ⊙ (V x + c)
    W_mlp1_lin: Optional[Matrix] = None
    b_mlp1_lin: Optional[Vector] = None
    #: ``mlp_depth`` > 1: the hidden layers after the first
    mlp_hidden: tuple[Dense, ...] = ()
    #: ``norm_placement="sandwich"``: the second norm of each sublayer, on its output before the
    #: residual sum (Gemma 2's post_attention_layernorm and post_feedforward_layernorm)
    gamma1_out: Optional[Vector] = None
    beta1_out: Optional[Vector] = None
    gamma2_out: Optional[Vector] = None
    beta2_out: Optional[Vector] = None


@dataclass(frozen=True)
class DecoderLayerParams:
    """One decoder layer of Algorithm 8 (lines 14-19): W^dec_l (self), γ^3_l, β^3_l,
    W^{e/d}_l (cross), γ^4_l, β^4_l, W^l_mlp3, b^l_mlp3, W^l_mlp4, b^l_mlp4, γ^5_l, β^5_l."""

    self_attn: MHAttentionParams
    gamma3: Optional[Vector]
    beta3: Optional[Vector]
    cross_attn: MHAttentionParams
    gamma4: Optional[Vector]
    beta4: Optional[Vector]
    W_mlp3: Matrix
    b_mlp3: Optional[Vector]
    W_mlp4: Optional[Matrix]  # None under mlp="one_layer"
    b_mlp4: Optional[Vector]
    gamma5: Optional[Vector]
    beta5: Optional[Vector]
    W_mlp3_lin: Optional[Matrix] = None
    b_mlp3_lin: Optional[Vector] = None
    mlp_hidden: tuple[Dense, ...] = ()
    #: ``norm_placement="sandwich"``: each sublayer's output norm (self-attention, cross-attention, MLP)
    gamma3_out: Optional[Vector] = None
    beta3_out: Optional[Vector] = None
    gamma4_out: Optional[Vector] = None
    beta4_out: Optional[Vector] = None
    gamma5_out: Optional[Vector] = None
    beta5_out: Optional[Vector] = None


@dataclass(frozen=True)
class EDTransformerParams:
    """θ of Algorithm 8. Beyond the paper: the variants' embedding norms
    (``gamma_emb_enc`` ...), final norms (``gamma_enc``, ``gamma_dec``), logit bias ``b_u``, the
    target's own position table ``W_p_dec`` (``ed_positions="separate"``, BART)."""

    W_e: Matrix
    W_p: Optional[Matrix]
    enc_layers: tuple[LayerParams, ...]
    dec_layers: tuple[DecoderLayerParams, ...]
    W_u: Optional[Matrix]
    b_u: Optional[Vector] = None
    gamma_emb_enc: Optional[Vector] = None
    beta_emb_enc: Optional[Vector] = None
    gamma_emb_dec: Optional[Vector] = None
    beta_emb_dec: Optional[Vector] = None
    gamma_enc: Optional[Vector] = None
    beta_enc: Optional[Vector] = None
    gamma_dec: Optional[Vector] = None
    beta_dec: Optional[Vector] = None
    W_p_dec: Optional[Matrix] = None


@dataclass(frozen=True)
class ETransformerParams:
    """θ of Algorithm 9: W_e, W_p, layers, W_f, b_f, γ, β, W_u. Variants add
    ``gamma_emb``/``beta_emb``, ``gamma_final``/``beta_final`` and ``b_u``."""

    W_e: Matrix
    W_p: Optional[Matrix]
    layers: tuple[LayerParams, ...]
    W_f: Matrix
    b_f: Vector
    gamma: Optional[Vector]
    beta: Optional[Vector]
    W_u: Optional[Matrix]
    b_u: Optional[Vector] = None
    gamma_emb: Optional[Vector] = None
    beta_emb: Optional[Vector] = None
    gamma_final: Optional[Vector] = None
    beta_final: Optional[Vector] = None


@dataclass(frozen=True)
class DTransformerParams:
    """θ of Algorithm 10: W_e, W_p, layers, γ, β (final norm), W_u. Variants add
    ``gamma_emb``/``beta_emb`` and ``b_u``."""

    W_e: Matrix
    W_p: Optional[Matrix]
    layers: tuple[LayerParams, ...]
    gamma: Optional[Vector]
    beta: Optional[Vector]
    W_u: Optional[Matrix]
    b_u: Optional[Vector] = None
    gamma_emb: Optional[Vector] = None
    beta_emb: Optional[Vector] = None
    #: ``rope_factors="longrope"`` (spec 2.17): LongRoPE's factors, shared by every layer's attention
    #: (Phi3Model's one ``rotary_emb``)
    rope_ext: Optional[Vector] = None
    rope_mscale: Optional[Vector] = None


# --------------------------------------------------------------------------
# flat naming
# --------------------------------------------------------------------------


def to_flat(params: Any, prefix: str = "") -> dict[str, Any]:
    """Structure -> {dotted name: nested list}; ``None`` fields are left out."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        key = prefix + f.name
        if value is None:
            continue
        if dataclasses.is_dataclass(value):
            out.update(to_flat(value, key + "."))
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                out.update(to_flat(item, f"{key}.{i}."))
        else:
            out[key] = value
    return out


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints`` once per class: it compiles every string annotation on each call."""
    return typing.get_type_hints(cls)


def from_flat(cls: type, flat: Mapping[str, Any], prefix: str = "") -> Any:
    """{dotted name: nested list} -> structure of type ``cls``.

    Names absent from ``flat`` become ``None``; the caller checks the key set
    against a schema first (``spec.evaluation``) so nothing is silently lost.
    """
    hints = _type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        key = prefix + f.name
        origin = typing.get_origin(hint)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[f.name] = from_flat(hint, flat, key + ".")
        elif origin is tuple:
            member = typing.get_args(hint)[0]
            items = []
            i = 0
            while any(k.startswith(f"{key}.{i}.") for k in flat):
                items.append(from_flat(member, flat, f"{key}.{i}."))
                i += 1
            kwargs[f.name] = tuple(items)
        else:
            kwargs[f.name] = flat.get(key)
    return cls(**kwargs)


# --------------------------------------------------------------------------
# schemas: flat name -> symbolic shape
# --------------------------------------------------------------------------


def resolve_shape(shape: Shape, hyper: Mapping[str, int]) -> tuple[int, ...]:
    """Evaluate a symbolic shape: ``"H*d_mid"`` is a product, ``"ell_max-1"`` a difference, and
    ``"d_attn*0.5//2"`` the whole part of a product with a decimal factor, floor-divided (LongRoPE's r/2
    factors, r = ⌊rotary_fraction·d_attn⌋ as Hugging Face's ``int(head_dim * partial_rotary_factor)``)."""
    dims = []
    for d in shape:
        if isinstance(d, int):
            dims.append(d)
            continue
        product, _, minus = d.partition("-")
        product, _, floor = product.partition("//")
        value: float = 1
        for factor in product.split("*"):
            factor = factor.strip()
            value *= int(factor) if factor.isdigit() else float(factor) if factor[:1].isdigit() else hyper[factor]
        whole = int(value) // int(floor) if floor else int(value)
        dims.append(whole - (int(minus) if minus else 0))
    return tuple(dims)


def attention_schema(bias: bool, d_x: str = "d_x", d_z: str = "d_z", d_attn: str = "d_attn",
                     d_out: str = "d_out", prefix: str = "") -> dict[str, Shape]:
    s: dict[str, Shape] = {prefix + "W_q": (d_attn, d_x)}
    if bias:
        s[prefix + "b_q"] = (d_attn,)
    s[prefix + "W_k"] = (d_attn, d_z)
    if bias:
        s[prefix + "b_k"] = (d_attn,)
    s[prefix + "W_v"] = (d_out, d_z)
    if bias:
        s[prefix + "b_v"] = (d_out,)
    return s


def query_group(H: int, variant: VariantSet) -> int:
    """G, the query heads that share one key/value head: kv_group (grouped-query attention, Ainslie et al.
    2023), or all H of them under ``kv_heads="one"`` (multi-query attention, Shazeer 2019: one key/value
    head whatever H is), so that the parameters and Algorithm 5's head map are kv_group = H's."""
    return H if variant.kv_heads == "one" else variant.kv_group


def mh_attention_schema(H: int, bias: bool, d_x: str = "d_x", d_z: str = "d_z",
                        d_attn: str = "d_attn", d_mid: str = "d_mid", d_out: str = "d_out",
                        prefix: str = "", kv_group: int = 1, bias_at: str = "all",
                        qk_norm: bool = False, rel_buckets: int = 0) -> dict[str, Shape]:
    """``heads.{h}.*`` and W_o, b_o; under ``kv_group`` = G > 1, ``heads.{h}.W_q``/``b_q`` and
    ``kv_heads.{g}.W_k``/``b_k``/``W_v``/``b_v`` for g < H/G (H a multiple of G: the entry's check).
    With ``bias``, ``bias_at`` (variant ``attn_bias_at``) keeps b_q, b_k, b_v only ("qkv") or b_o
    only ("out"). ``qk_norm`` (a layer's attention under ``qk_norm="rms"``): the QK-norm gains
    gamma_q, gamma_k ∈ R^{d_attn}, last, so that the draws of every other parameter are as before.
    ``rel_buckets`` > 0 (a self-attention entry under ``rel_bias="t5_buckets"``, spec 2.13): T5's bias
    table rel_bias ∈ R^{rel_buckets×H}, after everything else for the same reason."""
    bias, out_bias = bias and bias_at != "out", bias and bias_at != "qkv"
    s: dict[str, Shape] = {}
    if kv_group == 1:
        for h in range(H):
            s.update(attention_schema(bias, d_x, d_z, d_attn, d_mid, prefix=f"{prefix}heads.{h}."))
    else:
        for h in range(H):
            s[f"{prefix}heads.{h}.W_q"] = (d_attn, d_x)
            if bias:
                s[f"{prefix}heads.{h}.b_q"] = (d_attn,)
        for g in range(max(H // kv_group, 1)):
            kv = attention_schema(bias, d_x, d_z, d_attn, d_mid, prefix=f"{prefix}kv_heads.{g}.")
            s.update({k: v for k, v in kv.items() if not k.endswith(("W_q", "b_q"))})
    s[prefix + "W_o"] = (d_out, f"H*{d_mid}")
    if out_bias:
        s[prefix + "b_o"] = (d_out,)
    if qk_norm:
        s[prefix + "gamma_q"] = (d_attn,)
        s[prefix + "gamma_k"] = (d_attn,)
    if rel_buckets:
        s[prefix + "rel_bias"] = (rel_buckets, "H")
    return s


def norm_schema(variant: VariantSet, gamma: str, beta: str, d: str = "d_e",
                norm: str | None = None) -> dict[str, Shape]:
    """γ/β of one norm; ``norm`` overrides ``variant.norm`` (the layer_norm/rms_norm entries)."""
    kind = norm or variant.norm
    s: dict[str, Shape] = {}
    if variant.affine in ("scale_shift", "scale"):
        s[gamma] = (d,)
    if variant.affine == "scale_shift" and kind == "layer_norm":
        s[beta] = (d,)
    return s


def mlp_schema(variant: VariantSet, first: str, second: str, prefix: str = "") -> dict[str, Shape]:
    """W_mlp{first} ∈ R^{d_mlp×d_e}, W_mlp{second} ∈ R^{d_e×d_mlp} and their biases; under
    ``mlp="gated"`` the linear branch W_mlp{first}_lin ∈ R^{d_mlp×d_e}; under ``mlp_depth`` = k
    the hidden layers mlp_hidden.{0..k-2}.W ∈ R^{d_mlp×d_mlp} (in the order they are applied);
    under ``mlp="one_layer"`` no W_mlp{second} or b_mlp{second} (and d_mlp = d_e)."""
    bias = variant.mlp_bias
    s: dict[str, Shape] = {prefix + f"W_mlp{first}": ("d_mlp", "d_e")}
    if bias:
        s[prefix + f"b_mlp{first}"] = ("d_mlp",)
    if variant.mlp == "gated":
        s[prefix + f"W_mlp{first}_lin"] = ("d_mlp", "d_e")
        if bias:
            s[prefix + f"b_mlp{first}_lin"] = ("d_mlp",)
    for k in range(variant.mlp_depth - 1):
        s[prefix + f"mlp_hidden.{k}.W"] = ("d_mlp", "d_mlp")
        if bias:
            s[prefix + f"mlp_hidden.{k}.b"] = ("d_mlp",)
    if variant.mlp != "one_layer":
        s[prefix + f"W_mlp{second}"] = ("d_e", "d_mlp")
        if bias:
            s[prefix + f"b_mlp{second}"] = ("d_e",)
    return s


def layer_schema(H: int, variant: VariantSet, prefix: str = "", arch: str = "gpt2") -> dict[str, Shape]:
    """LayerParams (encoder, BERT and GPT-2 layers), in the paper's order. ``residual`` is read by the
    GPT-2 layer alone (``arch``): its shared-norm form has no γ², β²."""
    s = mh_attention_schema(H, variant.attn_bias, "d_e", "d_e", "d_attn", "d_mid", "d_e", prefix + "attn.",
                            query_group(H, variant), variant.attn_bias_at, variant.qk_norm == "rms")
    s.update(norm_schema(variant, prefix + "gamma1", prefix + "beta1"))
    s.update(mlp_schema(variant, "1", "2", prefix))
    if variant.residual != "parallel_shared" or arch != "gpt2":  # GPT-J's one shared norm has no γ², β²
        s.update(norm_schema(variant, prefix + "gamma2", prefix + "beta2"))
    s.update(sandwich_schema(variant, prefix, (1, 2)))
    return s


def sandwich_schema(variant: VariantSet, prefix: str, blocks: tuple[int, ...]) -> dict[str, Shape]:
    """γ{k}_out/β{k}_out of each block k's output norm under ``norm_placement="sandwich"`` (as
    ``norm_schema`` gives them for the variant's norm and affine), after every other parameter of
    the layer: the draws of the others are as under any other placement. Empty otherwise."""
    s: dict[str, Shape] = {}
    if variant.norm_placement == "sandwich":
        for k in blocks:
            s.update(norm_schema(variant, f"{prefix}gamma{k}_out", f"{prefix}beta{k}_out"))
    return s


def decoder_layer_schema(H: int, variant: VariantSet, prefix: str = "") -> dict[str, Shape]:
    b = variant.attn_bias
    qk = variant.qk_norm == "rms"
    s = mh_attention_schema(H, b, "d_e", "d_e", "d_attn", "d_mid", "d_e", prefix + "self_attn.",
                            query_group(H, variant), variant.attn_bias_at, qk)
    s.update(norm_schema(variant, prefix + "gamma3", prefix + "beta3"))
    s.update(mh_attention_schema(H, b, "d_e", "d_e", "d_attn", "d_mid", "d_e", prefix + "cross_attn.",
                                 query_group(H, variant), variant.attn_bias_at, qk))
    s.update(norm_schema(variant, prefix + "gamma4", prefix + "beta4"))
    s.update(mlp_schema(variant, "3", "4", prefix))
    s.update(norm_schema(variant, prefix + "gamma5", prefix + "beta5"))
    s.update(sandwich_schema(variant, prefix, (3, 4, 5)))
    return s


def embedding_schema(variant: VariantSet,
                     emb_norms: tuple[tuple[str, str], ...] = (("gamma_emb", "beta_emb"),)) -> dict[str, Shape]:
    s: dict[str, Shape] = {"W_e": ("d_e", "N_V")}
    if variant.positions == "learned":
        s["W_p"] = ("d_e", "ell_max")
    if variant.embedding_norm:
        for gamma, beta in emb_norms:
            s.update(norm_schema(variant, gamma, beta))
    return s


def unembedding_schema(variant: VariantSet, d: str = "d_e") -> dict[str, Shape]:
    """W_u ∈ R^{N_V×d} (absent when tied: W_u = W_eᵀ) and b_u under ``logit_bias``."""
    s: dict[str, Shape] = {}
    if variant.unembedding == "separate":
        s["W_u"] = ("N_V", d)
    if variant.logit_bias:
        s["b_u"] = ("N_V",)
    return s
