"""Tests of the PyTorch plugin's training and inference (Algorithms 11-15):
``gradcheck``, batched per-example gradients,
the loss's index and T̃ conventions, the sampling rule and its limits, and
EDInference's stopping and padding.

Agreement with the spec at every dtype (dtypes of gradients, losses, steps and
tokens included) is tests/impls/test_bundled.py's and the fixture replay's job.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ftspec.conformance.core.calling import native_dtype  # noqa: E402
from ftspec.impls.api import Context  # noqa: E402
from ftspec.spec import PAPER, PRESETS, evaluate  # noqa: E402
from ftspec.spec.registry import REGISTRY  # noqa: E402

from .cases import accepted_case, hyper_for  # noqa: E402

tp = pytest.importorskip("ftspec.impls.torch")
T = pytest.importorskip("ftspec.impls.torch.training")
I = pytest.importorskip("ftspec.impls.torch.inference")
impl = tp.implementation


def _entry(name):
    return REGISTRY[name]


def _case(name, variant=PAPER, seed=0, **hyper):
    """A spec-accepted case of entry ``name``; ``hyper`` overrides those the entry has."""
    entry = _entry(name)
    h = {k: hyper.get(k, v) for k, v in hyper_for(entry).items()}
    return accepted_case(entry, variant, seed=seed, hyper=h)


def _native(entry, arrays, dtype, params=False):
    kinds = {s.name: s.kind for s in entry.inputs}
    return {k: impl.from_numpy(np.asarray(v), dtype if params else native_dtype(kinds[k], dtype), "cpu")
            for k, v in arrays.items()}


def _run(name, case, dtype="float64", *, inputs=None, params=None, batched=False, hyper=None):
    """Call entry ``name`` on a case's (or the given native) inputs and params."""
    entry = _entry(name)
    i = inputs if inputs is not None else _native(entry, case.inputs, dtype)
    p = params if params is not None else _native(entry, case.params, dtype, params=True)
    h = dict(case.hyper, **(hyper or {}))
    h = {k: h[k] for k in entry.hyper if k in h}
    return impl.algorithms[name](i, p, Context(name, dtype, "cpu", h, case.variant, batched))


# --------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------


def test_every_training_and_inference_entry_is_implemented():
    assert set([n for n, e in REGISTRY.items() if e.family in ("training", "inference")]) <= set(impl.algorithms)
    assert impl.problems() == []


# --------------------------------------------------------------------------
# gradients: gradcheck, batching, zero cases
# --------------------------------------------------------------------------


#: a model small enough for finite differences over every parameter (two heads kept)
TINY = dict(N_V=5, d_e=3, d_f=3, d_attn=1, d_mid=1, d_mlp=2, ell=3, ell_x=3, ell_z=2, ell_max=4)


@pytest.mark.parametrize("name, variant, fast", [
    ("d_loss", PAPER, False), ("d_loss", PRESETS["hf-gpt2"], True), ("e_loss", PAPER, True),
    ("ed_loss", PRESETS["hf-bart"], True),
])
def test_gradcheck_float64(name, variant, fast):
    """autograd's gradient of the loss (every parameter) against finite differences:
    the full Jacobian for the paper's d_loss, gradcheck's fast mode (random
    projections) for the larger models."""
    case = _case(name, variant, **TINY)
    entry = _entry(name)
    inputs = _native(entry, case.inputs, "float64")
    names = list(case.params)
    leaves = tuple(impl.from_numpy(case.params[k], "float64", "cpu").requires_grad_(True) for k in names)

    def loss(*theta):
        return _run(name, case, inputs=inputs, params=dict(zip(names, theta)))["loss"]

    with torch.enable_grad():  # the loss entry itself runs under no_grad: call the loss function directly
        loss_of_theta = T._LOSS[name.split("_")[0]](inputs, Context(name, "float64", "cpu", case.hyper,
                                                                      variant))
        assert torch.autograd.gradcheck(lambda *th: loss_of_theta(dict(zip(names, th))), leaves,
                                        eps=1e-6, atol=1e-7, rtol=1e-5, fast_mode=fast)
    # and the gradient entry returns exactly autograd's gradient
    grads = _run(name.replace("_loss", "_gradient"), case, inputs=inputs)
    with torch.enable_grad():
        want = torch.autograd.grad(loss_of_theta(dict(zip(names, leaves))), leaves)
    for k, w in zip(names, want):
        torch.testing.assert_close(grads[f"grad.{k}"], w, rtol=0, atol=0)
    assert float(loss(*leaves)) > 0


