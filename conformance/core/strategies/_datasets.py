"""Training data: padded datasets, masking flags, probabilities, learning rates.

- ``lengths(N, width)``: N sequence lengths in [1, width], in families
  (``LENGTH_FAMILIES``): "varied" (at least two different lengths when N ≥ 2
  and width ≥ 2), "with-one" (varied, one sequence of length 1: no next-token
  term, loss 0), "full" (every length = width: no padding), "equal" (one
  length, below the width when it can be: the same padding everywhere).
- ``datasets(N_V, lengths, width)``: the (N, width) token array, row n a
  token sequence (``token_sequences``) of length ``lengths[n]`` followed by
  padding token 0.
- ``flags(shape)``: booleans "none", "all" or "some" (``FLAG_FAMILIES``;
  "some" has both values when there are two positions).
- ``probabilities(dtype)``: 0, 1 (the limits: nothing / everything masked)
  or strictly between.
- ``rates(dtype)``: SGD's η (``RATE_FAMILIES``): mostly small positive
  (10^U(−3, log10 r/2)), sometimes 0 (the harness also checks η = 0
  metamorphically), negative (−small), or large (10^U(log10 r/2, log10 r)),
  with r = ``MAGNITUDES[dtype].rate``: 1, bfloat16 0.25 (a few steps at
  η = 2 grow the weights past float16's range; in bfloat16 steps at η ≳ 0.4
  amplify rounding chaotically).

Reals come back as float64 values exactly representable in the case's
dtype, so what is drawn is what is judged.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from hypothesis import strategies as st

from ..dtypes import round_to
from ._budgets import check_int, resolve_dtype
from ._tokens import token_sequences
from ._draws import MAGNITUDES, choose, generator, seeds

__all__ = [
    "FLAG_FAMILIES",
    "LENGTH_FAMILIES",
    "PROBABILITY_FAMILIES",
    "RATE_FAMILIES",
    "datasets",
    "flags",
    "lengths",
    "probabilities",
    "rate_family",
    "rates",
]

LENGTH_FAMILIES = ("varied", "with-one", "full", "equal")
FLAG_FAMILIES = ("none", "all", "some")
PROBABILITY_FAMILIES = ("zero", "one", "between")
#: small: 10^U(−3, log10 r/2); large: 10^U(log10 r/2, log10 r); negative: −small; r = MAGNITUDES[dtype].rate
RATE_FAMILIES = ("small", "zero", "negative", "large")


def _scalar(x: float, dtype: str) -> np.ndarray:
    return np.array(float(round_to(np.array(x), dtype)))


@st.composite
def lengths(draw: st.DrawFn, N: int, width: int) -> np.ndarray:
    """int64 array of N lengths in [1, width] (see ``LENGTH_FAMILIES``; weights
    3 varied, 3 with-one, 1 full, 1 equal)."""
    N, width = check_int("N", N), check_int("width", width)
    family = choose(draw, "length family", {"varied": 3, "with-one": 3, "full": 1, "equal": 1})
    rng = generator(draw(seeds), "lengths")
    if family == "full":
        return np.full(N, width, dtype=np.int64)
    if family == "equal":
        return np.full(N, int(rng.integers(1, max(1, width - 1) + 1)), dtype=np.int64)
    out = rng.integers(1, width + 1, size=N).astype(np.int64)
    if N >= 2 and width >= 2 and (out == out[0]).all():
        out[-1] = out[0] % width + 1  # two different lengths
    if family == "with-one":
        out[rng.integers(0, N)] = 1
    return out


@st.composite
def datasets(draw: st.DrawFn, N_V: int, valid: Sequence[int], width: int) -> np.ndarray:
    """int64 (len(valid), width) token array: row n holds a token sequence of
    length ``valid[n]``, then padding token 0."""
    N_V, width = check_int("N_V", N_V), check_int("width", width)
    out = np.zeros((len(valid), width), dtype=np.int64)
    for n, ell in enumerate(valid):
        ell = check_int("length", ell)
        if ell > width:
            raise ValueError(f"length {ell} beyond the width {width}")
        out[n, :ell] = draw(token_sequences(N_V, ell))
    return out


@st.composite
def flags(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    """bool array: all False, all True, or some of each (a third each)."""
    family = choose(draw, "flag family", dict.fromkeys(FLAG_FAMILIES, 1))
    if family != "some":
        return np.full(shape, family == "all", dtype=bool)
    rng = generator(draw(seeds), "flags")
    bits = rng.random(shape) < rng.uniform(0.2, 0.8)
    if bits.size >= 2 and (bits == bits.flat[0]).all():
        bits.flat[rng.integers(0, bits.size)] = not bits.flat[0]
    return bits


@st.composite
def probabilities(draw: st.DrawFn, dtype: str = "float64") -> np.ndarray:
    """A 0-d probability: U(0.01, 0.99) (a half), 0 or 1 (a quarter each), exact in ``dtype``."""
    dtype = resolve_dtype(dtype)
    family = choose(draw, "probability family", {"between": 2, "zero": 1, "one": 1})
    if family != "between":
        return np.array(float(family == "one"))
    return _scalar(generator(draw(seeds), "probability").uniform(0.01, 0.99), dtype)


@st.composite
def rates(draw: st.DrawFn, dtype: str = "float64") -> np.ndarray:
    """A 0-d learning rate η (see ``RATE_FAMILIES``), exact in ``dtype``.

    Weights (of 10): 7 small positive, 1 zero, 1 negative, 1 large."""
    dtype = resolve_dtype(dtype)
    family = choose(draw, "rate family", {"small": 7, "zero": 1, "negative": 1, "large": 1})
    if family == "zero":
        return np.array(0.0)
    top = math.log10(MAGNITUDES[dtype].rate)
    lo, hi = (top - math.log10(2), top) if family == "large" else (-3.0, top - math.log10(2))
    eta = 10.0 ** generator(draw(seeds), "rate").uniform(lo, hi)
    return _scalar(-eta if family == "negative" else eta, dtype)


def rate_family(eta: float, dtype: str = "float64") -> str:
    """Which of ``RATE_FAMILIES`` a rate drawn for ``dtype`` belongs to."""
    eta = float(eta)
    if eta == 0:
        return "zero"
    if eta < 0:
        return "negative"
    return "large" if eta > MAGNITUDES[resolve_dtype(dtype)].rate / 2 else "small"
