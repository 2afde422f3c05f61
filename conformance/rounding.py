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
...) are perturbed by ``transcendental_units`` × u. Inputs are exact (the
harness rounds them to the dtype first); decimal constants of an algorithm
(GELU's 0.044715, an epsilon) are perturbed once, as their rounding to the
dtype.

Because the perturbations propagate through the spec's own code path with
their signs, cancellation is seen as it happens (softmax's shift invariance,
layer norm's projection): the spread of the lanes around lane 0 estimates the
rounding error of an implementation of the same mathematics in that dtype,
which a first-order bound through absolute values overestimates by orders
of magnitude (docs/tolerances.md). ``conformance/tolerances.py`` turns the
spread into a tolerance.

Lanes are float64 NumPy vectors; branches (softmax's max, a zero-variance
check) follow lane 0, and elementwise maps like ReLU act per lane.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:
    from ftspec.spec.numbers import NumberSystem

__all__ = ["Lanes", "MonteCarloNumbers", "lanes_array"]

_erf = np.frompyfunc(math.erf, 1, 1)


class Lanes:
    """K+1 values of one number; lane 0 unperturbed."""

    __slots__ = ("x", "ns")

    def __init__(self, x: np.ndarray, ns: "MonteCarloNumbers") -> None:
        self.x = x
        self.ns = ns

    # -- arithmetic: every operation rounds ------------------------------
    def __add__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x + _lane(o))

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x - _lane(o))

    def __rsub__(self, o: Any) -> "Lanes":
        return self.ns._rounded(_lane(o) - self.x)

    def __mul__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x * _lane(o))

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Lanes":
        return self.ns._rounded(self.x / _lane(o))

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
        return bool(self.x[0] < _first(o))

    def __le__(self, o: Any) -> bool:
        return bool(self.x[0] <= _first(o))

    def __gt__(self, o: Any) -> bool:
        return bool(self.x[0] > _first(o))

    def __ge__(self, o: Any) -> bool:
        return bool(self.x[0] >= _first(o))

    def __eq__(self, o: object) -> bool:
        return bool(self.x[0] == _first(o))

    def __ne__(self, o: object) -> bool:
        return bool(self.x[0] != _first(o))

    __hash__ = None  # type: ignore[assignment]

    def __float__(self) -> float:
        return float(self.x[0])

    def __repr__(self) -> str:
        spread = np.max(np.abs(self.x[1:] - self.x[0])) if self.x.size > 1 else 0.0
        return f"Lanes({self.x[0]!r} ± {spread:.3g})"


