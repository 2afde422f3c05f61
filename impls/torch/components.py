"""Algorithms 1-7 in native PyTorch layout: sequences are (…, ℓ, d), tokens rows.

Line numbers cite /work/shared/ALGORITHMS.md. Every function takes any number
of leading batch axes and is differentiable (no in-place updates of inputs,
no NaN in gradients of the finite variants).
"""

from __future__ import annotations

import dataclasses

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ftspec.spec.variants import VariantSet

from .adapter import Attn, MLP, Norm

__all__ = [
    "activation", "alibi_bias", "alibi_slopes", "attend", "attention_heads", "cached_self_attention", "causal_mask",
    "check_biases", "check_groups", "embed",
    "expand_kv", "inverse_frequencies", "logits", "lookup", "merge_heads", "mh_attention", "mlp", "norm", "project",
    "rope_tables",
    "rotate", "sinusoid_table", "t5_bias", "t5_buckets", "unembed", "real_positions"]

# --------------------------------------------------------------------------
# Algorithms 1-2 and the initial embedding (Alg. 8-10, lines 1-3)
# --------------------------------------------------------------------------


def lookup(index: Tensor, table: Tensor, what: str) -> Tensor:
    """Alg. 1 / Alg. 2 line 1: row ``index`` of an (n, d) table → (…, d).

    Checked first: ``F.embedding`` on CUDA would hit a device-side assert."""
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= table.shape[0]):
        raise ValueError(f"{what} outside [0, {table.shape[0]}): min {int(index.min())}, max {int(index.max())}")
    return F.embedding(index, table)  # (…, d)


def sinusoid_table(d_e: int, ell_max: int, form: str, dtype: torch.dtype, device) -> Tensor:
    """Fixed positions of Alg. 2 as an (ℓ_max, d_e) table (row t = position t).

    paper:   W_p[2i−1, t] = sin(t / ℓ_max^{2i/d_e}), W_p[2i, t] = cos(…), 1-based i and t;
             in 0-based row r and column c: i = r // 2 + 1, t = c + 1.
    vaswani: PE[t, 2i] = sin(t / 10000^{2i/d_e}), PE[t, 2i+1] = cos(…), 0-based.
    raw index (the numeric tutorial, seeds/004): PE[t, r] = sin or cos of
             t / 10000^{2r/d_e}, sin on even r, 0-based.
    halves (Marian, transformers 5.24 MarianSinusoidalPositionalEmbedding): with
             h = ⌈d_e/2⌉, PE[t, i] = sin(t / 10000^{2i/d_e}) for i < h and
             PE[t, h + i] = cos(t / 10000^{2i/d_e}), 0-based: sines first, not interleaved.
    Odd d_e: the last row is the sine the same formula gives (halves: the
    middle row r = h − 1 is the extra sine). Built once in
    float64 on the CPU and rounded once to ``dtype`` (like a registered
    buffer), so every dtype and device gets the correctly rounded table.
    """
    r = torch.arange(d_e, dtype=torch.float64)  # (d_e,)
    c = torch.arange(ell_max, dtype=torch.float64)  # (ℓ_max,)
    sine = (torch.arange(d_e) % 2 == 0)[None, :]  # (1, d_e)
    if form == "sinusoidal_paper":
        i, t, base = torch.div(r, 2, rounding_mode="floor") + 1, c + 1, float(ell_max)
    elif form == "sinusoidal_vaswani":
        i, t, base = torch.div(r, 2, rounding_mode="floor"), c, 10000.0
    elif form == "sinusoidal_raw_index":  # seeds/004, Table II: the raw row index r in the exponent
        i, t, base = r, c, 10000.0
    elif form == "sinusoidal_halves":  # Marian: a sine block of ⌈d_e/2⌉ columns, then the cosines
        h = (d_e + 1) // 2
        i, t, base = torch.where(r < h, r, r - h), c, 10000.0
        sine = (torch.arange(d_e) < h)[None, :]  # (1, d_e)
    else:
        raise ValueError(f"unknown sinusoid {form!r}")
    angle = t[:, None] / torch.pow(base, 2 * i / d_e)[None, :]  # (ℓ_max, d_e)
    table = torch.where(sine, torch.sin(angle), torch.cos(angle))  # (ℓ_max, d_e)
    return table.to(device=device, dtype=dtype)


def real_positions(pad: Tensor) -> Tensor:
    """``pad_positions="real"``: the real tokens before each position, Σ_{s<t} pad[s], (…, ℓ) long (at a real
    token OPT's cumsum(attention_mask)·attention_mask − 1 and BLOOM's ALiBi position, transformers 5.24)."""
    flags = pad.to(torch.long)  # (…, ℓ) 1 = a real token
    return torch.cumsum(flags, dim=-1) - flags  # exclusive: a token does not count itself


