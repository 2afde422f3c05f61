"""The conformance suite itself (ftspec.conformance.suite), quick profile, on the project's own
independent implementations (NumPy, PyTorch, JAX): part of ``make test``.

The library plugins (torch.nn, transformers, Flax) are left out here unless named with
``--ftspec-impl``: ``make test`` certifies them through the CLI
(tests/impls/test_library_certificates.py) and judges each in its own test file, and running
every one of them again in all 168 (algorithm, dtype) searches would cost minutes of the
12-minute budget for no claim the others do not make.

Which implementation searches a cell (``searched_by``): one of those that cover it, in turn by
the algorithm's place in the registry and the dtype's, so that every (algorithm, dtype) cell is
searched and each implementation searches every dtype it has on a share of the algorithms
(about a third; test_every_cell_is_searched_and_every_plugin_searches_every_dtype). Their fixed
cases at every dtype are the fixture replay's and test_bundled's; ``FTSPEC_SUITE_ALL=1`` (or
``make run``, which is this suite at the default profile) searches every implementation in every
cell. Until spec 2.3.0's padded entries pushed ``make test`` past its budget again, every
implementation searched every cell."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ftspec.conformance.suite.test_conformance import test_conforms  # noqa: F401
from ftspec.impls.api import FLOAT_DTYPES
from ftspec.impls.discovery import INDEPENDENT, select
from ftspec.spec.registry import REGISTRY


#: wall seconds per search here (the quick profile's is 2): 168 searches of three implementations are
#: the largest part of ``make test``; a search still runs its first examples past the cap
SUITE_SECONDS = 0.2


def searched_by(plugins: list[tuple[str, Any]], algorithm: str, dtype: str) -> list[tuple[str, Any]]:
    """The plugins that search the cell (module docstring): all of those that cover it with
    ``FTSPEC_SUITE_ALL=1``, else one, the next in turn with each algorithm of the registry."""
    covering = [(n, i) for n, i in plugins if algorithm in i.algorithms and dtype in i.dtypes_for(algorithm)]
    if os.environ.get("FTSPEC_SUITE_ALL") or len(covering) < 2:
        return covering
    turn = list(REGISTRY).index(algorithm) + FLOAT_DTYPES.index(dtype)
    return [covering[turn % len(covering)]]


@pytest.fixture
def ftspec_runner_factory(pytestconfig: pytest.Config, ftspec_plugins, request: pytest.FixtureRequest) -> Any:
    """The plugin's runner factory with ``SUITE_SECONDS`` per search, unless a profile is named, over
    the plugins that search this test's cell (``searched_by``)."""
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner

    chosen = pytestconfig.getoption("--ftspec-profile")
    seconds = SUITE_SECONDS if chosen == "quick" else None  # None: the profile's
    cell = request.node.callspec.params
    plugins = searched_by(ftspec_plugins, cell["algorithm"], cell["dtype"])

    def make(case_dir: Any, **kw: Any) -> Runner:
        return Runner(plugins, RunConfig(profile=chosen, seed=pytestconfig.getoption("--ftspec-seed"),
                                         case_dir=case_dir, seconds=seconds, **kw))

    return make


def test_every_cell_is_searched_and_every_plugin_searches_every_dtype():
    """The turn leaves no covered cell unsearched, and gives each bundled implementation a share of
    the algorithms at each of its dtypes (so a bug of one backend at one dtype is searched somewhere:
    a quarter of the registry at least; a third is the turn's share)."""
    plugins, _ = select(list(INDEPENDENT))
    share: dict[tuple[str, str], int] = {}
    for algorithm in REGISTRY:
        for dtype in FLOAT_DTYPES:
            covering = {n for n, i in plugins if algorithm in i.algorithms and dtype in i.dtypes_for(algorithm)}
            chosen = {n for n, _ in searched_by(plugins, algorithm, dtype)}
            assert chosen <= covering and bool(chosen) == bool(covering), (algorithm, dtype)
            for n in chosen:
                share[n, dtype] = share.get((n, dtype), 0) + 1
    for n, impl in plugins:
        for dtype in impl.dtypes:
            assert share.get((n, dtype), 0) >= len(REGISTRY) // 4, (n, dtype, share)


@pytest.fixture(scope="session")
def ftspec_plugins(pytestconfig: pytest.Config) -> list[tuple[str, Any]]:
    """The plugin's own fixture of that name, defaulting to the independent implementations."""
    plugins, broken = select(pytestconfig.getoption("--ftspec-impl") or list(INDEPENDENT))
    if broken:
        pytest.fail(f"implementations failed to load: {'; '.join(f'{r.name}: {r.error}' for r in broken)}",
                    pytrace=False)
    return plugins
