"""Building a certificate from a judged run (``build``)."""

from __future__ import annotations

import datetime as _dt
import json
import math
from typing import Any, Optional

from ftspec.impls.api import ALL_VARIANTS, Implementation
from ftspec.spec import SPEC_VERSION
from ftspec.spec.registry import REGISTRY

from ...core.tolerances import table
from ...core.verdict import narrowing
from ...running.results import Status
from ...running.runner import RunResult
from ..report import cell_dict, environment
from ..separation import FRACTION, MIN_SECONDS, listings
from .derived import algorithm_verdict, content_hash, examples_run, number
from .schema import CERTIFICATE_SCHEMA


def build(label: str, impl: Implementation, result: RunResult, *, settings: Any = None,
          issued: Optional[_dt.datetime] = None) -> dict[str, Any]:
    """The certificate of ``result`` (judged by ``session``: ``result.verdict`` is set)."""
    implemented = [a for a in REGISTRY if a in impl.algorithms]
    missing = [a for a in REGISTRY if a not in impl.algorithms]
    results = [cell_dict(c) for c in result.cells if c.impl == label]
    # what a pass at bfloat16 or float16 cannot tell apart (separation.py), per cell, measured on the
    # passing examples its search kept (cells on several devices searched together: the fullest)
    kept: dict[tuple[str, str], list] = {}
    for cell in result.cells:
        if cell.impl == label and cell.status == Status.PASS and len(cell.sample) > len(kept.get((cell.algorithm,
                                                                                               cell.dtype), [])):
            kept[(cell.algorithm, cell.dtype)] = list(cell.sample)
    listed = listings(impl, [(c["algorithm"], c["dtype"]) for c in results if c["status"] == Status.PASS],
                      seconds=max(MIN_SECONDS, FRACTION * float(result.seconds or 0.0)), samples=kept)
    for c in results:
        c["indistinguishable"] = listed.get((c["algorithm"], c["dtype"])) if c["status"] == Status.PASS else None
    per_algorithm = {}
    chosen = result.selection.get("algorithms")
    for name in implemented:
        if chosen is not None and name not in chosen:
            continue
        mine = [c for c in results if c["algorithm"] == name and c["status"] != Status.NOT_IMPLEMENTED]
        worst = max((number(c["worst_ratio"]) for c in mine), default=0.0)
        per_algorithm[name] = {
            "paper": REGISTRY[name].title,
            "verdict": algorithm_verdict(mine, result.minimum),
            "examples": sum(int(c["examples"]) for c in mine),
            "worst_ratio": worst if math.isfinite(worst) else "inf",
        }
    selection = dict(result.selection)
    selection["narrowed"] = narrowing(selection, selection.get("declared", {}))
    doc: dict[str, Any] = {
        "schema": CERTIFICATE_SCHEMA,
        "subject": {
            "target": label,
            "name": impl.name,
            "version": impl.version,
            "description": impl.description,
            "precision": impl.precision,
            "accumulation": impl.mixed_precision(),
            # how it refuses what the spec refuses: "raise", "nan", or {algorithm: mode}
            "refuses_by": (str(impl.refuses_by) if isinstance(impl.refuses_by, str)
                           else {a: impl.refuses_by_for(a) for a in impl.algorithms}),
            "dtypes": list(impl.dtypes),
            "dtypes_by_algorithm": {a: list(impl.dtypes_for(a)) for a in impl.algorithms
                                    if a in impl.dtypes_by_algorithm},
            "limits": declared_limits(impl, list(per_algorithm)),
        },
        "verdict": result.verdict,
        "reasons": list(result.reasons),
        "spec_version": SPEC_VERSION,
        "variants": _variants_record(impl),
        "coverage": {
            "implemented": implemented,
            "not_implemented": missing,
            "fraction": f"{len(implemented)}/{len(REGISTRY)}",
        },
        "selection": selection,
        "algorithms": per_algorithm,
        "results": results,
        "fixtures": [f.to_dict() for f in result.fixtures],
        "run": {
            "profile": result.profile,
            "seed": result.seed,
            "settings": settings.recorded() if settings is not None else None,
            "examples_per_search": selection.get("examples_per_search"),
            "seconds_per_search": selection.get("seconds_per_search"),
            "minimum": result.minimum,
            "examples_run": examples_run(results),
            "extension": result.extension or None,
            "interrupted": result.interrupted,
            "seconds": round(result.seconds, 3),
            "jobs": result.jobs,
            "fixture_selection": result.fixture_selection,
            "fixtures_outside_limits": fixtures_outside(impl, list(per_algorithm), result.fixture_selection),
            "fixture_set": _fixture_set(),
            "generated": {f"{a}/{d}": n for (a, d), n in sorted(result.generated.items())},
        },
        "tolerances": table(),
        "environment": environment([(label, impl)]),
        "issued": (issued or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds"),
    }
    doc["content_hash"] = content_hash(doc)
    return doc


def _fixture_set() -> Optional[dict[str, Any]]:
    """The golden fixture set the run replayed from (``--verify`` counts the replays against it)."""
    from ...core.fixture_files import FixtureError, load_manifest

    try:
        manifest = load_manifest()
    except FixtureError:
        return None
    return {"manifest_sha256": manifest.get("manifest_sha256"), "spec_version": manifest.get("spec_version"),
            "cases": len(manifest.get("cases", []))}


def _variants_record(impl: Implementation) -> Any:
    """The declared variant sets: "all" or [set record, ...] when they are the same for every
    algorithm; {implemented algorithm: "all" | [set record, ...]} when the plugin declares them per
    algorithm (a "*" key spelled out for each algorithm it covers)."""
    def one(declared: Any) -> Any:
        if declared == ALL_VARIANTS:
            return ALL_VARIANTS
        return [{"name": v.describe(), "hash": v.hash, "json": json.loads(v.to_json())} for v in declared]

    if not impl.per_algorithm:
        return one(impl.variants_for(""))
    return {a: one(impl.variants_for(a)) for a in REGISTRY if a in impl.algorithms}


def declared_limits(impl: Implementation, algorithms: list[str]) -> Optional[dict[str, Any]]:
    """{algorithm: declared limits} for the algorithms certified under limits (None: no limits, the
    certificate covers every shape the spec draws)."""
    out = {a: impl.limits_for(a).to_dict() for a in algorithms if not impl.limits_for(a).unconstrained}
    return out or None


def fixtures_outside(impl: Implementation, algorithms: list[str], selection: str) -> int:
    """How many golden fixture cases of ``algorithms`` (of those the run selected) lie outside the
    implementation's limits: not replayed on it, counted here, never failed."""
    if selection == "none" or all(impl.limits_for(a).unconstrained for a in algorithms):
        return 0
    from ...core.fixture_files import FixtureError, load_manifest
    from ...running.fixture_replay import sample_cases

    try:
        records = [r for r in load_manifest().get("cases", []) if r.get("algorithm") in algorithms]
    except FixtureError:
        return 0
    chosen = set(sample_cases(records)) if selection == "sample" else {str(r.get("id")) for r in records}
    return sum(1 for r in records if str(r.get("id")) in chosen
               and not impl.admits(str(r["algorithm"]), {k: int(v) for k, v in r.get("hyper", {}).items()}))
