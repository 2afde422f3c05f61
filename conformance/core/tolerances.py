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
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from ftspec.impls.api import parse_precision
from ftspec.spec import evaluate
from ftspec.spec.errors import SpecError
from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from .dtypes import FORMATS, round_to
from .rounding import BLOCK_SPLITS, MonteCarloNumbers, lanes_array
from .token_judge import sampled_judge

__all__ = [
    "LANES",
    "PRECISION_TIERS",
    "SAFETY",
    "SCREEN_LANES",
    "TRANSCENDENTAL_UNITS",
    "UNDERFLOW",
    "REFERENCES_KEPT",
    "Reference",
    "keeping_references",
    "output_bound",
    "reference",
    "references",
    "table",
]

#: Monte Carlo lanes per evaluation. With 32 lanes the largest |δ| drawn for
#: an element is below 0.9 u with probability 0.9^32 = 3%, and below 0.7 u
#: with probability 1e-5, so the spread rarely underestimates by more than
#: a factor 1.5 (docs/tolerances.md, "sampling").
LANES = 32

#: Lanes of a search's first look at a block (``references(lanes=SCREEN_LANES)``, the runner's
#: search). The bound is a largest deviation over lanes, so over a subset of lanes it is never
#: larger: an output within SAFETY × the spread of 8 lanes is within SAFETY × the spread of any
#: 32 lanes that include them (``output_bound`` is monotone in the lanes), and the lanes are
#: independent and identically distributed, so a pass at 8 lanes is the pass 32 lanes would give.
#: An output beyond the 8-lane bound is judged again against its value set's own 32-lane
#: reference, the one its case file replays (``Runner.alone``): only that decides a failure.
#: A screen costs a quarter of the lanes (docs/tolerances.md, "Screening lanes").
SCREEN_LANES = 8

#: A block's lane F through a backward pass: the spec in binary64 with ``FLOAT``'s branches and
#: library functions, its adjoints summed in the order of the Monte Carlo number system's tape
#: (its centres add nodes), so not ``FLOAT``'s bits: the two are binary64 evaluations of the same
#: mathematics, and they differ by a binary64 rounding of it, about u_binary64 / u = 2^-29 of the
#: model's spread at float32 (less below it). At float64 that difference can rival the bound,
#: so there each value set's backward pass is evaluated in ``FLOAT``; below it a block takes
#: lane F with every bound narrowed by this fraction, so that an output within the narrowed
#: bound of lane F is within the bound of ``FLOAT``'s value. Measured (2026-12-07): |lane F −
#: FLOAT| / bound at most 7.2e-10 at float32, 1.1e-13 at bfloat16 and float16, over 25,346
#: value sets of every backward entry, style and preset (docs/tolerances.md, "Blocks").
LANE_F_MARGIN = 1e-6

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


def _numbers(entry: Entry, dtype: str, precision: Optional[str], seed: int, values: int = 1,
             lanes: int = LANES) -> MonteCarloNumbers:
    """The Monte Carlo arithmetic of ``dtype`` (matrix products at ``precision``'s tier; None: the
    dtype's own, as the sampled judge uses). ``precision`` may carry a mixed-precision declaration
    (``Implementation.precision_for``, e.g. "highest;accumulate=float32;softmax=float32"): sums,
    dot and matrix products accumulate at that format's unit and are stored in ``dtype``, softmax
    runs at its format's unit (docs/tolerances.md, "Mixed precision")."""
    fmt = FORMATS[dtype]
    tier, wider = parse_precision(precision) if precision else ("", {})
    mu = PRECISION_TIERS[tier] if tier else None
    acc = FORMATS[wider["accumulate"]].u if "accumulate" in wider else None
    acc = acc if acc is not None and acc < fmt.u else None
    soft = FORMATS[wider["softmax"]].u if "softmax" in wider else None
    if acc is not None:  # products and partial sums at the accumulator's unit, or the tier's if coarser
        matmul_u: Optional[float] = max(mu, acc) if mu else acc
    else:
        matmul_u = max(mu, fmt.u) if mu else None
    return MonteCarloNumbers(u=fmt.u, eta=UNDERFLOW[dtype], lanes=lanes, transcendental_units=TRANSCENDENTAL_UNITS,
                             seed=seed, matmul_u=matmul_u, mantissa_bits=fmt.mantissa_bits,
                             round_const=lambda c: float(round_to(np.array(c), dtype)), values=values,
                             accumulate_u=acc, softmax_u=soft)


