"""Known gaps of the tolerance model: cases on which a correct implementation still fails.

Four cases found by the thorough run of 2026-11-24 (docs/tolerances.md, "Known gap"): two of
d_gradient and one of d_sgd_step at float64, one of ed_training at float32. All have d_e = 2,
where layer norm is degenerate: a column of two entries normalises to (1, −1) or (−1, 1)
whatever its values, so without epsilon its Jacobian is zero and every gradient upstream of it
is exactly zero in exact arithmetic (about 1e-62 in 60-digit mpmath), and with ε = 1e-5 it is
nearly so. What an implementation returns there is mostly rounding noise: the paper's order
leaves about 1e-15 at float64 (the Monte Carlo spread is about 1e-14), and PyTorch, whose
layer-norm backward sums Σ dy·e uncentred (its noise grows with |m|/σ), about 3e-13, beyond
SAFETY × the spread (error/bound 1.35-2.8). The model's backward pass has the paper's order
only; modelling the uncentred backward is the open work.

The PyTorch replays are marked ``xfail(strict=False)``: whether ATen lands outside the bound on
these exact cases depends on its CPU dispatch, so on another machine a replay may pass (XPASS in
the summary with -ra), and a strict mark would fail CI for a gap that is still there. The NumPy
implementation must pass them all (a plain test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspec.conformance.replay import replay

HERE = Path(__file__).parent / "known_gaps"
CASES = sorted(HERE.glob("*.json"))


def test_the_cases_are_here():
    assert len(CASES) == 4


@pytest.mark.xfail(strict=False, raises=AssertionError,
                   reason="gradients through a degenerate layer norm (d_e = 2) are rounding noise, whose "
                          "size depends on the order of the backward pass")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_pytorch_gradients_through_a_degenerate_layer_norm(path):
    verdict = replay(path, impl="torch")
    assert verdict.ok, verdict.text


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_papers_order_passes_the_same_cases(path):
    verdict = replay(path, impl="numpy")
    assert verdict.ok, verdict.text
