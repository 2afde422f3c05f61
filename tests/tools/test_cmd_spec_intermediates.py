"""``ftspec spec intermediates ENTRY``: the spec's named intermediate values with their bounds (issue 26).

A user comparing an implementation step by step reads every value the spec computes on the way,
with its Monte Carlo bound at a dtype, in 80 columns or as JSON; on the entry's default case, a
case file or a table file (seed 004's printed steps: its σ is there). Every refusal is one line
and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.casefile import write_case
from ftspec.spec.variants import PAPER
from ftspec.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEED_004 = ROOT / "examples" / "tables" / "encoder_layer_tutorial_004_steps.json"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["spec", "intermediates", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def fits(text: str, width: int = 80) -> bool:
    return all(len(line) <= width for line in text.splitlines())


def test_every_value_with_its_bound_in_80_columns(capsys):
    rc, out, err = run(capsys, "ed_transformer")
    assert rc == 0 and not err and fits(out)
    for name in ("enc_embedding", "enc_layers.0.attn.heads.1.A", "dec_layers.1.cross_attn.heads.0.scores",
                 "dec_layers.0.norm3.sigma", "dec_layers.1.mlp.hidden", "logits", "P"):
        assert f"\n{name}  (" in out, name
    assert "bounds at float32" in out and "bound <= " in out and "exact" in out  # token columns are copied


def test_list_only_and_json(capsys):
    rc, listed, _ = run(capsys, "gpt2_layer", "--list", "--preset", "hf-gpt2")
    names = [line.split()[0] for line in listed.splitlines()[1:] if line and not line.startswith(" ")]
    assert rc == 0 and names[:3] == ["norm1.mu", "norm1.sigma", "norm1"] and names[-1] == "X"
    rc, out, _ = run(capsys, "gpt2_layer", "--only", "attn.heads.0", "--only", "*.sigma", "--json")
    doc = json.loads(out)
    got = [it["name"] for it in doc["intermediates"]]
    assert rc == 0 and got == ["norm1.sigma", "attn.heads.0.Q", "attn.heads.0.K", "attn.heads.0.V",
                                "attn.heads.0.scores", "attn.heads.0.S", "attn.heads.0.A", "attn.heads.0",
                                "norm2.sigma"]
    S = next(it for it in doc["intermediates"] if it["name"] == "attn.heads.0.S")
    assert S["value"][1][0] == "-inf" and S["bound"][1][0] == 0.0 and doc["dtype"] == "float32"
    assert doc["variant"] == "phuong-hutter" and S["shape"] == [doc["hyper"]["ell"]] * 2


def test_bounds_per_element_and_a_wide_matrix(capsys):
    rc, out, _ = run(capsys, "layer_norm", "--hyper", "d_e=3,ell=9", "--bounds", "--dtype", "bfloat16")
    assert rc == 0 and fits(out) and "bound per element:" in out and "columns 6-8:" in out
    assert "bounds at bfloat16" in out


def test_a_case_file(capsys, tmp_path):
    case = Case.build("mh_attention", None, PAPER.replace(attn_scale="sqrt_d_model"))
    path = write_case(case, tmp_path / "case.json", dtype="float64")
    rc, out, _ = run(capsys, "mh_attention", "--case", str(path), "--only", "Y")
    assert rc == 0 and "under phuong-hutter+attn_scale=sqrt_d_model" in " ".join(out.split())
    assert "bounds at float64" in out and "\nY  (" in out
    rc, _, err = run(capsys, "attention", "--case", str(path))
    assert rc == 2 and "holds a case of mh_attention, not attention" in err


def test_seed_004_steps_from_its_table(capsys):
    """The tutorial's printed σ of the first row of A(6) is 0.82 (MATLAB's std + ν): the spec's step."""
    rc, out, _ = run(capsys, "encoder_layer", "--case", str(SEED_004), "--only", "norm1.sigma", "--json",
                     "--preset", "tutorial-004")
    doc = json.loads(out)
    assert rc == 0 and doc["dtype"] == "float64" and doc["variant"] == "tutorial-004"
    sigma = doc["intermediates"][0]["value"]
    assert [f"{x:.4f}"[:4] for x in sigma] == ["0.82", "0.79", "0.93", "1.02", "0.82", "0.83"]
    # a table names no variant set: the paper's with the table's parameter structure (no γ, β, no
    # attention biases, a one-layer FFN), whose σ divides by N and whose scores by √d_attn, is not the
    # tutorial's
    rc, out, _ = run(capsys, "encoder_layer", "--case", str(SEED_004), "--only", "norm1.sigma", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["variant"].startswith("phuong-hutter+affine=none,attn_bias=False")
    assert doc["intermediates"][0]["value"][0] < 0.8


@pytest.mark.parametrize("argv, words", [
    (["nonsense"], "unknown algorithm 'nonsense'"),
    (["d_loss"], "intermediates are recorded for forward computations"),
    (["gpt2_layer", "--hyper", "d_e=four"], "cannot read --hyper item 'd_e=four'"),
    (["gpt2_layer", "--hyper", "q=4"], "no hyperparameter ['q']"),
    (["gpt2_layer", "--only", "nothing.here"], "no intermediate of gpt2_layer matches nothing.here"),
    (["gpt2_layer", "--dtype", "float8"], "--dtype must be one of"),
    (["gpt2_layer", "--variant", "phuong-hutter+nonsense=1"], "cannot read variant switch"),
    (["gpt2_layer", "--case", "/nonexistent/case.json"], "case.json"),
])
def test_refusals_are_one_line(capsys, argv, words):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1 and not out, err


def test_preset_and_variant_together_are_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["spec", "intermediates", "gpt2_layer", "--preset", "hf-gpt2", "--variant", "phuong-hutter"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
