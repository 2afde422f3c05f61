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
    "ACCUMULATION_KEYS",
    "ALL_VARIANTS",
    "DEFAULT_VARIANTS",
    "Limits",
    "Term",
    "AlgorithmFn",
    "Context",
    "FLOAT_DTYPES",
    "Implementation",
    "REFUSAL_MODES",
    "parse_precision",
    "select_devices",
]

#: Real dtypes a plugin may declare, highest precision first.
FLOAT_DTYPES = ("float64", "float32", "bfloat16", "float16")
#: Dtype names ``from_numpy`` may receive: the above plus tokens and masks.
ALL_DTYPES = FLOAT_DTYPES + ("int64", "bool")

#: What a mixed-precision declaration (``Implementation.accumulation``) may name per input dtype:
#: the format sums, dot products and matrix products accumulate in, and the format softmax is
#: computed in.
ACCUMULATION_KEYS: Final = ("accumulate", "softmax")
#: Per input dtype, the formats a declaration may name: the dtype itself or a wider one that holds
#: every value of it (float16 is not wider than bfloat16: its range is narrower).
WIDER: Final = {"float64": ("float64",), "float32": ("float32", "float64"),
                "bfloat16": ("bfloat16", "float32", "float64"), "float16": ("float16", "float32", "float64")}


def precision_key(tier: str, declared: Mapping[str, str]) -> str:
    """The numerics a call is judged under, as one string (a reference's cache key and
    ``tolerances.reference``'s ``precision``): the tier alone ("highest", "tf32") when nothing is
    computed wider than the input dtype, else e.g. "highest;accumulate=float32;softmax=float32"
    (``declared``: {key of ``ACCUMULATION_KEYS``: format}, only the keys that differ from the dtype)."""
    return ";".join([tier] + [f"{k}={declared[k]}" for k in ACCUMULATION_KEYS if k in declared])


def parse_precision(key: str) -> tuple[str, dict[str, str]]:
    """``precision_key`` read back: (tier, {"accumulate": format, "softmax": format} as given).
    ValueError (one line) for a key that is not one."""
    tier, *parts = str(key).split(";")
    out: dict[str, str] = {}
    for part in parts:
        name, _, value = part.partition("=")
        if name not in ACCUMULATION_KEYS or value not in FLOAT_DTYPES or name in out:
            raise ValueError(f"precision {key!r}: {part!r} is not accumulate=FORMAT or softmax=FORMAT "
                             f"(FORMAT one of {', '.join(FLOAT_DTYPES)})")
        out[name] = value
    return tier, out


def select_devices(found: Sequence[str], wanted: Optional[Sequence[str]]) -> list[str]:
    """The devices of ``found`` that ``wanted`` names (all of them if ``wanted`` is empty).

    A bare platform name selects every device of that platform, so ``cpu``
    picks a plugin's ``cpu`` as well as ``cpu:0`` (JAX names devices
    ``platform:id``)."""
    if not wanted:
        return list(found)
    return [d for d in found if d in wanted or d.partition(":")[0] in wanted]

#: How an implementation refuses a case the spec refuses (``Implementation.refuses_by``): by raising
#: an exception, or by returning NaN in every output element the refused input reaches (what IEEE
#: arithmetic gives a jit-compiled or GPU kernel that cannot raise on a value: 0/0 for a constant
#: column into a norm without ε). conformance/core/refusals.py holds each plugin to its declaration.
REFUSAL_MODES: Final = ("raise", "nan")

ALL_VARIANTS: Final = "all"
#: The key of a per-algorithm ``variants`` mapping that stands for every algorithm it does not name.
DEFAULT_VARIANTS: Final = "*"
#: What a plugin declares for one algorithm: "all", or the variant sets it implements.
Declared = Union[Literal["all"], Sequence[VariantSet]]


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


#: The largest constant factor a side of a relation, or a ``multiple_of``, may carry (sizes are
#: small: a larger constant is a typo, and bounding it keeps hostile certificates cheap to read).
MAX_CONSTANT: Final = 1 << 20
#: The fields of ``Limits.to_dict`` (``Limits.from_dict`` accepts these and no other).
LIMIT_FIELDS: Final = ("equal", "at_most", "multiple_of", "maximum", "minimum", "batching", "cross_lengths")


