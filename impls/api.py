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
        return out
