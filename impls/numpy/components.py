"""Algorithms 1-7 of Phuong & Hutter (2022) in NumPy, in the paper's layout.

Layout: a sequence is X ∈ R^{d×ℓ} (tokens are columns), weights are out × in
and act as ``W @ X``, biases broadcast over columns (``b[:, None]`` is the
paper's ``b 1ᵀ``), and Mask is indexed [t_z, t_x] with True = may attend.
Every function accepts any number of leading batch axis ``...`` in front of
that layout; parameters never carry one.

Line numbers cite the restatement in ALGORITHMS.md.

Dtypes: arrays stay in the dtype they arrive in. Constants (√d, ε, 1/ℓ_z, the
GELU coefficients, SiLU's 1) are rounded once into that dtype with ``_const`` so that
NumPy 2's promotion rules never lift a float16/float32 computation to
float64. The sinusoid and RoPE (cos, sin) tables are the exception: they are data-independent
tables, computed in binary64 and rounded once to the call dtype (as libraries
precompute such buffers).

RoPE and grouped-query attention (variants ``rotary``, ``kv_group``, ``kv_order``) live in
Algorithm 4 (``attention_fwd``): Q and K rotated by their columns' positions after the
projections (``rotate``; Su et al. 2021, RoFormer, eq. 34), and each query head reading the
key/value head ``group_heads`` assigns it (Ainslie et al. 2023, GQA). ``KVCache`` holds the rotated
keys and the values of the positions decoded so far (``cached_decoding``).

Backward passes: ``norm_fwd``, ``embed_fwd`` and ``attention_fwd`` also
return a cache (a NamedTuple of the intermediates); the matching hand-written
``*_bwd`` functions are in ``grad_components.py``. The cache-less functions
(``norm_columns``, ``embed``, ``attention_core``) are the same computation.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

import numpy as np

__all__ = [
    "AttentionCache",
    "EmbedCache",
    "KVCache",
    "NormCache",
    "activation",
    "alibi_bias",
    "alibi_slopes",
    "real_positions",
    "t5_bias",
    "t5_buckets",
    "attention_core",
    "attention_fwd",
    "check_norm_input",
    "check_positions",
    "check_probability",
    "check_tokens",
    "check_variates",
    "embed",
    "embed_fwd",
    "gelu_erf",
    "group_heads",
    "logits",
    "gelu_tanh",
    "norm_columns",
    "norm_fwd",
    "relu",
    "rope_frequencies",
    "rope_tables",
    "rotary_rows",
    "rotate",
    "silu",
    "sinusoidal_halves",
    "sinusoidal_paper",
    "sinusoidal_raw_index",
    "sinusoidal_vaswani",
    "softmax_columns",
    "unembed",
    "ungroup_heads",
    "unidirectional_mask",
]


def _const(value: float, like: np.ndarray) -> Any:
    """``value`` rounded once to the dtype of ``like`` (keeps float16/32 from being upcast):
    a NumPy scalar, typed ``Any`` because NumPy's stubs give its ``dtype.type`` no arithmetic."""
    return np.asarray(like).dtype.type(value)


# --------------------------------------------------------------------------
# input checks (a silently wrong answer is worse than an error)
# --------------------------------------------------------------------------


def check_tokens(x: np.ndarray, N_V: int, name: str = "x") -> None:
    """Token IDs are 0-based in [0, N_V); NumPy would wrap a negative index silently."""
    x = np.asarray(x)
    if x.size and (x.min() < 0 or x.max() >= N_V):
        raise ValueError(f"{name}: token IDs must lie in [0, {N_V}); given range [{x.min()}, {x.max()}]")


def check_positions(t: np.ndarray, ell_max: int, name: str = "t") -> None:
    t = np.asarray(t)
    if t.size and (t.min() < 0 or t.max() >= ell_max):
        raise ValueError(f"{name}: positions must lie in [0, {ell_max}); given range [{t.min()}, {t.max()}]")


def check_variates(u: np.ndarray, name: str = "u") -> None:
    """Uniform variates lie in [0, 1): a 1 or a negative u would still pick a token, silently."""
    u = np.asarray(u)
    if u.size and not (np.all(u >= 0) and np.all(u < 1)):
        raise ValueError(f"{name}: variates must lie in [0, 1); given range [{u.min()}, {u.max()}]")


def check_probability(p: np.ndarray, name: str = "p_mask") -> None:
    if not 0 <= float(p) <= 1:
        raise ValueError(f"{name}: a probability in [0, 1]; given {float(p)}")


def check_norm_input(X: np.ndarray, variant, kind: str) -> None:
    """What Algorithm 6 cannot normalise (..., d, ℓ): with no ε, a column of zero variance (all its
    entries equal; all 0 for RMSnorm), where line 3 divides by √0; under unbiased variance, d = 1,
    where line 2 divides by d − 1 = 0. A column of equal entries is tested as such, not through the
    computed variance, whose rounding need not be 0."""
    d = X.shape[-2]
    if kind == "layer_norm" and variant.variance == "unbiased" and d < 2:
        raise ValueError(f"layer_norm: unbiased variance divides by d − 1 = 0 (d = {d})")
    if variant.epsilon_placement == "none":
        flat = (X == 0) if kind == "rms_norm" else (X == X[..., :1, :])
        if np.any(np.all(flat, axis=-2)):
            raise ValueError(f"{kind}: a column of zero variance and no epsilon (line 3 would divide by √0)")


# --------------------------------------------------------------------------
# Algorithms 1, 2 and the initial embedding of Algorithms 8-10 (lines 1-3)
# --------------------------------------------------------------------------


