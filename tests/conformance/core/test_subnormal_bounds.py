"""Bounds hold an output's own rounding wherever it lands, the subnormal range included.

Three case files from `make run` (tests/conformance/core/cases_subnormal/) failed NumPy, PyTorch and
JAX at float16: every size 1, so the output is one product of products that land in float16's
subnormal range, where rounding is absolute (half the spacing 2^-24), not u times the value; the
Monte Carlo model perturbed products by u·|p| only, and its bound (1.7e-9) was below what the
correctly rounded output itself may differ by (1.6e-8).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ftspec.conformance.core.dtypes import FORMATS, round_to
from ftspec.conformance.core.tolerances import SAFETY, UNDERFLOW, reference
from ftspec.conformance.running.replay import replay
from ftspec.spec.registry import entry
from ftspec.spec.variants import VariantSet, preset

CASES = sorted((Path(__file__).parent / "cases_subnormal").glob("*.json"))


@pytest.mark.parametrize("impl", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("path", CASES, ids=[p.name.split("-")[0] for p in CASES])
def test_the_recorded_subnormal_cases_pass(path, impl):
    verdict = replay(path, impl=impl, dtype="float16")
    assert verdict.ok, verdict.text


def _one_product_chain(scale: float, dtype: str):
    """mh_attention with every size 1: Ṽ = W_o · (W_v · Z) (the softmax of one score is 1), with
    the values scaled so that W_v · Z and the output fall far below ``dtype``'s smallest normal."""
    e = entry("mh_attention")
    hyper = dict(H=1, d_x=1, d_z=1, d_attn=1, d_mid=1, d_out=1, ell_x=1, ell_z=1)
    variant = VariantSet(attn_bias=False)
    inputs = {"X": np.array([[0.5]]), "Z": np.array([[-0.75 * scale]]), "Mask": np.array([[True]])}
    params = {"heads.0.W_q": np.array([[0.25]]), "heads.0.W_k": np.array([[0.5]]),
              "heads.0.W_v": np.array([[0.375 * scale]]), "W_o": np.array([[0.3 * scale]])}
    inputs = {k: round_to(v, dtype) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    params = {k: round_to(v, dtype) for k, v in params.items()}
    return reference(e, inputs, params, hyper=hyper, variant=variant, dtype=dtype)


@pytest.mark.parametrize("dtype,scale", [("float16", 1e-2), ("bfloat16", 1e-13), ("float32", 1e-13)])
def test_an_output_in_the_subnormal_range_is_bounded_by_its_own_rounding(dtype, scale):
    ref = _one_product_chain(scale, dtype)
    y = ref.outputs["V_tilde"]
    assert 0 < np.abs(y).max() < FORMATS[dtype].tiny  # the case is the one it claims to be
    # the correctly rounded output, and an output flushed to zero (FTZ hardware), pass
    for got in (round_to(y, dtype), np.zeros_like(y)):
        assert np.all(np.abs(got - y) <= ref.bound["V_tilde"]), (dtype, got, y, ref.bound["V_tilde"])
    # ... within a small multiple of the format's absolute error there, not loosely
    assert np.all(ref.bound["V_tilde"] <= 4 * SAFETY[dtype] * UNDERFLOW[dtype])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_the_floor_moves_no_bound_where_outputs_are_normal(dtype):
    """Tightness kept: on a well-scaled case the bound is SAFETY × spread, exactly as before."""
    e = entry("gpt2_layer")
    rng = np.random.default_rng(3)
    hyper = dict(d_e=8, d_mlp=16, H=2, d_attn=4, d_mid=4, ell=4)
    variant = preset("hf-gpt2")
    inputs = {"X": rng.standard_normal((8, 4))}
    params = {name: rng.standard_normal(shape) / np.sqrt(shape[-1])
              for name, shape in e.param_shapes(hyper, variant).items()}
    inputs = {k: round_to(v, dtype) for k, v in inputs.items()}
    params = {k: round_to(v, dtype) for k, v in params.items()}
    ref = reference(e, inputs, params, hyper=hyper, variant=variant, dtype=dtype)
    for name, bound in ref.bound.items():
        assert np.array_equal(bound, SAFETY[dtype] * ref.spread[name]), name


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float16"])
def test_a_copied_subnormal_is_exact_or_flushed_where_the_dtype_may_flush(dtype):
    """An embedding row is copied, so it must match bit for bit; but a subnormal entry may come
    back 0 where hardware flushes (float32, bfloat16: XLA's batched gather on CPU did, in `make
    run`), so its bound is |y| there (nothing further than a flush), and 0 in float16, whose
    underflow is gradual."""
    e = entry("token_embedding")
    tiny = FORMATS[dtype].tiny
    value = round_to(np.array([[tiny / 8, 0.5]]), dtype)  # column 0 subnormal in ``dtype``
    ref = reference(e, {"v": np.array(0)}, {"W_e": value}, hyper={"N_V": 2, "d_e": 1}, variant=VariantSet(),
                    dtype=dtype)
    y, bound = ref.outputs["e"], ref.bound["e"]
    assert 0 < abs(y[0]) < tiny and np.all(ref.spread["e"] == 0)
    assert np.all(np.abs(y - y) <= bound)  # the copy itself
    for other in (-y, 3 * y):  # a sign flipped, a value further than a flush: no
        assert np.all(np.abs(other - y) > bound)
    flushed_ok = bool(np.all(np.abs(0.0 - y) <= bound))
    assert flushed_ok == (dtype != "float16"), (dtype, bound)
