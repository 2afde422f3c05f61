"""Variant sets declared per algorithm (impls/api.py ``Implementation.variants`` as a mapping).

One plugin can hold a whole library (GPT-2 under hf-gpt2 and BERT under hf-bert): each algorithm is
searched, replayed, identified and certified under its own sets, never another's; a mapping that
leaves an implemented algorithm without sets (and has no "*" default) is refused in one line; the
certificate records the sets per algorithm and ``--verify`` reads that record as hostile data."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import defaultdict

import pytest

from ftspec.conformance.core.execute import Member
from ftspec.conformance.forensics.identify import IdentifyError, call_variant
from ftspec.conformance.running.fixture_replay import replay_variant
from ftspec.conformance.running.runner import Runner
from ftspec.conformance.session.certificate import consistency, content_hash, render_markdown, verify
from ftspec.conformance.session.commands import Settings, certify
from ftspec.impls.api import Implementation
from ftspec.impls.discovery import PluginError, _materialise, _variants_row
from ftspec.impls.numpy import implementation as numpy_impl
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, preset
from ftspec.tools.cmd_list import variant_text

from ..support import run

GPT2, BERT = preset("hf-gpt2"), preset("hf-bert")


def _recording(variants, seen: dict[str, set]) -> Implementation:
    """NumPy's layer_norm and rms_norm (it computes every set), recording the set of every call."""
    def wrap(name):
        inner = numpy_impl.algorithms[name]

        def fn(inputs, params, ctx):
            seen[ctx.algorithm].add(ctx.variant)
            return inner(inputs, params, ctx)
        return fn

    return dataclasses.replace(numpy_impl, name="per-algorithm", dtypes=["float64"], variants=variants,
                               algorithms={n: wrap(n) for n in ("layer_norm", "rms_norm")})


def test_each_algorithm_is_searched_under_its_own_sets_only(tmp_path):
    seen: dict[str, set] = defaultdict(set)
    impl = _recording({"layer_norm": [GPT2], "rms_norm": [PAPER, BERT]}, seen)
    assert impl.problems() == []
    result = run([("mine", impl)], ["layer_norm", "rms_norm"], ["float64"], tmp_path, examples=30)
    assert {c.algorithm: c.status for c in result.cells} == {"layer_norm": "pass", "rms_norm": "pass"}
    assert seen["layer_norm"] == {GPT2}
    assert seen["rms_norm"] == {PAPER, BERT}  # both of its sets drawn, no other


def test_a_default_key_covers_the_algorithms_not_named():
    impl = _recording({"layer_norm": [GPT2], "*": "all"}, defaultdict(set))
    assert impl.problems() == []
    assert impl.variants_for("layer_norm") == (GPT2,) and impl.variants_for("rms_norm") == "all"
    assert impl.supports(BERT, "rms_norm") and not impl.supports(BERT, "layer_norm")
    groups = Runner._variant_groups([Member("mine", impl, "cpu")], "layer_norm")
    assert [g[0] for g in groups] == [[GPT2]]
    assert [g[0] for g in Runner._variant_groups([Member("mine", impl, "cpu")], "rms_norm")] == ["all"]


def test_the_one_argument_supports_answers_only_for_one_declaration():
    uniform = dataclasses.replace(numpy_impl, variants=[GPT2])
    assert uniform.supports(GPT2) and not uniform.supports(BERT)  # as before per-algorithm sets
    assert uniform.supports(GPT2, "layer_norm")
    per = _recording({"layer_norm": [GPT2], "rms_norm": [BERT]}, defaultdict(set))
    with pytest.raises(TypeError, match="supports\\(variant, algorithm\\)"):
        per.supports(GPT2)


@pytest.mark.parametrize("variants, why", [
    ({"layer_norm": [GPT2]}, "variants declares no set for ['rms_norm'] (name each algorithm, or give a \"*\""),
    ({"layer_norm": [GPT2], "rms_norm": [], }, "variants for 'rms_norm' is empty"),
    ({"layer_norm": [GPT2], "rms_norm": GPT2}, "variants for 'rms_norm' must be \"all\" or a sequence"),
    ({"layer_norm": [GPT2], "rms_norm": "paper"}, "variants for 'rms_norm' must be \"all\" or a sequence"),
    ({"*": [GPT2], "attention": [GPT2]}, "variants name algorithms the plugin does not implement: ['attention']"),
    ({"*": [GPT2], 3: [GPT2]}, "variants: keys must be algorithm names"),
    (3, 'variants must be "all", a sequence of VariantSet, or {algorithm'),
    ("every", 'variants must be "all", a sequence of VariantSet, or {algorithm'),
])
def test_a_malformed_declaration_is_a_one_line_problem(variants, why):
    impl = _recording(variants, defaultdict(set))
    problems = impl.problems()
    assert any(why in p for p in problems), problems
    assert all("\n" not in p for p in problems)
    with pytest.raises(PluginError, match="malformed plugin"):
        _materialise(impl, "mod:impl")


