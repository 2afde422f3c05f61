"""Reverse-mode differentiation over the spec's own arithmetic.

``GradNumbers(base)`` is a number system whose numbers (``Var``) carry a
value in the ``base`` system (binary64, mpmath, or any other) and remember
how they were computed on a tape. ``gradient`` evaluates a spec function in
it and walks the tape backwards once, so the gradient of a scalar with
respect to every parameter costs one extra pass (Griewank & Walther,
*Evaluating Derivatives*, 2nd ed., ch. 3). Nothing here uses NumPy, PyTorch
or JAX.

Local derivatives are the textbook ones; where a function is not
differentiable the spec takes the convention every framework takes:
ReLU'(0) = 0. Softmax subtracts its column maximum as a constant
(``detach``): the gradient is the same in exact arithmetic, as in
``jax.nn.softmax``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from . import numbers as numbers_mod
from .numbers import (FLOAT, Batched, BatchedBackward, Numbers, NumberSystem, OnePassMoments, PerValueMax,
                      PerValueSign, PerValueStep, UncentredBackward, offered)

__all__ = ["GradNumbers", "Var", "gradient"]


class Var:
    """A value on the tape: ``parents`` are (Var, ∂self/∂parent) pairs."""

    __slots__ = ("v", "parents", "ns", "index")

    def __init__(self, v: Any, ns: "GradNumbers", parents: tuple = ()) -> None:
        self.v = v
        self.parents = parents
        self.ns = ns
        self.index = -1
        if parents:
            ns._record(self)

    # -- arithmetic ---------------------------------------------------------------
    def __add__(self, o: Any) -> "Var":
        o = self.ns._lift(o)
        return Var(self.v + o.v, self.ns, ((self, 1), (o, 1)))

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Var":
        o = self.ns._lift(o)
        return Var(self.v - o.v, self.ns, ((self, 1), (o, -1)))

    def __rsub__(self, o: Any) -> "Var":
        return self.ns._lift(o) - self

    def __mul__(self, o: Any) -> "Var":
        o = self.ns._lift(o)
        return Var(self.v * o.v, self.ns, ((self, o.v), (o, self.v)))

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Var":
        o = self.ns._lift(o)
        q = self.v / o.v
        return Var(q, self.ns, ((self, 1 / o.v), (o, -q / o.v)))

    def __rtruediv__(self, o: Any) -> "Var":
        return self.ns._lift(o) / self

    def __neg__(self) -> "Var":
        return Var(-self.v, self.ns, ((self, -1),))

    def __pos__(self) -> "Var":
        return self

    # -- comparisons act on values ----------------------------------------------
    def __lt__(self, o: Any) -> bool:
        return self.v < _value(o)

    def __le__(self, o: Any) -> bool:
        return self.v <= _value(o)

    def __gt__(self, o: Any) -> bool:
        return self.v > _value(o)

    def __ge__(self, o: Any) -> bool:
        return self.v >= _value(o)

    def __eq__(self, o: object) -> bool:
        return self.v == _value(o)

    def __ne__(self, o: object) -> bool:
        return self.v != _value(o)

    __hash__ = None  # type: ignore[assignment]

    def __float__(self) -> float:
        return float(self.v)

    def __repr__(self) -> str:
        return f"Var({self.v!r})"


def _value(o: Any) -> Any:
    return o.v if type(o) is Var else o


class GradNumbers(Numbers):
    """Numbers that record their computation for ``gradient`` (values in ``base``)."""

    def __init__(self, base: NumberSystem = FLOAT) -> None:
        self.base = base
        self.name = f"grad({base.name})"
        self.tiny = base.tiny
        self.tape: list[Var] = []
        self.inf = self.constant(base.inf)
        self.nan = self.constant(base.nan)
        self.pi = self.constant(base.pi)
        #: ReLU's derivative per value, where the base carries several (its Monte Carlo lanes)
        self._per_value = offered(base, PerValueStep)
        self._moments = offered(base, OnePassMoments)
        if self._moments is None:  # offers ``OnePassMoments`` exactly when the base does
            self.centres = None  # type: ignore[assignment]
        self._most = offered(base, PerValueMax)
        if self._most is None:  # and ``PerValueMax`` exactly when the base does
            self.largest = None  # type: ignore[assignment]
        self._sign = offered(base, PerValueSign)
        if self._sign is None:  # and ``PerValueSign`` exactly when the base does
            self.by_sign = None  # type: ignore[assignment]
        self._batched = offered(base, Batched)
        if self._batched is None:  # and ``Batched`` exactly when the base does
            self.matmul = self.map_matrix = self.map_columns = self.softmax = None  # type: ignore[assignment]

    def _record(self, v: Var) -> None:
        v.index = len(self.tape)
        self.tape.append(v)

    def constant(self, value: Any) -> Var:
        return Var(value, self)

    def _lift(self, o: Any) -> Var:
        return o if type(o) is Var else Var(self.base.num(o) if isinstance(o, (int, float)) else o, self)

    def leaf(self, x: Any) -> Var:
        """A differentiable input (a parameter)."""
        return Var(self.base.num(x), self)

    # -- the number interface ---------------------------------------------------
    def num(self, x: Any) -> Var:
        return x if type(x) is Var else Var(self.base.num(x), self)

    def const(self, text: str) -> Var:
        return Var(self.base.const(text), self)

    def to_float(self, x: Any) -> float:
        return self.base.to_float(_value(x))

    def isfinite(self, x: Any) -> bool:
        return self.base.isfinite(_value(x))

    def isnan(self, x: Any) -> bool:
        return self.base.isnan(_value(x))

    def detach(self, x: Any) -> Var:
        return Var(_value(x), self)

    def largest(self, z: Sequence[Any]) -> Var:
        """``PerValueMax``, offered where the base offers it: the base's largest values, as a
        constant (softmax detaches its shift)."""
        assert self._most is not None  # __init__ withdraws this method otherwise
        return Var(self._most.largest([_value(x) for x in z]), self)

    def fsum(self, xs: Iterable[Any]) -> Var:
        items = [self._lift(x) for x in xs]
        one = self.base.num(1)
        return Var(self.base.fsum([x.v for x in items]), self, tuple((x, one) for x in items))

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Var:
        a = [self._lift(x) for x in xs]
        b = [self._lift(y) for y in ys]
        value = self.base.dot([x.v for x in a], [y.v for y in b])
        parents = tuple((x, y.v) for x, y in zip(a, b)) + tuple((y, x.v) for x, y in zip(a, b))
        return Var(value, self, parents)

    def matmul(self, A: Sequence[Sequence[Any]], B: Sequence[Sequence[Any]]) -> list[list[Var]]:
        """``Batched``, offered where the base offers it: every entry of A B, its value from the
        base's own ``matmul`` of the values (one call), on the tape as ``dot`` puts it."""
        assert self._batched is not None  # __init__ withdraws this method otherwise
        a = [[self._lift(x) for x in row] for row in A]
        b = [[self._lift(y) for y in row] for row in B]
        values = self._batched.matmul([[x.v for x in row] for row in a], [[y.v for y in row] for row in b])
        columns = list(zip(*b))
        return [[Var(values[i][j], self, tuple((x, y.v) for x, y in zip(row, col)) +
                     tuple((y, x.v) for x, y in zip(row, col))) for j, col in enumerate(columns)]
                for i, row in enumerate(a)]

    def map_matrix(self, f: Callable[..., Any], *Ms: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """``Batched``: f entry by entry (each entry's operations on the tape)."""
        return [[f(*args) for args in zip(*rows)] for rows in zip(*Ms)]

    def map_columns(self, f: Callable[[list[Any]], list[Any]], X: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """``Batched``: f column by column."""
        cols = [f([row[t] for row in X]) for t in range(len(X[0]) if X else 0)]
        return [[c[i] for c in cols] for i in range(len(cols[0]))] if cols else []

    def softmax(self, z: Sequence[Any]) -> list[Any]:
        """``Batched``: softmax's lines, one number at a time."""
        from .functions import softmax_lines  # functions reads linalg, which reads numbers only

        return softmax_lines(list(z))

    def centres(self, e: Sequence[Any], m: Any, line: int) -> list[Var]:
        """``OnePassMoments``, offered where the base offers it: the base system's centres, each
        differentiated as m itself (they differ from m by rounding only).

        Line 2's centred terms also carry the rounding of a backward pass that expands them.
        Their adjoint is a product a·(e[i] − m) (line 2 squares them), and an uncentred
        backward forms it as a·e[i] − a·m: ATen's CPU layer norm returns dx = a·dy·γ + b·x + c
        with c ≈ −b·m (aten/src/ATen/native/cpu/layer_norm_kernel.cpp, PyTorch 2.x), whose
        rounding u·|b|·(|x| + |m|) grows with the condition number |m|/σ and is not
        orthogonal to the constant vector as the exact gradient is. A base system that models
        rounding offers ``UncentredBackward``: ``uncentred_slopes(e, m)``, the derivative of
        centre i with respect to e[i], zero in exact arithmetic and u·(|e[i]| + |m|)/|e[i] − m|
        at most in its lanes, so the adjoint reaching e[i] through line 2 errs as the expanded
        form does. Line 3's terms
        reach e[i] as a/σ, a product with no term to expand; their products with adjoints form
        σ's adjoint (ATen's ds = Σ dy·γ·x, summed uncentred too), whose error moves b and so
        adds along e − m, where the independent centres of the forward pass already spread.
        """
        assert self._moments is not None  # __init__ withdraws this method otherwise
        m = self._lift(m)
        one = self.base.num(1)
        values = [_value(x) for x in e]
        centres = self._moments.centres(values, m.v, line)
        backward = offered(self.base, UncentredBackward)
        if line != 2 or backward is None:
            return [Var(c, self, ((m, one),)) for c in centres]
        terms = [self._lift(x) for x in e]
        slopes = backward.uncentred_slopes(values, m.v)
        return [Var(c, self, ((m, one), (x, s))) for c, x, s in zip(centres, terms, slopes)]

    def by_sign(self, x: Any, nonnegative: Callable[[Any], Any], negative: Callable[[Any], Any]) -> Var:
        """``PerValueSign``, offered where the base offers it (SiLU's two forms, spec/functions.py).

        Where every value of x takes one form, that form on the tape, as a branch would take it.
        Where values take both (a block of value sets, each with its own signs), each form runs
        on x restricted to the values that take it (0 in the others, so that neither form
        overflows outside its domain) and the result takes each value from its own form; both
        restrictions and the choice are selections, whose derivative passes the adjoint on
        where the form was taken and 0 where it was not, exactly (``_Selected``): no rounding is
        added to what the value sets' own backward passes round."""
        assert self._sign is not None  # __init__ withdraws this method otherwise
        sign = self._sign
        x = self._lift(x)
        zero = self.base.num(0)
        taken = sign.by_sign(x.v, lambda _: True, lambda _: False)
        if taken is True:
            return self._lift(nonnegative(x))
        if taken is False:
            return self._lift(negative(x))
        up_in = Var(sign.by_sign(x.v, lambda v: v, lambda _: zero), self, ((x, _Selected(sign, x.v, True)),))
        down_in = Var(sign.by_sign(x.v, lambda _: zero, lambda v: v), self, ((x, _Selected(sign, x.v, False)),))
        up, down = self._lift(nonnegative(up_in)), self._lift(negative(down_in))
        value = sign.by_sign(x.v, lambda _: up.v, lambda _: down.v)
        return Var(value, self, ((up, _Selected(sign, x.v, True)), (down, _Selected(sign, x.v, False))))

    def _unary(self, x: Any, value: Any, slope: Any) -> Var:
        x = self._lift(x)
        return Var(value, self, ((x, slope),))

    def exp(self, x: Any) -> Var:
        e = self.base.exp(_value(x))
        return self._unary(x, e, e)

    def log(self, x: Any) -> Var:
        xv = _value(x)
        return self._unary(x, self.base.log(xv), 1 / xv)

    def sqrt(self, x: Any) -> Var:
        r = self.base.sqrt(_value(x))
        return self._unary(x, r, 1 / (2 * r) if r != 0 else self.base.inf)

    def tanh(self, x: Any) -> Var:
        t = self.base.tanh(_value(x))
        return self._unary(x, t, 1 - t * t)

    def erf(self, x: Any) -> Var:
        xv = _value(x)
        B = self.base
        slope = 2 / B.sqrt(B.pi) * B.exp(-(xv * xv))
        return self._unary(x, B.erf(xv), slope)

    def sin(self, x: Any) -> Var:
        xv = _value(x)
        return self._unary(x, self.base.sin(xv), self.base.cos(xv))

    def cos(self, x: Any) -> Var:
        xv = _value(x)
        return self._unary(x, self.base.cos(xv), -self.base.sin(xv))

    def pow(self, base: Any, exponent: Any) -> Var:
        b, y = self._lift(base), self._lift(exponent)
        B = self.base
        value = B.pow(b.v, y.v)
        db = y.v * B.pow(b.v, y.v - 1) if b.v != 0 else b.v * 0
        dy = value * B.log(b.v) if b.v > 0 else b.v * 0
        return Var(value, self, ((b, db), (y, dy)))

    def relu(self, x: Any) -> Var:
        """ReLU and its derivative [[x > 0]] (ReLU'(0) = 0, as in every framework), both taken by
        the base system, so a base that carries several values at once (the harness's Monte
        Carlo lanes) branches per value."""
        x = self._lift(x)
        B = self.base
        step = self._per_value.step(x.v) if self._per_value is not None else (B.num(1) if x.v > 0 else B.num(0))
        return Var(B.relu(x.v), self, ((x, step),))


class _Selected:
    """The local derivative of a value chosen per value by sign (``GradNumbers.by_sign``): the
    adjoint itself where the form on the ``up`` side (x ≥ 0) or the other was taken, exactly 0
    where it was not; the base's own ``by_sign`` chooses, so the choice is the forward pass's."""

    __slots__ = ("sign", "x", "up")

    def __init__(self, sign: PerValueSign, x: Any, up: bool) -> None:
        self.sign, self.x, self.up = sign, x, up

    def passing(self, adjoint: Any, zero: Any) -> Any:
        if self.up:
            return self.sign.by_sign(self.x, lambda _: adjoint, lambda _: zero)
        return self.sign.by_sign(self.x, lambda _: zero, lambda _: adjoint)


if TYPE_CHECKING:  # mypy checks the class against the protocol and the optional interface it offers
    _system: type[NumberSystem] = GradNumbers
    _moments: type[OnePassMoments] = GradNumbers
    _signs: type[PerValueSign] = GradNumbers


def _key(parent: Var) -> int:
    """Where a node's adjoint is kept: its tape index, or its id for a leaf (never recorded)."""
    return id(parent) if not parent.parents and parent.index < 0 else parent.index


def _adjoints(ns: GradNumbers, output: Var) -> dict[int, Any]:
    """Backward pass: adjoint of every tape entry that the output depends on. A base system that
    offers ``BatchedBackward`` computes the same sums of products in fewer calls."""
    B = ns.base
    fast = offered(B, BatchedBackward)
    if fast is not None:
        return fast.adjoints([[(_key(p), local) for p, local in node.parents]
                              for node in ns.tape[: output.index + 1]], output.index)
    adj: dict[int, Any] = {output.index: B.num(1)}
    zero = B.num(0)
    for node in reversed(ns.tape[: output.index + 1]):
        a = adj.get(node.index)
        if a is None:
            continue
        for parent, local in node.parents:
            key = _key(parent)
            term = local.passing(a, zero) if type(local) is _Selected else a * local
            prev = adj.get(key)
            adj[key] = term if prev is None else prev + term
    return adj


def gradient(f: Callable[[dict[str, Any]], Any], params: dict[str, Any], *,
             base: NumberSystem = FLOAT) -> tuple[Any, dict[str, Any]]:
    """(f(params), ∂f/∂params) for a scalar-valued spec computation ``f``.

    ``params`` maps names to nested lists of numbers; ``f`` receives the same
    structure with differentiable leaves and must return a scalar. The
    gradient has the structure of ``params`` (values in ``base``); a
    parameter the result does not depend on gets exact zeros.
    """
    ns = GradNumbers(base)
    leaves: list[Var] = []

    def lift(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return [lift(i) for i in x]
        v = ns.leaf(x)
        leaves.append(v)
        return v

    lifted = {k: lift(v) for k, v in params.items()}
    with numbers_mod.using(ns):
        out = f(lifted)
    out = ns._lift(out)
    if out.index < 0:  # the result is a constant: every gradient is zero
        adj: dict[Any, Any] = {}
    else:
        adj = _adjoints(ns, out)
    zero = base.num(0)

    def collect(x: Any) -> Any:
        if isinstance(x, list):
            return [collect(i) for i in x]
        return adj.get(id(x), zero)

    return out.v, {k: collect(v) for k, v in lifted.items()}
