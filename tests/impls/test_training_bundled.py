"""Each bundled implementation agrees with the spec on training and inference
(Algorithms 11-15 and their pieces), on fixed small cases.

Real outputs (losses, gradients, parameters after SGD) with the coarse
float64 check of test_bundled.py; sampled tokens exactly (at float64 a
variate within rounding of a CDF boundary has probability ~1e-15 on these
cases; the harness's boundary margin is in conformance/).
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.calling import call
from ftspec.impls.discovery import load
from ftspec.spec import evaluate
from .cases import TRAINING, all_cases

BUNDLED = ("numpy", "torch", "jax")
CASES = list(all_cases(TRAINING))


@pytest.mark.parametrize("impl_name", BUNDLED)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_agrees_with_spec(impl_name, case):
    impl = load(impl_name)
    if case.entry.name not in impl.algorithms:
        pytest.fail(f"{impl_name} does not implement {case.entry.name}")
    spec_out = evaluate(case.entry.name, case.spec_inputs(), case.spec_params(), hyper=case.hyper,
                        variant=case.variant)
    got = call(impl, case.entry, case.inputs, case.params, hyper=case.hyper, variant=case.variant,
               dtype="float64", device="cpu")
    for spec in case.entry.output_specs(case.hyper, case.variant):
        want = np.asarray(spec_out[spec.name])
        g = got[spec.name]
        label = f"{impl_name} {case.id} output {spec.name}"
        assert g.shape == want.shape, f"{label}: shape {g.shape}, spec {want.shape}"
        if spec.kind == "real":
            np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=1e-9, atol=1e-12,
                                       err_msg=label)
        else:
            np.testing.assert_array_equal(g, want, err_msg=label)
