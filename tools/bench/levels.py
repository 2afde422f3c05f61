"""How few array operations a structure's computation needs: the measurement behind issue 36's
trace-once evaluator (docs/benchmarks.md, "The computation's levels").

A Monte Carlo evaluation of the spec (``conformance/core/rounding.py``) walks the spec's Python once
per block of value sets, and its cost is that walk: one NumPy call or more per scalar operation or
per whole-matrix hook, and a lane object per matrix entry. Replaying a structure's recorded
operations on stacked arrays instead needs, at the least, one array operation per *(level,
operation)* group: the level of a result is one more than the highest level of its arguments
(the inputs, parameters and constants are level 0), and every result of one level and one kind (a
product, a sum of k terms, an exp, ...) can be computed in one call, since none of them reads
another. ``level_groups`` counts the scalar operations, the levels and the groups of an entry's
binary64 evaluation, traced by ``Tracing``: the spec in ``FLOAT`` (the same values, bit for bit:
tests/tools/test_bench_levels.py), each number also carrying its level.

Only a count: nothing here evaluates Monte Carlo lanes, and the harness does not use it.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable, Mapping, Optional, Sequence

from ftspec.spec.numbers import FLOAT, Numbers

__all__ = ["LEVEL_ENTRIES", "Traced", "Tracing", "level_groups", "traced"]


class Traced:
    """A binary64 number ``v`` and its level ``d`` in a ``Tracing`` evaluation. Every arithmetic
    operation is one operation of its kind at level 1 + the highest level of its arguments;
    negation and ``abs`` are exact (no operation, the same level); comparisons read ``v``."""

    __slots__ = ("v", "d", "t")

    def __init__(self, v: float, d: int, t: "Tracing") -> None:
        self.v, self.d, self.t = v, d, t

    def _op(self, o: Any, kind: str, f: Callable[[float, float], float]) -> "Traced":
        other = o.v if type(o) is Traced else float(o)
        return Traced(f(self.v, other), self.t.count(kind, self, o), self.t)

    def __add__(self, o: Any) -> "Traced":
        return self._op(o, "+", lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Traced":
        return self._op(o, "-", lambda a, b: a - b)

    def __rsub__(self, o: Any) -> "Traced":
        return self._op(o, "-", lambda a, b: b - a)

    def __mul__(self, o: Any) -> "Traced":
        return self._op(o, "*", lambda a, b: a * b)

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Traced":
        return self._op(o, "/", lambda a, b: a / b)

    def __rtruediv__(self, o: Any) -> "Traced":
        return self._op(o, "/", lambda a, b: b / a)

    def __neg__(self) -> "Traced":
        return Traced(-self.v, self.d, self.t)

    def __pos__(self) -> "Traced":
        return self

    def __abs__(self) -> "Traced":
        return Traced(abs(self.v), self.d, self.t)

    def __float__(self) -> float:
        return self.v

    def __lt__(self, o: Any) -> bool:
        return self.v < float(o)

    def __le__(self, o: Any) -> bool:
        return self.v <= float(o)

    def __gt__(self, o: Any) -> bool:
        return self.v > float(o)

    def __ge__(self, o: Any) -> bool:
        return self.v >= float(o)

    def __eq__(self, o: object) -> bool:
        return self.v == float(o)  # type: ignore[arg-type]

    def __ne__(self, o: object) -> bool:
        return self.v != float(o)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]


def _library(name: str) -> Callable[..., Traced]:
    """``FLOAT``'s library function ``name`` on the values, counted as one operation."""

    def f(self: "Tracing", *args: Any) -> Traced:
        value = getattr(FLOAT, name)(*(float(a) for a in args))
        return Traced(value, self.count(name, *args), self)

    return f


class Tracing(Numbers):
    """``FLOAT`` (correctly rounded sums, the same library functions and refusals) whose numbers
    carry their level; ``groups`` counts the operations per (level, kind). A sum or dot product
    of k terms is one operation of kind ``sum k`` / ``dot k`` (a replay draws its rounding whole,
    as blocks do)."""

    name = "tracing"
    inf, nan, pi, tiny = FLOAT.inf, FLOAT.nan, FLOAT.pi, FLOAT.tiny

    def __init__(self) -> None:
        self.groups: Counter[tuple[int, str]] = Counter()

    def count(self, kind: str, *args: Any) -> int:
        level = 1 + max((a.d for a in args if type(a) is Traced), default=0)
        self.groups[(level, kind)] += 1
        return level

    def num(self, x: Any) -> Traced:
        return x if type(x) is Traced else Traced(float(x), 0, self)

    def const(self, text: str) -> Traced:
        return Traced(float(text), 0, self)

    def to_float(self, x: Any) -> float:
        return float(x)

    def fsum(self, xs: Any) -> Traced:
        items = list(xs)
        return Traced(FLOAT.fsum([float(x) for x in items]), self.count(f"sum {len(items)}", *items), self)

    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Traced:
        value = FLOAT.dot([float(x) for x in xs], [float(y) for y in ys])
        return Traced(value, self.count(f"dot {len(xs)}", *xs, *ys), self)

    exp = _library("exp")
    log = _library("log")
    sqrt = _library("sqrt")
    tanh = _library("tanh")
    erf = _library("erf")
    sin = _library("sin")
    cos = _library("cos")
    pow = _library("pow")

    def relu(self, x: Any) -> Traced:
        return Traced(FLOAT.relu(float(x)), self.count("relu", x), self)

    def isfinite(self, x: Any) -> bool:
        return math.isfinite(float(x))

    def isnan(self, x: Any) -> bool:
        return math.isnan(float(x))


#: the entries ``level_groups`` measures by default, at the largest sizes the default strategies draw
LEVEL_ENTRIES = ("layer_norm", "mh_attention", "gpt2_layer", "d_transformer", "d_gradient")


def traced(name: str, hyper: Mapping[str, int], seed: int = 0) -> tuple[dict[str, Any], Tracing]:
    """``name``'s outputs (plain floats) on a well-scaled value set of ``hyper`` (the paper's
    variant set, drawn as the harness draws values), evaluated by a fresh ``Tracing``."""
    from ftspec.conformance.core.values.building import build
    from ftspec.spec.evaluation import evaluate, to_floats
    from ftspec.spec.registry import entry
    from ftspec.spec.variants import PAPER

    inputs, params = build(entry(name), dict(hyper), PAPER, seed=seed, style="well-scaled", dtype="float64")
    numbers = Tracing()
    got = evaluate(name, {k: v.tolist() for k, v in inputs.items()}, {k: v.tolist() for k, v in params.items()},
                   hyper=dict(hyper), variant=PAPER, numbers=numbers)
    return {k: to_floats(v) for k, v in got.items()}, numbers


def level_groups(algorithms: Sequence[str] = LEVEL_ENTRIES, sizes: Optional[Mapping[str, Mapping[str, int]]] = None
                 ) -> list[dict[str, Any]]:
    """Per entry: its scalar operations, its levels and its (level, operation) groups (the module
    docstring), at ``sizes[name]`` (default: the largest sizes the default strategies draw, as the
    plain checks take them)."""
    from .speed import GROWTH_ENTRIES, PLAIN_SIZES

    table = {**GROWTH_ENTRIES, **PLAIN_SIZES, **(sizes or {})}
    rows = []
    for name in algorithms:
        _, numbers = traced(name, table[name])
        groups = numbers.groups
        rows.append({"algorithm": name, "hyper": dict(table[name]), "operations": sum(groups.values()),
                     "levels": max((level for level, _ in groups), default=0), "groups": len(groups)})
    return rows
