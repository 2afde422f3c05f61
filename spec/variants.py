"""Variant sets: the conventions on which real transformer code disagrees.

A ``VariantSet`` is an immutable value with one field per switch. The
defaults are the choices of Phuong & Hutter (the preset ``phuong-hutter``).
Switches whose paper choice differs between architectures (norm placement,
final norm, activation) default to ``"paper"``: "as the paper states it for
the algorithm being evaluated"; ``resolved(arch)`` gives the concrete value.

Sources for every non-paper value are in ../shared/CONVENTIONS.md and
``docs/spec.md`` (variant catalogue). This module holds definitions only (no
arithmetic), so implementations may import it without sharing numerics.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass, fields
from typing import Any, Literal, Mapping

__all__ = [
    "FAMILIES",
    "Family",
    "LATER",
    "PAPER",
    "PRESETS",
    "READ_WITH",
    "ROUNDING_ONLY",
    "SAME_MATHEMATICS",
    "SIZES",
    "SOFTCAPS",
    "SWITCHES",
    "Switch",
    "VariantSet",
    "preset",
]

ARCHITECTURES = ("ed_encoder", "ed_decoder", "bert", "gpt2")


@dataclass(frozen=True)
class VariantSet:
    """One choice for every switch (field docs: ``SWITCHES``)."""

    # --- attention -------------------------------------------------------
    attn_scale: Literal["sqrt_d_attn", "sqrt_d_model", "sqrt_d_model_per_head", "none"] = "sqrt_d_attn"
    scale_placement: Literal["scores", "query", "query_key_sqrt"] = "scores"
    attn_bias: bool = True
    attn_bias_at: Literal["all", "qkv", "out"] = "all"
    empty_query: Literal["error", "nan", "zeros", "uniform"] = "error"
    causal_alignment: Literal["top_left", "bottom_right"] = "top_left"
    rotary: Literal["none", "half", "interleaved"] = "none"
    rope_base: float = 10000.0
    rotary_fraction: float = 1.0
    rope_scaling: Literal["none", "linear-2", "linear-8", "llama3"] = "none"
    rope_factors: Literal["none", "longrope"] = "none"
    kv_group: int = 1
    kv_order: Literal["consecutive", "strided"] = "consecutive"
    kv_heads: Literal["grouped", "one"] = "grouped"
    window: int = 0
    global_every: int = 0
    rope_local_base: float = 0.0
    position_bias: Literal["none", "alibi"] = "none"
    rel_bias: Literal["none", "t5_buckets"] = "none"
    rel_buckets: int = 32
    rel_max_distance: int = 128
    qk_norm: Literal["none", "rms"] = "none"
    attn_softcap: float = 0.0
    # --- normalisation ---------------------------------------------------
    norm: Literal["layer_norm", "rms_norm"] = "layer_norm"
    epsilon: float = 0.0
    epsilon_placement: Literal["none", "inside_root", "outside_root"] = "none"
    variance: Literal["biased", "unbiased", "one_pass"] = "biased"
    affine: Literal["scale_shift", "scale", "none"] = "scale_shift"
    norm_gain: Literal["gamma", "one_plus_gamma"] = "gamma"
    # --- blocks ----------------------------------------------------------
    norm_placement: Literal["paper", "post", "pre", "res_post", "sandwich"] = "paper"
    residual: Literal["sequential", "parallel", "parallel_shared"] = "sequential"
    final_norm: Literal["paper", "none", "final"] = "paper"
    embedding_norm: bool = False
    activation: Literal["paper", "relu", "gelu_erf", "gelu_tanh", "silu"] = "paper"
    mlp_bias: bool = True
    mlp_depth: int = 1
    mlp: Literal["plain", "gated", "one_layer"] = "plain"
    # --- embeddings and output -------------------------------------------
    positions: Literal["learned", "sinusoidal_paper", "sinusoidal_vaswani", "sinusoidal_raw_index",
                       "sinusoidal_halves", "none"] = "learned"
    pad_positions: Literal["index", "real"] = "index"
    ed_positions: Literal["shared", "separate"] = "shared"
    embedding_scale: Literal["one", "sqrt_d_e"] = "one"
    unembedding: Literal["separate", "tied"] = "separate"
    unembedding_scale: Literal["one", "inv_sqrt_d_e"] = "one"
    logit_bias: bool = False
    logit_softcap: float = 0.0
    # --- mixture of experts (spec 2.11; read by ``moe_mlp`` alone) -------
    moe_topk_norm: bool = False
    moe_shared: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            choices = SWITCHES[f.name].choices
            if f.name == "epsilon":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"variant switch 'epsilon': expected a float, given {value!r}")
                if not math.isfinite(value) or value < 0:
                    raise ValueError(f"variant switch 'epsilon': expected a finite value >= 0, given {value!r}")
                object.__setattr__(self, "epsilon", float(value))
            elif f.name == "rope_base":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) not in choices:
                    raise ValueError(f"variant switch 'rope_base': expected one of {list(choices)}, "
                                     f"given {value!r}")
                object.__setattr__(self, "rope_base", float(value))
            elif f.name == "global_every":  # any whole number k ≥ 0: the choices are the drawn few
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"variant switch 'global_every': expected a whole number >= 0 (0: every "
                                     f"layer as 'window' says), given {value!r}")
            elif f.name == "rope_local_base":  # 0 (none) or one of rope_base's values: a local layer's rope_base
                bases = SWITCHES["rope_base"].choices
                if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                        float(value) not in (0.0,) + bases:
                    raise ValueError(f"variant switch 'rope_local_base': expected 0 (none) or one of "
                                     f"{list(bases)}, given {value!r}")
                object.__setattr__(self, "rope_local_base", float(value))
            elif f.name == "rotary_fraction":  # any fraction in (0, 1]: the choices are the drawn few
                if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                        not (math.isfinite(value) and 0 < value <= 1):
                    raise ValueError(f"variant switch 'rotary_fraction': expected a number in (0, 1], given {value!r}")
                object.__setattr__(self, "rotary_fraction", float(value))
            elif f.name in SOFTCAPS:  # any cap c ≥ 0 (0: none): the choices are the drawn few
                if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                        not (math.isfinite(value) and value >= 0):
                    raise ValueError(f"variant switch {f.name!r}: expected a finite number >= 0 (0: no cap), "
                                     f"given {value!r}")
                object.__setattr__(self, f.name, float(value))
            elif f.name in SIZES:  # a size: any whole number from its least (the choices are the drawn few)
                if isinstance(value, bool) or not isinstance(value, int) or value < SIZES[f.name]:
                    raise ValueError(f"variant switch {f.name!r}: expected a whole number >= {SIZES[f.name]}, "
                                     f"given {value!r}")
            elif value not in choices or type(value) is not type(choices[0]):
                raise ValueError(
                    f"variant switch {f.name!r}: expected one of {list(choices)}, given {value!r}"
                )
        if self.rel_bias == "t5_buckets" and (self.rel_buckets < 4 or self.rel_max_distance <= self.rel_buckets // 2):
            raise ValueError(
                "variant switches 'rel_buckets'/'rel_max_distance': T5's buckets need num_buckets >= 4 (one exact "
                "bucket per direction when halved) and max_distance above num_buckets // 2 (the causal max_exact: "
                f"ln(max_distance/max_exact) > 0); given rel_buckets={self.rel_buckets!r}, "
                f"rel_max_distance={self.rel_max_distance!r}")
        if self.kv_heads == "one" and (self.kv_group != 1 or self.kv_order != "consecutive"):
            raise ValueError(  # one spelling per set: under "one" the group is H, so neither is read
                "variant switch 'kv_heads': 'one' (one key/value head for every H) takes kv_group 1 and kv_order "
                f"'consecutive', which it does not read; given kv_group={self.kv_group!r}, kv_order={self.kv_order!r}")
        if (self.epsilon_placement == "none") != (self.epsilon == 0.0):
            raise ValueError(
                "variant switches 'epsilon'/'epsilon_placement': an epsilon > 0 needs a placement "
                f"and placement 'none' needs epsilon 0; given epsilon={self.epsilon!r}, "
                f"placement={self.epsilon_placement!r}"
            )

    # --- forms -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_json(self) -> str:
        """Canonical JSON: every switch, keys sorted, no spaces; a switch added after spec 2.0
        (``LATER``) is left out while it holds its default, so every earlier set keeps its hash."""
        data = {k: v for k, v in self.to_dict().items() if not (k in LATER and v == LATER[k])}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> "VariantSet":
        data = json.loads(text) if isinstance(text, str) else dict(text)
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown variant switches: {sorted(unknown)}")
        return cls(**data)

    @functools.cached_property
    def hash(self) -> str:
        """First 16 hex digits of sha256 of the canonical JSON: stable across runs and machines.
        Kept once taken (a set is frozen): the harness keys its caches and checks by it, tens of
        times per example."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    @property
    def name(self) -> str | None:
        """The preset this set equals, if any."""
        for name, v in PRESETS.items():
            if v == self:
                return name
        return None

    def differences(self, base: "VariantSet | None" = None) -> dict[str, Any]:
        base = base or PAPER
        return {k: v for k, v in self.to_dict().items() if getattr(base, k) != v}

    def describe(self) -> str:
        """Preset name, or ``phuong-hutter+switch=value,...``."""
        name = self.name
        if name:
            return name
        diff = ",".join(f"{k}={v}" for k, v in sorted(self.differences().items()))
        return f"phuong-hutter+{diff}"

    def replace(self, **changes: Any) -> "VariantSet":
        return dataclasses.replace(self, **changes)

    # --- the per-architecture switches, made concrete ----------------------
    def resolved_norm_placement(self, arch: str) -> str:
        _check_arch(arch)
        if self.norm_placement != "paper":
            return self.norm_placement
        return "pre" if arch == "gpt2" else "post"

    def resolved_activation(self, arch: str) -> str:
        _check_arch(arch)
        if self.activation != "paper":
            return self.activation
        return "relu" if arch in ("ed_encoder", "ed_decoder") else "gelu_erf"

    def resolved_final_norm(self, arch: str) -> bool:
        """Whether a norm follows the last layer of each stack of ``arch``."""
        _check_arch(arch)
        if self.final_norm == "paper":
            return arch == "gpt2"
        return self.final_norm == "final"


