"""The divergence walk inside a layer (``forensics.divergence.layer_walk``) under Gemma 2's sandwich
norms: each block's input norm reads the block's input (as pre-LN's), its attention reads that norm's
output, its output norm (γ{k}_out, β{k}_out) reads the sublayer's output, and the walk's values, fed
to the norm and attention entries, give the layer's own recorded values exactly; the walk ends in the
layer's output. As tests/conformance/forensics/test_divergence.py checks for the other placements.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.forensics.divergence import layer_walk
from ftspec.spec.evaluation import evaluate, intermediates
from ftspec.spec.variants import PAPER

SANDWICH = PAPER.replace(norm_placement="sandwich")


def _norm(X, params, gamma: str, beta: str) -> np.ndarray:
    g = {k: params[n].tolist() for k, n in (("gamma", gamma), ("beta", beta)) if n in params}
    return np.asarray(evaluate("layer_norm", {"X": X}, g, variant=SANDWICH)["X_hat"])


@pytest.mark.parametrize("layer", ["gpt2_layer", "bert_layer", "encoder_layer", "decoder_layer"])
def test_the_layer_walk_reads_both_norms_of_each_sandwich_block(layer):
    c = Case.build(layer, variant=SANDWICH, seed=4)
    x_name = "Z" if layer == "encoder_layer" else "X"
    Z = c.inputs["Z"].tolist() if layer == "decoder_layer" else None
    blocks, out = layer_walk(layer, c.inputs[x_name].tolist(), c.params, SANDWICH, Z)
    want = evaluate(layer, c.spec_inputs(), c.spec_params(), hyper=c.hyper, variant=SANDWICH)
    assert np.array_equal(np.asarray(out), np.asarray(next(iter(want.values()))))
    named = intermediates(layer, c.spec_inputs(), c.spec_params(), hyper=c.hyper, variant=SANDWICH)
    k = 3 if layer == "decoder_layer" else 2
    for i, b in enumerate(blocks, start=1):
        assert np.array_equal(np.asarray(b.norm_in), np.asarray(b.x_in)), b.name  # the input norm reads X
        assert np.array_equal(_norm(b.norm_in, c.params, b.gamma, b.beta), np.asarray(named[f"norm{i}"]))
        assert (b.gamma_out, b.beta_out) == (b.gamma + "_out", b.beta + "_out") and b.gamma_out in c.params
        got = _norm(b.norm_out_in, c.params, b.gamma_out, b.beta_out)
        assert np.array_equal(got, np.asarray(named[f"norm{i}_out"])), b.name
        if b.attn_in is not None:  # the attention reads the input norm's output
            assert np.array_equal(np.asarray(b.attn_in[0]), np.asarray(named[f"norm{i}"]))
    assert len(blocks) == k