def _bounded(entry: Entry, ref: Mapping[str, Any], lanes: Callable[[str], np.ndarray], *, hyper: Mapping[str, int],
             variant: VariantSet, dtype: str) -> tuple[tuple, dict, dict, dict]:
    """Per output: the binary64 value (``ref``, the spec in ``FLOAT``), the rounding spread of its
    Monte Carlo lanes (``lanes(name)``: (..., K+1), lane 0 first) and the bound, SAFETY × spread."""
    specs = entry.output_specs(hyper, variant)
    safety = (GRADIENT_SAFETY if _differentiates(entry) else SAFETY)[dtype]
    outputs, bound, spread = {}, {}, {}
    for spec in specs:
        if spec.kind != Kind.REAL:  # masks, tokens, lengths, flags: exact
            exact = bool if spec.kind in (Kind.MASK, Kind.BOOL) else np.int64
            outputs[spec.name] = np.asarray(ref[spec.name], dtype=exact)
            bound[spec.name] = np.zeros(outputs[spec.name].shape)
            spread[spec.name] = bound[spec.name]
            continue
        value = np.asarray(ref[spec.name], dtype=np.float64)
        arr = lanes(spec.name)
        lost = np.isfinite(arr[..., 0]) & np.isnan(arr[..., 1:]).any(axis=-1)
        if lost.any():  # a modelling failure must be loud, never a zero tolerance
            at = tuple(int(i) for i in np.argwhere(lost)[0])
            raise ToleranceModelError(f"{entry.name}: Monte Carlo lanes of output {spec.name!r} became NaN at "
                                      f"{list(at)} where the binary64 value is {float(arr[at][0])!r} (the dtype's "
                                      "arithmetic makes a NaN binary64 does not, or a square root's argument is "
                                      "not resolved from 0: mc_functions.ROOT_RESOLUTION)")
        with np.errstate(invalid="ignore"):
            s = np.max(np.abs(arr[..., 1:] - arr[..., :1]), axis=-1)
        s = np.where(np.isnan(s), 0.0, s)  # NaN in lane 0 too: the spec's own NaN, matched exactly
        outputs[spec.name] = value
        spread[spec.name] = s
        bound[spec.name] = output_bound(value, arr, s, safety=safety, dtype=dtype, scale=spec.scale)
    return specs, outputs, bound, spread


def output_bound(value: np.ndarray, arr: np.ndarray, s: np.ndarray, *, safety: float, dtype: str,
                 scale: str = "linear") -> np.ndarray:
    """An output's bound from its binary64 value, its lanes (..., K+1) and their spread s: SAFETY × s,
    at least the output's own rounding, and for a softmax's output (``scale == "log"``) at least
    the log-scale bound."""
    bound = np.maximum(safety * s, own_rounding(value, dtype, s))
    return np.maximum(bound, _log_scale_bound(arr, safety)) if scale == "log" else bound


