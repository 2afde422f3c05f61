"""Algorithm 6 (layer norm) and RMSnorm: the defining identities.

With γ = 1, β = 0 layer norm returns a column of mean 0 and (biased)
variance 1, and RMSnorm one of mean square 1; the paper's layer norm (no ε)
and RMSnorm are invariant under scaling the column by a positive constant.

Tolerances come from the spec's own rounding analysis: evaluated in
``TrackedNumbers`` each output ê_i carries e_i with |ê_i − ê*_i| ≤ u·e_i to
first order (ê* the exact value). The statistics of the float outputs are
computed *exactly* here (``fractions.Fraction``), so the only slack is the
propagation of those per-element bounds, doubled for the neglected
second-order terms.
"""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import assume, example, given
from hypothesis import strategies as st

from ftspec.spec import MpNumbers, SpecError, TrackedNumbers, evaluate, layer_norm, rms_norm, using
from ftspec.spec.numbers import Tracked
from ftspec.spec.variants import PAPER, VariantSet

from .helpers import FAST, U, exact_mean, same_bits, to_numbers

#: finite reals in [-3, 3], zero or at least 1e-100 in magnitude: squares and
#: products of these, even scaled by 2^±60, stay clear of the subnormal range.
reals = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False, allow_infinity=False).filter(
    lambda x: x == 0 or abs(x) >= 1e-100)


@st.composite
def columns_(draw, min_size=2, max_size=8):
    e = draw(st.lists(reals, min_size=min_size, max_size=max_size))
    return e


def spread(e: list[float]) -> float:
    return max(e) - min(e)


def tracked(fn, *args, **kw):
    """fn evaluated in TrackedNumbers, its (float or Tracked) arguments converted."""
    T = TrackedNumbers()
    with using(T):
        return fn(*[to_numbers(a, T) for a in args], **kw)


@FAST
@given(columns_())
def test_layer_norm_standardises(e):
    """layer_norm(e | 1, 0) has mean 0 and biased variance 1 (Algorithm 6, lines 1-3)."""
    assume(spread(e) > 1e-3)  # well away from the refused v = 0
    d = len(e)
    ones, zeros = [1.0] * d, [0.0] * d
    y = layer_norm(e, ones, zeros)
    bound = [U * t.e for t in tracked(layer_norm, e, ones, zeros)]
    # |mean(ê) − 0| ≤ mean of the per-element bounds (exact mean is 0)
    mean = exact_mean(y)
    mean_bound = 2 * math.fsum(bound) / d
    assert abs(float(mean)) <= mean_bound, (float(mean), mean_bound)
    # biased variance, computed exactly: |var(ê) − 1| ≤ (1/d) Σ |ê_i² − ê*_i²| + mean²
    var = sum(((Fraction(yi) - mean) ** 2 for yi in y), Fraction(0)) / d
    var_bound = 2 * (math.fsum(2 * abs(yi) * b + b * b for yi, b in zip(y, bound)) / d
                     + mean_bound**2)
    assert abs(float(var - 1)) <= var_bound, (float(var - 1), var_bound)


@FAST
@given(columns_(min_size=1))
def test_rms_norm_has_unit_mean_square(e):
    """rms_norm(e | 1) has mean square 1."""
    assume(max(abs(x) for x in e) > 1e-3)
    d = len(e)
    ones = [1.0] * d
    y = rms_norm(e, ones)
    bound = [U * t.e for t in tracked(rms_norm, e, ones)]
    ms = sum((Fraction(yi) ** 2 for yi in y), Fraction(0)) / d
    ms_bound = 2 * math.fsum(2 * abs(yi) * b + b * b for yi, b in zip(y, bound)) / d
    assert abs(float(ms - 1)) <= ms_bound, (float(ms - 1), ms_bound)


@FAST
@given(columns_(), st.integers(-60, 60))
def test_layer_norm_power_of_two_scaling_is_exact(e, k):
    """layer_norm(2^k e) = layer_norm(e) bit for bit: every step of lines 1-3
    commutes exactly with scaling by a power of two (m, e − m scale by 2^k, v by
    4^k, √v by 2^k), as long as nothing overflows or underflows (|k| ≤ 60)."""
    assume(spread(e) > 1e-3)
    d = len(e)
    g, b = [1.5] * d, [0.25] * d
    assert same_bits(layer_norm([math.ldexp(x, k) for x in e], g, b), layer_norm(e, g, b))


@FAST
@given(columns_(min_size=1), st.integers(-60, 60))
def test_rms_norm_power_of_two_scaling_is_exact(e, k):
    assume(max(abs(x) for x in e) > 1e-3)
    g = [0.75] * len(e)
    assert same_bits(rms_norm([math.ldexp(x, k) for x in e], g), rms_norm(e, g))


@FAST
@given(columns_(), st.floats(min_value=1e-3, max_value=1e3), st.sampled_from(["layer_norm", "rms_norm"]))
def test_norms_are_scale_invariant(e, alpha, kind):
    """norm(α e) = norm(e) for every α > 0, within rounding.

    The scaled input fl(α e_i) is itself rounded: it enters the tracked
    evaluation as Tracked(value, e = |value|), so u·e of the result bounds
    |norm_computed(fl(α e)) − norm*(α e)|, and norm*(α e) = norm*(e)
    exactly; the unscaled evaluation adds its own bound.
    """
    assume(spread(e) > 1e-3 and max(abs(x) for x in e) > 1e-3)
    d = len(e)
    g, b = [1.0] * d, [0.0] * d
    scaled = [alpha * x for x in e]
    if kind == "layer_norm":
        f = lambda v: layer_norm(v, g, b)  # noqa: E731
    else:
        f = lambda v: rms_norm(v, g)  # noqa: E731
    y1, y2 = f(scaled), f(e)
    t1 = tracked(f, [Tracked(x, abs(x)) for x in scaled])
    t2 = tracked(f, e)
    for a, c, ta, tc in zip(y1, y2, t1, t2):
        assert abs(a - c) <= 2 * U * (ta.e + tc.e), (a, c, abs(a - c) / U, ta.e + tc.e)


