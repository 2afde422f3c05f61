"""Case files are untrusted input (issue 12): ``ftspec replay`` runs only the
implementation named on the command line, reads tensors only from the case
file's own directory, and checks sizes, shapes and batch against the schema
(docs/casefile.md) before allocating anything. Every refusal is one line on
stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.casefile import LIMITS, CaseFileError, read_case, write_case
from ftspec.tools.cli import main


@pytest.fixture
def case_file(tmp_path) -> Path:
    """A valid layer_norm case (d_e=5, ell=3) with one batch entry, recorded for ``evil_plugin:impl``."""
    case = Case.build("layer_norm")
    case.batch = [dict(case.inputs)]
    return write_case(case, tmp_path / "cases" / "c.json", impl="evil_plugin:impl", dtype="float64", device="cpu")


def _edit(path: Path, **changes) -> Path:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))
    return path


def _replay(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["replay", *argv])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _refused(capsys, path: Path, needle: str) -> None:
    code, out, err = _replay(capsys, str(path), "--impl", "numpy")
    assert code == 2, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert needle in err, err
    with pytest.raises(CaseFileError) as info:
        read_case(path)
    assert needle in str(info.value)


def test_the_recorded_implementation_is_shown_never_imported(case_file, tmp_path, capsys, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_plugin.py").write_text(f"open({str(marker)!r}, 'w').close()\nimpl = None\n")
    monkeypatch.chdir(tmp_path)  # where module:object labels are imported from
    code, out, err = _replay(capsys, str(case_file))
    assert code == 2 and "--impl" in err and not marker.exists()
    code, out, err = _replay(capsys, str(case_file), "--impl", "numpy")
    assert code == 0, err
    assert "'evil_plugin:impl'" in out and "never loaded" in out and "numpy" in out
    assert not marker.exists()


@pytest.mark.parametrize("name, needle", [
    ("/etc/passwd", "not a path"),
    ("../c.safetensors", "not a path"),
    ("sub/c.safetensors", "not a path"),
    ("..", "not a path"),
    ("/dev/zero", "not a path"),
    ("missing.safetensors", "cannot be read"),
])
def test_tensor_paths_stay_in_the_case_files_directory(case_file, capsys, name, needle):
    _refused(capsys, _edit(case_file, tensors=name), needle)


def test_a_symbolic_link_out_of_the_directory_is_refused(case_file, tmp_path, capsys):
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes((case_file.parent / "c.safetensors").read_bytes())
    os.symlink(outside, case_file.parent / "link.safetensors")
    _refused(capsys, _edit(case_file, tensors="link.safetensors"), "symbolic link")


def test_a_fifo_or_directory_is_not_a_tensors_file(case_file, capsys):
    os.mkfifo(case_file.parent / "pipe.safetensors")
    _refused(capsys, _edit(case_file, tensors="pipe.safetensors"), "not a regular file")


@pytest.mark.parametrize("changes, needle", [
    ({"batch": 10**9}, "field 'batch' must be an integer from 0 to 16"),
    ({"batch": 100}, "field 'batch' must be an integer from 0 to 16"),
    ({"batch": -1}, "field 'batch' must be an integer from 0 to 16"),
    ({"batch": "1"}, "field 'batch' must be an integer"),
    ({"hyper": {"d_e": 10**6, "ell": 3}}, "hyperparameter d_e must be an integer from 0 to 1024"),
    ({"hyper": {"d_e": 5}}, "field 'hyper' must give exactly layer_norm's hyperparameters"),
    ({"hyper": {"d_e": True, "ell": 3}}, "hyperparameter d_e must be an integer"),
    ({"algorithm": "os:abort"}, "unknown algorithm"),
    ({"format": "pickle"}, "not an ftspec case file"),
    ({"variant": {"no_such_switch": 1}}, "field 'variant'"),
    ({"sha256": "0" * 64}, "does not match the sha256"),
    ({"sha256": 5}, "field 'sha256' must be 64"),
    ({"message": ["not", "text"]}, "field 'message' must be a string"),
])
def test_fields_are_validated_before_anything_is_allocated(case_file, capsys, changes, needle):
    _refused(capsys, _edit(case_file, **changes), needle)


def test_the_elements_the_hyperparameters_call_for_are_bounded(tmp_path, capsys):
    case = Case.build("unembedding", {"N_V": 1024, "d_e": 1024, "ell": 1024})
    path = tmp_path / "big.json"
    (tmp_path / "big.safetensors").write_bytes(b"")
    path.write_text(json.dumps({"format": "ftspec-case/1", "algorithm": "unembedding", "hyper": case.hyper,
                                "variant": json.loads(case.variant.to_json()), "batch": 16,
                                "tensors": "big.safetensors", "sha256": "0" * 64}))
    _refused(capsys, path, f"at most {LIMITS['elements']} are allowed")


def _retensor(case_file: Path, data: bytes) -> Path:
    import hashlib

    (case_file.parent / "c.safetensors").write_bytes(data)
    return _edit(case_file, sha256=hashlib.sha256(data).hexdigest())


def test_tensor_shapes_must_be_those_the_hyperparameters_give(case_file, capsys):
    import numpy as np
    from safetensors.numpy import save

    bad = {"inputs.X": np.zeros((6, 3)), "params.gamma": np.ones(5), "params.beta": np.zeros(5),
           "batch.0.X": np.zeros((5, 3))}
    _refused(capsys, _retensor(case_file, save(bad)), "tensor 'inputs.X' has shape [6, 3]")
    missing = {"inputs.X": np.zeros((5, 3)), "params.gamma": np.ones(5), "params.beta": np.zeros(5)}
    _refused(capsys, _retensor(case_file, save(missing)), "missing ['batch.0.X']")


def test_a_header_that_lies_about_its_size_is_refused(case_file, capsys):
    _refused(capsys, _retensor(case_file, struct.pack("<Q", 10**12) + b"{}"), "beyond the file or the limit")
    _refused(capsys, _retensor(case_file, b"abc"), "too short")


@pytest.mark.parametrize("text, needle", [
    ("{not json", "not valid UTF-8 JSON"),
    ("[1, 2]", "must hold a JSON object"),
    ("\"ftspec-case/1\"", "must hold a JSON object"),
    ("[" * 100000 + "]" * 100000, "case file"),
])
def test_a_malformed_case_file_is_one_line(case_file, capsys, text, needle):
    case_file.write_text(text)
    _refused(capsys, case_file, needle)


def test_a_missing_case_file_is_one_line(tmp_path, capsys):
    _refused(capsys, tmp_path / "nope.json", "cannot read the case file")


def test_an_oversized_case_file_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(LIMITS["json_bytes"] + 1)
    _refused(capsys, path, f"at most {LIMITS['json_bytes']} are allowed")


def test_a_valid_case_round_trips(case_file):
    case, doc = read_case(case_file)
    assert case.algorithm == "layer_norm" and case.hyper == {"d_e": 5, "ell": 3} and len(case.batch) == 1
    assert doc["impl"] == "evil_plugin:impl"
