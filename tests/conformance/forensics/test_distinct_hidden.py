"""A second bug hidden behind another failure of the same model (issue 25), each reported on its own.

Every mutant here has two independent value bugs in one model, each of which is a bug of the
first zoo (its own description says where it lives):

- ``pre-ln-residual-normalised``: the pre-LN residual adds norm(X) instead of X: the layer's
  residual path;
- ``unembedding-softmax-over-tokens``: Algorithm 7's softmax over positions: the unembedding;
- a missing 1/√d_attn (``scale-missing``): the attention;
- GELU's tanh approximation (``gelu-tanh``): the MLP's activation;
- ε = 1e-5 inside layer norm's root (``epsilon-added``): the norm;
- ε = 1e-5 in the model's own call of its final norm (the norm entry is right): code of the model
  that no entry of it runs (``model``);
- ReLU in the ETransformer's head whatever the activation (``bert-head-relu``): the head has no
  entry of its own, so it is the model's own code too (``model``).

Before the fix, the second bug of ``residual+scale`` (d_transformer) and ``residual+epsilon``
(gpt2_layer) was never reported at seed 0: its failures all first departed at "layer 0 /
residual" or "layer / norm" with no convention, so they had the first failure's signature, and
the first search's shrinking had spent the cell's examples. The expected places below are written
from the bugs' descriptions, not read from the code under test. A mutant with one bug must report
one value failure, over a few seeds (no bug twice).
"""

from __future__ import annotations

import os

from pathlib import Path
from typing import Any

import pytest

from ftspec.conformance.forensics.distinct_failures import (
    MAX_DISTINCT, describe, explanations, fresh_places, signature,
)
from ftspec.tools.zoo import build, mutant
from ftspec.tools.zoo.groups import ATTENTION_USERS, MODELS, A, no_scale
from ftspec.tools.zoo.injection import Edit, Mutant, combine, source_edit, swap_variant

from ..support import run

#: ε = 1e-5 inside the root, in the model's own final norm only (numpy architectures._final_norm)
_FINAL_EPSILON = (source_edit(Edit(A, "_final_norm", "return norm_fwd(X, params, gamma, beta, variant)",
                                   "return norm_fwd(X, params, gamma, beta, "
                                   "variant.replace(epsilon=1e-5, epsilon_placement='inside_root'))")), MODELS)
_SCALE = (swap_variant(no_scale), ATTENTION_USERS)


def _zoo(mutant_id: str) -> tuple[Any, tuple[str, ...]]:
    m = mutant(mutant_id)
    return m.wrap, m.breaks


def _bugs() -> dict[str, list[tuple[Any, tuple[str, ...]]]]:
    residual = _zoo("pre-ln-residual-normalised")
    return {
        "residual+softmax": [residual, _zoo("unembedding-softmax-over-tokens")],
        "residual+scale": [residual, _SCALE],
        "residual+gelu-tanh": [residual, _zoo("gelu-tanh")],
        "residual+epsilon": [residual, _zoo("epsilon-added")],
        "residual+final-epsilon": [residual, _FINAL_EPSILON],
        "scale+head-relu": [_SCALE, _zoo("bert-head-relu")],
    }


def _implementation(name: str, bugs: list[tuple[Any, tuple[str, ...]]]) -> tuple[str, Any]:
    breaks = tuple(dict.fromkeys(b for _, bs in bugs for b in bs))
    return f"mutant:{name}", build(Mutant(name, f"two bugs: {name}", breaks, combine(*bugs)))


#: a divergence record's place, by kind of code (written from divergence's documented labels)
_SUBLAYER_KIND = {"residual": "residual", "self-attention": "attention", "cross-attention": "attention",
                  "MLP": "MLP", "MLP activation": "MLP", "norm": "norm"}


def _first_place(diagnosis: Any) -> str:
    div = (diagnosis or {}).get("divergence") or {}
    if div.get("sublayer"):
        return _SUBLAYER_KIND.get(div["sublayer"], div["sublayer"])
    where = str(div.get("where", ""))
    return "unembedding" if where == "unembedding" else "norm" if where.endswith("norm") else "model"


def _reported_for(report: str) -> list[str]:
    """The places a failure's report says it is reported for (its "distinct failure:" line)."""
    for line in report.splitlines():
        if line.strip().startswith("distinct failure: reported for where its case departs at "):
            return line.split(" departs at ", 1)[1].split(" (", 1)[0].split(", ")
    return []


def _reported(cell: Any) -> list[str]:
    """The place each value failure of the cell is reported for: what its report says, else (no
    further failure was found) the first failure's first divergence."""
    out = []
    if cell.failure.check == "spec":
        out += _reported_for(cell.failure.report) or [_first_place(cell.failure.diagnosis)]
    for more in cell.more_failures:
        if more["check"] == "spec":
            assert _reported_for(more["report"]) == more["new_places"]
            out += more["new_places"]
    return out


def test_fresh_places_are_those_no_reported_failure_covers():
    assert fresh_places(("attention", "residual"), {"residual"}) == ("attention",)
    assert fresh_places(("residual",), {"residual"}) == ()
    assert fresh_places(("unembedding", "residual"), set()) == ("unembedding", "residual")  # the walk's order
    # an unlocated layer may be any sublayer: covered by one, covering all (the side of silence)
    assert fresh_places(("layer",), {"MLP"}) == ()
    assert fresh_places(("attention", "norm", "unembedding"), {"layer"}) == ("unembedding",)
    assert fresh_places(("model",), {"*"}) == ()  # a failure whose places are unknown covers every place


