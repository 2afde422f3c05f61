"""Judging sampled tokens: exact, except within rounding of a CDF boundary.

Sampling is deterministic given the variates, but a variate u that lies
within rounding error of a CDF boundary c_v makes two tokens equally correct:
an implementation in float32 may compute c_v on the other side of u. So for
every step the harness evaluates the spec's distribution *given the
implementation's own prefix* (the entry's ``trace``) in Monte Carlo
arithmetic at the implementation's dtype, widens each token's CDF interval
[c_{v-1}, c_v) by the tolerance of its end points (SAFETY × spread), and
accepts the produced token if u falls in its widened interval. Steps where
more than one token is acceptable are counted as ambiguous. A CDF value the
Monte Carlo arithmetic lost in some lanes (NaN, finite in binary64) takes its
margin from the other lanes; lost in every lane, it has no bound.

For τ = 0 (argmax, ties to the lowest ID) a token is acceptable if rounding
within the tolerances can make it the lowest-ID maximum: an exact tie
accepts only the lowest ID. For τ = ∞ (uniform, ⌊u·N_V⌋) a token is
acceptable if u is within the dtype's rounding of its interval
[v/N_V, (v+1)/N_V).

The tolerance model (``tolerances.reference``) builds this judge and hands
in its Monte Carlo arithmetic, lane count and safety factor, so this module
does not import the model back (no import cycle).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ftspec.spec.evaluation import evaluate_trace
from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from .dtypes import FORMATS
from .findings import Finding, Judgement
from .rounding import MonteCarloNumbers, lanes_array

__all__ = ["sampled_judge"]


def _lanes(values: list, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(binary64 values, Monte Carlo spreads). A lane that is NaN where the binary64 value is
    finite met 0/0 or ∞ − ∞ under its perturbations: the spread is taken over the other lanes,
    and is unbounded when every lane is lost; never 0. Read as 0 (as it once was), it refused a
    token that rounding moves across that boundary (ed_inference at float32 with d_e = 1,
    tests/conformance/core/false_failures/sampling). A NaN binary64 value is the spec's own: 0."""
    arr = lanes_array(values, k)
    with np.errstate(invalid="ignore"):
        gaps = np.abs(arr[..., 1:] - arr[..., :1])
        spread = np.max(np.where(np.isnan(gaps), -np.inf, gaps), axis=-1)  # NaN lanes left out
    spread = np.where(spread == -np.inf, np.inf, spread)  # every lane lost: no bound
    return arr[..., 0], np.where(np.isnan(arr[..., 0]), 0.0, spread)


def _acceptable(record: Mapping[str, Any], k: int, safety: float, u_dtype: float) -> tuple[list[int], str]:
    """Tokens the step accepts, and a description of the spec's distribution there."""
    u = float(record["u"].x[0]) if hasattr(record["u"], "x") else float(record["u"])
    kind = record["kind"]
    if kind == "uniform":
        n = int(record["values"][0])
        m = 4.0 * u_dtype
        ok = [v for v in range(n) if v / n - m <= u < (v + 1) / n + m]
        return ok, f"uniform over {n} tokens, u = {u!r}"
    values, spread = _lanes(record["values"], k)
    margin = safety * spread
    if kind == "argmax":
        # t is acceptable if rounding within the margins can make it the lowest-ID maximum:
        # at least every later token, and strictly above every earlier one (ties go to the lowest ID).
        high, low = values + margin, values - margin
        ok = [t for t in range(len(values))
              if all(high[t] >= low[w] for w in range(t + 1, len(values)))
              and all(high[t] > low[w] for w in range(t))]
        return ok, f"argmax of p = {np.array2string(values, precision=6)} (ties to the lowest ID)"
    c, n = values, len(values)
    ok = []
    for v in range(n):
        start = float(c[v - 1] - margin[v - 1]) if v > 0 else -math.inf
        end = float(c[v] + margin[v]) if v < n - 1 else math.inf
        if start <= u < end:
            ok.append(v)
    return ok, f"CDF c = {np.array2string(c, precision=6)} (margins up to {margin.max():.2g}), u = {u!r}"


def sampled_judge(entry: Entry, inputs: Mapping[str, Any], params: Mapping[str, Any], *,
                  hyper: Mapping[str, int], variant: VariantSet, dtype: str,
                  numbers: Callable[[], MonteCarloNumbers], lanes: int,
                  safety: float) -> Callable[[Mapping[str, np.ndarray]], Judgement]:
    """A function judging an implementation's produced outputs for this case.

    ``numbers`` makes a fresh Monte Carlo arithmetic of ``lanes`` lanes at
    ``dtype`` (the same seed each time, so a verdict is reproducible);
    ``safety`` × spread widens each CDF end point.
    """
    fmt = FORMATS[dtype]
    cache: dict[bytes, Judgement] = {}

    def judge_produced(produced: Mapping[str, np.ndarray]) -> Judgement:
        key = b"".join(np.ascontiguousarray(produced[k]).tobytes() for k in sorted(produced))
        if key in cache:
            return cache[key]
        j = Judgement()
        plain = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in produced.items()}
        mc = numbers()
        try:
            with np.errstate(all="ignore"):
                steps = evaluate_trace(entry.name, inputs, params, plain, hyper=hyper, variant=variant, numbers=mc)
        except (IndexError, ValueError, TypeError) as exc:  # tokens out of range, wrong lengths...
            j.findings.append(Finding("sampling", f"sampled outputs cannot be followed: {type(exc).__name__}: {exc}"))
            cache[key] = j
            return j
        for i, record in enumerate(steps):
            if record["kind"] == "structure":
                j.findings.append(Finding("sampling", record["message"]))
                break
            ok, where = _acceptable(record, lanes, safety, fmt.u)
            token = int(record["token"])
            if token not in ok:
                j.findings.append(Finding(
                    "sampling", f"step {i}: produced token {token}, but the spec's distribution given the same "
                                f"prefix accepts only {ok}: {where}"))
                break
            if len(ok) > 1:
                j.ambiguous += 1
        cache[key] = j
        return j

    return judge_produced
