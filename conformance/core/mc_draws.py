"""Where the Monte Carlo arithmetic draws its roundings (``conformance/core/rounding.py``, whose
module docstring states the model): the number system's state and parameters, the random stream
of perturbations δ and underflow errors η, and the rounding of one result in every lane, in a
batch or in a block of value sets.

``Perturbations``' parameters: ``u``: unit roundoff of the target dtype; ``eta``: absolute error one
operation may make when its result underflows; ``lanes``: K;
``transcendental_units``: a library function's error on an exact
argument, in units of u; ``matmul_u``: unit roundoff of matrix products
(a reduced-precision tier such as TF32 rounds them more coarsely);
``seed``: makes the perturbations reproducible; ``batched``: offer the
spec ``Batched``, the whole-matrix hooks (False: every operation one
scalar at a time, the model's definition, kept for tests); ``values``:
V, the value sets of a block carried side by side (``Block`` in rounding.py's docstring).

Mixed precision (docs/tolerances.md, "Mixed precision"): ``accumulate_u``,
the unit roundoff of a wider format in which sums, dot products and
matrix products accumulate: their terms, products and partial sums are
perturbed at it, and the result is rounded once to the dtype (u), as an
implementation stores it; ``matmul_u`` then names the tier's unit, at
least ``accumulate_u``. ``softmax_u``: the unit of a wider format in which
softmax is computed: every operation of its four lines is perturbed at
it, and each output once at u. None (or a unit not below u): the dtype's.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .lanes import Lanes, _Diverged

__all__ = ["Perturbations"]

#: rows of random draws generated at once: the first time, and at most (a small evaluation
#: needs a few hundred; generating thousands would cost more than it does)
_FIRST_BUFFER, _MAX_BUFFER = 64, 8192


def _underflow(rel: np.ndarray, absolute: np.ndarray) -> np.ndarray:
    """Add the absolute (underflow) error without what rounding cannot do:
    an exact zero stays zero and no result changes sign."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf lanes (masked scores) pass through
        out = rel + absolute
        return np.where((rel == 0) | (rel * out < 0), 0.0 * rel, out)


def _scale_of(*parts: np.ndarray, axis: int) -> np.ndarray:
    """The largest finite |x| over ``axis`` of the parts (1 where none is positive): a drawn
    rounding's weights are divided by it before they are squared, so that Σ x² cannot overflow
    where the weights themselves are finite (|x| above 1e154 in binary64)."""
    top = np.max([np.max(np.where(np.isfinite(x), np.abs(x), 0.0), axis=axis, initial=0.0) for x in parts], axis=0)
    return np.where(top > 0, top, 1.0)



