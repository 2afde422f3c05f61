"""A square root whose argument the Monte Carlo lanes do not resolve from 0 has no bound (issue 35).

`make run` of 2026-12-06 failed the bundled JAX plugin (and NumPy, on replay) on ``ed_loss`` at
float16: an encoder column entering a post-norm without ε, (3.2e-6, 5.2e-6, 4.8e-4, -7.4e-6,
2.3e-4), has the variance 3.6e-8 in binary64, but each centred square is near or below 2^-25, half
float16's smallest subnormal, so a float16 sum of them is 0 and x/σ divides by zero: NaN, a
correct float16 computation of the paper's algorithm. The lanes perturb every square by at most
η = 2^-25 independently, so no lane reaches 0, and the reference was finite with a modest bound.

√ is not Lipschitz at 0: the model's bound (SAFETY × spread) holds for √v only where no
implementation within it can make v = 0, and underflow can, where v is within a few underflow
errors of 0. ``mc_functions.ROOT_RESOLUTION`` makes the lanes NaN where v is within 8 of them,
which every reference refuses as unmodelled (never a failure, for every implementation alike). These
tests build that column from scratch and check that float16 arithmetic really gives NaN there,
that the case is refused, and that a resolved column a thousand times larger is still judged; and
replay the case file `make run` wrote (false_failures/unresolved_root/): refused for NumPy and
PyTorch, and failed without the rule (so the rule is what closes it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ftspec.conformance.core.mc_functions as mc_functions
from ftspec.conformance.core.judge import judge
from ftspec.conformance.running.replay import ReplayError, replay
from ftspec.conformance.core.tolerances import SAFETY, ToleranceModelError, reference
from ftspec.spec import PAPER
from ftspec.spec.registry import REGISTRY

CASE = Path(__file__).parent / "false_failures" / "unresolved_root" / "ed_loss-jax-float16-cpu_0-327d6197.json"
#: the column `make run` met, then two ordinary ones
COLUMN = [3.2e-6, 5.2e-6, 4.8e-4, -7.4e-6, 2.3e-4]
HYPER = {"d_e": 5, "ell": 3}


def _inputs(scale: float) -> tuple[dict, dict]:
    X = np.array([[c * scale, 0.1 * i - 0.2, (-1.0) ** i * 0.3] for i, c in enumerate(COLUMN)], dtype=np.float16)
    params = {"gamma": np.ones(5, dtype=np.float16), "beta": np.zeros(5, dtype=np.float16)}
    return {"X": X}, params


def newcomers_layer_norm(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Algorithm 6 without ε, in the array's own dtype (the bundled NumPy plugin's order)."""
    m = X.mean(axis=-2, keepdims=True)
    v = ((X - m) ** 2).mean(axis=-2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (X - m) / np.sqrt(v) * gamma[:, None] + beta[:, None]


def _reference(inputs: dict, params: dict):
    as64 = {k: v.astype(np.float64) for k, v in inputs.items()}
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    return reference(REGISTRY["layer_norm"], as64, p64, hyper=HYPER, variant=PAPER, dtype="float16")


def test_float16_arithmetic_really_divides_by_zero_there():
    """The hard case is real: the centred squares underflow, the float16 variance is 0, the column NaN
    or infinite, while the binary64 variance is positive and representable."""
    inputs, params = _inputs(1.0)
    col = inputs["X"][:, 0].astype(np.float64)
    assert 0 < np.mean((col - col.mean()) ** 2) < 2.0 ** -24
    out = newcomers_layer_norm(inputs["X"], params["gamma"], params["beta"])
    assert not np.isfinite(out[:, 0]).all()
    assert np.isfinite(out[:, 1:]).all()


def test_the_case_is_refused_as_unmodelled():
    with pytest.raises(ToleranceModelError, match="not resolved from 0"):
        _reference(*_inputs(1.0))


def test_without_the_rule_the_lanes_stay_finite(monkeypatch):
    """The rule is what refuses it: disabled, the lanes stay finite and a reference is given (the
    layer norm's own output is excused there, its bound reaching its value; downstream it is not:
    the case file below)."""
    monkeypatch.setattr(mc_functions, "ROOT_RESOLUTION", 0.0)
    ref = _reference(*_inputs(1.0))
    assert np.isfinite(ref.outputs["X_hat"]).all()


def test_the_make_run_case_is_refused_for_every_implementation():
    """The case file `make run` wrote (ed_loss at float16, JAX's NaN loss): no implementation is
    judged on it, one line saying why."""
    for impl in ("numpy", "torch"):
        with pytest.raises(ReplayError, match="cannot bound this case at float16.*not resolved from 0"):
            replay(CASE, impl=impl)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's divide by zero: the computation, not an error
def test_without_the_rule_the_make_run_case_fails_a_correct_implementation(monkeypatch):
    """Downstream of the norm the loss is resolved (3.538, bound 0.2): NumPy's float16 NaN, a
    correct computation, fails it unless the rule refuses the case."""
    monkeypatch.setattr(mc_functions, "ROOT_RESOLUTION", 0.0)
    verdict = replay(CASE, impl="numpy")
    assert not verdict.ok and "NaN" in verdict.text, verdict.text


def test_a_resolved_column_is_still_judged():
    """A thousand times larger, the squares are float16 subnormals no longer near 2^-25: the variance
    is resolved, the reference bounds it, and the float16 computation conforms."""
    inputs, params = _inputs(1000.0)
    ref = _reference(inputs, params)
    got = newcomers_layer_norm(inputs["X"], params["gamma"], params["beta"])
    assert np.isfinite(got).all()
    verdict = judge(REGISTRY["layer_norm"], {"X_hat": got}, ref)
    assert verdict.ok, verdict.findings


def test_the_threshold_is_the_bounds_own_factor():
    """8 underflow errors: SAFETY's factor, at every dtype."""
    assert set(SAFETY.values()) == {mc_functions.ROOT_RESOLUTION}


def test_a_noisy_variance_far_from_underflow_is_judged():
    """A near-constant column at float16 (2 ± 0.01): its centring noise spreads the variance's lanes
    by a large part of its value, but a mean's error only adds to a sum of squares, so it cannot
    reach 0 and the case is judged, not refused."""
    X = np.array([[2.0 + 0.01 * (i - 2), 0.1 * i - 0.2, (-1.0) ** i * 0.3] for i in range(5)], dtype=np.float16)
    params = {"gamma": np.ones(5, dtype=np.float16), "beta": np.zeros(5, dtype=np.float16)}
    ref = _reference({"X": X}, params)
    got = newcomers_layer_norm(X, params["gamma"], params["beta"])
    verdict = judge(REGISTRY["layer_norm"], {"X_hat": got}, ref)
    assert verdict.ok, verdict.findings
