"""Shared helpers of the spec's self-tests: random parameters and cases.

Registry cases (``case``, ``flat_params``, ``random_inputs``) come from the
one value builder (``conformance/core/values/``) for a Hypothesis-drawn seed:
well-scaled (weights N(0, 1/fan_in), γ ≈ 1, small biases, inputs N(0, 1)),
so every intermediate stays of order 1 and no rounding bound is swamped, and
the same seed gives the same value to the same parameter under every
variant set: two variants then differ only where their switches differ.
The structured parameters below (``attention_params``, ``layer_params``,
...) are drawn from a ``random.Random`` for the tests that call the spec's
functions with the paper's signatures.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any, Iterable, Mapping

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.values import build, default_hyper, parameter_values
from ftspec.spec import MpNumbers, TrackedNumbers, evaluate
from ftspec.spec.params import (
    AttentionParams,
    DecoderLayerParams,
    LayerParams,
    MHAttentionParams,
)
from ftspec.spec.registry import REGISTRY, Entry
from ftspec.spec.variants import PAPER, VariantSet

#: Unit roundoff of binary64 (round to nearest).
U = 2.0**-53
#: Smallest positive subnormal binary64: the absolute error of one rounding that underflows.
ETA = 2.0**-1074

#: Hypothesis settings for the spec's self-tests: small budgets, no deadline
#: (pure-Python mpmath evaluations vary in time), no example database on disk.
FAST = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=8, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

seeds = st.integers(min_value=0, max_value=2**32 - 1)


# --------------------------------------------------------------------------
# plain random values
# --------------------------------------------------------------------------


def vector(rng: random.Random, n: int, lo: float = -1.0, hi: float = 1.0) -> list[float]:
    return [rng.uniform(lo, hi) for _ in range(n)]


def matrix(rng: random.Random, m: int, n: int, scale: float = 1.0) -> list[list[float]]:
    return [[rng.uniform(-scale, scale) for _ in range(n)] for _ in range(m)]


def weight(rng: random.Random, out: int, fan_in: int) -> list[list[float]]:
    """A well-scaled weight matrix (uniform in ±√3/√fan_in: unit variance out)."""
    return matrix(rng, out, fan_in, math.sqrt(3.0 / fan_in))


def gamma(rng: random.Random, n: int) -> list[float]:
    return vector(rng, n, 0.5, 1.5)


def identity(n: int) -> list[list[float]]:
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


def transpose(A: list[list[Any]]) -> list[list[Any]]:
    return [list(col) for col in zip(*A)]


# --------------------------------------------------------------------------
# structured parameters (paper-faithful signatures)
# --------------------------------------------------------------------------


def attention_params(rng: random.Random, d_x: int, d_z: int, d_attn: int, d_out: int,
                     bias: bool = True) -> AttentionParams:
    """W_qkv of Algorithm 4 (and 3 with d_x = d_z = d_in)."""
    b = (lambda n: vector(rng, n, -0.5, 0.5)) if bias else (lambda n: None)
    return AttentionParams(
        W_q=weight(rng, d_attn, d_x), b_q=b(d_attn),
        W_k=weight(rng, d_attn, d_z), b_k=b(d_attn),
        W_v=weight(rng, d_out, d_z), b_v=b(d_out),
    )


def mh_params(rng: random.Random, H: int, d_x: int, d_z: int, d_attn: int, d_mid: int, d_out: int,
              bias: bool = True) -> MHAttentionParams:
    heads = tuple(attention_params(rng, d_x, d_z, d_attn, d_mid, bias) for _ in range(H))
    return MHAttentionParams(heads=heads, W_o=weight(rng, d_out, H * d_mid),
                             b_o=vector(rng, d_out, -0.5, 0.5) if bias else None)


def _norm(rng: random.Random, d: int, variant: VariantSet) -> tuple[Any, Any]:
    g = gamma(rng, d) if variant.affine in ("scale_shift", "scale") else None
    b = (vector(rng, d, -0.5, 0.5)
         if variant.affine == "scale_shift" and variant.norm == "layer_norm" else None)
    return g, b


def layer_params(rng: random.Random, H: int, d_e: int, d_attn: int, d_mid: int, d_mlp: int,
                 variant: VariantSet = PAPER) -> LayerParams:
    """One encoder / BERT / GPT-2 layer under ``variant``'s parameter set."""
    attn = mh_params(rng, H, d_e, d_e, d_attn, d_mid, d_e, variant.attn_bias)
    g1, b1 = _norm(rng, d_e, variant)
    mb = (lambda n: vector(rng, n, -0.5, 0.5)) if variant.mlp_bias else (lambda n: None)
    W1, c1 = weight(rng, d_mlp, d_e), mb(d_mlp)
    W2, c2 = weight(rng, d_e, d_mlp), mb(d_e)
    g2, b2 = _norm(rng, d_e, variant)
    return LayerParams(attn, g1, b1, W1, c1, W2, c2, g2, b2)


