"""Seed 004 (numeric tutorial, ../shared/seeds/004_633e602a836c2656.txt)
reproduced by the spec under the preset ``tutorial-004``.

Every expected number below is transcribed from the seed's printed tables,
as strings, exactly as printed. Nothing expected is computed by the spec.

**How the tutorial prints.** Its numbers are MATLAB's: Table I's first
column is MATLAB's default ``rand`` stream (0.8147, 0.9058, …) and its
second column shows the stream's seventh value, 0.2785, as 0.27. A printed
value is MATLAB's four-decimal display cut (not rounded) to the printed
number of decimals; ``displays_as`` applies that rule. "Within printed
precision" means exactly that: the spec's value, displayed the tutorial's
way, is the printed string. One exception, named where it occurs: five
values between 0.002 and 0.009, which the cut would show as 0.00, are
written 0.01 (four in P, one in W_A; ``small_written_as_001``). The
tutorial computes with the true values: its later tables display as the
full W_A gives them.

**The parameters.** The tutorial prints its parameters cut to two decimals
but computed with the full values. Those are MATLAB's default stream (the
Mersenne Twister seeded with 5489, 53-bit doubles, matrices filled column
by column), which NumPy's legacy ``RandomState(5489)`` reproduces (its
stream is frozen, NEP 19). The stream's successive draws W (6×6), W_Q, W_K,
W_V (6×4 each), W_A (4×6), W_L (6×6) and b_L (1×6) display as the printed
parameters (checked first, ``test_parameters_are_matlabs_default_stream``).

**The layout** (docs/spec.md, seed 004): the embedding tables (W, P, E) put
tokens in columns, as the spec does; the attention and norm tables put
tokens in rows, so the spec's layer input is X = Eᵀ and a printed table A
is the spec's output transposed. Weights are in×out: W_q = W_Qᵀ, …,
W_o = W_Aᵀ, W_mlp1 = W_Lᵀ, b_mlp1 = b_L; the one-layer FFN is the preset's
``mlp="one_layer"`` (no W_mlp2, b_mlp2; d_mlp = d_e).

What the tables cannot tell: whether ν is there at all, or inside or
outside the root (σ is near 1, so ν = 1e-4 moves η by about 1e-4, below
the display); the preset takes ν = 0.0001 added to σ from the text (II.I).

**Step by step** (issue 26): the intermediate tables it prints on the way,
Q, K, V, A(1) = Q Kᵀ, A(2) = A(1)/√d, A(3) = softmax (rows), μ and σ of
each row of A(6) and L = A(7) W_L + b_L, are the spec's recorded
intermediates of ``encoder_layer`` (``spec.evaluation.intermediates``;
``attn.heads.0.Q``, …, ``norm1.mu``, ``norm1.sigma``, ``mlp.pre``),
transposed. A(3) writes its entries below 0.01 in E notation (1E-4, 7E-4):
the four-decimal display written out instead of cut to 0.00.
"""

from __future__ import annotations

import math
import statistics
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
import pytest

from ftspec.spec import attention, embed, encoder_layer, layer_norm, mh_attention
from ftspec.spec.evaluation import intermediates
from ftspec.spec.registry import REGISTRY
from ftspec.spec.params import AttentionParams, LayerParams, MHAttentionParams
from ftspec.spec.variants import PRESETS

V004 = PRESETS["tutorial-004"]
D = 6  # d = ℓ = 6 throughout the encoder


def rows(text: str) -> list[list[str]]:
    """A printed matrix, one line per row, entries as printed."""
    return [line.split() for line in text.strip().splitlines()]


# --- the seed's printed tables (section II) ---------------------------------

