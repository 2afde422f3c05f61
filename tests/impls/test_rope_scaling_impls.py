"""RoPE's frequency scaling (``rope_scaling``) on all three bundled implementations at float64, judged
by the harness (``execute.examine``), on the paths the fixtures' two cases (Algorithm 4 alone, half
pairs) do not reach: adjacent pairs with linear scaling, the gradients (NumPy's hand-written backward
rotates back by the scaled angles), and Llama 3.1 (``meta-llama3+rope_scaling=llama3``, grouped) on the
whole model decoded with a key/value cache, whose decoding steps rotate at positions past the prompt.

Each case is checked to differ from the unscaled rotary first (at base 500000 and d_attn 4, llama3
blends pair 1), so a plugin that ignored the switch would fail here.
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

LLAMA3_HALF = PAPER.replace(rotary="half", rope_base=500000.0, rope_scaling="llama3")
CASES = {
    "causal_self_attention": PAPER.replace(rotary="interleaved", rope_scaling="linear-2"),
    "d_gradient": LLAMA3_HALF,
    # Llama 3.1 as docs/spec.md declares it, with 2 query heads per kv head
    "cached_decoding+llama3.1": parse("meta-llama3+rope_scaling=llama3,kv_group=2"),
}


def _case(label: str) -> Case:
    return labelled_case(label, CASES, seed=5)


@pytest.mark.parametrize("label", sorted(CASES))
def test_the_scaling_moves_the_result(label):
    case = _case(label)
    assert case.hyper["d_attn"] >= 4
    got = evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=case.variant)
    plain = evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper,
                     variant=case.variant.replace(rope_scaling="none"))
    assert got != plain


@pytest.mark.parametrize("impl_name", sorted(IMPLS))
@pytest.mark.parametrize("label", sorted(CASES))
def test_each_implementation_scales_the_frequencies(impl_name, label):
    case = _case(label)
    ref = reference(case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member(impl_name, IMPLS[impl_name], "cpu"), case, case.inputs, case.params, ref,
                      dtype="float64", timeout=120.0)
    assert not outcome.judgement.findings, [f"{f.check}: {f.message}" for f in outcome.judgement.findings[:2]]
