"""The two baselines the harness is compared with on the bug zoo.

(a) **Fixtures only**: replay the golden fixtures (``conformance.fixture_replay``),
    as ONNX's backend tests do: a fixed set of inputs with stored outputs.
(b) **assert_close**: the same Hypothesis search (same strategies, seed and
    example budget, every other check unchanged) judged with
    ``torch.testing.assert_close``'s default tolerances instead of ftspec's
    derived ones: an element passes if |got − spec| ≤ atol + rtol·|spec|,
    with torch's defaults per dtype (NaN = NaN allowed; exact outputs exact;
    sampled tokens compared exactly, with no allowance at CDF boundaries).
    Implemented as a ``Runner`` whose references carry those bounds, so
    judging, batching, determinism and metamorphic checks all use them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Optional, Sequence

import numpy as np

from ftspec.conformance.core.calling import Prepared
from ftspec.conformance.core.case import Case
from ftspec.conformance.running.runner import Runner
from ftspec.conformance.core.tolerances import SCREEN_LANES, Reference
from ftspec.spec.registry import Entry

__all__ = ["ASSERT_CLOSE", "AssertCloseRunner", "assert_close_bound", "fixture_replay"]

#: torch.testing.assert_close defaults (rtol, atol) per dtype (PyTorch 2.x documentation)
ASSERT_CLOSE = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float16": (1e-3, 1e-5),
}


def assert_close_bound(ref: Reference) -> Reference:
    """``ref`` with every real output's bound replaced by atol + rtol·|spec| (exact outputs stay exact)."""
    rtol, atol = ASSERT_CLOSE[ref.dtype]
    bound = {}
    for name, want in ref.outputs.items():
        if np.asarray(want).dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                b = atol + rtol * np.abs(np.asarray(want, dtype=np.float64))
            bound[name] = np.where(np.isnan(b), 0.0, b)
        else:
            bound[name] = np.zeros(np.shape(want))
    return replace(ref, bound=bound, sampled=None)


class AssertCloseRunner(Runner):
    """The same search, judged with ``torch.testing.assert_close`` defaults."""

    distinct_failures = 0  # a baseline counts first failures (forensics/distinct_failures.py: the harness's)

    def reference_for(self, entry: Entry, prepared: Prepared, case: Case, dtype: str, precision: str) -> Reference:
        return assert_close_bound(super().reference_for(entry, prepared, case, dtype, precision))

    # the search takes its blocks' references through this one (a failure is confirmed alone, by
    # ``alone``, which takes ``reference_for``): without it the baseline was judged by the harness's bounds
    def references_for(self, entry: Entry, prepared: Sequence[Prepared], case: Case, dtype: str, precision: str,
                       lanes: int = SCREEN_LANES) -> list[Any]:
        return [assert_close_bound(r) if isinstance(r, Reference) else r
                for r in super().references_for(entry, prepared, case, dtype, precision, lanes)]


def fixture_replay(plugins: Sequence[tuple[str, Any]], algorithms: Sequence[str], dtypes: Sequence[str], *,
                   judge: str = "harness", timeout: float = 20.0) -> Optional[dict[str, Any]]:
    """Baseline (a) for one implementation: {ran, failed, killed, first, by_dtype} or None when unavailable.

    ``judge``: "harness" (the fixtures' expected values within ftspec's derived bounds, as
    ``replay_fixtures`` does) or "assert_close" (within torch's default rtol/atol: fixtures as ONNX's
    backend tests use them)."""
    try:
        from ftspec.conformance.running.fixture_replay import replay_fixtures
    except ImportError:
        return None
    from unittest import mock

    from ftspec.conformance.core import tolerances

    original = tolerances.reference

    def memo(entry: Any, inputs: Any, params: Any, **kw: Any) -> Reference:
        """The fixture's reference, computed once per process (every mutant replays the same fixtures)."""
        key = (entry.name, kw["dtype"], kw.get("precision", "highest"), kw["variant"].hash,
               tuple(sorted(kw["hyper"].items())), _digest(inputs), _digest(params))
        if key not in _REFERENCES:
            _REFERENCES[key] = original(entry, inputs, params, **kw)
        return _REFERENCES[key]

    # the replay reads the fixtures' stored bounds; a reduced-precision plugin's live ones go through memo
    adjust = assert_close_bound if judge == "assert_close" else None
    with mock.patch.object(tolerances, "reference", memo):
        results = replay_fixtures(plugins, algorithms=list(algorithms), dtypes=list(dtypes), timeout=timeout,
                                  adjust=adjust)
    failed = [r for r in results if not r.ok]
    first = None
    if failed:
        r = failed[0]
        first = {"case": r.case, "algorithm": r.algorithm, "dtype": r.dtype,
                 "message": r.message[:300], "ratio": r.ratio if math.isfinite(r.ratio) else "inf"}
    return {"judge": judge, "ran": len(results), "failed": len(failed), "killed": bool(failed), "first": first,
            "failing": sorted({f"{r.case}@{r.dtype}" for r in failed}),
            "by_dtype": {d: any(not r.ok for r in results if r.dtype == d) for d in dtypes}}


_REFERENCES: dict[tuple, Reference] = {}


def _digest(arrays: Any) -> bytes:
    import hashlib

    h = hashlib.sha256()
    for k in sorted(arrays):
        v = np.ascontiguousarray(arrays[k])
        h.update(k.encode() + str(v.dtype).encode() + str(v.shape).encode() + v.tobytes())
    return h.digest()
