"""Blocks of value sets (conformance/core/blocks.py, tolerances.references): one evaluation of the
spec carries several examples, each judged as if evaluated alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ftspec.conformance.core import tolerances
from ftspec.conformance.core.blocks import block_size, value_sets
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.dtypes import round_to
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.rounding import Lanes, MonteCarloNumbers
from ftspec.conformance.core.tolerances import Reference, reference, references
from ftspec.conformance.running import reference_cache
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.discovery import load
from ftspec.spec import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, entry
from ftspec.spec.variants import PAPER

from ..support import counted_confirmations

NUMPY = load("numpy")


def _rounded(case: Case, dtype: str) -> tuple[dict, dict]:
    inputs = {k: (round_to(v, dtype) if v.dtype.kind == "f" else v) for k, v in case.inputs.items()}
    return inputs, {k: round_to(v, dtype) for k, v in case.params.items()}


def test_a_block_is_its_case_then_value_sets_of_the_same_structure():
    head = Case.build("mh_attention", seed=3, dtype="float32")
    block = value_sets(head, 5, "float32")
    assert len(block) == 5 and block[0] is head
    again = value_sets(head, 5, "float32")
    e = entry("mh_attention")
    for a, b in zip(block[1:], again[1:]):  # deterministic: the same case gives the same block
        assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    for c in block[1:]:
        assert (c.hyper, c.variant, c.style) == (head.hyper, head.variant, head.style)
        for s in e.inputs:
            same = np.array_equal(c.inputs[s.name], head.inputs[s.name])
            assert same == (s.kind != Kind.REAL), s.name  # masks shared, reals drawn anew
        assert not any(np.array_equal(c.params[k], head.params[k]) for k in c.params)
    assert len({block[i].params["W_o"].tobytes() for i in range(5)}) == 5


def test_entries_with_sampled_outputs_or_nothing_to_vary_get_blocks_of_one():
    assert block_size(entry("sample"), 8) == 1  # judged against traced distributions
    assert block_size(entry("unidirectional_mask"), 8) == 1
    assert block_size(entry("layer_norm"), 8) == 8 and block_size(entry("layer_norm"), 1) == 1
    assert len(value_sets(Case.build("d_inference", seed=1), 8, "float64")) == 1


#: every entry a block serves, at two sizes of block
BLOCKED = [name for name, e in REGISTRY.items() if block_size(e, 2) > 1
           and e.family not in ("training",)] + ["d_loss", "e_gradient", "d_sgd_step"]


@pytest.mark.parametrize("name", BLOCKED)
def test_a_block_gives_each_value_set_its_own_reference(name):
    """The binary64 values are those of the value set alone, bit for bit (through a backward pass,
    within ``LANE_F_MARGIN`` of the bound: ``test_a_backward_pass_takes_lane_f_below_float64``);
    its exact elements (spread 0) are the same; its range verdict is the same; and its spread is
    its own, not another value set's: per value set, the median ratio to the spread evaluated
    alone is near 1 (the draws differ, the distribution does not)."""
    dtype = "float32"
    head = Case.build(name, seed=2, dtype=dtype)
    block = value_sets(head, 4, dtype)
    sets = [_rounded(c, dtype) for c in block]
    got = references(entry(name), sets, hyper=head.hyper, variant=head.variant, dtype=dtype)
    backward = tolerances._differentiates(entry(name))
    ratios = []
    for (inputs, params), r in zip(sets, got):
        alone = reference(entry(name), inputs, params, hyper=head.hyper, variant=head.variant, dtype=dtype)
        assert isinstance(r, Reference)
        assert r.in_range == alone.in_range and r.max_intermediate == pytest.approx(alone.max_intermediate, rel=1e-12)
        for k in alone.outputs:
            if backward:
                assert (np.abs(r.outputs[k] - alone.outputs[k]) <= tolerances.LANE_F_MARGIN * r.bound[k]).all(), k
            else:
                assert np.array_equal(r.outputs[k], alone.outputs[k], equal_nan=True), k
            assert np.array_equal(r.spread[k] == 0, alone.spread[k] == 0), k
            live = alone.spread[k] > 0
            if live.sum() >= 4:
                ratios.append(float(np.median(r.spread[k][live] / alone.spread[k][live])))
    if ratios:
        assert 0.6 < float(np.median(ratios)) < 1.6, ratios


def test_a_value_set_the_spec_refuses_leaves_the_others_their_references():
    """layer norm without ε refuses a zero-variance column: that value set gets the refusal it
    gets alone, the others their references."""
    e = entry("layer_norm")
    head = Case.build("layer_norm", seed=1, dtype="float64")  # the paper's: no ε
    assert head.variant == PAPER
    block = value_sets(head, 4, "float64")
    sets = [_rounded(c, "float64") for c in block]
    flat = dict(sets[2][0])
    flat["X"] = flat["X"].copy()
    flat["X"][:, 0] = 0.5  # column 0 constant
    sets[2] = (flat, sets[2][1])
    how = dict(hyper=head.hyper, variant=head.variant, dtype="float64")
    want = []
    for inputs, params in sets:
        try:
            want.append(reference(e, inputs, params, **how))
        except SpecError as exc:
            want.append(exc)
    got = references(e, sets, **how)
    assert [type(x) for x in got] == [type(x) for x in want]
    for a, b in zip(got, want):
        if isinstance(b, Reference):
            assert all(np.array_equal(a.outputs[k], b.outputs[k]) for k in b.outputs)


def test_largest_takes_each_value_sets_own_maximum():
    mc = MonteCarloNumbers(u=2.0**-24, eta=2.0**-149, lanes=3, values=2)
    w = mc.width
    z = [Lanes(np.repeat([a, b], w).astype(float), mc) for a, b in ((1.0, 5.0), (3.0, 2.0), (3.0, 5.0))]
    top = mc.largest(z)
    assert list(top.x[::w]) == [3.0, 5.0]  # value set 0: entry 1 (the first 3); value set 1: entry 0
    single = MonteCarloNumbers(u=2.0**-24, eta=2.0**-149, lanes=3)
    zs = [single.num(x) for x in (1.0, 3.0, 3.0)]
    assert single.largest(zs) is zs[1]  # one value set: Python's max itself


def _runner(tmp_path, block: int, examples: int, plugin=NUMPY, label="numpy", seed=0) -> Runner:
    r = Runner([(label, plugin)], RunConfig(seed=seed, case_dir=tmp_path / "cases", examples=examples, block=block))
    r.distinct_failures = 0
    return r


def test_every_value_set_is_counted_as_one_example(tmp_path):
    result = _runner(tmp_path, 8, 256).run(["layer_norm"], ["float32"])
    (cell,) = result.cells
    assert cell.status == "pass"
    assert cell.examples == result.generated[("layer_norm", "float32")] >= 256
    assert cell.checks["spec"] == cell.examples


def test_a_bug_in_some_value_sets_fails_and_its_case_fails_alone(tmp_path):
    """A plugin wrong only where W_q's first entry is positive (about half the value sets): the
    failing case named is one value set, and replayed alone (its reference evaluated alone) it
    fails."""
    base = NUMPY.algorithms["attention"]

    def wrong(inputs, params, ctx):
        out = base(inputs, params, ctx)
        if float(np.asarray(params["W_q"]).flat[0]) > 0:
            return {k: np.asarray(v) * 1.01 for k, v in out.items()} if isinstance(out, dict) else out * 1.01
        return out

    plugin = dataclasses.replace(NUMPY, name="half", algorithms={**NUMPY.algorithms, "attention": wrong})
    result = _runner(tmp_path, 8, 256, plugin, "half").run(["attention"], ["float64"])
    (cell,) = result.cells
    assert cell.status == "fail" and cell.failure.check == "spec"
    case = cell.failure.case
    assert float(case.params["W_q"].flat[0]) > 0
    inputs, params = _rounded(case, "float64")
    alone = reference(entry("attention"), inputs, params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member("half", plugin, "cpu"), case, inputs, params, alone, dtype="float64", timeout=60.0)
    assert not outcome.judgement.ok


def _zero_bounds_on_value_set_1(e, sets, **kw):
    """``tolerances.references`` with a bound of 0 on value set 1 of each block (any rounding fails)."""
    out = tolerances.references(e, sets, **kw)
    if len(out) > 1 and isinstance(out[1], Reference):
        out[1] = dataclasses.replace(out[1], bound={k: np.zeros_like(v) for k, v in out[1].bound.items()})
    return out


def test_a_block_failure_that_passes_alone_is_no_failure(tmp_path, monkeypatch):
    """Block and alone differ only in the Monte Carlo draws; a verdict must reproduce from the
    case file, so a failure against the block's bound is confirmed against the bound alone."""
    confirmed = counted_confirmations(monkeypatch)
    monkeypatch.setattr(reference_cache, "references", _zero_bounds_on_value_set_1)
    result = _runner(tmp_path, 4, 128).run(["mh_attention"], ["float32"])
    (cell,) = result.cells
    assert confirmed, "no block failure to confirm: the test shows nothing"
    assert cell.status == "pass" and cell.examples >= 16


