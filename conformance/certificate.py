"""Certificates: a publishable record of what was tested and what it showed.

JSON (schema ``ftspec-certificate/2``) with a Markdown rendering. The
verdict (``conformance/verdict.py``) rests on the per-cell results the
certificate records, and ``ftspec certify --verify FILE`` checks both:

- the ``content_hash`` (sha256 of the canonical JSON of every other field,
  keys sorted, no spaces) matches. This detects accidental damage (a
  truncated download, an editor's reformatting) and nothing more: anyone
  can edit a certificate and compute a new hash. It proves no authorship;
- the certificate is consistent: the verdict re-derived from the recorded
  cells and fixture replays equals the recorded one; every algorithm ×
  dtype × device the implementation declares (within the recorded
  selection) has a cell; a passing cell carries no failure and no error
  ratio above 1; the per-algorithm summary and the examples counts agree
  with the cells; the minimum is the recorded profile's. An edit that flips
  a verdict must therefore also rewrite the results it rests on.

What would show the results themselves are true is running them again:
``ftspec certify --reproduce FILE`` re-runs the recorded target with the
recorded seed and settings and compares the verdicts cell by cell
(``session.reproduce``). The searches are seeded, so the same versions on a
machine of the same speed draw the same examples; a time cap makes the
example count depend on speed, so a slower machine may run fewer.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ftspec.impls.api import Implementation, select_devices
from ftspec.spec import SPEC_VERSION
from ftspec.spec.registry import REGISTRY

from .profiles import PROFILES
from .report import cell_dict, environment, write_json
from .runner import RunResult
from .tolerances import table
from .verdict import NothingTested, derive, exit_code, narrowing

__all__ = ["CERTIFICATE_SCHEMA", "Certificate", "CertificateError", "build", "consistency", "content_hash",
           "load", "recorded_settings", "render_markdown", "verify"]

CERTIFICATE_SCHEMA = "ftspec-certificate/2"


class CertificateError(ValueError):
    """A file that is not an intact, consistent ftspec certificate (a one-line reason)."""


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()


def content_hash(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "content_hash"}
    return hashlib.sha256(_canonical(body)).hexdigest()


def _number(value: Any) -> float:
    try:
        return float(value)  # numbers, and "inf" / "-inf" / "nan" as reports write them
    except (TypeError, ValueError):
        return math.inf


def _algorithm_verdict(cells: list[dict[str, Any]], minimum: int) -> str:
    if not cells:
        return "not run"
    if any(c["status"] in ("fail", "error") for c in cells):
        return "fail"
    if any(int(c["examples"]) < minimum for c in cells):
        return "inconclusive"
    return "pass"


def _examples_run(cells: list[dict[str, Any]]) -> dict[str, Any]:
    counts = [int(c["examples"]) for c in cells if c["status"] != "not implemented"]
    if not counts:
        return {"cells": 0, "total": 0, "min": 0, "median": 0, "max": 0}
    return {"cells": len(counts), "total": sum(counts), "min": min(counts), "median": statistics.median(counts),
            "max": max(counts)}


def build(label: str, impl: Implementation, result: RunResult, *, settings: Any = None,
          issued: Optional[_dt.datetime] = None) -> dict[str, Any]:
    """The certificate of ``result`` (judged by ``session``: ``result.verdict`` is set)."""
    implemented = [a for a in REGISTRY if a in impl.algorithms]
    missing = [a for a in REGISTRY if a not in impl.algorithms]
    results = [cell_dict(c) for c in result.cells if c.impl == label]
    per_algorithm = {}
    chosen = result.selection.get("algorithms")
    for name in implemented:
        if chosen is not None and name not in chosen:
            continue
        mine = [c for c in results if c["algorithm"] == name and c["status"] != "not implemented"]
        worst = max((_number(c["worst_ratio"]) for c in mine), default=0.0)
        per_algorithm[name] = {
            "paper": REGISTRY[name].title,
            "verdict": _algorithm_verdict(mine, result.minimum),
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
            "dtypes": list(impl.dtypes),
            "limits": _limits(impl, list(per_algorithm)),
        },
        "verdict": result.verdict,
        "reasons": list(result.reasons),
        "spec_version": SPEC_VERSION,
        "variants": "all" if impl.variants == "all" else [
            {"name": v.describe(), "hash": v.hash, "json": json.loads(v.to_json())} for v in impl.variants],
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
            "examples_run": _examples_run(results),
            "extension": result.extension or None,
            "interrupted": result.interrupted,
            "seconds": round(result.seconds, 3),
            "jobs": result.jobs,
            "fixture_selection": result.fixture_selection,
            "fixtures_outside_limits": _fixtures_outside(impl, list(per_algorithm), result.fixture_selection),
            "generated": {f"{a}/{d}": n for (a, d), n in sorted(result.generated.items())},
        },
        "tolerances": table(),
        "environment": environment([(label, impl)]),
        "issued": (issued or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds"),
    }
    doc["content_hash"] = content_hash(doc)
    return doc


def _limits(impl: Implementation, algorithms: list[str]) -> Optional[dict[str, Any]]:
    """{algorithm: declared limits} for the algorithms certified under limits (None: no limits, the
    certificate covers every shape the spec draws)."""
    out = {a: impl.limits_for(a).to_dict() for a in algorithms if not impl.limits_for(a).unconstrained}
    return out or None


def _fixtures_outside(impl: Implementation, algorithms: list[str], selection: str) -> int:
    """How many golden fixture cases of ``algorithms`` (of those the run selected) lie outside the
    implementation's limits: not replayed on it, counted here, never failed."""
    if selection == "none" or all(impl.limits_for(a).unconstrained for a in algorithms):
        return 0
    from .fixture_replay import sample_cases
    from .golden import FixtureError, load_manifest

    try:
        records = [r for r in load_manifest().get("cases", []) if r.get("algorithm") in algorithms]
    except FixtureError:
        return 0
    chosen = set(sample_cases(records)) if selection == "sample" else {str(r.get("id")) for r in records}
    return sum(1 for r in records if str(r.get("id")) in chosen
               and not impl.admits(str(r["algorithm"]), {k: int(v) for k, v in r.get("hyper", {}).items()}))


