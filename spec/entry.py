"""What a registry entry declares (``Entry``, ``TensorSpec``) and the helpers
the entry lists share (switch groups, hyperparameter checks, model schemas).

Entries are written with keyword arguments (``Entry(name=..., ...)``; the
dataclass is keyword-only). Symbolic shapes use hyperparameter names;
``"H*d_mid"`` is a product and ``"ell_max-1"`` a difference with an integer.
A tensor's kind is a ``Kind`` (a ``StrEnum``: ``Kind.TOKEN == "token"``).
Input kinds:

- ``real``: floats (activations, parameters-like inputs);
- ``token``: an ID in [0, N_V); ``position``: in [0, ell_max);
- ``mask``: boolean, True = may attend, indexed [t_z, t_x];
- ``flag``: boolean per position (ETraining's masked positions);
- ``padding``: boolean per position, True = a real token, False = padding
  (masked as a key in every attention; Hugging Face's ``attention_mask``);
- ``length``: a sequence length in [1, the padded width];
- ``variate``: a uniform variate in [0, 1);
- ``probability``: a real in [0, 1]; ``distribution``: a vector of reals ≥ 0
  with a positive sum;
- ``rate``: a finite real (SGD's η); ``temperature``: a real τ ≥ 0, inf allowed.

Output kinds: ``real`` (judged with a tolerance), ``mask`` and ``bool`` and
``int`` (exact), ``token`` (sampled: exact up to CDF boundaries, see the
``trace`` hook).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Mapping, Optional

from . import params as P
from .errors import SpecError
from .params import Shape
from .refusals import Refusal, declared
from .variants import SWITCHES, VariantSet

__all__ = ["Entry", "Hyper", "Kind", "Refusal", "TensorSpec"]

Hyper = Mapping[str, int]


class Kind(StrEnum):
    """What the values of an input or output are (see the module docstring).

    A ``StrEnum``: ``Kind.TOKEN == "token"``, so plugins that compare kinds
    with strings keep working; inside ftspec, compare with the members."""

    REAL = "real"
    TOKEN = "token"
    POSITION = "position"
    MASK = "mask"
    FLAG = "flag"
    PADDING = "padding"
    LENGTH = "length"
    VARIATE = "variate"
    PROBABILITY = "probability"
    DISTRIBUTION = "distribution"
    RATE = "rate"
    TEMPERATURE = "temperature"
    BOOL = "bool"
    INT = "int"


#: kinds whose values are reals (rounded to the case's dtype; judged with a tolerance when outputs)
REAL_KINDS = frozenset({Kind.REAL, Kind.VARIATE, Kind.PROBABILITY, Kind.DISTRIBUTION, Kind.RATE,
                        Kind.TEMPERATURE})
#: kinds whose values are integers (token IDs, positions, lengths, counts)
INTEGER_KINDS = frozenset({Kind.TOKEN, Kind.POSITION, Kind.LENGTH, Kind.INT})
#: kinds whose values are booleans
BOOLEAN_KINDS = frozenset({Kind.MASK, Kind.FLAG, Kind.PADDING, Kind.BOOL})


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: Shape
    kind: Kind = Kind.REAL
    doc: str = ""
    #: for ``length`` inputs: the hyperparameter (padded width) bounding them
    bound: str = ""
    #: for real outputs: ``"log"`` where the output is a softmax's (an exponential's), so that a
    #: rounding error of its argument moves it by a factor: its tolerance is then also taken on
    #: the log scale (conformance/core/tolerances.py, docs/tolerances.md "Probabilities")
    scale: str = "linear"

    def __post_init__(self) -> None:
        try:  # a plain string is accepted and stored as its member; an unknown one is refused
            object.__setattr__(self, "kind", Kind(self.kind))
        except ValueError:
            raise ValueError(f"TensorSpec {self.name!r}: kind {self.kind!r} is not one of "
                             f"{[k.value for k in Kind]}") from None
        if self.scale not in ("linear", "log"):
            raise ValueError(f"TensorSpec {self.name!r}: scale {self.scale!r} is not 'linear' or 'log'")

    @property
    def is_real(self) -> bool:
        return self.kind in REAL_KINDS


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One algorithm of the registry (see the module docstring for kinds)."""

    name: str
    paper_name: str
    number: Optional[int]
    lines: str
    family: str  # component | layer | architecture | training | inference
    summary: str
    hyper: tuple[str, ...]
    #: a small size for every name of ``hyper``: the default of fixed cases and of the fixtures
    #: (``conformance/core/values.py``'s ``DEFAULT_HYPER``); dimensions a swap would confuse differ
    sizes: Mapping[str, int]
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
    #: outputs that depend on the configuration (gradients: one per parameter)
    output_schema: Optional[Callable[[Hyper, VariantSet], tuple[TensorSpec, ...]]] = None
    #: whether a leading batch axis on the inputs is part of the contract
    batchable: bool = True
    #: for sampled outputs: (inputs, params, hyper, variant, produced outputs) ->
    #: one record per sampling step, {"kind": "cdf"|"argmax"|"uniform",
    #: "values": [...], "u": variate, "token": the produced token}; the
    #: harness checks each produced token against the spec's distribution
    #: given the same prefix
    trace: Optional[Callable[..., list[dict[str, Any]]]] = None
    #: what the spec refuses (``spec/refusals.py``): given here, the refusals of the entry's own
    #: conditions (zero variance without ε, an empty query, ...); ``__post_init__`` puts first the
    #: ones its declarations imply (its input kinds' ranges, its parameter shapes), so after
    #: construction this is every refusal of the entry, which implementations must share (not
    #: compared: the declared ones are made afresh, as closures, by every construction)
    refusals: tuple[Refusal, ...] = field(default=(), compare=False)
    #: switches of ``switches`` this entry reads only under other switches' values, {switch: {other:
    #: value}} (as ``variants.READ_WITH`` says for every entry; spec 2.12): a causal self-attention's
    #: norm switches, read by its QK-norm alone (``QK_NORM_READ_WITH``); T5's bucket parameters, read under
    #: rel_bias="t5_buckets" alone (``REL_BIAS_READ_WITH``, spec 2.13). Where the condition fails the
    #: switch changes nothing here: the strategies draw it with the condition, projections drop it
    read_with: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.sizes) != set(self.hyper):
            raise ValueError(f"Entry {self.name!r}: sizes has {sorted(self.sizes)}, hyper has {sorted(self.hyper)}")
        implied = [c for c, needs in ((_rotary_width, ("rotary", "d_attn")), (_whole_groups, ("kv_group", "H")))
                   if needs[0] in self.switches and needs[1] in self.hyper]
        if implied:  # conditions the attention switches put on every entry that has them
            object.__setattr__(self, "check", all_of(*([self.check] if self.check else []), *implied))
        object.__setattr__(self, "refusals", declared(self) + tuple(self.refusals))

    @property
    def title(self) -> str:
        num = f"Algorithm {self.number}" if self.number else "Supplement"
        return f"{num}: {self.paper_name} ({self.lines})"

    def output_specs(self, hyper: Hyper, variant: VariantSet) -> tuple[TensorSpec, ...]:
        return self.output_schema(hyper, variant) if self.output_schema else self.outputs

    def output_shapes(self, hyper: Hyper, variant: Optional[VariantSet] = None) -> dict[str, tuple[int, ...]]:
        specs = self.output_specs(hyper, variant) if variant is not None else self.outputs
        return {o.name: P.resolve_shape(o.shape, hyper) for o in specs}

    def unread(self, variant: VariantSet) -> frozenset[str]:
        """The switches of ``switches`` that ``variant`` leaves unread here (``read_with``'s conditions
        that fail): at a causal self-attention under qk_norm="none", ε, its placement and the gain."""
        return frozenset(s for s, needs in self.read_with.items()
                         if any(getattr(variant, k) != v for k, v in needs.items()))

    def input_shapes(self, hyper: Hyper) -> dict[str, tuple[int, ...]]:
        return {i.name: P.resolve_shape(i.shape, hyper) for i in self.inputs}

    def param_shapes(self, hyper: Hyper, variant: VariantSet) -> dict[str, tuple[int, ...]]:
        return {k: P.resolve_shape(s, hyper) for k, s in self.param_schema(hyper, variant).items()}