def test_a_block_failure_that_cannot_be_bounded_alone_is_unmodelled_not_a_failure(tmp_path, monkeypatch):
    """`make run` of 2026-12-06: NumPy's ed_transformer at float16 returned NaN (a near-epsilon
    RMS norm, ε = 0: the mean square underflows to 0 in float16) where a block's lanes stayed
    finite; alone, the value set's lanes turn NaN too (ToleranceModelError), so its case file
    cannot judge it and the failure did not reproduce. Such a value set is counted unmodelled,
    as a block's own ToleranceModelError is."""
    confirmed = []

    def unbounded(self, *args):  # alone, the lanes cannot bound it
        confirmed.append(args)
        return None

    monkeypatch.setattr(reference_cache, "references", _zero_bounds_on_value_set_1)
    monkeypatch.setattr(Runner, "alone", unbounded)
    result = _runner(tmp_path, 4, 128).run(["mh_attention"], ["float32"])
    (cell,) = result.cells
    assert confirmed, "no block failure to confirm: the test shows nothing"
    assert cell.status == "pass", cell.failure
    assert result.unmodelled[("mh_attention", "float32")] == len(confirmed)


#: forward entries (no backward pass: their blocks take the binary64 values from lane F)
FORWARD = [name for name in BLOCKED if not tolerances._differentiates(entry(name))]
#: entries whose blocks never share an evaluation: each value set takes its own discrete choice (the
#: router's top k), so a block splits there and each value set is evaluated alone (``_block`` None)
SPLIT_BY_VALUES = frozenset({"moe_mlp"})


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("name", FORWARD)
def test_lane_f_is_the_spec_in_float_bit_for_bit_in_every_style(name, dtype):
    """Where a block takes the binary64 values from its lane F (correctly rounded sums, the
    ``FLOAT`` library functions, branches on lane F), they are ``FLOAT``'s own, bit for bit, in
    every style (large logits, near-constant columns, wide ranges, sparse weights), variant
    sets included; no value set may be left to a fallback where the test means lane F."""
    from ftspec.conformance.core.strategies import available_styles
    from ftspec.conformance.core.strategies._variants import preset_projections
    from ftspec.spec import evaluate

    e = entry(name)
    checked = 0
    for k, variant in enumerate([PAPER] + preset_projections(e)[:2]):
        head0 = Case.build(name, variant=variant, seed=k, dtype=dtype)
        for style in available_styles(e, variant, head0.hyper, dtype):
            head = Case.build(name, head0.hyper, variant, seed=k + 7, style=style, dtype=dtype)
            sets = [_rounded(c, dtype) for c in value_sets(head, 3, dtype)]
            shared = tolerances._block(e, sets, None, hyper=head.hyper, variant=variant, dtype=dtype,
                                       precision="highest")
            if shared is None:  # refused or branched apart: the fallback evaluates FLOAT itself
                checked += name in SPLIT_BY_VALUES
                continue
            assert name not in SPLIT_BY_VALUES, f"{name}'s block shared its evaluation: update SPLIT_BY_VALUES"
            for (inputs, params), r in zip(sets, shared):
                if r is None:  # its lanes cannot bound it (a √ of an underflowing variance): refused alone too
                    continue
                want = evaluate(name, {k2: v.tolist() for k2, v in inputs.items()},
                                {k2: v.tolist() for k2, v in params.items()}, hyper=head.hyper, variant=variant)
                for out in r.outputs:
                    assert np.array_equal(r.outputs[out], np.asarray(want[out], dtype=np.float64),
                                          equal_nan=True), (style, variant.describe(), out)
                checked += 1
    assert checked >= 3, "lane F was never used: the test shows nothing"  # (or, split, no block was tried)


