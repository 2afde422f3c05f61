"""The search the zoo's kill tests run (tests/tools/test_zoo_*.py): one plugin, one entry, the default
profile, stopped at its first failure."""

from __future__ import annotations

from typing import Any

from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner


def first_failure(impl: Any, label: str, entry: str, tmp_path: Any, dtype: str = "float32", **config: Any) -> Any:
    """The cell of a default search of ``entry`` at ``dtype`` by ``impl`` (named ``label``; ``config``:
    ``RunConfig``'s fields to change, such as ``examples``), its case files under ``tmp_path``. The first
    failure is the verdict: no search goes on for distinct failures."""
    runner = Runner([(label, impl)], RunConfig(case_dir=str(tmp_path), **config))
    runner.distinct_failures = 0
    return runner.run([entry], [dtype]).cells[0]
