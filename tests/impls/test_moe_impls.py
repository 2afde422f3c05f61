"""The sparse mixture-of-experts MLP (``moe_mlp``, spec 2.11) on the three bundled implementations:
each passes a short search of the entry at float64 and float32 (the harness's own strategies, every
switch drawn), each computes a case worked by hand (tests/spec/test_moe.py) under both weight
conventions, and each refuses a router tie across the top-k boundary by raising while it accepts a
tie that decides nothing (every expert chosen)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.discovery import load
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER

IMPLS = ("numpy", "torch", "jax")
LN2, LN3 = math.log(2.0), math.log(3.0)
HYPER = {"E": 3, "k": 2, "d_e": 1, "d_mlp": 1, "ell": 1}


def _params(W_g=(0.0, LN2, LN3)):
    # the experts stacked: expert i's row i of W_1 and W_3 (d_mlp = 1), column i of W_2
    return {"W_g": np.array(W_g).reshape(3, 1), "W_1": np.full((3, 1), LN3), "W_3": np.ones((3, 1)),
            "W_2": np.array([[1.0, 2.0, 3.0]])}


def _call(name, params, hyper=HYPER, variant=PAPER, dtype="float64"):
    entry = REGISTRY["moe_mlp"]
    p = rounded(entry, dtype, inputs={"X": np.array([[1.0]])}, params=params)
    return np.asarray(call(load(name), entry, p.inputs, p.params, hyper=hyper, variant=variant, dtype=dtype,
                           device="cpu")["Y"], dtype=np.float64)


@pytest.mark.parametrize("name", IMPLS)
def test_a_short_search_passes_at_float64_and_float32(name, tmp_path):
    runner = Runner([(name, load(name))], RunConfig(case_dir=str(tmp_path), profile="quick"))
    cells = runner.run(["moe_mlp"], ["float64", "float32"]).cells
    assert [c.status.value for c in cells] == ["pass", "pass"], [(c.dtype, c.failure) for c in cells]


@pytest.mark.parametrize("name", IMPLS)
def test_the_hand_worked_case_under_both_conventions(name):
    # plain p = (1/3, 1/2) on experts 1, 2: 13/6 · ¾ ln 3; renormalised (2/5, 3/5): 13/5 · ¾ ln 3
    assert _call(name, _params())[0, 0] == pytest.approx(13 / 6 * 0.75 * LN3, rel=1e-12)
    got = _call(name, _params(), variant=PAPER.replace(moe_topk_norm=True))[0, 0]
    assert got == pytest.approx(13 / 5 * 0.75 * LN3, rel=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", IMPLS)
def test_a_router_tie_is_refused_by_raising(name, dtype):
    with pytest.raises(Exception, match="tie"):
        _call(name, _params(W_g=(0.0, 0.0, 0.0)), dtype=dtype)
    # every expert chosen: the tie decides nothing, (1 + 2 + 3)/3 · ¾ ln 3
    got = _call(name, _params(W_g=(0.0, 0.0, 0.0)), hyper={**HYPER, "k": 3}, dtype=dtype)[0, 0]
    assert got == pytest.approx(1.5 * LN3, rel=1e-6)
