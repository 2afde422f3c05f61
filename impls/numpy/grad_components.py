"""Hand-written backward passes of the components (Algorithms 1-7 and the activations).

Each ``*_bwd`` takes the gradient of the loss with respect to a forward
function's output (same shape, ``d`` prefix) and that function's cache (see
``components.py``) and returns the gradients with respect to its inputs and
parameters. No autodiff: every local derivative is written out below.

Batch axes: activations carry leading ``...`` axes (the examples of a batched
loss, and the head axis inside attention). Parameter gradients are summed over
the token axis only, never over leading axes, so a batch of examples gives
per-example gradients (..., *param_shape); callers sum over axes that
broadcasting introduced (e.g. the head axis of X).

Dtypes: everything stays in the dtype of the incoming arrays; constants are
rounded into it first (``_const``).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .components import _PHI, AttentionCache, EmbedCache, NormCache, _const, logistic_pair, rotate, ungroup_heads

__all__ = [
    "activation_bwd",
    "attention_bwd",
    "embed_bwd",
    "linear_bwd",
    "log_softmax_loss",
    "norm_bwd",
]


def _T(A: np.ndarray) -> np.ndarray:
    """Transpose the last two axes (matrix transpose under leading batch axes)."""
    return np.swapaxes(A, -1, -2)


# --------------------------------------------------------------------------
# affine maps: Y = W X + b 1ᵀ
# --------------------------------------------------------------------------


def linear_bwd(dY: np.ndarray, X: np.ndarray, W: np.ndarray, has_bias: bool):
    """Y = W X + b 1ᵀ with X (..., d_in, ℓ), W ([H,] d_out, d_in).

    dX = Wᵀ dY, dW = dY Xᵀ (the sum over tokens is the matmul's), db = Σ_t dY[:, t].
    Returns (dX, dW, db or None).
    """
    dX = _T(W) @ dY  # (..., d_in, ℓ)
    dW = dY @ _T(X)  # (..., d_out, d_in)
    db = np.sum(dY, axis=-1) if has_bias else None  # (..., d_out)
    return dX, dW, db


# --------------------------------------------------------------------------
# activations (elementwise)
# --------------------------------------------------------------------------

def _phi_cdf(X: np.ndarray) -> np.ndarray:
    """Φ(x) in binary64 per element (the forward GELU's ``_PHI``), rounded once to X's dtype."""
    if not X.size:
        return np.zeros_like(X)
    return _PHI(X.astype(np.float64)).astype(X.dtype)


def activation_bwd(name: str, X: np.ndarray, dY: np.ndarray) -> np.ndarray:
    """dX for Y = act(X) elementwise.

    relu:      ReLU'(x) = [[x > 0]] (ReLU'(0) = 0).
    gelu_erf:  d/dx x Φ(x) = Φ(x) + x φ(x), φ(x) = exp(−x²/2)/√(2π).
    gelu_tanh: y = x (1 + tanh u)/2, u = √(2/π)(x + 0.044715 x³):
               y' = (1 + tanh u)/2 + x (1 − tanh² u) √(2/π)(1 + 3·0.044715 x²)/2.
    silu:      y = x σ(x), σ' = σ(x) σ(−x): y' = σ(x) + x σ(x) σ(−x) = σ(x) (1 + x (1 − σ(x))),
               with 1 − σ(x) taken as σ(−x) (no cancellation; both from exp(−|x|), no overflow).
    """
    if name == "relu":
        return np.where(X > _const(0.0, X), dY, _const(0.0, dY))
    if name == "gelu_erf":
        density = np.exp(-(X * X) / _const(2.0, X)) / _const(math.sqrt(2.0 * math.pi), X)
        return dY * (_phi_cdf(X) + X * density)
    if name == "gelu_tanh":
        c = _const(math.sqrt(2.0 / math.pi), X)
        k = _const(0.044715, X)
        t = np.tanh(c * (X + k * X * X * X))
        half = _const(0.5, X)
        one = _const(1.0, X)
        deriv = half * (one + t) + half * X * (one - t * t) * c * (one + _const(3.0, X) * k * X * X)
        return dY * deriv
    if name == "silu":
        sig, sig_neg = logistic_pair(X)  # σ(x), σ(−x) = 1 − σ(x)
        return dY * (sig * (_const(1.0, X) + X * sig_neg))
    raise ValueError(f"unknown activation {name!r}")


# --------------------------------------------------------------------------
# Algorithm 6: layer norm and RMSnorm, per column
# --------------------------------------------------------------------------


def norm_bwd(dOut: np.ndarray, c: NormCache):
    """Backward of ê = n ⊙ γ + β, n = (e − m)/σ per column (reductions over axis −2).

    With c = e − m (c = e for RMSnorm), v = Σ c²/D (D = d or d − 1) and
    σ = √v, √(v + ε) or √v + ε:
      dγ = Σ_t dê ⊙ n,  dβ = Σ_t dê,  dn = dê ⊙ γ;
      dσ = −Σ_i dn_i n_i / σ;  dv = dσ / (2√v) (none, outside_root) or dσ / (2√(v+ε)) (inside_root);
      dc = dn/σ + dv · 2c/D;  de = dc − mean(dc) (layer norm) or dc (RMSnorm).
    Returns (de, dγ or None, dβ or None).
    """
    dgamma = np.sum(dOut * c.normalised, axis=-1) if c.gamma is not None else None  # (..., d)
    dbeta = np.sum(dOut, axis=-1) if c.has_beta else None  # (..., d)
    dn = dOut * c.gamma[:, None] if c.gamma is not None else dOut  # (..., d, ℓ)
    dsigma = -np.sum(dn * c.normalised, axis=-2, keepdims=True) / c.sigma  # (..., 1, ℓ)
    # d√w/dw = 1/(2√w). √v = 0 is reachable only with ε outside the root (σ = ε); then c = 0, so
    # the term dv · 2c/D below vanishes (the limit of the chain rule) and dv is set to 0, not ∞.
    two_root = _const(2.0, c.root) * c.root
    dv = np.divide(dsigma, two_root, out=np.zeros_like(dsigma), where=two_root > 0)  # (..., 1, ℓ)
    dc = dn / c.sigma + dv * (_const(2.0, dv) / _const(c.denom, dv)) * c.centred  # (..., d, ℓ)
    if c.kind == "layer_norm":
        d = dc.shape[-2]
        dc = dc - np.sum(dc, axis=-2, keepdims=True) / _const(d, dc)  # through m = Σ e / d
    return dc, dgamma, dbeta


# --------------------------------------------------------------------------
# Algorithm 4: attention
# --------------------------------------------------------------------------


def attention_bwd(dOut: np.ndarray, c: AttentionCache):
    """Backward of Ṽ = V softmax(S) with S = KᵀQ (scaled by ``placement``), for one or H stacked heads.

      dV = dṼ Aᵀ;  dA = Vᵀ dṼ;  dS = A ⊙ (dA − 1 (1ᵀ(A ⊙ dA)))  (column softmax);
      masked entries have A = 0, so dS = 0 there; an empty query column's
      weights are constants (``empty_query``), so its dS = 0.
      scores placement: dS ← dS/√d.  S = KᵀQ: dQ = K dS, dK = Q dSᵀ.
      query placement: dQ ← dQ/√d;  query_key_sqrt: dQ ← dQ/d^¼, dK ← dK/d^¼.
      GQA (``c.kv_index``): a key/value head read by several query heads receives the sum of their
      dK and dV (``ungroup_heads``, the adjoint of the gather).
      RoPE (``c.rotary``): Q and K were rotated column by column, an orthogonal map, so dQ and dK
      are rotated back, by −t·θ_i (``rotate(..., inverse=True)``), on the rows it rotated (partial
      rotary: the first ``c.rotary_rows``; the identity on the rest).
      Soft cap (``c.capped`` = tanh(s/c)): dS ← dS ⊙ (1 − tanh²), before the scale's 1/√d.
      QK-norm (``c.qk_norms``): dQ and dK, rotated back, go through RMSnorm's backward (``norm_bwd``).
      Lines 1-3 are affine maps (``linear_bwd``).
    Returns (dX, dZ, grads) with grads = {"W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "gamma_q", "gamma_k"}
    (biases None where absent; under GQA the key/value ones per kv head); dX and dZ keep any head
    axis (H for dX, H_kv for dZ) for the caller to sum.
    """
    A = c.A
    dV = dOut @ _T(A)  # (..., d_out, ℓ_z)
    dA = _T(c.V) @ dOut  # (..., ℓ_z, ℓ_x)
    dS = A * (dA - np.sum(A * dA, axis=-2, keepdims=True))  # (..., ℓ_z, ℓ_x)
    if c.empty is not None:
        dS = np.where(c.empty, _const(0.0, dS), dS)
    if c.capped is not None:  # S = c·tanh(s/c) of the scaled s: dS/ds = 1 − tanh²(s/c)
        dS = dS * (_const(1.0, dS) - c.capped * c.capped)
    if c.divisor is not None and c.placement == "scores":
        dS = dS / _const(math.sqrt(c.divisor), dS)
    dQ = c.K @ dS  # (..., d_attn, ℓ_x)
    dK = c.Q @ _T(dS)  # (..., d_attn, ℓ_z)
    if c.divisor is not None and c.placement == "query":
        dQ = dQ / _const(math.sqrt(c.divisor), dQ)
    elif c.divisor is not None and c.placement == "query_key_sqrt":
        root4 = _const(math.sqrt(math.sqrt(c.divisor)), dQ)
        dQ = dQ / root4
        dK = dK / root4
    if c.kv_index is not None:  # kv head g was read by every query head h with kv_index[h] = g
        H_kv = c.W_k.shape[-3]
        dK = ungroup_heads(dK, c.kv_index, H_kv)  # (..., H_kv, d_attn, ℓ_z)
        dV = ungroup_heads(dV, c.kv_index, H_kv)  # (..., H_kv, d_out, ℓ_z)
    if c.rotary != "none":  # the transpose of a rotation is the rotation by −angle
        assert c.pos_q is not None and c.pos_k is not None  # attention_fwd records them
        # the unrotated rows pass as they are; rope_scaling's frequencies are constants, rotated back alike
        dQ = rotate(dQ, c.pos_q, c.rotary, c.rope_base, inverse=True, rows=c.rotary_rows, scaling=c.rope_scaling)
        dK = rotate(dK, c.pos_k, c.rotary, c.rope_base, inverse=True, rows=c.rotary_rows, scaling=c.rope_scaling)
    dgamma_q = dgamma_k = None
    if c.qk_norms is not None:  # QK-norm came before RoPE: through RMSnorm's backward next
        dQ, dgamma_q, _ = norm_bwd(dQ, c.qk_norms[0])
        dK, dgamma_k, _ = norm_bwd(dK, c.qk_norms[1])
    has_q, has_k, has_v = c.has_bias
    dX, dW_q, db_q = linear_bwd(dQ, c.X, c.W_q, has_q)
    dZ_k, dW_k, db_k = linear_bwd(dK, c.Z, c.W_k, has_k)
    dZ_v, dW_v, db_v = linear_bwd(dV, c.Z, c.W_v, has_v)
    grads = {"W_q": dW_q, "b_q": db_q, "W_k": dW_k, "b_k": db_k, "W_v": dW_v, "b_v": db_v,
             "gamma_q": dgamma_q, "gamma_k": dgamma_k}  # the gains' per head (..., H or H_kv, d_attn)
    return dX, dZ_k + dZ_v, grads


# --------------------------------------------------------------------------
# lines 1-3 of Algorithms 8-10: the embedding
# --------------------------------------------------------------------------


def embed_bwd(dX: np.ndarray, c: EmbedCache):
    """Backward of X = [s·W_e[:, x[t]] + W_p[:, t]]_t (then the embedding norm).

    dW_e[:, v] = s Σ_{t: x[t] = v} dX[:, t] (a one-hot matmul, so repeated
    tokens add up); dW_p[:, t] = dX[:, t] for t < ℓ and 0 beyond (learned
    positions only; sinusoids have no parameters).
    Returns (dW_e, dW_p or None, dγ_emb or None, dβ_emb or None).
    """
    dgamma = dbeta = None
    if c.norm is not None:
        dX, dgamma, dbeta = norm_bwd(dX, c.norm)
    dtok = dX * _const(c.scale, dX) if c.scale is not None else dX  # (..., d_e, ℓ)
    onehot = (c.x[..., :, None] == np.arange(c.N_V)).astype(dX.dtype)  # (..., ℓ, N_V)
    dW_e = dtok @ onehot  # (..., d_e, N_V)
    dW_p = None
    if c.learned:
        ell = dX.shape[-1]
        dW_p = np.zeros(dX.shape[:-1] + (c.ell_max,), dtype=dX.dtype)  # (..., d_e, ℓ_max)
        dW_p[..., :ell] = dX
    return dW_e, dW_p, dgamma, dbeta


# --------------------------------------------------------------------------
# the log loss of Algorithms 11-13
# --------------------------------------------------------------------------


def log_softmax_loss(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray,
                     want_grad: bool = True) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """loss = −Σ_t w_t log softmax(z[:, t])[y_t] and its gradient with respect to the logits z.

    logits: (..., N_V, ℓ), targets: (..., ℓ) token IDs, weights: (..., ℓ) in
    {0, 1} (which columns count). log P[y, t] = z[y, t] − max_v z[v, t] −
    log Σ_v exp(z[v, t] − max z): never log 0. dz[:, t] = w_t (softmax(z[:, t]) − onehot(y_t)).
    Returns (loss (...), dlogits (..., N_V, ℓ) or None).
    """
    shifted = logits - np.max(logits, axis=-2, keepdims=True)  # (..., N_V, ℓ)
    E = np.exp(shifted)
    total = np.sum(E, axis=-2, keepdims=True)  # (..., 1, ℓ)
    log_p = shifted - np.log(total)  # (..., N_V, ℓ)
    picked = np.take_along_axis(log_p, targets[..., None, :], axis=-2)[..., 0, :]  # (..., ℓ)
    w = weights.astype(logits.dtype)
    loss = -np.sum(w * picked, axis=-1)  # (...)
    if not want_grad:
        return loss, None
    onehot = (targets[..., None, :] == np.arange(logits.shape[-2])[:, None]).astype(logits.dtype)  # (..., N_V, ℓ)
    dlogits = (E / total - onehot) * w[..., None, :]
    return loss, dlogits
