"""Checks particular to the NumPy implementation (ftspec.impls.numpy).

Agreement with the spec at every dtype, dtypes kept, batching and floating
point warnings (errors under pytest) are test_bundled.py's and the fixture
replay's; here: the exact GELU's accuracy, odd-width sinusoids, empty-query
modes, and the errors NumPy would otherwise swallow.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import reference
from ftspec.spec import PAPER
from ftspec.spec.registry import REGISTRY

from .cases import make_case


def _impl():
    from ftspec.impls.numpy import implementation
    return implementation


def _raw_call(name, inputs, params, hyper, variant, dtype, batched=False):
    """Call the algorithm directly so the native result's dtype can be inspected."""
    from ftspec.impls.api import Context
    impl = _impl()
    entry = REGISTRY[name]
    kinds = {s.name: s.kind for s in entry.inputs}
    native = {k: impl.from_numpy(np.asarray(v), {"token": "int64", "position": "int64", "mask": "bool"}
                                 .get(kinds[k], dtype), "cpu") for k, v in inputs.items()}
    nparams = {k: impl.from_numpy(np.asarray(v), dtype, "cpu") for k, v in params.items()}
    out = impl.algorithms[name](native, nparams, Context(name, dtype, "cpu", dict(hyper), variant, batched))
    return out if isinstance(out, dict) else {entry.outputs[0].name: out}


def test_declaration():
    impl = _impl()
    assert impl.problems() == []
    assert impl.name == "numpy" and impl.version.startswith("0.1.0+numpy")
    assert list(impl.devices()) == ["cpu"]


def test_gelu_erf_full_precision():
    from ftspec.impls.numpy.components import gelu_erf
    x = np.linspace(-12.0, 12.0, 2001)
    want = np.array([t * 0.5 * math.erfc(-t / math.sqrt(2.0)) for t in x])
    np.testing.assert_allclose(gelu_erf(x), want, rtol=4e-16, atol=0)
    assert gelu_erf(x.astype(np.float16)).dtype == np.float16
    assert gelu_erf(np.zeros((0, 3))).shape == (0, 3)


@pytest.mark.parametrize("name", ["sinusoidal_paper", "sinusoidal_vaswani"])
@pytest.mark.parametrize("d_e", [1, 3, 5])
def test_odd_width_sinusoids(name, d_e):
    hyper = {"d_e": d_e, "ell_max": 6}
    got = _raw_call(name, {}, {}, hyper, PAPER, "float64")["W_p"]
    ref = reference(REGISTRY[name], {}, {}, hyper=hyper, variant=PAPER, dtype="float64")
    judgement = judge(REGISTRY[name], {"W_p": got}, ref)  # within the harness's derived tolerance
    assert judgement.ok, judgement.findings
    # the last row is a sine: paper i = (d_e+1)/2 with t = c+1; Vaswani i = (d_e-1)/2 with c
    c = np.arange(6)
    if name == "sinusoidal_paper":
        last = np.sin((c + 1) / 6.0 ** ((d_e + 1) / d_e))
    else:
        last = np.sin(c / 10000.0 ** ((d_e - 1) / d_e))
    np.testing.assert_allclose(got[-1], last, rtol=1e-14)


@pytest.mark.parametrize("name", ["attention", "mh_attention"])
def test_empty_query_error_is_value_error_also_batched(name):
    entry = REGISTRY[name]
    full = make_case(entry, PAPER)
    empty = make_case(entry, PAPER, empty_query=True)
    batch = {k: np.stack([full.inputs[k], empty.inputs[k]]) for k in full.inputs}
    with pytest.raises(ValueError, match="empty_query"):
        call(_impl(), entry, batch, full.params, hyper=full.hyper, variant=PAPER, dtype="float64",
             device="cpu", batched=True)


@pytest.mark.parametrize("mode", ["nan", "zeros", "uniform"])
def test_empty_query_modes_only_touch_the_empty_column(mode):
    entry = REGISTRY["attention"]
    v = PAPER.replace(empty_query=mode)
    case = make_case(entry, v, empty_query=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = call(_impl(), entry, case.inputs, case.params, hyper=case.hyper, variant=v, dtype="float64",
                   device="cpu")["V_tilde"]
    assert np.isfinite(out[:, :-1]).all()
    if mode == "nan":
        assert np.isnan(out[:, -1]).all()
    elif mode == "zeros":
        assert (out[:, -1] == 0).all()
    else:
        V = case.params["W_v"] @ case.inputs["Z"] + case.params["b_v"][:, None]
        np.testing.assert_allclose(out[:, -1], V.mean(axis=1), rtol=1e-13)


def test_bad_tokens_and_long_sequences_raise():
    entry = REGISTRY["d_transformer"]
    case = make_case(entry, PAPER)
    for bad in (np.array([0, -1, 2]), np.array([0, case.hyper["N_V"]])):
        with pytest.raises(ValueError):
            call(_impl(), entry, {"x": bad}, case.params, hyper=case.hyper, variant=PAPER, dtype="float64",
                 device="cpu")
    too_long = np.zeros(case.hyper["ell_max"] + 1, dtype=np.int64)
    with pytest.raises(ValueError):
        call(_impl(), entry, {"x": too_long}, case.params, hyper=case.hyper, variant=PAPER, dtype="float64",
             device="cpu")
