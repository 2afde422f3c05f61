"""``ftspec identify --table`` (conformance/forensics/identify_table.py): conventions from printed numbers.

Tables are made from the spec under a known variant set, printed to 2-4 places: the set that made
them must never be excluded, the switches the printed precision separates must be decided for it,
and the ones it cannot separate must be reported undecided. A table file is untrusted input: every
malformed or hostile one is a one-line ``TableError``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.forensics.identify import Identity
from ftspec.conformance.forensics.identify_table import (FORMAT, LIMITS, TableError, half_step, identify_table,
                                                         parse_table, read_table, table_from_spec)
from ftspec.spec.variants import PAPER, preset

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "tables"


def _table(algorithm: str, variant, *, seed: int = 0, style: str = "well-scaled", **printed) -> dict:
    c = Case.build(algorithm, variant=variant, seed=seed, style=style)
    return json.loads(json.dumps(table_from_spec(algorithm, c.inputs, c.params, c.hyper, variant, **printed)))


def _consistent(identity: Identity, switch: str) -> list[dict]:
    return next(g for g in identity.groups if g.group == switch).consistent


def _status(identity: Identity, switch: str) -> str:
    return next(g for g in identity.groups if g.group == switch).status


def _assert_truth_consistent(identity: Identity, truth) -> None:
    assert identity.fits
    for g in identity.groups:
        want = {k: getattr(truth, k) for k in g.chosen}
        assert want in g.consistent, f"the set that made the table was excluded: {g.line()} (made with {want})"


def test_gpt2_layer_under_hf_gpt2_to_three_decimals():
    """Three decimals decide GELU's tanh form and pre-LN, not ε (1e-5 against a variance near 1)."""
    truth = preset("hf-gpt2")
    identity = identify_table(parse_table(_table("gpt2_layer", truth, decimals=3)))
    _assert_truth_consistent(identity, truth)
    assert _consistent(identity, "activation") == [{"activation": "gelu_tanh"}]
    assert _status(identity, "norm_placement") == "decided"
    assert _status(identity, "epsilon") == "undecided"
    assert {"epsilon": 0.0, "epsilon_placement": "none"} in _consistent(identity, "epsilon")
    assert "hf-gpt2" in identity.presets and "epsilon" in identity.undecided


def test_two_decimals_cannot_tell_the_gelu_forms_apart():
    truth = preset("hf-gpt2")
    identity = identify_table(parse_table(_table("gpt2_layer", truth, decimals=2)))
    _assert_truth_consistent(identity, truth)
    activation = _consistent(identity, "activation")
    assert {"activation": "gelu_tanh"} in activation and {"activation": "gelu_erf"} in activation
    assert _status(identity, "activation") == "undecided"


@pytest.mark.parametrize("algorithm, name, style, printed", [
    ("layer_norm", "annotated-transformer", "near-constant", {"digits": 4}),
    ("layer_norm", "torch-encoder-layer", "near-constant", {"decimals": 3}),
    ("attention", "phuong-hutter", "well-scaled", {"digits": 2}),
    ("mh_attention", "phuong-hutter", "well-scaled", {"decimals": 4}),
    ("embedding", "thickstun-002", "well-scaled", {"digits": 3}),
    ("encoder_layer", "compact-000", "well-scaled", {"decimals": 3}),
])
def test_the_set_that_made_a_table_is_never_excluded(algorithm, name, style, printed):
    truth = preset(name)
    _assert_truth_consistent(identify_table(parse_table(_table(algorithm, truth, style=style, **printed))), truth)


def test_the_parameter_structure_is_read_from_the_names_given():
    """No b_q, ..., no γ, β (compact-000): attn_bias and affine are those of the names; a value that
    needs parameters the table lacks is untestable, not excluded."""
    identity = identify_table(parse_table(_table("encoder_layer", preset("compact-000"), decimals=3)))
    affine = next(g for g in identity.groups if g.group == "affine")
    assert affine.consistent == [{"affine": "none"}] and {"affine": "scale_shift"} in affine.untestable
    assert _consistent(identity, "attn_bias") == [{"attn_bias": False}]
    bert = identify_table(parse_table(_table("unembedding", preset("hf-bert"), digits=3)))
    assert _consistent(bert, "logit_bias") == [{"logit_bias": True}]  # without b_u the numbers do not fit


def test_printed_inputs_widen_the_bound():
    """Inputs printed to 3 decimals (the table says so) and outputs computed from the unrounded ones:
    the set that made them still fits."""
    truth = preset("torch-encoder-layer")
    doc = _table("layer_norm", truth, digits=4)
    doc["inputs"] = {k: np.round(np.asarray(v), 3).tolist() for k, v in doc["inputs"].items()}
    doc["params"] = {k: np.round(np.asarray(v), 3).tolist() for k, v in doc["params"].items()}
    doc["input_decimals"] = 3
    _assert_truth_consistent(identify_table(parse_table(doc)), truth)


