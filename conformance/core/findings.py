"""What a judge reports: ``Finding`` (one failed check) and ``Judgement`` (a verdict).

Their own module because every judge produces them (``judge.py`` for
outputs compared with the spec, ``token_judge.py`` for sampled tokens,
``metamorphic.py``, the runner's cross-checks) and none of those should
have to import another judge to report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["Finding", "Judgement"]


@dataclass
class Finding:
    """One failed check."""

    #: spec | shape | dtype | nan | overflow | missing | exception | timeout | mutation | determinism | batch | device
    check: str
    message: str
    output: Optional[str] = None
    ratio: float = math.inf
    #: for a ``refusal`` finding: the name of the refusal the implementation did not make
    #: (spec/refusals.py), so the refused case can be rebuilt (``refusals.refused_case``)
    refusal: Optional[str] = None


@dataclass
class Judgement:
    ratio: float = 0.0  # worst |err| / bound over every checked element
    findings: list[Finding] = field(default_factory=list)
    ambiguous: int = 0  # sampling steps where a CDF boundary made two tokens acceptable
    undetermined: int = 0  # non-finite results accepted where the dtype cannot determine the value

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, other: "Judgement") -> None:
        self.ratio = max(self.ratio, other.ratio)
        self.findings.extend(other.findings)
        self.ambiguous += other.ambiguous
        self.undetermined += other.undetermined