# --------------------------------------------------------------------------
# switch groups
# --------------------------------------------------------------------------

#: Algorithm 3's switches (one query, no positions)
BASIC_ATTENTION = frozenset({"attn_scale", "scale_placement", "attn_bias"})
#: Algorithm 4's: RoPE rotates Q and K by their columns' positions; a soft cap on the scaled scores
ATTENTION = BASIC_ATTENTION | {"rotary", "rope_base", "rotary_fraction", "rope_scaling", "attn_softcap"}
#: Algorithm 5's: key/value heads shared by groups of query heads
MH_ATTENTION = ATTENTION | {"kv_group", "kv_order", "kv_heads", "attn_bias_at"}
NORM_LN = frozenset({"epsilon", "epsilon_placement", "variance", "affine", "norm_gain"})
NORM_ANY = NORM_LN | {"norm"}
#: QK-norm (Qwen3, Gemma 3) and the norm switches it reads: ε, its placement, the gain γ or 1 + γ
QK_NORM = frozenset({"qk_norm", "epsilon", "epsilon_placement", "norm_gain"})
#: a layer's: QK-norm with every norm switch, each read by the layer's own norms too
LAYER = MH_ATTENTION | NORM_ANY | {"norm_placement", "activation", "mlp_bias", "mlp_depth", "mlp"} | QK_NORM
#: a causal self-attention's QK-norm (spec 2.12: Qwen3Attention and Gemma3Attention certified alone): the
#: entry has no norm of its own, so the norm switches are read under qk_norm="rms" alone (``Entry.read_with``)
QK_NORM_READ_WITH: Mapping[str, Mapping[str, Any]] = {s: {"qk_norm": "rms"} for s in sorted(QK_NORM - {"qk_norm"})}
EMBEDDING = frozenset({"positions", "embedding_scale", "embedding_norm"}) | NORM_ANY
ARCHITECTURE = LAYER | EMBEDDING | {"final_norm", "unembedding", "logit_bias", "logit_softcap"}
#: where a causal self-attention is computed: the sliding window narrows its mask, ALiBi's position
#: bias is added to its scores (listed only by the entries that have one: a bidirectional layer has
#: no window to read, and ALiBi is defined for causal self-attention alone; the mask entry lists the
#: window only)
CAUSAL = frozenset({"window", "position_bias"})
#: the pre-LN decoder layer's wiring (GPT-NeoX, GPT-J, Falcon): listed by the GPT-2 layer and the
#: decoder-only models (the paper's encoder and BERT layers are post-LN, where it is not defined)
PARALLEL = frozenset({"residual"})
#: local (sliding-window) and global layers, and the local layers' RoPE base (Gemma 2 and 3): listed by the
#: decoder-only models alone, the one stack with a window and several layers of Gemma's kind
#: (``architectures.layer_variant``); the encoder-decoder's causal stack keeps one window for all its layers
LAYER_TYPES = frozenset({"global_every", "rope_local_base"})
#: a sparse mixture of experts' conventions (spec 2.11): read by ``moe_mlp`` alone
MOE = frozenset({"moe_topk_norm", "moe_shared"})
#: T5's bucketed relative position bias and its bucket parameters (spec 2.13): read by the self-attention
#: entries, bidirectional and causal, and the layers (a T5 stack's first layer, ``T5Block(config,
#: has_relative_attention_bias=True)``), each holding the table (``rel_bias``, ``attn.rel_bias``,
#: ``self_attn.rel_bias``), and by the encoder-decoder's forward entries, whose stacks each share their first
#: layer's table (``enc_layers.0.attn.rel_bias``, ``dec_layers.0.self_attn.rel_bias``: T5Stack, issue 38); not
#: by cross-attention (T5's has none), nor by the decoder-only and encoder-only models (not stated yet)
REL_BIAS = frozenset({"rel_bias", "rel_buckets", "rel_max_distance"})
#: the bucket parameters are read under rel_bias="t5_buckets" alone (``Entry.read_with``)
REL_BIAS_READ_WITH: Mapping[str, Mapping[str, Any]] = {s: {"rel_bias": "t5_buckets"}
                                                       for s in sorted(REL_BIAS - {"rel_bias"})}
