"""What a certificate derives from its cells, written by ``building`` and derived again by
``verifying``: the content hash, each algorithm's verdict and the examples run. One definition
of each, so that a certificate this code writes is one it verifies."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from typing import Any

from ...core.status import Status


def canonical(doc: dict[str, Any]) -> bytes:
    """The canonical JSON the hash is taken of: keys sorted, no spaces."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()


def content_hash(doc: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of every field but ``content_hash``."""
    body = {k: v for k, v in doc.items() if k != "content_hash"}
    return hashlib.sha256(canonical(body)).hexdigest()


def number(value: Any) -> float:
    """A recorded ratio as a float for the summaries: numbers, and "inf" / "-inf" / "nan" as reports
    write them; anything else counts as infinite (the worst)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.inf


def algorithm_verdict(cells: list[dict[str, Any]], minimum: int) -> str:
    """One algorithm's verdict from its implemented cells: a failure or an error fails it; fewer
    examples than ``minimum`` in any cell leaves it inconclusive."""
    if not cells:
        return "not run"
    if any(c["status"] in (Status.FAIL, Status.ERROR) for c in cells):
        return "fail"
    if any(int(c["examples"]) < minimum for c in cells):
        return "inconclusive"
    return "pass"


def examples_run(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """How many examples the implemented cells ran: cells, total, min, median, max."""
    counts = [int(c["examples"]) for c in cells if c["status"] != Status.NOT_IMPLEMENTED]
    if not counts:
        return {"cells": 0, "total": 0, "min": 0, "median": 0, "max": 0}
    return {"cells": len(counts), "total": sum(counts), "min": min(counts), "median": statistics.median(counts),
            "max": max(counts)}
