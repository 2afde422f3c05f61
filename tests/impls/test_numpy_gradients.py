"""The NumPy plugin's hand-written backward passes against central differences of its own loss.

An internal consistency check (the comparison with the spec is
test_bundled.py): for each architecture and a handful of variant
sets, at float64 with step h = 1e-6,

- every parameter entry of the paper's variant set, and a random sample of
  entries for the others, agrees with (L(θ + h e_i) − L(θ − h e_i)) / 2h;
- the directional derivative along a random direction over all parameters
  agrees with ⟨∇L, v⟩ (covers every entry at once);

plus the attention backward on its own (masks, empty queries, scale
placements), batching (per-example gradients), float32 staying float32, and
the edge cases of the loss (one token; T̃ taken literally).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from ftspec.impls.api import Context
from ftspec.spec import PAPER, PRESETS
from ftspec.spec.registry import REGISTRY

H_STEP = 1e-6
RTOL = 1e-6

HYPER = dict(N_V=7, d_e=4, d_f=4, d_mlp=6, d_attn=2, d_mid=2, H=2, L=2, L_enc=1, L_dec=2,
             ell=5, ell_x=4, ell_z=3, ell_max=6)

VARIANTS = {
    "paper": PAPER,
    "hf-gpt2": PRESETS["hf-gpt2"],  # tied W_u, pre-LN + final norm, gelu_tanh, ε inside
    "hf-bert": PRESETS["hf-bert"],  # embedding norm, tied W_u + logit bias, post-LN
    "annotated": PRESETS["annotated-transformer"],  # unbiased, ε outside, pre-LN + final norms, √d_model, sinusoid
    "rms-scale": PAPER.replace(norm="rms_norm", affine="scale", epsilon=1e-3, epsilon_placement="inside_root",
                               scale_placement="query_key_sqrt", activation="gelu_tanh", embedding_norm=True,
                               embedding_scale="sqrt_d_e"),
    "bare": PAPER.replace(attn_bias=False, mlp_bias=False, affine="none", attn_scale="none",
                          scale_placement="query", positions="sinusoidal_paper", final_norm="final",
                          norm_placement="pre", activation="relu", logit_bias=True),
    # SwiGLU with two further hidden layers, res-post-norm, RMSnorm (the switches added after spec 2.0)
    "glu-deep-res-post": PAPER.replace(mlp="gated", activation="silu", mlp_depth=3, norm_placement="res_post",
                                       norm="rms_norm", epsilon=1e-5, epsilon_placement="inside_root"),
    # Gemma 2's sandwich: a norm before each sublayer and one of its own (γ{k}_out, β{k}_out) on its
    # output; LayerNorm, so that the output norms' β get their gradients too
    "sandwich": PAPER.replace(norm_placement="sandwich", epsilon=1e-5, epsilon_placement="inside_root"),
}
MODELS = ("ed", "e", "d")


def _impl():
    from ftspec.impls.numpy import implementation
    return implementation


def _params(model, variant, rng, dtype=np.float64):
    shapes = REGISTRY[f"{model}_loss"].param_shapes({**HYPER}, variant)
    out = {}
    for name, shape in shapes.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("gamma"):
            out[name] = 1.0 + 0.2 * rng.normal(size=shape)
        elif len(shape) == 1:
            out[name] = 0.2 * rng.normal(size=shape)
        elif name in ("W_e", "W_p"):
            out[name] = rng.normal(size=shape)
        else:
            out[name] = rng.normal(size=shape) / np.sqrt(shape[1])
    return {k: v.astype(dtype) for k, v in out.items()}


def _data(model, rng, batch=None):
    lead = () if batch is None else (batch,)
    N_V = HYPER["N_V"]
    if model == "ed":
        return {"z": rng.integers(0, N_V, size=lead + (HYPER["ell_z"],)),
                "x": rng.integers(0, N_V, size=lead + (HYPER["ell_x"],))}
    x = rng.integers(0, N_V, size=lead + (HYPER["ell"],))
    if model == "d":
        return {"x": x}
    masked = rng.random(size=lead + (HYPER["ell"],)) < 0.5
    masked[..., 0] = True  # at least one term
    return {"x": x, "masked": masked, "mask_token": np.full(lead, N_V - 1)}


def _hyper(model):
    keys = REGISTRY[f"{model}_loss"].hyper
    return {k: HYPER[k] for k in keys}


def _call(name, inputs, params, variant, dtype="float64", batched=False):
    ctx = Context(name, dtype, "cpu", _hyper(name.split("_")[0]), variant, batched)
    return _impl().algorithms[name](inputs, params, ctx)


def _loss(model, data, params, variant):
    return float(_call(f"{model}_loss", data, params, variant)["loss"])


def _grad(model, data, params, variant, dtype="float64", batched=False):
    out = _call(f"{model}_gradient", data, params, variant, dtype, batched)
    return {k[len("grad."):]: v for k, v in out.items()}


def _regular_case(model, variant, seed):
    """Random parameters and data where the loss is smooth: the next seed while any step of the
    loss or its backward divides by zero (e.g. a ReLU head column that is all zeros before an
    ε-free norm: zero variance, which the spec refuses)."""
    for attempt in range(50):
        rng = np.random.default_rng(seed + attempt)
        params = _params(model, variant, rng)
        data = _data(model, rng)
        try:
            with np.errstate(all="raise"):
                grads = _grad(model, data, params, variant)
        except FloatingPointError:
            continue
        return rng, params, data, grads
    raise AssertionError("no regular case")


def _fd_entry(model, data, params, variant, name, idx):
    plus = {**params, name: params[name].copy()}
    minus = {**params, name: params[name].copy()}
    plus[name][idx] += H_STEP
    minus[name][idx] -= H_STEP
    return (_loss(model, data, plus, variant) - _loss(model, data, minus, variant)) / (2 * H_STEP)


@pytest.mark.parametrize("variant_name", sorted(VARIANTS))
@pytest.mark.parametrize("model", MODELS)
def test_gradient_matches_central_differences(model, variant_name):
    _check_gradient(model, VARIANTS[variant_name], variant_name)


#: Gemma 2's alternation with Gemma 3's two RoPE bases: layer 0 local (window 2, base 10000), layer 1
#: global (base 1000000)
LOCAL_GLOBAL = PAPER.replace(rotary="half", rope_base=1000000.0, window=2, global_every=2, rope_local_base=10000.0)


def test_gradient_under_local_and_global_layers(monkeypatch):
    """The decoder-only model's backward through a local and a global layer (each layer's cache holds
    its own mask and rotary base); d_attn 4, so that the second RoPE pair turns by the base."""
    monkeypatch.setitem(HYPER, "d_attn", 4)
    _check_gradient("d", LOCAL_GLOBAL, "local-global")


def _check_gradient(model, variant, variant_name):
    rng, params, data, grads = _regular_case(model, variant, zlib.crc32(f"{model}/{variant_name}".encode()))
    assert set(grads) == set(params)
    scale = max(float(np.max(np.abs(g))) for g in grads.values())
    atol = RTOL * scale
    every = variant_name == "paper"
    for name, p in params.items():
        assert grads[name].shape == p.shape and grads[name].dtype == np.float64, name
        indices = list(np.ndindex(p.shape))
        if not every:
            indices = [indices[j] for j in rng.choice(len(indices), size=min(3, len(indices)), replace=False)]
        for idx in indices:
            fd = _fd_entry(model, data, params, variant, name, idx)
            g = grads[name][idx]
            assert abs(fd - g) <= RTOL * abs(g) + atol, \
                f"{model} {variant_name} {name}{list(idx)}: backward {g!r}, central difference {fd!r}"
    # the whole gradient at once: a directional derivative along a random direction
    v = {k: rng.normal(size=p.shape) for k, p in params.items()}
    plus = {k: params[k] + H_STEP * v[k] for k in params}
    minus = {k: params[k] - H_STEP * v[k] for k in params}
    fd = (_loss(model, data, plus, variant) - _loss(model, data, minus, variant)) / (2 * H_STEP)
    dot = sum(float(np.sum(grads[k] * v[k])) for k in params)
    assert abs(fd - dot) <= RTOL * (abs(dot) + scale), \
        f"{model} {variant_name}: ⟨∇L, v⟩ = {dot!r}, central difference {fd!r}"


@pytest.mark.parametrize("model", MODELS)
def test_batched_gradient_is_per_example(model):
    variant = PRESETS["hf-bert"] if model == "e" else PAPER
    rng = np.random.default_rng(7)
    params = _params(model, variant, rng)
    data = _data(model, rng, batch=3)
    grads = _grad(model, data, params, variant, batched=True)
    losses = _call(f"{model}_loss", data, params, variant, batched=True)["loss"]
    assert losses.shape == (3,)
    for b in range(3):
        one = {k: v[b] for k, v in data.items()}
        single = _grad(model, one, params, variant)
        assert np.isclose(_loss(model, one, params, variant), losses[b], rtol=1e-12, atol=0)
        for k, g in single.items():
            assert grads[k].shape == (3,) + params[k].shape
            np.testing.assert_allclose(grads[k][b], g, rtol=1e-12, atol=1e-14, err_msg=k)


@pytest.mark.parametrize("model", MODELS)
def test_float32_gradients_stay_float32(model):
    variant = PRESETS["hf-gpt2"] if model == "d" else PAPER
    rng = np.random.default_rng(3)
    params64 = _params(model, variant, rng)
    data = _data(model, rng)
    params32 = {k: v.astype(np.float32) for k, v in params64.items()}
    g32 = _grad(model, data, params32, variant, dtype="float32")
    g64 = _grad(model, data, {k: v.astype(np.float64) for k, v in params32.items()}, variant)
    loss32 = _call(f"{model}_loss", data, params32, variant, dtype="float32")["loss"]
    assert np.asarray(loss32).dtype == np.float32
    scale = max(float(np.max(np.abs(g))) for g in g64.values())
    for k, g in g32.items():
        assert g.dtype == np.float32, k
        np.testing.assert_allclose(g, g64[k], rtol=1e-3, atol=1e-4 * scale, err_msg=k)
    step = _call(f"{model}_sgd_step", {**data, "eta": np.float32(0.1)}, params32, variant, dtype="float32")
    assert all(v.dtype == np.float32 for v in step.values())


def test_one_token_has_no_loss():
    rng = np.random.default_rng(5)
    params = _params("d", PAPER, rng)
    x = np.array([3])
    assert _loss("d", {"x": x}, params, PAPER) == 0.0
    assert all(not np.any(g) for g in _grad("d", {"x": x}, params, PAPER).values())


def test_e_loss_counts_positions_already_holding_mask_token():
    """T̃ = {t : x̃[t] = mask_token}: an unmasked position whose token is mask_token counts."""
    rng = np.random.default_rng(6)
    params = _params("e", PAPER, rng)
    x = np.array([6, 1, 2, 6, 3])
    none = np.zeros(5, dtype=bool)
    loss_literal = _loss("e", {"x": x, "masked": none, "mask_token": np.array(6)}, params, PAPER)
    P = _call("e_transformer", {"x": x}, params, PAPER)
    assert np.isclose(loss_literal, -np.log(P[6, 0]) - np.log(P[6, 3]), rtol=1e-12)
    assert _loss("e", {"x": x, "masked": none, "mask_token": np.array(0)}, params, PAPER) == 0.0


def test_learned_positions_beyond_the_sequence_get_no_gradient():
    rng = np.random.default_rng(8)
    params = _params("d", PAPER, rng)
    g = _grad("d", {"x": np.array([1, 2, 3])}, params, PAPER)
    assert not np.any(g["W_p"][:, 3:]) and np.any(g["W_p"][:, :3])


@pytest.mark.parametrize("empty_query", ["zeros", "uniform"])
@pytest.mark.parametrize("placement", ["scores", "query", "query_key_sqrt"])
@pytest.mark.parametrize("attn_scale", ["sqrt_d_attn", "sqrt_d_model", "none"])
def test_attention_backward(attn_scale, placement, empty_query):
    """Algorithm 4's backward alone: a mask with an empty query column (constant weights there)."""
    from ftspec.impls.numpy.components import attention_fwd
    from ftspec.impls.numpy.grad_components import attention_bwd

    variant = PAPER.replace(attn_scale=attn_scale, scale_placement=placement, empty_query=empty_query)
    rng = np.random.default_rng(11)
    d_x, d_z, d_attn, d_out, lx, lz = 5, 4, 3, 2, 4, 3
    arrays = {"X": rng.normal(size=(d_x, lx)), "Z": rng.normal(size=(d_z, lz)),
              "W_q": rng.normal(size=(d_attn, d_x)), "b_q": rng.normal(size=d_attn),
              "W_k": rng.normal(size=(d_attn, d_z)), "b_k": rng.normal(size=d_attn),
              "W_v": rng.normal(size=(d_out, d_z)), "b_v": rng.normal(size=d_out)}
    Mask = rng.random((lz, lx)) < 0.6
    Mask[0, :] = True
    Mask[:, -1] = False  # an empty query
    R = rng.normal(size=(d_out, lx))  # L = Σ R ⊙ Ṽ

    def loss(a):
        out, _ = attention_fwd(a["X"], a["Z"], a["W_q"], a["b_q"], a["W_k"], a["b_k"], a["W_v"], a["b_v"],
                               Mask, variant)
        return float(np.sum(R * out))

    _, cache = attention_fwd(*(arrays[k] for k in ("X", "Z", "W_q", "b_q", "W_k", "b_k", "W_v", "b_v")),
                             Mask, variant)
    dX, dZ, g = attention_bwd(R, cache)
    g = {**g, "X": dX, "Z": dZ}
    for name, a in arrays.items():
        for idx in np.ndindex(a.shape):
            plus = {**arrays, name: a.copy()}
            minus = {**arrays, name: a.copy()}
            plus[name][idx] += H_STEP
            minus[name][idx] -= H_STEP
            fd = (loss(plus) - loss(minus)) / (2 * H_STEP)
            assert abs(fd - g[name][idx]) <= RTOL * (abs(fd) + 1.0), f"{name}{list(idx)}: {g[name][idx]!r} vs {fd!r}"


