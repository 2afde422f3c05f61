"""The zoo's QK-norm and soft-capping mutants are caught by a default search of a plugin that declares
the convention: what a Qwen3 or Gemma 2 port with the slip would meet on its first ``ftspec run``.

Each mutant is the NumPy plugin with one edit (``tools/zoo/catalogue_families.py``), declared here
under the set the convention belongs to (a plugin's ``variants``), and searched on the entry its bench
run searches first, at float32, with the default profile's examples: the search fails, by the spec
check (a value outside the derived bound), not by an exception. A mutant the search did not reach, or
one equal to the correct plugin under that set, would pass and fail this test (the correct NumPy
plugin passed the same searches when this test was written). The failure's diagnosis, nine tenths
of the time, is left out: the kill is what is tested here (tests/conformance/forensics/test_families_diagnosis.py
names the conventions).
"""

from __future__ import annotations

import dataclasses

import pytest

from ftspec.conformance.running import failures
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.spec.variants import PAPER, parse
from ftspec.tools.zoo import build, mutant

#: Hugging Face Qwen3 as docs/spec.md declares it
QWEN3 = parse("llama+qk_norm=rms,rope_base=1000000.0")
#: mutant id → the set a port of the family declares (the caps at 2, where they bite at the drawn sizes)
DECLARED = {
    "qk-norm-after-rotary": QWEN3,
    "qk-norm-over-all-heads": QWEN3,
    "attn-softcap-after-mask": PAPER.replace(attn_softcap=2.0),
    "attn-softcap-missing-outer-c": PAPER.replace(attn_softcap=2.0),
    "final-logit-softcap-missing": PAPER.replace(logit_softcap=2.0),
}


@pytest.mark.parametrize("mutant_id", sorted(DECLARED))
def test_the_mutant_is_caught_by_a_default_search_under_its_convention(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = mutant(mutant_id)
    impl = dataclasses.replace(build(m), variants=(DECLARED[mutant_id],))
    runner = Runner([(f"mutant:{m.id}", impl)], RunConfig(case_dir=str(tmp_path)))
    runner.distinct_failures = 0  # the first failure is the verdict
    cell = runner.run([m.targets[0]], ["float32"]).cells[0]
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)


def test_the_qk_norm_rope_fixture_fails_both_qk_norm_slips_and_passes_the_plugin():
    """QK-norm's order against RoPE shows only when both are on: the fixture case
    ``gpt2_layer--edge-qk-norm-rope`` holds them together, so a user replaying the fixtures alone (no
    search) catches the norm after RoPE and the norm over all heads, by the spec check, at float64
    and float32; the correct NumPy plugin passes it."""
    from ftspec.conformance.running.fixture_replay import replay_fixtures
    from ftspec.impls.discovery import load

    case = ["gpt2_layer--edge-qk-norm-rope"]
    for label, impl in [("numpy", load("numpy")), *((i, build(mutant(i))) for i in
                                                     ("qk-norm-after-rotary", "qk-norm-over-all-heads"))]:
        got = replay_fixtures([(label, impl)], cases=case, dtypes=["float64", "float32"])
        assert [r.dtype for r in got] == ["float64", "float32"], got
        if label == "numpy":
            assert all(r.ok for r in got), [r.message for r in got]
        else:
            assert not any(r.ok for r in got) and all(r.message.startswith("spec:") for r in got), got
