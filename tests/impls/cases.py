"""Fixed, deterministic small cases for every registry entry and variant.

Used by the implementation tests (the full Hypothesis harness lives in
``conformance/``). A case is built from the registry entry alone, so a new
entry is covered without touching this file.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import numpy as np

from ftspec.spec import PAPER, PRESETS, SWITCHES, VariantSet
from ftspec.spec.params import resolve_shape
from ftspec.spec.registry import REGISTRY, Entry

#: Small hyperparameters; tied unembedding needs d_f = d_e.
HYPER = dict(N_V=11, d_e=6, ell=5, ell_max=7, d_in=5, d_attn=3, d_out=4, T=4, d_x=5, d_z=4,
             ell_x=3, ell_z=4, H=2, d_mid=3, d_mlp=8, L=2, L_enc=2, L_dec=2, d_f=6)


@dataclasses.dataclass
class Case:
    entry: Entry
    hyper: dict[str, int]
    variant: VariantSet
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray]

    @property
    def id(self) -> str:
        return f"{self.entry.name}[{self.variant.describe()}]"

    def spec_inputs(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.inputs.items()}

    def spec_params(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.params.items()}


def hyper_for(entry: Entry) -> dict[str, int]:
    return {k: HYPER[k] for k in entry.hyper}


def variants_for(entry: Entry) -> list[VariantSet]:
    """The paper's set, each relevant switch moved to each other value, and the presets."""
    out = [PAPER]
    for name in sorted(entry.switches):
        sw = SWITCHES[name]
        if name == "epsilon":
            continue
        if name == "epsilon_placement":
            out += [PAPER.replace(epsilon=1e-5, epsilon_placement=p) for p in ("inside_root", "outside_root")]
            continue
        for choice in sw.choices:
            if choice != sw.paper:
                out.append(PAPER.replace(**{name: choice}))
    for v in PRESETS.values():
        if any(k in entry.switches for k in v.differences()) and v not in out:
            out.append(v)
    # combinations that only bite together
    if {"embedding_norm", "affine"} <= entry.switches:
        out.append(PAPER.replace(embedding_norm=True, norm="rms_norm"))
    if {"norm_placement", "norm"} <= entry.switches:
        out.append(PAPER.replace(norm="rms_norm", norm_placement="pre", affine="scale"))
    return out


def make_case(entry: Entry, variant: VariantSet, seed: int = 0, hyper: dict[str, int] | None = None,
              empty_query: bool = False) -> Case:
    """Well-scaled random inputs and parameters for ``entry`` under ``variant``."""
    hp = dict(hyper or hyper_for(entry))
    rng = np.random.default_rng([seed, sum(map(ord, entry.name)), int(variant.hash, 16) % 2**32])
    inputs: dict[str, np.ndarray] = {}
    for spec in entry.inputs:
        shape = resolve_shape(spec.shape, hp)
        if spec.kind == "token":
            inputs[spec.name] = rng.integers(0, hp["N_V"], size=shape).astype(np.int64)
        elif spec.kind == "position":
            inputs[spec.name] = rng.integers(0, hp["ell_max"], size=shape).astype(np.int64)
        elif spec.kind == "mask":
            m = rng.random(shape) < 0.6
            m[rng.integers(0, shape[0], size=shape[1]), np.arange(shape[1])] = True
            if empty_query:
                m[:, -1] = False
            inputs[spec.name] = m
        else:
            inputs[spec.name] = rng.normal(size=shape)
    params: dict[str, np.ndarray] = {}
    for name, shape in entry.param_shapes(hp, variant).items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("gamma"):
            params[name] = 1.0 + 0.2 * rng.normal(size=shape)
        elif len(shape) == 1:
            params[name] = 0.2 * rng.normal(size=shape)
        elif name in ("W_e", "W_p"):
            params[name] = rng.normal(size=shape)
        else:
            params[name] = rng.normal(size=shape) / np.sqrt(shape[1])
    return Case(entry, hp, variant, inputs, params)


def all_cases() -> Iterator[Case]:
    for entry in REGISTRY.values():
        for variant in variants_for(entry):
            yield make_case(entry, variant)
            if "empty_query" in entry.switches and variant.empty_query != "error":
                yield make_case(entry, variant, seed=1, empty_query=True)