def _log_scale_bound(arr: np.ndarray, safety: float) -> np.ndarray:
    """The bound of an exponential's output (a softmax's probabilities) taken on the log scale:
    y0·(exp(SAFETY·s) − 1), s the largest |log y_k − log y0| over the lanes (infinite where a lane
    is 0 beside a positive y0; 0 where y0 is 0 itself, left to the linear bound).

    A rounding error e of a logit moves a probability by the factor exp(e): the lanes are a
    sample of e, symmetric about 0 in distribution, but a sample of y0·exp(e) is lopsided,
    bounded by y0 below and unbounded above. Where e is large (a logit that rounding moves by
    units: a two-wide layer norm at bfloat16 turns rounding noise into ±1) the 32 lanes may all
    fall below y0, and SAFETY times their linear spread says the output cannot rise by more
    than 8·y0, when one more draw of the same e, with the other sign, raises it by exp(|e|).
    Where e is small this is the linear bound to first order (exp(x) − 1 ≥ x, |log(1 + r)| ≥
    |r| for r < 0): it only ever loosens, by a factor 1 + O(SAFETY·s) (docs/tolerances.md,
    "Probabilities")."""
    y0, lanes = arr[..., 0], arr[..., 1:]
    with np.errstate(all="ignore"):
        # log1p of the relative difference: log(y_k) − log(y0) without the logs' own rounding. A
        # lane below 0 (an underflow's η) has no logarithm: it is left to the linear bound, and
        # the others still count (a largest deviation over the lanes that have one, so that the
        # bound over a subset of the lanes is never larger: tolerances.SCREEN_LANES). Not
        # ``np.nanmax``: its all-NaN warning, silenced by ``warnings.catch_warnings``, is not
        # silenced in a thread while another thread leaves a ``catch_warnings`` of its own (the
        # filters are one per process before Python 3.14), and a Dask worker's threads did so: a
        # search failed once, then passed when replayed ("flaky search").
        d = np.abs(np.log1p((lanes - y0[..., None]) / y0[..., None]))
        had = ~np.isnan(d)
        s = np.where(had.any(axis=-1), np.where(had, d, -np.inf).max(axis=-1, initial=-np.inf), np.nan)
        out = y0 * np.expm1(safety * s)
    return np.where((y0 > 0) & np.isfinite(y0) & ~np.isnan(s), out, 0.0)


def own_rounding(value: np.ndarray, dtype: str, spread: np.ndarray) -> np.ndarray:
    """The least bound of each rounded output: what storing its exact value in ``dtype`` alone may
    cost, half a unit in the last place (u·2^e for |y| in [2^e, 2^(e+1))), and ``UNDERFLOW`` below
    the smallest normal number (half the subnormal spacing for float16; a flush to zero for
    float32 and bfloat16). Where the spread is 0 (an output the algorithm computes exactly: a
    copied embedding row) the output must match bit for bit, except that a subnormal value may be
    flushed to zero in a dtype whose hardware may flush (``UNDERFLOW`` is its smallest normal):
    XLA's batched gather on CPU returns a bfloat16 subnormal table entry as 0, its single call
    the entry itself.

    The spread includes this rounding as the last operation's perturbation, but a spread is a
    sample (32 draws), and in the subnormal range an absolute error can be tens of times u·|y|:
    the output's own rounding is a fact about the format, not a draw, so it is a floor. Where
    outputs are normal the floor is at most u·|y|, below SAFETY times any spread that holds
    the last rounding (docs/tolerances.md, "The output's own rounding")."""
    fmt = FORMATS[dtype]
    a = np.abs(np.where(np.isfinite(value), value, 0.0))
    _, exponent = np.frexp(a)
    half_ulp = np.ldexp(fmt.u, exponent - 1)
    floor = np.where(a < fmt.tiny, UNDERFLOW[dtype], half_ulp)
    flushed = a if UNDERFLOW[dtype] >= fmt.tiny else np.zeros_like(a)  # FTZ: the value or 0
    return np.where(spread > 0, floor, np.where(a < fmt.tiny, flushed, 0.0))


#: how many references ``reference`` keeps inside ``keeping_references`` (the most recent): the
#: forensics of one failure ask for the same one again and again (a divergence walk re-judges each
#: piece under each configuration it tries: 417 of 1,246 evaluations repeated one, 11 of 36 s, in a
#: two-bug model's distinct-failure search, tests/conformance/forensics/test_distinct_hidden.py, 2026-12-07)
REFERENCES_KEPT = 256
#: the references kept by the innermost ``keeping_references`` of this thread (a context variable:
#: a Dask worker runs searches in threads, each in its own scope)
_kept: "ContextVar[Optional[OrderedDict[bytes, Any]]]" = ContextVar("ftspec_references_kept", default=None)


@contextmanager
def keeping_references() -> Iterator[None]:
    """Inside, ``reference`` keeps the last ``REFERENCES_KEPT`` references it evaluated and gives
    them again (a run, a replay, a diagnosis: one tolerance model throughout). Nested, the
    outermost one's are kept; outside, every call evaluates (a test that changes the model between
    two calls sees the change)."""
    if _kept.get() is not None:
        yield
        return
    token = _kept.set(OrderedDict())
    try:
        yield
    finally:
        _kept.reset(token)


