"""pytest plugin (entry point ``pytest11``): options and fixtures for the
conformance suite, so it runs from any repository:

    pytest --pyargs ftspec.conformance.suite --ftspec-impl mine

``--ftspec-impl NAME`` selects implementations (repeatable; a registered
name or ``module:object``; default: every registered plugin),
``--ftspec-profile`` the Hypothesis profile (default: quick) and
``--ftspec-seed`` the seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ftspec")
    group.addoption("--ftspec-impl", action="append", default=[], metavar="NAME",
                    help="run the conformance suite on this implementation only (repeatable)")
    group.addoption("--ftspec-profile", default="quick", choices=("quick", "default", "thorough"),
                    help="Hypothesis profile of the conformance suite (default: quick)")
    group.addoption("--ftspec-seed", default=0, type=int, help="seed of the conformance search")


@pytest.fixture(scope="session")
def ftspec_plugins(pytestconfig: pytest.Config) -> list[tuple[str, Any]]:
    """The selected implementations, loaded; a plugin that fails to load fails the session's tests."""
    from ftspec.impls.discovery import select

    plugins, broken = select(pytestconfig.getoption("--ftspec-impl") or None)
    if broken:
        details = "; ".join(f"{r.name}: {r.error}" for r in broken)
        pytest.fail(f"implementations failed to load: {details}", pytrace=False)
    return plugins


@pytest.fixture
def ftspec_runner_factory(pytestconfig: pytest.Config, ftspec_plugins) -> Callable[..., Any]:
    from ftspec.conformance.profiles import profile
    from ftspec.conformance.runner import Runner

    def make(case_dir: Path, **kw: Any) -> Runner:
        return Runner(ftspec_plugins, profile=profile(pytestconfig.getoption("--ftspec-profile")),
                      seed=pytestconfig.getoption("--ftspec-seed"), case_dir=case_dir, **kw)

    return make
