"""Number systems: one code path for the spec, several kinds of arithmetic.

Every spec algorithm is written once, against the small interface below
(``num``, ``const``, ``fsum``, ``dot``, ``exp``, ...), plus Python's
arithmetic operators. ``NumberSystem`` states that interface as a
``typing.Protocol``, so mypy checks every system against it and
``numbers.current()`` is typed. Which arithmetic a spec function runs in is
chosen by the caller:

``FLOAT`` (the default)
    Python floats (IEEE binary64). Sums and dot products are correctly
    rounded (``math.fsum`` over the rounded products), so the only rounding in
    a reduction is one per product plus one for the sum.

``MpNumbers(dps)``
    mpmath at ``dps`` significant decimal digits (at least 30), in a private
    ``mpmath.MPContext`` so no global state is touched. Used for fixtures and
    as a high-precision oracle; ``float()`` of a result rounds to nearest.

``TrackedNumbers()``
    Running error analysis (Wilkinson; Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., sec. 3.3). Each value carries, besides its
    binary64 value ``v``, a first-order bound on the error that *any*
    implementation following the same mathematics incurs when every
    elementary operation rounds with unit roundoff ``u``: the bound is
    ``u * e + eta * a`` where ``e`` and ``a`` are carried here and ``u``,
    ``eta`` (the underflow threshold) are supplied by the caller for a given
    dtype. The values ``v`` equal the ``FLOAT`` results bit for bit. The bound
    propagates through absolute values, so across layers it overestimates by
    orders of magnitude; the spec's own tests use it (a float64 result must
    lie within it), while the conformance harness derives its tolerances from
    Monte Carlo arithmetic instead (``conformance/core/rounding.py``,
    ``docs/tolerances.md``).

Two more systems live outside this module: ``GradNumbers`` (``spec/autodiff.py``,
reverse-mode derivatives over any base system) and the harness's
``MonteCarloNumbers`` (``conformance/core/rounding.py``, K perturbed lanes beside a
binary64 lane 0).

Beyond ``NumberSystem``, a system may offer optional interfaces, each a
protocol below: ``Batched`` (many entries of a matrix at once, for speed),
``OnePassMoments`` and ``UncentredBackward`` (how real kernels round a layer
norm's e − m, for the harness's tolerances) and ``PerValueStep`` (ReLU's
derivative per value, for a system that carries several). ``offered(N,
Batched)`` gives ``N`` as that interface where it offers it, else None; mypy
checks the systems that offer one against it. ``centred(e, m, line=...)`` is
the spec's e − m of a layer norm: the paper's subtraction, or the system's
model of it where it offers one. No optional interface changes a binary64 or
mpmath result.

The active system lives in a context variable: ``with using(MpNumbers(40)):``.
"""

from __future__ import annotations

import contextvars
import math
from contextlib import contextmanager
from functools import cache
from typing import (
    TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Protocol, Sequence, TypeVar, cast, runtime_checkable,
)

import mpmath

from .errors import SpecError

__all__ = [
    "FLOAT",
    "Batched",
    "FloatNumbers",
    "MpNumbers",
    "NumberSystem",
    "Numbers",
    "OnePassMoments",
    "PerValueMax",
    "PerValueSign",
    "PerValueStep",
    "Tracked",
    "TrackedNumbers",
    "UncentredBackward",
    "by_sign",
    "centred",
    "current",
    "offered",
    "using",
]