@pytest.mark.parametrize("model", ["ed", "e", "d"])
def test_batched_loss_and_gradient_are_per_example(model):
    """Batched: one forward, a vmapped backward; row b equals the unbatched call on example b."""
    entry = _entry(f"{model}_gradient")
    cases = [_case(f"{model}_gradient", PAPER, seed=s) for s in range(3)]
    batch = {k: np.stack([c.inputs[k] for c in cases]) for k in cases[0].inputs}
    params = _native(entry, cases[0].params, "float64", params=True)
    bi = _native(entry, batch, "float64")
    for name in (f"{model}_loss", f"{model}_gradient"):
        out = _run(name, cases[0], inputs=bi, params=params, batched=True)
        for b in range(3):
            one = _run(name, cases[0], inputs={k: v[b] for k, v in bi.items()}, params=params)
            for k in one:
                assert out[k].shape == (3, *one[k].shape)
                torch.testing.assert_close(out[k][b], one[k], rtol=1e-12, atol=1e-14)


def test_batched_gradient_of_an_empty_batch():
    case = _case("d_gradient")
    entry = _entry("d_gradient")
    x = impl.from_numpy(np.zeros((0, case.hyper["ell"]), np.int64), "int64", "cpu")
    out = _run("d_gradient", case, inputs={"x": x}, batched=True,
               params=_native(entry, case.params, "float64", params=True))
    for k, shape in entry.param_shapes(case.hyper, PAPER).items():
        assert out[f"grad.{k}"].shape == (0, *shape)


def test_one_token_has_zero_loss_and_zero_gradient():
    case = _case("d_gradient")
    x = impl.from_numpy(case.inputs["x"][:1], "int64", "cpu")
    assert float(_run("d_loss", case, inputs={"x": x})["loss"]) == 0.0
    for k, g in _run("d_gradient", case, inputs={"x": x}).items():
        assert not g.any(), k


def test_next_token_loss_is_a_sum_over_columns_predicting_the_next_token():
    """−Σ_{t=0}^{ℓ−2} log P[x[t+1], t] with P from the d_transformer entry (canonical (N_V, ℓ))."""
    case = _case("d_loss")
    P = _run("d_transformer", case)  # d_transformer has the same inputs and params
    x = case.inputs["x"]
    want = -sum(math.log(float(P[x[t + 1], t])) for t in range(len(x) - 1))
    assert float(_run("d_loss", case)["loss"]) == pytest.approx(want, rel=1e-12)


def test_e_loss_counts_positions_already_holding_mask_token():
    """T̃ = {t : x̃[t] = mask_token}, literally: an unmasked mask_token counts."""
    case = _case("e_loss")
    x = case.inputs["x"].copy()
    mask_token = int(case.inputs["mask_token"])
    x[1] = mask_token
    masked = np.zeros_like(case.inputs["masked"])
    masked[3] = True
    x_tilde = np.where(masked, mask_token, x)
    P = _run("e_transformer", case, inputs={"x": impl.from_numpy(x_tilde, "int64", "cpu")})
    selected = [t for t in range(len(x)) if x_tilde[t] == mask_token]
    assert 1 in selected and 3 in selected
    want = -sum(math.log(float(P[x[t], t])) for t in selected)
    inputs = {"x": impl.from_numpy(x, "int64", "cpu"), "masked": impl.from_numpy(masked, "bool", "cpu"),
              "mask_token": impl.from_numpy(np.asarray(mask_token), "int64", "cpu")}
    assert float(_run("e_loss", case, inputs=inputs)["loss"]) == pytest.approx(want, rel=1e-12)
    # nothing masked and no mask_token in x: T̃ is empty
    x[1] = (mask_token + 1) % case.hyper["N_V"]
    x = np.where(x == mask_token, (mask_token + 1) % case.hyper["N_V"], x)
    inputs["x"], inputs["masked"] = impl.from_numpy(x, "int64", "cpu"), impl.from_numpy(0 * masked, "bool", "cpu")
    assert float(_run("e_loss", case, inputs=inputs)["loss"]) == 0.0


# --------------------------------------------------------------------------
# SGD and the training loops
# --------------------------------------------------------------------------


def test_sgd_step_is_theta_minus_eta_gradient():
    case = _case("d_sgd_step")
    grads = _run("d_gradient", case, inputs={"x": impl.from_numpy(case.inputs["x"], "int64", "cpu")})
    out = _run("d_sgd_step", case)
    eta = float(case.inputs["eta"])
    for k, p in case.params.items():
        torch.testing.assert_close(out[f"theta.{k}"], torch.from_numpy(p) - eta * grads[f"grad.{k}"],
                                   rtol=0, atol=0)


