"""The MLP and block switches added after spec 2.0, on each bundled implementation, against the spec.

``activation="silu"``, ``norm_placement="res_post"``, ``mlp_depth`` ∈ {2, 3}, ``mlp="gated"`` and all
of them at once (gated SiLU, two hidden layers, res-post-norm), and ``mlp="one_layer"`` (seed 004's
FFN act(W_mlp1 X + b_mlp1 1ᵀ) with no second map, d_mlp = d_e) alone, with two hidden layers and
with res-post-norm: for NumPy, PyTorch and JAX, the GPT-2 layer, the decoder layer and the
DTransformer gradient (NumPy's is hand-written; PyTorch and JAX differentiate automatically; JAX's
under the combined set and one_layer with two hidden layers only) at float64 on the entry's
default case, every output element within ``RTOL`` of the spec's binary64 value, relative to the
largest |value| of the call. The NumPy plugin's hand-written encoder-decoder gradient (decoder
backward through res-post-norm and the gated, deeper or one-layer MLP) is checked the same way.

Then the comparison is shown able to fail: the same implementations fed a deliberately wrong
convention (the gate's two weights swapped, res-post-norm run as post-LN, the hidden layers run in
the other order, SiLU run as the exact GELU, one_layer run as a plain MLP whose second map is the
identity plus a stray bias, one_layer's last hidden layer run as a plain MLP's output map, without
its activation) depart by far more than ``RTOL``; a width d_mlp ≠ d_e under one_layer is refused.
Last, SiLU on arguments whose exp overflows: finite, in the call's dtype, x or −0 at the ends.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pytest

from ftspec.conformance.core.calling import outputs_to_numpy, to_native
from ftspec.conformance.core.case import Case
from ftspec.impls.api import Context
from ftspec.impls.discovery import load
from ftspec.spec import PAPER, VariantSet, evaluate
from ftspec.spec.errors import SpecError
from ftspec.spec.registry import REGISTRY

BUNDLED = ("numpy", "torch", "jax")
#: every output element within RTOL × (largest |spec value| of that output): binary64 rounding of
#: these small cases stays far below it (measured: at most 2.2e-15 over every check here)
RTOL = 1e-12

COMBINED = "gated-silu-depth2-res_post"
ONE_LAYER_DEEP = "one_layer-depth2"
VARIANTS: dict[str, VariantSet] = {
    "silu": PAPER.replace(activation="silu"),
    "res_post": PAPER.replace(norm_placement="res_post"),
    "depth2": PAPER.replace(mlp_depth=2),
    "depth3": PAPER.replace(mlp_depth=3),
    "gated": PAPER.replace(mlp="gated"),
    COMBINED: PAPER.replace(mlp="gated", activation="silu", mlp_depth=2,
                                                norm_placement="res_post"),
    "one_layer": PAPER.replace(mlp="one_layer"),
    ONE_LAYER_DEEP: PAPER.replace(mlp="one_layer", mlp_depth=2),
    "one_layer-res_post": PAPER.replace(mlp="one_layer", norm_placement="res_post"),
}
ENTRIES = ("gpt2_layer", "decoder_layer", "d_gradient")


def _entries(impl_name: str, label: str) -> tuple[str, ...]:
    """What is checked under the variant set ``label``: every entry of ``ENTRIES``, and NumPy's
    hand-written ed_gradient too; JAX's autodiff gradient under the combined set, which runs
    every new path at once, and under one_layer with two hidden layers only (one XLA compile per
    entry and set: the others would add ~10 s)."""
    if impl_name == "numpy":
        return ENTRIES + ("ed_gradient",)
    if impl_name == "jax" and label not in (COMBINED, ONE_LAYER_DEEP):
        return tuple(a for a in ENTRIES if not a.endswith("_gradient"))
    return ENTRIES

_IMPLS: dict[str, Any] = {}


def _impl(name: str) -> Any:
    if name not in _IMPLS:
        if name != "numpy":
            pytest.importorskip(name)
        _IMPLS[name] = load(name)
    return _IMPLS[name]


def _case(algorithm: str, variant: VariantSet) -> Case:
    return Case.build(algorithm, None, variant, seed=11)


def _spec(case: Case, variant: VariantSet) -> dict[str, np.ndarray]:
    out = evaluate(case.algorithm, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=variant)
    if not isinstance(out, Mapping):
        out = {REGISTRY[case.algorithm].outputs[0].name: out}
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def _run(impl_name: str, case: Case, variant: VariantSet,
         params: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The implementation at float64 on ``case`` under ``variant`` (``params``: instead of the case's)."""
    impl = _impl(impl_name)
    entry = REGISTRY[case.algorithm]
    device = impl.devices()[0]
    ctx = Context(case.algorithm, "float64", device, case.hyper, variant, False)
    result = impl.algorithms[case.algorithm](to_native(impl, entry, case.inputs, "float64", device),
                                             to_native(impl, entry, params or case.params, "float64", device,
                                                       params=True), ctx)
    return {k: v.astype(np.float64) for k, v in outputs_to_numpy(impl, entry, result, case.hyper, variant).items()}


