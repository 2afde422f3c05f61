"""The switches declared rounding-only (spec/variants.py ``ROUNDING_ONLY`` and
``SAME_MATHEMATICS``) give the same values in (nearly) exact arithmetic.

Fixture replay relies on this claim: a fixture made under one scale placement
replays on an implementation that declares another, with the same expected
values (conformance/running/fixture_replay.py). Here every entry that reads such a
switch is evaluated at 60 significant digits under each of its values; the
results must agree to 1e-50 relative, far below any dtype's rounding but far
above mpmath's own (the orders of the sums are the same). A switch that does
change the mathematics (attn_scale) must differ at that precision, so the
comparison can fail; and in binary64 the values must differ in some last bit
for some case, so the switch is not a no-op either.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.spec import variants as V
from ftspec.spec.evaluation import evaluate
from ftspec.spec.numbers import MpNumbers
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER, ROUNDING_ONLY, SWITCHES

DPS = 60
AGREE = 1e-50
#: the entries (small, at their default sizes) that read scale_placement; the
#: architectures read it only through these layers
ENTRIES = ("basic_single_query_attention", "attention", "mh_attention", "encoder_layer", "decoder_layer",
           "bert_layer", "gpt2_layer")


def _flat(out) -> list[float]:
    values: list = []

    def walk(x) -> None:
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        else:
            values.append(x)

    for k in sorted(out):
        walk(out[k])
    return values


def _mp(name: str, variant, seed: int = 3) -> list:
    case = Case.build(name, None, PAPER, seed=seed)
    inputs = {k: v.tolist() for k, v in case.inputs.items()}
    params = {k: v.tolist() for k, v in case.params.items()}
    return _flat(evaluate(name, inputs, params, hyper=case.hyper, variant=variant, numbers=MpNumbers(DPS)))


def _worst(a: list, b: list) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) / max(abs(x), abs(y), 1e-30) for x, y in zip(a, b))


def test_scale_placement_is_the_only_switch_declared_wholly_rounding_only() -> None:
    assert ROUNDING_ONLY == frozenset({"scale_placement"})
    assert all(s in SWITCHES for s in ROUNDING_ONLY)


@pytest.mark.parametrize("name", ENTRIES)
def test_every_scale_placement_is_the_same_mathematics(name: str) -> None:
    assert ROUNDING_ONLY <= REGISTRY[name].switches
    (switch,) = ROUNDING_ONLY
    base, *others = SWITCHES[switch].choices
    want = _mp(name, PAPER.replace(**{switch: base}))
    for value in others:
        got = _mp(name, PAPER.replace(**{switch: value}))
        assert _worst(want, got) < AGREE, (name, switch, value, _worst(want, got))
    # the comparison can fail: 1/√d_model is not 1/√d_attn (d_x ≠ d_attn at these sizes)
    if name in ("attention", "mh_attention"):
        assert _worst(want, _mp(name, PAPER.replace(attn_scale="sqrt_d_model"))) > 1e-6


def test_scale_placement_changes_binary64_rounding() -> None:
    """Not a no-op: in binary64 some placement differs from 'scores' in some bit on some case."""
    differs = False
    for seed in range(6):
        case = Case.build("attention", None, PAPER, seed=seed)
        runs = [np.array(_flat(evaluate("attention", {k: v.tolist() for k, v in case.inputs.items()},
                                        {k: v.tolist() for k, v in case.params.items()}, hyper=case.hyper,
                                        variant=PAPER.replace(scale_placement=p))))
                for p in SWITCHES["scale_placement"].choices]
        differs |= any(not np.array_equal(runs[0], r) for r in runs[1:])
        assert all(np.allclose(runs[0], r, rtol=1e-13, atol=1e-15) for r in runs[1:])
    assert differs


SAME = sorted(getattr(V, "SAME_MATHEMATICS", {}).items())


@pytest.mark.skipif(not SAME, reason="this ftspec declares no value-level rounding-only switches")
@pytest.mark.parametrize("pair", SAME, ids=lambda p: f"{p[0][0]}={p[0][1]}")
def test_same_mathematics_values_agree_in_exact_arithmetic(pair) -> None:
    (switch, value), equal_to = pair
    names = [n for n in ("layer_norm", "encoder_layer") if switch in REGISTRY[n].switches]
    assert names, f"no small entry reads {switch}"
    base = PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")
    for name in names:
        got = _mp(name, base.replace(**{switch: value}))
        want = _mp(name, base.replace(**{switch: equal_to}))
        assert _worst(want, got) < AGREE and all(math.isfinite(float(x)) for x in got), (name, switch, value)