def _check_arch(arch: str) -> None:
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; expected one of {ARCHITECTURES}")


@dataclass(frozen=True)
class Switch:
    name: str
    group: str
    choices: tuple[Any, ...]
    paper: Any
    meaning: str


def _switches() -> dict[str, Switch]:
    s = [
        Switch("attn_scale", "attention", ("sqrt_d_attn", "sqrt_d_model", "sqrt_d_model_per_head", "none"),
               "sqrt_d_attn",
               "score scale: 1/√d_attn (paper), 1/√d_model with d_model the width d_x of the primary "
               "input (seed 004, numeric tutorial), 1/√(d_x/H) with H the heads of the multi-head "
               "attention (H = 1 in Algorithms 3 and 4; d_x/H need not be whole: Gemma 2 27B's "
               "query_pre_attn_scalar = hidden_size/num_attention_heads = 4608/32 = 144 where head_dim "
               "is 128, and the 9B's 3584/16 = 224 where head_dim is 256; Gemma 2 2B sets it to head_dim 256, "
               "which is sqrt_d_attn; transformers "
               "5.24 Gemma2Attention: scaling = query_pre_attn_scalar**-0.5), or none (T5 folds it "
               "into initialisation)"),
        Switch("scale_placement", "attention", ("scores", "query", "query_key_sqrt"), "scores",
               "where the scale is applied: to S (paper), to Q before Kᵀ Q, or its square root to both "
               "Q and K (ONNX Attention). Same mathematics, different rounding"),
        Switch("attn_bias", "attention", (True, False), True,
               "biases b_q, b_k, b_v and b_o (PyTorch bias=False and equinox drop all four)"),
        Switch("attn_bias_at", "attention", ("all", "qkv", "out"), "all",
               "which projections of a multi-head attention carry their bias when attn_bias is on: all "
               "four (GPT-2, BERT, torch MultiheadAttention), b_q, b_k, b_v only (Qwen2: "
               "bias=True on q/k/v_proj, False on o_proj), or b_o only (nn.Linear(bias=False) for the "
               "heads and a biased output projection: Karpathy's ng-video-lecture, many tutorials)"),
        Switch("empty_query", "attention", ("error", "nan", "zeros", "uniform"), "error",
               "a query whose Mask column is all 0: refuse (SpecError; an implementation must raise), "
               "NaN column (fused kernels), zero attention weights so ṽ = 0 (PyTorch SDPA math path "
               "2.5+), or uniform weights over all keys (masked logits filled with dtype min: "
               "Hugging Face, jax.nn.dot_product_attention)"),
        Switch("causal_alignment", "attention", ("top_left", "bottom_right"), "top_left",
               "unidirectional mask when ℓ_z ≠ ℓ_x: Mask[t_z, t_x] = [[t_z ≤ t_x]] (top-left, "
               "SDPA is_causal) or [[t_z ≤ t_x + ℓ_z − ℓ_x]] (bottom-right, Hugging Face)"),
        Switch("rotary", "attention", ("none", "half", "interleaved"), "none",
               "rotary position embedding (RoPE; Su et al. 2021, RoFormer, eq. 34) of each head's Q and K "
               "columns by their position t: none (paper), half-split pairs (i, i + d_attn/2) (GPT-NeoX, "
               "Hugging Face Llama's rotate_half), or interleaved pairs (2i, 2i+1) (RoFormer, Meta's "
               "LLaMA reference code, GPT-J); angle t·base^(−2i/d_attn), d_attn even"),
        Switch("rope_base", "attention", (10000.0, 500000.0, 1000000.0), 10000.0,
               "RoPE's base θ: 10000 (RoFormer, LLaMA 1-2), 500000 (Llama 3), 1000000 (Qwen2, "
               "Mistral v0.2+); read only when rotary is not 'none'"),
        Switch("rotary_fraction", "attention", (1.0, 0.5, 0.25), 1.0,
               "partial rotary: the share f ∈ (0, 1] of each head's query/key rows RoPE rotates, the first "
               "r = ⌊f·d_attn⌋ (r even), with angles t·base^(−2i/r) over those r rows, the rest left as they "
               "are: 1 (paper, LLaMA), 0.25 (GPT-NeoX/Pythia rotary_pct; GPT-J's rotary_dim 64 of 256), 0.4 "
               "(Phi-2 partial_rotary_factor), 0.5 (Phi-1.5); any fraction (1, 0.5, 0.25 are drawn); read "
               "only when rotary is not 'none' (Hugging Face transformers 5.24: GPTNeoXAttention, "
               "apply_rotary_pos_emb on q[..., :rotary_ndims]; rope dim = int(head_dim · partial_rotary_factor))"),
        Switch("rope_scaling", "attention", ("none", "linear-2", "linear-8", "llama3"), "none",
               "RoPE's frequencies θ_i = base^(−2i/r) rescaled (spec/rotary.py, ``frequencies``): none "
               "(paper, LLaMA 1-3); linear-2, θ_i/2, positions halved (Hugging Face rope_type 'linear', "
               "factor 2: _compute_linear_scaling_rope_parameters); linear-8, θ_i/8, positions divided by 8 "
               "(the same with factor 8: Gemma 3 4B, 12B and 27B, in their global layers only: a local layer "
               "under rope_local_base > 0 is unscaled); llama3, Llama 3.1's bands by "
               "wavelength λ_i = 2π/θ_i with factor 8, low_freq_factor 1, high_freq_factor 4 and "
               "original_max_position_embeddings 8192: θ_i kept for λ_i < 2048, θ_i/8 for λ_i > 8192, "
               "between them (1 − γ)·θ_i/8 + γ·θ_i with γ = (8192/λ_i − 1)/3 (transformers 5.24 "
               "modeling_rope_utils._compute_llama3_parameters; Meta's llama-models apply_scaling); "
               "read only when rotary is not 'none'"),
        Switch("rope_factors", "attention", ("none", "longrope"), "none",
               "RoPE's frequencies rescaled pair by pair by factors that are parameters (spec/rotary.py, "
               "``frequencies``, spec 2.17): none (paper); longrope, Phi-3's and Phi-3.5's LongRoPE: "
               "θ'_i = θ_i / rope_ext[i] for the r/2 factors rope_ext (the list in effect for the call, short_factor "
               "or long_factor: which one is the configuration's business) and cos, sin multiplied by the "
               "attention factor rope_mscale[0] (transformers 5.24 modeling_rope_utils._compute_longrope_parameters, "
               "Phi3RotaryEmbedding.forward); the parameters are the attention's last (a model's: shared by every "
               "layer, Phi3Model's one rotary_emb); in place of rope_scaling, which is unread under longrope. "
               "Read only when rotary is not 'none', by the causal self-attention entries, the GPT-2 layers and "
               "the decoder-only forward models"),
        Switch("kv_group", "attention", (1, 2, 3, 4), 1,
               "query heads per key/value head G, any whole number ≥ 1 (a size: no preset fixes it; "
               "1-4 are drawn; 8, Llama 2 and 3 70B's, is the same rule and is searched where a plugin "
               "declares it) (grouped-query attention, Ainslie et al. 2023; "
               "multi-query attention, Shazeer 2019, is G = H): 1 (paper) gives every head its own "
               "W_k, W_v; G > 1 has H/G key/value heads kv_heads.{g}, query head h reading kv head "
               "⌊h/G⌋ (consecutive heads share, as Hugging Face's repeat_kv and torch SDPA enable_gqa)"),
        Switch("kv_order", "attention", ("consecutive", "strided"), "consecutive",
               "which key/value head query head h reads under kv_group = G > 1 (H_kv = H/G heads): "
               "⌊h/G⌋, consecutive heads sharing (Hugging Face repeat_kv, torch repeat_interleave, SDPA "
               "enable_gqa), or h mod H_kv (a tiled repeat, torch Tensor.repeat / jnp.tile: the classic "
               "head-order mix-up when porting GQA checkpoints); read only when G > 1"),
        Switch("kv_heads", "attention", ("grouped", "one"), "grouped",
               "how many key/value heads H_kv the H query heads share: grouped (paper) is H_kv = H/G as kv_group "
               "says; one is multi-query attention (Shazeer 2019, Fast Transformer Decoding: One Write-Head is "
               "All You Need, §3: 'the different heads share a single set of keys and values'), H_kv = 1 for "
               "every H, the group G = H (Falcon-7B: transformers 5.24 FalconAttention, num_kv_heads = 1 under "
               "multi_query whatever num_attention_heads is; a convention, where kv_group is a size). Under one, "
               "kv_group stays 1 and kv_order consecutive (neither is read); the parameters are kv_group = H's, "
               "kv_heads.0.W_k, W_v (and biases) beside each head's W_q, b_q, at H = 1 the head's own"),
        Switch("window", "attention", (0, 2), 0,
               "sliding-window causal attention (Mistral; Beltagy et al. 2020, Longformer): 0 (paper) is "
               "no window; W ≥ 1, any whole number (a size: no preset fixes it; 2, the least that drops a "
               "key, is drawn; Mistral 7B v0.1's is 4096), lets query t_x attend to keys "
               "t_x − W < t_z ≤ t_x, W keys counting itself (Hugging Face masking_utils."
               "sliding_window_overlay: kv_idx > q_idx − sliding_window, on a causal mask); read only "
               "where the mask is causal"),
        Switch("global_every", "attention", (0, 2), 0,
               "local (sliding-window) and global layers in a decoder-only stack: 0 (paper) is every layer as "
               "window says; k ≥ 1, any whole number (0 and 2 are drawn), makes layer l (0-based) global, "
               "with no window, when (l + 1) mod k = 0, and every other layer local, with the window W: "
               "Gemma 2's k = 2 (layers 0, 2, 4, ... local; transformers 5.24 Gemma2Config.layer_types, "
               "'sliding_attention' if bool((i + 1) % 2) else 'full_attention'), Gemma 3's k = 6 "
               "(Gemma3TextConfig's sliding_window_pattern 6, the same rule; a stack of L < k layers is all "
               "local); read only where window ≥ 1, by the decoder-only models (Algorithm 10 and its "
               "padded, cached, training and inference forms; the GPT-2 layer alone has one layer)"),
        Switch("rope_local_base", "attention", (0.0, 10000.0), 0.0,
               "RoPE's base in the local layers of global_every: 0 (paper) is rope_base in every layer; "
               "a base b > 0 (one of rope_base's values) rotates each local (windowed) layer's Q and K with "
               "base b and no rope_scaling, the global layers keeping rope_base and rope_scaling (Gemma 3: "
               "local layers at 10000, global ones at 1000000; transformers 5.24 Gemma3TextConfig."
               "rope_parameters['sliding_attention']['rope_theta'], from the older rope_local_base_freq, and "
               "['full_attention']['rope_theta'] from rope_theta; convert_rope_params_to_dict updates only "
               "['full_attention'] with a config's rope_scaling; Gemma3TextModel passes each layer the rotary "
               "tables of its layer type); read "
               "only when rotary is not 'none', window ≥ 1 and global_every ≥ 1"),
        Switch("position_bias", "attention", ("none", "alibi"), "none",
               "a bias added to each head's scaled scores by the distance from query to key: none "
               "(paper), or ALiBi (Press et al. 2022, Train Short, Test Long), m_h·(t_z − t_x) with head "
               "h's slope m_h = 2^(−8(h+1)/H) for H a power of two and, for other H, the power-of-two "
               "slopes of n = 2^⌊log₂ H⌋ heads followed by every other slope of 2n heads (BLOOM: "
               "transformers 5.24 build_alibi_tensor; MPT); added after the 1/√d scale, before the mask; "
               "read only by causal self-attention"),
        Switch("rel_bias", "attention", ("none", "t5_buckets"), "none",
               "a learned bias of each head on its scaled scores by the bucket of the relative position t_z − t_x: "
               "none (paper), or T5's (Raffel et al. 2020, §2.1): a table rel_bias ∈ R^{rel_buckets×H} (Hugging "
               "Face's relative_attention_bias embedding), head h adding rel_bias[bucket(t_z − t_x), h] after the "
               "scale (T5 has none: attn_scale='none') and before the mask; the bucket is bidirectional in a "
               "bidirectional self-attention (half the buckets for keys after the query) and unidirectional in a "
               "causal one (spec/position_bias.py t5_bucket; transformers 5.24 T5Attention._relative_position_bucket, "
               "compute_bias). Read by the self-attention entries and the layers (the decoder layer's self-attention; "
               "spec 2.13), each holding its table (a T5 stack's first layer, whose table every later layer "
               "reuses), and by the encoder-decoder's forward entries (issue 38): one table per stack, the "
               "encoder's in enc_layers.0.attn.rel_bias (bidirectional buckets) and the decoder's in "
               "dec_layers.0.self_attn.rel_bias (causal buckets), every layer of the stack adding it "
               "(transformers 5.24 T5Stack: T5Block(has_relative_attention_bias=bool(i == 0)), the first block's "
               "position_bias passed to the later ones); not by cross-attention (T5's has none)"),
        Switch("rel_buckets", "attention", (32, 6, 8), 32,
               "T5's num_buckets (relative_attention_num_buckets), any whole number >= 4: 32 (T5, T5 v1.1, mT5, "
               "Flan-T5); 6 and 8 are drawn as well, with max_distance 5 and 10, because at 32/128 a distance "
               "reaches the logarithmic buckets only from 8 (bidirectional) or 16 (causal), past the drawn "
               "lengths; read only under rel_bias='t5_buckets'"),
        Switch("rel_max_distance", "attention", (128, 5, 10), 128,
               "T5's max_distance (relative_attention_max_distance), any whole number above rel_buckets // 2: "
               "128 (T5); the distance from which every key shares the last bucket of its direction (5 and 10 "
               "are drawn with 6 and 8 buckets); read only under rel_bias='t5_buckets'"),
        Switch("qk_norm", "attention", ("none", "rms"), "none",
               "QK-norm: none (paper), or an RMSNorm of each column of each head's Q and K over its d_attn "
               "rows, after the projections (and their biases) and before RoPE, with gains γ_q, γ_k ∈ "
               "R^{d_attn} shared by all heads (attn.gamma_q, attn.gamma_k; always present, as the reference "
               "code's norms always have a weight), the norm's ε as epsilon/epsilon_placement give and its gain "
               "as norm_gain gives (Qwen3: Qwen3Attention.q_norm = Qwen3RMSNorm(head_dim); Gemma 3: "
               "Gemma3RMSNorm(head_dim), gain 1 + γ; transformers 5.24); read by the layers' attentions and, "
               "since spec 2.12, by the causal self-attention entries (Qwen3Attention and Gemma3Attention "
               "alone), which read ε, its placement and norm_gain under qk_norm='rms' only. OLMo "
               "2's norm over all heads' H·d_attn rows at once is another convention"),
        Switch("attn_softcap", "attention", (0.0, 2.0), 0.0,
               "tanh soft-capping of the attention logits: 0 (paper) is none; c > 0, any number (2 is "
               "drawn; Gemma 2's attn_logit_softcapping is 50), replaces each scaled score s = qᵀk/√d_attn "
               "by c·tanh(s/c) before the mask (Gemma 2: transformers 5.24 eager_attention_forward, scores "
               "times scaling, then / softcap, tanh, * softcap, then + attention_mask); ALiBi's bias, "
               "where present, is added after the cap"),
        Switch("norm", "normalisation", ("layer_norm", "rms_norm"), "layer_norm",
               "which normalisation the layers and architectures use (RMSnorm: Gopher, T5)"),
        Switch("epsilon", "normalisation", (0.0,), 0.0,
               "ε ≥ 0 added for stability (PyTorch 1e-5, Flax/T5 1e-6, BERT 1e-12, the "
               "Annotated Transformer 1e-6); 0 with placement 'none' is the paper's"),
        Switch("epsilon_placement", "normalisation", ("none", "inside_root", "outside_root"), "none",
               "where ε goes: nowhere, √(v + ε) (PyTorch, Flax, ONNX), or √v + ε (the Annotated "
               "Transformer, seed 004 (numeric tutorial))"),
        Switch("variance", "normalisation", ("biased", "unbiased", "one_pass"), "biased",
               "layer-norm variance with 1/d_e (paper), 1/(d_e − 1) (torch.std default, the "
               "Annotated Transformer), or 1/d_e computed in one pass as max(0, E[e²] − E[e]²) "
               "(Flax LayerNorm's default use_fast_variance; same mathematics as biased, "
               "different rounding). RMSnorm has no mean and ignores this switch"),
        Switch("affine", "normalisation", ("scale_shift", "scale", "none"), "scale_shift",
               "the norm's learned γ and β, γ only, or neither (seed 000, compact definition). RMSnorm never "
               "has β (the paper's 'β = 0')"),
        Switch("norm_gain", "normalisation", ("gamma", "one_plus_gamma"), "gamma",
               "the gain a norm multiplies by: γ (paper), or 1 + γ (Gemma: GemmaRMSNorm's "
               "output * (1.0 + weight), its weight initialised at zeros; Hugging Face transformers "
               "5.24 models/gemma); read only where the norm has γ"),
        Switch("norm_placement", "blocks", ("paper", "post", "pre", "res_post", "sandwich"), "paper",
               "post-LN (paper for encoder-decoder and BERT), pre-LN (paper for GPT-2), the "
               "sublayer's output normalised before it is added, X + LN(f(X)) (Swin v2's res-post-norm; "
               "seed 000 (compact definition): 'LayerNorm-ing only the changes'), or both, "
               "X + LN'(f(LN(X))) with a second norm of each sublayer's own (γ1_out, β1_out, ...: "
               "Gemma 2's input_layernorm and post_attention_layernorm, pre_feedforward_layernorm and "
               "post_feedforward_layernorm; transformers 5.24 Gemma2DecoderLayer)"),
        Switch("residual", "blocks", ("sequential", "parallel", "parallel_shared"), "sequential",
               "how a pre-LN layer's two sublayers meet the residual: one after the other (paper: "
               "X ← X + Attn(N₁X), then X ← X + MLP(N₂X)), in parallel from the same X, "
               "X ← X + (Attn(N₁X) + MLP(N₂X)) (GPT-NeoX/Pythia use_parallel_residual, Falcon's "
               "new_decoder_architecture: transformers 5.24 GPTNeoXLayer), or in parallel through one "
               "shared norm, X ← X + (Attn(N₁X) + MLP(N₁X)), with no γ₂, β₂ (GPT-J's ln_1, Falcon-7B's "
               "parallel_attn: GPTJBlock). Defined for the pre-LN placement only"),
        Switch("final_norm", "blocks", ("paper", "none", "final"), "paper",
               "a norm after the last layer of each stack: paper = GPT-2 only; 'final' adds it to "
               "every stack (nn.Transformer, the Annotated Transformer)"),
        Switch("embedding_norm", "blocks", (False, True), False,
               "a norm right after the embedding sum (Hugging Face BERT, BART)"),
        Switch("activation", "blocks", ("paper", "relu", "gelu_erf", "gelu_tanh", "silu"), "paper",
               "MLP (and BERT head) activation: paper = ReLU for encoder-decoder, exact GELU for "
               "BERT and GPT-2; gelu_tanh is Hugging Face GPT-2's gelu_new and Flax's default; "
               "silu is x·σ(x) (SiLU/Swish: Elfwing et al. 2018, Ramachandran et al. 2017; LLaMA)"),
        Switch("mlp_bias", "blocks", (True, False), True,
               "MLP biases b_mlp (Thickstun's block has none)"),
        Switch("mlp_depth", "blocks", (1, 2, 3), 1,
               "hidden layers of the MLP: 1 (paper); each more is act(W h + b) with W ∈ R^{d_mlp×d_mlp} "
               "(seed 000 (compact definition): 'a larger number of layers')"),
        Switch("mlp", "blocks", ("plain", "gated", "one_layer"), "plain",
               "plain W₂ act(W₁x + b₁) + b₂; gated W₂ (act(W₁x + b₁) ⊙ (Vx + c)) + b₂ (Shazeer 2020, GLU "
               "variants: SwiGLU with silu, GeGLU with GELU; LLaMA's act(gate_proj x) ⊙ up_proj x); or "
               "one_layer act(W₁x + b₁) with no second map, d_mlp = d_e (seed 004 (numeric tutorial): "
               "'one linear layer L, and one ReLU layer R')"),
        Switch("positions", "embeddings",
               ("learned", "sinusoidal_paper", "sinusoidal_vaswani", "sinusoidal_raw_index", "sinusoidal_halves",
                "none"),
               "learned",
               "position embedding: learned W_p (paper), the paper's sinusoid (base ℓ_max, 1-based), "
               "Vaswani et al.'s (base 10000, 0-based, sin on even rows), Vaswani's with the raw row "
               "index r in the exponent, 10000^(2r/d_e) (seed 004, numeric tutorial), Vaswani's frequencies "
               "in halves, every sine in the first ⌈d_e/2⌉ rows and the cosines after them (Hugging Face "
               "Marian's MarianSinusoidalPositionalEmbedding, spec 2.15), or none"),
        Switch("pad_positions", "embeddings", ("index", "real"), "index",
               "the position of token t where a padding mask is given (the padded entries): its index t "
               "(paper: it has no padding; Hugging Face Llama's default position_ids), or, 'real', the number "
               "of real tokens before it, p(t) = Σ_{s<t} pad[s], for the position embedding W_p[:, p(t)] and "
               "ALiBi's distance m_h·(p(t_z) − p(t_x)); a padding position adds no position embedding (OPT: "
               "transformers 5.24 OPTLearnedPositionalEmbedding, cumsum(attention_mask)·attention_mask − 1 "
               "read at offset 2, a padding position's −1 reading embed_positions[1], outside W_p = "
               "embed_positions[2:], taken as 0; BLOOM: build_alibi_tensor, (attention_mask.cumsum(-1) − 1)·"
               "attention_mask). Equal to 'index' on every real token where no padding precedes one"),
        Switch("ed_positions", "embeddings", ("shared", "separate"), "shared",
               "the encoder-decoder's learned position tables (Algorithm 8, read under positions='learned' "
               "alone): one W_p embedding both the source z and the target x (paper, lines 1-3 and 10-12), or, "
               "'separate', the source's positions from W_p and the target's from a second table W_p_dec of the "
               "same shape (BART: transformers 5.24 BartEncoder.embed_positions and BartDecoder.embed_positions, "
               "two BartLearnedPositionalEmbedding). A sinusoid is one fixed table: the switch changes nothing there"),
        Switch("embedding_scale", "embeddings", ("one", "sqrt_d_e"), "one",
               "token embedding multiplied by √d_e before positions are added (Vaswani et al.)"),
        Switch("unembedding", "embeddings", ("separate", "tied"), "separate",
               "W_u a parameter of its own, or tied: W_u = W_eᵀ (GPT-2, BERT, nanoGPT)"),
        Switch("unembedding_scale", "embeddings", ("one", "inv_sqrt_d_e"), "one",
               "the encoder-decoder's last decoder column multiplied by d_e^(−1/2) before W_u (line 21: "
               "P = softmax(W_u (d_e^(−1/2) X))): one (paper), or inv_sqrt_d_e, T5 v1.0's rescaling before its "
               "tied head (Mesh TensorFlow; transformers 5.24 T5ForConditionalGeneration.forward: "
               "sequence_output * (self.model_dim**-0.5) where config.scale_decoder_outputs, which T5Config "
               "sets unless tie_word_embeddings=False is passed, T5 v1.1's configs). Read by Algorithm 8's "
               "forward entries alone (ed_transformer, padded_ed_transformer)"),
        Switch("logit_bias", "embeddings", (False, True), False,
               "a bias b_u on the logits before the final softmax (BERT MLM head, BART)"),
        Switch("logit_softcap", "embeddings", (0.0, 2.0), 0.0,
               "tanh soft-capping of the final logits: 0 (paper) is none; c > 0, any number (2 is drawn; "
               "Gemma 2's final_logit_softcapping is 30), replaces each logit z = W_u x (+ b_u) by "
               "c·tanh(z/c) before the final softmax and the loss (Gemma2ForCausalLM.forward: lm_head, "
               "then / final_logit_softcapping, tanh, * final_logit_softcapping; transformers 5.24)"),
        Switch("moe_topk_norm", "experts", (False, True), False,
               "the weights of a sparse mixture of experts' k chosen experts (moe_mlp): the router's "
               "softmax p_i over all E experts as they are (False: Qwen2-MoE's default norm_topk_prob=False, "
               "transformers 5.24 Qwen2MoeTopKRouter), or renormalised over the chosen ones, p_i / Σ_chosen p_j "
               "(True: Mixtral, MixtralTopKRouter's router_top_value /= router_top_value.sum(); the same "
               "numbers as a softmax over the k chosen logits, Shazeer et al. 2017's KeepTopK); the paper has "
               "no experts"),
        Switch("moe_shared", "experts", (False, True), False,
               "a shared expert beside the routed ones (moe_mlp): none (False: Mixtral), or a gated MLP S "
               "every token passes through, added as σ(w_sᵀx)·S(x) with a sigmoid gate of its own "
               "(True: Qwen2-MoE, transformers 5.24 Qwen2MoeSparseMoeBlock: shared_expert, "
               "F.sigmoid(shared_expert_gate(x)) * shared_expert(x))"),
    ]
    return {x.name: x for x in s}