def test_a_value_signature_carries_its_places_an_exception_none():
    d = {"matches": [], "gave_up": True, "divergence": {"where": "layer 0", "sublayer": "residual"}}
    sig = signature("spec", "output 'P': ...", d, ["residual", "unembedding", "residual"])
    assert sig == ("spec", "", "?", "layer 0 / residual", ("residual", "unembedding"))
    assert "departs in residual, unembedding" in describe(sig)
    assert signature("exception", "raised ValueError: x", None, ["residual"])[4] == ()


def test_explanations_are_the_simplest_sets_that_fit_the_own_case():
    # seen on gelu-tanh + a missing scale (e_transformer): the head's GELU failure fits
    # activation=gelu_tanh, excluded only by another failing example that carries the scale bug
    head = {"matches": [], "confirmed": {"excluded": [
        {"changes": {"activation": "gelu_tanh"}, "by": "another failing example of the cell"},
        {"changes": {"activation": "relu", "attn_bias": False, "positions": "none"}, "by": "a fresh case"}]}}
    assert explanations(head) == {"activation=gelu_tanh"}
    mlp = {"matches": [{"changes": {"activation": "gelu_tanh"}},
                       {"changes": {"activation": "gelu_tanh", "attn_scale": "none"}}]}
    assert explanations(mlp) == {"activation=gelu_tanh"}  # one set explains both: one bug
    assert explanations({"matches": [{"changes": {"activation": "gelu_tanh"}}], "recurred": False}) == set()
    assert explanations({"matches": [], "gave_up": True}) == set()


# make test runs one of the two pairs; the other (residual+scale on d_transformer, 22
# CPU-seconds, from spec 2.14.0's tests pushing make test past its budget, 2026-12-07) and four more
# (the model head's scale+head-relu until spec 2.3.0, residual+softmax, residual+epsilon,
# residual+final-epsilon) passed on 2026-11-26 and run with FTSPEC_ALL_PAIRS=1 (docs/development.md,
# "Test tiers": spec 2.2.0's and 2.3.0's entries pushed make test past its budget)
_PAIRS = [
    ("residual+gelu-tanh", "gpt2_layer", {"residual", "MLP"}),  # one layer, two sublayers
]
if os.environ.get("FTSPEC_ALL_PAIRS"):
    _PAIRS += [
        ("residual+scale", "d_transformer", {"residual", "attention"}),  # one layer, two sublayers
        ("scale+head-relu", "e_transformer", {"attention", "model"}),  # the head has no entry: the model's own
        ("residual+softmax", "d_transformer", {"residual", "unembedding"}),
        ("residual+epsilon", "gpt2_layer", {"residual", "norm"}),  # one layer: its norm and its residual
        ("residual+final-epsilon", "d_transformer", {"residual", "model"}),  # layer 0 and the final norm
    ]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name, algorithm, places", _PAIRS)
def test_each_bug_of_two_is_its_own_failure(tmp_path, name, algorithm, places):
    result = run([_implementation(name, _bugs()[name])], [algorithm], ["float64"], tmp_path, examples=30,
                 distinct=MAX_DISTINCT)
    cell = next(c for c in result.cells if c.algorithm == algorithm)
    assert cell.status == "fail" and cell.failure is not None
    reported = _reported(cell)
    assert sorted(reported) == sorted(places), (reported, [m["found_as"] for m in cell.more_failures])
    files = [cell.failure.case_file] + [m["case_file"] for m in cell.more_failures]
    assert len(set(files)) == len(files) and all(Path(p).is_file() for p in files)
    for more in cell.more_failures:  # its own shrunk case departs where it is reported for
        assert set(more["new_places"]) <= set(more["places"]) and more["reproducer"] in more["report"]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("seed", [0])  # seeds 1 and 2 passed too (2026-11-26); one keeps make test in budget
@pytest.mark.parametrize("mutant_id, algorithms", [
    # with FTSPEC_ALL_PAIRS=1: its gpt2_layer cell (8 CPU-seconds) from spec 2.6.0, its d_transformer
    # cell (15) from spec 2.14.0; its residual bug is still searched beside a second bug by the
    # residual+gelu-tanh pair above, and scale-missing and the head's softmax show the property here
    *([("pre-ln-residual-normalised", ["d_transformer", "gpt2_layer"])] if os.environ.get("FTSPEC_ALL_PAIRS") else []),
    ("scale-missing", ["d_transformer"]),
    ("unembedding-softmax-over-tokens", ["d_transformer"]),
    # gelu-tanh on e_transformer (22 CPU-seconds) with FTSPEC_ALL_PAIRS=1 (from spec 2.3.0)
    *([("gelu-tanh", ["e_transformer"])] if os.environ.get("FTSPEC_ALL_PAIRS") else []),
])
def test_one_bug_is_never_two_failures(tmp_path, mutant_id, algorithms, seed):
    m = mutant(mutant_id)
    result = run([(f"mutant:{m.id}", build(m))], algorithms, ["float64"], tmp_path, examples=30, seed=seed,
                 distinct=MAX_DISTINCT)
    for cell in result.cells:
        assert cell.status == "fail" and cell.failure is not None
        checks = [cell.failure.check] + [f["check"] for f in cell.more_failures]
        assert checks.count("spec") <= 1, (cell.algorithm, [f["found_as"] for f in cell.more_failures])
