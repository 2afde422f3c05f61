"""The registry of algorithms: one entry per paper algorithm and per layer.

Conformance tests, fixtures and the CLI iterate over ``REGISTRY``; nothing
else lists the algorithms. An entry names the algorithm (``name``, the key
implementations use), its paper number and lines, its hyperparameters, its
inputs and outputs with symbolic shapes, its parameter schema (a function of
the hyperparameters and the variant set), the variant switches that affect
it, and the spec function that computes it (``reference``).

Symbolic shapes use hyperparameter names; ``"H*d_mid"`` is a product. Input
kinds: ``real`` (floats), ``token`` (ID in [0, N_V)), ``position`` (in
[0, ell_max)), ``mask`` (0/1, 1 = may attend).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from . import params as P
from .architectures import d_transformer, e_transformer, ed_transformer
from .attention import attention, basic_single_query_attention, mh_attention, unidirectional_mask
from .embedding import embed, positional_embedding, sinusoidal_paper, sinusoidal_vaswani, token_embedding
from .errors import SpecError
from .layers import bert_layer, decoder_layer, encoder_layer, gpt2_layer
from .normalization import norm_columns
from .params import Shape
from .unembedding import unembed, unembedding_matrix
from .variants import SWITCHES, VariantSet

__all__ = ["Entry", "REGISTRY", "TensorSpec", "entry"]

Hyper = Mapping[str, int]


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: Shape
    kind: str = "real"
    doc: str = ""


@dataclass(frozen=True)
class Entry:
    name: str
    paper_name: str
    number: Optional[int]
    lines: str
    family: str  # component | layer | architecture (training, inference later)
    summary: str
    hyper: tuple[str, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    param_schema: Callable[[Hyper, VariantSet], dict[str, Shape]]
    switches: frozenset[str]
    reference: Callable[[Mapping[str, Any], Mapping[str, Any], Hyper, VariantSet], dict[str, Any]]
    #: hyperparameters read from parameter names (layer and head counts)
    structural: tuple[str, ...] = ()
    #: extra conditions on hyperparameters and variant (raise SpecError)
    check: Optional[Callable[[Hyper, VariantSet], None]] = None
    #: hyperparameters with a lower bound other than 1
    minimum: Mapping[str, int] = field(default_factory=dict)

    @property
    def title(self) -> str:
        num = f"Algorithm {self.number}" if self.number else "Supplement"
        return f"{num}: {self.paper_name} ({self.lines})"

    def output_shapes(self, hyper: Hyper) -> dict[str, tuple[int, ...]]:
        return {o.name: P.resolve_shape(o.shape, hyper) for o in self.outputs}

    def input_shapes(self, hyper: Hyper) -> dict[str, tuple[int, ...]]:
        return {i.name: P.resolve_shape(i.shape, hyper) for i in self.inputs}

    def param_shapes(self, hyper: Hyper, variant: VariantSet) -> dict[str, tuple[int, ...]]:
        return {k: P.resolve_shape(s, hyper) for k, s in self.param_schema(hyper, variant).items()}


# --------------------------------------------------------------------------
# switch groups
# --------------------------------------------------------------------------

ATTENTION = frozenset({"attn_scale", "scale_placement", "attn_bias"})
NORM_LN = frozenset({"epsilon", "epsilon_placement", "variance", "affine"})
NORM_ANY = NORM_LN | {"norm"}
LAYER = ATTENTION | NORM_ANY | {"norm_placement", "activation", "mlp_bias"}
EMBEDDING = frozenset({"positions", "embedding_scale", "embedding_norm"}) | NORM_ANY
ARCHITECTURE = LAYER | EMBEDDING | {"final_norm", "unembedding", "logit_bias"}
assert ARCHITECTURE | {"empty_query", "causal_alignment"} == set(SWITCHES)


def _no_params(hyper: Hyper, variant: VariantSet) -> dict[str, Shape]:
    return {}


def _tied_needs(d: str) -> Callable[[Hyper, VariantSet], None]:
    def check(hyper: Hyper, variant: VariantSet) -> None:
        if variant.unembedding == "tied" and hyper[d] != hyper["d_e"]:
            raise SpecError(d, f"{d} = d_e = {hyper['d_e']} (unembedding='tied' uses W_u = W_eᵀ)",
                            f"{d} = {hyper[d]}")
    return check


def _sequences_fit(*names: str) -> Callable[[Hyper, VariantSet], None]:
    def check(hyper: Hyper, variant: VariantSet) -> None:
        for n in names:
            if hyper[n] > hyper["ell_max"]:
                raise SpecError(n, f"a sequence length at most ell_max = {hyper['ell_max']}",
                                f"{n} = {hyper[n]}")
    return check


def _all(*checks: Callable[[Hyper, VariantSet], None]) -> Callable[[Hyper, VariantSet], None]:
    def check(hyper: Hyper, variant: VariantSet) -> None:
        for c in checks:
            c(hyper, variant)
    return check


def _norm_dims(*dims: str, layer_norm_only: bool = False) -> Callable[[Hyper, VariantSet], None]:
    """Unbiased variance divides by d - 1: every normalised width needs d ≥ 2."""
    def check(hyper: Hyper, variant: VariantSet) -> None:
        if variant.variance == "unbiased" and (layer_norm_only or variant.norm == "layer_norm"):
            for d in dims:
                if hyper[d] < 2:
                    raise SpecError(d, f"{d} ≥ 2 (unbiased variance divides by {d} − 1)", f"{d} = {hyper[d]}")
    return check


# --------------------------------------------------------------------------
# parameter schemas of the architectures
# --------------------------------------------------------------------------


def _ed_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    s = P.embedding_schema(v, (("gamma_emb_enc", "beta_emb_enc"), ("gamma_emb_dec", "beta_emb_dec")))
    for l in range(hyper["L_enc"]):
        s.update(P.layer_schema(hyper["H"], v, f"enc_layers.{l}."))
    for l in range(hyper["L_dec"]):
        s.update(P.decoder_layer_schema(hyper["H"], v, f"dec_layers.{l}."))
    if v.resolved_final_norm("ed_encoder"):
        s.update(P.norm_schema(v, "gamma_enc", "beta_enc"))
        s.update(P.norm_schema(v, "gamma_dec", "beta_dec"))
    s.update(P.unembedding_schema(v))
    return s


def _e_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    s = P.embedding_schema(v)
    for l in range(hyper["L"]):
        s.update(P.layer_schema(hyper["H"], v, f"layers.{l}."))
    if v.resolved_final_norm("bert"):
        s.update(P.norm_schema(v, "gamma_final", "beta_final"))
    s["W_f"] = ("d_f", "d_e")
    s["b_f"] = ("d_f",)
    s.update(P.norm_schema(v, "gamma", "beta", d="d_f"))
    s.update(P.unembedding_schema(v, d="d_f"))
    return s


def _d_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    s = P.embedding_schema(v)
    for l in range(hyper["L"]):
        s.update(P.layer_schema(hyper["H"], v, f"layers.{l}."))
    if v.resolved_final_norm("gpt2"):
        s.update(P.norm_schema(v, "gamma", "beta"))
    s.update(P.unembedding_schema(v))
    return s


def _unembedding_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    s = P.unembedding_schema(v)
    if v.unembedding == "tied":
        s = {"W_e": ("d_e", "N_V"), **s}
    return s


# --------------------------------------------------------------------------
# the entries
# --------------------------------------------------------------------------

_X = TensorSpec
_ENTRIES: list[Entry] = [
    Entry(
        "token_embedding", "Token embedding", 1, "line 1", "component",
        "e ← W_e[:, v]: column v of the embedding matrix.",
        ("N_V", "d_e"),
        (_X("v", (), "token", "token ID"),),
        (_X("e", ("d_e",)),),
        lambda h, v: {"W_e": ("d_e", "N_V")},
        frozenset(),
        lambda i, p, h, v: {"e": token_embedding(i["v"], p["W_e"])},
    ),
    Entry(
        "positional_embedding", "Positional embedding", 2, "line 1", "component",
        "e_p ← W_p[:, t]: column t of the learned position matrix.",
        ("ell_max", "d_e"),
        (_X("t", (), "position", "position"),),
        (_X("e", ("d_e",)),),
        lambda h, v: {"W_p": ("d_e", "ell_max")},
        frozenset(),
        lambda i, p, h, v: {"e": positional_embedding(i["t"], p["W_p"])},
    ),
    Entry(
        "sinusoidal_paper", "Sinusoidal positions (paper)", 2, "fixed alternative", "component",
        "W_p[2i−1, t] = sin(t / ℓ_max^{2i/d_e}), W_p[2i, t] = cos(…), 1-based rows and t.",
        ("d_e", "ell_max"),
        (),
        (_X("W_p", ("d_e", "ell_max")),),
        _no_params,
        frozenset(),
        lambda i, p, h, v: {"W_p": sinusoidal_paper(h["d_e"], h["ell_max"])},
    ),
    Entry(
        "sinusoidal_vaswani", "Sinusoidal positions (Vaswani et al.)", 2, "fixed alternative", "component",
        "W_p[2i, t] = sin(t / 10000^{2i/d_e}), W_p[2i+1, t] = cos(…), 0-based rows and t.",
        ("d_e", "ell_max"),
        (),
        (_X("W_p", ("d_e", "ell_max")),),
        _no_params,
        frozenset(),
        lambda i, p, h, v: {"W_p": sinusoidal_vaswani(h["d_e"], h["ell_max"])},
    ),
    Entry(
        "embedding", "Sequence embedding", None, "Algorithms 8-10, lines 1-3", "component",
        "X ← [W_e[:, x[t]] + W_p[:, t]] for every position t.",
        ("N_V", "d_e", "ell", "ell_max"),
        (_X("x", ("ell",), "token", "token sequence"),),
        (_X("X", ("d_e", "ell")),),
        lambda h, v: P.embedding_schema(v),
        EMBEDDING,
        lambda i, p, h, v: {"X": embed(i["x"], p["W_e"], p.get("W_p"), ell_max=h["ell_max"], variant=v,
                                       gamma=p.get("gamma_emb"), beta=p.get("beta_emb"))},
        check=_all(_sequences_fit("ell"), _norm_dims("d_e")),
    ),
    Entry(
        "basic_single_query_attention", "Basic single-query attention", 3, "lines 1-5", "component",
        "ṽ = Σ_t α_t v_t with α = softmax over t of qᵀk_t / √d_attn.",
        ("d_in", "d_attn", "d_out", "T"),
        (_X("e", ("d_in",), doc="current token"), _X("E", ("d_in", "T"), doc="context tokens e_t as columns")),
        (_X("v_tilde", ("d_out",)),),
        lambda h, v: P.attention_schema(v.attn_bias, "d_in", "d_in", "d_attn", "d_out"),
        ATTENTION,
        lambda i, p, h, v: {"v_tilde": basic_single_query_attention(
            i["e"], i["E"], P.from_flat(P.AttentionParams, p), variant=v)},
    ),
    Entry(
        "attention", "Attention", 4, "lines 1-6", "component",
        "Ṽ = V softmax(KᵀQ / √d_attn) with masked scores set to −∞.",
        ("d_x", "d_z", "d_attn", "d_out", "ell_x", "ell_z"),
        (_X("X", ("d_x", "ell_x"), doc="primary sequence"), _X("Z", ("d_z", "ell_z"), doc="context sequence"),
         _X("Mask", ("ell_z", "ell_x"), "mask", "Mask[t_z, t_x] = 1: t_x may attend to t_z")),
        (_X("V_tilde", ("d_out", "ell_x")),),
        lambda h, v: P.attention_schema(v.attn_bias),
        ATTENTION | {"empty_query"},
        lambda i, p, h, v: {"V_tilde": attention(
            i["X"], i["Z"], P.from_flat(P.AttentionParams, p), i["Mask"], variant=v)},
    ),
    Entry(
        "mh_attention", "MHAttention", 5, "lines 1-4", "component",
        "Ṽ = W_o [Y^1; …; Y^H] + b_o 1ᵀ, each Y^h an Attention head.",
        ("H", "d_x", "d_z", "d_attn", "d_mid", "d_out", "ell_x", "ell_z"),
        (_X("X", ("d_x", "ell_x")), _X("Z", ("d_z", "ell_z")),
         _X("Mask", ("ell_z", "ell_x"), "mask", "Mask[t_z, t_x] = 1: t_x may attend to t_z")),
        (_X("V_tilde", ("d_out", "ell_x")),),
        lambda h, v: P.mh_attention_schema(h["H"], v.attn_bias),
        ATTENTION | {"empty_query"},
        lambda i, p, h, v: {"V_tilde": mh_attention(
            i["X"], i["Z"], P.from_flat(P.MHAttentionParams, p), i["Mask"], variant=v)},
        structural=("H",),
    ),
    Entry(
        "unidirectional_mask", "Unidirectional mask", 4, "Mask[t_z, t_x] = [[t_z ≤ t_x]]", "component",
        "The causal mask; its alignment when ℓ_z ≠ ℓ_x is a variant.",
        ("ell_z", "ell_x"),
        (),
        (_X("Mask", ("ell_z", "ell_x"), "mask"),),
        _no_params,
        frozenset({"causal_alignment"}),
        lambda i, p, h, v: {"Mask": unidirectional_mask(h["ell_z"], h["ell_x"], variant=v)},
    ),
    Entry(
        "layer_norm", "layer_norm", 6, "lines 1-3, per column", "component",
        "ê = (e − m) / √v ⊙ γ + β for every column e of X.",
        ("d_e", "ell"),
        (_X("X", ("d_e", "ell")),),
        (_X("X_hat", ("d_e", "ell")),),
        lambda h, v: P.norm_schema(v, "gamma", "beta", norm="layer_norm"),
        NORM_LN,
        lambda i, p, h, v: {"X_hat": norm_columns(i["X"], p.get("gamma"), p.get("beta"), v, "layer_norm")},
        check=_norm_dims("d_e", layer_norm_only=True),
    ),
    Entry(
        "rms_norm", "RMSnorm", 6, "variant m = 0, β = 0, per column", "component",
        "ê = e / √(Σ e² / d_e) ⊙ γ for every column e of X.",
        ("d_e", "ell"),
        (_X("X", ("d_e", "ell")),),
        (_X("X_hat", ("d_e", "ell")),),
        lambda h, v: P.norm_schema(v, "gamma", "beta", norm="rms_norm"),
        frozenset({"epsilon", "epsilon_placement", "affine"}),
        lambda i, p, h, v: {"X_hat": norm_columns(i["X"], p.get("gamma"), None, v, "rms_norm")},
    ),
    Entry(
        "unembedding", "Unembedding", 7, "line 1, per column", "component",
        "P = softmax(W_u X), column by column.",
        ("N_V", "d_e", "ell"),
        (_X("X", ("d_e", "ell")),),
        (_X("P", ("N_V", "ell")),),
        _unembedding_schema,
        frozenset({"unembedding", "logit_bias"}),
        lambda i, p, h, v: {"P": unembed(i["X"], unembedding_matrix(p.get("W_u"), p.get("W_e"), v), p.get("b_u"))},
    ),
    Entry(
        "encoder_layer", "EDTransformer encoder layer", 8, "lines 5-8", "layer",
        "Post-LN self-attention (Mask ≡ 1) and ReLU MLP.",
        ("H", "d_e", "d_attn", "d_mid", "d_mlp", "ell"),
        (_X("Z", ("d_e", "ell")),),
        (_X("Z", ("d_e", "ell")),),
        lambda h, v: P.layer_schema(h["H"], v),
        LAYER,
        lambda i, p, h, v: {"Z": encoder_layer(i["Z"], P.from_flat(P.LayerParams, p), variant=v)},
        structural=("H",),
        check=_norm_dims("d_e"),
    ),
    Entry(
        "decoder_layer", "EDTransformer decoder layer", 8, "lines 14-19", "layer",
        "Post-LN causal self-attention, cross-attention to Z, ReLU MLP.",
        ("H", "d_e", "d_attn", "d_mid", "d_mlp", "ell_x", "ell_z"),
        (_X("X", ("d_e", "ell_x"), doc="decoder stream"), _X("Z", ("d_e", "ell_z"), doc="encoder output")),
        (_X("X", ("d_e", "ell_x")),),
        lambda h, v: P.decoder_layer_schema(h["H"], v),
        LAYER,
        lambda i, p, h, v: {"X": decoder_layer(i["X"], i["Z"], P.from_flat(P.DecoderLayerParams, p), variant=v)},
        structural=("H",),
        check=_norm_dims("d_e"),
    ),
    Entry(
        "bert_layer", "ETransformer layer", 9, "lines 5-8", "layer",
        "Post-LN self-attention (Mask ≡ 1) and GELU MLP.",
        ("H", "d_e", "d_attn", "d_mid", "d_mlp", "ell"),
        (_X("X", ("d_e", "ell")),),
        (_X("X", ("d_e", "ell")),),
        lambda h, v: P.layer_schema(h["H"], v),
        LAYER,
        lambda i, p, h, v: {"X": bert_layer(i["X"], P.from_flat(P.LayerParams, p), variant=v)},
        structural=("H",),
        check=_norm_dims("d_e"),
    ),
    Entry(
        "gpt2_layer", "DTransformer layer", 10, "lines 5-8", "layer",
        "Pre-LN causal self-attention and GELU MLP.",
        ("H", "d_e", "d_attn", "d_mid", "d_mlp", "ell"),
        (_X("X", ("d_e", "ell")),),
        (_X("X", ("d_e", "ell")),),
        lambda h, v: P.layer_schema(h["H"], v),
        LAYER,
        lambda i, p, h, v: {"X": gpt2_layer(i["X"], P.from_flat(P.LayerParams, p), variant=v)},
        structural=("H",),
        check=_norm_dims("d_e"),
    ),
    Entry(
        "ed_transformer", "EDTransformer", 8, "lines 1-21", "architecture",
        "Encoder-decoder transformer: P over the next decoder token.",
        ("N_V", "ell_max", "L_enc", "L_dec", "H", "d_e", "d_attn", "d_mid", "d_mlp", "ell_z", "ell_x"),
        (_X("z", ("ell_z",), "token", "source sequence"), _X("x", ("ell_x",), "token", "target sequence")),
        (_X("P", ("N_V", "ell_x")),),
        _ed_schema,
        ARCHITECTURE,
        lambda i, p, h, v: {"P": ed_transformer(i["z"], i["x"], P.from_flat(P.EDTransformerParams, p),
                                                ell_max=h["ell_max"], variant=v)},
        structural=("L_enc", "L_dec", "H"),
        check=_all(_sequences_fit("ell_z", "ell_x"), _norm_dims("d_e")),
    ),
    Entry(
        "e_transformer", "ETransformer", 9, "lines 1-12", "architecture",
        "Encoder-only transformer (BERT): P at every position.",
        ("N_V", "ell_max", "L", "H", "d_e", "d_attn", "d_mid", "d_mlp", "d_f", "ell"),
        (_X("x", ("ell",), "token", "token sequence"),),
        (_X("P", ("N_V", "ell")),),
        _e_schema,
        ARCHITECTURE,
        lambda i, p, h, v: {"P": e_transformer(i["x"], P.from_flat(P.ETransformerParams, p),
                                               ell_max=h["ell_max"], variant=v)},
        structural=("L", "H"),
        check=_all(_sequences_fit("ell"), _tied_needs("d_f"), _norm_dims("d_e", "d_f")),
    ),
    Entry(
        "d_transformer", "DTransformer", 10, "lines 1-11", "architecture",
        "Decoder-only transformer (GPT-2): P over the next token at every position.",
        ("N_V", "ell_max", "L", "H", "d_e", "d_attn", "d_mid", "d_mlp", "ell"),
        (_X("x", ("ell",), "token", "token sequence"),),
        (_X("P", ("N_V", "ell")),),
        _d_schema,
        ARCHITECTURE,
        lambda i, p, h, v: {"P": d_transformer(i["x"], P.from_flat(P.DTransformerParams, p),
                                               ell_max=h["ell_max"], variant=v)},
        structural=("L", "H"),
        check=_all(_sequences_fit("ell"), _norm_dims("d_e")),
    ),
]

REGISTRY: dict[str, Entry] = {e.name: e for e in _ENTRIES}


def entry(name: str) -> Entry:
    try:
        return REGISTRY[name]
    except KeyError:
        raise SpecError("algorithm", f"one of {sorted(REGISTRY)}", repr(name), algorithm="registry") from None
