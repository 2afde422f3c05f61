"""Seeded generators and magnitudes: the value shapes every real input and parameter is drawn in."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..dtypes import FORMATS, round_to


def generator(seed: int, name: str = "") -> np.random.Generator:
    """The generator for the array called ``name`` under ``seed``: Philox keyed
    by (seed, crc32 of the name), a counter-based stream per array that is
    cheap to create."""
    return np.random.Generator(np.random.Philox(key=(int(seed) % 2**32) << 32 | zlib.crc32(name.encode())))


@dataclass(frozen=True)
class Magnitudes:
    """Per-dtype ranges of the adversarial styles (exponents are base 10)."""

    wide: tuple[float, float]  # wide-range data: ±10^U(lo, hi)
    wide_weight: tuple[float, float]  # multipliers of N(0, 1/fan_in) weights
    wide_scale: tuple[float, float]  # γ: ±10^U(lo, hi)
    scores: tuple[float, float]  # large-logits: largest |score| / |logit|, log-uniform
    spread: float  # near-constant: smallest relative spread (must survive rounding)
    level: tuple[float, float]  # near-constant: |c| of the columns c + deviations
    rate: float = 1.0  # the largest |η| of SGD (a few steps compound it)
    #: near-epsilon: log10 of the mean square of a column that reaches a norm, U(lo, hi): around the
    #: ε values the strategies draw (1e-6, 1e-5, 1e-3) inside the root (mean square near ε) and
    #: outside it (root mean square near ε), where ε moves the normalised value
    quiet: tuple[float, float] = (-12.0, -3.0)


MAGNITUDES = {
    "float64": Magnitudes((-3, 2), (-2, 0.5), (-2, 0.5), (50, 1000), 1e-4, (0.25, 3.0)),
    "float32": Magnitudes((-3, 2), (-2, 0.5), (-2, 0.5), (50, 500), 1e-4, (0.25, 3.0)),
    # range of float32, 8 significant bits: scores past ~100 would be all rounding
    # η: with 8 significant bits, a few SGD steps at η ≳ 0.4 amplify rounding
    # chaotically (the Monte Carlo lanes diverge: no tolerance can be derived)
    "bfloat16": Magnitudes((-3, 2), (-2, 0.5), (-2, 0.5), (12, 100), 3e-2, (0.5, 3.0), rate=0.25),
    # max 65504: data ≤ 5 keeps Σ x² and Kᵀ Q small; exp overflows past 11.09
    # near-epsilon: columns of rms ≥ 1e-3 (their squares, 1e-6, are already float16 subnormals)
    "float16": Magnitudes((-3, 0.7), (-2, 0.0), (-2, 0.3), (12, 60), 1e-2, (1.0, 4.0), quiet=(-6.0, -3.0)),
}
assert set(MAGNITUDES) == set(FORMATS)


def signed_log_uniform(rng: np.random.Generator, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    """±10^U(lo, hi), signs fair: values spanning hi − lo orders of magnitude."""
    mag = 10.0 ** rng.uniform(lo, hi, size=shape)
    return np.where(rng.random(shape) < 0.5, -mag, mag)


def quiet_columns(rng: np.random.Generator, shape: tuple[int, ...], m: Magnitudes) -> np.ndarray:
    """Columns of mean 0 and mean square 10^U(m.quiet) (one per column; a 1-D array is one column):
    where the mean square (RMSNorm) or the variance (layer norm) is comparable with ε, so that ε
    moves the normalised value by a large fraction (a wrong ε shows in any dtype; on
    well-scaled values a wrong ε went unseen at bfloat16 for 100+ examples)."""
    x = np.empty(shape)
    cols = x.reshape(shape[0], -1) if len(shape) > 1 else x.reshape(-1, 1)
    d, n = cols.shape
    for j in range(n):
        rms = math.sqrt(10.0 ** rng.uniform(*m.quiet))
        z = standardised(rng.standard_normal(d)) if d > 1 else np.array([1.0 if rng.random() < 0.5 else -1.0])
        cols[:, j] = rms * z
    return x


def near_constant_columns(rng: np.random.Generator, shape: tuple[int, ...], m: Magnitudes, *,
                          sign: float = 0.0, pattern: Optional[np.ndarray] = None) -> np.ndarray:
    """Columns c + c·s·z: |c| from ``m.level``, relative spread s log-uniform in
    [m.spread, 0.1], z standardised (mean 0, standard deviation 1).

    A 1-D array is one column. ``sign`` fixes the sign of every c (0: random)
    and ``pattern`` fixes z for every column: sums of such columns (token plus
    position embeddings) then have a relative spread between their columns'.
    """
    x = np.empty(shape)
    cols = x.reshape(shape[0], -1) if len(shape) > 1 else x.reshape(-1, 1)
    d, n = cols.shape
    for j in range(n):
        c = rng.uniform(*m.level) * (sign or (1.0 if rng.random() < 0.5 else -1.0))
        s = 10.0 ** rng.uniform(np.log10(m.spread), -1.0)
        z = standardised(rng.standard_normal(d)) if pattern is None else pattern
        cols[:, j] = c + c * s * z
    return x


def standardised(z: np.ndarray) -> np.ndarray:
    """z with mean 0 and standard deviation 1 (unchanged when it has one entry)."""
    if z.size < 2:
        return z
    z = z - z.mean()
    return z / z.std()


def separate_columns(x: np.ndarray, dtype: str) -> np.ndarray:
    """Make every column with d ≥ 2 entries non-constant after rounding to
    ``dtype`` (a layer norm without ε refuses zero variance): a column whose
    rounded entries are all equal gets its first entry moved by a few ulps."""
    if x.ndim != 2 or x.shape[0] < 2:
        return x
    step = 2.0 ** (3 - FORMATS[dtype].mantissa_bits)
    r = round_to(x, dtype)
    for j in np.flatnonzero(np.all(r == r[:1], axis=0)):
        x[0, j] += max(abs(x[0, j]), 1e-2) * step
    return x
