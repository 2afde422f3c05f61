"""Variant sets: which conventions a case is drawn under.

Only the switches of ``entry.switches`` vary; every other switch stays at the
paper's value, so two cases that mean the same thing carry equal (and equally
hashed) variant sets. The draw is weighted towards what real code uses:

- the paper's set (the shrink target);
- a preset (``PRESETS``) projected onto the entry's switches;
- one switch changed (each non-default value of each switch is reachable);
- several switches changed at once.

ε and its placement move together (ε > 0 exactly when placed): a placement
is drawn with ε from ``EPSILONS``. RoPE's base, its rotated share (``rotary_fraction``,
partial rotary) and its scaling (``rope_scaling``; llama3's at a base of 500000 or more, where its
bands reach the drawn widths) move with ``rotary``: they are read only when a pairing is on, so they
are drawn only with one; likewise the
key/value head order with a group size above 1, and multi-query attention (``kv_heads="one"``, one
key/value head for every H) in place of both, in the same group. A parallel ``residual`` is defined for the pre-LN
placement only, so it is drawn with the paper's placement (pre for GPT-2), overriding a placement
drawn beside it. Local and global layers (``global_every``, Gemma 2 and 3) are drawn with a window
(group "window_layers", in place of the window alone, at the entries that read them), and the local
layers' RoPE base (``rope_local_base``) with a pairing, a window, Gemma 2's alternation and Gemma 3's
global base 1000000, so that the two bases differ; a several-switch draw applies it last, so that no
group drawn beside it turns off what it is read with.

T5's relative bias (``rel_bias="t5_buckets"``, spec 2.13, at the self-attention entries) is drawn with one
pair of its bucket parameters (group "rel_bias", ``T5_BUCKETS``: T5's 32/128 and two small pairs whose
logarithmic buckets the drawn lengths reach); the parameters are read under it alone and never drawn without it.

A switch an entry reads only under another's value (``Entry.read_with``: a causal self-attention's
norm switches, read by its QK-norm alone) is drawn with that value (group "qk_norm_norms": qk_norm="rms"
with ε, its placement and the gain), and a preset's projection leaves it at the paper's value where the
condition fails, so that no drawn set moves a switch the entry does not read.

A value of ``SAME_MATHEMATICS`` (``variance="one_pass"``: another value's
mathematics in another order) is not drawn here: for an implementation
that declares every variant set it would test the same function again
under a looser tolerance. An implementation that declares such a set (the
``flax`` plugin) has its declared sets drawn instead.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

from ftspec.spec.entry import QK_NORM_READ_WITH
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER, PRESETS, SAME_MATHEMATICS, SWITCHES, VariantSet

from ..values import EPSILONS
from ._budgets import resolve_entry

__all__ = ["EPSILONS", "epsilons", "preset_projections", "variant_sets"]

_PLACED = ("inside_root", "outside_root")


def epsilons() -> st.SearchStrategy[dict[str, Any]]:
    """{epsilon, epsilon_placement} with ε > 0 (placed inside or outside the root)."""
    return st.builds(lambda p, e: {"epsilon_placement": p, "epsilon": e},
                     st.sampled_from(_PLACED), st.sampled_from(EPSILONS))


def _groups(entry: Entry) -> list[str]:
    """Switches drawn together: ε and its placement are one group ("epsilon"); RoPE's base is
    drawn with a pairing (group "rotary"), the key/value head order with a group size > 1, or one
    key/value head for every H in their place (group "kv_group"), the biased projections with the
    biases on (group "attn_biases"), the local and global layers with a window (group
    "window_layers"), the local layers' base with all it is read with (group "rope_local_base")."""
    names = sorted(entry.switches - {"epsilon", "epsilon_placement", "rope_base", "rotary_fraction", "rope_scaling",
                                     "kv_order", "kv_heads", "attn_bias_at", "global_every", "rope_local_base",
                                     "rel_buckets", "rel_max_distance"})
    if "global_every" in entry.switches:  # the window with local and global layers (group "window_layers")
        names = sorted([n for n in names if n != "window"] + ["window_layers"])
    if "rope_local_base" in entry.switches:
        names.append("rope_local_base")
    if "attn_bias_at" in entry.switches:
        names = [n for n in names if n != "attn_bias"] + ["attn_biases"]
    if "rope_factors" in entry.switches:  # LongRoPE's factors (spec 2.17) are read with a pairing: drawn with one
        names = ["rotary_factors" if n == "rotary" else n for n in names if n != "rope_factors"]
    # "rel_bias" stays one group: T5's bias with a pair of bucket parameters (``T5_BUCKETS``)
    if _QK_NORMS <= set(entry.read_with):  # the norm switches read with QK-norm alone: drawn with it
        return [n for n in names if n not in _QK_NORMS | {"qk_norm"}] + ["qk_norm_norms"]
    if entry.switches & {"epsilon", "epsilon_placement"}:
        names.append("epsilon")
    return names


