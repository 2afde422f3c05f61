"""Building a mutant: a correct implementation with one bug injected.

A mutant wraps the algorithm functions of a bundled plugin. Its bug is one
of: a changed variant (the implementation computes another convention than
the one asked for), changed inputs or parameters before the call, changed
outputs after it, or misbehaviour (raise, hang, mutate inputs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from ftspec.impls.api import Context, Implementation
from ftspec.impls.discovery import load

__all__ = ["Mutant", "build"]

Fn = Callable[[Mapping[str, Any], Mapping[str, Any], Context], Any]
Wrapper = Callable[[Fn, Implementation], Fn]


@dataclass(frozen=True)
class Mutant:
    """One injected bug.

    ``breaks``: the registry entries whose functions carry the bug.
    ``wrap(fn, base)`` returns the buggy function. ``equivalent``: dtypes at
    which the bug cannot change any output (said honestly; such mutants
    are expected to survive there). ``source``: where the bug was seen.
    """

    id: str
    description: str
    breaks: tuple[str, ...]
    wrap: Wrapper
    base: str = "numpy"
    equivalent: tuple[str, ...] = ()
    source: str = ""
    kind: str = "numerics"  # numerics | behaviour
    tags: tuple[str, ...] = field(default_factory=tuple)


def build(m: Mutant, base: Optional[Implementation] = None) -> Implementation:
    """The mutant as an Implementation (correct everywhere but ``m.breaks``)."""
    impl = base or load(m.base)
    algorithms = dict(impl.algorithms)
    for name in m.breaks:
        if name in algorithms:
            algorithms[name] = m.wrap(algorithms[name], impl)
    return dataclasses.replace(impl, name=f"mutant:{m.id}", version=f"{impl.version}+{m.id}",
                               algorithms=algorithms, description=m.description)


# -- wrapper factories ------------------------------------------------------------

def swap_variant(change: Callable[[Any, str], Any]) -> Wrapper:
    """The implementation computes ``change(variant, algorithm)`` instead of the variant asked for."""
    def wrap(fn: Fn, base: Implementation) -> Fn:
        def buggy(inputs, params, ctx):
            return fn(inputs, params, dataclasses.replace(ctx, variant=change(ctx.variant, ctx.algorithm)))
        return buggy
    return wrap


def change_inputs(change: Callable[[dict, dict, Context, Implementation], tuple[dict, dict]]) -> Wrapper:
    def wrap(fn: Fn, base: Implementation) -> Fn:
        def buggy(inputs, params, ctx):
            i, p = change(dict(inputs), dict(params), ctx, base)
            return fn(i, p, ctx)
        return buggy
    return wrap


def change_outputs(change: Callable[[Any, Context, Implementation], Any]) -> Wrapper:
    def wrap(fn: Fn, base: Implementation) -> Fn:
        def buggy(inputs, params, ctx):
            return change(fn(inputs, params, ctx), ctx, base)
        return buggy
    return wrap


def replace_function(make: Callable[[Fn, Implementation], Fn]) -> Wrapper:
    return make


def on_numpy(base: Implementation, value: Any, f: Callable[[Any], Any], dtype: str, device: str) -> Any:
    """Apply a NumPy function to a native array (through the plugin's own conversion)."""
    import numpy as np

    arr = np.asarray(base.to_numpy(value))
    out = np.asarray(f(arr))
    if out.dtype == np.bool_:
        return base.from_numpy(out, "bool", device)
    if out.dtype.kind in "iu":
        return base.from_numpy(out.astype(np.int64), "int64", device)
    return base.from_numpy(out.astype(np.float64), dtype, device)


def names(*groups: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for g in groups:
        out.extend(g)
    return tuple(out)
