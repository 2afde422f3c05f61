"""The bundled NumPy, PyTorch and JAX plugins on QK-norm at the causal self-attention entries (spec 2.12):
each refuses, with an exception, a zero query column under QK-norm without ε (the entries' new refusal:
every W_q and b_q zeroed, so that RMSnorm divides by √0), and computes the entry with ε and the gain
1 + γ (the conformance on the enumerated QK-norm sets is tests/impls/test_bundled.py's)."""

from __future__ import annotations

import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.execute import Member
from ftspec.conformance.core.refusals import REFUSED, check_refusals
from ftspec.impls.discovery import load
from ftspec.spec.variants import PAPER

from .cases import findings_of

ENTRIES = ("causal_self_attention", "padded_causal_self_attention")
ZERO_QUERY = "a zero query column into QK-norm without ε"


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("name", ["numpy", "torch", "jax"])
def test_a_zero_query_under_qk_norm_without_epsilon_is_refused(name, entry):
    impl = load(name)
    case = Case.build(entry, None, PAPER.replace(qk_norm="rms"), seed=1)
    results = check_refusals(Member(name, impl, "cpu"), case, "float64", timeout=60.0)
    zero = [r for r in results if r.refusal == ZERO_QUERY]
    assert len(zero) == 1, [r.refusal for r in results]
    assert zero[0].status == REFUSED and zero[0].ok, zero[0].detail


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("name", ["numpy", "torch", "jax"])
def test_qk_norm_with_epsilon_and_one_plus_gamma_conforms(name, entry):
    v = PAPER.replace(qk_norm="rms", epsilon=1e-5, epsilon_placement="inside_root", norm_gain="one_plus_gamma")
    assert findings_of(name, Case.build(entry, None, v, seed=2), v) == []
