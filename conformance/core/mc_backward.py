"""The backward pass of the spec's reverse mode (``spec/autodiff.py``) in Monte Carlo arithmetic,
level by level (``spec.numbers.BatchedBackward``; the model: ``conformance/core/rounding.py``).

The spec walks its tape once, from the output back: for each entry with an adjoint a, for each of
its parents p with local derivative l, a term a·l (a product, rounded) is added to p's adjoint
(a sum, rounded). Evaluated so in Monte Carlo arithmetic, a gradient is two rounded operations
per edge of the tape, each a few NumPy calls on one number's lanes: tens of thousands of calls for
a small model, most of a training entry's reference (docs/benchmarks.md, "Against a plain
check").

Here the same operations run level by level. An entry's level is the length of the longest path
to it from the output; every child of an entry has a lower level, so when a level's turn comes,
its entries' adjoints are complete. Per level: each entry's adjoint is the sum of its terms, in
the order the spec adds them (its children by falling tape index, then each child's parents in
order: the order in which the edges are listed here), left to right in every lane; then every
edge leaving the level forms its term in one product of stacked arrays. What each operation
rounds is the scalar evaluation's:

- each term a·l is rounded as ``Lanes.__mul__`` rounds it, with its own draw (δ per lane, η near
  the underflow threshold), also where l is ±1, as the scalar walk does;
- each adjoint of several terms draws the rounding of its partial sums whole, one normal draw per
  lane of variance u²/3·Σ S_j² over the partial sums S_2 … S_n (η²/3 for each near the
  underflow threshold), as every sum of a block does (``mc_scalar._drawn_whole``,
  docs/tolerances.md "Whole products"): the first-order distribution of the scalar walk's
  independent roundings, with tails at least as heavy;
- lane 0 and lane F add the same terms in the same order in binary64 with no perturbation, so
  they are the scalar walk's bit for bit.

A local derivative that selects (SiLU's two forms in a block of mixed signs, ``_Selected`` in
spec/autodiff.py) passes its adjoint through its own ``passing``, one edge at a time.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .lanes import Lanes
from .mc_draws import _scale_of, _underflow
from .mc_functions import LibraryFunctions

__all__ = ["BackwardPass"]


class BackwardPass(LibraryFunctions):
    """``MonteCarloNumbers``' backward pass, level by level (the module docstring)."""

    def adjoints(self, tape: Sequence[Sequence[tuple[int, Any]]], output: int) -> dict[int, Lanes]:
        """``BatchedBackward``: ``tape[i]``, entry i's (parent key, local derivative) pairs; the
        adjoint of every key the entry ``output`` depends on, ``output``'s own 1."""
        level: dict[int, int] = {output: 0}  # longest path from the output
        for i in range(output, -1, -1):
            d = level.get(i)
            if d is None:
                continue
            for key, _ in tape[i]:
                if level.get(key, -1) <= d:
                    level[key] = d + 1
        # the edges in the order the scalar walk takes them; each key's incoming edges in that order
        child: list[int] = []
        parent: list[int] = []
        local: list[Any] = []
        incoming: dict[int, list[int]] = {}
        leaving: dict[int, tuple[int, int]] = {}
        for i in range(output, -1, -1):
            if i not in level:
                continue
            start = len(child)
            for key, loc in tape[i]:
                incoming.setdefault(key, []).append(len(child))
                child.append(i)
                parent.append(key)
                local.append(loc)
            leaving[i] = (start, len(child))
        rows = {key: r for r, key in enumerate(level)}
        w = self.total
        adj = np.empty((len(rows), w))
        adj[rows[output]] = self.num(1).x
        n_edges = len(child)
        terms = np.zeros((n_edges + 1, w))  # the last row stays 0: padding of the sums below
        # a selection passes its adjoint on (``passing``); its row of the products below is a placeholder
        chosen = {e: loc for e, loc in enumerate(local) if type(loc) is not Lanes and hasattr(loc, "passing")}
        plain: dict[float, np.ndarray] = {0.0: np.zeros(w)}  # rows of the plain numbers (mostly ±1: sums, differences)
        loc_rows = np.array([loc.x if type(loc) is Lanes else plain[0.0] if e in chosen else plain.get(loc)
                             if loc in plain else plain.setdefault(loc, np.full(w, float(loc)))
                             for e, loc in enumerate(local)]) if local else terms[:0]
        child_rows = np.array([rows[c] for c in child], dtype=np.intp)
        by_level: dict[int, list[int]] = {}
        for key, d in level.items():
            if key in leaving:
                by_level.setdefault(d, []).append(key)
        zero = self.num(0)
        for d in sorted(by_level):
            keys = by_level[d]
            if d:
                self._sum_terms(keys, incoming, terms, adj, rows, n_edges)
            spans = [leaving[k] for k in keys]
            edges = np.concatenate([np.arange(a, b) for a, b in spans]) if spans else np.empty(0, np.intp)
            if not edges.size:
                continue
            # one product per edge, each rounded on its own (``Lanes.__mul__``)
            terms[edges] = self._rounded_rows(adj[child_rows[edges]] * loc_rows[edges])
            for e in (int(e) for e in edges if int(e) in chosen) if chosen else ():
                passed = chosen[e].passing(Lanes(adj[child_rows[e]].copy(), self), zero)
                terms[e] = passed.x if type(passed) is Lanes else float(passed)
        leaves = [key for key in level if key not in leaving and key != output]
        self._sum_terms(leaves, incoming, terms, adj, rows, n_edges)
        return {key: Lanes(adj[r].copy(), self) for key, r in rows.items()}

    def _rounded_rows(self, rows: np.ndarray, units: float = 1.0) -> np.ndarray:
        """``_rounded`` of n numbers (rows: (n, V·(K+1)), fresh: rounded in place), their draws taken
        at once (``_fresh_rows``): the same model, another order of the random stream."""
        by_set = self._sets(rows)
        a = np.abs(by_set[..., 0])
        self._note(a)
        xi = self._fresh_rows(len(rows))
        xi *= units * self.u
        xi += 1.0
        rows *= xi
        near = (a < self.zone) & by_set.any(axis=-1)
        if near.any():
            perturbed = by_set[..., self.p]
            perturbed[near] = _underflow(perturbed[near], self.eta * self._fresh_rows(int(near.sum()))
                                         .reshape(-1, self.v, self.width)[:, 0, self.p])
        return rows

    def _sum_terms(self, keys: Sequence[int], incoming: dict[int, list[int]], terms: np.ndarray, adj: np.ndarray,
                   rows: dict[int, int], pad: int) -> None:
        """adj[key] for each key: the sum of its terms, left to right, its partial sums' rounding
        drawn whole (the module docstring); a key with one term takes it as it is."""
        if not keys:
            return
        lists = [incoming[k] for k in keys]
        counts = np.array([len(x) for x in lists])
        target = np.array([rows[k] for k in keys], dtype=np.intp)
        one = counts == 1
        if one.any():
            adj[target[one]] = terms[[x[0] for x, o in zip(lists, one) if o]]
        if one.all():
            return
        many = [x for x, o in zip(lists, one) if not o]
        n = counts[~one]
        targets = target[~one]
        # keys with about as many terms summed together (padding at most doubles a group's width)
        group = np.ceil(np.log2(n)).astype(int)
        for g in np.unique(group):
            take = np.nonzero(group == g)[0]
            self._sum_group([many[j] for j in take], n[take], targets[take], terms, adj, pad)

    def _sum_group(self, lists: list[list[int]], n: np.ndarray, target: np.ndarray, terms: np.ndarray,
                   adj: np.ndarray, pad: int) -> None:
        """``_sum_terms`` of keys with two terms or more: ``lists``, each key's terms (edges)."""
        width = int(n.max())
        index = np.full((width, len(lists)), pad, dtype=np.intp)
        for j, x in enumerate(lists):
            index[:len(x), j] = x
        gathered = terms[index]  # (n, m, V·W): term j of every key at [j]
        total = gathered[0].copy()
        partial0 = np.empty((width,) + total.shape[:-1] + (self.v,))  # lane 0 of every partial sum
        partial0[0] = self._sets(total)[..., 0]
        for j in range(1, width):  # each lane left to right; the padding adds exact zeros
            total += gathered[j]
            partial0[j] = self._sets(total)[..., 0]
        p0 = np.moveaxis(partial0, 0, 1)  # (m, n, V)
        at = np.arange(width)[None, :]
        rounded = ((at >= 1) & (at < n[:, None]))[..., None]  # S_2 … S_n: the sums that round
        s = np.where(rounded, p0, 0.0)
        self._note(s)
        c = _scale_of(s, axis=1)  # (m, V)
        with np.errstate(all="ignore"):
            q = s / c[:, None]
            var = (self.u * self.u / 3.0) * np.sum(q * q, axis=1)
            near = (rounded & (np.abs(p0) < self.zone) & (p0 != 0)).sum(axis=1)
            eta_c = self.eta / c
            sd = c * np.sqrt(var + (eta_c * eta_c / 3.0) * near)
        self._add_drawn(total, sd)
        adj[target] = total