#: the norm switches a causal self-attention reads under qk_norm="rms" alone (``spec.entry.QK_NORM_READ_WITH``)
_QK_NORMS = frozenset(QK_NORM_READ_WITH)


def _read_with(entry: Entry) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """``entry.read_with`` as a hashable key (for the cached projections)."""
    return tuple(sorted((k, tuple(sorted(v.items()))) for k, v in entry.read_with.items()))


def preset_projections(entry: Entry) -> list[VariantSet]:
    """Each preset restricted to the entry's switches (the rest at the paper's
    value; a switch the entry reads only under another's value, ``read_with``, where that
    value is not the projection's), without repeats and without the paper's own set."""
    return list(_projections(entry.switches, _read_with(entry)))


@functools.lru_cache(maxsize=None)
def _projections(switches: frozenset[str],
                 read_with: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()) -> tuple[VariantSet, ...]:
    out: list[VariantSet] = []
    for v in PRESETS.values():
        changes = {k: getattr(v, k) for k in switches if getattr(v, k) != getattr(PAPER, k)}
        for k, needs in read_with:  # unread here under the projection's values: the paper's
            if any(changes.get(o, getattr(PAPER, o)) != value for o, value in needs):
                changes.pop(k, None)
        try:
            projected = PAPER.replace(**changes)
        except ValueError:  # ε without its placement: the entry lacks one of the pair
            continue
        if projected != PAPER and projected not in out:
            out.append(projected)
    return tuple(out)


# Strategies are immutable: the ones below are built once per switch group (or set of groups)
# and reused by every draw (building them per draw was most of the cost of drawing a variant).

@functools.lru_cache(maxsize=None)
def _changed(group: str) -> st.SearchStrategy[dict[str, Any]]:
    """One switch group at a value other than the paper's."""
    if group == "epsilon":
        return epsilons()
    if group == "attn_biases":  # no biases, or biases on some projections only (never both at once)
        return st.sampled_from([{"attn_bias": False}, {"attn_bias_at": "qkv"}, {"attn_bias_at": "out"}])
    if group == "kv_group":  # a group size with an order, or one kv head for all H (kv_heads="one": neither read)
        return st.one_of(st.builds(lambda g, o: {"kv_group": g, "kv_order": o},
                                   st.sampled_from(SWITCHES["kv_group"].choices[1:]),
                                   st.sampled_from(SWITCHES["kv_order"].choices)),
                         st.just({"kv_heads": "one"}))
    if group == "residual":  # defined for the pre-LN placement only: drawn with the paper's (GPT-2: pre),
        # after any placement a several-switch draw chose (groups are applied in sorted order)
        return st.sampled_from([{"residual": r, "norm_placement": "paper"} for r in SWITCHES["residual"].choices[1:]])
    if group == "rotary":  # the base, the rotated share (partial rotary) and the scaling move with a pairing
        return st.builds(_rotary,
                         st.sampled_from(SWITCHES["rotary"].choices[1:]),
                         st.sampled_from(SWITCHES["rope_base"].choices),
                         st.sampled_from(SWITCHES["rotary_fraction"].choices),
                         st.sampled_from(SWITCHES["rope_scaling"].choices))
    if group == "rotary_factors":  # a pairing as "rotary" draws it, half the time under LongRoPE (which replaces
        # rope_scaling: drawn at "none", the one value it is read as there)
        return st.one_of(_changed("rotary"), _changed("rotary").map(
            lambda d: {**d, "rope_factors": "longrope", "rope_scaling": "none"}))
    if group == "rel_bias":  # T5's buckets with one of the drawn (num_buckets, max_distance) pairs
        return st.sampled_from([{"rel_bias": "t5_buckets", "rel_buckets": b, "rel_max_distance": d}
                                for b, d in T5_BUCKETS])
    if group == "qk_norm_norms":  # QK-norm with the norm switches it reads there: ε (mostly > 0, as Qwen3's and
        # Gemma 3's), its placement, the gain γ or 1 + γ
        return st.builds(lambda eps, gain: {"qk_norm": "rms", **eps, "norm_gain": gain},
                         st.one_of(epsilons(), st.just({})), st.sampled_from(SWITCHES["norm_gain"].choices))
    if group == "window_layers":  # a window, with every layer local or local and global layers in turn
        return st.builds(lambda w, k: {"window": w, "global_every": k},
                         st.sampled_from(SWITCHES["window"].choices[1:]),
                         st.sampled_from(SWITCHES["global_every"].choices))
    if group == "rope_local_base":  # read with a pairing, a window and global layers: drawn with them
        return st.builds(_local_base,
                         st.sampled_from(SWITCHES["rotary"].choices[1:]),
                         st.sampled_from(SWITCHES["rope_local_base"].choices[1:]))
    values = [c for c in SWITCHES[group].choices
              if c != SWITCHES[group].paper and (group, c) not in SAME_MATHEMATICS]
    return st.sampled_from(values).map(lambda v: {group: v})


