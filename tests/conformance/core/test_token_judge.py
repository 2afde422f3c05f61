"""The sampled-token judge (conformance/core/token_judge.py), through the harness's
own entry point: ``tolerances.reference`` builds it for entries with sampled
outputs, ``judge`` applies it.

Claims: the spec's token is accepted and any other rejected when u is far
from every CDF boundary; within rounding of a boundary (the dtype's, times
the safety factor) both neighbours are accepted and the step is counted as
ambiguous, and only there; τ = 0 is argmax with ties to the lowest ID; τ = ∞
is ⌊u·N_V⌋, with the same allowance at the boundaries v/N_V.

The CDF boundaries below are computed here with exact rationals (for τ = 1,
c_v = Σ_{w≤v} p_w / Σ p), not read from the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec import PAPER, evaluate
from ftspec.spec.registry import REGISTRY

SAMPLE = REGISTRY["sample"]
#: float32 values (exact in both dtypes), not normalised: the spec normalises
P = [float(np.float32(v)) for v in (0.3, 0.2, 0.5, 0.7)]


def _ref(p, u, tau, dtype):
    inputs = {"p": np.asarray(p, dtype=np.float64), "u": np.asarray(float(u)), "tau": np.asarray(float(tau))}
    return reference(SAMPLE, inputs, {}, hyper={"N_V": len(p)}, variant=PAPER, dtype=dtype)


def _verdict(ref, token):
    return ref.sampled({"y": np.array(token, dtype=np.int64)})


def _accepted(ref, n):
    return [t for t in range(n) if _verdict(ref, t).ok]


def _boundary(p, v) -> Fraction:
    """c_v for τ = 1, exactly."""
    return sum(map(Fraction, p[: v + 1])) / sum(map(Fraction, p))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("tau", [0.7, 1.0, 2.5])
@pytest.mark.parametrize("u", [0.05, 0.4, 0.93])
def test_far_from_a_boundary_only_the_specs_token_is_accepted(dtype, tau, u):
    u = float(np.float32(u))
    want = evaluate("sample", {"p": P, "u": u, "tau": tau})["y"]
    ref = _ref(P, u, tau, dtype)
    assert _accepted(ref, len(P)) == [want]
    right = _verdict(ref, want)
    assert right.ok and right.ambiguous == 0
    for wrong in set(range(len(P))) - {want}:
        j = _verdict(ref, wrong)
        assert not j.ok and j.findings[0].check == "sampling"
        assert f"produced token {wrong}" in j.findings[0].message and f"[{want}]" in j.findings[0].message


def test_the_judge_applies_it_and_rejects_a_wrong_token():
    u = float(np.float32(0.4))
    ref = _ref(P, u, 1.0, "float32")
    want = evaluate("sample", {"p": P, "u": u, "tau": 1.0})["y"]
    assert judge(SAMPLE, {"y": np.array(want)}, ref).ok
    j = judge(SAMPLE, {"y": np.array((want + 2) % len(P))}, ref)
    assert not j.ok and [f.check for f in j.findings] == ["sampling"]


def test_at_float64_both_sides_only_within_rounding_of_the_boundary():
    c1 = _boundary(P, 1)  # between tokens 1 and 2
    at = float(c1)  # the nearest double: within rounding of the boundary
    ref = _ref(P, at, 1.0, "float64")
    assert _accepted(ref, len(P)) == [1, 2] and _verdict(ref, 2).ambiguous == 1
    for offset, side in ((-1e-12, 1), (1e-12, 2)):  # ~10⁴ units of rounding away: one side only
        assert _accepted(_ref(P, float(c1) + offset, 1.0, "float64"), len(P)) == [side]


def test_at_float32_both_sides_within_rounding_and_one_side_beyond():
    c1 = _boundary(P, 1)
    f = np.float32(float(c1))
    if Fraction(float(f)) < c1:  # the two float32 neighbours of c_1
        below, above = float(f), float(np.nextafter(f, np.float32(1)))
    else:
        below, above = float(np.nextafter(f, np.float32(0))), float(f)
    assert Fraction(below) < c1 < Fraction(above)
    for u in (below, above):
        ref = _ref(P, u, 1.0, "float32")
        assert _accepted(ref, len(P)) == [1, 2], f"u = {u!r} is within float32 rounding of c_1 = {float(c1)!r}"
    # a float32 variate 10⁻⁴ away is far beyond float32's rounding (u = 6e-8): one side only
    for offset, side in ((-1e-4, 1), (1e-4, 2)):
        u = float(np.float32(float(c1) + offset))
        assert _accepted(_ref(P, u, 1.0, "float32"), len(P)) == [side]
    # the same variate at float64 is decided: only the spec's side
    assert _accepted(_ref(P, below, 1.0, "float64"), len(P)) == [1]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tau_zero_is_argmax_with_ties_to_the_lowest_id(dtype):
    tie = [0.25, 0.5, 0.125, 0.5]
    ref = _ref(tie, 0.9, 0.0, dtype)
    assert evaluate("sample", {"p": tie, "u": 0.9, "tau": 0.0})["y"] == 1
    assert _accepted(ref, 4) == [1]
    j = _verdict(ref, 3)
    assert not j.ok and "ties to the lowest ID" in j.findings[0].message
    # one float32 step above the tie: the later ID is the argmax, and only it
    ahead = list(tie)
    ahead[3] = float(np.nextafter(np.float32(0.5), np.float32(1)))
    assert _accepted(_ref(ahead, 0.9, 0.0, dtype), 4) == [3]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tau_inf_is_floor_u_times_n_and_boundaries_accept_both(dtype):
    p = [0.25, 0.5, 0.125, 0.5]
    assert _accepted(_ref(p, 0.3, math.inf, dtype), 4) == [1]  # ⌊0.3·4⌋
    assert _accepted(_ref(p, 0.5, math.inf, dtype), 4) == [1, 2]  # exactly v/N_V = 2/4
    assert _accepted(_ref(p, 0.45, math.inf, dtype), 4) == [1]


def test_a_cdf_value_lost_in_some_lanes_keeps_a_margin_from_the_others():
    # A lane that met NaN (finite in binary64) once made the margin 0, and a token that rounding
    # moves across that boundary was refused (tests/conformance/core/false_failures/sampling).
    from ftspec.conformance.core.rounding import Lanes, MonteCarloNumbers
    from ftspec.conformance.core.token_judge import _acceptable

    ns = MonteCarloNumbers(u=2.0**-24, eta=2.0**-149, lanes=3, transcendental_units=2.0, seed=1, mantissa_bits=24)

    def lanes(*x):
        return Lanes(np.array(x, dtype=float), ns)

    eps = 1e-6
    cdf = [lanes(0.5, 0.5 + eps, math.nan, 0.5 - 2 * eps), lanes(1.0, 1.0, 1.0, 1.0)]
    u = 0.5 + 2 * eps  # beyond c_0 by less than SAFETY × the other lanes' spread (2e-6)
    ok, _ = _acceptable({"kind": "cdf", "values": cdf, "u": u, "token": 0}, 3, 2.0, 2.0**-24)
    assert ok == [0, 1]
    far = 0.5 + 10 * eps  # beyond it: only the spec's token
    ok, _ = _acceptable({"kind": "cdf", "values": cdf, "u": far, "token": 1}, 3, 2.0, 2.0**-24)
    assert ok == [1]
    lost = [lanes(0.5, math.nan, math.nan, math.nan), lanes(1.0, 1.0, 1.0, 1.0)]
    ok, where = _acceptable({"kind": "cdf", "values": lost, "u": 0.9, "token": 0}, 3, 2.0, 2.0**-24)
    assert ok == [0, 1] and "inf" in where  # lost in every lane: no bound, never 0
