"""What a worker task sends back: cells, failures and their shrunk cases as plain values.

A search task (``worker_tasks._search_task``) returns JSON text: numbers, strings,
lists and dicts, never a pickled object, on every executor. A failing cell
carries its shrunk case in that text (``case_to_plain``): its algorithm,
hyperparameters, variant set (canonical JSON), style and arrays, the arrays as
one safetensors byte string in base64, bit for bit. The parent rebuilds the
case from it (``case_from_plain``) rather than reading the case file the worker
wrote, so it needs no directory shared with the workers; the case file is
still written there, for ``ftspec replay``.

A worker runs plugin code, so the parent reads what it sends as data: a plain
JSON object, an algorithm of the registry, whole-number hyperparameters, a
variant set parsed from JSON and arrays parsed by safetensors (no code, and
nothing unpickled). A case that cannot be read back leaves the failure without a case
(its message, report and reproducer are kept), as an unreadable case file did.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import fields
from typing import Any, Optional

import numpy as np

from ..core.case import Case
from ..core.casefile import split_tensors
from .runner import Cell, Failure

__all__ = ["case_from_plain", "case_to_plain", "cell_from_plain", "cell_to_plain"]

_FAILURE_FIELDS = ("check", "message", "case_file", "reproducer", "report", "shrunk", "diagnosis", "refusals")


def case_to_plain(case: Case) -> dict[str, Any]:
    """``case`` as plain values: its arrays as one safetensors byte string, in base64."""
    from safetensors.numpy import save

    tensors: dict[str, np.ndarray] = {}
    for k, v in case.inputs.items():
        tensors[f"inputs.{k}"] = np.asarray(v).copy(order="C")  # keeps 0-d arrays 0-d
    for k, v in case.params.items():
        tensors[f"params.{k}"] = np.asarray(v).copy(order="C")
    for i, extra in enumerate(case.batch):
        for k, v in extra.items():
            tensors[f"batch.{i}.{k}"] = np.asarray(v).copy(order="C")
    return {"algorithm": case.algorithm, "hyper": {k: int(v) for k, v in case.hyper.items()},
            "variant": json.loads(case.variant.to_json()), "style": case.style, "batch": len(case.batch),
            "tensors": base64.b64encode(save(tensors)).decode("ascii")}


def case_from_plain(values: Any) -> Case:
    """The case ``case_to_plain`` wrote; ValueError when ``values`` is not one."""
    from safetensors.numpy import load

    from ftspec.spec.registry import REGISTRY
    from ftspec.spec.variants import VariantSet

    if not isinstance(values, dict):
        raise ValueError(f"a case is a JSON object, not a {type(values).__name__}")
    algorithm = values.get("algorithm")
    if not isinstance(algorithm, str) or algorithm not in REGISTRY:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    hyper = values.get("hyper")
    if not isinstance(hyper, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                              for k, v in hyper.items()):
        raise ValueError("hyper must map names to whole numbers")
    batch_n, style, text = values.get("batch"), values.get("style"), values.get("tensors")
    if not isinstance(batch_n, int) or isinstance(batch_n, bool) or batch_n < 0:
        raise ValueError("batch must be a whole number")
    if not isinstance(style, str) or not isinstance(text, str):
        raise ValueError("style and tensors must be strings")
    if not isinstance(values.get("variant"), dict):
        raise ValueError("variant must be a JSON object of variant switches")
    variant = VariantSet.from_json(values["variant"])  # TypeError/ValueError on a malformed set
    try:
        tensors = load(base64.b64decode(text.encode("ascii"), validate=True))
    except Exception as exc:  # noqa: BLE001 - safetensors' or base64's own refusal
        raise ValueError(f"the case's tensors cannot be read: {exc}") from None
    inputs, params, batch = split_tensors(tensors, batch_n, ValueError)
    return Case(algorithm, dict(hyper), variant, inputs, params, batch, style)


def cell_to_plain(c: Cell) -> dict[str, Any]:
    """A cell as plain values; its failure's shrunk case included (``case_to_plain``)."""
    out = {f.name: getattr(c, f.name) for f in fields(Cell) if f.name not in ("checks", "failure", "sample")}
    out["checks"] = dict(c.checks)
    out["sample"] = [case_to_plain(s) for s in c.sample]  # the passing value sets a certificate lists from
    if c.failure is None:
        out["failure"] = None
    else:
        out["failure"] = {name: getattr(c.failure, name) for name in _FAILURE_FIELDS}
        out["failure"]["case"] = None if c.failure.case is None else case_to_plain(c.failure.case)
    return out


def cell_from_plain(values: dict[str, Any]) -> Cell:
    """The cell ``cell_to_plain`` wrote, its failure's case rebuilt from the values it carries."""
    values = dict(values)
    failure = values.pop("failure")
    sample = values.pop("sample", None) or []
    cell = Cell(**{**values, "checks": Counter(values["checks"])})
    cell.sample = [c for c in map(_case_or_none, sample) if c is not None]  # one unreadable: left out
    if failure is not None:
        cell.failure = Failure(failure["check"], failure["message"], _case_or_none(failure.get("case")),
                               failure["case_file"], failure["reproducer"], failure["report"], failure["shrunk"],
                               failure.get("diagnosis"), list(failure.get("refusals") or []))
    return cell


def _case_or_none(values: Any) -> Optional[Case]:
    if values is None:
        return None
    try:
        return case_from_plain(values)
    except (TypeError, ValueError):  # the report still has the message and the reproducer
        return None
