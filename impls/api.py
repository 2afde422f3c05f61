"""The plugin contract: what an implementation declares and how it is called.

A plugin is an ``Implementation`` (or a zero-argument callable returning one)
registered under the entry-point group ``ftspec.impls``::

    [project.entry-points."ftspec.impls"]
    mine = "my_package.ftspec_plugin:implementation"

The harness owns every conversion: it hands the plugin NumPy arrays whose
values are exactly representable in the requested dtype, and the plugin's
``from_numpy`` moves them to its own arrays on a device; results come back
through ``to_numpy``. Algorithm functions therefore stay pure framework code.

Calling convention, identical for every algorithm::

    out = impl.algorithms[name](inputs, params, ctx)

``inputs``  {input name: native array} in the spec's canonical layout (see the
            registry entry: tokens are integer arrays, Mask is boolean with
            True = may attend, indexed [t_z, t_x]); with ``ctx.batched`` every
            input has one extra leading batch axis.
``params``  {flat parameter name: native array}, e.g.
            ``layers.0.attn.heads.1.W_q`` (W is out × in); never batched.
``ctx``     ``Context``: algorithm, dtype, device, hyperparameters, variant.
``out``     one native array (entries with one output) or {output name: array}.

This module imports no array library; only ``spec.variants`` for the
definition of a variant set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Final, Literal, Mapping, Optional, Sequence, Union

from ftspec.spec.variants import VariantSet

__all__ = [
    "ALL_VARIANTS",
    "Limits",
    "AlgorithmFn",
    "Context",
    "FLOAT_DTYPES",
    "Implementation",
    "select_devices",
]

#: Real dtypes a plugin may declare, highest precision first.
FLOAT_DTYPES = ("float64", "float32", "bfloat16", "float16")
#: Dtype names ``from_numpy`` may receive: the above plus tokens and masks.
ALL_DTYPES = FLOAT_DTYPES + ("int64", "bool")


def select_devices(found: Sequence[str], wanted: Optional[Sequence[str]]) -> list[str]:
    """The devices of ``found`` that ``wanted`` names (all of them if ``wanted`` is empty).

    A bare platform name selects every device of that platform, so ``cpu``
    picks a plugin's ``cpu`` as well as ``cpu:0`` (JAX names devices
    ``platform:id``)."""
    if not wanted:
        return list(found)
    return [d for d in found if d in wanted or d.partition(":")[0] in wanted]

ALL_VARIANTS: Final = "all"


@dataclass(frozen=True)
class Context:
    """Everything about a call that is not an array."""

    algorithm: str
    dtype: str  # the real dtype of this call (one of FLOAT_DTYPES)
    device: str  # one of Implementation.devices()
    hyper: Mapping[str, int]  # every hyperparameter of the registry entry
    variant: VariantSet
    batched: bool = False  # inputs carry a leading batch axis


AlgorithmFn = Callable[[Mapping[str, Any], Mapping[str, Any], Context], Any]


def _side(text: str) -> tuple[str, ...]:
    """The names of one side of an equality: "d_e" -> ("d_e",), "H*d_attn" -> ("H", "d_attn")."""
    names = tuple(part.strip() for part in str(text).split("*"))
    if not names or not all(n.isidentifier() for n in names):
        raise ValueError(f"{text!r} is not a hyperparameter name or a product A*B of names")
    return names


def _product(names: tuple[str, ...], hyper: Mapping[str, int]) -> int:
    value = 1
    for n in names:
        value *= int(hyper[n])
    return value


@dataclass(frozen=True)
class Limits:
    """Hyperparameter relations and bounds an implementation supports.

    Real libraries tie sizes the paper keeps apart (a multi-head layer has
    d_attn = d_mid = d_e / H); declaring that here makes the harness draw only
    such shapes, replay only such fixtures and say so in the certificate,
    instead of failing the library's refusal as an exception.

    equal           pairs of sides, each a hyperparameter name or a product
                    "A*B" of names: ("d_attn", "d_mid"), ("d_e", "H*d_attn").
    maximum         {name: largest value}, e.g. {"ell_max": 64, "N_V": 1000}.
    minimum         {name: smallest value}.
    batching        False: never called with ``ctx.batched``.
    cross_lengths   False: masks and cross-attention only with ell_z == ell_x.

    A relation or bound naming a hyperparameter an entry does not have does
    not apply to that entry.
    """

    equal: tuple[tuple[str, str], ...] = ()
    maximum: Mapping[str, int] = field(default_factory=dict)
    minimum: Mapping[str, int] = field(default_factory=dict)
    batching: bool = True
    cross_lengths: bool = True

    @property
    def unconstrained(self) -> bool:
        return not (self.equal or self.maximum or self.minimum) and self.batching and self.cross_lengths

    def key(self) -> tuple:
        """A hashable identity (searches group members whose limits are equal)."""
        return (tuple(tuple(p) for p in self.equal), tuple(sorted(self.maximum.items())),
                tuple(sorted(self.minimum.items())), self.batching, self.cross_lengths)

    def names(self) -> set[str]:
        """Every hyperparameter name the limits mention."""
        out = set(self.maximum) | set(self.minimum)
        for pair in self.equal:
            for side in pair:
                out.update(_side(side))
        return out

    def relations(self, hyper_names: Sequence[str]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """The equalities that apply to an entry with these hyperparameters, as name tuples;
        cross_lengths off adds ell_z = ell_x."""
        have = set(hyper_names)
        out = []
        pairs = list(self.equal)
        if not self.cross_lengths:
            pairs.append(("ell_z", "ell_x"))
        for a, b in pairs:
            left, right = _side(a), _side(b)
            if set(left) <= have and set(right) <= have:
                out.append((left, right))
        return out

    def admits(self, hyper: Mapping[str, int]) -> bool:
        """Whether a case with these hyperparameters lies within the limits."""
        for n, v in self.maximum.items():
            if n in hyper and int(hyper[n]) > int(v):
                return False
        for n, v in self.minimum.items():
            if n in hyper and int(hyper[n]) < int(v):
                return False
        return all(_product(a, hyper) == _product(b, hyper) for a, b in self.relations(list(hyper)))

    def settle(self, hyper: Mapping[str, int]) -> dict[str, int]:
        """``hyper`` raised, never lowered, until every equality that applies holds.

        A side that is one name takes the other side's value when it is smaller;
        a smaller product grows its last factor. Values only grow, so the least
        solution above ``hyper`` is found when one exists; the caller checks the
        maxima (``admits``) afterwards."""
        out = {n: int(v) for n, v in hyper.items()}
        relations = self.relations(list(out))
        for _ in range(64 + 4 * len(relations)):
            unsettled = False
            for a, b in relations:
                va, vb = _product(a, out), _product(b, out)
                if va == vb:
                    continue
                unsettled = True
                small, big, target = (a, b, vb) if va < vb else (b, a, va)
                if len(small) == 1:
                    out[small[0]] = target
                else:
                    out[small[-1]] += 1
            if not unsettled or any(v > 1 << 20 for v in out.values()):
                break
        return out

    def problems(self, hyper_names: Sequence[str], minimum: Mapping[str, int]) -> list[str]:
        """Why nothing can be drawn within the limits for an entry with these hyperparameters and
        minima (empty when something can): the least sizes that satisfy the equalities, if any,
        must respect the maxima."""
        low = {n: max(int(minimum.get(n, 1)), int(self.minimum.get(n, 1))) for n in hyper_names}
        settled = self.settle(low)
        for a, b in self.relations(list(hyper_names)):
            if _product(a, settled) != _product(b, settled):
                return [f"the equalities cannot all hold ({'*'.join(a)} = {'*'.join(b)} is left unmet)"]
        over = [f"{n} = {settled[n]} > maximum {self.maximum[n]}" for n in self.maximum
                if n in settled and settled[n] > int(self.maximum[n])]
        if over:
            return ["the smallest sizes the entry and the limits allow exceed the maxima: " + ", ".join(over)]
        return []

    def describe(self) -> str:
        """One line, e.g. "d_attn = d_mid, ell_max <= 64, no batching"."""
        parts = [f"{a} = {b}" for a, b in self.equal]
        parts += [f"{n} <= {v}" for n, v in sorted(self.maximum.items())]
        parts += [f"{n} >= {v}" for n, v in sorted(self.minimum.items())]
        if not self.batching:
            parts.append("no batching")
        if not self.cross_lengths:
            parts.append("ell_z = ell_x")
        return ", ".join(parts) or "none"

    def to_dict(self) -> dict[str, Any]:
        return {"equal": [list(p) for p in self.equal], "maximum": dict(sorted(self.maximum.items())),
                "minimum": dict(sorted(self.minimum.items())), "batching": bool(self.batching),
                "cross_lengths": bool(self.cross_lengths)}


NO_LIMITS: Final = Limits()


@dataclass(frozen=True)
class Implementation:
    """A plugin's declaration.

    name, version   identify it in reports and certificates.
    algorithms      {registry name: function}; a subset is allowed (coverage
                    is reported, missing ones are "not implemented").
    dtypes          real dtypes it supports, from FLOAT_DTYPES.
    devices         called at run time; returns device names, e.g. ["cpu", "cuda:0"].
    from_numpy      (array, dtype, device) -> native array. ``array`` is a
                    float64, int64 or bool NumPy array; for a real dtype its
                    values are exactly representable in that dtype.
    to_numpy        native array -> NumPy array (float16/32/64, int or bool),
                    value for value (upcast bfloat16 to float32 first).
    variants        "all", or the variant sets it implements.
    precision       "highest" (float32 matrix products in full float32) or a
                    named reduced tier such as "tf32"; tolerances follow it.
    description     one line for ``ftspec list``.
    limits          ``Limits`` for every algorithm, or {algorithm: Limits}
                    (algorithms not named there have none).
    intermediates   optional: {model entry: function} with the calling
                    convention above, returning {name: native array}, the
                    model's named intermediate values on that call
                    (``embedding``, ``layers.{l}``, ``final_norm``, ``head``,
                    ``logits``, ...; docs/plugins.md "Named intermediates").
                    When a model fails, the harness reports the first of them
                    that departs from the spec (conformance/forensics/divergence.py).
    """

    name: str
    version: str
    algorithms: Mapping[str, AlgorithmFn]
    dtypes: Sequence[str]
    devices: Callable[[], Sequence[str]]
    from_numpy: Callable[[Any, str, str], Any]
    to_numpy: Callable[[Any], Any]
    variants: Union[Literal["all"], Sequence[VariantSet]] = ALL_VARIANTS
    precision: str = "highest"
    description: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    limits: Union[Limits, Mapping[str, Limits]] = NO_LIMITS
    intermediates: Mapping[str, AlgorithmFn] = field(default_factory=dict)

    def limits_for(self, algorithm: str) -> Limits:
        """The limits that apply to ``algorithm`` (``Limits()`` when none are declared)."""
        if isinstance(self.limits, Limits):
            return self.limits
        return self.limits.get(algorithm, NO_LIMITS)

    def admits(self, algorithm: str, hyper: Mapping[str, int]) -> bool:
        """Whether a case of ``algorithm`` with ``hyper`` lies within this implementation's limits."""
        return self.limits_for(algorithm).admits(hyper)

    def supports(self, variant: VariantSet) -> bool:
        return self.variants == ALL_VARIANTS or variant in tuple(self.variants)

    def problems(self) -> list[str]:
        """Declaration mistakes (empty when the plugin is well formed)."""
        from ftspec.spec.variants import VariantSet as _V

        out = []
        if not isinstance(self.name, str) or not self.name:
            out.append("name must be a non-empty string")
        bad = [d for d in self.dtypes if d not in FLOAT_DTYPES]
        if bad:
            out.append(f"unknown dtypes {bad}; expected a subset of {list(FLOAT_DTYPES)}")
        if not self.dtypes:
            out.append("declares no dtypes")
        if self.variants != ALL_VARIANTS:
            if not all(isinstance(v, _V) for v in self.variants):
                out.append('variants must be "all" or a sequence of VariantSet')
        for attr in ("devices", "from_numpy", "to_numpy"):
            if not callable(getattr(self, attr)):
                out.append(f"{attr} must be callable")
        for name, fn in self.algorithms.items():
            if not callable(fn):
                out.append(f"algorithm {name!r} is not callable")
        if not isinstance(self.intermediates, Mapping) or not all(callable(f) for f in self.intermediates.values()):
            out.append("intermediates must be {model entry: callable}")
        out.extend(self._limit_problems())
        return out

    def _limit_problems(self) -> list[str]:
        """Limits that are malformed, name unknown hyperparameters, or leave an algorithm nothing
        to draw."""
        from ftspec.spec.registry import REGISTRY

        if isinstance(self.limits, Limits):
            per = {name: self.limits for name in self.algorithms}
        elif isinstance(self.limits, Mapping):
            per = dict(self.limits)
            stray = sorted(set(per) - set(self.algorithms))
            if stray:
                return [f"limits name algorithms the plugin does not implement: {stray}"]
        else:
            return ["limits must be a Limits or {algorithm: Limits}"]
        known = {n for e in REGISTRY.values() for n in e.hyper}
        out = []
        for algorithm, limits in per.items():
            if not isinstance(limits, Limits):
                out.append(f"limits for {algorithm!r} must be a Limits")
                continue
            try:
                unknown = sorted(limits.names() - known)
                bad = [f"{n}={v!r}" for n, v in (*limits.maximum.items(), *limits.minimum.items())
                       if isinstance(v, bool) or not isinstance(v, int) or v < 1]
            except (TypeError, ValueError, AttributeError) as exc:
                out.append(f"limits for {algorithm!r}: {exc}")
                continue
            if unknown:
                out.append(f"limits name unknown hyperparameters {unknown}")
                continue
            if bad:
                out.append(f"limits: bounds must be positive integers, given {bad}")
                continue
            entry = REGISTRY.get(algorithm)
            if entry is not None:
                out.extend(f"limits leave nothing to draw for {algorithm}: {p}"
                           for p in limits.problems(list(entry.hyper), entry.minimum))
        return out
