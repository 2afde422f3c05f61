"""Certificates are untrusted data, like case files (issue 22).

``ftspec certify --reproduce CERT --impl NAME`` runs only the implementation
named on the command line: the target a certificate records is shown, never
imported, and the settings it records are bounded (``in_process`` and
``jobs`` never come from the file). ``--verify`` reads through the bounded
reader of case files (size, regular files only, nesting, objects and arrays,
digits per number) and refuses every hostile file in one line, exit 1, no
traceback; a pass with a NaN, negative or infinite ratio is refused; a
forged "conformant" with none of the fixture replays its selection calls for
is refused; a forgery consistent with itself is not detectable, and the
message and the Markdown say so. Hostile files are written in tmp_path.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from pathlib import Path

import pytest

from ftspec.conformance.core import casefile
from ftspec.conformance.core.casefile import CaseFileError, read_untrusted_json
from ftspec.conformance.session.certificate import (
    LIMITS,
    REPRODUCE_LIMITS,
    CertificateError,
    consistency,
    load,
    recorded_settings,
    render_markdown,
    verify,
)
from ftspec.conformance.session.certificate.derived import examples_run
from ftspec.conformance.session.commands import Settings, certify, reproduce
from ftspec.tools.cli import main

from .certificate_files import rehashed, written

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()
#: the example plugin with rms_norm wrong: its rms_norm cells fail
WRONG = EXAMPLE + "\nimplementation.algorithms['rms_norm'] = lambda inputs, params, ctx: inputs['X']\n"


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("untrusted_cert_plugin")
    (d / "ucert_example.py").write_text(EXAMPLE)
    (d / "ucert_wrong.py").write_text(WRONG)
    return d


@pytest.fixture
def here(plugin_dir, monkeypatch) -> Path:
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.chdir(plugin_dir)
    return plugin_dir


def _certify(plugin_dir: Path, tmp: Path, target: str, **kw) -> dict:
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(plugin_dir))
    mp.chdir(plugin_dir)
    try:
        settings = Settings(**{"profile": "quick", "in_process": True, "case_dir": str(tmp / "cases"), **kw})
        return certify(target, settings).doc
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def issued(plugin_dir, tmp_path_factory) -> dict:
    """A conformant certificate of the example plugin: every cell and every golden fixture."""
    return _certify(plugin_dir, tmp_path_factory.mktemp("ucert"), "ucert_example:implementation")


@pytest.fixture(scope="module")
def small(plugin_dir, tmp_path_factory) -> dict:
    """A cheap conformant-within-its-selection certificate (rms_norm only, no fixtures): reproduced below."""
    return _certify(plugin_dir, tmp_path_factory.mktemp("ucert_small"), "ucert_example:implementation",
                    examples=10, seconds=0, algorithms=("rms_norm",), fixtures="none")


@pytest.fixture(scope="module")
def failing(plugin_dir, tmp_path_factory) -> dict:
    """A non-conformant certificate (rms_norm fails), made with no fixture replay."""
    return _certify(plugin_dir, tmp_path_factory.mktemp("ucert_wrong"), "ucert_wrong:implementation",
                    examples=10, fixtures="none")




def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _refused_by_verify(capsys, path: Path, needle: str) -> str:
    """``certify --verify`` refuses: exit 1, one line on stderr naming the file, no traceback."""
    code, out, err = _cli(capsys, "certify", "--verify", str(path))
    assert code == 1, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert needle in err and str(path) in " ".join(err.split()), err
    with pytest.raises(CertificateError) as info:
        load(path)
    assert "\n" not in str(info.value) and needle in str(info.value)
    return str(info.value)


def _retarget(doc: dict, target: str) -> dict:
    """The certificate as if it had been made for ``target`` (every field that names it)."""
    doc = copy.deepcopy(doc)
    old = doc["subject"]["target"]
    doc["subject"]["target"] = target
    for row in doc["results"] + doc["fixtures"]:
        row["implementation"] = target
    env = doc["environment"]["implementations"]
    env[target] = env.pop(old)
    return rehashed(doc)


# -- --reproduce: the implementation comes from the command line ------------------------------

def test_the_recorded_target_is_shown_never_imported(small, here, tmp_path, capsys):
    marker = tmp_path / "ran"
    (here / "evil_cert.py").write_text(f"open({str(marker)!r}, 'w').close()\nfrom ucert_example import "
                                       "implementation as impl\n")
    doc = _retarget(small, "evil_cert:impl")
    doc["run"]["settings"].update(in_process=True, jobs=10**6)
    path = written(tmp_path, rehashed(doc))
    assert verify(path)[0]  # it is data, consistent with itself ...
    code, out, err = _cli(capsys, "certify", "--reproduce", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    line = " ".join(err.split())
    assert "--impl" in line and "'evil_cert:impl'" in line and "never imported" in line
    assert f"ftspec certify --reproduce {path} --impl evil_cert:impl" in line  # the command to type
    assert not marker.exists()  # ... and never run
    code, out, err = _cli(capsys, "certify", "--reproduce", str(path), "--impl", "ucert_example:implementation",
                          "--jobs", "1", "--quiet")
    assert code == 0, out + err
    assert "'evil_cert:impl'" in out and "not imported" in out and "reproduced" in out
    assert not marker.exists()
    # the positional TARGET is not a way round --impl
    code, out, err = _cli(capsys, "certify", "evil_cert:impl", "--reproduce", str(path))
    assert code == 2 and "--impl" in err and not marker.exists()


def test_in_process_and_jobs_never_come_from_the_file(small, here, tmp_path):
    doc = copy.deepcopy(small)
    assert doc["run"]["settings"]["in_process"] is True  # the record says in-process ...
    doc["run"]["settings"]["jobs"] = 10**6
    path = written(tmp_path, rehashed(doc))
    settings = recorded_settings(load(path))
    assert "in_process" not in settings and "jobs" not in settings
    rep = reproduce(path, "ucert_example:implementation", jobs=1, case_dir=str(tmp_path / "again"))
    assert rep.same and rep.certificate.doc["run"]["jobs"] == 1  # ... the reproduction ran in a worker


@pytest.mark.parametrize("key, value, words", [
    ("examples", 10**9, f"from 1 to {REPRODUCE_LIMITS['examples']}"),
    ("examples", 0, "run.settings.examples"),
    ("seconds", 1e9, "run.settings.seconds"),
    ("seconds", -1, "run.settings.seconds"),
    ("call_timeout", 1e9, "run.settings.call_timeout"),
    ("shards", 10**6, "run.settings.shards"),
    ("block", 10**6, "run.settings.block"),
    ("block", 0, "run.settings.block"),
    ("profile", "evil", "run.settings.profile"),
    ("seed", 7, "run.settings.seed"),
    ("devices", ["cpu"] * 2 + [f"d{i}" for i in range(1000)], "run.settings.devices"),
    ("algorithms", ["layer_norm", "os.system"], "run.settings.algorithms"),
    ("fixtures", "every", "run.settings.fixtures"),
])
def test_settings_out_of_bounds_are_refused_before_anything_runs(small, here, tmp_path, capsys, key, value, words):
    doc = copy.deepcopy(small)
    doc["run"]["settings"][key] = value
    path = written(tmp_path, rehashed(doc))
    with pytest.raises(CertificateError, match="run.settings") as info:
        recorded_settings(load(path))
    assert words in str(info.value)
    started = time.perf_counter()
    code, out, err = _cli(capsys, "certify", "--reproduce", str(path), "--impl", "ucert_example:implementation")
    assert code == 2 and words in " ".join(err.split()) and len(err.strip().splitlines()) == 1, err
    assert time.perf_counter() - started < 5 and "Reproduction" not in out  # refused, nothing searched


def test_the_block_a_certificate_records_is_the_block_it_reproduces(small, tmp_path):
    """The cases a seed draws depend on the block size: a certificate records the one it ran with
    (the profile's when none was asked for), and one written before blocks, none, meaning 1."""
    assert small["run"]["settings"]["block"] == 4  # the quick profile's
    assert recorded_settings(small)["block"] == 4
    doc = copy.deepcopy(small)
    del doc["run"]["settings"]["block"]
    assert recorded_settings(load(written(tmp_path, rehashed(doc))))["block"] == 1


def test_unknown_settings_are_ignored(small, tmp_path):
    doc = copy.deepcopy(small)
    doc["run"]["settings"]["scheduler"] = "tcp://attacker:8786"
    doc["run"]["settings"]["case_dir"] = "/etc"
    settings = recorded_settings(load(written(tmp_path, rehashed(doc))))
    assert "scheduler" not in settings and "case_dir" not in settings
    assert settings["algorithms"] == ("rms_norm",) and settings["examples"] == 10


# -- --verify: hostile files are refused in one line ------------------------------------------

def test_a_fifo_is_refused_without_hanging(tmp_path, capsys):
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    done: list[tuple[bool, str]] = []
    worker = threading.Thread(target=lambda: done.append(verify(path)), daemon=True)
    worker.start()
    worker.join(10)
    assert done, "verify hung on a FIFO"
    assert not done[0][0] and "not a regular file (a FIFO)" in done[0][1]
    _refused_by_verify(capsys, path, "not a regular file")


def test_a_symbolic_link_to_dev_zero_is_refused(tmp_path, capsys):
    path = tmp_path / "zero.json"
    path.symlink_to("/dev/zero")
    _refused_by_verify(capsys, path, "not a regular file (a character device)")


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB, sparse
    started = time.perf_counter()
    _refused_by_verify(capsys, path, f"has {2 << 30} bytes; at most {LIMITS['bytes']} are allowed")
    assert time.perf_counter() - started < 5  # from stat, before a byte is read


def test_deep_nesting_is_refused(tmp_path, capsys):
    _refused_by_verify(capsys, _write_text(tmp_path, "[" * 100_000 + "]" * 100_000), "nests arrays and objects")
    # below Python's recursion limit, beyond the reader's
    _refused_by_verify(capsys, _write_text(tmp_path, "[" * 100 + "]" * 100, "d.json"), "more than 64 levels")


def _write_text(tmp_path: Path, text: str, name: str = "c.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_100000_digit_integer_is_refused(issued, tmp_path, capsys):
    text = json.dumps(issued).replace('"seed": 0', '"seed": ' + "7" * 100_000, 1)
    assert "7" * 100_000 in text
    _refused_by_verify(capsys, _write_text(tmp_path, text), "a number written with 100000 characters")


def test_a_million_rows_are_refused_by_a_bound_not_parsed(issued, tmp_path, capsys, monkeypatch):
    doc = {k: v for k, v in issued.items()}
    doc["results"] = [{}] * 1_200_000
    path = written(tmp_path, doc)
    monkeypatch.setattr(casefile.json, "loads", lambda *a, **k: pytest.fail("the rows were parsed"))
    started = time.perf_counter()
    _refused_by_verify(capsys, path, "at most 1000000 JSON objects and arrays are allowed")
    assert time.perf_counter() - started < 10


def test_more_rows_than_a_certificate_can_have_are_refused(issued, tmp_path, capsys):
    doc = copy.deepcopy(issued)
    cell = next(c for c in doc["results"] if c["status"] == "pass")
    doc["results"] = [cell] * (LIMITS["results"] + 1)
    started = time.perf_counter()
    _refused_by_verify(capsys, written(tmp_path, rehashed(doc)),
                       f"has {LIMITS['results'] + 1} rows; at most {LIMITS['results']} are allowed")
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.update(results=[1, 2]), "field results[0] must be a JSON object"),
    (lambda d: d.update(results="abc"), "field results must be a JSON array"),
    (lambda d: d.update(results={"a": 1}), "field results must be a JSON array"),
    (lambda d: d.update(results=[{"status": "pass"}]), "field results[0].algorithm"),
    (lambda d: d["results"][0].update(status=["pass"]), "field results[0].status"),
    (lambda d: d["results"][0].update(examples="10"), "field results[0].examples"),
    (lambda d: d["results"][0].update(failure="none"), "field results[0].failure"),
    (lambda d: d.update(fixtures=[None]), "field fixtures[0] must be a JSON object"),
    (lambda d: d["fixtures"][0].update(ok="yes"), "field fixtures[0].ok"),
    (lambda d: d.update(subject=[]), "field subject must be a JSON object"),
    (lambda d: d["subject"].update(target="a\nb"), "field subject.target"),
    (lambda d: d.update(run=None), "field run must be a JSON object"),
    (lambda d: d["run"].update(minimum=True), "field run.minimum"),
    (lambda d: d["selection"].pop("declared"), "field selection.declared"),
    (lambda d: d["selection"]["declared"].update(algorithms=["x"] * 100_000), "field selection.declared.algorithms"),
    (lambda d: d.update(algorithms={"layer_norm": 3}), "field algorithms.'layer_norm'"),
    (lambda d: d["environment"].update(implementations=[]), "field environment.implementations"),
    (lambda d: d.update(variants=[{"json": {"no_such_switch": 1}}]), "field variants[0].json is not a variant set"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"maximum": {"d_e": "x"}}}), "subject.limits.layer_norm"),
    # the limits' constants, inequalities and multiples (issue 27)
    (lambda d: d["subject"].update(limits={"layer_norm": {"at_most": [["d_e"]]}}), "subject.limits.layer_norm"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"at_most": {"d_e": "ell"}}}), "pairs of sides"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"at_most": [["d_e", "4**ell"]]}}),
     "is not a hyperparameter name or a product"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"equal": [["d_e", "__import__('os')"]]}}),
     "is not a hyperparameter name or a product"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"equal": [["d_e", "9" * 300]]}}), "pairs of sides"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"equal": [["d_e", "ell\nerror: forged"]]}}),
     "is not a hyperparameter name or a product"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"equal": [["d_e", "99999999*ell"]]}}),
     "a constant factor must be"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"at_most": [["d_e", "4*no_such_size"]]}}),
     "names unknown hyperparameters"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"multiple_of": {"d_e": 0}}}), "each k must be an integer"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"multiple_of": {"d_e": "2"}}}), "each k must be an integer"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"multiple_of": {"d_e": 2 ** 40}}}),
     "each k must be an integer"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"multiple_of": [["d_e", 2]]}}), "multiple_of must be"),
    (lambda d: d["subject"].update(limits={"layer_norm": {"parity": {"d_e": 2}}}), "unknown fields 'parity'"),
    # a list or an object where a name is looked up (unhashable) is refused like any wrong name
    (lambda d: d["results"][0].update(algorithm=["layer_norm"]),
     "field results[0].algorithm must be a registry algorithm name, got ['layer_norm']"),
    (lambda d: d["run"].update(profile={"quick": 1}), "field run.profile must be one of"),
])
def test_malformed_fields_are_one_line_refusals(issued, tmp_path, capsys, edit, needle):
    doc = copy.deepcopy(issued)
    edit(doc)
    _refused_by_verify(capsys, written(tmp_path, rehashed(doc)), needle)
    assert consistency(rehashed(doc))  # the library says so too, without raising


