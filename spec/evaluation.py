"""Checking a call against its registry entry, and evaluating it.

``evaluate`` is the spec's front door: it infers the hyperparameters from
the shapes (unifying every symbolic dimension), refuses anything that does
not fit with a ``SpecError`` naming the argument, converts the numbers into
the requested number system, runs the spec function and checks its output.
``intermediates`` does the same and also returns the values the spec
computed on the way (``spec/intermediates.py``).
"""

from __future__ import annotations

import math
import re
from numbers import Real
from typing import Any, Iterator, Mapping, Optional

from . import numbers as numbers_mod
from .entry import Kind
from .errors import SpecError, in_algorithm
from .intermediates import recorded
from .numbers import FLOAT, ManyNumbers, NumberSystem, offered
from .params import Shape, resolve_shape
from .registry import Entry, entry
from .variants import PAPER, VariantSet

__all__ = ["INTERMEDIATE_FAMILIES", "evaluate", "evaluate_trace", "intermediates", "resolve_hyper", "to_floats"]

_STRUCTURAL = {
    "L": re.compile(r"^layers\.(\d+)\."),
    "L_enc": re.compile(r"^enc_layers\.(\d+)\."),
    "L_dec": re.compile(r"^dec_layers\.(\d+)\."),
    "H": re.compile(r"(?:^|\.)heads\.(\d+)\."),
}


def _nested_shape(value: Any, depth: int, argument: str) -> tuple[int, ...]:
    """Shape of a rectangular nested list of the given depth."""
    if depth == 0:
        if isinstance(value, (list, tuple)):
            raise SpecError(argument, "a scalar", f"a list of length {len(value)}")
        return ()
    if not isinstance(value, (list, tuple)):
        raise SpecError(argument, f"a {depth}-dimensional nested list", f"{type(value).__name__} {value!r:.40}")
    if depth == 1:
        for item in value:
            if isinstance(item, (list, tuple)):
                raise SpecError(argument, "a 1-dimensional list", "a nested list")
        return (len(value),)
    inner = [_nested_shape(item, depth - 1, argument) for item in value]
    if len(set(inner)) > 1:
        raise SpecError(argument, "a rectangular nested list", f"rows of shapes {sorted(set(inner))}")
    return (len(value),) + (inner[0] if inner else (0,) * (depth - 1))