def _reference_key(entry: Entry, inputs: Mapping[str, Any], params: Mapping[str, Any], hyper: Mapping[str, int],
                   variant: VariantSet, dtype: str, precision: str, lanes: int) -> bytes:
    """Everything a reference depends on, hashed: the entry, the values with their names, types and
    shapes, the sizes, the variant set, the dtype, the precision and the lanes."""
    h = hashlib.sha256(json.dumps([entry.name, dtype, precision, lanes, sorted(hyper.items()),
                                   variant.to_json()]).encode())
    for group in (inputs, params):
        h.update(b"|")
        for k in sorted(group):
            v = np.ascontiguousarray(group[k])
            h.update(f"{k}:{v.dtype}:{v.shape}:".encode() + v.tobytes())
    return h.digest()


def reference(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], *,
              hyper: Mapping[str, int], variant: VariantSet, dtype: str,
              precision: str = "highest", lanes: int = LANES) -> Reference:
    """The spec's outputs and per-element tolerances for inputs already rounded to ``dtype``
    (``lanes``: Monte Carlo lanes, ``LANES`` but for a search's screen, ``SCREEN_LANES``).

    Raises ``SpecError`` if the spec refuses the inputs (``ToleranceModelError`` where it cannot
    bound them). A reference is a function of its arguments (its Monte Carlo draws are seeded by
    them), so inside ``keeping_references`` the last ``REFERENCES_KEPT`` are kept and given
    again, the same object, its arrays read-only: callers read a Reference, never change it.
    """
    kept = _kept.get()
    if kept is None:
        return _evaluated(entry, inputs, params, hyper=hyper, variant=variant, dtype=dtype, precision=precision,
                          lanes=lanes)
    key = _reference_key(entry, inputs, params, hyper, variant, dtype, precision, lanes)
    if key in kept:
        kept.move_to_end(key)
        found = kept[key]
    else:
        try:
            found = _evaluated(entry, inputs, params, hyper=hyper, variant=variant, dtype=dtype,
                               precision=precision, lanes=lanes)
            for group in (found.outputs, found.bound, found.spread):  # kept: a write would change it for all
                for v in group.values():
                    if isinstance(v, np.ndarray):
                        v.setflags(write=False)
        except (SpecError, ToleranceModelError) as exc:
            found = exc
        kept[key] = found
        if len(kept) > REFERENCES_KEPT:
            kept.popitem(last=False)
    if isinstance(found, (SpecError, ToleranceModelError)):
        raise found.with_traceback(None)
    return found


def _evaluated(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], *,
               hyper: Mapping[str, int], variant: VariantSet, dtype: str, precision: str, lanes: int) -> Reference:
    """``reference``, evaluated."""
    fmt = FORMATS[dtype]
    spec_in, spec_par = _lists(inputs), _lists(params)
    ref = evaluate(entry.name, spec_in, spec_par, hyper=hyper, variant=variant)
    seed = _seed(entry, inputs, params, variant, dtype)
    mc = _numbers(entry, dtype, precision, seed, lanes=lanes)
    with np.errstate(all="ignore"):
        got = evaluate(entry.name, spec_in, spec_par, hyper=hyper, variant=variant, numbers=mc)
    specs, outputs, bound, spread = _bounded(entry, ref, lambda name: lanes_array(got[name], lanes),
                                             hyper=hyper, variant=variant, dtype=dtype)
    sampled = None
    if entry.trace is not None:
        sampled = sampled_judge(entry, spec_in, spec_par, hyper=hyper, variant=variant, dtype=dtype,
                                numbers=lambda: _numbers(entry, dtype, None, seed), lanes=LANES,
                                safety=SAFETY[dtype])
    return Reference(outputs, bound, spread, mc.max_abs, mc.max_abs <= RANGE_MARGIN * fmt.max, dtype, precision,
                     specs, sampled)


