"""``ftspec identify --table`` on printed intermediates (issue 26).

A tutorial prints the steps inside a layer (Q, K, V, the scores, the attention weights, each
norm's μ and σ), not only its output. A table may name those steps as outputs, by the names of
the intermediates contract (docs/plugins.md "Named intermediates"): each is judged against the
spec's recorded value under the candidate, within its half-step, its Monte Carlo bound at the
table's dtype and (inputs printed) its enclosure over the inputs' intervals. A candidate that does
not compute a printed step is excluded.

Seed 004 (numeric tutorial) is the case in point: ``examples/tables/encoder_layer_tutorial_004_steps.json``
holds its printed Q, K, V, A(1)-A(3), μ, σ and L with the tutorial's own parameters (MATLAB's
default stream at full precision, tests/spec/test_seed_004.py) and decides, from those steps,
the scores' divisor √d_model, the unbiased σ and the post-LN placement.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.forensics.identify_table import (
    TableError,
    identify_table,
    parse_table,
    read_table,
    table_from_spec,
)
from ftspec.conformance.forensics.input_rounding import enclose
from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, PRESETS

from ...spec.test_seed_004 import STEPS, T, layer_flat, numbers, spec_E

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "tables" / "encoder_layer_tutorial_004_steps.json"
#: the printed steps the example holds (the layer's output A(9) too)
PRINTED = ("Q", "K", "V", "A(1)", "A(2)", "A(3)", "mu", "sigma", "A(7)", "L", "A(9)")


def _group(identity, name):
    return next(g for g in identity.groups if g.group == name)


def tutorial_steps_table() -> dict:
    """The example table: the printed steps in the spec's layout (transposed: the tutorial's rows are
    tokens), the layer's input Eᵀ and the parameters at full precision, taken as exact; outputs within
    0.0101 (a four-decimal display cut to two decimals loses less than 0.01 + 5e-5)."""
    outputs = {}
    for table in PRINTED:
        name, printed = STEPS[table]
        values = numbers(printed)
        outputs[name] = values[0] if len(values) == 1 else T(values)
    return {"format": "ftspec-table/1", "algorithm": "encoder_layer",
            "hyper": {"H": 1, "d_e": 6, "d_attn": 4, "d_mid": 4, "d_mlp": 6, "ell": 6},
            "inputs": {"Z": T([[float(x) for x in row] for row in spec_E()])},
            "params": layer_flat(PRESETS["tutorial-004"]), "outputs": outputs, "dtype": "float64", "tolerance": 0.0101,
            "source": "Seed 004's worked tutorial (numeric tutorial, Roysdon; "
                      "../shared/seeds/004_633e602a836c2656.txt, sections II.G-K): the steps it prints inside "
                      "the encoder, each transposed (its rows are tokens): Q, K, V, A(1) = Q K^T (scores), "
                      "A(2) = A(1)/sqrt(d) (S), A(3) = softmax (A), mu and sigma of each row of A(6), "
                      "A(7) (norm1), L = A(7) W_L + b_L (mlp.pre) and A(9) (the output Z). Input Z = E^T and "
                      "the parameters at full precision: MATLAB's default rand stream, which the tutorial "
                      "prints cut to two decimals (tests/spec/test_seed_004.py); its one-layer FFN "
                      "F = ReLU(A(7) W_L + b_L) is W_mlp1 = W_L^T, b_mlp1 = b_L (mlp='one_layer').",
            "note": "Printed values are MATLAB's four-decimal display cut to two decimals: tolerance 0.0101."}


def test_the_example_is_the_transcription():
    """The committed example is made from tests/spec/test_seed_004.py's transcription of the tables."""
    assert json.loads(EXAMPLE.read_text()) == json.loads(json.dumps(tutorial_steps_table()))