W_PRINTED = rows("""
0.8147 0.27 0.95 0.79 0.67 0.70
0.9058 0.54 0.48 0.95 0.75 0.03
0.1270 0.95 0.80 0.65 0.74 0.27
0.9134 0.96 0.14 0.03 0.39 0.04
0.6324 0.15 0.42 0.84 0.65 0.09
0.0975 0.97 0.91 0.93 0.17 0.82
""")  # II.D, Table I and W: column k is w_k, the embedding of the k-th input word
P_PRINTED = rows("""
0 0.84 0.90 0.14 -0.75 -0.95
1 0.99 0.99 0.99 0.98 0.97
0 0.01 0.01 0.01 0.01 0.01
1 1 1 1 1 1
0 0 0 0 0 0
1 1 1 1 1 1
""")  # II.E: column k is p_k, the position k − 1
E_PRINTED = rows("""
0.8147 1.12 1.86 0.93 -0.07 -0.25
1.9058 1.54 1.48 1.94 1.74 1.00
0.1270 0.95 0.80 0.66 0.75 0.28
1.9134 1.96 1.14 1.03 1.39 1.04
0.6324 0.15 0.42 0.84 0.65 0.09
1.0975 1.97 1.91 1.93 1.17 1.82
""")  # II.F: E = W + P
W_Q_PRINTED = rows("""
0.69 0.76 0.70 0.11
0.31 0.79 0.75 0.49
0.95 0.18 0.27 0.95
0.03 0.48 0.67 0.34
0.43 0.44 0.65 0.58
0.38 0.64 0.16 0.22
""")
W_K_PRINTED = rows("""
0.75 0.54 0.81 0.61
0.25 0.13 0.24 0.47
0.50 0.14 0.92 0.35
0.69 0.25 0.35 0.83
0.89 0.84 0.19 0.58
0.95 0.25 0.25 0.54
""")
W_V_PRINTED = rows("""
0.91 0.07 0.56 0.31
0.28 0.05 0.46 0.52
0.75 0.53 0.01 0.16
0.75 0.77 0.33 0.60
0.38 0.93 0.16 0.26
0.56 0.12 0.79 0.65
""")  # II.G
A4_PRINTED = rows("""
5.96 4.16 3.66 4.07
6.00 4.24 3.61 4.01
5.93 4.12 3.65 4.05
5.99 4.23 3.62 4.02
5.89 4.07 3.65 4.04
6.00 4.24 3.61 4.01
""")  # II.G: A(4) = A(3) V
W_A_PRINTED = rows("""
0.68 0.22 0.53 0.10 0.81 0.25
0.74 0.91 0.99 0.96 0.86 0.80
0.45 0.15 0.07 0.01 0.08 0.43
0.08 0.82 0.44 0.77 0.39 0.91
""")  # II.H
A5_PRINTED = rows("""
9.22 9.09 9.45 7.81 10.43 10.17
9.27 9.11 9.51 7.85 10.50 10.17
9.16 9.03 9.38 7.76 10.36 10.11
9.27 9.11 9.51 7.84 10.49 10.17
9.09 8.96 9.30 7.69 10.28 10.05
9.27 9.11 9.51 7.85 10.50 10.17
""")  # II.H: A(5) = A(4,1) W_A
A6_PRINTED = rows("""
10.03 10.21 11.31 8.75 10.35 9.92
11.18 10.66 10.99 9.80 12.24 11.17
9.29 9.99 10.19 8.42 11.11 10.40
11.18 11.08 10.65 8.88 11.88 11.22
9.72 9.12 9.72 8.54 10.93 10.14
10.37 11.08 11.43 9.78 11.67 11.99
""")  # II.I: A(6) = E + A(5)
A7_PRINTED = rows("""
-0.07 0.13 1.47 -1.62 0.31 -0.21
0.21 -0.43 -0.01 -1.52 1.54 0.21
-0.65 0.09 0.30 -1.58 1.29 0.53
0.35 0.25 -0.15 -1.88 1.04 0.39
0.03 -0.70 0.03 -1.40 1.49 0.54
-0.81 0.03 0.44 -1.52 0.73 1.12
""")  # II.I: A(7) = η(A(6))
W_L_PRINTED = rows("""
0.18 0.54 0.40 0.41 0.33 0.24
0.26 0.14 0.07 0.04 0.90 0.40
0.14 0.85 0.23 0.90 0.36 0.09
0.13 0.62 0.12 0.94 0.11 0.13
0.86 0.35 0.18 0.49 0.78 0.94
0.57 0.51 0.24 0.48 0.38 0.95
""")
B_L_PRINTED = rows("0.57 0.05 0.23 0.35 0.82 0.01")  # II.J: b_Lᵀ
F_PRINTED = rows("""
0.73 0.27 0.37 0.16 1.44 0.06
1.75 0 0.43 0 1.61 1.34
1.74 0 0.22 0 1.84 1.45
1.55 0 0.41 0 1.86 1.29
1.82 0 0.43 0.03 1.43 1.48
1.58 0 0.23 0 1.58 1.44
""")  # II.J: F = ReLU(A(7) W_L + b_L)
A9_PRINTED = rows("""
0.11 -0.07 1.07 -1.59 1.00 -0.53
0.65 -0.75 -0.25 -1.39 1.34 0.40
0.13 -0.48 -0.21 -1.51 1.39 0.68
0.62 -0.35 -0.35 -1.62 1.21 0.49
0.58 -0.93 -0.23 -1.32 1.22 0.68
-0.02 -0.51 -0.08 -1.54 1.00 1.16
""")  # II.K: A(9) = η(A(7) + F), the encoder's output