@runtime_checkable
class NumberSystem(Protocol):
    """What the spec needs of an arithmetic; every number system implements it.

    Numbers are opaque (``Any``): a float, an mpmath ``mpf``, a ``Tracked``,
    a ``Var`` or a vector of lanes, combined with Python's ``+ - * /``, unary
    ``-`` and ``abs`` and compared with ``< <= > >= == !=`` (comparisons decide
    branches, so a system that carries several values compares one of them).
    Plain ints and floats in spec code (0, 1, 2) mix with them exactly.

    Optional, where a system can do better: the protocols ``Batched``,
    ``OnePassMoments``, ``UncentredBackward`` and ``PerValueStep`` below,
    found with ``offered``.
    """

    #: shown in messages and reports, e.g. ``"float"``, ``"mpmath:40"``
    name: str
    inf: Any
    nan: Any
    pi: Any
    #: smallest positive normal number (0 where the exponent range is unbounded)
    tiny: float

    def num(self, x: Any) -> Any:
        """An exactly representable input (token data, parameters)."""
        ...

    def const(self, text: str) -> Any:
        """A decimal constant of the algorithm, e.g. ``"0.044715"``."""
        ...

    def to_float(self, x: Any) -> float:
        """x rounded to the nearest binary64 (the one value of a multi-valued system)."""
        ...

    def detach(self, x: Any) -> Any:
        """x as a constant: differentiation does not flow through it."""
        ...

    def fsum(self, xs: Iterable[Any]) -> Any: ...

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Any: ...

    def exp(self, x: Any) -> Any: ...

    def log(self, x: Any) -> Any: ...

    def sqrt(self, x: Any) -> Any: ...

    def tanh(self, x: Any) -> Any: ...

    def erf(self, x: Any) -> Any: ...

    def sin(self, x: Any) -> Any: ...

    def cos(self, x: Any) -> Any: ...

    def pow(self, base: Any, exponent: Any) -> Any: ...

    def relu(self, x: Any) -> Any:
        """max(x, 0), NaN passed through."""
        ...

    def isfinite(self, x: Any) -> bool: ...

    def isnan(self, x: Any) -> bool: ...


# --------------------------------------------------------------------------
# Optional interfaces: what a system may offer beyond ``NumberSystem``
# --------------------------------------------------------------------------