def consistency(doc: dict[str, Any]) -> list[str]:
    """Every way the certificate contradicts itself (empty: consistent)."""
    problems: list[str] = []
    try:
        results = [c for c in doc["results"]]
        fixtures = list(doc["fixtures"])
        run, selection, subject = doc["run"], doc["selection"], doc["subject"]
        minimum = int(run["minimum"])
        declared = selection["declared"]
        label = subject["target"]
    except (KeyError, TypeError, ValueError) as exc:
        return [f"a required field is missing or malformed: {exc}"]
    prof = PROFILES.get(run.get("profile"))
    if prof is None:
        problems.append(f"unknown profile {run.get('profile')!r}")
    elif minimum < prof.certify_minimum:
        problems.append(f"minimum {minimum} is below the {prof.name} profile's {prof.certify_minimum}")
    if selection.get("fixtures_required") != "all":
        problems.append("a certificate requires every golden fixture, the record says "
                        f"{selection.get('fixtures_required')!r}")
    if list(declared.get("algorithms", [])) != list(doc["coverage"]["implemented"]):
        problems.append("the declared algorithms differ from the coverage")
    if list(declared.get("dtypes", [])) != list(subject.get("dtypes", [])):
        problems.append("the declared dtypes differ from the subject's")
    try:
        verdict, _ = derive(results, fixtures, minimum=minimum, selection=selection, declared=declared,
                            interrupted=bool(run.get("interrupted")))
    except NothingTested as exc:
        verdict = f"none ({exc})"
    if verdict != doc.get("verdict"):
        problems.append(f"the recorded verdict {doc.get('verdict')!r} is not what the results give ({verdict!r})")
    for c in results:
        where = f"{c.get('algorithm')} {c.get('dtype')} {c.get('device')}"
        if c.get("status") == "pass" and (c.get("failure") is not None or _number(c.get("worst_ratio")) > 1):
            problems.append(f"{where}: 'pass' with a failure or an error ratio above 1")
        if c.get("status") == "fail" and c.get("failure") is None and not c.get("note"):
            problems.append(f"{where}: 'fail' with no failure recorded")
    for f in fixtures:
        if f.get("ok") and _number(f.get("ratio")) > 1:
            problems.append(f"fixture {f.get('case')} {f.get('dtype')}: 'ok' with an error ratio above 1")
    # every selected declared algorithm × dtype × device has its cell
    algorithms = [a for a in declared.get("algorithms", [])
                  if selection.get("algorithms") is None or a in selection["algorithms"]]
    dtypes = [d for d in declared.get("dtypes", []) if selection.get("dtypes") is None or d in selection["dtypes"]]
    found = doc.get("environment", {}).get("implementations", {}).get(label, {}).get("devices", [])
    if not any(str(d).startswith("error") for d in found) and not run.get("interrupted"):
        devices = select_devices([str(d) for d in found], selection.get("devices"))
        have = {(c.get("algorithm"), c.get("dtype"), c.get("device")) for c in results}
        lacking = [f"{a} {d} {v}" for a in algorithms for d in dtypes for v in devices if (a, d, v) not in have]
        if lacking:
            problems.append(f"no result for {len(lacking)} declared cells, e.g. {lacking[0]}")
    for name, summary in doc.get("algorithms", {}).items():
        mine = [c for c in results if c.get("algorithm") == name and c.get("status") != "not implemented"]
        if summary.get("verdict") != _algorithm_verdict(mine, minimum):
            problems.append(f"{name}: the summary verdict {summary.get('verdict')!r} disagrees with its cells")
        if summary.get("examples") != sum(int(c.get("examples", 0)) for c in mine):
            problems.append(f"{name}: the summary's examples disagree with its cells")
    if run.get("examples_run") != json.loads(json.dumps(_examples_run(results))):
        problems.append("the examples run disagree with the cells")
    return problems


