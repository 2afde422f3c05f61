"""Depth at speed (issue 14): one search per implementation, shared references, no repeated
examples, bounded shapes, shards by seed, and a Dask cluster as the executor.

Every search here is small (the NumPy plugin on one or two algorithms, a few dozen examples,
in this process); the Dask test starts a ``LocalCluster`` of threads in this process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings

from ftspec.conformance.core import execute

from ftspec.conformance.running import drawn_case, reference_cache
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import BATCH_CHECKS, Runner
from ftspec.conformance.session.commands import SessionError, Settings
from ftspec.conformance.core.strategies import cases
from ftspec.impls.discovery import load_target
from ftspec.tools.cli import main

NUMPY = load_target("numpy")


def _runner(plugins, tmp_path, shard=(0, 1), **kw) -> Runner:
    """A runner of shard k of n (``shard``); ``kw``: ``RunConfig`` fields over this file's defaults."""
    values = dict(seed=5, case_dir=tmp_path / "cases", examples=20)
    values.update(kw)
    return Runner(plugins, RunConfig(shards=shard[1], **values), shard=shard[0])


def _slow(impl, algorithm: str, pause: float):
    """``impl`` whose ``algorithm`` sleeps ``pause`` seconds per call."""
    fn = impl.algorithms[algorithm]

    def slow(inputs, params, ctx):
        time.sleep(pause)
        return fn(inputs, params, ctx)

    return dataclasses.replace(impl, name="slow", algorithms={**impl.algorithms, algorithm: slow})


def _examined(monkeypatch) -> list[tuple[str, str, object, tuple, int]]:
    """Record every ``examine`` of the runner: (label, case digest, variant hash, sizes, batch length)."""
    seen: list[tuple[str, str, object, tuple, int]] = []
    original = drawn_case.examine

    def spy(m, case, inputs, params, ref, **kw):
        h = hashlib.sha256(repr((case.variant.hash, sorted(case.hyper.items()))).encode())
        for name in sorted(inputs):
            h.update(name.encode() + inputs[name].tobytes())
        for batch_inputs, _ in kw.get("batch") or []:
            for name in sorted(batch_inputs):
                h.update(name.encode() + batch_inputs[name].tobytes())
        for name in sorted(params):
            h.update(name.encode() + params[name].tobytes())
        seen.append((m.label, h.hexdigest(), case.variant.hash, tuple(sorted(case.hyper.items())),
                     len(kw.get("batch") or [])))
        return original(m, case, inputs, params, ref, **kw)

    monkeypatch.setattr(drawn_case, "examine", spy)
    return seen


# -- one search per implementation ------------------------------------------------------------

def test_a_slow_implementation_holds_no_other_back(tmp_path):
    """Each implementation has its own search and its own time cap: the fast one is not held to
    the slow one's count (in one shared search both ran the same number of examples)."""
    plugins = [("numpy", NUMPY), ("slow", _slow(NUMPY, "layer_norm", 0.05))]
    result = _runner(plugins, tmp_path, examples=10_000, seconds=1.5).run(["layer_norm"], ["float64"])
    count = {c.impl: c.examples for c in result.cells}
    assert count["slow"] >= 1 and count["numpy"] > 3 * count["slow"], count
    assert all(c.status == "pass" for c in result.cells), [(c.impl, c.status, c.note) for c in result.cells]


def test_implementations_share_cases_and_each_reference_is_evaluated_once(tmp_path, monkeypatch):
    """Two implementations with the same strategy draw the same cases from the same seed; the
    spec's reference of a case is evaluated once for both, and they are compared with each other."""
    keys: Counter = Counter()
    original = reference_cache.references

    def counting(entry, value_sets, alone=False, **kw):  # a block's value sets, evaluated together
        for inputs, params in value_sets:
            h = hashlib.sha256(repr((entry.name, kw["dtype"], kw["precision"], kw["variant"].hash,
                                     sorted(kw["hyper"].items()))).encode())
            for part in (inputs, params):
                for name in sorted(part):
                    h.update(name.encode() + part[name].tobytes())
            keys[h.hexdigest()] += 1
        return None if alone else original(entry, value_sets, **kw)

    single = reference_cache.reference

    def counting_one(entry, inputs, params, **kw):  # a batch's further input sets
        counting(entry, [(inputs, params)], **kw, alone=True)
        return single(entry, inputs, params, **kw)

    monkeypatch.setattr(reference_cache, "references", counting)
    monkeypatch.setattr(reference_cache, "reference", counting_one)
    run = _runner([("numpy", NUMPY), ("numpy-b", NUMPY)], tmp_path, examples=15)
    result = run.run(["layer_norm"], ["float64"])
    a, b = result.cells
    assert a.examples == b.examples > 0 and a.cases_digest == b.cases_digest
    assert keys and max(keys.values()) == 1, "a reference was evaluated twice for one input set"
    assert run.reference_evaluations == sum(keys.values())
    assert ("numpy@cpu", "numpy-b@cpu") in result.agreement[("layer_norm", "float64")]