def test_training_visits_sequences_in_order_and_ignores_padding():
    """d_training with N = 2, N_epochs = 1 is two SGD steps on the unpadded sequences."""
    case = _case("d_training", N=2, N_epochs=1)
    x, lengths = case.inputs["x"].copy(), np.array([2, 4])
    x[0, 2:] = 5  # padding must not matter (any valid token)
    i = {"x": impl.from_numpy(x, "int64", "cpu"), "x_len": impl.from_numpy(lengths, "int64", "cpu"),
         "eta": impl.from_numpy(case.inputs["eta"], "float64", "cpu")}
    got = _run("d_training", case, inputs=i)
    theta = _native(_entry("d_training"), case.params, "float64", params=True)
    for n in range(2):
        step = _run("d_sgd_step", case, inputs={"x": i["x"][n, : lengths[n]], "eta": i["eta"]}, params=theta,
                    hyper={"ell": int(lengths[n])})
        theta = {k[len("theta."):]: v for k, v in step.items()}
    for k, v in theta.items():
        torch.testing.assert_close(got[f"theta.{k}"], v, rtol=0, atol=0)


def test_e_training_masks_where_u_below_p_mask():
    """One epoch, one sequence: the step of e_sgd_step with masked = u < p_mask."""
    case = _case("e_training", N=1, N_epochs=1)
    i = _native(_entry("e_training"), case.inputs, "float64")
    ell = int(i["x_len"][0])
    got = _run("e_training", case, inputs=i)
    masked = i["u"][0, 0, :ell] < i["p_mask"]
    step = _run("e_sgd_step", case, inputs={"x": i["x"][0, :ell], "masked": masked, "mask_token": i["mask_token"],
                                            "eta": i["eta"]}, hyper={"ell": ell})
    for k in step:
        torch.testing.assert_close(got[k], step[k], rtol=0, atol=0)


# --------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------


def _sample(p, u, tau, dtype="float64"):
    t = lambda a: impl.from_numpy(np.asarray(a, dtype=np.float64), dtype, "cpu")  # noqa: E731
    y = I.sample(t(p), t(u), t(tau))
    assert y.dtype == torch.int64 and y.shape == ()
    return int(y)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_tau_zero_is_argmax_with_ties_to_lowest_id(dtype):
    p = [0.1, 0.3, 0.05, 0.3, 0.25]
    for u in (0.0, 0.5, 0.999):
        assert _sample(p, u, 0.0, dtype) == 1
    assert _sample([0.25] * 4, 0.9, 0.0, dtype) == 0


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_tau_inf_is_floor_u_times_n_v(dtype):
    p = [0.9, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0]  # ignored: uniform over all 7 IDs, zeros included
    for u in (0.0, 0.1, 0.5, 0.7, 0.99):
        u_d = float(impl.to_numpy(impl.from_numpy(np.asarray(u), dtype, "cpu")))  # u as rounded to dtype
        assert _sample(p, u, math.inf, dtype) == math.floor(u_d * 7)
    # the largest variate below 1 in bfloat16 (0.99609375): u·7 = 6.97 rounds to 7.0 in bfloat16 itself
    assert _sample(p, 0.99609375, math.inf, "bfloat16") == 6


def test_inverse_cdf_over_ids_in_increasing_order():
    p = [0.25, 0.25, 0.5]
    assert [_sample(p, u, 1.0) for u in (0.0, 0.2499, 0.25, 0.4999, 0.5, 0.999)] == [0, 0, 1, 1, 2, 2]
    # q ∝ p^{1/τ}: τ = 0.5 squares, [0.04, 0.64] / 0.68 → c_0 = 0.0588…
    assert _sample([0.2, 0.8], 0.058, 0.5) == 0 and _sample([0.2, 0.8], 0.059, 0.5) == 1
    # τ = 2 takes the square root: [0.1, 0.9] → [0.316…, 0.948…] / 1.265 → c_0 = 0.25
    assert _sample([0.1, 0.9], 0.2499, 2.0) == 0 and _sample([0.1, 0.9], 0.2501, 2.0) == 1
    # a zero-probability token is never drawn; an unnormalised p is fine
    for u in np.linspace(0, 0.999, 37):
        assert _sample([0.0, 2.0, 0.0, 2.0, 0.0], u, 0.7) in (1, 3)
    # every c_v ≤ u (u = 1 here, outside the contract): the last token
    assert _sample([0.5, 0.5, 0.0], 1.0, 1.0) == 2


@pytest.mark.parametrize("tau", [0.0, 0.3, 1.0, 2.5, math.inf])
def test_sample_agrees_with_the_spec_on_random_draws(tau):
    """The bundled cases draw one τ for ``sample``; here every regime, 40 draws each,
    some distributions with zeros and ties."""
    rng = np.random.default_rng(7)
    for k in range(40):
        p = rng.random(6)
        p[rng.random(6) < 0.2] = 0.0
        if k % 5 == 0:
            p[2] = p[4] = p.max() + 0.1  # a tie for the maximum
        if not p.any():
            p[0] = 1.0
        u = float(rng.random())
        want = evaluate("sample", {"p": p.tolist(), "u": u, "tau": tau}, {}, hyper={"N_V": 6})["y"]
        assert _sample(p, u, tau) == want, (p, u, tau)


