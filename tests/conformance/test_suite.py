"""The conformance suite itself (ftspec.conformance.suite), quick profile, on the project's own
independent implementations (NumPy, PyTorch, JAX): part of ``make test``.

The library plugins (torch.nn, transformers, Flax) are left out here unless named with
``--ftspec-impl``: ``make test`` certifies them through the CLI
(tests/impls/test_library_certificates.py) and judges each in its own test file, and running
every one of them again in all 168 (algorithm, dtype) searches would cost minutes of the
12-minute budget for no claim the others do not make."""

from __future__ import annotations

from typing import Any

import pytest

from ftspec.conformance.suite.test_conformance import test_conforms  # noqa: F401
from ftspec.impls.discovery import INDEPENDENT, select


#: wall seconds per search here (the quick profile's is 2): 168 searches of three implementations are
#: the largest part of ``make test``; a search still runs its first examples past the cap
SUITE_SECONDS = 0.2


@pytest.fixture(scope="session")
def ftspec_runner_factory(pytestconfig: pytest.Config, ftspec_plugins) -> Any:
    """The plugin's runner factory with ``SUITE_SECONDS`` per search, unless a profile is named."""
    from ftspec.conformance.core.profiles import profile
    from ftspec.conformance.running.runner import Runner

    chosen = pytestconfig.getoption("--ftspec-profile")
    seconds = SUITE_SECONDS if chosen == "quick" else profile(chosen).seconds

    def make(case_dir: Any, **kw: Any) -> Runner:
        return Runner(ftspec_plugins, profile=profile(chosen), seed=pytestconfig.getoption("--ftspec-seed"),
                      case_dir=case_dir, seconds=seconds, **kw)

    return make


@pytest.fixture(scope="session")
def ftspec_plugins(pytestconfig: pytest.Config) -> list[tuple[str, Any]]:
    """The plugin's own fixture of that name, defaulting to the independent implementations."""
    plugins, broken = select(pytestconfig.getoption("--ftspec-impl") or list(INDEPENDENT))
    if broken:
        pytest.fail(f"implementations failed to load: {'; '.join(f'{r.name}: {r.error}' for r in broken)}",
                    pytrace=False)
    return plugins
