"""Gemma 2 27B's query scale (``attn_scale="sqrt_d_model_per_head"``: scores divided by √(d_x/H)) on
all three bundled implementations at float64, judged by the harness (``execute.examine``), on paths
the fixtures' one case (Algorithm 5 alone, ``fixtures/cases.py`` ``ONLY_AT``) does not reach: d_x/H
not a whole number, grouped-query attention, the gradients (NumPy's hand-written backward divides
the scores' gradient by the same √(d_x/H)), and the whole model decoded with a key/value cache under
the gemma layer with Gemma 2's caps.

Each case is checked first to differ from the paper's √d_attn and from √d_model, so a plugin that
ignored the switch, or took either of the other scales for it, would fail here.
"""

from __future__ import annotations

import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.tolerances import reference
from ftspec.impls.discovery import load
from ftspec.spec import evaluate
from ftspec.spec.variants import PAPER, parse

from .cases import labelled_case

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}

PER_HEAD = PAPER.replace(attn_scale="sqrt_d_model_per_head")
CASES = {
    # d_x = 5 over H = 2 heads: √2.5, a width per head that is not whole; two query heads per kv head
    "mh_attention+grouped": PER_HEAD.replace(kv_group=2),
    "d_gradient": PER_HEAD,
    # Gemma 2 27B's attention as docs/spec.md declares it (caps at 2, where they bite at these sizes)
    "cached_decoding+gemma2-27b": parse("gemma+attn_scale=sqrt_d_model_per_head,attn_softcap=2.0,"
                                        "logit_softcap=2.0,kv_group=2"),
}
#: sizes other than the defaults: d_x/H not whole at Algorithm 5 (the default d_x 4 over H 2 is 2)
HYPER = {"mh_attention+grouped": {"H": 2, "d_x": 5, "d_z": 3, "d_attn": 2, "d_mid": 2, "d_out": 3, "ell_x": 3,
                                  "ell_z": 4}}
#: which cases each implementation runs (a few CPU-seconds in all; JAX compiles per case)
RUNS = [("numpy", "mh_attention+grouped"), ("numpy", "d_gradient"), ("numpy", "cached_decoding+gemma2-27b"),
        ("torch", "mh_attention+grouped"), ("torch", "cached_decoding+gemma2-27b"), ("jax", "mh_attention+grouped"),
        ("jax", "cached_decoding+gemma2-27b")]


def _case(label: str) -> Case:
    if label in HYPER:
        return Case.build(label.partition("+")[0], HYPER[label], CASES[label], seed=5)
    return labelled_case(label, CASES, seed=5)


@pytest.mark.parametrize("label", sorted(CASES))
def test_the_scale_is_neither_the_paper_s_nor_the_model_width_s(label):
    case = _case(label)
    H, d = case.hyper["H"], case.hyper.get("d_x", case.hyper.get("d_e"))
    assert d != H * case.hyper["d_attn"] and H > 1  # √(d/H) is neither √d_attn nor √d
    got = evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=case.variant)
    for other in ("sqrt_d_attn", "sqrt_d_model"):
        assert got != evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper,
                               variant=case.variant.replace(attn_scale=other)), other


@pytest.mark.parametrize("impl_name,label", RUNS)
def test_each_implementation_divides_by_the_root_of_the_width_per_head(impl_name, label):
    case = _case(label)
    ref = reference(case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member(impl_name, IMPLS[impl_name], "cpu"), case, case.inputs, case.params, ref,
                      dtype="float64", timeout=120.0)
    assert not outcome.judgement.findings, [f"{f.check}: {f.message}" for f in outcome.judgement.findings[:2]]
