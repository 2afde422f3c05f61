"""Monte Carlo arithmetic (conformance/core/rounding.py), the source of every tolerance.

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
- a seed fixes every lane; another seed moves the lanes but not lane 0;
- the whole-matrix hooks (matmul, map_matrix, map_columns, softmax) are the
  same model as the scalar evaluation they replace: lane 0 unchanged, each
  entry of a batch drawing its own perturbations, the spreads equal within
  the sampling noise, and branches and errors exactly the scalar ones.
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np
import pytest

from ftspec.conformance.core import portable_math as pm
from ftspec.conformance.core.rounding import MonteCarloNumbers, lanes_array
from ftspec.conformance.core.tolerances import reference
from ftspec.spec import PAPER, evaluate
from ftspec.spec.errors import SpecError
from ftspec.spec.functions import apply, softmax
from ftspec.spec.linalg import map_columns, map_matrix, matmul
from ftspec.spec.normalization import layer_norm, norm_columns
from ftspec.spec.autodiff import gradient
from ftspec.spec.numbers import FloatNumbers, current, using
from ftspec.spec.registry import REGISTRY

from tests.impls.cases import make_case

K = 32


class LeftToRight(FloatNumbers):
    """Binary64 with sums and dot products accumulated left to right, and the lanes' library
    functions (conformance/core/portable_math.py; sqrt is NumPy's, correctly rounded) evaluated on a
    vector of K + 1 copies (as the lanes are)."""

    name = "float-left-to-right"

    def fsum(self, xs):
        items = list(xs)
        return functools.reduce(operator.add, items) if items else 0.0

    def dot(self, xs, ys):
        return self.fsum([x * y for x, y in zip(xs, ys, strict=True)])

    def centres(self, e, m, line):
        """Every centre is m, as in the spec, but through the hook: the same graph as the
        lanes' (the backward pass of a gradient sums its adjoints in the graph's order)."""
        return [m] * len(e)

    def _np(self, f, *args):
        with np.errstate(all="ignore"):
            return float(f(*(np.full(K + 1, float(a)) for a in args))[0])

    def exp(self, x):
        return self._np(pm.exp, x)

    def log(self, x):
        return self._np(pm.log, x)

    def sqrt(self, x):
        return self._np(np.sqrt, x)

    def tanh(self, x):
        return self._np(pm.tanh, x)

    def erf(self, x):
        return self._np(pm.erf, x)

    def sin(self, x):
        return self._np(pm.sin, x)

    def cos(self, x):
        return self._np(pm.cos, x)

    def pow(self, base, exponent):
        return self._np(pm.pow, base, exponent)


def _mc(u: float = 2.0**-24, seed: int = 0, eta: float = 0.0, batched: bool = True) -> MonteCarloNumbers:
    return MonteCarloNumbers(u=u, eta=eta, lanes=K, seed=seed, batched=batched)


def _lanes(name: str, case, numbers) -> dict[str, np.ndarray]:
    with np.errstate(all="ignore"):  # masked scores are −inf in every lane, as in tolerances.reference
        out = evaluate(name, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=case.variant,
                       numbers=numbers)
    return {k: lanes_array(v, K) for k, v in out.items()}


# Forward entries that reach every operation of the model: products and sums, exp/log (softmax,
# the loss), sqrt and division (layer norm), erf (GELU), sin/cos/pow (sinusoids), masks (−inf).
LANE0_ENTRIES = ["attention", "layer_norm", "gpt2_layer", "sinusoidal_vaswani", "d_loss", "d_gradient"]


@pytest.mark.parametrize("batched", [True, False], ids=["hooks", "scalar"])
@pytest.mark.parametrize("name", LANE0_ENTRIES)
def test_lane_zero_is_the_binary64_computation_bit_for_bit(name, batched):
    entry = REGISTRY[name]
    case = make_case(entry, PAPER)
    want = evaluate(name, case.spec_inputs(), case.spec_params(), hyper=case.hyper, variant=PAPER,
                    numbers=LeftToRight())
    for u in (2.0**-24, 2.0**-11):  # float32's and float16's unit roundoff
        got = _lanes(name, case, MonteCarloNumbers(u=u, eta=2.0**-126, lanes=K, seed=5, batched=batched))
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


# -- the whole-matrix hooks --------------------------------------------------------------------------

# Entries through every hook: attention (matmul, softmax, biases), layer norm (map_columns), GPT-2's
# layer (GELU tanh through map_matrix, residual sums), BERT's (GELU erf, post-LN), a decoder-only
# transformer (embedding sums, a final norm, the output softmax), its gradient (reverse mode: the
# products of matrices through the base, the backward pass by levels).
HOOK_ENTRIES = ["mh_attention", "layer_norm", "gpt2_layer", "bert_layer", "d_transformer", "d_gradient"]


def _rms_deviation(name, case, batched, seeds):
    """Per output element: the root mean square of lane − lane 0 over K lanes and ``seeds``."""
    devs = []
    for seed in seeds:
        lanes = _lanes(name, case, _mc(seed=seed, batched=batched))
        devs.append(np.concatenate([(v[..., 1:] - v[..., :1]).reshape(-1, K) for v in lanes.values()]))
    d = np.concatenate(devs, axis=1)
    return np.sqrt(np.mean(d * d, axis=1))


@pytest.mark.parametrize("name", HOOK_ENTRIES)
def test_the_hooks_give_the_scalar_evaluations_spread(name):
    """Same model, other random stream: each element's rounding error has the same size with and
    without the hooks, through whole entries. Per element the RMS over 6 × 32 lanes has ~5% sampling
    noise, and these cases have 9 to 28 elements; the unit test below has the finer resolution."""
    case = make_case(REGISTRY[name], PAPER)
    hooks = _rms_deviation(name, case, True, range(6))
    scalar = _rms_deviation(name, case, False, range(100, 106))
    moved = scalar > 0
    assert moved.sum() >= 8, f"{name}: only {moved.sum()} elements carry a rounding error"
    assert np.array_equal(hooks > 0, moved), f"{name}: the hooks perturb other elements than the scalar evaluation"
    ratio = hooks[moved] / scalar[moved]
    geo = float(np.exp(np.mean(np.log(ratio))))
    lo, hi = np.quantile(ratio, [0.05, 0.95])
    assert 0.9 <= geo <= 1.11, f"{name}: spread with hooks / without = {geo:.3f} (geometric mean)"
    assert 0.7 <= lo and hi <= 1.4, f"{name}: 5-95% of the per-element ratios in [{lo:.2f}, {hi:.2f}]"


_R = np.random.default_rng(3)
_X, _A = _R.normal(size=(5, 4)).tolist(), _R.normal(size=(3, 5)).tolist()
# one call of each hook on a small input; masked entries of the softmax are −inf
HOOKS = {
    "matmul": lambda N: matmul([[N.num(v) for v in row] for row in _A], [[N.num(v) for v in row] for row in _X]),
    "softmax": lambda N: [softmax([N.num(v) for v in [0.3, -1.2, 2.0, -N.inf.x[0], 0.7, 1.9]])],
    "map_matrix": lambda N: apply("gelu_tanh", [[N.num(v) for v in row] for row in _X]),
    "map_columns": lambda N: norm_columns([[N.num(v) for v in row] for row in _X], [N.num(1.5)] * 5,
                                          [N.num(-0.25)] * 5),
    # every column's softmax at once (attention's line 6), one entry masked
    "softmax_columns": lambda N: map_columns(softmax, [[N.num(v) for v in row] for row in _X[:4]] +
                                             [[N.num(v) for v in _X[4][:2]] + [-N.inf, N.num(0.5)]]),
    # a gradient's backward pass: products with Lanes and ±1 slopes, adjoints of one and of many terms
    "adjoints": lambda N: list(gradient(_gradient_me, {"a": _X[0], "b": _X[1]}, base=N)[1].values()),
}


def _gradient_me(p):
    """Σ_i a_i b_i a_{i+1} − Σ_i (a_i − b_i)²: several paths into every parameter."""
    a, b = p["a"], p["b"]
    n = len(a)
    ring = current().fsum([a[i] * b[i] * a[(i + 1) % n] for i in range(n)])
    return ring - current().fsum([(a[i] - b[i]) * (a[i] - b[i]) for i in range(n)])


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_each_hook_is_the_scalar_model(hook):
    """One hook against the scalar evaluation over 48 seeds each: lane 0 identical to the bit, and
    per element the RMS rounding error (1,536 lanes, ~3% sampling noise; their geometric mean over the
    elements, under 1%) equal. Rounding the softmax's exp with u instead of 2 u, or sharing one draw
    among a batch, moves these ratios by 20% or more; leaving the batched softmax's division unrounded
    moves their mean by 5%, an adjoint sum unrounded by more."""
    rms, lane0 = {}, {}
    for batched in (True, False):
        devs = []
        for seed in range(48):
            ns = _mc(seed=seed + (0 if batched else 1000), batched=batched)
            with using(ns), np.errstate(all="ignore"):
                out = lanes_array(HOOKS[hook](ns), K)
            lane0.setdefault(batched, out[..., 0])
            assert np.array_equal(out[..., 0], lane0[batched])
            devs.append((out[..., 1:] - out[..., :1]).reshape(-1, K))
        d = np.nan_to_num(np.concatenate(devs, axis=1))  # masked −inf − (−inf): no error
        rms[batched] = np.sqrt(np.mean(d * d, axis=1))
    assert np.array_equal(lane0[True], lane0[False]), f"{hook}: lane 0 differs with the hook"
    moved = rms[False] > 0
    assert moved.sum() >= 4 and np.array_equal(rms[True] > 0, moved)
    ratio = rms[True][moved] / rms[False][moved]
    assert 0.97 <= float(np.exp(np.mean(np.log(ratio)))) <= 1.03, f"{hook}: RMS ratios {np.round(ratio, 3)}"
    assert ratio.min() >= 0.85 and ratio.max() <= 1.18, f"{hook}: RMS ratios {np.round(ratio, 3)}"


def test_each_entry_of_a_batch_draws_its_own_perturbations():
    """A value computed from constants inside f (GELU's √2) is rounded once per entry, as the
    scalar evaluation does, not once for the whole matrix: equal inputs give independent lanes."""
    ns = _mc(seed=7)
    with using(ns):
        out = map_matrix(lambda a: a * ns.sqrt(ns.num(2)), [[ns.num(1.0)] * 4 for _ in range(3)])
    lanes = np.array([[x.x for x in row] for row in out]).reshape(12, K + 1)
    assert (lanes[:, 0] == math.sqrt(2)).all()
    dev = lanes[:, 1:] - lanes[:, :1]
    assert len({tuple(d) for d in dev}) == 12, "entries of one batch share their perturbations"
    corr = np.corrcoef(dev)[np.triu_indices(12, 1)]
    assert np.abs(corr).max() < 0.8, "entries of one batch are correlated"


def test_a_batch_whose_branches_differ_is_evaluated_entry_by_entry():
    """A comparison that goes one way for some columns and the other way for others cannot run as
    one batch: the hook falls back and each column takes its own branch, as in the scalar system."""
    def f(col):
        N = ns
        return [x * N.num(2) if col[0] > 0 else x - N.num(1) for x in col]

    X = [[1.0, -1.0, 2.0], [3.0, 4.0, -5.0]]
    want = [[2.0, -2.0, 4.0], [6.0, 3.0, -10.0]]
    for batched in (True, False):
        ns = _mc(seed=1, batched=batched)
        with using(ns):
            out = map_columns(f, [[ns.num(v) for v in row] for row in X])
        assert [[float(x) for x in row] for row in out] == want, f"batched={batched}"


def test_a_column_the_spec_refuses_is_refused_as_the_scalar_evaluation_refuses_it():
    """A zero-variance column (no ε) inside a batch: the same SpecError as column by column."""
    X = [[1.0, 2.0, 5.0], [1.0, 3.0, 5.0]]  # columns 0 and 2 have zero variance
    messages = []
    for batched in (True, False):
        ns = _mc(seed=2, batched=batched)
        with using(ns), pytest.raises(SpecError) as err:
            map_columns(lambda e: layer_norm(e, None, None, variant=PAPER.replace(affine="none")),
                        [[ns.num(v) for v in row] for row in X])
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "variance" in messages[0]


@pytest.mark.parametrize("name", ["gpt2_layer", "d_transformer"])
def test_a_seed_fixes_every_lane_of_a_batched_evaluation(name):
    case = make_case(REGISTRY[name], PAPER)
    a, b = _lanes(name, case, _mc(seed=21)), _lanes(name, case, _mc(seed=21))
    assert all(np.array_equal(a[k], b[k]) for k in a)


# -- SiLU's two forms, chosen per value (spec/numbers.py ``by_sign``) --------------------------------

def test_silu_takes_its_form_per_value_in_a_batch_and_a_block():
    """A batch of mixed signs runs as one batch (no entry-by-entry fallback, which made every SiLU
    block of a search split into value sets evaluated alone), lane 0 is FLOAT's SiLU bit for bit,
    and the form not taken never reaches the range check: exp(−x) of x = −100 overflows float16
    and float32, where the negative form's values stay below 1."""
    xs = [[-100.0, -1.5, 0.0, 2.0], [3.0, -0.25, 7.5, -40.0]]
    ns = MonteCarloNumbers(u=2.0**-11, eta=2.0**-25, lanes=K, seed=5)
    calls = []
    with using(ns), np.errstate(all="ignore"):
        original = ns._in_batch

        def counted(size, run):
            out = original(size, run)
            calls.append(out is not None)
            return out
        ns._in_batch = counted
        out = apply("silu", [[ns.num(v) for v in row] for row in xs])
    assert calls == [True], "the SiLU batch fell back to entry-by-entry evaluation"
    got = np.array([[x.x[0] for x in row] for row in out])
    want = np.array([[FloatNumbers().to_float(_silu_float(v)) for v in row] for row in xs])
    assert np.array_equal(got, want)
    assert ns.max_abs <= 40.0, f"an unselected form reached the range check: max |value| {ns.max_abs}"
    dev = np.array([[np.abs(x.x[1:] - x.x[0]).max() for x in row] for row in out])
    assert (dev[np.array(xs) != 0] > 0).all(), "a rounded SiLU output has no spread"


def _silu_float(v):
    from ftspec.spec.functions import silu
    with using(FloatNumbers()):
        return silu(v)


def test_a_block_of_silu_value_sets_shares_one_evaluation():
    """Value sets whose SiLU inputs differ in sign share one Monte Carlo evaluation
    (``tolerances.references``), and each gets the lane F values of its own FLOAT evaluation."""
    from ftspec.conformance.core import tolerances as T
    from ftspec.conformance.core.blocks import value_sets
    from ftspec.conformance.core.case import Case
    from ftspec.spec.variants import PAPER as P

    variant = P.replace(activation="silu")
    case = Case.build("gpt2_layer", hyper={"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 8, "ell": 3},
                      dtype="float32", variant=variant)
    sets = value_sets(case, 6, "float32")
    e = REGISTRY["gpt2_layer"]
    shared = T._block(e, [(c.inputs, c.params) for c in sets], None, hyper=case.hyper, variant=case.variant,
                      dtype="float32", precision="highest")
    assert shared is not None and all(r is not None for r in shared), "the SiLU block was split"
    for c, r in zip(sets, shared):
        alone = T.reference(e, c.inputs, c.params, hyper=case.hyper, variant=case.variant, dtype="float32")
        for name in alone.outputs:
            assert np.array_equal(r.outputs[name], alone.outputs[name])
