"""The spec's number interface in the Monte Carlo arithmetic (``conformance/core/rounding.py``):
conversions, sums and dot products (every product and partial sum rounded, or their rounding
drawn whole), and the library functions; lane F's correctly rounded sums."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ftspec.spec.numbers import FLOAT

from . import portable_math as pm
from .lanes import BlockMismatch, Lanes, _first, _lane, _truth
from .mc_draws import Perturbations, _scale_of, _underflow

__all__ = ["ScalarOps", "correctly_rounded_sums"]


class ScalarOps(Perturbations):
    """The scalar operations of ``MonteCarloNumbers`` (its docstring and the module's)."""

    # -- the spec's number interface --------------------------------------------
    def num(self, x: "float | int | Lanes") -> Lanes:
        if type(x) is Lanes:
            return x
        if self._feed:
            return self._fed(x)
        return Lanes(float(x) * self._ones, self)  # x·1 is x exactly (inf, nan and −0 included)

    def feeding(self, rows: list[np.ndarray]) -> None:
        """In a block (V > 1): the real inputs and parameters the spec converts next, in the order
        it converts them (``evaluate`` converts inputs, then parameters, each row-major). Row j
        holds number j of every value set, V·(K+1) floats; the spec is given value set 0's
        numbers, and ``num`` checks each against its row (``BlockMismatch`` otherwise)."""
        self._feed = list(reversed(rows))

    def pending(self) -> int:
        """Numbers of the block not converted (0 after an evaluation that took them all)."""
        return len(self._feed)

    def _fed(self, x: Any) -> Lanes:
        row = self._feed.pop()
        if not (float(x) == row[0] or (math.isnan(float(x)) and math.isnan(row[0]))):
            self._feed = []
            raise BlockMismatch(f"the block's number {float(row[0])!r} was converted as {x!r}")
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


    # -- library functions ----------------------------------------------------
    def _fn(self, f: Callable[[np.ndarray], Any], x: Any, exact: Callable[..., float]) -> Lanes:
        """Library function ``f`` on every lane (``portable_math``); lane F takes ``exact``, the
        ``FLOAT`` function itself (so its refusals, such as log of 0, are the spec's)."""
        arg = np.array(_lane(x), dtype=np.float64)
        with np.errstate(all="ignore"):
            r = np.asarray(f(arg), dtype=np.float64)
        if r.ndim == 0:
            r = np.full(self.total, float(r))
        elif r.base is not None:  # rounded in place below: never a view of another number's lanes
            r = r.copy()
        if self.f:
            given = self._sets(np.broadcast_to(arg, r.shape).copy())[..., self.f]
            self._sets(r)[..., self.f] = np.array([exact(a) for a in given.ravel().tolist()]).reshape(given.shape)
        return self._rounded(r, self.t)

    def exp(self, x: Any) -> Lanes:
        return self._fn(pm.exp, x, FLOAT.exp)

    def log(self, x: Any) -> Lanes:
        return self._fn(pm.log, x, FLOAT.log)

    def sqrt(self, x: Any) -> Lanes:
        return self._fn(np.sqrt, x, FLOAT.sqrt)

    def tanh(self, x: Any) -> Lanes:
        return self._fn(pm.tanh, x, FLOAT.tanh)

    def erf(self, x: Any) -> Lanes:
        return self._fn(pm.erf, x, FLOAT.erf)

    def sin(self, x: Any) -> Lanes:
        return self._fn(pm.sin, x, FLOAT.sin)

    def cos(self, x: Any) -> Lanes:
        return self._fn(pm.cos, x, FLOAT.cos)

    def pow(self, base: Any, exponent: Any) -> Lanes:
        b, e = _lane(base), _lane(exponent)
        shape = np.broadcast_shapes(np.shape(b), np.shape(e), (self.total,))
        r = pm.pow(np.broadcast_to(b, shape), e)
        if self.f:
            bs, es = (self._sets(np.broadcast_to(a, shape).copy())[..., self.f].ravel().tolist() for a in (b, e))
            self._sets(r)[..., self.f] = np.array([FLOAT.pow(x, y) for x, y in zip(bs, es)]).reshape(
                self._sets(r)[..., self.f].shape)
        return self._rounded(r, self.t)

    def by_sign(self, x: Any, nonnegative: Callable[[Any], Any], negative: Callable[[Any], Any]) -> Any:
        """``PerValueSign``: each number (each entry of a batch, each value set of a block) takes
        the branch its lane 0 (lane F in a block) takes alone, so every entry draws what its own
        branch draws, the scalar evaluation's distribution. Where a batch or block mixes signs,
        both forms run, each on the entries that take it (the others read 0 there, so a form's
        overflow outside its domain, such as exp(−x) for x ≪ 0, never reaches ``ranges``)."""
        if type(x) is not Lanes:
            x = self.num(x)
        ahead = self._branch(x.x) >= 0  # (..., V); NaN takes the negative form, as ``x >= 0`` does
        if ahead.all():
            return nonnegative(x)
        if not ahead.any():
            return negative(x)
        mask = np.repeat(ahead, self.width, axis=-1)
        up = nonnegative(Lanes(np.where(mask, x.x, 0.0), self))
        down = negative(Lanes(np.where(mask, 0.0, x.x), self))
        return Lanes(np.where(mask, _lane(up), _lane(down)), self)

    def step(self, x: Any) -> Lanes:
        """[[x > 0]] per lane: ReLU's derivative, so a sign that rounding flips flips the branch."""
        if type(x) is not Lanes:
            x = self.num(x)
        return Lanes(np.where(x.x > 0, 1.0, 0.0), self)

    def relu(self, x: Any) -> Lanes:
        if type(x) is not Lanes:
            x = self.num(x)
        return Lanes(np.where(np.isnan(x.x) | (x.x > 0), x.x, 0.0), self)



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

