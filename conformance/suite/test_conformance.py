"""One test per (algorithm, dtype): every selected implementation and device
must conform on the profile's examples.

Run from anywhere with ``pytest --pyargs ftspec.conformance.suite`` (options:
``--ftspec-impl NAME`` (repeatable; a registered name or module:object),
``--ftspec-profile quick|default|thorough``, ``--ftspec-seed N``); works with
``-n auto`` (pytest-xdist): each test is independent.
"""

from __future__ import annotations

import pytest

from ftspec.conformance.running.results import Status
from ftspec.impls.api import FLOAT_DTYPES
from ftspec.spec.registry import REGISTRY

PARAMS = [pytest.param(name, dtype, id=f"{name}-{dtype}") for name in REGISTRY for dtype in FLOAT_DTYPES]


@pytest.mark.parametrize("algorithm, dtype", PARAMS)
def test_conforms(ftspec_runner_factory, algorithm, dtype, tmp_path):
    runner = ftspec_runner_factory(case_dir=tmp_path / "cases")
    if not any(dtype in impl.dtypes_for(algorithm) and algorithm in impl.algorithms for _, impl in runner.plugins):
        pytest.skip(f"no selected implementation covers {algorithm} at {dtype}")
    result = runner.run([algorithm], [dtype])
    bad = result.failures()
    assert not bad, "\n\n".join(c.failure.report if c.failure else f"{c.algorithm} {c.impl} {c.dtype} {c.device}: "
                                f"{c.status}: {c.note}" for c in bad)
    ran = [c for c in result.cells if c.status == Status.PASS]
    assert ran and all(c.examples > 0 for c in ran)
