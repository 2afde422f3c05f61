"""pytest plugin (entry point ``pytest11``): options and fixtures for the
conformance suite, so it runs from any repository:

    pytest --pyargs ftspec.conformance.suite --ftspec-impl mine

``--ftspec-impl NAME`` selects implementations (repeatable; a registered
name or ``module:object``; default: every registered plugin),
``--ftspec-profile`` the Hypothesis profile (default: quick) and
``--ftspec-seed`` the seed. A name that is neither a registered plugin nor an
importable ``module:object`` is a usage error before any test is collected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ftspec")
    group.addoption("--ftspec-impl", action="append", default=[], metavar="NAME",
                    help="run the conformance suite on this implementation only (repeatable)")
    group.addoption("--ftspec-profile", default="quick", choices=("quick", "default", "thorough"),
                    help="Hypothesis profile of the conformance suite (default: quick)")
    group.addoption("--ftspec-seed", default=0, type=int, help="seed of the conformance search")


def pytest_configure(config: pytest.Config) -> None:
    """A name given to ``--ftspec-impl`` that names nothing is one usage error before collection,
    not the same error in each of the suite's tests."""
    problems = [p for p in map(_unknown, config.getoption("--ftspec-impl") or []) if p]
    if problems:
        raise pytest.UsageError("; ".join(problems))


def _unknown(name: str) -> str:
    """Why ``name`` names no implementation ("" when it names one): neither a registered plugin nor,
    as ``module:object``, a module that can be found (the module is not imported here)."""
    import difflib
    import importlib.util
    import os
    import sys

    from ftspec.impls.discovery import discover

    if ":" not in name:
        registered = sorted(discover())
        if name in registered:
            return ""
        close = difflib.get_close_matches(name, registered, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return (f"--ftspec-impl {name!r}: no plugin named {name!r}{hint} (registered: "
                f"{', '.join(registered) or 'none'}; or give module:object)")
    module = name.partition(":")[0]
    if "" not in sys.path and os.getcwd() not in sys.path:  # as impls.discovery.load_target does
        sys.path.insert(0, os.getcwd())
    try:
        found = module != "" and importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing, or an empty module name
        found = False
    return "" if found else f"--ftspec-impl {name!r}: no module named {module!r} (expected module:object)"


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
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner

    def make(case_dir: Path, progress: Optional[Callable[..., None]] = None, **kw: Any) -> Runner:
        """A runner over the selected plugins; ``kw``: further ``RunConfig`` fields (examples, seconds, ...)."""
        config = RunConfig(profile=pytestconfig.getoption("--ftspec-profile"),
                           seed=pytestconfig.getoption("--ftspec-seed"), case_dir=str(case_dir), **kw)
        return Runner(ftspec_plugins, config, progress=progress)

    return make
