"""``ftspec bench``: a small power run produces the report structure, with kills and baselines."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ftspec.conformance.tolerances import Reference
from ftspec.tools.bench.baselines import ASSERT_CLOSE, assert_close_bound
from ftspec.tools.bench.power import PowerOptions, run_power, summarise
from ftspec.tools.bench.report import markdown, meta

SMALL = ["token-id-one-based", "raises", "epsilon-1e-12"]


@pytest.fixture(scope="module")
def records():
    return run_power(SMALL, PowerOptions(examples=8, call_timeout=10.0))


def test_a_small_power_run_kills_and_reports(records):
    by_id = {r["id"]: r for r in records}
    assert list(by_id) == SMALL and not any("error" in r for r in records)
    for rec in records:
        assert {"harness", "assert_close", "fixtures", "fixtures_assert_close"} <= set(rec)
        assert all(c["status"] in ("pass", "fail") for c in rec["harness"]["cells"])
    # every dtype of a plain bug is killed, by the check that names it
    cells = by_id["raises"]["harness"]["cells"]
    assert {c["dtype"] for c in cells} == {"float64", "float32"}
    assert all(c["status"] == "fail" and c["check"] == "exception" for c in cells)
    tok = by_id["token-id-one-based"]["harness"]["cells"]
    assert all(c["status"] == "fail" and c["check"] == "spec" for c in tok)
    for c in tok:  # time and size of the kill
        assert c["first_failure_s"] >= 0 and c["first_failure_examples"] >= 1
        assert c["case"]["scalars"] >= 1 and "N_V" in c["case"]["hyper"]
    # ε = 1e-12 rounds to 0 in float16: the mutant is the correct plugin there
    eps = {c["dtype"]: c["status"] for c in by_id["epsilon-1e-12"]["harness"]["cells"]}
    assert eps["float64"] == "fail"


def test_the_summary_has_scores_times_and_baselines(records):
    s = summarise(records)
    assert s["score"]["non_equivalent"] == 3 and s["score"]["killed"] == 3
    assert s["by_algorithm"]["token_embedding"] == {"killed": 1, "mutants": 1}
    assert s["time_to_kill"]["n"] == 3 and s["time_to_kill"]["median"] is not None
    assert s["examples_to_kill"]["max"] >= 1
    assert set(s["baselines"]) == {"assert_close", "fixtures", "fixtures_assert_close"}
    assert s["baselines"]["assert_close"]["mutants"] == 3
    assert s["survivors"] == []
    text = markdown({"meta": meta({"power": "test"}), "power": {"records": records, "summary": s}})
    for heading in ("## Mutation score", "### Per algorithm", "## Baselines", "## The zoo", "## Survivors"):
        assert heading in text
    assert "`token-id-one-based`" in text


def test_assert_close_bounds_are_torchs_defaults():
    ref = Reference({"y": np.array([0.0, 2.0, np.nan]), "m": np.array([True])},
                    {"y": np.zeros(3), "m": np.zeros(1)}, {"y": np.zeros(3), "m": np.zeros(1)}, 1.0, True,
                    "float32", "highest")
    b = assert_close_bound(ref).bound
    rtol, atol = ASSERT_CLOSE["float32"]
    np.testing.assert_allclose(b["y"], [atol, atol + 2 * rtol, 0.0])
    assert b["m"].tolist() == [0.0] and assert_close_bound(ref).sampled is None


def test_the_command_writes_json_and_markdown(tmp_path):
    from ftspec.tools.cli import main

    out, md = tmp_path / "r.json", tmp_path / "b.md"
    rc = main(["bench", "power", "--mutant", "raises", "--examples", "4", "--jobs", "1", "--no-baselines",
               "--json", str(out), "--write", str(md), "--quiet"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["power"]["summary"]["score"]["killed"] == 1
    assert "# Benchmarks" in md.read_text()
    rc = main(["bench", "render", str(out), "--write", str(tmp_path / "again.md")])
    assert rc == 0 and (tmp_path / "again.md").read_text() == md.read_text()


def test_speed_pieces_run(tmp_path):
    from ftspec.tools.bench.speed import growth, throughput, xdist

    rows = throughput(("numpy",), examples=2, algorithms=["layer_norm"])
    assert rows[0]["examples"] >= 2 and 0 <= rows[0]["reference"] <= 1 and rows[0]["per_second"] > 0
    g = growth({"layer_norm": {"d_e": 4, "ell": 2}}, repeat=1)
    assert g[0]["spec_ratio_ell"] > 0 and g[0]["reference_ratio_d_e"] > 0
    x = xdist(["-c", "pass"], workers=2)
    assert x["serial"]["returncode"] == 0 and x["speedup"] > 0
