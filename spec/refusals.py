"""What each registry entry refuses, as data: ``Entry.refusals``.

PyTorch's OpInfo attaches to an operator the inputs it must reject. Here an
``Entry`` carries the inputs its spec refuses (with ``SpecError``), so that
every implementation can be checked to refuse them too, with an exception
and never with a number (``conformance/core/refusals.py``).

A ``Refusal`` is three things: a name, the values of the variant switches
under which it applies (``when``), and a transform that turns a case the
spec accepts (hyperparameters, inputs and flat parameters, as nested lists)
into one the spec refuses. The transform also says which argument the
spec's ``SpecError`` names (``Refused.argument``), and
``tests/spec/test_refusals.py`` checks every refusal of every entry against
the spec itself: the case before the transform is accepted, the case after
it is refused for that argument, so the data cannot drift from the spec's
code. The transforms are pure Python on copies; a transform returns None
where the case at hand cannot be made into a refused one (a padded
sequence of one token cannot be made longer than ℓ_max = 1 allows).

Two groups of refusals follow from what an entry already declares, and
``Entry.__post_init__`` adds them (``declared``): the value ranges of its
input kinds (a token ID outside [0, N_V), a position outside [0, ℓ_max), a
length outside [1, width], a variate outside [0, 1), a probability outside
[0, 1], a negative or all-zero distribution, a negative temperature), and,
for an entry with parameters, a parameter whose shape disagrees with the
schema. The others are listed by the entries themselves
(``spec/entries_forward.py``, ``spec/entries_training.py``) with the
helpers below: a column of zero variance under a norm without ε, a query
with no key under ``empty_query="error"``, a normalised width of 1 under
unbiased variance, a sequence longer than ℓ_max.

Refused by the spec but listed nowhere here, because an implementation
cannot be asked to share the refusal through the plugin contract (docs/spec.md,
"What the spec refuses", says why for each): non-finite or non-real numbers
and outputs that overflow, a variance that underflows binary64, mask or flag
entries other than 0 and 1, ragged nested lists, hyperparameters that
disagree with the shapes (so also a longer W_e or W_p where nothing else
fixes N_V or ℓ_max), an empty context, an unknown extra parameter, and a
parameter of length 1 where the schema says d > 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from .params import resolve_shape
from .variants import PAPER, VariantSet

if TYPE_CHECKING:  # annotations only: entry.py imports this module
    from .entry import Entry, TensorSpec

__all__ = [
    "Refusal",
    "Refused",
    "declared",
    "empty_padding",
    "empty_query",
    "narrow_norm",
    "refusal_table",
    "router_tie",
    "too_long",
    "zero_variance",
]

Hyper = Mapping[str, int]
Flat = Mapping[str, Any]


@dataclass(frozen=True)
class Refused:
    """A case the spec refuses: what the transform made, and the argument its ``SpecError`` names."""

    hyper: dict[str, int]
    inputs: dict[str, Any]
    params: dict[str, Any]
    argument: str


Transform = Callable[["Entry", dict[str, int], VariantSet, dict[str, Any], dict[str, Any]], Optional[Refused]]


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """One kind of input an entry's spec refuses (see the module docstring).

    ``name``: what is refused, one line. ``argument``: the argument the spec's
    ``SpecError`` names, in words for the documentation (the transform names
    the concrete one). ``when``: (switch, allowed values) pairs that must all
    hold for the refusal to apply; empty means under every variant set.
    ``transform``: (entry, hyper, variant, inputs, params) → ``Refused`` or
    None; it receives copies and may change them in place.
    """

    name: str
    argument: str
    transform: Transform = field(repr=False, compare=False)
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def applies(self, variant: VariantSet) -> bool:
        """Whether the spec refuses this under ``variant`` (every ``when`` pair holds)."""
        return all(getattr(variant, switch) in values for switch, values in self.when)

    def condition(self) -> str:
        """``when`` in words: "epsilon_placement = none", "always"."""
        if not self.when:
            return "always"
        return "; ".join(f"{s} = {' or '.join(str(v) for v in values)}" for s, values in self.when)

    def apply(self, entry: "Entry", hyper: Hyper, variant: VariantSet, inputs: Flat,
              params: Flat) -> Optional[Refused]:
        """The refused case made from an accepted one (None: not applicable to this case or variant).
        The arguments are left unchanged."""
        if not self.applies(variant):
            return None
        return self.transform(entry, dict(hyper), variant, {k: _copied(v) for k, v in inputs.items()},
                              {k: _copied(v) for k, v in params.items()})


# --------------------------------------------------------------------------
# nested-list helpers
# --------------------------------------------------------------------------

def _copied(value: Any) -> Any:
    """A nested list copied to its scalars (which are immutable): ``copy.deepcopy``'s result on the
    spec's values at a fraction of its cost (no memo; the harness copies every case it transforms)."""
    return [_copied(x) for x in value] if isinstance(value, list) else value


