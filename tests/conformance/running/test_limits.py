"""Shape limits in the plugin contract (impls/api.py ``Limits``).

A library that ties d_attn = d_mid and d_x = H·d_attn, refuses batches or
cross-attention lengths, declares so; the harness then draws, replays and
certifies only within those limits, and says so in the certificate."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftspec.conformance.session.certificate import render_markdown
from ftspec.conformance.session.certificate.building import fixtures_outside
from ftspec.conformance.core.execute import Member
from ftspec.conformance.running.fixture_replay import replay_fixtures
from ftspec.conformance.running.runner import Runner
from ftspec.conformance.core.strategies import cases, hyperparameters
from ftspec.impls.api import Implementation, Limits
from ftspec.impls.discovery import PluginError, _materialise
from ftspec.impls.numpy import implementation as numpy_impl

from ..support import run

#: What torch.nn.MultiheadAttention supports, roughly: one head width for queries, keys and values,
#: the embedding split over the heads, self-attention lengths, no batched call in this plugin.
MH = Limits(equal=(("d_attn", "d_mid"), ("d_x", "H*d_attn")), maximum={"H": 3, "ell_x": 4},
            batching=False, cross_lengths=False)
#: A transformer limit naming sizes mh_attention does not have (d_e, L, N_V): those do not apply there.
MODEL = Limits(equal=(("d_attn", "d_mid"), ("d_e", "H*d_attn")), maximum={"L": 1, "N_V": 6, "ell_max": 5})

QUICK = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _inside(hyper: dict[str, int]) -> bool:
    """The MH limits written out by hand (not through ``Limits.admits``)."""
    return (hyper["d_attn"] == hyper["d_mid"] and hyper["d_x"] == hyper["H"] * hyper["d_attn"]
            and hyper["H"] <= 3 and hyper["ell_x"] <= 4 and hyper["ell_z"] == hyper["ell_x"])


@QUICK
@given(st.data())
def test_hyperparameters_never_leave_the_limits(data):
    hyper = data.draw(hyperparameters("mh_attention", limits=MH))
    assert _inside(hyper), hyper


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.data())
def test_model_sizes_stay_within_limits_naming_them(data):
    hyper = data.draw(hyperparameters("d_transformer", limits=MODEL, budget="quick"))
    assert hyper["d_attn"] == hyper["d_mid"] and hyper["d_e"] == hyper["H"] * hyper["d_attn"], hyper
    assert hyper["L"] <= 1 and hyper["N_V"] <= 6 and hyper["ell_max"] <= 5, hyper


@QUICK
@given(st.data())
def test_cases_carry_no_batch_when_batching_is_off(data):
    case = data.draw(cases("mh_attention", limits=MH, max_batch=3))
    assert case.batch == []
    assert _inside(case.hyper), case.hyper


def test_without_limits_the_strategies_do_draw_outside_them():
    """The property above is not vacuous: unconstrained draws leave MH's limits."""
    seen = []

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(hyperparameters("mh_attention"))
    def collect(hyper):
        seen.append(_inside(hyper))

    collect()
    assert not all(seen)


def _refusing(limits_declared: Limits | None) -> Implementation:
    """NumPy's mh_attention behind a boundary that refuses every shape outside MH, as a real library
    does; declares ``limits_declared`` (None: declares nothing)."""
    inner = numpy_impl.algorithms["mh_attention"]

    def mh_attention(inputs, params, ctx):
        if ctx.batched or not _inside(dict(ctx.hyper)):
            raise ValueError(f"unsupported shape {dict(ctx.hyper)} batched={ctx.batched}")
        return inner(inputs, params, ctx)

    return dataclasses.replace(numpy_impl, name="tied-heads", algorithms={"mh_attention": mh_attention},
                               dtypes=["float64"], limits=limits_declared or Limits())