def _fmt(shape: Shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class _Unifier:
    """Binds hyperparameter names to sizes, remembering where each came from."""

    def __init__(self, given: Mapping[str, int]) -> None:
        self.bound: dict[str, int] = {}
        self.origin: dict[str, str] = {}
        self.given = dict(given)
        self.deferred: list[tuple[str, Shape, tuple[int, ...]]] = []

    def _expected(self, shape: Shape) -> str:
        parts = []
        for d in shape:
            if isinstance(d, int):
                parts.append(str(d))
            elif d in self.bound:
                parts.append(str(self.bound[d]))
            elif "*" in d or "-" in d:
                try:
                    parts.append(str(resolve_shape((d,), self.bound)[0]))
                except KeyError:
                    parts.append(d)
            else:
                parts.append(d)
        return f"shape {_fmt(shape)} = {_fmt(tuple(parts))}"

    def unify(self, argument: str, shape: Shape, actual: tuple[int, ...]) -> None:
        if len(shape) != len(actual):
            raise SpecError(argument, f"{len(shape)} dimensions, {self._expected(shape)}",
                            f"{len(actual)} dimensions, shape {_fmt(actual)}")
        for sym, size in zip(shape, actual):
            if isinstance(sym, int):
                if sym != size:
                    raise SpecError(argument, self._expected(shape), f"shape {_fmt(actual)}")
            elif "*" in sym or "-" in sym:
                self.deferred.append((argument, shape, actual))
            elif sym in self.bound and self.bound[sym] != size:
                raise SpecError(argument, f"{self._expected(shape)} ({sym} = {self.bound[sym]} "
                                f"from {self.origin[sym]})", f"shape {_fmt(actual)}")
            else:
                self.bound[sym] = size
                self.origin[sym] = repr(argument)

    def finish(self, given: Mapping[str, int]) -> None:
        known = {**given, **self.bound}
        for argument, shape, actual in self.deferred:
            for sym, size in zip(shape, actual):
                if isinstance(sym, str) and ("*" in sym or "-" in sym):
                    try:
                        want = resolve_shape((sym,), known)[0]
                    except KeyError:
                        continue
                    if want != size:
                        raise SpecError(argument, self._expected(shape), f"shape {_fmt(actual)}")


def resolve_hyper(e: Entry, inputs: Mapping[str, Any], params: Mapping[str, Any],
                  hyper: Optional[Mapping[str, int]], variant: VariantSet) -> dict[str, int]:
    """All hyperparameters of ``e``, from the given ones and the shapes; checks every shape."""
    given = dict(hyper or {})
    unknown = sorted(set(given) - set(e.hyper))
    if unknown:
        raise SpecError("hyper", f"hyperparameters among {list(e.hyper)}", f"unknown {unknown}")
    for k, v in given.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < e.minimum.get(k, 1):
            raise SpecError(k, f"an integer ≥ {e.minimum.get(k, 1)}", repr(v))
    structural = dict(given)
    for s in e.structural:
        if s not in structural:
            found = {int(m.group(1)) for k in params if (m := _STRUCTURAL[s].search(k))}
            structural[s] = max(found) + 1 if found else 0
            if structural[s] < 1:
                raise SpecError(s, f"parameters for at least one {'head' if s == 'H' else 'layer'}",
                                "none found")
    uni = _Unifier(given)
    for k in e.structural:
        uni.bound[k] = structural[k]
        uni.origin[k] = "the parameter names" if k not in given else "hyper"

    names = {i.name for i in e.inputs}
    for extra in sorted(set(inputs) - names):
        raise SpecError(extra, f"inputs among {sorted(names)}", "an unknown input")
    for spec in e.inputs:
        if spec.name not in inputs:
            raise SpecError(spec.name, f"an input of shape {_fmt(spec.shape)}", "missing")
        uni.unify(spec.name, spec.shape, _nested_shape(inputs[spec.name], len(spec.shape), spec.name))

    schema = e.param_schema(structural, variant)
    for extra in sorted(set(params) - set(schema)):
        raise SpecError(extra, f"no such parameter under variant {variant.describe()} "
                        f"(expected names: {', '.join(list(schema)[:6])}{', …' if len(schema) > 6 else ''})",
                        "a value")
    for name, shape in schema.items():
        if name not in params:
            raise SpecError(name, f"a parameter of shape {_fmt(shape)} (variant {variant.describe()})", "missing")
        uni.unify(name, shape, _nested_shape(params[name], len(shape), name))
    uni.finish(given)

    hp: dict[str, int] = {}
    for name in e.hyper:
        if name in uni.bound and name in given and uni.bound[name] != given[name]:
            raise SpecError(name, f"{name} = {given[name]} (as given in hyper)",
                            f"{name} = {uni.bound[name]} from {uni.origin[name]}")
        if name in uni.bound:
            hp[name] = uni.bound[name]
        elif name in given:
            hp[name] = given[name]
        else:
            raise SpecError(name, "a value in hyper (no input or parameter shape determines it)", "missing")
        if hp[name] < e.minimum.get(name, 1):
            raise SpecError(name, f"≥ {e.minimum.get(name, 1)}", f"{name} = {hp[name]}")
    if e.check is not None:
        e.check(hp, variant)
    if variant.mlp == "one_layer" and "d_mlp" in hp and "mlp" in e.switches and hp["d_mlp"] != hp["d_e"]:
        raise SpecError("d_mlp", f"d_mlp = d_e = {hp['d_e']} (mlp='one_layer' adds act(W_mlp1 X) to X)",
                        f"d_mlp = {hp['d_mlp']}")
    return hp


def _check_values(e: Entry, inputs: Mapping[str, Any], params: Mapping[str, Any], hp: Mapping[str, int]) -> None:
    for spec in e.inputs:
        _check_kind(spec.name, inputs[spec.name], spec.kind, hp, spec.bound)
    for name, value in params.items():
        _check_kind(name, value, Kind.REAL, hp)


def _leaves(value: Any) -> list[Any]:
    """The numbers of a nested list, in order (a list: the checks below walk it more than once)."""
    if not isinstance(value, (list, tuple)):
        return [value]
    out: list[Any] = []
    for item in value:
        if isinstance(item, (list, tuple)):
            out.extend(_leaves(item))
        else:
            out.append(item)
    return out


#: real kinds: (lowest, highest, closed at the top, infinity allowed, what)
_RANGES = {
    "real": (-math.inf, math.inf, False, False, "finite real numbers"),
    "rate": (-math.inf, math.inf, False, False, "a finite real number"),
    "variate": (0.0, 1.0, False, False, "uniform variates in [0, 1)"),
    "probability": (0.0, 1.0, True, False, "a probability in [0, 1]"),
    "distribution": (0.0, math.inf, False, False, "non-negative finite reals"),
    "temperature": (0.0, math.inf, True, True, "a temperature τ ≥ 0 (inf allowed)"),
}


def _check_kind(name: str, value: Any, kind: str, hp: Mapping[str, int], bound: str = "") -> None:
    if kind in _RANGES:
        low, high, closed, inf_ok, what = _RANGES[kind]
        values = _leaves(value)
        if kind == "real" and all(type(x) is float for x in values) and all(map(math.isfinite, values)):
            return  # the common case, decided without the per-number checks below
        for x in values:
            if isinstance(x, bool) or not isinstance(x, Real):
                raise SpecError(name, what, f"{type(x).__name__} {x!r:.30}")
            try:
                x = float(x)
            except OverflowError:  # an int beyond binary64
                raise SpecError(name, f"{what} representable in binary64", f"{str(x)[:30]}…") from None
            if math.isnan(x) or (math.isinf(x) and not (inf_ok and x > 0)):
                raise SpecError(name, what, repr(x))
            if not (low <= x and (x <= high if closed else x < high or (inf_ok and x == math.inf))):
                raise SpecError(name, what, repr(x))
        if kind == Kind.DISTRIBUTION and not math.fsum(values) > 0:
            raise SpecError(name, "a vector with a positive sum", "all entries 0")
    elif kind in (Kind.TOKEN, Kind.POSITION):
        limit = hp["N_V"] if kind == Kind.TOKEN else hp["ell_max"]
        what = "token IDs in [0, N_V)" if kind == Kind.TOKEN else "positions in [0, ell_max)"
        for x in _leaves(value):
            if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < limit:
                raise SpecError(name, f"{what} = [0, {limit})", repr(x))
    elif kind in (Kind.MASK, Kind.FLAG, Kind.PADDING):
        meaning = " (1 = may attend)" if kind == Kind.MASK else " (0 = padding)" if kind == Kind.PADDING else ""
        for x in _leaves(value):
            if x not in (0, 1) or not isinstance(x, (int, bool)):
                raise SpecError(name, "entries 0 or 1" + meaning, repr(x))
    elif kind == Kind.LENGTH:
        top = hp[bound]
        for x in _leaves(value):
            if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= top:
                raise SpecError(name, f"lengths in [1, {bound} = {top}]", repr(x))
    else:  # pragma: no cover - a registry mistake
        raise AssertionError(f"unknown input kind {kind!r}")


def _convert(value: Any, N: NumberSystem) -> Any:
    """``value`` (a number or nested lists of numbers) in ``N``: ``N.num`` of each number, in one
    call where ``N`` offers ``ManyNumbers``."""
    many = offered(N, ManyNumbers)
    if many is not None and isinstance(value, (list, tuple)):
        return _rebuilt(value, iter(many.nums(_leaves(value))))
    if isinstance(value, (list, tuple)):
        return [_convert(v, N) for v in value]
    return N.num(value)


def _rebuilt(value: Any, numbers: Iterator[Any]) -> Any:
    """The nested lists of ``value`` with its numbers taken in order from ``numbers``."""
    if isinstance(value, (list, tuple)):
        return [_rebuilt(v, numbers) for v in value]
    return next(numbers)


def evaluate(
    name: str,
    inputs: Optional[Mapping[str, Any]] = None,
    params: Optional[Mapping[str, Any]] = None,
    *,
    hyper: Optional[Mapping[str, int]] = None,
    variant: VariantSet = PAPER,
    numbers: Optional[NumberSystem] = None,
) -> dict[str, Any]:
    """Evaluate registry entry ``name`` on canonical inputs and flat parameters.

    Returns ``{output name: nested list}`` in the number system ``numbers``
    (default ``FLOAT``). Raises ``SpecError`` for anything that does not fit.
    """
    e = entry(name)
    inputs = dict(inputs or {})
    params = dict(params or {})
    if not isinstance(variant, VariantSet):
        raise SpecError("variant", "a VariantSet", type(variant).__name__, algorithm=name)
    N = numbers or FLOAT
    with in_algorithm(name):
        hp = resolve_hyper(e, inputs, params, hyper, variant)
        _check_values(e, inputs, params, hp)
        with numbers_mod.using(N):
            out = e.reference(_converted_inputs(e, inputs, N), {k: _convert(v, N) for k, v in params.items()},
                              hp, variant)
        for spec in e.output_specs(hp, variant):
            if spec.kind != Kind.REAL:
                continue
            for x in _leaves(out[spec.name]):
                if N.isfinite(x):
                    continue
                if N.isnan(x) and variant.empty_query == "nan" and "empty_query" in e.switches:
                    continue
                raise SpecError(spec.name, "a finite output (inputs too large for the arithmetic?)",
                                f"{N.to_float(x)!r}")
    return out


#: the registry families whose entries return intermediates: the forward computations (a loss,
#: gradient or training loop runs its model again and again, a sampler once per token)
INTERMEDIATE_FAMILIES = ("component", "layer", "architecture")


def intermediates(
    name: str,
    inputs: Optional[Mapping[str, Any]] = None,
    params: Optional[Mapping[str, Any]] = None,
    *,
    hyper: Optional[Mapping[str, int]] = None,
    variant: VariantSet = PAPER,
    numbers: Optional[NumberSystem] = None,
) -> dict[str, Any]:
    """Evaluate registry entry ``name`` as ``evaluate`` does, returning its named intermediate
    values followed by its outputs: ``{name: nested list}`` in the order computed, in the number
    system ``numbers`` (default ``FLOAT``).

    The names are hierarchical (``layers.0.attn.heads.1.A``, ``final_norm.sigma``, ...): those of
    the intermediates contract, docs/plugins.md "Named intermediates", where each is defined;
    ``spec/intermediates.py`` records them. Which names appear depends on the entry, its
    hyperparameters and the variant set (``mlp.lin`` only for a gated MLP, ``norm1.rms`` for
    RMSnorm, ...). Only component, layer and architecture entries record intermediates; any
    other raises ``SpecError``, as does anything ``evaluate`` refuses.
    """
    e = entry(name)
    if e.family not in INTERMEDIATE_FAMILIES:
        raise SpecError("algorithm", f"an entry of the families {', '.join(INTERMEDIATE_FAMILIES)} (intermediates "
                        "are recorded for forward computations)", f"{name}, a {e.family} entry", algorithm=name)
    with recorded() as values:
        out = evaluate(name, inputs, params, hyper=hyper, variant=variant, numbers=numbers)
    result = dict(values)
    for k, v in out.items():
        if k in result:  # pragma: no cover - a naming mistake in the spec
            raise RuntimeError(f"{name}: output {k!r} has the name of an intermediate")
        result[k] = v
    return result


def _converted_inputs(e: Entry, inputs: Mapping[str, Any], N: NumberSystem) -> dict[str, Any]:
    return {spec.name: (_convert(inputs[spec.name], N) if spec.is_real else inputs[spec.name]) for spec in e.inputs}


def evaluate_trace(
    name: str,
    inputs: Mapping[str, Any],
    params: Mapping[str, Any],
    produced: Mapping[str, Any],
    *,
    hyper: Optional[Mapping[str, int]] = None,
    variant: VariantSet = PAPER,
    numbers: Optional[NumberSystem] = None,
) -> list[dict[str, Any]]:
    """The spec's sampling distribution at every step of a sampled output.

    ``produced`` holds an implementation's outputs (plain Python values); the
    trace follows the implementation's own tokens as the prefix, so each of
    them is judged against the spec's distribution given what came before.
    """
    e = entry(name)
    if e.trace is None:
        raise SpecError("algorithm", "an entry with sampled outputs", name, algorithm=name)
    N = numbers or FLOAT
    with in_algorithm(name):
        hp = resolve_hyper(e, inputs, params, hyper, variant)
        _check_values(e, inputs, params, hp)
        with numbers_mod.using(N):
            return e.trace(_converted_inputs(e, inputs, N), {k: _convert(v, N) for k, v in params.items()},
                           hp, variant, produced)


def to_floats(value: Any, N: NumberSystem = FLOAT) -> Any:
    """Nested numbers of any system -> nested Python floats (round to nearest)."""
    if isinstance(value, (list, tuple)):
        return [to_floats(v, N) for v in value]
    if isinstance(value, (bool, int)) and not isinstance(value, float):
        return value
    return N.to_float(value)
