"""Inputs of every kind, and whole cases (``build``)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Union

import numpy as np

from ftspec.spec.entry import Kind
from ftspec.spec.params import resolve_shape
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, VariantSet

from ..dtypes import FORMATS, round_to
from ..value_flow import INDEX_LIMITS, padded
from .magnitudes import generator
from .parameters import parameter_values
from .sizes import default_hyper, _resolve
from .styles import _check_dtype, check_style, real_input


def _exact(x: float, dtype: str) -> np.ndarray:
    return np.array(float(round_to(np.array(x), dtype)))


def _below_one(u: np.ndarray, dtype: str) -> np.ndarray:
    """Variates rounded to ``dtype`` and kept below 1."""
    return np.minimum(round_to(u, dtype), 1.0 - 2.0 ** -FORMATS[dtype].mantissa_bits)


def _mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random, every query column keeping at least one key."""
    m = np.asarray(rng.random(shape) < 0.6)
    m[rng.integers(0, shape[0], size=shape[1]), np.arange(shape[1])] = True
    return m


def _padding(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Right padding of at least one position when there are two or more; position 0 real, so
    no query is left without a key under any convention (the strategies draw the rest)."""
    pad = np.ones(shape, dtype=bool)
    if pad.size >= 2:
        pad.flat[int(rng.integers(1, pad.size)):] = False
    return pad


def _flags(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random, both values present when there are two positions."""
    f = rng.random(shape) < 0.5
    if f.size >= 2 and (f == f.flat[0]).all():
        f.flat[int(rng.integers(0, f.size))] = not f.flat[0]
    return f


#: one rule per kind: (rng, shape, hyper, spec, dtype) -> array; real inputs are ``real_input``'s
_KIND_RULES: dict[Kind, Callable[..., np.ndarray]] = {
    Kind.TOKEN: lambda rng, shape, h, s, dt: rng.integers(0, h[INDEX_LIMITS[Kind.TOKEN]], size=shape,
                                                          dtype=np.int64),
    Kind.POSITION: lambda rng, shape, h, s, dt: rng.integers(0, h[INDEX_LIMITS[Kind.POSITION]], size=shape,
                                                             dtype=np.int64),
    Kind.MASK: lambda rng, shape, h, s, dt: _mask(rng, shape),
    Kind.FLAG: lambda rng, shape, h, s, dt: _flags(rng, shape),
    Kind.PADDING: lambda rng, shape, h, s, dt: _padding(rng, shape),
    Kind.LENGTH: lambda rng, shape, h, s, dt: rng.integers(1, h[s.bound] + 1, size=shape, dtype=np.int64),
    Kind.VARIATE: lambda rng, shape, h, s, dt: _below_one(rng.random(shape), dt),
    Kind.PROBABILITY: lambda rng, shape, h, s, dt: np.broadcast_to(_exact(0.5, dt), shape).copy(),
    Kind.RATE: lambda rng, shape, h, s, dt: np.broadcast_to(_exact(0.1, dt), shape).copy(),
    Kind.TEMPERATURE: lambda rng, shape, h, s, dt: np.broadcast_to(_exact(1.0, dt), shape).copy(),
    Kind.DISTRIBUTION: lambda rng, shape, h, s, dt: round_to(
        (lambda p: p / p.sum(axis=-1, keepdims=True))(0.05 + rng.random(shape)), dt),
}


def build(entry: Union[str, Entry], hyper: Optional[Mapping[str, int]] = None, variant: VariantSet = PAPER, *,
          seed: int = 0, style: str = "well-scaled", dtype: str = "float64",
          given: Optional[Mapping[str, Any]] = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The inputs and flat parameters of one case of ``entry`` (deterministic).

    ``hyper``: default ``default_hyper(entry)``. Real inputs follow ``style``
    (``real_input``); the other kinds: tokens and positions uniform, masks
    random with every query keeping a key, flags random with both values,
    lengths uniform in [1, their bound] (the token rows they measure padded
    with token 0 beyond each length), variates uniform in [0, 1), p_mask
    0.5, η 0.1, τ 1, distributions positive; reals exact in ``dtype``
    where the kind says so. ``given``: {input name: value} replacing a built
    input (lengths given are used for the padding). Parameters:
    ``parameter_values`` aimed at these inputs.
    """
    e = _resolve(entry)
    hp = default_hyper(e, variant) if hyper is None else {k: int(hyper[k]) for k in e.hyper}
    check_style(style)
    _check_dtype(dtype)
    given = dict(given or {})
    unknown = set(given) - {s.name for s in e.inputs}
    if unknown:
        raise ValueError(f"{e.name}: no input {sorted(unknown)}; it has {[s.name for s in e.inputs]}")
    inputs: dict[str, np.ndarray] = {}
    for spec in e.inputs:
        shape = resolve_shape(spec.shape, hp)
        if spec.kind == Kind.REAL:
            value = real_input(e, spec, hp, variant, seed=seed, dtype=dtype, style=style)
        elif spec.kind in _KIND_RULES:
            value = _KIND_RULES[spec.kind](generator(seed, spec.name), shape, hp, spec, dtype)
        else:
            raise ValueError(f"{e.name}: no value rule for input {spec.name!r} of kind {spec.kind!r}")
        if spec.name in given:
            value = np.asarray(given[spec.name], dtype=value.dtype).reshape(shape)
        inputs[spec.name] = value
    for name, length in padded(e).items():  # token 0 beyond each length
        if name not in given:
            for row, n in zip(inputs[name].reshape(-1, inputs[name].shape[-1]), inputs[length].reshape(-1)):
                row[int(n):] = 0
    params = parameter_values(e, hp, variant, seed=seed, dtype=dtype, style=style, inputs=inputs)
    return inputs, params
