"""The ``ftspec identify`` command: its table, JSON and exit codes; bad input is one line, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftspec.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tables" / "gpt2_layer_hf_gpt2.json"
SMALL = ROOT / "examples" / "tables" / "layer_norm_tutorial_004_conventions.json"


def _one_line_error(capsys, *words: str) -> None:
    _check_error(capsys.readouterr().err, *words)


def _check_error(err: str, *words: str) -> None:
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in " ".join(err.split()), err


def test_a_table_prints_its_switches_and_writes_json(tmp_path, capsys):
    out_json = tmp_path / "identity.json"
    assert main(["identify", "--table", str(EXAMPLE), "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "declare: PAPER.replace(activation='gelu_tanh')" in out
    assert "undecided" in out and "spec evaluations in" in out
    doc = json.loads(out_json.read_text())
    entry = doc["entries"][0]
    assert doc["format"] == "ftspec-identify/1" and entry["algorithm"] == "gpt2_layer" and entry["fits"]
    assert "epsilon" in entry["undecided"] and entry["seconds"] > 0
    assert {s["switch"]: s["status"] for s in entry["switches"]}["activation"] == "decided"


def test_an_implementation_prints_time_per_entry_and_its_declared_values(tmp_path, capsys):
    pytest.importorskip("ftspec.impls.torch_nn")
    out_json = tmp_path / "identity.json"
    assert main(["identify", "torch-nn", "--algorithm", "layer_norm", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "layer_norm at float64" in out and "not consistent" not in out
    entry = json.loads(out_json.read_text())["entries"][0]
    eps = next(s for s in entry["switches"] if s["switch"] == "epsilon")
    assert eps["status"] == "decided" and eps["value"] == "1e-05 inside_root" == eps["declared"]
    assert entry["seconds"] > 0 and entry["evaluations"] > 0


def test_a_table_nothing_reproduces_exits_1(tmp_path, capsys):
    doc = json.loads(SMALL.read_text())
    doc["outputs"] = {"X_hat": [[100.0] * 3] * 5}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert main(["identify", "--table", str(path)]) == 1
    assert "no variant set in the search reproduces the table" in capsys.readouterr().out


def test_a_file_name_with_markup_prints_as_written(tmp_path, capsys):
    path = tmp_path / "[bold]x.json"
    shutil.copy(SMALL, path)
    assert main(["identify", "--table", str(path)]) == 0
    assert "[bold]x.json" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["identify"], ["give a TARGET"]),
    (["identify", "numpy", "--table", str(EXAMPLE)], ["--table takes no TARGET"]),
    (["identify", "no-such-plugin"], ["no plugin named 'no-such-plugin'"]),
    (["identify", "numpy", "--algorithm", "layer_nrom"], ["unknown algorithm 'layer_nrom'", "layer_norm"]),
    (["identify", "numpy", "--dtype", "bfloat16", "--algorithm", "layer_norm"], ["does not declare dtype bfloat16"]),
    (["identify", "numpy", "--variant", "no-such-preset", "--algorithm", "layer_norm"], ["--variant"]),
    (["identify", "numpy", "--device", "tpu:9", "--algorithm", "layer_norm"], ["no device 'tpu:9'"]),
    (["identify", "torch-nn", "--variant", "hf-bert", "--algorithm", "layer_norm"],
     ["does not declare the variant set hf-bert"]),
])
def test_bad_arguments_are_one_line_and_exit_2(capsys, argv, words):
    if "torch-nn" in argv:
        pytest.importorskip("ftspec.impls.torch_nn")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "identifying" not in captured.out  # refused before anything runs
    _check_error(captured.err, *words)


def test_a_malformed_table_is_one_line_and_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "ftspec-table/1", "algorithm": "layer_norm", "hyper": {"d_e": "5; rm -rf /"}}')
    assert main(["identify", "--table", str(path)]) == 2
    _one_line_error(capsys, "hyperparameter", str(path))
    path.write_text("\x80\x81 not json")
    assert main(["identify", "--table", str(path)]) == 2
    _one_line_error(capsys, "JSON")


def test_a_bad_budget_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as info:
        main(["identify", "numpy", "--seconds", "-1"])
    assert info.value.code == 2
    _one_line_error(capsys, "must be positive")
