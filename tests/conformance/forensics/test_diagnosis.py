"""Failure diagnosis (conformance/forensics/diagnosis/): a failure names the convention the output follows.

Mutants of the bug zoo whose bug is a catalogue convention are searched in process (one dtype,
a few examples) and the failure's diagnosis must name that convention; a correct implementation
never gets one; the search is bounded and says when it gives up; numbers print plainly and the
reproducer is never broken across lines.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.forensics.diagnosis import diagnose, structure
from ftspec.conformance.session.report import cell_dict
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo import build, mutant
from ftspec.tools.zoo.witness import witness_case

from ..support import run


def run_mutant(mutant_id, algorithms, dtypes, tmp_path, *, examples, refusals=True):
    """support.run_mutant with the distinct-failure search off: these tests read the first failure
    (tests/conformance/forensics/test_distinct.py tests the rest); ``refusals``: Runner.refusals."""
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner

    m = mutant(mutant_id)
    runner = Runner([(f"mutant:{m.id}", build(m))], RunConfig(seed=0, case_dir=tmp_path / "cases", examples=examples))
    runner.distinct_failures = 0
    runner.refusals = refusals
    return runner.run(algorithms, dtypes)

# (mutant, algorithm searched, the change the diagnosis must name: {switch or "input Mask": value})
CONVENTION_BUGS = [
    ("epsilon-added", "layer_norm", {"epsilon": 1e-5, "epsilon_placement": "inside_root"}),
    ("epsilon-1e-12", "layer_norm", {"epsilon": 1e-12, "epsilon_placement": "inside_root"}),
    ("epsilon-outside-root", "layer_norm", {"epsilon_placement": "outside_root"}),
    ("epsilon-fixed-1e-6", "layer_norm", {"epsilon": 1e-6}),
    ("variance-unbiased", "layer_norm", {"variance": "unbiased"}),
    # differs from two-pass only in rounding (its bound covers the departure): named because it
    # reproduces the output, not because its bound separates it
    ("layer-norm-naive-variance", "layer_norm", {"variance": "one_pass"}),
    ("gelu-tanh", "bert_layer", {"activation": "gelu_tanh"}),
    ("scale-missing", "attention", {"attn_scale": "none"}),
    ("scale-sqrt-d-model", "mh_attention", {"attn_scale": "sqrt_d_model"}),
    ("causal-alignment-ignored", "unidirectional_mask", {"causal_alignment": "top_left"}),
    ("embedding-scale-ignored", "embedding", {"embedding_scale": "one"}),
    ("final-norm-missing", "d_transformer", {"final_norm": "none"}),
    ("logit-bias-ignored", "unembedding", {"logit_bias": False}),
    ("mask-polarity-inverted", "attention", {"input Mask": "inverted (True = blocked)"}),
    ("mask-transposed", "attention", {"input Mask": "transposed ([query, key])"}),
]


#: searches longer than 30 examples, and why. ε fixed at 1e-6 on layer_norm at float64 is found late at
#: seed 0: at example 23 (of 30 before issue 36, of 50 after it: the redrawn bounds change what
#: Hypothesis's targeting climbs, and 30 ended first; seeds 1-9 find it at 3-8 with either model, and
#: seed 3 with neither in 30). This test is about the diagnosis of a failure, so it gives the search
#: the minimum a default cell runs (50); the zoo's power figures are the bench's (docs/benchmarks.md).
EXAMPLES = {"epsilon-fixed-1e-6": 50}


def _names(match: dict, want: dict) -> bool:
    return all(k in match["changes"] and match["changes"][k] == v for k, v in want.items())


# the pytest configuration makes warnings errors; a run of ``ftspec`` does not: NumPy's "invalid value"
# warning of an all-masked softmax (the inverted mask's) would turn the value failure into an exception
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("mutant_id,algorithm,want", CONVENTION_BUGS, ids=[m for m, _, _ in CONVENTION_BUGS])
def test_failure_names_the_convention(tmp_path, mutant_id, algorithm, want):
    # without the refusal check: a mutant that also answers a case the spec refuses (mask-transposed
    # looks for an empty query along the wrong axis) fails that check first, rightly, with no value
    # failure to diagnose; this test is about the value failure its convention causes
    result = run_mutant(mutant_id, [algorithm], ["float64"], tmp_path, examples=EXAMPLES.get(mutant_id, 30),
                        refusals=False)
    cell = next(c for c in result.cells if c.algorithm == algorithm)
    assert cell.status == "fail" and cell.failure is not None, f"{mutant_id} survived {algorithm} at float64"
    diagnosis = cell.failure.diagnosis
    assert diagnosis is not None, f"{mutant_id}: the {cell.failure.check} failure got no diagnosis"
    assert any(_names(m, want) for m in diagnosis["matches"]), (
        f"{mutant_id} on {algorithm}: no match names {want}; matches {diagnosis['matches']}, "
        f"near misses {diagnosis['near_misses']}")
    assert "likely cause: matches " in cell.failure.report
    assert not diagnosis["gave_up"]
    # plain data: the JSON report holds it as it is
    assert json.loads(json.dumps(cell_dict(cell)))["failure"]["diagnosis"] == diagnosis
    assert "np.float64(" not in cell.failure.message and "np.True_" not in cell.failure.message


def test_empty_query_convention_is_named():
    """A NaN column for a query with no key, where empty_query='zeros' asks for zeros (the witness)."""
    m = mutant("empty-query-nan")
    case = witness_case(m)
    entry = case.entry
    prepared = rounded(case, "float64")
    out = call(build(m), entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=case.variant,
               dtype="float64", device="cpu")
    d = diagnose(entry, case, out, "float64")
    assert any(_names(x, {"empty_query": "nan"}) for x in d.matches), d.matches
    assert any("empty (no key to attend to)" in s for s in d.structure), d.structure


def test_correct_implementation_gets_no_diagnosis(tmp_path):
    result = run([("numpy", load("numpy"))], ["layer_norm", "attention"], ["float64"], tmp_path, examples=20)
    assert result.cells and all(c.status == "pass" and c.failure is None for c in result.cells), \
        [(c.algorithm, c.status) for c in result.cells]


def test_value_free_failures_are_not_diagnosed(tmp_path):
    result = run_mutant("raises", ["unembedding"], ["float64"], tmp_path, examples=5)
    cell = next(c for c in result.cells if c.algorithm == "unembedding")
    assert cell.status == "fail" and cell.failure.check == "exception"
    assert cell.failure.diagnosis is None and "likely cause" not in cell.failure.report


def test_no_fit_is_said_and_the_budget_gives_up():
    """An output no variant set explains (every value doubled): no match, said; a budget of two
    evaluations stops the search and the text says it gave up."""
    case = Case.build("layer_norm", {"d_e": 3, "ell": 2})
    entry = case.entry
    prepared = rounded(case, "float64")
    out = call(load("numpy"), entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=PAPER,
               dtype="float64", device="cpu")
    doubled = {k: 2.0 * v for k, v in out.items()}
    d = diagnose(entry, case, doubled, "float64")
    assert d.matches == [] and not d.gave_up
    assert "no neighbouring variant set fits" in d.lines()[0]
    short = diagnose(entry, case, doubled, "float64", evaluations=2)
    assert short.gave_up and short.evaluated == 2
    assert any("gave up" in line for line in short.lines())


def test_structure_in_words():
    mask = np.array([[True, False, True], [True, False, False]])  # [t_z, t_x]: query 1 has no key
    x = np.array([[1.0, 2.0, 3.0], [1.0, 5.0, 3.0 + 1e-9]])  # column 0 constant, column 2 nearly so
    case = Case("attention", {"d_x": 2, "d_z": 1, "d_attn": 1, "d_out": 1, "ell_x": 3, "ell_z": 2}, PAPER,
                {"X": x, "Z": np.ones((1, 2)), "Mask": mask}, {"W_q": np.zeros((1, 2))})
    words = structure(case.entry, case)
    text = "; ".join(words)
    assert "Mask query column 1 is empty" in text, text
    assert "X column 0 constant" in text and "X column 2 nearly constant" in text, text
    assert "parameter W_q is all zeros" in text, text
    assert "d_z = d_attn = d_out = 1" in text, text


def test_reproducer_is_one_line_at_80_columns(tmp_path, monkeypatch):
    from ftspec.tools import console as tc

    result = run_mutant("epsilon-added", ["layer_norm"], ["float64"], tmp_path, examples=10)
    buffer = io.StringIO()
    monkeypatch.setattr(tc, "console", Console(file=buffer, width=80, color_system=None))
    tc.print_failures(result)
    command = next(c for c in result.cells if c.failure).failure.reproducer
    assert len(command) > 80
    assert command in buffer.getvalue().splitlines()[-1], buffer.getvalue()


def test_output_that_agrees_with_the_declared_set_is_not_explained_away():
    """A repeat call that passes (a nondeterministic failure): no convention is named for it."""
    case = Case.build("layer_norm", {"d_e": 3, "ell": 2})
    entry = case.entry
    prepared = rounded(case, "float64")
    out = call(load("numpy"), entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=PAPER,
               dtype="float64", device="cpu")
    d = diagnose(entry, case, out, "float64")
    assert not d.recurred and d.matches == [] and d.evaluated == 1
    assert "did not recur" in d.lines()[0]


def test_the_bench_section_counts_hits_from_a_real_run(tmp_path):
    """``ftspec bench diagnosis`` (tools/bench/diagnosis.py) on one cheap convention mutant: the hit
    is counted from the failure's own diagnosis, and the Markdown says it."""
    from ftspec.tools.bench.diagnosis import _task, markdown, summarise

    rec = _task(("convention", "variance-unbiased", 6, 0))
    assert "error" not in rec and rec["cells"], rec
    fails = [c for c in rec["cells"] if c["status"] == "fail"]
    assert fails and all(c["named"] for c in fails), rec["cells"]
    s = summarise([rec])
    assert s["convention_named"] == s["convention_failing"] == len(fails)
    out: list[str] = []
    markdown(out, {"records": [rec], "summary": s, "examples": 6, "seed": 0, "seconds": rec["seconds"]})
    text = "\n".join(out)
    assert f"in {len(fails)} of {len(fails)} (100%) failing cells" in text
    assert "| variance-unbiased | layer_norm | float64 | fail | yes | variance=unbiased |" in text
