"""Verifying a certificate (``ftspec certify --verify``): read as untrusted data, checked against
its schema (``schema.check``), then for consistency with itself (``consistency``).

``load`` and ``verify`` are the readers; ``problems`` is the list of independent consistency
checks, in the order docs/reports.md gives them."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any, Optional

from ftspec.impls.api import select_devices
from ftspec.spec.variants import VariantSet

from ...core.casefile import read_untrusted_json
from ...core.profiles import PROFILES
from ...core.status import Status
from ...core.verdict import NothingTested, derive
from .derived import algorithm_verdict, content_hash, examples_run
from .reading import LIMITS, CertificateError, Malformed, is_text, limits_of, show, variant_sets
from .schema import CERTIFICATE_SCHEMA, check


def reproduce_command(path: Path | str, impl: str) -> str:
    """The command that reproduces the certificate at ``path`` on ``impl`` (quoted for a shell): what
    shows whether the results are true, which verifying cannot."""
    return f"ftspec certify --reproduce {shlex.quote(str(path))} --impl {shlex.quote(impl)}"


def _ratio(value: Any) -> float:
    """A recorded error ratio as a float: a number, or "inf" / "-inf" / "nan" as reports write
    them; anything else is NaN (never a pass)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "-inf", "nan", "infinity", "-infinity"):
        return float(value)
    return math.nan


def _passing_ratio(value: Any) -> bool:
    """Whether a recorded ratio may stand beside a pass: a finite number from 0 to 1 (NaN, a
    negative or an infinite ratio never passes)."""
    r = _ratio(value)
    return math.isfinite(r) and 0.0 <= r <= 1.0


def _expected_fixtures(doc: dict[str, Any]) -> tuple[Optional[set[tuple[str, str, str]]], str]:
    """The (case, dtype, device) fixture replays the certificate's selection calls for, from this
    installation's golden fixtures and the implementation's declarations as the certificate records
    them (the replay's own rule, ``fixture_replay._covers``); None with the reason when they cannot
    be counted here."""
    from ftspec.impls.api import Implementation

    from ...core.fixture_files import FixtureError, load_manifest
    from ...running.fixture_replay import DTYPES, _covers, _Target, sample_cases

    run, selection, subject = doc["run"], doc["selection"], doc["subject"]
    recorded = (run.get("fixture_set") or {}).get("manifest_sha256")
    try:
        manifest = load_manifest()
    except FixtureError as exc:
        return None, f"this installation's golden fixtures cannot be read ({exc})"
    if recorded != manifest.get("manifest_sha256"):
        shown = f"{recorded[:16]}…" if isinstance(recorded, str) and is_text(recorded, 64) else show(recorded)
        return None, (f"the certificate was made with fixture set {shown}, this installation has "
                      f"{str(manifest.get('manifest_sha256'))[:16]}…")
    found = doc["environment"]["implementations"].get(subject["target"], {}).get("devices", [])
    devices = select_devices([str(d) for d in found], selection.get("devices"))
    implemented = list(doc["coverage"]["implemented"])
    shadow = Implementation(
        name=subject["name"], version=subject["version"], algorithms={a: _never for a in implemented},
        dtypes=tuple(subject["dtypes"]), devices=lambda: devices, from_numpy=_never, to_numpy=_never,
        variants=variant_sets(doc["variants"]), limits=limits_of(subject.get("limits")))
    target = _Target(subject["target"], shadow, devices)
    records = [r for r in manifest.get("cases", [])
               if selection.get("algorithms") is None or r.get("algorithm") in selection["algorithms"]]
    chosen = set(sample_cases(records)) if selection["fixtures"] == "sample" else {r.get("id") for r in records}
    dtypes = [d for d in DTYPES if selection.get("dtypes") is None or d in selection["dtypes"]]
    table = manifest.get("variants", {})
    variants: dict[str, Optional[VariantSet]] = {}
    expected: set[tuple[str, str, str]] = set()
    for r in records:
        if r.get("id") not in chosen:
            continue
        key = str(r.get("variant"))
        if key not in variants:
            try:
                variants[key] = VariantSet.from_json(table[key]["json"])
            except Exception:  # noqa: BLE001 - not in a manifest that passed its checksum; not counted
                variants[key] = None
        hyper = {k: int(v) for k, v in r.get("hyper", {}).items()}
        for dtype in dtypes:
            variant = variants[key]
            if variant is not None and _covers(target, str(r["algorithm"]), dtype, variant, hyper) is not None:
                expected.update((str(r["id"]), dtype, device) for device in devices)
    return expected, ""