@pytest.mark.parametrize("name", ["relu", "gelu_erf", "gelu_tanh", "silu"])
def test_activation_derivatives(name):
    """Elementwise derivatives against central differences; ReLU'(0) = 0 exactly."""
    from ftspec.impls.numpy.components import activation
    from ftspec.impls.numpy.grad_components import activation_bwd

    x = np.linspace(-4.0, 4.0, 81) + 0.013  # no point on ReLU's kink
    fd = (activation(name)(x + H_STEP) - activation(name)(x - H_STEP)) / (2 * H_STEP)
    np.testing.assert_allclose(activation_bwd(name, x, np.ones_like(x)), fd, rtol=RTOL, atol=RTOL)
    zero = activation_bwd(name, np.zeros(1), np.ones(1))
    assert zero[0] == {"relu": 0.0, "gelu_erf": 0.5, "gelu_tanh": 0.5, "silu": 0.5}[name]
    x32 = x.astype(np.float32)
    assert activation_bwd(name, x32, np.ones_like(x32)).dtype == np.float32


def test_zero_variance_with_epsilon_outside_the_root():
    """A dead ReLU head gives columns of zero variance; with σ = √v + ε the norm is smooth there
    (ê = (e − m)/ε to first order), so the gradient is finite, not ∞·0 = NaN."""
    variant = PRESETS["annotated-transformer"]  # ReLU, ε outside the root
    rng = np.random.default_rng(9)
    params = _params("e", variant, rng)
    params["b_f"] = np.full_like(params["b_f"], -100.0)  # every head pre-activation < 0
    data = _data("e", rng)
    with np.errstate(all="raise"):
        grads = _grad("e", data, params, variant)
    assert all(np.all(np.isfinite(g)) for g in grads.values())
    assert not np.any(grads["W_f"]) and np.any(grads["beta"])
    for name in ("beta", "gamma"):
        for idx in np.ndindex(params[name].shape):
            fd = _fd_entry("e", data, params, variant, name, idx)
            assert abs(fd - grads[name][idx]) <= RTOL * (abs(fd) + 1.0)
