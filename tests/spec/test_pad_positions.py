"""Positions under padding (``pad_positions``): "index" (the default, t) or "real", the real tokens
before t (transformers 5.24: OPT's ``cumsum(attention_mask)·attention_mask − 1`` read at offset 2;
BLOOM's ALiBi ``(attention_mask.cumsum(-1) − 1)·attention_mask``), checked against its definition:

- without padding "real" is "index", and with trailing padding alone the real columns agree;
- with padding anywhere, a real token's column under "real" is the unpadded model's on the real tokens
  alone (padding is no query's key, and the positions count real tokens from 0): learned positions,
  a sinusoid and ALiBi;
- left padding: the first real token's position embedding is W_p[:, 0], a padding position adds none;
- the switch's default keeps every earlier set's hash (``LATER``), and it is listed by the padded models.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.spec import evaluate
from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import LATER, PAPER, PRESETS, VariantSet, preset

from .helpers import flat_params, small_hyper

X = [3, 0, 5, 1, 6]
REAL = PAPER.replace(pad_positions="real", empty_query="uniform")
#: learned positions (OPT's), a sinusoid, and ALiBi without position embeddings (BLOOM's)
SETS = {"learned": REAL, "sinusoid": REAL.replace(positions="sinusoidal_vaswani"),
        "alibi": preset("bloom").replace(pad_positions="real")}
MODELS = ("padded_d_transformer", "padded_e_transformer")


def _p(name: str, x: list[int], pad: list[int], variant: VariantSet, seed: int = 3) -> list[list[float]]:
    e = REGISTRY[name]
    hyper = small_hyper(e, L=2, ell=len(x), ell_max=len(X))
    flat = flat_params(e, hyper, variant, seed)
    return evaluate(name, {"x": x, "pad": pad}, flat, hyper=hyper, variant=variant)["P"]


def _columns(P: list[list[float]], keep: list[int]) -> list[list[float]]:
    return [[row[t] for t in keep] for row in P]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("which", ["learned", "sinusoid"])
def test_without_padding_real_is_index(name, which):
    v = SETS[which]
    if name == "padded_e_transformer" and v.position_bias != "none":
        pytest.skip("ALiBi is a causal self-attention's")
    pad = [1] * len(X)
    assert _p(name, X, pad, v) == _p(name, X, pad, v.replace(pad_positions="index"))


@pytest.mark.parametrize("which", ["learned", "alibi"])
def test_trailing_padding_leaves_the_real_columns_alone(which):
    v, pad = SETS[which], [1, 1, 1, 0, 0]
    real = _p("padded_d_transformer", X, pad, v)
    index = _p("padded_d_transformer", X, pad, v.replace(pad_positions="index"))
    assert _columns(real, [0, 1, 2]) == _columns(index, [0, 1, 2])


@pytest.mark.parametrize("name,which", [("padded_d_transformer", "learned"), ("padded_d_transformer", "sinusoid"),
                                        ("padded_d_transformer", "alibi"), ("padded_e_transformer", "learned"),
                                        ("padded_e_transformer", "sinusoid")])
@pytest.mark.parametrize("pad", [[0, 0, 1, 1, 1], [1, 0, 1, 0, 1], [0, 1, 1, 0, 1]])
def test_real_columns_are_the_model_on_the_real_tokens_alone(name, which, pad):
    """Under "real" the padding is gone for every real token: the columns of the real tokens are the
    unpadded model's on those tokens, at positions 0, 1, …; under "index" they are not (the contrast)."""
    v = SETS[which]
    keep = [t for t, f in enumerate(pad) if f]
    alone = _p(name, [X[t] for t in keep], [1] * len(keep), v)
    np.testing.assert_allclose(_columns(_p(name, X, pad, v), keep), alone, rtol=1e-12, atol=1e-15)
    between = any(not pad[t] and any(pad[:t]) and any(pad[t + 1:]) for t in range(len(pad)))
    if which == "alibi" and not between:  # left padding shifts every key of a query alike: it cancels
        return
    assert not np.allclose(_columns(_p(name, X, pad, v.replace(pad_positions="index")), keep), alone, rtol=1e-9)


def test_left_padding_starts_the_real_positions_at_zero():
    e = REGISTRY["padded_d_transformer"]
    hyper = small_hyper(e, L=1, ell=len(X), ell_max=len(X))
    flat = flat_params(e, hyper, REAL, 3)
    rec = intermediates("padded_d_transformer", {"x": X, "pad": [0, 0, 1, 1, 1]}, flat, hyper=hyper, variant=REAL)
    added = rec["embedding.positions"]
    W_p = flat["W_p"]
    for t, p in ((2, 0), (3, 1), (4, 2)):  # the real tokens at positions 0, 1, 2
        assert [row[t] for row in added] == [row[p] for row in W_p]
    for t in (0, 1):  # a padding position adds no position (OPT's embed_positions[1], outside W_p: 0)
        assert all(row[t] == 0 for row in added)


def test_the_default_keeps_every_hash_and_the_padded_models_list_it():
    assert LATER["pad_positions"] == "index" == PAPER.pad_positions
    assert "pad_positions" not in PAPER.to_json() and "pad_positions" not in PRESETS["bloom"].to_json()
    assert PAPER.hash == "fc2d657e21da4545" and PRESETS["bloom"].hash == "0a5200d50a22743f"  # before the switch
    assert REAL.hash != REAL.replace(pad_positions="index").hash
    assert {n for n, e in REGISTRY.items() if "pad_positions" in e.switches} == set(MODELS)