def _never(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a certificate's recorded declarations are data: nothing is called")


def _fixture_problems(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, notes) of the fixture replays against what the selection calls for."""
    run, selection = doc["run"], doc["selection"]
    fixtures = doc["fixtures"]
    from ...running.fixture_replay import DTYPES

    if selection["fixtures"] == "none" or run.get("interrupted"):
        return [], []
    if selection.get("dtypes") is not None and not set(selection["dtypes"]) & set(DTYPES):
        return [], []  # no fixture dtype selected: nothing is replayed
    found = doc["environment"]["implementations"].get(doc["subject"]["target"], {}).get("devices", [])
    if any(str(d).startswith("error") for d in found) or any(f["device"] == "-" and not f["ok"] for f in fixtures):
        return [], []  # the replay failed as a whole (no devices, no fixtures): failed records say so
    if run.get("fixture_set") is None:
        return [f"it names no fixture set (run.fixture_set), so the fixture replays its {selection['fixtures']!r} "
                "selection calls for cannot be counted"], []
    expected, why = _expected_fixtures(doc)
    if expected is None:
        return [], [f"fixture replays not counted: {why}"]
    have = {(f["case"], f["dtype"], f["device"]) for f in fixtures}
    missing = sorted(expected - have)
    if missing:
        return [f"{len(missing)} of the {len(expected)} fixture replays its {selection['fixtures']!r} selection "
                f"calls for are not recorded (it records {len(fixtures)}), e.g. {' '.join(missing[0])}"], []
    return [], []


def problems(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(every way the certificate contradicts itself, notes on what could not be checked here).
    Long on purpose: one list of independent checks, each a few lines, in the order docs/reports.md
    gives them; split, they would only pass the same two lists around."""
    try:
        check(doc)
    except Malformed as exc:
        return [str(exc)], []
    results, fixtures = doc["results"], doc["fixtures"]
    run, selection, subject = doc["run"], doc["selection"], doc["subject"]
    minimum, declared, label = run["minimum"], selection["declared"], subject["target"]
    found_problems: list[str] = []
    add = found_problems.append
    prof = PROFILES[run["profile"]]
    if minimum < prof.certify_minimum:
        add(f"minimum {minimum} is below the {prof.name} profile's {prof.certify_minimum}")
    if selection["fixtures_required"] != "all":
        add(f"a certificate requires every golden fixture, the record says {selection['fixtures_required']!r}")
    if run.get("fixture_selection", selection["fixtures"]) != selection["fixtures"]:
        add(f"run.fixture_selection {show(run.get('fixture_selection'))} is not the selection's "
            f"{selection['fixtures']!r}")
    if list(declared["algorithms"]) != list(doc["coverage"]["implemented"]):
        add("the declared algorithms differ from the coverage")
    if list(declared["dtypes"]) != list(subject["dtypes"]):
        add("the declared dtypes differ from the subject's")
    try:
        verdict, _ = derive(results, fixtures, minimum=minimum, selection=selection, declared=declared,
                            interrupted=bool(run.get("interrupted")))
    except NothingTested as exc:
        verdict = f"none ({exc})"
    if verdict != doc["verdict"]:
        add(f"the recorded verdict {doc['verdict']!r} is not what the results give ({verdict!r})")
    seen: set[tuple[str, str, str]] = set()
    for c in results:
        key = (c["algorithm"], c["dtype"], c["device"])
        where = " ".join(key)
        if key in seen:
            add(f"{where}: more than one result")
        seen.add(key)
        if c["implementation"] != label:
            add(f"{where}: a result of {show(c['implementation'])}, not of the subject {label!r}")
        if c["status"] == Status.PASS and c.get("failure") is not None:
            add(f"{where}: 'pass' with a failure recorded")
        if c["status"] == Status.PASS and not _passing_ratio(c["worst_ratio"]):
            add(f"{where}: 'pass' with an error ratio of {show(c['worst_ratio'])}, not a number from 0 "
                "to 1 (a ratio above 1, NaN, negative or infinite never passes)")
        if c["status"] == Status.FAIL and c.get("failure") is None and not c.get("note"):
            add(f"{where}: 'fail' with no failure recorded")
    for f in fixtures:
        if f["ok"] and not _passing_ratio(f["ratio"]):
            add(f"fixture {f['case']} {f['dtype']}: 'ok' with an error ratio of {show(f['ratio'])}, "
                "not a number from 0 to 1 (a ratio above 1, NaN, negative or infinite never passes)")
    # every selected declared algorithm × dtype × device has its cell
    algorithms = [a for a in declared["algorithms"]
                  if selection.get("algorithms") is None or a in selection["algorithms"]]
    dtypes = [d for d in declared["dtypes"] if selection.get("dtypes") is None or d in selection["dtypes"]]
    found = doc["environment"]["implementations"].get(label, {}).get("devices", [])
    if any(str(d).startswith("error") for d in found) and not any(c["status"] == Status.ERROR for c in results):
        add("the implementation's devices are recorded as an error, but no cell records one")
    if not any(str(d).startswith("error") for d in found) and not run.get("interrupted"):
        devices = select_devices([str(d) for d in found], selection.get("devices"))
        lacking = [f"{a} {d} {v}" for a in algorithms for d in dtypes for v in devices if (a, d, v) not in seen]
        if lacking:
            add(f"no result for {len(lacking)} declared cells, e.g. {lacking[0]}")
    summaries = doc["algorithms"]
    wanted = [a for a in doc["coverage"]["implemented"]
              if selection.get("algorithms") is None or a in selection["algorithms"]]
    if set(summaries) != set(wanted):
        odd = sorted(set(summaries) ^ set(wanted))
        add(f"the per-algorithm summaries do not match the selected algorithms ({', '.join(odd[:3])})")
    by_algorithm: dict[str, list[dict[str, Any]]] = {}
    for c in results:
        if c["status"] != Status.NOT_IMPLEMENTED:
            by_algorithm.setdefault(c["algorithm"], []).append(c)
    for name, summary in summaries.items():
        mine = by_algorithm.get(name, [])
        if summary.get("verdict") != algorithm_verdict(mine, minimum):
            add(f"{name}: the summary verdict {show(summary.get('verdict'))} disagrees with its cells")
        if summary.get("examples") != sum(c["examples"] for c in mine):
            add(f"{name}: the summary's examples disagree with its cells")
    if run["examples_run"] != json.loads(json.dumps(examples_run(results))):
        add("the examples run disagree with the cells")
    more, notes = _fixture_problems(doc)
    return found_problems + more, notes


def consistency(doc: dict[str, Any]) -> list[str]:
    """Every way the certificate contradicts itself or breaks its schema (empty: consistent)."""
    return problems(doc)[0]


def load_with_notes(path: Path | str) -> tuple[dict[str, Any], list[str]]:
    """(an intact, consistent certificate, notes on what could not be checked here); CertificateError
    (one line, naming the file) says why not."""
    path = Path(path)
    try:
        doc = read_untrusted_json(path, what="certificate", limit=LIMITS["bytes"], error=CertificateError)
        if not isinstance(doc, dict):
            raise CertificateError(f"not an ftspec certificate (a JSON {type(doc).__name__})")
        if doc.get("schema") != CERTIFICATE_SCHEMA:
            raise CertificateError(f"not an ftspec certificate of schema {CERTIFICATE_SCHEMA} "
                                   f"(schema {show(doc.get('schema'))})")
        want, got = doc.get("content_hash"), content_hash(doc)
        if want != got:
            raise CertificateError(f"content hash mismatch: recorded {show(want)}, computed {got} (the certificate "
                                   "was changed after it was issued)")
        try:
            check(doc)
        except Malformed as exc:
            raise CertificateError(f"malformed certificate: {exc}") from None
        found, notes = problems(doc)
        if found:
            raise CertificateError(f"inconsistent certificate ({len(found)} problem{'s' * (len(found) != 1)}): "
                                   + "; ".join(found[:3]))
    except CertificateError as exc:
        raise CertificateError(" ".join(f"{path}: {exc}".split())) from None
    return doc, notes


def load(path: Path | str) -> dict[str, Any]:
    """An intact, consistent certificate, read as untrusted input (``LIMITS``); CertificateError
    (one line, naming the file) says why not."""
    return load_with_notes(path)[0]


def verify(path: Path | str) -> tuple[bool, str]:
    """(intact and consistent?, a one-line message)."""
    try:
        doc, notes = load_with_notes(path)
    except CertificateError as exc:
        return False, str(exc)
    s = doc["subject"]
    return True, (f"intact and consistent: {s['name']} {s['version']} is {doc['verdict']} "
                  f"(spec {doc['spec_version']})" + "".join(f"; {n}" for n in notes) + "; this shows the certificate "
                  "agrees with itself, not that its results are true (a forgery can agree with itself): "
                  f"`{reproduce_command(path, 'NAME')}` runs them again")

