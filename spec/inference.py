"""Algorithms 14-15: inference by temperature sampling.

Decisions where the paper is silent, so that every implementation computes
the same tokens:
- Randomness is explicit: step i uses the uniform variate u[i] ∈ [0, 1).
- Sampling is by inverse CDF over token IDs in increasing order: with
  q ∝ p^{1/τ} and c_v = Σ_{w ≤ v} q_w, the token is the smallest v with
  u < c_v (the last token if rounding leaves every c_v ≤ u).
- q is evaluated as exp((log p_v − log max p)/τ) / Σ_w exp(…): the same
  distribution, without underflow for small τ; tokens with p_v = 0 get q_v = 0.
- The paper's limits are values of τ: τ = 0 is argmax with ties to the
  lowest ID; τ = ∞ is uniform over the vocabulary, token ⌊u · N_V⌋.
- EDInference stops when it samples eos_token, or when x̂ has ℓ_max tokens
  (W_p has no column beyond), and says which.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from . import numbers
from .architectures import d_transformer, ed_transformer
from .errors import SpecError
from .intermediates import algorithm
from .linalg import Vector, column
from .params import DTransformerParams, EDTransformerParams
from .variants import PAPER, VariantSet

__all__ = ["cdf", "d_inference", "ed_inference", "sample"]


def _check_tau(tau: Any) -> float:
    N = numbers.current()
    t = N.to_float(tau)
    if math.isnan(t) or t < 0:
        raise SpecError("tau", "a temperature τ ≥ 0 (0 and inf are the paper's limits)", repr(t))
    return t


def cdf(p: Vector, tau: Any) -> Vector:
    """c_v = Σ_{w ≤ v} q_w with q ∝ p^{1/τ} (0 < τ < ∞)."""
    N = numbers.current()
    top = max(p)
    if not top > 0:
        raise SpecError("p", "a distribution with a positive entry", "all entries 0")
    log_top = N.log(top)
    w = [N.exp((N.log(pv) - log_top) / tau) if pv > 0 else N.num(0) for pv in p]
    s = N.fsum(w)
    q = [wv / s for wv in w]
    return [N.fsum(q[: v + 1]) for v in range(len(q))]


@algorithm("sample")
def sample(p: Vector, u: Any, tau: Any) -> int:
    """One draw from q ∝ p^{1/τ} by inverse CDF with variate u (token IDs increasing)."""
    N = numbers.current()
    t = _check_tau(tau)
    if any(pv < 0 for pv in p):
        raise SpecError("p", "non-negative probabilities", "a negative entry")
    if t == 0:  # the τ → 0 limit: argmax, ties to the lowest ID
        top = max(p)
        return next(v for v, pv in enumerate(p) if pv == top)
    if math.isinf(t):  # the τ → ∞ limit: uniform
        return min(int(math.floor(N.to_float(u) * len(p))), len(p) - 1)
    c = cdf(p, tau)
    return next((v for v, cv in enumerate(c) if u < cv), len(p) - 1)


@algorithm("d_inference")
def d_inference(x: Sequence[int], theta: DTransformerParams, u: Sequence[Any], tau: Any, *,
                ell_gen: int, ell_max: int | None = None, variant: VariantSet = PAPER) -> list[int]:
    """Algorithm 14: y ← DInference(x, θ̂), hyperparameters ℓ_gen, τ.

    1. ℓ ← length(x)
    2. for i = 1, 2, ..., ℓ_gen
    3.   P ← DTransformer(x | θ̂)
    4.   p ← P[:, ℓ + i − 1]
    5.   sample a token y from q ∝ p^{1/τ}
    6.   x ← [x, y]
    7. return y = x[ℓ + 1 : ℓ + ℓ_gen]

    Step i (0-based here) uses variate u[i]; the last column of P is the
    paper's P[:, ℓ + i − 1].
    """
    if len(u) != ell_gen:
        raise SpecError("u", f"one variate per generated token (ℓ_gen = {ell_gen})", f"{len(u)}")
    x = list(x)
    ell = len(x)  # line 1
    for i in range(ell_gen):  # line 2
        P = d_transformer(x, theta, ell_max=ell_max, variant=variant)  # line 3
        p = column(P, ell + i - 1)  # line 4 (0-based: the last column)
        y = sample(p, u[i], tau)  # line 5
        x = x + [y]  # line 6
    return x[ell:]  # line 7


@algorithm("ed_inference")
def ed_inference(z: Sequence[int], theta: EDTransformerParams, u: Sequence[Any], tau: Any, bos_token: int,
                 eos_token: int, *, ell_max: int | None = None,
                 variant: VariantSet = PAPER) -> tuple[list[int], bool]:
    """Algorithm 15: x̂ ← EDInference(z, θ̂), hyperparameter τ.

    1. x̂ ← [bos_token]
    2. while true
    3.   P ← EDTransformer(z, x̂ | θ̂)
    4.   p ← P[:, length(x̂)]
    5.   sample a token y from q ∝ p^{1/τ}
    6.   x̂ ← [x̂, y]
    7.   if y = eos_token then break
    8. return x̂

    Step i uses variate u[i] (ℓ_max − 1 of them). Returns (x̂, stopped at
    eos); x̂ stops growing at ℓ_max tokens (stopped at eos is then false).
    """
    if ell_max is None:
        ell_max = len(theta.W_p[0]) if theta.W_p is not None else None
    if ell_max is None:
        raise SpecError("ell_max", "a positive integer", "None")
    if len(u) < ell_max - 1:
        raise SpecError("u", f"ℓ_max − 1 = {ell_max - 1} variates", f"{len(u)}")
    x_hat = [bos_token]  # line 1
    i = 0
    while len(x_hat) < ell_max:  # line 2, bounded by ℓ_max
        P = ed_transformer(z, x_hat, theta, ell_max=ell_max, variant=variant)  # line 3
        p = column(P, len(x_hat) - 1)  # line 4 (0-based: the last column)
        y = sample(p, u[i], tau)  # line 5
        x_hat.append(y)  # line 6
        i += 1
        if y == eos_token:  # line 7
            return x_hat, True
    return x_hat, False
