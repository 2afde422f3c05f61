"""The issue-38 switches on the paths the fixed cases and the fixtures do not reach, judged by the
harness (``execute.examine``) on all three bundled implementations at float64:

- the whole decoder models under a sliding ``window`` and a parallel ``residual`` (the single-switch
  enumeration moves only ``norm_placement`` at the models): ``padded_d_transformer``, and
  ``cached_decoding`` from a one-token prefill, whose every decode step reads a cache the window
  must cut;
- ``d_gradient`` under both and ``ed_gradient`` under the window (NumPy's hand-written backward of
  the parallel residual and of a windowed mask; PyTorch's and JAX's autodiff), ``d_inference`` under
  the parallel residual (the whole models' training and inference entries list both switches, and
  the strategies draw them, but no fixture moves them alone);
- the families' presets with their sizes written after them (``meta-llama2+kv_group=2``, Mistral as
  ``llama+window=2,kv_group=2``, ``gemma+kv_group=2``).

Each case is checked to differ from the paper's wiring first, so a plugin that ignored the switch
would fail here.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.tolerances import reference
from ftspec.impls.discovery import load
from ftspec.spec import evaluate
from ftspec.spec.variants import PAPER, parse

IMPLS = {name: load(name) for name in ("numpy", "torch", "jax")}

VARIANTS = {
    "window": PAPER.replace(window=2),
    "parallel": PAPER.replace(residual="parallel"),
    "parallel-shared": PAPER.replace(residual="parallel_shared"),
}
PRESETS = {
    "llama2-70b-style": parse("meta-llama2+kv_group=2"),
    "mistral": parse("llama+window=2,kv_group=2"),
    "gemma": parse("gemma+kv_group=2"),
}
CASES = ([(e, k) for e in ("padded_d_transformer", "cached_decoding", "d_gradient") for k in VARIANTS]
         + [("ed_gradient", "window"), ("d_inference", "parallel")]
         + [(e, k) for e in ("cached_decoding",) for k in PRESETS])


def _case(algorithm: str, label: str) -> Case:
    variant = {**VARIANTS, **PRESETS}[label]
    given = {"n_prefill": np.array(1)} if algorithm == "cached_decoding" else None
    case = Case.build(algorithm, variant=variant, seed=3, given=given)
    if algorithm == "padded_d_transformer":  # every position real but the first: the window still bites
        case.inputs["pad"][...] = True
        case.inputs["pad"][0] = False
        if variant.empty_query == "error":
            case.inputs["pad"][0] = True
    return case


@pytest.mark.parametrize("algorithm, label", [c for c in CASES if c[0] != "d_inference"])  # sampled tokens may agree
def test_the_switch_moves_the_result(algorithm, label):
    case = _case(algorithm, label)
    if label in PRESETS:  # the size written after the preset is what moves it
        base = case.variant.replace(window=0, kv_group=1)
        params = Case.build(algorithm, variant=base, seed=3, given={"n_prefill": np.array(1)}).spec_params()
    else:
        base, params = PAPER, case.spec_params()
        if label == "parallel-shared":  # the shared norm has no γ², β²: the paper's layer reads them
            params = Case.build(algorithm, variant=PAPER, seed=3, given=None if algorithm != "cached_decoding"
                                else {"n_prefill": np.array(1)}).spec_params()
    got = evaluate(algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=case.variant)
    paper = evaluate(algorithm, case.spec_inputs(), params, hyper=case.hyper, variant=base)
    assert got != paper


@pytest.mark.parametrize("impl_name", sorted(IMPLS))
@pytest.mark.parametrize("algorithm, label", CASES)
def test_each_implementation_follows_the_switch(impl_name, algorithm, label):
    case = _case(algorithm, label)
    ref = reference(case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant, dtype="float64")
    outcome = examine(Member(impl_name, IMPLS[impl_name], "cpu"), case, case.inputs, case.params, ref,
                      dtype="float64", timeout=120.0)
    assert not outcome.judgement.findings, [f"{f.check}: {f.message}" for f in outcome.judgement.findings[:2]]