def embed(x: Tensor, table: Tensor, positions: Optional[Tensor], v: VariantSet, ell_max: int,
          emb_norm: Optional[Norm] = None, start: int = 0, pad: Optional[Tensor] = None) -> Tensor:
    """Alg. 8-10 lines 1-3: e_t = W_e[:, x[t]] (× √d_e) + W_p[:, t], then the
    optional embedding norm. x: (…, ℓ) tokens; table: (N_V, d_e); positions:
    (ℓ_max, d_e) learned table or None (a sinusoid is built from ``v``).
    ``start``: the absolute position of x's first token (a key/value-cache decoding step).
    ``pad`` (…, ℓ), True = a real token, is read under ``pad_positions="real"`` alone: a real token
    takes W_p[:, p(t)] (``real_positions``), a padding position no position."""
    ell, d_e = x.shape[-1], table.shape[1]
    if start + ell > ell_max:
        raise ValueError(f"sequence of length {start + ell} exceeds ell_max = {ell_max}")
    X = lookup(x, table, "token IDs")  # (…, ℓ, d_e)
    if v.embedding_scale == "sqrt_d_e":
        X = X * math.sqrt(d_e)  # Vaswani et al.: scale before adding positions
    if v.positions == "learned" and positions is None:
        raise ValueError("positions='learned' needs the table W_p")
    if v.positions != "none":
        rows = positions if v.positions == "learned" else sinusoid_table(d_e, ell_max, v.positions, X.dtype, X.device)
        assert rows is not None  # (ℓ_max, d_e)
        if pad is not None and v.pad_positions == "real":
            real = pad.to(device=X.device, dtype=torch.bool)  # (…, ℓ)
            X = X + torch.where(real[..., None], rows[real_positions(real)], 0.0).to(X.dtype)  # padding: none
        else:
            X = X + rows[start:start + ell]  # (…, ℓ, d_e); broadcasts over the batch
    if v.embedding_norm:
        if emb_norm is None:
            raise ValueError("embedding_norm needs its gamma and beta")
        X = norm(X, emb_norm, v)
    return X


# --------------------------------------------------------------------------
# Algorithm 6: layer norm and RMSnorm over the feature (last) axis
# --------------------------------------------------------------------------


def norm(X: Tensor, p: Norm, v: VariantSet, kind: Optional[str] = None) -> Tensor:
    """Alg. 6 applied to every token (row) of X (…, ℓ, d).

    ``kind`` overrides ``v.norm`` (the layer_norm and rms_norm entries). The
    library kernels are used where their definition is the variant's:
    ``F.layer_norm`` computes (e − m)/√(v + ε) with biased v (ε = 0 is the
    paper's line 3), ``F.rms_norm`` computes e/√(Σe²/d + ε). Unbiased
    variance and ε outside the root are not expressible there, so those are
    written out. ``norm_gain="one_plus_gamma"`` (Gemma's RMSNorm) passes the kernels the gain 1 + γ."""
    kind = kind or v.norm
    d = X.shape[-1]
    check_norm_input(X, v, kind)
    if p.gamma is not None and v.norm_gain == "one_plus_gamma":
        p = dataclasses.replace(p, gamma=1 + p.gamma)  # (d,): Gemma's gain 1 + γ, rounded before the product
    eps = v.epsilon if v.epsilon_placement == "inside_root" else 0.0
    if kind == "layer_norm":
        if v.variance == "biased" and v.epsilon_placement != "outside_root":
            return F.layer_norm(X, (d,), p.gamma, p.beta, eps)  # (…, ℓ, d)
        var, mean = torch.var_mean(X, dim=-1, correction=1 if v.variance == "unbiased" else 0,
                                   keepdim=True)  # lines 1-2: (…, ℓ, 1) each
        Y = (X - mean) / _sigma(var, v)  # line 3
    elif kind == "rms_norm":
        if v.epsilon_placement != "outside_root":
            return F.rms_norm(X, (d,), p.gamma, eps)  # eps=0.0 explicitly: None means finfo.eps
        Y = X / _sigma(X.square().mean(dim=-1, keepdim=True), v)  # m = 0; variance switch ignored
    else:
        raise ValueError(f"unknown norm {kind!r}")
    if p.gamma is not None:
        Y = Y * p.gamma
    if p.beta is not None:
        Y = Y + p.beta
    return Y


def check_norm_input(X: Tensor, v: VariantSet, kind: str) -> None:
    """What Alg. 6 cannot normalise (…, ℓ, d): with no ε, a token of zero variance (its entries all
    equal; all 0 for RMSnorm), where line 3 divides by √0; under unbiased variance, d = 1, where
    line 2 divides by d − 1 = 0. Equal entries are tested as such: ``F.layer_norm``'s mean of d
    copies of a value may round away from it and leave a tiny variance, not 0."""
    d = X.shape[-1]
    if kind == "layer_norm" and v.variance == "unbiased" and d < 2:
        raise ValueError(f"layer_norm: unbiased variance divides by d − 1 = 0 (d = {d})")
    if v.epsilon_placement == "none":
        flat = (X == 0) if kind == "rms_norm" else (X == X[..., :1])
        if bool(flat.all(dim=-1).any()):
            raise ValueError(f"{kind}: a token of zero variance and no epsilon (line 3 would divide by √0)")


def _sigma(var: Tensor, v: VariantSet) -> Tensor:
    """σ = √v, √(v + ε) or √v + ε (epsilon_placement)."""
    if v.epsilon_placement == "outside_root":
        return torch.sqrt(var) + v.epsilon  # the Annotated Transformer's std + ε
    if v.epsilon_placement == "inside_root":
        return torch.sqrt(var + v.epsilon)
    return torch.sqrt(var)


# --------------------------------------------------------------------------
# Algorithms 3-5: attention
# --------------------------------------------------------------------------