#: where a padding mask meets positions: the position of a token counted by its index or among the real
#: tokens (OPT's learned positions, BLOOM's ALiBi). Listed by the padded models alone (Algorithms 9 and 10
#: with ``pad``), where positions are embedded; the padded layers keep index distances
PAD_POSITIONS = frozenset({"pad_positions"})
#: the encoder-decoder's position tables: one W_p for source and target (paper) or a second W_p_dec for the
#: target (BART). Listed by Algorithm 8's forward entries alone (``ed_transformer``, ``padded_ed_transformer``),
#: read under learned positions alone (``ED_POSITIONS_READ_WITH``); its training and inference entries keep the
#: paper's one table (their gradients of a second table are not stated yet)
ED_POSITIONS = frozenset({"ed_positions"})
ED_POSITIONS_READ_WITH: Mapping[str, Mapping[str, Any]] = {"ed_positions": {"positions": "learned"}}
#: LongRoPE's per-pair factors (``rope_factors``, spec 2.17: Phi-3, Phi-3.5), parameters of the attention: listed
#: by the causal self-attention entries, the GPT-2 layers and the decoder-only forward models (Phi3Attention,
#: Phi3DecoderLayer, Phi3ForCausalLM), each holding them (``rope_ext``, ``attn.rope_ext``; a model's shared by
#: its layers); not by the entries whose gradients would need theirs (training) nor the encoders (no family)
ROPE_FACTORS = frozenset({"rope_factors"})
#: under longrope the factors replace rope_scaling, which is read under rope_factors="none" alone
ROPE_FACTORS_READ_WITH: Mapping[str, Mapping[str, Any]] = {"rope_scaling": {"rope_factors": "none"}}
#: T5 v1.0's d_e^(−1/2) on the decoder's last columns before its tied head (``unembedding_scale``, issue 38):
#: listed by Algorithm 8's forward entries alone, as ``ED_POSITIONS``
ED_HEAD = frozenset({"unembedding_scale"})
assert ARCHITECTURE | CAUSAL | PARALLEL | LAYER_TYPES | MOE | REL_BIAS | PAD_POSITIONS | ED_POSITIONS | ED_HEAD \
    | ROPE_FACTORS | {"empty_query", "causal_alignment"} == set(SWITCHES)


