"""Marian's sinusoid in halves (``positions="sinusoidal_halves"``, spec 2.15) in each bundled plugin.

Each plugin builds the table on its own (no plugin imports another's, nor the spec's numerics),
so each is checked twice: its ``embedding`` entry against the spec's reference within the
harness's tolerance (the switch reaches the entry), and its table against Marian's formula,
written here from transformers 5.24.0 (models/marian/modeling_marian.py,
``MarianSinusoidalPositionalEmbedding.create_weight``): row pos is [sin(pos·ω_i) for i < ⌈d/2⌉]
then [cos(pos·ω_i) for i < ⌊d/2⌋], ω_i = 10000^(−2i/d), 0-based (an odd d has one sine more).
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

HALVES = PAPER.replace(positions="sinusoidal_halves")
PLUGINS = ["numpy", "torch", "jax"]


def _implementation(name: str):
    module = pytest.importorskip(f"ftspec.impls.{name}")
    return module.implementation


def marian_table(d: int, ell_max: int) -> np.ndarray:
    """create_weight's formula as the spec's W_p (rows are dimensions, columns positions)."""
    s = (d + 1) // 2  # create_weight's sentinel
    return np.array([[math.sin(pos / 10000 ** (2 * j / d)) if j < s else math.cos(pos / 10000 ** (2 * (j - s) / d))
                      for pos in range(ell_max)] for j in range(d)])


def _positions(impl, d_e: int, variant) -> tuple[dict, dict]:
    """The ``embedding`` entry with zero token embeddings (its output is the position table) and the
    spec's reference for the same call."""
    entry = REGISTRY["embedding"]
    case = make_case(entry, variant, hyper={"N_V": 3, "d_e": d_e, "ell": 6, "ell_max": 6})
    params = {k: np.zeros_like(v) for k, v in case.params.items()}
    got = call(impl, entry, case.inputs, params, hyper=case.hyper, variant=variant, dtype="float64", device="cpu")
    return got, reference(entry, case.inputs, params, hyper=case.hyper, variant=HALVES, dtype="float64")


@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize("d_e", [1, 2, 5, 6])
def test_embedding_entry_adds_marians_positions(plugin, d_e):
    got, ref = _positions(_implementation(plugin), d_e, HALVES)
    judgement = judge(REGISTRY["embedding"], got, ref)
    assert judgement.ok, judgement.findings
    np.testing.assert_allclose(got["X"], marian_table(d_e, 6), rtol=0, atol=4e-16)


@pytest.mark.parametrize("plugin", PLUGINS)
def test_vaswanis_interleaved_rows_fail_the_halves(plugin):
    """The same plugin under Vaswani's sinusoid is judged wrong against the halves: at d_e = 6 only
    rows 0 and 5 agree (sin at frequency 0, cos at frequency 2·2/6)."""
    got, ref = _positions(_implementation(plugin), 6, PAPER.replace(positions="sinusoidal_vaswani"))
    assert not judge(REGISTRY["embedding"], got, ref).ok
    differs = np.abs(got["X"] - marian_table(6, 6)).max(axis=1) > 0.1
    assert differs.tolist() == [False, True, True, True, True, False]
