"""Token IDs and positions.

Token sequences come in families (``TOKEN_FAMILIES``): uniform; one token
repeated; few distinct tokens; special tokens, where IDs 0 and N_V − 1 stand
in for bos/eos/mask and appear at the ends and scattered. Positions favour
the ends 0 and ℓ_max − 1.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ._budgets import check_int
from ._draws import generator, seeds

__all__ = ["TOKEN_FAMILIES", "positions", "token_family", "token_sequences", "tokens"]

TOKEN_FAMILIES = ("uniform", "repeated", "few-distinct", "special")


def _sequence(family: str, rng: np.random.Generator, N_V: int, ell: int) -> np.ndarray:
    special = np.array([0, N_V - 1])
    if family == "uniform":
        return rng.integers(0, N_V, size=ell)
    if family == "repeated":
        v = rng.choice(special) if rng.random() < 0.5 else rng.integers(0, N_V)
        return np.full(ell, v)
    if family == "few-distinct":
        pool = rng.choice(N_V, size=min(N_V, int(rng.integers(2, 4))), replace=False)
        return rng.choice(pool, size=ell)
    x = rng.integers(0, N_V, size=ell)  # special
    x[rng.random(ell) < 0.25] = rng.choice(special)
    if rng.random() < 0.6:
        x[0] = 0  # bos
    if rng.random() < 0.6:
        x[-1] = N_V - 1  # eos
    if not np.isin(x, special).any():
        x[rng.integers(0, ell)] = rng.choice(special)
    return x


@st.composite
def token_sequences(draw: st.DrawFn, N_V: int, ell: int) -> np.ndarray:
    """int64 array of ``ell`` token IDs in [0, N_V)."""
    N_V, ell = check_int("N_V", N_V), check_int("ell", ell)
    family = draw(st.sampled_from(TOKEN_FAMILIES))
    seed = draw(seeds)
    return _sequence(family, generator(seed, "tokens"), N_V, ell).astype(np.int64)


def token_family(x: np.ndarray, N_V: int) -> set[str]:
    """What a sequence exhibits: "repeats", "constant", "special" (for reports and tests)."""
    x = np.asarray(x).ravel()
    out = set()
    if len(np.unique(x)) < len(x):
        out.add("repeats")
    if len(x) > 1 and len(np.unique(x)) == 1:
        out.add("constant")
    if np.isin(x, [0, N_V - 1]).any():
        out.add("special")
    return out


def _index(draw: st.DrawFn, limit: int) -> int:
    which = draw(st.integers(0, 2))
    if which == 0:
        return draw(st.integers(0, limit - 1))
    return 0 if which == 1 else limit - 1


@st.composite
def tokens(draw: st.DrawFn, N_V: int) -> np.ndarray:
    """One token ID (0-d int64 array); 0 and N_V − 1 each a third of the time."""
    return np.array(_index(draw, check_int("N_V", N_V)), dtype=np.int64)


@st.composite
def positions(draw: st.DrawFn, ell_max: int) -> np.ndarray:
    """One position (0-d int64 array) in [0, ℓ_max); 0 and ℓ_max − 1 each a third of the time."""
    return np.array(_index(draw, check_int("ell_max", ell_max)), dtype=np.int64)