SWITCHES: dict[str, Switch] = _switches()

#: Switch values that are another value's mathematics computed in another
#: order (they change rounding only): (switch, value) → the value they equal
#: in exact arithmetic. ``scale_placement`` is wholly of this kind and is
#: handled as such where switches are enumerated.
SAME_MATHEMATICS: dict[tuple[str, Any], Any] = {("variance", "one_pass"): "biased"}
#: Switches every value of which is the same mathematics (rounding only):
#: the scale on S, on Q, or √ of it on Q and K. Fixtures made under one value
#: replay under another (conformance/running/fixture_replay.py; tests/spec/test_rounding_only.py).
ROUNDING_ONLY: frozenset[str] = frozenset({"scale_placement"})

#: Switches added after spec 2.0, with their defaults: canonical JSON leaves them out at the
#: default, so the hash of every set stated before them is unchanged (fixtures, certificates).
LATER: dict[str, Any] = {"mlp_depth": 1, "mlp": "plain", "attn_bias_at": "all", "rotary": "none", "rope_base": 10000.0,
                         "kv_group": 1, "kv_order": "consecutive", "window": 0, "norm_gain": "gamma",
                         "residual": "sequential", "position_bias": "none", "rotary_fraction": 1.0,
                         "qk_norm": "none", "attn_softcap": 0.0, "logit_softcap": 0.0, "rope_scaling": "none",
                         "global_every": 0, "rope_local_base": 0.0, "moe_topk_norm": False,
                         "moe_shared": False, "rel_bias": "none", "rel_buckets": 32, "rel_max_distance": 128,
                         "pad_positions": "index", "kv_heads": "grouped", "ed_positions": "shared",
                         "unembedding_scale": "one", "rope_factors": "none"}