def test_a_plugin_refusing_outside_its_declared_limits_is_conformant(tmp_path):
    result = run([("tied", _refusing(MH))], ["mh_attention"], ["float64"], tmp_path, examples=25)
    (cell,) = [c for c in result.cells if c.impl == "tied"]
    assert cell.status == "pass" and cell.examples > 0, (cell.status, cell.note, cell.failure)


def test_the_same_plugin_without_declared_limits_fails(tmp_path):
    result = run([("tied", _refusing(None))], ["mh_attention"], ["float64"], tmp_path, examples=25)
    (cell,) = [c for c in result.cells if c.impl == "tied"]
    assert cell.status == "fail", (cell.status, cell.examples)


def test_members_with_different_limits_share_no_search(tmp_path):
    """An unconstrained peer keeps its full search while the constrained one stays within its own."""
    result = run([("tied", _refusing(MH)), ("numpy", dataclasses.replace(numpy_impl, dtypes=["float64"]))],
                 ["mh_attention"], ["float64"], tmp_path, examples=15)
    status = {c.impl: c.status for c in result.cells}
    assert status == {"tied": "pass", "numpy": "pass"}
    groups = Runner._variant_groups([Member("tied", _refusing(MH), "cpu"), Member("numpy", numpy_impl, "cpu")],
                                    "mh_attention")
    assert sorted((g[1].unconstrained, [m.label for m in g[2]]) for g in groups) == [
        (False, ["tied"]), (True, ["numpy"])]


@pytest.mark.parametrize("limits, why", [
    (Limits(minimum={"H": 4}, maximum={"H": 3}), "exceed the maxima"),
    (Limits(equal=(("d_x", "H*d_attn"), ("d_x", "d_attn")), minimum={"H": 2}), "cannot all hold"),
    (Limits(maximum={"ell_x": 0}), "positive integers"),
    (Limits(equal=(("d_attn", "d_hed"),)), "unknown hyperparameters ['d_hed']"),
    ({"layer_norm": Limits()}, "does not implement"),
    # constants, inequalities and multiples (issue 27)
    (Limits(multiple_of={"d_attn": 4}, maximum={"d_attn": 3}), "exceed the maxima: d_attn = 4 > maximum 3"),
    (Limits(at_most=(("2*d_attn", "d_attn"),)), "cannot all hold (2*d_attn <= d_attn is left unmet)"),
    (Limits(equal=(("d_mid", "3*d_attn"),), at_most=(("d_mid", "2*d_attn"),)), "cannot all hold"),
    (Limits(equal=(("d_x", "2*d_attn"),), maximum={"d_x": 1}), "exceed the maxima: d_x = 2 > maximum 1"),
    (Limits(multiple_of={"d_attn": 0}), "each k must be an integer from 1 to"),
    (Limits(multiple_of={"d_attn": 2 ** 21}), "each k must be an integer from 1 to"),
    (Limits(multiple_of={"d_attn": True}), "each k must be an integer from 1 to"),
    (Limits(equal=(("d_attn", "4**d_mid"),)), "is not a hyperparameter name or a product"),
    (Limits(equal=(("d_attn", "8"),)), "names no hyperparameter"),
    (Limits(at_most=(("d_attn", "0*d_mid"),)), "a constant factor must be a whole number from 1 to"),
    (Limits(at_most=(("d_attn", "2*d_hed"),)), "unknown hyperparameters ['d_hed']"),
    (Limits(at_most=("d_attn",)), "is not a pair of sides"),  # type: ignore[arg-type]
    (Limits(multiple_of={"d_hed": 2}), "unknown hyperparameters ['d_hed']"),
])
def test_a_declaration_that_leaves_nothing_to_draw_fails_to_load(limits, why):
    impl = dataclasses.replace(_refusing(None), limits=limits)
    problems = impl.problems()
    assert any(why in p for p in problems), problems
    assert all(p and "\n" not in p for p in problems), problems  # each one line
    with pytest.raises(PluginError, match="malformed plugin"):
        _materialise(impl, "mod:impl")