# --------------------------------------------------------------------------
# hyperparameter checks
# --------------------------------------------------------------------------

def no_params(hyper: Hyper, variant: VariantSet) -> dict[str, Shape]:
    return {}


def tied_needs(d: str) -> Callable[[Hyper, VariantSet], None]:
    def check(hyper: Hyper, variant: VariantSet) -> None:
        if variant.unembedding == "tied" and hyper[d] != hyper["d_e"]:
            raise SpecError(d, f"{d} = d_e = {hyper['d_e']} (unembedding='tied' uses W_u = W_eᵀ)",
                            f"{d} = {hyper[d]}")
    return check


def sequences_fit(*names: str) -> Callable[[Hyper, VariantSet], None]:
    def check(hyper: Hyper, variant: VariantSet) -> None:
        for n in names:
            if hyper[n] > hyper["ell_max"]:
                raise SpecError(n, f"a sequence length at most ell_max = {hyper['ell_max']}",
                                f"{n} = {hyper[n]}")
    return check


def all_of(*checks: Callable[[Hyper, VariantSet], None]) -> Callable[[Hyper, VariantSet], None]:
    def check(hyper: Hyper, variant: VariantSet) -> None:
        for c in checks:
            c(hyper, variant)
    return check


def implied_multiples(entry: "Entry", variant: VariantSet) -> dict[str, int]:
    """Sizes the variant requires to be multiples: d_attn of 2 under RoPE, H of kv_group (the
    conditions ``Entry`` adds to ``check``; strategies draw them so, as for ``Limits.multiple_of``)."""
    out: dict[str, int] = {}
    if "rotary" in entry.switches and "d_attn" in entry.hyper and variant.rotary != "none":
        out["d_attn"] = rotary_multiple(variant.rotary_fraction)
    if "kv_group" in entry.switches and "H" in entry.hyper and variant.kv_group > 1:
        out["H"] = variant.kv_group
    return out


def rotary_rows(d_attn: int, fraction: float) -> int:
    """How many rows of each head's Q and K RoPE rotates: r = ⌊f·d_attn⌋ (Hugging Face's
    ``int(head_dim * partial_rotary_factor)``; GPT-NeoX's ``int(head_size * rotary_pct)``)."""
    return int(d_attn * fraction)


def rotary_multiple(fraction: float) -> int:
    """The least k such that d_attn a multiple of k makes ⌊f·d_attn⌋ even and positive (2 for the
    whole width; 4 for f = 1/2, 8 for 1/4): what the strategies draw d_attn a multiple of. A
    fraction no multiple up to 64 serves (an irrational-looking f) gets 2, and the check refuses."""
    for k in range(2, 65, 2):
        r = rotary_rows(k, fraction)
        if r >= 2 and r % 2 == 0 and all(rotary_rows(m * k, fraction) % 2 == 0 for m in (2, 3)):
            return k
    return 2