Q_PRINTED = rows("""
2.59 2.12 2.48 2.66
4.43 5.34 5.55 4.32
1.61 1.85 2.02 1.99
4.08 5.04 4.94 3.70
1.24 1.45 1.70 1.25
4.48 5.41 5.17 4.70
""")  # II.G: Q = E W_Q
K_PRINTED = rows("""
2.18 0.99 2.91 2.27
6.45 3.69 4.58 5.61
2.15 1.19 1.53 1.96
5.48 3.19 3.99 4.76
1.99 1.22 1.39 1.75
6.44 3.10 4.51 5.57
""")
V_PRINTED = rows("""
3.01 1.73 1.11 1.53
6.01 4.28 3.56 3.94
1.94 1.74 1.10 1.46
5.08 3.10 3.43 3.49
1.88 1.56 0.90 1.09
5.95 4.04 3.86 4.36
""")
A1_PRINTED = rows("""
21.07 50.92 17.17 43.59 15.92 49.36
41.04 98.15 33.00 84.19 30.76 94.40
15.83 37.80 12.74 32.40 11.84 36.47
36.76 88.46 29.71 75.88 27.74 84.95
11.99 28.28 9.51 24.26 8.85 27.24
40.96 99.08 33.33 84.93 31.07 95.30
""")  # II.G: A(1) = Q Kᵀ
A2_PRINTED = rows("""
8.60 20.78 7.01 17.79 6.50 20.15
16.75 40.07 13.47 34.37 12.56 38.54
6.46 15.43 5.20 13.22 4.83 14.89
15.01 36.11 12.13 30.98 11.32 34.68
4.89 11.54 3.88 9.90 3.61 11.12
16.72 40.44 13.61 34.67 12.68 38.90
""")  # II.G: A(2) = A(1)/√d, d = 6
A3_PRINTED = rows("""
0 0.63 0 0.03 0 0.33
0 0.81 0 0 0 0.17
1E-4 0.59 0 0.06 0 0.34
0 0.80 0 0 0 0.19
7E-4 0.54 3E-4 0.10 2E-4 0.35
0 0.82 0 0 0 0.17
""")  # II.G: A(3) = softmax(A(2)) row by row
MU_PRINTED = "10.09 11.01 9.90 10.82 9.70 11.05".split()  # II.I: μ_i of row i of A(6)
SIGMA_PRINTED = "0.82 0.79 0.93 1.02 0.82 0.83".split()  # II.I: σ_i (MATLAB's std: over N − 1)
L_PRINTED = rows("""
0.73 0.27 0.37 0.16 1.44 0.06
1.75 -0.19 0.43 -0.16 1.61 1.34
1.74 -0.27 0.22 -0.23 1.84 1.45
1.55 -0.44 0.41 -0.70 1.86 1.29
1.82 -0.06 0.43 0.03 1.43 1.48
1.58 -0.11 0.23 -0.11 1.58 1.44
""")  # II.J: L = A(7) W_L + b_L

#: Input word IDs of "it was the worst of times" (II.C-D), 1-based as printed.
WORD_IDS = [1, 2, 3, 7, 5, 6]
N_V = 9  # II.B: nine unique words


# --- the display rule and helpers -------------------------------------------


def displays_as(x: float, printed: str) -> bool:
    """MATLAB's four-decimal display of ``x``, cut toward zero to the decimals of ``printed``
    (written in E notation, 7E-4: the four-decimal display itself)."""
    shown = Decimal(x).quantize(Decimal("0.0001"), rounding=ROUND_HALF_EVEN)
    if "E" in printed:
        return shown == Decimal(printed)
    places = len(printed.partition(".")[2])
    return shown.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN) == Decimal(printed)


def misfits(got: list[list[Any]], printed: list[list[str]]) -> list[tuple[int, int, float, str]]:
    """(row, column, value, printed) for every entry that does not display as printed (1-based)."""
    assert len(got) == len(printed) and all(len(g) == len(p) for g, p in zip(got, printed))
    return [(i + 1, j + 1, float(v), p) for i, (g, q) in enumerate(zip(got, printed))
            for j, (v, p) in enumerate(zip(g, q)) if not displays_as(float(v), p)]


