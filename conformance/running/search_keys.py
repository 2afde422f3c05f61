"""What identifies a search's draws: the seed of each round and shard, a
shard's share of the examples, the digests that key a value set, and the case
space of an entry whose every case can be listed (conformance/running/runner.py
uses them to plan, the search (impl_search.py, drawn_case.py) to draw and to
key what it has judged)."""

from __future__ import annotations

import hashlib
import itertools
import math
from typing import Any, Mapping, Optional

import numpy as np

from ftspec.impls.api import Implementation, Limits
from ftspec.spec import PAPER, SpecError
from ftspec.spec.registry import Entry
from ftspec.spec.variants import SWITCHES

from ..core.calling import Prepared

__all__ = ["SPACE_CAP", "case_space", "shard_examples", "shard_seed"]

#: the most (variant, sizes) pairs ``case_space`` enumerates (the mask's are 128, a sinusoid's 160)
SPACE_CAP = 4096


def _digest(arrays: dict[str, np.ndarray]) -> bytes:
    h = hashlib.sha256()
    for k in sorted(arrays):
        v = np.ascontiguousarray(arrays[k])  # hashed in place: no copy of an array already in C order
        h.update(f"{k}{v.dtype.str}{v.shape}".encode())
        h.update((v if v.ndim else v.reshape(1)).data)
    return h.digest()


def _prepared_digests(prepared: Prepared) -> tuple[bytes, bytes]:
    """(inputs, parameters) digests of a prepared case, computed once per object."""
    found = getattr(prepared, "_ftspec_digests", None)
    if found is None:
        found = (_digest(prepared.inputs), _digest(prepared.params))
        prepared._ftspec_digests = found  # type: ignore[attr-defined]
    return found


def shard_seed(seed: int, round_: int, shard: tuple[int, int] = (0, 1)) -> int:
    """The Hypothesis seed of a search round: the unsharded formula for one shard (runs made before
    shards existed draw the same cases), otherwise a hash of (seed, round, shard k, shards n), so
    that shards draw different cases and the same seed and shard count give the same cases."""
    k, n = shard
    if n == 1:
        return seed * 7919 + round_
    text = f"ftspec-shard/{seed}/{round_}/{k}/{n}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def shard_examples(examples: int, shard: tuple[int, int]) -> int:
    """Shard k of n's share of ``examples`` (the shares add up to ``examples``)."""
    k, n = shard
    return examples // n + (1 if k < examples % n else 0)


def case_space(entry: Entry, variants: Any, limits: Limits, budget: str) -> Optional[frozenset[tuple]]:
    """Every case a search of ``entry`` can draw, as (variant projection, sizes) pairs (``_space_key``),
    where that is few and known: the entry takes no input and no parameter (a mask, a sinusoid
    table), so a case is its variant set and its sizes, and the sizes lie within the budget's bounds
    (conformance/core/strategies/_hyper.py draws each size within [its minimum, its bound], ℓ_max
    within the context; the entry's check decides the rest). None otherwise: an implementation's
    limits settle sizes (they may move), inputs or parameters vary without end, or the product
    exceeds ``SPACE_CAP``. The set may hold pairs the strategy never draws (it is a superset of its
    draws): a search claims exhaustion only when it has judged every pair of it."""
    from ..core.strategies._budgets import hyper_kind, resolve_budget
    from ..core.values import default_hyper

    if entry.inputs or not limits.unconstrained:
        return None
    switches = sorted(entry.switches)
    if variants == "all":
        projections = set(itertools.product(*(SWITCHES[s].choices for s in switches)))
    else:
        projections = {tuple(getattr(v, s) for s in switches) for v in variants}
    b = resolve_budget(budget, entry)
    names = list(entry.hyper)
    top = {n: max(b.bound(n), entry.minimum.get(n, 1)) for n in names if n != "ell_max"}
    if "ell_max" in names:
        lengths = [top[n] for n in names if n != "ell_max" and hyper_kind(n) == "length"]
        top["ell_max"] = max([b.context, entry.minimum.get("ell_max", 1), *lengths])
    if len(projections) * math.prod(top.values()) > SPACE_CAP:
        return None
    space = set()
    for projection in projections:
        variant = PAPER.replace(**dict(zip(switches, projection)))
        if entry.param_schema(default_hyper(entry, variant), variant):
            return None
        for sizes in itertools.product(*(range(1, top[n] + 1) for n in names)):
            hyper = dict(zip(names, sizes))
            if entry.check is not None:
                try:
                    entry.check(hyper, variant)
                except SpecError:
                    continue
            space.add(_space_key(entry, variant, hyper))
    return frozenset(space)


def _space_key(entry: Entry, variant: Any, hyper: Mapping[str, int]) -> tuple:
    """A case of an entry without inputs or parameters: its variant set's switches that the entry
    reads, and its sizes."""
    return (tuple(getattr(variant, s) for s in sorted(entry.switches)), tuple(sorted(hyper.items())))


def _shapes_per_search(impl: Implementation) -> Optional[int]:
    """The bound an implementation declares on the sizes drawn per search and variant
    (``extra["shapes_per_search"]``, a positive whole number), or None."""
    extra = getattr(impl, "extra", None)
    value = extra.get("shapes_per_search") if isinstance(extra, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
