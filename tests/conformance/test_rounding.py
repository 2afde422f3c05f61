"""Monte Carlo arithmetic (conformance/rounding.py), the source of every tolerance.

Three claims the tolerance model rests on:

- lane 0 is the binary64 computation, bit for bit: the perturbations never
  leak into it. "Binary64" here means the same operations in the same
  order, each rounded once by IEEE binary64 (sums left to right, the same
  library functions); the spec's own ``FloatNumbers`` rounds a whole sum
  once (``math.fsum``), so it may differ from lane 0 in the last bits of a
  sum, which is why lane 0 is compared with a left-to-right system below;
- the spread of the other lanes is proportional to the unit roundoff u
  (to first order: δ enters linearly), and for one operation
  lies between u/2 and u of the result (32 uniform draws in [−u, u]);
- a seed fixes every lane; another seed moves the lanes but not lane 0.
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np
import pytest

from ftspec.conformance.rounding import MonteCarloNumbers, lanes_array
from ftspec.conformance.tolerances import reference
from ftspec.spec import PAPER, evaluate
from ftspec.spec.numbers import FloatNumbers
from ftspec.spec.registry import REGISTRY

from tests.impls.cases import make_case

K = 32


class LeftToRight(FloatNumbers):
    """Binary64 with sums and dot products accumulated left to right, and NumPy's
    library functions evaluated on a vector of K + 1 copies (as the lanes are)."""

    name = "float-left-to-right"

    def fsum(self, xs):
        items = list(xs)
        return functools.reduce(operator.add, items) if items else 0.0

    def dot(self, xs, ys):
        return self.fsum([x * y for x, y in zip(xs, ys, strict=True)])

    def _np(self, f, *args):
        with np.errstate(all="ignore"):
            return float(f(*(np.full(K + 1, float(a)) for a in args))[0])

    def exp(self, x):
        return self._np(np.exp, x)

    def log(self, x):
        return self._np(np.log, x)

    def sqrt(self, x):
        return self._np(np.sqrt, x)

    def tanh(self, x):
        return self._np(np.tanh, x)

    def sin(self, x):
        return self._np(np.sin, x)

    def cos(self, x):
        return self._np(np.cos, x)

    def pow(self, base, exponent):
        return self._np(np.power, base, exponent)


def _mc(u: float = 2.0**-24, seed: int = 0, eta: float = 0.0) -> MonteCarloNumbers:
    return MonteCarloNumbers(u=u, eta=eta, lanes=K, seed=seed)


def _lanes(name: str, case, numbers) -> dict[str, np.ndarray]:
    with np.errstate(all="ignore"):  # masked scores are −inf in every lane, as in tolerances.reference
        out = evaluate(name, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=case.variant,
                       numbers=numbers)
    return {k: lanes_array(v, K) for k, v in out.items()}


# Forward entries that reach every operation of the model: products and sums, exp/log (softmax,
# the loss), sqrt and division (layer norm), erf (GELU), sin/cos/pow (sinusoids), masks (−inf).
LANE0_ENTRIES = ["attention", "layer_norm", "gpt2_layer", "sinusoidal_vaswani", "d_loss", "d_gradient"]


@pytest.mark.parametrize("name", LANE0_ENTRIES)
def test_lane_zero_is_the_binary64_computation_bit_for_bit(name):
    entry = REGISTRY[name]
    case = make_case(entry, PAPER)
    want = evaluate(name, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=PAPER,
                    numbers=LeftToRight())
    for u in (2.0**-24, 2.0**-11):  # float32's and float16's unit roundoff
        got = _lanes(name, case, MonteCarloNumbers(u=u, eta=2.0**-126, lanes=K, seed=5))
        for out, lanes in got.items():
            w = np.asarray(want[out], dtype=np.float64)
            assert lanes.shape == w.shape + (K + 1,), f"{name} {out}: lanes {lanes.shape}, want {w.shape}"
            same = (lanes[..., 0] == w) | (np.isnan(lanes[..., 0]) & np.isnan(w))
            assert same.all(), (f"{name} output {out} at u={u:g}: lane 0 differs from binary64 at "
                                f"{np.argwhere(~same)[0].tolist()}: {lanes[..., 0][~same][0]!r} vs {w[~same][0]!r}")
            assert np.array_equal(np.signbit(lanes[..., 0]), np.signbit(w)), f"{name} {out}: sign of a zero"
            # and the perturbed lanes did move: the test is not passing on a system that ignores u
            if np.isfinite(w).any() and not (w == 0).all():
                assert (lanes[..., 1:] != lanes[..., :1]).any(), f"{name} {out}: no lane was perturbed"


def test_lane_zero_is_close_to_the_specs_correctly_rounded_sums():
    """Lane 0 and the spec's binary64 (math.fsum) differ only by the rounding of sums."""
    case = make_case(REGISTRY["gpt2_layer"], PAPER)
    spec = np.asarray(evaluate("gpt2_layer", case.spec_inputs(), case.spec_params(), hyper=case.hyper)["X"])
    lane0 = _lanes("gpt2_layer", case, _mc())["X"][..., 0]
    np.testing.assert_allclose(lane0, spec, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv"])
def test_one_operation_spreads_between_half_u_and_u_of_its_result(op):
    rng = np.random.default_rng(1)
    for u in (2.0**-53, 2.0**-24, 2.0**-8):
        ns = _mc(u=u, seed=2)
        for _ in range(20):
            x, y = rng.normal(size=2)
            r = getattr(operator, op)(ns.num(x), ns.num(y))
            exact = getattr(operator, op)(x, y)
            assert r.x[0] == exact, f"{op}: lane 0 {r.x[0]!r} is not the binary64 result {exact!r}"
            dev = np.abs(r.x[1:] - r.x[0])
            # lanes carry (x op y)(1 + δ), |δ| ≤ u, evaluated in binary64: allow its own rounding
            assert dev.max() <= u * abs(exact) * (1 + 1e-6) + 4 * math.ulp(exact), f"{op} at u={u:g}"
            assert dev.max() >= 0.5 * u * abs(exact), f"{op} at u={u:g}: spread {dev.max():.3g} below u/2"


@pytest.mark.parametrize("name", ["layer_norm", "attention", "mh_attention"])
def test_spread_is_proportional_to_the_unit_roundoff(name):
    """Same seed, u and u/2^10: the model is first order in δ, so every deviation shrinks by 2^10
    (no ReLU here, so no lane takes another branch)."""
    case = make_case(REGISTRY[name], PAPER)
    u32 = 2.0**-24
    coarse = _lanes(name, case, _mc(u=u32, seed=3))
    fine = _lanes(name, case, _mc(u=u32 * 2.0**-10, seed=3))
    for out in coarse:
        dc = coarse[out][..., 1:] - coarse[out][..., :1]
        df = fine[out][..., 1:] - fine[out][..., :1]
        assert np.abs(dc).max() > 0, f"{name} {out}: no spread at float32's u"
        moved = np.abs(dc) > 1e-3 * np.abs(dc).max()
        ratio = df[moved] / dc[moved]
        # second-order terms are O(u) relative, binary64's own rounding 2^-19 of a deviation
        np.testing.assert_allclose(ratio, 2.0**-10, rtol=1e-2, err_msg=f"{name} {out}")


def test_spread_at_float32_is_within_a_few_u_of_a_well_conditioned_output():
    case = make_case(REGISTRY["layer_norm"], PAPER)
    lanes = _lanes("layer_norm", case, _mc(u=2.0**-24, seed=4))["X_hat"]
    spread = np.abs(lanes[..., 1:] - lanes[..., :1]).max(axis=-1)
    scale = np.abs(lanes[..., 0]).max()
    assert 0 < spread.max() <= 200 * 2.0**-24 * scale
    assert spread.max() >= 0.5 * 2.0**-24 * scale


def test_a_seed_fixes_every_lane_and_another_seed_moves_only_the_perturbed_ones():
    case = make_case(REGISTRY["attention"], PAPER)
    a = _lanes("attention", case, _mc(seed=11))["V_tilde"]
    b = _lanes("attention", case, _mc(seed=11))["V_tilde"]
    c = _lanes("attention", case, _mc(seed=12))["V_tilde"]
    assert np.array_equal(a, b)
    assert np.array_equal(a[..., 0], c[..., 0])
    assert not np.array_equal(a[..., 1:], c[..., 1:])


def test_the_tolerance_of_a_case_is_reproducible():
    """``reference`` seeds its arithmetic from the case itself: two calls give the same bounds to the
    bit, and a different input gives other ones."""
    entry = REGISTRY["layer_norm"]
    case = make_case(entry, PAPER)
    x32 = {k: v.astype(np.float32).astype(np.float64) for k, v in case.inputs.items()}
    p32 = {k: v.astype(np.float32).astype(np.float64) for k, v in case.params.items()}
    one = reference(entry, x32, p32, hyper=case.hyper, variant=PAPER, dtype="float32")
    two = reference(entry, x32, p32, hyper=case.hyper, variant=PAPER, dtype="float32")
    assert np.array_equal(one.bound["X_hat"], two.bound["X_hat"]) and one.bound["X_hat"].max() > 0
    other = dict(x32, X=x32["X"] * 2.0)  # exact in float32: another case, so another seed
    three = reference(entry, other, p32, hyper=case.hyper, variant=PAPER, dtype="float32")
    assert not np.array_equal(one.bound["X_hat"], three.bound["X_hat"])