def small_written_as_001(value: float, printed: str) -> bool:
    """The tutorial's one departure from its display rule: 0 < value < 0.01 written 0.01."""
    return printed == "0.01" and 0 < value < 0.01


def numbers(printed: list[list[str]]) -> list[list[float]]:
    return [[float(v) for v in row] for row in printed]


def T(A: list[list[Any]]) -> list[list[Any]]:
    return [list(c) for c in zip(*A)]


def matlab_stream() -> dict[str, list[list[float]]]:
    """The tutorial's parameters at full precision: successive rand(rows, cols) draws of
    MATLAB's default stream, each filled column by column."""
    rs = np.random.RandomState(5489)

    def rand(r: int, c: int) -> list[list[float]]:
        return rs.random_sample(r * c).reshape(c, r).T.tolist()

    names_shapes = [("W", 6, 6), ("W_Q", 6, 4), ("W_K", 6, 4), ("W_V", 6, 4), ("W_A", 4, 6),
                    ("W_L", 6, 6), ("b_L", 1, 6)]
    return {name: rand(r, c) for name, r, c in names_shapes}


FULL = matlab_stream()


def head() -> AttentionParams:
    """II.G: Q = E W_Q etc. with tokens as rows, so the spec's W_q = W_Qᵀ (no biases)."""
    return AttentionParams(W_q=T(FULL["W_Q"]), b_q=None, W_k=T(FULL["W_K"]), b_k=None,
                           W_v=T(FULL["W_V"]), b_v=None)


def mha() -> MHAttentionParams:
    """II.H: one head, A(5) = A(4,1) W_A, so W_o = W_Aᵀ."""
    return MHAttentionParams(heads=(head(),), W_o=T(FULL["W_A"]), b_o=None)


def layer() -> LayerParams:
    """II.G-K: the attention above; F = ReLU(A(7) W_L + b_L) is the one-layer MLP
    (``mlp="one_layer"``) with W_mlp1 = W_Lᵀ, b_mlp1 = b_L and no second map; no γ, β."""
    return LayerParams(attn=mha(), gamma1=None, beta1=None, W_mlp1=T(FULL["W_L"]), b_mlp1=FULL["b_L"][0],
                       W_mlp2=None, b_mlp2=None, gamma2=None, beta2=None)


def spec_E() -> list[list[Any]]:
    """The spec's embedding of the input under the preset: W_e has the word
    vectors w_k as the columns of their IDs (IDs 4, 8, 9 are not used)."""
    W_e = [[0.0] * N_V for _ in range(D)]
    for k, word in enumerate(WORD_IDS):
        for i in range(D):
            W_e[i][word - 1] = FULL["W"][i][k]
    return embed([w - 1 for w in WORD_IDS], W_e, None, ell_max=D, variant=V004)


ALL_ONES = [[1] * D for _ in range(D)]  # II.G: "a mask, which we will skip"


# --- the tests ---------------------------------------------------------------


def test_display_rule():
    """The rule itself, on the tutorial's own example: 0.2785 shows as 0.27; signs cut toward zero."""
    assert displays_as(0.27849822, "0.27") and not displays_as(0.27849822, "0.28")
    assert displays_as(-0.0781, "-0.07") and displays_as(0.99999987, "1") and displays_as(4.6e-6, "0")
    assert displays_as(0.81472369, "0.8147") and not displays_as(0.81472369, "0.8148")


@pytest.mark.parametrize("name, printed, small", [
    ("W", W_PRINTED, []), ("W_Q", W_Q_PRINTED, []), ("W_K", W_K_PRINTED, []), ("W_V", W_V_PRINTED, []),
    ("W_A", W_A_PRINTED, [(3, 4)]), ("W_L", W_L_PRINTED, []), ("b_L", B_L_PRINTED, [])])
def test_parameters_are_matlabs_default_stream(name, printed, small):
    """Each printed parameter is the display of the stream's next draw, entry for entry
    (W_A[3, 4] = 0.0046 is written 0.01)."""
    bad = misfits(FULL[name], printed)
    assert [(i, j) for i, j, _, _ in bad] == small, bad
    assert all(small_written_as_001(v, p) for _, _, v, p in bad)


def test_printed_P_is_the_raw_index_sinusoid():
    """II.E: P under ``positions="sinusoidal_raw_index"`` (through ``embed`` with zero token
    vectors) displays as printed, except four entries of row 3 written 0.01 where the
    formula gives 0.0022-0.0086 (E, below, displays the formula's values there)."""
    zero = [[0.0] for _ in range(D)]
    P = embed([0] * D, zero, None, ell_max=D, variant=V004)
    bad = misfits(P, P_PRINTED)
    assert [(i, j) for i, j, _, _ in bad] == [(3, 2), (3, 3), (3, 4), (3, 5)], bad
    assert all(small_written_as_001(v, p) for _, _, v, p in bad)