def load(path: Path | str) -> dict[str, Any]:
    """An intact, consistent certificate; CertificateError says why not."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise CertificateError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CertificateError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CertificateError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise CertificateError(f"{path}: not an ftspec certificate (a JSON {type(doc).__name__})")
    if doc.get("schema") != CERTIFICATE_SCHEMA:
        raise CertificateError(f"{path}: not an ftspec certificate of schema {CERTIFICATE_SCHEMA} "
                               f"(schema {doc.get('schema')!r})")
    want, got = doc.get("content_hash"), content_hash(doc)
    if want != got:
        raise CertificateError(f"content hash mismatch: recorded {want}, computed {got} (the certificate was "
                               "changed after it was issued)")
    problems = consistency(doc)
    if problems:
        raise CertificateError(f"inconsistent certificate ({len(problems)} problems): " + "; ".join(problems[:3]))
    return doc


def verify(path: Path | str) -> tuple[bool, str]:
    """(intact and consistent?, a one-line message)."""
    try:
        doc = load(path)
    except CertificateError as exc:
        return False, str(exc)
    s = doc["subject"]
    return True, (f"intact and consistent: {s['name']} {s['version']} is {doc['verdict']} "
                  f"(spec {doc['spec_version']}); the hash detects accidental damage, not authorship")


def recorded_settings(doc: dict[str, Any]) -> dict[str, Any]:
    """``Settings`` keywords that repeat the certified run (jobs and progress left to the caller)."""
    recorded = dict(doc["run"].get("settings") or {})
    recorded.pop("jobs", None)
    recorded.setdefault("profile", doc["run"]["profile"])
    recorded.setdefault("seed", doc["run"]["seed"])
    for name in ("algorithms", "dtypes", "devices"):
        if recorded.get(name) is not None:
            recorded[name] = tuple(recorded[name])
    return recorded


@dataclass
class Certificate:
    """A certificate document, with the run it came from when it was made here."""

    doc: dict[str, Any]
    result: Optional[RunResult] = None

    @property
    def verdict(self) -> str:
        return str(self.doc["verdict"])

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdict)

    def markdown(self) -> str:
        return render_markdown(self.doc)

    def write_json(self, path: Path | str) -> Path:
        return write_json(path, self.doc)

    def write_markdown(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.markdown())
        return path

    def write(self, directory: Path | str) -> tuple[Path, Path]:
        """``certificate.json`` and ``certificate.md`` in ``directory``."""
        directory = Path(directory)
        return self.write_json(directory / "certificate.json"), self.write_markdown(directory / "certificate.md")


def _describe_limits(limits: Optional[dict[str, Any]], outside: int) -> str:
    """The shapes the certificate covers, from its recorded ``subject.limits``."""
    if not limits:
        return "none declared (every shape the spec draws)"
    from ftspec.impls.api import Limits

    parts = []
    for name, d in limits.items():
        lim = Limits(equal=tuple((str(a), str(b)) for a, b in d.get("equal", [])),
                     maximum=dict(d.get("maximum", {})), minimum=dict(d.get("minimum", {})),
                     batching=bool(d.get("batching", True)), cross_lengths=bool(d.get("cross_lengths", True)))
        parts.append(f"{name}: {lim.describe()}")
    return ("; ".join(parts) + f" (only cases within them were drawn; {outside} golden fixture cases outside "
            "them were not replayed)")


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc["subject"]
    run = doc["run"]
    ex = run["examples_run"]
    sel = doc["selection"]
    variants = doc["variants"] if isinstance(doc["variants"], str) else ", ".join(v["name"] for v in doc["variants"])
    missing = doc["coverage"]["not_implemented"]
    lines = [
        f"# ftspec certificate: {s['name']} {s['version']}",
        "",
        f"**Verdict: {doc['verdict']}** against the ftspec spec {doc['spec_version']} "
        f"(Phuong & Hutter, *Formal Algorithms for Transformers*, 2022).",
        "",
    ]
    if doc.get("reasons"):
        lines += [f"Why not conformant: {'; '.join(doc['reasons'][:5])}"
                  + (f" (and {len(doc['reasons']) - 5} more)" if len(doc["reasons"]) > 5 else ""), ""]
    lines += [
        f"- Target: `{s['target']}`; precision tier `{s['precision']}`; dtypes {', '.join(s['dtypes'])}",
        f"- Variant sets: {variants}",
        f"- Within limits: {_describe_limits(s.get('limits'), run.get('fixtures_outside_limits', 0))}",
        f"- Coverage: {doc['coverage']['fraction']} algorithms"
        + (f" (not implemented: {', '.join(missing)})" if missing else ""),
        f"- Selection: {'; '.join(sel.get('narrowed') or []) or 'everything the implementation declares'}",
        f"- Examples run: {ex['total']} over {ex['cells']} cells (per cell: min {ex['min']}, median {ex['median']}, "
        f"max {ex['max']}); at least {run['minimum']} per cell required",
        f"- Run: profile `{run['profile']}`, seed {run['seed']}, {run['examples_per_search']} examples per search"
        + (f" capped at {run['seconds_per_search']} s" if run.get("seconds_per_search") else "")
        + (f", an extra round (seed {run['extension']['seed']}, at most {run['extension']['seconds']} s) for "
           f"{len(run['extension']['searches'])} searches" if run.get("extension") else "")
        + f", {run['seconds']} s" + (", **interrupted**" if run.get("interrupted") else ""),
        f"- Tolerances: Monte Carlo arithmetic, {doc['tolerances']['lanes']} lanes, safety factor "
        f"{sorted(set(doc['tolerances']['safety'].values()))} (docs/tolerances.md)",
        f"- Issued {doc['issued']}; content hash `{doc['content_hash']}` (detects accidental damage, not "
        "authorship: `ftspec certify --verify` also re-derives the verdict, `--reproduce` re-runs it)",
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
        lines += ["", "## Golden fixtures", "", f"{len(doc['fixtures']) - len(bad)} of {len(doc['fixtures'])} "
                  f"fixture replays pass ({run['fixture_selection']} fixtures)."]
        other = [f for f in doc["fixtures"] if f.get("declared_variant")]
        if other:  # conformance/fixture_replay.py: same mathematics under the plugin's own declared set
            live = sum(f.get("bounds") == "live" for f in other)
            lines.append(f"{len(other)} of them ran under the declared variant set, not the fixture's "
                         f"(the sets differ only in switches that change rounding or that the algorithm "
                         f"does not read); {live} with a bound derived for the declared set.")
        for f in bad:
            lines.append(f"- {f.get('case')} at {f.get('dtype')} on {f.get('device')}: {f.get('message')}")
    env = doc["environment"]
    lines += ["", "## Environment", "", f"Python {env['python']} on {env['platform']}; "
              + ", ".join(f"{k} {v}" for k, v in env["packages"].items() if v)]
    return "\n".join(lines) + "\n"

