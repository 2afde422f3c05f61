"""The boundary between the spec's canonical layout and PyTorch's native one.

Canonical (docs/spec.md, "Conventions"): tokens are *columns*. A sequence is
X ∈ R^{d×ℓ} (with an optional leading batch axis), W_e is (d_e, N_V), W_p is
(d_e, ℓ_max), P is (N_V, ℓ), and Mask is indexed [t_z, t_x] (context first),
True = "t_x may attend to t_z".

Native (how PyTorch code is written): tokens are *rows*. A sequence is
(…, ℓ, d) (batch, seq, features), embedding tables are (N_V, d_e) and
(ℓ_max, d_e) like ``nn.Embedding.weight``, and a mask is indexed
[query, key] = [t_x, t_z] with True = may attend (the polarity of
``F.scaled_dot_product_attention``'s boolean mask).

Linear weights need no conversion: the paper's W is out × in, which is
exactly ``F.linear``'s (and ``nn.Linear.weight``'s) layout. Per-head
projections are packed head-major into one (H·d, d_in) matrix, the way
``nn.MultiheadAttention`` packs its in-projection.

Every function here is a pure re-indexing (transpose, concatenation, lookup):
no arithmetic, so a layout bug cannot hide as a rounding difference. This
module is tested on its own (tests/impls/test_torch_specific.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import torch
from torch import Tensor

__all__ = [
    "Attn", "Block", "DecBlock", "Embedding", "MLP", "Norm", "Unembedding",
    "attn_params", "block_params", "count", "dec_block_params", "embedding_params", "mlp_params",
    "norm_params", "unembedding_params",
    "cols_to_rows", "rows_to_cols", "mask_to_native", "mask_to_canonical", "pad_to_native",
    "table_to_native", "table_to_canonical",
]

# --------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------


def cols_to_rows(X: Tensor) -> Tensor:
    """Canonical (…, d, ℓ) → native (…, ℓ, d)."""
    return X.transpose(-1, -2)


def rows_to_cols(X: Tensor) -> Tensor:
    """Native (…, ℓ, d) → canonical (…, d, ℓ)."""
    return X.transpose(-1, -2)


def mask_to_native(Mask: Tensor) -> Tensor:
    """Canonical Mask[…, t_z, t_x] → native mask[…, t_x, t_z] (query, key).

    Polarity is unchanged (True = may attend in both); only the index order
    flips. Inverting polarity here is the classic bug (CONVENTIONS.md)."""
    return Mask.transpose(-1, -2)


def pad_to_native(pad: Tensor) -> Tensor:
    """Canonical pad[…, t] (True = a real token) → native key mask (…, 1, ℓ_z): the same
    for every query (a padding position is no query's key), True = may attend. A 0/1 number
    also works (``!= 0``)."""
    flags = pad if pad.dtype == torch.bool else pad != 0
    return flags.unsqueeze(-2)


def mask_to_canonical(mask: Tensor) -> Tensor:
    """Native mask[…, t_x, t_z] → canonical Mask[…, t_z, t_x]."""
    return mask.transpose(-1, -2)


def table_to_native(W: Tensor) -> Tensor:
    """A column-per-entry matrix (W_e: (d_e, N_V), W_p: (d_e, ℓ_max)) → an
    ``nn.Embedding``-style row-per-entry table ((N_V, d_e), (ℓ_max, d_e))."""
    return W.transpose(0, 1)


def table_to_canonical(table: Tensor) -> Tensor:
    """Row-per-entry table (ℓ_max, d_e) → canonical W_p (d_e, ℓ_max)."""
    return table.transpose(0, 1)


# --------------------------------------------------------------------------
# parameters: flat canonical names → native structures
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Norm:
    gamma: Optional[Tensor]  # (d,) or None (affine="none")
    beta: Optional[Tensor]  # (d,) or None (affine!="scale_shift", RMSnorm)


@dataclass(frozen=True)
class Attn:
    """Alg. 4/5 weights with the H heads packed head-major (head 0 first).

    Grouped-query attention (``kv_group`` > 1): the flat names hold ``kv_heads.{g}.W_k`` … for
    g < H_kv, packed the same way (kv head 0 first) into W_k, W_v, and ``kv_heads`` = H_kv; with
    per-head keys and values (``heads.{h}.W_k``), ``kv_heads`` = 0 and W_k, W_v have H heads."""

    heads: int
    W_q: Tensor  # (H·d_attn, d_x)
    b_q: Optional[Tensor]  # (H·d_attn,)
    W_k: Tensor  # (H·d_attn, d_z), or (H_kv·d_attn, d_z) under grouped-query attention
    b_k: Optional[Tensor]  # (H·d_attn,) or (H_kv·d_attn,)
    W_v: Tensor  # (H·d_mid, d_z) or (H_kv·d_mid, d_z)
    b_v: Optional[Tensor]  # (H·d_mid,) or (H_kv·d_mid,)
    W_o: Optional[Tensor] = None  # (d_out, H·d_mid); None for single-head Alg. 3/4
    b_o: Optional[Tensor] = None  # (d_out,)
    kv_heads: int = 0  # H_kv shared key/value heads (``kv_heads.{g}.*``); 0: every head its own
    gamma_q: Optional[Tensor] = None  # (d_attn,) QK-norm's query gain, shared by the heads (qk_norm)
    gamma_k: Optional[Tensor] = None  # (d_attn,) QK-norm's key gain
    rel_bias: Optional[Tensor] = None  # (rel_buckets, H) T5's relative bias table (rel_bias="t5_buckets", spec 2.13)
    rope_ext: Optional[Tensor] = None  # (r/2,) LongRoPE's per-pair factors (rope_factors="longrope", Phi-3)
    rope_mscale: Optional[Tensor] = None  # (1,) LongRoPE's attention factor on cos and sin


@dataclass(frozen=True)
class MLP:
    W1: Tensor  # (d_mlp, d_e)
    b1: Optional[Tensor]  # (d_mlp,)
    W2: Optional[Tensor]  # (d_e, d_mlp); None under mlp="one_layer" (no second map)
    b2: Optional[Tensor]  # (d_e,)
    #: mlp="gated": the linear branch V (d_mlp, d_e), c (d_mlp,) of act(W1 x + b1) ⊙ (V x + c)
    W_lin: Optional[Tensor] = None
    b_lin: Optional[Tensor] = None
    #: mlp_depth > 1: the further hidden layers (W (d_mlp, d_mlp), b (d_mlp,) or None), in order
    hidden: tuple[tuple[Tensor, Optional[Tensor]], ...] = ()


@dataclass(frozen=True)
class Block:
    """Encoder / BERT / GPT-2 layer (Alg. 8 l. 5-8, Alg. 9 l. 5-8, Alg. 10 l. 5-8)."""

    attn: Attn
    norm1: Norm
    mlp: MLP
    norm2: Norm
    #: norm_placement="sandwich": each sublayer's output norm (γ1_out/β1_out, γ2_out/β2_out)
    norm1_out: Optional[Norm] = None
    norm2_out: Optional[Norm] = None


@dataclass(frozen=True)
class DecBlock:
    """Decoder layer of Alg. 8 (lines 14-19)."""

    self_attn: Attn
    norm3: Norm
    cross_attn: Attn
    norm4: Norm
    mlp: MLP
    norm5: Norm
    #: norm_placement="sandwich": each sublayer's output norm (γ3_out/β3_out ... γ5_out/β5_out)
    norm3_out: Optional[Norm] = None
    norm4_out: Optional[Norm] = None
    norm5_out: Optional[Norm] = None


@dataclass(frozen=True)
class Embedding:
    """Alg. 1-2 tables in ``nn.Embedding`` layout, plus the optional embedding norm."""

    table: Tensor  # (N_V, d_e) = W_eᵀ
    positions: Optional[Tensor]  # (ℓ_max, d_e) = W_pᵀ, learned positions only
    norm: Norm


@dataclass(frozen=True)
class Unembedding:
    """Alg. 7: W_u (N_V, d) is already ``F.linear``'s layout; tied, W_u = W_eᵀ,
    which is the embedding table itself (GPT-2's ``lm_head.weight = wte.weight``)."""

    W_u: Tensor  # (N_V, d)
    b_u: Optional[Tensor]  # (N_V,)


def count(params: Mapping[str, Tensor], prefix: str) -> int:
    """How many indexed members ``prefix{i}.…`` the flat names hold (layers, heads)."""
    pat = re.compile(re.escape(prefix) + r"(\d+)\.")
    found = {int(m.group(1)) for k in params if (m := pat.match(k))}
    return max(found) + 1 if found else 0


def _cat(parts: list[Optional[Tensor]]) -> Optional[Tensor]:
    present = [t for t in parts if t is not None]
    if not present:
        return None
    if len(present) != len(parts):
        raise ValueError("some heads lack a parameter that others have")
    return torch.cat(present, dim=0)


def attn_params(params: Mapping[str, Tensor], prefix: str = "", multi_head: bool = True) -> Attn:
    """``{prefix}heads.{h}.W_q`` … ``{prefix}W_o`` (Alg. 5), or the bare
    ``W_q`` … of one head (Alg. 3/4) when ``multi_head`` is False.

    Where ``{prefix}kv_heads.{g}.*`` are present (grouped-query attention) the keys' and values'
    maps are packed from those, kv head 0 first, and the query heads hold W_q, b_q only; a
    ``heads.{h}.W_k`` beside them is refused (two sources for one map)."""
    heads = [f"{prefix}heads.{h}." for h in range(count(params, prefix + "heads."))] if multi_head else [prefix]
    n_kv = count(params, prefix + "kv_heads.") if multi_head else 0
    kv = [f"{prefix}kv_heads.{g}." for g in range(n_kv)] if n_kv else heads
    if n_kv and any(h + n in params for h in heads for n in ("W_k", "b_k", "W_v", "b_v")):
        raise ValueError(f"{prefix}heads.*: keys' and values' maps both per head and in kv_heads.*")
    packed: dict[str, Any] = {n: _cat([params.get(h + n) for h in heads]) for n in ("W_q", "b_q")}
    packed.update({n: _cat([params.get(g + n) for g in kv]) for n in ("W_k", "b_k", "W_v", "b_v")})
    out = params.get(prefix + "W_o") if multi_head else None
    bias = params.get(prefix + "b_o") if multi_head else None
    # QK-norm's gains: a layer's, or a causal self-attention entry's (spec 2.12); absent elsewhere
    gains = {n: params.get(prefix + n) for n in ("gamma_q", "gamma_k")} if multi_head else {}
    table = params.get(prefix + "rel_bias") if multi_head else None  # T5's, a self-attention's (spec 2.13)
    # LongRoPE's factors (rope_factors="longrope"): the attention's own, or a decoder-only model's, which every
    # layer shares (Phi3Model's one rotary_emb: ``layers.{l}.attn.`` holds none)
    rope = {n: params.get(prefix + n, params.get(n)) for n in ("rope_ext", "rope_mscale")} if multi_head else {}
    return Attn(len(heads), W_o=out, b_o=bias, kv_heads=n_kv, rel_bias=table, **packed, **gains, **rope)


def norm_params(params: Mapping[str, Tensor], gamma: str, beta: str) -> Norm:
    return Norm(params.get(gamma), params.get(beta))


def mlp_params(params: Mapping[str, Tensor], prefix: str, first: int, second: int) -> MLP:
    """W_mlp{first}, W_mlp{second} and their biases; the gated branch ``W_mlp{first}_lin`` and the
    hidden layers ``mlp_hidden.{k}.W``/``.b`` where the flat names hold them; no W_mlp{second}
    under ``mlp="one_layer"`` (``components.mlp`` checks the set against the variant)."""
    g = params.get
    hidden = tuple((params[f"{prefix}mlp_hidden.{k}.W"], g(f"{prefix}mlp_hidden.{k}.b"))
                   for k in range(count(params, prefix + "mlp_hidden.")))
    return MLP(params[f"{prefix}W_mlp{first}"], g(f"{prefix}b_mlp{first}"),
               g(f"{prefix}W_mlp{second}"), g(f"{prefix}b_mlp{second}"),
               g(f"{prefix}W_mlp{first}_lin"), g(f"{prefix}b_mlp{first}_lin"), hidden)


def block_params(params: Mapping[str, Tensor], prefix: str = "") -> Block:
    """The output norms are built whatever the placement (γ/β None where absent): the layer reads
    them under ``norm_placement="sandwich"`` alone."""
    return Block(attn_params(params, prefix + "attn."),
                 norm_params(params, prefix + "gamma1", prefix + "beta1"),
                 mlp_params(params, prefix, 1, 2),
                 norm_params(params, prefix + "gamma2", prefix + "beta2"),
                 norm_params(params, prefix + "gamma1_out", prefix + "beta1_out"),
                 norm_params(params, prefix + "gamma2_out", prefix + "beta2_out"))


def dec_block_params(params: Mapping[str, Tensor], prefix: str = "") -> DecBlock:
    return DecBlock(attn_params(params, prefix + "self_attn."),
                    norm_params(params, prefix + "gamma3", prefix + "beta3"),
                    attn_params(params, prefix + "cross_attn."),
                    norm_params(params, prefix + "gamma4", prefix + "beta4"),
                    mlp_params(params, prefix, 3, 4),
                    norm_params(params, prefix + "gamma5", prefix + "beta5"),
                    *(norm_params(params, f"{prefix}gamma{k}_out", f"{prefix}beta{k}_out") for k in (3, 4, 5)))


def embedding_params(params: Mapping[str, Tensor], gamma: str = "gamma_emb", beta: str = "beta_emb",
                     positions: str = "W_p") -> Embedding:
    """W_e, the learned position table named ``positions`` (absent: a sinusoid or none), the embedding norm."""
    W_p = params.get(positions)
    return Embedding(table_to_native(params["W_e"]), None if W_p is None else table_to_native(W_p),
                     norm_params(params, gamma, beta))


def unembedding_params(params: Mapping[str, Tensor], tied: bool) -> Unembedding:
    """``tied``: the variant's unembedding == "tied" (W_u = W_eᵀ)."""
    return Unembedding(table_to_native(params["W_e"]) if tied else params["W_u"], params.get("b_u"))