def _set_first(value: Any, new: Any) -> Any:
    """``value`` with its first scalar replaced by ``new`` (a scalar is replaced itself)."""
    if not isinstance(value, list):
        return new
    value[0] = _set_first(value[0], new)
    return value


def _first(value: Any) -> Any:
    while isinstance(value, list):
        value = value[0]
    return value


def _sliced(value: Any, sizes: Sequence[int]) -> Any:
    """The leading ``sizes`` entries of ``value`` along each axis."""
    if not sizes:
        return value
    return [_sliced(v, sizes[1:]) for v in value[: sizes[0]]]


def _resize(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
            params: dict[str, Any], changes: Mapping[str, int]) -> tuple[dict[str, int], dict[str, Any],
                                                                         dict[str, Any]]:
    """The case with hyperparameters ``changes`` made smaller: every input and parameter cut to the
    shapes its symbolic shape gives under the new sizes (its leading entries along each axis)."""
    new = {**hyper, **changes}
    specs = {s.name: s.shape for s in entry.inputs}
    out_inputs = {k: _sliced(v, resolve_shape(specs[k], new)) for k, v in inputs.items()}
    schema = entry.param_schema(new, variant)
    out_params = {k: _sliced(v, resolve_shape(schema[k], new)) if k in schema else v for k, v in params.items()}
    return new, out_inputs, out_params


# --------------------------------------------------------------------------
# refusals every entry declares through its inputs and parameters
# --------------------------------------------------------------------------