def test_the_first_bad_field_in_the_schemas_order_is_the_one_named(issued, tmp_path, capsys):
    """Fields are read in the order of the schema's table, the rows of an array one after another:
    a bad field of the first row is named before a bad field of the second, whichever was edited
    first, and a row that is not an object before any row's fields."""
    doc = copy.deepcopy(issued)
    doc["results"][1]["status"] = "passed"
    doc["results"][0]["examples"] = -1
    _refused_by_verify(capsys, written(tmp_path, rehashed(doc)), "field results[0].examples")
    doc["results"].append("not a cell")
    _refused_by_verify(capsys, written(tmp_path, rehashed(doc)), f"field results[{len(doc['results']) - 1}] must be")


def test_the_schema_names_the_fields_a_built_certificate_writes(issued):
    """Every field of the schema's table is one ``build`` writes (a field renamed on one side only
    would leave the other reading nothing), and the table accepts what ``build`` writes."""
    from ftspec.conformance.session.certificate import schema

    missing: list[str] = []

    def walk(kind, value, where):
        fields = kind.fields if isinstance(kind, (schema.Obj, schema.Rows)) else ()
        items = value if isinstance(kind, schema.Rows) else [value]
        for item in items:
            for f in fields:
                if isinstance(f, schema.Field):
                    if f.key not in item:
                        missing.append(f"{where}.{f.key}")
                    else:
                        walk(f.kind, item[f.key], f"{where}.{f.key}")
        if isinstance(kind, schema.Entries):
            for key, item in value.items():
                walk(kind.value, item, f"{where}.{key}")

    walk(schema.CERTIFICATE, issued, "")
    assert not missing, sorted(set(missing))
    assert schema.check(issued)["variants"] is not None  # the records' readers ran and kept what they read


