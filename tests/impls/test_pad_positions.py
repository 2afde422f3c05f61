"""Positions counted among the real tokens under padding (``pad_positions="real"``: OPT's learned
positions, BLOOM's ALiBi) on all three bundled implementations at float64, judged by the harness
(``execute.examine``) against the spec, on the cases where "real" and "index" differ: padding before
the first real token and padding between two real tokens, for the padded decoder-only model (learned
positions, a sinusoid, ALiBi without positions) and the padded BERT model.

A plugin that counts positions by their index where "real" is asked is caught on the same cases.
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

#: padding before the first real token, and padding between two real tokens (ℓ = 5)
PADS = {"left": [False, False, True, True, True], "middle": [True, False, True, False, True]}
#: learned positions (OPT's), Vaswani's sinusoid, and BLOOM's ALiBi (no position embedding)
SETS = {"learned": PAPER.replace(pad_positions="real", empty_query="uniform"),
        "sinusoid": PAPER.replace(pad_positions="real", positions="sinusoidal_vaswani", empty_query="zeros"),
        "alibi": preset("bloom").replace(pad_positions="real")}
RUNS = [(impl, entry, s, pad) for impl in IMPLS for entry, s in (("padded_d_transformer", "learned"),
                                                                   ("padded_d_transformer", "alibi"),
                                                                   ("padded_e_transformer", "sinusoid"))
        for pad in PADS]


def _case(entry: str, variant, pad: list[bool], seed: int = 3) -> Case:
    hyper = default_hyper(entry, variant, L=2, ell=len(pad), H=2)
    return Case.build(entry, hyper, variant, seed=seed, given={"pad": np.array(pad)})


def _findings(impl: Implementation, case: Case) -> list[str]:
    ref = reference(case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member(impl.name, impl, "cpu"), case, case.inputs, case.params, ref, dtype="float64",
                      timeout=120.0)
    return [f"{f.check}: {f.message}" for f in outcome.judgement.findings]


@pytest.mark.parametrize("impl_name,entry,which,pad", RUNS, ids=["-".join(r) for r in RUNS])
def test_each_implementation_counts_real_positions(impl_name, entry, which, pad):
    case = _case(entry, SETS[which], PADS[pad])
    findings = _findings(IMPLS[impl_name], case)
    assert not findings, findings[:2]


def _by_index(impl: Implementation) -> Implementation:
    """The plugin answering every call as under "index": positions counted by the column's index."""
    def wrap(fn):
        def wrong(i, p, ctx):
            return fn(i, p, dataclasses.replace(ctx, variant=ctx.variant.replace(pad_positions="index")))
        return wrong
    return dataclasses.replace(impl, name=impl.name + "-by-index",
                               algorithms={k: wrap(f) for k, f in impl.algorithms.items()})


@pytest.mark.parametrize("which,pad", [("learned", "left"), ("alibi", "middle")])
def test_positions_by_index_are_caught(which, pad):
    """Where padding precedes a real token (learned positions) or lies between two (ALiBi: a shift
    before every key cancels in the softmax, so left padding alone changes no weight), the index is
    wrong."""
    case = _case("padded_d_transformer", SETS[which], PADS[pad])
    assert _findings(_by_index(IMPLS["numpy"]), case)
