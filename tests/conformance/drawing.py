"""Drawing from the harness's strategies in tests: deterministic samples and searches, and the
rounding a case gets before it is judged (the strategy tests of forward and training entries)."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterable

import numpy as np
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisWarning

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.dtypes import round_to


def rounded(case: Case, dtype: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Inputs and parameters as the harness judges them: reals rounded to ``dtype``."""
    real = {s.name: s.is_real for s in case.entry.inputs}
    inputs = {k: round_to(v, dtype) if real[k] else v for k, v in case.inputs.items()}
    return inputs, {k: round_to(v, dtype) for k, v in case.params.items()}


def collect(strategy: st.SearchStrategy, n: int) -> list:
    """Up to ``n`` examples of ``strategy``, deterministically, default health checks."""
    out: list = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None)
    @given(strategy)
    def run(value: Any) -> None:
        out.append(value)

    run()
    return out


def search(strategy: st.SearchStrategy, condition: Callable[[Any], bool], examples: int) -> Any:
    """``find`` without shrinking, derandomized; Hypothesis pretty-prints the
    example it finds field by field, and a whole model's case is a large repr
    (a HypothesisWarning, an error here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Generating overly large repr", HypothesisWarning)
        return find(strategy, condition, settings=settings(max_examples=examples, database=None, derandomize=True,
                                                           phases=[Phase.generate]))


def share(items: Iterable[Any], predicate: Callable[[Any], bool]) -> float:
    """The fraction of ``items`` that satisfy ``predicate`` (0 for none)."""
    items = list(items)
    return sum(1 for x in items if predicate(x)) / max(len(items), 1)
