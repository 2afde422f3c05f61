"""Fixed cases that show each mutant is a real bug.

``witness_case(mutant)`` builds one deterministic case (inputs, parameters,
hyperparameters, variant) from the mutant's ``Witness`` and moderate
defaults, independently of the harness's Hypothesis strategies (plain
seeded NumPy draws). ``differs(mutant)`` runs the correct base
implementation and the mutant on it and says whether they disagree: an
exception where the base returns, a different shape, exact outputs that
differ, real outputs beyond a relative 1e-11 at float64 (1e-4 at float32,
1e-2 at float16: far above rounding), or, for a nondeterminism bug, two
identical calls of the mutant that differ.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.impls.api import Context, Implementation
from ftspec.spec.registry import entry as registry_entry
from ftspec.spec.variants import PAPER, VariantSet

from .injection import Mutant, build

__all__ = ["DEFAULT_HYPER", "Outcome", "WitnessCase", "differs", "fixed_case", "witness_case"]

#: moderate sizes: every dimension ≥ 2 and different from the others where that matters
DEFAULT_HYPER = {
    "N_V": 7, "d_e": 4, "ell": 3, "ell_max": 6, "d_in": 4, "d_attn": 3, "d_out": 2, "T": 3, "d_x": 4,
    "d_z": 3, "ell_x": 3, "ell_z": 4, "H": 2, "d_mid": 2, "d_mlp": 5, "L": 2, "L_enc": 2, "L_dec": 2,
    "d_f": 4, "N": 2, "N_epochs": 2, "ell_gen": 2,
}


@dataclass
class WitnessCase:
    algorithm: str
    hyper: dict[str, int]
    variant: VariantSet
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    dtype: str
    batched: bool = False


def _param(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    leaf = name.rsplit(".", 1)[-1]
    if leaf.startswith("gamma"):
        return 1.0 + 0.1 * rng.standard_normal(shape)
    if leaf.startswith("beta") or leaf.startswith("b_"):
        return 0.1 * rng.standard_normal(shape)
    if leaf in ("W_e", "W_p"):
        return rng.standard_normal(shape)
    return rng.standard_normal(shape) / math.sqrt(shape[-1])


def _input(rng: np.random.Generator, spec: Any, shape: tuple[int, ...], hyper: Mapping[str, int]) -> np.ndarray:
    kind = spec.kind
    if kind == "real":
        return rng.standard_normal(shape)
    if kind == "token":
        return rng.integers(0, hyper["N_V"], size=shape).astype(np.int64)
    if kind == "position":
        return rng.integers(0, hyper["ell_max"], size=shape).astype(np.int64)
    if kind == "mask":
        m = rng.random(shape) < 0.5
        m[rng.integers(0, shape[0], size=shape[1]), np.arange(shape[1])] = True  # no empty query
        return m
    if kind == "flag":
        f = rng.random(shape) < 0.5
        f.flat[0] = True
        return f
    if kind == "length":
        return rng.integers(1, hyper[spec.bound] + 1, size=shape).astype(np.int64)
    if kind == "variate":
        return rng.random(shape)
    if kind == "probability":
        return np.full(shape, 0.5)
    if kind == "distribution":
        p = rng.random(shape) + 0.05
        return p / p.sum()
    if kind == "rate":
        return np.full(shape, 0.1)
    if kind == "temperature":
        return np.full(shape, 0.8)
    raise ValueError(f"no fixed value for input kind {kind!r}")


def fixed_case(algorithm: str, *, hyper: Optional[Mapping[str, int]] = None,
               variant: Optional[Mapping[str, Any]] = None, inputs: Optional[Mapping[str, Any]] = None,
               params: Optional[Mapping[str, Any]] = None, dtype: str = "float64", seed: int = 0,
               batched: bool = False) -> WitnessCase:
    """A deterministic case of ``algorithm`` (defaults: ``DEFAULT_HYPER``, the paper's variant).

    ``batched``: every input gets a leading batch axis of two independently drawn examples."""
    e = registry_entry(algorithm)
    h = {k: int((hyper or {}).get(k, DEFAULT_HYPER[k])) for k in e.hyper}
    v = PAPER.replace(**dict(variant or {})) if variant else PAPER
    if e.check is not None:
        e.check(h, v)
    rng = np.random.default_rng(seed)
    given = dict(inputs or {})
    ins: dict[str, np.ndarray] = {}
    for spec in e.inputs:
        shape = e.input_shapes(h)[spec.name]
        value = _input(rng, spec, shape, h)
        if spec.name in given:
            value = np.asarray(given[spec.name], dtype=value.dtype).reshape(shape)
        if batched:
            value = np.stack([value, _input(rng, spec, shape, h)])
        ins[spec.name] = value
    ps: dict[str, np.ndarray] = {}
    for name, shape in e.param_shapes(h, v).items():
        ps[name] = _param(rng, name, shape)
    for name, value in dict(params or {}).items():
        ps[name] = np.broadcast_to(np.asarray(value, dtype=np.float64), ps[name].shape).copy()
    return WitnessCase(algorithm, h, v, ins, ps, dtype, batched)


def witness_case(m: Mutant) -> WitnessCase:
    w = m.witness
    return fixed_case(w.algorithm or m.breaks[0], hyper=w.hyper, variant=w.variant, inputs=w.inputs,
                      params=w.params, dtype=w.dtype, seed=w.seed, batched=w.batched)


#: differences below these (relative) could be rounding; a bug must exceed them on its witness
_RTOL = {"float64": 1e-11, "float32": 1e-4, "bfloat16": 3e-2, "float16": 1e-2}


@dataclass
class Outcome:
    differs: bool
    detail: str


def _call(impl: Implementation, case: WitnessCase) -> dict[str, np.ndarray]:
    e = registry_entry(case.algorithm)
    kinds = {s.name: s.kind for s in e.inputs}
    from ftspec.conformance.calling import native_dtype, outputs_to_numpy
    from ftspec.conformance.dtypes import round_to

    def conv(name: str, value: np.ndarray, kind: str) -> Any:
        want = native_dtype(kind, case.dtype)
        if want == case.dtype:
            value = round_to(value, case.dtype)
        return impl.from_numpy(np.array(value, copy=True), want, "cpu")

    ins = {k: conv(k, v, kinds[k]) for k, v in case.inputs.items()}
    ps = {k: conv(k, v, "real") for k, v in case.params.items()}
    ctx = Context(case.algorithm, case.dtype, "cpu", dict(case.hyper), case.variant, case.batched)
    out = impl.algorithms[case.algorithm](ins, ps, ctx)
    return outputs_to_numpy(impl, e, out, case.hyper, case.variant)


def differs(m: Mutant, base: Optional[Implementation] = None, case: Optional[WitnessCase] = None) -> Outcome:
    """Run the base implementation and the mutant on the witness case; do they disagree?"""
    from ftspec.impls.discovery import load

    base = base or load(m.base)
    case = case or witness_case(m)
    good = _call(base, case)
    mutant_impl = build(m, base)
    try:
        bad = _call(mutant_impl, case)
    except Exception as exc:  # noqa: BLE001 - a raise where the base returns is a difference
        return Outcome(True, f"raises {type(exc).__name__}: {exc}")
    if m.witness.repeat:  # nondeterminism: identical calls must give identical bits
        for _ in range(10):
            again = _call(mutant_impl, case)
            for name in bad:
                if not np.array_equal(np.asarray(bad[name]), np.asarray(again[name]), equal_nan=True):
                    return Outcome(True, f"two identical calls differ in output {name!r}")
    for name, g in good.items():
        if name not in bad:
            return Outcome(True, f"output {name!r} missing")
        b = np.asarray(bad[name])
        g = np.asarray(g)
        if b.shape != g.shape:
            return Outcome(True, f"output {name!r} shape {b.shape}, expected {g.shape}")
        if g.dtype.kind in "biu" or b.dtype.kind in "biu":
            if not np.array_equal(b, g):
                return Outcome(True, f"output {name!r}: {b.tolist()} vs {g.tolist()}")
            continue
        bf, gf = b.astype(np.float64), g.astype(np.float64)
        if not np.array_equal(np.isnan(bf), np.isnan(gf)):
            return Outcome(True, f"output {name!r}: NaN pattern differs")
        ok = ~np.isnan(gf)
        rtol = _RTOL[case.dtype]
        if not np.allclose(bf[ok], gf[ok], rtol=rtol, atol=rtol * 1e-3):
            err = float(np.max(np.abs(bf[ok] - gf[ok])))
            return Outcome(True, f"output {name!r}: max |difference| {err:.3g}")
    return Outcome(False, f"identical within a relative {_RTOL[case.dtype]:g} on the witness case")


def replace_variant(case: WitnessCase, **changes: Any) -> WitnessCase:
    return dataclasses.replace(case, variant=case.variant.replace(**changes))
