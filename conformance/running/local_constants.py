"""Same seed, same cases: whatever modules the process happens to have loaded.

Hypothesis (6.13x and later, here 6.170) now and then draws a number from a pool of "local
constants": every literal in every module of ``sys.modules`` that lives outside site-packages
and the standard library (``hypothesis.internal.conjecture.providers._get_local_constants``).
The pool grows as modules are imported, so a search's cases depended on what had been imported
before it: an editable install of ftspec, a user's plugin module, Dask's test cluster. The same
seed then gave other cases in a worker process than in the process that reproduces its failure,
and a test that draws a sample passed or failed with the order pytest-xdist ran it in.

``no_local_constants()`` makes that pool empty for the searches inside it (the global constants
Hypothesis always uses, such as 0.5, 1e-5 and the float extremes, stay). It touches a private name
of the pinned Hypothesis; where that name is gone, it does nothing, and
test_scaleout.py::test_the_same_seed_gives_the_same_cases_whatever_modules_are_loaded then
fails."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["no_local_constants"]

_lock = threading.Lock()
_depth = 0  # searches inside the block now, in any thread (a Dask worker runs several)
_saved: Any = None


def _empty() -> Any:
    from hypothesis.internal.constants_ast import Constants

    return Constants()


@contextmanager
def no_local_constants() -> Iterator[None]:
    """Draw without the local-constants pool inside the block (re-entrant, thread-safe)."""
    global _depth, _saved
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        yield
        return
    if not hasattr(providers, "_get_local_constants") or not hasattr(providers, "CONSTANTS_CACHE"):
        yield  # pragma: no cover - a Hypothesis without the pool: nothing to hold still
        return
    with _lock:
        if _depth == 0:
            _saved = providers._get_local_constants
            empty = _empty()
            providers._get_local_constants = lambda: empty
            providers.CONSTANTS_CACHE.cache.clear()  # it holds the pool's constants per choice type
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                providers._get_local_constants = _saved
                providers.CONSTANTS_CACHE.cache.clear()