def _worst(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> tuple[float, str]:
    """The largest |got − want| over the outputs relative to the largest |want| over all of them (a
    gradient has entries that are 0 in exact arithmetic, such as b_k's, where only rounding is left),
    and the output it is in."""
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    scale = max((float(np.max(np.abs(w))) for w in want.values() if w.size), default=1.0)
    worst, where = 0.0, ""
    for k, w in want.items():
        assert got[k].shape == w.shape, (k, got[k].shape, w.shape)
        if not w.size:
            continue
        err = float(np.max(np.abs(got[k] - w))) / scale
        if not err <= worst:  # NaN counts as the worst
            worst, where = err, k
    return worst, where


@pytest.mark.parametrize("impl_name", BUNDLED)
def test_new_switches_match_the_spec(impl_name):
    failures = []
    for label, variant in VARIANTS.items():
        for algorithm in _entries(impl_name, label):
            case = _case(algorithm, variant)
            worst, where = _worst(_run(impl_name, case, variant), _spec(case, variant))
            if not worst <= RTOL:
                failures.append(f"{algorithm} under {label}: {where} off by {worst:.3g} (relative)")
    assert not failures, f"{impl_name}:\n" + "\n".join(failures)


def _swap(params: Mapping[str, np.ndarray], a: str, b: str) -> dict[str, np.ndarray]:
    out = dict(params)
    for prefix in {k[: -len(a)] for k in params if k.endswith(a)}:
        out[prefix + a], out[prefix + b] = params[prefix + b], params[prefix + a]
    return out


def _stray_identity(p: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """one_layer read as a plain MLP whose second map is the identity (exactly right on its own) plus
    a stray bias: b_mlp2 = b_mlp1, the first bias added twice."""
    return {**p, "W_mlp2": np.eye(p["W_mlp1"].shape[0]), "b_mlp2": np.array(p["b_mlp1"])}


def _last_as_output(p: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """one_layer with two hidden layers read as a plain one-hidden-layer MLP: the last hidden layer
    becomes the output map W_mlp2 h + b_mlp2, its activation skipped."""
    out = {k: v for k, v in p.items() if not k.startswith("mlp_hidden.")}
    return {**out, "W_mlp2": p["mlp_hidden.0.W"], "b_mlp2": p["mlp_hidden.0.b"]}


#: (label, the variant the case is judged under, what the wrong implementation is told, params change)
WRONG = [
    ("gate weights swapped", VARIANTS["gated"], VARIANTS["gated"],
     lambda p: _swap(p, "W_mlp1", "W_mlp1_lin")),
    ("res_post run as post", VARIANTS["res_post"], PAPER.replace(norm_placement="post"), dict),
    ("hidden layers reordered", VARIANTS["depth3"], VARIANTS["depth3"],
     lambda p: _swap(_swap(p, "mlp_hidden.0.W", "mlp_hidden.1.W"), "mlp_hidden.0.b", "mlp_hidden.1.b")),
    ("silu run as gelu_erf", VARIANTS["silu"], PAPER.replace(activation="gelu_erf"), dict),
    ("one_layer run as identity + stray bias", VARIANTS["one_layer"], PAPER, _stray_identity),
    ("one_layer's last activation skipped", VARIANTS[ONE_LAYER_DEEP], PAPER, _last_as_output),
]


@pytest.mark.parametrize("impl_name", BUNDLED)
def test_a_wrong_convention_is_detected(impl_name):
    """The comparison above can fail: each wrong reading departs from the spec by ≫ RTOL."""
    for label, judged, told, change in WRONG:
        case = _case("gpt2_layer", judged)
        worst, _ = _worst(_run(impl_name, case, told, change(case.params)), _spec(case, judged))
        assert worst > 1e3 * RTOL, f"{impl_name}: {label} is not told apart from the spec ({worst:.3g})"


def test_the_identity_reading_of_one_layer_is_exact_but_the_stray_bias_is_not():
    """The wrong reading above is wrong by its bias alone: a plain MLP with W_mlp2 = I and b_mlp2 = 0
    is one_layer exactly (within ``RTOL``), so what the check catches is the stray bias."""
    case = _case("gpt2_layer", VARIANTS["one_layer"])
    exact = {**_stray_identity(case.params), "b_mlp2": np.zeros_like(case.params["b_mlp1"])}
    worst, _ = _worst(_run("numpy", case, PAPER, exact), _spec(case, VARIANTS["one_layer"]))
    assert worst <= RTOL


@pytest.mark.parametrize("impl_name", BUNDLED)
def test_one_layer_refuses_a_width_other_than_d_e(impl_name):
    """Under one_layer act(W_mlp1 X + b_mlp1 1ᵀ) is added to X, so d_mlp = d_e; d_mlp = 1 would
    broadcast silently into X: every implementation raises, as the spec refuses."""
    variant = VARIANTS["one_layer"]
    case = _case("gpt2_layer", variant)
    assert case.hyper["d_e"] > 1
    narrow = {**case.params, "W_mlp1": case.params["W_mlp1"][:1], "b_mlp1": case.params["b_mlp1"][:1]}
    hyper = {**case.hyper, "d_mlp": 1}
    with pytest.raises(SpecError, match="d_mlp"):
        evaluate("gpt2_layer", case.spec_inputs(), {k: v.tolist() for k, v in narrow.items()}, hyper=hyper,
                 variant=variant)
    impl = _impl(impl_name)
    entry = REGISTRY["gpt2_layer"]
    device = impl.devices()[0]
    ctx = Context("gpt2_layer", "float64", device, hyper, variant, False)
    with pytest.raises(ValueError, match="d_mlp"):
        impl.algorithms["gpt2_layer"](to_native(impl, entry, case.inputs, "float64", device),
                                      to_native(impl, entry, narrow, "float64", device, params=True), ctx)


def test_wrong_gradient_is_detected():
    """NumPy's hand-written backward with the gate's weights swapped departs in the gradient too."""
    variant = VARIANTS[COMBINED]
    case = _case("d_gradient", variant)
    worst, _ = _worst(_run("numpy", case, variant, _swap(case.params, "W_mlp1", "W_mlp1_lin")),
                      _spec(case, variant))
    assert worst > 1e3 * RTOL


@pytest.mark.parametrize("impl_name", BUNDLED)
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_silu_is_finite_where_exp_overflows(impl_name, dtype):
    """SiLU at ±x where exp(x) overflows the dtype: finite, of the call's dtype, exactly x at the
    positive end; at the negative end x σ(x) is a tiny negative number that PyTorch's and JAX's
    kernels return as −0 at float64 and float32 (measured): it must be ≤ 0 and no larger in
    magnitude. In between, x σ(x) to a few ulps."""
    impl = _impl(impl_name)
    if dtype not in impl.dtypes:
        pytest.skip(f"{impl_name} has no {dtype}")
    big = {"float64": 710.0, "float32": 89.0, "float16": 12.0}[dtype]  # exp(big) overflows the dtype
    x = np.array([-big, -1.5, 0.0, 0.75, big])
    e = np.exp(-np.abs(x))  # binary64, no overflow
    want = np.where(x >= 0, x / (1.0 + e), x * e / (1.0 + e))
    got = _silu(impl_name, x, dtype)
    assert got.dtype == np.dtype(dtype) and np.all(np.isfinite(got)), got
    assert got[-1] == big and want[0] * (1 + 1e-2) <= got[0] <= 0, got
    np.testing.assert_allclose(got[1:-1].astype(np.float64), want[1:-1], rtol=4 * float(np.finfo(dtype).eps))


def _silu(impl_name: str, x: np.ndarray, dtype: str) -> np.ndarray:
    """The implementation's own SiLU on ``x`` rounded to ``dtype``."""
    xs = x.astype(dtype)
    if impl_name == "numpy":
        from ftspec.impls.numpy.components import activation

        return np.asarray(activation("silu")(xs))
    if impl_name == "torch":
        import torch

        from ftspec.impls.torch.components import activation as torch_activation

        return torch_activation(torch.from_numpy(xs), "silu").numpy()
    import jax.numpy as jnp

    from ftspec.impls.jax.components import activation as jax_activation

    return np.asarray(jax_activation("silu")(jnp.asarray(xs)))
