"""The Flax linen plugin (``flax``).

Found through discovery and searched by the harness as a user would run it
(``ftspec.conformance.session.commands.run``); then the
facts its variant set rests on are checked on fixed cases through the
harness's own judge (``conformance.execute.examine``, the path of ``ftspec
replay``): each holds for the declared set, and the set with that one fact
changed (the biased two-pass variance, PyTorch's ε, zero output for a query
that may attend to nothing) is rejected on the same case. The padded
self-attention entries (``make_attention_mask``/``make_causal_mask``) give a
query with no key uniform weights at every dtype, float16 under large scores
included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("flax")

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.examining import examine_case
from ftspec.conformance.core.execute import Member
from ftspec.conformance.session.commands import Settings, run
from ftspec.impls.discovery import discover, load
from ftspec.impls.flax_linen import VARIANT as FLAX_VARIANT

DTYPES = ("float64", "float32", "bfloat16", "float16")
ALGORITHMS = ("layer_norm", "rms_norm", "attention", "mh_attention")
PADDED = ("padded_self_attention", "padded_causal_self_attention")


@pytest.fixture(scope="module")
def flax_impl() -> Any:
    assert "flax" in discover(outside=False), "the bundled distribution does not register the plugin 'flax'"
    return load("flax")


def test_the_plugin_declares_what_it_runs(flax_impl: Any) -> None:
    assert not flax_impl.problems()
    assert tuple(flax_impl.dtypes) == DTYPES and set(flax_impl.algorithms) == set(ALGORITHMS + PADDED)
    assert list(flax_impl.variants) == [FLAX_VARIANT]
    assert FLAX_VARIANT.variance == "one_pass" and FLAX_VARIANT.epsilon == 1e-6
    assert FLAX_VARIANT.epsilon_placement == "inside_root"
    assert (FLAX_VARIANT.empty_query, FLAX_VARIANT.scale_placement) == ("uniform", "query")
    # one head_dim for q, k and v: d_attn = d_mid, nothing else tied
    for algorithm in ("mh_attention",) + PADDED:
        assert flax_impl.limits_for(algorithm).equal == (("d_attn", "d_mid"),)


def test_searched_through_the_session_and_passes(flax_impl: Any, tmp_path: Any) -> None:
    """Two examples per (algorithm, dtype) cell (each new shape is a new XLA
    compile), in this process (a worker process would import JAX again);
    every cell runs them and passes. float32 is left to the fixed cases below
    and to ``ftspec certify flax`` (docs/libraries.md), to keep this file fast."""
    dtypes = ("float64", "bfloat16", "float16")
    result = run(["flax"], Settings(profile="quick", examples=2, fixtures="none", in_process=True,
                                    algorithms=ALGORITHMS, dtypes=dtypes, case_dir=str(tmp_path)))
    cells = {(c.algorithm, c.dtype): c for c in result.cells if c.algorithm in ALGORITHMS}
    assert set(cells) == {(a, d) for a in ALGORITHMS for d in dtypes}
    for key, c in cells.items():
        assert c.status == "pass" and c.examples >= 2, (key, c.status, c.examples, c.failure)


def test_padded_entries_searched_and_pass(flax_impl: Any, tmp_path: Any) -> None:
    """Two harness examples per padded entry at float32 (its other dtypes: the fixed cases below
    and ``ftspec certify flax``)."""
    result = run(["flax"], Settings(profile="quick", examples=2, fixtures="none", in_process=True,
                                    algorithms=PADDED, dtypes=("float32",), case_dir=str(tmp_path)))
    cells = {c.algorithm: c for c in result.cells if c.algorithm in PADDED}
    assert set(cells) == set(PADDED)
    for name, c in cells.items():
        assert c.status == "pass" and c.examples >= 2, (name, c.status, c.examples, c.failure)


# --------------------------------------------------------------------------
# fixed cases: each declared fact holds, and its negation is caught
# --------------------------------------------------------------------------


def _norm_case(offset: float, spread: float) -> Case:
    """layer_norm on two columns of 8 entries: offset + spread · (fixed noise)."""
    noise = np.random.default_rng(7).standard_normal((8, 2))
    X = offset + spread * noise  # (d_e, ℓ)
    params = {"gamma": np.linspace(0.5, 1.5, 8), "beta": np.linspace(-1.0, 1.0, 8)}
    return Case("layer_norm", {"d_e": 8, "ell": 2}, FLAX_VARIANT, {"X": X}, params)


def _empty_query_case() -> Case:
    """mh_attention with sizes flax leaves free (d_x ≠ H·d_attn, d_out ≠ d_x,
    ℓ_z ≠ ℓ_x) and query t_x = 1 masked from every key."""
    rng = np.random.default_rng(3)
    H, hd, d_x, d_z, d_out, lx, lz = 2, 3, 4, 5, 6, 3, 4
    p = {"W_o": rng.standard_normal((d_out, H * hd)), "b_o": rng.standard_normal(d_out)}
    for h in range(H):
        p |= {f"heads.{h}.W_q": rng.standard_normal((hd, d_x)), f"heads.{h}.b_q": rng.standard_normal(hd),
              f"heads.{h}.W_k": rng.standard_normal((hd, d_z)), f"heads.{h}.b_k": rng.standard_normal(hd),
              f"heads.{h}.W_v": rng.standard_normal((hd, d_z)), f"heads.{h}.b_v": rng.standard_normal(hd)}
    Mask = rng.random((lz, lx)) < 0.7
    Mask[0, :] = True  # every other query has a key
    Mask[:, 1] = False  # query 1 has none
    i = {"X": rng.standard_normal((d_x, lx)), "Z": rng.standard_normal((d_z, lz)), "Mask": Mask}
    hyper = dict(H=H, d_x=d_x, d_z=d_z, d_attn=hd, d_mid=hd, d_out=d_out, ell_x=lx, ell_z=lz)
    return Case("mh_attention", hyper, FLAX_VARIANT, i, p)


def _padded_case(algorithm: str, pad: list, scale: float = 1.0) -> Case:
    """``algorithm`` at H = 2, d_e = 4, d_attn = d_mid = 3 (d_e ≠ H·d_attn: linen leaves it free)
    with the padding ``pad``; W_q and W_k times ``scale`` (a power of two)."""
    hyper = dict(H=2, d_e=4, d_attn=3, d_mid=3, ell=len(pad))
    case = Case.build(algorithm, hyper, FLAX_VARIANT, seed=2)
    case.inputs["pad"] = np.array(pad, dtype=bool)
    for k in case.params:
        if k.endswith(("W_q", "W_k")):
            case.params[k] = case.params[k] * scale
    return case


def _judged(impl: Any, case: Case, dtype: str, **declared: Any) -> Any:
    """The harness's judgement of ``impl`` on ``case`` at ``dtype``, with the
    declared variant set changed by ``declared``."""
    variant = case.variant.replace(**declared)
    case = Case(case.algorithm, case.hyper, variant, case.inputs, case.params)
    return examine_case(Member("flax", impl, "cpu"), case, dtype, timeout=60.0).judgement

#: (label, case, dtype, the wrong declaration). The large offset (1000 + 0.01·noise)
#: makes E[x²] − E[x]² cancel: float32 keeps none of v ≈ 1e-5 (ulp(1e6) = 0.06) and
#: float64 loses about six of its sixteen digits, far outside a two-pass tolerance. At
#: offset 0 and spread 1e-3, v ≈ 1e-6 and ε = 1e-5 against 1e-6 changes the output
#: by a factor of about 3.
FACTS = [
    ("one-pass variance, float32", _norm_case(1000.0, 0.01), "float32", {"variance": "biased"}),
    ("one-pass variance, float64", _norm_case(1000.0, 0.01), "float64", {"variance": "biased"}),
    ("epsilon 1e-6", _norm_case(0.0, 1e-3), "float64", {"epsilon": 1e-5}),
    ("empty query uniform", _empty_query_case(), "float64", {"empty_query": "zeros"}),
    # jnp.where puts exactly finfo(float16).min in every masked score: equal, whatever the scores
    ("padded, all padding, float16, large scores", _padded_case("padded_self_attention", [False] * 3, 16.0),
     "float16", {"empty_query": "zeros"}),
    ("padded causal, left padding", _padded_case("padded_causal_self_attention", [False, False, True, True]),
     "float64", {"empty_query": "zeros"}),
]


@pytest.mark.parametrize("label,case,dtype,wrong", FACTS, ids=[f[0] for f in FACTS])
def test_declared_fact_holds_and_its_negation_is_caught(flax_impl: Any, label: str, case: Case, dtype: str,
                                                        wrong: dict) -> None:
    right = _judged(flax_impl, case, dtype)
    assert right.ok, (label, [f.message for f in right.findings])
    caught = _judged(flax_impl, case, dtype, **wrong)
    assert not caught.ok, f"{label}: declaring {wrong} instead was not caught (worst ratio {caught.ratio:.3g})"


def test_padding_masks_keys_not_queries(flax_impl: Any) -> None:
    """The plugin's mask is ``make_attention_mask(all True, pad)``: a padding position's own column
    attends to the real tokens, as the spec's. The common ``make_attention_mask(pad, pad)`` masks
    that query too: its column becomes the uniform average over every key instead (the real
    columns agree)."""
    import flax.linen as nn
    import jax.numpy as jnp

    from ftspec.impls.flax_linen import adapter as A
    from ftspec.impls.flax_linen.entries import MODULES

    case = _padded_case("padded_self_attention", [True, True, False, False])
    assert _judged(flax_impl, case, "float64").ok
    module = MODULES["padded_self_attention"](case.hyper)
    variables = A.mha_variables({k: jnp.asarray(v) for k, v in case.params.items()}, case.hyper["H"])
    X, pad = jnp.asarray(case.inputs["X"]).T, jnp.asarray(case.inputs["pad"])
    ours = np.asarray(module.apply(variables, X, mask=A.padding_mask(pad)))  # (ℓ, d_e)
    idiom = np.asarray(module.apply(variables, X, mask=nn.make_attention_mask(pad, pad)))
    uniform = np.asarray(module.apply(variables, X, mask=jnp.zeros((1, 4, 4), dtype=bool)))
    np.testing.assert_allclose(ours[:2], idiom[:2], rtol=1e-12)
    np.testing.assert_allclose(idiom[2:], uniform[2:], rtol=1e-12)
    assert not np.allclose(ours[2:], idiom[2:])
