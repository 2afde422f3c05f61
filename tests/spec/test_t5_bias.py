"""T5's bucketed relative position bias at the self-attention entries (spec 2.13, ``rel_bias="t5_buckets"``).
Checked against values worked out by hand from the definition (Raffel et al. 2020, §2.1; transformers 5.24
models/t5/modeling_t5.py ``T5Attention._relative_position_bucket``, ``compute_bias``), not another run of
the spec's code:

- the buckets: bidirectional (half per side, keys after the query above) and causal, exact below
  max_exact = n // 2, logarithmic above, clamped; the real-number bucket at a whole x;
- the entries: Algorithm 5 with each head's table column at the buckets added to the scaled scores,
  before the mask, written out;
- the table rel_bias (rel_buckets × H) is the last parameter, under rel_bias="t5_buckets" alone; the bucket
  parameters are read under it alone (``Entry.read_with``); no earlier set's hash moves; Algorithm 5's own entry,
  cross-attention and the models other than Algorithm 8's forward ones do not list the bias.
"""

from __future__ import annotations

import math
import random

import pytest

from ftspec.spec import evaluate
from ftspec.spec.entry import REL_BIAS
from ftspec.spec.errors import SpecError
from ftspec.spec.position_bias import t5_bucket
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, PRESETS, VariantSet

from .helpers import flat_params, random_inputs, same_bits

ENTRIES = ("self_attention", "causal_self_attention", "padded_self_attention", "padded_causal_self_attention")
T5 = PAPER.replace(attn_bias=False, attn_scale="none", rel_bias="t5_buckets")

#: (relative = t_z − t_x, bidirectional, num_buckets, max_distance, bucket), by hand:
#: bidirectional 32/128: n = 16 a side, e = 8, x = 8·ln(r/8)/ln 16; causal: n = 32, e = 16, x = 16·ln(r/16)/ln 8
BY_HAND = [
    (0, True, 32, 128, 0), (-1, True, 32, 128, 1), (1, True, 32, 128, 17), (-7, True, 32, 128, 7),
    (-8, True, 32, 128, 8),  # x = 0: the first logarithmic bucket
    (-12, True, 32, 128, 9),  # x = 8·ln 1.5/ln 16 = 1.17
    (-16, True, 32, 128, 10),  # x = 8·ln 2/(4 ln 2) = 2 exactly
    (-127, True, 32, 128, 15), (200, True, 32, 128, 31),  # x = 7.98; clamped at n − 1 of the upper side
    (5, False, 32, 128, 0),  # a key after the query: r = 0
    (-15, False, 32, 128, 15), (-16, False, 32, 128, 16),
    (-20, False, 32, 128, 17),  # x = 16·ln 1.25/ln 8 = 1.72
    (-128, False, 32, 128, 31),  # x = 16: clamped at 31
    # 6/5: bidirectional n = 3, e = 1, x = 2·ln r/ln 5; causal n = 6, e = 3, x = 3·ln(r/3)/ln(5/3)
    (-1, True, 6, 5, 1), (-2, True, 6, 5, 1), (-3, True, 6, 5, 2), (-4, True, 6, 5, 2), (2, True, 6, 5, 4),
    (3, True, 6, 5, 5), (-3, False, 6, 5, 3), (-4, False, 6, 5, 4), (-5, False, 6, 5, 5), (-9, False, 6, 5, 5),
    # 8/10 causal: n = 8, e = 4, x = 4·ln(r/4)/ln 2.5: r = 5 → 0.97, 6 → 1.77, 7 → 2.44
    (-5, False, 8, 10, 4), (-6, False, 8, 10, 5), (-7, False, 8, 10, 6), (-8, False, 8, 10, 7),
    # a whole x below the last bucket: 17/27 causal, r = 12: x = 9·ln 1.5/(3·ln 1.5) = 3 (float32 code: 10)
    (-12, False, 17, 27, 11),
]


@pytest.mark.parametrize("rel, bidirectional, n, d, want", BY_HAND)
def test_the_bucket_is_the_hand_computed_one(rel, bidirectional, n, d, want):
    assert t5_bucket(rel, bidirectional, n, d) == want


def test_buckets_without_an_exact_one_or_a_positive_log_are_refused():
    with pytest.raises(SpecError):
        t5_bucket(-3, True, 2, 128)  # one bucket a side: max_exact 0
    with pytest.raises(SpecError):
        t5_bucket(-3, False, 32, 16)  # max_distance = max_exact: ln 1 = 0
    with pytest.raises(ValueError, match="rel_buckets"):
        PAPER.replace(rel_bias="t5_buckets", rel_max_distance=5)  # 32 buckets: max_exact 16 > 5
    assert PAPER.replace(rel_max_distance=5).rel_max_distance == 5  # unread: no constraint


