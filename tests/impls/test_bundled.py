"""Each bundled implementation agrees with the spec on fixed small cases.

Every registry entry, under the paper's variant set, each relevant switch
moved to each other value, and the presets. The judgement here is a coarse
float64 check (relative 1e-9): an implementation of the same mathematics in
binary64 differs from the spec by a few units in the last place, while every
real mistake differs by far more. Derived per-dtype tolerances are the
conformance harness's job (tests/conformance).
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.calling import call
from ftspec.impls.discovery import load
from ftspec.spec import evaluate, SpecError
from ftspec.spec.registry import REGISTRY

from .cases import Case, all_cases, make_case

BUNDLED = ("numpy", "torch", "jax")
CASES = list(all_cases())
RTOL, ATOL = 1e-9, 1e-12


def _impl(name: str):
    return load(name)


def _run(impl, case: Case, *, batched: bool = False, inputs=None):
    return call(impl, case.entry, inputs if inputs is not None else case.inputs, case.params,
                hyper=case.hyper, variant=case.variant, dtype="float64", device="cpu", batched=batched)


def _assert_matches(got: np.ndarray, want, label: str) -> None:
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{label}: shape {got.shape}, spec {want.shape}"
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=label)


@pytest.mark.parametrize("impl_name", BUNDLED)
def test_covers_every_algorithm_and_dtype(impl_name):
    impl = _impl(impl_name)
    assert sorted(impl.algorithms) == sorted(REGISTRY), f"{impl_name} misses {sorted(set(REGISTRY) - set(impl.algorithms))}"
    assert {"float64", "float32", "float16"} <= set(impl.dtypes)
    assert impl.variants == "all"
    devices = impl.devices()
    assert devices and len(devices) == len(set(devices))
    assert any(d == "cpu" or d.startswith("cpu:") for d in devices)


@pytest.mark.parametrize("impl_name", BUNDLED)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_agrees_with_spec(impl_name, case):
    impl = _impl(impl_name)
    spec_out = evaluate(case.entry.name, case.spec_inputs(), case.spec_params(),
                        hyper=case.hyper, variant=case.variant)
    got = _run(impl, case)
    for name, want in spec_out.items():
        _assert_matches(got[name], want, f"{impl_name} {case.id} output {name}")


@pytest.mark.parametrize("impl_name", BUNDLED)
@pytest.mark.parametrize("name", [n for n, e in REGISTRY.items() if e.inputs and e.batchable])
def test_batched_call_equals_per_example_calls(impl_name, name):
    impl = _impl(impl_name)
    entry = REGISTRY[name]
    base = make_case(entry, entry_variant(entry))
    other = make_case(entry, entry_variant(entry), seed=7)
    batch = {k: np.stack([base.inputs[k], other.inputs[k]]) for k in base.inputs}
    got = _run(impl, base, batched=True, inputs=batch)
    for i, inputs in enumerate((base.inputs, other.inputs)):
        single = _run(impl, base, inputs=inputs)
        for out in single:
            assert got[out].shape[0] == 2, f"{impl_name} {name}: batched output {out} has shape {got[out].shape}"
            np.testing.assert_allclose(got[out][i], single[out], rtol=1e-12, atol=1e-14,
                                       err_msg=f"{impl_name} {name} batch element {i}")


def entry_variant(entry):
    from ftspec.spec import PAPER
    return PAPER


@pytest.mark.parametrize("impl_name", BUNDLED)
@pytest.mark.parametrize("name", ["attention", "mh_attention"])
def test_empty_query_error_variant_raises(impl_name, name):
    impl = _impl(impl_name)
    case = make_case(REGISTRY[name], entry_variant(REGISTRY[name]), empty_query=True)
    with pytest.raises(SpecError):
        evaluate(name, case.spec_inputs(), case.spec_params(), hyper=case.hyper)
    with pytest.raises(Exception):
        _run(impl, case)
