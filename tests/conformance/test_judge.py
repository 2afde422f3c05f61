"""The judge on scalar (0-d) outputs: a sampled token and a loss."""

from __future__ import annotations

import numpy as np

from ftspec.conformance.judge import judge
from ftspec.conformance.tolerances import Reference
from ftspec.spec.registry import REGISTRY


def _ref(entry, outputs, bound):
    specs = tuple(entry.outputs)
    return Reference(outputs=outputs, bound=bound, spread=bound, max_intermediate=1.0, in_range=True,
                     dtype="float64", precision="highest", specs=specs)


def test_a_differing_scalar_token_is_a_failure():
    entry = REGISTRY["sample"]
    ref = _ref(entry, {"y": np.array(2)}, {"y": np.zeros(())})
    assert judge(entry, {"y": np.array(2)}, ref).ok
    j = judge(entry, {"y": np.array(5)}, ref)
    assert not j.ok and "'y' differs at 1 of 1" in j.findings[0].message


def test_a_scalar_loss_is_judged_against_its_bound():
    entry = REGISTRY["d_loss"]
    ref = _ref(entry, {"loss": np.array(3.0)}, {"loss": np.array(1e-12)})
    assert judge(entry, {"loss": np.array(3.0 + 5e-13)}, ref).ok
    j = judge(entry, {"loss": np.array(3.0 + 5e-12)}, ref)
    assert not j.ok and j.findings[0].check == "spec" and j.ratio > 1