HYPER = {"H": 2, "d_e": 3, "d_attn": 2, "d_mid": 2, "ell": 5}


def _params(rng: random.Random, buckets: int) -> dict:
    def mat(m: int, n: int) -> list[list[float]]:
        return [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(m)]

    p: dict = {}
    for h in range(HYPER["H"]):
        p |= {f"heads.{h}.W_q": mat(HYPER["d_attn"], HYPER["d_e"]),
              f"heads.{h}.W_k": mat(HYPER["d_attn"], HYPER["d_e"]),
              f"heads.{h}.W_v": mat(HYPER["d_mid"], HYPER["d_e"])}
    p["W_o"] = mat(HYPER["d_e"], HYPER["H"] * HYPER["d_mid"])
    p["rel_bias"] = [[rng.uniform(-2, 2) for _ in range(HYPER["H"])] for _ in range(buckets)]
    return p


def _by_hand(X: list[list[float]], p: dict, causal: bool, buckets: dict[int, int]) -> list[list[float]]:
    """Algorithm 5 with Z = X, no scale, each head adding rel_bias[bucket(t_z − t_x)][h] (``buckets``: the
    hand table of the distances), then the causal mask."""
    d_e, ell = len(X), len(X[0])
    cols = [[X[r][t] for r in range(d_e)] for t in range(ell)]

    def lin(W: list[list[float]], x: list[float]) -> list[float]:
        return [sum(w * v for w, v in zip(row, x)) for row in W]

    heads = []
    for h in range(HYPER["H"]):
        q = [lin(p[f"heads.{h}.W_q"], c) for c in cols]
        k = [lin(p[f"heads.{h}.W_k"], c) for c in cols]
        v = [lin(p[f"heads.{h}.W_v"], c) for c in cols]
        out = []
        for tx in range(ell):
            keys = range(tx + 1) if causal else range(ell)
            s = [sum(a * b for a, b in zip(k[tz], q[tx])) + p["rel_bias"][buckets[tz - tx]][h] for tz in keys]
            e = [math.exp(x - max(s)) for x in s]
            w = [x / sum(e) for x in e]
            out.append([sum(wi * v[tz][r] for wi, tz in zip(w, keys)) for r in range(HYPER["d_mid"])])
        heads.append(out)
    y = [[x for h in range(HYPER["H"]) for x in heads[h][t]] for t in range(ell)]
    o = [lin(p["W_o"], c) for c in y]
    return [[o[t][r] for t in range(ell)] for r in range(d_e)]


#: the buckets of 6/5 by distance t_z − t_x for ℓ = 5, by hand (the rows of BY_HAND and the definition):
#: bidirectional keys before the query 1, 1, 2, 2 (distances −1 … −4), after it 4, 4, 5, 5; causal 1, 2, 3, 4
BIDIRECTIONAL_6_5 = {0: 0, -1: 1, -2: 1, -3: 2, -4: 2, 1: 4, 2: 4, 3: 5, 4: 5}
CAUSAL_6_5 = {0: 0, -1: 1, -2: 2, -3: 3, -4: 4}


@pytest.mark.parametrize("name", ENTRIES)
def test_the_entry_is_the_hand_computation(name):
    rng = random.Random(11)
    X = [[rng.uniform(-2, 2) for _ in range(HYPER["ell"])] for _ in range(HYPER["d_e"])]
    p = _params(rng, 6)
    v = T5.replace(rel_buckets=6, rel_max_distance=5)
    causal = "causal" in name
    inputs = {"X": X} | ({"pad": [1] * HYPER["ell"]} if name.startswith("padded_") else {})
    got = evaluate(name, inputs, p, hyper=HYPER, variant=v)["V_tilde"]
    want = _by_hand(X, p, causal, CAUSAL_6_5 if causal else BIDIRECTIONAL_6_5)
    for row_g, row_w in zip(got, want):
        for a, b in zip(row_g, row_w):
            assert abs(float(a) - b) <= 1e-12 * (1 + abs(b)), (a, b)
    # and the bias changed the result: without it (the table dropped) the output is another
    plain = evaluate(name, inputs, {k: x for k, x in p.items() if k != "rel_bias"}, hyper=HYPER,
                     variant=v.replace(rel_bias="none"))["V_tilde"]
    assert max(abs(float(a) - float(b)) for ra, rb in zip(got, plain) for a, b in zip(ra, rb)) > 1e-3


