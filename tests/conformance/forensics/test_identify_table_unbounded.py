"""``ftspec identify --table`` never reports a fit that nothing tested (issue 35, finding 10).

The shipped GPT-2 table with its outputs replaced by random numbers and its inputs declared printed
to 2 decimals was "declare: PAPER (fits every case)", exit 0, eleven presets "fitting": almost every
candidate's outputs could not be bounded over the inputs' half-steps, and a set nothing excluded
was reported as a fit. A candidate the printed inputs leave unbounded (or bound only by an interval
wider than the printed numbers themselves) is now "cannot tell": neither a fit nor excluded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ftspec.conformance.core.case import Case
from ftspec.conformance.forensics.identify_table import identify_table, parse_table, table_from_spec
from ftspec.spec.variants import PAPER

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "examples" / "tables" / "gpt2_layer_hf_gpt2.json"


def _random_outputs(doc: dict, seed: int) -> dict:
    """``doc`` with every printed output replaced by random numbers of its shape and size, printed
    to its decimals, and its inputs and parameters declared printed to 2 decimals."""
    rng = np.random.default_rng(seed)
    out = json.loads(json.dumps(doc))
    for name, values in out["outputs"].items():
        a = np.asarray(values, dtype=np.float64)
        scale = max(1.0, float(np.abs(a).max()))
        out["outputs"][name] = np.round(rng.normal(size=a.shape) * scale, out.get("decimals", 3)).tolist()
    out["input_decimals"] = 2
    return out


def _run_cli(path: Path, capsys) -> tuple[int, str]:
    from ftspec.tools.cli import main

    code = main(["identify", "--table", str(path)])
    return code, capsys.readouterr().out


def test_random_numbers_in_the_shipped_gpt2_table_s_shape_are_no_fit(tmp_path, capsys):
    """The case reported: the shipped table's sizes, inputs and parameters (printed to 2 decimals, as
    its source says), random outputs. No variant set is a fit, no preset is listed as fitting, and
    the command says it cannot tell (exit 4), not "declare: ..."."""
    doc = _random_outputs(json.loads(SHIPPED.read_text()), seed=1)
    path = tmp_path / "gpt2_random.json"
    path.write_text(json.dumps(doc))
    code, out = _run_cli(path, capsys)
    assert code == 4, out
    assert "declare:" not in out and "presets that fit" not in out
    assert "inconclusive" in out and "cannot tell" in out


def test_a_random_encoder_layer_table_is_no_fit():
    """The same for another entry the issue names, built the way the shipped table was (values
    builder, inputs and parameters rounded to 2 decimals), small sizes (one head, d_e = 3, ℓ = 2:
    before the fix it too was "declare: PAPER (fits every case)"), its outputs random."""
    hyper = {"H": 1, "d_e": 3, "d_attn": 2, "d_mid": 2, "d_mlp": 3, "ell": 2}
    c = Case.build("encoder_layer", hyper, PAPER, seed=0)
    inputs = {k: np.round(v, 2) for k, v in c.inputs.items()}
    params = {k: np.round(v, 2) for k, v in c.params.items()}
    doc = _random_outputs(table_from_spec("encoder_layer", inputs, params, c.hyper, PAPER, decimals=3), seed=2)
    identity = identify_table(parse_table(doc))
    assert not identity.fits and not identity.presets
    assert identity.inconclusive  # candidates that could not be judged: not "nothing fits" either
    for g in identity.groups:  # nothing is decided for a value that was never judged against a bound
        assert not (g.status == "decided" and g.cannot_tell), g.line()


def test_a_table_whose_every_candidate_is_unbounded_says_nothing_was_tested(tmp_path, capsys):
    """A layer norm whose printed columns are constant to the printed digits: every column's
    variance may be 0 within the half-steps, so without ε nothing bounds (e − m)/√v, and with any
    ε of the list the bound is wider than the printed outputs (near 0). Every candidate: cannot tell;
    the report says nothing was tested, exit 4."""
    X = np.array([[1.00, -0.50, 0.25], [1.00, -0.50, 0.25], [1.00, -0.50, 0.25]])
    doc = table_from_spec("layer_norm", {"X": X}, {}, {"d_e": 3, "ell": 3},
                          PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root", affine="none"), decimals=2)
    doc["input_decimals"] = 2
    identity = identify_table(parse_table(json.loads(json.dumps(doc))))
    assert identity.untested and identity.inconclusive and not identity.fits
    assert all(g.status == "cannot tell" for g in identity.groups if not g.untestable or g.cannot_tell)
    assert any(n.startswith("nothing was tested") for n in identity.notes)
    path = tmp_path / "flat.json"
    path.write_text(json.dumps(doc))
    code, out = _run_cli(path, capsys)
    assert code == 4 and "nothing was tested" in out