def _rotary_width(hyper: Hyper, variant: VariantSet) -> None:
    """RoPE rotates pairs of rows of Q and K: the rotated width r = ⌊f·d_attn⌋ even (RoFormer §3.2.2)
    and at least one pair (``rotary_fraction`` f; f = 1: d_attn even)."""
    if variant.rotary == "none":
        return
    r = rotary_rows(hyper["d_attn"], variant.rotary_fraction)
    if r % 2 or r < 2:
        need = "an even d_attn" if variant.rotary_fraction == 1.0 else \
            f"⌊{variant.rotary_fraction}·d_attn⌋ even and ≥ 2"
        raise SpecError("d_attn", f"{need} (rotary={variant.rotary!r} rotates pairs)",
                        f"d_attn = {hyper['d_attn']}")


def _whole_groups(hyper: Hyper, variant: VariantSet) -> None:
    """Grouped-query attention: H query heads in groups of G = kv_group, so G divides H (under
    kv_heads="one" the group is H, and kv_group stays 1: every H)."""
    G = variant.kv_group
    if hyper["H"] % G:
        raise SpecError("H", f"a multiple of kv_group = {G} (query heads per key/value head)",
                        f"H = {hyper['H']}")


def norm_dims(*dims: str, layer_norm_only: bool = False) -> Callable[[Hyper, VariantSet], None]:
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

def ed_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    s = P.embedding_schema(v, (("gamma_emb_enc", "beta_emb_enc"), ("gamma_emb_dec", "beta_emb_dec")))
    if "W_p" in s and v.ed_positions == "separate":  # the target's own learned table (BART's decoder)
        s["W_p_dec"] = s["W_p"]
    for l in range(hyper["L_enc"]):
        s.update(P.layer_schema(hyper["H"], v, f"enc_layers.{l}.", arch="ed_encoder"))
    for l in range(hyper["L_dec"]):
        s.update(P.decoder_layer_schema(hyper["H"], v, f"dec_layers.{l}."))
    if v.resolved_final_norm("ed_encoder"):
        s.update(P.norm_schema(v, "gamma_enc", "beta_enc"))
        s.update(P.norm_schema(v, "gamma_dec", "beta_dec"))
    s.update(P.unembedding_schema(v))
    if v.rel_bias == "t5_buckets":  # T5's two tables, one per stack in its first layer (T5Stack's block 0), last:
        # every other parameter is drawn as under rel_bias="none"
        for name, stack in (("enc_layers.0.attn.rel_bias", "L_enc"), ("dec_layers.0.self_attn.rel_bias", "L_dec")):
            if hyper[stack] > 0:
                s[name] = (v.rel_buckets, "H")
    return s


def e_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    s = P.embedding_schema(v)
    for l in range(hyper["L"]):
        s.update(P.layer_schema(hyper["H"], v, f"layers.{l}.", arch="bert"))
    if v.resolved_final_norm("bert"):
        s.update(P.norm_schema(v, "gamma_final", "beta_final"))
    s["W_f"] = ("d_f", "d_e")
    s["b_f"] = ("d_f",)
    s.update(P.norm_schema(v, "gamma", "beta", d="d_f"))
    s.update(P.unembedding_schema(v, d="d_f"))
    return s


def _one_stack_schema(hyper: Hyper, v: VariantSet, arch: str) -> dict[str, Shape]:
    """``DTransformerParams``' names: W_e, W_p, ``layers.{l}.*``, γ/β of ``arch``'s final norm, W_u, b_u."""
    s = P.embedding_schema(v)
    for l in range(hyper["L"]):
        s.update(P.layer_schema(hyper["H"], v, f"layers.{l}.", arch=arch))
    if v.resolved_final_norm(arch):
        s.update(P.norm_schema(v, "gamma", "beta"))
    s.update(P.unembedding_schema(v))
    return s


def d_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    return _one_stack_schema(hyper, v, "gpt2")


def next_token_schema(hyper: Hyper, v: VariantSet) -> dict[str, Shape]:
    """The encoder next-token predictor: d_schema's names, with Algorithm 8's encoder layers and final norm."""
    return _one_stack_schema(hyper, v, "ed_encoder")


ED_HYPER = ("N_V", "ell_max", "L_enc", "L_dec", "H", "d_e", "d_attn", "d_mid", "d_mlp")
E_HYPER = ("N_V", "ell_max", "L", "H", "d_e", "d_attn", "d_mid", "d_mlp", "d_f")
D_HYPER = ("N_V", "ell_max", "L", "H", "d_e", "d_attn", "d_mid", "d_mlp")
