"""Certificates: a publishable record that an implementation conforms.

JSON (schema ``ftspec-certificate/1``) with a Markdown rendering. The
``content_hash`` is the sha256 of the canonical JSON of every other field
(keys sorted, no spaces), so anyone can check that a published certificate
was not edited: ``ftspec certify --verify FILE``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Optional

from ftspec.impls.api import Implementation
from ftspec.spec import SPEC_VERSION
from ftspec.spec.registry import REGISTRY

from .report import cell_dict, environment
from .runner import RunResult
from .tolerances import table

__all__ = ["CERTIFICATE_SCHEMA", "build", "content_hash", "render_markdown", "verify"]

CERTIFICATE_SCHEMA = "ftspec-certificate/1"


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()


def content_hash(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "content_hash"}
    return hashlib.sha256(_canonical(body)).hexdigest()


def build(label: str, impl: Implementation, result: RunResult, *, examples: int,
          issued: Optional[_dt.datetime] = None) -> dict[str, Any]:
    implemented = [a for a in REGISTRY if a in impl.algorithms]
    missing = [a for a in REGISTRY if a not in impl.algorithms]
    cells = [c for c in result.cells if c.impl == label]
    conformant = all(c.ok for c in cells) and all(getattr(f, "ok", True) for f in result.fixtures)
    per_algorithm = {}
    for name in implemented:
        mine = [c for c in cells if c.algorithm == name]
        per_algorithm[name] = {
            "paper": REGISTRY[name].title,
            "verdict": "pass" if mine and all(c.ok for c in mine) else ("fail" if mine else "not run"),
            "examples": sum(c.examples for c in mine),
            "worst_ratio": max((c.worst_ratio for c in mine), default=0.0),
        }
    for v in per_algorithm.values():
        if not math.isfinite(v["worst_ratio"]):
            v["worst_ratio"] = "inf"
    doc: dict[str, Any] = {
        "schema": CERTIFICATE_SCHEMA,
        "subject": {
            "target": label,
            "name": impl.name,
            "version": impl.version,
            "description": impl.description,
            "precision": impl.precision,
            "dtypes": list(impl.dtypes),
        },
        "verdict": "conformant" if conformant else "not conformant",
        "spec_version": SPEC_VERSION,
        "variants": "all" if impl.variants == "all" else [
            {"name": v.describe(), "hash": v.hash, "json": json.loads(v.to_json())} for v in impl.variants],
        "coverage": {
            "implemented": implemented,
            "not_implemented": missing,
            "fraction": f"{len(implemented)}/{len(REGISTRY)}",
        },
        "algorithms": per_algorithm,
        "results": [cell_dict(c) for c in cells],
        "fixtures": [f.to_dict() for f in result.fixtures],
        "run": {
            "profile": result.profile,
            "seed": result.seed,
            "examples_per_search": examples,
            "seconds": round(result.seconds, 3),
            "jobs": result.jobs,
            "fixture_selection": result.fixture_selection,
            "generated": {f"{a}/{d}": n for (a, d), n in sorted(result.generated.items())},
        },
        "tolerances": table(),
        "environment": environment([(label, impl)]),
        "issued": (issued or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds"),
    }
    doc["content_hash"] = content_hash(doc)
    return doc


def verify(path: Path | str) -> tuple[bool, str]:
    doc = json.loads(Path(path).read_text())
    if doc.get("schema") != CERTIFICATE_SCHEMA:
        return False, f"not an ftspec certificate (schema {doc.get('schema')!r})"
    want = doc.get("content_hash")
    got = content_hash(doc)
    if want != got:
        return False, f"content hash mismatch: recorded {want}, computed {got} (the certificate was edited)"
    return True, f"intact: {doc['subject']['name']} {doc['subject']['version']} is {doc['verdict']} (spec {doc['spec_version']})"


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc["subject"]
    lines = [
        f"# ftspec certificate: {s['name']} {s['version']}",
        "",
        f"**Verdict: {doc['verdict']}** against the ftspec spec {doc['spec_version']} "
        f"(Phuong & Hutter, *Formal Algorithms for Transformers*, 2022).",
        "",
        f"- Target: `{s['target']}`; precision tier `{s['precision']}`; dtypes {', '.join(s['dtypes'])}",
        f"- Variant sets: {doc['variants'] if isinstance(doc['variants'], str) else ', '.join(v['name'] for v in doc['variants'])}",
        f"- Coverage: {doc['coverage']['fraction']} algorithms"
        + (f" (not implemented: {', '.join(doc['coverage']['not_implemented'])})" if doc['coverage']['not_implemented'] else ""),
        f"- Run: profile `{doc['run']['profile']}`, seed {doc['run']['seed']}, up to {doc['run']['examples_per_search']} "
        f"examples per algorithm and dtype, {doc['run']['seconds']} s",
        f"- Tolerances: Monte Carlo arithmetic, {doc['tolerances']['lanes']} lanes, safety factor "
        f"{sorted(set(doc['tolerances']['safety'].values()))} (docs/tolerances.md)",
        f"- Issued {doc['issued']}; content hash `{doc['content_hash']}`",
        "",
        "| algorithm | paper | dtype | device | examples | verdict | worst error/bound |",
        "|---|---|---|---|---:|---|---:|",
    ]
    for r in doc["results"]:
        if r["status"] == "not implemented":
            continue
        ratio = r["worst_ratio"]
        ratio = f"{ratio:.3g}" if isinstance(ratio, (int, float)) else ratio
        lines.append(f"| {r['algorithm']} | {r['paper']} | {r['dtype']} | {r['device']} | {r['examples']} | "
                     f"{r['status']} | {ratio} |")
    failures = [r for r in doc["results"] if r.get("failure")]
    if failures:
        lines += ["", "## Failures", ""]
        for r in failures:
            f = r["failure"]
            lines += [f"- **{r['algorithm']}** at {r['dtype']} on {r['device']} ({f['check']}): {f['message']}",
                      f"  - reproduce: `{f['reproducer']}`"]
    if doc.get("fixtures"):
        bad = [f for f in doc["fixtures"] if not f.get("ok", True)]
        lines += ["", f"## Golden fixtures", "", f"{len(doc['fixtures']) - len(bad)} of {len(doc['fixtures'])} "
                  "fixture replays pass."]
        for f in bad:
            lines.append(f"- {f.get('case')} at {f.get('dtype')} on {f.get('device')}: {f.get('message')}")
    env = doc["environment"]
    lines += ["", "## Environment", "", f"Python {env['python']} on {env['platform']}; "
              + ", ".join(f"{k} {v}" for k, v in env["packages"].items() if v)]
    return "\n".join(lines) + "\n"