def test_vaswanis_sinusoid_does_not_reproduce_P():
    """The power of the check above: Vaswani's exponent 2·(r // 2)/d misses P by 1.98 (cos 3 vs 0.99)."""
    zero = [[0.0] for _ in range(D)]
    P = embed([0] * D, zero, None, ell_max=D, variant=V004.replace(positions="sinusoidal_vaswani"))
    worst = max(abs(float(v) - float(p)) for r, q in zip(P, P_PRINTED) for v, p in zip(r, q))
    assert worst > 1.9


def test_printed_E_is_the_embedding():
    """II.F: E = W + P, the spec's ``embed`` under the preset, displays as printed everywhere."""
    assert misfits(spec_E(), E_PRINTED) == []


def test_printed_A4_is_the_attention():
    """II.G: A(4) = softmax(Q Kᵀ/√6) V, tokens as rows: the spec's ``attention`` of X = Eᵀ
    with scores over √d_model (d_model = 6, not d_attn = 4), transposed."""
    X = T(spec_E())
    got = attention(X, X, head(), ALL_ONES, variant=V004)
    assert misfits(T(got), A4_PRINTED) == []


def test_printed_A5_A6_A7_are_attention_residual_and_norm():
    """II.H-I: A(5) = A(4,1) W_A (``mh_attention``), A(6) = E + A(5), and A(7) = η(A(6)) with
    η(x) = (x − μ)/(σ + 1e-4), σ over N − 1 (``layer_norm`` under the preset, no γ, β)."""
    X = T(spec_E())
    A5 = mh_attention(X, X, mha(), ALL_ONES, variant=V004)
    assert misfits(T(A5), A5_PRINTED) == []
    A6 = [[a + b for a, b in zip(r, s)] for r, s in zip(X, A5)]
    assert misfits(T(A6), A6_PRINTED) == []
    A7 = [layer_norm(col, None, None, variant=V004) for col in T(A6)]  # one token per column of A6
    assert misfits(A7, A7_PRINTED) == []


def test_printed_A9_is_the_encoder_layer():
    """II.G-K as one step: A(9) is the spec's ``encoder_layer`` of X = Eᵀ under the preset
    (post-LN, the one-layer FFN), transposed; it displays as printed everywhere."""
    got = encoder_layer(T(spec_E()), layer(), variant=V004)
    assert misfits(T(got), A9_PRINTED) == []


def layer_flat(variant=None) -> dict[str, Any]:
    """``layer()`` as the flat parameters of the ``encoder_layer`` entry (those ``variant``'s
    parameter set has, when given: no W_mlp2 and b_mlp2 under a one-layer FFN)."""
    L = layer()
    head = L.attn.heads[0]
    flat = {"attn.heads.0.W_q": head.W_q, "attn.heads.0.W_k": head.W_k, "attn.heads.0.W_v": head.W_v,
            "attn.W_o": L.attn.W_o, "W_mlp1": L.W_mlp1, "b_mlp1": L.b_mlp1}
    if variant is None:
        return flat
    wanted = REGISTRY["encoder_layer"].param_schema({"H": 1}, variant)
    return {k: v for k, v in flat.items() if k in wanted}


def steps(variant=V004) -> dict[str, Any]:
    """The spec's recorded intermediates of the encoder layer on X = Eᵀ."""
    return intermediates("encoder_layer", {"Z": T(spec_E())}, layer_flat(variant), variant=variant)


#: printed table -> (its intermediate, as the tutorial lays it out: tokens in rows)
STEPS = {"Q": ("attn.heads.0.Q", Q_PRINTED), "K": ("attn.heads.0.K", K_PRINTED),
         "V": ("attn.heads.0.V", V_PRINTED), "A(1)": ("attn.heads.0.scores", A1_PRINTED),
         "A(2)": ("attn.heads.0.S", A2_PRINTED), "A(3)": ("attn.heads.0.A", A3_PRINTED),
         "A(4)": ("attn.heads.0", A4_PRINTED), "A(5)": ("attn", A5_PRINTED), "A(6)": ("res1", A6_PRINTED),
         "mu": ("norm1.mu", [MU_PRINTED]), "sigma": ("norm1.sigma", [SIGMA_PRINTED]),
         "A(7)": ("norm1", A7_PRINTED), "L": ("mlp.pre", L_PRINTED), "F": ("mlp.hidden", F_PRINTED),
         "A(9)": ("Z", A9_PRINTED)}