#: Switches that are a soft cap c (0: none; any finite c ≥ 0 is a value, the ``choices`` are the
#: drawn few): c·tanh(s/c) of the attention scores or of the final logits (Gemma 2).
SOFTCAPS: frozenset[str] = frozenset({"attn_softcap", "logit_softcap"})

#: Switches that are sizes, with their least value: any whole number from it is a value (a 70B
#: Llama's kv_group 8, Mistral's window 4096), the ``choices`` are the few the strategies draw and
#: the fixtures enumerate. No preset fixes a size: presets hold conventions, sizes are hyperparameters or limits.
SIZES: dict[str, int] = {"kv_group": 1, "window": 0, "rel_buckets": 4, "rel_max_distance": 2}

#: Switches read only when another switch is on, with the setting they are moved with when moved
#: alone (fixtures, tests): RoPE's base with a pairing, the key/value head order with groups of 2; RoPE's
#: scaling with a pairing and Llama 3's base 500000, at which llama3's bands reach the drawn widths (at
#: base 10000 and d_attn ≤ 4, the fixtures' width under RoPE, every wavelength is below 2048: llama3 would
#: change nothing); local and global layers with a window of 2; the local layers' base with a pairing, a
#: window, Gemma 2's alternation and Gemma 3's global base 1000000, so that the two bases differ; T5's
#: bucket parameters with its bias, the max_distance with 6 buckets (5 and 10 are below 32 // 2 = 16, the
#: causal max_exact of 32 buckets: refused there); the encoder-decoder's second table with learned positions
#: (the paper's default, so moved alone it is read; stated for a base with a sinusoid).
READ_WITH: dict[str, dict[str, Any]] = {"rope_base": {"rotary": "half"}, "kv_order": {"kv_group": 2},
                                        "rotary_fraction": {"rotary": "half"},
                                        "rope_scaling": {"rotary": "half", "rope_base": 500000.0},
                                        "rope_factors": {"rotary": "half"},
                                        "global_every": {"window": 2},
                                        "rope_local_base": {"rotary": "half", "rope_base": 1000000.0, "window": 2,
                                                            "global_every": 2},
                                        "rel_buckets": {"rel_bias": "t5_buckets"},
                                        "rel_max_distance": {"rel_bias": "t5_buckets", "rel_buckets": 6},
                                        "ed_positions": {"positions": "learned"}}

