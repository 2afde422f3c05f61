"""The registry of algorithms: one entry per paper algorithm, per layer and
per piece of training and inference.

Conformance tests, fixtures and the CLI iterate over ``REGISTRY``; nothing
else lists the algorithms. What an entry declares is documented in
``spec/entry.py``; the entries themselves are in ``entries_forward.py``
(Algorithms 1-10) and ``entries_training.py`` (Algorithms 11-15).
"""

from __future__ import annotations

from .entries_forward import ENTRIES as FORWARD
from .entries_training import ENTRIES as TRAINING
from .entry import Entry, Kind, TensorSpec
from .errors import SpecError

__all__ = ["Entry", "Kind", "REGISTRY", "TensorSpec", "entry"]

REGISTRY: dict[str, Entry] = {e.name: e for e in [*FORWARD, *TRAINING]}
assert len(REGISTRY) == len(FORWARD) + len(TRAINING), "duplicate registry names"


def entry(name: str) -> Entry:
    try:
        return REGISTRY[name]
    except KeyError:
        raise SpecError("algorithm", f"one of {sorted(REGISTRY)}", repr(name), algorithm="registry") from None
