"""Screening lanes (tolerances.SCREEN_LANES, docs/tolerances.md "Screening lanes"): a search judges
each value set first against a bound from 8 Monte Carlo lanes, and only an output beyond it against
the value set's own 32-lane reference, the one its case file replays.

The argument rests on one property, tested here directly: the bound over a subset of the lanes is
never larger than the bound over all of them. The runner's side is tested on plugins whose error is
set to a fraction of the 32-lane bound: below it they pass (after the screen sent them to the
full lanes), above it they fail."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ftspec.conformance.core.dtypes import FORMATS
from ftspec.conformance.core.tolerances import LANES, SAFETY, SCREEN_LANES, output_bound, reference
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.discovery import load
from ftspec.spec.registry import entry

from ..support import counted_confirmations

NUMPY = load("numpy")


def _spread(arr: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        s = np.max(np.abs(arr[..., 1:] - arr[..., :1]), axis=-1)
    return np.where(np.isnan(s), 0.0, s)


#: lane values: ordinary, subnormal, zero, huge, and the special values the bound must survive
_VALUE = st.one_of(st.floats(-1e3, 1e3), st.floats(-1e-40, 1e-40), st.just(0.0), st.floats(-1e300, 1e300),
                   st.sampled_from([np.nan, np.inf, -np.inf, 5e-324, 2.0**-25]))


@settings(max_examples=150, deadline=None)
@given(dtype=st.sampled_from(sorted(FORMATS)), scale=st.sampled_from(["linear", "log"]),
       lane0=_VALUE, offsets=st.lists(st.one_of(st.floats(-1e-3, 1e-3), _VALUE), min_size=LANES, max_size=LANES),
       relative=st.booleans())
def test_the_bound_over_a_subset_of_lanes_never_exceeds_the_bound_over_all(dtype, scale, lane0, offsets, relative):
    """The screen's soundness: an output within the 8-lane bound is within the bound of any 32
    lanes that include those 8 (the lanes are independent and identically distributed, so the 8
    are distributed as the first 8 of 32). Linear and log scale, the output's own rounding, lanes
    equal to lane 0 (spread 0), subnormal, zero and non-finite values. Lanes that turn NaN beside
    a finite lane 0 are outside the bound's domain (``_bounded`` raises ToleranceModelError first:
    the value set is unmodelled, never judged)."""
    lanes = [lane0 + (o * lane0 if relative else o) for o in offsets]
    arr = np.array([[lane0, *lanes]], dtype=np.float64)
    assume(not (np.isfinite(lane0) and np.isnan(arr[0, 1:]).any()))
    value = arr[:, 0]
    safety = SAFETY[dtype]
    for k in (1, SCREEN_LANES, LANES - 1):
        few = arr[:, :k + 1]
        with np.errstate(all="ignore"):
            small = output_bound(value, few, _spread(few), safety=safety, dtype=dtype, scale=scale)
            full = output_bound(value, arr, _spread(arr), safety=safety, dtype=dtype, scale=scale)
        assert not (small > full).any(), (k, small, full)


def test_the_screen_is_fewer_lanes_than_a_case_file_replays():
    assert 1 <= SCREEN_LANES < LANES


def _offset_plugin(name: str, fraction: float):
    """The NumPy plugin, with every real output of ``name`` moved from the spec's binary64 value by
    ``fraction`` of its 32-lane bound (the reference its case file replays)."""
    e = entry(name)

    def one(inputs, params, ctx):
        ref = reference(e, inputs, {k: np.asarray(v) for k, v in params.items()}, hyper=ctx.hyper,
                        variant=ctx.variant, dtype=ctx.dtype)
        return {k: ref.outputs[k] + fraction * ref.bound[k] for k in ref.outputs}

    def shifted(inputs, params, ctx):
        inputs = {k: np.asarray(v) for k, v in inputs.items()}
        if inputs["X"].ndim == 2:
            return one(inputs, params, ctx)
        each = [one({k: v[b] for k, v in inputs.items()}, params, ctx) for b in range(len(inputs["X"]))]
        return {k: np.stack([o[k] for o in each]) for k in each[0]}  # a batch: each input set alone

    return dataclasses.replace(NUMPY, name=f"offset-{fraction}", algorithms={name: shifted})


def _search(tmp_path, plugin, monkeypatch, examples: int = 48):
    confirmed = counted_confirmations(monkeypatch)
    r = Runner([(plugin.name, plugin)], RunConfig(seed=1, case_dir=tmp_path / "cases", examples=examples, block=8))
    r.distinct_failures = 0
    (cell,) = r.run(["layer_norm"], ["float64"]).cells
    return cell, confirmed


def test_an_error_beyond_the_screen_but_within_the_full_bound_passes(tmp_path, monkeypatch):
    """0.7 of the 32-lane bound: beyond the 8-lane screen on some element of most value sets (its
    spread is smaller), so the runner judges them again on all the lanes, where they pass."""
    cell, confirmed = _search(tmp_path, _offset_plugin("layer_norm", 0.7), monkeypatch)
    assert confirmed, "no value set went beyond the screen: the test shows nothing"
    assert cell.status == "pass", cell.failure
    assert cell.examples >= 48


@pytest.mark.parametrize("fraction", [1.05, 2.0])
def test_an_error_beyond_the_full_bound_fails(tmp_path, monkeypatch, fraction):
    """Just beyond the 32-lane bound: the screen sends it on, and the full lanes fail it."""
    cell, confirmed = _search(tmp_path, _offset_plugin("layer_norm", fraction), monkeypatch)
    assert cell.status == "fail" and cell.failure.check == "spec", cell.status
    assert confirmed


def test_the_reference_forensics_take_after_a_search_has_all_its_lanes(tmp_path):
    """The search's screened references are cached beside the full ones, never in their place:
    ``reference_for`` (first divergence, the distinct failures) gives the 32-lane bound."""
    r = Runner([("numpy", NUMPY)], RunConfig(seed=0, case_dir=tmp_path / "cases", examples=16, block=8))
    r.run(["layer_norm"], ["float32"])
    from ftspec.conformance.core.case import Case
    from ftspec.conformance.core.examining import rounded

    e = entry("layer_norm")
    case = Case.build("layer_norm", seed=5, dtype="float32")
    prepared = rounded(case, "float32")
    (screened,) = r.references_for(e, [prepared], case, "float32", "highest")  # the screen first, then the full
    got = r.reference_for(e, prepared, case, "float32", "highest")
    want = reference(e, prepared.inputs, prepared.params, hyper=case.hyper, variant=case.variant, dtype="float32")
    for k in want.bound:
        assert np.array_equal(got.bound[k], want.bound[k])
    assert any(not np.array_equal(screened.bound[k], want.bound[k]) for k in want.bound)  # not the same lanes