def _pass_with_ratio(doc: dict, ratio) -> None:
    next(c for c in doc["results"] if c["status"] == "pass")["worst_ratio"] = ratio


@pytest.mark.parametrize("ratio", ["nan", float("nan"), -0.5, "-inf", "inf", "0.5", "1e400"])
def test_a_pass_needs_a_ratio_from_0_to_1(issued, tmp_path, capsys, ratio):
    doc = copy.deepcopy(issued)
    _pass_with_ratio(doc, ratio)
    message = _refused_by_verify(capsys, written(tmp_path, rehashed(doc)), "'pass' with an error ratio of")
    assert "not a number from 0 to 1" in message


@pytest.mark.parametrize("ratio", ["nan", float("nan"), -1.0, "inf"])
def test_an_ok_fixture_needs_a_ratio_from_0_to_1(issued, tmp_path, capsys, ratio):
    doc = copy.deepcopy(issued)
    doc["fixtures"][0]["ratio"] = ratio
    _refused_by_verify(capsys, written(tmp_path, rehashed(doc)), "'ok' with an error ratio of")


def test_the_json_nan_literal_in_a_pass_is_refused(issued, tmp_path, capsys):
    doc = copy.deepcopy(issued)
    _pass_with_ratio(doc, float("nan"))
    doc = rehashed(doc)
    text = json.dumps(doc)  # writes the bare NaN literal
    assert "NaN" in text
    _refused_by_verify(capsys, _write_text(tmp_path, text), "'pass' with an error ratio of nan")