class Batched(Protocol):
    """Many entries at once: the same numbers as the spec's plain code, in fewer calls.

    The harness's Monte Carlo arithmetic evaluates whole matrices per NumPy
    call (``conformance/core/rounding.py``); the mathematics is the spec's.
    """

    def matmul(self, A: Sequence[Sequence[Any]], B: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """Every entry of A B (``spec/linalg.py`` ``matmul``); A and B are not empty."""
        ...

    def map_matrix(self, f: Callable[..., Any], *Ms: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """[[f(A[i][j], B[i][j], ...)]] (``spec/linalg.py`` ``map_matrix``); f uses only the
        system's operations."""
        ...

    def map_columns(self, f: Callable[[list[Any]], list[Any]], X: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """The matrix whose column t is f(X[:, t]) (``spec/linalg.py`` ``map_columns``)."""
        ...

    def softmax(self, z: Sequence[Any]) -> list[Any]:
        """The lines of ``spec/functions.py`` ``softmax`` for the whole vector."""
        ...


class ManyNumbers(Protocol):
    """Conversions of many numbers in one call (``spec/evaluation.py`` converts inputs so)."""

    def nums(self, xs: Sequence[Any]) -> list[Any]:
        """``[num(x) for x in xs]``: the same numbers, in one call."""
        ...


class BatchedBackward(Protocol):
    """The backward pass of ``spec/autodiff.py`` in fewer calls: the same products and sums.

    The harness's Monte Carlo arithmetic evaluates a level of the tape per NumPy call
    (``conformance/core/mc_backward.py``); the mathematics is ``autodiff._adjoints``'.
    """

    def adjoints(self, tape: Sequence[Sequence[tuple[int, Any]]], output: int) -> dict[int, Any]:
        """``tape[i]``: entry i's (parent key, local derivative) pairs, parents before children;
        for every key the entry ``output`` depends on, its adjoint: the sum over the entries c
        that read it of adj[c]·l, each product and each sum in this system, added in the order
        of falling c (then c's pairs in order); ``output``'s own is 1."""
        ...


class OnePassMoments(Protocol):
    """A model of how implementations round a layer norm's e − m (``centred``)."""

    def centres(self, e: Sequence[Any], m: Any, line: int) -> list[Any]:
        """The value of the mean m that each term e[i] − m of Algorithm 6's line ``line`` (2 or
        3) is centred at: m itself in exact arithmetic; in the Monte Carlo arithmetic an
        independent rounding of line 1 per term and line, as one-pass (Welford) moments and
        fused kernels round it (docs/tolerances.md, "One-pass moments")."""
        ...


class UncentredBackward(Protocol):
    """A model of a backward pass that expands a·(e − m) as a·e − a·m (``spec/autodiff.py``)."""

    def uncentred_slopes(self, e: Sequence[Any], m: Any) -> list[Any]:
        """∂centre_i/∂e[i] for line 2's centres: zero in exact arithmetic, the rounding of the
        expanded form in a system that models it (docs/tolerances.md, "Uncentred backward
        passes")."""
        ...


class PerValueStep(Protocol):
    """A system that carries several values per number takes ReLU's branch per value."""

    def step(self, x: Any) -> Any:
        """[[x > 0]] for each value of x (ReLU's derivative, ``spec/autodiff.py``)."""
        ...


class PerValueMax(Protocol):
    """A system that carries several value sets per number takes a maximum per value set."""

    def largest(self, z: Sequence[Any]) -> Any:
        """The first largest entry of z (Python's ``max``), chosen for each value set on its own
        (softmax's shift, ``spec/functions.py``); a comparison can branch only once for all."""
        ...


def largest(z: Sequence[Any]) -> Any:
    """max(z) in the current number system: Python's ``max`` (the first largest entry), or the
    system's ``PerValueMax`` where it offers one."""
    most = offered(current(), PerValueMax)
    return most.largest(z) if most is not None else max(z)


class PerValueSign(Protocol):
    """A system that carries several values per number takes a sign branch per value."""

    def by_sign(self, x: Any, nonnegative: Callable[[Any], Any], negative: Callable[[Any], Any]) -> Any:
        """nonnegative(x) for each value of x that is ≥ 0, negative(x) for the others (NaN
        included), each value as it would be computed alone (SiLU's two forms,
        ``spec/functions.py``): a comparison can branch only once for all."""
        ...


def by_sign(x: Any, nonnegative: Callable[[Any], Any], negative: Callable[[Any], Any]) -> Any:
    """``nonnegative(x) if x >= 0 else negative(x)`` in the current number system: the branch on
    x's value, or per value where the system offers ``PerValueSign``. The two functions compute
    the same mathematics in two forms (which form is a matter of overflow, not of value)."""
    N = current()
    sign = offered(N, PerValueSign)
    if sign is not None:
        return sign.by_sign(x, nonnegative, negative)
    return nonnegative(x) if N.to_float(x) >= 0 else negative(x)


_Offer = TypeVar("_Offer")


def offered(N: object, interface: Callable[..., _Offer]) -> Optional[_Offer]:
    """``N`` as the optional ``interface`` (one of the protocols above) where it offers every
    method of it, else None.

    A method set to None, on the class or the instance, is not offered: that is how
    ``MonteCarloNumbers(batched=False)`` and the tests that switch a model off withdraw one.
    (Not ``isinstance`` with a runtime protocol: Python 3.11 answers that from the class and
    caches it, so it misses both. ``interface`` is typed as a callable so that mypy accepts a
    protocol class; the result is typed as that protocol.)
    """
    for name in _methods(interface):
        if getattr(N, name, None) is None:
            return None
    return cast(_Offer, N)


@cache
def _methods(interface: Any) -> tuple[str, ...]:
    """The methods a protocol declares."""
    return tuple(name for name, member in vars(interface).items() if callable(member) and not name.startswith("_"))


class Numbers:
    """Shared defaults of this module's systems (the contract is ``NumberSystem``)."""

    name = "abstract"
    inf: Any
    nan: Any
    pi: Any
    #: smallest positive normal number (0 where the exponent range is unbounded)
    tiny: float = 0.0

    def to_float(self, x: Any) -> float:
        return float(x)

    def detach(self, x: Any) -> Any:
        """x as a constant: differentiation does not flow through it (identity here)."""
        return x


class FloatNumbers(Numbers):
    """IEEE binary64 with correctly rounded sums."""

    name = "float"
    inf = math.inf
    nan = math.nan
    pi = math.pi
    tiny = 2.2250738585072014e-308

    def num(self, x: float | int) -> float:
        return float(x)

    def const(self, text: str) -> float:
        return float(text)

    def fsum(self, xs: Iterable[float]) -> float:
        try:
            return math.fsum(xs)
        except (OverflowError, ValueError):  # inf - inf, or a partial sum beyond binary64
            raise SpecError("sum", "terms whose sum is representable in binary64 (inputs too large?)",
                            "an overflowing sum") from None

    def dot(self, xs: Sequence[float], ys: Sequence[float]) -> float:
        return self.fsum([x * y for x, y in zip(xs, ys, strict=True)])

    def exp(self, x: float) -> float:
        try:
            return math.exp(x)
        except OverflowError:
            raise SpecError("exp", "an argument below 709.78", repr(x)) from None

    def log(self, x: float) -> float:
        if not x > 0:
            raise SpecError("log", "a positive argument", repr(x))
        return math.log(x)

    def sqrt(self, x: float) -> float:
        if x < 0:
            raise SpecError("sqrt", "a non-negative argument", repr(x))
        return math.sqrt(x)

    def tanh(self, x: float) -> float:
        return math.tanh(x)

    def erf(self, x: float) -> float:
        return math.erf(x)

    def sin(self, x: float) -> float:
        return math.sin(x)

    def cos(self, x: float) -> float:
        return math.cos(x)

    def pow(self, base: float, exponent: float) -> float:
        return math.pow(base, exponent)

    def relu(self, x: float) -> float:
        return x if (x > 0 or x != x) else 0.0

    def isfinite(self, x: float) -> bool:
        return math.isfinite(x)

    def isnan(self, x: float) -> bool:
        return x != x


class MpNumbers(Numbers):
    """mpmath at a chosen precision (decimal digits, at least 30)."""

    def __init__(self, dps: int = 40) -> None:
        if dps < 30:
            raise SpecError("dps", "at least 30 significant digits", str(dps))
        self.dps = dps
        self.ctx = ctx = mpmath.MPContext()
        ctx.dps = dps
        self.name = f"mpmath:{dps}"
        self.inf = ctx.inf
        self.nan = ctx.nan
        self.pi = ctx.pi
        self.fsum = ctx.fsum
        self.exp = ctx.exp
        self.tanh = ctx.tanh
        self.erf = ctx.erf
        self.sin = ctx.sin
        self.cos = ctx.cos
        self.isnan = ctx.isnan

    def num(self, x: float | int) -> Any:
        return self.ctx.mpf(x)

    def const(self, text: str) -> Any:
        return self.ctx.mpf(text)

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Any:
        if len(xs) != len(ys):
            raise SpecError("dot", "vectors of equal length", f"{len(xs)} and {len(ys)}")
        return self.ctx.fdot(xs, ys)

    def log(self, x: Any) -> Any:
        if not x > 0:
            raise SpecError("log", "a positive argument", str(x))
        return self.ctx.log(x)

    def sqrt(self, x: Any) -> Any:
        if x < 0:
            raise SpecError("sqrt", "a non-negative argument", str(x))
        return self.ctx.sqrt(x)

    def pow(self, base: Any, exponent: Any) -> Any:
        return self.ctx.power(base, exponent)

    def relu(self, x: Any) -> Any:
        return x if (x > 0 or self.ctx.isnan(x)) else self.ctx.zero

    def isfinite(self, x: Any) -> bool:
        return bool(self.ctx.isfinite(x))


# --------------------------------------------------------------------------
# Running error analysis
# --------------------------------------------------------------------------


class Tracked:
    """A binary64 value ``v`` with first-order error coefficients.

    ``e``: coefficient of the unit roundoff u (relative rounding errors);
    ``a``: coefficient of eta, the absolute error one rounding can make when
    its result underflows (flush-to-zero or gradual underflow).
    A non-finite value carries no error (masked scores are exactly -inf).
    """

    __slots__ = ("v", "e", "a")

    def __init__(self, v: float, e: float = 0.0, a: float = 0.0) -> None:
        self.v = v
        if v - v == 0.0:  # finite
            self.e = e
            self.a = a
        else:
            self.e = 0.0
            self.a = 0.0

    # arithmetic: every operation rounds once (|result| more units of u, one
    # more eta), and first-order propagation of the operands' errors.
    def __add__(self, other: Any) -> "Tracked":
        o = _lift(other)
        v = self.v + o.v
        return Tracked(v, self.e + o.e + abs(v), self.a + o.a + 1.0)

    __radd__ = __add__

    def __sub__(self, other: Any) -> "Tracked":
        o = _lift(other)
        v = self.v - o.v
        return Tracked(v, self.e + o.e + abs(v), self.a + o.a + 1.0)

    def __rsub__(self, other: Any) -> "Tracked":
        return _lift(other) - self

    def __mul__(self, other: Any) -> "Tracked":
        o = _lift(other)
        v = self.v * o.v
        sv, ov = abs(self.v), abs(o.v)
        return Tracked(v, ov * self.e + sv * o.e + abs(v), ov * self.a + sv * o.a + 1.0)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> "Tracked":
        o = _lift(other)
        v = self.v / o.v
        q = 1.0 / abs(o.v)
        r = abs(v) * q  # |x| / y^2
        return Tracked(v, q * self.e + r * o.e + abs(v), q * self.a + r * o.a + 1.0)

    def __rtruediv__(self, other: Any) -> "Tracked":
        return _lift(other) / self

    def __neg__(self) -> "Tracked":
        return Tracked(-self.v, self.e, self.a)

    def __pos__(self) -> "Tracked":
        return self

    def __abs__(self) -> "Tracked":
        return Tracked(abs(self.v), self.e, self.a)

    # comparisons act on values: branches follow the float64 reference
    def __lt__(self, other: Any) -> bool:
        return self.v < _value(other)

    def __le__(self, other: Any) -> bool:
        return self.v <= _value(other)

    def __gt__(self, other: Any) -> bool:
        return self.v > _value(other)

    def __ge__(self, other: Any) -> bool:
        return self.v >= _value(other)

    def __eq__(self, other: object) -> bool:
        return self.v == _value(other)

    def __ne__(self, other: object) -> bool:
        return self.v != _value(other)

    __hash__ = None  # type: ignore[assignment]

    def __float__(self) -> float:
        return self.v

    def __repr__(self) -> str:
        return f"Tracked({self.v!r}, e={self.e:.3g}, a={self.a:.3g})"


def _lift(x: Any) -> Tracked:
    """Plain Python numbers in spec code are exact constants (0, 1, 2, ints)."""
    if type(x) is Tracked:
        return x
    return Tracked(float(x))


def _value(x: Any) -> float:
    return x.v if type(x) is Tracked else float(x)


def _exact_in_every_dtype(c: float) -> bool:
    """True if c has at most 8 significant bits (exact even in bfloat16)."""
    if c == 0 or not math.isfinite(c):
        return True
    m, _ = math.frexp(abs(c))
    return (m * 256).is_integer()


class TrackedNumbers(Numbers):
    """Running error analysis; see the module docstring.

    ``transcendental_units``: how many units of u a library's exp, log, sqrt,
    tanh, erf, sin, cos and pow may be off on an exactly given argument (a
    correctly rounded function would need 1). ``sum_units(n)``: how many
    units of u times sum(|x_i|) an n-term sum may lose, default the
    worst case of any summation order, n - 1 (Higham, eq. 4.4); a dot
    product of length n gets one more unit for its products.
    The defaults are what the spec's own tests use; the conformance harness
    does not read this bound (see the module docstring).
    """

    name = "tracked"
    tiny = 2.2250738585072014e-308

    def __init__(self, transcendental_units: float = 4.0) -> None:
        self.t = float(transcendental_units)
        self.inf = Tracked(math.inf)
        self.nan = Tracked(math.nan)
        self.pi = Tracked(math.pi, math.pi, 0.0)

    @staticmethod
    def sum_units(n: int) -> float:
        return float(max(n - 1, 0))

    def num(self, x: float | int | Tracked) -> Tracked:
        if type(x) is Tracked:
            return x
        return Tracked(float(x))

    def const(self, text: str) -> Tracked:
        c = float(text)
        # A constant the implementation must round to its dtype.
        return Tracked(c, 0.0 if _exact_in_every_dtype(c) else abs(c), 0.0)

    def to_float(self, x: Any) -> float:
        return _value(x)

    def fsum(self, xs: Iterable[Any]) -> Tracked:
        items = [_lift(x) for x in xs]
        n = len(items)
        v = math.fsum([x.v for x in items])
        if v - v != 0.0:
            return Tracked(v)
        mag = math.fsum([abs(x.v) for x in items])
        e = math.fsum([x.e for x in items]) + self.sum_units(n) * mag
        a = math.fsum([x.a for x in items]) + max(n - 1, 0)
        return Tracked(v, e, a)

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Tracked:
        if len(xs) != len(ys):
            raise SpecError("dot", "vectors of equal length", f"{len(xs)} and {len(ys)}")
        xs_ = [_lift(x) for x in xs]
        ys_ = [_lift(y) for y in ys]
        n = len(xs_)
        v = math.fsum([x.v * y.v for x, y in zip(xs_, ys_)])
        if v - v != 0.0:
            return Tracked(v)
        mag = math.fsum([abs(x.v * y.v) for x, y in zip(xs_, ys_)])
        e = math.fsum([abs(y.v) * x.e + abs(x.v) * y.e for x, y in zip(xs_, ys_)])
        a = math.fsum([abs(y.v) * x.a + abs(x.v) * y.a for x, y in zip(xs_, ys_)])
        return Tracked(v, e + (self.sum_units(n) + 1.0) * mag, a + 2.0 * n)

    def _unary(self, x: Any, v: float, slope: float) -> Tracked:
        """Result v of a library function with |f'(x)| = slope."""
        x = _lift(x)
        return Tracked(v, slope * x.e + self.t * abs(v), slope * x.a + 1.0)

    def exp(self, x: Any) -> Tracked:
        xv = _value(x)
        try:
            v = math.exp(xv)
        except OverflowError:
            raise SpecError("exp", "an argument below 709.78", repr(xv)) from None
        return self._unary(x, v, v)

    def log(self, x: Any) -> Tracked:
        xv = _value(x)
        if not xv > 0:
            raise SpecError("log", "a positive argument", repr(xv))
        return self._unary(x, math.log(xv), 1.0 / xv)

    def sqrt(self, x: Any) -> Tracked:
        xv = _value(x)
        if xv < 0:
            raise SpecError("sqrt", "a non-negative argument", repr(xv))
        v = math.sqrt(xv)
        return self._unary(x, v, 0.5 / v if v > 0 else 0.0)

    def tanh(self, x: Any) -> Tracked:
        v = math.tanh(_value(x))
        return self._unary(x, v, 1.0 - v * v)

    def erf(self, x: Any) -> Tracked:
        xv = _value(x)
        return self._unary(x, math.erf(xv), 2.0 / math.sqrt(math.pi) * math.exp(-xv * xv))

    def sin(self, x: Any) -> Tracked:
        xv = _value(x)
        return self._unary(x, math.sin(xv), abs(math.cos(xv)))

    def cos(self, x: Any) -> Tracked:
        xv = _value(x)
        return self._unary(x, math.cos(xv), abs(math.sin(xv)))

    def pow(self, base: Any, exponent: Any) -> Tracked:
        b, y = _lift(base), _lift(exponent)
        v = math.pow(b.v, y.v)
        db = abs(y.v * math.pow(b.v, y.v - 1.0)) if b.v != 0 else 0.0
        dy = abs(v * math.log(b.v)) if b.v > 0 else 0.0
        return Tracked(
            v,
            db * b.e + dy * y.e + self.t * abs(v),
            db * b.a + dy * y.a + 1.0,
        )

    def relu(self, x: Any) -> Tracked:
        x = _lift(x)
        # 1-Lipschitz and exact: an implementation's x-hat on either side of 0
        # is off by at most x's own error.
        return Tracked(x.v if (x.v > 0 or x.v != x.v) else 0.0, x.e, x.a)

    def isfinite(self, x: Any) -> bool:
        return math.isfinite(_value(x))

    def isnan(self, x: Any) -> bool:
        v = _value(x)
        return v != v


FLOAT = FloatNumbers()

if TYPE_CHECKING:  # mypy checks each system against the protocol
    _systems: tuple[type[NumberSystem], ...] = (FloatNumbers, MpNumbers, TrackedNumbers)

_current: contextvars.ContextVar[NumberSystem] = contextvars.ContextVar(
    "ftspec_numbers", default=FLOAT
)


def current() -> NumberSystem:
    """The number system the spec is evaluating in."""
    return _current.get()


def centred(e: Sequence[Any], m: Any, *, line: int, line_2: Optional[list[Any]] = None) -> list[Any]:
    """e − m, as line ``line`` (2 or 3) of Algorithm 6 (layer norm) subtracts it.

    The paper's e[i] − m for every i: the same numbers in both lines, so line
    3 takes line 2's terms (``line_2``) where it has them, and the binary64,
    mpmath and tape results are those of one subtraction. A system that
    models how implementations round it (``OnePassMoments``: the harness's
    Monte Carlo arithmetic, and a tape over it) centres each term of each
    line at its own value of m instead, so that its tolerance covers
    one-pass (Welford) moments and fused kernels as well as the paper's
    order (docs/tolerances.md, "One-pass moments").
    """
    moments = offered(current(), OnePassMoments)
    if moments is not None:
        return [ei - ci for ei, ci in zip(e, moments.centres(e, m, line))]
    if line_2 is not None:
        return line_2
    return [ei - m for ei in e]


@contextmanager
def using(numbers: NumberSystem) -> Iterator[NumberSystem]:
    """Evaluate the spec in ``numbers`` inside the ``with`` block."""
    token = _current.set(numbers)
    try:
        yield numbers
    finally:
        _current.reset(token)