def causal_mask(ell_x: int, ell_z: int, alignment: str, device, window: int = 0) -> Tensor:
    """Alg. 4 unidirectional mask, native [t_x, t_z], True = may attend.

    top_left [[t_z ≤ t_x]]; bottom_right [[t_z ≤ t_x + ℓ_z − ℓ_x]]: ``tril``
    with that diagonal offset keeps exactly key j ≤ query i + offset. A sliding ``window`` W ≥ 1
    (Mistral) keeps only j > i + offset − W too: ``triu`` from the diagonal offset − W + 1."""
    offset = 0 if alignment == "top_left" else ell_z - ell_x
    ones = torch.ones(ell_x, ell_z, dtype=torch.bool, device=device)
    if window:
        return ones.tril(offset) & ones.triu(offset - window + 1)  # (ℓ_x, ℓ_z)
    return ones.tril(offset)  # (ℓ_x, ℓ_z)


def _split_heads(Y: Tensor, H: int) -> Tensor:
    """(…, ℓ, H·d) → (…, H, ℓ, d): head h is columns h·d … (h+1)·d − 1."""
    return Y.unflatten(-1, (H, -1)).transpose(-3, -2)


def inverse_frequencies(d: int, base: float, scaling: str = "none") -> Tensor:
    """θ_i = base^(−2i/d), i = 0 … d/2 − 1 (RoFormer eq. 15) in float64, rescaled by ``scaling``
    (``rope_scaling``) as Hugging Face transformers 5.24 computes its ``inv_freq``: "linear-2" is
    ``_compute_linear_scaling_rope_parameters`` with factor 2 (inv_freq / 2), "linear-8" the same with
    factor 8 (Gemma 3 4B-27B's global layers), "llama3"
    ``_compute_llama3_parameters`` with Llama 3.1's factor 8, low_freq_factor 1, high_freq_factor 4
    and original_max_position_embeddings 8192 (by wavelength 2π/θ: kept below 2048, /8 above 8192,
    smoothly blended between)."""
    i = torch.arange(d // 2, dtype=torch.float64)  # (d/2,)
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2 * i / d)  # θ_i
    if scaling == "none":
        return inv_freq
    linear = {"linear-2": 2, "linear-8": 8}  # rope_type "linear": inv_freq /= factor
    if scaling in linear:
        return inv_freq / linear[scaling]
    if scaling != "llama3":
        raise ValueError(f"unknown rope_scaling {scaling!r}")
    factor, low_freq_factor, high_freq_factor, old_context_len = 8.0, 1.0, 4.0, 8192.0
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen, high_freq_wavelen = old_context_len / low_freq_factor, old_context_len / high_freq_factor
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    medium = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    out = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, medium)
    return torch.where(wavelen < high_freq_wavelen, inv_freq, out)


def rope_tables(d: int, start: int, n: int, base: float, dtype: torch.dtype, device,
                scaling: str = "none", longrope: Optional[tuple[Tensor, Tensor]] = None) -> tuple[Tensor, Tensor]:
    """cos and sin of the RoPE angles t·θ_i for positions t = start … start + n − 1 and
    θ_i = base^(−2i/d), i = 0 … d/2 − 1 (RoFormer eq. 15; rescaled as ``inverse_frequencies``
    says under ``scaling``): two (n, d/2) tables.

    Built in float64 on the CPU and rounded once to ``dtype`` (like the sinusoid table and a
    registered ``inv_freq`` buffer computed in full precision), so every dtype gets correctly
    rounded cos and sin.

    ``longrope`` (ext (d/2,), mscale (1,)) (``rope_factors="longrope"``, Phi-3 and Phi-3.5): in place of
    ``scaling``, Hugging Face transformers 5.24 ``_compute_longrope_parameters``'s ``inv_freq = 1.0 /
    (ext_factors * base**inv_freq_shape)`` with ``inv_freq_shape = arange(0, d, 2) / d``, and both tables
    times the attention factor (``Phi3RotaryEmbedding.forward``: ``emb.cos() * self.attention_scaling``),
    still in float64 and rounded once."""
    if d % 2:
        raise ValueError(f"rotary position embedding rotates pairs: d_attn = {d} must be even")
    gain = 1.0
    if longrope is None:
        theta = inverse_frequencies(d, base, scaling)  # θ_i
    else:
        ext = longrope[0].detach().to(device="cpu", dtype=torch.float64).reshape(-1)
        mscale = longrope[1].detach().to(device="cpu", dtype=torch.float64).reshape(-1)
        if ext.shape[0] != d // 2 or mscale.shape[0] != 1:
            raise ValueError(f"rope_factors='longrope': {d // 2} factors and 1 attention factor for a rotated "
                             f"width {d}, given {ext.shape[0]} and {mscale.shape[0]}")
        shape = torch.arange(0, d, 2, dtype=torch.float64) / d  # 2i/d
        theta = 1.0 / (ext * torch.pow(torch.tensor(float(base), dtype=torch.float64), shape))
        gain = float(mscale[0])
    t = torch.arange(start, start + n, dtype=torch.float64)  # absolute positions
    angle = t[:, None] * theta[None, :]  # (n, d/2)
    return ((gain * torch.cos(angle)).to(device=device, dtype=dtype),
            (gain * torch.sin(angle)).to(device=device, dtype=dtype))