# -- forgeries ---------------------------------------------------------------------------------

def _forged_pass(failing: dict) -> dict:
    """The failing certificate rewritten as a pass, every summary to match, under the 'all' fixture
    selection it never replayed: consistent except for the fixture replays it lacks."""
    doc = copy.deepcopy(failing)
    assert doc["verdict"] == "non-conformant" and not doc["fixtures"]
    minimum = doc["run"]["minimum"]
    for c in doc["results"]:
        if c["status"] == "fail":
            c.update(status="pass", failure=None, more_failures=[], worst_ratio=0.5,
                     examples=max(c["examples"], minimum))
    cells = [c for c in doc["results"] if c["status"] != "not implemented"]
    for name, summary in doc["algorithms"].items():
        summary.update(verdict="pass", worst_ratio=0.5,
                       examples=sum(c["examples"] for c in cells if c["algorithm"] == name))
    doc["run"]["examples_run"] = json.loads(json.dumps(examples_run(cells)))
    doc["selection"]["fixtures"] = "all"
    doc["selection"]["narrowed"] = []
    doc["run"]["fixture_selection"] = "all"
    doc["run"]["settings"]["fixtures"] = None
    doc.update(verdict="conformant", reasons=[])
    return rehashed(doc)


def test_a_forged_pass_with_no_fixture_replay_is_refused(failing, tmp_path, capsys):
    forged = _forged_pass(failing)
    problems = consistency(forged)
    assert len(problems) == 1 and "fixture replays its 'all' selection calls for are not recorded" in problems[0]
    message = _refused_by_verify(capsys, written(tmp_path, forged), "are not recorded (it records 0)")
    assert "layer_norm--" in message or "rms_norm--" in message  # names a missing replay


