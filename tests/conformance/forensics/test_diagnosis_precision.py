"""A model that declares one dtype and computes in a narrower one inside is named so (issue 35,
finding 4).

Both public LLaMA codes (Meta's ``llama/model.py`` and karpathy's ``llama2.c`` ``model.py``) compute
``RMSNorm`` on ``x.float()``, cast the result back with ``.type_as(x)`` and multiply by the weight in
the model's dtype: run at float64, every output fails by far more than float64's bound, yet no output
is a float32 value (the float32 rounding is inside, then widened and multiplied). The stand-ins below
are the bundled NumPy plugin with its norm computed that way, or with the whole layer computed in
float32; each must be named as computing in float32 (float16, bfloat16 at float32) inside, and a
departure larger than that rounding must not be.
"""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core.calling import call
from ftspec.conformance.core.case import Case
from ftspec.conformance.core.dtypes import round_to
from ftspec.conformance.core.examining import rounded
from ftspec.conformance.forensics.diagnosis import diagnose
from ftspec.impls.discovery import load
from ftspec.impls.numpy import layers as numpy_layers
from ftspec.spec.variants import preset

NUMPY = load("numpy")
LLAMA = preset("llama").replace(kv_group=2)  # grouped: the preset fixes no size (until spec 2.4.0 it held 2)
#: four query heads, two RoPE pairs per head: a small layer every LLaMA convention acts on
HYPER = {"H": 4, "d_e": 8, "d_attn": 4, "d_mid": 4, "d_mlp": 6, "ell": 4}