def rotate(Y: Tensor, start: int, v: VariantSet, longrope: Optional[tuple[Tensor, Tensor]] = None) -> Tensor:
    """RoPE (Su et al. 2021, RoFormer eq. 34) on Y (…, ℓ, d): row t (position start + t) has each
    pair (a, b) turned to (a cos − b sin, b cos + a sin) by the angle (start + t)·θ_i.

    Pair i is (i, i + d/2) under ``rotary="half"`` (GPT-NeoX, Hugging Face Llama's
    ``q·cos + rotate_half(q)·sin``) and (2i, 2i + 1) under ``"interleaved"`` (RoFormer, Meta's
    LLaMA ``view_as_complex``, GPT-J). Partial rotary (``rotary_fraction`` f): as Hugging Face's
    GPT-NeoX, the first r = int(d·f) features are split off and rotated as a RoPE of width r, the
    rest concatenated back unchanged. Y itself is not modified. ``longrope``: LongRoPE's factors and
    attention factor under ``rope_factors="longrope"`` (``rope_tables``); the unrotated rest is not scaled."""
    if v.rotary == "none":
        return Y
    ell, d = Y.shape[-2], Y.shape[-1]
    r = int(d * v.rotary_fraction)
    if r < d:  # partial: rotate Y[..., :r], pass Y[..., r:]
        return torch.cat([rotate(Y[..., :r], start, v.replace(rotary_fraction=1.0), longrope), Y[..., r:]], dim=-1)
    # LongRoPE's factors where the entry holds them (one that does not list rope_factors has none: plain RoPE)
    factors = longrope if v.rope_factors == "longrope" else None
    cos, sin = rope_tables(d, start, ell, v.rope_base, Y.dtype, Y.device, v.rope_scaling, factors)  # (ℓ, d/2)
    if v.rotary == "half":
        a, b = Y[..., : d // 2], Y[..., d // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    if v.rotary == "interleaved":
        a, b = Y[..., 0::2], Y[..., 1::2]
        return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    raise ValueError(f"unknown rotary {v.rotary!r}")


def check_groups(p: Attn, v: VariantSet) -> None:
    """Alg. 5 under ``kv_group`` = G: G = 1 has every head its own keys and values; G > 1 has
    H / G shared key/value heads (``kv_heads.{g}.*``), H a multiple of G; ``kv_heads="one"`` is G = H,
    one key/value head whatever H is (at H = 1 the head's own)."""
    H = p.heads
    G = H if v.kv_heads == "one" else v.kv_group  # multi-query attention (Shazeer 2019): one group of all H
    if G == 1:
        if p.kv_heads:
            raise ValueError(f"kv_group = 1: no shared key/value heads expected, given {p.kv_heads} (kv_heads.*)")
        return
    if H % G or p.kv_heads != H // G:
        raise ValueError(f"kv_group = {G}: H = {H} query heads need H / G key/value heads (kv_heads.*), "
                         f"given {p.kv_heads}")


def check_biases(p: Attn, v: VariantSet) -> None:
    """Alg. 5's biases under ``attn_bias`` and ``attn_bias_at``: all four b_q, b_k, b_v, b_o ("all",
    the paper; GPT-2, BERT, ``nn.MultiheadAttention``), the heads' b_q, b_k, b_v only ("qkv": Qwen2's
    q/k/v_proj with bias=True, o_proj without) or b_o only ("out": bias-free head projections and a
    biased output projection), none without ``attn_bias``. The biases are read by presence
    (``adapter.attn_params``: an absent one is None, i.e. zero, and ``F.linear`` adds nothing and
    autograd gives it no gradient), so the set present must be the one the variant names: a bias
    the variant drops would otherwise be added silently."""
    if v.attn_bias_at not in ("all", "qkv", "out"):
        raise ValueError(f"unknown attn_bias_at {v.attn_bias_at!r}")
    heads = v.attn_bias and v.attn_bias_at != "out"
    out = v.attn_bias and v.attn_bias_at != "qkv"
    present = {"b_q": p.b_q, "b_k": p.b_k, "b_v": p.b_v, "b_o": p.b_o}
    wrong = [n for n, b in present.items() if (b is not None) != (out if n == "b_o" else heads)]
    if wrong:
        raise ValueError(f"attention biases do not match attn_bias={v.attn_bias}, attn_bias_at={v.attn_bias_at!r}: "
                         + ", ".join(f"{n} {'present' if present[n] is not None else 'absent'}" for n in wrong))


def project(X: Tensor, Z: Tensor, p: Attn, v: VariantSet, x_start: int = 0, z_start: int = 0,
            rotary: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """Alg. 4 lines 1-3 for every head, then RoPE at the columns' absolute positions.

    X: (…, ℓ_x, d_x) at positions x_start …, Z: (…, ℓ_z, d_z) at positions z_start … → Q
    (…, H, ℓ_x, d_attn), K (…, H_kv, ℓ_z, d_attn), V (…, H_kv, ℓ_z, d_mid), with H_kv = H, or
    the shared heads' count under grouped-query attention (``expand_kv`` maps them to the query
    heads). Rotated after the biases and before any scaling (``rotary``=False: Alg. 3, which has
    no positions)."""
    if p.W_k is None or p.W_v is None:
        raise ValueError("attention needs the keys' and values' maps W_k, W_v")
    H_kv = p.kv_heads or p.heads
    Q = _split_heads(F.linear(X, p.W_q, p.b_q), p.heads)  # line 1: (…, H, ℓ_x, d_attn)
    K = _split_heads(F.linear(Z, p.W_k, p.b_k), H_kv)  # line 2: (…, H_kv, ℓ_z, d_attn)
    V = _split_heads(F.linear(Z, p.W_v, p.b_v), H_kv)  # line 3: (…, H_kv, ℓ_z, d_mid)
    if v.qk_norm == "rms" and p.gamma_q is not None:  # QK-norm: each head's q and k rows, before RoPE
        # (Qwen3Attention's q_norm/k_norm over head_dim; the gain as norm_gain says: Gemma 3's 1 + γ)
        Q, K = norm(Q, Norm(p.gamma_q, None), v, "rms_norm"), norm(K, Norm(p.gamma_k, None), v, "rms_norm")
    if rotary and v.rotary != "none":
        longrope = (p.rope_ext, p.rope_mscale) if p.rope_ext is not None and p.rope_mscale is not None else None
        Q, K = rotate(Q, x_start, v, longrope), rotate(K, z_start, v, longrope)
    return Q, K, V


def expand_kv(K: Tensor, H: int, v: VariantSet) -> Tensor:
    """The H_kv shared key (or value) heads (…, H_kv, ℓ, d) → one per query head (…, H, ℓ, d).

    Query head h reads kv head ⌊h/G⌋ under ``kv_order="consecutive"`` (Hugging Face's
    ``repeat_kv``, ``repeat_interleave``) and h mod H_kv under ``"strided"`` (``Tensor.repeat``,
    a tiled copy). With H_kv = H nothing is shared and K is returned as is."""
    H_kv = K.shape[-3]
    if H_kv == H:
        return K
    if v.kv_order == "consecutive":
        return K.repeat_interleave(H // H_kv, dim=-3)
    if v.kv_order == "strided":
        return torch.cat([K] * (H // H_kv), dim=-3)
    raise ValueError(f"unknown kv_order {v.kv_order!r}")


def alibi_slopes(H: int, device) -> Tensor:
    """ALiBi's head slopes (Press et al. 2022, §3), (H,) in float64, from the next power of two
    n₂ ≥ H: the n₂ slopes 2^(−8k/n₂), k = 1..n₂, are all of them when H = n₂; otherwise the
    even-numbered ones (the n₂/2-head sequence) then the odd-numbered ones, the first H of them
    (MPT's ``build_mpt_alibi_tensor``, transformers 5.24; the same list as BLOOM's
    ``_get_alibi_slopes``)."""
    n2 = 1 << (H - 1).bit_length()  # the least power of two ≥ H
    all_slopes = torch.exp2(-8.0 * torch.arange(1, n2 + 1, dtype=torch.float64, device=device) / n2)  # (n₂,)
    if n2 == H:
        return all_slopes
    return torch.cat([all_slopes[1::2], all_slopes[0::2]])[:H]  # (H,)


def alibi_bias(H: int, ell_x: int, ell_z: int, dtype, device) -> Tensor:
    """ALiBi's additive bias, native [h, query, key] (H, ℓ_x, ℓ_z): m_h·(t_z − t_x), with the ℓ_x
    queries the last ℓ_x of the ℓ_z key positions (a prefill, ℓ_x = ℓ_z, or new tokens after a
    cache). The slopes are rounded to ``dtype`` once, then times the (exact) whole distances."""
    t_z = torch.arange(ell_z, device=device)
    t_x = torch.arange(ell_z - ell_x, ell_z, device=device)
    dist = (t_z[None, :] - t_x[:, None]).to(dtype)  # (ℓ_x, ℓ_z)
    return alibi_slopes(H, device).to(dtype)[:, None, None] * dist  # (H, ℓ_x, ℓ_z)


def t5_buckets(ell_x: int, ell_z: int, bidirectional: bool, num_buckets: int, max_distance: int,
               device) -> Tensor:
    """T5's relative position buckets, native [query, key] (ℓ_x, ℓ_z) int64 (Raffel et al. 2020, §2.1;
    transformers 5.24 models/t5/modeling_t5.py ``T5Attention._relative_position_bucket``): of
    rel = t_z − t_x, bidirectionally half the buckets per side (keys after the query the upper half) and
    |rel|, causally max(−rel, 0); max_exact = n // 2 exact buckets, then max_exact +
    ⌊(n − max_exact)·ln(r/max_exact)/ln(max_distance/max_exact)⌋, at most n − 1. The logarithm is taken in
    float64 and a quotient within 1e-9 of a whole number counts as that number: the spec's buckets are
    the real-number ones (spec/position_bias.py ``t5_bucket``), where a whole number may round below."""
    rel = torch.arange(ell_z, device=device)[None, :] - torch.arange(ell_x, device=device)[:, None]  # (ℓ_x, ℓ_z)
    n, bucket = num_buckets, torch.zeros_like(rel)
    if bidirectional:
        n //= 2
        bucket = (rel > 0).to(rel.dtype) * n
        r = rel.abs()
    else:
        r = (-rel).clamp(min=0)
    exact = n // 2
    x = (n - exact) * torch.log(r.to(torch.float64).clamp(min=1) / exact) / math.log(max_distance / exact)
    x = torch.where((x - x.round()).abs() < 1e-9, x.round(), x)  # a whole number stays whole
    large = (exact + torch.floor(x).to(rel.dtype)).clamp(max=n - 1)
    return bucket + torch.where(r < exact, r, large)


def t5_bias(table: Tensor, ell_x: int, ell_z: int, bidirectional: bool, v: VariantSet) -> Tensor:
    """T5's relative bias of every head, native [h, query, key] (H, ℓ_x, ℓ_z): ``table`` (rel_buckets, H)
    (Hugging Face's ``relative_attention_bias.weight``) at the buckets (``t5_buckets``), as
    ``T5Attention.compute_bias``: ``values.permute([2, 0, 1])``."""
    buckets = t5_buckets(ell_x, ell_z, bidirectional, v.rel_buckets, v.rel_max_distance, table.device)
    return table[buckets].permute(2, 0, 1)  # (H, ℓ_x, ℓ_z)


def attend(Q: Tensor, K: Tensor, V: Tensor, v: VariantSet, d_x: int, mask: Optional[Tensor] = None,
           causal: bool = False, alibi: bool = False, pos_bias: Optional[Tensor] = None) -> Tensor:
    """Alg. 4 lines 4-6 for all H heads at once (Alg. 5 lines 1-2).

    Q: (…, H, ℓ_x, d_attn), K: (…, H_kv, ℓ_z, d_attn), V: (…, H_kv, ℓ_z, d_mid) as ``project``
    gives them; d_x is the primary width (attn_scale="sqrt_d_model"; d_x/H for
    "sqrt_d_model_per_head"); mask: native (…, ℓ_x,
    ℓ_z), True = may attend, or None (Mask ≡ 1); ``causal`` builds the square top-left mask.
    ``alibi``: a causal self-attention, whose scores take ALiBi's bias under
    ``position_bias="alibi"`` (``alibi_bias``), after the scale, before the mask. ``pos_bias``: T5's
    relative bias (H, ℓ_x, ℓ_z) (``t5_bias``), added there too.
    Returns Y: (…, H, ℓ_x, d_mid)."""
    H, ell_x, ell_z = Q.shape[-3], Q.shape[-2], K.shape[-2]
    bias = alibi_bias(H, ell_x, ell_z, Q.dtype, Q.device) if alibi and v.position_bias == "alibi" else None
    if pos_bias is not None:
        bias = pos_bias if bias is None else bias + pos_bias
    K, V = expand_kv(K, H, v), expand_kv(V, H, v)  # (…, H, ℓ_z, ·)
    # sqrt_d_model_per_head: d_x/H, H the query heads (Gemma 2 27B's query_pre_attn_scalar =
    # hidden_size/num_attention_heads; transformers 5.24 Gemma2Attention: scaling = that**-0.5)
    d = {"sqrt_d_attn": Q.shape[-1], "sqrt_d_model": d_x, "sqrt_d_model_per_head": d_x / H,
         "none": 1}[v.attn_scale]
    if causal:
        mask = causal_mask(ell_x, ell_z, "top_left", Q.device, v.window)  # (ℓ_x, ℓ_z)
    empty = None
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)  # (…, ℓ_x, 1): queries with no key
        if not causal and bool(empty.any()):
            if v.empty_query == "error":
                raise ValueError("attention: a query (a column of Mask) has no key it may attend to "
                                 "(empty_query='error')")
        else:
            empty = None
        mask = mask.unsqueeze(-3)  # (…, 1, ℓ_x, ℓ_z): the same mask for every head
    # Where the scale is applied (scale_placement) changes rounding only.
    if d != 1 and v.scale_placement == "query":
        Q = Q / math.sqrt(d)
    elif d != 1 and v.scale_placement == "query_key_sqrt":
        Q, K = Q / d ** 0.25, K / d ** 0.25  # √(√d) on each side: ONNX Attention
    if v.attn_softcap:  # Gemma 2: scale, cap c·tanh(s/c), then bias and mask: no SDPA path has it
        S = Q @ K.transpose(-1, -2)  # line 4, native Sᵀ: (…, H, ℓ_x, ℓ_z)
        if d != 1 and v.scale_placement == "scores":
            S = S / math.sqrt(d)
        return _softmax_attend(softcap(S, v.attn_softcap), V, v, bias, mask, empty)
    if bias is not None and (d == 1 or v.scale_placement != "scores") and empty is None:
        # SDPA adds a float attn_mask to the scaled scores, as BLOOM's baddbmm adds ALiBi: the bias,
        # −∞ where the mask forbids
        float_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=float_mask, scale=1.0)  # (…, H, ℓ_x, d_mid)
    if (d == 1 or v.scale_placement != "scores") and empty is None:
        # The scale is already applied (or 1), nothing is empty: SDPA's
        # definition is exactly lines 4-6. scale=1.0 keeps it from scaling again.
        if causal and not v.window:  # is_causal has no window: a windowed mask goes as attn_mask
            return F.scaled_dot_product_attention(Q, K, V, is_causal=True, scale=1.0)  # (…, H, ℓ_x, d_mid)
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, scale=1.0)  # (…, H, ℓ_x, d_mid)
    S = Q @ K.transpose(-1, -2)  # line 4, native Sᵀ: (…, H, ℓ_x, ℓ_z)
    if d != 1 and v.scale_placement == "scores":
        S = S / math.sqrt(d)  # line 6's S / √d_attn, applied to the scores as written
    return _softmax_attend(S, V, v, bias, mask, empty)


def _softmax_attend(S: Tensor, V: Tensor, v: VariantSet, bias: Optional[Tensor], mask: Optional[Tensor],
                    empty: Optional[Tensor]) -> Tensor:
    """Alg. 4 lines 5-6 from the scaled scores S (…, H, ℓ_x, ℓ_z): ALiBi's bias, the mask, the softmax
    and the empty queries' weights (``empty_query``), then Ṽᵀ = αᵀ Vᵀ."""
    if bias is not None:
        S = S + bias  # ALiBi, after the scale, before the mask
    if mask is not None:
        if empty is not None:
            # Let empty queries see every key with equal scores, so softmax stays
            # finite (and differentiable); their weights are replaced below.
            mask = mask | empty.unsqueeze(-3)
            S = S.masked_fill(empty.unsqueeze(-3), 0.0)
        S = S.masked_fill(~mask, float("-inf"))  # line 5
    A = torch.softmax(S, dim=-1)  # line 6: softmax over the context index
    if empty is not None:
        e = empty.unsqueeze(-3)  # (…, 1, ℓ_x, 1)
        if v.empty_query == "zeros":
            A = A.masked_fill(e, 0.0)  # ṽ = 0 for that query
        elif v.empty_query == "nan":
            A = A.masked_fill(e, float("nan"))  # the output column is NaN
        # "uniform": equal scores above already give weight 1/ℓ_z on every key
    return A @ V  # line 6: Ṽᵀ = αᵀ Vᵀ, (…, H, ℓ_x, d_mid)


def attention_heads(X: Tensor, Z: Tensor, p: Attn, v: VariantSet, mask: Optional[Tensor] = None,
                    causal: bool = False, rotary: bool = True, alibi: bool = False,
                    pos_bias: Optional[Tensor] = None) -> Tensor:
    """Alg. 4 lines 1-6 for all H heads at once (Alg. 5 lines 1-2): ``project`` then ``attend``.

    X: (…, ℓ_x, d_x) primary, Z: (…, ℓ_z, d_z) context, both from position 0, mask: native
    (…, ℓ_x, ℓ_z) True = may attend, or None (Mask ≡ 1); ``causal`` builds the
    square top-left mask. Returns Y: (…, H, ℓ_x, d_mid).
    """
    Q, K, V = project(X, Z, p, v, rotary=rotary)
    return attend(Q, K, V, v, X.shape[-1], mask, causal, alibi, pos_bias)


def merge_heads(Y: Tensor, p: Attn) -> Tensor:
    """Alg. 5 lines 3-4: Y (…, H, ℓ_x, d_mid) → W_o [Y^1; …; Y^H] + b_o 1ᵀ, native (…, ℓ_x, d_out)."""
    Y = Y.transpose(-3, -2).flatten(-2)  # line 3, head 0 first: (…, ℓ_x, H·d_mid)
    if p.W_o is None:
        raise ValueError("Alg. 5 needs the output projection W_o")
    return F.linear(Y, p.W_o, p.b_o)  # line 4: (…, ℓ_x, d_out)


def mh_attention(X: Tensor, Z: Tensor, p: Attn, v: VariantSet, mask: Optional[Tensor] = None,
                 causal: bool = False, alibi: bool = False, pos_bias: Optional[Tensor] = None) -> Tensor:
    """Alg. 5: Ṽ = W_o [Y^1; …; Y^H] + b_o 1ᵀ. Native: (…, ℓ_x, d_out).

    Grouped-query attention (``kv_group`` = G > 1; Ainslie et al. 2023, "GQA", §2.2): the H
    query heads share H / G key/value heads (``expand_kv``). The biases present are those
    ``attn_bias``/``attn_bias_at`` name (``check_biases``). ``alibi``: a causal self-attention (the
    attention ALiBi's ``position_bias`` applies to)."""
    check_groups(p, v)
    check_biases(p, v)
    return merge_heads(attention_heads(X, Z, p, v, mask, causal, alibi=alibi, pos_bias=pos_bias), p)  # lines 1-4


def cached_self_attention(X: Tensor, p: Attn, v: VariantSet, cache: list[Tensor], start: int) -> Tensor:
    """Causal self-attention (Alg. 5, Mask[t_z, t_x] = [[t_z ≤ t_x]]) of the ℓ new tokens X
    (…, ℓ, d_e) at positions start … start + ℓ − 1, with the keys and values of positions
    < start read from ``cache`` instead of recomputed.

    ``cache`` is [] or [K, V] of the earlier positions, (…, H_kv, start, d): one entry per key/value
    head (shared heads are stored once under grouped-query attention), K already rotated at its
    own position under RoPE. It is updated in place to hold positions < start + ℓ. Query i (position
    start + i) may attend to keys j ≤ start + i: the bottom-right causal mask over the start + ℓ
    keys (none needed for a single new token, which sees every key)."""
    check_groups(p, v)
    check_biases(p, v)
    Q, K, V = project(X, X, p, v, start, start)  # the new positions only
    if cache:
        if cache[0].shape[-2] != start:
            raise ValueError(f"key/value cache holds {cache[0].shape[-2]} positions, expected {start}")
        K, V = torch.cat([cache[0], K], dim=-2), torch.cat([cache[1], V], dim=-2)  # (…, H_kv, start + ℓ, ·)
    elif start:
        raise ValueError(f"empty key/value cache at position {start}")
    cache[:] = [K, V]
    ell = Q.shape[-2]
    if start == 0:
        Y = attend(Q, K, V, v, X.shape[-1], causal=True, alibi=True)  # the prefill: top-left = bottom-right here
    elif v.window:  # a sliding window drops the cached keys W or more places back, one token or many
        Y = attend(Q, K, V, v, X.shape[-1], mask=causal_mask(ell, start + ell, "bottom_right", X.device, v.window),
                   alibi=True)
    elif ell == 1:
        Y = attend(Q, K, V, v, X.shape[-1], alibi=True)  # one new token: every cached key and itself
    else:
        Y = attend(Q, K, V, v, X.shape[-1], mask=causal_mask(ell, start + ell, "bottom_right", X.device), alibi=True)
    return merge_heads(Y, p)


# --------------------------------------------------------------------------
# MLP, activation, Algorithm 7
# --------------------------------------------------------------------------


def activation(X: Tensor, kind: str) -> Tensor:
    """The MLP's (and BERT head's) activation. silu: x σ(x) (Elfwing et al. 2018, "Sigmoid-weighted
    linear units"; Swish with β = 1): ``F.silu``, whose kernel forms x / (1 + exp(−x)), which stays
    finite for large |x| (exp(−x) → ∞ gives x/∞ → −0 for very negative x, never ∞/∞)."""
    if kind == "relu":
        return F.relu(X)
    if kind == "gelu_erf":
        return F.gelu(X, approximate="none")  # x Φ(x)
    if kind == "gelu_tanh":
        return F.gelu(X, approximate="tanh")
    if kind == "silu":
        return F.silu(X)
    raise ValueError(f"unknown activation {kind!r}")


def mlp(X: Tensor, p: MLP, kind: str, v: VariantSet) -> Tensor:
    """W_mlp2 H + b_mlp2 1ᵀ, H = act(W_mlp1 X + b_mlp1 1ᵀ) (Alg. 8 l. 7, 18; Alg. 9, 10 l. 7-8).

    ``mlp="gated"``: H = act(W_mlp1 x + b_mlp1) ⊙ (V x + c), the GLU family of Shazeer (2020),
    "GLU Variants Improve Transformer" (SwiGLU = silu; LLaMA's down(act(gate(x)) * up(x))).
    ``mlp_depth`` = k: k − 1 more layers H ← act(W H + b) after that (d_mlp → d_mlp).
    ``mlp="one_layer"``: no W_mlp2, the last H is the output, so d_mlp = d_e (seed 004, the numeric
    tutorial, II.J: F = ReLU(A W_L + b_L), "one linear layer L, and one ReLU layer R").
    Rows are tokens here, so each W acts through ``F.linear`` (x Wᵀ + b)."""
    one_layer = v.mlp == "one_layer"
    if ((p.W_lin is not None) != (v.mlp == "gated") or len(p.hidden) != v.mlp_depth - 1
            or (p.W2 is None) != one_layer):
        raise ValueError(f"MLP parameters do not match mlp={v.mlp!r}, mlp_depth={v.mlp_depth}: "
                         f"linear branch {'present' if p.W_lin is not None else 'absent'}, "
                         f"second map {'present' if p.W2 is not None else 'absent'}, "
                         f"{len(p.hidden)} further hidden layer(s)")
    if one_layer and p.W1.shape[0] != X.shape[-1]:  # else a d_mlp of 1 would broadcast into X
        raise ValueError(f"mlp='one_layer' adds act(W_mlp1 x) to x: d_mlp = {p.W1.shape[0]} must equal "
                         f"d_e = {X.shape[-1]}")
    H = activation(F.linear(X, p.W1, p.b1), kind)  # (…, ℓ, d_mlp)
    if p.W_lin is not None:
        H = H * F.linear(X, p.W_lin, p.b_lin)  # (…, ℓ, d_mlp): the gate's product
    for W, b in p.hidden:
        H = activation(F.linear(H, W, b), kind)  # (…, ℓ, d_mlp)
    if p.W2 is None:  # mlp="one_layer"
        return H  # (…, ℓ, d_mlp = d_e)
    return F.linear(H, p.W2, p.b2)  # (…, ℓ, d_e)


def logits(X: Tensor, W_u: Tensor, b_u: Optional[Tensor] = None, v: Optional[VariantSet] = None) -> Tensor:
    """Alg. 7 before its softmax: W_u e + b_u per token. X (…, ℓ, d) → (…, ℓ, N_V).

    ``logit_softcap`` c > 0 (Gemma 2's final_logit_softcapping): each logit z becomes c·tanh(z/c),
    as Gemma2ForCausalLM does to lm_head's output (``softcap``). The losses of Alg. 11-13 take
    log-probabilities from these with ``log_softmax``/``cross_entropy`` rather than the log of P."""
    z = F.linear(X, W_u, b_u)
    return softcap(z, v.logit_softcap) if v is not None and v.logit_softcap else z


def softcap(S: Tensor, c: float) -> Tensor:
    """c·tanh(S/c), in Hugging Face Gemma 2's order: divide, tanh, multiply."""
    return torch.tanh(S / c) * c


def unembed(X: Tensor, W_u: Tensor, b_u: Optional[Tensor] = None, v: Optional[VariantSet] = None) -> Tensor:
    """Alg. 7 per token: softmax(W_u e + b_u), capped by ``logit_softcap``. X (…, ℓ, d) → P (…, ℓ, N_V)."""
    return torch.softmax(logits(X, W_u, b_u, v), dim=-1)
