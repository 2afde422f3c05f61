"""Calling an implementation: conversion in and out, batching, copies.

The harness owns every conversion. Real inputs are rounded to the call's
dtype first (so only the computation is judged), moved with the plugin's
``from_numpy``, and results come back through ``to_numpy`` as float64.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ftspec.impls.api import Context, Implementation
from ftspec.spec.registry import Entry

from .dtypes import round_to

__all__ = ["Prepared", "call", "native_dtype", "prepare"]


_INTEGER_KINDS = frozenset({"token", "position", "length"})
_BOOLEAN_KINDS = frozenset({"mask", "flag"})


def native_dtype(kind: str, dtype: str) -> str:
    """The ``from_numpy`` dtype name for an input of ``kind`` (reals go in the call's dtype)."""
    if kind in _INTEGER_KINDS:
        return "int64"
    if kind in _BOOLEAN_KINDS:
        return "bool"
    return dtype


class Prepared:
    """Inputs and parameters rounded to ``dtype``, as NumPy arrays (the judged values)."""

    def __init__(self, entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 dtype: str) -> None:
        real = {s.name: s.is_real for s in entry.inputs}
        self.entry = entry
        self.dtype = dtype
        self.inputs = {k: (round_to(v, dtype) if real[k] else np.array(v, copy=True)) for k, v in inputs.items()}
        self.params = {k: round_to(v, dtype) for k, v in params.items()}

    def spec_inputs(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.inputs.items()}

    def spec_params(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.params.items()}


def prepare(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
            dtype: str) -> Prepared:
    return Prepared(entry, inputs, params, dtype)


def to_native(impl: Implementation, entry: Entry, arrays: Mapping[str, np.ndarray], dtype: str,
              device: str, *, params: bool = False) -> dict[str, Any]:
    kinds = {s.name: s.kind for s in entry.inputs}
    out = {}
    for name, value in arrays.items():
        kind = "real" if params else kinds[name]
        want = native_dtype(kind, dtype)
        arr = np.asarray(value, dtype={"int64": np.int64, "bool": np.bool_}.get(want, np.float64))
        out[name] = impl.from_numpy(arr, want, device)
    return out


def outputs_to_numpy(impl: Implementation, entry: Entry, result: Any, hyper: Mapping[str, int],
                     variant: Any) -> dict[str, np.ndarray]:
    """Normalise a plugin's result to {output name: NumPy array}."""
    names = [o.name for o in entry.output_specs(hyper, variant)]
    if isinstance(result, Mapping):
        missing = [n for n in names if n not in result]
        if missing:
            raise TypeError(f"result lacks outputs {missing}; got keys {sorted(result)}")
        raw = {n: result[n] for n in names}
    elif len(names) == 1:
        raw = {names[0]: result}
    else:
        raise TypeError(f"expected a mapping with outputs {names}, got {type(result).__name__}")
    return {n: np.asarray(impl.to_numpy(v)) for n, v in raw.items()}


def call(impl: Implementation, entry: Entry, inputs: Mapping[str, np.ndarray],
         params: Mapping[str, np.ndarray], *, hyper: Mapping[str, int], variant, dtype: str,
         device: str, batched: bool = False) -> dict[str, np.ndarray]:
    """Run ``impl`` on already-rounded NumPy inputs; returns NumPy outputs."""
    fn = impl.algorithms[entry.name]
    ctx = Context(entry.name, dtype, device, dict(hyper), variant, batched)
    native_inputs = to_native(impl, entry, inputs, dtype, device)
    native_params = to_native(impl, entry, params, dtype, device, params=True)
    return outputs_to_numpy(impl, entry, fn(native_inputs, native_params, ctx), hyper, variant)