@pytest.mark.parametrize("name", ENTRIES)
def test_the_table_comes_last_and_only_under_the_bias(name):
    e = REGISTRY[name]
    for base in (PAPER, PAPER.replace(kv_group=2), PAPER.replace(attn_bias_at="qkv")):
        before = list(e.param_schema({"H": 2}, base))
        after = e.param_schema({"H": 2}, base.replace(rel_bias="t5_buckets", rel_buckets=8, rel_max_distance=10))
        assert list(after) == before + ["rel_bias"] and after["rel_bias"] == (8, "H")
        assert "rel_bias" not in before


@pytest.mark.parametrize("name", ENTRIES)
def test_the_bucket_parameters_are_read_under_the_bias_alone(name):
    e = REGISTRY[name]
    assert REL_BIAS <= e.switches and REL_BIAS - {"rel_bias"} <= set(e.read_with)
    rng = random.Random(5)
    X = [[rng.uniform(-2, 2) for _ in range(HYPER["ell"])] for _ in range(HYPER["d_e"])]
    inputs = {"X": X} | ({"pad": [1] * HYPER["ell"]} if name.startswith("padded_") else {})
    p = {k: x for k, x in _params(rng, 6).items() if k != "rel_bias"}
    moved = PAPER.replace(attn_bias=False, rel_buckets=6, rel_max_distance=5)
    a = evaluate(name, inputs, p, hyper=HYPER, variant=PAPER.replace(attn_bias=False))["V_tilde"]
    b = evaluate(name, inputs, p, hyper=HYPER, variant=moved)["V_tilde"]
    assert same_bits(a, b)
    assert {"rel_buckets", "rel_max_distance"} <= e.unread(moved)
    assert not {"rel_buckets", "rel_max_distance"} & e.unread(moved.replace(rel_bias="t5_buckets"))


def test_no_earlier_set_moves_its_hash():
    """The switches are left out of the canonical JSON at their defaults (``LATER``)."""
    for v in (PAPER, *PRESETS.values()):
        assert "rel_" not in v.to_json()
        assert VariantSet.from_json(v.to_json()).hash == v.hash
    assert PAPER.hash != T5.hash


def test_only_the_self_attention_entries_list_the_bias():
    """... the layers and, since issue 38's whole T5, Algorithm 8's forward model (tests/spec/test_t5_model.py)."""
    listing = {name for name, e in REGISTRY.items() if e.switches & REL_BIAS}
    layers = {"encoder_layer", "bert_layer", "gpt2_layer", "decoder_layer"}
    models = {"ed_transformer", "padded_ed_transformer"}
    assert listing == set(ENTRIES) | layers | {"padded_" + n for n in layers} | models
    for name in ("attention", "mh_attention"):
        assert "rel_bias" not in REGISTRY[name].param_schema({"H": 2}, T5)


#: the layers and the prefix of the self-attention holding the table (the decoder layer's cross-attention: none)
LAYERS = {"encoder_layer": "attn.", "bert_layer": "attn.", "gpt2_layer": "attn.", "decoder_layer": "self_attn."}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_layer_holds_the_table_of_its_self_attention_last(name):
    for padded in ("", "padded_"):
        e = REGISTRY[padded + name]
        h = {"H": 3}
        before = list(e.param_schema(h, PAPER))
        after = e.param_schema(h, PAPER.replace(rel_bias="t5_buckets"))
        assert list(after) == before + [LAYERS[name] + "rel_bias"] and after[LAYERS[name] + "rel_bias"] == (32, "H")
        assert not any(k.startswith("cross_attn.") and k.endswith("rel_bias") for k in after)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_the_table_changes_a_layers_output(name):
    """The same parameters, the table's rows made different: a different output (the bias is read)."""
    from ftspec.conformance.core.values import default_hyper

    v = PAPER.replace(rel_bias="t5_buckets", rel_buckets=6, rel_max_distance=5)
    e = REGISTRY[name]
    hyper = default_hyper(e, v)
    inputs, params = random_inputs(e, hyper, seed=3), flat_params(e, hyper, v, seed=3)
    a = evaluate(name, inputs, params, hyper=hyper, variant=v)
    table = params[LAYERS[name] + "rel_bias"]
    params[LAYERS[name] + "rel_bias"] = [[x + 0.5 * b for x in row] for b, row in enumerate(table)]
    b = evaluate(name, inputs, params, hyper=hyper, variant=v)
    out = next(iter(a))
    assert max(abs(float(x) - float(y)) for ra, rb in zip(a[out], b[out]) for x, y in zip(ra, rb)) > 1e-6