def columns(W: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """W[:, idx] with the gathered axis moved last-but-zero: (d, N) × (...) -> (..., d).

    Algorithm 1 line 1 (W_e[:, v]) and Algorithm 2 line 1 (W_p[:, t]); with a
    batch of indices the result has one row per index, so callers transpose.
    """
    return W.T[idx]  # (..., d)


def sinusoidal_paper(d_e: int, ell_max: int, dtype: np.dtype) -> np.ndarray:
    """Algorithm 2, fixed alternative, as the paper writes it (1-based rows and t, base ℓ_max).

    For 0-based row r and column c: i = r // 2 + 1, t = c + 1,
    W_p[r, c] = sin(t / ℓ_max^{2i/d_e}) for even r (the paper's row 2i−1),
    cos(…) for odd r (row 2i). Odd d_e: the last row is the sine of
    i = (d_e + 1)/2, which the same formula gives.
    """
    r = np.arange(d_e)[:, None]  # (d_e, 1)
    t = np.arange(1, ell_max + 1, dtype=np.float64)[None, :]  # (1, ell_max)
    i = r // 2 + 1  # (d_e, 1)
    angle = t / float(ell_max) ** (2.0 * i / d_e)  # (d_e, ell_max)
    table = np.where(r % 2 == 0, np.sin(angle), np.cos(angle))  # (d_e, ell_max)
    return table.astype(dtype)


def sinusoidal_vaswani(d_e: int, ell_max: int, dtype: np.dtype) -> np.ndarray:
    """Vaswani et al. §3.5 (0-based, base 10000, sin on even rows).

    For 0-based row r and position c: i = r // 2,
    W_p[r, c] = sin(c / 10000^{2i/d_e}) for even r, cos(…) for odd r.
    Odd d_e: the last row is the sine of i = (d_e − 1)/2.
    """
    r = np.arange(d_e)[:, None]  # (d_e, 1)
    c = np.arange(ell_max, dtype=np.float64)[None, :]  # (1, ell_max)
    i = r // 2  # (d_e, 1)
    angle = c / 10000.0 ** (2.0 * i / d_e)  # (d_e, ell_max)
    table = np.where(r % 2 == 0, np.sin(angle), np.cos(angle))  # (d_e, ell_max)
    return table.astype(dtype)


def sinusoidal_raw_index(d_e: int, ell_max: int, dtype: np.dtype) -> np.ndarray:
    """The numeric tutorial's sinusoid (seeds/004, section II.E, Table II).

    Vaswani's table with the exponent's pair index replaced by the raw row
    index: W_p[r, c] = sin(c / 10000^{2r/d_e}) for even r, cos(…) for odd r
    (its Table II: cos(0/10000^(2*1/6)) in row 1, sin(0/10000^(2*2/6)) in row 2).
    """
    r = np.arange(d_e)[:, None]  # (d_e, 1)
    c = np.arange(ell_max, dtype=np.float64)[None, :]  # (1, ell_max)
    angle = c / np.power(10000.0, 2.0 * r / d_e)  # (d_e, ell_max)
    table = np.where(r % 2 == 0, np.sin(angle), np.cos(angle))  # (d_e, ell_max)
    return table.astype(dtype)


def sinusoidal_halves(d_e: int, ell_max: int, dtype: np.dtype) -> np.ndarray:
    """Marian's sinusoid (transformers 5.24.0, modeling_marian.py,
    MarianSinusoidalPositionalEmbedding.create_weight): not interleaved, every sine first.

    With h = ceil(d_e / 2): W_p[k, c] = sin(c / 10000^{2k/d_e}) for k < h, and
    W_p[h + k, c] = cos(c / 10000^{2k/d_e}) for k < d_e // 2 (odd d_e: one
    sine more than cosines).
    """
    h = (d_e + 1) // 2
    c = np.arange(ell_max, dtype=np.float64)[None, :]  # (1, ell_max)
    k_sin = np.arange(h)[:, None]  # (h, 1)
    k_cos = np.arange(d_e // 2)[:, None]  # (d_e // 2, 1)
    sines = np.sin(c / 10000.0 ** (2.0 * k_sin / d_e))  # (h, ell_max)
    cosines = np.cos(c / 10000.0 ** (2.0 * k_cos / d_e))  # (d_e // 2, ell_max)
    return np.concatenate([sines, cosines], axis=0).astype(dtype)  # (d_e, ell_max)


def position_table(positions: str, W_p, d_e: int, ell_max: int, dtype) -> np.ndarray | None:
    """The W_p of lines 1-3 under the ``positions`` switch (None: no positions)."""
    if positions == "learned":
        return W_p
    if positions == "sinusoidal_paper":
        return sinusoidal_paper(d_e, ell_max, dtype)
    if positions == "sinusoidal_vaswani":
        return sinusoidal_vaswani(d_e, ell_max, dtype)
    if positions == "sinusoidal_raw_index":
        return sinusoidal_raw_index(d_e, ell_max, dtype)
    if positions == "sinusoidal_halves":
        return sinusoidal_halves(d_e, ell_max, dtype)
    if positions == "none":
        return None
    raise ValueError(f"unknown positions variant {positions!r}")


class EmbedCache(NamedTuple):
    """What the backward of lines 1-3 needs (``grad_components.embed_bwd``)."""

    x: np.ndarray  # (..., ℓ) token IDs
    N_V: int
    ell_max: int
    scale: Optional[float]  # √d_e under embedding_scale='sqrt_d_e', else None
    learned: bool  # whether W_p is a parameter (positions='learned')
    norm: Optional[NormCache]  # the embedding norm's cache, if any


def real_positions(pad: np.ndarray) -> np.ndarray:
    """``pad_positions="real"``: the real tokens before each position, Σ_{s<t} pad[s], (..., ℓ) int. At a
    real token this is OPT's cumsum(attention_mask)·attention_mask − 1 and BLOOM's ALiBi position."""
    flags = np.asarray(pad).astype(np.int64)  # (..., ℓ) 1 = a real token
    return np.cumsum(flags, axis=-1) - flags  # exclusive count: a token does not count itself


def embed_fwd(x: np.ndarray, W_e: np.ndarray, W_p: np.ndarray | None, variant, *,
              ell_max: int, gamma=None, beta=None, start: int = 0,
              pad: Optional[np.ndarray] = None) -> tuple[np.ndarray, EmbedCache]:
    """Algorithms 8-10, lines 1-3: X ← [W_e[:, x[t]] + W_p[:, t]]_t, plus the variants.

    x: (..., ℓ) int64. ``embedding_scale='sqrt_d_e'`` multiplies the token
    embedding by √d_e before positions are added; ``embedding_norm`` applies
    the layers' norm to every column of the sum (γ_emb, β_emb). ``start``: the
    absolute position of x[0] (a decoding step embeds token t at position t:
    W_p[:, start + t]); 0 for a whole sequence. ``pad`` (..., ℓ), True = a real token, is read under
    ``pad_positions="real"`` alone: a real token takes W_p[:, p(t)] (``real_positions``), a padding
    position no position at all (the padded models, which have no backward pass).
    Returns X and the cache of the backward pass.
    """
    d_e, N_V = W_e.shape
    ell = x.shape[-1]
    check_tokens(x, N_V)
    if start + ell > ell_max:
        raise ValueError(f"x: sequence length {start + ell} exceeds ell_max = {ell_max}")
    X = np.swapaxes(columns(W_e, x), -1, -2)  # (..., d_e, ℓ)  W_e[:, x[t]] as column t
    scale = None
    if variant.embedding_scale == "sqrt_d_e":
        scale = math.sqrt(d_e)
        X = X * _const(scale, X)  # (..., d_e, ℓ)
    table = position_table(variant.positions, W_p, d_e, ell_max, W_e.dtype)
    if table is not None:
        table = table[:, start:]  # (d_e, ℓ_max − start)  columns from the absolute position of x[0]
        if pad is not None and variant.pad_positions == "real":
            real = np.asarray(pad).astype(bool)  # (..., ℓ)
            P = np.moveaxis(table[:, real_positions(real)], 0, -2)  # (..., d_e, ℓ)  W_p[:, p(t)]
            X = X + np.where(real[..., None, :], P, 0).astype(X.dtype)  # padding: no position
        else:
            X = X + table[:, :ell]  # (..., d_e, ℓ)  W_p[:, t] for t = 0..ℓ-1
    norm_cache = None
    if variant.embedding_norm:
        X, norm_cache = norm_fwd(X, gamma, beta, variant, variant.norm)
    return X, EmbedCache(x, N_V, ell_max, scale, variant.positions == "learned", norm_cache)


def embed(x: np.ndarray, W_e: np.ndarray, W_p: np.ndarray | None, variant, *,
          ell_max: int, gamma=None, beta=None, start: int = 0) -> np.ndarray:
    """Lines 1-3 (see ``embed_fwd``), without the cache."""
    return embed_fwd(x, W_e, W_p, variant, ell_max=ell_max, gamma=gamma, beta=beta, start=start)[0]


# --------------------------------------------------------------------------
# Algorithm 6: layer_norm and RMSnorm, per column
# --------------------------------------------------------------------------


class NormCache(NamedTuple):
    """What the backward of Algorithm 6 needs (``grad_components.norm_bwd``)."""

    kind: str  # "layer_norm" or "rms_norm"
    centred: np.ndarray  # (..., d, ℓ)  e − m (e itself for RMSnorm)
    root: np.ndarray  # (..., 1, ℓ)  √v (none, outside_root) or √(v + ε) (inside_root)
    sigma: np.ndarray  # (..., 1, ℓ)  the divisor σ
    normalised: np.ndarray  # (..., d, ℓ)  (e − m)/σ, before γ and β
    denom: int  # d or d − 1: v = Σ centred² / denom
    gamma: Optional[np.ndarray]
    has_beta: bool


def norm_fwd(X: np.ndarray, gamma, beta, variant, kind: str) -> tuple[np.ndarray, NormCache]:
    """Algorithm 6 applied to every column of X (..., d, ℓ): reductions run over axis −2.

    layer_norm: line 1 m = Σ_i e[i]/d; line 2 v = Σ_i (e[i] − m)²/d (1/(d−1)
    under ``variance='unbiased'``); line 3 ê = (e − m)/σ ⊙ γ + β.
    rms_norm: v = Σ_i e[i]²/d (no mean, variance switch ignored), ê = e/σ ⊙ γ.
    σ = √v, √(v + ε) or √v + ε by ``epsilon_placement``. ``gamma``/``beta``
    are None where the ``affine`` switch (or RMSnorm) removes them; ``norm_gain='one_plus_gamma'``
    multiplies by 1 + γ (Gemma).
    Returns ê and the cache of the backward pass.
    """
    d = X.shape[-2]
    check_norm_input(X, variant, kind)
    if kind == "layer_norm":
        m = np.sum(X, axis=-2, keepdims=True) / _const(d, X)  # (..., 1, ℓ)  line 1
        centred = X - m  # (..., d, ℓ)
        denom = d - 1 if variant.variance == "unbiased" else d
        v = np.sum(centred * centred, axis=-2, keepdims=True) / _const(denom, X)  # (..., 1, ℓ)  line 2
    elif kind == "rms_norm":
        centred = X  # m = 0
        denom = d
        v = np.sum(X * X, axis=-2, keepdims=True) / _const(d, X)  # (..., 1, ℓ)
    else:
        raise ValueError(f"unknown norm {kind!r}")
    eps = _const(variant.epsilon, X)
    if variant.epsilon_placement == "none":
        root = sigma = np.sqrt(v)
    elif variant.epsilon_placement == "inside_root":
        root = sigma = np.sqrt(v + eps)
    elif variant.epsilon_placement == "outside_root":
        root = np.sqrt(v)
        sigma = root + eps
    else:
        raise ValueError(f"unknown epsilon_placement {variant.epsilon_placement!r}")
    normalised = centred / sigma  # (..., d, ℓ)  line 3, before the affine map
    out = normalised
    if gamma is not None and variant.norm_gain == "one_plus_gamma":
        gamma = 1 + gamma  # Gemma's gain 1 + γ, rounded in X's dtype before the product; the backward
        # reads this gain from the cache, and ∂(1 + γ)/∂γ = 1 leaves its γ gradient unchanged
    if gamma is not None:
        out = out * gamma[:, None]  # ⊙ γ on every column
    if beta is not None:
        out = out + beta[:, None]  # + β 1ᵀ
    return out, NormCache(kind, centred, root, sigma, normalised, denom, gamma, beta is not None)


def norm_columns(X: np.ndarray, gamma, beta, variant, kind: str) -> np.ndarray:
    """Algorithm 6 per column of X (see ``norm_fwd``), without the cache."""
    return norm_fwd(X, gamma, beta, variant, kind)[0]


# --------------------------------------------------------------------------
# activations
# --------------------------------------------------------------------------

#: Φ(s) = erfc(−s/√2)/2, evaluated per element by the C library through
#: ``math.erfc`` (NumPy has no erf). The erfc form keeps full relative
#: precision for negative s, where 1 + erf(s/√2) would cancel.
_PHI = np.frompyfunc(lambda s: 0.5 * math.erfc(-s / math.sqrt(2.0)), 1, 1)


def relu(X: np.ndarray) -> np.ndarray:
    return np.maximum(X, _const(0.0, X))


def gelu_erf(X: np.ndarray) -> np.ndarray:
    """GELU(x) = x·Φ(x) (exact). Φ is computed in binary64 per element and
    rounded once to X's dtype; the product is in X's dtype."""
    phi = _PHI(X.astype(np.float64)).astype(X.dtype) if X.size else np.zeros_like(X)
    return X * phi


def gelu_tanh(X: np.ndarray) -> np.ndarray:
    """x (1 + tanh(√(2/π)(x + 0.044715 x³)))/2, in X's dtype."""
    inner = _const(math.sqrt(2.0 / math.pi), X) * (X + _const(0.044715, X) * X * X * X)
    return _const(0.5, X) * X * (_const(1.0, X) + np.tanh(inner))


def logistic_pair(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(σ(x), σ(−x)) = (1/(1 + e^{−x}), 1/(1 + e^{x})) per element, in X's dtype, from
    e = exp(−|x|) ≤ 1 only: no exp overflows, and 1 − σ(x) is never formed by cancellation."""
    one = _const(1.0, X)
    e = np.exp(-np.abs(X))  # (...)  in (0, 1]
    near = one / (one + e)  # σ(|x|)
    far = e / (one + e)  # σ(−|x|) = 1 − σ(|x|)
    nonneg = X >= _const(0.0, X)
    return np.where(nonneg, near, far), np.where(nonneg, far, near)


def silu(X: np.ndarray) -> np.ndarray:
    """SiLU(x) = x σ(x) = x / (1 + e^{−x}) (Elfwing, Uchibe & Doya 2018, "Sigmoid-weighted linear
    units"; Swish with β = 1, Ramachandran et al. 2017), in X's dtype. σ comes from
    ``logistic_pair``, so a large |x| neither overflows nor gives 0·∞: SiLU(x) → x for
    x → +∞ and → 0 (from below) for x → −∞."""
    return X * logistic_pair(X)[0]


def activation(name: str):
    try:
        return {"relu": relu, "gelu_erf": gelu_erf, "gelu_tanh": gelu_tanh, "silu": silu}[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}") from None


# --------------------------------------------------------------------------
# softmax (Algorithm 4 line 6, Algorithm 7) and Algorithm 7
# --------------------------------------------------------------------------


def softmax_columns(S: np.ndarray) -> np.ndarray:
    """softmax(S)[t1, t2] = exp(S[t1, t2]) / Σ_t exp(S[t, t2]): over axis −2, column max subtracted."""
    E = np.exp(S - np.max(S, axis=-2, keepdims=True))  # (..., n, ℓ)
    return E / np.sum(E, axis=-2, keepdims=True)


def logits(X: np.ndarray, W_u: np.ndarray, b_u=None) -> np.ndarray:
    """The argument of Algorithm 7's softmax, per column: W_u X [+ b_u 1ᵀ] (..., N_V, ℓ)."""
    out = W_u @ X  # (..., N_V, ℓ)
    if b_u is not None:
        out = out + b_u[:, None]
    return out


def unembed(X: np.ndarray, W_u: np.ndarray, b_u=None) -> np.ndarray:
    """Algorithm 7 line 1 per column: P = softmax(W_u X [+ b_u 1ᵀ])."""
    return softmax_columns(logits(X, W_u, b_u))


# --------------------------------------------------------------------------
# Algorithm 4: the unidirectional mask and the attention core
# --------------------------------------------------------------------------


def unidirectional_mask(ell_z: int, ell_x: int, alignment: str = "top_left", window: int = 0) -> np.ndarray:
    """Mask[t_z, t_x] = [[t_z ≤ t_x]] (top_left, the paper) or [[t_z ≤ t_x + ℓ_z − ℓ_x]] (bottom_right);
    a sliding ``window`` W ≥ 1 (Mistral) also drops the keys W or more places back: t_z > t_x − W
    (shifted alike), so each query keeps W keys, itself counted."""
    t_z = np.arange(ell_z)[:, None]  # (ℓ_z, 1)
    t_x = np.arange(ell_x)[None, :]  # (1, ℓ_x)
    if alignment not in ("top_left", "bottom_right"):
        raise ValueError(f"unknown causal_alignment {alignment!r}")
    if window < 0:
        raise ValueError(f"window: expected a whole number >= 0, given {window}")
    if window:
        last = t_x + (ell_z - ell_x if alignment == "bottom_right" else 0)  # (1, ℓ_x): each query's newest key
        return (t_z <= last) & (t_z > last - window)  # (ℓ_z, ℓ_x) bool
    if alignment == "top_left":
        return t_z <= t_x  # (ℓ_z, ℓ_x) bool
    return t_z <= t_x + (ell_z - ell_x)  # (ℓ_z, ℓ_x) bool


def _divisor(variant, d_attn: int, d_model: int, heads: int = 1) -> float | None:
    """d of the 1/√d score scale. ``sqrt_d_model_per_head``: d_x/H in binary64, H the query heads
    (1 for one head alone): Gemma 2 27B's query_pre_attn_scalar = hidden_size/num_attention_heads
    (transformers 5.24 ``Gemma2Attention``: ``scaling = query_pre_attn_scalar**-0.5``)."""
    if variant.attn_scale == "sqrt_d_attn":
        return float(d_attn)
    if variant.attn_scale == "sqrt_d_model":
        return float(d_model)
    if variant.attn_scale == "sqrt_d_model_per_head":
        return d_model / heads
    if variant.attn_scale == "none":
        return None
    raise ValueError(f"unknown attn_scale {variant.attn_scale!r}")


# --------------------------------------------------------------------------
# rotary position embedding (RoPE) and the key/value cache of decoding
# --------------------------------------------------------------------------


def rope_frequencies(d: int, base: float, scaling: str = "none") -> np.ndarray:
    """θ_i = base^(−2i/d), i = 0..d/2−1 (RoFormer eq. 15), rescaled as ``rope_scaling`` says, in binary64.

    ``linear-2``: θ_i / 2 (Hugging Face's rope_type "linear", factor 2: ``inv_freq /= factor``).
    ``linear-8``: θ_i / 8, the same with factor 8 (Gemma 3 4B-27B's global layers; transformers 5.24
    ``_compute_linear_scaling_rope_parameters``).
    ``llama3``: Llama 3.1's (Hugging Face transformers 5.24 ``_compute_llama3_parameters``, with
    factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192): by the
    wavelength 2π/θ_i, kept below 8192/4, divided by 8 above 8192/1, and in between the blend
    (1 − g)·θ_i/8 + g·θ_i with g = (8192/wavelength − 1)/(4 − 1).
    """
    i = np.arange(d // 2, dtype=np.float64)  # (d/2,)
    theta = np.power(float(base), -2.0 * i / float(d))  # θ_i = base^(−2i/d)
    if scaling == "none":
        return theta
    if scaling == "linear-2":
        return theta / 2.0  # the angles of positions t/2
    if scaling == "linear-8":
        return theta / 8.0  # the angles of positions t/8
    if scaling != "llama3":
        raise ValueError(f"unknown rope_scaling {scaling!r}")
    factor, low_factor, high_factor, context = 8.0, 1.0, 4.0, 8192.0
    wavelength = 2.0 * np.pi / theta
    g = (context / wavelength - low_factor) / (high_factor - low_factor)
    blended = (1.0 - g) * theta / factor + g * theta
    slowed = np.where(wavelength > context / low_factor, theta / factor, blended)
    return np.where(wavelength < context / high_factor, theta, slowed)


def rope_tables(d: int, positions: np.ndarray, base: float, dtype, scaling: str = "none",
                longrope: Optional[tuple[np.ndarray, np.ndarray]] = None) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the RoPE angles t·θ_i, θ_i = base^(−2i/d), i = 0..d/2−1 (rescaled as
    ``rope_frequencies`` says under ``scaling``), for each position t.

    Su et al. 2021 (RoFormer), eqs. 13-15 and 34. Like the sinusoid tables, computed in binary64
    and rounded once to ``dtype`` (a data-independent table, as libraries precompute it).
    ``longrope`` (ext, mscale): Phi-3's LongRoPE (``rope_factors="longrope"``) in place of ``scaling``:
    θ_i = 1/(ext_i·base^(2i/d)) and both tables times mscale[0] (transformers 5.24
    ``_compute_longrope_parameters``: ``inv_freq = 1.0 / (ext_factors * base**inv_freq_shape)``;
    ``Phi3RotaryEmbedding.forward``: ``emb.cos() * self.attention_scaling``); ext and mscale are the
    call's parameters, so the tables here are the parameters' function, still rounded once.
    Returns two (d/2, len(positions)) arrays.
    """
    if longrope is None:
        theta = rope_frequencies(d, base, scaling)[:, None]  # (d/2, 1)
        gain = 1.0
    else:
        ext, mscale = (np.asarray(a, dtype=np.float64) for a in longrope)
        if ext.shape != (d // 2,) or mscale.shape != (1,):
            raise ValueError(f"rope_factors='longrope': {d // 2} factors and 1 attention factor for a rotated width "
                             f"{d}, given {ext.shape} and {mscale.shape}")
        theta = 1.0 / (ext * np.power(float(base), np.arange(0, d, 2, dtype=np.float64) / float(d)))
        theta, gain = theta[:, None], float(mscale[0])
    angle = np.asarray(positions, dtype=np.float64)[None, :] * theta  # (d/2, ℓ)  t·θ_i
    return (gain * np.cos(angle)).astype(dtype), (gain * np.sin(angle)).astype(dtype)


def rotate(M: np.ndarray, positions: np.ndarray, pairing: str, base: float, inverse: bool = False,
           rows: Optional[int] = None, scaling: str = "none",
           longrope: Optional[tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
    """RoPE (RoFormer eq. 34): column t of M (..., d, ℓ) rotated pair by pair by the angles t·θ_i.

    Pair i is rows (2i, 2i+1) under ``pairing="interleaved"`` (RoFormer's R^d_{Θ,t}, Meta's LLaMA
    code, GPT-J) and rows (i, i + d/2) under ``"half"`` (GPT-NeoX, Hugging Face Llama's
    ``rotate_half``); (a, b) ↦ (a cos − b sin, b cos + a sin). ``inverse`` rotates by −t·θ_i: the
    rotation is orthogonal, so that is both its inverse and its transpose (the backward pass).
    ``positions``: (ℓ,) the absolute position of each column. ``rows`` r (partial rotary,
    ``rotary_fraction``: GPT-NeoX's ``rotary_ndims``, GPT-J's ``rotary_dim``): only the first r rows
    are rotated, as a RoPE of width r (θ_i = base^(−2i/r)); the others pass unchanged. ``scaling``:
    ``rope_scaling``'s rescaling of the θ_i (``rope_frequencies``). ``longrope``: LongRoPE's factors and
    attention factor (``rope_tables``), the rotated pair then (m·(a cos − b sin), m·(b cos + a sin)).
    """
    width = M.shape[-2]  # d_attn
    d = width if rows is None else rows  # the rotated width r
    if d % 2 or not 2 <= d <= width:
        raise ValueError(f"rotary: RoPE rotates pairs of rows; {d} of d_attn = {width} rows cannot be")
    lead = slice(0, d)  # the rotated rows: the first r
    part = M[..., lead, :]  # (..., r, ℓ)
    cos, sin = rope_tables(d, positions, base, M.dtype, scaling, longrope)  # (r/2, ℓ) each
    if inverse:
        sin = -sin
    if pairing == "interleaved":
        first, second = slice(0, d, 2), slice(1, d, 2)
    elif pairing == "half":
        first, second = slice(0, d // 2), slice(d // 2, d)
    else:
        raise ValueError(f"unknown rotary variant {pairing!r}")
    a, b = part[..., first, :], part[..., second, :]  # (..., r/2, ℓ)
    turned = np.empty_like(part)
    turned[..., first, :] = a * cos - b * sin
    turned[..., second, :] = b * cos + a * sin
    out = M.copy()
    out[..., lead, :] = turned
    return out


def rotary_rows(d_attn: int, fraction: float) -> int:
    """The rows RoPE rotates under ``rotary_fraction`` f: ⌊f·d_attn⌋, as Hugging Face's
    ``int(head_dim * partial_rotary_factor)``."""
    return int(d_attn * fraction)


def alibi_slopes(H: int, dtype) -> np.ndarray:
    """ALiBi's slope of each of H heads (Press et al. 2022, "Train Short, Test Long", §3), (H,).

    A geometric sequence 2^(−8/H), 2^(−16/H), ..., 2^(−8) for H a power of two. Otherwise the
    power-of-two sequence of n = 2^⌊log₂ H⌋ heads, then the odd-numbered terms 2^(−8·1/(2n)),
    2^(−8·3/(2n)), ... of the sequence of 2n heads, H − n of them (Press et al.'s ``get_slopes``;
    Hugging Face BLOOM's ``_get_alibi_slopes``). A data-independent table: computed in binary64 and
    rounded once to ``dtype``, as the RoPE tables are."""
    n = 2 ** int(math.floor(math.log2(H)))
    power_of_two = 2.0 ** (-8.0 * np.arange(1, n + 1) / n)  # (n,)
    odd_of_double = 2.0 ** (-8.0 * np.arange(1, 2 * (H - n), 2) / (2 * n))  # (H − n,)
    return np.concatenate([power_of_two, odd_of_double]).astype(dtype)


def alibi_bias(slopes: np.ndarray, pos_k: np.ndarray, pos_q: np.ndarray) -> np.ndarray:
    """ALiBi's bias m_h·(t_z − t_x) of each head on the scores [t_z, t_x]: (H, ℓ_z, ℓ_x), in the
    slopes' dtype (the distances are small whole numbers, exact in every float format used)."""
    dist = (pos_k[:, None] - pos_q[None, :]).astype(slopes.dtype)  # (ℓ_z, ℓ_x)  t_z − t_x ≤ 0 where causal
    return slopes[:, None, None] * dist  # (H, ℓ_z, ℓ_x)


def t5_buckets(ell_z: int, ell_x: int, bidirectional: bool, num_buckets: int, max_distance: int) -> np.ndarray:
    """T5's relative position buckets on the scores [t_z, t_x], (ℓ_z, ℓ_x) int (Raffel et al. 2020, §2.1;
    transformers 5.24 models/t5/modeling_t5.py ``T5Attention._relative_position_bucket``). Of d = t_z − t_x
    (key minus query): bidirectionally n = num_buckets/2 per side, keys after the query in n..2n−1, r = |d|;
    causally n = num_buckets, r = max(−d, 0). r < n/2 (max_exact) is exact; beyond, n/2 +
    ⌊(n − n/2)·log(r/(n/2))/log(max_distance/(n/2))⌋, at most n − 1, in binary64 with 1e-9 of slack
    upwards, so that a whole number that binary64 puts just below stays whole (the spec's buckets are the
    real-number ones: spec/position_bias.py ``t5_bucket``)."""
    d = np.arange(ell_z)[:, None] - np.arange(ell_x)[None, :]  # (ℓ_z, ℓ_x)
    n = num_buckets // 2 if bidirectional else num_buckets
    side = np.where(d > 0, n, 0) if bidirectional else np.zeros_like(d)
    r = np.abs(d) if bidirectional else np.maximum(-d, 0)
    exact = n // 2
    with np.errstate(divide="ignore"):  # r = 0 is exact: its log is never used
        x = (n - exact) * np.log(r / exact) / np.log(max_distance / exact)
    large = np.minimum(exact + np.floor(np.where(r >= exact, x, 0.0) + 1e-9).astype(int), n - 1)
    return side + np.where(r < exact, r, large)


def t5_bias(table: np.ndarray, ell_z: int, ell_x: int, bidirectional: bool, variant) -> np.ndarray:
    """T5's bias of every head on the scores [t_z, t_x], (H, ℓ_z, ℓ_x): ``table`` (rel_buckets, H), Hugging
    Face's ``relative_attention_bias.weight``, at the buckets (``t5_buckets``)."""
    b = t5_buckets(ell_z, ell_x, bidirectional, variant.rel_buckets, variant.rel_max_distance)
    return np.moveaxis(table[b], -1, 0)  # (H, ℓ_z, ℓ_x)


class KVCache:
    """The key/value cache of one attention during decoding: K (after RoPE, before any scaling) and V
    of every position run so far, per key/value head: (..., H_kv, d_attn, t) and (..., H_kv, d_mid, t).

    ``extend`` appends the new columns and returns the whole cache, what the new queries read.
    """

    def __init__(self) -> None:
        self.K: Optional[np.ndarray] = None
        self.V: Optional[np.ndarray] = None

    @property
    def length(self) -> int:
        """How many positions are cached."""
        return 0 if self.K is None else int(self.K.shape[-1])

    def extend(self, K: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.K is not None and self.V is not None:
            K = np.concatenate([self.K, K], axis=-1)  # (..., H_kv, d_attn, t + ℓ)
            V = np.concatenate([self.V, V], axis=-1)  # (..., H_kv, d_mid, t + ℓ)
        self.K, self.V = K, V
        return K, V


def group_heads(G: int, order: str, H: int) -> Optional[np.ndarray]:
    """Grouped-query attention (Ainslie et al. 2023, GQA; G = H is Shazeer's 2019 multi-query
    attention): the key/value head each of the H query heads reads, ⌊h/G⌋ (``order="consecutive"``,
    Hugging Face's ``repeat_kv``) or h mod H/G (``"strided"``, a tiled repeat). None for G = 1."""
    if G == 1:
        return None
    if H % G:
        raise ValueError(f"kv_group: H = {H} query heads are not whole groups of G = {G}")
    h = np.arange(H)
    if order == "consecutive":
        return h // G
    if order == "strided":
        return h % (H // G)
    raise ValueError(f"unknown kv_order {order!r}")


def ungroup_heads(dM: np.ndarray, kv_index: np.ndarray, H_kv: int) -> np.ndarray:
    """The adjoint of reading kv head ``kv_index[h]`` for query head h: (..., H, d, ℓ) -> (..., H_kv, d, ℓ),
    kv head g receiving the sum over the query heads of its group."""
    return np.stack([np.sum(dM[..., kv_index == g, :, :], axis=-3) for g in range(H_kv)], axis=-3)


# --------------------------------------------------------------------------
# Algorithm 4: the attention core
# --------------------------------------------------------------------------


class AttentionCache(NamedTuple):
    """What the backward of Algorithm 4 needs (``grad_components.attention_bwd``)."""

    X: np.ndarray  # (..., d_x, ℓ_x)
    Z: np.ndarray  # (..., d_z, ℓ_z)
    W_q: np.ndarray
    W_k: np.ndarray
    W_v: np.ndarray
    has_bias: tuple[bool, bool, bool]  # b_q, b_k, b_v present
    Q: np.ndarray  # (..., d_attn, ℓ_x)  the query as it enters S (rotated, scaled by ``placement``)
    K: np.ndarray  # (..., d_attn, ℓ_z)  the key as it enters S (per query head under GQA)
    V: np.ndarray  # (..., d_out, ℓ_z)   (per query head under GQA)
    A: np.ndarray  # (..., ℓ_z, ℓ_x)  the attention weights softmax(…)
    empty: Optional[np.ndarray]  # (..., 1, ℓ_x): query columns with no key (their weights are constants)
    divisor: Optional[float]  # d of the √d scale, None for attn_scale='none'
    placement: str
    rotary: str = "none"  # the RoPE pairing applied to Q and K ("none": not rotated)
    rope_base: float = 10000.0
    rope_scaling: str = "none"  # rope_scaling's rescaling of the RoPE frequencies
    pos_q: Optional[np.ndarray] = None  # (ℓ_x,) positions of Q's columns (RoPE)
    pos_k: Optional[np.ndarray] = None  # (ℓ_z,) positions of K's columns (RoPE)
    kv_index: Optional[np.ndarray] = None  # (H,) the kv head of each query head (GQA), None: its own
    rotary_rows: Optional[int] = None  # the rows RoPE rotated (partial rotary), None: all
    qk_norms: Optional[tuple[NormCache, NormCache]] = None  # QK-norm's caches of Q's and K's RMSnorm
    softcap: float = 0.0  # the attention soft cap c (0: none)
    capped: Optional[np.ndarray] = None  # (..., ℓ_z, ℓ_x) tanh(s/c) of the scaled scores, under a cap


def attention_fwd(X, Z, W_q, b_q, W_k, b_k, W_v, b_v, Mask, variant, *, kv_index: Optional[np.ndarray] = None,
                  offset: int = 0, kv_cache: Optional[KVCache] = None,
                  rope: bool = True, alibi: bool = False,
                  qk_gains: Optional[tuple[np.ndarray, np.ndarray]] = None,
                  heads: int = 1, pos_bias: Optional[np.ndarray] = None,
                  alibi_positions: Optional[np.ndarray] = None,
                  longrope: Optional[tuple[np.ndarray, np.ndarray]] = None) -> tuple[np.ndarray, AttentionCache]:
    """Algorithm 4, lines 1-6, for one head or a stack of heads at once.

    X: (..., d_x, ℓ_x), Z: (..., d_z, ℓ_z). W_q: ([H,] d_attn, d_x),
    W_k: ([H_kv,] d_attn, d_z), W_v: ([H_kv,] d_out, d_z), biases ([H or H_kv,] d) or None.
    The caller inserts the head axis into X, Z and Mask so they broadcast
    against the stacked weights. Mask: (..., ℓ_z, ℓ_x) bool or None (≡ 1).
    Returns Ṽ: (..., [H,] d_out, ℓ_x) and the cache of the backward pass.

    d_model of ``attn_scale='sqrt_d_model'`` is d_x, the width of X; ``sqrt_d_model_per_head``
    divides by √(d_x/``heads``), ``heads`` the H of the multi-head attention (1: one head).

    Variant ``rotary`` (RoPE, ``rotate``): after lines 1-2 (and their biases), before any scaling,
    column t_x of Q is rotated by position ``offset`` + t_x and column t_z of K by ``offset`` + t_z
    (``rope=False``: never, Algorithm 3). ``kv_index`` (GQA, ``group_heads``): the key/value
    heads (H_kv of them on the head axis) query head h reads. ``kv_cache`` (decoding): the new K
    (rotated) and V are appended to the cache and the queries read the whole cache, positions
    0..offset−1 then Z's; Mask then covers every cached key.

    ``alibi`` (a causal self-attention under ``position_bias="alibi"``; Press et al. 2022): the
    heads on axis −3 (H of them, one slope each, ``alibi_slopes``) add m_h·(t_z − t_x), at the
    absolute positions, to the scores after the 1/√d scale and before the mask (BLOOM's
    ``alibi.baddbmm(Q, Kᵀ, alpha=1/√d)``). The bias is a constant: the backward is unchanged.

    ``pos_bias`` (H, ℓ_z, ℓ_x) (T5's relative bias, ``t5_bias``) is added where ALiBi's is: after the
    scale, before the mask (T5's eager attention: ``* scaling``, ``+ position_bias``, ``+ attention_mask``).
    A constant of the scores: the backward is unchanged.

    ``qk_gains`` (γ_q, γ_k), each (d_attn,) (QK-norm, ``qk_norm="rms"``: Qwen3's q_norm/k_norm, Gemma
    3's): each column of each head's Q and K (over its d_attn rows, axis −2) goes through RMSnorm
    with that gain, after the biases and before RoPE; ε, its placement and the gain γ or 1 + γ
    (``norm_gain``) are the variant's. Under GQA the kv heads' K is normalised before the gather.

    ``attn_softcap`` c > 0 (Gemma 2's attn_logit_softcapping): the scores are scaled first, then
    capped to c·tanh(s/c), then biased (ALiBi) and masked (Hugging Face's eager Gemma 2 attention:
    ``* scaling``, ``/ softcap``, ``tanh``, ``* softcap``, ``+ attention_mask``).

    ``longrope`` (ext, mscale) (``rope_factors="longrope"``, Phi-3): RoPE's per-pair factors and attention
    factor (``rope_tables``), for the queries and the keys alike; a forward-only convention (no gradient
    entry reads it).
    """
    d_attn, d_x = W_q.shape[-2], W_q.shape[-1]
    Q = W_q @ X  # (..., d_attn, ℓ_x)  line 1
    K = W_k @ Z  # (..., d_attn, ℓ_z)  line 2
    V = W_v @ Z  # (..., d_out, ℓ_z)   line 3
    if b_q is not None:
        Q = Q + b_q[..., None]  # + b_q 1ᵀ
    if b_k is not None:
        K = K + b_k[..., None]  # + b_k 1ᵀ
    if b_v is not None:
        V = V + b_v[..., None]  # + b_v 1ᵀ
    qk_norms = None
    if qk_gains is not None:  # QK-norm: RMSnorm over each head's width, before RoPE
        Q, q_cache = norm_fwd(Q, qk_gains[0], None, variant, "rms_norm")
        K, k_cache = norm_fwd(K, qk_gains[1], None, variant, "rms_norm")
        qk_norms = (q_cache, k_cache)
    rotary = variant.rotary if rope else "none"
    pos_q = offset + np.arange(Q.shape[-1])  # (ℓ_x,)  absolute positions of the columns
    pos_k = offset + np.arange(K.shape[-1])  # (ℓ_z,)
    rows = rotary_rows(d_attn, variant.rotary_fraction)  # all d_attn, or the first ⌊f·d_attn⌋
    if rotary != "none":  # RoFormer eq. 34, on the projections, before any scaling
        Q = rotate(Q, pos_q, rotary, variant.rope_base, rows=rows, scaling=variant.rope_scaling, longrope=longrope)
        K = rotate(K, pos_k, rotary, variant.rope_base, rows=rows, scaling=variant.rope_scaling, longrope=longrope)
    if kv_cache is not None:  # decoding: the queries read every cached key and value
        K, V = kv_cache.extend(K, V)
    if kv_index is not None:  # GQA: query head h reads kv head kv_index[h]
        K = np.take(K, kv_index, axis=-3)  # (..., H, d_attn, ℓ_z)
        V = np.take(V, kv_index, axis=-3)  # (..., H, d_out, ℓ_z)
    divisor = _divisor(variant, d_attn, d_x, heads)
    placement = variant.scale_placement
    if divisor is not None and placement == "query":
        Q = Q / _const(math.sqrt(divisor), Q)  # scale moved before line 4
    elif divisor is not None and placement == "query_key_sqrt":
        root4 = _const(math.sqrt(math.sqrt(divisor)), Q)  # d^{1/4}: (Q/d^¼)ᵀ... = KᵀQ/√d
        Q = Q / root4
        K = K / root4
    elif placement not in ("scores", "query", "query_key_sqrt"):
        raise ValueError(f"unknown scale_placement {placement!r}")
    S = np.swapaxes(K, -1, -2) @ Q  # (..., ℓ_z, ℓ_x)  line 4: S = KᵀQ
    scaled = False
    cap, capped = variant.attn_softcap, None
    if cap:  # Gemma 2: scale, then c·tanh(s/c), then bias and mask
        if divisor is not None and placement == "scores":
            S, scaled = S / _const(math.sqrt(divisor), S), True
        c = _const(cap, S)
        capped = np.tanh(S / c)  # (..., ℓ_z, ℓ_x), kept for the backward: d(c·tanh(s/c))/ds = 1 − tanh²
        S = c * capped
    if alibi and variant.position_bias == "alibi":
        if divisor is not None and placement == "scores" and not scaled:
            S, scaled = S / _const(math.sqrt(divisor), S), True  # the bias goes after the scale
        slopes = alibi_slopes(W_q.shape[-3], S.dtype)  # (H,)
        if alibi_positions is not None:  # pad_positions="real": p (..., ℓ), one row per sequence
            dist = (alibi_positions[..., :, None] - alibi_positions[..., None, :]).astype(S.dtype)  # (..., ℓ_z, ℓ_x)
            S = S + slopes[:, None, None] * dist[..., None, :, :]  # (..., H, ℓ_z, ℓ_x)
        else:
            pos_keys = np.arange(K.shape[-1]) + (0 if kv_cache is not None else offset)  # cached keys from 0
            S = S + alibi_bias(slopes, pos_keys, pos_q)  # (..., H, ℓ_z, ℓ_x)
    if pos_bias is not None:
        if divisor is not None and placement == "scores" and not scaled:
            S, scaled = S / _const(math.sqrt(divisor), S), True  # the bias goes after the scale
        S = S + pos_bias.astype(S.dtype)  # (..., H, ℓ_z, ℓ_x)

    empty = None
    if Mask is not None:
        S = np.where(Mask, S, _const(-np.inf, S))  # line 5: masked scores are −∞
        empty = ~np.any(Mask, axis=-2, keepdims=True)  # (..., 1, ℓ_x): queries with no key
        if variant.empty_query == "error" and np.any(empty):
            raise ValueError("attention: a query column of Mask is all False (nothing to attend to); "
                             "empty_query='error' refuses it")
    if divisor is not None and placement == "scores" and not scaled:
        S = S / _const(math.sqrt(divisor), S)  # line 6: S / √d

    # line 6, softmax over t_z with the column max subtracted; an empty
    # column's max is −∞, so it is shifted by 0 instead and handled below.
    col_max = np.max(S, axis=-2, keepdims=True)  # (..., 1, ℓ_x)
    if empty is not None:
        col_max = np.where(empty, _const(0.0, S), col_max)
    E = np.exp(S - col_max)  # (..., ℓ_z, ℓ_x)
    total = np.sum(E, axis=-2, keepdims=True)  # (..., 1, ℓ_x)
    if empty is not None:
        total = np.where(empty, _const(1.0, S), total)  # avoid 0/0; replaced below
    A = E / total  # (..., ℓ_z, ℓ_x)  attention weights
    if empty is not None and variant.empty_query != "error":
        if variant.empty_query == "nan":
            fill = _const(np.nan, S)  # the whole output column becomes NaN
        elif variant.empty_query == "zeros":
            fill = _const(0.0, S)  # weights 0, so Ṽ[:, t_x] = 0
        elif variant.empty_query == "uniform":
            fill = _const(1.0, S) / _const(S.shape[-2], S)  # weight 1/ℓ_z on every key
        else:
            raise ValueError(f"unknown empty_query {variant.empty_query!r}")
        A = np.where(empty, fill, A)  # (..., ℓ_z, ℓ_x)
    out = V @ A  # (..., d_out, ℓ_x)  line 6: Ṽ = V·softmax(…)
    cache = AttentionCache(X, Z, W_q, W_k, W_v, (b_q is not None, b_k is not None, b_v is not None),
                           Q, K, V, A, empty, divisor, placement, rotary, variant.rope_base, variant.rope_scaling,
                           pos_q, pos_k, kv_index,
                           rows, qk_norms, cap, capped)
    return out, cache


def attention_core(X, Z, W_q, b_q, W_k, b_k, W_v, b_v, Mask, variant, **kw: Any) -> np.ndarray:
    """Algorithm 4, lines 1-6 (see ``attention_fwd``; ``kw`` its keyword options), without the cache."""
    return attention_fwd(X, Z, W_q, b_q, W_k, b_k, W_v, b_v, Mask, variant, **kw)[0]
