"""The JAX plugin on the LLaMA-style switches and the padding / key-value-cache entries (issue 27).

Each test draws a few cases with the harness's own strategies
(``conformance.core.strategies.cases``: sizes, values, padding vectors, n_prefill and batches as a
search draws them), takes the spec's reference and tolerances for the dtype
(``conformance.core.tolerances.reference``) and runs the plugin through the harness's per-example
checks (``conformance.core.execute.examine``: the call, the judgement against the spec, a repeated
call, the batched call against the per-example ones). Under grouped-query attention the draws
have H ≥ 4, so that H/G ≥ 2 key/value heads tell the two head orders apart.

The variants: the ``llama`` preset (rotate_half RoPE, G = 2 consecutive) and the same with
interleaved RoPE, strided heads and Llama 3's base. A deliberately wrong pairing, the plugin
called under the other head order or the other RoPE pairing than the spec's, must be judged
wrong, so the checks can fail.

JAX compiles one program per (entry, variant, sizes, dtype, batched): one shape per test
(``shapes=1``), two examples, and batches only where the batch axis is new (padding, n_prefill).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

pytest.importorskip("jax")

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import judged_for
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.strategies import cases
from ftspec.impls.api import Limits
from ftspec.impls.discovery import load
from ftspec.spec import SpecError
from ftspec.spec.variants import VariantSet, preset

LLAMA = preset("llama").replace(kv_group=2)  # grouped: the preset fixes no size (until spec 2.4.0 it held 2)
#: interleaved RoPE pairs, strided key/value heads, Llama 3's base
LLAMA_INTERLEAVED = LLAMA.replace(rotary="interleaved", kv_order="strided", rope_base=500000.0)
#: H ≥ 4: two or more key/value heads under G = 2; d_attn ≥ 4: two or more RoPE pairs (at d_attn = 2
#: the half-split and interleaved pairings are the same pair); sequences of 3 or more, so that RoPE
#: turns, causality and padding show (a derandomised search starts from the smallest sizes)
WIDE = Limits(minimum={"H": 4, "d_attn": 4, "d_mid": 2, "d_e": 2, "d_x": 2, "d_z": 2, "N_V": 3,
                       "ell": 3, "ell_x": 3, "ell_z": 3})

_IMPL: dict[str, Any] = {}


def _member() -> Member:
    if "jax" not in _IMPL:
        _IMPL["jax"] = load("jax")
    return Member(label="jax", impl=_IMPL["jax"], device="cpu")


def _judged(case: Case, dtype: str, spec_variant: VariantSet, called: VariantSet) -> Any:
    """The harness's checks of the plugin called under ``called`` against the spec under
    ``spec_variant`` (at the plugin's declared precision, the batch against its own references);
    None when the spec refuses the draw (as the runner skips it)."""
    try:
        judged = judged_for(_member(), case, dtype, variant=spec_variant)
    except SpecError:
        return None
    if called != case.variant:
        case = Case(case.algorithm, case.hyper, called, case.inputs, case.params, case.batch, case.style)
    return examine(_member(), case, judged.prepared.inputs, judged.prepared.params, judged.reference, dtype=dtype,
                   timeout=300.0, batch=judged.batch)


#: the entries whose batched call is checked too (a second program each): the new ones with a
#: per-example padding vector or n_prefill
BATCHED = ("padded_causal_self_attention", "padded_d_transformer", "cached_decoding")


def _check(name: str, variant: VariantSet, dtype: str, examples: int = 2) -> None:
    """``examples`` draws of ``name`` under ``variant`` at ``dtype`` (one shape): every one conforms."""
    judged: list[Any] = []

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(name, dtype=dtype, variants=[variant], budget="quick", shapes=1, limits=WIDE,
                 styles=["well-scaled"], max_batch=3 if name in BATCHED else 1))
    def run(case: Case) -> None:
        outcome = _judged(case, dtype, variant, variant)
        if outcome is None:
            return
        judged.append(outcome)
        findings = [f"{f.check}: {f.message}" for f in outcome.judgement.findings]
        assert outcome.judgement.ok, f"{name} at {dtype} under {variant.describe()}: {findings[:3]}\n{case.describe()}"

    run()
    assert judged, f"{name}: the spec refused every draw"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["cached_decoding", "padded_causal_self_attention"])
def test_llama_conforms(name, dtype):
    """The preset at float64 and its interleaved / strided / base-500000 form at float32, on the
    plugin's own paths (its fixed-buffer cache, its padding check before tracing); every entry at
    every dtype is the suite's and the fixture replay's claim."""
    _check(name, LLAMA if dtype == "float64" else LLAMA_INTERLEAVED, dtype)


def test_interleaved_strided_float64():
    _check("mh_attention", LLAMA_INTERLEAVED, "float64")


@pytest.mark.parametrize("wrong", [
    {"kv_order": "consecutive"},  # the classic GQA port bug: kv heads repeated in place where tiled
    {"rotary": "half"},  # rotate_half where the checkpoint pairs (2i, 2i+1)
])
def test_wrong_pairing_is_caught(wrong):
    """The plugin under the other head order / RoPE pairing than the spec's fails the judgement."""
    spec_variant = LLAMA_INTERLEAVED
    called = spec_variant.replace(**wrong)
    failed: list[bool] = []

    @settings(max_examples=2, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases("mh_attention", dtype="float64", variants=[spec_variant], budget="quick", shapes=1,
                 limits=WIDE, styles=["well-scaled"], max_batch=1))
    def run(case: Case) -> None:
        outcome = _judged(case, "float64", spec_variant, called)
        if outcome is not None:
            failed.append(not outcome.judgement.ok)

    run()
    assert failed and all(failed), f"the plugin under {wrong} was judged conformant"


def test_cache_decoder_steps_one_token(monkeypatch):
    """cached_decoding is a decoder, not the full pass: the prefill runs the layers over the prompt
    buffer once, every later step runs them over ONE row (the new token) against the cache (the
    values are the searches' to check)."""
    import jax
    import jax.numpy as jnp

    from ftspec.impls.jax import architectures as A
    from ftspec.impls.jax import boundary as B

    _member()  # the plugin turns on float64
    variant = LLAMA_INTERLEAVED
    case = Case.build("cached_decoding", variant=variant, hyper=dict(
        N_V=7, ell_max=6, L=2, H=4, d_e=8, d_attn=4, d_mid=2, d_mlp=6, ell=5), seed=1)
    theta = B._d_theta({k: jnp.asarray(v) for k, v in case.params.items()})
    rows: list[tuple[int, bool]] = []  # (rows of X, whether a cache was given) per layer traced
    layer = A._cached_layer

    def recorded(X, *args):
        rows.append((X.shape[0], args[5] is not None))
        return layer(X, *args)

    monkeypatch.setattr(A, "_cached_layer", recorded)
    out = jax.eval_shape(lambda x, n: A.cached_decoding(x, n, theta, 6, variant),
                         jnp.asarray(case.inputs["x"]), jnp.asarray(2))  # traced, not compiled
    assert out.shape == (5, 7)
    assert rows == [(5, False)] * 2 + [(1, True)] * 2, rows  # prefill: 2 layers on 5 rows; step: on 1
