"""First divergence judged by derived bounds (conformance/forensics/divergence/).

The walk asks two kinds of question besides "does this call agree": did an output *move* between
two calls (another parameter, another input), and does an implementation's own named intermediate
depart from the spec's. Both are answered with the Monte Carlo bounds the harness gives outputs
(docs/tolerances.md), never with a table of hand-picked tolerances: two calls' outputs differ beyond
rounding where they differ by more than the sum of their bounds; a named intermediate departs where
it lies outside the bound ``ftspec spec intermediates`` shows for it. The expected answers here are
written from those definitions, the bounds taken from ``core/intermediates.py`` (the command's
own code path), and the departures planted far inside the old table's tolerance (1e-9 of the
largest magnitude at float64), where only a derived bound sees them.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import numpy as np
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member
from ftspec.conformance.core.intermediates import intermediate_references
from ftspec.conformance.forensics import divergence
from ftspec.conformance.forensics.divergence.checking import _apart
from ftspec.impls.discovery import load
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER

PACKAGE = Path(divergence.__file__).parent


# -- two calls: moved beyond the sum of their bounds --------------------------------------------------

def test_two_outputs_differ_only_beyond_the_sum_of_their_bounds():
    a = np.array([[1.0, -2.0, 3.0]])
    ba, bb = np.array([[0.125, 0.25, 0.0]]), np.array([[0.375, 0.0, 0.0]])  # dyadic: the sums are exact
    just_within = a + np.array([[0.5, -0.25, 0.0]])  # each element exactly at the sum of its two bounds
    assert not _apart({"Y": a}, {"Y": just_within}, {"Y": ba}, {"Y": bb})
    # any one element past its own sum (the third's is 0: any difference there)
    for k, over in ((0, 0.5 + 2.0 ** -20), (1, -0.25 - 2.0 ** -20), (2, 2.0 ** -40)):
        moved = just_within.copy()
        moved[0, k] = a[0, k] + over
        assert _apart({"Y": a}, {"Y": moved}, {"Y": ba}, {"Y": bb}), k
    # a large bound elsewhere excuses nothing here; the bound is per element
    assert _apart({"Y": a}, {"Y": a + [[0.0, 0.0, 0.5]]}, {"Y": ba * 100}, {"Y": bb * 100})


def test_two_outputs_differ_in_shape_or_nan_pattern_whatever_the_bounds():
    a, big = np.array([1.0, 2.0]), {"Y": np.full(2, np.inf)}
    assert _apart({"Y": a}, {"Y": np.array([1.0, np.nan])}, big, big)
    assert _apart({"Y": a}, {"Y": np.array([1.0, 2.0, 3.0])}, big, big)
    inf = np.array([np.inf, 2.0])
    assert not _apart({"Y": inf}, {"Y": inf.copy()}, {"Y": np.zeros(2)}, {"Y": np.zeros(2)})
    # an output only one side holds is not compared
    assert not _apart({"Y": a, "extra": a}, {"Y": a.copy()}, {"Y": np.zeros(2)}, {"Y": np.zeros(2)})


# -- the implementation's own named intermediates ------------------------------------------------------

def _case() -> Case:
    return Case.build("d_transformer", None, PAPER)


def _bounds(c: Case, dtype: str = "float64") -> dict:
    e = REGISTRY["d_transformer"]
    h = {k: c.hyper[k] for k in e.hyper}
    return intermediate_references(e, c.inputs, c.params, hyper=h, variant=PAPER, dtype=dtype)


def _offering(values: dict[str, np.ndarray]):
    """The NumPy plugin offering ``values`` as its DTransformer's named intermediates."""
    return dataclasses.replace(load("numpy"), intermediates={"d_transformer": lambda i, p, ctx: dict(values)})


def _first_departing(values: dict[str, np.ndarray], c: Case) -> str:
    impl = _offering(values)
    d = divergence.locate(Member("numpy", impl, "cpu"), "d_transformer", c.inputs, c.params, c.hyper, PAPER,
                          "float64")
    return d.intermediate


def test_a_named_intermediate_departs_beyond_its_derived_bound_and_only_there():
    """At float64 a value 4 bounds off departs, though it is within 1e-9 of the largest magnitude (the
    old table's tolerance); half a bound off at every element does not."""
    c = _case()
    refs = _bounds(c)
    spec = {k: it.value for k, it in refs.items() if k != "P"}
    name = "layers.0.mlp.hidden"
    it = refs[name]
    k = tuple(np.unravel_index(int(np.argmax(it.bound)), it.bound.shape))
    assert 0 < it.bound[k] < 1e-12 * float(np.max(np.abs(it.value))), "the planted step must be below 1e-9"
    far = {**spec, name: it.value.copy()}
    far[name][k] += 4 * it.bound[k]
    assert _first_departing(far, c) == name
    near = {n: np.where(np.isfinite(v), v + 0.5 * refs[n].bound, v) for n, v in spec.items()}
    assert _first_departing(near, c) == ""


def test_a_masked_score_departs_when_its_weight_survives_rounding():
    """A masked score given as a finite number is no departure only if its key's weight, at most
    e^(score − the lowest finite score), is below the dtype's unit roundoff (float64: 2^-53, so
    ln 2^53 ≈ 36.7 below); 33 below gives a weight near 5e-15, 40 below one near 4e-18."""
    c = _case()
    refs = _bounds(c)
    spec = {k: it.value for k, it in refs.items() if k != "P"}
    name = next(n for n, v in spec.items() if n.endswith(".S") and np.isneginf(v).any())
    low = float(np.min(spec[name][np.isfinite(spec[name])]))
    assert math.exp(-33) > 2.0 ** -53 > math.exp(-40)
    for below, departs in ((33.0, True), (40.0, False)):
        values = {**spec, name: np.where(np.isneginf(spec[name]), low - below, spec[name])}
        assert (_first_departing(values, c) == name) is departs, below


# -- the package: one idea a module, no hand-picked tolerance ------------------------------------------

def _modules() -> list[Path]:
    return sorted(PACKAGE.glob("*.py"))


def test_no_module_is_over_600_lines_and_no_class_over_200():
    for path in _modules():
        text = path.read_text()
        assert text.count("\n") <= 600, path.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno - node.lineno + 1 <= 200, (path.name, node.name)


def test_no_tolerance_is_picked_by_hand():
    """No ``rtol``/``atol`` argument and no table named for one: every comparison is a derived bound."""
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword):
                assert node.arg not in ("rtol", "atol"), (path.name, node.lineno)
            if isinstance(node, ast.Name):
                assert "RTOL" not in node.id and "ATOL" not in node.id, (path.name, node.lineno)


def test_the_package_exports_exactly_its_public_api():
    """What importers use (diagnosis, distinct_failures, the bench, the tests) from the package itself;
    nothing else public there but its modules."""
    public = {n for n in vars(divergence) if not n.startswith("_") and n != "annotations"}
    assert public - {p.stem for p in _modules()} == set(divergence.__all__)
    assert {"MODEL_OF", "SECONDS", "Divergence", "component_departures", "expected_matches", "locate",
            "locate_failure", "model_inputs", "model_walk"} <= set(divergence.__all__)
