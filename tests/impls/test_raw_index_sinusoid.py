"""The raw-index sinusoid (``positions="sinusoidal_raw_index"``, seed 004) in each bundled plugin.

Each plugin builds the table on its own (no plugin imports another's, nor the spec's numerics),
so each is checked twice: its ``embedding`` entry against the spec's reference within the
harness's tolerance (the switch reaches the entry), and its table against seed 004's formula,
written here from the tutorial's Table II: p[pos, i] = sin(pos / 10000^(2i/d)) for even i,
cos(…) for odd i, 0-based dimension i and position pos (including an odd d, where the last
row is a sine of its own index).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec import PAPER
from ftspec.spec.registry import REGISTRY

from .cases import make_case

RAW = PAPER.replace(positions="sinusoidal_raw_index")
PLUGINS = ["numpy", "torch", "jax"]


def _implementation(name: str):
    module = pytest.importorskip(f"ftspec.impls.{name}")
    return module.implementation


def tutorial_table(d: int, ell_max: int) -> np.ndarray:
    """Seed 004, Table II's formula, as the spec's W_p (rows are dimensions, columns positions)."""
    return np.array([[(math.sin if i % 2 == 0 else math.cos)(pos / 10000 ** (2 * i / d)) for pos in range(ell_max)]
                     for i in range(d)])


@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize("d_e", [2, 5, 6])
def test_embedding_entry_adds_the_tutorials_positions(plugin, d_e):
    """Zero token embeddings: the ``embedding`` entry's output is the position table itself."""
    impl = _implementation(plugin)
    entry = REGISTRY["embedding"]
    case = make_case(entry, RAW, hyper={"N_V": 3, "d_e": d_e, "ell": 6, "ell_max": 6})
    params = {k: np.zeros_like(v) for k, v in case.params.items()}
    got = call(impl, entry, case.inputs, params, hyper=case.hyper, variant=RAW, dtype="float64", device="cpu")
    ref = reference(entry, case.inputs, params, hyper=case.hyper, variant=RAW, dtype="float64")
    judgement = judge(entry, got, ref)
    assert judgement.ok, judgement.findings
    np.testing.assert_allclose(got["X"], tutorial_table(d_e, 6), rtol=0, atol=4e-16)


@pytest.mark.parametrize("plugin", PLUGINS)
def test_the_switch_is_not_vaswanis(plugin):
    """The same call under Vaswani's sinusoid differs from the raw-index one from row 1 on."""
    impl = _implementation(plugin)
    entry = REGISTRY["embedding"]
    case = make_case(entry, RAW, hyper={"N_V": 3, "d_e": 6, "ell": 6, "ell_max": 6})
    params = {k: np.zeros_like(v) for k, v in case.params.items()}
    raw, vas = (call(impl, entry, case.inputs, params, hyper=case.hyper, variant=v, dtype="float64",
                     device="cpu")["X"] for v in (RAW, PAPER.replace(positions="sinusoidal_vaswani")))
    np.testing.assert_array_equal(raw[0], vas[0])
    assert np.abs(raw[1:] - vas[1:]).max() > 1.9  # cos 3 against cos(3 / 10000^(1/3)) ≈ 0.99
