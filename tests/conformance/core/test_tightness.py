"""The tolerances are tight: the subtle convention bugs that issue 4 names
are caught, at float32 as well as float64.

Each mutant is a correct bundled implementation computing another convention
than the one asked for (tools/zoo). The harness must find an input that
exposes it within the example budget, and name the broken algorithm.
"""

from __future__ import annotations

import pytest

from ..support import failed, run_mutant


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_epsilon_inside_root_fails_against_no_epsilon(tmp_path, dtype):
    # Nearly constant columns: with variance ~1e-6, ε = 1e-5 changes the output by a factor √11.
    result = run_mutant("epsilon-added", ["layer_norm"], [dtype], tmp_path, examples=80)
    assert failed(result) == {"layer_norm": "spec"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_tanh_fails_against_gelu_erf(tmp_path, dtype):
    result = run_mutant("gelu-tanh", ["bert_layer", "gpt2_layer"], [dtype], tmp_path, examples=60)
    assert failed(result) == {"bert_layer": "spec", "gpt2_layer": "spec"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unbiased_variance_fails_against_biased(tmp_path, dtype):
    result = run_mutant("variance-unbiased", ["layer_norm", "encoder_layer"], [dtype], tmp_path, examples=40)
    assert failed(result) == {"layer_norm": "spec", "encoder_layer": "spec"}


def test_missing_scale_and_transposed_mask_are_caught(tmp_path):
    result = run_mutant("scale-missing", ["attention", "mh_attention"], ["float32"], tmp_path, examples=40)
    assert failed(result) == {"attention": "spec", "mh_attention": "spec"}
    result = run_mutant("mask-transposed", ["attention"], ["float32"], tmp_path, examples=60)
    assert set(failed(result)) == {"attention"}