def references(entry: Entry, value_sets: Sequence[tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]], *,
               hyper: Mapping[str, int], variant: VariantSet, dtype: str,
               precision: str = "highest", lanes: int = LANES
               ) -> list[Union[Reference, SpecError, ToleranceModelError]]:
    """``reference`` of every value set of a block, (inputs, params) each, already rounded to ``dtype``;
    per value set its Reference, or the ``SpecError`` or ``ToleranceModelError`` it raises.

    The value sets share the block's structure: their inputs other than real ones (tokens,
    masks, lengths, rates) are equal. One evaluation of the spec in Monte Carlo arithmetic
    carries all of them (``MonteCarloNumbers(values=V)``): each value set has its own lane 0
    and its own perturbations, so it gets the spread it gets alone, up to the draws; and its
    own lane F, the spec in ``FLOAT`` (correctly rounded sums, the same library functions,
    the same branches), whose values are the binary64 reference ``reference`` takes, bit for
    bit (tests/conformance/core/test_blocks.py). Where the value sets cannot share one evaluation
    (they branch apart, or the spec refuses one of them), the spec in ``FLOAT`` sorts out the
    value sets it refuses and the others share a Monte Carlo evaluation; where even that
    fails (or the entry has sampled outputs), each is evaluated alone by ``reference``: the
    block only saves time. ``lanes``: as ``reference``'s (a search screens with ``SCREEN_LANES``).
    """
    how: dict[str, Any] = dict(hyper=hyper, variant=variant, dtype=dtype, precision=precision, lanes=lanes)
    if len(value_sets) < 2 or entry.trace is not None:
        return [_alone(entry, i, p, **how) for i, p in value_sets]
    groups: dict[bytes, list[int]] = {}
    for i, (inputs, params) in enumerate(value_sets):
        groups.setdefault(_structure(entry, inputs, params), []).append(i)
    if len(groups) > 1:  # value sets that differ in more than real numbers (a batch's masks): a block each
        grouped: list[Any] = [None] * len(value_sets)
        for members in groups.values():
            for i, r in zip(members, references(entry, [value_sets[i] for i in members], **how)):
                grouped[i] = r
        return grouped
    # lane F gives the binary64 values; through a backward pass it is a binary64 value of the same
    # mathematics but not ``FLOAT``'s bits, taken below float64 only (``LANE_F_MARGIN``)
    shared = _block(entry, value_sets, None, **how) if _lane_f_serves(entry, dtype) else None
    if shared is not None:
        return [r if r is not None else _alone(entry, *value_sets[i], **how) for i, r in enumerate(shared)]
    refs: list[Any] = []
    for inputs, params in value_sets:
        try:
            refs.append(evaluate(entry.name, _lists(inputs), _lists(params), hyper=hyper, variant=variant))
        except SpecError as exc:
            refs.append(exc)
    taken = [i for i, r in enumerate(refs) if not isinstance(r, SpecError)]
    block = _block(entry, [value_sets[i] for i in taken], [refs[i] for i in taken], **how) if len(taken) > 1 else None
    out: list[Any] = []
    for i, r in enumerate(refs):
        if isinstance(r, SpecError):
            out.append(r)
        elif block is not None and block[taken.index(i)] is not None:
            out.append(block[taken.index(i)])
        else:
            out.append(_alone(entry, *value_sets[i], **how))
    return out


def _structure(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray]) -> bytes:
    """What value sets must share to share one evaluation (``_block``): every input that is not a
    real number (tokens, masks, lengths), and the parameters' names."""
    h = hashlib.sha256(json.dumps(list(params)).encode())
    for spec in entry.inputs:
        if not spec.is_real:
            a = np.ascontiguousarray(inputs[spec.name])
            h.update(spec.name.encode() + repr((a.shape, a.dtype.str)).encode() + a.tobytes())
    return h.digest()


def _differentiates(entry: Entry) -> bool:
    """Whether evaluating ``entry`` runs a backward pass (gradients, SGD steps, training loops)."""
    return entry.family == "training" and not entry.name.endswith("_loss")


def _lane_f_serves(entry: Entry, dtype: str) -> bool:
    """Whether a block's lane F may stand for the spec in ``FLOAT``: always on a forward pass (its
    bits are ``FLOAT``'s); through a backward pass below float64 only (``LANE_F_MARGIN``)."""
    return not _differentiates(entry) or dtype != "float64"


def _alone(entry: Entry, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], **how: Any
           ) -> Union[Reference, SpecError, ToleranceModelError]:
    try:
        return reference(entry, inputs, params, **how)
    except (SpecError, ToleranceModelError) as exc:
        return exc


