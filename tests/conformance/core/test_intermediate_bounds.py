"""Each named intermediate with its Monte Carlo bound (conformance/core/intermediates.py; issue 26).

The bound of an intermediate is the bound the harness gives an output, from the same evaluation:
the entry's outputs must get exactly ``tolerances.reference``'s bounds (recording changes no
arithmetic, so the Monte Carlo lanes are the same draws), a value the spec copies (a token's
embedding column) gets 0, a masked score −∞ with bound 0, and a value computed through more
operations a bound that is not smaller at a narrower dtype.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.core.intermediates import intermediate_references
from ftspec.conformance.core.tolerances import reference
from ftspec.spec.evaluation import intermediates
from ftspec.spec.variants import PAPER

ENTRIES = ["d_transformer", "e_transformer", "ed_transformer", "gpt2_layer", "decoder_layer", "mh_attention",
           "layer_norm", "rms_norm", "unembedding"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", ENTRIES)
def test_the_outputs_get_exactly_the_reference_bounds(name, dtype):
    c = Case.build(name, None, PAPER)
    p = rounded(c, dtype)
    ref = reference(c.entry, p.inputs, p.params, hyper=c.hyper, variant=PAPER, dtype=dtype)
    got = intermediate_references(c.entry, p.inputs, p.params, hyper=c.hyper, variant=PAPER, dtype=dtype)
    spec = intermediates(name, p.spec_inputs(), p.spec_params(), hyper=c.hyper)
    assert list(got) == [k for k in spec if k not in ("Mask",)]
    for k in ref.outputs:
        assert np.array_equal(got[k].value, ref.outputs[k]) and np.array_equal(got[k].bound, ref.bound[k]), k
    for k, it in got.items():
        assert it.bound.shape == it.value.shape == np.shape(spec[k]) and np.all(it.bound >= 0), k
        assert np.array_equal(it.value, np.asarray(spec[k], dtype=np.float64)), k


def test_copied_values_are_exact_and_masked_scores_have_no_bound():
    c = Case.build("d_transformer", None, PAPER)
    p = rounded(c, "float32")
    got = intermediate_references(c.entry, p.inputs, p.params, hyper=c.hyper, variant=PAPER, dtype="float32")
    assert np.all(got["embedding.tokens"].bound == 0) and np.all(got["embedding.positions"].bound == 0)
    S = got["layers.0.attn.heads.0.S"]
    masked = np.isneginf(S.value)
    assert masked.any() and np.all(S.bound[masked] == 0) and np.all(S.bound[~masked] > 0)
    assert np.all(got["layers.0.norm1.sigma"].bound > 0)
    assert got["layers.0.attn.heads.0.S"].to_dict()["value"][-1][0] == "-inf"  # plain JSON


def test_a_narrower_dtype_has_wider_bounds():
    c = Case.build("gpt2_layer", None, PAPER)
    wide = {}
    for dtype in ("float64", "float16"):
        p = rounded(c, "float16")  # the same inputs for both
        wide[dtype] = intermediate_references(c.entry, p.inputs, p.params, hyper=c.hyper, variant=PAPER,
                                              dtype=dtype)
    for name in ("attn.heads.0.A", "norm2.mu", "mlp.hidden", "res2"):
        assert np.max(wide["float16"][name].bound) > 1e6 * np.max(wide["float64"][name].bound) > 0, name