def test_per_algorithm_limits_apply_only_to_their_algorithm():
    impl = dataclasses.replace(numpy_impl, limits={"mh_attention": MH})
    assert impl.problems() == []
    assert impl.limits_for("mh_attention") is MH and impl.limits_for("attention").unconstrained
    assert impl.admits("attention", {"d_attn": 2, "d_mid": 3})


def test_fixtures_outside_the_limits_are_skipped_and_counted():
    impl = _refusing(MH)
    results = replay_fixtures([("tied", impl)], algorithms=["mh_attention"], dtypes=["float64"])
    unlimited = replay_fixtures([("tied", dataclasses.replace(impl, algorithms=numpy_impl.algorithms,
                                                               limits=Limits()))],
                                algorithms=["mh_attention"], dtypes=["float64"])
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    outside = fixtures_outside(impl, ["mh_attention"], "all")
    assert outside > 0 and len(results) + outside == len(unlimited)


PLUGIN = """
import dataclasses
from ftspec.impls.api import Limits
from ftspec.impls.numpy import implementation as base

_inner = base.algorithms["mh_attention"]

def mh_attention(inputs, params, ctx):
    h = ctx.hyper
    if ctx.batched or h["d_attn"] != h["d_mid"] or h["d_x"] != h["H"] * h["d_attn"]:
        raise ValueError("only tied head sizes")
    return _inner(inputs, params, ctx)

impl = dataclasses.replace(
    base, name="myheads", version="1.0", dtypes=["float64"],
    algorithms={"mh_attention": mh_attention},
    limits=Limits(equal=(("d_attn", "d_mid"), ("d_x", "H*d_attn")), batching=False))
"""


def test_a_users_plugin_with_limits_is_certified_from_outside_the_repo(tmp_path):
    (tmp_path / "myheads.py").write_text(textwrap.dedent(PLUGIN))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "ftspec.tools.cli", "certify", "myheads:impl", "--algorithm",
                           "mh_attention", "--profile", "quick", "--out", str(tmp_path / "cert")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads((tmp_path / "cert" / "certificate.json").read_text())
    assert doc["verdict"] == "conformant"
    assert doc["subject"]["limits"]["mh_attention"]["equal"] == [["d_attn", "d_mid"], ["d_x", "H*d_attn"]]
    md = (tmp_path / "cert" / "certificate.md").read_text()
    assert "Within limits: mh_attention: d_attn = d_mid, d_x = H*d_attn, no batching" in md
    assert md == render_markdown(doc)


# -- constants in products, inequalities, multiples (issue 27) ---------------------------------

#: GPT-2's MLP: d_mlp = 4·d_e, with d_e even (a Vaswani sinusoid needs it) and the heads tied.
FOUR = Limits(equal=(("d_attn", "d_mid"), ("d_e", "H*d_attn"), ("d_mlp", "4*d_e")), multiple_of={"d_e": 2})
#: An MLP at most 2·d_e wide; d_attn a multiple of 3, at most 6.
AT_MOST = Limits(at_most=(("d_mlp", "2*d_e"), ("d_attn", "d_mid")), multiple_of={"d_attn": 3},
                 maximum={"d_attn": 7})


def _inside_four(h: dict[str, int]) -> bool:
    """FOUR written out by hand (not through ``Limits.admits``)."""
    return (h["d_attn"] == h["d_mid"] and h["d_e"] == h["H"] * h["d_attn"] and h["d_mlp"] == 4 * h["d_e"]
            and h["d_e"] % 2 == 0)


def _inside_at_most(h: dict[str, int]) -> bool:
    return h["d_mlp"] <= 2 * h["d_e"] and h["d_attn"] <= h["d_mid"] and h["d_attn"] % 3 == 0 and h["d_attn"] <= 7


@QUICK
@given(st.data())
def test_draws_keep_constants_in_products_and_multiples(data):
    hyper = data.draw(hyperparameters("gpt2_layer", limits=FOUR))
    assert _inside_four(hyper), hyper


