"""Float mode agrees with mpmath mode within binary64 rounding, for every
registry entry.

For each entry, random small inputs and parameters (one or two layers,
widths 2-5) under the paper's variant set and every preset: evaluate in
binary64 (``FLOAT``), in ``TrackedNumbers`` (the same binary64 values plus a
rigorous first-order error coefficient e per element) and in
``MpNumbers(40)`` (the exact answer to ~40 digits). The theorem:

    |float − float(mp)| ≤ 2·u·e + η·(a + 1),   u = 2⁻⁵³, η = 2⁻¹⁰⁷⁴,

since |float − exact| ≤ u·e (+ η·a for underflow) to first order and
rounding the exact value to binary64 adds ≤ u·|exact| ≤ u·e (every rounded
result adds its own magnitude to e); the factor 2 also covers the
neglected second-order terms. Also: the tracked values are the binary64
values, bit for bit (docs/spec.md, Number systems).

Observed (3339 cases: every entry, the paper and all presets, seeds 0..7,
L = 1 and 2; 34245 elements with e > 0): the largest ratio
|float − float(mp)| / (u·e) was 0.39 (``embedding`` under ``thickstun-002``,
where Vaswani sinusoid values dominate e and the bound allows 4 units per
sin/cos); the median over elements with any error is 1.6e-4, as expected of
a worst-case-order bound against fsum's correctly rounded sums. A failure
here is a gap between the spec's float mode and its own error analysis.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import MpNumbers, SpecError, evaluate
from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, PRESETS

from .helpers import ETA, FAST, FORWARD, U, evaluate_three, flat_params, leaves, random_inputs, small_hyper

VARIANTS = [PAPER] + [v for k, v in sorted(PRESETS.items()) if k != "phuong-hutter"]


@pytest.mark.parametrize("name", sorted(FORWARD))
@FAST
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(VARIANTS), L=st.integers(1, 2))
def test_float_agrees_with_mpmath_within_rounding(name, seed, variant, L):
    e = REGISTRY[name]
    hyper = small_hyper(e, L=L, L_enc=L, L_dec=L)
    inputs = random_inputs(e, hyper, seed)
    params = flat_params(e, hyper, variant, seed)
    try:
        f, t, m = evaluate_three(name, inputs, params, hyper, variant)
    except SpecError as err:
        # A legitimate refusal (e.g. ReLU zeroing a whole column before a
        # no-ε norm under compact-000) must be the same in exact arithmetic.
        with pytest.raises(SpecError) as exact:
            evaluate(name, inputs, params, hyper=hyper, variant=variant, numbers=MpNumbers(40))
        assert exact.value.argument == err.argument
        return
    for out in e.outputs:
        fs, ts, ms = list(leaves(f[out.name])), list(leaves(t[out.name])), list(leaves(m[out.name]))
        assert len(fs) == len(ts) == len(ms) > 0
        if out.kind != Kind.REAL:  # the mask: exact in every arithmetic
            assert fs == ts == ms
            continue
        for i, (x, tx, mx) in enumerate(zip(fs, ts, ms)):
            assert math.isfinite(x)
            assert tx.v.hex() == x.hex(), f"{name}: tracked value differs from float at {i}"
            err = abs(x - float(mx))
            bound = 2 * U * tx.e + ETA * (tx.a + 1)
            assert err <= bound, (
                f"{name} under {variant.describe()}, seed {seed}, element {i}: |float − mp| = {err:.3g} "
                f"> 2·u·e = {bound:.3g} (ratio {err / (U * tx.e) if tx.e else math.inf:.3g})")


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_evaluate_leaves_its_arguments_untouched(name):
    """The harness hands the same arrays to every implementation: evaluating
    the spec (in any number system) must not modify inputs or parameters."""
    import copy

    e = REGISTRY[name]
    hyper = small_hyper(e)
    inputs = random_inputs(e, hyper, 1)
    params = flat_params(e, hyper, PAPER, 1)
    before = copy.deepcopy((inputs, params, hyper))
    evaluate_three(name, inputs, params, hyper, PAPER)
    assert (inputs, params, hyper) == before
