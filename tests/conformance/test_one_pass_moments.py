"""Layer norms that do not centre at one rounded mean are judged correct.

ATen's CPU layer norm computes the mean and variance in one pass, as Welford's update does
(Welford 1962): each term of the variance is centred at a running mean with its own rounding
error, so on a near-constant column the variance errs by about the condition number |m|/√v
times the unit roundoff (Chan, Golub & LeVeque 1983), where the paper's two-pass order errs by
about the unit roundoff. Its line 3 is e·(γ/σ) + (β − mγ/σ), and its backward pass sums Σ dy·e
uncentred, both erring by about u·|e| where the paper's order errs by about u·|e − m|.

With one shared mean in every Monte Carlo lane the bound modelled only the paper's order, and
searches found the three cases kept in ``one_pass_moments/`` on which the correct PyTorch
implementation exceeded it: gpt2_layer (error/bound 1.55 at float32, 1.05 in a batch element at
float64) and ed_gradient at float64 (2.05 on the kept case): false failures. The model now
centres each term e[i] − m, in line 2 and again in line 3, at its own rounding of the mean
(``MonteCarloNumbers.centres``). These tests keep the cases closed. The Welford layer norm
below is written with NumPy scalars of the case's dtype, so its rounding is the same on every
machine (ATen's depends on its SIMD dispatch): it must pass, and must fail once the model's
independent centres are taken away, which shows that they are what covers it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ftspec.impls.numpy.layers as numpy_layers
from ftspec.conformance.replay import replay
from ftspec.conformance.rounding import MonteCarloNumbers
from ftspec.impls.numpy.components import NormCache

HERE = Path(__file__).parent / "one_pass_moments"
CASES = sorted(HERE.glob("*.json"))
#: the forward cases, on which a forward Welford layer norm can be swapped into the NumPy implementation
FORWARD = [p for p in CASES if p.name.startswith("gpt2_layer-")]


def test_the_cases_are_here():
    assert len(CASES) == 3 and len(FORWARD) == 2


def _welford_norm_columns_fwd(X, gamma, beta, variant, kind):
    """Layer norm of every column of X (..., d, ℓ) with Welford's one-pass moments, in X's dtype."""
    assert kind == "layer_norm" and variant.epsilon_placement in ("none", "outside_root"), variant
    t = X.dtype.type
    m = np.zeros_like(X[..., :1, :])  # (..., 1, ℓ) running mean
    M2 = np.zeros_like(m)  # running Σ (e − m_old)(e − m_new)
    for k in range(X.shape[-2]):
        e = X[..., k:k + 1, :]
        delta = e - m
        m = m + delta / t(k + 1)
        M2 = M2 + delta * (e - m)
    denom = X.shape[-2] - 1 if variant.variance == "unbiased" else X.shape[-2]
    root = np.sqrt(M2 / t(denom))
    sigma = root + t(variant.epsilon) if variant.epsilon_placement == "outside_root" else root
    centred = X - m
    normalised = centred / sigma
    out = normalised * gamma[:, None] + beta[:, None]
    return out, NormCache(kind, centred, root, sigma, normalised, denom, gamma, True)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_torch_layer_norm_on_near_constant_columns_is_judged_correct(path):
    assert replay(path, impl="torch").ok


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_two_pass_order_passes_the_same_cases(path):
    assert replay(path, impl="numpy").ok


@pytest.mark.parametrize("path", FORWARD, ids=lambda p: p.stem)
def test_welford_moments_pass(path, monkeypatch):
    monkeypatch.setattr(numpy_layers, "_norm_columns_fwd", _welford_norm_columns_fwd)
    verdict = replay(path, impl="numpy")
    assert verdict.ok, verdict.text


def test_without_one_pass_centres_welford_moments_fail(monkeypatch):
    monkeypatch.setattr(numpy_layers, "_norm_columns_fwd", _welford_norm_columns_fwd)
    monkeypatch.setattr(MonteCarloNumbers, "centres", None)
    failed = [p.stem for p in FORWARD if not replay(p, impl="numpy").ok]
    assert failed, "the model without one-pass centres should fail a one-pass layer norm here"
