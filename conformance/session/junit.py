"""A run report or a certificate as JUnit XML, the test-result format CI systems read.

``write_junit(report, path)`` takes the JSON-able form ``ftspec run
--json-report`` writes (schema ``ftspec-report/1``) or a certificate
(``ftspec-certificate/2``), and writes one ``<testsuite>`` per
implementation with one ``<testcase>`` per cell (classname
``ftspec.<impl>.<algorithm>``, name ``<dtype>/<device>``) and one per golden
fixture replay (classname ``ftspec.<impl>.fixtures.<algorithm>``, name
``<case>/<dtype>/<device>``); a plugin that failed to load is a testcase
with an ``<error>``. How each cell status maps is in docs/reports.md
("JUnit XML"); in short, a cell short of the minimum examples (inconclusive)
is ``<skipped>`` with a message saying so, never a pass.

The format has no single standard ("there are several self-proclaimed
JUnit formats", gitlab-org/gitlab#299086; GitLab parses a subset, its "Unit
test reports" page). What is written is the common core, as the schema
Jenkins' JUnit plugin publishes (``junit-10.xsd``) states it:
``testsuites`` > ``testsuite`` (name, tests, failures, errors, skipped,
time, timestamp without a zone) > ``properties``, ``testcase`` (name,
classname, time) holding at most one of ``failure``, ``error``, ``skipped``
(each with a ``message``), and ``system-out``. The counts on each suite and
on the root are those of their testcases. GitLab keys a test by classname
and name and drops a duplicate, so each testcase's pair is unique here. A
report does not fail a CI job by itself: the command's exit code does.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from ..running.results import Status

__all__ = ["JunitError", "junit_tree", "report_view", "write_junit"]

#: characters XML 1.0 cannot hold at all (not even escaped): shown as \\xNN instead
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class JunitError(ValueError):
    """The data given is neither a run report nor a certificate (a one-line reason)."""


def _text(value: Any) -> str:
    return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], str(value))


def _number(value: Any) -> float:
    try:
        return float(value)  # "inf" in the reports' JSON is a float here too
    except (TypeError, ValueError):
        return math.nan


def _ratio(value: Any) -> str:
    x = _number(value)
    return f"{x:.3g}" if math.isfinite(x) else str(value)


def _timestamp(text: Any) -> Optional[str]:
    """ISO 8601 in UTC without the zone: the schema's pattern has none."""
    try:
        when = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if when.tzinfo is not None:
        when = when.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return when.isoformat(timespec="seconds")