def test_a_forged_pass_that_drops_its_fixture_set_is_refused(failing, tmp_path, capsys):
    forged = _forged_pass(failing)
    forged["run"]["fixture_set"] = None
    _refused_by_verify(capsys, written(tmp_path, rehashed(forged)), "names no fixture set")


def test_a_forged_pass_cannot_pose_as_a_replay_that_failed_as_a_whole(failing, tmp_path, capsys):
    """The count is skipped only where the replay failed as a whole, which makes the verdict
    non-conformant: a passing stand-in record or a device error with no error cell is refused."""
    forged = _forged_pass(failing)
    forged["fixtures"] = [{"case": "(all)", "algorithm": "-", "implementation": forged["subject"]["target"],
                           "dtype": "-", "device": "-", "ok": True, "ratio": 0.0}]
    _refused_by_verify(capsys, written(tmp_path, rehashed(forged)), "are not recorded")
    forged = _forged_pass(failing)
    forged["environment"]["implementations"][forged["subject"]["target"]]["devices"] = ["error: none today"]
    _refused_by_verify(capsys, written(tmp_path, rehashed(forged)), "devices are recorded as an error")


def test_a_forgery_consistent_with_itself_verifies_and_says_what_that_means(failing, tmp_path):
    """The limit, stated: a forgery that names another fixture set cannot be counted here, and one
    that agrees with itself passes --verify; the message says only --reproduce shows the truth."""
    forged = _forged_pass(failing)
    forged["run"]["fixture_set"]["manifest_sha256"] = "0" * 64
    ok, message = verify(written(tmp_path, rehashed(forged)))
    assert ok and "fixture replays not counted" in message
    assert "not that its results are true" in message and "--reproduce" in message and "--impl NAME" in message
    markdown = render_markdown(forged)
    assert "It cannot find a forgery that agrees with itself" in markdown
    assert "`ftspec certify --reproduce certificate.json --impl NAME`" in markdown