def test_a_repeated_case_is_not_examined_again_and_batches_are_bounded(tmp_path, monkeypatch):
    seen = _examined(monkeypatch)
    # one example per draw: Hypothesis repeats a draw now and then, which a block makes rarer
    result = _runner([("numpy", NUMPY)], tmp_path, examples=40, seed=0, block=1).run(["mh_attention"], ["float64"])
    assert result.repeated[("mh_attention", "float64")] > 0, "nothing repeated: this test shows nothing"
    digests = Counter(d for _, d, _, _, _ in seen)
    assert max(digests.values()) == 1, "a case was examined twice"
    (cell,) = [c for c in result.cells if c.impl == "numpy"]
    assert cell.status == "pass" and cell.checks["spec"] == len(seen)
    batched = Counter((v, h, n) for _, _, v, h, n in seen if n)
    assert batched and max(batched.values()) <= BATCH_CHECKS, batched


def test_a_declared_shape_bound_limits_the_sizes_of_a_search(tmp_path, monkeypatch):
    seen = _examined(monkeypatch)
    bounded = dataclasses.replace(NUMPY, name="bounded", extra={"shapes_per_search": 2})
    result = _runner([("bounded", bounded)], tmp_path, examples=40).run(["attention"], ["float64"])
    assert [c.status for c in result.cells] == ["pass"]
    pairs = {(variant, hyper) for _, _, variant, hyper, _ in seen}
    assert len(pairs) <= 2, pairs
    assert len(seen) > 4, "too few examples to show the bound"


@pytest.mark.parametrize("name", ["sinusoidal_paper", "unidirectional_mask"])
def test_an_entry_with_nothing_to_vary_is_not_held_to_the_shape_bound(tmp_path, monkeypatch, name):
    """`make run` of 2026-12-06: with no real input and no parameter a structure is one case, so
    JAX's 4 shapes per search were 4 cases a round, and its sinusoid and mask cells stopped at 8
    of the 50 examples required (the run "inconclusive"). Such an entry is searched without the
    pool: it reaches the examples it was asked for."""
    seen = _examined(monkeypatch)
    bounded = dataclasses.replace(NUMPY, name="bounded", extra={"shapes_per_search": 2})
    result = _runner([("bounded", bounded)], tmp_path, examples=30).run([name], ["float64"])
    (cell,) = result.cells
    assert cell.status == "pass" and cell.examples == 30, (cell.examples, cell.note)
    assert len({(variant, hyper) for _, _, variant, hyper, _ in seen}) > 2


@settings(max_examples=12, database=None, suppress_health_check=list(HealthCheck), deadline=None)
@seed(11)
@given(data=__import__("hypothesis").strategies.data())
def test_a_shape_pool_keeps_at_most_its_size(data):
    strategy = cases("layer_norm", dtype="float32", shapes=3)
    drawn = [data.draw(strategy) for _ in range(12)]
    assert len({(case.variant.hash, tuple(sorted(case.hyper.items()))) for case in drawn}) <= 3


# -- shards and reproducibility ---------------------------------------------------------------

def _digests(tmp_path, shard=(0, 1), seed_=5):
    r = _runner([("numpy", NUMPY)], tmp_path, examples=9, seed=seed_, shard=shard)
    return {(c.algorithm, c.dtype): (c.examples, c.cases_digest) for c in r.run(["layer_norm"], ["float32"]).cells}