def _underflow(rel: np.ndarray, absolute: np.ndarray) -> np.ndarray:
    """Add the absolute (underflow) error without what rounding cannot do:
    an exact zero stays zero and no result changes sign."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf lanes (masked scores) pass through
        out = rel + absolute
        return np.where((rel == 0) | (rel * out < 0), 0.0 * rel, out)


def _lane(o: Any) -> Any:
    return o.x if type(o) is Lanes else float(o)


def _first(o: Any) -> float:
    return float(o.x[0]) if type(o) is Lanes else float(o)


def _stack(values: Sequence[Any], width: int) -> np.ndarray:
    """(n, K+1) array of a sequence of Lanes or plain numbers."""
    out = np.empty((len(values), width))
    for i, v in enumerate(values):
        out[i] = v.x if type(v) is Lanes else float(v)
    return out


class MonteCarloNumbers:
    """The spec's number interface, evaluated in K+1 lanes (see module docstring).

    ``u``: unit roundoff of the target dtype; ``eta``: absolute error one
    operation may make when its result underflows; ``lanes``: K;
    ``transcendental_units``: a library function's error on an exact
    argument, in units of u; ``matmul_u``: unit roundoff of matrix products
    (a reduced-precision tier such as TF32 rounds them more coarsely);
    ``seed``: makes the perturbations reproducible.
    """

    def __init__(self, *, u: float, eta: float, lanes: int = 32, transcendental_units: float = 2.0,
                 seed: int = 0, matmul_u: float | None = None, mantissa_bits: int = 53,
                 round_const: Callable[[float], float] | None = None) -> None:
        self.name = f"montecarlo(u={u:g},K={lanes})"
        self.u = float(u)
        self.eta = float(eta)
        self.k = int(lanes)
        self.t = float(transcendental_units)
        self.mu = float(matmul_u if matmul_u is not None else u)
        self.bits = mantissa_bits
        #: the target dtype's rounding of a constant (its actual error may exceed u·|c| when the
        #: constant is subnormal there, e.g. ε = 1e-5 in float16)
        self.round_const = round_const
        self.rng = np.random.default_rng(seed)
        self._buf = np.empty((0, self.k))
        self._i = 0
        #: below this magnitude an underflow error η can rival the relative error u|x|
        self.zone = 64.0 * self.eta / self.u
        #: largest finite |value| of any intermediate result (lane 0)
        self.max_abs = 0.0
        #: the binary64 reference refuses underflowing variances first; lanes need not
        self.tiny = 0.0
        self.inf = Lanes(np.full(self.k + 1, math.inf), self)
        self.nan = Lanes(np.full(self.k + 1, math.nan), self)
        self.pi = self.const(repr(math.pi))

    # -- random perturbations -------------------------------------------------
    def _xi(self) -> np.ndarray:
        """One row of K uniform draws in [-1, 1]."""
        if self._i >= len(self._buf):
            self._buf = self.rng.uniform(-1.0, 1.0, size=(4096, self.k))
            self._i = 0
        row = self._buf[self._i]
        self._i += 1
        return row

    def _rounded(self, r: np.ndarray, units: float = 1.0) -> Lanes:
        a = abs(r[0])
        if a > self.max_abs and a != math.inf:
            self.max_abs = a
        r[1:] *= 1.0 + (units * self.u) * self._xi()
        if a < self.zone:  # only near the underflow threshold can η matter
            r[1:] = _underflow(r[1:], self.eta * self._xi())
        return Lanes(r, self)

    def _note(self, arr: np.ndarray) -> None:
        finite = np.abs(arr[np.isfinite(arr)])
        if finite.size:
            self.max_abs = max(self.max_abs, float(finite.max()))

    # -- the spec's number interface --------------------------------------------
    def num(self, x: "float | int | Lanes") -> Lanes:
        if type(x) is Lanes:
            return x
        return Lanes(np.full(self.k + 1, float(x)), self)

    def const(self, text: str) -> Lanes:
        c = float(text)
        lanes = Lanes(np.full(self.k + 1, c), self)
        if c != 0 and math.isfinite(c):
            if self.round_const is not None:
                error = abs(self.round_const(c) - c)
                if error:  # rounded once, by at most its actual rounding error
                    lanes.x[1:] += max(error, self.u * abs(c)) * self._xi()
                return lanes
            m, _ = math.frexp(abs(c))
            if not (m * 2.0**self.bits).is_integer():  # not representable: rounded once
                lanes.x[1:] *= 1.0 + self.u * self._xi()
        return lanes

    def to_float(self, x: Any) -> float:
        return _first(x)

    def detach(self, x: Any) -> Any:
        return x

    def isfinite(self, x: Any) -> bool:
        return math.isfinite(_first(x))

    def isnan(self, x: Any) -> bool:
        return math.isnan(_first(x))

    def _accumulate(self, terms: np.ndarray, u: float) -> np.ndarray:
        """Left-to-right sum over axis 0 of (n, ..., K+1) terms, partial sums perturbed."""
        n = terms.shape[0]
        partial = np.cumsum(terms, axis=0)
        self._note(partial[..., 0])
        total = partial[-1].copy()
        if n > 1:
            shape = partial[1:, ..., 1:].shape
            delta = self.rng.uniform(-1.0, 1.0, size=shape)
            total[..., 1:] += u * np.sum(partial[1:, ..., 1:] * delta, axis=0)
            near = np.abs(total[..., 0]) < self.zone
            if near.any():
                eta = self.eta * np.sum(self.rng.uniform(-1.0, 1.0, size=shape), axis=0)
                total[near, 1:] = _underflow(total[near, 1:], eta[near])
        return total

    def fsum(self, xs: Iterable[Any]) -> Lanes:
        items = list(xs)
        if not items:
            return self.num(0)
        terms = _stack(items, self.k + 1)
        return Lanes(self._accumulate(terms, self.u), self)

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Lanes:
        if len(xs) != len(ys):
            raise ValueError(f"dot of vectors of lengths {len(xs)} and {len(ys)}")
        prod = _stack(xs, self.k + 1) * _stack(ys, self.k + 1)
        self._note(prod[:, 0])
        prod[:, 1:] *= 1.0 + self.mu * self.rng.uniform(-1.0, 1.0, size=prod[:, 1:].shape)
        return Lanes(self._accumulate(prod, self.mu), self)

    def matmul(self, A: Sequence[Sequence[Any]], B: Sequence[Sequence[Any]]) -> list[list[Lanes]]:
        """All entries of A B at once; the same perturbation model as ``dot``."""
        w = self.k + 1
        a = np.stack([_stack(row, w) for row in A])  # (m, k, K+1)
        b = np.stack([_stack(row, w) for row in B])  # (k, n, K+1)
        prod = a[:, :, None, :] * b[None, :, :, :]  # (m, k, n, K+1)
        self._note(prod[..., 0])
        prod[..., 1:] *= 1.0 + self.mu * self.rng.uniform(-1.0, 1.0, size=prod[..., 1:].shape)
        total = self._accumulate(np.moveaxis(prod, 1, 0), self.mu)  # (m, n, K+1)
        return [[Lanes(total[i, j], self) for j in range(total.shape[1])] for i in range(total.shape[0])]

    def _fn(self, f: Callable[[np.ndarray], Any], x: Any) -> Lanes:
        with np.errstate(all="ignore"):
            r = np.asarray(f(np.array(_lane(x), dtype=np.float64)), dtype=np.float64)
        if r.ndim == 0:
            r = np.full(self.k + 1, float(r))
        else:
            r = r.copy()
        return self._rounded(r, self.t)

    def exp(self, x: Any) -> Lanes:
        return self._fn(np.exp, x)

    def log(self, x: Any) -> Lanes:
        return self._fn(np.log, x)

    def sqrt(self, x: Any) -> Lanes:
        return self._fn(np.sqrt, x)

    def tanh(self, x: Any) -> Lanes:
        return self._fn(np.tanh, x)

    def erf(self, x: Any) -> Lanes:
        return self._fn(lambda v: np.asarray(_erf(v), dtype=np.float64), x)

    def sin(self, x: Any) -> Lanes:
        return self._fn(np.sin, x)

    def cos(self, x: Any) -> Lanes:
        return self._fn(np.cos, x)

    def pow(self, base: Any, exponent: Any) -> Lanes:
        with np.errstate(all="ignore"):
            r = np.power(np.broadcast_to(_lane(base), (self.k + 1,)), _lane(exponent)).astype(np.float64)
        return self._rounded(np.array(r), self.t)

    def step(self, x: Any) -> Lanes:
        """[[x > 0]] per lane: ReLU's derivative, so a sign that rounding flips flips the branch."""
        if type(x) is not Lanes:
            x = self.num(x)
        return Lanes(np.where(x.x > 0, 1.0, 0.0), self)

    def relu(self, x: Any) -> Lanes:
        if type(x) is not Lanes:
            x = self.num(x)
        return Lanes(np.where(np.isnan(x.x) | (x.x > 0), x.x, 0.0), self)


def lanes_array(nested: Any, k: int) -> np.ndarray:
    """Nested lists of Lanes (or plain numbers) -> array of shape (..., K+1)."""
    if isinstance(nested, (list, tuple)):
        if not nested:
            return np.empty((0, k + 1))
        return np.stack([lanes_array(item, k) for item in nested])
    if type(nested) is Lanes:
        return nested.x
    return np.full(k + 1, float(nested))


if TYPE_CHECKING:  # mypy checks the class against the spec's protocol
    _system: type[NumberSystem] = MonteCarloNumbers
