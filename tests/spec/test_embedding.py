"""Algorithms 1 and 2 and the embedding lines 1-3 of Algorithms 8-10.

The paper's sinusoid (ALGORITHMS.md, Algorithm 2, fixed alternative; also
seeds/000's list of variations with T = ℓ_max): for 0 < i ≤ d_e/2 and
1-based row and position t,

    W_p[2i−1, t] = sin(t / ℓ_max^{2i/d_e}),   W_p[2i, t] = cos(t / ℓ_max^{2i/d_e}).

It is transcribed below with 1-based indices and compared with the spec's
0-based ``sinusoidal_paper`` in mpmath. For odd d_e the paper defines no last
row; the spec's documented decision is the sine the same formula gives with
i = (d_e + 1)/2, which is checked as such.
"""

from __future__ import annotations

import math
import random

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftspec.spec import (
    MpNumbers,
    embed,
    positional_embedding,
    sinusoidal_halves,
    sinusoidal_paper,
    sinusoidal_raw_index,
    sinusoidal_vaswani,
    token_embedding,
    using,
)
from ftspec.spec.variants import PAPER

from .helpers import FAST, matrix, same_bits, seeds, transpose


def paper_sinusoid(d_e: int, ell_max: int) -> dict[tuple[int, int], mpmath.mpf]:
    """{(row, t): value} with 1-based row and t, as the paper writes it."""
    W = {}
    for t in range(1, ell_max + 1):
        for i in range(1, d_e // 2 + 1):
            angle = mpmath.mpf(t) / mpmath.power(ell_max, mpmath.mpf(2 * i) / d_e)
            W[(2 * i - 1, t)] = mpmath.sin(angle)
            W[(2 * i, t)] = mpmath.cos(angle)
        if d_e % 2:  # the spec's decision for the last row of an odd d_e
            i = (d_e + 1) // 2
            W[(d_e, t)] = mpmath.sin(mpmath.mpf(t) / mpmath.power(ell_max, mpmath.mpf(2 * i) / d_e))
    return W


@pytest.mark.parametrize("d_e", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("ell_max", [1, 2, 7, 16])
def test_sinusoidal_paper_is_the_papers_formula(d_e, ell_max):
    with mpmath.workdps(50):
        want = paper_sinusoid(d_e, ell_max)
    N = MpNumbers(40)
    with using(N):
        got = sinusoidal_paper(d_e, ell_max)
    assert len(got) == d_e and all(len(r) == ell_max for r in got)
    with mpmath.workdps(50):
        for r in range(d_e):
            for c in range(ell_max):
                assert abs(mpmath.mpf(got[r][c]) - want[(r + 1, c + 1)]) < mpmath.mpf("1e-30"), (r, c)


@pytest.mark.parametrize("d_e", [1, 2, 3, 6, 7])
@pytest.mark.parametrize("ell_max", [1, 2, 9])
def test_sinusoidal_raw_index_is_the_tutorials_formula(d_e, ell_max):
    """seeds/004 (numeric tutorial), section II.E, Table II: for dimension i
    (0-based, every i, not a pair index) and position pos (0-based),
    p[pos, i] = sin(pos / 10000^(2i/d)) for even i and cos(pos / 10000^(2i/d))
    for odd i; the spec's W_p[i, pos]. Odd d needs no decision: every row has
    its own index."""
    with mpmath.workdps(50):
        want = {(i, pos): (mpmath.sin if i % 2 == 0 else mpmath.cos)(
            mpmath.mpf(pos) / mpmath.power(10000, mpmath.mpf(2 * i) / d_e))
            for i in range(d_e) for pos in range(ell_max)}
    with using(MpNumbers(40)):
        got = sinusoidal_raw_index(d_e, ell_max)
    assert len(got) == d_e and all(len(r) == ell_max for r in got)
    with mpmath.workdps(50):
        for (i, pos), w in want.items():
            assert abs(mpmath.mpf(got[i][pos]) - w) < mpmath.mpf("1e-30"), (i, pos)


def test_raw_index_and_vaswani_share_row_0_only():
    """The raw index r and Vaswani's 2·(r // 2) agree at r = 0 and differ at every other row."""
    a, b = sinusoidal_raw_index(6, 4), sinusoidal_vaswani(6, 4)
    assert a[0] == b[0]
    assert all(a[r][3] != b[r][3] for r in range(1, 6))


@pytest.mark.parametrize("d_e", [1, 2, 3, 6, 7])
@pytest.mark.parametrize("ell_max", [1, 2, 9])
def test_sinusoidal_halves_is_marians_formula(d_e, ell_max):
    """transformers 5.24.0, models/marian/modeling_marian.py, MarianSinusoidalPositionalEmbedding.create_weight:
    position_enc[pos, j] = pos / 10000^(2·(j // 2)/d), then out[:, :s] = sin(position_enc[:, 0::2]) and
    out[:, s:] = cos(position_enc[:, 1::2]) with s = d // 2 + d % 2; the spec's W_p[j, pos] = out[pos, j]."""
    with mpmath.workdps(50):
        angle = {(pos, j): mpmath.mpf(pos) / mpmath.power(10000, mpmath.mpf(2 * (j // 2)) / d_e)
                 for pos in range(ell_max) for j in range(d_e)}
        s = d_e // 2 + d_e % 2
        want = {}
        for pos in range(ell_max):
            row = ([mpmath.sin(angle[pos, j]) for j in range(0, d_e, 2)]
                   + [mpmath.cos(angle[pos, j]) for j in range(1, d_e, 2)])
            assert len(row[:s]) == s and len(row) == d_e
            want |= {(j, pos): w for j, w in enumerate(row)}
    with using(MpNumbers(40)):
        got = sinusoidal_halves(d_e, ell_max)
    assert len(got) == d_e and all(len(r) == ell_max for r in got)
    with mpmath.workdps(50):
        for (j, pos), w in want.items():
            assert abs(mpmath.mpf(got[j][pos]) - w) < mpmath.mpf("1e-30"), (j, pos)


def test_halves_are_vaswanis_rows_reordered():
    """Vaswani's even rows (its sines) first, then its odd rows (its cosines); equal only at d_e ≤ 2."""
    for d_e in (1, 2, 5, 6):
        a, b = sinusoidal_halves(d_e, 4), sinusoidal_vaswani(d_e, 4)
        assert a == b[0::2] + b[1::2]
        assert (a == b) == (d_e <= 2)


@pytest.mark.parametrize("fn", [sinusoidal_paper, sinusoidal_vaswani, sinusoidal_raw_index, sinusoidal_halves])
def test_sinusoid_prefix_columns(fn):
    """Building only the first ℓ columns gives exactly those of the full matrix."""
    full = fn(6, 9)
    assert fn(6, 9, 4) == [row[:4] for row in full]


def test_the_two_sinusoids_differ():
    """Base ℓ_max with 1-based positions vs base 10000 with 0-based ones."""
    a, b = sinusoidal_paper(4, 8), sinusoidal_vaswani(4, 8)
    assert b[0][0] == 0.0 and b[1][0] == 1.0  # sin 0, cos 0 at position 0
    assert abs(a[0][0] - math.sin(1 / math.sqrt(8))) < 1e-15  # t = 1, i = 1: 8^(2/4)
    assert max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)) > 0.1


@FAST
@given(seeds, st.integers(1, 5), st.integers(1, 6))
def test_token_and_positional_embedding_are_columns(seed, d_e, n):
    rng = random.Random(seed)
    W = matrix(rng, d_e, n, 1.0)
    for v in range(n):
        assert token_embedding(v, W) == [row[v] for row in W]  # Algorithm 1
        assert positional_embedding(v, W) == [row[v] for row in W]  # Algorithm 2


@FAST
@given(seeds, st.integers(1, 5), st.integers(2, 6), st.integers(1, 6),
       st.sampled_from(["learned", "sinusoidal_paper", "sinusoidal_vaswani", "sinusoidal_raw_index",
                        "sinusoidal_halves", "none"]),
       st.sampled_from(["one", "sqrt_d_e"]))
def test_embedding_is_token_plus_position(seed, d_e, N_V, ell_max, positions, scale):
    """Lines 1-3: X[:, t] = s·W_e[:, x[t]] + W_p[:, t] (s = 1 or √d_e), one
    rounding per product and per sum, so equal to that expression exactly."""
    rng = random.Random(seed)
    W_e = matrix(rng, d_e, N_V, 1.0)
    W_p = matrix(rng, d_e, ell_max, 1.0)
    ell = rng.randint(1, ell_max)
    x = [rng.randrange(N_V) for _ in range(ell)]
    v = PAPER.replace(positions=positions, embedding_scale=scale)
    P = {"learned": W_p, "sinusoidal_paper": sinusoidal_paper(d_e, ell_max),
         "sinusoidal_vaswani": sinusoidal_vaswani(d_e, ell_max),
         "sinusoidal_raw_index": sinusoidal_raw_index(d_e, ell_max),
         "sinusoidal_halves": sinusoidal_halves(d_e, ell_max), "none": None}[positions]
    s = math.sqrt(d_e) if scale == "sqrt_d_e" else None
    X = embed(x, W_e, W_p if positions == "learned" else None, ell_max=ell_max, variant=v)
    for t in range(ell):
        col = [row[x[t]] for row in W_e]
        if s is not None:
            col = [c * s for c in col]
        if P is not None:
            col = [c + row[t] for c, row in zip(col, P)]
        assert same_bits([row[t] for row in X], col)


def test_embedding_norm_normalises_each_column():
    from ftspec.spec import layer_norm

    rng = random.Random(3)
    W_e, W_p = matrix(rng, 3, 4, 1.0), matrix(rng, 3, 4, 1.0)
    g, b = [1.0, 2.0, 0.5], [0.0, 0.1, -0.1]
    x = [1, 3, 3]
    X = embed(x, W_e, W_p, variant=PAPER.replace(embedding_norm=True), gamma=g, beta=b)
    plain = embed(x, W_e, W_p)
    for t, col in enumerate(transpose(X)):
        assert col == layer_norm([row[t] for row in plain], g, b)