def test_fixtures_are_replayed_under_the_algorithms_own_sets():
    impl = _recording({"layer_norm": [GPT2], "rms_norm": [BERT]}, defaultdict(set))
    assert replay_variant(impl, REGISTRY["layer_norm"], GPT2) == GPT2
    assert replay_variant(impl, REGISTRY["rms_norm"], GPT2) is None  # GPT-2's ε is not BERT's
    assert replay_variant(impl, REGISTRY["rms_norm"], BERT) == BERT


def test_identify_calls_each_algorithm_with_its_own_set():
    impl = _recording({"layer_norm": [GPT2], "rms_norm": [BERT]}, defaultdict(set))
    assert call_variant(impl, None, "layer_norm") == GPT2 and call_variant(impl, None, "rms_norm") == BERT
    with pytest.raises(IdentifyError, match="does not declare the variant set hf-gpt2 for rms_norm"):
        call_variant(impl, GPT2, "rms_norm")


def test_the_listing_shows_the_sets_per_algorithm():
    impl = _recording({"layer_norm": [GPT2], "rms_norm": [PAPER, BERT]}, defaultdict(set))
    row = _variants_row(impl, ["layer_norm", "rms_norm"])
    assert row == {"layer_norm": ["hf-gpt2"], "rms_norm": ["phuong-hutter", "hf-bert"]}
    assert variant_text(row) == "layer_norm:\n  hf-gpt2\nrms_norm:\n  phuong-hutter\n  hf-bert"
    assert variant_text({"a": ["x"], "b": ["x"], "c": "all"}) == "a, b:\n  x\nc:\n  all"
    assert _variants_row(dataclasses.replace(numpy_impl, variants=[GPT2]), ["layer_norm"]) == ["hf-gpt2"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> dict:
    """A certificate of a two-algorithm plugin with a set per algorithm (few examples, no fixtures)."""
    impl = _recording({"layer_norm": [GPT2], "rms_norm": [BERT]}, defaultdict(set))
    tmp = tmp_path_factory.mktemp("per_algorithm_cert")
    settings = Settings(profile="quick", in_process=True, case_dir=str(tmp / "cases"), examples=10, fixtures="none")
    return certify(("per-algorithm", impl), settings).doc


def _rehashed(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    doc["content_hash"] = content_hash(doc)
    return doc


def test_the_certificate_records_the_sets_per_algorithm(certificate, tmp_path):
    assert certificate["variants"]["layer_norm"][0]["hash"] == GPT2.hash
    assert certificate["variants"]["rms_norm"][0]["hash"] == BERT.hash
    assert set(certificate["variants"]) == set(certificate["coverage"]["implemented"])
    assert "- Variant sets: layer_norm: hf-gpt2; rms_norm: hf-bert" in render_markdown(certificate)
    path = tmp_path / "certificate.json"
    path.write_text(json.dumps(certificate))
    assert verify(path)[0]


@pytest.mark.parametrize("edit, needle", [
    (lambda v: v.pop("rms_norm"), "not for exactly the implemented algorithms"),
    (lambda v: v.update(attention=[]), "not for exactly the implemented algorithms"),
    (lambda v: v.update(no_such_entry="all"), "field variants must be"),
    (lambda v: v.update(rms_norm="every"), "field variants.rms_norm must be"),
    (lambda v: v.update(rms_norm=[{"json": {"no_such_switch": 1}}]), "field variants.rms_norm[0].json is not a"),
    (lambda v: v.update(rms_norm=[{"json": "hf-bert"}]), "field variants.rms_norm[0].json must be"),
    (lambda v: v.clear(), "field variants must be"),
])
def test_hostile_per_algorithm_sets_are_one_line_refusals(certificate, edit, needle):
    doc = copy.deepcopy(certificate)
    edit(doc["variants"])
    problems = consistency(_rehashed(doc))
    assert len(problems) == 1 and needle in problems[0] and "\n" not in problems[0], problems
