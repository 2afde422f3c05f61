"""Monte Carlo arithmetic: how much a computation can lose to rounding in a dtype.

``MonteCarloNumbers`` is a number system for the spec (it implements
``spec.numbers.NumberSystem``): each number carries K+1 *lanes*. Lane 0 is the
computation in binary64 (its sums accumulate left to right, so it can differ
in the last bits from the spec's ``FLOAT``, whose sums are correctly rounded;
the harness takes reference values from ``FLOAT`` and only the spread of the
lanes from here); in lanes 1..K every operation's result is perturbed
as the standard model of floating-point arithmetic allows for the target
dtype with unit roundoff u::

    fl(x op y) = (x op y)(1 + δ) + η,   |δ| ≤ u,  |η| ≤ η_dtype

with δ, η drawn uniformly and independently per operation and lane (Parker,
*Monte Carlo Arithmetic*, 1997; the same idea as Vignes' CESTAC and the
Verrou tool). Sums and dot products perturb every product and every partial
sum of a left-to-right accumulation. Library functions (exp, erf, tanh, sqrt,
...) are perturbed by ``transcendental_units`` × u; they are evaluated by
``conformance/core/portable_math.py`` (IEEE basic operations only), never by
NumPy's or libm's own, whose last bits depend on the CPU: the lanes, and so
the stored bounds, are the same bits on every machine. Inputs are exact (the
harness rounds them to the dtype first); decimal constants of an algorithm
(GELU's 0.044715, an epsilon) are perturbed once, as their rounding to the
dtype.

Because the perturbations propagate through the spec's own code path with
their signs, cancellation is seen as it happens (softmax's shift invariance,
layer norm's projection): the spread of the lanes around lane 0 estimates the
rounding error of an implementation of the same mathematics in that dtype,
which a first-order bound through absolute values overestimates by orders
of magnitude (docs/tolerances.md). ``conformance/core/tolerances.py`` turns the
spread into a tolerance.

Lanes are float64 NumPy vectors; branches (softmax's max, a zero-variance
check) follow lane 0, and elementwise maps like ReLU act per lane. Lane 0 is
multiplied by exactly 1 where the other lanes are perturbed, so it stays the
binary64 computation bit for bit.

Whole matrices at once. A NumPy call per scalar operation costs far more
than the arithmetic on 33 lanes, so the system offers the spec's optional
interface ``Batched`` (``spec/numbers.py``; used by ``spec/linalg.py`` and
``spec/functions.py``) and evaluates many entries in one call, under the
same model:

- ``matmul``: every entry of A B, each lane summing its own products left
  to right, and the rounding ``dot`` would add to it (each product and each
  partial sum perturbed) drawn whole: one normal draw per entry and lane of
  that sum's first-order variance, which has tails at least as heavy
  (``matmul``'s docstring; docs/tolerances.md, "Whole products"). Sums and
  dot products inside a batch or a block, softmax's denominator and layer
  norm's centres draw their rounding the same way (``_drawn_whole``);
- ``map_matrix(f, A, ...)`` (activations, residual sums, biases) and
  ``map_columns(f, X)`` (layer norm of each token): ``f`` runs *once* on a
  *batch*, a ``Lanes`` of shape (B, K+1) holding B independent numbers. While
  a batch runs, every rounded result gets B independent perturbations, even
  one computed from constants only (``√2`` inside GELU), so each entry
  draws exactly what it would draw evaluated alone: the joint distribution
  of the lanes is the scalar evaluation's, only the order of the random
  stream differs. A branch (a comparison) must go the same way for the
  whole batch; where it does not (``_Diverged``), or where ``f`` refuses an
  entry (``SpecError``), the entries are evaluated one by one instead, so
  branches and errors are exactly the scalar evaluation's;
- ``softmax(z)``: the spec's four lines (shift by the first largest entry,
  exp, left-to-right sum, divide) on the stacked vector.

Two optional interfaces change the model rather than its speed:
``OnePassMoments``, whose ``centres`` centres layer norm's e − m at
independent roundings of the mean (its docstring and docs/tolerances.md
"One-pass moments"), and ``UncentredBackward``, whose ``uncentred_slopes``
gives the rounding of a backward pass that expands a·(e − m) as a·e − a·m
(docs/tolerances.md "Uncentred backward passes"). ``PerValueStep`` (``step``)
takes ReLU's derivative per lane. mypy checks the class against all four
(the end of this module).

Blocks. ``values=V`` carries V value sets of one structure side by side
(``conformance/core/blocks.py``, docs/tolerances.md "Blocks"): a number holds
V groups of lanes, each with its own lane 0 and its own perturbations, and a
lane F, unperturbed, that computes the spec in ``FLOAT``: its sums correctly
rounded (``correctly_rounded_sums``), its library functions ``FLOAT``'s own.
Branches (comparisons, softmax's maximum, ``PerValueMax``) follow lane F, so
each value set branches as it does alone; where the value sets would branch
apart, the evaluation stops (``BLOCK_SPLITS``) and the caller evaluates them
one by one. The real inputs of a block reach the spec through ``feeding``.

``tests/conformance/test_rounding.py`` checks that lane 0 is the binary64
computation with and without the hooks, and that the hooks give the scalar
evaluation's spreads within the sampling noise (``batched=False`` turns
them off).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ftspec.spec.errors import SpecError
from ftspec.spec.numbers import FLOAT

from . import portable_math as pm

if TYPE_CHECKING:
    from ftspec.spec.numbers import (Batched, NumberSystem, OnePassMoments, PerValueMax, PerValueSign,
                                     PerValueStep, UncentredBackward)

__all__ = ["BLOCK_SPLITS", "BlockMismatch", "Lanes", "MonteCarloNumbers", "lanes_array"]

#: rows of random draws generated at once: the first time, and at most (a small evaluation
#: needs a few hundred; generating thousands would cost more than it does)
_FIRST_BUFFER, _MAX_BUFFER = 64, 8192


class _Diverged(Exception):
    """The numbers of a batch would take different branches: evaluate them one by one."""


class BlockMismatch(Exception):
    """A block's value sets cannot share one evaluation (they branch apart, or the spec converted
    numbers other than the block's): the caller evaluates them one by one."""


