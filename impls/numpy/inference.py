"""Algorithms 14-15 in NumPy: temperature sampling, DInference and EDInference.

Randomness is an input (docs/spec.md "Randomness is an input"):

- one uniform variate u per draw, inverse CDF over token IDs in increasing
  order: q_v ∝ exp((log p_v − log max p)/τ) (q_v = 0 where p_v = 0),
  normalised, c_v = Σ_{w≤v} q_w; the token is the smallest v with u < c_v
  (the last token if rounding leaves every c_v ≤ u);
- τ = 0 is argmax with ties to the lowest ID; τ = inf is uniform, ⌊u·N_V⌋.

DInference step k (0-based) samples from the last column of
DTransformer(x + y[:k]) with u[k]. EDInference starts from [bos_token],
step k samples from column k of EDTransformer(z, x̂) with u[k], and stops
after sampling eos_token or when x̂ holds ℓ_max tokens; x̂ is padded with −1.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ftspec.impls.api import Context

from .architectures import d_transformer, ed_transformer
from .components import check_tokens, check_variates

__all__ = ["ALGORITHMS", "sample"]

Params = Mapping[str, Any]
Inputs = Mapping[str, Any]


def sample(p: np.ndarray, u, tau) -> int:
    """Algorithm 14 line 5: one draw y ~ q ∝ p^{1/τ} by inverse CDF with variate u."""
    p = np.asarray(p)
    N_V = p.shape[-1]
    t = float(tau)
    if math.isnan(t) or t < 0:
        raise ValueError(f"tau: a temperature τ ≥ 0 (inf allowed); given {t}")
    if p.ndim != 1 or N_V == 0:
        raise ValueError(f"p: a vector of N_V ≥ 1 probabilities; given shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or not np.any(p > 0):
        raise ValueError("p: non-negative finite entries with a positive sum")
    if t == 0:  # the limit τ → 0: argmax, ties to the lowest ID
        return int(np.argmax(p))
    if math.isinf(t):  # the limit τ → ∞: uniform
        return min(int(math.floor(float(u) * N_V)), N_V - 1)
    positive = p > 0
    log_p = np.log(np.where(positive, p, np.ones_like(p)))  # log 1 = 0 stands in for log 0, masked below
    scaled = (log_p - np.log(np.max(p))) / p.dtype.type(t)  # ≤ 0
    q = np.where(positive, np.exp(scaled), np.zeros_like(p))
    q = q / np.sum(q)
    cdf = np.cumsum(q)  # c_v = Σ_{w≤v} q_w
    hits = np.flatnonzero(u < cdf)
    return int(hits[0]) if hits.size else N_V - 1


def _sample(i: Inputs, p: Params, ctx: Context):
    check_variates(i["u"])
    return np.asarray(sample(i["p"], i["u"], i["tau"]), dtype=np.int64)


def _d_inference(i: Inputs, p: Params, ctx: Context):
    """Algorithm 14 lines 1-7: ℓ_gen tokens, one at a time, from the last column of DTransformer."""
    x = np.asarray(i["x"])
    ell, ell_gen, ell_max = x.shape[-1], ctx.hyper["ell_gen"], ctx.hyper["ell_max"]
    if ell + ell_gen - 1 > ell_max:
        raise ValueError(f"ell_gen: ell + ell_gen − 1 = {ell + ell_gen - 1} exceeds ell_max = {ell_max}")
    check_tokens(x, p["W_e"].shape[1], "x")
    check_variates(i["u"])
    seq = [int(t) for t in x]
    y = []
    for k in range(ell_gen):  # line 2
        P = d_transformer(np.asarray(seq, dtype=np.int64), p, ctx.variant, ctx.hyper)  # line 3
        token = sample(P[:, -1], i["u"][k], i["tau"])  # lines 4-5: column ℓ + k − 1 (0-based)
        y.append(token)
        seq.append(token)  # line 6
    return np.asarray(y, dtype=np.int64)


def _ed_inference(i: Inputs, p: Params, ctx: Context):
    """Algorithm 15 lines 1-8: decode from bos until eos is sampled or x̂ has ℓ_max tokens."""
    ell_max = ctx.hyper["ell_max"]
    N_V = p["W_e"].shape[1]
    z = np.asarray(i["z"])
    bos, eos_token = int(i["bos_token"]), int(i["eos_token"])
    check_tokens(np.asarray([bos, eos_token]), N_V, "bos_token/eos_token")
    check_variates(i["u"])
    x_hat = [bos]  # line 1
    eos = False
    while len(x_hat) < ell_max:  # W_p has no column beyond ℓ_max
        k = len(x_hat) - 1
        P = ed_transformer(z, np.asarray(x_hat, dtype=np.int64), p, ctx.variant, ctx.hyper)  # line 3
        y = sample(P[:, k], i["u"][k], i["tau"])  # lines 4-5: column length(x̂) (1-based)
        x_hat.append(y)  # line 6
        if y == eos_token:  # line 7: until y = eos_token
            eos = True
            break
    length = len(x_hat)
    padded = np.full(ell_max, -1, dtype=np.int64)
    padded[:length] = x_hat
    return {"x_hat": padded, "length": np.asarray(length, dtype=np.int64), "eos": np.asarray(eos)}


ALGORITHMS = {
    "sample": _sample,
    "d_inference": _d_inference,
    "ed_inference": _ed_inference,
}
