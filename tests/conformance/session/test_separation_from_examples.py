"""A certificate's "cannot tell apart" list comes from the examples its search ran (issue 35 finding 7).

The runner keeps, per bfloat16/float16 cell, a bounded sample of the value sets the cell passed
(``running.results.keep_sample``, when certifying), and the certificate lists a single switch change
only if none of those examples separates it (``separation.from_cases``). Before, the list came from
a designed sample of a few cases the search need not have run: a pair the run separated could be
listed (the finding: ε 1e-6 for a layer norm declaring 1e-5 at bfloat16), and a pair the run never
separated could be left out because a designed case no plugin ran separated it.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.strategies import _cases
from ftspec.conformance.running import results
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.conformance.running.wire import cell_from_plain, cell_to_plain
from ftspec.conformance.session.commands import Settings, certify
from ftspec.impls.numpy import implementation as numpy_impl
from ftspec.spec.variants import PAPER

#: the finding's plugin: a true layer norm declaring ε = 1e-5 inside the root
DECLARED = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")
PLUGIN = dataclasses.replace(numpy_impl, variants=[DECLARED],
                             algorithms={"layer_norm": numpy_impl.algorithms["layer_norm"]})


def _listing(monkeypatch, styles=None) -> tuple[dict, dict]:
    """(the float16 cell of a certificate of PLUGIN's layer_norm, its listing); ``styles``: the only
    value styles the search may draw."""
    if styles is not None:
        shown = _cases.available_styles
        monkeypatch.setattr(_cases, "available_styles",
                            lambda *a, **k: tuple(s for s in shown(*a, **k) if s in styles))
    doc = certify(("ln", PLUGIN), Settings(profile="default", examples=48, algorithms=("layer_norm",),
                                           dtypes=("float16",), in_process=True, seed=0, fixtures="none")).doc
    cell = next(c for c in doc["results"] if c["dtype"] == "float16")
    assert cell["status"] == "pass", cell
    return cell, cell["indistinguishable"]


def test_a_pair_the_search_separates_is_not_listed(monkeypatch):
    """Every value style drawn (near-epsilon among them): ε = 1e-6 is told apart by an example run,
    so it is not listed, whatever a designed sample holds (here the finding's: well-scaled cases
    only, which list it; fails with the designed sample)."""
    from ftspec.conformance.session import separation

    monkeypatch.setattr(separation, "available_styles", lambda *a, **k: ("well-scaled", "wide-range", "sparse"))
    monkeypatch.setattr(separation, "CASES", 4)
    designed = separation.indistinguishable(PLUGIN, "layer_norm", "float16", seconds=30)
    assert designed is not None and "epsilon=1e-06" in {a["change"] for a in designed["alternatives"]}
    cell, record = _listing(monkeypatch)
    assert record["complete"] and 0 < record["cases"] <= min(results.SAMPLE_CASES, cell["examples"])
    assert "epsilon=1e-06" not in {a["change"] for a in record["alternatives"]}, record


def test_a_pair_no_example_run_separates_is_listed(monkeypatch):
    """A search that draws only well-scaled values never separates ε = 1e-6 from 1e-5 at float16:
    the certificate lists it, although a designed near-epsilon case (never run) would separate it.
    (Fails with the designed sample: it listed nothing for this plugin.)"""
    cell, record = _listing(monkeypatch, styles=("well-scaled",))
    assert record["complete"] and record["cases"] > 0
    listed = {a["change"]: a["ratio"] for a in record["alternatives"]}
    assert "epsilon=1e-06" in listed and 0 < listed["epsilon=1e-06"] <= 1, listed


def _cases_of(n: int, d_e: int = 4) -> list[Case]:
    return [Case.build("layer_norm", {"d_e": d_e, "ell": 3}, PAPER, seed=s) for s in range(n)]


def _ids(sample: list) -> set:
    return {json.dumps([c.hyper, {k: v.tolist() for k, v in sorted({**c.inputs, **c.params}.items())}])
            for c in sample}


def test_the_sample_is_bounded_spread_over_the_run_and_merges_as_one():
    offered = _cases_of(100)
    sample: list = []
    for c in offered:
        results.keep_sample(sample, c)
    assert len(sample) == results.SAMPLE_CASES
    # not the first 32 offered: Hypothesis draws its smallest cases first
    positions = sorted(i for i, c in enumerate(offered) if _ids([c]) <= _ids(sample))
    assert positions[-1] >= results.SAMPLE_CASES, positions
    backwards: list = []
    for c in reversed(offered):
        results.keep_sample(backwards, c)
    assert _ids(backwards) == _ids(sample)  # the same examples keep the same sample, in any order
    halves: tuple[list, list] = ([], [])
    for i, c in enumerate(offered):
        results.keep_sample(halves[i % 2], c)  # two shards of one search
    assert _ids(results.merge_samples(*halves)) == _ids(sample)
    small: list = []
    for c in offered:
        results.keep_sample(small, c, elements=100)  # 12 + 4 + 4 elements each: at most 5
    assert 0 < len(small) <= 5 and sum(results._elements(c) for c in small) <= 100


def test_the_sample_travels_from_a_worker_and_only_a_certifying_run_keeps_one():
    runner = Runner([("numpy", numpy_impl)], RunConfig(profile="quick", seed=0, examples=12))
    plain = runner.run(["layer_norm"], ["float16"]).cells[0]
    assert plain.status == "pass" and plain.sample == []
    runner.keep_passing = True
    cell = runner.run(["layer_norm"], ["float16"]).cells[0]
    assert cell.status == "pass" and 0 < len(cell.sample) <= min(12, results.SAMPLE_CASES)
    assert all(not c.batch for c in cell.sample)
    back = cell_from_plain(json.loads(json.dumps(cell_to_plain(cell))))
    assert _ids(back.sample) == _ids(cell.sample)
    assert [c.variant for c in back.sample] == [c.variant for c in cell.sample]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_full_precision_cells_keep_no_sample(dtype):
    runner = Runner([("numpy", numpy_impl)], RunConfig(profile="quick", seed=0, examples=6))
    runner.keep_passing = True
    assert runner.run(["layer_norm"], [dtype]).cells[0].sample == []
