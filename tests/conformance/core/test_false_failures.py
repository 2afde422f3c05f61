"""Cases on which a correct implementation once failed the suite, kept so they stay closed.

A false failure is the worst verdict the suite can give, so each one found is kept here, with the
change of the tolerance model that closed it (docs/tolerances.md):

- **Layer norms that do not centre at one rounded mean** (gpt2_layer at float32 and float64,
  ed_gradient at float64). ATen's CPU layer norm computes the moments in one pass, as Welford's
  update does (Welford 1962): each term of the variance is centred at a running mean with its
  own rounding error, so on a near-constant column the variance errs by about the condition
  number |m|/√v times the unit roundoff (Chan, Golub & LeVeque 1983), where the paper's two-pass
  order errs by about the unit roundoff. Its line 3 is e·(γ/σ) + (β − mγ/σ), and its backward
  pass sums Σ dy·e uncentred, both erring by about u·|e| where the paper's order errs by about
  u·|e − m|. Closed by centring each term e[i] − m, in line 2 and again in line 3, at its own
  rounding of the mean (``MonteCarloNumbers.centres``).
- **Sums in another order** (layer_norm at float64 on a wide-range column; d_gradient at
  float32 and ed_sgd_step at float64). Left to right, −86 + 75 cancel first and the small terms
  follow; an order that adds each term to a partial sum of its own size errs by about u·max|e|.
  Closed by rounding every term of a plain sum once at its own scale (``_round_terms``).
- **Gradients through a degenerate layer norm, from an uncentred backward pass** (d_gradient
  and d_sgd_step at float64, ed_training at float32; all d_e = 2, in ``uncentred_backward/``).
  A column of two entries normalises to ±(1, −1) whatever its values, so every gradient
  upstream of the norm is rounding noise. ATen's backward returns dx = a·dy·γ + b·x + c with
  c ≈ −b·m, whose rounding u·|b|·(|x| + |m|) grows with |m|/σ and lies along the constant
  vector too, where the exact gradient (and the paper's order) has none; downstream, that part
  was what the bound missed (error/bound up to 2.8). Closed by giving line 2's centred terms
  the rounding of the expanded product a·e − a·m in the backward pass
  (``MonteCarloNumbers.uncentred_slopes``, ``GradNumbers.centres``).
- **A sampled token beside a CDF value lost in some Monte Carlo lanes** (ed_inference at
  float32, d_e = 1, ε outside the root; one case drawn for NumPy, one for PyTorch, in
  ``sampling/``). NaN lanes made the token judge's margin 0 there. Closed by leaving NaN lanes
  out of the spread (``token_judge._lanes``; no bound when every lane is lost).

PyTorch and the NumPy implementation (the paper's order) must pass every case. The Welford
layer norm and ATen's backward formula below are written with NumPy arrays of the case's dtype,
so their rounding is the same on every machine (ATen's own depends on its SIMD dispatch): each
must pass its cases, and must fail them once the part of the model that covers it is taken
away, which shows that this part is what covers it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ftspec.impls.numpy.grad_layers as numpy_grad_layers
import ftspec.impls.numpy.layers as numpy_layers
from ftspec.conformance.running.replay import replay
from ftspec.conformance.core.rounding import MonteCarloNumbers
from ftspec.impls.numpy.components import NormCache, check_norm_input

HERE = Path(__file__).parent / "false_failures"
#: the gradient cases through a degenerate layer norm, on which ATen's backward formula can be
#: swapped into the NumPy implementation
UNCENTRED = sorted((HERE / "uncentred_backward").glob("*.json"))
CASES = sorted(HERE.glob("*.json")) + sorted((HERE / "sampling").glob("*.json")) + UNCENTRED
#: the forward cases, on which a forward Welford layer norm can be swapped into the NumPy implementation
FORWARD = [p for p in CASES if p.name.startswith("gpt2_layer-")]


def test_the_cases_are_here():
    assert len(CASES) == 12 and len(FORWARD) == 2 and len(UNCENTRED) == 4


def _welford_norm_columns_fwd(X, gamma, beta, variant, kind):
    """Layer norm of every column of X (..., d, ℓ) with Welford's one-pass moments, in X's dtype.
    It refuses first what the function it stands in for refuses (``check_norm_input``): only the
    moments differ."""
    assert kind == "layer_norm" and variant.epsilon_placement in ("none", "outside_root"), variant
    check_norm_input(X, variant, kind)
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
def test_pytorch_is_judged_correct(path):
    verdict = replay(path, impl="torch")
    assert verdict.ok, verdict.text


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_papers_order_is_judged_correct(path):
    verdict = replay(path, impl="numpy")
    assert verdict.ok, verdict.text


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


def _uncentred_norm_bwd(original):
    """ATen's CPU layer-norm backward (aten/src/ATen/native/cpu/layer_norm_kernel.cpp,
    ``LayerNormBackwardKernelImplInternal``, PyTorch 2.x) in the arrays' dtype, per column of
    (..., d, ℓ): ds = Σ dy·γ·x, db = Σ dy·γ, b = (db·m − ds)·r³/d, c = −b·m − db·r/d and
    dx = r·dy·γ + b·x + c, with r = 1/σ. Its input x and mean m are rebuilt from the cache
    (x − m and m are what the forward kept; ``_keep_inputs``)."""

    def norm_bwd(dOut, c):
        if c.kind != "layer_norm":
            return original(dOut, c)
        dc, dgamma, dbeta = original(dOut, c)  # dγ and dβ as before: only dx is ATen's
        X, m = _INPUTS[id(c.centred)]
        t = X.dtype.type
        d = X.shape[-2]
        r = t(1) / c.sigma  # (..., 1, ℓ)
        dy = dOut * c.gamma[:, None] if c.gamma is not None else dOut  # (..., d, ℓ)
        ds = np.sum(dy * X, axis=-2, keepdims=True)  # uncentred: Σ dy·γ·x
        db = np.sum(dy, axis=-2, keepdims=True)
        b = (db * m - ds) * r * r * r / t(d)
        cc = -b * m - db * r / t(d)
        return r * dy + b * X + cc, dgamma, dbeta

    return norm_bwd


_INPUTS: dict = {}


def _keep_inputs(original):
    """The NumPy forward layer norm, keeping each column set's input and mean for the backward."""

    def norm_fwd(X, gamma, beta, variant, kind):
        assert variant.variance == "biased" and variant.epsilon_placement in ("none", "inside_root"), variant
        out, cache = original(X, gamma, beta, variant, kind)
        if kind == "layer_norm":
            m = np.sum(X, axis=-2, keepdims=True) / X.dtype.type(X.shape[-2])  # (..., 1, ℓ)
            _INPUTS[id(cache.centred)] = (X, m)
        return out, cache

    return norm_fwd


def _swap_in_atens_backward(monkeypatch):
    _INPUTS.clear()
    monkeypatch.setattr(numpy_layers, "_norm_columns_fwd", _keep_inputs(numpy_layers._norm_columns_fwd))
    monkeypatch.setattr(numpy_grad_layers, "norm_bwd", _uncentred_norm_bwd(numpy_grad_layers.norm_bwd))


@pytest.mark.parametrize("path", UNCENTRED, ids=lambda p: p.stem)
def test_atens_uncentred_backward_passes(path, monkeypatch):
    _swap_in_atens_backward(monkeypatch)
    verdict = replay(path, impl="numpy")
    assert verdict.ok, verdict.text


def test_without_uncentred_slopes_atens_backward_fails(monkeypatch):
    _swap_in_atens_backward(monkeypatch)
    monkeypatch.setattr(MonteCarloNumbers, "uncentred_slopes", None)
    failed = [p.stem for p in UNCENTRED if not replay(p, impl="numpy").ok]
    assert failed, "the model without uncentred slopes should fail ATen's layer-norm backward here"
