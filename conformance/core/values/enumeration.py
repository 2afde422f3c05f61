"""Variant sets: the one enumeration of the sets worth a fixed case, and ε's values."""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from ftspec.spec.entry import Kind
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import PAPER, PRESETS, READ_WITH, SAME_MATHEMATICS, SWITCHES, VariantSet

from .sizes import _resolve


#: PyTorch/HF GPT-2, Flax/T5 and the Annotated Transformer, BERT, a large one (the strategies draw from these)
EPSILONS = (1e-5, 1e-6, 1e-12, 1e-3)
#: ε values the forensics try (diagnosis, identify), inside or outside the root: the strategies'
#: values, the ν = 1e-4 of seed 004 (numeric tutorial) and the machine epsilons that real defaults
#: use (nn.RMSNorm(eps=None): finfo(dtype).eps). A finite list: an ε between two of these fits the
#: nearer one, or none.
EPSILON_CANDIDATES = tuple(sorted(set(EPSILONS) | {1e-4, float(np.finfo(np.float32).eps),
                                                   float(np.finfo(np.float64).eps)}))
#: ε of the enumerated single-switch sets that move ``epsilon_placement``
PLACED_EPSILON = {"inside_root": 1e-5, "outside_root": 1e-6}
assert set(PLACED_EPSILON.values()) <= set(EPSILONS)

_NORM_SWITCHES = frozenset(n for n, sw in SWITCHES.items() if sw.group == "normalisation")
#: switches that change how a whole model is wired: they get single-switch sets at the whole models
#: (T5's bias, spec 2.17: one table per stack, read by every layer of it, is a model's wiring)
_WIRING_SWITCHES = frozenset({"norm_placement", "rel_bias"})
#: combinations that only bite together: (switches the entry needs, label, the changes)
COMBINATIONS: tuple[tuple[frozenset[str], str, dict[str, Any]], ...] = (
    (frozenset({"embedding_norm", "affine"}), "embedding-rms-norm", dict(embedding_norm=True, norm="rms_norm")),
    (frozenset({"norm_placement", "norm"}), "pre-rms-norm-scale",
     dict(norm="rms_norm", norm_placement="pre", affine="scale")),
    # SwiGLU (Shazeer 2020; LLaMA): the gate's product with the activation SiLU alone never reaches
    (frozenset({"mlp", "activation"}), "swiglu", dict(mlp="gated", activation="silu")),
)


def _updates(e: Entry) -> bool:
    return any(s.kind == Kind.RATE for s in e.inputs)


def _whole_model(e: Entry) -> bool:
    """An architecture or a model's loss: the layer switches reach it through the presets."""
    return e.family == "architecture" or (e.family == "training" and e.output_schema is None
                                          and not _updates(e))


def _single_switches(e: Entry) -> list[str]:
    """The switches moved one at a time at ``e``.

    Forward entries: all of theirs; whole models (architectures, losses):
    only those that are not a layer's own (a switch acting inside a layer
    has its single-switch sets at the four layers); gradients, SGD steps,
    training loops and inference: none (their outputs are as large as θ; the
    presets reach them)."""
    if e.family in ("training", "inference") and not _whole_model(e):
        return []
    names = set(e.switches) - {"epsilon", "empty_query"}  # ε goes with its placement; empty queries are edges
    if _whole_model(e):
        inside = frozenset().union(*(x.switches for x in REGISTRY.values() if x.family == "layer"))
        names -= inside - _WIRING_SWITCHES
    return sorted(names)


def variant_enumeration(entry: Union[str, Entry]) -> list[tuple[str, VariantSet]]:
    """The variant sets worth a fixed case of ``entry``, labelled, in order:

    ``paper``; ``preset-NAME`` for every preset that moves a switch the
    entry uses (not for entries that update parameters: a step's preset
    effect is the gradient's); ``switch-NAME-VALUE`` for each switch of
    ``_single_switches`` at each non-paper value (ε placements with
    ``PLACED_EPSILON``; at an entry whose only norm is the embedding's, the
    norm switches with ``embedding_norm`` on; not the values of
    ``SAME_MATHEMATICS``, such as ``variance="one_pass"``: a case of one
    would repeat its exact twin's to the last bits, and the fixtures stay as
    they were; the strategies still draw them); ``combination-LABEL`` for
    ``COMBINATIONS`` of switches that only bite together, where the entry
    has single-switch sets and the switches involved (and the set is not
    already listed). No set is listed twice.
    """
    e = _resolve(entry)
    out: list[tuple[str, VariantSet]] = [("paper", PAPER)]
    if not _updates(e):
        for name, v in PRESETS.items():
            if v != PAPER and (set(v.differences()) - e.unread(v)) & e.switches:  # a switch read here
                out.append((f"preset-{name}", v))
    singles = _single_switches(e)
    # an entry whose only norm is the embedding's normalises only under embedding_norm=True
    norm_base = PAPER.replace(embedding_norm=True) if "embedding_norm" in e.switches and \
        "norm_placement" not in e.switches else PAPER
    for name in singles:
        base = norm_base if name in _NORM_SWITCHES else PAPER
        base = base.replace(**e.read_with.get(name, {}))  # read here only with another switch's value
        if name == "epsilon_placement":
            for placement, eps in PLACED_EPSILON.items():
                out.append((f"switch-epsilon-{placement}", base.replace(epsilon=eps, epsilon_placement=placement)))
            continue
        base = base.replace(**READ_WITH.get(name, {}))  # a switch read only with another one on
        for choice in SWITCHES[name].choices:
            if choice != SWITCHES[name].paper and (name, choice) not in SAME_MATHEMATICS:
                out.append((f"switch-{name}-{str(choice).lower()}", base.replace(**{name: choice})))
    if singles:
        for needs, label, changes in COMBINATIONS:
            v = PAPER.replace(**changes)
            if needs <= e.switches and v not in {w for _, w in out}:
                out.append((f"combination-{label}", v))
    return out


def stated_by_twin(entry: Union[str, Entry], slug: str, variant: VariantSet) -> bool:
    """Whether ``variant_enumeration``'s set ``slug`` of a padded entry (``padded_NAME``, whose
    unpadded twin ``NAME`` is in the registry) moves only switches its twin has: the twin's fixed
    cases state that mathematics on the same code path with every position real, so the fixtures
    and the plugin tests keep, of a padded entry, its ``paper``, presets and own switches
    (``empty_query``) and leave out these copies."""
    e = _resolve(entry)
    twin = REGISTRY.get(e.name.removeprefix("padded_")) if e.name.startswith("padded_") else None
    if twin is None or slug == "paper" or slug.startswith("preset-"):
        return False
    return not set(variant.differences()) - twin.switches