def test_the_tutorial_steps_decide_its_conventions():
    identity = identify_table(read_table(EXAMPLE))
    assert identity.fits, identity.notes
    decided = {g.group: g for g in identity.groups}
    # one head: Gemma 2's √(d_x/H) is √d_x here, the same computation, said as such (same_as)
    scale = decided["attn_scale"]
    assert scale.status == "decided" and scale.chosen == {"attn_scale": "sqrt_d_model"}, scale
    assert [c for c in scale.consistent if c not in scale.same_as] == [{"attn_scale": "sqrt_d_model"}]
    assert scale.same_as == [{"attn_scale": "sqrt_d_model_per_head"}], scale.same_as
    assert decided["variance"].consistent == [{"variance": "unbiased"}]
    assert {"variance": "biased"} in decided["variance"].excluded
    assert {"norm_placement": "pre"} in decided["norm_placement"].excluded
    assert {"norm": "rms_norm"} in decided["norm"].excluded  # it computes no μ, σ
    assert decided["mlp"].consistent == [{"mlp": "one_layer"}]  # from the parameters given
    want = PRESETS["tutorial-004"]
    assert identity.variant.attn_scale == want.attn_scale and identity.variant.variance == want.variance


def test_an_unknown_intermediate_is_refused_with_the_names_that_exist():
    doc = json.loads(EXAMPLE.read_text())
    doc["outputs"] = {"attn.heads.0.QQ": doc["outputs"]["attn.heads.0.Q"]}
    with pytest.raises(TableError, match=r"unknown outputs 'attn.heads.0.QQ'; .*intermediates such as"):
        parse_table(doc)
    doc["outputs"] = {"attn.heads.0.Q": [[1.0] * 6] * 4}  # Q is (d_attn, ell) = (4, 6): this is (4, 6) ...
    parse_table(doc)
    doc["outputs"] = {"attn.heads.0.Q": [[1.0] * 4] * 6}  # ... and this its transpose
    with pytest.raises(TableError, match=r"expected shape \[4, 6\]"):
        parse_table(doc)


def test_a_table_of_steps_alone_identifies():
    """A pre-LN GPT-2 layer's μ, σ and attention weights A printed to 4 decimals, not its output: the
    scores' divisor √d_attn is decided and the unbiased variance excluded."""
    v = PAPER.replace(norm_placement="pre")
    c = Case.build("gpt2_layer", None, v)
    doc = table_from_spec("gpt2_layer", c.inputs, c.params, c.hyper, v, decimals=4,
                          names=["norm1.mu", "norm1.sigma", "attn.heads.0.A"])
    identity = identify_table(parse_table(doc))
    assert identity.fits
    scale = _group(identity, "attn_scale")
    # d_e = H·d_attn: √(d_x/H) is √d_attn at these sizes, the same computation (same_as)
    assert scale.status == "decided" and scale.chosen == {"attn_scale": "sqrt_d_attn"}, scale
    assert [c for c in scale.consistent if c not in scale.same_as] == [{"attn_scale": "sqrt_d_attn"}]
    assert {"variance": "unbiased"} in _group(identity, "variance").excluded


def test_printed_inputs_bound_a_step_too():
    """With the inputs printed, a step is enclosed over the inputs' intervals like an output: the
    spec's value at every sampled point of the box lies inside."""
    c = Case.build("layer_norm", None, PAPER)
    X = np.round(c.inputs["X"], 2)
    enc = enclose(REGISTRY["layer_norm"], c.hyper, {"X": X}, {k: v for k, v in c.params.items()},
                  {"X": np.full(X.shape, 0.005)}, PAPER, ["mu", "sigma", "X_hat"])
    assert enc is not None
    rng = np.random.default_rng(0)
    for _ in range(20):
        point = X + rng.uniform(-0.005, 0.005, X.shape)
        got = intermediates("layer_norm", {"X": point.tolist()}, {k: v.tolist() for k, v in c.params.items()},
                            variant=PAPER)
        for name in ("mu", "sigma", "X_hat"):
            value = np.asarray(got[name])
            assert np.all(enc.lo[name] <= value) and np.all(value <= enc.hi[name]), name
