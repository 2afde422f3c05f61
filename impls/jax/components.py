"""Components of Phuong & Hutter (2022): Algorithms 1-7, written for ONE example.

Internal layout (as in Flax/equinox): a sequence is a matrix with one token
per ROW, X: (ℓ, d); a mask is indexed [query t_x, key t_z], True = may
attend (like ``jax.nn.dot_product_attention``). Weights keep the spec's
out×in orientation, so a linear map of a row sequence is ``X @ Wᵀ + b``.
Embedding tables are row tables: ``tok`` = W_eᵀ (N_V, d_e), ``pos`` = W_pᵀ
(ℓ_max, d_e). The conversion from the spec's canonical layout (tokens are
columns; Mask is [t_z, t_x]) happens once, in ``boundary.py``.

Line numbers refer to the restatement in ALGORITHMS.md. Every function is
pure and differentiable; batching is added by ``jax.vmap`` on top.

Attention beyond the paper (variant switches, written from the papers):
rotary position embedding (Su et al. 2021, RoFormer, eq. 34: each head's Q
row t_x and K row t_z turned pair by pair by t·base^(−2i/d_attn), pairs
(2i, 2i+1) or (i, i + d_attn/2)), applied after the projections and biases and
before any scaling; and grouped-query attention (Ainslie et al. 2023, GQA;
Shazeer 2019, multi-query attention): H/G key/value heads, query head h
reading ⌊h/G⌋ (consecutive) or h mod H/G (strided). Q and the key/value heads
are projected separately (``project_q``, ``project_kv``) so that a decoder can
cache K and V per key/value head (architectures.py ``cached_decoding``).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any, Iterator, Mapping, Optional, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from ftspec.spec.variants import VariantSet

Array: TypeAlias = jax.Array  # an alias mypy accepts when it does not follow jax (pyproject)
Params = Mapping[str, Any]

#: Full-precision products everywhere (no TF32/bf16 passes for float32 on GPU).
HIGHEST = jax.lax.Precision.HIGHEST


def einsum(subscripts: str, *operands: Array) -> Array:
    return jnp.einsum(subscripts, *operands, precision=HIGHEST)


def linear(x: Array, W: Array, b: Optional[Array]) -> Array:
    """Rows of x mapped by W (out×in): x Wᵀ + b, i.e. the paper's W X + b 1ᵀ."""
    y = einsum("...i,oi->...o", x, W)  # (..., out)
    return y if b is None else y + b


# --------------------------------------------------------------------------
# Algorithms 1-2: embeddings
# --------------------------------------------------------------------------