#: what ends a block's shared evaluation (the value sets are then evaluated one by one)
BLOCK_SPLITS: tuple[type[Exception], ...] = (_Diverged, BlockMismatch)


def _truth(c: Any) -> bool:
    """A comparison's outcome: one bool, or the common outcome of a whole batch."""
    if type(c) is np.bool_ or type(c) is bool:
        return bool(c)
    if c.all():
        return True
    if not c.any():
        return False
    raise _Diverged


class Lanes:
    """K+1 values of one number, lane 0 unperturbed: ``x`` of shape (K+1,).

    Inside a batched hook, ``x`` has shape (B, K+1): B independent numbers
    evaluated together (module docstring)."""

    __slots__ = ("x", "ns")

    def __init__(self, x: np.ndarray, ns: "MonteCarloNumbers") -> None:
        self.x = x
        self.ns = ns

    # -- arithmetic: every operation rounds ------------------------------
    def __add__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x + o.x if type(o) is Lanes else self.x + float(o))

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x - o.x if type(o) is Lanes else self.x - float(o))

    def __rsub__(self, o: Any) -> "Lanes":
        return self.ns._rounded(_lane(o) - self.x)

    def __mul__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x * o.x if type(o) is Lanes else self.x * float(o))

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x / o.x if type(o) is Lanes else self.x / float(o))

    def __rtruediv__(self, o: Any) -> "Lanes":
        return self.ns._rounded(_lane(o) / self.x)

    # -- exact operations ---------------------------------------------------
    def __neg__(self) -> "Lanes":
        return Lanes(-self.x, self.ns)

    def __pos__(self) -> "Lanes":
        return self

    def __abs__(self) -> "Lanes":
        return Lanes(np.abs(self.x), self.ns)

    # -- comparisons follow lane 0 ---------------------------------------------
    def __lt__(self, o: Any) -> bool:
        return _truth(_first(self) < _first(o))

    def __le__(self, o: Any) -> bool:
        return _truth(_first(self) <= _first(o))

    def __gt__(self, o: Any) -> bool:
        return _truth(_first(self) > _first(o))

    def __ge__(self, o: Any) -> bool:
        return _truth(_first(self) >= _first(o))

    def __eq__(self, o: object) -> bool:
        return _truth(_first(self) == _first(o))

    def __ne__(self, o: object) -> bool:
        return _truth(_first(self) != _first(o))

    __hash__ = None  # type: ignore[assignment]

    def __float__(self) -> float:
        if self.x.ndim != 1 or self.x.shape[0] != self.ns.width:
            raise _Diverged  # a batch, or a block of value sets, has no one value
        return float(self.x[0])

    def __repr__(self) -> str:
        if self.x.ndim != 1:
            return f"Lanes(batch of {self.x.shape[0]})"
        if self.x.shape[0] != self.ns.width:
            return f"Lanes(block of {self.x.shape[0] // self.ns.width})"
        spread = np.max(np.abs(self.x[1:] - self.x[0])) if self.x.size > 1 else 0.0
        return f"Lanes({self.x[0]!r} ± {spread:.3g})"


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


