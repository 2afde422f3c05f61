"""Default hyperparameters: the entries' own sizes, and widths fitted to a variant set."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Optional, Union

from ftspec.spec.entry import implied_multiples
from ftspec.spec.position_bias import t5_bucket
from ftspec.spec.registry import REGISTRY, Entry, entry as registry_entry
from ftspec.spec.variants import VariantSet

from ..value_flow import equal_widths


#: {entry: {hyperparameter: size}}: each entry's ``sizes`` (declared in its ``Entry``), the
#: defaults of every fixed case (plugin tests, spec self-tests, zoo witnesses) and the fixtures
DEFAULT_HYPER: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {name: MappingProxyType(dict(e.sizes)) for name, e in REGISTRY.items()})


def _resolve(entry: Union[str, Entry]) -> Entry:
    return registry_entry(entry) if isinstance(entry, str) else entry


def default_hyper(entry: Union[str, Entry], variant: Optional[VariantSet] = None, **overrides: int) -> dict[str, int]:
    """The entry's ``DEFAULT_HYPER`` row with ``overrides``, in ``entry.hyper`` order; with a
    ``variant``, the widths it forces equal (``value_flow.equal_widths``: d_mlp = d_e under
    ``mlp="one_layer"``) copied from their leader."""
    e = _resolve(entry)
    row = e.sizes
    unknown = set(overrides) - set(e.hyper)
    if unknown:
        raise ValueError(f"{e.name}: no hyperparameter {sorted(unknown)}; it has {list(e.hyper)}")
    out = {k: int(overrides.get(k, row[k])) for k in e.hyper}
    return fit_widths(e, variant, out) if variant is not None else out


def fit_widths(entry: Union[str, Entry], variant: VariantSet, hyper: Mapping[str, int]) -> dict[str, int]:
    """``hyper`` with each width ``variant`` forces equal to another set to it (followers only move),
    and each size it needs a multiple of k (RoPE's even d_attn, H a multiple of ``kv_group``;
    ``spec.entry.implied_multiples``) raised to the next multiple."""
    e = _resolve(entry)
    out = dict(hyper)
    width = out.get("d_x", out.get("d_e"))
    if variant.attn_scale == "sqrt_d_model_per_head" and "attn_scale" in e.switches and "H" in out and \
            "d_attn" in out and width == out["H"] * out["d_attn"]:
        out["d_attn"] += 1  # d_x/H ≠ d_attn: otherwise Gemma 2 27B's scale is the paper's √d_attn here
    for name, k in implied_multiples(e, variant).items():
        if name in out:
            out[name] = -(-out[name] // k) * k
    if variant.kv_order != "consecutive" and "H" in out and "kv_group" in e.switches:
        out["H"] = max(out["H"], 2 * variant.kv_group)  # two kv heads at least: an order to see
    if variant.rotary != "none" and "d_attn" in out and "rotary" in e.switches:
        out["d_attn"] = max(out["d_attn"], 4)  # two RoPE pairs at least: a pairing to see
    for follower, leader in equal_widths(e, variant):
        if follower in out and leader in out:
            out[follower] = out[leader]
    for name in ("ell", "ell_x"):  # T5's logarithmic buckets within the (self-attended) sequence
        if name in out and bucket_length(e, variant, None):
            out[name] = max(out[name], bucket_length(e, variant, None))
    return out


#: the longest sequence a length raised for T5's buckets asks for (``bucket_length``)
MOST_BUCKET_LENGTH = 8


def bucket_length(e: Entry, variant: VariantSet, context: Optional[int]) -> int:
    """Under T5's relative bias (``rel_bias="t5_buckets"``, at an entry that reads it), the least length ℓ
    whose farthest distance ℓ − 1 reaches the second logarithmic bucket of the entry's direction (causal
    where the entry reads ``position_bias``, a causal self-attention's switch), so that a logarithmic bucket,
    its boundary and, bidirectionally, keys on both sides of the query show: 5 at 6 buckets and max_distance
    5 causally, 4 bidirectionally; 7 and 6 at 8 and 10. 0 where that length is above ``MOST_BUCKET_LENGTH``
    or ``context`` (T5's 32 and 128: distance 18 causally), or the bias is off."""
    if variant.rel_bias != "t5_buckets" or "rel_bias" not in e.switches:
        return 0
    causal = "position_bias" in e.switches
    n = variant.rel_buckets // (1 if causal else 2)
    for ell in range(2, MOST_BUCKET_LENGTH + 1):
        if t5_bucket(1 - ell, not causal, variant.rel_buckets, variant.rel_max_distance) % n > n // 2:
            return ell if context is None or ell <= context else 0
    return 0
