"""Real values: seeded NumPy draws shaped by a style, kept inside a dtype.

The deterministic part (generators, magnitudes, column shapers) lives in
``conformance/core/values/``, the one value builder; this module adds what
Hypothesis draws (``seeds``, ``choose``, ``uniform_integer``).

Hypothesis draws only a seed (it shrinks to 0) and the structure around it;
arrays come from ``numpy.random.Generator`` seeded by (seed, a stable hash of
the array's name), so the same seed gives a parameter the same values under
every variant set, and drawing stays fast.

Magnitudes depend on the dtype the case is meant for (``MAGNITUDES``): the
harness rounds the float64 values to it later, and every value and every
intermediate of the algorithms must stay comfortably finite there (float16's
largest value is 65504).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from hypothesis import strategies as st

from ..values import (
    MAGNITUDES,
    Magnitudes,
    generator,
    near_constant_columns,
    separate_columns,
    signed_log_uniform,
    standardised,
)

__all__ = [
    "MAGNITUDES",
    "Magnitudes",
    "choose",
    "generator",
    "near_constant_columns",
    "seeds",
    "separate_columns",
    "signed_log_uniform",
    "standardised",
    "uniform_integer",
]

#: A Hypothesis-drawn seed: shrinks to 0.
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def choose(draw: st.DrawFn, name: str, weights: Mapping[str, float]) -> str:
    """One key of ``weights``, with those weights, from a seeded generator.

    Hypothesis's own small integers favour their ends (and 0 most), which
    would skew the shares of families; a drawn seed keeps the weights, except
    that seed 0 (the shrink target, drawn more often than others) gives the
    first key."""
    keys = list(weights)
    seed = draw(seeds)
    if seed == 0:
        return keys[0]
    p = np.array([float(weights[k]) for k in keys])
    return keys[int(generator(seed, name).choice(len(keys), p=p / p.sum()))]


def uniform_integer(draw: st.DrawFn, name: str, low: int, high: int) -> int:
    """An integer in [low, high], uniform from a seeded generator (seed 0:
    ``low``); see ``choose`` for why not Hypothesis's own integers."""
    seed = draw(seeds)
    if seed == 0 or high <= low:
        return int(low)
    return int(generator(seed, name).integers(low, high + 1))