BACKWARD = ["d_gradient", "e_sgd_step"]


@pytest.mark.parametrize("name", BACKWARD)
def test_a_backward_pass_takes_lane_f_below_float64(name):
    """Through a backward pass lane F is a binary64 value of the spec but not ``FLOAT``'s bits (its
    adjoints are summed in another order). Below float64 a block takes it, every bound narrowed
    by ``LANE_F_MARGIN``, which must hold its distance from ``FLOAT``'s value, so that an output
    within the narrowed bound of lane F is within the bound of ``FLOAT``'s; at float64 each value
    set's values are ``FLOAT``'s own, bit for bit. Lane F must really be taken: some value
    differs from ``FLOAT``'s in its last bits (else the test shows nothing)."""
    from ftspec.spec import evaluate

    e = entry(name)
    differing = 0
    for dtype in ("float32", "bfloat16", "float64"):
        head = Case.build(name, seed=5, dtype=dtype)
        sets = [_rounded(c, dtype) for c in value_sets(head, 3, dtype)]
        got = references(e, sets, hyper=head.hyper, variant=head.variant, dtype=dtype, lanes=tolerances.SCREEN_LANES)
        for (inputs, params), r in zip(sets, got):
            assert isinstance(r, Reference), r
            want = evaluate(name, {k: v.tolist() for k, v in inputs.items()},
                            {k: v.tolist() for k, v in params.items()}, hyper=head.hyper, variant=head.variant)
            for out in r.outputs:
                exact = np.asarray(want[out], dtype=np.float64)
                if dtype == "float64":
                    assert np.array_equal(r.outputs[out], exact, equal_nan=True), out
                    continue
                gap = np.abs(r.outputs[out] - exact)
                assert (gap <= tolerances.LANE_F_MARGIN * r.bound[out]).all(), (dtype, out, float(np.max(gap)))
                differing += int((gap > 0).any())
    assert differing, "lane F gave FLOAT's bits everywhere: the test shows nothing"


