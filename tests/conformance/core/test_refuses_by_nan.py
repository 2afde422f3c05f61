"""Refusals a kernel can give (issue 39): ``Implementation.refuses_by``.

A GPU or jit-compiled kernel cannot raise on a value without a host check; IEEE arithmetic gives it
NaN. A plugin may declare ``refuses_by="nan"``: it then passes the refusal check when every output
element the refused input reaches is NaN, and fails it on a finite number there. Under the default
("raise") a NaN answer fails, in one line that names the declaration. Every plugin written from
scratch for issue 35's trials first failed only this check: the paper's layer norm without ε
returned NaN for a constant column.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.execute import Member
from ftspec.conformance.core.refusals import REFUSED, RETURNED, check_refusals, expect_refusal
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.conformance.session.certificate import content_hash, render_markdown, verify
from ftspec.conformance.session.commands import Settings, certify
from ftspec.impls.api import Implementation
from ftspec.impls.numpy import implementation as numpy_impl
from ftspec.spec import SpecError, evaluate
from ftspec.spec.variants import PAPER

ZERO_VARIANCE = "a zero-variance column into a norm without ε"


def newcomers_layer_norm(inputs, params, ctx):
    """The paper's Algorithm 6 as a newcomer writes it in NumPy: no ε and no check, so a constant
    column is 0/0 = NaN (IEEE), every other column its value."""
    X = inputs["X"]
    m = X.mean(axis=-2, keepdims=True)
    v = ((X - m) ** 2).mean(axis=-2, keepdims=True)
    return (X - m) / np.sqrt(v) * params["gamma"][:, None] + params["beta"][:, None]


def finite_layer_norm(inputs, params, ctx):
    """NaN made 0: a finite number where the spec refuses."""
    return np.nan_to_num(newcomers_layer_norm(inputs, params, ctx))


def misplaced_layer_norm(inputs, params, ctx):
    """NaN in every column but the constant one, where it answers 0."""
    out = newcomers_layer_norm(inputs, params, ctx)
    bad = np.isnan(out).any(axis=-2, keepdims=True)
    return np.broadcast_to(np.where(bad, 0.0, np.nan), out.shape).copy()


def _plugin(fn, refuses_by="raise") -> Implementation:
    return Implementation(name="newcomer", version="0.1", algorithms={"layer_norm": fn}, dtypes=("float64", "float32"),
                          devices=lambda: ["cpu"], from_numpy=lambda a, dtype, device: np.array(a, dtype=dtype),
                          to_numpy=np.asarray, variants=[PAPER], refuses_by=refuses_by)


def _zero_variance(fn, refuses_by):
    case = Case.build("layer_norm", {"d_e": 4, "ell": 3}, PAPER, seed=0)
    checks = check_refusals(Member("newcomer", _plugin(fn, refuses_by), "cpu"), case, "float32", timeout=20)
    return next(r for r in checks if r.refusal == ZERO_VARIANCE)


def test_a_nan_answer_under_the_default_fails_in_one_line_naming_the_declaration():
    r = _zero_variance(newcomers_layer_norm, "raise")
    assert r.status == RETURNED and r.finding is not None and r.finding.check == "refusal"
    assert "returned NaN where the spec refuses" in r.detail and "refuses_by='nan'" in r.detail
    assert "\n" not in r.detail


def test_the_same_answer_passes_under_a_nan_declaration():
    r = _zero_variance(newcomers_layer_norm, "nan")
    assert r.status == REFUSED and r.finding is None, r.detail


@pytest.mark.parametrize("fn", [finite_layer_norm, misplaced_layer_norm])
def test_a_finite_number_where_the_spec_refuses_still_fails_under_nan(fn):
    r = _zero_variance(fn, "nan")
    assert r.status == RETURNED and r.finding is not None, r.detail
    assert "returned a number where the spec refuses" in r.detail and "must be NaN" in r.detail


def newcomers_rms_norm(inputs, params, ctx):
    """RMSnorm without ε: a zero column is 0/0 = NaN, every other column its value."""
    X = inputs["X"]
    with np.errstate(divide="ignore", invalid="ignore"):
        return X / np.sqrt(np.mean(X * X, axis=-2, keepdims=True)) * params["gamma"][:, None]


@pytest.mark.parametrize("d_e", [1, 3])
def test_a_nan_column_beside_finite_ones_is_the_declared_refusal_at_every_width(d_e):
    """Only the refused column must be NaN. With d_e = 1 a norm keeps only its input's sign, so the
    probes that find where the refused column reaches must flip it (a shift alone moved nothing,
    every element was then demanded NaN, and a correct plugin failed: a user's certify, 2026-12-07)."""
    plugin = dataclasses.replace(_plugin(newcomers_rms_norm, "nan"), algorithms={"rms_norm": newcomers_rms_norm})
    case = Case.build("rms_norm", {"d_e": d_e, "ell": 2}, PAPER, seed=0)
    checks = check_refusals(Member("newcomer", plugin, "cpu"), case, "float32", timeout=20)
    (r,) = [r for r in checks if r.refusal == ZERO_VARIANCE]
    assert r.status == REFUSED and r.finding is None, r.detail
    finite = dataclasses.replace(plugin, algorithms={"rms_norm": lambda i, p, c: np.nan_to_num(
        newcomers_rms_norm(i, p, c))})
    (r,) = [r for r in check_refusals(Member("n", finite, "cpu"), case, "float32", timeout=20)
            if r.refusal == ZERO_VARIANCE]
    assert r.status == RETURNED, r.detail  # a number in the refused column still fails


def test_a_search_holds_the_plugin_to_its_declaration():
    """A search of the newcomer's layer norm: conformant declaring NaN, a refusal failure declaring
    raise (the float32 search meets the refusal check after its first passing example)."""
    cells = {}
    for mode in ("nan", "raise"):
        runner = Runner([(mode, _plugin(newcomers_layer_norm, mode))],
                        RunConfig(profile="quick", seed=0, examples=10, call_timeout=20))
        runner.distinct_failures = 0
        runner.record_failure = lambda cell, m, finding, *a, **k: (  # type: ignore[method-assign]
            setattr(cell, "status", "fail"), setattr(cell, "note", f"{finding.check}: {finding.message}"))
        cells[mode] = runner.run(["layer_norm"], ["float32"]).cells[0]
    assert cells["nan"].status == "pass" and cells["nan"].checks["refusal"] >= 1, cells["nan"]
    assert cells["raise"].status == "fail" and cells["raise"].note.startswith("refusal: returned NaN"), cells["raise"]


def _attention_nan(inputs, params, ctx):
    """The bundled NumPy attention computing a query with no key as NaN (empty_query="nan")."""
    return numpy_impl.algorithms["attention"](inputs, params, dataclasses.replace(
        ctx, variant=ctx.variant.replace(empty_query="nan")))


@pytest.mark.parametrize("mode, status", [("nan", REFUSED), ("raise", RETURNED)])
def test_a_drawn_query_with_no_key(mode, status):
    """A Mask column all 0 drawn under empty_query="error": the NaN column is the refusal declared."""
    plugin = dataclasses.replace(numpy_impl, algorithms={"attention": _attention_nan}, variants=[PAPER],
                                 refuses_by=mode)
    case = Case.build("attention", None, PAPER, seed=0)
    case.inputs["Mask"] = case.inputs["Mask"].copy()
    case.inputs["Mask"][:, 0] = False
    prepared = rounded(case, "float64")
    with pytest.raises(SpecError) as refused:
        evaluate("attention", prepared.spec_inputs(), prepared.spec_params(), hyper=case.hyper, variant=PAPER)
    check = expect_refusal(Member("p", plugin, "cpu"), case, prepared, refused.value, "float64", timeout=20)
    assert check.status == status, check.detail
    if mode == "raise":
        assert "refuses_by='nan'" in check.detail


def test_a_declaration_is_checked():
    assert _plugin(newcomers_layer_norm, "sometimes").problems() == [
        "refuses_by must be 'raise' or 'nan'; given 'sometimes'"]
    assert "does not implement" in _plugin(newcomers_layer_norm, {"rms_norm": "nan"}).problems()[0]
    assert _plugin(newcomers_layer_norm, {"layer_norm": "nan"}).refuses_by_for("layer_norm") == "nan"
    assert _plugin(newcomers_layer_norm, {"layer_norm": "nan"}).refuses_by_for("rms_norm") == "raise"


@pytest.fixture(scope="module")
def nan_certificate() -> dict:
    settings = Settings(profile="quick", examples=6, algorithms=("layer_norm",), dtypes=("float32",),
                        in_process=True, seed=0, fixtures="none")
    return certify(("newcomer", _plugin(newcomers_layer_norm, "nan")), settings).doc


def test_the_certificate_says_how_the_plugin_refuses(nan_certificate, tmp_path):
    doc = nan_certificate
    assert doc["subject"]["refuses_by"] == "nan"
    assert doc["algorithms"]["layer_norm"]["verdict"] in ("pass", "inconclusive")
    assert "Refuses what the spec refuses by returning NaN" in render_markdown(doc)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    assert verify(path)[0]
    bad = copy.deepcopy(doc)
    bad["subject"]["refuses_by"] = "sometimes"
    bad["content_hash"] = content_hash(bad)
    path.write_text(json.dumps(bad))
    ok, message = verify(path)
    assert not ok and "refuses_by" in message and "\n" not in message, message
