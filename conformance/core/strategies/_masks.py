"""Attention masks, indexed [t_z, t_x], True = t_x may attend to t_z.

Families (``MASK_FAMILIES``): bidirectional (all True); causal, top-left
[[t_z ≤ t_x]] (the paper's formula, read literally when ℓ_z ≠ ℓ_x); causal
bottom-right [[t_z ≤ t_x + ℓ_z − ℓ_x]] when ℓ_z > ℓ_x (for ℓ_z < ℓ_x it
would empty the first columns); random with every column keeping a key; and
masks with one or more all-False columns ("empty-query"), occasionally all of
them.

The simplest draw (Hypothesis's first example and the shrink target) is the
causal mask, and the simplest padding pads the last position: from ℓ = 2
(the structural simplest length, ``_hyper.STRUCTURAL``) a key is masked in
the first example, where a wrong mask shows (it went unseen before, 2026-12-05).

Which masks may have empty columns follows the variant's ``empty_query``
(``masks(..., empty_query=...)``): under "nan", "zeros" and "uniform" half of
the masks are empty-query ones; under the paper's "error" one in
``ERROR_EMPTY_ONE_IN``, because the spec refuses such a case and an
implementation must refuse it too (the runner checks that it raises), a
cheap check that should not take half of a search. Without ``empty_query``,
``allow_empty`` says yes (one in two) or no.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from hypothesis import strategies as st

from ._budgets import check_int
from ._draws import generator, seeds

__all__ = ["ERROR_EMPTY_ONE_IN", "MASK_FAMILIES", "PADDING_FAMILIES", "causal_mask", "mask_family", "masks",
           "paddings"]

#: under empty_query="error", one mask in this many has empty query columns
ERROR_EMPTY_ONE_IN = 8
_EMPTY_QUERY = ("error", "nan", "zeros", "uniform")

MASK_FAMILIES = ("bidirectional", "causal", "random", "causal-bottom-right", "empty-query")


#: padding flags (True = a real token): none padded, padding at the end (right, the usual batch
#: padding), at the start (left, Hugging Face's ``generate`` for decoders), scattered, or all of it
PADDING_FAMILIES = ("none", "right", "left", "random", "all")


@st.composite
def paddings(draw: st.DrawFn, ell: int, *, empty_query: str = "error", window: int = 0) -> np.ndarray:
    """A bool (ℓ,) padding vector, True = a real token. Under ``empty_query="error"`` position 0 is
    always real, so no query is left without a key (bidirectional or causal; the spec refuses
    such a case and the refusal is checked on its own, ``spec.refusals.empty_padding``); under the
    other conventions left padding (a causal query with no key) and all-padding are drawn too.
    Under a sliding ``window`` W ≥ 1 as well (a causal query t reads keys t − W < t_z ≤ t only),
    the last position of every W padded in a row is made real again, so each window keeps a key."""
    ell = check_int("ell", ell)
    if empty_query not in _EMPTY_QUERY:
        raise ValueError(f"empty_query: expected one of {_EMPTY_QUERY}, given {empty_query!r}")
    # right padding first: the simplest draw (Hypothesis's first example, the shrink target) pads a key
    families = ["right", "none", "random"] + (["left", "all"] if empty_query != "error" else [])
    family = draw(st.sampled_from(families))
    pad = np.ones(ell, dtype=bool)
    if family == "all":
        pad[:] = False
    elif family in ("right", "left") and ell >= 2:
        k = draw(st.integers(1, ell - 1))  # padded positions
        if family == "right":
            pad[ell - k:] = False
        else:
            pad[:k] = False
    elif family == "random":
        rng = generator(draw(seeds), "padding")
        pad = rng.random(ell) < rng.uniform(0.3, 0.9)
        if empty_query == "error":
            pad[0] = True
    if empty_query == "error" and window:
        for t in range(window - 1, ell):
            if not pad[t - window + 1:t + 1].any():
                pad[t] = True  # W padded in a row would leave query t with no key in its window
    return pad


def causal_mask(ell_z: int, ell_x: int, alignment: str = "top_left") -> np.ndarray:
    shift = 0 if alignment == "top_left" else ell_z - ell_x
    return np.arange(ell_z)[:, None] <= np.arange(ell_x)[None, :] + shift


def mask_family(mask: np.ndarray) -> str:
    """The most specific family a mask belongs to."""
    mask = np.asarray(mask, dtype=bool)
    ell_z, ell_x = mask.shape
    if not mask.any(axis=0).all():
        return "empty-query"
    if mask.all():
        return "bidirectional"
    if np.array_equal(mask, causal_mask(ell_z, ell_x)):
        return "causal"
    if np.array_equal(mask, causal_mask(ell_z, ell_x, "bottom_right")):
        return "causal-bottom-right"
    return "random"


def _random(rng: np.random.Generator, ell_z: int, ell_x: int) -> np.ndarray:
    m = rng.random((ell_z, ell_x)) < rng.uniform(0.2, 0.9)
    for t in np.flatnonzero(~m.any(axis=0)):
        m[rng.integers(0, ell_z), t] = True
    return m


@st.composite
def masks(draw: st.DrawFn, ell_z: int, ell_x: int, *, allow_empty: bool = False,
          empty_query: Optional[str] = None) -> np.ndarray:
    """A bool (ℓ_z, ℓ_x) mask. All-False columns: one mask in 2 under ``empty_query`` "nan",
    "zeros" or "uniform", one in ``ERROR_EMPTY_ONE_IN`` under "error"; without ``empty_query``,
    one in 2 with ``allow_empty``, never without."""
    ell_z, ell_x = check_int("ell_z", ell_z), check_int("ell_x", ell_x)
    if not isinstance(allow_empty, bool):
        raise ValueError(f"allow_empty: expected a bool, given {allow_empty!r}")
    if empty_query is not None and empty_query not in _EMPTY_QUERY:
        raise ValueError(f"empty_query: expected one of {_EMPTY_QUERY}, given {empty_query!r}")
    if empty_query is None:
        one_in = 2 if allow_empty else 0
    else:
        one_in = ERROR_EMPTY_ONE_IN if empty_query == "error" else 2
    # causal first: the simplest draw (Hypothesis's first example, the shrink target) masks a key
    # wherever ℓ_z ≥ 2
    families = ["causal", "bidirectional", "random"]
    if ell_z > ell_x:
        families.append("causal-bottom-right")
    family = draw(st.sampled_from(families))
    # the coin's simplest value keeps the family: the first example (and the shrink target of a
    # value failure) is judged on its values, not a refusal
    if one_in and draw(st.integers(0, one_in - 1)) == one_in - 1:
        family = "empty-query"
    if family == "bidirectional":
        return np.ones((ell_z, ell_x), dtype=bool)
    if family == "causal":
        return causal_mask(ell_z, ell_x)
    if family == "causal-bottom-right":
        return causal_mask(ell_z, ell_x, "bottom_right")
    rng = generator(draw(seeds), "mask")
    m = _random(rng, ell_z, ell_x)
    if family == "empty-query":
        if rng.random() < 0.2:
            m[:] = False
        else:
            k = 1 + int(rng.integers(0, ell_x)) if rng.random() < 0.3 else 1
            m[:, rng.choice(ell_x, size=k, replace=False)] = False
    return m
