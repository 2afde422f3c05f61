"""The search the zoo's kill tests run (tests/tools/test_zoo_*.py): one plugin, one entry, the default
profile, stopped at its first failure."""

from __future__ import annotations

import dataclasses
from typing import Any

from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.discovery import load
from ftspec.spec.variants import VariantSet
from ftspec.tools.zoo import build, mutant


def first_failure(impl: Any, label: str, entry: str, tmp_path: Any, dtype: str = "float32", **config: Any) -> Any:
    """The cell of a default search of ``entry`` at ``dtype`` by ``impl`` (named ``label``; ``config``:
    ``RunConfig``'s fields to change, such as ``examples``), its case files under ``tmp_path``. The first
    failure is the verdict: no search goes on for distinct failures."""
    runner = Runner([(label, impl)], RunConfig(case_dir=str(tmp_path), **config))
    runner.distinct_failures = 0
    return runner.run([entry], [dtype]).cells[0]


def declared_search(name: str, declared: VariantSet, entry: str, tmp_path: Any, **config: Any) -> Any:
    """``first_failure`` of the bundled NumPy plugin (``name`` "numpy") or of the zoo mutant ``name``,
    declared under ``declared`` alone: the kill tests' search and the correct plugin's beside it."""
    impl, label = (load("numpy"), "numpy") if name == "numpy" else (build(mutant(name)), f"mutant:{name}")
    return first_failure(dataclasses.replace(impl, variants=(declared,)), label, entry, tmp_path, **config)