@FAST
@given(columns_(), st.floats(min_value=0.5, max_value=2.0))
def test_epsilon_breaks_scale_invariance(e, alpha):
    """Control for the test above: with ε = 0.5 inside the root, scaling by
    α ≠ 1 does change the result (so the invariance test can tell)."""
    assume(spread(e) > 0.5 and abs(alpha - 1) > 0.1)
    v = VariantSet(epsilon=0.5, epsilon_placement="inside_root")
    d = len(e)
    y1 = layer_norm([alpha * x for x in e], [1.0] * d, [0.0] * d, variant=v)
    y2 = layer_norm(e, [1.0] * d, [0.0] * d, variant=v)
    assert max(abs(a - c) for a, c in zip(y1, y2)) > 1e-6


@FAST
@given(columns_(), st.sampled_from(["biased", "unbiased"]))
def test_layer_norm_gamma_beta_are_affine(e, variance):
    """ê ⊙ γ + β: the output with (γ, β) is the output with (1, 0), scaled
    and shifted, within the rounding of one product and one sum."""
    assume(spread(e) > 1e-3)
    d = len(e)
    v = PAPER.replace(variance=variance)
    g = [0.5 + i / d for i in range(d)]
    b = [i / 7 - 0.3 for i in range(d)]
    plain = layer_norm(e, [1.0] * d, [0.0] * d, variant=v)
    full = layer_norm(e, g, b, variant=v)
    for p, gi, bi, y in zip(plain, g, b, full):
        assert y == (p * gi) + bi


def test_unbiased_variance_is_the_biased_one_times_d_over_d_minus_1():
    """variance="unbiased" divides by d_e − 1: ê_unbiased = ê_biased · √((d−1)/d)."""
    e = [1.0, 2.0, 4.0, 8.0]
    d = len(e)
    with using(MpNumbers(40)) as N:
        ones, zeros = [N.num(1)] * d, [N.num(0)] * d
        eb = layer_norm([N.num(x) for x in e], ones, zeros)
        eu = layer_norm([N.num(x) for x in e], ones, zeros, variant=PAPER.replace(variance="unbiased"))
        k = N.sqrt(N.num(d - 1) / N.num(d))
        for a, b in zip(eu, eb):
            assert abs(a - b * k) < N.const("1e-35")


def test_norm_registry_entries_act_per_column():
    """The registry's layer_norm / rms_norm act on each column of X separately."""
    X = [[1.0, -2.0, 0.5], [3.0, 1.0, 0.25], [-1.0, 0.0, 2.0]]
    g, b = [1.0, 0.5, 2.0], [0.0, 0.1, -0.2]
    out = evaluate("layer_norm", {"X": X}, {"gamma": g, "beta": b})["X_hat"]
    for t in range(3):
        assert [row[t] for row in out] == layer_norm([row[t] for row in X], g, b)
    out = evaluate("rms_norm", {"X": X}, {"gamma": g})["X_hat"]
    for t in range(3):
        assert [row[t] for row in out] == rms_norm([row[t] for row in X], g)


# --------------------------------------------------------------------------
# never silently wrong: far from 1, the float arithmetic must still either
# agree with the exact norm or refuse (docs/spec.md: "a spec must never
# answer silently wrong"; SpecError for "an output that overflows").
# --------------------------------------------------------------------------


@FAST
@given(columns_(min_size=2, max_size=4), st.integers(-1070, 1020), st.sampled_from(["layer_norm", "rms_norm"]))
@example(e=[1.0, -1.0], k=600, kind="layer_norm")  # v = Σc²/d overflows: the spec returns [0, 0]
@example(e=[1.0, 0.0], k=600, kind="rms_norm")  # likewise: [0, 0] instead of [√2, 0]
def test_norm_of_large_or_tiny_columns_is_right_or_refused(e, k, kind):
    """For any finite column, the paper's norms (no ε) in binary64 either
    raise SpecError or return the exact norm within the spec's own bound.

    By scale invariance norm(2^k e) = norm(e), so the exact answer is known;
    2^k e is exact in binary64 for the k drawn (above the subnormal range
    for the e drawn, or flushing some entries to 0, which the comparison
    accounts for by evaluating the exact norm of the scaled column in
    mpmath)."""
    assume(spread(e) > 0.25 and max(abs(x) for x in e) > 0.25)
    scaled = [math.ldexp(x, k) for x in e]
    assume(any(x != 0 for x in scaled))
    d = len(e)
    g, b = [1.0] * d, [0.0] * d
    name = kind
    params = {"gamma": g, "beta": b} if kind == "layer_norm" else {"gamma": g}
    X = [[x] for x in scaled]
    try:
        got = evaluate(name, {"X": X}, params)["X_hat"]
    except SpecError:
        return  # refusing is allowed
    exact = evaluate(name, {"X": X}, params, numbers=MpNumbers(40))["X_hat"]
    small = evaluate(name, {"X": [[x] for x in e]}, params, numbers=TrackedNumbers())["X_hat"]
    for (y,), (m,), (t,) in zip(got, exact, small):
        assert abs(y - float(m)) <= 2 * U * t.e + 1e-300, (
            f"{kind} of 2^{k}·{e}: float gives {y!r}, exact {float(m)!r}")
