"""The library/worker seam: one frozen run configuration, failing cases carried in the worker's
result, a typed interruption, ``session.identify`` as a library call.

- ``RunConfig`` (conformance/running/config.py) is built once from ``Settings``
  (``commands._configure``) and travels to workers as standard JSON; it resolves every
  default itself (the profile's, the command's), "no time cap" is ``NO_CAP`` alone, and
  ``Runner`` takes one and resolves nothing;
- a cell's status is ``results.Status``, written as the report's strings;
- a search task's result carries its failing case (conformance/running/wire.py),
  bit for bit, so the parent reads no case file;
- Ctrl-C in ``run_parallel`` is ``SearchesInterrupted``, a ``KeyboardInterrupt`` whose
  ``partial`` is the result so far;
- ``session.identify`` returns what ``ftspec identify`` prints and writes.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.casefile import read_case
from ftspec.conformance.running import wire
from ftspec.conformance.core.profiles import profile
from ftspec.conformance.running.config import DEFAULT_CASE_DIR, NO_CAP, RunConfig
from ftspec.conformance.running.results import Status
from ftspec.conformance.running.interruption import ReplayInterrupted, RunInterrupted, SearchesInterrupted
from ftspec.conformance.session import Identification, SessionError, Settings, identify
from ftspec.conformance.session import commands
from ftspec.impls.discovery import DEFAULT_LOAD_TIMEOUT, load_target
from ftspec.spec.variants import PRESETS

from ..support import EPSILON_INSIDE_SOURCE

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()
TABLE = ROOT / "examples" / "tables" / "layer_norm_tutorial_004_conventions.json"


def test_the_configuration_is_standard_json_and_comes_back_the_same():
    config = RunConfig(("numpy", "torch"), "default", seed=4, examples=7, seconds=math.inf, devices=("cpu",),
                       algorithms=("layer_norm",), call_timeout=3.0, shards=2, command="certify", minimum=100)
    text = config.to_json()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    again = RunConfig.from_json(text)
    assert again == config and again.seconds == math.inf and again.labels == ("numpy", "torch")
    with pytest.raises(TypeError, match="unknown run configuration fields: extra"):
        RunConfig.from_plain({**config.to_plain(), "extra": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 5  # type: ignore[misc]


def test_settings_are_resolved_once_into_the_configuration():
    config = commands._configure(Settings(profile="quick", seed=3), "certify", ["numpy"], jobs=2, in_process=False)
    assert (config.labels, config.profile, config.seed, config.jobs) == (("numpy",), "quick", 3, 2)
    assert config.examples == 10 and config.minimum == 10 and config.fixtures == "all"  # certify's
    assert config.seconds == 2.0 and config.call_timeout == 60.0 and config.case_dir == DEFAULT_CASE_DIR
    run = commands._configure(Settings(profile="quick", examples=5, case_dir="here"), "run", ["numpy"], jobs=1,
                              in_process=True)
    assert run.seconds == math.inf and run.examples == 5 and run.fixtures == "sample" and run.case_dir == "here"
    extra = run.extension(seed=9, examples=2, seconds=20.0)
    assert (extra.seed, extra.examples, extra.seconds, extra.labels) == (9, 2, 20.0, run.labels)


def test_the_default_case_dir_is_none_not_a_string():
    assert Settings().case_dir is None
    assert Settings(case_dir=Path("x")).case_dir == "x"


def test_a_case_travels_bit_for_bit():
    case = Case.build("mh_attention", seed=3, variant=PRESETS["hf-gpt2"])
    case.batch = [{k: v + 1 for k, v in case.inputs.items()}]
    plain = wire.case_to_plain(case)
    json.dumps(plain)  # plain values only
    again = wire.case_from_plain(json.loads(json.dumps(plain)))
    assert again.algorithm == case.algorithm and again.hyper == case.hyper and again.style == case.style
    assert again.variant == case.variant and len(again.batch) == 1
    for mine, theirs in ((case.inputs, again.inputs), (case.params, again.params), (case.batch[0], again.batch[0])):
        assert mine.keys() == theirs.keys()
        for k in mine:
            assert theirs[k].dtype == mine[k].dtype and np.array_equal(theirs[k], mine[k])
    with pytest.raises(ValueError):
        wire.case_from_plain({**plain, "algorithm": "no_such_algorithm"})
    with pytest.raises(ValueError):
        wire.case_from_plain({**plain, "tensors": "not base64!"})


def test_a_worker_result_carries_its_failing_case(tmp_path, monkeypatch):
    """The search task's JSON holds the shrunk case: the parent rebuilds it without the case file,
    and it is the case the file holds."""
    from ftspec.conformance.running.worker_tasks import _search_task

    (tmp_path / "wrong_eps.py").write_text(EXAMPLE + "\n" + EPSILON_INSIDE_SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = RunConfig(("wrong_eps:implementation",), "default", seed=3, case_dir=str(tmp_path / "cases"),
                       examples=30)
    values = json.loads(_search_task(config.to_json(), "layer_norm", "float32"))
    (bad,) = [c for c in values["cells"] if c["status"] == "fail"]
    cell = wire.cell_from_plain(bad)
    on_disk, _ = read_case(cell.failure.case_file)
    Path(cell.failure.case_file).unlink()  # the parent never needs it
    again = wire.cell_from_plain(bad)
    assert again.failure is not None and again.failure.case is not None
    for k, v in on_disk.inputs.items():
        assert np.array_equal(again.failure.case.inputs[k], v)
    assert again.failure.case.hyper == on_disk.hyper and again.failure.case.variant == on_disk.variant


def test_ctrl_c_in_the_searches_is_typed_with_the_result_so_far(tmp_path):
    from ftspec.conformance.running.parallel import run_parallel

    def progress(event: str, **info) -> None:
        if event == "end":
            raise KeyboardInterrupt  # as a held Ctrl-C would, after the first search ended

    config = RunConfig(("numpy",), "default", seed=1, case_dir=str(tmp_path), examples=2)
    with pytest.raises(SearchesInterrupted) as info:
        run_parallel(config, [("numpy", load_target("numpy"))], jobs=1, algorithms=["layer_norm", "rms_norm"],
                     dtypes=["float64"], progress=progress)
    partial = info.value.partial
    assert isinstance(info.value, KeyboardInterrupt) and isinstance(info.value, RunInterrupted)
    assert {c.algorithm for c in partial.cells} == {"layer_norm", "rms_norm"}
    assert sum(c.examples for c in partial.cells) == 2  # the one search that ended
    assert issubclass(ReplayInterrupted, KeyboardInterrupt)


def test_identify_is_a_library_call():
    found = identify(table=TABLE)
    assert isinstance(found, Identification) and found.fits and found.table == str(TABLE)
    doc = found.to_dict()
    assert doc["format"] == "ftspec-identify/1" and doc["entries"][0]["algorithm"] == "layer_norm"
    events: list[str] = []
    mine = identify("numpy", algorithms=["layer_norm"], seconds=5, progress=lambda event, **info: events.append(event))
    assert events == ["start", "entry"] and mine.fits and mine.dtype == "float64" and mine.device == "cpu"
    assert mine.to_dict()["merged"]["expression"] == "PAPER"
    with pytest.raises(SessionError, match="unknown algorithm 'layer_nrom'; did you mean 'layer_norm'"):
        identify("numpy", algorithms=["layer_nrom"])
    with pytest.raises(SessionError, match="not both"):
        identify("numpy", table=TABLE)


# -- one configuration, resolved in one place (issue 37) ---------------------------------------

def test_a_configuration_left_open_takes_the_profiles_values():
    """Defaults are filled in on construction, from the profile (conformance/core/profiles.py), so
    whatever reads a configuration finds final values: a run's examples, cap, call timeout, block,
    minimum and fixtures; a certificate's minimum and every fixture."""
    quick = profile("quick")
    run = RunConfig(profile="quick")
    assert (run.examples, run.seconds, run.call_timeout, run.block) == (
        quick.examples, quick.seconds, quick.call_timeout, quick.block)
    assert (run.minimum, run.fixtures, run.fixtures_required) == (quick.minimum, quick.fixtures, quick.fixtures)
    assert run.case_dir == DEFAULT_CASE_DIR and run.load_timeout == DEFAULT_LOAD_TIMEOUT and run.capped
    certify = RunConfig(profile="quick", command="certify")
    assert certify.minimum == quick.certify_minimum and certify.fixtures == "all"
    assert certify.examples == max(quick.examples, quick.certify_minimum)
    # an explicit example count means exactly that many: no time cap
    assert RunConfig(profile="quick", examples=3).seconds == NO_CAP
    # a profile without a cap (thorough) has none either
    assert profile("thorough").seconds is None and RunConfig(profile="thorough").seconds == NO_CAP


