"""tools/bench/levels.py: the count of a structure's (level, operation) groups measures the spec's own
binary64 computation (its values are ``FLOAT``'s, bit for bit), and counts levels as defined."""

from __future__ import annotations

import math

import pytest

from ftspec.spec.evaluation import evaluate, to_floats
from ftspec.spec.numbers import using
from ftspec.tools.bench.levels import Tracing, level_groups, traced

SMALL = {"layer_norm": {"d_e": 5, "ell": 3},
         "mh_attention": {"H": 2, "d_x": 4, "d_z": 3, "d_attn": 2, "d_mid": 3, "d_out": 4, "ell_x": 3, "ell_z": 2},
         "gpt2_layer": {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 8, "ell": 3}}


def _bits(x: object) -> object:
    """Nested floats as their exact hexadecimal forms (−0.0 and 0.0 differ)."""
    return [_bits(v) for v in x] if isinstance(x, list) else float(x).hex()  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_traced_values_are_floats_bit_for_bit(name):
    from ftspec.conformance.core.values.building import build
    from ftspec.spec.registry import entry
    from ftspec.spec.variants import PAPER

    got, numbers = traced(name, SMALL[name], seed=3)
    inputs, params = build(entry(name), SMALL[name], PAPER, seed=3, style="well-scaled", dtype="float64")
    want = evaluate(name, {k: v.tolist() for k, v in inputs.items()}, {k: v.tolist() for k, v in params.items()},
                    hyper=SMALL[name], variant=PAPER)
    assert got.keys() == want.keys()
    for k in want:
        assert repr(_bits(got[k])) == repr(_bits(to_floats(want[k]))), k
    assert sum(numbers.groups.values()) > 0


def test_a_level_is_one_more_than_the_highest_argument():
    N = Tracing()
    with using(N):
        a, b = N.num(2.0), N.const("0.5")
        c = a * b                      # level 1
        d = -(c + a)                   # level 2; negation is exact
        e = N.dot([a, c, d], [b, b, b])  # level 3: one dot of three terms
        f = N.exp(abs(e))              # level 4
    assert float(f) == math.exp(abs(math.fsum([1.0, 0.5, -1.5])))
    assert dict(N.groups) == {(1, "*"): 1, (2, "+"): 1, (3, "dot 3"): 1, (4, "exp"): 1}


def test_the_rows_count_operations_levels_and_groups():
    (row,) = level_groups(["gpt2_layer"], sizes=SMALL)
    assert row["levels"] <= row["groups"] <= row["operations"]
    assert row["groups"] < row["operations"] / 10  # the point of the measurement: far fewer groups
