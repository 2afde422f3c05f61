"""The spec's gradient (reverse mode over its own arithmetic) against central
finite differences computed in mpmath.

For small models of each architecture and every value of every variant
switch, the gradient of each parameter tensor is checked along a random
direction of that tensor: (loss(θ + hV) − loss(θ − hV)) / 2h with h = 1e-20
at 50 digits has truncation error O(h²) ≈ 1e-40 and rounding error ≈
10^-50 / h = 1e-30, so it is the true directional derivative to ~25 digits
absolute. The spec's gradient is computed in mpmath too (GradNumbers over
MpNumbers), so the two must agree to 1e-18 relative, or 1e-26 absolute for
derivatives so small that the differences' rounding noise matters.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import math

import pytest

from ftspec.spec import PAPER, PRESETS, SWITCHES, MpNumbers, SpecError, VariantSet, evaluate
from ftspec.spec import numbers as numbers_mod
from ftspec.spec.registry import entry
from ftspec.spec.training import loss_and_gradient
from ftspec.spec.evaluation import _convert
from ftspec.spec.entry import ARCHITECTURE, implied_multiples

SIZES = dict(N_V=4, d_e=3, d_f=3, ell=3, ell_x=3, ell_z=2, ell_max=4, H=2, d_attn=2, d_mid=2, d_mlp=3,
             L=1, L_enc=1, L_dec=1)
MODELS = ("ed", "e", "d")


def _variants() -> list[VariantSet]:
    out = [PAPER, *[v for v in PRESETS.values() if v != PAPER]]
    for name in sorted(ARCHITECTURE):
        sw = SWITCHES[name]
        if name in ("epsilon", "rope_base", "kv_order", "rope_scaling"):  # read only with another switch: below
            continue
        if name == "epsilon_placement":
            out += [PAPER.replace(epsilon=1e-3, epsilon_placement=p) for p in ("inside_root", "outside_root")]
            continue
        # kv_group 8 takes the path of 2-4 at 8 heads (7 CPU-seconds): the smaller groups stand for it
        out += [PAPER.replace(**{name: c}) for c in sw.choices if c != sw.paper and (name, c) != ("kv_group", 8)]
    out += [PAPER.replace(rotary="interleaved", rope_base=500000.0), PAPER.replace(kv_group=2, kv_order="strided"),
            # scaled RoPE: at d_attn 2 (one pair, θ_0 = 1) llama3 keeps θ_0, linear scaling halves it
            PAPER.replace(rotary="half", rope_scaling="linear-2")]
    return out


VARIANTS = _variants()


def _rand(rng: random.Random, shape: tuple, scale: float) -> Any:
    if not shape:
        return rng.uniform(-scale, scale)
    return [_rand(rng, shape[1:], scale) for _ in range(shape[0])]


def _data(model: str, rng: random.Random) -> tuple:
    x = [rng.randrange(SIZES["N_V"]) for _ in range(SIZES["ell" if model != "ed" else "ell_x"])]
    if model == "ed":
        return ([rng.randrange(SIZES["N_V"]) for _ in range(SIZES["ell_z"])], x)
    if model == "e":
        return (x, [True, False, True], x[0])  # mask_token occurs in x: the literal T̃
    return (x,)


def _case(model: str, variant: VariantSet, seed: int):
    """A small model and example that the spec accepts (the next seed when it refuses one, e.g. an
    all-zero ReLU column before an ε-free layer norm)."""
    e = entry(f"{model}_loss")
    hyper = {k: SIZES[k] for k in e.hyper}
    for k, m in implied_multiples(e, variant).items():  # RoPE's even d_attn, GQA's H = multiple of G
        hyper[k] = math.lcm(hyper[k], m)
    for attempt in range(50):
        rng = random.Random(seed + 7919 * attempt)
        params = {}
        for name, shape in e.param_shapes(hyper, variant).items():
            leaf = name.rsplit(".", 1)[-1]
            params[name] = (_rand(rng, shape, 0.3) if not leaf.startswith("gamma")
                            else [1 + rng.uniform(-0.3, 0.3) for _ in range(shape[0])])
        data = _data(model, rng)
        try:
            evaluate(e.name, dict(zip([s.name for s in e.inputs], data)), params, hyper=hyper, variant=variant)
        except SpecError:
            continue
        return e, hyper, params, data
    raise AssertionError(f"no accepted case for {model} under {variant.describe()}")


def _axpy(a: Any, x: Any, y: Any) -> Any:
    if isinstance(x, list):
        return [_axpy(a, xi, yi) for xi, yi in zip(x, y)]
    return y + a * x


def _dot(x: Any, y: Any, N: Any) -> Any:
    if isinstance(x, list):
        return N.fsum([_dot(xi, yi, N) for xi, yi in zip(x, y)])
    return x * y


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.describe())
def test_gradient_matches_mp_central_differences(model, variant):
    e, hyper, params, data = _case(model, variant, seed=zlib.crc32(f"{model}{variant.hash}".encode()))
    mp = MpNumbers(50)
    theta = {k: _convert(v, mp) for k, v in params.items()}
    with numbers_mod.using(mp):
        _, grads = loss_and_gradient(model, data, theta, ell_max=hyper["ell_max"], variant=variant)
    rng = random.Random(7)
    h = mp.const("1e-20")

    def loss(th: dict) -> Any:
        with numbers_mod.using(mp):
            return e.reference({**dict(zip([s.name for s in e.inputs], data))}, th, hyper, variant)["loss"]

    # one random direction through every parameter at once: two loss evaluations instead of two per
    # parameter (the test was ~100 CPU-seconds of make test). A wrong ∂loss/∂θ_i moves the directional
    # derivative by its error times a random coefficient (zero with probability 0), and the bound below
    # is 1e-18 of it where a 50-digit central difference is good to ~1e-30: no real error hides. On a
    # failure each parameter is checked alone, so that the message names it.
    directions = {name: _convert(_rand(rng, _shape(theta[name]), 1.0), mp) for name in theta}
    assert set(directions) == set(e.param_shapes(hyper, variant)) == set(grads)

    def departure(names: list[str]) -> tuple[Any, Any, bool]:
        plus = dict(theta, **{n: _axpy(h, directions[n], theta[n]) for n in names})
        minus = dict(theta, **{n: _axpy(-h, directions[n], theta[n]) for n in names})
        fd = (loss(plus) - loss(minus)) / (2 * h)
        with numbers_mod.using(mp):
            analytic = mp.fsum([_dot(grads[n], directions[n], mp) for n in names])
        return analytic, fd, abs(analytic - fd) <= mp.const("1e-18") * abs(fd) + mp.const("1e-26")

    if departure(list(theta))[2]:
        return
    wrong = {n: departure([n]) for n in theta}
    named = [f"∂loss/∂{n} along a random direction is {a}, central differences give {fd}"
             for n, (a, fd, ok) in wrong.items() if not ok]
    raise AssertionError(f"{model} under {variant.describe()}: " + ("; ".join(named) or
                         "every parameter alone agrees, all together do not"))


def _shape(x: Any) -> tuple:
    return (len(x),) + _shape(x[0]) if isinstance(x, list) else ()


@pytest.mark.parametrize("model", MODELS)
def test_unreachable_parameters_have_exactly_zero_gradient(model):
    """W_e columns of tokens absent from the example (W_u separate) and W_p columns past the sequence."""
    e, hyper, params, data = _case(model, PAPER, seed=3)
    _, grads = loss_and_gradient(model, data, params, ell_max=hyper["ell_max"], variant=PAPER)
    present = {t for seq in data if isinstance(seq, list) for t in seq} | {t for t in data if isinstance(t, int)}
    for v in range(SIZES["N_V"]):
        column = [row[v] for row in grads["W_e"]]
        if v not in present:
            assert all(g == 0.0 for g in column), f"W_e column {v} is unreachable but has gradient {column}"
    longest = max(len(seq) for seq in data if isinstance(seq, list))
    for t in range(longest, SIZES["ell_max"]):
        assert all(row[t] == 0.0 for row in grads["W_p"])


def test_a_single_token_sequence_has_zero_loss_and_gradient():
    e, hyper, params, _ = _case("d", PAPER, seed=5)
    loss, grads = loss_and_gradient("d", ([2],), params, ell_max=hyper["ell_max"], variant=PAPER)
    assert loss == 0.0
    assert all(g == 0.0 for tensor in grads.values() for g in _flatten(tensor))


def _flatten(x: Any) -> list:
    return [z for y in x for z in _flatten(y)] if isinstance(x, list) else [x]


@pytest.mark.parametrize("norm_kind, variance", [("layer_norm", "unbiased"), ("layer_norm", "biased"),
                                                 ("rms_norm", "biased")])
def test_constant_column_with_epsilon_outside_the_root_has_a_finite_gradient(norm_kind, variance):
    """σ = √v + ε at a column with v = 0 (a ReLU that zeroes a whole column, as in seed 004's
    preset): the norm is differentiable there, ∂[(e − m)/(√v + ε)] = (I − 11ᵀ/d)/ε (for RMSnorm
    I/ε), because the √ term is multiplied by e − m = 0; √'s slope ∞ at 0 must not turn it into
    NaN. Checked against that formula along the gradient of Σ_i w_i ê_i."""
    from ftspec.spec import layer_norm, rms_norm
    from ftspec.spec.autodiff import gradient

    d, eps = 4, 1e-4
    w = [0.5, -1.25, 2.0, 0.75]
    variant = PAPER.replace(epsilon=eps, epsilon_placement="outside_root", variance=variance, affine="none")
    c = 0.0 if norm_kind == "rms_norm" else 0.375  # RMSnorm's "variance" is 0 only at 0

    def weighted(p: dict) -> Any:
        out = (layer_norm(p["e"], None, None, variant=variant) if norm_kind == "layer_norm"
               else rms_norm(p["e"], None, variant=variant))
        return sum((wi * oi for wi, oi in zip(w[1:], out[1:])), w[0] * out[0])

    _, grad = gradient(weighted, {"e": [c] * d})
    mean_w = sum(w) / d if norm_kind == "layer_norm" else 0.0
    want = [(wi - mean_w) / eps for wi in w]
    assert all(abs(g - x) <= 1e-9 * abs(x) for g, x in zip(grad["e"], want)), (grad["e"], want)
