"""Known gaps of the tolerance model, kept as cases so that they are not lost.

The PyTorch implementation's layer norm is ``F.layer_norm``, whose CPU kernel computes the moments
as Welford's algorithm does: a correct, backward-stable algorithm whose error on near-constant
columns is about 1.3-1.5 times the spec's two-pass order (median and 95th percentile over 200
float32 columns; the issue-14 note). The Monte Carlo bound models only the spec's order, so a
thorough search found these two gpt2_layer cases on which a correct implementation is failed
(error/bound 1.05 in a batch element at float64, 1.55 at float32): false failures.

The torch replays are marked ``xfail(strict=False)``, not strict: whether ATen's kernel lands
outside the bound on these exact cases depends on its CPU dispatch (AVX2 or AVX-512 moments
differ in their last bits), so on another machine a replay may pass, and a strict mark would fail
CI for a gap that is still there. pytest lists an unexpected pass as XPASS in the summary (-ra).
The NumPy implementation, which follows the spec's order, must pass both (a plain test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftspec.conformance.replay import replay

HERE = Path(__file__).parent / "known_gaps"
CASES = sorted(HERE.glob("gpt2_layer-torch-*.json"))


def test_the_cases_are_here():
    assert len(CASES) == 2


@pytest.mark.xfail(strict=False, raises=AssertionError,
                   reason="the tolerance model covers only the spec's two-pass layer-norm order")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_torch_layer_norm_on_near_constant_columns_is_judged_correct(path):
    assert replay(path, impl="torch").ok


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_numpy_passes_the_same_cases(path):
    assert replay(path, impl="numpy").ok