PAPER = VariantSet()

#: Named variant sets. Each comment says where it comes from and what of the
#: original the switches cannot express (documented in docs/spec.md).
PRESETS: dict[str, VariantSet] = {
    # Phuong & Hutter as written.
    "phuong-hutter": PAPER,
    # seeds/000: post-LN without γ/β, no attention biases, ReLU MLP with biases,
    # bidirectional; its model is the encoder stack of Algorithm 8 followed by
    # Algorithm 7 on the last column (tests/spec/test_seeds.py).
    "compact-000": VariantSet(attn_bias=False, affine="none", activation="relu", norm_placement="post"),
    # seeds/002 (Thickstun): post-LN block with no attention or MLP biases,
    # ReLU, sinusoidal positions with base 10000.
    "thickstun-002": VariantSet(attn_bias=False, mlp_bias=False, activation="relu",
                                norm_placement="post", positions="sinusoidal_vaswani"),
    # seeds/003 (named tensors): pre-LN block with biases; standardize uses ε
    # inside the root (the seed leaves ε unspecified: 1e-5, PyTorch's default,
    # is the project's choice). Its block has one head and no output
    # projection: an adapter folds the drawn W_o, b_o into its value map,
    # W_V' = (W_o W_v)ᵀ, b_V' = W_o b_v + b_o (exact for H = 1, since the
    # attention weights sum to 1; tests/tools/seed_plugins_003_004.py).
    "named-tensor-003": VariantSet(norm_placement="pre", activation="relu",
                                   epsilon=1e-5, epsilon_placement="inside_root"),
    # seeds/004 (numeric tutorial, Roysdon): post-LN without γ/β, σ with
    # 1/(N − 1) (its code and numbers; its printed formula says 1/N) and
    # ν = 1e-4 added to σ, no attention biases, scores over √d_model, ReLU
    # FFN with a bias, the raw-index sinusoid, no norm after the last layer
    # (its encoder's output is A(9)), and its one-layer FFN ReLU(A W_L + b_L):
    # mlp="one_layer", no second map, d_mlp = d_e. Its attention and norm
    # tables put tokens in rows (X = Aᵀ): an adapter transposes at the
    # boundary (docs/spec.md).
    "tutorial-004": VariantSet(attn_scale="sqrt_d_model", attn_bias=False, epsilon=1e-4,
                               epsilon_placement="outside_root", variance="unbiased", affine="none",
                               norm_placement="post", final_norm="none", activation="relu",
                               positions="sinusoidal_raw_index", mlp="one_layer"),
    # Hugging Face GPT-2: gelu_new, LN eps 1e-5, pre-LN + final LN, tied W_u.
    "hf-gpt2": VariantSet(activation="gelu_tanh", epsilon=1e-5, epsilon_placement="inside_root",
                          norm_placement="pre", final_norm="final", unembedding="tied"),
    # Hugging Face BERT (MLM head): post-LN, LN after embeddings, eps 1e-12,
    # erf GELU, decoder tied to embeddings with its own bias.
    "hf-bert": VariantSet(activation="gelu_erf", epsilon=1e-12, epsilon_placement="inside_root",
                          norm_placement="post", embedding_norm=True, unembedding="tied",
                          logit_bias=True),
    # Hugging Face BART: post-LN, LN after embeddings, eps 1e-5, erf GELU, tied
    # W_u plus final_logits_bias. (Its learned positions are offset by 2: a
    # reparametrisation, W_p = embed_positions[2:].) Checked against transformers 5.24
    # models/bart/modeling_bart.py (impls/hf/bart.py, plugin transformers-bart): BartEncoderLayer and
    # BartDecoderLayer add the residual, then self_attn_layer_norm / encoder_attn_layer_norm /
    # final_layer_norm (nn.LayerNorm, eps 1e-5): post-LN; activation_fn = ACT2FN["gelu"] (BartConfig's
    # activation_function, the erf GELUActivation); BartAttention's scaling = head_dim**-0.5 multiplies the
    # scores in eager_attention_forward (scale_placement "scores"), q/k/v/out_proj and fc1/fc2 biased;
    # layernorm_embedding in BartEncoder and BartDecoder; scale_embedding False (embed_scale 1); no final
    # stack norm (final_norm "paper": none for encoder-decoder); lm_head tied to model.shared, plus
    # final_logits_bias. Its encoder and decoder position tables are two parameters, the spec's W_p one.
    # Hugging Face MarianMT as released (Helsinki-NLP/opus-mt-* config.json: activation_function "swish",
    # scale_embedding true; MarianConfig's own defaults are "gelu" and False) is
    # hf-bart+activation=silu,embedding_norm=False,embedding_scale=sqrt_d_e (modeling_marian.py: the same
    # post-LN layers, ACT2FN["swish"] = nn.SiLU, no layernorm_embedding, embed_tokens(ids) * √d_model, tied
    # lm_head, final_logits_bias), +positions=sinusoidal_halves: MarianSinusoidalPositionalEmbedding puts
    # sin in the first half of each position's row and cos in the second (not sinusoidal_vaswani's
    # interleaved rows; spec 2.15). No preset of its own: its 28 fixture cases would pass the
    # fixtures' size bound (docs/spec.md).
    "hf-bart": VariantSet(activation="gelu_erf", epsilon=1e-5, epsilon_placement="inside_root",
                          norm_placement="post", embedding_norm=True, unembedding="tied",
                          logit_bias=True),
    # nn.TransformerEncoderLayer / DecoderLayer defaults: post-LN, ReLU, eps 1e-5.
    "torch-encoder-layer": VariantSet(activation="relu", epsilon=1e-5, epsilon_placement="inside_root",
                                      norm_placement="post"),
    # nn.Transformer: as above plus a final LN on encoder and decoder.
    "torch-transformer": VariantSet(activation="relu", epsilon=1e-5, epsilon_placement="inside_root",
                                    norm_placement="post", final_norm="final"),
    # The Annotated Transformer (harvardnlp): unbiased std with eps 1e-6 added
    # to the std, pre-LN with final norms, embeddings × √d_model, Vaswani
    # sinusoids, ReLU.
    "annotated-transformer": VariantSet(activation="relu", epsilon=1e-6, epsilon_placement="outside_root",
                                        variance="unbiased", norm_placement="pre", final_norm="final",
                                        embedding_scale="sqrt_d_e", positions="sinusoidal_vaswani"),
    # Hugging Face Llama (LlamaConfig defaults, transformers 4.x/5.x): pre-RMSNorm with a final
    # RMSNorm, eps 1e-6 inside the root, γ only; no attention or MLP biases (attention_bias=False,
    # mlp_bias=False); SwiGLU MLP down(silu(gate x) ⊙ up x); rotate_half RoPE with base 10000
    # and no additive positions; separate lm_head; a fully masked query gets uniform weights (masked
    # scores are the dtype's minimum). Its grouped-query attention is a size, not a convention:
    # llama+kv_group=G for num_key_value_heads = H/G (LlamaConfig's default H/H is kv_group=1, the
    # preset's). Hugging Face Mistral (MistralForCausalLM, transformers 5.24) is this set with a
    # window: llama+window=W,kv_group=G (MistralConfig: sliding_window 4096, rms_norm_eps 1e-6,
    # rope_theta 10000; v0.2+ checkpoints set rope_theta 1e6 and sliding_window null).
    "llama": VariantSet(norm="rms_norm", epsilon=1e-6, epsilon_placement="inside_root", affine="scale",
                        norm_placement="pre", final_norm="final", activation="silu", mlp="gated",
                        mlp_bias=False, attn_bias=False, positions="none", rotary="half",
                        empty_query="uniform"),
    # Meta's Llama 2 reference code (meta-llama/llama, model.py of the Llama 2 release): RMSNorm
    # with norm_eps 1e-5 inside the root, γ only; no biases (every ColumnParallelLinear and
    # RowParallelLinear bias=False); SwiGLU w2(silu(w1 x) · w3 x); RoPE on adjacent pairs
    # (precompute_freqs_cis(theta=10000.0), torch.view_as_complex of (x_{2i}, x_{2i+1})); no
    # additive positions; a separate output projection; its mask is -inf above the diagonal, so a
    # query with no key gets NaN. Its n_kv_heads (8 for 70B, None = n_heads for 7B and 13B) is a
    # size: meta-llama2+kv_group=G.
    "meta-llama2": VariantSet(norm="rms_norm", epsilon=1e-5, epsilon_placement="inside_root", affine="scale",
                              norm_placement="pre", final_norm="final", activation="silu", mlp="gated",
                              mlp_bias=False, attn_bias=False, positions="none", rotary="interleaved",
                              empty_query="nan"),
    # Meta's Llama 3 reference code (meta-llama/llama3 model.py): the same layer as "meta-llama2" with
    # rope_theta 500000 (8B: 32 heads, 8 kv heads: meta-llama3+kv_group=4, a size the preset does not
    # fix). Llama 3.1 adds its RoPE scaling (meta-llama/llama-models apply_scaling; config.json's
    # rope_scaling rope_type "llama3"): meta-llama3+rope_scaling=llama3. No preset of its own: the one
    # switch apart, and the fixtures' size bound.
    "meta-llama3": VariantSet(norm="rms_norm", epsilon=1e-5, epsilon_placement="inside_root", affine="scale",
                              norm_placement="pre", final_norm="final", activation="silu", mlp="gated",
                              mlp_bias=False, attn_bias=False, positions="none", rotary="interleaved",
                              rope_base=500000.0, empty_query="nan"),
    # Hugging Face Gemma (GemmaForCausalLM, GemmaConfig defaults, transformers 5.24): the Llama layer
    # (pre-RMSNorm, final RMSNorm, eps 1e-6 inside the root, no biases, rotate_half RoPE base 10000,
    # no additive positions, uniform weights for a query with no key) with GeGLU
    # (hidden_act gelu_pytorch_tanh, gated), every RMSNorm's gain 1 + γ (GemmaRMSNorm),
    # embeddings times √d_model (GemmaScaledWordEmbedding, embed_scale = hidden_size**0.5) and
    # lm_head tied to the (unscaled) embedding table. Its head width (head_dim 256) is the spec's
    # free d_attn = d_mid; its num_key_value_heads is a size (gemma+kv_group=G).
    "gemma": VariantSet(norm="rms_norm", epsilon=1e-6, epsilon_placement="inside_root", affine="scale",
                        norm_placement="pre", final_norm="final", activation="gelu_tanh", mlp="gated",
                        mlp_bias=False, attn_bias=False, positions="none", rotary="half",
                        empty_query="uniform", norm_gain="one_plus_gamma", embedding_scale="sqrt_d_e",
                        unembedding="tied"),
    # Hugging Face Qwen3 (Qwen3ForCausalLM, Qwen3Config defaults, transformers 5.24) is the "llama" set
    # with QK-norm (Qwen3Attention's q_norm and k_norm, Qwen3RMSNorm(head_dim) of each head's query and
    # key before apply_rotary_pos_emb, one gain of width head_dim shared by the heads) and its released
    # checkpoints' RoPE base: llama+qk_norm=rms,rope_base=1000000.0 (Qwen3Config's own default base is
    # 10000); its kv heads and optional sliding window are sizes. Gemma 3's QK-norm (gains 1 + γ) with its
    # four norms per layer is gemma+norm_placement=sandwich,qk_norm=rms, Gemma 2 gemma+norm_placement=sandwich,
    # attn_softcap=50.0,logit_softcap=30.0 (9B, 27B: with attn_scale=sqrt_d_model_per_head, its
    # query_pre_attn_scalar d_model/H); their alternating local and global layers are sizes and a base
    # added to these: Gemma 2 +window=W,global_every=2, Gemma 3 +window=W,global_every=6,
    # rope_base=1000000.0,rope_local_base=10000.0 (spec 2.10). None has a preset of its own: a preset
    # adds ~35 fixture cases, past the fixtures' size bound (docs/spec.md).
    # Hugging Face BLOOM (BloomForCausalLM, BloomConfig defaults, transformers 5.24): pre-LN LayerNorm
    # (apply_residual_connection_post_layernorm=False) with γ and β, eps 1e-5 inside the root, a
    # LayerNorm of the embeddings (word_embeddings_layernorm) and a final one (ln_f); biases on the
    # fused query_key_value, the dense output and both MLP maps; a 4h plain MLP with tanh GELU
    # (bloom_gelu_forward); no position embeddings, ALiBi on the scaled scores (build_alibi_tensor,
    # alibi.baddbmm(Q, Kᵀ, alpha=1/√head_dim)); lm_head tied to the word embeddings, without a bias;
    # masked scores are the dtype's minimum, so a query with no key gets uniform weights. Its ALiBi
    # positions are counted among the real tokens (attention_mask.cumsum − 1): under padding, the
    # switch pad_positions="real" (bloom+pad_positions=real; the preset keeps "index", which differs
    # only where padding lies between two real tokens, so that no fixture of the preset moves). Not
    # expressed: bloom_gelu_forward's constant 0.79788456 for √(2/π) (a relative 1e-9: below float32's
    # rounding, not float64's). Hugging Face
    # MPT (MptConfig defaults) is bloom+affine=scale,attn_bias=False,mlp_bias=False,
    # activation=gelu_erf,embedding_norm=False (no biases, LayerNorm without β, exact GELU, no
    # embedding norm; the same ALiBi slopes, added after softmax_scale), docs/spec.md.
    "bloom": VariantSet(epsilon=1e-5, epsilon_placement="inside_root", norm_placement="pre", final_norm="final",
                        embedding_norm=True, activation="gelu_tanh", positions="none", position_bias="alibi",
                        unembedding="tied", empty_query="uniform"),
    # Hugging Face GPT-NeoX and Pythia (GPTNeoXForCausalLM, GPTNeoXConfig defaults, transformers 5.24):
    # pre-LN LayerNorm (γ, β), layer_norm_eps 1e-5 inside the root, final_layer_norm; attention and
    # MLP in parallel from two norms (use_parallel_residual=True: residual "parallel"); biases on
    # query_key_value, dense and both MLP maps (attention_bias=True); exact GELU (hidden_act "gelu");
    # no position embeddings, rotate_half RoPE at base 10000 on the first quarter of each head
    # (partial_rotary_factor 0.25: rotary_fraction); a separate embed_out without a bias; masked scores
    # are the dtype's minimum (uniform weights for a query with no key). Hugging Face Phi (PhiConfig
    # defaults, Phi-1.5) is gpt-neox+residual=parallel_shared,activation=gelu_tanh,rotary_fraction=0.5,
    # logit_bias=True (Phi-2: rotary_fraction=0.4), docs/spec.md.
    "gpt-neox": VariantSet(epsilon=1e-5, epsilon_placement="inside_root", norm_placement="pre", final_norm="final",
                           residual="parallel", activation="gelu_erf", positions="none", rotary="half",
                           rotary_fraction=0.25, empty_query="uniform"),
    # nanoGPT: pre-LN + final LN, eps 1e-5, exact GELU, tied W_u.
    "nanogpt": VariantSet(activation="gelu_erf", epsilon=1e-5, epsilon_placement="inside_root",
                          norm_placement="pre", final_norm="final", unembedding="tied"),
}


