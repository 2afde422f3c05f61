"""Mutants of T5's bucketed relative position bias (spec 2.13, ``rel_bias="t5_buckets"``) are caught by a
default float32 search of the self-attention entries, declared under the sets a T5 port declares (T5's
attention, attn_bias=False, attn_scale="none", at each drawn pair of bucket parameters: 32/128 and the small
pairs 6/5 and 8/10 at which the drawn lengths reach the logarithmic buckets).

Each mutant is the NumPy plugin with one source edit of its bucket code (``impls/numpy/components.t5_buckets``
or the entries' ``_t5``), built with the zoo's machinery (tools/zoo/injection.py); they are stated here, not in
the zoo's catalogue (tools/zoo/catalogue_families.py), which this change leaves to its owner:

- the bucket sign flipped: keys before the query take the upper half of the bidirectional buckets (Hugging
  Face's ``(relative_position > 0) * num_buckets`` read as < 0, i.e. relative position query − key);
- bidirectional buckets in the decoder's causal self-attention (``bidirectional=(not self.is_decoder)`` lost):
  at 32 buckets and lengths below 9 they are the causal ones (the keys after the query, which the halves tell
  apart, are masked), so only the small pairs show it;
- max_exact one too many (n // 2 + 1 exact buckets): the same as T5's below distance n // 2, so again the
  small pairs show it.

The correct NumPy plugin passes the same searches (the bundled plugins' tests).
"""

from __future__ import annotations

import dataclasses

import pytest

from ftspec.conformance.running import failures
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.spec.variants import PAPER
from ftspec.tools.zoo.injection import Edit, Mutant, Witness, build, source_edit

COMPONENTS = "ftspec.impls.numpy.components"
ENTRIES = "ftspec.impls.numpy"
#: T5's attention at each drawn pair of bucket parameters (written out from transformers 5.24
#: models/t5/modeling_t5.py: q, k, v, o without bias, self.scaling = 1.0; T5Config's 32 and 128)
T5 = PAPER.replace(attn_bias=False, attn_scale="none", rel_bias="t5_buckets")
DECLARED = tuple(T5.replace(rel_buckets=b, rel_max_distance=d) for b, d in ((32, 128), (6, 5), (8, 10)))
SMALL = {"rel_bias": "t5_buckets", "rel_buckets": 6, "rel_max_distance": 5}

MUTANTS = {
    "t5-bucket-sign-flipped": Mutant(
        "t5-bucket-sign-flipped", "T5's bidirectional buckets with the sides swapped: keys before the query in "
        "the upper half", ("self_attention", "padded_self_attention", "encoder_layer", "bert_layer",
                           "padded_encoder_layer", "padded_bert_layer"),
        source_edit(Edit(COMPONENTS, "t5_buckets", "np.where(d > 0, n, 0)", "np.where(d < 0, n, 0)")),
        witness=Witness("self_attention", variant=SMALL)),
    "t5-bidirectional-in-decoder": Mutant(
        "t5-bidirectional-in-decoder", "the decoder's causal self-attention with the encoder's bidirectional "
        "buckets", ("causal_self_attention", "padded_causal_self_attention"),
        source_edit(Edit(ENTRIES, "_t5", "ell, ell, not causal, ctx.variant", "ell, ell, True, ctx.variant")),
        witness=Witness("causal_self_attention", variant=SMALL)),
    "t5-max-exact-off-by-one": Mutant(
        "t5-max-exact-off-by-one", "T5's buckets with n // 2 + 1 exact ones (max_exact one too many)",
        ("self_attention", "causal_self_attention", "padded_self_attention", "padded_causal_self_attention",
         "encoder_layer", "bert_layer", "gpt2_layer", "decoder_layer"),
        source_edit(Edit(COMPONENTS, "t5_buckets", "exact = n // 2\n", "exact = n // 2 + 1\n")),
        witness=Witness("causal_self_attention", variant=SMALL)),
}


@pytest.mark.parametrize("mutant_id", sorted(MUTANTS))
def test_the_mutant_is_caught_by_a_default_float32_search(mutant_id, tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = MUTANTS[mutant_id]
    impl = dataclasses.replace(build(m), variants=DECLARED)
    runner = Runner([(f"mutant:{m.id}", impl)], RunConfig(case_dir=str(tmp_path)))
    runner.distinct_failures = 0  # the first failure is the verdict
    cell = runner.run([m.breaks[0]], ["float32"]).cells[0]
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)
    print(mutant_id, m.breaks[0], "killed at example", cell.first_failure_examples, "of", cell.examples)


@pytest.mark.parametrize("mutant_id, layer", [("t5-bucket-sign-flipped", "encoder_layer"),
                                              ("t5-max-exact-off-by-one", "gpt2_layer")])
def test_the_bucket_mutants_are_caught_in_a_layer_too(mutant_id, layer, tmp_path, monkeypatch):
    """The layers' self-attention computes its buckets with the same helper: a default search of the layer
    under the bias (the attention's sets, the layer's other switches at the paper's) meets the same slip."""
    monkeypatch.setattr(failures, "diagnose_failure", lambda *a, **k: None)
    m = MUTANTS[mutant_id]
    assert layer in m.breaks
    impl = dataclasses.replace(build(m), variants=DECLARED)
    runner = Runner([(f"mutant:{m.id}", impl)], RunConfig(case_dir=str(tmp_path)))
    runner.distinct_failures = 0
    cell = runner.run([layer], ["float32"]).cells[0]
    assert cell.status.value == "fail", (mutant_id, cell.status, cell.examples)
    assert cell.failure is not None and cell.failure.check == "spec", (mutant_id, cell.failure)
    print(mutant_id, layer, "killed at example", cell.first_failure_examples, "of", cell.examples)
