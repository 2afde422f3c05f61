"""``variance="one_pass"``: Flax's v = max(0, E[e²] − E[e]²).

Three claims, each tested against a computation of its own:

- it is the layer norm with v = E[e²] − E[e]², evaluated here in exact
  rationals (``fractions``) and compared with the spec in mpmath at 60
  digits;
- it is the same mathematics as ``biased``: in mpmath they agree to 1e-25
  on every entry that reads the switch, while in binary64 they differ;
- in binary64 it rounds as a one-pass variance does, cancelling when |m| is
  large against the spread, and clips a result that rounding left negative
  to 0 (as flax/linen/normalization.py ``_compute_stats`` does).
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from ftspec.spec import MpNumbers, SpecError, evaluate
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, SAME_MATHEMATICS

from .helpers import FORWARD, flat_params, leaves, random_inputs, small_hyper

ONE_PASS = PAPER.replace(variance="one_pass")


def test_one_pass_is_listed_as_the_biased_variance_rounded_differently():
    assert SAME_MATHEMATICS[("variance", "one_pass")] == "biased"
    assert ONE_PASS.describe() == "phuong-hutter+variance=one_pass"
    assert PAPER.to_json() == PAPER.replace(variance="biased").to_json()  # the paper's hash is unchanged


@pytest.mark.parametrize("seed", range(3))
def test_one_pass_equals_mean_square_minus_squared_mean_in_exact_rationals(seed):
    """ê_i = (e_i − m)/√v with v = Σe²/d − (Σe/d)² in Fraction arithmetic
    (inputs k/64 are exact), against the spec at 60 digits (no ε, no γ, β)."""
    rng = random.Random(seed)
    d = 3 + seed
    e = [Fraction(rng.randint(-200, 200), 64) for _ in range(d)]
    m = sum(e) / d
    v = sum(x * x for x in e) / d - m * m
    assert v > 0
    N = MpNumbers(60)
    got = evaluate("layer_norm", {"X": [[float(x)] for x in e]}, hyper={"d_e": d, "ell": 1},
                   variant=ONE_PASS.replace(affine="none"), numbers=N)["X_hat"]
    sqrt_v = N.ctx.sqrt(N.ctx.mpf(v.numerator) / v.denominator)
    for (y,), x in zip(got, e):
        want = (N.ctx.mpf((x - m).numerator) / (x - m).denominator) / sqrt_v
        assert abs(y - want) <= N.ctx.mpf("1e-50"), (seed, float(y), float(want))


VARIANCE_ENTRIES = [name for name, e in FORWARD.items() if "variance" in e.switches]
#: the embedding's norm acts only with embedding_norm on (as in test_switches.py)
BASES = (PAPER, PAPER.replace(embedding_norm=True))


@pytest.mark.parametrize("name", VARIANCE_ENTRIES)
def test_one_pass_and_biased_are_the_same_mathematics(name):
    """In mpmath at 40 digits, every entry that reads the switch gives the
    same result under both values (to 1e-25), with and without the
    embedding's norm."""
    e = REGISTRY[name]
    N = MpNumbers(40)
    hyper = small_hyper(e, ell_z=4, ell_x=3)
    inputs = random_inputs(e, hyper, 0)
    for base in BASES:
        one = base.replace(variance="one_pass")
        a = evaluate(name, inputs, flat_params(e, hyper, base, 0), hyper=hyper, variant=base, numbers=N)
        b = evaluate(name, inputs, flat_params(e, hyper, one, 0), hyper=hyper, variant=one, numbers=N)
        for key in a:
            la, lb = list(leaves(a[key])), list(leaves(b[key]))
            assert len(la) == len(lb)
            for x, y in zip(la, lb):
                assert abs(x - y) <= N.const("1e-25") * (1 + abs(x)), (name, key, x, y)


def _column(e):
    return {"X": [[x] for x in e]}


def test_one_pass_cancels_and_clips_in_binary64_where_two_passes_are_exact():
    """The column 2²⁷ + (1, 2) has v = 1/4 exactly. Two passes find it
    (e − m = ∓1/2 exactly). One pass rounds (2²⁷ + 1)² (55 bits) and m²,
    and E[e²] − m² comes out below 0 (−4): clipped to 0 it gives
    σ = √(0 + ε) = 1 for ε = 1, so ê = e − m = ∓1/2 exactly, and with no ε
    a zero variance, which the spec refuses. Unclipped, √(−4 + 1) would be
    refused instead."""
    e = [2.0**27 + 1, 2.0**27 + 2]
    assert sum(Fraction(x) ** 2 for x in e) / 2 - (sum(map(Fraction, e)) / 2) ** 2 == Fraction(1, 4)
    hyper = {"d_e": 2, "ell": 1}
    eps = dict(epsilon=1.0, epsilon_placement="inside_root", affine="none")
    two = evaluate("layer_norm", _column(e), hyper=hyper, variant=PAPER.replace(**eps))["X_hat"]
    assert [y for (y,) in two] == pytest.approx([-0.5 / 1.25**0.5, 0.5 / 1.25**0.5], rel=1e-15)
    one = evaluate("layer_norm", _column(e), hyper=hyper, variant=ONE_PASS.replace(**eps))["X_hat"]
    assert [y for (y,) in one] == [-0.5, 0.5]
    exact = evaluate("layer_norm", _column(e), hyper=hyper, variant=PAPER.replace(affine="none"))["X_hat"]
    assert [y for (y,) in exact] == [-1.0, 1.0]
    with pytest.raises(SpecError, match="variance"):
        evaluate("layer_norm", _column(e), hyper=hyper, variant=ONE_PASS.replace(affine="none"))


@pytest.mark.parametrize("name", VARIANCE_ENTRIES)
def test_one_pass_and_biased_differ_in_binary64(name):
    """The other half (and what makes the mpmath agreement above more than
    an ignored switch): in binary64 every entry that reads the switch rounds
    differently under the two values, in some bit of some output, on
    ordinary inputs (real inputs shifted by 3, so that m ≠ 0)."""
    e = REGISTRY[name]
    hyper = small_hyper(e, ell_z=4, ell_x=3)
    for base, seed in [(base, seed) for base in BASES for seed in range(8)]:
        one = base.replace(variance="one_pass")
        inputs = random_inputs(e, hyper, seed)
        inputs = {k: ([[x + 3.0 for x in row] for row in v] if k in ("X", "Z") else v) for k, v in inputs.items()}
        a = evaluate(name, inputs, flat_params(e, hyper, base, seed), hyper=hyper, variant=base)
        b = evaluate(name, inputs, flat_params(e, hyper, one, seed), hyper=hyper, variant=one)
        if any(float(x).hex() != float(y).hex() for k in a for x, y in zip(leaves(a[k]), leaves(b[k]))):
            return
    pytest.fail(f"{name}: one_pass and biased agree bit for bit on 8 inputs")