@pytest.mark.parametrize("table", list(STEPS))
def test_each_printed_step_is_a_recorded_intermediate(table):
    """II.G-K step by step: every table the tutorial prints on the way through the encoder displays
    as the spec's recorded intermediate (a matrix transposed: the tutorial's rows are tokens; μ and σ
    are the vectors over the tokens), entry for entry."""
    name, printed = STEPS[table]
    value = steps()[name]
    got = [value] if not isinstance(value[0], list) else T(value)
    assert misfits(got, printed) == [], (table, name)


def test_the_printed_steps_tell_the_conventions_apart():
    """The power of the step-by-step check: with the paper's biased σ the printed σ no longer
    displays (0.75 for 0.82), with scores over √d_attn neither A(2) nor A(3) does, and with
    pre-LN the printed μ is no longer the mean of A(6)."""
    biased = steps(V004.replace(variance="biased"))
    assert len(misfits([biased["norm1.sigma"]], [SIGMA_PRINTED])) == 6
    d_attn = steps(V004.replace(attn_scale="sqrt_d_attn"))
    assert len(misfits(T(d_attn["attn.heads.0.S"]), A2_PRINTED)) > 30
    assert len(misfits(T(d_attn["attn.heads.0.A"]), A3_PRINTED)) > 6
    pre = steps(V004.replace(norm_placement="pre"))
    assert len(misfits([pre["norm1.mu"]], [MU_PRINTED])) == 6


def test_the_paper_conventions_do_not_reproduce_A9():
    """The power of the check above: with the paper's biased variance and no ν, or with
    scores over √d_attn, the layer's output no longer displays as printed."""
    X = T(spec_E())
    for other in (V004.replace(variance="biased"), V004.replace(attn_scale="sqrt_d_attn")):
        assert len(misfits(T(encoder_layer(X, layer(), variant=other)), A9_PRINTED)) > 6


# --- the norm from the printed tables alone (no reconstructed parameters) ----

#: A cut display loses less than one unit (0.01) plus the four-decimal rounding (5e-5).
CUT = 0.01 + 5e-5


def _norm_bound(row: list[float], u_in: float) -> float:
    """How far η of the true row can be from η of the printed ``row`` (entries off by at most
    ``u_in``), plus the output's own cut. With x = p + δ, a = p_j − μ_p, s = σ_p + ν:
    the numerator moves by at most 2·u_in, σ by at most Δσ = u_in·√(N/(N−1)) (‖δ − δ̄‖ ≤ ‖δ‖),
    and |η(x)_j − η(p)_j| ≤ (2·u_in + |η(p)_j|·Δσ)/(s − Δσ), where |η(p)_j| ≤ (N−1)/√N
    (Samuelson's inequality for σ over N − 1). σ_p is Python's ``statistics.stdev`` (N − 1)."""
    n = len(row)
    d_sigma = u_in * math.sqrt(n / (n - 1))
    s = statistics.stdev(row) + 1e-4
    return CUT + (2 * u_in + (n - 1) / math.sqrt(n) * d_sigma) / (s - d_sigma)


@pytest.mark.parametrize("what, rows_in, u_in, printed", [
    ("A(7) = η(A(6))", numbers(A6_PRINTED), CUT, A7_PRINTED),
    ("A(9) = η(A(7) + F)", [[a + f for a, f in zip(r, q)] for r, q in zip(numbers(A7_PRINTED), numbers(F_PRINTED))],
     2 * CUT, A9_PRINTED),
])
def test_norm_tables_from_printed_inputs(what, rows_in, u_in, printed):
    """II.I and II.K from the printed inputs: the preset's η reproduces each printed row within
    the bound that the inputs' cut allows; the paper's biased σ does not (power)."""
    biased = V004.replace(variance="biased")
    worst_biased = 0.0
    for row, want in zip(rows_in, printed):
        bound = _norm_bound(row, u_in)
        got = layer_norm(row, None, None, variant=V004)
        assert max(abs(float(g) - float(w)) for g, w in zip(got, want)) <= bound, (what, row)
        other = layer_norm(row, None, None, variant=biased)
        worst_biased = max(worst_biased, max(abs(float(g) - float(w)) - bound for g, w in zip(other, want)))
    assert worst_biased > 0, what
