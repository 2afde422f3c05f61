"""The variant sets a diagnosis tries: single switch changes, presets, a mask's other readings.

Also how a case is fitted to a set it tries (``_adapt_params``: the parameters that set takes) and
the search's record of a set (``_record``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.spec import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PRESETS, SWITCHES, VariantSet

from ...core.values import EPSILON_CANDIDATES

_PLACED = ("inside_root", "outside_root")


def _groups(entry: Entry) -> list[str]:
    names = sorted(entry.switches - {"epsilon", "epsilon_placement"})
    if entry.switches & {"epsilon", "epsilon_placement"}:
        names.append("epsilon")
    return names


def _group_changes(group: str, declared: VariantSet) -> list[dict[str, Any]]:
    """Every value of one switch (ε: with its placement) other than the declared one."""
    if group == "epsilon":
        options = [{"epsilon": 0.0, "epsilon_placement": "none"}]
        options += [{"epsilon": e, "epsilon_placement": p} for p in _PLACED for e in EPSILON_CANDIDATES]
        return [o for o in options
                if (o["epsilon"], o["epsilon_placement"]) != (declared.epsilon, declared.epsilon_placement)]
    return [{group: c} for c in SWITCHES[group].choices if c != getattr(declared, group)]


def _singles(entry: Entry, declared: VariantSet) -> list[tuple[str, dict[str, Any]]]:
    return [(g, ch) for g in _groups(entry) for ch in _group_changes(g, declared)]


def _presets(entry: Entry, declared: VariantSet) -> list[tuple[str, dict[str, Any]]]:
    """Each preset restricted to the entry's switches (the rest as declared)."""
    out = []
    for name, p in PRESETS.items():
        changes = {k: getattr(p, k) for k in sorted(entry.switches) if getattr(p, k) != getattr(declared, k)}
        if changes:
            out.append((name, changes))
    return out


def _record(changes: dict[str, Any], preset: Optional[str], reading: Optional[tuple[str, str]],
            declared: VariantSet) -> dict[str, Any]:
    """A fresh record (not fitting yet)."""
    rec: dict[str, Any] = {"changes": dict(changes), "declared": {k: getattr(declared, k) for k in changes},
                           "presets": [preset] if preset else [], "ratio": math.inf, "fits": False}
    if reading is not None:  # the same switches, an input read another way (a mask's polarity)
        name, how = reading
        rec["changes"] = {f"input {name}": how, **rec["changes"]}
        rec["declared"] = {f"input {name}": _AS_DECLARED[how], **rec["declared"]}
    return rec


def _without_neutral_value(name: str) -> bool:
    """A weight no value of which stands for its absence: a further hidden layer of a deeper MLP
    (``mlp_hidden.{k}.W``/``.b``: act(W h + b) is never h for every h) or the linear branch of a gated
    one (``W_mlp{i}_lin``/``b_mlp{i}_lin``: without its bias, no V makes V x = 1)."""
    return name.startswith("mlp_hidden.") or ".mlp_hidden." in name or name.endswith("_lin")


def _adapt_params(entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
                  params: Mapping[str, np.ndarray]) -> Optional[tuple[Mapping[str, np.ndarray], list[str]]]:
    """The case's parameters fitted to ``variant``'s parameter set: those it does not take are
    dropped (the implementation ignored them: no b_u under logit_bias=False, no final γ, β); those
    it takes and the case lacks get the value an implementation without them computes with (γ = 1,
    biases and β = 0, LongRoPE's factors 1, an untied W_u = W_eᵀ). None when ``variant`` takes weights the case lacks
    and that have no such value (``_without_neutral_value``): an implementation called with the
    case's parameters cannot have computed under that set, so it is not judged."""
    try:
        shapes = entry.param_shapes(dict(hyper), variant)
    except (SpecError, KeyError, ValueError):
        return params, []
    if set(shapes) == set(params):
        return params, []
    if any(_without_neutral_value(name) for name in shapes if name not in params):
        return None
    out: dict[str, np.ndarray] = {}
    notes = [f"dropped {k}" for k in params if k not in shapes]
    for name, shape in shapes.items():
        if name in params:
            out[name] = params[name]
            continue
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "W_u" and "W_e" in params and tuple(np.shape(params["W_e"])[::-1]) == tuple(shape):
            out[name] = np.ascontiguousarray(np.asarray(params["W_e"]).T)
            notes.append(f"{name} = W_e transposed")
        else:  # γ and LongRoPE's factors and attention factor (spec 2.17) are 1 where absent: the identity
            one = leaf.startswith("gamma") or leaf in ("rope_ext", "rope_mscale")
            out[name] = np.ones(shape) if one else np.zeros(shape)
            notes.append(f"{name} = {'1' if one else '0'}")
    return out, notes


_AS_DECLARED = {"inverted (True = blocked)": "as declared (True = may attend)",
                "transposed ([query, key])": "as declared ([key, query])"}


def _readings(entry: Entry, inputs: Mapping[str, np.ndarray]) -> list[tuple[str, str, np.ndarray]]:
    """Other readings of a mask input that real code makes: inverted polarity (True = blocked, as
    nn.MultiheadAttention's attn_mask) and, for a square mask, the transposed index order."""
    out = []
    for spec in entry.inputs:
        m = inputs.get(spec.name)
        if spec.kind != Kind.MASK or m is None or np.ndim(m) != 2:
            continue
        m = np.asarray(m, dtype=bool)  # [t_z, t_x]
        out.append((spec.name, "inverted (True = blocked)", ~m))
        if m.shape[0] == m.shape[1] and not np.array_equal(m, m.T):
            out.append((spec.name, "transposed ([query, key])", np.ascontiguousarray(m.T)))
    return out