def test_half_steps():
    assert half_step(np.array([1.23, -0.0456]), ("digits", 3)).tolist() == pytest.approx([0.005, 0.00005])
    assert half_step(np.array([1.23, 0.0]), ("decimals", 2)).tolist() == [0.005, 0.005]
    assert half_step(np.array([0.0, 12.5]), ("digits", 3)).tolist() == pytest.approx([0.05, 0.05])


def test_the_examples_are_what_their_source_says():
    """examples/tables: regenerated from the spec under the set their source names, and identified."""
    gpt2 = json.loads((EXAMPLES / "gpt2_layer_hf_gpt2.json").read_text())
    table = read_table(EXAMPLES / "gpt2_layer_hf_gpt2.json")
    again = table_from_spec("gpt2_layer", table.inputs, table.params, table.hyper, preset("hf-gpt2"), decimals=3)
    assert again["outputs"] == gpt2["outputs"]
    identity = identify_table(table)
    _assert_truth_consistent(identity, preset("hf-gpt2"))
    seed4 = PAPER.replace(variance="unbiased", epsilon=1e-4, epsilon_placement="outside_root")
    table = read_table(EXAMPLES / "layer_norm_tutorial_004_conventions.json")
    identity = identify_table(table)
    assert identity.variant == seed4 and all(g.status == "decided" for g in identity.groups)


def _hostile() -> list[tuple[str, object, str]]:
    good = _table("layer_norm", PAPER, digits=3)
    nested: object = 0.0
    for _ in range(100_000):
        nested = [nested]
    return [
        ("not an object", [1, 2], "must hold a JSON object"),
        ("wrong format", {**good, "format": "pickle"}, "not an ftspec table"),
        ("unknown field", {**good, "exec": "rm -rf /"}, "unknown fields"),
        ("unknown algorithm", {**good, "algorithm": "os.system"}, "unknown algorithm"),
        ("sampled entry", {**good, "algorithm": "sample"}, "sampled outputs"),
        ("no precision", {k: v for k, v in good.items() if k != "digits"}, "printed precision"),
        ("two precisions", {**good, "decimals": 3}, "give one of"),
        ("bad digits", {**good, "digits": 99}, "'digits' must be an integer"),
        ("boolean hyper", {**good, "hyper": {"d_e": True, "ell": 3}}, "hyperparameter d_e"),
        ("huge hyper", {**good, "hyper": {"d_e": 10**9, "ell": 3}}, "hyperparameter d_e"),
        ("missing hyper", {**good, "hyper": {"d_e": 5}}, "field 'hyper'"),
        ("bad shape", {**good, "inputs": {"X": [[1.0]]}}, "expected shape"),
        ("string number", {**good, "inputs": {"X": [["1"] * 3] * 5}}, "expected numbers"),
        ("stray param", {**good, "params": {**good["params"], "__import__": [1.0]}}, "match no variant set"),
        ("unknown output", {**good, "outputs": {"Y": [1.0]}}, "unknown outputs"),
        ("no outputs", {**good, "outputs": {}}, "non-empty"),
        ("bool input", {**good, "inputs": {"X": [[True] * 3] * 5}}, "expected numbers, found true/false"),
        ("deep nesting", {**good, "inputs": {"X": nested}}, ""),
    ]


@pytest.mark.parametrize("label, doc, words", _hostile(), ids=[h[0] for h in _hostile()])
def test_malformed_tables_are_one_line_errors(tmp_path, label, doc, words):
    path = tmp_path / "t.json"
    try:
        path.write_text(json.dumps(doc))
    except RecursionError:  # the encoder's own limit: write the nesting by hand
        deep = "[" * 100_000 + "]" * 100_000
        path.write_text('{"format": "%s", "algorithm": "layer_norm", "inputs": %s}' % (FORMAT, deep))
    with pytest.raises(TableError) as info:
        read_table(path)
    message = str(info.value)
    assert "\n" not in message and words in message and message.startswith(str(path))


def test_unreadable_and_oversized_files_and_nan(tmp_path):
    with pytest.raises(TableError, match="cannot read"):
        read_table(tmp_path / "absent.json")
    with pytest.raises(TableError, match="not a regular file"):
        read_table(tmp_path)
    big = tmp_path / "big.json"
    big.write_text(" " * (LIMITS["json_bytes"] + 1))
    with pytest.raises(TableError, match="bytes"):
        read_table(big)
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(_table("layer_norm", PAPER, digits=3)).replace("]]}", ", NaN]]}", 1))
    with pytest.raises(TableError, match="NaN"):
        read_table(nan)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TableError, match="UTF-8 JSON"):
        read_table(binary)