def test_resolving_a_resolved_configuration_changes_nothing():
    config = RunConfig(("numpy",), "quick", examples=4, case_dir=Path("cases"))
    assert config.case_dir == "cases"  # a plain string, as a worker reads it back
    assert RunConfig.from_json(config.to_json()) == config
    assert dataclasses.replace(config, seed=7) == RunConfig(("numpy",), "quick", seed=7, examples=4,
                                                            case_dir="cases")


def test_no_time_cap_has_one_spelling():
    """``NO_CAP`` (inf) is the configuration's only "no cap": 0, a negative or a non-number is
    refused; the user's ``--seconds 0`` arrives as ``NO_CAP``."""
    for wrong in (0, 0.0, -1.0, "inf", True):
        with pytest.raises(ValueError, match="seconds must be positive seconds"):
            RunConfig(seconds=wrong)
    assert not RunConfig(seconds=NO_CAP).capped and NO_CAP == math.inf
    made = commands._configure(Settings(profile="quick", seconds=0), "run", ["numpy"], jobs=1, in_process=True)
    assert made.seconds == NO_CAP and not made.capped
    with pytest.raises(ValueError, match="command must be one of run, certify"):
        RunConfig(command="search")


def test_the_session_and_a_hand_made_configuration_agree():
    """``_configure`` passes on what the user gave and leaves the rest to ``RunConfig``: the same
    values give the same configuration, whichever way it was built."""
    for command in ("run", "certify"):
        for given in ({}, {"examples": 7}, {"seconds": 3.0, "block": 2}):
            made = commands._configure(Settings(profile="default", seed=2, **given), command, ["numpy"], jobs=1,
                                       in_process=True)
            assert made == RunConfig(("numpy",), "default", seed=2, command=command, jobs=1, in_process=True,
                                     **given)