#: T5's bucket parameters drawn with rel_bias="t5_buckets" (num_buckets, max_distance): T5's own 32 and 128
#: (its exact buckets alone within the drawn lengths: the logarithmic ones start at distance 8, bidirectional,
#: and 16, causal), and two small pairs whose logarithmic buckets and their boundaries fall within them:
#: 6 and 5 (bidirectional distances 1-2 share bucket 1 and 3-4 bucket 2, keys after the query 4 and 5;
#: causal 0-3 exact, 4 a logarithmic bucket, 5 on the last), 8 and 10 (causal 4 and 5 share bucket 4, then
#: 6, 7). Neither has a whole x = (n − e)·ln(r/e)/ln(D/e) below its last bucket (``t5_bucket``'s decision)
T5_BUCKETS = ((32, 128), (6, 5), (8, 10))


#: the least drawn RoPE base at which Llama 3.1's scaling moves a frequency of the drawn widths (Llama 3's
#: 500000: rotated width 4 puts pair 1, wavelength 2π·500000^½ ≈ 4443, between 2048 and 8192, the blended
#: band; width 6 puts pair 2, ≈ 39584, above 8192). At 10000 every wavelength of width 4, the structural
#: first draw under RoPE, is below 2048 (pair 1: 2π·100 ≈ 628): llama3 would change nothing there.
LLAMA3_BASE = 500000.0


def _rotary(pairing: str, base: float, fraction: float, scaling: str) -> dict[str, Any]:
    """A pairing with its base, rotated share and scaling; llama3's scaling with a base of at least
    ``LLAMA3_BASE`` (where its bands reach the drawn widths, so that a wrong declaration shows)."""
    if scaling == "llama3":
        base = max(base, LLAMA3_BASE)
    return {"rotary": pairing, "rope_base": base, "rotary_fraction": fraction, "rope_scaling": scaling}


#: the global layers' RoPE base drawn with ``rope_local_base``: Gemma 3's (Gemma3TextConfig,
#: transformers 5.24: default_theta global 1000000, local 10000), so that the local one differs
GLOBAL_BASE = 1000000.0


def _local_base(pairing: str, local: float) -> dict[str, Any]:
    """The local layers' base with what it is read with: a pairing at ``GLOBAL_BASE``, the least
    window that drops a key, and Gemma 2's alternation (layer 0 local, layer 1 global)."""
    return {"rotary": pairing, "rope_base": GLOBAL_BASE, "window": SWITCHES["window"].choices[1],
            "global_every": SWITCHES["global_every"].choices[1], "rope_local_base": local}


@functools.lru_cache(maxsize=None)
def _one_switch_of(groups: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(groups).flatmap(_changed)


def _one_switch(entry: Entry) -> st.SearchStrategy[dict[str, Any]]:
    return _one_switch_of(tuple(_groups(entry)))


@functools.lru_cache(maxsize=None)
def _chosen_groups(groups: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(groups), min_size=min(2, len(groups)), max_size=len(groups), unique=True)


@functools.lru_cache(maxsize=None)
def _presets_of(switches: frozenset[str],
                read_with: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()) -> st.SearchStrategy[VariantSet]:
    return st.sampled_from(_projections(switches, read_with))


_WHICH = st.integers(0, 9)


@st.composite
def _several_switches(draw: st.DrawFn, entry: Entry) -> dict[str, Any]:
    """Two or more switch groups (all of them if fewer), each at a non-paper value."""
    chosen = draw(_chosen_groups(tuple(_groups(entry))))
    out: dict[str, Any] = {}
    # groups in sorted order (a parallel residual after a placement), the local base last: it sets the
    # pairing, window and global layers it is read with, which "rotary" or "window_layers" would move
    for group in sorted(chosen, key=lambda g: (g == "rope_local_base", g)):
        out.update(draw(_changed(group)))
    return out


@st.composite
def variant_sets(draw: st.DrawFn, entry: Any) -> VariantSet:
    """A variant set for ``entry`` (an Entry or a registry name).

    Weights (of 10): 2 the paper's set, 3 a preset projection, 3 one switch
    changed, 2 several switches. An entry with fewer than 3 distinct preset
    projections gives the presets 1 per projection and the rest to one-switch
    changes.
    """
    e = resolve_entry(entry)
    if not e.switches:
        return PAPER
    which = draw(_WHICH)
    if which < 2:
        return PAPER
    presets = _projections(e.switches, _read_with(e))
    if which < 2 + min(3, len(presets)):
        return draw(_presets_of(e.switches, _read_with(e)))
    if which < 8:
        return PAPER.replace(**draw(_one_switch(e)))
    return PAPER.replace(**draw(_several_switches(e)))