def _value(spec_name: str, what: str, value: Callable[[Hyper, "TensorSpec"], Any],
           also: Optional[Callable[[dict[str, Any]], bool]] = None) -> Refusal:
    """One out-of-range value in the first entry of input ``spec_name`` (``also`` adjusts the other
    inputs so that the value is used, and says False where it cannot be)."""

    def transform(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
        spec = next(s for s in entry.inputs if s.name == spec_name)
        if spec_name not in inputs or (also is not None and not also(inputs)):
            return None
        inputs[spec_name] = _set_first(inputs[spec_name], value(hyper, spec))
        return Refused(hyper, inputs, params, spec_name)

    return Refusal(name=f"{spec_name}: {what}", argument=spec_name, transform=transform)


def _mask_token_used(inputs: dict[str, Any]) -> bool:
    """mask_token is only embedded where a position is masked: mask position 0 of the first
    sequence (ETraining: its variate 0 < p_mask; impossible when p_mask = 0)."""
    if "masked" in inputs:
        inputs["masked"] = _set_first(inputs["masked"], True)
        return True
    if "u" in inputs and "p_mask" in inputs:
        if not inputs["p_mask"] > 0:
            return False
        inputs["u"] = _set_first(inputs["u"], 0.0)
        return True
    return True


def _value_refusals(spec: "TensorSpec") -> tuple[Refusal, ...]:
    n, k = spec.name, str(spec.kind)  # a Kind is a StrEnum (compared as text: entry.py imports this module)
    if k == "token":
        also = _mask_token_used if n == "mask_token" else None
        return (_value(n, "token ID −1", lambda h, s: -1, also),
                _value(n, "token ID N_V", lambda h, s: h["N_V"], also))
    if k == "position":
        return (_value(n, "position −1", lambda h, s: -1),
                _value(n, "position ℓ_max", lambda h, s: h["ell_max"]))
    if k == "length":
        return (_value(n, "length 0", lambda h, s: 0),
                _value(n, f"length {spec.bound} + 1", lambda h, s: h[s.bound] + 1))
    if k == "variate":
        return (_value(n, "−0.5", lambda h, s: -0.5),
                _value(n, "1", lambda h, s: 1.0))
    if k == "probability":
        return (_value(n, "−0.5", lambda h, s: -0.5),
                _value(n, "1.5", lambda h, s: 1.5))
    if k == "temperature":
        return (_value(n, "−1", lambda h, s: -1.0),)
    if k == "distribution":
        def zeros(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
            inputs[n] = [0.0 for _ in inputs[n]]
            return Refused(hyper, inputs, params, n)

        return (_value(n, "an entry −0.25", lambda h, s: -0.25),
                Refusal(name=f"{n}: every entry 0", argument=n, transform=zeros))
    return ()  # reals: only non-finite values are refused (module docstring); masks and flags: booleans


def _mismatch(entry: "Entry", hyper: Hyper, variant: VariantSet) -> Optional[tuple[str, int]]:
    """(parameter, axis) to lengthen so that it disagrees with a size an input or an earlier
    parameter fixes: the last such in the schema's order (the spec unifies inputs first, then the
    parameters in that order, so the lengthened one is the argument it names). None when every
    size is fixed by one parameter alone (Algorithm 1's W_e: a longer one is a larger vocabulary)."""
    schema = entry.param_schema(hyper, variant)
    names = list(schema)
    fixed: set[Any] = {d for spec in entry.inputs for d in spec.shape}
    earlier: list[set[Any]] = []
    for name in names:
        earlier.append(set(fixed))
        fixed |= set(schema[name])
    for i in range(len(names) - 1, -1, -1):
        shape = schema[names[i]]
        for axis in range(len(shape) - 1, -1, -1):
            d = shape[axis]
            if isinstance(d, str) and d.isidentifier() and d in earlier[i]:
                return names[i], axis
    return None


def _lengthened(value: Any, axis: int) -> Any:
    """``value`` with one more entry (zeros) along ``axis``."""
    if axis == 0:
        return value + [_zeros(value[0]) if value and isinstance(value[0], list) else 0.0]
    return [_lengthened(v, axis - 1) for v in value]


def _parameter_shape(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                     params: dict[str, Any]) -> Optional[Refused]:
    found = _mismatch(entry, hyper, variant)
    if found is None or found[0] not in params:
        return None
    name, axis = found
    params[name] = _lengthened(params[name], axis)
    return Refused(hyper, inputs, params, name)


_PARAMETER_SHAPE = Refusal(name="a parameter one entry too long", argument="that parameter",
                           transform=_parameter_shape)


def declared(entry: "Entry") -> tuple[Refusal, ...]:
    """The refusals ``entry`` declares through its inputs' kinds and its parameter schema."""
    out: list[Refusal] = []
    for spec in entry.inputs:
        out.extend(_value_refusals(spec))
    if _mismatch(entry, entry.sizes, PAPER) is not None:
        out.append(_PARAMETER_SHAPE)
    return tuple(out)


# --------------------------------------------------------------------------
# refusals the entries list
# --------------------------------------------------------------------------

_NO_EPSILON = ("epsilon_placement", ("none",))
#: the value of a constant column: not a power of two, so that an implementation whose mean of
#: d copies rounds away from it (a one-pass or fused kernel) meets a tiny variance, not 0, and must
#: still refuse the column, as the spec's exact sum does
_CONSTANT = 0.7


def zero_variance(*, column_of: str = "", tokens: str = "", attention: str = "", kind: str = "",
                  when: tuple[tuple[str, tuple[Any, ...]], ...] = ()) -> Refusal:
    """A column that reaches a norm without ε with zero variance (constant, ``_CONSTANT``, under
    layer norm; all zeros under RMSnorm, whose "variance" is the mean square).

    ``column_of``: the input whose column 0 is made constant (components and layers).
    ``tokens``: for models, the token input whose first token's embedding column is made constant
    (and W_p[:, 0] zero when positions are learned; mask_token's column too, where masking may
    replace the token). ``attention``: the prefix of the first self-attention whose output W_o and
    b_o are zeroed, so that a post-norm layer's X + MHAttention(X) keeps the constant column.
    ``kind``: the norm (default: the variant's ``norm``)."""

    def transform(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
        value = 0.0 if (kind or variant.norm) == "rms_norm" else _CONSTANT
        if column_of:
            for row in inputs[column_of]:
                row[0] = value
        if tokens:
            ids = {_first(inputs[tokens])}
            if "mask_token" in inputs:
                ids.add(inputs["mask_token"])
            for row in params["W_e"]:
                for v in ids:
                    row[v] = value
            if "W_p" in params:
                for row in params["W_p"]:
                    row[0] = 0.0
        if attention:
            for name in (attention + "W_o", attention + "b_o"):
                if name in params:
                    params[name] = _zeros(params[name])
        return Refused(hyper, inputs, params, "e")

    return Refusal(name="a zero-variance column into a norm without ε", argument="e",
                   transform=transform, when=(_NO_EPSILON, *when))


def _zeros(value: Any) -> Any:
    return [_zeros(v) for v in value] if isinstance(value, list) else 0.0


def empty_query() -> Refusal:
    """The last query of Mask with no key (its column all 0) under ``empty_query="error"``."""

    def transform(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
        for row in inputs["Mask"]:
            row[-1] = False
        return Refused(hyper, inputs, params, "Mask")

    return Refusal(name="a query with no key (a Mask column all 0)", argument="Mask",
                   transform=transform, when=(("empty_query", ("error",)),))


def empty_padding(name: str = "pad") -> Refusal:
    """Every position padding (``name``, by default ``pad``, all 0) under ``empty_query="error"``:
    no query has a key."""

    def transform(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
        pad = inputs[name]
        for t in range(len(pad)):
            pad[t] = False
        return Refused(hyper, inputs, params, name)

    return Refusal(name=f"padding only: a query with no key ({name} all 0)", argument=name,
                   transform=transform, when=(("empty_query", ("error",)),))


def narrow_norm(dim: str = "d_e", *, when: tuple[tuple[str, tuple[Any, ...]], ...] = ()) -> Refusal:
    """The normalised width ``dim`` cut to 1 under unbiased variance (which divides by ``dim`` − 1)."""

    def transform(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
        new, inputs, params = _resize(entry, hyper, variant, inputs, params, {dim: 1})
        return Refused(new, inputs, params, dim)

    return Refusal(name=f"{dim} = 1 under unbiased variance", argument=dim,
                   transform=transform, when=(("variance", ("unbiased",)), *when))


def too_long(*names: str, needs: Optional[Callable[[Hyper], int]] = None, argument: str = "",
             minimum: int = 1) -> Refusal:
    """ℓ_max one short of what the case needs, every padded sequence of the first example at its
    full width. By default the case needs ℓ_max ≥ the longest of the sequence lengths ``names``
    and the spec names the first of them that no longer fits (``sequences_fit``'s order);
    ``needs`` and ``argument`` say otherwise (DInference: ℓ + ℓ_gen − 1, named ``ell_gen``).
    ``minimum``: the smallest ℓ_max the entry takes (EDInference: 2)."""

    def transform(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
        ell_max = (needs(hyper) if needs is not None else max(hyper[n] for n in names)) - 1
        if ell_max < minimum:
            return None
        new, inputs, params = _resize(entry, hyper, variant, inputs, params, {"ell_max": ell_max})
        for spec in entry.inputs:
            if spec.kind == "length":
                inputs[spec.name] = _set_first(inputs[spec.name], hyper[spec.bound])
        named = argument or next(n for n in names if hyper[n] > ell_max)
        return Refused(new, inputs, params, named)

    what = argument or " or ".join(names)
    return Refusal(name="a sequence longer than ℓ_max" if needs is None else "ℓ + ℓ_gen − 1 > ℓ_max",
                   argument=what, transform=transform)


def router_tie() -> Refusal:
    """A mixture of experts' router with a tie across the top-k boundary (``moe_mlp``, spec 2.11):
    W_g all zeros makes every token's router logits 0 and its probabilities 1/E, so the k-th and
    (k+1)-th largest tie for every k < E (at k = E every expert is chosen: nothing to refuse)."""

    def transform(entry: "Entry", hyper: dict[str, int], variant: VariantSet, inputs: dict[str, Any],
                  params: dict[str, Any]) -> Optional[Refused]:
        if hyper["k"] >= hyper["E"]:
            return None
        params["W_g"] = _zeros(params["W_g"])
        return Refused(hyper, inputs, params, "W_g")

    return Refusal(name="a router tie across the top-k boundary (W_g all 0, k < E)", argument="W_g",
                   transform=transform)


# --------------------------------------------------------------------------
# the documentation (docs/spec.md, "What the spec refuses")
# --------------------------------------------------------------------------

def refusal_table(entries: Sequence["Entry"]) -> str:
    """The Markdown table of docs/spec.md's "What the spec refuses": entries that refuse the same
    things share a row; each refusal is followed by the switches it needs, where it needs any."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for e in entries:
        items = tuple(r.name + ("" if not r.when else f" [{r.condition()}]") for r in e.refusals)
        groups.setdefault(items, []).append(e.name)
    lines = ["| entries | refused (the switches it needs, where it needs any) |", "|---|---|"]
    for items, names in groups.items():
        lines.append(f"| {', '.join(names)} | {'; '.join(items) if items else '—'} |")
    return "\n".join(lines) + "\n"
