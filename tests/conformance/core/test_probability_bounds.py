"""A softmax's probabilities are bounded on the log scale as well as the linear one.

`make run` of 2026-12-06 (default profile, seed 0) failed PyTorch on d_transformer at bfloat16
(JAX fails the case alike): d_e = 2 with a post-LN residual, the embedding normalised,
large-logits values. A layer norm of a two-wide column keeps little more than a sign, and in
bfloat16 the difference of the two entries is rounding noise against √ε, so rounding moves the
logits by units. P[0, 0] = 7.2e-11 in the spec; all 32 Monte Carlo lanes fell below it
(1e-16 to 2e-13: a logit lower by 6 to 13), PyTorch and JAX returned 7.6e-9 (a logit 4.6
higher). SAFETY times the linear spread, 5.7e-10, said the output could not rise by more than
8·y0 when a draw of the same rounding error with the other sign raises it by a factor e^13.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ftspec.conformance.core.dtypes import round_to
from ftspec.conformance.core.tolerances import SAFETY, own_rounding, reference
from ftspec.conformance.running.replay import replay
from ftspec.spec.registry import entry
from ftspec.spec.variants import VariantSet

CASE = Path(__file__).parent / "cases_probability" / "d_transformer-torch-bfloat16-cpu-20631da9.json"
HYPER = dict(N_V=7, ell_max=6, L=2, H=2, d_e=8, d_attn=4, d_mid=4, d_mlp=16, ell=5)


@pytest.mark.parametrize("impl", ["torch", "jax"])  # NumPy declares no bfloat16
def test_a_two_wide_post_ln_model_at_bfloat16_passes(impl):
    verdict = replay(CASE, impl=impl, dtype="bfloat16")
    assert verdict.ok, verdict.text


def _model(dtype: str, seed: int = 3):
    """d_transformer on well-scaled parameters (entries N(0, 1/fan-in)): logits of order 1."""
    e, rng = entry("d_transformer"), np.random.default_rng(seed)
    params = {n: round_to(rng.standard_normal(s) / np.sqrt(s[-1]), dtype)
              for n, s in e.param_shapes(HYPER, VariantSet()).items()}
    x = rng.integers(0, HYPER["N_V"], size=HYPER["ell"])
    return reference(e, {"x": x}, params, hyper=HYPER, variant=VariantSet(), dtype=dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_where_rounding_moves_logits_little_the_bound_is_the_linear_one(dtype):
    """Tightness kept: the log-scale bound exceeds SAFETY × spread by at most the first-order
    factor 1 + SAFETY·s/y (exp(x) − 1 ≤ x(1 + x) for x ≤ 1, |log(1 + r)| ≤ |r|(1 + |r|) for
    |r| ≤ 1/2), a few percent at bfloat16 and nothing measurable at float32 or float64."""
    ref = _model(dtype)
    y, bound, s = ref.outputs["P"], ref.bound["P"], ref.spread["P"]
    relative = s / y
    assert relative.max() * SAFETY[dtype] <= 0.5  # the case is the well-conditioned one it claims
    linear = np.maximum(SAFETY[dtype] * s, own_rounding(y, dtype, s))
    assert np.all(bound >= linear)  # never tighter than before
    assert np.all(bound <= linear * (1 + SAFETY[dtype] * relative)), (bound / linear).max()


@pytest.mark.parametrize("dtype,t", [("float32", 1.01), ("float16", 1.05), ("bfloat16", 1.5)])
def test_a_wrong_temperature_still_fails(dtype, t):
    """Power kept: softmax(z / t) instead of softmax(z), computed from the spec's own P
    (P^(1/t), renormalised per column), falls outside the bound; t is off by what the dtype can
    see on these logits of order 0.1-1 (a percent at float32, 5% at float16 (u = 2^-11), 50%
    at bfloat16 (u = 2^-8), through two layers of rounding)."""
    ref = _model(dtype, seed=5)
    y = ref.outputs["P"]
    got = y ** (1 / t)
    got /= got.sum(axis=0, keepdims=True)
    assert np.any(np.abs(got - y) > ref.bound["P"])


def test_the_log_scale_bound_needs_no_warning_filter(monkeypatch):
    """A row whose lanes have no logarithm (all NaN) is left to the linear bound (0 here), and a
    row where some lanes have none takes the largest deviation of the others, with no warning
    raised on the way: warning filters are one per process before Python 3.14, and another
    thread leaving its own ``catch_warnings`` undoes ours (a search in a Dask worker's thread
    failed once, then passed when replayed). Filters set here are made no-ops to stand for
    that, with every warning an error (pytest's setting)."""
    import warnings

    from ftspec.conformance.core import tolerances

    arr = np.array([[1.0, np.nan, np.nan, np.nan],     # no lane has a logarithm
                    [1.0, -0.5, 1.5, 0.5],             # one lane below 0
                    [0.0, 1.0, 1.0, 1.0],              # y0 = 0: the linear bound's
                    [2.0, 2.0, 2.0, 2.0]])             # no deviation
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monkeypatch.setattr(warnings, "simplefilter", lambda *a, **k: None)
        monkeypatch.setattr(warnings, "filterwarnings", lambda *a, **k: None)
        got = tolerances._log_scale_bound(arr, 8.0)
    s = max(abs(np.log(1.5)), abs(np.log(0.5)))
    assert got[0] == 0.0 and got[2] == 0.0 and got[3] == 0.0
    assert got[1] == pytest.approx(1.0 * np.expm1(8.0 * s), rel=1e-12)