def sinusoid_table(d_e: int, ell_max: int, form: str, dtype: Any) -> Array:
    """The fixed position table as rows: entry [c, r] is the spec's W_p[r, c].

    paper (Alg. 2, fixed alternative; 1-based i and t, base ℓ_max):
        i = r // 2 + 1, t = c + 1, sin(t / ℓ_max^{2i/d_e}) on even r, cos on odd r.
    vaswani (0-based, base 10000): i = r // 2, sin(c / 10000^{2i/d_e}) / cos.
    raw index (the numeric tutorial, seeds/004): i = r, otherwise as vaswani.
    halves (Marian, transformers 5.24 MarianSinusoidalPositionalEmbedding.create_weight):
        h = ⌈d_e/2⌉; sin(c / 10000^{2r/d_e}) for r < h, cos(c / 10000^{2(r−h)/d_e}) after.
    An odd d_e needs no special case: its last row r = d_e − 1 is even, a sine
    (halves: the block of sines is the longer one, h = (d_e + 1) // 2).

    The table is a constant, not a computation on inputs: it is built in
    float64 and rounded once to ``dtype`` (as libraries build it in NumPy and
    cast), so low-precision dtypes get the correctly rounded table.
    """
    r = np.arange(d_e)  # (d_e,)
    c = np.arange(ell_max)  # (ℓ_max,)
    sine = r % 2 == 0  # (d_e,)
    if form == "sinusoidal_paper":
        i, t, base = r // 2 + 1, c + 1, float(ell_max)
    elif form == "sinusoidal_vaswani":
        i, t, base = r // 2, c, 10000.0
    elif form == "sinusoidal_raw_index":  # seeds/004, Table II: the raw row index r in the exponent
        i, t, base = r, c, 10000.0
    elif form == "sinusoidal_halves":  # Marian: the sines in the first ⌈d_e/2⌉ columns, the cosines after
        sine = r < (d_e + 1) // 2
        i, t, base = np.where(sine, r, r - (d_e + 1) // 2), c, 10000.0
    else:
        raise ValueError(f"unknown sinusoid form {form!r}")
    freq = jnp.power(jnp.float64(base), (2.0 * i) / d_e)  # (d_e,)
    angle = jnp.asarray(t, jnp.float64)[:, None] / freq[None, :]  # (ℓ_max, d_e)
    table = jnp.where(sine, jnp.sin(angle), jnp.cos(angle))  # (ℓ_max, d_e)
    return table.astype(dtype)


def position_rows(pos: Optional[Array], ell: int, ell_max: int, d_e: int, variant: VariantSet,
                  dtype: Any, start: Optional[Array] = None) -> Optional[Array]:
    """The rows W_p[:, t]ᵀ for t = start..start+ℓ−1 (start None: 0, static) under
    ``variant.positions`` (None: no positions). ``start`` may be traced (a decoding step)."""
    if variant.positions == "learned":
        if pos is None:
            raise ValueError("positions='learned' needs the table W_p")
        table = pos  # (ℓ_max, d_e)
    elif variant.positions == "none":
        return None
    else:
        table = sinusoid_table(d_e, ell_max, variant.positions, dtype)  # (ℓ_max, d_e)
    if start is None:
        return table[:ell]  # (ℓ, d_e)
    return jax.lax.dynamic_slice_in_dim(table, start, ell, axis=0)  # (ℓ, d_e); start + ℓ ≤ ℓ_max (checked)


def real_positions(pad: Array) -> Array:
    """``pad_positions="real"``: the real tokens before each position, Σ_{s<t} pad[s], (ℓ,) int (at a real
    token OPT's cumsum(attention_mask)·attention_mask − 1 and BLOOM's ALiBi position, transformers 5.24)."""
    flags = jnp.asarray(pad).astype(jnp.int32)  # (ℓ,) 1 = a real token
    return jnp.cumsum(flags) - flags  # exclusive: a token does not count itself


def embed(x: Array, p: Params, ell_max: int, variant: VariantSet, emb_norm: Optional[Params],
          start: Optional[Array] = None, rows: Optional[Array] = None, pad: Optional[Array] = None) -> Array:
    """Algorithms 8-10, lines 1-3: X[t] = W_e[:, x[t]] (×√d_e) + W_p[:, t], then the optional norm.

    x: (ℓ,) int tokens; p["tok"]: (N_V, d_e); p["pos"]: (ℓ_max, d_e) or None. ``start``: the
    absolute position of x[0] (a decoding step's t; None: 0); ``rows``: the real rows (padding of
    a fixed-size buffer is not refused for zero variance). ``pad`` (ℓ,) bool, read under
    ``pad_positions="real"`` alone: a real token takes W_p[:, p(t)] (``real_positions``), padding none.
    """
    tok = p["tok"]
    e = jnp.take(tok, x, axis=0)  # (ℓ, d_e)  Alg. 1 for every token
    if variant.embedding_scale == "sqrt_d_e":
        e = e * math.sqrt(tok.shape[-1])  # Vaswani et al.: scale before adding positions
    real = pad is not None and variant.pad_positions == "real"
    table = position_rows(p.get("pos"), ell_max if real else x.shape[0], ell_max, tok.shape[-1], variant,
                          tok.dtype, None if real else start)  # (ℓ_max or ℓ, d_e)
    if table is not None and real:
        flags = jnp.asarray(pad).astype(bool)  # (ℓ,)
        e = e + jnp.where(flags[:, None], jnp.take(table, real_positions(flags), axis=0), 0).astype(e.dtype)
    elif table is not None:
        e = e + table  # (ℓ, d_e)  Alg. 2
    if variant.embedding_norm:
        e = norm(e, emb_norm, variant, rows=rows)
    return e


# --------------------------------------------------------------------------
# Algorithm 6: layer norm and RMSnorm (per token = per row here)
# --------------------------------------------------------------------------


def _root(v: Array) -> Array:
    """√v, kept a square root: XLA's simplifier rewrites x / sqrt(v) as x · rsqrt(v), and its float32
    rsqrt on CPU is up to about 3 ulps off where sqrt and the division are each correctly rounded
    (measured: 2.8 against NumPy's 2.1 ulps for x/√(x² + ε)). Behind a norm of a sublayer's output
    alone (res_post, sandwich) at d_e = 1, a residual sum that cancels magnifies that, and default
    float32 searches of gemma+norm_placement=res_post or =sandwich of d_transformer failed by up to
    7 times the bound (seeds 0 and 4, 350 examples); with the barrier they pass."""
    return jax.lax.optimization_barrier(jnp.sqrt(v))


def _sigma(v: Array, variant: VariantSet) -> Array:
    eps = variant.epsilon
    if variant.epsilon_placement == "inside_root":
        return _root(v + eps)
    if variant.epsilon_placement == "outside_root":
        return jnp.sqrt(v) + eps  # the Annotated Transformer adds ε to the std (no x / sqrt(·) to rewrite)
    return _root(v)  # the paper: no ε (v = 0 divides by zero)


#: whether the functions being traced run under ``checkify`` (``boundary.jitted`` says so while it
#: traces): only then are the checks staged, so that the functions stay plain, differentiable JAX
#: for any other caller (a ``check`` staged outside ``checkify`` cannot be traced)
CHECKED: contextvars.ContextVar[bool] = contextvars.ContextVar("ftspec_jax_checked", default=False)


@contextlib.contextmanager
def checked() -> Iterator[None]:
    """Trace the checks below (the caller functionalises them with ``checkify.checkify``)."""
    token = CHECKED.set(True)
    try:
        yield
    finally:
        CHECKED.reset(token)


def refuse_zero_variance(X: Array, variant: VariantSet, kind: str, rows: Optional[Array] = None) -> None:
    """With no ε, a token of zero variance (its entries all equal; all 0 for RMSnorm) would divide
    by √0: a ``checkify.check`` that fails inside the program and raises on the host
    (``boundary.jitted``; staged only under ``checked()``). Equal entries are tested as such: the
    mean of d copies of a value may round away from it and leave a tiny variance, not 0."""
    if variant.epsilon_placement == "none" and CHECKED.get():
        flat = (X == 0) if kind == "rms_norm" else (X == X[..., :1])
        checkify.check(~jnp.any(jnp.all(flat, axis=-1)),
                       f"{kind}: a token of zero variance and no epsilon (line 3 would divide by √0)")


def layer_norm(X: Array, gamma: Optional[Array], beta: Optional[Array], variant: VariantSet,
               rows: Optional[Array] = None) -> Array:
    """Alg. 6 on every row: m = Σe/d (line 1), v = Σ(e−m)²/d or /(d−1) (line 2),
    ê = (e − m)/σ ⊙ γ + β (line 3). X: (ℓ, d) → (ℓ, d)."""
    d = X.shape[-1]
    if variant.variance == "unbiased" and d < 2:
        raise ValueError(f"layer_norm: unbiased variance divides by d − 1 = 0 (d = {d})")
    refuse_zero_variance(X, variant, "layer_norm", rows)
    m = jnp.mean(X, axis=-1, keepdims=True)  # (ℓ, 1)
    centred = X - m  # (ℓ, d)
    denom = d - 1 if variant.variance == "unbiased" else d
    v = jnp.sum(centred * centred, axis=-1, keepdims=True) / denom  # (ℓ, 1)
    out = centred / _sigma(v, variant)  # (ℓ, d)
    if gamma is not None:
        out = out * _gain(gamma, variant)
    if beta is not None:
        out = out + beta
    return out


def rms_norm(X: Array, gamma: Optional[Array], variant: VariantSet, rows: Optional[Array] = None) -> Array:
    """RMSnorm (Alg. 6 with m = 0, β = 0): v = Σe²/d, ê = e/σ ⊙ γ. Ignores ``variance``."""
    refuse_zero_variance(X, variant, "rms_norm", rows)
    v = jnp.mean(X * X, axis=-1, keepdims=True)  # (ℓ, 1)
    out = X / _sigma(v, variant)  # (ℓ, d)
    return out if gamma is None else out * _gain(gamma, variant)


def _gain(gamma: Array, variant: VariantSet) -> Array:
    """What a norm multiplies by: γ, or 1 + γ under ``norm_gain="one_plus_gamma"`` (Gemma's
    RMSNorm, ``output * (1.0 + weight)``), the sum rounded in γ's dtype first."""
    return gamma if variant.norm_gain == "gamma" else 1 + gamma


def _own_width(X: Array, p: Params, name: str) -> None:
    """γ and β have one entry per feature: at d = 1 a longer one would broadcast silently."""
    if name in p and p[name] is not None and tuple(p[name].shape) != (X.shape[-1],):
        raise ValueError(f"norm: {name} has shape {tuple(p[name].shape)}; expected ({X.shape[-1]},), one entry "
                         f"per feature")


def norm(X: Array, p: Optional[Params], variant: VariantSet, kind: Optional[str] = None,
         rows: Optional[Array] = None) -> Array:
    """The norm ``variant.norm`` (or ``kind``) with p = {"gamma", "beta"} (absent ones None);
    ``rows``: the rows whose zero variance is refused (None: all)."""
    p = p or {}
    _own_width(X, p, "gamma")
    _own_width(X, p, "beta")
    if (kind or variant.norm) == "rms_norm":
        return rms_norm(X, p.get("gamma"), variant, rows)
    return layer_norm(X, p.get("gamma"), p.get("beta"), variant, rows)


# --------------------------------------------------------------------------
# Algorithms 3-5: attention
# --------------------------------------------------------------------------


def _scale_divisor(variant: VariantSet, d_attn: int, d_model: int, heads: int) -> Optional[float]:
    """What the scores are divided by the root of: d_attn, d_model (the primary input's width),
    d_model/H (``sqrt_d_model_per_head``, H the query heads: Gemma 2 27B's query_pre_attn_scalar =
    hidden_size/num_attention_heads; transformers 5.24 Gemma2Attention) or nothing."""
    if variant.attn_scale == "sqrt_d_attn":
        return float(d_attn)
    if variant.attn_scale == "sqrt_d_model":
        return float(d_model)
    if variant.attn_scale == "sqrt_d_model_per_head":
        return d_model / heads
    return None


def scaled_scores(Q: Array, K: Array, variant: VariantSet, d_model: int, heads: int = 1) -> Array:
    """S = K^T Q of Alg. 4 line 4 (here [.., t_x, t_z]) divided by √divisor where ``scale_placement`` says.

    Q: (..., ℓ_x, d_attn), K: (..., ℓ_z, d_attn) → (..., ℓ_x, ℓ_z). ``heads``: the H of
    ``sqrt_d_model_per_head`` (1: one head alone).
    """
    div = _scale_divisor(variant, Q.shape[-1], d_model, heads)
    if div is not None and variant.scale_placement == "query":
        Q = Q / math.sqrt(div)
    elif div is not None and variant.scale_placement == "query_key_sqrt":
        Q, K = Q / div ** 0.25, K / div ** 0.25  # ONNX: √scale on both sides
    S = einsum("...xa,...za->...xz", Q, K)  # (..., ℓ_x, ℓ_z)
    if div is not None and variant.scale_placement == "scores":
        S = S / math.sqrt(div)  # line 6: softmax(S / √d_attn)
    return S


def masked_softmax(S: Array, mask: Optional[Array], variant: VariantSet) -> Array:
    """Alg. 4 lines 5-6: masked scores −∞, softmax over the keys (last axis).

    S: (..., ℓ_x, ℓ_z); mask: (ℓ_x, ℓ_z) bool [query, key] or None (Mask ≡ 1).
    A query with no key (an all-False mask row) follows ``variant.empty_query``:
    nan → NaN weights; zeros → weights 0 (output ṽ = 0); uniform → 1/ℓ_z on
    every key. Its scores are replaced by zeros before the softmax so that no
    0/0 is ever formed (keeping gradients of the other queries finite).
    "error" is checked on the concrete mask before tracing (boundary.py); a
    traced empty query under "error" gives NaN rather than a silent answer.
    """
    if mask is None:
        return jax.nn.softmax(S, axis=-1)
    empty = ~jnp.any(mask, axis=-1, keepdims=True)  # (ℓ_x, 1)
    S = jnp.where(mask, S, -jnp.inf)  # line 5
    S = jnp.where(empty, jnp.zeros((), S.dtype), S)  # empty rows: equal scores → uniform
    A = jax.nn.softmax(S, axis=-1)  # (..., ℓ_x, ℓ_z)  line 6
    if variant.empty_query == "zeros":
        A = jnp.where(empty, jnp.zeros((), A.dtype), A)
    elif variant.empty_query in ("nan", "error"):
        A = jnp.where(empty, jnp.full((), jnp.nan, A.dtype), A)
    return A


def _add(x: Array, b: Optional[Array]) -> Array:
    return x if b is None else x + b


#: RoPE's cos and sin tables, each (ℓ, d_attn/2): row t, column i holds cos(t·θ_i), sin(t·θ_i)
Rope = tuple[Array, Array]


def rope(variant: VariantSet, n: int, d: int, dtype: Any, p: Optional[Params] = None) -> Optional[Rope]:
    """RoPE's angles for positions t = 0..n−1 (None under ``rotary="none"``).

    Su et al. (2021), RoFormer, eqs. 15 and 34: θ_i = base^(−2i/d) for i = 0..d/2−1 and angle
    t·θ_i (0-based positions: the column index). Under ``rotary_fraction`` f < 1 (partial rotary)
    d is the rotated width ⌊f·d_attn⌋, as Hugging Face's ``int(head_dim * partial_rotary_factor)``.
    Like the sinusoid table, the tables are constants of the program: computed in float64 and
    rounded once to ``dtype``. ``rope_scaling`` rescales each θ_i (``_scaled``).

    ``rope_factors="longrope"`` (Phi-3's LongRoPE): the attention's parameters ``p["rope_ext"]`` (d/2,) and
    ``p["rope_mscale"]`` (1,) replace the scaling: θ_i = 1/(ext_i·base^(2i/d)) and both tables times
    mscale (transformers 5.24 ``_compute_longrope_parameters``, ``Phi3RotaryEmbedding.forward``: ``emb.cos() *
    self.attention_scaling``). They are arrays of the call (traced under jit), so these tables are computed
    with jnp, in float64 (x64 is on), and rounded once to ``dtype``."""
    if variant.rotary == "none":
        return None
    d = int(d * variant.rotary_fraction)  # partial rotary: a RoPE of the first ⌊f·d_attn⌋ rows' width
    if d % 2 or d < 2:
        raise ValueError(f"rotary={variant.rotary!r} rotates pairs of rows: {d} rotated rows cannot be")
    if variant.rope_factors == "longrope" and p is not None and p.get("rope_ext") is not None:
        # (an entry that does not list rope_factors holds no factors: plain RoPE, as rope_scaling says)
        if p.get("rope_mscale") is None:
            raise ValueError("rope_factors='longrope': the attention's rope_mscale is missing")
        ext, mscale = jnp.asarray(p["rope_ext"], jnp.float64), jnp.asarray(p["rope_mscale"], jnp.float64)
        if ext.shape != (d // 2,) or mscale.shape != (1,):
            raise ValueError(f"rope_factors='longrope': {d // 2} factors and 1 attention factor for a rotated width "
                             f"{d}, given shapes {ext.shape} and {mscale.shape}")
        inv = 1.0 / (ext * np.power(float(variant.rope_base), np.arange(0, d, 2, dtype=np.float64) / d))  # (d/2,)
        turn = jnp.arange(n, dtype=jnp.float64)[:, None] * inv[None, :]  # (n, d/2)
        return (mscale[0] * jnp.cos(turn)).astype(dtype), (mscale[0] * jnp.sin(turn)).astype(dtype)
    theta = _scaled(np.power(float(variant.rope_base), -2.0 * np.arange(d // 2) / d), variant.rope_scaling)
    angle = np.arange(n, dtype=np.float64)[:, None] * theta[None, :]  # (n, d/2)
    return jnp.asarray(np.cos(angle), dtype), jnp.asarray(np.sin(angle), dtype)


def _scaled(theta: np.ndarray, scaling: str) -> np.ndarray:
    """RoPE's frequencies θ (float64) under ``rope_scaling``: "linear-2" halves them (Hugging Face's
    rope_type "linear" with factor 2, positions t/2), "linear-8" takes an eighth (factor 8, Gemma 3
    4B-27B's global layers, positions t/8); "llama3" is Llama 3.1's (transformers 5.24
    ``_compute_llama3_parameters``: factor s = 8, low_freq_factor 1, high_freq_factor 4, original
    context 8192), written here as one blend θ·(w + (1 − w)/s) whose weight w = (8192·θ/2π − 1)/(4 − 1)
    is clipped to [0, 1]: w = 1 (θ kept) for wavelengths 2π/θ below 8192/4, w = 0 (θ/s) above
    8192/1; the blend is continuous at both ends, so the clip is the published three bands."""
    if scaling == "none":
        return theta
    if scaling == "linear-2":
        return theta * 0.5
    if scaling == "linear-8":
        return theta * 0.125  # 1/8, exact in binary
    if scaling != "llama3":
        raise ValueError(f"unknown rope_scaling {scaling!r}")
    w = np.clip((8192.0 * theta / (2.0 * np.pi) - 1.0) / 3.0, 0.0, 1.0)
    return theta * (w + (1.0 - w) / 8.0)


def rope_rows(r: Optional[Rope], start: Array, n: int) -> Optional[Rope]:
    """Rows start..start+n−1 of the tables (``start`` traced: a decoding step's position)."""
    if r is None:
        return None
    return (jax.lax.dynamic_slice_in_dim(r[0], start, n, axis=0),
            jax.lax.dynamic_slice_in_dim(r[1], start, n, axis=0))


def rotate(M: Array, r: Optional[Rope], pairing: str) -> Array:
    """RoFormer eq. 34 on every row t of M (..., ℓ, d): pair (a, b) → (a cos − b sin, b cos + a sin)
    with angle t·θ_i. Pair i is (2i, 2i+1) under "interleaved" (RoFormer's R_Θ, Meta's LLaMA
    ``view_as_complex``, GPT-J) and (i, i + d/2) under "half" (GPT-NeoX, Hugging Face
    ``rotate_half``)."""
    if r is None:
        return M
    cos, sin = r  # (ℓ, w/2) each: a table of the rotated width w
    w = 2 * cos.shape[-1]
    if w < M.shape[-1]:  # partial rotary (GPT-NeoX, GPT-J, Phi): the first w features, the rest as they are
        return jnp.concatenate([rotate(M[..., :w], r, pairing), M[..., w:]], axis=-1)
    if pairing == "interleaved":
        a, b = M[..., 0::2], M[..., 1::2]  # (..., ℓ, d/2)
        return jnp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(M.shape)
    half = M.shape[-1] // 2
    a, b = M[..., :half], M[..., half:]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def _bias(p: Params, name: str) -> Any:
    return None if p.get(name) is None else p[name][:, None, :]  # (heads, 1, ·)


def _qk_norm(M: Array, p: Params, gain: str, variant: VariantSet) -> Array:
    """QK-norm (``qk_norm="rms"``: Qwen3's q_norm/k_norm, Gemma 3's): RMSnorm of every head's row over
    its d_attn entries with the gain ``p[gain]`` (γ, or 1 + γ under ``norm_gain``), where the
    attention has the gains (a layer's; Alg. 4 and 5 alone have none)."""
    if variant.qk_norm != "rms" or p.get(gain) is None:
        return M
    return rms_norm(M, p[gain], variant)  # (heads, ℓ, d_attn): over the last axis, one head's width


def project_q(X: Array, p: Params, variant: VariantSet, r: Optional[Rope]) -> Array:
    """Alg. 4 line 1 for every query head, QK-norm, then RoPE: X (ℓ_x, d_x) → Q (H, ℓ_x, d_attn)."""
    Q = _add(einsum("xd,had->hxa", X, p["W_q"]), _bias(p, "b_q"))  # (H, ℓ_x, d_attn)
    return rotate(_qk_norm(Q, p, "gamma_q", variant), r, variant.rotary)


def project_kv(Z: Array, p: Params, variant: VariantSet, r: Optional[Rope]) -> tuple[Array, Array]:
    """Alg. 4 lines 2-3 for every key/value head, K through QK-norm then RoPE: Z (ℓ_z, d_z) → K (H_kv,
    ℓ_z, d_attn), V (H_kv, ℓ_z, d_mid). H_kv = H without grouping, H/G under ``kv_group`` = G."""
    K = _add(einsum("zd,had->hza", Z, p["W_k"]), _bias(p, "b_k"))  # (H_kv, ℓ_z, d_attn)
    V = _add(einsum("zd,hmd->hzm", Z, p["W_v"]), _bias(p, "b_v"))  # (H_kv, ℓ_z, d_mid)
    return rotate(_qk_norm(K, p, "gamma_k", variant), r, variant.rotary), V


def kv_index(H: int, H_kv: int, variant: VariantSet) -> Optional[np.ndarray]:
    """Which key/value head each query head reads (None: its own, kv_group = 1).

    Grouped-query attention (Ainslie et al. 2023, GQA; G = H is Shazeer's 2019 multi-query
    attention): H/G key/value heads; query head h reads ⌊h/G⌋ under ``kv_order="consecutive"``
    (Hugging Face ``repeat_kv``: each kv head repeated G times in place) and h mod (H/G) under
    "strided" (the kv heads tiled G times). ``kv_heads="one"`` (Shazeer's multi-query attention at any H)
    is G = H: every head reads kv head 0. Static: the head counts are shapes."""
    G = H if variant.kv_heads == "one" else variant.kv_group  # multi-query: one kv head, the group is H
    if G == 1:
        if H_kv != H:
            raise ValueError(f"kv_group=1: every head has its own W_k, W_v; given {H_kv} for H = {H} heads")
        return None
    if H % G or H_kv != H // G:
        raise ValueError(f"kv_group={G}: H = {H} query heads need H/G key/value heads (H a multiple of G); "
                         f"given {H_kv}")
    h = np.arange(H)
    return h // G if variant.kv_order == "consecutive" else h % H_kv


def alibi_slopes(H: int) -> np.ndarray:
    """ALiBi's slope per head (Press et al. 2022, §3), (H,) float64, as BLOOM builds them
    (transformers 5.24 ``_get_alibi_slopes``): with n = 2^⌊log₂ H⌋, base 2^(−8/n) raised to
    1..n, then, when H is not a power of two, base 2^(−4/n) raised to the odd 1, 3, ...,
    2(H − n) − 1. Static: H is a shape."""
    n = 1 << (H.bit_length() - 1)
    slopes = [(2.0 ** (-8.0 / n)) ** k for k in range(1, n + 1)]
    slopes += [(2.0 ** (-4.0 / n)) ** k for k in range(1, 2 * (H - n), 2)]
    return np.asarray(slopes, dtype=np.float64)


def alibi_bias(H: int, q_pos: Array, k_pos: Array, dtype: Any) -> Array:
    """ALiBi's bias [h, query, key] (H, ℓ_x, ℓ_z): m_h·(t_z − t_x) at the absolute positions
    ``q_pos`` (ℓ_x,) and ``k_pos`` (ℓ_z,) (traced during decoding); the slopes are constants of
    the program, rounded once to ``dtype``."""
    dist = (k_pos[None, :] - q_pos[:, None]).astype(dtype)  # (ℓ_x, ℓ_z)
    return jnp.asarray(alibi_slopes(H), dtype)[:, None, None] * dist[None]


def t5_buckets(ell_x: int, ell_z: int, bidirectional: bool, num_buckets: int, max_distance: int) -> np.ndarray:
    """T5's relative position buckets [query, key] (ℓ_x, ℓ_z), a static int table (Raffel et al. 2020, §2.1;
    transformers 5.24 models/t5/modeling_t5.py ``T5Attention._relative_position_bucket``). Of d = t_z − t_x:
    bidirectionally n = num_buckets // 2 buckets a side (d > 0 the upper ones), r = |d|; causally n =
    num_buckets, r = max(−d, 0). With e = n // 2: r < e is bucket r; otherwise e + k, k the number of whole
    steps j = 1, 2, … with (r/e)^(n−e) ≥ (max_distance/e)^j, i.e. ⌊(n − e)·ln(r/e)/ln(max_distance/e)⌋
    counted in exact integer arithmetic (the spec's real-number buckets: no float32 truncation), at most
    n − 1."""
    n = num_buckets // 2 if bidirectional else num_buckets
    e = n // 2

    def bucket(d: int) -> int:
        side, r = (n if d > 0 else 0, abs(d)) if bidirectional else (0, max(-d, 0))
        if r < e:
            return side + r
        steps = sum(1 for j in range(1, n - e) if r ** (n - e) * e ** j >= max_distance ** j * e ** (n - e))
        return side + min(e + steps, n - 1)

    return np.array([[bucket(tz - tx) for tz in range(ell_z)] for tx in range(ell_x)], dtype=np.int32)


def t5_bias(table: Array, ell_x: int, ell_z: int, bidirectional: bool, variant: VariantSet) -> Array:
    """T5's bias [h, query, key] (H, ℓ_x, ℓ_z): the (rel_buckets, H) table (``relative_attention_bias``'s
    weight) at the buckets, heads first (``T5Attention.compute_bias``'s ``permute([2, 0, 1])``)."""
    index = t5_buckets(ell_x, ell_z, bidirectional, variant.rel_buckets, variant.rel_max_distance)
    return jnp.moveaxis(table[index], -1, 0)


def attend(Q: Array, K: Array, V: Array, mask: Optional[Array], variant: VariantSet, d_model: int,
           index: Optional[np.ndarray] = None, kv_valid: Optional[Array] = None,
           bias: Optional[Array] = None) -> Array:
    """Alg. 4 lines 4-6 for H heads: Q (H, ℓ_x, d_attn) against K (H_kv, ℓ_z, d_attn), V (H_kv, ℓ_z,
    d_mid), query head h reading kv head ``index[h]`` (None: h). Returns Y (H, ℓ_x, d_mid).

    kv_valid: (ℓ_z,) bool or None. Context rows marked False are padding that ``mask`` already
    hides from every query that matters (inference on a fixed-size buffer, the cache beyond the
    current step); their values are set to 0 so that a non-finite padding row cannot enter as
    0·inf = NaN through line 6's product.

    bias: (H, ℓ_x, ℓ_z) or None: ALiBi's (``alibi_bias``), added to the scaled scores before the
    mask (BLOOM: ``alibi.baddbmm(Q, Kᵀ, alpha=1/√d)``, then the mask).
    """
    if index is not None:
        K, V = K[index], V[index]  # (H, ℓ_z, ·): a gather; its gradient sums over the sharing heads
    if kv_valid is not None:
        V = jnp.where(kv_valid[None, :, None], V, jnp.zeros((), V.dtype))
    S = scaled_scores(Q, K, variant, d_model=d_model, heads=Q.shape[0])  # (H, ℓ_x, ℓ_z)    lines 4, 6
    if variant.attn_softcap:  # Gemma 2: c·tanh(s/c) of the scaled scores, before the bias and the mask
        S = softcap(S, variant.attn_softcap)
    if bias is not None:
        S = S + bias  # ALiBi: after the scale, before the mask
    A = masked_softmax(S, mask, variant)  # (H, ℓ_x, ℓ_z)                lines 5-6
    return einsum("hxz,hzm->hxm", A, V)  # (H, ℓ_x, d_mid)              line 6: V softmax(·)


def attention_heads(X: Array, Z: Array, p: Params, mask: Optional[Array], variant: VariantSet,
                    kv_valid: Optional[Array] = None, grouped: bool = True, alibi: bool = False,
                    bidirectional: Optional[bool] = None, alibi_positions: Optional[Array] = None) -> Array:
    """Alg. 4 lines 1-6 for H stacked heads at once (Alg. 5 lines 1-2).

    X: (ℓ_x, d_x) primary, Z: (ℓ_z, d_z) context; p["W_q"]: (H, d_attn, d_x), p["W_k"]:
    (H_kv, d_attn, d_z), p["W_v"]: (H_kv, d_mid, d_z), biases (·, ·) or None. Under RoPE, row t_x
    of Q and row t_z of K are rotated by their positions (after the biases, before any scaling).
    ``grouped``: the key/value heads are shared as ``kv_group`` says (Alg. 5); Alg. 4 alone has
    one head. ``alibi``: a causal self-attention (X and Z the same positions from 0), whose
    scores take ALiBi's bias under ``position_bias="alibi"``. ``bidirectional`` (a self-attention entry,
    True or False: its buckets' kind): T5's bias from p["rel_bias"] under ``rel_bias="t5_buckets"``,
    added where ALiBi's is. ``alibi_positions`` (ℓ,): ALiBi's positions where a padded model counts them
    among the real tokens (``pad_positions="real"``), else 0, 1, … Returns Y: (H, ℓ_x, d_mid).
    """
    d_attn = p["W_q"].shape[1]
    Q = project_q(X, p, variant, rope(variant, X.shape[0], d_attn, X.dtype, p))  # line 1
    K, V = project_kv(Z, p, variant, rope(variant, Z.shape[0], d_attn, Z.dtype, p))  # lines 2-3
    index = kv_index(Q.shape[0], K.shape[0], variant) if grouped else None
    bias = None
    if alibi and variant.position_bias == "alibi":
        q_pos, k_pos = (jnp.arange(X.shape[0]), jnp.arange(Z.shape[0])) if alibi_positions is None else \
            (alibi_positions, alibi_positions)  # a self-attention: the same positions
        bias = alibi_bias(Q.shape[0], q_pos, k_pos, Q.dtype)
    if bidirectional is not None and variant.rel_bias == "t5_buckets" and p.get("rel_bias") is not None:
        t5 = t5_bias(p["rel_bias"], X.shape[0], Z.shape[0], bidirectional, variant).astype(Q.dtype)
        bias = t5 if bias is None else bias + t5
    return attend(Q, K, V, mask, variant, X.shape[-1], index, kv_valid, bias)


def attention(X: Array, Z: Array, p: Params, mask: Optional[Array], variant: VariantSet) -> Array:
    """Alg. 4: Ṽ = V softmax(KᵀQ/√d_attn) for one head; p holds unstacked W_q, b_q, …
    X: (ℓ_x, d_x), Z: (ℓ_z, d_z) → (ℓ_x, d_out)."""
    stacked = {k: (None if v is None else v[None]) for k, v in p.items()}  # a single head, H = 1
    return attention_heads(X, Z, stacked, mask, variant, grouped=False)[0]


def heads_out(Y: Array, p: Params) -> Array:
    """Alg. 5 lines 3-4: Ṽ = W_o [Y¹; …; Y^H] + b_o 1ᵀ. Y: (H, ℓ_x, d_mid) → (ℓ_x, d_out).

    p["W_o"]: (d_out, H·d_mid) is read as (d_out, H, d_mid), which is exactly the vertical
    stacking of line 3 (head 1 first)."""
    H, _, d_mid = Y.shape
    W_o = p["W_o"].reshape(p["W_o"].shape[0], H, d_mid)  # (d_out, H, d_mid)
    return _add(einsum("hxm,ohm->xo", Y, W_o), p.get("b_o"))  # (ℓ_x, d_out)


def mh_attention(X: Array, Z: Array, p: Params, mask: Optional[Array], variant: VariantSet,
                 kv_valid: Optional[Array] = None, alibi: bool = False,
                 bidirectional: Optional[bool] = None, alibi_positions: Optional[Array] = None) -> Array:
    """Alg. 5: Y = [Y¹; …; Y^H] (line 3, head 1 first), Ṽ = W_o Y + b_o 1ᵀ (line 4), the key/value
    maps shared by groups of heads under ``kv_group``. X: (ℓ_x, d_x), Z: (ℓ_z, d_z) → (ℓ_x, d_out).
    ``alibi``: a causal self-attention (ALiBi's ``position_bias`` applies); ``bidirectional``: a
    self-attention entry, with T5's bias of that kind (``attention_heads``).
    """
    return heads_out(attention_heads(X, Z, p, mask, variant, kv_valid, alibi=alibi, bidirectional=bidirectional,
                                     alibi_positions=alibi_positions), p)


def basic_single_query_attention(e: Array, E: Array, p: Params, variant: VariantSet) -> Array:
    """Alg. 3: e: (d_in,) current token, E: (T, d_in) context tokens as rows → ṽ: (d_out,).

    q = W_q e + b_q (line 1); k_t, v_t (lines 2-3); α = softmax_t(qᵀk_t/√d_attn) (line 4);
    ṽ = Σ_t α_t v_t (line 5). d_model for ``attn_scale="sqrt_d_model"`` is d_in.
    """
    q = linear(e, p["W_q"], p.get("b_q"))  # (d_attn,)
    k = linear(E, p["W_k"], p.get("b_k"))  # (T, d_attn)
    v = linear(E, p["W_v"], p.get("b_v"))  # (T, d_out)
    s = scaled_scores(q[None, :], k, variant, d_model=e.shape[-1])[0]  # (T,)
    alpha = jax.nn.softmax(s, axis=-1)  # (T,)
    return einsum("t,to->o", alpha, v)  # (d_out,)


def unidirectional_mask(ell_z: int, ell_x: int, variant: VariantSet) -> Array:
    """Alg. 4's causal mask, here [query t_x, key t_z]: top_left [[t_z ≤ t_x]],
    bottom_right [[t_z ≤ t_x + ℓ_z − ℓ_x]] (the last query sees every key). A sliding ``window``
    W ≥ 1 (Mistral) keeps of these the keys less than W places back: t_z > t_x + shift − W."""
    t_x = jnp.arange(ell_x)[:, None]  # (ℓ_x, 1)
    t_z = jnp.arange(ell_z)[None, :]  # (1, ℓ_z)
    shift = ell_z - ell_x if variant.causal_alignment == "bottom_right" else 0
    causal = t_z <= t_x + shift  # (ℓ_x, ℓ_z) bool
    return causal & (t_z > t_x + shift - variant.window) if variant.window else causal


# --------------------------------------------------------------------------
# Algorithm 7: unembedding; activations
# --------------------------------------------------------------------------


def softcap(S: Array, c: float) -> Array:
    """c·tanh(S/c) (Gemma 2's attn_logit_softcapping and final_logit_softcapping: divide, tanh, multiply)."""
    return jnp.tanh(S / c) * c


def unembed(X: Array, W_u: Array, b_u: Optional[Array], variant: Optional[VariantSet] = None) -> Array:
    """Alg. 7 on every row: P[t] = softmax(W_u X[t] + b_u), the logits capped under ``logit_softcap``.
    X: (ℓ, d), W_u: (N_V, d) → (ℓ, N_V)."""
    logits = linear(X, W_u, b_u)  # (ℓ, N_V)
    if variant is not None and variant.logit_softcap:
        logits = softcap(logits, variant.logit_softcap)
    return jax.nn.softmax(logits, axis=-1)


def activation(name: str):
    """relu; gelu_erf = x Φ(x) (exact; jax.nn.gelu defaults to tanh!); gelu_tanh; silu = x σ(x)
    (Elfwing et al. 2018, "Sigmoid-weighted linear units"): ``jax.nn.silu``, x · ``lax.logistic(x)``,
    a logistic that saturates to 0 or 1 without overflow, so large |x| gives x or −0, never NaN."""
    if name == "relu":
        return jax.nn.relu
    if name == "gelu_erf":
        return lambda x: jax.nn.gelu(x, approximate=False)
    if name == "gelu_tanh":
        return lambda x: jax.nn.gelu(x, approximate=True)
    if name == "silu":
        return jax.nn.silu
    raise ValueError(f"unknown activation {name!r}")
