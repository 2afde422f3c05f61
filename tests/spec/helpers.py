"""Shared helpers of the spec's self-tests: random parameters and cases.

Values are drawn from a ``random.Random`` seeded by a Hypothesis-drawn
integer (and, for flat parameters, by the parameter's name), so that the same
seed gives the same value to the same parameter under every variant set: two
variants then differ only where their switches differ. Weights are scaled by
1/√fan_in, biases and inputs are drawn from small ranges, γ from [0.5, 1.5],
so every intermediate stays of order 1 and no rounding bound is swamped.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any, Iterable, Mapping

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

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

#: Small sizes for every hyperparameter name the registry uses. d_attn differs
#: from d_in, d_x and d_e, so that √d_attn and √d_model are different divisors,
#: and is not a power of 4, so that moving the division (scale_placement)
#: changes the rounding.
SMALL = {
    "N_V": 5, "d_e": 4, "d_in": 3, "d_x": 3, "d_z": 4, "d_attn": 2, "d_mid": 2, "d_out": 3,
    "d_mlp": 5, "d_f": 4, "H": 2, "L": 1, "L_enc": 1, "L_dec": 1, "T": 3, "ell": 3,
    "ell_x": 3, "ell_z": 4, "ell_max": 4,
}


def small_hyper(e: Entry, **overrides: int) -> dict[str, int]:
    return {k: overrides.get(k, SMALL[k]) for k in e.hyper}


def _param_value(seed: int, name: str, shape: tuple[int, ...]) -> Any:
    rng = random.Random(f"{seed}:{name}")
    leaf = name.rsplit(".", 1)[-1]
    if len(shape) == 2:
        if leaf == "W_o" or leaf.startswith("W_"):
            return weight(rng, shape[0], shape[1])
        return matrix(rng, *shape)
    (n,) = shape
    if leaf.startswith("gamma"):
        return gamma(rng, n)
    return vector(rng, n, -0.5, 0.5)


def flat_params(e: Entry, hyper: Mapping[str, int], variant: VariantSet, seed: int) -> dict[str, Any]:
    """Random flat parameters for ``e``'s schema; the same (seed, name) gives the same value."""
    return {name: _param_value(seed, name, shape)
            for name, shape in e.param_shapes(hyper, variant).items()}


def random_inputs(e: Entry, hyper: Mapping[str, int], seed: int, scale: float = 2.0) -> dict[str, Any]:
    """Inputs of every kind: reals in ±scale, tokens in [0, N_V), Mask ≡ 1."""
    rng = random.Random(f"{seed}:inputs")
    out: dict[str, Any] = {}
    for spec in e.inputs:
        shape = e.input_shapes(hyper)[spec.name]
        if spec.kind == "token":
            out[spec.name] = ([rng.randrange(hyper["N_V"]) for _ in range(shape[0])]
                              if shape else rng.randrange(hyper["N_V"]))
        elif spec.kind == "position":
            out[spec.name] = rng.randrange(hyper["ell_max"])
        elif spec.kind == "mask":
            out[spec.name] = [[1] * shape[1] for _ in range(shape[0])]
        elif len(shape) == 1:
            out[spec.name] = vector(rng, shape[0], -scale, scale)
        else:
            out[spec.name] = matrix(rng, shape[0], shape[1], scale)
    return out


def case(name: str, variant: VariantSet = PAPER, seed: int = 0, **overrides: int):
    """(inputs, params, hyper) of registry entry ``name`` with small sizes."""
    e = REGISTRY[name]
    hyper = small_hyper(e, **overrides)
    return random_inputs(e, hyper, seed), flat_params(e, hyper, variant, seed), hyper


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
