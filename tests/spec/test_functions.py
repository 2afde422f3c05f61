"""Softmax (ALGORITHMS.md, Notation): columns are distributions, and a
constant shift of a column leaves it unchanged.

Rounding budget of softmax in binary64, as the spec evaluates it
(``spec/functions.py``): y_i = fl(ex_i / s) with s = fsum(ex), correctly
rounded. Whatever errors the exponentials make, s is the correctly rounded
sum of the *computed* ex_i, so Σ_i ex_i / s = 1/(1 + δ_s) with |δ_s| ≤ u, and
each quotient adds a relative δ_i ≤ u: |Σ y_i − 1| ≤ 2u + O(u²). Summing the
y_i with math.fsum adds at most u more. Hence the bound 4u used below.
"""

from __future__ import annotations

import math

from hypothesis import assume, given
from hypothesis import strategies as st

from ftspec.spec.functions import softmax, softmax_columns

from .helpers import FAST, U, columns, same_bits

reals = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False, allow_infinity=False)
vectors = st.lists(reals, min_size=1, max_size=8)
#: multiples of 2^-10 in [-3, 3]: adding a shift that is also a multiple of
#: 2^-10 below 64 in magnitude is exact in binary64 (16 significant bits).
grid = st.integers(min_value=-3 * 1024, max_value=3 * 1024).map(lambda k: k / 1024)


@st.composite
def matrices(draw, elements=reals):
    m = draw(st.integers(1, 6))
    n = draw(st.integers(1, 4))
    return [[draw(elements) for _ in range(n)] for _ in range(m)]


def assert_distribution(p: list[float]) -> None:
    assert all(x >= 0.0 for x in p), p
    assert abs(math.fsum(p) - 1.0) <= 4 * U, (p, math.fsum(p) - 1.0)


@FAST
@given(vectors)
def test_softmax_is_a_distribution(z):
    assert_distribution(softmax(z))


@FAST
@given(matrices())
def test_softmax_columns_are_distributions(A):
    P = softmax_columns(A)
    assert len(P) == len(A) and all(len(row) == len(A[0]) for row in P)
    for t, col in enumerate(columns(P)):
        assert_distribution(col)
        # and each column is the softmax of that column alone
        assert col == softmax([row[t] for row in A])


@FAST
@given(vectors, st.data())
def test_masked_entries_get_exactly_zero(z, data):
    """Entries at −∞ (masked scores) get probability exactly 0; the rest is
    the softmax of the finite entries alone."""
    keep = data.draw(st.lists(st.booleans(), min_size=len(z), max_size=len(z)))
    assume(any(keep))
    zm = [x if k else -math.inf for x, k in zip(z, keep)]
    p = softmax(zm)
    assert all(pi == 0.0 for pi, k in zip(p, keep) if not k)
    kept = [x for x, k in zip(z, keep) if k]
    assert [pi for pi, k in zip(p, keep) if k] == softmax(kept)
    assert_distribution(p)


@FAST
@given(st.lists(grid, min_size=1, max_size=8), st.integers(-50 * 1024, 50 * 1024).map(lambda k: k / 1024))
def test_exact_shift_leaves_softmax_unchanged_bit_for_bit(z, c):
    """softmax(z + c1) = softmax(z). When z + c is exact in binary64 the spec
    evaluates exp(z_i − max z) on the very same numbers, so the results agree
    bit for bit."""
    assert same_bits(softmax([x + c for x in z]), softmax(z))


@FAST
@given(vectors, st.floats(min_value=-100.0, max_value=100.0))
def test_shift_leaves_softmax_unchanged_within_rounding(z, c):
    """softmax(z + c1) = softmax(z), for any real c, within rounding.

    Error budget: fl(z_i + c) is off by ≤ u·B, B = max|z + c|; the spec's
    arguments exp(a_i − max a) then differ from exp(z_i − max z)'s by at most
    2uB + 2uD (D = max z − min z bounds the subtraction's own rounding, on
    both sides), which is the relative error it causes in exp; exp itself and
    the normalisation add a few u (≤ 8u on both sides together). Softmax
    doubles an argument error at most (numerator and denominator), so
    |Δy_i| ≤ y_i · (4u(B + D) + 8u) · 2.
    """
    shifted = [x + c for x in z]
    B = max(abs(x) for x in shifted)
    D = max(z) - min(z)
    rel = 2 * (4 * U * (B + D) + 8 * U)
    for a, b in zip(softmax(shifted), softmax(z)):
        assert abs(a - b) <= rel * b, (a, b, abs(a - b) / (U * b))


@FAST
@given(matrices(), st.lists(st.floats(-20.0, 20.0), min_size=4, max_size=4))
def test_shifting_one_column_changes_only_that_column(A, shifts):
    """softmax acts on each column separately: shifting column t (by a
    multiple of 2^-10 on 2^-10-grid data, so exactly) changes nothing at all."""
    A = [[round(x * 1024) / 1024 for x in row] for row in A]
    n = len(A[0])
    cs = [round(s * 1024) / 1024 for s in shifts[:n]]
    B = [[x + cs[t] for t, x in enumerate(row)] for row in A]
    assert same_bits(softmax_columns(B), softmax_columns(A))