def test_a_backward_pass_through_silu_of_both_signs_shares_one_evaluation(monkeypatch):
    """SiLU takes one of two forms by the sign of its argument, per value set in a block
    (``PerValueSign``). Through a backward pass (``GradNumbers.by_sign``) a block whose value sets
    take both forms at one element is still evaluated once, not split into value sets alone:
    each value set's gradient is ``FLOAT``'s within ``LANE_F_MARGIN`` of its bound, and its
    spread is its own (median ratio to the spread evaluated alone near 1). The selections must
    really be taken (else the test shows nothing)."""
    from ftspec.spec import autodiff, evaluate

    chosen = []
    real_init = autodiff._Selected.__init__

    def counted(self, *args):
        chosen.append(1)
        real_init(self, *args)

    monkeypatch.setattr(autodiff._Selected, "__init__", counted)
    name, dtype = "e_gradient", "float32"
    e = entry(name)
    variant = dataclasses.replace(PAPER, activation="silu")
    head = Case.build(name, variant=variant, seed=4, dtype=dtype)
    sets = [_rounded(c, dtype) for c in value_sets(head, 6, dtype)]
    shared = tolerances._block(e, sets, None, hyper=head.hyper, variant=variant, dtype=dtype, precision="highest")
    assert shared is not None and all(r is not None for r in shared), "the block was split"
    assert chosen, "no element took both forms: the test shows nothing"
    ratios = []
    for (inputs, params), r in zip(sets, shared):
        want = evaluate(name, {k: v.tolist() for k, v in inputs.items()},
                        {k: v.tolist() for k, v in params.items()}, hyper=head.hyper, variant=variant)
        alone = reference(e, inputs, params, hyper=head.hyper, variant=variant, dtype=dtype)
        for out in r.outputs:
            gap = np.abs(r.outputs[out] - np.asarray(want[out], dtype=np.float64))
            assert (gap <= tolerances.LANE_F_MARGIN * r.bound[out]).all(), out
            live = (alone.spread[out] > 0) & (r.spread[out] > 0)
            if live.sum() >= 4:
                ratios.append(float(np.median(r.spread[out][live] / alone.spread[out][live])))
    assert ratios and 0.6 < float(np.median(ratios)) < 1.6, ratios
