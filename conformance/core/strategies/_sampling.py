"""Sampling: variates, distributions, temperatures, and variates aimed at CDF boundaries.

- ``variates(shape, dtype, at=)``: uniform variates in [0, 1) exactly
  representable in ``dtype`` (never 1 after rounding), in families
  (``VARIATE_FAMILIES``): "uniform"; "endpoints" (some exactly 0 or the
  largest value below 1); "at-probability" (some exactly equal to ``at``, the
  entry's probability: ETraining masks iff u < p_mask, so u = p_mask is the
  boundary).
- ``distributions(N_V, dtype)``: vectors p ≥ 0 with a positive sum
  (``DISTRIBUTION_FAMILIES``): "random" (Dirichlet(1)), "peaked" (softmax
  of N(0, 3..10)), "flat" (all equal: ties everywhere), "ties" (the largest
  value at two or more IDs: τ = 0 takes the lowest), "zeros" (some exactly
  0); a quarter of them scaled by 10^U(−2, 2) (p need not sum to 1).
- ``temperatures(dtype)``: τ (``TEMPERATURE_FAMILIES``): the paper's limits
  0 (argmax) and inf (uniform) often, 0.05, 1, 10^U(log10 0.2, log10 5),
  10^U(1, log10 50).
- ``aimed(entry, hyper, variant, inputs, params, dtype)``: for an entry with
  sampled outputs (``Entry.trace``) and one variate input, runs the spec
  (binary64, on the values rounded to ``dtype``) and
  * "favoured" (half the cases, entries with scalar token inputs): sets one
    scalar token input (bos, eos) to a token the model itself produced, so
    that stopping at a sampled token happens (EDInference's eos);
  * "boundary" (half the cases): moves the variate of one sampling step to
    a CDF boundary c_v of that step (the spec's distribution given the
    produced prefix, via the entry's trace), exactly (a third) or within 3
    ulps of ``dtype`` (u = v/N_V for τ = inf; none for τ = 0). Only later steps change. The harness must count
    such steps as ambiguous, never fail a correct implementation on them.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import numpy as np
from hypothesis import strategies as st

from ftspec.spec.errors import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.evaluation import evaluate, evaluate_trace
from ftspec.spec.variants import VariantSet

from ..dtypes import FORMATS, round_to
from ..value_flow import INDEX_LIMITS
from ._budgets import check_int, resolve_dtype
from ._draws import choose, generator, seeds

__all__ = [
    "DISTRIBUTION_FAMILIES",
    "TEMPERATURE_FAMILIES",
    "VARIATE_FAMILIES",
    "aimed",
    "below_one",
    "boundaries",
    "distribution_family",
    "distributions",
    "neighbour",
    "temperature_family",
    "temperatures",
    "variates",
]

VARIATE_FAMILIES = ("uniform", "endpoints", "at-probability")
DISTRIBUTION_FAMILIES = ("random", "peaked", "flat", "ties", "zeros")
TEMPERATURE_FAMILIES = ("zero", "inf", "small", "one", "moderate", "large")
_NUMPY: dict[str, type[np.floating[Any]]] = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


# --------------------------------------------------------------------------
# representable values
# --------------------------------------------------------------------------

def below_one(dtype: str) -> float:
    """The largest value below 1 in ``dtype``: 1 − 2^−p."""
    return 1.0 - 2.0 ** -FORMATS[resolve_dtype(dtype)].mantissa_bits


def neighbour(x: float, direction: int, dtype: str) -> float:
    """The next value of ``dtype`` above (direction +1) or below (−1) x ≥ 0 (0 stays 0 going down)."""
    if direction < 0 and x <= 0:
        return 0.0
    if dtype in _NUMPY:
        t = _NUMPY[dtype]
        return float(np.nextafter(t(x), t(np.inf) if direction > 0 else t(0)))
    bits = np.array(x, dtype=np.float32).view(np.uint32)  # bfloat16: the upper 16 bits of float32
    return float(np.array(int(bits) + (0x10000 if direction > 0 else -0x10000), dtype=np.uint32).view(np.float32))


def _in_unit(u: np.ndarray, dtype: str) -> np.ndarray:
    """Variates rounded to ``dtype`` and kept below 1."""
    return np.minimum(round_to(np.clip(u, 0.0, 1.0), dtype), below_one(dtype))


# --------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------

@st.composite
def variates(draw: st.DrawFn, shape: tuple[int, ...], dtype: str = "float64",
             at: Optional[float] = None) -> np.ndarray:
    """float64 variates in [0, 1), exact in ``dtype`` (see ``VARIATE_FAMILIES``)."""
    dtype = resolve_dtype(dtype)
    shape = tuple(check_int("shape", n) for n in shape)
    weights = {"uniform": 2, "endpoints": 1, **({"at-probability": 1} if at is not None else {})}
    family = choose(draw, "variate family", weights)
    rng = generator(draw(seeds), "variates")
    u = rng.random(shape)
    if family != "uniform" and u.size:
        pick = rng.random(shape) < rng.uniform(0.2, 0.6)
        pick.flat[rng.integers(0, u.size)] = True
        if family == "endpoints":
            u[pick] = np.where(rng.random(shape) < 0.5, 0.0, below_one(dtype))[pick]
        elif at is not None:  # "at-probability" is drawn only when at is given
            u[pick] = min(float(at), below_one(dtype))
    return _in_unit(u, dtype)


def _distribution(family: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if family == "peaked":
        z = rng.standard_normal(n) * rng.uniform(3.0, 10.0)
        w = np.exp(z - z.max())
        return w / w.sum()
    if family == "flat":
        return np.full(n, 1.0 / n)
    p = rng.dirichlet(np.ones(n))
    if family == "ties" and n >= 2:
        top = p.max() * rng.uniform(1.2, 3.0)
        p[rng.choice(n, size=int(rng.integers(2, n + 1)), replace=False)] = top
        return p / p.sum()
    if family == "zeros" and n >= 2:
        zero = rng.random(n) < rng.uniform(0.2, 0.7)
        zero[rng.integers(0, n)] = True
        zero[rng.integers(0, n)] = False  # at least one positive entry
        p[zero] = 0.0
        return p / p.sum()
    return p


@st.composite
def distributions(draw: st.DrawFn, N_V: int, dtype: str = "float64") -> np.ndarray:
    """float64 (N_V,) vector p ≥ 0 with a positive sum, exact in ``dtype``."""
    n = check_int("N_V", N_V)
    dtype = resolve_dtype(dtype)
    # ties twice as likely: at τ = 0 only a tied maximum tells the lowest-ID rule from others
    family = choose(draw, "distribution family", {**dict.fromkeys(DISTRIBUTION_FAMILIES, 1), "ties": 2})
    rng = generator(draw(seeds), "distribution")
    p = _distribution(family, rng, n)
    if rng.random() < 0.25:
        p = p * 10.0 ** rng.uniform(-2.0, 2.0)
    p = round_to(p, dtype)
    if not p.sum() > 0:  # everything underflowed: keep the largest
        p[int(np.argmax(_distribution(family, rng, n)))] = 1.0
    return p


def distribution_family(p: np.ndarray) -> set[str]:
    """What a distribution shows: "ties" (the largest value at two IDs or more), "zeros", "flat"."""
    p = np.asarray(p, dtype=np.float64)
    out = set()
    if np.count_nonzero(p == p.max()) >= 2:
        out.add("ties")
    if (p == 0).any():
        out.add("zeros")
    if p.size >= 2 and (p == p[0]).all():
        out.add("flat")
    return out


@st.composite
def temperatures(draw: st.DrawFn, dtype: str = "float64") -> np.ndarray:
    """A 0-d τ ≥ 0, exact in ``dtype``; weights (of 11): 3 zero, 1 inf, 2 0.05, 1 one,
    2 moderate, 2 large. Six in eleven draw 0 < τ ≠ 1, where applying τ wrongly (p^τ for
    p^{1/τ}) shows; τ = 0 stays frequent for argmax and its ties."""
    dtype = resolve_dtype(dtype)
    family = choose(draw, "temperature family", {"zero": 3, "inf": 1, "small": 2, "one": 1, "moderate": 2,
                                                 "large": 2})
    if family in ("zero", "inf"):
        return np.array(0.0 if family == "zero" else math.inf)
    rng = generator(draw(seeds), "temperature")
    tau = {"small": 0.05, "one": 1.0}.get(family) or 10.0 ** rng.uniform(
        *((math.log10(0.2), math.log10(5.0)) if family == "moderate" else (1.0, math.log10(50.0))))
    return np.array(float(round_to(np.array(tau), dtype)))


def temperature_family(tau: float) -> str:
    tau = float(tau)
    if tau == 0:
        return "zero"
    if math.isinf(tau):
        return "inf"
    if tau < 0.1:
        return "small"
    if tau == 1:
        return "one"
    return "large" if tau >= 10 else "moderate"


# --------------------------------------------------------------------------
# aiming at what the spec does
# --------------------------------------------------------------------------

def _spec_values(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                 dtype: str) -> tuple[dict, dict]:
    real = {s.name: s.is_real for s in entry.inputs}
    spec_in = {k: (round_to(v, dtype) if real[k] else np.asarray(v)).tolist() for k, v in inputs.items()}
    return spec_in, {k: round_to(v, dtype).tolist() for k, v in params.items()}


def _produced(entry: Entry, hyper: Mapping[str, int], variant: VariantSet, inputs: Mapping[str, np.ndarray],
              params: Mapping[str, np.ndarray], dtype: str) -> dict[str, Any]:
    spec_in, spec_par = _spec_values(entry, inputs, params, dtype)
    return evaluate(entry.name, spec_in, spec_par, hyper=hyper, variant=variant)


def boundaries(record: Mapping[str, Any]) -> list[float]:
    """The inner CDF boundaries of one trace step (binary64): c_v strictly
    between 0 and 1 for a CDF step, v/N_V for a uniform one, none for argmax."""
    if record["kind"] == "uniform":
        n = int(record["values"][0])
        return [v / n for v in range(1, n)]
    if record["kind"] != "cdf":
        return []
    return sorted({float(c) for c in record["values"][:-1] if 0.0 < float(c) < 1.0})


def _favoured(rng: np.random.Generator, entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
              out: dict[str, np.ndarray], produced: Mapping[str, Any], scalar_tokens: list[str]) -> bool:
    """Set one scalar token input to a token the spec produced; whether it changed anything."""
    made, limit = [], hyper[INDEX_LIMITS[Kind.TOKEN]]
    for spec in entry.output_specs(hyper, variant):
        if spec.kind == Kind.TOKEN:
            made += [int(t) for t in np.ravel(produced[spec.name]) if 0 <= int(t) < limit]
    if not made:
        return False
    name = scalar_tokens[int(rng.integers(0, len(scalar_tokens)))]
    token = made[int(rng.integers(0, len(made)))]
    changed = int(out[name]) != token
    out[name] = np.array(token, dtype=np.int64)
    return changed


@st.composite
def aimed(draw: st.DrawFn, entry: Entry, hyper: Mapping[str, int], variant: VariantSet,
          inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], dtype: str = "float64"
          ) -> dict[str, np.ndarray]:
    """``inputs`` with favoured scalar tokens and boundary variates (see the module docstring)."""
    dtype = resolve_dtype(dtype)
    variate_inputs = [s for s in entry.inputs if s.kind == Kind.VARIATE]
    if entry.trace is None or len(variate_inputs) != 1:
        return dict(inputs)
    scalar_tokens = [s.name for s in entry.inputs if s.kind == Kind.TOKEN and not s.shape]
    favour = bool(scalar_tokens) and choose(draw, "favoured", {"favoured": 1, "as drawn": 1}) == "favoured"
    boundary = choose(draw, "boundary", {"boundary": 1, "as drawn": 1}) == "boundary"
    rng = generator(draw(seeds), "aimed")
    if not (favour or boundary):
        return dict(inputs)
    out = {k: np.array(v, copy=True) for k, v in inputs.items()}
    try:
        produced = _produced(entry, hyper, variant, out, params, dtype)
        if favour and _favoured(rng, entry, hyper, variant, out, produced, scalar_tokens) and boundary:
            produced = _produced(entry, hyper, variant, out, params, dtype)
        if boundary:
            spec_in, spec_par = _spec_values(entry, out, params, dtype)
            steps = evaluate_trace(entry.name, spec_in, spec_par, produced, hyper=hyper, variant=variant)
            where = [(k, found) for k, record in enumerate(steps) if (found := boundaries(record))]
            if where:
                k, cs = where[int(rng.integers(0, len(where)))]
                c = cs[int(rng.integers(0, len(cs)))]
                u = float(round_to(np.array(c), dtype))
                offset = int(rng.choice([0, 0, 0, -1, 1, -2, 2, -3, 3]))
                for _ in range(abs(offset)):
                    u = neighbour(u, 1 if offset > 0 else -1, dtype)
                name = variate_inputs[0].name
                flat = out[name].reshape(-1)
                flat[k] = min(max(u, 0.0), below_one(dtype))
                out[name] = flat.reshape(out[name].shape)
    except SpecError:  # the case itself is refused: leave it to the harness (tests count these)
        return dict(inputs)
    return out
