"""The encoder-decoder's second position table (``ed_positions="separate"``: BART's encoder and decoder
``embed_positions``) on all three bundled implementations at float64, judged by the harness
(``execute.examine``) against the spec, for the model with and without padding; the drawn W_p and W_p_dec
differ, so a plugin that reads the encoder's table for the target is caught on the same case.
"""

from __future__ import annotations


import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.values import default_hyper
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER, preset

from .cases import answering_as, float64_findings

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}
SETS = {"paper": PAPER.replace(ed_positions="separate"),
        "bart": preset("hf-bart").replace(ed_positions="separate")}
RUNS = [(impl, entry, s) for impl in IMPLS for entry in ("ed_transformer", "padded_ed_transformer") for s in SETS]


def _case(entry: str, variant, seed: int = 3) -> Case:
    hyper = default_hyper(entry, variant, L_enc=1, L_dec=2, H=2, ell_z=4, ell_x=4)
    given = {"pad_z": np.array([True, True, False, True]), "pad_x": np.array([True, True, True, False])} \
        if entry.startswith("padded_") else {}
    return Case.build(entry, hyper, variant, seed=seed, given=given)


@pytest.mark.parametrize("impl_name,entry,which", RUNS, ids=["-".join(r) for r in RUNS])
def test_each_implementation_reads_the_targets_own_table(impl_name, entry, which):
    case = _case(entry, SETS[which])
    assert "W_p_dec" in case.params and not np.array_equal(case.params["W_p"], case.params["W_p_dec"])
    findings = float64_findings(IMPLS[impl_name], case)
    assert not findings, findings[:2]


@pytest.mark.parametrize("impl_name", sorted(IMPLS))
def test_one_table_for_both_is_caught(impl_name):
    one_table = answering_as(IMPLS[impl_name], "shared", ed_positions="shared")  # the target read from W_p
    assert float64_findings(one_table, _case("ed_transformer", SETS["paper"]))
