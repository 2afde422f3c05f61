"""JUnit XML from a run report or a certificate (conformance/session/junit.py, ``--junit-xml``).

Each file is read back with ElementTree and checked against the structure CI tools read (the
schema Jenkins' JUnit plugin publishes, junit-10.xsd, which GitLab and the GitHub Actions
reporters follow; restated below as checks, since no XSD validator is installed): testsuites >
testsuite (name, tests, failures, errors, skipped, time, timestamp without a zone) > properties?,
testcase*, system-out?; a testcase holds at most one of failure, error, skipped, and the counts on
every suite and on the root are those of their testcases. Every cell and every failure of the
report must appear, with its message and reproducer.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from ftspec.conformance.session.junit import JunitError, junit_tree, write_junit

from .report_samples import MINIMUM, failures, sample_report

SUITE_ATTRS = {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname", "id", "package",
               "disabled", "file"}
CASE_ATTRS = {"name", "classname", "time", "assertions", "status", "file", "line"}
DECIMAL = re.compile(r"\d+(\.\d+)?")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")  # xs:dateTime as the schema restricts it: no zone


def check_schema(root: ET.Element) -> None:
    """AssertionError naming the first departure from the structure above."""
    assert root.tag == "testsuites", root.tag
    assert set(root.attrib) <= {"name", "time", "tests", "failures", "errors", "skipped", "disabled"}, root.attrib
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root:
        assert suite.tag == "testsuite", suite.tag
        assert {"name", "tests"} <= set(suite.attrib) <= SUITE_ATTRS, suite.attrib
        if "timestamp" in suite.attrib:
            assert TIMESTAMP.fullmatch(suite.attrib["timestamp"]), suite.attrib["timestamp"]
        if "time" in suite.attrib:
            assert DECIMAL.fullmatch(suite.attrib["time"]), suite.attrib["time"]
        order = [child.tag for child in suite]
        rank = {"properties": 0, "testcase": 1, "system-out": 2, "system-err": 3}
        assert all(tag in rank for tag in order), order
        assert [rank[t] for t in order] == sorted(rank[t] for t in order), order
        assert order.count("properties") <= 1
        for prop in suite.iter("property"):
            assert set(prop.attrib) == {"name", "value"}, prop.attrib
        cases = suite.findall("testcase")
        counted = {"tests": len(cases), "failures": 0, "errors": 0, "skipped": 0}
        for case in cases:
            assert {"name", "classname"} <= set(case.attrib) <= CASE_ATTRS, case.attrib
            if "time" in case.attrib:
                assert DECIMAL.fullmatch(case.attrib["time"]), case.attrib["time"]
            outcome = [child for child in case if child.tag in ("failure", "error", "skipped")]
            assert len(outcome) <= 1, [c.tag for c in outcome]
            assert all(child.tag in ("failure", "error", "skipped", "system-out", "system-err") for child in case)
            for child in outcome:
                allowed = {"message"} if child.tag == "skipped" else {"message", "type"}
                assert "message" in child.attrib and set(child.attrib) <= allowed, child.attrib
                counted[{"failure": "failures", "error": "errors", "skipped": "skipped"}[child.tag]] += 1
        for key, n in counted.items():
            assert suite.get(key) == str(n), (suite.get("name"), key, suite.get(key), n)
            totals[key] += n
    for key, n in totals.items():
        assert root.get(key) == str(n), (key, root.get(key), n)


def _cases(root: ET.Element) -> dict[tuple[str, str], ET.Element]:
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def _outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "pass"


def _expected(cell: dict, minimum: int) -> str:
    """What each status must become (docs/reports.md, "JUnit XML"), restated from the docs."""
    status = cell["status"]
    if status in ("fail", "error"):
        return {"fail": "failure", "error": "error"}[status]
    if status == "pass" and (cell["examples"] >= minimum or cell.get("exhausted")):
        return "pass"
    return "skipped"  # not implemented, no examples, or a pass short of the minimum (inconclusive)


def assert_every_cell_and_failure(report: dict, root: ET.Element, minimum: int) -> None:
    cases = _cases(root)
    assert len(cases) == len(list(root.iter("testcase")))  # GitLab drops a repeated (classname, name)
    cells = report.get("cells") or report.get("results")
    for cell in cells:
        key = (f"ftspec.{cell['implementation']}.{cell['algorithm']}", f"{cell['dtype']}/{cell['device']}")
        assert key in cases, key
        assert _outcome(cases[key]) == _expected(cell, minimum), (key, _outcome(cases[key]))
    assert len([c for c in root.iter("testcase") if ".fixtures." not in c.get("classname", "")
                and c.get("name") != "load"]) == len(cells)
    text = "\n".join((el.text or "") + el.get("message", "") for el in root.iter() if el.tag in ("failure", "error"))
    for failure in failures(report):
        assert failure["reproducer"] in text, failure["reproducer"]
        assert failure["message"].replace("\x01", "\\x01") in text, failure  # not XML: shown escaped
    for fixture in report.get("fixtures", []):
        key = (f"ftspec.{fixture['implementation']}.fixtures.{fixture['algorithm']}",
               f"{fixture['case']}/{fixture['dtype']}/{fixture['device']}")
        assert key in cases and _outcome(cases[key]) == ("pass" if fixture["ok"] else "failure"), key


def test_every_cell_failure_and_fixture_of_a_report_is_a_testcase(tmp_path):
    report = sample_report()
    path = write_junit(report, tmp_path / "out" / "run.xml")
    root = ET.parse(path).getroot()  # parses: the control character in a message was escaped
    check_schema(root)
    assert_every_cell_and_failure(report, root, MINIMUM)
    cases = _cases(root)
    short = cases[("ftspec.good.layer_norm", "float16/cpu")].find("skipped")
    assert "inconclusive" in short.get("message") and f"minimum {MINIMUM}" in short.get("message")
    failed = cases[("ftspec.bad.d_transformer", "float32/cpu")].find("failure")
    assert failed.get("type") == "spec" and "epsilon=1e-05" in failed.text and "layer 1, norm" in failed.text
    assert "raised ValueError" in failed.text  # the further failure, in the same testcase
    load = cases[("ftspec.gone", "load")].find("error")
    assert "No module named 'gone'" in load.get("message")
    fixture = cases[("ftspec.good.fixtures.layer_norm", "layer_norm-paper/float32/cpu")]
    assert float(fixture.get("time")) == pytest.approx(0.012)
    assert {s.get("timestamp") for s in root} == {"2026-12-06T16:00:00"}  # 17:00+01:00 in UTC
    assert root.get("time") == "12.500"


@pytest.mark.parametrize("damage", ["count", "two outcomes", "no message", "zone"])
def test_the_schema_check_rejects_what_ci_tools_would_not_read(damage):
    """The check above can fail: each damage is a departure a CI reader trips on."""
    root = junit_tree(sample_report()).getroot()
    suite = root[0]
    case = suite.find("testcase")
    if damage == "count":
        suite.set("tests", str(int(suite.get("tests")) + 1))
    elif damage == "two outcomes":
        ET.SubElement(case, "failure", message="x")
        ET.SubElement(case, "error", message="y")
    elif damage == "no message":
        del root.find(".//failure").attrib["message"]
    else:
        suite.set("timestamp", "2026-12-06T16:00:00+00:00")
    with pytest.raises(AssertionError):
        check_schema(root)


def test_a_certificate_is_read_as_well():
    report = sample_report()
    cert = {"schema": "ftspec-certificate/2", "verdict": report["verdict"], "reasons": report["reasons"],
            "spec_version": "2.3.0", "results": report["cells"], "fixtures": report["fixtures"],
            "run": {"profile": "quick", "seed": 7, "minimum": MINIMUM, "seconds": 3.0},
            "issued": "2026-12-06T16:00:00+00:00"}
    root = junit_tree(cert).getroot()
    check_schema(root)
    assert_every_cell_and_failure(cert, root, MINIMUM)
    assert root.get("name") == "ftspec certify"


def test_anything_else_is_refused_in_one_line():
    with pytest.raises(JunitError, match="expected a run report .* got schema 'other/1'"):
        junit_tree({"schema": "other/1"})


def test_a_real_run_s_report_as_junit_and_html(here):
    """Once, a real report (the example plugin and a copy with the variance over N − 1, in one
    process, a few examples): the sample above has the keys its cells have, and both files carry
    every cell and failure."""
    import importlib

    from ftspec.conformance.session.commands import Settings, run
    from ftspec.conformance.session.html_report import write_html
    from ftspec.conformance.session.report import report_dict

    from .test_html_report import assert_html_holds

    source = (here / "cli_example.py").read_text()
    biased = "v = ((X - m) ** 2).mean(axis=-2, keepdims=True)"
    assert biased in source
    (here / "cli_bad_example.py").write_text(
        source.replace(biased, "v = ((X - m) ** 2).sum(axis=-2, keepdims=True) / (X.shape[-2] - 1)"))
    good = importlib.import_module("cli_example").implementation
    bad = importlib.import_module("cli_bad_example").implementation
    result = run([("good", good), ("bad", bad)],
                 Settings(profile="quick", in_process=True, examples=3, fixtures="none", algorithms=("layer_norm",),
                          dtypes=("float64",), case_dir=str(here / "cases")))
    report = report_dict(result, result.plugins)
    assert [c["status"] for c in report["cells"]] == ["pass", "fail"]
    for cell in report["cells"]:
        assert set(sample_report()["cells"][0]) <= set(cell), set(sample_report()["cells"][0]) - set(cell)
        assert len(cell["ratios"]) == cell["examples"]  # every example of these few recorded
    root = ET.parse(write_junit(report, here / "run.xml")).getroot()
    check_schema(root)
    assert_every_cell_and_failure(report, root, report["minimum"])
    assert_html_holds(report, (write_html(report, here / "run.html")).read_text())


def _quick(*more: str) -> list[str]:
    return ["--profile", "quick", "--examples", "10", "--algorithm", "layer_norm", "--dtype", "float64",
            "--no-fixtures", "--in-process", "--quiet", *more]


@pytest.mark.parametrize("command", ["run", "certify"])
def test_the_commands_write_both_files(here, command, capsys):
    """``--junit-xml`` and ``--html`` from ``ftspec run`` and ``ftspec certify``, from the data the
    JSON report or certificate holds."""
    import json

    from ftspec.tools.cli import main

    from .test_html_report import assert_html_holds

    target = (["--impl", "cli_example:implementation", "--json-report", "r.json"] if command == "run"
              else ["cli_example:implementation", "--out", "cert"])
    assert main([command, *target, *_quick("--junit-xml", "out/r.xml", "--html", "out/r.html")]) == 3  # partial
    data = json.loads((here / ("r.json" if command == "run" else "cert/certificate.json")).read_text())
    root = ET.parse(here / "out" / "r.xml").getroot()
    check_schema(root)
    assert_every_cell_and_failure(data, root, 10 if command == "certify" else 2)
    assert_html_holds(data, (here / "out" / "r.html").read_text())
    out = capsys.readouterr().out
    assert "JUnit XML: out/r.xml" in out and "HTML report: out/r.html" in out
    if command == "certify":  # the ratios the plots read leave the certificate verifiable
        assert main(["certify", "--verify", "cert/certificate.json"]) == 0


@pytest.mark.parametrize("option", ["--junit-xml", "--html"])
@pytest.mark.parametrize("command", ["run", "certify"])
def test_an_unwritable_output_is_refused_before_the_run(here, monkeypatch, capsys, option, command):
    from ftspec.tools.cli import main

    called = []
    monkeypatch.setattr("ftspec.conformance.session.commands.run", lambda *a, **k: called.append(a))
    monkeypatch.setattr("ftspec.conformance.session.commands.certify", lambda *a, **k: called.append(a))
    (here / "afile").write_text("")
    target = ["--impl", "numpy"] if command == "run" else ["numpy", "--out", "cert"]
    assert main([command, *target, option, "afile/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "afile is not a directory" in err and not called


def test_verify_takes_no_output_options(here, capsys):
    from ftspec.tools.cli import main

    assert main(["certify", "--verify", "c.json", "--junit-xml", "x.xml"]) == 2
    assert "not with --verify or --reproduce" in capsys.readouterr().err
