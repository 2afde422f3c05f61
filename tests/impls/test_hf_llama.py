"""Hugging Face Llama in the ``transformers`` and ``transformers-sdpa`` plugins: LlamaForCausalLM
(padded_d_transformer with an attention_mask, cached_decoding with a DynamicCache), LlamaAttention
(padded_causal_self_attention) and LlamaRMSNorm (rms_norm, eager plugin only), declared under the
``llama`` preset and ``llama`` with kv_group = 1; sdpa's padded entries with empty_query = "zeros".

The Llama entries are run through the harness on a few draws of each plugin, and a wrongly declared
rotary pairing ("interleaved") or kv_order ("strided") must fail, so the passing runs mean something.
The empty-query behaviour of the two attention paths and the float32 rounding of a float64 model,
both measured for docs/libraries.md ("Llama"), are pinned down directly. float64 is not searched here:
LlamaRMSNorm, LlamaRotaryEmbedding and eager softmax compute in float32 at every dtype, so float64
results carry float32 rounding (``test_float64_is_rounded_through_float32``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ftspec.conformance.core.case import Case  # noqa: E402
from ftspec.conformance.session.commands import Settings, run  # noqa: E402
from ftspec.impls.api import Context, Limits  # noqa: E402
from ftspec.impls.discovery import load  # noqa: E402
from ftspec.spec import evaluate  # noqa: E402
from ftspec.spec.variants import preset  # noqa: E402

LLAMA = preset("llama").replace(kv_group=2)
SETS = (LLAMA, LLAMA.replace(kv_group=1))
ENTRIES = ("padded_d_transformer", "cached_decoding", "padded_causal_self_attention")
TIED = (("d_attn", "d_mid"), ("d_e", "H*d_attn"))


def _settings(tmp_path, **kw) -> Settings:
    return Settings(profile="quick", fixtures="none", in_process=True, case_dir=str(tmp_path / "cases"), **kw)


@pytest.mark.parametrize("name", ["transformers", "transformers-sdpa"])
def test_llama_entries_are_declared(name: str) -> None:
    impl = load(name)
    assert not impl.problems()
    eager = name == "transformers"
    padded = SETS if eager else tuple(v.replace(empty_query="zeros") for v in SETS)
    assert impl.variants_for("padded_d_transformer") == padded
    assert impl.variants_for("padded_causal_self_attention") == padded
    assert impl.variants_for("cached_decoding") == SETS  # it reads no empty_query
    assert ("rms_norm" in impl.algorithms) == eager
    if eager:
        assert impl.variants_for("rms_norm") == (LLAMA,)
    for algorithm in ENTRIES:
        assert set(TIED) <= set(impl.limits_for(algorithm).equal)


def test_the_preset_is_the_library_defaults() -> None:
    c = transformers.LlamaConfig()
    assert (c.hidden_act, LLAMA.activation, LLAMA.mlp) == ("silu", "silu", "gated")
    assert c.rms_norm_eps == LLAMA.epsilon and LLAMA.norm == "rms_norm" and LLAMA.affine == "scale"
    assert c.rope_parameters["rope_type"] == "default" and c.rope_parameters["rope_theta"] == LLAMA.rope_base
    assert not c.attention_bias and not c.mlp_bias and not LLAMA.attn_bias and not LLAMA.mlp_bias
    assert not c.tie_word_embeddings and LLAMA.unembedding == "separate"
    assert c.num_key_value_heads == c.num_attention_heads  # the default is kv_group = 1


def test_llama_entries_conform(tmp_path) -> None:
    """A few harness draws of every Llama entry, both plugins, at float32 and bfloat16."""
    algorithms, dtypes = ENTRIES + ("rms_norm",), ("float32", "bfloat16")
    result = run(["transformers", "transformers-sdpa"],
                 _settings(tmp_path, examples=3, algorithms=algorithms, dtypes=dtypes))
    assert not result.broken
    cells = {(c.impl, c.algorithm, c.dtype): c for c in result.cells if c.status != "not implemented"}
    want = {(n, a, d) for n in ("transformers", "transformers-sdpa") for a in algorithms
            for d in dtypes if a != "rms_norm" or n == "transformers"}
    assert set(cells) == want
    bad = {k: (c.status, c.note) for k, c in cells.items() if c.status != "pass" or c.examples < 3}
    assert not bad


#: A wrong declaration per entry, with the sizes at which it differs from HF's convention.
WRONG = {
    # HF rotates half-split pairs (rotate_half); at d_attn = 2 the one pair is the same either way,
    # and at ℓ = 1 nothing turns (position 0)
    "padded_causal_self_attention": (dict(rotary="interleaved"), {"d_attn": 4, "ell": 2}),
    # HF repeats kv heads consecutively (repeat_kv); at H = 2, G = 2 the one kv head is the same
    "padded_d_transformer": (dict(kv_order="strided"), {"H": 4}),
}


@pytest.mark.parametrize("algorithm", WRONG, ids=["rotary-interleaved", "kv-order-strided"])
def test_a_wrong_declaration_is_caught(tmp_path, algorithm: str) -> None:
    """Declaring rotary="interleaved" or kv_order="strided" fails the entry; the minimum sizes
    make the two conventions differ."""
    wrong, minimum = WRONG[algorithm]
    impl = load("transformers")
    liar = dataclasses.replace(
        impl, name="transformers-wrong", variants={**impl.declared_variants(), algorithm: [LLAMA.replace(**wrong)]},
        limits={**impl.limits, algorithm: Limits(equal=TIED, minimum=minimum)})
    assert not liar.problems()
    result = run([liar], _settings(tmp_path, examples=3, algorithms=(algorithm,), dtypes=("float32",)))
    (cell,) = [c for c in result.cells if c.algorithm == algorithm]
    assert cell.status == "fail", (cell.status, cell.note)


def _call(name: str, case: Case, dtype: str) -> np.ndarray:
    impl = load(name)
    ctx = Context(algorithm=case.algorithm, dtype=dtype, device="cpu", hyper=case.hyper, variant=case.variant)
    native = {k: impl.from_numpy(v, "bool" if v.dtype == bool else dtype, "cpu") for k, v in case.inputs.items()}
    params = {k: impl.from_numpy(v, dtype, "cpu") for k, v in case.params.items()}
    return np.asarray(impl.to_numpy(impl.algorithms[case.algorithm](native, params, ctx)), dtype=np.float64)


def _spec(case: Case, variant) -> np.ndarray:
    out = evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=variant)
    return np.asarray(out["V_tilde"], dtype=np.float64)


def test_empty_query_by_path() -> None:
    """Left padding leaves the first queries no key. Eager adds finfo(dtype).min to masked scores:
    equal logits, uniform weights over every key (float32, bfloat16; at float16 only while the
    scores are below 16 in size, the half-ulp of 65504). sdpa passes a boolean mask to torch's
    CPU kernel, which gives such a query zero weights (ṽ = 0)."""
    hyper = dict(H=2, d_e=8, d_attn=4, d_mid=4, ell=4)
    for variant in SETS:
        case = Case.build("padded_causal_self_attention", hyper, variant, seed=3)
        case.inputs["pad"] = np.array([False, False, True, True])
        got = {name: _call(name, case, "float32") for name in ("transformers", "transformers-sdpa")}
        uniform, zeros = _spec(case, variant), _spec(case, variant.replace(empty_query="zeros"))
        assert np.allclose(uniform[:, 2:], zeros[:, 2:]) and not np.allclose(uniform[:, :2], zeros[:, :2])
        np.testing.assert_allclose(got["transformers"], uniform, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["transformers-sdpa"], zeros, rtol=1e-5, atol=1e-5)


def test_float64_is_rounded_through_float32() -> None:
    """LlamaRMSNorm casts its input to float32 (``hidden_states.to(torch.float32)``), so a float64
    model is float32-accurate at best: the error is far above float64's rounding and within
    float32's. (RoPE's cos/sin and eager softmax are float32 as well.)"""
    case = Case.build("rms_norm", dict(d_e=8, ell=3), LLAMA, seed=1)
    got = _call("transformers", case, "float64")
    want = np.asarray(evaluate("rms_norm", case.spec_inputs(), case.spec_params(), hyper=case.hyper,
                               variant=LLAMA)["X_hat"], dtype=np.float64)
    error = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300))
    assert 1e-12 < error < 1e-6, error
