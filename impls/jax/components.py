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
    An odd d_e needs no special case: its last row r = d_e − 1 is even, a sine.

    The table is a constant, not a computation on inputs: it is built in
    float64 and rounded once to ``dtype`` (as libraries build it in NumPy and
    cast), so low-precision dtypes get the correctly rounded table.
    """
    r = np.arange(d_e)  # (d_e,)
    c = np.arange(ell_max)  # (ℓ_max,)
    if form == "sinusoidal_paper":
        i, t, base = r // 2 + 1, c + 1, float(ell_max)
    elif form == "sinusoidal_vaswani":
        i, t, base = r // 2, c, 10000.0
    elif form == "sinusoidal_raw_index":  # seeds/004, Table II: the raw row index r in the exponent
        i, t, base = r, c, 10000.0
    else:
        raise ValueError(f"unknown sinusoid form {form!r}")
    freq = jnp.power(jnp.float64(base), (2.0 * i) / d_e)  # (d_e,)
    angle = jnp.asarray(t, jnp.float64)[:, None] / freq[None, :]  # (ℓ_max, d_e)
    table = jnp.where(r % 2 == 0, jnp.sin(angle), jnp.cos(angle))  # (ℓ_max, d_e)
    return table.astype(dtype)


def position_rows(pos: Optional[Array], ell: int, ell_max: int, d_e: int, variant: VariantSet,
                  dtype: Any) -> Optional[Array]:
    """The rows W_p[:, t]ᵀ for t = 0..ℓ−1 under ``variant.positions`` (None: no positions)."""
    if variant.positions == "learned":
        if pos is None:
            raise ValueError("positions='learned' needs the table W_p")
        return pos[:ell]  # (ℓ, d_e)
    if variant.positions == "none":
        return None
    return sinusoid_table(d_e, ell_max, variant.positions, dtype)[:ell]  # (ℓ, d_e)


def embed(x: Array, p: Params, ell_max: int, variant: VariantSet, emb_norm: Optional[Params]) -> Array:
    """Algorithms 8-10, lines 1-3: X[t] = W_e[:, x[t]] (×√d_e) + W_p[:, t], then the optional norm.

    x: (ℓ,) int tokens; p["tok"]: (N_V, d_e); p["pos"]: (ℓ_max, d_e) or None.
    """
    tok = p["tok"]
    e = jnp.take(tok, x, axis=0)  # (ℓ, d_e)  Alg. 1 for every token
    if variant.embedding_scale == "sqrt_d_e":
        e = e * math.sqrt(tok.shape[-1])  # Vaswani et al.: scale before adding positions
    rows = position_rows(p.get("pos"), x.shape[0], ell_max, tok.shape[-1], variant, tok.dtype)
    if rows is not None:
        e = e + rows  # (ℓ, d_e)  Alg. 2
    if variant.embedding_norm:
        e = norm(e, emb_norm, variant)
    return e


# --------------------------------------------------------------------------
# Algorithm 6: layer norm and RMSnorm (per token = per row here)
# --------------------------------------------------------------------------


def _sigma(v: Array, variant: VariantSet) -> Array:
    eps = variant.epsilon
    if variant.epsilon_placement == "inside_root":
        return jnp.sqrt(v + eps)
    if variant.epsilon_placement == "outside_root":
        return jnp.sqrt(v) + eps  # the Annotated Transformer adds ε to the std
    return jnp.sqrt(v)  # the paper: no ε (v = 0 divides by zero)


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


def refuse_zero_variance(X: Array, variant: VariantSet, kind: str) -> None:
    """With no ε, a token of zero variance (its entries all equal; all 0 for RMSnorm) would divide
    by √0: a ``checkify.check`` that fails inside the program and raises on the host
    (``boundary.jitted``; staged only under ``checked()``). Equal entries are tested as such: the
    mean of d copies of a value may round away from it and leave a tiny variance, not 0."""
    if variant.epsilon_placement == "none" and CHECKED.get():
        flat = (X == 0) if kind == "rms_norm" else (X == X[..., :1])
        checkify.check(~jnp.any(jnp.all(flat, axis=-1)),
                       f"{kind}: a token of zero variance and no epsilon (line 3 would divide by √0)")


def layer_norm(X: Array, gamma: Optional[Array], beta: Optional[Array], variant: VariantSet) -> Array:
    """Alg. 6 on every row: m = Σe/d (line 1), v = Σ(e−m)²/d or /(d−1) (line 2),
    ê = (e − m)/σ ⊙ γ + β (line 3). X: (ℓ, d) → (ℓ, d)."""
    d = X.shape[-1]
    if variant.variance == "unbiased" and d < 2:
        raise ValueError(f"layer_norm: unbiased variance divides by d − 1 = 0 (d = {d})")
    refuse_zero_variance(X, variant, "layer_norm")
    m = jnp.mean(X, axis=-1, keepdims=True)  # (ℓ, 1)
    centred = X - m  # (ℓ, d)
    denom = d - 1 if variant.variance == "unbiased" else d
    v = jnp.sum(centred * centred, axis=-1, keepdims=True) / denom  # (ℓ, 1)
    out = centred / _sigma(v, variant)  # (ℓ, d)
    if gamma is not None:
        out = out * gamma
    if beta is not None:
        out = out + beta
    return out


def rms_norm(X: Array, gamma: Optional[Array], variant: VariantSet) -> Array:
    """RMSnorm (Alg. 6 with m = 0, β = 0): v = Σe²/d, ê = e/σ ⊙ γ. Ignores ``variance``."""
    refuse_zero_variance(X, variant, "rms_norm")
    v = jnp.mean(X * X, axis=-1, keepdims=True)  # (ℓ, 1)
    out = X / _sigma(v, variant)  # (ℓ, d)
    return out if gamma is None else out * gamma


def _own_width(X: Array, p: Params, name: str) -> None:
    """γ and β have one entry per feature: at d = 1 a longer one would broadcast silently."""
    if name in p and p[name] is not None and tuple(p[name].shape) != (X.shape[-1],):
        raise ValueError(f"norm: {name} has shape {tuple(p[name].shape)}; expected ({X.shape[-1]},), one entry "
                         f"per feature")


def norm(X: Array, p: Optional[Params], variant: VariantSet, kind: Optional[str] = None) -> Array:
    """The norm ``variant.norm`` (or ``kind``) with p = {"gamma", "beta"} (absent ones None)."""
    p = p or {}
    _own_width(X, p, "gamma")
    _own_width(X, p, "beta")
    if (kind or variant.norm) == "rms_norm":
        return rms_norm(X, p.get("gamma"), variant)
    return layer_norm(X, p.get("gamma"), p.get("beta"), variant)


# --------------------------------------------------------------------------
# Algorithms 3-5: attention
# --------------------------------------------------------------------------


def _scale_divisor(variant: VariantSet, d_attn: int, d_model: int) -> Optional[float]:
    """What the scores are divided by: d_attn, d_model (the primary input's width) or nothing."""
    if variant.attn_scale == "sqrt_d_attn":
        return float(d_attn)
    if variant.attn_scale == "sqrt_d_model":
        return float(d_model)
    return None


def scaled_scores(Q: Array, K: Array, variant: VariantSet, d_model: int) -> Array:
    """S = K^T Q of Alg. 4 line 4 (here [.., t_x, t_z]) divided by √divisor where ``scale_placement`` says.

    Q: (..., ℓ_x, d_attn), K: (..., ℓ_z, d_attn) → (..., ℓ_x, ℓ_z).
    """
    div = _scale_divisor(variant, Q.shape[-1], d_model)
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


def attention_heads(X: Array, Z: Array, p: Params, mask: Optional[Array], variant: VariantSet,
                    kv_valid: Optional[Array] = None) -> Array:
    """Alg. 4 lines 1-6 for H stacked heads at once (Alg. 5 lines 1-2).

    X: (ℓ_x, d_x) primary, Z: (ℓ_z, d_z) context; p["W_q"], p["W_k"]: (H, d_attn, d_·),
    p["W_v"]: (H, d_mid, d_z), biases (H, ·) or None. Returns Y: (H, ℓ_x, d_mid).
    kv_valid: (ℓ_z,) bool or None. Context rows marked False are padding that
    ``mask`` already hides from every query that matters (inference on a
    fixed-size buffer); their values are set to 0 so that a non-finite padding
    row cannot enter as 0·inf = NaN through line 6's product.
    """
    def b(name: str) -> Any:
        return None if p.get(name) is None else p[name][:, None, :]  # (H, 1, ·)

    Q = _add(einsum("xd,had->hxa", X, p["W_q"]), b("b_q"))  # (H, ℓ_x, d_attn)  line 1
    K = _add(einsum("zd,had->hza", Z, p["W_k"]), b("b_k"))  # (H, ℓ_z, d_attn)  line 2
    V = _add(einsum("zd,hmd->hzm", Z, p["W_v"]), b("b_v"))  # (H, ℓ_z, d_mid)   line 3
    if kv_valid is not None:
        V = jnp.where(kv_valid[None, :, None], V, jnp.zeros((), V.dtype))
    S = scaled_scores(Q, K, variant, d_model=X.shape[-1])  # (H, ℓ_x, ℓ_z)    lines 4, 6
    A = masked_softmax(S, mask, variant)  # (H, ℓ_x, ℓ_z)                     lines 5-6
    return einsum("hxz,hzm->hxm", A, V)  # (H, ℓ_x, d_mid)                   line 6: V softmax(·)


def attention(X: Array, Z: Array, p: Params, mask: Optional[Array], variant: VariantSet) -> Array:
    """Alg. 4: Ṽ = V softmax(KᵀQ/√d_attn) for one head; p holds unstacked W_q, b_q, …
    X: (ℓ_x, d_x), Z: (ℓ_z, d_z) → (ℓ_x, d_out)."""
    stacked = {k: (None if v is None else v[None]) for k, v in p.items()}  # a single head, H = 1
    return attention_heads(X, Z, stacked, mask, variant)[0]


def mh_attention(X: Array, Z: Array, p: Params, mask: Optional[Array], variant: VariantSet,
                 kv_valid: Optional[Array] = None) -> Array:
    """Alg. 5: Y = [Y¹; …; Y^H] (line 3, head 1 first), Ṽ = W_o Y + b_o 1ᵀ (line 4).

    p["W_o"]: (d_out, H·d_mid) is read as (d_out, H, d_mid), which is exactly the
    vertical stacking of line 3. X: (ℓ_x, d_x), Z: (ℓ_z, d_z) → (ℓ_x, d_out).
    """
    Y = attention_heads(X, Z, p, mask, variant, kv_valid)  # (H, ℓ_x, d_mid)
    H, _, d_mid = Y.shape
    W_o = p["W_o"].reshape(p["W_o"].shape[0], H, d_mid)  # (d_out, H, d_mid)
    return _add(einsum("hxm,ohm->xo", Y, W_o), p.get("b_o"))  # (ℓ_x, d_out)


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
    bottom_right [[t_z ≤ t_x + ℓ_z − ℓ_x]] (the last query sees every key)."""
    t_x = jnp.arange(ell_x)[:, None]  # (ℓ_x, 1)
    t_z = jnp.arange(ell_z)[None, :]  # (1, ℓ_z)
    shift = ell_z - ell_x if variant.causal_alignment == "bottom_right" else 0
    return t_z <= t_x + shift  # (ℓ_x, ℓ_z) bool


# --------------------------------------------------------------------------
# Algorithm 7: unembedding; activations
# --------------------------------------------------------------------------


def unembed(X: Array, W_u: Array, b_u: Optional[Array]) -> Array:
    """Alg. 7 on every row: P[t] = softmax(W_u X[t] + b_u). X: (ℓ, d), W_u: (N_V, d) → (ℓ, N_V)."""
    logits = linear(X, W_u, b_u)  # (ℓ, N_V)
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