def _narrow(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` in ``dtype`` as NumPy holds it: float32 and float16 natively; bfloat16 (no NumPy type)
    as float32 values rounded to bfloat16."""
    if dtype == "bfloat16":
        return np.asarray(round_to(x.astype(np.float64), "bfloat16"), dtype=np.float32)
    return x.astype(dtype)


def _norm_inside(dtype: str):
    """The NumPy plugin's norm as LLaMA's ``RMSNorm.forward`` computes it: the normalisation on the input
    cast to ``dtype`` (``x.float()``), the result cast back to the model's dtype (``.type_as(x)``), then
    the weight applied in the model's dtype."""
    original = numpy_layers._norm_columns_fwd

    def norm(X, gamma, beta, variant, kind):
        out, cache = original(_narrow(X, dtype), None, None, variant, kind)
        out = _narrow(out, dtype).astype(X.dtype)
        if gamma is not None:
            out = out * gamma[:, None]
        if beta is not None:
            out = out + beta[:, None]
        return out, cache

    return norm


def _outputs(case: Case, dtype: str) -> dict:
    p = rounded(case, dtype)
    return call(NUMPY, case.entry, p.inputs, p.params, hyper=case.hyper, variant=case.variant, dtype=dtype,
                device="cpu")


def _is_value_of(outputs: dict, dtype: str) -> bool:
    return all(np.array_equal(round_to(np.asarray(v, dtype=np.float64), dtype), np.asarray(v, dtype=np.float64))
               for v in outputs.values())


@pytest.mark.parametrize("name,hyper", [("rms_norm", None), ("gpt2_layer", HYPER)])
def test_a_float64_model_with_its_norm_in_float32_is_named(monkeypatch, name, hyper):
    """The issue's case: LLaMA at float64 with the norm on ``x.float()``. Its outputs are float64
    values (not float32 ones: the old check required that), outside float64's bound."""
    case = Case.build(name, hyper, LLAMA, seed=2)
    monkeypatch.setattr(numpy_layers, "_norm_columns_fwd", _norm_inside("float32"))
    out = _outputs(case, "float64")
    assert not _is_value_of(out, "float32")  # the widened intermediates the old check could not see
    # the variant search is not what is tested: a small budget keeps the layer cheap
    d = diagnose(case.entry, case, out, "float64", evaluations=8)
    assert d.recurred and d.matches == [], d.summary()
    assert d.lower_precision == "float32" and not d.lower_values, d.summary()
    assert d.summary().startswith("computes in float32 inside"), d.summary()
    assert "float64 values carrying float32 rounding" in d.summary()


def test_a_layer_computed_in_float32_and_returned_as_float32_is_named():
    """The whole layer in float32 (inputs and parameters cast, as a float32 checkpoint run on float64
    inputs), its float32 outputs returned as they are (Meta's model returns float32 logits whatever
    the input's dtype): named at float32, whatever the output's own dtype."""
    case = Case.build("gpt2_layer", HYPER, LLAMA, seed=2)
    p = rounded(case, "float64")
    low = call(NUMPY, case.entry, {k: (v.astype(np.float32) if np.asarray(v).dtype.kind == "f" else v)
                                   for k, v in p.inputs.items()},
               {k: v.astype(np.float32) for k, v in p.params.items()}, hyper=case.hyper, variant=LLAMA,
               dtype="float32", device="cpu")
    assert all(np.asarray(v).dtype == np.float32 for v in low.values())
    d = diagnose(case.entry, case, low, "float64", evaluations=8)
    assert d.lower_precision == "float32" and d.lower_values, d.summary()
    assert "its outputs are float32 values" in d.summary()


@pytest.mark.parametrize("inside", ["float16", "bfloat16"])
def test_a_float32_model_with_its_norm_narrower_is_named(monkeypatch, inside):
    """At float32 (mixed precision: a norm under autocast): the norm in float16 is named float16 first
    (the finer dtype: bfloat16's wider bound holds it too); the norm in bfloat16 is named bfloat16,
    beside float16 where float16's bound (8 times its spread, as wide as bfloat16's rounding) holds
    it as well: the case cannot tell those two apart, and the diagnosis says both."""
    case = Case.build("rms_norm", None, LLAMA, seed=2)
    monkeypatch.setattr(numpy_layers, "_norm_columns_fwd", _norm_inside(inside))
    d = diagnose(case.entry, case, _outputs(case, "float32"), "float32")
    assert d.matches == [] and d.summary().startswith("computes in"), d.summary()
    named = [d.lower_precision, *d.lower_also]
    assert inside in named, d.summary()
    if inside == "float16":
        assert d.lower_precision == "float16", d.summary()
    assert all(f"{n} inside" in d.summary() or f"or {n}" in d.summary() for n in named), d.summary()


def test_a_departure_beyond_the_narrower_rounding_is_not_named(monkeypatch):
    """The same stand-in with the weight off by one part in 10⁴ (far above float32's rounding, far below
    the output's size): no dtype's bound holds it, and nothing is named."""
    case = Case.build("rms_norm", None, LLAMA, seed=2)
    norm = _norm_inside("float32")
    monkeypatch.setattr(numpy_layers, "_norm_columns_fwd",
                        lambda X, gamma, beta, variant, kind: norm(X, gamma * (1 + 1e-4), beta, variant, kind))
    d = diagnose(case.entry, case, _outputs(case, "float64"), "float64")
    assert d.recurred and d.matches == [] and d.lower_precision is None, d.summary()
    assert "computes in" not in d.summary()


def _caller(impl, dtype: str):
    """The implementation on another case (the diagnosis's fresh cases), as a failure's hook calls it."""
    def run(c: Case) -> dict:
        p = rounded(c, dtype)
        return call(impl, c.entry, p.inputs, p.params, hyper=c.hyper, variant=c.variant, dtype=dtype, device="cpu")
    return run


def test_a_narrower_dtype_is_still_named_where_fresh_cases_confirm_it(monkeypatch):
    """The norm in float16 inside a float32 model holds float16's bound on any case: given the
    implementation's fresh cases (``call``), the diagnosis still names float16 and refutes nothing."""
    case = Case.build("rms_norm", None, LLAMA, seed=2)
    monkeypatch.setattr(numpy_layers, "_norm_columns_fwd", _norm_inside("float16"))
    called = []
    run = _caller(NUMPY, "float32")
    d = diagnose(case.entry, case, _outputs(case, "float32"), "float32",
                 call=lambda c: called.append(c) or run(c))
    assert called, "no fresh case was tried: the test shows nothing"
    assert d.lower_precision == "float16" and not d.lower_refuted, d.summary()


#: Hugging Face Qwen3 as docs/spec.md declares it, and a degenerate layer (width 1) such as a shrunk
#: failing case is, where a narrower dtype's bound is wide
QWEN3 = preset("llama").replace(qk_norm="rms", rope_base=1000000.0)
SHRUNK = {"H": 2, "d_e": 1, "d_attn": 4, "d_mid": 1, "d_mlp": 1, "ell": 2}


def test_a_convention_slip_within_a_narrower_bound_on_a_shrunk_case_is_not_named_a_narrower_dtype():
    """QK-norm over all heads at once instead of per head (the zoo's ``qk-norm-over-all-heads``): on a
    width-1 layer its output lies within bfloat16's bound, and the diagnosis said "computes in
    bfloat16 inside". A narrower arithmetic would hold on any case; a fresh case at the entry's
    default sizes refutes it, and the diagnosis says so instead of naming it."""
    import dataclasses

    from ftspec.tools.zoo import build, mutant

    impl = dataclasses.replace(build(mutant("qk-norm-over-all-heads")), variants=(QWEN3,))
    case = Case.build("gpt2_layer", SHRUNK, QWEN3, seed=0, dtype="float32")
    run = _caller(impl, "float32")
    alone = diagnose(case.entry, case, run(case), "float32", evaluations=40)
    assert alone.lower_precision is not None, "the shrunk case no longer lets a narrower bound hold: no test"
    d = diagnose(case.entry, case, run(case), "float32", evaluations=40, call=run)
    assert d.recurred and d.matches == [] and d.lower_precision is None, d.summary()
    assert [r["dtype"] for r in d.lower_refuted] == [alone.lower_precision, *alone.lower_also], d.lower_refuted
    assert "computes in" not in d.summary() and "not bfloat16 inside" in d.summary(), d.summary()


def test_a_narrower_bound_that_holds_everywhere_is_said_with_its_alternative():
    """QK-norm after RoPE (the zoo's ``qk-norm-after-rotary``) departs by less than bfloat16's rounding
    on every case tried: bfloat16 inside cannot be told from it by a bound, so its outputs, float32
    values, are said to be either, and float16, which a fresh case refutes, is not named."""
    import dataclasses

    from ftspec.tools.zoo import build, mutant

    impl = dataclasses.replace(build(mutant("qk-norm-after-rotary")), variants=(QWEN3,))
    case = Case.build("gpt2_layer", SHRUNK, QWEN3, seed=0, dtype="float32")
    run = _caller(impl, "float32")
    d = diagnose(case.entry, case, run(case), "float32", evaluations=40, call=run)
    assert d.lower_precision == "bfloat16" and not d.lower_values, d.summary()
    assert [r["dtype"] for r in d.lower_refuted] == ["float16"], d.lower_refuted
    assert "or a departure smaller than that rounding" in d.summary(), d.summary()