@pytest.mark.parametrize("tau", [0.0, math.inf])
def test_d_inference_limits_agree_with_the_spec(tau):
    case = _case("d_inference")
    case.inputs["tau"] = np.asarray(tau)
    want = evaluate("d_inference", case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=PAPER)["y"]
    assert _run("d_inference", case)["y"].tolist() == list(want)


def test_sample_refuses_negative_or_nan_tau():
    with pytest.raises(ValueError, match="tau"):
        _sample([0.5, 0.5], 0.3, -1.0)
    with pytest.raises(ValueError, match="tau"):
        _sample([0.5, 0.5], 0.3, math.nan)


def test_sample_is_vectorised_over_leading_axes():
    p = torch.tensor([[0.25, 0.25, 0.5], [0.5, 0.5, 0.0]], dtype=torch.float64)
    u = torch.tensor([0.3, 0.7], dtype=torch.float64)
    assert I.sample(p, u, torch.tensor(1.0, dtype=torch.float64)).tolist() == [1, 1]


# --------------------------------------------------------------------------
# inference
# --------------------------------------------------------------------------


def test_d_inference_is_a_sampling_loop_over_the_last_column():
    case = _case("d_inference", PAPER.replace(logit_bias=True))
    i = _native(_entry("d_inference"), case.inputs, "float64")
    i["tau"] = torch.tensor(1.0, dtype=torch.float64)
    y = _run("d_inference", case, inputs=i)
    assert y["y"].dtype == torch.int64 and y["y"].shape == (case.hyper["ell_gen"],)
    seq = i["x"]
    for k in range(case.hyper["ell_gen"]):
        P = _run("d_transformer", case, inputs={"x": seq}, hyper={"ell": len(seq)})
        want = I.sample(P[:, -1], i["u"][k], i["tau"])
        assert int(y["y"][k]) == int(want)
        seq = torch.cat([seq, want.reshape(1)])


def test_d_inference_refuses_a_prompt_that_leaves_no_room():
    case = _case("d_inference")
    with pytest.raises(ValueError, match="ell_max"):
        _run("d_inference", case, hyper={"ell_gen": case.hyper["ell_max"]})


def _ed_inference(case, favourite, tau=0.0):
    """Run ed_inference with b_u pushing every step towards ``favourite``."""
    entry = _entry("ed_inference")
    i = _native(entry, case.inputs, "float64")
    p = _native(entry, case.params, "float64", params=True)
    p["b_u"] = torch.zeros_like(p["b_u"])
    p["b_u"][favourite] = 100.0
    i["tau"] = torch.tensor(tau, dtype=torch.float64)
    return i, _run("ed_inference", case, inputs=i, params=p)


def test_ed_inference_stops_at_eos_and_pads():
    case = _case("ed_inference", PAPER.replace(logit_bias=True))
    ell_max = case.hyper["ell_max"]
    i, out = _ed_inference(case, favourite=int(case.inputs["eos_token"]))
    bos, eos = int(i["bos_token"]), int(i["eos_token"])
    assert out["x_hat"].dtype == torch.int64 and out["x_hat"].shape == (ell_max,)
    assert out["length"].dtype == torch.int64 and out["length"].shape == ()
    assert out["eos"].dtype == torch.bool and out["eos"].shape == ()
    assert out["x_hat"].tolist() == [bos, eos] + [-1] * (ell_max - 2)
    assert int(out["length"]) == 2 and bool(out["eos"])


def test_ed_inference_stops_at_ell_max_without_eos():
    case = _case("ed_inference", PAPER.replace(logit_bias=True))
    ell_max, eos = case.hyper["ell_max"], int(case.inputs["eos_token"])
    other = (eos + 1) % case.hyper["N_V"]
    i, out = _ed_inference(case, favourite=other, tau=1.0)
    assert out["x_hat"].tolist() == [int(i["bos_token"])] + [other] * (ell_max - 1)
    assert int(out["length"]) == ell_max and not bool(out["eos"])


def test_ed_inference_eos_equal_to_bos_still_samples():
    """x̂ starts as [bos]; only a *sampled* eos stops (bos = eos is not a stop)."""
    case = _case("ed_inference", PAPER.replace(logit_bias=True))
    case.inputs["eos_token"] = case.inputs["bos_token"].copy()
    i, out = _ed_inference(case, favourite=int(case.inputs["bos_token"]))
    assert out["x_hat"].tolist()[:2] == [int(i["bos_token"])] * 2 and int(out["length"]) == 2
    assert bool(out["eos"])
