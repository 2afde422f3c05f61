"""Each bundled implementation conforms on fixed small cases, judged by the harness.

The cases: every registry entry (forward, training and inference) under the
paper's variant set, each relevant switch moved to each other value, the
presets and the combinations that only bite together (tests/impls/cases.py).
Each call goes through the harness's own checks (``execute.examine``: shape,
dtype, NaN, |got − spec| within the derived tolerance of
``tolerances.reference``, sampled tokens by the token judge, determinism,
arguments unchanged, the metamorphic checks) so a verdict here means what a
verdict of ``ftspec run`` means. What each case is checked at, so that each
claim is checked once:

- float16 on NumPy, every case; on PyTorch float16 and bfloat16 in turn,
  one of them per case (``LOW_TURN``: both were every case until spec
  2.3.0's entries pushed ``make test`` past its budget again). The golden
  fixtures cover float64 and float32 only. JAX at these dtypes is the
  conformance suite's (one XLA compile per case and dtype is too slow here);
- float64 and float32, on all three: only the cases whose (algorithm,
  variant set) the golden fixtures lack; the others are replayed from the
  fixtures, with the same judge, on all three (tests/fixtures/test_replay.py;
  JAX replays a fixed sample of the training and inference cases);
- a batch of two (the paper's set, batchable entries) at each of those
  dtypes, and at float64 on all three: the fixtures have no batches.
"""

from __future__ import annotations

import dataclasses
import shlex
import zlib

import pytest

from ftspec.conformance.core.examining import examine_case, judged_case
from ftspec.conformance.core.execute import Member, examine
from ftspec.conformance.core.tolerances import keeping_references, reference
from ftspec.impls.discovery import load
from ftspec.spec import PAPER, SpecError, evaluate
from ftspec.spec.registry import REGISTRY

from .cases import FORWARD, TRAINING, all_cases, make_case

BUNDLED = ("numpy", "torch", "jax")
LOW = ("float16", "bfloat16")
FULL = ("float64", "float32")
TIMEOUT = 120.0

CAUSES = {
    "spec": "a convention other than the variant set's, or precision lost (e.g. a sum in a lower dtype)",
    "dtype": "the result was computed or returned in another dtype than the call's",
    "shape": "a transposed layout (tokens are columns) or a missing batch axis",
    "nan": "a NaN from an overflow, a 0/0, or an empty-query mode handled differently",
    "overflow": "an intermediate that overflows the dtype",
    "exception": "the plugin raised: an unsupported variant or dtype path",
    "missing": "an output the entry lists is not returned",
    "determinism": "two identical calls differ (uninitialised memory or a racy reduction)",
    "mutation": "the plugin wrote into its argument",
    "batch": "the batched call disagrees with the per-example calls",
    "sampling": "the inverse-CDF draw differs from the spec's (IDs in increasing order, u < c_v)",
    "metamorphic": "a property of the implementation against itself failed (η = 0, unreachable gradients)",
    "timeout": "the call hung",
}


def _fixture_pairs() -> set[tuple[str, str]]:
    """(algorithm, variant hash) of every golden fixture case; empty if the set is unreadable."""
    try:
        from ftspec.fixtures import load_manifest

        return {(str(c["algorithm"]), str(c["variant"])) for c in load_manifest()["cases"]}
    except Exception:  # noqa: BLE001 - no fixtures: every case is checked here at every dtype
        return set()


IMPLS = {name: load(name) for name in BUNDLED}
CASES = list(all_cases(FORWARD)) + list(all_cases(TRAINING))
COVERED = _fixture_pairs()


#: the implementations with both low dtypes, which check one of them per case, in turn
LOW_TURN = {"torch"}


def _plan(case) -> list[tuple[str, str, bool]]:
    """(implementation, dtype, with a batch) for one case."""
    in_fixtures = (case.algorithm, case.variant.hash) in COVERED
    batch = case.variant == PAPER and case.entry.batchable and bool(case.entry.inputs)
    low = LOW[zlib.crc32(case.id.encode()) % len(LOW)]  # the turn: a fixed function of the case
    out = []
    for name, impl in IMPLS.items():
        dtypes = [d for d in impl.dtypes if (d in LOW and name != "jax" and (name not in LOW_TURN or d == low))
                  or (d in FULL and not in_fixtures)]
        if batch and "float64" not in dtypes:
            dtypes.append("float64")
        out += [(name, d, batch) for d in dtypes]
    return out


def _ids(case) -> str:
    return case.id.replace(" ", "")


