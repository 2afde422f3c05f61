"""VariantSet: canonical JSON, stable hash, validation, presets, parsing.

The canonical form (docs/spec.md, Variant catalogue): every switch, keys
sorted, JSON without spaces; the hash is the first 16 hex digits of the
sha256 of that text. Both are recomputed here from first principles.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec.variants import LATER, PAPER, PRESETS, SWITCHES, VariantSet, parse, preset

from .helpers import FAST

#: The paper's variant set in canonical JSON, written out from the catalogue
#: in docs/spec.md (paper values first in every table).
PAPER_JSON = (
    '{"activation":"paper","affine":"scale_shift","attn_bias":true,"attn_scale":"sqrt_d_attn",'
    '"causal_alignment":"top_left","embedding_norm":false,"embedding_scale":"one",'
    '"empty_query":"error","epsilon":0.0,"epsilon_placement":"none","final_norm":"paper",'
    '"logit_bias":false,"mlp_bias":true,"norm":"layer_norm","norm_placement":"paper",'
    '"positions":"learned","scale_placement":"scores","unembedding":"separate","variance":"biased"}'
)


@st.composite
def variant_sets(draw) -> VariantSet:
    values = {}
    for name, sw in SWITCHES.items():
        if name == "epsilon":
            continue
        values[name] = draw(st.sampled_from(sw.choices))
    if values["rel_bias"] == "t5_buckets" and values["rel_max_distance"] <= values["rel_buckets"] // 2:
        values["rel_max_distance"] = 128  # T5's max_distance above max_exact (spec 2.13: refused otherwise)
    if values["kv_heads"] == "one":  # one kv head for every H: kv_group and kv_order unread (refused when moved)
        values["kv_group"], values["kv_order"] = 1, "consecutive"
    if values["epsilon_placement"] == "none":
        values["epsilon"] = 0.0
    else:
        values["epsilon"] = draw(st.floats(min_value=1e-12, max_value=1.0, exclude_min=False))
    return VariantSet(**values)


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def test_paper_canonical_json_and_hash():
    assert PAPER.to_json() == PAPER_JSON
    assert PAPER.hash == sha16(PAPER_JSON)
    assert VariantSet() == PAPER == PRESETS["phuong-hutter"]
    # every switch of spec 2.0; the switches added later (LATER) are left out at their defaults
    assert set(json.loads(PAPER_JSON)) == set(SWITCHES) - set(LATER)
    assert {k: sw.paper for k, sw in SWITCHES.items() if k not in LATER} == json.loads(PAPER_JSON)
    assert LATER == {k: SWITCHES[k].paper for k in LATER}


def test_a_later_switch_away_from_its_default_is_in_the_json_and_the_hash():
    for name, default in LATER.items():
        other = next(c for c in SWITCHES[name].choices if c != default)
        v = PAPER.replace(**{name: other})
        assert json.loads(v.to_json())[name] == other
        assert v.hash != PAPER.hash and VariantSet.from_json(v.to_json()) == v


@FAST
@given(variant_sets())
def test_json_round_trip_and_hash(v):
    text = v.to_json()
    # canonical: every switch (a later one only away from its default), sorted keys, no spaces;
    # recomputed independently
    data = {name: getattr(v, name) for name in SWITCHES if name not in LATER or getattr(v, name) != LATER[name]}
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert list(json.loads(text)) == sorted(data)
    assert v.hash == sha16(text)
    assert len(v.hash) == 16 and all(c in "0123456789abcdef" for c in v.hash)
    back = VariantSet.from_json(text)
    assert back == v and back.hash == v.hash
    assert VariantSet.from_json(json.loads(text)) == v  # a mapping works too
    # the textual forms read back as the same set
    assert parse(text) == v
    assert parse(v.describe()) == v


@FAST
@given(variant_sets(), variant_sets())
def test_hash_distinguishes_sets(a, b):
    assert (a == b) == (a.hash == b.hash) == (a.to_json() == b.to_json())


def test_hash_is_stable_across_processes():
    """Independent of PYTHONHASHSEED and of the process: the same sha256."""
    code = ("from ftspec.spec.variants import PRESETS\n"
            "print(' '.join(f'{k}={v.hash}' for k, v in sorted(PRESETS.items())))")
    want = " ".join(f"{k}={sha16(v.to_json())}" for k, v in sorted(PRESETS.items()))
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert got.stdout.strip() == want


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip(name):
    v = PRESETS[name]
    assert preset(name) is v
    assert VariantSet.from_json(v.to_json()) == v
    assert parse(name) == v
    assert v.name == name and v.describe() == name
    assert parse(v.to_json()) == v


def test_presets_are_distinct():
    assert len({v.to_json() for v in PRESETS.values()}) == len(PRESETS)


def test_parse_preset_with_changes():
    v = parse("hf-gpt2+activation=relu")
    assert v == PRESETS["hf-gpt2"].replace(activation="relu")
    assert v.activation == "relu" and v.unembedding == "tied"
    assert v.name is None and v.describe().startswith("phuong-hutter+")
    w = parse("phuong-hutter+attn_bias=false,epsilon=1e-05,epsilon_placement=inside_root")
    assert w == PAPER.replace(attn_bias=False, epsilon=1e-5, epsilon_placement="inside_root")
    assert parse("  nanogpt  ") == PRESETS["nanogpt"]
    # switch=value,... alone changes the paper's set; an unknown value is still refused
    assert parse("mlp=one_layer,mlp_depth=2") == PAPER.replace(mlp="one_layer", mlp_depth=2)
    with pytest.raises(ValueError, match="variant switch 'mlp'"):
        parse("mlp=weird")


BAD_VALUES = [
    ("attn_scale", "sqrt_d"), ("attn_scale", None), ("scale_placement", "keys"),
    ("attn_bias", 1), ("attn_bias", "True"), ("attn_bias", None),
    ("empty_query", "ignore"), ("causal_alignment", "left"), ("norm", "batch_norm"),
    ("epsilon", -1e-5), ("epsilon", math.nan), ("epsilon", math.inf), ("epsilon", True), ("epsilon", "1e-5"),
    ("epsilon_placement", "inside"), ("variance", "sample"), ("affine", True), ("norm_placement", "peri"),
    ("final_norm", True), ("embedding_norm", 0), ("activation", "gelu"), ("mlp_bias", "no"),
    ("positions", "rotary"), ("embedding_scale", 2.0), ("unembedding", "shared"), ("logit_bias", 1.0),
]


@pytest.mark.parametrize("switch,value", BAD_VALUES, ids=[f"{s}={v!r}" for s, v in BAD_VALUES])
def test_invalid_values_are_rejected(switch, value):
    with pytest.raises(ValueError) as info:
        VariantSet(**{switch: value})
    assert switch in str(info.value)
    with pytest.raises(ValueError):
        VariantSet.from_json({**json.loads(PAPER_JSON), switch: value})


def test_epsilon_and_its_placement_go_together():
    with pytest.raises(ValueError):
        VariantSet(epsilon=1e-5)  # ε > 0 with placement "none"
    with pytest.raises(ValueError):
        VariantSet(epsilon_placement="inside_root")  # a placement with ε = 0
    v = VariantSet(epsilon=1, epsilon_placement="outside_root")
    assert v.epsilon == 1.0 and isinstance(v.epsilon, float)


def test_unknown_switches_and_presets_are_rejected():
    with pytest.raises(ValueError):
        VariantSet.from_json('{"attn_bias": false, "rope": true}')
    with pytest.raises(ValueError):
        preset("gpt-5")
    for text in ("gpt-5", "hf-gpt2+activation=gelu", "hf-gpt2+rope=true", "hf-gpt2+activation",
                 "hf-gpt2+epsilon=abc", '{"norm": "batch_norm"}'):
        with pytest.raises(ValueError):
            parse(text)


def test_variant_sets_are_immutable_values():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPER.attn_bias = False  # type: ignore[misc]
    assert PAPER.replace(attn_bias=False) != PAPER and PAPER.attn_bias is True
    assert hash(PAPER) == hash(VariantSet())


@pytest.mark.parametrize("arch", ["ed_encoder", "ed_decoder", "bert", "gpt2"])
def test_paper_resolves_per_architecture(arch):
    """The three "paper" switches resolve as ALGORITHMS.md states: post-LN
    except GPT-2; ReLU for Algorithm 8, exact GELU for 9 and 10; a final norm
    for GPT-2 only."""
    assert PAPER.resolved_norm_placement(arch) == ("pre" if arch == "gpt2" else "post")
    assert PAPER.resolved_activation(arch) == ("relu" if arch.startswith("ed_") else "gelu_erf")
    assert PAPER.resolved_final_norm(arch) == (arch == "gpt2")
    with pytest.raises(ValueError):
        PAPER.resolved_activation("t5")