def decoder_layer_params(rng: random.Random, H: int, d_e: int, d_attn: int, d_mid: int, d_mlp: int,
                         variant: VariantSet = PAPER) -> DecoderLayerParams:
    self_attn = mh_params(rng, H, d_e, d_e, d_attn, d_mid, d_e, variant.attn_bias)
    g3, b3 = _norm(rng, d_e, variant)
    cross = mh_params(rng, H, d_e, d_e, d_attn, d_mid, d_e, variant.attn_bias)
    g4, b4 = _norm(rng, d_e, variant)
    mb = (lambda n: vector(rng, n, -0.5, 0.5)) if variant.mlp_bias else (lambda n: None)
    W3, c3 = weight(rng, d_mlp, d_e), mb(d_mlp)
    W4, c4 = weight(rng, d_e, d_mlp), mb(d_e)
    g5, b5 = _norm(rng, d_e, variant)
    return DecoderLayerParams(self_attn, g3, b3, cross, g4, b4, W3, c3, W4, c4, g5, b5)


# --------------------------------------------------------------------------
# registry cases: hyperparameters, inputs and flat parameters
# --------------------------------------------------------------------------

#: The forward entries (Algorithms 1-10: components, layers, architectures),
#: which these self-tests cover; training and inference (Algorithms 11-15)
#: have inputs of other kinds and are tested on their own.
FORWARD_FAMILIES = ("component", "layer", "architecture")
FORWARD: dict[str, Entry] = {n: e for n, e in REGISTRY.items() if e.family in FORWARD_FAMILIES}

def small_hyper(e: Entry, **overrides: int) -> dict[str, int]:
    """The entry's ``DEFAULT_HYPER`` row (``conformance/core/values/``) with the ``overrides`` it has."""
    return default_hyper(e, **{k: v for k, v in overrides.items() if k in e.hyper})


def flat_params(e: Entry, hyper: Mapping[str, int], variant: VariantSet, seed: int) -> dict[str, Any]:
    """Well-scaled flat parameters of the one value builder; the same (seed, name) gives the same value
    under every variant set."""
    return {k: v.tolist() for k, v in parameter_values(e, hyper, variant, seed=seed).items()}


def random_inputs(e: Entry, hyper: Mapping[str, int], seed: int) -> dict[str, Any]:
    """Inputs of every kind from the one value builder (reals N(0, 1), masks keeping a key per query)."""
    inputs, _ = build(e, hyper, PAPER, seed=seed)
    return {k: v.tolist() for k, v in inputs.items()}


def case(name: str, variant: VariantSet = PAPER, seed: int = 0, **overrides: int):
    """(inputs, params, hyper) of registry entry ``name`` at its default sizes with ``overrides``."""
    c = Case.build(name, small_hyper(REGISTRY[name], **overrides), variant, seed=seed)
    return c.spec_inputs(), c.spec_params(), c.hyper


# --------------------------------------------------------------------------
# number systems and comparisons
# --------------------------------------------------------------------------


def leaves(x: Any) -> Iterable[Any]:
    if isinstance(x, (list, tuple)):
        for item in x:
            yield from leaves(item)
    else:
        yield x


def exact_mean(xs: Iterable[float]) -> Fraction:
    xs = [Fraction(x) for x in xs]
    return sum(xs, Fraction(0)) / len(xs)


def evaluate_three(name: str, inputs, params, hyper, variant: VariantSet = PAPER):
    """The float result, the running error bounds and the mpmath(40) result of one case."""
    f = evaluate(name, inputs, params, hyper=hyper, variant=variant)
    t = evaluate(name, inputs, params, hyper=hyper, variant=variant, numbers=TrackedNumbers())
    m = evaluate(name, inputs, params, hyper=hyper, variant=variant, numbers=MpNumbers(40))
    return f, t, m


def same_values(a: Any, b: Any) -> bool:
    """Equal nested lists, value by value (``==``: -0.0 equals 0.0, NaN equals nothing)."""
    la, lb = list(leaves(a)), list(leaves(b))
    return len(la) == len(lb) and all(x == y for x, y in zip(la, lb))


def same_bits(a: Any, b: Any) -> bool:
    """Equal nested lists of floats, bit for bit (NaN equals NaN, -0.0 differs from 0.0)."""
    la, lb = list(leaves(a)), list(leaves(b))
    return len(la) == len(lb) and all(
        float(x).hex() == float(y).hex() for x, y in zip(la, lb))


def columns(A: list[list[Any]]) -> list[list[Any]]:
    return transpose(A)


def to_numbers(obj: Any, N: Any) -> Any:
    """A structure of parameters (dataclasses, tuples, nested lists of floats)
    with every number converted by ``N.num`` - needed to call the spec's
    functions directly inside ``using(N)``."""
    import dataclasses

    if obj is None:
        return None
    if dataclasses.is_dataclass(obj):
        return dataclasses.replace(obj, **{f.name: to_numbers(getattr(obj, f.name), N)
                                           for f in dataclasses.fields(obj)})
    if isinstance(obj, tuple):
        return tuple(to_numbers(o, N) for o in obj)
    if isinstance(obj, list):
        return [to_numbers(o, N) for o in obj]
    return N.num(obj)