def _block(entry: Entry, value_sets: Sequence[tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]],
           refs: Optional[Sequence[Mapping[str, Any]]], *, hyper: Mapping[str, int], variant: VariantSet, dtype: str,
           precision: str, lanes: int = LANES) -> Optional[list[Optional[Reference]]]:
    """The Monte Carlo evaluation of ``references`` over ``value_sets``: a Reference per value set
    (None for one whose lanes it cannot bound), or None where they cannot share the evaluation.
    ``refs``: each value set's binary64 outputs (the spec in ``FLOAT``), or None to take them from
    lane F (then a refusal or a branch taken apart ends the shared evaluation)."""
    first_in, first_par = value_sets[0]
    shared = [s.name for s in entry.inputs if not s.is_real]
    if any(not np.array_equal(i[name], first_in[name]) for i, _ in value_sets for name in shared) or any(
            list(p) != list(first_par) for _, p in value_sets):
        return None
    # row j: number j of every value set (inputs in the entry's order, then parameters), each
    # value set's number over its lanes: the order in which ``evaluate`` converts them
    names = [("in", s.name) for s in entry.inputs if s.is_real] + [("par", k) for k in first_par]
    numbers = np.stack([np.concatenate([np.ravel(i[n] if where == "in" else p[n]) for where, n in names])
                        for i, p in value_sets], axis=-1) if names else np.empty((0, len(value_sets)))
    numbers = numbers.astype(np.float64)
    if not np.isfinite(numbers).all():  # the spec refuses it: its message comes from the value set alone
        return None
    v = len(value_sets)
    h = hashlib.sha256(json.dumps([entry.name, dtype, variant.to_json(), v]).encode())
    h.update(numbers.tobytes())
    mc = _numbers(entry, dtype, precision, int.from_bytes(h.digest()[:8], "little"), values=v, lanes=lanes)
    mc.feeding(np.repeat(numbers, mc.width, axis=-1))
    try:
        with np.errstate(all="ignore"):
            got = evaluate(entry.name, _lists(first_in), _lists(first_par), hyper=hyper, variant=variant, numbers=mc)
    except SpecError:
        return None
    except BLOCK_SPLITS:
        return None
    if mc.pending():
        return None
    specs = entry.output_specs(hyper, variant)
    if refs is None and any(s.kind != Kind.REAL for s in specs):
        return None
    arrays = {s.name: lanes_array(got[s.name], mc.total - 1).reshape(
        np.shape(got[s.name]) + (v, mc.width)) for s in specs if s.kind == Kind.REAL}
    fmt = FORMATS[dtype]
    ranges = mc.ranges()
    out: list[Optional[Reference]] = []
    for j in range(v):
        ref = refs[j] if refs is not None else {name: arr[..., j, mc.f] for name, arr in arrays.items()}
        try:
            specs, outputs, bound, spread = _bounded(entry, ref, lambda name: arrays[name][..., j, :lanes + 1],
                                                     hyper=hyper, variant=variant, dtype=dtype)
        except ToleranceModelError:
            out.append(None)
            continue
        if refs is None and _differentiates(entry):  # lane F is FLOAT's value to LANE_F_MARGIN of it
            bound = {name: b * (1.0 - LANE_F_MARGIN) for name, b in bound.items()}
        top = float(ranges[j])
        out.append(Reference(outputs, bound, spread, top, top <= RANGE_MARGIN * fmt.max, dtype, precision, specs))
    return out


def table() -> dict[str, Any]:
    """Every constant of the model, for reports and certificates."""
    return {
        "model": "monte-carlo-arithmetic",
        "lanes": LANES,
        "screen_lanes": SCREEN_LANES,
        "safety": dict(SAFETY),
        "gradient_safety": dict(GRADIENT_SAFETY),
        "transcendental_units": TRANSCENDENTAL_UNITS,
        "underflow": dict(UNDERFLOW),
        "unit_roundoff": {d: FORMATS[d].u for d in FORMATS},
        "precision_tiers": {k: v for k, v in PRECISION_TIERS.items()},
        "range_margin": RANGE_MARGIN,
    }