class _Stream:
    """The random stream of a ``Perturbations``: rows of uniform draws in [−1, 1], buffered (one
    number's at a time is the hot path) or drawn at once (many numbers' rows)."""

    rng: np.random.Generator
    v: int
    k: int
    width: int
    total: int
    p: slice
    base_u: float
    t: float
    _xi_rows: np.ndarray
    _f1: np.ndarray
    _ft: np.ndarray
    _i: int
    _chunk: int

    def _refill(self) -> None:
        n, self._chunk = self._chunk, min(2 * self._chunk, max(_MAX_BUFFER // self.v, _FIRST_BUFFER // self.v))
        self._xi_rows = np.zeros((n, self.total))
        self._xi_rows.reshape(n, self.v, self.width)[:, :, self.p] = self.rng.uniform(-1.0, 1.0,
                                                                                      size=(n, self.v, self.k))
        self._f1 = 1.0 + self.base_u * self._xi_rows
        self._ft = 1.0 + (self.t * self.base_u) * self._xi_rows
        self._i = 0

    def _row(self) -> int:
        """Index of the next unused row of draws."""
        if self._i >= len(self._xi_rows):
            self._refill()
        i = self._i
        self._i = i + 1
        return i

    def _rows(self, n: int) -> np.ndarray:
        """(n, V·(K+1)) uniform draws in [-1, 1], 0 in every lane 0."""
        i = self._i
        if i + n <= len(self._xi_rows):
            self._i = i + n
            return self._xi_rows[i:i + n]
        parts = []
        while n > 0:
            if self._i >= len(self._xi_rows):
                self._refill()
            take = min(n, len(self._xi_rows) - self._i)
            parts.append(self._xi_rows[self._i:self._i + take])
            self._i += take
            n -= take
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _fresh_rows(self, n: int) -> np.ndarray:
        """(n, V·(K+1)) uniform draws in [-1, 1], 0 in every lane 0 and lane F, drawn at once from
        the stream rather than through the buffer (a many-row draw: ``mc_backward``)."""
        xi = np.zeros((n, self.v, self.width))
        xi[:, :, self.p] = self.rng.uniform(-1.0, 1.0, size=(n, self.v, self.k))
        return xi.reshape(n, self.total)


class Perturbations(_Stream):
    """The state of ``MonteCarloNumbers`` (rounding.py, whose module docstring states the model) and
    the rounding of each result in its K+1 lanes; its parameters: the module docstring."""

    def __init__(self, *, u: float, eta: float, lanes: int = 32, transcendental_units: float = 2.0,
                 seed: int = 0, matmul_u: float | None = None, mantissa_bits: int = 53,
                 round_const: Callable[[float], float] | None = None, batched: bool = True,
                 values: int = 1, accumulate_u: float | None = None, softmax_u: float | None = None) -> None:
        self.name = f"montecarlo(u={u:g},K={lanes})"
        self.u = float(u)
        #: the dtype's unit roundoff: ``u`` is this one, except inside an operation computed in a
        #: wider format (``_computing_at``)
        self.base_u = self.u
        #: the wider units of mixed precision (None: the dtype's)
        self.acc = float(accumulate_u) if accumulate_u is not None and accumulate_u < u else None
        self.soft = float(softmax_u) if softmax_u is not None and softmax_u < u else None
        self.eta = float(eta)
        self.k = int(lanes)
        #: V value sets side by side, each with its K+1 lanes and, in a block (V > 1), lane F: the
        #: spec in ``FLOAT`` (``Block`` in the module docstring); a number holds V·W floats
        self.v = int(values)
        self.f = self.k + 1 if self.v > 1 else 0  # lane F's index in a value set (0: none)
        self.width = self.k + 1 + (1 if self.f else 0)
        self.total = self.v * self.width
        #: the perturbed lanes of a value set
        self.p = slice(1, self.k + 1)
        #: where V > 1: the real numbers ``num`` converts, one row of V·(K+1) per number, and the
        #: index of the next one
        self._feed = np.empty((0, self.total))
        self._fed_at = 0
        self.t = float(transcendental_units)
        self.mu = float(matmul_u if matmul_u is not None else u)
        self.bits = mantissa_bits
        #: the target dtype's rounding of a constant (its actual error may exceed u·|c| when the
        #: constant is subnormal there, e.g. ε = 1e-5 in float16)
        self.round_const = round_const
        self.rng = np.random.default_rng(seed)
        #: the underflow errors of products, a stream of their own: drawing them from ``rng`` would
        #: shift every later draw of a case that has one tiny product (``_underflowing_products``)
        self._product_eta = np.random.default_rng([seed, 1])
        # rows of uniform draws in [-1, 1] with a 0 in lane 0, and the factors 1 + units·u·ξ
        # of the two common unit counts (lane 0's factor is exactly 1)
        self._xi_rows = np.zeros((0, self.total))
        self._f1 = self._ft = self._xi_rows
        self._i = 0
        self._chunk = max(_FIRST_BUFFER // self.v, 4)  # a block's rows are V times as wide
        self._ones = np.ones(self.total)
        #: B while a batch runs (module docstring), else 0
        self._batch = 0
        if not batched:  # withdraws ``Batched``: a method set to None is not offered (``numbers.offered``);
            # the hooks are ``MonteCarloNumbers``' own (rounding.py)
            for hook in ("matmul", "map_matrix", "map_columns", "softmax", "adjoints"):
                setattr(self, hook, None)
        #: below this magnitude an underflow error η can rival the relative error u|x|
        self.zone = 64.0 * self.eta / self.u
        #: largest finite |value| of any intermediate result (lane 0); per value set in ``tops``
        self.max_abs = 0.0
        self.tops = np.zeros(self.v)
        #: the binary64 reference refuses underflowing variances first; lanes need not
        self.tiny = 0.0
        self.inf = Lanes(np.full(self.total, math.inf), self)
        self.nan = Lanes(np.full(self.total, math.nan), self)
        self.pi = self.const(repr(math.pi))

    def _rounded(self, r: np.ndarray, units: float = 1.0) -> Lanes:
        """r (a fresh array: modified in place) with one rounding of ``units`` × u per number."""
        if r.ndim == 1 and not self._batch and self.v == 1:  # one number: the hot path, two NumPy calls
            a = abs(r.item(0))
            if a > self.max_abs and a != math.inf:
                self.max_abs = a
            i = self._i
            if i >= len(self._xi_rows):
                self._refill()
                i = 0
            self._i = i + 1
            self._scale(r, i, units)
            # only near the underflow threshold can η matter, and never to a zero in every lane
            if a < self.zone and (a != 0.0 or r.any()):
                r[1:] = _underflow(r[1:], self.eta * self._xi_rows[self._row(), 1:])
            return Lanes(r, self)
        if r.ndim == 1 and not self._batch:
            return self._rounded_block(r, units)
        if r.ndim == 1:  # a batch runs: each of its numbers rounds on its own
            r = np.tile(r, (self._batch, 1))
        rows = r if r.ndim == 2 else r[None]  # (n, V·(K+1)): n numbers
        by_set = self._sets(rows)  # (n, V, K+1), a view
        a = np.abs(by_set[..., 0])
        self._note(a)
        rows *= 1.0 + (units * self.u) * self._rows(len(rows))
        near = (a < self.zone) & by_set.any(axis=-1)
        if near.any():
            perturbed = by_set[..., self.p]
            perturbed[near] = _underflow(perturbed[near], self.eta * self._rows(int(near.sum()))[:, self.p])
        return Lanes(r, self)

    def _scale(self, r: np.ndarray, i: int, units: float) -> None:
        """r times the factors 1 + units·u·ξ of row i of draws (exactly 1 in lane 0 and lane F)."""
        if units == 1.0 and self.u == self.base_u:
            r *= self._f1[i]
        elif units == self.t and self.u == self.base_u:
            r *= self._ft[i]
        else:
            r *= 1.0 + (units * self.u) * self._xi_rows[i]

    @contextmanager
    def _computing_at(self, unit: float | None) -> Iterator[None]:
        """Every operation inside perturbed at ``unit`` (a wider format's; None: unchanged)."""
        if unit is None or unit >= self.u:
            yield
            return
        saved, self.u = self.u, unit
        try:
            yield
        finally:
            self.u = saved

    def _stored(self, total: np.ndarray) -> np.ndarray:
        """A result computed in a wider format (``total``, fresh: rounded in place) rounded once to
        the dtype, as an implementation stores it: each number with its own draw."""
        if total.ndim <= 2:
            return self._rounded(total).x
        flat = total.reshape(-1, total.shape[-1])
        return self._rounded(flat).x.reshape(total.shape)

    def _rounded_block(self, r: np.ndarray, units: float) -> Lanes:
        """``_rounded`` of one number of a block (V value sets): the hot path's few NumPy calls."""
        sets = r.reshape(self.v, self.width)  # a view: r is fresh
        a = np.abs(sets[:, 0])
        if (a > self.tops).any():
            self._note(a)
        self._scale(r, self._row(), units)
        if a.min() < self.zone:
            near = (a < self.zone) & sets.any(axis=1)
            if near.any():
                perturbed = sets[:, self.p]
                perturbed[near] = _underflow(perturbed[near], self.eta * self._xi_rows[self._row(), self.p])
        return Lanes(r, self)

    def _sets(self, x: np.ndarray) -> np.ndarray:
        """(..., V·(K+1)) as a view (..., V, K+1): each value set's lanes, lane 0 first."""
        view = x.view()
        view.shape = x.shape[:-1] + (self.v, self.width)  # a view or an error, never a silent copy
        return view

    def _branch(self, x: np.ndarray) -> np.ndarray:
        """The lane a branch follows, of (..., V·W): lane 0, or in a block lane F (the spec's own
        binary64 value, so each value set branches as it does alone): (..., V)."""
        return x.reshape(x.shape[:-1] + (self.v, self.width))[..., self.f]

    def _note(self, arr: np.ndarray) -> None:
        """Lane-0 values (..., V) seen: the largest finite magnitude, per value set where V > 1."""
        if self.v == 1:
            finite = np.abs(arr[np.isfinite(arr)])
            if finite.size:
                self.max_abs = max(self.max_abs, float(finite.max()))
            return
        a = np.abs(arr).reshape(-1, self.v)
        if a.size:
            self.tops = np.maximum(self.tops, np.where(np.isfinite(a), a, 0.0).max(axis=0))
            self.max_abs = float(self.tops.max())

    def ranges(self) -> np.ndarray:
        """(V,): the largest finite |lane 0| of any intermediate result, per value set."""
        return self.tops.copy() if self.v > 1 else np.array([self.max_abs])

    def _stack(self, values: Sequence[Any]) -> np.ndarray:
        """(n, K+1) array of a sequence of Lanes or plain numbers; (n, B, K+1) in a batch
        (K+1 is V·(K+1) in a block)."""
        w = self.total
        rows = [v.x if type(v) is Lanes else np.full(w, float(v)) for v in values]
        if self._batch:
            return np.array(np.broadcast_arrays(*rows, np.empty((self._batch, w)))[:-1])
        try:
            return np.array(rows)
        except ValueError:  # batches among scalars: a hook's fallback never mixes them
            raise _Diverged from None

    def const(self, text: str) -> Lanes:
        c = float(text)
        shape = (self._batch, self.total) if self._batch else (self.total,)
        lanes = Lanes(np.full(shape, c), self)
        n = self._batch or 1
        if c != 0 and math.isfinite(c):
            if self.round_const is not None:
                error = abs(self.round_const(c) - c)
                if error:  # rounded once, by at most its actual rounding error (lane 0: c + 0·… = c)
                    lanes.x += (max(error, self.u * abs(c)) * self._rows(n)).reshape(lanes.x.shape)
                return lanes
            m, _ = math.frexp(abs(c))
            if not (m * 2.0**self.bits).is_integer():  # not representable: rounded once
                lanes.x *= (1.0 + self.u * self._rows(n)).reshape(lanes.x.shape)
        return lanes