@QUICK
@given(st.data())
def test_draws_keep_inequalities_and_multiples_under_a_maximum(data):
    hyper = data.draw(hyperparameters("gpt2_layer", limits=AT_MOST))
    assert _inside_at_most(hyper), hyper


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.data())
def test_model_draws_keep_the_new_limits(data):
    limits = dataclasses.replace(FOUR, maximum={"L": 1, "N_V": 6, "ell_max": 5})
    case = data.draw(cases("d_transformer", limits=limits, budget="quick", max_batch=1))
    assert _inside_four(dict(case.hyper)) and case.hyper["ell_max"] <= 5, case.hyper


def test_without_the_new_limits_the_strategies_do_draw_outside_them():
    """The two properties above are not vacuous: unconstrained draws leave both sets of limits."""
    seen: list[tuple[bool, bool]] = []

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(hyperparameters("gpt2_layer"))
    def collect(hyper):
        seen.append((_inside_four(hyper), _inside_at_most(hyper)))

    collect()
    assert not all(a for a, _ in seen) and not all(b for _, b in seen)


@pytest.mark.parametrize("limits, given_, settled", [
    (Limits(equal=(("d_mlp", "4*d_e"),)), {"d_e": 3, "d_mlp": 5}, {"d_e": 3, "d_mlp": 12}),
    (Limits(equal=(("d_mlp", "4*d_e"),)), {"d_e": 1, "d_mlp": 9}, {"d_e": 3, "d_mlp": 12}),  # d_e grows, then d_mlp
    (Limits(at_most=(("d_mlp", "4*d_e"),)), {"d_e": 1, "d_mlp": 9}, {"d_e": 3, "d_mlp": 9}),  # the larger side grows
    (Limits(at_most=(("d_mlp", "4*d_e"),)), {"d_e": 3, "d_mlp": 5}, {"d_e": 3, "d_mlp": 5}),  # holds: unchanged
    (Limits(multiple_of={"d_e": 2}), {"d_e": 5, "d_mlp": 5}, {"d_e": 6, "d_mlp": 5}),  # rounded up
    (Limits(equal=(("d_mlp", "4*d_e"),), multiple_of={"d_e": 2}), {"d_e": 3, "d_mlp": 1}, {"d_e": 4, "d_mlp": 16}),
])
def test_settle_only_raises_and_meets_every_kind(limits, given_, settled):
    out = limits.settle(given_)
    assert out == settled
    assert all(out[n] >= v for n, v in given_.items()) and limits.admits(out)


def test_admits_each_new_kind_by_hand():
    assert Limits(equal=(("d_mlp", "2*H*d_attn"),)).admits({"d_mlp": 12, "H": 3, "d_attn": 2})
    assert not Limits(equal=(("d_mlp", "2*H*d_attn"),)).admits({"d_mlp": 6, "H": 3, "d_attn": 2})
    assert Limits(at_most=(("d_mlp", "4*d_e"),)).admits({"d_mlp": 8, "d_e": 2})
    assert not Limits(at_most=(("d_mlp", "4*d_e"),)).admits({"d_mlp": 9, "d_e": 2})
    assert not Limits(multiple_of={"d_e": 2}).admits({"d_e": 3})
    assert Limits(multiple_of={"d_e": 2}).admits({"ell": 3})  # a size the entry lacks does not apply


def test_the_new_kinds_are_described_recorded_and_read_back():
    limits = Limits(equal=(("d_mlp", "4*d_e"),), at_most=(("d_attn", "d_mid"),), multiple_of={"d_e": 2},
                    maximum={"H": 4})
    assert limits.describe() == "d_mlp = 4*d_e, d_attn <= d_mid, d_e a multiple of 2, H <= 4"
    assert Limits.from_dict(json.loads(json.dumps(limits.to_dict()))) == limits
    assert not limits.unconstrained and Limits(multiple_of={"d_e": 2}).key() != Limits().key()
    assert Limits(at_most=(("d_e", "d_mlp"),)).key() != Limits(equal=(("d_e", "d_mlp"),)).key()
    old = {"equal": [["d_attn", "d_mid"]], "maximum": {}, "minimum": {}, "batching": True, "cross_lengths": True}
    assert Limits.from_dict(old) == Limits(equal=(("d_attn", "d_mid"),))  # a certificate from before them