@dataclass(frozen=True)
class Term:
    """One side of a relation: a whole-number coefficient times a product of hyperparameter names.
    "d_e" -> Term(1, ("d_e",)); "H*d_attn" -> Term(1, ("H", "d_attn")); "4*d_e" -> Term(4, ("d_e",))."""

    coefficient: int
    names: tuple[str, ...]

    def value(self, hyper: Mapping[str, int]) -> int:
        return self.coefficient * _product(self.names, hyper)

    def __str__(self) -> str:
        return "*".join(([str(self.coefficient)] if self.coefficient != 1 else []) + list(self.names))


#: A relation that applies to an entry: ("=", a, b) for a = b, ("<=", a, b) for a <= b.
Relation = tuple[str, Term, Term]


def _side(text: Any) -> Term:
    """One side of a relation: "d_e", "H*d_attn", "4*d_e", "2*H*d_attn" (factors are hyperparameter
    names or whole numbers from 1 to ``MAX_CONSTANT``, at least one a name). ValueError, one line,
    for anything else."""
    shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
    if not isinstance(text, str):
        raise ValueError(f"{shown} is not a side of a relation: a name, or a product such as \"H*d_attn\" "
                         "or \"4*d_e\"")
    coefficient, names = 1, []
    for part in (p.strip() for p in text.split("*")):
        if part.isascii() and part.isdigit():
            if len(part) > 7 or not 1 <= int(part) <= MAX_CONSTANT:
                raise ValueError(f"{shown}: a constant factor must be a whole number from 1 to {MAX_CONSTANT}")
            coefficient *= int(part)
        elif part.isidentifier():
            names.append(part)
        else:
            raise ValueError(f"{shown} is not a hyperparameter name or a product of names and whole numbers "
                             "(\"d_e\", \"H*d_attn\", \"4*d_e\")")
    if not names:
        raise ValueError(f"{shown} names no hyperparameter (a bound on one size is a maximum or a minimum)")
    if coefficient > MAX_CONSTANT:
        raise ValueError(f"{shown}: the constant factors multiply to more than {MAX_CONSTANT}")
    return Term(coefficient, tuple(names))


def _product(names: tuple[str, ...], hyper: Mapping[str, int]) -> int:
    value = 1
    for n in names:
        value *= int(hyper[n])
    return value


