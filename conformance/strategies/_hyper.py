"""Hyperparameters: every name of ``entry.hyper``, within a budget.

Constraints come from the entry's fields and the variant, so every draw
passes ``entry.check``:

- normalised widths are ≥ 2 where a layer norm needs it (``width_minimum``);
- a tied unembedding copies the width it forces equal (``equal_widths``);
- with ``ell_max`` among the names, every sequence length is ≤ ``ell_max``:
  lengths are drawn first and ``ell_max`` adds room to the longest (none in
  about a third of draws, so ℓ = ℓ_max is common);
- with two sequence lengths (ℓ_x, ℓ_z) the second equals the first unless a
  coin says otherwise (cross-attention shapes with ℓ_z ≠ ℓ_x).

Each size is ``st.integers(low, bound)``: it shrinks to its smallest value.
"""

from __future__ import annotations

from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from ftspec.spec.errors import SpecError
from ftspec.spec.variants import PAPER, VariantSet

from ._anatomy import equal_widths, width_minimum
from ._options import hyper_kind, resolve_budget, resolve_entry

__all__ = ["hyperparameters"]


@st.composite
def hyperparameters(draw: st.DrawFn, entry: Any, *, variant: VariantSet = PAPER,
                    budget: Any = "default") -> dict[str, int]:
    """{hyperparameter: int} for ``entry`` (Entry or name) under ``variant``, in ``entry.hyper`` order."""
    e = resolve_entry(entry)
    b = resolve_budget(budget)
    if not isinstance(variant, VariantSet):
        raise ValueError(f"variant: expected a VariantSet, given {variant!r}")
    for name in e.hyper:
        hyper_kind(name)  # unknown names fail here, before any draw
    low = {n: e.minimum.get(n, 1) for n in e.hyper}
    for n, m in width_minimum(e, variant).items():
        if n in low:
            low[n] = max(low[n], m)
    followers = dict(equal_widths(e, variant))
    lengths = [n for n in e.hyper if hyper_kind(n) == "length"]

    hyper: dict[str, int] = {}
    for name in e.hyper:
        if name == "ell_max" or name in followers:
            continue
        bound = b.bound(name)
        if name in lengths[1:] and not draw(st.booleans()):
            hyper[name] = hyper[lengths[0]]  # the same length as the first sequence
            continue
        hyper[name] = draw(st.integers(low[name], max(low[name], bound)))
    for name, leader in followers.items():
        hyper[name] = max(hyper[leader], low[name])
        hyper[leader] = hyper[name]
    if "ell_max" in e.hyper:
        longest = max((hyper[n] for n in lengths), default=low["ell_max"])
        room = 0
        if draw(st.integers(0, 2)) and longest < b.context:
            room = draw(st.integers(0, b.context - longest))
        hyper["ell_max"] = max(longest + room, low["ell_max"])
    hyper = {n: int(hyper[n]) for n in e.hyper}
    if e.check is not None:
        try:
            e.check(hyper, variant)
        except SpecError:  # a constraint this module does not know: discard (tests count these)
            assume(False)
    return hyper
