"""The backward pass of a layer norm, rounded as an uncentred backward pass rounds it.

The exact gradient of a layer norm with respect to its input sums to zero: the norm ignores a
shift of its input. ATen's CPU backward (aten/src/ATen/native/cpu/layer_norm_kernel.cpp, PyTorch
2.x) returns dx = r·dy·γ + b·x + c with c ≈ −b·m, so its dx sums to about u·|b|·|m|, the
condition number |m|/σ times more than the paper's order leaves. These tests check that the
model's spread of Σ dx covers that formula on ill-conditioned columns, and that it does not
without ``MonteCarloNumbers.uncentred_slopes`` (docs/tolerances.md, "Uncentred backward passes").
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.rounding import MonteCarloNumbers
from ftspec.conformance.core.tolerances import GRADIENT_SAFETY, LANES
from ftspec.spec.autodiff import gradient
from ftspec.spec.normalization import layer_norm
from ftspec.spec.variants import PAPER

U = 2.0**-53
NO_AFFINE = PAPER.replace(affine="none")


def _atens_backward(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """ATen's formula for one column in float64 (no γ, no ε): ds, db, b, c, then dx."""
    d = len(x)
    m = np.sum(x) / d
    r = 1.0 / np.sqrt(np.sum((x - m) ** 2) / d)
    ds, db = np.sum(dy * x), np.sum(dy)
    b = (db * m - ds) * r * r * r / d
    c = -b * m - db * r / d
    return r * dy + b * x + c


def _spread_of_the_sum(x: np.ndarray, dy: np.ndarray, seed: int) -> float:
    """The Monte Carlo spread of Σ_i ∂(dy·ê)/∂e[i] (exactly 0), as the harness's lanes give it."""
    mc = MonteCarloNumbers(u=U, eta=2.0**-1022, lanes=LANES, seed=seed)

    def loss(p):
        return sum(g * y for g, y in zip(dy.tolist(), layer_norm(p["e"], None, None, variant=NO_AFFINE)))

    _, grads = gradient(loss, {"e": x.tolist()}, base=mc)
    lanes = np.sum([g.x for g in grads["e"]], axis=0)  # (K+1,)
    return float(np.max(np.abs(lanes[1:] - lanes[0])))


def _columns(kappa: float, n: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        m = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 3.0)
        x = m + (abs(m) / kappa) * rng.standard_normal(d)
        yield x, rng.standard_normal(d)


def _worst_ratio(kappa: float, d: int) -> float:
    worst = 0.0
    for i, (x, dy) in enumerate(_columns(kappa, 12, d, seed=d)):
        err = abs(float(np.sum(_atens_backward(x, dy))))  # the exact sum is 0
        worst = max(worst, err / (GRADIENT_SAFETY["float64"] * _spread_of_the_sum(x, dy, seed=i)))
    return worst


@pytest.mark.parametrize("d", [2, 5])
@pytest.mark.parametrize("kappa", [10.0, 1e3])
def test_the_spread_covers_an_uncentred_backward(kappa, d):
    assert _worst_ratio(kappa, d) <= 1.0


def test_without_uncentred_slopes_it_does_not(monkeypatch):
    monkeypatch.setattr(MonteCarloNumbers, "uncentred_slopes", None)
    assert _worst_ratio(1e3, 2) > 1.0


def test_the_slopes_are_zero_in_lane_0_and_at_most_the_expanded_rounding():
    mc = MonteCarloNumbers(u=U, eta=2.0**-1022, lanes=LANES, seed=0)
    e, m = [mc.num(1000.5), mc.num(999.0), mc.num(1000.0)], mc.num(1000.0)
    slopes = [s.x for s in mc.uncentred_slopes(e, m)]
    assert all(s[0] == 0.0 for s in slopes)  # the binary64 gradient is unchanged
    for s, limit in zip(slopes[:2], (U * 2000.5 / 0.5, U * 1999.0 / 1.0)):
        assert np.max(np.abs(s)) <= limit
        assert np.max(np.abs(s)) > 0.5 * limit  # 32 uniform draws, all below half: 2^-32
    assert not slopes[2].any()  # a term at the mean exactly: its adjoint through line 2 is 0
