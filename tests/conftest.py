"""Every test draws its Hypothesis examples without the local-constants pool.

Hypothesis now and then draws a literal of a local module already imported; pytest-xdist runs
the tests in another order on each worker, so a sampled share (test_strategies*.py) or a seeded
comparison could pass in one run and fail in the next. The harness's own searches empty the pool
themselves (conformance/running/local_constants.py); a test marked ``local_constants`` checks that.

For the same reason a test's own Hypothesis draws (``@given``, ``find``) are derandomized, with no
example database: the same examples on every run and machine. Random draws made a test's cost a
lottery: a ``find`` that took 1 s alone took 34 s in one `make test` (its shrinking wandered), and
`make test` varied by minutes on the same tree. The harness's searches are untouched: they state
``derandomize=False`` and their ``seed`` (conformance/running/search_rounds.py)."""

from __future__ import annotations

from typing import Iterator

import pytest
from hypothesis import settings

from ftspec.conformance.running.local_constants import no_local_constants

settings.register_profile("ftspec-tests", derandomize=True, database=None)
settings.load_profile("ftspec-tests")


@pytest.fixture(autouse=True)
def _draws_independent_of_test_order(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("local_constants"):
        yield
        return
    with no_local_constants():
        yield


#: tests of tens of seconds each that carry no ``slow`` mark (they are part of `make test-fast`)
_LONG = frozenset({"test_mypy_passes", "test_ruff_passes"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests first, in their collected order, then the rest in theirs. pytest-xdist hands
    the last tests of a run out one by one: a test of a minute among them kept one worker busy
    while the other had nothing left (`make test` on 2 cores). The sort is stable, so every
    worker collects the same order, as xdist requires; no test depends on the order (above)."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow") or item.name in _LONG else 1)
