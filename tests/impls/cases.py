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

#: Small hyperparameters; tied unembedding needs d_f = d_e; a prompt of
#: ell tokens plus ell_gen - 1 generated ones fits in ell_max.
HYPER = dict(N_V=11, d_e=6, ell=5, ell_max=7, d_in=5, d_attn=3, d_out=4, T=4, d_x=5, d_z=4,
             ell_x=3, ell_z=4, H=2, d_mid=3, d_mlp=8, L=2, L_enc=2, L_dec=2, d_f=6,
             N=3, N_epochs=2, ell_gen=3)
#: training and inference run a whole model per step: smaller still
TRAINING_HYPER = dict(HYPER, d_e=4, d_f=4, d_mlp=6, d_attn=2, d_mid=2, L=1, L_enc=1, L_dec=1, ell=4, ell_x=3,
                      ell_z=3, ell_max=6, N_V=7)


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
    table = TRAINING_HYPER if entry.family in ("training", "inference") else HYPER
    return {k: table[k] for k in entry.hyper}


def variants_for(entry: Entry) -> list[VariantSet]:
    """The paper's set, each relevant switch moved to each other value, and the presets.

    Entries that only compose others (SGD steps, training loops, inference)
    get the paper's set and the presets: their per-switch behaviour is that
    of the loss, gradient and forward entries, which get every switch.
    """
    if entry.family in ("training", "inference") and not entry.name.endswith(("_loss", "_gradient")):
        return [PAPER] + [v for v in PRESETS.values() if v != PAPER and any(k in entry.switches for k in v.differences())]
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


#: every temperature regime: the argmax limit, below and above 1, 1, the uniform limit
TAUS = (0.0, 0.7, 1.0, 2.5, float("inf"))


def make_case(entry: Entry, variant: VariantSet, seed: int = 0, hyper: dict[str, int] | None = None,
              empty_query: bool = False, tau: float | None = None) -> Case:
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
        elif spec.kind == "flag":
            inputs[spec.name] = rng.random(shape) < 0.5
        elif spec.kind == "length":
            inputs[spec.name] = rng.integers(1, hp[spec.bound] + 1, size=shape).astype(np.int64)
        elif spec.kind == "variate":
            inputs[spec.name] = rng.random(shape)
        elif spec.kind == "probability":
            inputs[spec.name] = np.asarray(0.4)
        elif spec.kind == "rate":
            inputs[spec.name] = np.asarray(0.05)
        elif spec.kind == "temperature":
            inputs[spec.name] = np.asarray(TAUS[seed % len(TAUS)] if tau is None else tau)
        elif spec.kind == "distribution":
            p = rng.random(shape)
            inputs[spec.name] = p / p.sum()
        else:
            inputs[spec.name] = rng.normal(size=shape)
    if entry.family == "training":  # padding beyond each length: token 0
        for name, lengths in (("x", "x_len"), ("z", "z_len")):
            if lengths in inputs:
                for n, length in enumerate(inputs[lengths]):
                    inputs[name][n, length:] = 0
    params: dict[str, np.ndarray] = {}
    for name, shape in entry.param_shapes(hp, variant).items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("gamma"):
            params[name] = 1.0 + 0.2 * rng.normal(size=shape)
        elif len(shape) == 1:
            params[name] = 0.2 * rng.normal(size=shape)
        elif entry.family == "inference" and name == "W_u":  # peaked distributions: varied tokens
            params[name] = 3.0 * rng.normal(size=shape) / np.sqrt(shape[1])
        elif name in ("W_e", "W_p"):
            params[name] = rng.normal(size=shape)
        else:
            params[name] = rng.normal(size=shape) / np.sqrt(shape[1])
    return Case(entry, hp, variant, inputs, params)


def accepted_case(entry: Entry, variant: VariantSet, seed: int = 0, **kw: Any) -> Case:
    """A case the spec accepts: the next seed when it refuses one (e.g. a ReLU
    column that is all zeros before an ε-free layer norm)."""
    from ftspec.spec import SpecError, evaluate

    for attempt in range(20):
        case = make_case(entry, variant, seed=seed + 1000 * attempt, **kw)
        try:
            evaluate(entry.name, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=variant)
        except SpecError:
            continue
        return case
    raise AssertionError(f"no accepted case for {entry.name} under {variant.describe()}")


FORWARD = ("component", "layer", "architecture")
TRAINING = ("training", "inference")


def all_cases(families: tuple[str, ...] = FORWARD) -> Iterator[Case]:
    """Fixed cases of every registry entry of the given families."""
    for entry in REGISTRY.values():
        if entry.family not in families:
            continue
        sampled = any(spec.kind == "temperature" for spec in entry.inputs)
        for variant in variants_for(entry):
            if sampled:  # every τ regime, for the paper's set at least
                for tau in (TAUS if variant == PAPER else TAUS[1:2]):
                    yield accepted_case(entry, variant, tau=tau)
                continue
            yield accepted_case(entry, variant)
            if "empty_query" in entry.switches and variant.empty_query != "error":
                yield accepted_case(entry, variant, seed=1, empty_query=True)
