"""Derived tolerances: the one place that decides how close is close enough.

For an output element y computed by an implementation in dtype D from inputs
already rounded to D, the harness accepts

    |y_impl − y_spec| ≤ SAFETY · s

where y_spec is the spec evaluated in binary64 (correctly rounded sums) on
the same rounded inputs, and s is the *rounding spread* of that element: the
largest deviation, over ``LANES`` lanes of Monte Carlo arithmetic, of the
spec's own computation when every operation rounds with D's unit roundoff
(``conformance/core/rounding.py``). An element the algorithm computes exactly
(a copied embedding column, a mask) has s = 0 and must match bit for bit;
a NaN must be NaN exactly where the spec's is.

The constants below are the whole model; docs/tolerances.md derives them
and records the calibration on the bundled implementations.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ftspec.spec import evaluate
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from .dtypes import FORMATS, round_to
from .rounding import MonteCarloNumbers, lanes_array
from .token_judge import sampled_judge

__all__ = [
    "LANES",
    "PRECISION_TIERS",
    "SAFETY",
    "TRANSCENDENTAL_UNITS",
    "UNDERFLOW",
    "Reference",
    "reference",
    "table",
]

#: Monte Carlo lanes per evaluation. With 32 lanes the largest |δ| drawn for
#: an element is below 0.9 u with probability 0.9^32 = 3%, and below 0.7 u
#: with probability 1e-5, so the spread rarely underestimates by more than
#: a factor 1.5 (docs/tolerances.md, "sampling").
LANES = 32

#: Error of a library exp, log, sqrt, tanh, erf, sin, cos or pow on an exact
#: argument, in units of u (2 u = 1 ulp; glibc, SLEEF and XLA are within
#: 1-2 ulp for these in float32/float64).
TRANSCENDENTAL_UNITS = 2.0

#: The factor between the spread and the tolerance. Calibrated on the three
#: bundled implementations (docs/tolerances.md, "calibration"): the largest
#: error/spread ratio seen over the thorough profile, times a margin for
#: implementations that sum in another order or use 2-4 ulp libraries.
SAFETY = {"float64": 8.0, "float32": 8.0, "bfloat16": 8.0, "float16": 8.0}

#: The same factor for what is differentiated or trained (gradients, SGD
#: steps, training loops): its own table, calibrated separately, because a
#: backward pass reorders its sums more than a forward pass does.
GRADIENT_SAFETY = {"float64": 8.0, "float32": 8.0, "bfloat16": 8.0, "float16": 8.0}

#: Absolute error one operation may make when its result underflows: the
#: smallest normal number where hardware may flush subnormals to zero
#: (float32/bfloat16 on GPUs); float16 keeps gradual underflow (half the
#: smallest subnormal, 2^-25).
UNDERFLOW = {
    "float64": FORMATS["float64"].tiny,
    "float32": FORMATS["float32"].tiny,
    "bfloat16": FORMATS["bfloat16"].tiny,
    "float16": 2.0**-25,
}

#: Precision tiers: the unit roundoff of matrix products. "highest" rounds
#: them in the dtype itself; "tf32" (NVIDIA TensorFloat-32, 10 explicit
#: mantissa bits) applies to float32 only.
PRECISION_TIERS = {"highest": None, "tf32": 2.0**-11}

#: An intermediate beyond this fraction of the dtype's largest value makes
#: the example unrepresentable in that dtype (it is skipped for that dtype,
#: and counted): a correct implementation would overflow too.
RANGE_MARGIN = 0.25


class ToleranceModelError(RuntimeError):
    """The Monte Carlo model could not derive a tolerance (a harness bug, reported as such)."""


@dataclass
class Reference:
    """The spec's answer for one case at one dtype, with its tolerances.

    ``sampled``: for entries with sampled outputs, a function judging an
    implementation's produced outputs against the spec's distributions
    (conformance/core/token_judge.py); those outputs are not compared exactly.
    """

    outputs: dict[str, np.ndarray]  # float64 (bool/int64 for exact outputs)
    bound: dict[str, np.ndarray]  # allowed |got - ref| per element
    spread: dict[str, np.ndarray]
    max_intermediate: float
    in_range: bool
    dtype: str
    precision: str
    specs: tuple = ()
    sampled: Optional[Callable[[Mapping[str, np.ndarray]], Any]] = None
    extra: dict[str, Any] = field(default_factory=dict)


def _seed(entry: Entry, inputs: Mapping[str, Any], params: Mapping[str, Any], variant: VariantSet,
          dtype: str) -> int:
    h = hashlib.sha256()
    h.update(json.dumps([entry.name, dtype, variant.to_json()]).encode())
    for k in sorted(inputs):
        h.update(k.encode() + np.ascontiguousarray(inputs[k]).tobytes())
    for k in sorted(params):
        h.update(k.encode() + np.ascontiguousarray(params[k]).tobytes())
    return int.from_bytes(h.digest()[:8], "little")


def _lists(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    return {k: v.tolist() for k, v in arrays.items()}


def reference(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], *,
              hyper: Mapping[str, int], variant: VariantSet, dtype: str,
              precision: str = "highest") -> Reference:
    """The spec's outputs and per-element tolerances for inputs already rounded to ``dtype``.

    Raises ``SpecError`` if the spec refuses the inputs.
    """
    fmt = FORMATS[dtype]
    spec_in, spec_par = _lists(inputs), _lists(params)
    ref = evaluate(entry.name, spec_in, spec_par, hyper=hyper, variant=variant)
    mu = PRECISION_TIERS[precision]
    mc = MonteCarloNumbers(u=fmt.u, eta=UNDERFLOW[dtype], lanes=LANES, transcendental_units=TRANSCENDENTAL_UNITS,
                           seed=_seed(entry, inputs, params, variant, dtype),
                           matmul_u=max(mu, fmt.u) if mu else None, mantissa_bits=fmt.mantissa_bits,
                           round_const=lambda c: float(round_to(np.array(c), dtype)))
    with np.errstate(all="ignore"):
        lanes = evaluate(entry.name, spec_in, spec_par, hyper=hyper, variant=variant, numbers=mc)
    specs = entry.output_specs(hyper, variant)
    safety = (GRADIENT_SAFETY if entry.family == "training" and not entry.name.endswith("_loss") else SAFETY)[dtype]
    outputs, bound, spread = {}, {}, {}
    for spec in specs:
        if spec.kind != Kind.REAL:  # masks, tokens, lengths, flags: exact
            exact = bool if spec.kind in (Kind.MASK, Kind.BOOL) else np.int64
            outputs[spec.name] = np.asarray(ref[spec.name], dtype=exact)
            bound[spec.name] = np.zeros(outputs[spec.name].shape)
            spread[spec.name] = bound[spec.name]
            continue
        value = np.asarray(ref[spec.name], dtype=np.float64)
        arr = lanes_array(lanes[spec.name], LANES)
        lost = np.isfinite(arr[..., 0]) & np.isnan(arr[..., 1:]).any(axis=-1)
        if lost.any():  # a modelling failure must be loud, never a zero tolerance
            at = tuple(int(i) for i in np.argwhere(lost)[0])
            raise ToleranceModelError(f"{entry.name}: Monte Carlo lanes of output {spec.name!r} became NaN at "
                                      f"{list(at)} where the binary64 value is {arr[at][0]!r}")
        with np.errstate(invalid="ignore"):
            s = np.max(np.abs(arr[..., 1:] - arr[..., :1]), axis=-1)
        s = np.where(np.isnan(s), 0.0, s)  # NaN in lane 0 too: the spec's own NaN, matched exactly
        outputs[spec.name] = value
        spread[spec.name] = s
        bound[spec.name] = safety * s
    in_range = mc.max_abs <= RANGE_MARGIN * fmt.max
    sampled = None
    if entry.trace is not None:
        seed = _seed(entry, inputs, params, variant, dtype)

        def numbers() -> MonteCarloNumbers:  # the same arithmetic as above, without the matmul tier
            return MonteCarloNumbers(u=fmt.u, eta=UNDERFLOW[dtype], lanes=LANES,
                                     transcendental_units=TRANSCENDENTAL_UNITS, seed=seed,
                                     mantissa_bits=fmt.mantissa_bits,
                                     round_const=lambda c: float(round_to(np.array(c), dtype)))

        sampled = sampled_judge(entry, spec_in, spec_par, hyper=hyper, variant=variant, dtype=dtype,
                                numbers=numbers, lanes=LANES, safety=SAFETY[dtype])
    return Reference(outputs, bound, spread, mc.max_abs, in_range, dtype, precision, specs, sampled)


def table() -> dict[str, Any]:
    """Every constant of the model, for reports and certificates."""
    return {
        "model": "monte-carlo-arithmetic",
        "lanes": LANES,
        "safety": dict(SAFETY),
        "gradient_safety": dict(GRADIENT_SAFETY),
        "transcendental_units": TRANSCENDENTAL_UNITS,
        "underflow": dict(UNDERFLOW),
        "unit_roundoff": {d: FORMATS[d].u for d in FORMATS},
        "precision_tiers": {k: v for k, v in PRECISION_TIERS.items()},
        "range_margin": RANGE_MARGIN,
    }
