"""Machine-readable run reports (schema ``ftspec-report/1``, docs/reports.md).

The same data as the console summary: one object per cell (algorithm ×
implementation × dtype × device), one per search (generated and refused
examples, implementation and device agreement), fixture replays, the
tolerance model and the environment.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Optional, Sequence

from ftspec.impls.api import Implementation
from ftspec.spec import SPEC_VERSION
from ftspec.spec.registry import entry as registry_entry

from ..running.runner import Cell, RunResult
from ..core.tolerances import table

__all__ = ["REPORT_SCHEMA", "OutputPathError", "cell_dict", "check_writable", "environment", "report_dict",
           "write_json"]

REPORT_SCHEMA = "ftspec-report/1"
PACKAGES = ("ftspec", "numpy", "torch", "jax", "jaxlib", "hypothesis", "mpmath", "safetensors", "pytest",
            "pytest-xdist")


def _finite(x: float) -> Any:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, Optional[str]]:
    """The installed version of each package (None if absent)."""
    versions: dict[str, Optional[str]] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def environment(plugins: Sequence[tuple[str, Implementation]] = ()) -> dict[str, Any]:
    versions = package_versions()
    impls: dict[str, dict[str, Any]] = {}
    for label, impl in plugins:
        try:
            devices = list(impl.devices())
        except Exception as exc:  # noqa: BLE001 - the plugin's failure, recorded in the report
            devices = [f"error: {exc}"]
        impls[label] = {"version": impl.version, "devices": devices, "precision": impl.precision}
        wider = impl.mixed_precision()
        if wider:  # mixed precision (Implementation.accumulation)
            impls[label]["accumulation"] = wider
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": versions,
        "implementations": impls,
    }


def cell_dict(c: Cell) -> dict[str, Any]:
    entry = registry_entry(c.algorithm)
    return {
        "algorithm": c.algorithm,
        "paper": entry.title,
        "implementation": c.impl,
        "dtype": c.dtype,
        "device": c.device,
        "status": c.status,
        "examples": c.examples,
        "out_of_range": c.out_of_range,
        "worst_ratio": _finite(c.worst_ratio),
        "checks": dict(sorted(c.checks.items())),
        "ambiguous_samples": c.ambiguous,
        "undetermined_elements": c.undetermined,
        "note": c.note or None,
        #: > 0: every case the search can draw was judged (that many): complete below the minimum
        "exhausted": c.exhausted or None,
        #: the first examples' error/bound ratios, in the order judged, 3 digits (running/results.py RATIOS_KEPT)
        "ratios": [_finite(float(f"{r:.3g}")) if r == r else "nan" for r in c.ratios],
        "failure": None if c.failure is None else {
            "check": c.failure.check,
            "message": c.failure.message,
            "case_file": c.failure.case_file,
            "reproducer": c.failure.reproducer,
            "shrunk": c.failure.shrunk,
            "diagnosis": c.failure.diagnosis,  # conformance/forensics/diagnosis/; None when not diagnosed
            "refusals": c.failure.refusals,  # every refusal the plugin answers (core/refusals.py), one line each
        },
        #: failures with other signatures, each with its own case and reproducer (forensics/distinct_failures/)
        "more_failures": [{k: f.get(k) for k in ("check", "message", "case_file", "reproducer", "shrunk",
                                                  "diagnosis", "signature")} for f in c.more_failures],
    }


def report_dict(result: RunResult, plugins: Sequence[tuple[str, Implementation]],
                started: Optional[_dt.datetime] = None) -> dict[str, Any]:
    searches = []
    for (alg, dtype), n in sorted(result.generated.items()):
        agreement = result.agreement.get((alg, dtype), {})
        searches.append({
            "algorithm": alg,
            "dtype": dtype,
            "generated": n,
            "refused_by_spec": result.rejected.get((alg, dtype), 0),
            "unmodelled": result.unmodelled.get((alg, dtype), 0),
            "time_capped": bool(result.time_capped.get((alg, dtype), False)),
            "agreement": [{"a": a, "b": b, "worst_ratio": _finite(r)} for (a, b), r in sorted(agreement.items())],
        })
    return {
        "schema": REPORT_SCHEMA,
        "spec_version": SPEC_VERSION,
        "profile": result.profile,
        "seed": result.seed,
        "started": (started or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds"),
        "seconds": round(result.seconds, 3),
        "jobs": result.jobs,
        "fixture_selection": result.fixture_selection,
        "ok": result.ok,
        "verdict": result.verdict,       # conformant | partial | inconclusive | non-conformant
        "reasons": list(result.reasons),
        "interrupted": result.interrupted,
        "minimum": result.minimum,
        "selection": result.selection,
        "extension": result.extension or None,
        "broken": [{"name": n, "error": e} for n, e in result.broken],
        "tolerances": table(),
        "environment": environment(plugins),
        "cells": [cell_dict(c) for c in result.cells],
        "searches": searches,
        "fixtures": [f.to_dict() for f in result.fixtures],
    }


class OutputPathError(ValueError):
    """An output path that cannot be written (a one-line reason)."""


def check_writable(path: Path | str, *, directory: bool = False) -> Path:
    """``path`` (a file, or with ``directory`` a folder) can be written: checked before a run, so that
    a run is not lost to a bad output path at its end. Raises OutputPathError (one line)."""
    path = Path(path)
    what = "output directory" if directory else "output file"
    if directory:
        if path.exists() and not path.is_dir():
            raise OutputPathError(f"{what} {path}: exists and is not a directory")
    elif path.is_dir():
        raise OutputPathError(f"{what} {path}: is a directory")
    parent = path if directory else path.parent
    existing = parent
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise OutputPathError(f"{what} {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"{what} {path}: {existing} is not writable")
    if not directory and path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"{what} {path}: not writable")
    try:  # access() says yes to root everywhere, and /proc-like folders refuse files anyway: try one
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise OutputPathError(f"{what} {path}: cannot create a file in {existing} ({exc.strerror or exc})") from None
    return path


def write_json(path: Path | str, data: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return path