@pytest.mark.parametrize("impl_name", BUNDLED)
def test_covers_every_algorithm_and_dtype(impl_name):
    impl = IMPLS[impl_name]
    missing = sorted(set(REGISTRY) - set(impl.algorithms))
    assert sorted(impl.algorithms) == sorted(REGISTRY), f"{impl_name} misses {missing}"
    assert {"float64", "float32", "float16"} <= set(impl.dtypes)
    assert impl.variants == "all"
    devices = impl.devices()
    assert devices and len(devices) == len(set(devices))
    assert any(d == "cpu" or d.startswith("cpu:") for d in devices)


def test_every_fixed_case_is_checked_somewhere():
    """No case falls between the two: each is judged here, or its (algorithm, variant set) is in the
    fixtures that test_replay.py replays on all three implementations."""
    for case in CASES:
        plan = _plan(case)
        full = {d for _, d, _ in plan if d in FULL}
        assert full == set(FULL) or (case.algorithm, case.variant.hash) in COVERED, case.id
        assert {n for n, d, _ in plan if d in LOW} == {"numpy", "torch"}, case.id
    turns = {d for case in CASES for n, d, _ in _plan(case) if n in LOW_TURN and d in LOW}
    assert turns == set(LOW)  # each low dtype has its share of the cases


@pytest.mark.parametrize("case", CASES, ids=_ids)
@keeping_references()  # each plugin is judged against the dtype's one reference (evaluated once)
def test_conforms_on_fixed_case(case, request):
    entry = case.entry
    extra = make_case(entry, case.variant, seed=7) if any(b for _, _, b in _plan(case)) else None
    refs: dict = {}
    examined, skipped, failures = 0, [], []
    plan = _plan(case)
    for name, dtype, batched in plan:
        if dtype not in refs:  # whether the case can be judged at dtype at all
            try:  # a screen at the spec's own precision; each plugin is examined at its own below
                ref = judged_case(case, dtype, "highest", batch=False).reference
            except SpecError as exc:  # e.g. a column that rounds to a constant before an ε-free norm
                refs[dtype] = f"the spec refuses the case rounded to {dtype}: {exc}"
            else:
                refs[dtype] = None if ref.in_range else f"out of {dtype}'s range"
        why = refs[dtype]
        if why:
            skipped.append(f"{dtype}: {why}")
            other = [d for d in LOW if d != dtype]
            if name in LOW_TURN and dtype in LOW and (name, other[0], batched) not in plan:
                plan.append((name, other[0], batched))  # the turn's dtype cannot hold the case: the other one
            continue
        # examined as every caller examines a case: at the plugin's declared precision, the batch with it
        examined_case = dataclasses.replace(case, batch=[extra.inputs] if batched else [])
        outcome = examine_case(Member(name, IMPLS[name], "cpu"), examined_case, dtype, timeout=TIMEOUT)
        examined += 1
        for f in outcome.judgement.findings[:1]:
            failures.append(f"{name} at {dtype} on cpu: {f.check}: {f.message}\n"
                            f"  likely cause: {CAUSES.get(f.check, 'see the message')}")
    if failures:
        pytest.fail(f"{case.describe()}\n" + "\n".join(failures)
                    + f"\nreproduce: .venv/bin/python -m pytest {shlex.quote(request.node.nodeid)}", pytrace=False)
    if not examined:
        pytest.skip("nothing to check: " + "; ".join(sorted(set(skipped))))


@pytest.mark.parametrize("impl_name", BUNDLED)
@pytest.mark.parametrize("name", ["attention", "mh_attention"])
def test_empty_query_error_variant_raises(impl_name, name):
    impl = IMPLS[impl_name]
    case = make_case(REGISTRY[name], PAPER, empty_query=True)
    with pytest.raises(SpecError):
        evaluate(name, case.spec_inputs(), case.spec_params(), hyper=case.hyper)
    outcome = examine(Member(impl_name, impl, "cpu"), case, case.inputs, case.params,
                      _any_reference(name), dtype="float64", timeout=TIMEOUT)
    assert [f.check for f in outcome.judgement.findings] == ["exception"], (
        f"{impl_name} {name}: an all-False query column under empty_query='error' must raise; "
        f"got {outcome.judgement.findings}")


def _any_reference(name: str):
    """A reference of the right shapes for ``name`` (the call must raise before it is used)."""
    entry = REGISTRY[name]
    case = make_case(entry, PAPER)
    return reference(entry, case.inputs, case.params, hyper=case.hyper, variant=PAPER, dtype="float64")


def test_fixture_coverage_is_read_from_the_manifest():
    """The split above depends on the manifest: most (algorithm, variant set) pairs are there, and the
    fixed cases add some the fixtures lack (combinations of switches)."""
    pairs = {(c.algorithm, c.variant.hash) for c in CASES}
    assert COVERED, "no golden fixtures found: run `ftspec fixtures regenerate`"
    assert len(pairs & COVERED) > len(pairs) // 2
    assert pairs - COVERED