def preset(name: str) -> VariantSet:
    """The preset ``name``, or the set of the model family ``name`` (``FAMILIES``: a family without a
    preset of its own, such as ``qwen3``, is named there)."""
    if name in PRESETS:
        return PRESETS[name]
    if name in FAMILIES:
        return FAMILIES[name].variant
    raise ValueError(f"unknown variant preset or family {name!r}; presets: {sorted(PRESETS)}; "
                     f"families: {sorted(set(FAMILIES) - set(PRESETS))}")


def parse(text: str) -> VariantSet:
    """A preset name, a JSON object, ``preset+switch=value,...``, or ``switch=value,...`` (changes
    to the paper's set)."""
    text = text.strip()
    if text.startswith("{"):
        return VariantSet.from_json(text)
    base, _, rest = text.partition("+")
    if "=" in base:  # switch=value,... alone: changes to the paper's set
        base, rest = "phuong-hutter", text
    v = preset(base)
    if not rest:
        return v
    changes: dict[str, Any] = {}
    for item in rest.split(","):
        key, eq, raw = item.partition("=")
        if not eq or key not in SWITCHES:
            raise ValueError(f"cannot read variant switch {item!r}; "
                             f"expected switch=value with a switch in {sorted(SWITCHES)}")
        changes[key] = _parse_value(key, raw)
    return v.replace(**changes)