def test_a_search_examines_as_many_examples_as_it_was_asked_for(tmp_path):
    """Repeats send a search into further rounds; each later round first draws Hypothesis's
    minimal case again, a repeat, and once ended one example short (a thorough cell at 999 of
    its 1,000 minimum was inconclusive)."""
    r = Runner([("numpy", NUMPY)], RunConfig(profile="thorough", seed=1, case_dir=tmp_path / "cases", examples=30,
                                                   block=1))  # one example per draw: repeats are rarer with blocks
    result = r.run(["e_training"], ["float32"])
    (cell,) = result.cells
    assert result.repeated[("e_training", "float32")] > 0, "no repeats: the test proves nothing"
    assert cell.examples == result.generated[("e_training", "float32")] == 30
    # in blocks, the last one cut to what is left: 30 again, not a multiple of the block
    blocks = Runner([("numpy", NUMPY)], RunConfig(profile="thorough", seed=1, case_dir=tmp_path / "cases", examples=130,
                                                        block=4)).run(["layer_norm"], ["float32"])
    assert [c.examples for c in blocks.cells] == [130] == [blocks.generated[("layer_norm", "float32")]]


def test_the_same_seed_gives_the_same_cases_sharded_or_not(tmp_path):
    whole = _digests(tmp_path)
    assert whole == _digests(tmp_path)
    first, second = _digests(tmp_path, (0, 2)), _digests(tmp_path, (1, 2))
    assert first == _digests(tmp_path, (0, 2)) and second == _digests(tmp_path, (1, 2))
    key = ("layer_norm", "float32")
    assert len({whole[key][1], first[key][1], second[key][1]}) == 3, "shards drew the same cases"
    assert first[key][0] + second[key][0] <= 9 and first[key][0] >= 1 and second[key][0] >= 1
    assert _digests(tmp_path, seed_=6)[key][1] != whole[key][1]


def test_the_same_seed_gives_the_same_blocks_sharded_or_not(tmp_path):
    """With blocks (value sets derived from each drawn case), a seed and a shard count still fix the
    cases, bit for bit: the digests of every value set examined."""
    def digests(shard=(0, 1), seed_=5):
        r = _runner([("numpy", NUMPY)], tmp_path, examples=256, seed=seed_, shard=shard, block=4)
        return [(c.examples, c.cases_digest) for c in r.run(["attention"], ["float32"]).cells]

    whole = digests()
    assert whole == digests() and whole[0][0] > 128  # some draws repeat: counted, not examined
    shards = [digests((k, 2)) for k in range(2)]
    assert shards == [digests((k, 2)) for k in range(2)]
    assert len({whole[0][1], shards[0][0][1], shards[1][0][1]}) == 3
    assert digests(seed_=6) != whole


