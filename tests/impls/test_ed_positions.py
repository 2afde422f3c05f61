"""The encoder-decoder's second position table (``ed_positions="separate"``: BART's encoder and decoder
``embed_positions``) on all three bundled implementations at float64, judged by the harness
(``execute.examine``) against the spec, for the model with and without padding; the drawn W_p and W_p_dec
differ, so a plugin that reads the encoder's table for the target is caught on the same case.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.tolerances import reference
from ftspec.conformance.core.values import default_hyper
from ftspec.impls.api import Implementation
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER, preset

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}
SETS = {"paper": PAPER.replace(ed_positions="separate"),
        "bart": preset("hf-bart").replace(ed_positions="separate")}
RUNS = [(impl, entry, s) for impl in IMPLS for entry in ("ed_transformer", "padded_ed_transformer") for s in SETS]


def _case(entry: str, variant, seed: int = 3) -> Case:
    hyper = default_hyper(entry, variant, L_enc=1, L_dec=2, H=2, ell_z=4, ell_x=4)
    given = {"pad_z": np.array([True, True, False, True]), "pad_x": np.array([True, True, True, False])} \
        if entry.startswith("padded_") else {}
    return Case.build(entry, hyper, variant, seed=seed, given=given)


def _findings(impl: Implementation, case: Case) -> list[str]:
    ref = reference(case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member(impl.name, impl, "cpu"), case, case.inputs, case.params, ref, dtype="float64",
                      timeout=120.0)
    return [f"{f.check}: {f.message}" for f in outcome.judgement.findings]


@pytest.mark.parametrize("impl_name,entry,which", RUNS, ids=["-".join(r) for r in RUNS])
def test_each_implementation_reads_the_targets_own_table(impl_name, entry, which):
    case = _case(entry, SETS[which])
    assert "W_p_dec" in case.params and not np.array_equal(case.params["W_p"], case.params["W_p_dec"])
    findings = _findings(IMPLS[impl_name], case)
    assert not findings, findings[:2]


def _shared(impl: Implementation) -> Implementation:
    """The plugin answering every call as under "shared": the target read from the encoder's W_p."""
    def wrap(fn):
        def wrong(i, p, ctx):
            return fn(i, p, dataclasses.replace(ctx, variant=ctx.variant.replace(ed_positions="shared")))
        return wrong
    return dataclasses.replace(impl, name=impl.name + "-shared",
                               algorithms={k: wrap(f) for k, f in impl.algorithms.items()})


@pytest.mark.parametrize("impl_name", sorted(IMPLS))
def test_one_table_for_both_is_caught(impl_name):
    assert _findings(_shared(IMPLS[impl_name]), _case("ed_transformer", SETS["paper"]))