def _parse_value(key: str, raw: str) -> Any:
    if key == "epsilon":
        return float(raw)
    if key in SIZES:
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"variant switch {key!r}: expected a whole number, given {raw!r}") from None
    if key == "rotary_fraction" or key in SOFTCAPS:
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"variant switch {key!r}: expected a number, given {raw!r}") from None
    if key == "global_every":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"variant switch 'global_every': expected a whole number, given {raw!r}") from None
    if key in ("rope_base", "rope_local_base"):
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"variant switch {key!r}: expected a number, given {raw!r}") from None
    for choice in SWITCHES[key].choices:
        if str(choice).lower() == raw.lower():
            return choice
    raise ValueError(f"variant switch {key!r}: expected one of {list(SWITCHES[key].choices)}, given {raw!r}")


# --------------------------------------------------------------------------
# Model families (issue 38)
# --------------------------------------------------------------------------
# The model families people ship, each named by one variant set. A family's set holds its
# conventions as its library's configuration defaults fix them, and no size: the key/value heads
# (``kv_group``, ``kv_heads`` aside), the sliding window (``window``) and the period of the local and
# global layers (``global_every``) are a configuration's, written after the name, as after a
# preset: ``qwen3+kv_group=4``, ``mistral+window=4096,kv_group=4`` (``parse``). Where the family
# has a preset (``llama``, ``gemma``, ``bloom``, ``gpt-neox``, ``hf-gpt2``, ``hf-bert``, Meta's Llamas) its
# name is that preset's and its set the preset itself; the others are names of their own, read by ``parse``
# and ``preset`` beside the presets.
#
# Why not more presets: a preset is drawn by the strategies' variant sets, offered by identify and the
# diagnosis as a candidate, and given a golden fixture case at every entry (``fixtures/cases.py``), which
# the fixtures' size bound no longer holds (docs/spec.md, "Presets"). A family name is only a name: what
# it certifies is its plugin's business (``plugin``, tested against its declared sets in
# tests/impls/test_hf_family_names.py). ``describe()`` prints presets only, so no label changes.
#
# Sources (transformers 5.24.0, each family's ``configuration_*.py`` and ``modeling_*.py``): the rows'
# ``source``; the conventions are stated with their switches in docs/spec.md ("Presets", "Families").


@dataclass(frozen=True)
class Family:
    """One family: ``name`` (what a declaration writes), ``text`` (its set as a preset and switches),
    ``title`` (the family as people call it), ``source`` (the configuration read), ``sizes`` (what a
    configuration adds), ``plugin`` (the bundled plugin that certifies it; "" where none does),
    ``padded`` (switches its padded entries add, ``switch=value,...``: the family's own convention
    where padding meets positions or a query meets no key, which the preset made before could not
    hold), ``algorithms`` (those of ``plugin`` that compute this family, where it offers others too;
    empty: all of them)."""

    name: str
    text: str
    title: str
    source: str
    sizes: str = "kv_group"
    plugin: str = ""
    padded: str = ""
    algorithms: tuple[str, ...] = ()

    @property
    def variant(self) -> VariantSet:
        return parse(self.text)

    def to_dict(self) -> dict[str, Any]:
        """The row as data (``ftspec spec families --json``), with its set's hash."""
        return {"name": self.name, "title": self.title, "declare": self.text, "hash": self.variant.hash,
                "padded": self.padded, "sizes": self.sizes, "source": self.source, "plugin": self.plugin,
                "algorithms": list(self.algorithms)}

    @property
    def padded_variant(self) -> VariantSet:
        """The set of the family's padded entries (``padded_*``): ``variant`` with ``padded``."""
        if not self.padded:
            return self.variant
        return parse(self.text + ("," if "+" in self.text else "+") + self.padded)


