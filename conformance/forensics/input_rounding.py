"""How far an entry's outputs can move when its inputs lie anywhere in their printed half-steps.

A number printed as 1.47 stands for any value in [1.465, 1.475]. ``ftspec identify --table``
(``identify_table.py``) must know how far the spec's outputs can move when every printed input
and parameter moves anywhere in its interval, and it must know it as a *bound*: a sample of
nudges (the 8 random moves used before) finds a movement smaller than the worst one, so a
candidate can be excluded although some inputs within the printed digits reproduce the table
(seed 004's tutorial table was excluding its own ν = 1e-4).

``enclose`` returns, for every output element, an interval that contains the spec's exact
(real-arithmetic) output for *every* point of the input box. Two enclosures are computed and
intersected, each a true enclosure on its own:

1. **Interval arithmetic** (Moore, Kearfott & Cloud, *Introduction to Interval Analysis*, SIAM
   2009, ch. 2-5): the spec is evaluated once through its number-system protocol
   (``spec/numbers.py``) in ``IntervalNumbers``, where every number is an interval [lo, hi] and
   every operation returns an interval containing all its results, its endpoints rounded outward
   (``math.nextafter``: IEEE 754 +, −, ×, ÷, √ and ``math.fsum`` are correctly rounded, so one
   step outward encloses the real result; libm's exp, log, tanh, erf, sin, cos and pow are
   widened by ``LIBM_ULPS`` steps). This is sound, but it loses correlations (x − mean(x) counts
   x's width twice), so alone it is several times too wide.
2. **The mean-value form** (Moore et al. sec. 6.4): for x and x̂ in the box,
   f(x) ∈ f(x̂) + Σ_i ∂f/∂x_i(box) · [−h_i, h_i], where ∂f/∂x_i(box) encloses the partial
   derivative over the whole box. The derivatives are the spec's own reverse mode
   (``spec/autodiff.py`` ``GradNumbers``) over ``IntervalNumbers`` values, so every local
   derivative is evaluated on intervals; ReLU's derivative is [0, 1] on an interval that
   contains 0 (its Clarke gradient: the mean-value inclusion holds for Lipschitz functions,
   Clarke, *Optimization and Nonsmooth Analysis*, thm. 2.3.7). This is first order plus a
   rigorous remainder: the derivative enclosure's width is the second-order term. f(x̂) is an
   interval evaluation at the centre (point intervals, outward rounded).

Why not a first-order bound with a sampled or estimated second-order term: any estimate can be
smaller than the truth, which is the failure being fixed. Why not interval arithmetic alone: on
the tutorial's layer norm it is about three times wider than the mean-value form, too wide to
separate even the variance's divisor at some printed precisions.

A comparison the spec makes (a branch) must come out the same everywhere in the box; where it
does not (two softmax scores whose intervals overlap are fine: softmax's shift is a constant,
``largest`` below; but a ReLU's derivative test in exact arithmetic) the evaluation raises
``Undecidable`` and ``enclose`` returns None: no bound, so the caller may neither exclude nor
accept the candidate on these numbers. The spec's underflow guard on a norm's statistic (a
limit of binary64, not a branch of the mathematics) is answered "no" unless every point
underflows, so the evaluation goes on; a variance interval that reaches 0 without ε then gives
an infinite enclosure (``Enclosure.bounded``), again no bound. The mean-value form is skipped
(interval arithmetic alone is kept) where the tape is too long for one backward pass per output
element (``WORK``).
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec import numbers as numbers_mod
from ftspec.spec.autodiff import GradNumbers, Var
from ftspec.spec.errors import in_algorithm
from ftspec.spec.evaluation import resolve_hyper
from ftspec.spec.intermediates import recorded
from ftspec.spec.numbers import Numbers, NumberSystem, PerValueMax, PerValueStep
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

__all__ = ["Enclosure", "Interval", "IntervalNumbers", "LIBM_ULPS", "Undecidable", "WORK", "enclose",
           "refuses_the_box"]

#: steps outward for libm's transcendental functions (glibc documents errors of at most a few
#: ulps for exp, log, sin, cos, tanh, erf, pow: "Known Maximum Errors in Math Functions")
LIBM_ULPS = 8
#: tape entries × output elements above which the mean-value form is skipped (interval arithmetic
#: alone then; a few seconds of pure Python per candidate at this size)
WORK = 4_000_000

_INF = math.inf


class Undecidable(ArithmeticError):
    """A comparison whose answer differs within the intervals: no single branch of the spec holds."""


def _down(x: float, steps: int = 1) -> float:
    for _ in range(steps):
        x = math.nextafter(x, -_INF)
    return x


def _up(x: float, steps: int = 1) -> float:
    for _ in range(steps):
        x = math.nextafter(x, _INF)
    return x


def _product(a: float, b: float) -> float:
    """An endpoint product; 0 × ∞ is 0 (IEEE 1788's convention for interval endpoints)."""
    p = a * b
    return 0.0 if p != p else p


class Interval:
    """A closed interval [lo, hi] of reals (endpoints may be ±∞; never NaN)."""

    __slots__ = ("lo", "hi")
    __hash__ = None  # type: ignore[assignment]  # equality below is not an identity

    def __init__(self, lo: float, hi: float) -> None:
        self.lo = -_INF if lo != lo else lo  # a NaN endpoint: unbounded (∞ − ∞ of wide intervals)
        self.hi = _INF if hi != hi else hi

    @classmethod
    def point(cls, x: float) -> "Interval":
        return cls(x, x)

    @property
    def mid(self) -> float:
        if math.isfinite(self.lo) and math.isfinite(self.hi):
            return 0.5 * self.lo + 0.5 * self.hi
        return self.lo if math.isfinite(self.lo) else self.hi

    def contains_zero(self) -> bool:
        return self.lo <= 0.0 <= self.hi

    # -- arithmetic: every result contains every result of its points ---------------------
    def __add__(self, o: Any) -> "Interval":
        o = _lift(o)
        return Interval(_down(self.lo + o.lo), _up(self.hi + o.hi))

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Interval":
        o = _lift(o)
        return Interval(_down(self.lo - o.hi), _up(self.hi - o.lo))

    def __rsub__(self, o: Any) -> "Interval":
        return _lift(o) - self

    def __mul__(self, o: Any) -> "Interval":
        if o is self:  # x · x ≥ 0: the square, not the product of two independent intervals
            return _square(self)
        o = _lift(o)
        if self.lo == self.hi == 0.0 or o.lo == o.hi == 0.0:
            return Interval(0.0, 0.0)
        ps = [_product(a, b) for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        return Interval(_down(min(ps)), _up(max(ps)))

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Interval":
        o = _lift(o)
        if o.contains_zero():
            return Interval(-_INF, _INF)
        qs = [a / b if math.isfinite(b) else 0.0 for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        qs = [q if q == q else 0.0 for q in qs]
        return Interval(_down(min(qs)), _up(max(qs)))

    def __rtruediv__(self, o: Any) -> "Interval":
        return _lift(o) / self

    def __neg__(self) -> "Interval":
        return Interval(-self.hi, -self.lo)

    def __pos__(self) -> "Interval":
        return self

    def __abs__(self) -> "Interval":
        if self.lo >= 0:
            return self
        if self.hi <= 0:
            return -self
        return Interval(0.0, max(-self.lo, self.hi))

    # -- comparisons: an answer only where every point gives it ------------------------------
    def _order(self, o: Any, strict: bool) -> bool:
        if isinstance(o, _UnderflowGuard):
            # "v below the smallest normal?" (spec/normalization.py refuses a nonzero statistic that
            # underflows binary64): a limit of the spec's arithmetic, not a branch of its
            # mathematics. Only where every point underflows is the answer yes; elsewhere the
            # evaluation goes on with the whole interval, enclosing the exact output at every point
            # (those below the guard included), which is what an enclosure promises.
            return self.hi < o if strict else self.hi <= o
        o = _lift(o)
        if self.hi < o.lo or (not strict and self.hi <= o.lo):
            return True
        if self.lo > o.hi or (strict and self.lo >= o.hi):
            return False
        raise Undecidable(f"[{self.lo:.6g}, {self.hi:.6g}] {'<' if strict else '<='} [{o.lo:.6g}, {o.hi:.6g}]")

    def __lt__(self, o: Any) -> bool:
        return self._order(o, True)

    def __le__(self, o: Any) -> bool:
        return self._order(o, False)

    def __gt__(self, o: Any) -> bool:
        return _lift(o)._order(self, True)

    def __ge__(self, o: Any) -> bool:
        return _lift(o)._order(self, False)

    def __eq__(self, o: object) -> bool:
        """True only for the same point. The spec tests equality only to refuse a degenerate case
        (a variance exactly 0, ``spec/normalization.py``); an interval that merely contains the
        point goes on, and the division that follows gives an unbounded interval: no bound, never
        a wrong one."""
        if not isinstance(o, (Interval, int, float)):
            return NotImplemented
        other = _lift(o)
        return self.lo == self.hi == other.lo == other.hi

    def __ne__(self, o: object) -> bool:
        same = self.__eq__(o)
        return NotImplemented if same is NotImplemented else not same

    def __float__(self) -> float:
        return self.mid

    def __repr__(self) -> str:
        return f"Interval({self.lo!r}, {self.hi!r})"


class _UnderflowGuard(float):
    """binary64's smallest normal number as ``IntervalNumbers.tiny``: the spec compares a norm's
    statistic with it only to refuse an underflow (``Interval._order`` says how that is read)."""


def _lift(x: Any) -> Interval:
    if isinstance(x, Interval):
        return x
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"an interval cannot be combined with {type(x).__name__}")
    f = float(x)
    if isinstance(x, int) and int(f) != x:  # an int beyond binary64's integers: one step each way
        return Interval(_down(f), _up(f))
    return Interval.point(f)


def _square(x: Interval) -> Interval:
    lo2, hi2 = x.lo * x.lo, x.hi * x.hi
    if x.lo >= 0:
        return Interval(_down(lo2), _up(hi2))
    if x.hi <= 0:
        return Interval(_down(hi2), _up(lo2))
    return Interval(0.0, _up(max(lo2, hi2)))


def _monotone(f: Any, x: Interval, low: float = -_INF, high: float = _INF) -> Interval:
    """An increasing libm function on an interval, widened for libm's error, clipped to its range."""
    def at(v: float) -> float:
        try:
            return f(v)
        except OverflowError:
            return _INF

    lo = max(_down(at(x.lo), LIBM_ULPS), low) if x.lo > -_INF else (low if low > -_INF else at(x.lo))
    hi = min(_up(at(x.hi), LIBM_ULPS), high) if x.hi < _INF else (high if high < _INF else at(x.hi))
    return Interval(lo, hi)


def _exp(v: float) -> float:
    return 0.0 if v == -_INF else math.exp(v)


class IntervalNumbers(Numbers):
    """The spec's number-system protocol over ``Interval``s, rounded outward.

    Offers ``PerValueStep`` (ReLU's derivative: [0, 1] on an interval containing 0) and
    ``PerValueMax`` (softmax's shift: any constant gives the same softmax, so a point is chosen,
    which keeps the shifted scores as narrow as the scores)."""

    name = "interval"
    tiny: float = _UnderflowGuard(2.2250738585072014e-308)

    def __init__(self) -> None:
        self.inf = Interval.point(_INF)
        self.nan = Interval(-_INF, _INF)
        self.pi = Interval(math.pi, _up(math.pi))  # math.pi is π rounded down

    def num(self, x: Any) -> Interval:
        return _lift(x)

    def const(self, text: str) -> Interval:
        f = float(text)
        if math.isfinite(f) and Fraction(text) == Fraction(f):
            return Interval.point(f)
        return Interval(_down(f), _up(f))

    def to_float(self, x: Any) -> float:
        return _lift(x).mid

    def fsum(self, xs: Iterable[Any]) -> Interval:
        items = [_lift(x) for x in xs]
        try:
            lo, hi = math.fsum(x.lo for x in items), math.fsum(x.hi for x in items)
        except ValueError:  # -∞ and +∞ among the endpoints
            return Interval(-_INF, _INF)
        except OverflowError:
            raise SpecError("sum", "terms whose sum is representable in binary64 (inputs too large?)",
                            "an overflowing sum") from None
        return Interval(_down(lo), _up(hi))  # fsum is correctly rounded: one step encloses it

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Interval:
        if len(xs) != len(ys):
            raise SpecError("dot", "vectors of equal length", f"{len(xs)} and {len(ys)}")
        terms = []
        for x, y in zip(xs, ys):
            lx = _lift(x)
            terms.append(lx * (lx if y is x else _lift(y)))  # x · x: a square (``Interval.__mul__``)
        return self.fsum(terms)

    def exp(self, x: Any) -> Interval:
        return _monotone(_exp, _lift(x), 0.0)

    def log(self, x: Any) -> Interval:
        x = _lift(x)
        if x.hi <= 0:
            raise SpecError("log", "a positive argument", repr(x))
        lo = -_INF if x.lo <= 0 else _down(math.log(x.lo), LIBM_ULPS)
        hi = _INF if x.hi == _INF else _up(math.log(x.hi), LIBM_ULPS)
        return Interval(lo, hi)

    def sqrt(self, x: Any) -> Interval:
        x = _lift(x)
        if x.hi < 0:
            raise SpecError("sqrt", "a non-negative argument", repr(x))
        # points below 0 are refused by the spec: the enclosure is of the points it answers
        lo = 0.0 if x.lo <= 0 else _down(math.sqrt(x.lo))
        return Interval(lo, _up(math.sqrt(x.hi)) if x.hi < _INF else _INF)

    def tanh(self, x: Any) -> Interval:
        return _monotone(math.tanh, _lift(x), -1.0, 1.0)

    def erf(self, x: Any) -> Interval:
        return _monotone(math.erf, _lift(x), -1.0, 1.0)

    def sin(self, x: Any) -> Interval:
        return self.cos(_lift(x) - self.pi * Interval.point(0.5))

    def cos(self, x: Any) -> Interval:
        x = _lift(x)
        if not (math.isfinite(x.lo) and math.isfinite(x.hi)) or x.hi - x.lo >= 2 * math.pi:
            return Interval(-1.0, 1.0)
        a, b = math.cos(x.lo), math.cos(x.hi)
        lo, hi = _down(min(a, b), LIBM_ULPS), _up(max(a, b), LIBM_ULPS)
        # extrema at kπ (k even: 1, odd: −1); one near the interval counts as inside (a margin far
        # above kπ's rounding: counting one too many only widens the enclosure)
        for k in range(math.floor(x.lo / math.pi) - 1, math.ceil(x.hi / math.pi) + 2):
            at, margin = k * math.pi, 1e-12 * max(1.0, abs(k * math.pi))
            if x.lo - margin <= at <= x.hi + margin:
                if k % 2 == 0:
                    hi = 1.0
                else:
                    lo = -1.0
        return Interval(max(lo, -1.0), min(hi, 1.0))

    def pow(self, base: Any, exponent: Any) -> Interval:
        b, y = _lift(base), _lift(exponent)
        if b.lo > 0:
            return self.exp(y * self.log(b))
        if y.lo == y.hi and float(y.lo).is_integer() and abs(y.lo) <= 64 and y.lo >= 0:
            return _integer_power(b, int(y.lo))
        raise Undecidable(f"pow of [{b.lo:.6g}, {b.hi:.6g}] to [{y.lo:.6g}, {y.hi:.6g}]")

    def relu(self, x: Any) -> Interval:
        x = _lift(x)
        return Interval(max(x.lo, 0.0), max(x.hi, 0.0))

    def step(self, x: Any) -> Interval:
        """``PerValueStep``: ReLU's derivative over the interval (ReLU'(0) = 0, as the spec's)."""
        x = _lift(x)
        if x.lo > 0:
            return Interval.point(1.0)
        if x.hi <= 0:
            return Interval.point(0.0)
        return Interval(0.0, 1.0)

    def largest(self, z: Sequence[Any]) -> Interval:
        """``PerValueMax``: a point near the largest entry (softmax's shift; any constant is exact)."""
        items = [_lift(v) for v in z]
        finite = [v.mid for v in items if math.isfinite(v.mid)]
        if finite:
            return Interval.point(max(finite))
        return Interval.point(max(v.hi for v in items))

    def isfinite(self, x: Any) -> bool:
        x = _lift(x)
        return math.isfinite(x.lo) and math.isfinite(x.hi)

    def isnan(self, x: Any) -> bool:
        return False


def _integer_power(b: Interval, n: int) -> Interval:
    out = Interval.point(1.0)
    for _ in range(n):
        out = out * b
    if n % 2 == 0 and n:  # an even power is ≥ 0 (the repeated product forgets it)
        return Interval(max(out.lo, 0.0), out.hi)
    return out


if TYPE_CHECKING:  # mypy checks the class against the protocol and the interfaces it offers
    _system: type[NumberSystem] = IntervalNumbers
    _step: type[PerValueStep] = IntervalNumbers
    _most: type[PerValueMax] = IntervalNumbers


# -- enclosing an entry's outputs -------------------------------------------------------------

class Enclosure:
    """Per output: ``lo``/``hi`` arrays containing the spec's exact output at every point of the
    box; ``method`` says which enclosures were intersected."""

    def __init__(self, lo: dict[str, np.ndarray], hi: dict[str, np.ndarray], method: str) -> None:
        self.lo, self.hi, self.method = lo, hi, method

    def centre(self, name: str) -> np.ndarray:
        with np.errstate(invalid="ignore"):  # -∞ + ∞: NaN, where ``bounded`` is False
            return 0.5 * self.lo[name] + 0.5 * self.hi[name]

    def radius(self, name: str) -> np.ndarray:
        """Half the width, rounded up so that centre ± radius still contains [lo, hi]."""
        c = self.centre(name)
        with np.errstate(invalid="ignore"):
            r = np.maximum(self.hi[name] - c, c - self.lo[name])
        return np.where(np.isnan(r), np.inf, np.nextafter(r, np.inf))

    def bounded(self, name: str) -> np.ndarray:
        """Where the enclosure is finite. An infinite one (a division by an interval holding 0:
        a variance that may be 0 without ε) says nothing of the output there: not a bound."""
        return np.isfinite(self.lo[name]) & np.isfinite(self.hi[name])


def enclose(entry: Entry, hyper: Mapping[str, int], inputs: Mapping[str, np.ndarray],
            params: Mapping[str, np.ndarray], radii: Mapping[str, np.ndarray], variant: VariantSet,
            outputs: Sequence[str]) -> Optional[Enclosure]:
    """Intervals containing ``outputs`` of ``entry`` under ``variant`` for every input and
    parameter within ``radii`` (same names and shapes; names absent are exact) of the given values.
    ``outputs`` may name the entry's intermediates too (``spec/intermediates.py``). None: the spec
    branches differently within the box, refuses some of it, or does not compute one of ``outputs``
    (no bound)."""
    real = {s.name for s in entry.inputs if s.is_real}
    try:
        with in_algorithm(entry.name):
            hp = resolve_hyper(entry, {k: np.asarray(v).tolist() for k, v in inputs.items()},
                               {k: np.asarray(v).tolist() for k, v in params.items()}, hyper, variant)
            centre = _run(entry, hp, variant, IntervalNumbers(), inputs, params, {}, real, outputs)
            ns = GradNumbers(IntervalNumbers())
            box = _run(entry, hp, variant, ns, inputs, params, radii, real, outputs)
    except (SpecError, ArithmeticError):
        return None
    lo, hi = {}, {}
    for name in outputs:
        lo[name] = np.array([v.v.lo for v in box[name]], dtype=np.float64).reshape(box.shape_of[name])
        hi[name] = np.array([v.v.hi for v in box[name]], dtype=np.float64).reshape(box.shape_of[name])
    method = "interval arithmetic"
    if len(ns.tape) * sum(len(box[n]) for n in outputs) <= WORK:
        method = "interval arithmetic ∩ mean-value form"
        for name in outputs:
            c_lo = np.array([v.lo for v in centre[name]])
            c_hi = np.array([v.hi for v in centre[name]])
            # an element unbounded in interval arithmetic is left so: its derivatives over the box
            # hold the same unbounded quotient (a variance that may be 0 without ε), and a skipped
            # tightening can only leave a candidate "cannot tell", never fit or exclude it wrongly
            r = np.array([_movement(ns, v, box.leaves) if math.isfinite(v.v.lo) and math.isfinite(v.v.hi)
                          else _INF for v in box[name]])
            lo[name] = np.maximum(lo[name], (c_lo - r).reshape(lo[name].shape))
            hi[name] = np.minimum(hi[name], (c_hi + r).reshape(hi[name].shape))
    return Enclosure(lo, hi, method)


def refuses_the_box(entry: Entry, hyper: Mapping[str, int], inputs: Mapping[str, np.ndarray],
                    params: Mapping[str, np.ndarray], radii: Mapping[str, np.ndarray], variant: VariantSet,
                    outputs: Sequence[str]) -> bool:
    """Whether the spec refuses the box as a whole (interval arithmetic over it raises SpecError:
    a size the candidate does not accept, or a check every interval fails), as opposed to refusing
    only some points, such as the printed one (a variance exactly 0 at the printed digits, nonzero
    elsewhere in the half-steps), where the interval evaluation goes on."""
    real = {s.name for s in entry.inputs if s.is_real}
    try:
        with in_algorithm(entry.name):
            hp = resolve_hyper(entry, {k: np.asarray(v).tolist() for k, v in inputs.items()},
                               {k: np.asarray(v).tolist() for k, v in params.items()}, hyper, variant)
            _run(entry, hp, variant, IntervalNumbers(), inputs, params, radii, real, outputs)
    except SpecError:
        return True
    except ArithmeticError:  # a branch with no single answer: some points are answered
        return False
    return False


class _Outputs(dict):
    """{output name: flat list of its numbers}, with ``shape_of`` (each output's shape) and
    ``leaves`` ((Var, radius) of every moved number)."""

    shape_of: dict[str, tuple[int, ...]]
    leaves: list[tuple[Var, float]]


def _run(entry: Entry, hp: Mapping[str, int], variant: VariantSet, N: Any, inputs: Mapping[str, np.ndarray],
         params: Mapping[str, np.ndarray], radii: Mapping[str, np.ndarray], real: set[str],
         outputs: Sequence[str]) -> _Outputs:
    leaves: list[tuple[Var, float]] = []

    def lift(name: str, value: np.ndarray) -> Any:
        r = np.broadcast_to(np.asarray(radii[name], dtype=np.float64), np.shape(value)) if name in radii else None
        flat: list[Any] = []
        for i, x in enumerate(np.asarray(value, dtype=np.float64).ravel().tolist()):
            h = 0.0 if r is None else float(r.ravel()[i])
            iv = Interval(_down(x - h), _up(x + h)) if h > 0 else Interval.point(x)
            if isinstance(N, GradNumbers):
                leaf = N.leaf(iv)
                if h > 0:
                    leaves.append((leaf, h))
                flat.append(leaf)
            else:
                flat.append(iv)
        if not np.ndim(value):
            return flat[0]
        return np.array(flat, dtype=object).reshape(np.shape(value)).tolist()

    lifted_in = {s.name: (lift(s.name, inputs[s.name]) if s.name in real else np.asarray(inputs[s.name]).tolist())
                 for s in entry.inputs}
    lifted_par = {k: lift(k, v) for k, v in params.items()}
    named = [k for k in outputs if k not in {s.name for s in entry.outputs}]  # intermediates
    values: dict[str, Any] = {}
    with numbers_mod.using(N), ExitStack() as stack:
        if named:
            values = stack.enter_context(recorded())
        out = entry.reference(lifted_in, lifted_par, dict(hp), variant)
    if named:
        if any(k not in values for k in named):
            raise SpecError("outputs", "intermediates the candidate computes", ", ".join(k for k in named
                                                                                        if k not in values))
        out = {**values, **out}
    result = _Outputs()
    result.shape_of, result.leaves = {}, leaves
    for name in outputs:
        flat = _flatten(out[name])
        result[name] = [N.num(x) for x in flat] if isinstance(N, GradNumbers) else [_lift(x) for x in flat]
        result.shape_of[name] = tuple(np.shape(_shape_probe(out[name])))
    return result


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for item in x for y in _flatten(item)]
    return [x]


def _shape_probe(x: Any) -> Any:
    """The nested list with every number replaced by 0 (for its shape)."""
    if isinstance(x, (list, tuple)):
        return [_shape_probe(i) for i in x]
    return 0.0


def _movement(ns: GradNumbers, output: Var, leaves: Sequence[tuple[Var, float]]) -> float:
    """Σ_i max|∂output/∂leaf_i over the box| · h_i, rounded up: one backward pass over the tape
    with interval adjoints (the derivatives enclose those of every point in the box)."""
    if output.index < 0:  # a constant or a leaf itself
        return next((h for leaf, h in leaves if leaf is output), 0.0)
    adj: dict[int, Interval] = {output.index: Interval.point(1.0)}
    by_leaf: dict[int, Interval] = {}
    for node in reversed(ns.tape[: output.index + 1]):
        a = adj.pop(node.index, None)
        if a is None:
            continue
        for parent, local in node.parents:
            term = a * local
            if parent.index < 0:  # a leaf (or a constant): never recorded on the tape
                key = id(parent)
                prev = by_leaf.get(key)
                by_leaf[key] = term if prev is None else prev + term
            else:
                prev = adj.get(parent.index)
                adj[parent.index] = term if prev is None else prev + term
    total = 0.0
    for leaf, h in leaves:
        g = by_leaf.get(id(leaf))
        if g is not None:
            total = _up(total + _up(max(abs(g.lo), abs(g.hi)) * h))
    return total