def _grow(term: Term, target: int, hyper: dict[str, int], jump: bool) -> None:
    """Raise ``term``'s last name factor in ``hyper`` towards ``term >= target``: to the least value
    that reaches it when ``jump`` or the term is one name, else by one (the other factors and the
    other relations have their say before the next step)."""
    last = term.names[-1]
    if jump or len(term.names) == 1:
        rest = max(1, term.coefficient * _product(term.names[:-1], hyper))
        hyper[last] = max(hyper[last], -(-target // rest))
    else:
        hyper[last] += 1


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Limits:
    """Hyperparameter relations and bounds an implementation supports.

    Real libraries tie sizes the paper keeps apart (a multi-head layer has
    d_attn = d_mid = d_e / H); declaring that here makes the harness draw only
    such shapes, replay only such fixtures and say so in the certificate,
    instead of failing the library's refusal as an exception.

    A *side* is a hyperparameter name or a product of names and whole
    numbers (constants from 1 to ``MAX_CONSTANT``): "d_e", "H*d_attn",
    "4*d_e".

    equal           pairs of sides that are equal: ("d_attn", "d_mid"),
                    ("d_e", "H*d_attn"), ("d_mlp", "4*d_e").
    at_most         pairs (a, b) of sides with a <= b: ("d_mlp", "4*d_e").
    multiple_of     {name: k}: the size is a multiple of k, e.g. {"d_e": 2}
                    (d_e even, as a Vaswani sinusoid needs).
    maximum         {name: largest value}, e.g. {"ell_max": 64, "N_V": 1000}.
    minimum         {name: smallest value}.
    batching        False: never called with ``ctx.batched``.
    cross_lengths   False: masks and cross-attention only with ell_z == ell_x.

    A relation or bound naming a hyperparameter an entry does not have does
    not apply to that entry. Draws are made within the limits by raising
    sizes (``settle``): a relation that can only hold by lowering a size, or
    by growing a factor other than the last of a product, is met by no draw,
    so write a product with the factor that may grow last ("H*d_attn").
    """

    equal: tuple[tuple[str, str], ...] = ()
    maximum: Mapping[str, int] = field(default_factory=dict)
    minimum: Mapping[str, int] = field(default_factory=dict)
    batching: bool = True
    cross_lengths: bool = True
    at_most: tuple[tuple[str, str], ...] = ()
    multiple_of: Mapping[str, int] = field(default_factory=dict)

    @property
    def unconstrained(self) -> bool:
        return (not (self.equal or self.at_most or self.multiple_of or self.maximum or self.minimum)
                and self.batching and self.cross_lengths)

    def key(self) -> tuple:
        """A hashable identity (searches group members whose limits are equal)."""
        return (tuple(tuple(p) for p in self.equal), tuple(sorted(self.maximum.items())),
                tuple(sorted(self.minimum.items())), self.batching, self.cross_lengths,
                tuple(tuple(p) for p in self.at_most), tuple(sorted(self.multiple_of.items())))

    def malformed(self) -> list[str]:
        """What is wrong with the declaration's form, one line each (empty when well formed): pairs
        of sides, positive whole-number bounds, multiples from 1 to ``MAX_CONSTANT``, booleans."""
        out = []
        for what in ("equal", "at_most"):
            pairs = getattr(self, what)
            if isinstance(pairs, (str, bytes)) or not isinstance(pairs, (tuple, list)):
                out.append(f"{what} must be a sequence of pairs of sides, given {pairs!r:.60}")
                continue
            for pair in pairs:
                if isinstance(pair, (str, bytes)) or not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    out.append(f"{what}: {pair!r:.60} is not a pair of sides")
                    continue
                for side in pair:
                    try:
                        _side(side)
                    except ValueError as exc:
                        out.append(f"{what}: {exc}")
        for what in ("maximum", "minimum", "multiple_of"):
            bound = getattr(self, what)
            if not isinstance(bound, Mapping):
                out.append(f"{what} must be {{name: whole number}}, given {bound!r:.60}")
                continue
            most = MAX_CONSTANT if what == "multiple_of" else None
            bad = [f"{n}={v!r}" for n, v in bound.items()
                   if not _whole(v) or v < 1 or (most is not None and v > most)]
            names = [n for n in bound if not (isinstance(n, str) and n.isidentifier())]
            if names:
                out.append(f"{what}: keys must be hyperparameter names, given {names!r:.60}")
            elif bad and most is None:
                out.append(f"{what}: bounds must be positive integers, given {', '.join(bad)[:80]}")
            elif bad:
                out.append(f"{what}: each k must be an integer from 1 to {most}, given {', '.join(bad)[:80]}")
        for what in ("batching", "cross_lengths"):
            if not isinstance(getattr(self, what), bool):
                out.append(f"{what} must be True or False, given {getattr(self, what)!r:.60}")
        return out

    def names(self) -> set[str]:
        """Every hyperparameter name the limits mention."""
        out = set(self.maximum) | set(self.minimum) | set(self.multiple_of)
        for pair in (*self.equal, *self.at_most):
            for side in pair:
                out.update(_side(side).names)
        return out

    def relations(self, hyper_names: Sequence[str]) -> list[Relation]:
        """The relations that apply to an entry with these hyperparameters: ("=", a, b) for each
        equality, ("<=", a, b) for each ``at_most`` pair, as ``Term``s; cross_lengths off adds
        ell_z = ell_x. (Multiples: ``multiples``.)"""
        have = set(hyper_names)
        out: list[Relation] = []
        pairs = [("=", a, b) for a, b in self.equal]
        if not self.cross_lengths:
            pairs.append(("=", "ell_z", "ell_x"))
        pairs += [("<=", a, b) for a, b in self.at_most]
        for kind, a, b in pairs:
            left, right = _side(a), _side(b)
            if set(left.names) <= have and set(right.names) <= have:
                out.append((kind, left, right))
        return out

    def multiples(self, hyper_names: Sequence[str]) -> dict[str, int]:
        """{name: k} of the ``multiple_of`` entries that apply to an entry with these hyperparameters."""
        return {n: int(k) for n, k in self.multiple_of.items() if n in hyper_names}

    def admits(self, hyper: Mapping[str, int]) -> bool:
        """Whether a case with these hyperparameters lies within the limits."""
        for n, v in self.maximum.items():
            if n in hyper and int(hyper[n]) > int(v):
                return False
        for n, v in self.minimum.items():
            if n in hyper and int(hyper[n]) < int(v):
                return False
        if any(int(hyper[n]) % k for n, k in self.multiples(list(hyper)).items()):
            return False
        return all(_holds(r, hyper) for r in self.relations(list(hyper)))

    def settle(self, hyper: Mapping[str, int]) -> dict[str, int]:
        """``hyper`` raised, never lowered, until every relation and multiple that applies holds.

        An equality raises its smaller side: a side that is one name (times a constant) takes the
        least value that reaches the other side, a smaller product grows its last factor by one. An
        inequality a <= b with a > b raises b's last name factor to the least value that reaches a.
        A size that is not a multiple of its k is rounded up to the next one. Values only grow, so
        the least solution above ``hyper`` is found when one exists (growing last factors); the
        caller checks the maxima (``admits``) afterwards."""
        out = {n: int(v) for n, v in hyper.items()}
        relations = self.relations(list(out))
        multiples = self.multiples(list(out))
        for _ in range(64 + 4 * (len(relations) + len(multiples))):
            unsettled = False
            for kind, a, b in relations:
                va, vb = a.value(out), b.value(out)
                if va == vb or (kind == "<=" and va < vb):
                    continue
                unsettled = True
                if kind == "<=":
                    _grow(b, va, out, jump=True)
                elif va < vb:
                    _grow(a, vb, out, jump=False)
                else:
                    _grow(b, va, out, jump=False)
            for n, k in multiples.items():
                if out[n] % k:
                    out[n] += k - out[n] % k
                    unsettled = True
            if not unsettled or any(v > 1 << 20 for v in out.values()):
                break
        return out

    def problems(self, hyper_names: Sequence[str], minimum: Mapping[str, int]) -> list[str]:
        """Why nothing can be drawn within the limits for an entry with these hyperparameters and
        minima (empty when something can; else one sentence): the least sizes that satisfy the
        relations and multiples, if any, must respect the maxima."""
        low = {n: max(int(minimum.get(n, 1)), int(self.minimum.get(n, 1))) for n in hyper_names}
        settled = self.settle(low)
        for relation in self.relations(list(hyper_names)):
            if not _holds(relation, settled):
                kind, a, b = relation
                return [f"the relations cannot all hold ({a} {kind} {b} is left unmet)"]
        for n, k in self.multiples(list(hyper_names)).items():
            if settled[n] % k:
                return [f"the relations cannot all hold ({n} a multiple of {k} is left unmet)"]
        over = [f"{n} = {settled[n]} > maximum {self.maximum[n]}" for n in self.maximum
                if n in settled and settled[n] > int(self.maximum[n])]
        if over:
            return ["the smallest sizes the entry and the limits allow exceed the maxima: " + ", ".join(over)]
        return []

    def describe(self) -> str:
        """One line, e.g. "d_attn = d_mid, d_mlp <= 4*d_e, d_e a multiple of 2, ell_max <= 64, no batching"."""
        parts = [f"{a} = {b}" for a, b in self.equal]
        parts += [f"{a} <= {b}" for a, b in self.at_most]
        parts += [f"{n} a multiple of {k}" for n, k in sorted(self.multiple_of.items())]
        parts += [f"{n} <= {v}" for n, v in sorted(self.maximum.items())]
        parts += [f"{n} >= {v}" for n, v in sorted(self.minimum.items())]
        if not self.batching:
            parts.append("no batching")
        if not self.cross_lengths:
            parts.append("ell_z = ell_x")
        return ", ".join(parts) or "none"

    def to_dict(self) -> dict[str, Any]:
        return {"equal": [list(p) for p in self.equal], "at_most": [list(p) for p in self.at_most],
                "multiple_of": dict(sorted(self.multiple_of.items())),
                "maximum": dict(sorted(self.maximum.items())), "minimum": dict(sorted(self.minimum.items())),
                "batching": bool(self.batching), "cross_lengths": bool(self.cross_lengths)}

    @classmethod
    def from_dict(cls, data: Any) -> "Limits":
        """The limits ``to_dict`` wrote, read as untrusted data (a certificate's ``subject.limits``):
        ValueError with one line for anything else. Fields left out take their defaults (a
        certificate written before ``at_most`` and ``multiple_of`` existed has neither)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"must be a JSON object, got {type(data).__name__}")
        stray = sorted(repr(k)[:40] for k in data if k not in LIMIT_FIELDS)
        if stray:
            raise ValueError(f"unknown fields {', '.join(stray[:4])}; expected some of {', '.join(LIMIT_FIELDS)}")
        pairs = {}
        for what in ("equal", "at_most"):
            value = data.get(what, [])
            if not isinstance(value, list) or len(value) > 64:
                raise ValueError(f"{what} must be a list of at most 64 pairs of sides")
            if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) and len(s) <= 200 for s in p)
                       for p in value):
                raise ValueError(f"{what} must be a list of pairs of sides, each a string of at most 200 "
                                 "characters")
            pairs[what] = tuple((a, b) for a, b in value)
        bounds = {}
        for what in ("maximum", "minimum", "multiple_of"):
            value = data.get(what, {})
            if not isinstance(value, dict) or len(value) > 64 or not all(
                    isinstance(k, str) and len(k) <= 200 for k in value):
                raise ValueError(f"{what} must be an object of at most 64 names")
            bounds[what] = dict(value)
        limits = cls(equal=pairs["equal"], at_most=pairs["at_most"], maximum=bounds["maximum"],
                     minimum=bounds["minimum"], multiple_of=bounds["multiple_of"],
                     batching=data.get("batching", True), cross_lengths=data.get("cross_lengths", True))
        wrong = limits.malformed()
        if wrong:
            raise ValueError(wrong[0])
        return limits


def _holds(relation: Relation, hyper: Mapping[str, int]) -> bool:
    kind, a, b = relation
    va, vb = a.value(hyper), b.value(hyper)
    return va == vb if kind == "=" else va <= vb


NO_LIMITS: Final = Limits()


@dataclass(frozen=True)
class Implementation:
    """A plugin's declaration.

    name, version   identify it in reports and certificates.
    algorithms      {registry name: function}; a subset is allowed (coverage
                    is reported, missing ones are "not implemented").
    dtypes          real dtypes it supports, from FLOAT_DTYPES.
    dtypes_by_algorithm
                    optional: {algorithm: dtypes}, a subset of ``dtypes`` for the
                    algorithms named (a library that computes some entries in a
                    narrower format than it takes, e.g. Hugging Face Llama's
                    float32 RMSNorm and rotary tables under a float64 model);
                    ``dtypes_for(algorithm)`` answers; the others run at every
                    dtype of ``dtypes``. Certificates record it.
    devices         called at run time; returns device names, e.g. ["cpu", "cuda:0"].
    from_numpy      (array, dtype, device) -> native array. ``array`` is a
                    float64, int64 or bool NumPy array; for a real dtype its
                    values are exactly representable in that dtype.
    to_numpy        native array -> NumPy array (float16/32/64, int or bool),
                    value for value (upcast bfloat16 to float32 first).
    variants        "all", or the variant sets it implements (a sequence of
                    VariantSet), for every algorithm; or, per algorithm,
                    {algorithm: "all" | sequence of VariantSet}, where the
                    key "*" stands for every algorithm not named (without
                    it, every implemented algorithm must be named). Each
                    algorithm is searched, replayed and certified under its
                    own sets only (``variants_for``).
    precision       "highest" (float32 matrix products in full float32) or a
                    named reduced tier such as "tf32"; tolerances follow it.
    accumulation    mixed precision, per input dtype: {dtype: {"accumulate":
                    format, "softmax": format}}, the format in which sums, dot
                    products and matrix products accumulate (their result is
                    then stored in the input dtype) and the format in which
                    softmax is computed, e.g. {"bfloat16": {"accumulate":
                    "float32", "softmax": "float32"}} for torch autocast or a
                    fused attention kernel. A format is the dtype itself or a
                    wider one (``WIDER``); a dtype or key left out computes in
                    the input dtype (the default: everything in the input
                    dtype). Tolerances follow it (docs/tolerances.md, "Mixed
                    precision").
    description     one line for ``ftspec list``.
    limits          ``Limits`` for every algorithm, or {algorithm: Limits}
                    (algorithms not named there have none).
    intermediates   optional: {model entry: function} with the calling
                    convention above, returning {name: native array}, the
                    model's named intermediate values on that call
                    (``embedding``, ``layers.{l}``, ``final_norm``, ``head``,
                    ``logits``, ...; docs/plugins.md "Named intermediates").
                    When a model fails, the harness reports the first of them
                    that departs from the spec (conformance/forensics/divergence/).
    refuses_by      how it refuses what the spec refuses (``REFUSAL_MODES``):
                    "raise" (the default: any exception), or "nan": it returns,
                    and every output element the refused input reaches is NaN
                    (an exception is still accepted, e.g. for a shape the
                    framework rejects); a finite number there fails either
                    way. One mode, or {algorithm: mode} (algorithms not named:
                    "raise"). ``refuses_by_for(algorithm)`` answers;
                    certificates record it (docs/plugins.md, "Refusing").
    """

    name: str
    version: str
    algorithms: Mapping[str, AlgorithmFn]
    dtypes: Sequence[str]
    devices: Callable[[], Sequence[str]]
    from_numpy: Callable[[Any, str, str], Any]
    to_numpy: Callable[[Any], Any]
    variants: Union[Literal["all"], Sequence[VariantSet], Mapping[str, Declared]] = ALL_VARIANTS
    precision: str = "highest"
    description: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    limits: Union[Limits, Mapping[str, Limits]] = NO_LIMITS
    intermediates: Mapping[str, AlgorithmFn] = field(default_factory=dict)
    dtypes_by_algorithm: Mapping[str, Sequence[str]] = field(default_factory=dict)
    accumulation: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    refuses_by: Union[str, Mapping[str, str]] = "raise"

    def refuses_by_for(self, algorithm: str) -> str:
        """How the plugin refuses at ``algorithm``: "raise" or "nan" (``refuses_by``)."""
        declared = self.refuses_by
        if isinstance(declared, Mapping):
            return str(declared.get(algorithm, "raise"))
        return str(declared)

    def _refusal_problems(self) -> list[str]:
        """``refuses_by`` that is not one of ``REFUSAL_MODES`` or {implemented algorithm: mode}."""
        declared = self.refuses_by
        modes = " or ".join(repr(m) for m in REFUSAL_MODES)
        if isinstance(declared, str):
            return [] if declared in REFUSAL_MODES else [f"refuses_by must be {modes}; given {declared!r:.40}"]
        if not isinstance(declared, Mapping):
            return [f"refuses_by must be {modes} or {{algorithm: mode}}; given {declared!r:.60}"]
        stray = sorted(str(k) for k in declared if k not in self.algorithms)
        if stray:
            return [f"refuses_by names algorithms the plugin does not implement: {stray[:4]}"]
        bad = [f"{k}: {v!r:.20}" for k, v in declared.items() if v not in REFUSAL_MODES]
        return [f"refuses_by for {bad[0]} must be {modes}"] if bad else []

    def accumulation_for(self, dtype: str) -> dict[str, str]:
        """{"accumulate": format, "softmax": format} at input ``dtype``: what the plugin declares
        there, the dtype itself for what it leaves out."""
        declared = self.accumulation.get(dtype, {}) if isinstance(self.accumulation, Mapping) else {}
        return {k: str(declared.get(k, dtype)) for k in ACCUMULATION_KEYS}

    def mixed_precision(self) -> dict[str, dict[str, str]]:
        """{dtype: ``accumulation_for(dtype)``} for each declared dtype that computes anything wider
        (empty: everything in the input dtype), as reports and certificates record it."""
        return {d: self.accumulation_for(d) for d in self.dtypes if self.precision_for(d) != self.precision}

    def precision_for(self, dtype: str) -> str:
        """The numerics a call at ``dtype`` is judged under (``precision_key``): the tier, plus the
        formats declared wider than ``dtype``. Two plugins share a reference only when it is equal."""
        wider = {k: v for k, v in self.accumulation_for(dtype).items() if v != dtype}
        return precision_key(self.precision, wider)

    def limits_for(self, algorithm: str) -> Limits:
        """The limits that apply to ``algorithm`` (``Limits()`` when none are declared)."""
        if isinstance(self.limits, Limits):
            return self.limits
        return self.limits.get(algorithm, NO_LIMITS)

    def admits(self, algorithm: str, hyper: Mapping[str, int]) -> bool:
        """Whether a case of ``algorithm`` with ``hyper`` lies within this implementation's limits."""
        return self.limits_for(algorithm).admits(hyper)

    @property
    def per_algorithm(self) -> bool:
        """Whether ``variants`` declares sets per algorithm (a mapping)."""
        return isinstance(self.variants, Mapping)

    def dtypes_for(self, algorithm: str) -> tuple[str, ...]:
        """The dtypes ``algorithm`` is declared at: ``dtypes_by_algorithm``'s (within ``dtypes``)
        where it is named, else every one of ``dtypes``."""
        named = self.dtypes_by_algorithm.get(algorithm)
        if named is None:
            return tuple(self.dtypes)
        return tuple(d for d in self.dtypes if d in tuple(named))

    def variants_for(self, algorithm: str) -> Union[Literal["all"], tuple[VariantSet, ...]]:
        """"all", or the variant sets declared for ``algorithm`` (() when none are: a mapping that
        names neither it nor "*")."""
        declared: Any = self.variants
        if isinstance(declared, Mapping):
            declared = declared.get(algorithm, declared.get(DEFAULT_VARIANTS, ()))
        if isinstance(declared, str) and declared == ALL_VARIANTS:
            return ALL_VARIANTS
        return tuple(declared)

    def declared_variants(self) -> dict[str, Union[Literal["all"], tuple[VariantSet, ...]]]:
        """{implemented algorithm: its sets (``variants_for``)}, in the order of ``algorithms``."""
        return {a: self.variants_for(a) for a in self.algorithms}

    def supports(self, variant: VariantSet, algorithm: Optional[str] = None) -> bool:
        """Whether ``variant`` is declared for ``algorithm``. The one-argument form, kept for
        callers written before per-algorithm sets, answers for a plugin whose sets are the same for
        every algorithm, and raises TypeError for one that declares them per algorithm."""
        if algorithm is None:
            if self.per_algorithm:
                raise TypeError(f"{self.name} declares variant sets per algorithm: call "
                                "supports(variant, algorithm)")
            algorithm = ""
        declared = self.variants_for(algorithm)
        return declared == ALL_VARIANTS or variant in declared

    def problems(self) -> list[str]:
        """Declaration mistakes (empty when the plugin is well formed)."""
        out = []
        if not isinstance(self.name, str) or not self.name:
            out.append("name must be a non-empty string")
        bad = [d for d in self.dtypes if d not in FLOAT_DTYPES]
        if bad:
            out.append(f"unknown dtypes {bad}; expected a subset of {list(FLOAT_DTYPES)}")
        if not self.dtypes:
            out.append("declares no dtypes")
        out.extend(self._variant_problems())
        for attr in ("devices", "from_numpy", "to_numpy"):
            if not callable(getattr(self, attr)):
                out.append(f"{attr} must be callable")
        for name, fn in self.algorithms.items():
            if not callable(fn):
                out.append(f"algorithm {name!r} is not callable")
        if not isinstance(self.intermediates, Mapping) or not all(callable(f) for f in self.intermediates.values()):
            out.append("intermediates must be {model entry: callable}")
        out.extend(self._limit_problems())
        out.extend(self._accumulation_problems())
        out.extend(self._refusal_problems())
        return out

    def _accumulation_problems(self) -> list[str]:
        """``accumulation`` that is not {declared dtype: {"accumulate" | "softmax": the dtype or a
        wider format}}: one line for the first thing wrong."""
        declared = self.accumulation
        form = ('accumulation must be {dtype: {"accumulate": format, "softmax": format}}, e.g. '
                '{"bfloat16": {"accumulate": "float32", "softmax": "float32"}}')
        if not isinstance(declared, Mapping):
            return [f"{form}; given {declared!r:.60}"]
        for dtype, formats in declared.items():
            if dtype not in FLOAT_DTYPES:
                return [f"accumulation: {dtype!r:.40} is not a dtype; expected one of {list(FLOAT_DTYPES)}"]
            if dtype not in self.dtypes:
                return [f"accumulation declares {dtype}, which the plugin does not declare in dtypes"]
            if not isinstance(formats, Mapping):
                return [f"{form}; given {formats!r:.60} for {dtype}"]
            for key, value in formats.items():
                if key not in ACCUMULATION_KEYS:
                    return [f"accumulation for {dtype}: unknown key {key!r:.40}; expected "
                            f"{' or '.join(repr(k) for k in ACCUMULATION_KEYS)}"]
                if value not in WIDER[dtype]:
                    return [f"accumulation for {dtype}: {key} in {value!r:.40}; expected one of "
                            f"{list(WIDER[dtype])} (the input dtype or a wider format)"]
        if ";" in str(self.precision):
            return [f"precision {self.precision!r:.60} must name a tier alone (\"highest\", \"tf32\")"]
        return []

    def _variant_problems(self) -> list[str]:
        """``variants`` that is not "all", a sequence of VariantSet, or a mapping of those per
        algorithm naming every implemented algorithm (or "*") and no other."""
        def wrong(declared: Any) -> bool:
            if isinstance(declared, str):
                return declared != ALL_VARIANTS
            try:
                return not all(isinstance(v, VariantSet) for v in declared)
            except TypeError:  # not iterable
                return True

        if not isinstance(self.variants, Mapping):
            return ['variants must be "all", a sequence of VariantSet, or {algorithm: "all" | sequence of '
                    'VariantSet}'] if wrong(self.variants) else []
        keys = list(self.variants)
        odd = [k for k in keys if not isinstance(k, str)]
        if odd:
            return [f"variants: keys must be algorithm names or \"*\", given {odd[:4]!r:.80}"]
        stray = sorted(k for k in keys if k != DEFAULT_VARIANTS and k not in self.algorithms)
        if stray:
            return [f"variants name algorithms the plugin does not implement: {stray}"]
        out = []
        for key, declared in self.variants.items():
            if wrong(declared):
                out.append(f"variants for {key!r} must be \"all\" or a sequence of VariantSet")
            elif not isinstance(declared, str) and not tuple(declared):
                out.append(f"variants for {key!r} is empty (leave the algorithm out of algorithms instead)")
        unnamed = [a for a in self.algorithms if a not in self.variants]
        if unnamed and DEFAULT_VARIANTS not in self.variants:
            out.append(f"variants declares no set for {unnamed} (name each algorithm, or give a "
                       f"\"{DEFAULT_VARIANTS}\" key for the rest)")
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
            malformed = limits.malformed()
            if malformed:
                out.append(f"limits for {algorithm!r}: {malformed[0]}")
                continue
            unknown = sorted(limits.names() - known)
            if unknown:
                out.append(f"limits name unknown hyperparameters {unknown}")
                continue
            entry = REGISTRY.get(algorithm)
            if entry is not None:
                out.extend(f"limits leave nothing to draw for {algorithm}: {p}"
                           for p in limits.problems(list(entry.hyper), entry.minimum))
        return out