_ROWS = (
    Family("hf-gpt2", "hf-gpt2", "GPT-2", "GPT2Config", "none", "transformers",
           algorithms=("d_transformer", "gpt2_layer", "layer_norm")),
    Family("hf-bert", "hf-bert", "BERT", "BertConfig; the eager attention's uniform weights for a query "
           "with no key (its additive mask)", "none", "transformers-bert", padded="empty_query=uniform"),
    Family("bart", "hf-bart+ed_positions=separate", "BART",
           "BartConfig; BartEncoder's and BartDecoder's own BartLearnedPositionalEmbedding", "none",
           "transformers-bart"),
    Family("t5", "phuong-hutter+norm=rms_norm,affine=scale,epsilon=1e-06,epsilon_placement=inside_root,"
           "norm_placement=pre,final_norm=final,attn_scale=none,attn_bias=False,mlp_bias=False,activation=relu,"
           "positions=none,unembedding=tied,rel_bias=t5_buckets,unembedding_scale=inv_sqrt_d_e", "T5 v1.0",
           "T5Config (T5LayerNorm, relative_attention_num_buckets 32, relative_attention_max_distance 128; the "
           "tied head after d_model**-0.5); a query with no key: uniform weights (the additive mask)",
           "rel_buckets, rel_max_distance", "transformers-t5", padded="empty_query=uniform"),
    Family("t5-v1.1", "phuong-hutter+norm=rms_norm,affine=scale,epsilon=1e-06,epsilon_placement=inside_root,"
           "norm_placement=pre,final_norm=final,attn_scale=none,attn_bias=False,mlp_bias=False,mlp=gated,"
           "activation=gelu_tanh,positions=none,unembedding=tied,rel_bias=t5_buckets", "T5 v1.1",
           "T5Config with feed_forward_proj gated-gelu, as transformers 5.24 builds it (the head tied and "
           "unscaled: T5Config sets tie_word_embeddings; a v1.1 checkpoint's own lm_head is not expressed)",
           "rel_buckets, rel_max_distance", "transformers-t5", padded="empty_query=uniform"),
    Family("marian", "hf-bart+activation=silu,embedding_norm=False,embedding_scale=sqrt_d_e,"
           "positions=sinusoidal_halves", "MarianMT (Helsinki-NLP/opus-mt-*)",
           "the released configs (activation_function swish, scale_embedding true; MarianConfig's own "
           "defaults are gelu and false); MarianSinusoidalPositionalEmbedding", "none", "transformers-marian"),
    Family("llama", "llama", "Llama (Hugging Face)", "LlamaConfig", plugin="transformers",
           algorithms=("padded_d_transformer", "cached_decoding", "padded_causal_self_attention", "rms_norm")),
    Family("meta-llama2", "meta-llama2", "Llama 2 (Meta's reference model.py)", "meta-llama/llama model.py"),
    Family("meta-llama3", "meta-llama3", "Llama 3 (Meta's reference model.py)", "meta-llama/llama3 model.py"),
    Family("mistral", "llama", "Mistral 7B v0.1",
           "MistralConfig (rope_theta 10000, rms_norm_eps 1e-6; v0.2 and later: +rope_base=1000000.0 and no "
           "window)", "kv_group, window (MistralConfig's sliding_window 4096)", "transformers-mistral"),
    Family("qwen2", "llama+attn_bias=True,attn_bias_at=qkv", "Qwen2",
           "Qwen2Config; Qwen2Attention's q/k/v biases", "kv_group, window (use_sliding_window)",
           "transformers-qwen2"),
    Family("qwen3", "llama+qk_norm=rms,rope_base=1000000.0", "Qwen3",
           "Qwen3Config (the released checkpoints' rope_theta 1e6; the config's own default is 10000); "
           "Qwen3Attention's q_norm, k_norm", "kv_group, window", "transformers-qwen3"),
    Family("gemma", "gemma", "Gemma", "GemmaConfig", plugin="transformers-gemma"),
    Family("gemma2", "gemma+norm_placement=sandwich,attn_softcap=50.0,logit_softcap=30.0,global_every=2",
           "Gemma 2 2B", "Gemma2Config (query_pre_attn_scalar = head_dim; 9B and 27B: "
           "+attn_scale=sqrt_d_model_per_head)", "kv_group, window, global_every (layer_types)",
           "transformers-gemma2"),
    Family("gemma3", "gemma+norm_placement=sandwich,qk_norm=rms,rope_base=1000000.0,rope_local_base=10000.0,"
           "global_every=6", "Gemma 3 1B", "Gemma3TextConfig (sliding_window_pattern 6; 4B and 12B: "
           "+rope_scaling=linear-8, 27B also +attn_scale=sqrt_d_model_per_head)",
           "kv_group, window, global_every (sliding_window_pattern)", "transformers-gemma3"),
    Family("phi3", "llama+epsilon=1e-05", "Phi-3", "Phi3Config (rms_norm_eps 1e-5); fused qkv_proj and "
           "gate_up_proj are layout", plugin="transformers-phi3"),
    Family("phi3-longrope", "llama+epsilon=1e-05,rope_factors=longrope", "Phi-3 128k, Phi-3.5",
           "Phi3Config with rope_scaling longrope (short_factor, long_factor and the attention factor are the "
           "parameters rope_ext, rope_mscale: the list in effect is the configuration's choice)",
           plugin="transformers-phi3"),
    Family("phi", "gpt-neox+residual=parallel_shared,activation=gelu_tanh,rotary_fraction=0.5,logit_bias=True",
           "Phi-1.5", "PhiConfig (Phi-2: +rotary_fraction=0.4)", "none"),
    Family("gpt-neox", "gpt-neox", "GPT-NeoX, Pythia", "GPTNeoXConfig", "none", "transformers-gpt-neox"),
    Family("gpt-j", "gpt-neox+residual=parallel_shared,activation=gelu_tanh,rotary=interleaved,attn_bias=False,"
           "logit_bias=True", "GPT-J", "GPTJConfig (rotary_dim 64 of a 256-wide head)", "none",
           "transformers-gpt-j"),
    Family("falcon", "nanogpt+residual=parallel_shared,attn_bias=False,mlp_bias=False,positions=none,"
           "rotary=half,empty_query=uniform,kv_heads=one", "Falcon-7B",
           "FalconConfig defaults (multi_query, parallel_attn, one input_layernorm)", "none",
           "transformers-falcon-7b"),
    Family("falcon-40b", "nanogpt+residual=parallel,attn_bias=False,mlp_bias=False,positions=none,rotary=half,"
           "empty_query=uniform", "Falcon-40B, 180B",
           "FalconConfig with new_decoder_architecture (ln_attn, ln_mlp)", plugin="transformers-falcon"),
    Family("mixtral", "llama+epsilon=1e-05,rope_base=1000000.0,moe_topk_norm=True", "Mixtral",
           "MixtralConfig (rms_norm_eps 1e-5, default_theta 1e6); MixtralSparseMoeBlock's renormalised "
           "top-k weights", "kv_group, window, the experts E and k", "transformers-mixtral-moe"),
    Family("qwen2-moe", "llama+attn_bias=True,attn_bias_at=qkv,moe_shared=True", "Qwen2-MoE",
           "Qwen2MoeConfig (norm_topk_prob False); its shared expert behind a sigmoid gate",
           "kv_group, window, the experts E and k", "transformers-qwen2-moe"),
    Family("opt", "hf-gpt2+activation=relu,scale_placement=query,empty_query=uniform", "OPT",
           "OPTConfig (125m to 175B; not 350m's post-LN); OPTLearnedPositionalEmbedding's offset 2 is "
           "W_p = embed_positions[2:], its positions under padding cumsum(mask)·mask − 1", "none",
           "transformers-opt", padded="pad_positions=real"),
    Family("bloom", "bloom", "BLOOM", "BloomConfig; build_alibi_tensor counts positions among the real tokens",
           "none", "transformers-bloom", padded="pad_positions=real"),
    Family("mpt", "bloom+affine=scale,attn_bias=False,mlp_bias=False,activation=gelu_erf,embedding_norm=False",
           "MPT", "MptConfig (no_bias; clip_qkv, off by default, is not expressed)", "none", "transformers-mpt"),
)

#: every family by the name a declaration writes, in the order above
FAMILIES: dict[str, Family] = {f.name: f for f in _ROWS}
assert len(FAMILIES) == len(_ROWS), "family names repeat"
assert all(f.name not in PRESETS or f.text == f.name for f in _ROWS), \
    "a family named as a preset is that preset"
