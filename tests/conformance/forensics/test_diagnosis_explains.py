"""A named convention must explain the numbers (issue 25): each mechanism that once named a wrong
convention, on the case that showed it.

1. a set that drops the failing output (``attn_bias=False`` has no ``b_k``: a gradient bug seen
   only in ``grad b_k`` is no longer compared) is no match;
2. a set whose own bound is vacuous on the case (one-pass variance on a nearly constant column at
   float32) is no match;
3. a degenerate shrunk case (H = 1, a mask all True: a dropped head gives exactly what an inverted
   mask with zeros for empty queries gives) is confirmed on fresh cases, where the set fails;
4. an output computed at a lower precision is named as such, and a wrong one is not;
5. the cell's worst failing example is shown beside the shrunk one, with its own case file;
6. a refusal failure is diagnosed on the refused case, and sets no case separates are reported
   as ambiguous, not guessed.

The bugs are written here from their descriptions; the old diagnosis named a convention on each of
the first three cases (the module's docstring says why each is no match).
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.casefile import read_case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.forensics.diagnosis import diagnose
from ftspec.impls.discovery import load

NUMPY = load("numpy")


def _outputs(case: Case, dtype: str, params=None) -> dict:
    e = case.entry
    p = rounded(case, dtype)
    return call(NUMPY, e, p.inputs, p.params if params is None else params, hyper=case.hyper, variant=case.variant,
                dtype=dtype, device="cpu")


def _names(d, switch: str, value) -> bool:
    return any(m["changes"].get(switch) == value for m in d.matches)


def test_a_set_that_drops_the_failing_output_is_no_match():
    """Softmax ignores b_k (it adds one constant to a query's scores), so grad b_k is zero; an
    implementation returns 0.1 there. Without b_k nothing is left to fail: no explanation."""
    hyper = {"N_V": 3, "ell_max": 2, "L": 1, "H": 1, "d_e": 2, "d_attn": 1, "d_mid": 1, "d_mlp": 2, "ell": 2}
    case = Case.build("d_gradient", hyper, seed=1)
    out = _outputs(case, "float64")
    (b_k,) = [k for k in out if k.endswith("b_k")]
    wrong = {**out, b_k: out[b_k] + 0.1}
    d = diagnose(case.entry, case, wrong, "float64", evaluations=60)
    assert d.recurred and not _names(d, "attn_bias", False), d.summary()


def test_a_set_with_a_vacuous_bound_is_no_match():
    """At float32, one-pass variance on a column 1000 + 0.01·[0, 1, −1, 2] cancels away every digit
    (E[x²] − μ² ≈ 1e6 − 1e6): its bound is larger than the outputs, so it 'fits' any value there."""
    case = Case.build("layer_norm", {"d_e": 4, "ell": 2}, seed=1)
    case.inputs["X"] = case.inputs["X"].copy()
    case.inputs["X"][:, 0] = 1000.0 + np.array([0.0, 0.01, -0.01, 0.02])
    out = _outputs(case, "float32")
    (name,) = out
    wrong = {name: out[name].copy()}
    wrong[name][1, 0] = -0.5 * wrong[name][1, 0] - 1.0  # a value no convention gives
    d = diagnose(case.entry, case, wrong, "float32")
    assert d.recurred and d.matches == [], d.summary()
    assert "vacuous" in d.summary()  # the near miss says why it is none


def _head_dropped(case: Case, dtype: str = "float64") -> dict:
    """mh_attention whose last head contributes nothing (its W_v and b_v read as zeros)."""
    p = rounded(case, dtype)
    last = f"heads.{case.hyper['H'] - 1}."
    params = {k: (np.zeros_like(v) if k.startswith(last) and k.split(".")[-1] in ("W_v", "b_v") else v)
              for k, v in p.params.items()}
    return _outputs(case, dtype, params)


def test_a_degenerate_shrunk_case_is_confirmed_on_fresh_cases():
    hyper = {"H": 1, "d_x": 2, "d_z": 2, "d_attn": 1, "d_mid": 1, "d_out": 2, "ell_x": 2, "ell_z": 2}
    case = Case.build("mh_attention", hyper, seed=0)
    case.inputs["Mask"] = np.ones_like(case.inputs["Mask"])
    wrong = _head_dropped(case)
    alone = diagnose(case.entry, case, wrong, "float64")  # on the shrunk case alone the mask reading fits
    assert any("input Mask" in m["changes"] for m in alone.matches)
    d = diagnose(case.entry, case, wrong, "float64", call=_head_dropped)
    assert d.recurred and d.matches == [], d.summary()
    assert d.confirmed["fresh"] >= 1 and d.confirmed["excluded"]
    assert "fresh case" in d.summary()


@pytest.mark.parametrize("name", ["sinusoidal_vaswani", "layer_norm", "attention"])
def test_an_output_computed_at_a_lower_precision_is_named(name):
    """The NumPy plugin at float32, its outputs returned as float64 (one float32 rounding off)."""
    case = Case.build(name, seed=1)
    low = {k: np.asarray(v, dtype=np.float64) for k, v in _outputs(case, "float32").items()}
    d = diagnose(case.entry, case, low, "float64")
    assert d.matches == [] and d.lower_precision == "float32", d.summary()
    assert d.summary().startswith("computes in float32 inside") and d.lower_values, d.summary()
    assert "its outputs are float32 values" in d.summary()
    doubled = {k: 2.0 * v for k, v in low.items()}  # wrong at any precision
    assert diagnose(case.entry, case, doubled, "float64").lower_precision is None


def test_the_worst_example_is_shown_beside_the_shrunk_one(tmp_path):
    """A missing score scale fails by 1e11 tolerances on the shrunk case and by far more on larger
    ones: the report names the cell's worst example, with a case file that replays."""
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.tools.zoo import build, mutant

    m = mutant("scale-missing")
    runner = Runner([(f"mutant:{m.id}", build(m))], RunConfig(seed=0, case_dir=tmp_path, examples=30))
    runner.distinct_failures = 0
    (cell,) = [c for c in runner.run(["attention"], ["float64"]).cells if c.algorithm == "attention"]
    assert cell.failure is not None and cell.failure.check == "spec"
    report = cell.failure.report
    assert "worst example of this cell: error/bound" in report, report
    worst = [p for p in tmp_path.glob("*-worst.json")]
    assert len(worst) == 1 and str(worst[0]) in report
    case, _ = read_case(worst[0])
    assert case.size() > cell.failure.case.size()  # a larger case than the shrunk one
    assert report.rstrip().splitlines()[-1].lstrip().startswith("ftspec replay")  # the reproducer stays last


def test_a_refusal_failure_is_diagnosed_on_the_refused_case():
    """PyTorch's ε = 1e-5 inside the root answers a zero-variance column, which the paper's norm
    refuses: the refusal check fails on the case transformed that way, and the diagnosis, made on
    that case (no declared value to depart from), names the ε that makes the answer; sets that fit
    it by accident (a constant column is one every norm maps to β) are excluded by fresh cases."""
    from ftspec.conformance.core.execute import Member
    from ftspec.conformance.core.refusals import refused_case
    from ftspec.conformance.forensics.diagnosis import diagnose_failure
    from ftspec.tools.zoo import build, mutant

    member = Member("mutant:epsilon-added", build(mutant("epsilon-added")), "cpu")
    case = Case.build("layer_norm", {"d_e": 3, "ell": 2}, seed=4)
    refused = refused_case(case, "a zero-variance column into a norm without ε")
    assert refused is not None and refused.hyper == case.hyper
    assert refused_case(case, "no such refusal") is None
    d = diagnose_failure(member, refused, "refusal", "float64", timeout=60.0)
    assert d is not None and d.matches, d and d.summary()
    first = d.matches[0]["changes"]
    assert first.get("epsilon") == 1e-5 and first.get("epsilon_placement") == "inside_root", d.summary()
    assert d.confirmed["fresh"] >= 1


def test_a_set_whose_values_are_the_declared_ones_explains_nothing():
    """ε = 1e-12 outside the root is the paper's norm to 12 digits: on an output 1e-6 off at float64
    (a departure no convention makes) it fits only by a bound slightly wider than the declared
    set's, and it is not closer to the output than the declared set is."""
    case = Case.build("layer_norm", {"d_e": 4, "ell": 2}, seed=3)
    out = _outputs(case, "float64")
    (name,) = out
    wrong = {name: out[name] + 1e-6}
    d = diagnose(case.entry, case, wrong, "float64")
    assert d.recurred and d.matches == [], d.summary()


def test_sets_no_case_can_separate_are_reported_as_ambiguous():
    """ε = 1e-12 inside the root answers a zero-variance column with β whatever ε is; at float32 no
    fresh case separates 1e-12 from the machine epsilons either (each moves a well-scaled output by
    far less than float32's rounding). Naming one ε would be a guess: the diagnosis is ambiguous,
    and the true ε is among its survivors."""
    from ftspec.conformance.core.execute import Member
    from ftspec.conformance.core.refusals import refused_case
    from ftspec.conformance.forensics.diagnosis import diagnose_failure
    from ftspec.tools.zoo import build, mutant

    member = Member("mutant:epsilon-1e-12", build(mutant("epsilon-1e-12")), "cpu")
    refused = refused_case(Case.build("layer_norm", {"d_e": 3, "ell": 1}, seed=2),
                           "a zero-variance column into a norm without ε")
    d = diagnose_failure(member, refused, "refusal", "float32", timeout=60.0)
    assert d is not None and d.ambiguous, d and d.summary()
    assert any(m["changes"].get("epsilon") == 1e-12 for m in d.matches), d.summary()
    assert d.summary().startswith("ambiguous between")
    assert not any(m["changes"].get("epsilon") == 1e-3 for m in d.matches)  # a fresh case excludes 1e-3

