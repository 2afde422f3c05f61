"""Positions counted among the real tokens under padding (``pad_positions="real"``: OPT's learned
positions, BLOOM's ALiBi) on all three bundled implementations at float64, judged by the harness
(``execute.examine``) against the spec, on the cases where "real" and "index" differ: padding before
the first real token and padding between two real tokens, for the padded decoder-only model (learned
positions, a sinusoid, ALiBi without positions) and the padded BERT model.

A plugin that counts positions by their index where "real" is asked is caught on the same cases.
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


@pytest.mark.parametrize("impl_name,entry,which,pad", RUNS, ids=["-".join(r) for r in RUNS])
def test_each_implementation_counts_real_positions(impl_name, entry, which, pad):
    case = _case(entry, SETS[which], PADS[pad])
    findings = float64_findings(IMPLS[impl_name], case)
    assert not findings, findings[:2]


@pytest.mark.parametrize("which,pad", [("learned", "left"), ("alibi", "middle")])
def test_positions_by_index_are_caught(which, pad):
    """Where padding precedes a real token (learned positions) or lies between two (ALiBi: a shift
    before every key cancels in the softmax, so left padding alone changes no weight), the index is
    wrong."""
    case = _case("padded_d_transformer", SETS[which], PADS[pad])
    assert float64_findings(answering_as(IMPLS["numpy"], "by-index", pad_positions="index"), case)
