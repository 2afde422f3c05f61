"""Replaying the golden fixtures against implementations.

Every fixture case is run on every implementation that covers its algorithm,
supports its variant set and dtype (float64 and float32: fixture inputs are
float32 values, so they are exact at both), on each of its devices. Each call
goes through ``execute.examine``, so the same checks as the search apply
(shape, dtype, NaN, mutation of arguments, determinism), against a
``Reference`` whose outputs are the fixture's stored expected values
(correctly rounded from 50-digit mpmath) and whose per-element bound is the
one the fixture stores for that dtype: the harness's derived tolerance
(``tolerances.reference``), rounded up to 12 bits, so the Monte Carlo model
is not re-run. A plugin declaring a reduced matmul precision (TF32), or
accumulation or softmax in a wider format at the fixture's dtype
(``Implementation.accumulation``), gets a live derivation under its
declaration instead: the stored bounds assume full precision in the dtype.

A plugin that does not declare the fixture's variant set is still replayed
on it when a declared set differs from the fixture's only in switches the
algorithm does not read (``entry.switches``) or in switches that change
rounding but not the mathematics (``spec.variants.ROUNDING_ONLY`` and
``SAME_MATHEMATICS``: the expected values are the same exact function). The case then runs under the
declared set, and where a rounding-only switch of the algorithm differs, the
bound is derived live for the declared set (the stored one is the fixture
set's). The result records the declared set and which bounds judged it.

Nothing stops the replay: an unreadable case, a harness error or a plugin
that raises, hangs or lists no devices becomes a failed ``FixtureResult``.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Optional, Sequence

import numpy as np

from ftspec.impls.api import Implementation, select_devices
from ftspec.spec.entry import Entry, Kind
from ftspec.spec import variants as _variants
from ftspec.spec.variants import ROUNDING_ONLY, VariantSet

__all__ = ["DTYPES", "FixtureResult", "applicable_cases", "replay_fixtures", "replay_variant", "sample_cases"]

#: the dtypes fixtures are replayed at (their inputs are exact in both)
DTYPES = ("float64", "float32")
DEFAULT_TIMEOUT = 60.0
#: ``sample_cases`` keeps about one case in this many (plus every algorithm's paper case)
SAMPLE_EVERY = 4


@dataclass
class FixtureResult:
    """One fixture case on one implementation, dtype and device."""

    case: str
    algorithm: str
    impl: str
    dtype: str
    device: str
    ok: bool
    ratio: float = 0.0  # worst |got − expected| / bound (0: exact; inf: a check other than tolerance failed)
    message: str = ""
    variant: str = ""
    checks: list[str] = field(default_factory=list)
    seconds: float = 0.0
    declared: str = ""  # the declared variant set it ran under, when not the fixture's own (describe())
    bounds: str = ""  # "stored" (the fixture's) or "live" (derived for this run); "" if never judged

    def to_dict(self) -> dict[str, Any]:
        r = self.ratio
        return {
            "case": self.case,
            "algorithm": self.algorithm,
            "variant": self.variant,
            "implementation": self.impl,
            "dtype": self.dtype,
            "device": self.device,
            "ok": bool(self.ok),
            "ratio": float(r) if math.isfinite(r) else ("inf" if r > 0 else "-inf" if r < 0 else "nan"),
            "message": self.message,
            "checks": list(self.checks),
            "seconds": round(float(self.seconds), 6),
            "declared_variant": self.declared,
            "bounds": self.bounds,
        }


@dataclass
class _Target:
    label: str
    impl: Implementation
    devices: list[str]
    error: Optional[str] = None
    hung: set = field(default_factory=set)  # devices whose calls hung


def _targets(plugins: Sequence[tuple[str, Implementation]], devices: Optional[Sequence[str]]) -> list[_Target]:
    out = []
    for label, impl in plugins:
        try:
            found = [str(d) for d in impl.devices()]
        except Exception as exc:  # noqa: BLE001 - the plugin's failure, reported per case below
            out.append(_Target(label, impl, [], f"devices() raised {type(exc).__name__}: {exc}"))
            continue
        out.append(_Target(label, impl, select_devices(found, devices)))
    return out


def replay_variant(impl: Implementation, entry: Optional[Entry], fixture: VariantSet,
                   algorithm: Optional[str] = None) -> Optional[VariantSet]:
    """The variant set ``impl`` is replayed under on a fixture of ``algorithm`` (default
    ``entry.name``) made under ``fixture``, or None.

    The fixture's own set if ``impl`` declares it for the algorithm (or "all"); else the first set
    declared for it whose differences from it, among the switches ``entry`` reads, all change
    rounding only."""
    name = algorithm if algorithm is not None else (entry.name if entry is not None else "")
    declared = impl.variants_for(name)
    if declared == "all" or fixture in declared:
        return fixture
    if entry is None:
        return None
    for v in declared:
        if all(_rounding_only(k, getattr(fixture, k), getattr(v, k)) for k in _read(entry, v, fixture)):
            return v
    return None


def _read(entry: Entry, a: VariantSet, b: VariantSet) -> set[str]:
    """The switches ``entry`` reads on which ``a`` and ``b`` differ (not one it reads only under another's
    value that neither set has: ``Entry.read_with``, ε at a causal self-attention without QK-norm)."""
    return (set(a.differences(b)) & set(entry.switches)) - (entry.unread(a) & entry.unread(b))


def _rounding_only(switch: str, a: Any, b: Any) -> bool:
    """Whether values ``a`` and ``b`` of ``switch`` are the same mathematics (spec/variants.py)."""
    same = getattr(_variants, "SAME_MATHEMATICS", {})
    return switch in ROUNDING_ONLY or same.get((switch, a), a) == same.get((switch, b), b)


def _covers(t: _Target, algorithm: str, dtype: str, variant, hyper=None) -> Optional[VariantSet]:
    """The variant set ``t`` is replayed under on the case, or None if it is not replayed: a case
    outside the plugin's declared limits is not (the certificate counts those,
    conformance/session/certificate/verifying.py)."""
    from ftspec.spec.registry import REGISTRY

    try:
        if not (algorithm in t.impl.algorithms and dtype in t.impl.dtypes_for(algorithm)
                and (hyper is None or t.impl.admits(algorithm, hyper))):
            return None
        return replay_variant(t.impl, REGISTRY.get(algorithm), variant, algorithm)
    except Exception:  # noqa: BLE001 - a plugin that cannot say is not replayed on the case
        return None


def sample_cases(records: Sequence[Mapping[str, Any]], every: int = SAMPLE_EVERY) -> list[str]:
    """A fixed sample of the manifest's case ids: each algorithm's paper case, and about one case
    in ``every`` of the rest, chosen by a hash of the id (the same on every machine and run)."""
    out = []
    for r in records:
        cid = str(r["id"])
        if cid.endswith("--paper") or hashlib.sha256(cid.encode()).digest()[0] % every == 0:
            out.append(cid)
    return out


def applicable_cases(plugins: Sequence[tuple[str, Implementation]], cases: Sequence[tuple[str, str]], *,
                     dtypes: Optional[Sequence[str]] = None, directory: Optional[Path | str] = None
                     ) -> list[tuple[str, str]]:
    """The (id, algorithm) pairs of ``cases`` that ``replay_fixtures`` would replay on at least one
    of ``plugins`` at one of ``dtypes``: an algorithm it implements, at a dtype it declares there,
    within its limits and under a variant set it is replayed on (``_covers``), read from the
    manifest alone (no case file is opened). A case whose record cannot be read is kept: the replay
    reports it as failed. So a progress line counts what the replay does ("replaying 12 golden
    fixture cases"), not the manifest's every case of other algorithms (1103 for a plugin of two
    norms). A plugin whose ``devices()`` fails keeps the cases of its algorithms: the replay of
    those is where its failure is reported (``replay_fixtures``' "(all)" result)."""
    from ftspec.spec.variants import VariantSet

    from ..core.fixture_files import FixtureError, load_manifest

    try:
        manifest = load_manifest(directory)
    except FixtureError:
        return list(cases)  # the replay reports the unreadable set
    records = {str(r.get("id")): r for r in manifest.get("cases", [])}
    variants = manifest.get("variants", {})
    targets = _targets(plugins, None)
    broken = {a for t in targets if t.error is not None for a in t.impl.algorithms}
    targets = [t for t in targets if t.error is None]
    wanted = [d for d in DTYPES if not dtypes or d in dtypes]
    parsed: dict[str, Any] = {}
    out = []
    for cid, algorithm in cases:
        record = records.get(cid)
        try:
            v_hash = str(record["variant"])  # type: ignore[index]  # None: caught below, kept
            if v_hash not in parsed:
                parsed[v_hash] = VariantSet.from_json(variants[v_hash]["json"])
            hyper = {k: int(v) for k, v in record["hyper"].items()}  # type: ignore[index]
        except Exception:  # noqa: BLE001 - unreadable here: the replay says what is wrong with it
            out.append((cid, algorithm))
            continue
        if algorithm in broken or any(_covers(t, algorithm, d, parsed[v_hash], hyper) is not None
                                      for t in targets for d in wanted):
            out.append((cid, algorithm))
    return out


def replay_fixtures(plugins: Sequence[tuple[str, Implementation]], *, algorithms: Optional[Sequence[str]] = None,
                    dtypes: Optional[Sequence[str]] = None, devices: Optional[Sequence[str]] = None,
                    directory: Optional[Path | str] = None, timeout: float = DEFAULT_TIMEOUT,
                    cases: Optional[Collection[str]] = None,
                    progress: Optional[Callable[[FixtureResult], None]] = None,
                    adjust: Optional[Callable[[Any], Any]] = None) -> list[FixtureResult]:
    """Replay every fixture case (filtered by algorithm and, with ``cases``, by id) on every plugin;
    one result per case × plugin × dtype × device.

    ``adjust``, if given, maps each ``Reference`` before judging (the bench's assert_close
    baseline replaces the bounds with torch's defaults)."""
    from ..core.fixture_files import FixtureError, load_case, load_manifest

    results: list[FixtureResult] = []

    def emit(r: FixtureResult) -> None:
        results.append(r)
        if progress is not None:
            try:
                progress(r)
            except Exception:  # noqa: BLE001 - a failing progress display must not stop the replay
                pass

    wanted_dtypes = [d for d in DTYPES if not dtypes or d in dtypes]
    wanted_algorithms = set(algorithms) if algorithms else None
    targets = _targets(plugins, devices)
    try:
        manifest = load_manifest(directory)
    except FixtureError as exc:
        for t in targets:
            emit(FixtureResult("(manifest)", "-", t.label, "-", "-", False, math.inf,
                               f"fixtures unavailable: {exc}"))
        return results
    for t in targets:
        if t.error:
            emit(FixtureResult("(all)", "-", t.label, "-", "-", False, math.inf, t.error))
    for record in manifest.get("cases", []):
        algorithm = str(record.get("algorithm", "?"))
        if wanted_algorithms is not None and algorithm not in wanted_algorithms:
            continue
        case_id = str(record.get("id", "?"))
        if cases is not None and case_id not in cases:
            continue
        try:
            fx = load_case(record, directory, variants=manifest.get("variants", {}))
        except Exception as exc:  # noqa: BLE001 - a bad case must not stop the replay
            message = f"fixture unreadable: {exc}"
            for t in targets:
                if t.error is None and algorithm in t.impl.algorithms:
                    for dtype in (d for d in wanted_dtypes if d in t.impl.dtypes_for(algorithm)):
                        for device in t.devices:
                            emit(FixtureResult(case_id, algorithm, t.label, dtype, device, False, math.inf, message))
            continue
        for dtype in wanted_dtypes:
            groups: dict[VariantSet, list[_Target]] = {}  # by the variant set each target runs under
            for t in targets:
                v = _covers(t, algorithm, dtype, fx.variant, fx.hyper) if t.error is None else None
                if v is not None:
                    groups.setdefault(v, []).append(t)
            for v, covering in groups.items():
                _replay_case(fx, dtype, covering, timeout, emit, adjust, variant=v)
    return results


def _stored_reference(fx, entry, dtype: str):
    """The fixture's expected outputs and its stored ``bound.<dtype>`` as a harness ``Reference``.

    The stored bounds are the harness's own for the case, rounded up to 12 bits (FORMAT.md §8;
    tests/fixtures/test_committed.py and ``fixtures regenerate --check`` hold them to that), so
    replaying with them judges as a live derivation would, without re-running the Monte Carlo
    model. Sampled tokens must match exactly: the generator kept every variate away from the CDF
    boundaries and checked that the stored tokens are the only ones the harness accepts at full
    precision (FORMAT.md §11).
    """
    from ..core.tolerances import GRADIENT_SAFETY, SAFETY, Reference

    specs = tuple(entry.output_specs(dict(fx.hyper), fx.variant))
    stored = fx.bounds.get(dtype, {})
    missing = [s.name for s in specs if s.name not in fx.expected or s.name not in stored]
    if missing:
        raise ValueError(f"the fixture lacks expected outputs or {dtype} bounds for {missing}")
    safety = (GRADIENT_SAFETY if entry.family == "training" and not entry.name.endswith("_loss") else SAFETY)[dtype]
    outputs, bound, spread = {}, {}, {}
    for spec in specs:
        want = np.array(fx.expected[spec.name])
        b = np.asarray(stored[spec.name], dtype=np.float64)
        if b.shape != want.shape or not (b >= 0).all():
            raise ValueError(f"bound.{dtype}.{spec.name} has shape {b.shape} (expected {want.shape}) or a "
                             f"negative or NaN entry")
        if spec.kind == Kind.REAL:
            outputs[spec.name] = want.astype(np.float64)
        else:  # masks, flags: bool; tokens, lengths: int64; exact
            outputs[spec.name] = want.astype(bool if spec.kind in (Kind.MASK, Kind.BOOL) else np.int64)
            b = np.zeros(want.shape)
        bound[spec.name] = b
        spread[spec.name] = b / safety  # about: the stored bound is SAFETY × spread, rounded up
    return Reference(outputs=outputs, bound=bound, spread=spread, max_intermediate=math.nan, in_range=True,
                     dtype=dtype, precision="highest", specs=specs, sampled=None,
                     extra={"fixture": fx.id, "bounds": "stored"})


def _live_reference(fx, entry, prepared, dtype: str, precision: str, variant: Optional[VariantSet] = None):
    """A reduced matmul precision (e.g. TF32), or a declared set that rounds differently from the
    fixture's, has no stored bound: derive it (for ``variant``, default the fixture's), and judge
    sampled tokens against the live distributions; the expected values stay the fixture's."""
    from ..core.tolerances import Reference, reference

    variant = fx.variant if variant is None else variant
    rounds_differently = variant != fx.variant
    live = reference(entry, prepared.inputs, prepared.params, hyper=dict(fx.hyper), variant=variant,
                     dtype=dtype, precision=precision)
    missing = [k for k in live.bound if k not in fx.expected]
    if missing:
        raise ValueError(f"the fixture lacks expected outputs {missing}")
    return Reference(outputs={k: np.array(fx.expected[k]) for k in live.outputs},
                     bound=live.bound, spread=live.spread, max_intermediate=live.max_intermediate,
                     in_range=live.in_range, dtype=dtype, precision=precision, specs=live.specs,
                     sampled=live.sampled if precision != "highest" or rounds_differently else None,
                     extra={"fixture": fx.id, "bounds": "live"})


def _reference(fx, entry, prepared, dtype: str, precision: str, variant: Optional[VariantSet] = None):
    """Stored bounds when they hold for this run (full precision, and the run's variant set differs
    from the fixture's in no switch the algorithm reads); a live derivation otherwise."""
    variant = fx.variant if variant is None else variant
    same_rounding = not _read(entry, variant, fx.variant)
    if precision == "highest" and dtype in fx.bounds and same_rounding:  # what the stored bounds assume (FORMAT.md §8)
        return _stored_reference(fx, entry, dtype)
    return _live_reference(fx, entry, prepared, dtype, precision, variant)


def _replay_case(fx, dtype: str, targets: list[_Target], timeout: float, emit_all: Callable[[FixtureResult], None],
                 adjust: Optional[Callable[[Any], Any]] = None, variant: Optional[VariantSet] = None) -> None:
    from ftspec.spec.registry import REGISTRY

    from ..core.case import Case
    from ..core.examining import precision_of, rounded
    from ..core.execute import Member, examine

    if not targets:
        return
    label = fx.variant_label
    variant = fx.variant if variant is None else variant
    declared = "" if variant == fx.variant else variant.describe()

    def emit(r: FixtureResult) -> None:  # every result of this case names the set it ran under
        r.declared = declared
        emit_all(r)
    refs: dict[str, Any] = {}
    try:
        entry = REGISTRY[fx.algorithm]
        prepared = rounded(entry, dtype, inputs=fx.inputs, params=fx.params)
        for given, values in ((fx.inputs, prepared.inputs), (fx.params, prepared.params)):
            for k, v in values.items():
                if not np.array_equal(v, given[k]):
                    raise ValueError(f"{k} is not exactly representable in {dtype}")
        case = Case(fx.algorithm, dict(fx.hyper), variant, prepared.inputs, prepared.params, style="fixture")
    except Exception as exc:  # noqa: BLE001
        for t in targets:
            for device in t.devices:
                emit(FixtureResult(fx.id, fx.algorithm, t.label, dtype, device, False, math.inf,
                                   f"harness error preparing the case: {type(exc).__name__}: {exc}", label))
        return
    for t in targets:
        # the tier and any mixed-precision declaration at this dtype: stored bounds assume neither
        precision = precision_of(t.impl, dtype)
        if precision not in refs:
            try:
                refs[precision] = _reference(fx, entry, prepared, dtype, precision, variant)
                if adjust is not None:
                    refs[precision] = adjust(refs[precision])
            except Exception as exc:  # noqa: BLE001
                refs[precision] = exc
        ref = refs[precision]
        for device in t.devices:
            if isinstance(ref, Exception):
                emit(FixtureResult(fx.id, fx.algorithm, t.label, dtype, device, False, math.inf,
                                   f"harness error computing the tolerance: {type(ref).__name__}: {ref}", label))
                continue
            if device in t.hung:
                emit(FixtureResult(fx.id, fx.algorithm, t.label, dtype, device, False, math.inf,
                                   "skipped: an earlier call on this device hung", label))
                continue
            started = time.perf_counter()
            try:
                outcome = examine(Member(t.label, t.impl, device), case, prepared.inputs, prepared.params, ref,
                                  dtype=dtype, timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - examine reports plugin errors; anything else is ours
                emit(FixtureResult(fx.id, fx.algorithm, t.label, dtype, device, False, math.inf,
                                   f"harness error: {type(exc).__name__}: {exc}", label,
                                   seconds=time.perf_counter() - started))
                continue
            j = outcome.judgement
            if outcome.timed_out:
                t.hung.add(device)
            message = "; ".join(f"{f.check}: {f.message}" for f in j.findings)
            ratio = j.ratio if j.ok else max(j.ratio, max((f.ratio for f in j.findings), default=math.inf))
            emit(FixtureResult(fx.id, fx.algorithm, t.label, dtype, device, j.ok, float(ratio), message, label,
                               list(outcome.checks), time.perf_counter() - started,
                               bounds=str(getattr(ref, "extra", {}).get("bounds", ""))))