def _lane(o: Any) -> Any:
    return o.x if type(o) is Lanes else float(o)


def _first(o: Any) -> Any:
    """Lane 0: a float for one number, a (B,) array for a batch; in a block of V value sets,
    the V lanes 0: (V,) for one number, (B, V) for a batch."""
    if type(o) is Lanes:
        x = o.x
        ns = o.ns
        if ns.width == x.shape[-1]:
            return x[0] if x.ndim == 1 else x[:, 0]
        return x[..., ns.f::ns.width]  # a block: each value set's lane F
    return float(o)


class MonteCarloNumbers:
    """The spec's number interface, evaluated in K+1 lanes (see module docstring).

    ``u``: unit roundoff of the target dtype; ``eta``: absolute error one
    operation may make when its result underflows; ``lanes``: K;
    ``transcendental_units``: a library function's error on an exact
    argument, in units of u; ``matmul_u``: unit roundoff of matrix products
    (a reduced-precision tier such as TF32 rounds them more coarsely);
    ``seed``: makes the perturbations reproducible; ``batched``: offer the
    spec ``Batched``, the whole-matrix hooks (False: every operation one
    scalar at a time, the model's definition, kept for tests); ``values``:
    V, the value sets of a block carried side by side (``Block`` below).

    Mixed precision (docs/tolerances.md, "Mixed precision"): ``accumulate_u``,
    the unit roundoff of a wider format in which sums, dot products and
    matrix products accumulate: their terms, products and partial sums are
    perturbed at it, and the result is rounded once to the dtype (u), as an
    implementation stores it; ``matmul_u`` then names the tier's unit, at
    least ``accumulate_u``. ``softmax_u``: the unit of a wider format in which
    softmax is computed: every operation of its four lines is perturbed at
    it, and each output once at u. None (or a unit not below u): the dtype's.
    """

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
        #: where V > 1: the next real numbers ``num`` converts, one row of V·(K+1) per number
        self._feed: list[np.ndarray] = []
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
        if not batched:  # withdraws ``Batched``: a method set to None is not offered (``numbers.offered``)
            self.matmul = self.map_matrix = self.map_columns = self.softmax = None  # type: ignore[assignment]
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

    # -- random perturbations -------------------------------------------------
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

    # -- hooks: many entries per NumPy call (module docstring) -------------------
    def matmul(self, A: Sequence[Sequence[Any]], B: Sequence[Sequence[Any]]) -> list[list[Lanes]]:
        """All entries of A B at once, each rounded as ``dot`` rounds it, its fresh error drawn whole.

        Every lane sums its own products left to right in binary64 (lane 0 is ``dot``'s lane 0
        bit for bit). The rounding this product adds is, to first order, Σ_i p_i δ_i +
        Σ_{j≥2} S_j ε_j over its products p_i and partial sums S_j with δ, ε independent and
        uniform in [−u, u]: a sum of strictly sub-Gaussian terms (a uniform's variance is its
        variance proxy), so a normal draw of the same variance, u²/3·(Σ p_i² + Σ S_j²), has
        tails at least as heavy. That one draw per entry and lane replaces the 2k draws and the
        (m, k, n, lanes) arrays of drawing each term (docs/tolerances.md, "Whole products"); the
        weights p_i, S_j are each value set's lane 0 (lanes differ from it by O(u) relatively).
        Products and partial sums near the underflow threshold add η²/3 each, as ``dot``'s η
        (without its rule that keeps a zero or a sign, which only shrinks an error)."""
        if self._batch:
            raise _Diverged  # no product of batches: the caller evaluates entry by entry
        a = self._stack([x for row in A for x in row]).reshape(len(A), len(A[0]), -1)  # (m, k, L)
        b = self._stack([x for row in B for x in row]).reshape(len(B), len(B[0]), -1)  # (k, n, L)
        k = a.shape[1]
        total = a[:, 0, None, :] * b[None, 0, :, :]  # (m, n, L): left to right, each lane alone
        for i in range(1, k):
            total += a[:, i, None, :] * b[None, i, :, :]
        # lane 0 of each value set (lane F in a block: the same numbers up to the sums' last bits)
        a0, b0 = self._sets(a)[..., 0], self._sets(b)[..., 0]  # (m, k, V), (k, n, V)
        p = a0[:, :, None, :] * b0[None, :, :, :]  # (m, k, n, V)
        sums = np.cumsum(p, axis=1)
        self._note(p)
        self._note(sums)
        partial = sums[:, 1:]
        c = _scale_of(p, sums, axis=1)  # (m, n, V)
        with np.errstate(all="ignore"):
            x, y = p / c[:, None], partial / c[:, None]
            var = (np.sum(x * x, axis=1) + np.sum(y * y, axis=1)) * (self.mu * self.mu / 3.0)
            near = (np.abs(p) < self.zone) & (p != 0)
            t0 = self._sets(total)[..., 0]
            near_total = (np.abs(t0) < self.zone) & (t0 != 0)
            eta_c = self.eta / c  # η in units of the scale (c·c can underflow where c is subnormal)
            var += (eta_c * eta_c / 3.0) * (near.sum(axis=1) + np.where(near_total, k - 1, 0))
            sd = c * np.sqrt(var)
        self._add_drawn(total, sd)
        sets = self._sets(total)
        if self.f:  # lane F: each entry's correctly rounded sum, as ``FLOAT.dot``
            pf = self._sets(a)[..., self.f][:, :, None, :] * self._sets(b)[..., self.f][None, :, :, :]
            sets[..., self.f] = correctly_rounded_sums(np.moveaxis(pf, 1, 0))
        if self.acc is not None:  # accumulated in a wider format, stored in the dtype
            total = self._stored(total)
        return _rows_of(total, self)

    def map_matrix(self, f: Callable[..., Any], *Ms: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """[[f(A[i][j], B[i][j], ...)]] for matrices of one shape, f run once on a batch of all entries."""
        m, n = len(Ms[0]), len(Ms[0][0]) if Ms[0] else 0
        if self._batch or m * n < 2:
            return [[f(*(M[i][j] for M in Ms)) for j in range(n)] for i in range(m)]
        args = [self._stack([x for row in M for x in row]) for M in Ms]  # each (m n, K+1)
        out = self._in_batch(m * n, lambda: f(*(Lanes(a, self) for a in args)))
        if out is None:
            return [[f(*(M[i][j] for M in Ms)) for j in range(n)] for i in range(m)]
        return _rows_of(out.reshape(m, n, -1), self)

    def map_columns(self, f: Callable[[list], list], X: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """The matrix whose column t is f(column t of X), f run once on a batch of all columns."""
        d, ell = len(X), len(X[0]) if X else 0
        if self._batch or ell < 2 or d == 0:
            cols = [f([row[t] for row in X]) for t in range(ell)]
            return [[c[i] for c in cols] for i in range(len(cols[0]))] if cols else []
        rows = [Lanes(self._stack(row), self) for row in X]  # row i: entry i of every column, (ℓ, K+1)
        out = self._in_batch(ell, lambda: list(f(rows)))  # (d', ℓ, K+1): entry i of column t at [i, t]
        if out is None:
            cols = [f([row[t] for row in X]) for t in range(ell)]
            return [[c[i] for c in cols] for i in range(len(cols[0]))] if cols else []
        return _rows_of(out, self)

    def _in_batch(self, size: int, run: Callable[[], Any]) -> np.ndarray | None:
        """Lanes of ``run()`` evaluated as a batch of ``size`` numbers (stacked if a list),
        or None where the batch diverges or is refused (the caller goes entry by entry)."""
        self._batch = size
        try:
            out = run()
            if isinstance(out, list):
                return np.array([self._broadcast(v, size) for v in out]) if out else None
            return self._broadcast(out, size)
        except (_Diverged, SpecError):
            return None
        finally:
            self._batch = 0

    def _broadcast(self, v: Any, size: int) -> np.ndarray:
        x = v.x if type(v) is Lanes else np.full(self.total, float(v))
        if x.ndim == 1:
            return np.tile(x, (size, 1))  # an exact value: the same for every number of the batch
        if x.shape != (size, self.total):
            raise _Diverged
        return x

    def softmax(self, z: Sequence[Any]) -> list[Lanes]:
        """spec/functions.py ``softmax``, its four lines on the stacked vector (n, K+1); under a
        wider softmax format (``softmax_u``) its operations at that unit and each output stored
        once in the dtype."""
        if self.soft is None:
            return self._softmax(z)
        with self._computing_at(self.soft):
            out = self._softmax(z)
        if len({y.x.shape for y in out}) == 1:  # one call: each output its own draw
            return [Lanes(row, self) for row in self._stored(np.stack([y.x for y in out]))]
        return [Lanes(self._stored(y.x.copy()), self) for y in out]

    def _softmax(self, z: Sequence[Any]) -> list[Lanes]:
        Z = self._stack(z)
        first = self._branch(Z) if Z.ndim == 2 else None  # (n, V)
        if first is None or np.isnan(first).any():  # Python's max over NaN, or a batch: line by line
            m = self.detach(max(z))
            if not self.isfinite(m):
                raise SpecError("softmax", "at least one finite entry", f"max entry {self.to_float(m)!r}")
            exps = [self.exp(x - m) for x in z]
            total = self.fsum(exps)
            return [y / total for y in exps]
        top = np.argmax(first, axis=0)  # the first largest entry, as Python's max, per value set
        tops = first[top, np.arange(self.v)]
        if not np.isfinite(tops).all():
            raise SpecError("softmax", "at least one finite entry",
                            f"max entry {float(tops[~np.isfinite(tops)][0])!r}")
        self._batch = len(z)
        try:
            m = self._sets(Z)[top, np.arange(self.v)].reshape(self.total)  # each value set's own max
            shifted = Lanes(Z, self) - Lanes(m, self)  # x − m, rounded
            ex = self._fn(pm.exp, shifted, FLOAT.exp)  # exp, t·u
            # fsum: terms rounded, then left to right, the rounding drawn whole (``_drawn_whole``)
            s = Lanes(self._drawn_whole(ex.x, self.u, self.u), self)
            y = ex / s  # rounded
        finally:
            self._batch = 0
        return [Lanes(row, self) for row in y.x]

    def largest(self, z: Sequence[Any]) -> Any:
        """``PerValueMax``: Python's ``max`` of z (the first largest entry by lane 0), for each value
        set of a block on its own; one value set: ``max`` itself."""
        if self.v == 1 or self._batch:
            return max(z)
        Z = self._stack(z)  # (n, V·W)
        first = self._branch(Z)
        if np.isnan(first).any():  # Python's max over NaN depends on the order: no one answer
            raise _Diverged
        top = np.argmax(first, axis=0)
        return Lanes(self._sets(Z)[top, np.arange(self.v)].reshape(self.total), self)

    # -- the model of one-pass moments ------------------------------------------
    def centres(self, e: Sequence[Any], m: Any, line: int) -> list[Lanes]:
        """Line 1 of layer norm rounded afresh for each term e[i] − m (``OnePassMoments``, through
        spec/numbers.py ``centred``, called for line 2 and again for line 3; both are rounded alike).

        Centre i is e's left-to-right sum with its own perturbations, divided by d_e and rounded:
        d_e independent draws of the mean's rounding error. One shared centre per lane models
        only the paper's order, whose variance errs by about u and whose line 3 errs by about
        u·|e − m|. Welford's one-pass update centres each term at a running mean (its variance
        errs by about u·|m|/√v), and a fused e·(γ/σ) + (β − mγ/σ) errs by about u·|e| (ATen's
        CPU layer norm does both, and its backward sums Σ dy·e uncentred); independent centres
        make the spread cover those orders too. Lane 0 is ``m`` itself, so it stays the
        binary64 computation.
        """
        d = len(e)
        terms = self._stack(e)  # (d, K+1), or (d, B, K+1) in a batch
        wider = self.acc is not None and self.acc < self.u and d > 1  # the sum accumulated wider, then stored
        unit = self.acc if wider and self.acc is not None else self.u
        # every centre is the same left-to-right sum of the lanes' own terms plus its own fresh
        # rounding: the terms' (if d > 1), the partial sums', the division's (twice if wider), to
        # first order a sum of independent uniforms, drawn whole as a normal of its variance
        # (``matmul``: the normal's tails are at least as heavy); weights from lane 0
        partial = np.cumsum(terms, axis=0)
        lane0 = self._sets(partial)[..., 0]  # (d, ..., V)
        self._note(lane0)
        mean = partial[-1] / float(d)
        t0 = self._sets(terms)[..., 0]
        m0 = lane0[-1] / float(d)
        c = _scale_of(t0, lane0, axis=0)
        with np.errstate(all="ignore"):
            t, q, mc = t0 / c, lane0[1:] / c, m0 / c
            var = (np.sum(t * t, axis=0) if d > 1 else 0.0) + np.sum(q * q, axis=0)
            var = var * (unit * unit / 3.0) / float(d * d) + (self.u * self.u / 3.0) * (2 if wider else 1) * mc * mc
            near = (np.abs(lane0[-1]) < self.zone) & (t0 != 0).any(axis=0)
            eta_c = self.eta / c  # η in units of the scale (c·c can underflow where c is subnormal)
            var = var + np.where(near, (eta_c * eta_c / 3.0) * (d - 1) / float(d * d), 0.0)
            sd = c * np.sqrt(var)
        centres = np.repeat(mean[None], d, axis=0)  # (d, ..., L)
        self._add_drawn(centres, np.broadcast_to(sd, centres.shape[:-1] + (self.v,)))
        sets = self._sets(centres)
        exact = self._sets(m.x) if type(m) is Lanes else np.full((self.v, self.width), float(m))
        sets[..., 0] = exact[..., 0]
        if self.f:
            sets[..., self.f] = exact[..., self.f]
        return [Lanes(c, self) for c in centres]

    def uncentred_slopes(self, e: Sequence[Any], m: Any) -> list[Lanes]:
        """∂centre_i/∂e[i] for a backward pass (spec/autodiff.py ``GradNumbers.centres``): 0 in
        lane 0; in lane k, u·ξ·(|e[i]| + |m|)/|e[i] − m| with ξ uniform in [−1, 1], so that an
        adjoint a·(e[i] − m) reaching e[i] errs by u·|a|·(|e[i]| + |m|), the rounding of the
        expanded a·e[i] − a·m. A term at the mean exactly (lane 0) gets 0: its adjoint is 0.
        """
        stacked = self._stack(e)
        x = self._sets(stacked)[..., :1]  # lane 0: (d, V, 1), or (d, B, V, 1) in a batch
        c = self._sets(m.x)[..., :1] if type(m) is Lanes else np.array([float(m)])  # (V, 1), (B, V, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(x != c, (np.abs(x) + np.abs(c)) / np.abs(x - c), 0.0)
        xi = self.rng.uniform(-1.0, 1.0, size=ratio.shape[:-1] + (self.width,))
        xi[..., 0] = 0.0
        xi[..., self.f] = 0.0  # lane F too, where there is one (else lane 0 again)
        slopes = ((self.u * ratio) * xi).reshape(stacked.shape)
        return [Lanes(s, self) for s in slopes]  # (K+1,) or (B, K+1) each

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


def _rows_of(arr: np.ndarray, ns: MonteCarloNumbers) -> list[list[Lanes]]:
    """(m, n, K+1) -> m rows of n Lanes (views of ``arr``, never modified in place)."""
    return [[Lanes(x, ns) for x in row] for row in arr]


def lanes_array(nested: Any, k: int) -> np.ndarray:
    """Nested lists of Lanes (or plain numbers) -> array of shape (..., K+1)."""
    if isinstance(nested, (list, tuple)):
        if not nested:
            return np.empty((0, k + 1))
        if all(type(v) is Lanes for v in nested):  # the innermost level: one call
            return np.array([v.x for v in nested])
        return np.stack([lanes_array(item, k) for item in nested])
    if type(nested) is Lanes:
        return nested.x
    return np.full(k + 1, float(nested))


if TYPE_CHECKING:  # mypy checks the class against the spec's protocol and the optional interfaces it offers
    _system: type[NumberSystem] = MonteCarloNumbers
    _batched: type[Batched] = MonteCarloNumbers
    _moments: type[OnePassMoments] = MonteCarloNumbers
    _backward: type[UncentredBackward] = MonteCarloNumbers
    _step: type[PerValueStep] = MonteCarloNumbers
    _most: type[PerValueMax] = MonteCarloNumbers
    _sign: type[PerValueSign] = MonteCarloNumbers
