"""``ftspec bench``: a small power run produces the report structure, with kills and baselines."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ftspec.conformance.core.tolerances import Reference
from ftspec.tools.bench.baselines import assert_close_bound
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


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_assert_close_bounds_are_torchs_defaults(dtype):
    """Asks torch: on either side of each bound, ``torch.testing.assert_close`` with its own defaults
    for the dtype passes exactly where |got − spec| is within ``assert_close_bound``'s bound. (torch
    compares in the dtype itself, so values within the dtype's rounding of a bound are not called.)"""
    torch = pytest.importorskip("torch")
    tdtype = getattr(torch, dtype)
    expected = np.array([0.0, 1.0, -3.0, 1.5625, 250.0])  # exact in every dtype
    zeros = {"y": np.zeros(5), "m": np.zeros(1)}
    ref = Reference({"y": expected, "m": np.array([True])}, zeros, zeros, 1.0, True, dtype, "highest")
    bound = assert_close_bound(ref).bound["y"]
    seen = {True: 0, False: 0}
    for want, b in zip(expected, bound):
        for f in np.linspace(0.5, 1.5, 21):
            for sign in (1.0, -1.0):
                got = torch.tensor(want + sign * f * b, dtype=torch.float64).to(tdtype)
                diff = abs(float(got.double()) - want)  # the value the dtype holds
                if abs(diff - b) <= 2 * torch.finfo(tdtype).eps * b:  # within the dtype's rounding of it
                    continue
                try:
                    torch.testing.assert_close(got, torch.tensor(want, dtype=tdtype))
                    passed = True
                except AssertionError:
                    passed = False
                assert passed == (diff <= b), (f"{dtype}: spec {want}, got {float(got.double())!r}: torch "
                                               f"{'passes' if passed else 'fails'} it, our bound is {b:.3g}")
                seen[passed] += 1
    assert seen[True] and seen[False]  # both sides of the boundary were tried
    nan = Reference({"y": np.array([np.nan])}, {"y": np.zeros(1)}, {"y": np.zeros(1)}, 1.0, True, dtype, "highest")
    assert assert_close_bound(nan).bound["y"].tolist() == [0.0]  # NaN matches NaN only
    assert assert_close_bound(ref).bound["m"].tolist() == [0.0] and assert_close_bound(ref).sampled is None


def test_the_assert_close_baseline_searches_with_assert_close_bounds(tmp_path):
    """The search takes its references through ``references_for`` (blocks) and ``alone`` (a failure
    confirmed, through ``reference_for``); the baseline overrode only ``reference_for`` and was
    judged by the harness's own bounds. A layer norm off by 1e-9 relatively at float64 is far beyond the harness's bound
    (about 1e-15) and well within assert_close's (rtol 1e-7): the harness fails it, the baseline
    passes it."""
    import dataclasses

    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.impls.discovery import load
    from ftspec.tools.bench.baselines import AssertCloseRunner

    numpy = load("numpy")
    base = numpy.algorithms["layer_norm"]

    def off(inputs, params, ctx):
        out = base(inputs, params, ctx)
        return {k: np.asarray(v) * (1 + 1e-9) for k, v in out.items()} if isinstance(out, dict) else out * (1 + 1e-9)

    plugin = dataclasses.replace(numpy, name="off", algorithms={"layer_norm": off})
    verdicts = {}
    for kind in (Runner, AssertCloseRunner):
        r = kind([("off", plugin)], RunConfig(seed=0, case_dir=tmp_path / kind.__name__, examples=64, block=8))
        r.distinct_failures = 0
        (cell,) = r.run(["layer_norm"], ["float64"]).cells
        verdicts[kind.__name__] = cell.status.value
    assert verdicts == {"Runner": "fail", "AssertCloseRunner": "pass"}


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
    assert g[0]["expected_ratio_ell"] == 2.0 and g[0]["spec_ratio_L"] is None  # layer norm has no L
    x = xdist(["-c", "pass"], workers=2)
    assert x["serial"]["returncode"] == 0 and x["speedup"] > 0


def test_the_cost_model_has_the_orders_of_the_algorithms():
    """Attention ≈ d²ℓ + ℓ²d: doubling the width quadruples it when widths dominate, doubling the
    length quadruples it when lengths dominate; a model's cost is linear in L."""
    from ftspec.tools.bench.speed import _doubled, expected_cost

    def ratio(name, h, what):
        return expected_cost(name, _doubled(h, what)) / expected_cost(name, h)

    wide = {"d_x": 512, "d_z": 512, "d_attn": 6, "d_out": 512, "ell_x": 2, "ell_z": 2}
    long = {"d_x": 2, "d_z": 2, "d_attn": 2, "d_out": 2, "ell_x": 512, "ell_z": 512}
    assert 3.9 < ratio("attention", wide, "d_e") <= 4.0  # W_v is d_out × d_z: d²ℓ
    assert 3.9 < ratio("attention", long, "ell") <= 4.0
    assert 1.9 < ratio("attention", wide, "ell") < 2.1
    model = {"N_V": 2, "ell_max": 8, "L": 4, "H": 2, "d_e": 64, "d_attn": 8, "d_mid": 8, "d_mlp": 256, "ell": 8}
    assert 1.9 < ratio("d_transformer", model, "L") <= 2.0