def test_the_runner_takes_one_configuration_and_resolves_nothing(tmp_path):
    from ftspec.conformance.running.runner import Runner

    numpy_impl = load_target("numpy")
    config = RunConfig(profile="quick", seed=3, case_dir=str(tmp_path), examples=5, call_timeout=7.0, block=2,
                       devices=("cpu",), shards=2, command="certify")
    runner = Runner([("numpy", numpy_impl)], config, shard=1)
    assert runner.config is config and runner.shard == (1, 2)
    assert (runner.examples, runner.seconds, runner.timeout, runner.block, runner.seed) == (5, NO_CAP, 7.0, 2, 3)
    assert runner.case_dir == tmp_path and runner.profile is profile("quick") and runner.keep_passing
    with pytest.raises(TypeError):
        Runner([("numpy", numpy_impl)], profile=profile("quick"), seed=0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="shard"):
        Runner([("numpy", numpy_impl)], config, shard=2)


def test_a_search_without_a_cap_bounds_its_further_failures_by_their_own_seconds(tmp_path, monkeypatch):
    """The search for further distinct failures runs under the search's cap, or, with none
    (``NO_CAP``), under ``distinct_failures.SECONDS`` (its documented bound), never unbounded."""
    from ftspec.conformance.forensics.distinct_failures import SECONDS
    from ftspec.conformance.running import impl_search
    from ftspec.conformance.running.runner import Runner
    from ftspec.tools.zoo.injection import build
    from ftspec.tools.zoo.mutants import mutant

    given: list[float] = []
    monkeypatch.setattr(impl_search, "search_distinct", lambda *a, **k: given.append(k["seconds"]) or [])
    wrong = build(mutant("epsilon-added"))
    for seconds in (NO_CAP, 5.0):
        config = RunConfig(profile="quick", seed=0, case_dir=str(tmp_path), examples=4, seconds=seconds)
        (cell,) = Runner([("wrong", wrong)], config).run(["layer_norm"], ["float64"]).cells
        assert cell.status == Status.FAIL, (cell.status, cell.note)
    assert given == [SECONDS, 5.0]


# -- cell status as an enum --------------------------------------------------------------------

def test_a_cell_status_is_written_as_the_reports_text():
    """``Status`` members are the strings docs/reports.md lists for a cell ("status"), and write
    exactly those in JSON; a cell read back from plain values holds the enum again."""
    from ftspec.conformance.running.results import Cell
    from ftspec.conformance.session.report import cell_dict

    assert {s.value for s in Status} == {"pass", "fail", "not implemented", "no examples", "error"}
    for status in Status:
        cell = Cell("layer_norm", "numpy", "float64", "cpu", status=status)
        text = json.dumps(cell_dict(cell))
        assert f'"status": "{status.value}"' in text and f"{status!s}" == status.value
        again = wire.cell_from_plain(json.loads(json.dumps(wire.cell_to_plain(cell))))
        assert type(again.status) is Status and again.status is status
    assert Cell("a", "b", "float64", "cpu", status="no examples").status is Status.NO_EXAMPLES
    with pytest.raises(ValueError):
        Cell("a", "b", "float64", "cpu", status="passed")