@pytest.mark.local_constants  # the runner itself must empty the pool
def test_the_same_seed_gives_the_same_cases_whatever_modules_are_loaded(tmp_path, monkeypatch):
    """Hypothesis draws now and then from the literals of the local modules loaded so far: a
    module imported between two runs (a user's plugin, a test helper) must not change the cases
    (conformance/running/local_constants.py)."""
    before = {k: _digests(tmp_path, (k, 2)) for k in range(2)}
    # a local module (outside site-packages and tests/) full of literals a float draw could take
    floats = [m * 2.0 ** e for m in (1.0, -1.0, 1.375, -1.8125, 1.0009765625) for e in range(-30, 31, 3)]
    literals = ", ".join(repr(x) for x in floats + list(range(-600, 600, 7)))
    (tmp_path / "ftspec_literals_probe.py").write_text(f"VALUES = [{literals}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import ftspec_literals_probe  # noqa: F401 - imported for its literals

    assert {k: _digests(tmp_path, (k, 2)) for k in range(2)} == before


def test_a_bad_shard_is_refused():
    with pytest.raises(ValueError, match="shard"):
        Runner([("numpy", NUMPY)], RunConfig(profile="quick", shards=2), shard=2)


# -- the executor: Dask ------------------------------------------------------------------------

def _plain_only(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_only(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_only(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def test_a_worker_result_is_plain_values(tmp_path):
    from ftspec.conformance.running.worker_tasks import _search_task

    settings = dataclasses.asdict(RunConfig(("numpy",), "default", seed=5, case_dir=str(tmp_path), examples=4))
    raw = _search_task(settings, "layer_norm", "float64")
    assert isinstance(raw, str)
    values = json.loads(raw)
    assert _plain_only(values) and values["cells"] and values["reference_evaluations"] > 0


def test_a_dask_cluster_runs_the_sharded_search(tmp_path, monkeypatch):
    """A LocalCluster started here runs the searches, two shards each: the cells are the merge of
    the shards the serial runner makes from the same seed, and every task result is JSON text."""
    distributed = pytest.importorskip("distributed", reason="Dask is an optional extra: pip install 'ftspec[dask]'")
    from ftspec.conformance.running import parallel
    from ftspec.conformance.session.commands import run

    results: list = []
    original = parallel._plain

    def recording(value):
        results.append(value)
        return original(value)

    monkeypatch.setattr(parallel, "_plain", recording)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as c:
        result = run(["numpy"], Settings(profile="default", algorithms=("layer_norm",), dtypes=("float32",),
                                         examples=9, seed=5, shards=2, fixtures="none",
                                         scheduler=c.scheduler_address, case_dir=str(tmp_path / "cases")))
    assert results and all(isinstance(r, str) for r in results)
    (cell,) = [c for c in result.cells if c.impl == "numpy"]
    parts = [_digests(tmp_path, (k, 2))[("layer_norm", "float32")] for k in range(2)]
    want = hashlib.sha256("".join(d for _, d in parts).encode()).hexdigest()
    assert cell.status == "pass", (cell.status, cell.note)
    assert cell.examples == sum(n for n, _ in parts) and cell.cases_digest == want
    assert result.shards == 2


def test_a_crash_in_one_shard_fails_only_its_implementation(tmp_path, monkeypatch):
    """Local worker processes, two shards: a plugin that ends its process fails its own cell
    (check ``crash``); each shard runs again without it, so NumPy's cell has both shards."""
    from pathlib import Path

    from ftspec.conformance.running.parallel import run_parallel

    example = Path(__file__).resolve().parents[3] / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py"
    (tmp_path / "ends_itself.py").write_text(example.read_text() + """
import os

def layer_norm(inputs, params, ctx):
    os._exit(3)

implementation.algorithms["layer_norm"] = layer_norm
""")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    label = "ends_itself:implementation"
    plugins = [(label, load_target(label)), ("numpy", NUMPY)]
    settings = RunConfig((label, "numpy"), "default", seed=5, case_dir=str(tmp_path / "cases"), examples=6,
                         shards=2)
    result = run_parallel(settings, plugins, jobs=1, algorithms=["layer_norm"], dtypes=["float64"])
    by = {c.impl: c for c in result.cells if c.algorithm == "layer_norm"}
    failure = by[label].failure
    assert by[label].status == "fail" and failure is not None and failure.check == "crash"
    assert "--shards 2" in failure.reproducer
    assert by["numpy"].status == "pass" and 2 <= by["numpy"].examples <= 6 and result.shards == 2


def test_an_unreachable_scheduler_is_one_line(tmp_path):
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install 'ftspec[dask]'")
    from ftspec.conformance.running.parallel import ExecutorError, dask_executor

    with pytest.raises(ExecutorError, match="cannot reach a Dask scheduler") as info:
        with dask_executor("tcp://127.0.0.1:9", timeout=1.0):
            pass
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kw, message", [
    ({"shards": 0}, "shards must be"),
    ({"scheduler": ""}, "scheduler must be"),
    ({"in_process": True, "shards": 2}, "--in-process"),
    ({"in_process": True, "scheduler": "tcp://h:1"}, "--in-process"),
])
def test_bad_scale_out_settings_are_one_line(kw, message):
    with pytest.raises(SessionError, match=message) as info:
        Settings(**kw)
    assert "\n" not in str(info.value)


def test_the_cli_refuses_a_scheduler_in_process(capsys):
    code = main(["run", "--impl", "numpy", "--in-process", "--scheduler", "tcp://h:1", "--quiet"])
    out = capsys.readouterr()
    assert code == 2 and "--in-process" in out.err + out.out and "Traceback" not in out.err


# -- the call thread ---------------------------------------------------------------------------

def test_the_call_thread_is_reused_and_replaced_after_a_timeout():
    first = execute._timed(threading.get_ident, 5.0)
    assert execute._timed(threading.get_ident, 5.0) == first != threading.get_ident()
    with pytest.raises(execute.CallTimeout):
        execute._timed(lambda: time.sleep(0.5), 0.05)
    after = execute._timed(threading.get_ident, 5.0)
    assert after not in (first, threading.get_ident())
