"""Hugging Face transformers' mixture-of-experts blocks (impls/hf/moe.py) as implementations of
``moe_mlp``: Mixtral's ``MixtralSparseMoeBlock`` under Mixtral's renormalised weights and
Qwen2-MoE's ``Qwen2MoeSparseMoeBlock`` (``norm_topk_prob=False``, its shared expert) pass a short
float32 search, the library's own mathematics against the spec; each declared under the other
weight convention fails, so the searches tell the conventions apart."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ftspec.conformance.running import failures
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.impls.hf.moe import implementation_mixtral_moe, implementation_qwen2_moe

PLUGINS = {"mixtral": implementation_mixtral_moe, "qwen2-moe": implementation_qwen2_moe}


def _cell(impl, tmp_path, profile="quick"):
    runner = Runner([(impl.name, impl)], RunConfig(case_dir=str(tmp_path), profile=profile))
    runner.distinct_failures = 0
    return runner.run(["moe_mlp"], ["float32"]).cells[0]


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_the_library_block_passes_a_short_search(name, tmp_path):
    cell = _cell(PLUGINS[name], tmp_path)
    assert cell.status.value == "pass", (cell.status, cell.failure)


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_the_block_under_the_other_weight_convention_fails(name, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    impl = PLUGINS[name]
    declared = impl.variants[0]
    impl = dataclasses.replace(impl, variants=(declared.replace(moe_topk_norm=not declared.moe_topk_norm),))
    cell = _cell(impl, tmp_path, profile="default")
    assert cell.status.value == "fail" and cell.failure.check == "spec", (cell.status, cell.failure)


def test_mixtral_on_the_hand_worked_case_and_its_tie():
    """tests/spec/test_moe.py's case: p = (1, 2, 3)/6, experts 1 and 2 renormalised to 2/5, 3/5, so
    Y = 13/5 · ¾ ln 3; with W_g = 0 every p is 1/3 and the plugin refuses the tie."""
    import math

    import numpy as np

    from ftspec.conformance.core.calling import call
    from ftspec.conformance.core.examining import rounded
    from ftspec.spec.registry import REGISTRY

    entry, hyper = REGISTRY["moe_mlp"], {"E": 3, "k": 2, "d_e": 1, "d_mlp": 1, "ell": 1}
    params = {"W_g": np.log([[1.0], [2.0], [3.0]]), "W_1": np.full((3, 1), math.log(3.0)), "W_3": np.ones((3, 1)),
              "W_2": np.array([[1.0, 2.0, 3.0]])}
    impl = implementation_mixtral_moe

    def run(p):
        prepared = rounded(entry, "float32", inputs={"X": np.array([[1.0]])}, params=p)
        return call(impl, entry, prepared.inputs, prepared.params, hyper=hyper, variant=impl.variants[0],
                    dtype="float32", device="cpu")["Y"]

    assert float(run(params)[0, 0]) == pytest.approx(13 / 5 * 0.75 * math.log(3.0), rel=1e-6)
    with pytest.raises(ValueError, match="tie"):
        run({**params, "W_g": np.zeros((3, 1))})