def test_a_genuine_certificate_records_every_fixture_replay_it_calls_for(issued, tmp_path):
    """The count --verify makes is the replay's own: a genuine certificate passes it, and one
    deleted replay fails it."""
    assert issued["run"]["fixture_set"]["manifest_sha256"] and len(issued["fixtures"]) > 1
    assert verify(written(tmp_path, issued))[0]
    doc = copy.deepcopy(issued)
    gone = doc["fixtures"].pop()
    problems = consistency(rehashed(doc))
    assert problems == [f"1 of the {len(issued['fixtures'])} fixture replays its 'all' selection calls for are "
                        f"not recorded (it records {len(doc['fixtures'])}), e.g. {gone['case']} {gone['dtype']} "
                        f"{gone['device']}"]


# -- the same reader for case files ------------------------------------------------------------

def test_the_case_file_reader_refuses_fifos_devices_and_long_numbers(tmp_path):
    fifo = tmp_path / "c.json"
    os.mkfifo(fifo)
    with pytest.raises(CaseFileError, match=r"not a regular file \(a FIFO\)"):
        read_untrusted_json(fifo, what="case file", limit=1 << 20)
    zero = tmp_path / "z.json"
    zero.symlink_to("/dev/zero")
    with pytest.raises(CaseFileError, match="character device"):
        read_untrusted_json(zero, what="case file", limit=1 << 20)
    digits = _write_text(tmp_path, '{"batch": ' + "9" * 5000 + "}", "n.json")
    with pytest.raises(CaseFileError, match="5000 characters"):
        read_untrusted_json(digits, what="case file", limit=1 << 20)
    floats = _write_text(tmp_path, '{"x": 0.' + "1" * 100 + "}", "f.json")
    with pytest.raises(CaseFileError, match="102 characters"):
        read_untrusted_json(floats, what="case file", limit=1 << 20)
