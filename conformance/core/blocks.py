"""Blocks: B value sets of one drawn structure, judged as B examples at the cost of a few.

A search's cost was the spec's reference, one Monte Carlo evaluation per example, whose cost is
mostly Python overhead per operation, not arithmetic (docs/benchmarks.md, "Speed"). A block
shares that overhead: Hypothesis draws a case (its structure: variant set, sizes, style, the
inputs that are not real numbers, such as tokens, masks and lengths, and the seeds of its
values); the block is that case followed by ``size - 1`` further value sets of the same
structure, whose real inputs and parameters the value builder (``values.build``) draws from
seeds derived from the case. One evaluation of the spec in Monte Carlo arithmetic then carries
every value set (``tolerances.references``).

Every value set is a whole ``Case``: judged against its own reference and bound, counted as one
example, written and replayed alone when it fails. It is reproducible from the drawn case and
its index (``value_sets`` is deterministic), so the same seed gives the same cases, sharded or
not.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import PAPER

from .case import Case
from .values import build, default_hyper

__all__ = ["MAX_BLOCK", "block_size", "value_sets", "varies"]

#: the most value sets a block may hold (its Monte Carlo numbers are this many times as wide)
MAX_BLOCK = 64


def block_size(e: Entry, size: int) -> int:
    """How many value sets a block of entry ``e`` holds: ``size``, or 1 where a block cannot share
    its evaluation (sampled outputs, judged per value set against traced distributions) or has
    nothing to vary (no real input and no parameter: masks, sinusoidal tables)."""
    if size < 2 or e.trace is not None or not varies(e):
        return 1
    return size


def varies(e: Entry) -> bool:
    """Whether a structure of ``e`` (its sizes, variant set and discrete inputs) leaves values to
    draw: a real input or a parameter. Without one (masks, sinusoidal tables) a structure is one
    case, so the distinct cases are the distinct structures."""
    return any(s.kind == Kind.REAL for s in e.inputs) or bool(e.param_schema(default_hyper(e), PAPER))


def _seed(case: Case, index: int) -> int:
    """Value set ``index``'s seed: a hash of the drawn case's numbers and the index."""
    h = hashlib.sha256(f"ftspec-block/{case.algorithm}/{index}".encode())
    for group in (case.inputs, case.params):
        for name in sorted(group):
            h.update(name.encode() + np.ascontiguousarray(group[name]).tobytes())
    return int.from_bytes(h.digest()[:4], "little")


def value_sets(case: Case, size: int, dtype: str) -> list[Case]:
    """The block of a drawn ``case``: the case itself first, then ``block_size(case, size) - 1``
    cases with its algorithm, sizes, variant set, style and every input that is not real
    (``Kind.REAL``) equal, and their own real inputs and parameters (drawn for ``dtype``)."""
    e = case.entry
    n = block_size(e, size) if case.params or any(s.kind == Kind.REAL for s in e.inputs) else 1
    shared = {s.name: case.inputs[s.name] for s in e.inputs if s.kind != Kind.REAL}
    out = [case]
    for i in range(1, n):
        inputs, params = build(e, case.hyper, case.variant, seed=_seed(case, i), style=case.style, dtype=dtype,
                               given=shared)
        out.append(Case(case.algorithm, dict(case.hyper), case.variant, inputs, params, [], case.style))
    return out
