"""Hypothesis profiles of the conformance run: ``quick`` (CI and ``make test``),
``default`` (``make run``) and ``thorough`` (the calibration run).

``examples`` is per (algorithm, dtype) search; every implementation and
device taking part sees every example. ``seconds`` caps a search's wall time
(``None``: no cap): the search stops after the example in progress, and the
report gives each cell's exact count. ``budget`` bounds the sizes the
strategies draw (conformance/strategies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["PROFILES", "Profile", "profile"]


@dataclass(frozen=True)
class Profile:
    name: str
    examples: int
    budget: str
    max_batch: int
    call_timeout: float  # seconds a single implementation call may take
    seconds: Optional[float] = None  # wall-time cap per search
    #: golden fixtures ``ftspec run`` replays: "all", or "sample" (``fixture_replay.sample_cases``);
    #: ``ftspec certify`` always replays all of them
    fixtures: str = "all"


PROFILES = {
    "quick": Profile("quick", examples=10, budget="quick", max_batch=2, call_timeout=60.0, seconds=6.0,
                     fixtures="sample"),
    "default": Profile("default", examples=60, budget="default", max_batch=3, call_timeout=60.0, seconds=3.0,
                       fixtures="sample"),
    "thorough": Profile("thorough", examples=10_000, budget="thorough", max_batch=3, call_timeout=120.0),
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}") from None
