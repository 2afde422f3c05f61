"""The one value builder (``conformance/core/values/``), the one variant
enumeration, the default sizes, and the registry's ``Kind`` and keyword-only
``Entry`` that they read."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.values import (
    DEFAULT_HYPER,
    EPSILONS,
    STYLES,
    build,
    default_hyper,
    parameter_values,
    variant_enumeration,
)
from ftspec.spec import PAPER, PRESETS, SWITCHES, SpecError, evaluate
from ftspec.spec.entry import Entry, Kind, TensorSpec
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import SAME_MATHEMATICS

NAMES = sorted(REGISTRY)


@pytest.mark.parametrize("name", NAMES)
def test_build_is_deterministic_and_seeded(name):
    e = REGISTRY[name]
    a_in, a_par = build(name, seed=3)
    b_in, b_par = build(name, seed=3)
    for a, b in ((a_in, b_in), (a_par, b_par)):
        assert list(a) == list(b)
        for k in a:
            assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), (name, k)
    c_in, c_par = build(name, seed=4)
    reals = [k for k in a_par] + [s.name for s in e.inputs if s.kind == Kind.REAL]
    if reals:  # another seed, other values
        assert any(not np.array_equal({**a_in, **a_par}[k], {**c_in, **c_par}[k]) for k in reals), name


@pytest.mark.parametrize("name", NAMES)
def test_build_gives_every_input_and_parameter_with_the_registry_shapes(name):
    e = REGISTRY[name]
    hyper = default_hyper(e)
    inputs, params = build(e, hyper)
    assert {k: v.shape for k, v in inputs.items()} == e.input_shapes(hyper)
    assert {k: v.shape for k, v in params.items()} == e.param_shapes(hyper, PAPER)
    for spec in e.inputs:
        v = inputs[spec.name]
        if spec.kind in (Kind.TOKEN, Kind.POSITION, Kind.LENGTH):
            assert v.dtype == np.int64
        elif spec.kind in (Kind.MASK, Kind.FLAG, Kind.PADDING):
            assert v.dtype == np.bool_
        else:
            assert v.dtype == np.float64 and np.isfinite(v).all()


@pytest.mark.parametrize("name", [n for n in NAMES if REGISTRY[n].family in ("component", "layer", "architecture")])
def test_the_spec_accepts_built_cases(name):
    inputs, params = build(name, seed=1)
    evaluate(name, {k: v.tolist() for k, v in inputs.items()}, {k: v.tolist() for k, v in params.items()},
             hyper=default_hyper(name))


def test_a_parameter_keeps_its_values_when_the_variant_changes_elsewhere():
    e = REGISTRY["gpt2_layer"]
    hyper = default_hyper(e)
    paper = parameter_values(e, hyper, PAPER, seed=5)
    other = parameter_values(e, hyper, PAPER.replace(mlp_bias=False, activation="relu"), seed=5)
    assert "layers.0.b_mlp1" not in other and "b_mlp1" in paper
    for k in other:
        assert np.array_equal(paper[k], other[k]), k


def test_given_inputs_replace_built_ones_and_lengths_pad_their_rows():
    e = REGISTRY["d_training"]
    hyper = default_hyper(e)
    lengths = np.array([1, 2, 4])
    inputs, _ = build(e, hyper, given={"x_len": lengths})
    assert np.array_equal(inputs["x_len"], lengths)
    for row, n in zip(inputs["x"], lengths):
        assert (row[n:] == 0).all()
    with pytest.raises(ValueError, match="no input"):
        build(e, hyper, given={"nope": 1})


def test_styles_and_dtypes_are_checked():
    with pytest.raises(ValueError, match="style"):
        build("layer_norm", style="loud")
    with pytest.raises(ValueError, match="dtype"):
        parameter_values("layer_norm", default_hyper("layer_norm"), seed=0, dtype="float8")
    for style in STYLES:
        build("bert_layer", style=style)


def test_case_build_is_the_builder():
    c = Case.build("attention", seed=2)
    inputs, params = build("attention", seed=2)
    assert c.hyper == default_hyper("attention") and c.id == "attention[phuong-hutter]"
    assert all(np.array_equal(c.inputs[k], inputs[k]) for k in inputs)
    assert all(np.array_equal(c.params[k], params[k]) for k in params)
    assert c.spec_inputs()["X"] == inputs["X"].tolist()


def test_default_sizes_are_the_entries_and_overrides_are_checked():
    assert set(DEFAULT_HYPER) == set(REGISTRY)
    for name, e in REGISTRY.items():
        assert dict(DEFAULT_HYPER[name]) == dict(e.sizes) and list(default_hyper(e)) == list(e.hyper)
        e.check and e.check(default_hyper(e), PAPER)  # the default sizes are legal
    assert default_hyper("attention", ell_x=1)["ell_x"] == 1
    with pytest.raises(ValueError, match="no hyperparameter"):
        default_hyper("attention", L=2)


@pytest.mark.parametrize("name", NAMES)
def test_variant_enumeration(name):
    e = REGISTRY[name]
    got = variant_enumeration(e)
    labels = [label for label, _ in got]
    assert labels[0] == "paper" and got[0][1] == PAPER
    assert len(set(labels)) == len(labels) and len({v for _, v in got}) == len(got)
    for label, v in got:
        moved = set(v.differences())
        if label.startswith("preset-"):  # a whole preset (it moves some switch of the entry)
            assert v in PRESETS.values() and moved & set(e.switches), label
            continue
        assert moved <= set(e.switches) | {"embedding_norm"}, (label, moved)  # the embedding's norm base
        if label.startswith("switch-epsilon-"):
            assert v.epsilon in EPSILONS and v.epsilon > 0
        elif label.startswith("switch-"):
            name_value = label[len("switch-"):]
            assert any(name_value == f"{s}-{str(getattr(v, s)).lower()}" for s in moved), label
    updates = any(s.kind == Kind.RATE for s in e.inputs)
    # every preset that moves a switch the entry reads under that preset (a causal self-attention reads ε and
    # the gain under QK-norm alone: Entry.read_with), and no other
    presets = {f"preset-{p}" for p, v in PRESETS.items()
               if v != PAPER and (set(v.differences()) - e.unread(v)) & e.switches}
    assert (set(labels) & presets) == (set() if updates else presets)


def test_the_layers_move_every_switch_of_theirs_alone_and_the_whole_models_the_wiring():
    for name in ("encoder_layer", "decoder_layer", "bert_layer", "gpt2_layer"):
        moved = {s for label, v in variant_enumeration(name) if label.startswith("switch-") for s in v.differences()}
        assert moved == set(REGISTRY[name].switches) - {"empty_query"}, name
        for s in moved - {"epsilon"}:
            values = {getattr(v, s) for label, v in variant_enumeration(name) if label.startswith("switch-")}
            twins = {c for (sw, c) in SAME_MATHEMATICS if sw == s}  # rounding-only values: not enumerated
            assert set(SWITCHES[s].choices) - {SWITCHES[s].paper} - twins <= values, (name, s)
            assert not twins & values, (name, s)
    single = {label for label, _ in variant_enumeration("d_transformer") if label.startswith("switch-")}
    assert "switch-norm_placement-pre" in single and "switch-activation-relu" not in single
    assert any(label.startswith("combination-") for label, _ in variant_enumeration("d_transformer"))
    assert [label for label, _ in variant_enumeration("d_sgd_step")] == ["paper"]


def test_kinds_are_an_enum_that_still_compares_with_strings():
    assert Kind.TOKEN == "token" and f"{Kind.MASK}" == "mask" and Kind("real") is Kind.REAL
    spec = TensorSpec("x", ("d",), "token")
    assert spec.kind is Kind.TOKEN and not spec.is_real
    assert TensorSpec("u", (), Kind.VARIATE).is_real
    with pytest.raises(ValueError, match="not one of"):
        TensorSpec("x", ("d",), "tokens")
    kinds = {s.kind for e in REGISTRY.values() for s in (*e.inputs, *e.outputs)}
    assert all(type(k) is Kind for k in kinds)


def test_entries_take_keyword_arguments_and_declare_sizes_for_every_hyperparameter():
    e = REGISTRY["layer_norm"]
    fields = {f.name: getattr(e, f.name) for f in dataclasses.fields(Entry)}
    with pytest.raises(TypeError):
        Entry(*fields.values())  # positional: refused
    assert dataclasses.replace(e) == e
    with pytest.raises(ValueError, match="sizes"):
        dataclasses.replace(e, sizes={"d_e": 3})


def test_the_spec_refuses_a_built_case_only_where_it_should():
    # an ε-free layer norm of a width-1 column: the builder cannot make that legal, the spec says so
    inputs, params = build("layer_norm", {"d_e": 1, "ell": 2})
    with pytest.raises(SpecError):
        evaluate("layer_norm", {k: v.tolist() for k, v in inputs.items()},
                 {k: v.tolist() for k, v in params.items()}, hyper={"d_e": 1, "ell": 2})