def report_view(report: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a JUnit file (and the HTML report) needs, from a run report or a certificate:
    command, cells, fixtures, broken, minimum, seconds, started, verdict, reasons, profile, seed,
    spec_version (JunitError for anything else)."""
    if not isinstance(report, Mapping):
        raise JunitError(f"expected a run report or a certificate (a JSON object), got {type(report).__name__}")
    schema = str(report.get("schema", ""))
    if schema.startswith("ftspec-report/"):
        return {"command": "run", "cells": report.get("cells") or [], "fixtures": report.get("fixtures") or [],
                "broken": report.get("broken") or [], "minimum": int(report.get("minimum") or 0),
                "seconds": report.get("seconds"), "started": report.get("started"),
                "verdict": report.get("verdict"), "reasons": report.get("reasons") or [],
                "profile": report.get("profile"), "seed": report.get("seed"),
                "spec_version": report.get("spec_version")}
    if schema.startswith("ftspec-certificate/"):
        run = report.get("run") or {}
        return {"command": "certify", "cells": report.get("results") or [],
                "fixtures": report.get("fixtures") or [], "broken": [], "minimum": int(run.get("minimum") or 0),
                "seconds": run.get("seconds"), "started": report.get("issued"),
                "verdict": report.get("verdict"), "reasons": report.get("reasons") or [],
                "profile": run.get("profile"), "seed": run.get("seed"),
                "spec_version": report.get("spec_version")}
    raise JunitError(f"expected a run report (ftspec-report/1) or a certificate (ftspec-certificate/2), "
                     f"got schema {schema!r}")


def _short(cell: Mapping[str, Any], minimum: int) -> bool:
    """A passing cell below the minimum examples and not complete (core/verdict.py's rule)."""
    return int(cell.get("examples") or 0) < minimum and not cell.get("exhausted")


def _failure_text(failure: Mapping[str, Any]) -> list[str]:
    lines = [str(failure.get("message") or "")]
    if failure.get("reproducer"):
        lines.append(f"reproducer: {failure['reproducer']}")
    if failure.get("case_file"):
        lines.append(f"case file: {failure['case_file']}")
    diagnosis = failure.get("diagnosis") or {}
    for match in diagnosis.get("matches") or []:
        changes = ", ".join(f"{k}={v}" for k, v in (match.get("changes") or {}).items())
        lines.append(f"matches the declared set with {changes} (error/bound {_ratio(match.get('ratio'))})")
    divergence = diagnosis.get("divergence") or {}
    if divergence.get("where"):
        sub = f", {divergence['sublayer']}" if divergence.get("sublayer") else ""
        lines.append(f"first divergence: {divergence['where']}{sub}")
    for refusal in failure.get("refusals") or []:
        text = refusal.get("message", refusal) if isinstance(refusal, Mapping) else refusal
        lines.append(f"refusal answered: {text}")
    return lines


def _cell_case(cell: Mapping[str, Any], minimum: int) -> ET.Element:
    impl, algorithm = str(cell.get("implementation")), str(cell.get("algorithm"))
    case = ET.Element("testcase", classname=_text(f"ftspec.{impl}.{algorithm}"),
                      name=_text(f"{cell.get('dtype')}/{cell.get('device')}"))
    status, note = str(cell.get("status")), cell.get("note") or ""
    examples = int(cell.get("examples") or 0)
    failure = cell.get("failure") or {}
    if status == Status.FAIL:
        more = cell.get("more_failures") or []
        lines = _failure_text(failure) if failure else [note or "failed"]
        for i, other in enumerate(more, 1):
            lines += ["", f"further failure {i} ({other.get('signature') or other.get('check')}):",
                      *("  " + line for line in _failure_text(other))]
        el = ET.SubElement(case, "failure", message=_text(failure.get("message") or note or "failed"),
                           type=_text(failure.get("check") or "fail"))
        el.text = _text("\n".join(lines))
    elif status == Status.ERROR:
        message = note or failure.get("message") or "harness error"
        el = ET.SubElement(case, "error", message=_text(message), type="error")
        el.text = _text("\n".join(_failure_text(failure)) if failure else message)
    elif status == Status.NOT_IMPLEMENTED:
        ET.SubElement(case, "skipped", message=_text(f"not implemented: {impl} does not declare {algorithm} "
                                                     f"at {cell.get('dtype')}"))
    elif status == Status.PASS and not _short(cell, minimum):
        pass
    else:  # "no examples", or a pass short of the minimum: no verdict either way
        why = f"; {note}" if note else ""
        ET.SubElement(case, "skipped", message=_text(f"inconclusive: {examples} examples, fewer than the "
                                                     f"minimum {minimum}{why}"))
    if status == "not implemented":
        return case
    out = ET.SubElement(case, "system-out")
    checks = ", ".join(f"{k} {v}" for k, v in (cell.get("checks") or {}).items())
    out.text = _text(f"status {status}; {examples} examples; worst error/bound {_ratio(cell.get('worst_ratio'))}"
                     + (f"; checks: {checks}" if checks else "") + (f"; note: {note}" if note else ""))
    return case


def _fixture_case(fixture: Mapping[str, Any]) -> ET.Element:
    impl = fixture.get("implementation", fixture.get("impl"))
    case = ET.Element("testcase", classname=_text(f"ftspec.{impl}.fixtures.{fixture.get('algorithm')}"),
                      name=_text(f"{fixture.get('case')}/{fixture.get('dtype')}/{fixture.get('device')}"))
    seconds = _number(fixture.get("seconds"))
    if math.isfinite(seconds) and seconds >= 0:
        case.set("time", f"{seconds:.6f}")
    if not fixture.get("ok"):
        message = fixture.get("message") or f"error/bound {_ratio(fixture.get('ratio'))}"
        el = ET.SubElement(case, "failure", message=_text(message), type="fixture")
        el.text = _text(f"{message}\ngolden fixture {fixture.get('case')}: error/bound "
                        f"{_ratio(fixture.get('ratio'))}; bounds {fixture.get('bounds') or '-'}")
    return case


def _count(suite: ET.Element, cases: Iterable[ET.Element], seconds: float) -> None:
    cases = list(cases)
    suite.set("tests", str(len(cases)))
    for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attr, str(sum(1 for c in cases if c.find(tag) is not None)))
    suite.set("time", f"{max(seconds, 0.0):.3f}")


def junit_tree(report: Mapping[str, Any]) -> ET.ElementTree:
    """The JUnit XML document of ``report`` (a run report or a certificate, as plain data)."""
    shape = report_view(report)
    minimum = shape["minimum"]
    by_impl: dict[str, list[ET.Element]] = {}
    for cell in shape["cells"]:
        by_impl.setdefault(str(cell.get("implementation")), []).append(_cell_case(cell, minimum))
    fixture_seconds: dict[str, float] = {}
    for fixture in shape["fixtures"]:
        impl = str(fixture.get("implementation", fixture.get("impl")))
        by_impl.setdefault(impl, []).append(_fixture_case(fixture))
        s = _number(fixture.get("seconds"))
        fixture_seconds[impl] = fixture_seconds.get(impl, 0.0) + (s if math.isfinite(s) else 0.0)
    for broken in shape["broken"]:
        name = str(broken.get("name"))
        case = ET.Element("testcase", classname=_text(f"ftspec.{name}"), name="load")
        el = ET.SubElement(case, "error", message=_text(f"failed to load: {broken.get('error')}"), type="load")
        el.text = _text(f"plugin {name!r} failed to load: {broken.get('error')}")
        by_impl.setdefault(name, []).append(case)

    root = ET.Element("testsuites", name=f"ftspec {shape['command']}")
    stamp = _timestamp(shape["started"])
    for impl, cases in by_impl.items():
        suite = ET.SubElement(root, "testsuite", name=_text(f"ftspec.{impl}"))
        if stamp:
            suite.set("timestamp", stamp)
        # per-cell times are not recorded (a search judges every implementation on each example in
        # turn); a suite's time is that of its fixture replays, which are
        _count(suite, cases, fixture_seconds.get(impl, 0.0))
        props = ET.SubElement(suite, "properties")
        for key in ("verdict", "profile", "seed", "spec_version", "minimum"):
            ET.SubElement(props, "property", name=key, value=_text(shape[key]))
        for reason in shape["reasons"]:
            ET.SubElement(props, "property", name="reason", value=_text(reason))
        suite.extend(cases)
    every = list(root.iter("testcase"))
    _count(root, every, 0.0)
    seconds = _number(shape["seconds"])
    root.set("time", f"{seconds:.3f}" if math.isfinite(seconds) and seconds >= 0 else "0.000")
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(report: Mapping[str, Any], path: Path | str) -> Path:
    """Write ``report`` (run report or certificate, plain data) as JUnit XML at ``path``."""
    tree = junit_tree(report)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path
