"""Certificates: the verdict they state rests on the results they record.

One certificate of the example plugin (quick profile, every fixture) is made
once; the tests edit copies of it the way a careless or dishonest editor
would, recompute the content hash, and expect ``verify`` to refuse.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ftspec.conformance.session.certificate import CertificateError, consistency, load, verify
from ftspec.conformance.session.commands import NothingTested, Settings, certify, reproduce

from .certificate_files import rehashed, written

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cert_plugin")
    (d / "cert_example.py").write_text(EXAMPLE)
    return d


@pytest.fixture
def label(plugin_dir, monkeypatch) -> str:
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.chdir(plugin_dir)
    return "cert_example:implementation"


def _settings(tmp: Path, **kw) -> Settings:
    return Settings(**{"profile": "quick", "in_process": True, "case_dir": str(tmp / "cases"), **kw})


@pytest.fixture(scope="module")
def issued(plugin_dir, tmp_path_factory) -> dict:
    """A complete certificate: every declared cell and every golden fixture."""
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(plugin_dir))
    mp.chdir(plugin_dir)
    try:
        cert = certify("cert_example:implementation", _settings(tmp_path_factory.mktemp("cert")))
    finally:
        mp.undo()
    return cert.doc




def test_a_complete_run_is_conformant_and_states_the_examples_run(issued, tmp_path):
    assert issued["verdict"] == "conformant"
    cells = [c for c in issued["results"] if c["status"] != "not implemented"]
    assert len(cells) == 4 and all(c["examples"] >= issued["run"]["minimum"] == 10 for c in cells)
    assert issued["run"]["examples_run"]["total"] == sum(c["examples"] for c in cells)
    assert issued["selection"]["narrowed"] == [] and issued["run"]["fixture_selection"] == "all"
    assert issued["fixtures"] and all(f["ok"] for f in issued["fixtures"])
    ok, message = verify(written(tmp_path, issued))
    assert ok and "conformant" in message


def _fail_first_cell(doc: dict) -> None:
    cell = next(c for c in doc["results"] if c["status"] == "pass")
    cell["status"] = "fail"
    cell["failure"] = {"check": "spec", "message": "off by one", "case_file": None, "reproducer": "-",
                       "shrunk": True}


def test_a_flipped_verdict_with_a_recomputed_hash_is_refused(issued, tmp_path):
    doc = copy.deepcopy(issued)
    _fail_first_cell(doc)  # the results say it failed ...
    assert consistency(rehashed(doc))  # ... while the verdict still says conformant
    ok, message = verify(written(tmp_path, rehashed(doc)))
    assert not ok and "verdict" in message


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["results"].remove(next(c for c in d["results"] if c["status"] == "pass")), "no result"),
    (lambda d: d["run"].update(minimum=1), "minimum"),
    (lambda d: d["selection"].update(fixtures="none"), "verdict"),
    (lambda d: d["selection"]["declared"].update(dtypes=["float64"]), "declared dtypes"),
    (lambda d: d["fixtures"][0].update(ok=True, ratio=3.0), "ratio above 1"),
    (lambda d: next(c for c in d["results"] if c["status"] == "pass").update(worst_ratio=2.5), "ratio above 1"),
    (lambda d: d["algorithms"]["layer_norm"].update(examples=10_000), "summary"),
])
def test_edits_that_change_what_the_certificate_claims_are_refused(issued, tmp_path, edit, words):
    doc = copy.deepcopy(issued)
    edit(doc)
    ok, message = verify(written(tmp_path, rehashed(doc)))
    assert not ok and words in message, message


def test_a_changed_byte_without_a_new_hash_is_refused(issued, tmp_path):
    doc = copy.deepcopy(issued)
    doc["subject"]["version"] = "9.9.9"
    ok, message = verify(written(tmp_path, doc))
    assert not ok and "hash mismatch" in message


@pytest.mark.parametrize("text, words", [(None, "no such file"), ("{", "not JSON"), ("[1]", "not an ftspec"),
                                          ('{"schema": "ftspec-certificate/1"}', "schema")])
def test_a_missing_or_malformed_file_is_one_clear_error(tmp_path, text, words):
    path = tmp_path / "c.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(CertificateError, match=words) as info:
        load(path)
    assert "\n" not in str(info.value)


def test_a_selection_is_partial_and_recorded(label, tmp_path):
    cert = certify(label, _settings(tmp_path, dtypes=("float64",), algorithms=("layer_norm",)))
    assert cert.verdict == "partial" and cert.exit_code == 3
    sel = cert.doc["selection"]
    assert sel["dtypes"] == ["float64"] and sel["algorithms"] == ["layer_norm"]
    assert any("float32" in n for n in sel["narrowed"]) and any("rms_norm" in n for n in sel["narrowed"])
    assert list(cert.doc["algorithms"]) == ["layer_norm"]
    assert verify(written(tmp_path, cert.doc))[0]


def test_certifying_an_algorithm_the_implementation_lacks_tests_nothing(label, tmp_path):
    with pytest.raises(NothingTested, match="nothing was tested"):
        certify(label, _settings(tmp_path, algorithms=("rms_norm", "attention"), dtypes=("bfloat16",)))
    with pytest.raises(NothingTested, match="declares no attention"):
        certify(label, _settings(tmp_path, algorithms=("attention",)))


def test_too_few_examples_make_an_inconclusive_certificate(label, tmp_path):
    cert = certify(label, _settings(tmp_path, examples=4, fixtures="none"))
    assert cert.verdict == "inconclusive" and cert.exit_code == 4
    assert "at least 10 per cell" in cert.markdown() and "Examples run: 16 over 4 cells" in cert.markdown()


def test_reproduce_reruns_the_recorded_settings_cell_by_cell(label, tmp_path):
    cert = certify(label, _settings(tmp_path, examples=12, seconds=0, algorithms=("rms_norm",), fixtures="none"))
    json_path, md_path = cert.write(tmp_path / "out")
    assert md_path.read_text().startswith("# ftspec certificate")
    rep = reproduce(json_path, label, jobs=1, case_dir=str(tmp_path / "again"))
    assert rep.same and [r["algorithm"] for r in rep.rows] == ["rms_norm", "rms_norm"]
    new = rep.certificate.doc
    assert [c["examples"] for c in new["results"] if c["status"] == "pass"] == [12, 12]  # same settings
    # another implementation under the same record: the verdicts differ cell by cell
    (Path.cwd() / "cert_wrong.py").write_text(EXAMPLE + "\nimplementation.algorithms['rms_norm'] = "
                                            "lambda inputs, params, ctx: inputs['X']\n")
    rep = reproduce(json_path, "cert_wrong:implementation", jobs=1, case_dir=str(tmp_path / "wrong"))
    assert not rep.same and {r["got"] for r in rep.rows} == {"fail"}
