"""The spec's number interface in the Monte Carlo arithmetic (``conformance/core/rounding.py``):
conversions, sums and dot products (every product and partial sum rounded, or their rounding
drawn whole); lane F's correctly rounded sums. The library functions and the per-value branches:
``mc_functions``."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from ftspec.spec.numbers import FLOAT

from .lanes import BlockMismatch, Lanes, _first, _truth
from .mc_draws import Perturbations, _scale_of, _underflow

__all__ = ["ScalarOps", "correctly_rounded_sums"]


class ScalarOps(Perturbations):
    """The scalar operations of ``MonteCarloNumbers`` (its docstring and the module's)."""

    # -- the spec's number interface --------------------------------------------
    def num(self, x: "float | int | Lanes") -> Lanes:
        if type(x) is Lanes:
            return x
        if self._fed_at < len(self._feed):
            return self._fed(x)
        return Lanes(float(x) * self._ones, self)  # x·1 is x exactly (inf, nan and −0 included)

    def nums(self, xs: Sequence[Any]) -> list[Lanes]:
        """``ManyNumbers``: ``num`` of each of xs, in one call (a block's numbers checked at once)."""
        if self._batch or not all(type(x) is float or type(x) is int for x in xs):
            return [self.num(x) for x in xs]
        given = np.array(xs, dtype=np.float64)
        at, n = self._fed_at, len(xs)
        if at + n > len(self._feed):  # no block, or fewer numbers fed than asked: one by one
            if at < len(self._feed):
                return [self.num(x) for x in xs]
            return [Lanes(r, self) for r in given[:, None] * self._ones]
        rows = self._feed[at:at + n].copy()
        agree = (given == rows[:, 0]) | (np.isnan(given) & np.isnan(rows[:, 0]))
        if not agree.all():
            j = int(np.argmin(agree))
            self._feed, self._fed_at = self._feed[:0], 0
            raise BlockMismatch(f"the block's number {float(rows[j, 0])!r} was converted as {xs[j]!r}")
        self._fed_at = at + n
        return [Lanes(r, self) for r in rows]

    def feeding(self, rows: np.ndarray) -> None:
        """In a block (V > 1): the real inputs and parameters the spec converts next, in the order
        it converts them (``evaluate`` converts inputs, then parameters, each row-major). Row j
        holds number j of every value set, V·(K+1) floats; the spec is given value set 0's
        numbers, and ``num`` checks each against its row (``BlockMismatch`` otherwise)."""
        self._feed, self._fed_at = np.asarray(rows, dtype=np.float64).reshape(-1, self.total), 0

    def pending(self) -> int:
        """Numbers of the block not converted (0 after an evaluation that took them all)."""
        return len(self._feed) - self._fed_at

    def _fed(self, x: Any) -> Lanes:
        row = self._feed[self._fed_at]
        if not (float(x) == row[0] or (math.isnan(float(x)) and math.isnan(row[0]))):
            self._feed, self._fed_at = self._feed[:0], 0
            raise BlockMismatch(f"the block's number {float(row[0])!r} was converted as {x!r}")
        self._fed_at += 1
        return Lanes(row.copy(), self)

    def to_float(self, x: Any) -> float:
        return float(x)

    def detach(self, x: Any) -> Any:
        return x

    def isfinite(self, x: Any) -> bool:
        f = _first(x)
        return math.isfinite(f) if type(f) is not np.ndarray else _truth(np.isfinite(f))

    def isnan(self, x: Any) -> bool:
        f = _first(x)
        return math.isnan(f) if type(f) is not np.ndarray else _truth(np.isnan(f))

    def _drawn_whole(self, terms: np.ndarray, term_u: float, sum_u: float, term_eta: bool = False) -> np.ndarray:
        """Left-to-right sum over axis 0 of (n, ..., V·W) terms, each lane on its own, plus one normal
        draw per result and lane of the variance that rounding each term (at ``term_u``; 0: exact
        terms) and each partial sum (at ``sum_u``) adds to first order (``matmul``'s argument;
        docs/tolerances.md, "Whole products"). ``term_eta``: the terms are products, whose own
        underflow adds η near the threshold; a total near it adds η per partial sum."""
        n = terms.shape[0]
        partial = np.cumsum(terms, axis=0)
        total = partial[-1].copy()
        p0 = self._sets(partial)[..., 0]
        t0 = self._sets(terms)[..., 0]
        if term_eta:  # products: results of this operation, seen as ``dot`` sees them
            self._note(t0)
        self._note(p0)
        if n > 1:
            c = _scale_of(t0, p0, axis=0)
            with np.errstate(all="ignore"):
                t, q = t0 / c, p0[1:] / c
                var = (term_u * term_u / 3.0) * np.sum(t * t, axis=0) + (sum_u * sum_u / 3.0) * np.sum(q * q, axis=0)
                near_total = (np.abs(p0[-1]) < self.zone) & (t0 != 0).any(axis=0)
                count = np.where(near_total, n - 1, 0)
                if term_eta:
                    count = count + ((np.abs(t0) < self.zone) & (t0 != 0)).sum(axis=0)
                eta_c = self.eta / c  # η in units of the scale (c·c can underflow where c is subnormal)
                var = var + (eta_c * eta_c / 3.0) * count
                sd = c * np.sqrt(var)
            self._add_drawn(total, sd)
        if self.f:  # lane F: the correctly rounded sum, as ``FLOAT.fsum``
            self._sets(total)[..., self.f] = correctly_rounded_sums(self._sets(terms)[..., self.f])
        return total

    def _add_drawn(self, total: np.ndarray, sd: np.ndarray) -> None:
        """total (..., V·W) += a normal draw of standard deviation ``sd`` (..., V) in each perturbed
        lane (an infinite or NaN one, from infinite weights: infinite)."""
        sd = np.where(np.isfinite(sd), sd, np.inf)
        sets = self._sets(total)
        with np.errstate(invalid="ignore"):  # an infinite weight: the lanes are infinite already
            sets[..., self.p] += sd[..., None] * self.rng.standard_normal(size=sets[..., self.p].shape)

    def _sum_rows(self, terms: np.ndarray, u: float) -> np.ndarray:
        """Left-to-right sum of one sum's (n, K+1) terms with every partial sum perturbed (the model's
        definition; a batch's or a block's sums draw their rounding whole, ``_drawn_whole``), drawn
        from the row buffer (a sum of a few terms is called often, from the backward pass above all)."""
        n = len(terms)
        partial = terms.cumsum(axis=0)
        lane0 = np.abs(partial[:, 0])
        top = lane0.max()
        if top > self.max_abs:
            self._note(lane0)
        total = partial[-1].copy()
        if n > 1:
            total[1:] += u * (partial[1:, 1:] * self._rows(n - 1)[:, 1:]).sum(axis=0)
            a = abs(total.item(0))
            if a < self.zone and (a != 0.0 or total.any()):
                total[1:] = _underflow(total[1:], self.eta * self._rows(n - 1)[:, 1:].sum(axis=0))
        return total

    def fsum(self, xs: Iterable[Any]) -> Lanes:
        items = list(xs)
        if not items:
            return self.num(0)
        terms = self._stack(items)
        if terms.ndim > 2 or self.v > 1:  # a batch or a block: each sum's rounding drawn whole
            wider = self.acc is not None and self.acc < self.u and len(terms) > 1
            unit = self.acc if wider and self.acc is not None else self.u
            total = self._drawn_whole(terms, unit, unit)
            return Lanes(self._stored(total) if wider else total, self)
        if self.acc is not None and self.acc < self.u and len(terms) > 1:  # accumulated wider, then stored
            with self._computing_at(self.acc):
                self._round_terms(terms)
                total = self._sum_rows(terms, self.u)
            return Lanes(self._stored(total), self)
        if len(terms) > 1:
            self._round_terms(terms)
        return Lanes(self._sum_rows(terms, self.u), self)

    def _round_terms(self, terms: np.ndarray) -> None:
        """Each term of one sum (n, K+1) rounded once, in place, at its own scale.

        The left-to-right partial sums model one order; another order (pairwise, blocked SIMD
        lanes, Welford's running mean) adds each term to a partial sum of another size, and where
        the terms cancel, left to right can be the lucky order (−86 + 75 first, then the small
        terms). Any order's error is Σ x_i θ_i with |θ_i| ≤ (n − 1)u (Higham 2002, §4.2): one
        rounding per term at |x_i| is its part that no order avoids. A dot product's terms are
        its products, rounded already."""
        terms *= 1.0 + self.u * self._rows(len(terms))

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Lanes:
        if len(xs) != len(ys):
            raise ValueError(f"dot of vectors of lengths {len(xs)} and {len(ys)}")
        if not xs:
            return self.num(0)
        prod = self._stack(xs) * self._stack(ys)
        if prod.ndim == 2 and self.v == 1:  # one dot product: lane 0's factor is exactly 1
            top = np.abs(prod[:, 0]).max() if len(prod) else 0.0
            if top > self.max_abs:
                self._note(prod[:, 0])
            prod *= 1.0 + self.mu * self._rows(len(prod))
            self._underflowing_products(prod)
            total = self._sum_rows(prod, self.mu)
        else:  # a batch or a block: each dot product's rounding drawn whole, as ``matmul``'s
            total = self._drawn_whole(prod, self.mu, self.mu, term_eta=True)
        return Lanes(self._stored(total) if self.acc is not None else total, self)

    def _underflowing_products(self, prod: np.ndarray) -> None:
        """The absolute error η of each product (..., V·(K+1)) near the underflow threshold, in place.

        A product is an operation like any other: where it lands in the dtype's subnormal range
        (or is flushed to zero) its error is absolute, not u times its value. Without this, a dot
        product of one term whose product underflows (float16: every size 1, values of 1e-2 and
        1e-4) had only the relative error, and its bound (1.7e-9) was below the subnormal spacing
        the correctly rounded output itself lands on (6e-8). The draws come from a stream of
        their own, so every other perturbation of the case is the one it was before."""
        sets = self._sets(prod)
        a = np.abs(sets[..., 0])
        near = (a < self.zone) & sets.any(axis=-1)
        if near.any():
            perturbed = sets[..., self.p]
            xi = self._product_eta.uniform(-1.0, 1.0, size=perturbed[near].shape)
            perturbed[near] = _underflow(perturbed[near], self.eta * xi)


def correctly_rounded_sums(t: np.ndarray) -> np.ndarray:
    """``FLOAT.fsum`` (``math.fsum``: the correctly rounded sum) over axis 0 of (n, ...) binary64
    terms, bit for bit, vectorised over the other axes.

    One pass of error-free TwoSum transformations (Knuth; Ogita, Rump & Oishi 2005, VecSum)
    leaves the largest partial sum ``hi`` and terms that sum exactly to the rest R; R's sum r
    in binary64 errs by at most γ_{n−1}·Σ|terms|, bounded from above below. Then
    f = fl(hi + r) with its error g (TwoSum) is the correctly rounded sum wherever
    |g| + that bound is below half the gap from f to its nearer neighbour: the exact sum is
    nearer to f than to any other double. Elsewhere (a zero, a near tie, a non-finite term or an
    overflow), ``FLOAT.fsum`` itself decides, and raises what it raises."""
    n = t.shape[0]
    if n == 1:
        return np.where(t[0] == 0, 0.0, t[0])  # math.fsum([-0.0]) is 0.0
    with np.errstate(all="ignore"):
        s = t.copy()
        for i in range(1, n):
            a, b = s[i], s[i - 1]
            x = a + b
            z = x - a
            s[i - 1] = (a - (x - z)) + (b - z)
            s[i] = x
        hi, rest = s[-1], s[:-1]
        r = rest.sum(axis=0)
        bound = np.abs(rest).sum(axis=0) * (2.0 * n * 2.0**-53) + n * 2.0**-1074
        f = hi + r
        z = f - hi
        g = (hi - (f - z)) + (r - z)
        gap = np.minimum(f - np.nextafter(f, -np.inf), np.nextafter(f, np.inf) - f)
        ok = np.isfinite(f) & (f != 0) & (np.abs(g) + bound < 0.5 * gap)
    out = np.where(ok, f, 0.0)
    for at in zip(*np.nonzero(~ok)):
        out[at] = FLOAT.fsum(t[(slice(None),) + at].tolist())
    return out

