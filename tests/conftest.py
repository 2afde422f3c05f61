"""Every test draws its Hypothesis examples without the local-constants pool.

Hypothesis now and then draws a literal of a local module already imported; pytest-xdist runs
the tests in another order on each worker, so a sampled share (test_strategies*.py) or a seeded
comparison could pass in one run and fail in the next. The harness's own searches empty the pool
themselves (conformance/running/local_constants.py); a test marked ``local_constants`` checks that."""

from __future__ import annotations

from typing import Iterator

import pytest

from ftspec.conformance.running.local_constants import no_local_constants


@pytest.fixture(autouse=True)
def _draws_independent_of_test_order(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("local_constants"):
        yield
        return
    with no_local_constants():
        yield