@pytest.mark.parametrize("data, why", [
    ({"at_most": [["d_e"]]}, "pairs of sides"),
    ({"at_most": "d_e <= d_mlp"}, "pairs of sides"),
    ({"at_most": [["d_e", "4**d_mlp"]]}, "is not a hyperparameter name"),
    ({"multiple_of": {"d_e": "2"}}, "each k must be an integer"),
    ({"multiple_of": {"d_e": -2}}, "each k must be an integer"),
    ({"multiple_of": [2]}, "multiple_of must be an object"),
    ({"parity": {"d_e": 2}}, "unknown fields 'parity'"),
    ({"equal": [["d_e", "99999999*d_mlp"]]}, "a constant factor must be"),
])
def test_malformed_limit_data_is_one_line_value_error(data, why):
    with pytest.raises(ValueError, match=None) as caught:
        Limits.from_dict(data)
    assert why in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


def _gpt_codebase(declared: Limits | None) -> Implementation:
    """NumPy's gpt2_layer behind a boundary that refuses every shape a public GPT code does not have
    (d_mlp = 4·d_e, d_e even, tied heads): declares ``declared`` (None: nothing)."""
    inner = numpy_impl.algorithms["gpt2_layer"]

    def gpt2_layer(inputs, params, ctx):
        if not _inside_four(dict(ctx.hyper)):
            raise ValueError(f"unsupported shape {dict(ctx.hyper)}")
        return inner(inputs, params, ctx)

    return dataclasses.replace(numpy_impl, name="gpt-codebase", algorithms={"gpt2_layer": gpt2_layer},
                               dtypes=["float64"], limits=declared or Limits())


def test_a_gpt_codebase_declaring_constants_and_parity_is_conformant(tmp_path):
    result = run([("gpt", _gpt_codebase(FOUR))], ["gpt2_layer"], ["float64"], tmp_path, examples=20)
    (cell,) = [c for c in result.cells if c.impl == "gpt"]
    assert cell.status == "pass" and cell.examples > 0, (cell.status, cell.note, cell.failure)
    undeclared = run([("gpt", _gpt_codebase(None))], ["gpt2_layer"], ["float64"], tmp_path, examples=20)
    assert [c.status for c in undeclared.cells if c.impl == "gpt"] == ["fail"]


def test_identify_designs_its_case_within_the_new_limits():
    from ftspec.conformance.forensics.identify import case_hyper
    from ftspec.spec.registry import REGISTRY

    hyper = case_hyper(_gpt_codebase(FOUR), REGISTRY["gpt2_layer"])
    assert _inside_four(hyper), hyper
    hyper = case_hyper(dataclasses.replace(_gpt_codebase(None), limits=AT_MOST), REGISTRY["gpt2_layer"])
    assert _inside_at_most(hyper), hyper


def test_certificate_limits_record_and_describe_the_new_kinds():
    from ftspec.conformance.session.certificate.building import declared_limits
    from ftspec.conformance.session.certificate.rendering import describe_limits

    recorded = json.loads(json.dumps(declared_limits(_gpt_codebase(FOUR), ["gpt2_layer"])))
    assert recorded["gpt2_layer"]["equal"][-1] == ["d_mlp", "4*d_e"]
    assert recorded["gpt2_layer"]["multiple_of"] == {"d_e": 2}
    assert describe_limits(recorded, 0).startswith(
        "gpt2_layer: d_attn = d_mid, d_e = H*d_attn, d_mlp = 4*d_e, d_e a multiple of 2 (only cases")
