"""The library API (conformance/session/commands.py) and the verdicts it gives.

Each test runs a plugin small enough to be quick: the example plugin
(layer_norm and rms_norm at float64 and float32 on the CPU), or one
algorithm of the bundled NumPy plugin, in this process.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ftspec.conformance.session.commands import NothingTested, SessionError, Settings, run
from ftspec.conformance.core.verdict import EXIT_CODES, derive, narrowing
from ftspec.impls.api import Implementation
from ftspec.impls.discovery import load_target
from ftspec.spec.variants import PAPER

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()


def example(tmp_path: Path, monkeypatch, name: str, extra: str = "") -> str:
    """An unregistered copy of the example plugin as ``name:implementation``, ``extra`` appended."""
    (tmp_path / f"{name}.py").write_text(EXAMPLE + "\n" + extra)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:implementation"


def quick(tmp_path: Path, **kw) -> Settings:
    values = dict(profile="quick", fixtures="none", in_process=True, case_dir=str(tmp_path / "cases"))
    values.update(kw)
    return Settings(**values)


# -- settings: bad input is one clear error ------------------------------------------------

@pytest.mark.parametrize("kw, message", [
    ({"examples": 0}, "examples must be"),
    ({"examples": -3}, "examples must be"),
    ({"jobs": 0}, "jobs must be"),
    ({"seconds": -1.0}, "seconds must be"),
    ({"call_timeout": 0}, "call timeout"),
    ({"algorithms": ("layer_nrom",)}, "did you mean 'layer_norm'"),
    ({"dtypes": ("float8",)}, "unknown dtype"),
    ({"profile": "thorugh"}, "did you mean 'thorough'"),
    ({"fixtures": "some"}, "fixtures must be"),
    ({"block": 0}, "block must be a whole number from 1 to 64"),
    ({"block": 65}, "block must be"),
    ({"block": 2.5}, "block must be"),
])
def test_bad_settings_are_refused_with_one_line(kw, message):
    with pytest.raises(SessionError, match=message) as info:
        Settings(**kw)
    assert "\n" not in str(info.value)


# -- the API returns what the CLI prints ----------------------------------------------------

def test_run_returns_a_result_with_its_verdict(tmp_path, monkeypatch):
    label = example(tmp_path, monkeypatch, "api_example")
    result = run([label], quick(tmp_path, algorithms=("layer_norm",), dtypes=("float64",)))
    cells = [c for c in result.cells if c.status != "not implemented"]
    assert [(c.algorithm, c.dtype, c.status) for c in cells] == [("layer_norm", "float64", "pass")]
    assert cells[0].examples >= result.minimum == 2
    # a selection (one algorithm, one dtype, no fixtures) can only be partial, and says why
    assert result.verdict == "partial"
    assert any("rms_norm" in r for r in result.reasons) and any("float32" in r for r in result.reasons)
    assert any("fixtures" in r for r in result.reasons)
    assert result.selection["algorithms"] == ["layer_norm"]


def test_an_implementation_object_runs_in_this_process(tmp_path):
    """An Implementation no worker could load by its label is searched here, not lost."""
    numpy = load_target("numpy")
    mine = dataclasses.replace(numpy, name="mine", algorithms={"layer_norm": numpy.algorithms["layer_norm"]},
                               dtypes=("float64",))
    result = run([mine], Settings(profile="quick", fixtures="none", case_dir=str(tmp_path)))
    assert result.jobs == 0  # no worker process
    assert [(c.impl, c.status) for c in result.cells if c.status != "not implemented"] == [("mine", "pass")]
    assert result.verdict == "partial"  # the fixtures were not replayed


def test_nothing_tested_is_an_error_not_a_verdict(tmp_path, monkeypatch):
    label = example(tmp_path, monkeypatch, "api_nothing")
    with pytest.raises(NothingTested, match="nothing was tested"):
        run([label], quick(tmp_path, dtypes=("bfloat16",)))  # the example declares float64, float32
    with pytest.raises(NothingTested, match="nothing was tested"):
        run([label], quick(tmp_path, algorithms=("attention",)))  # it lacks attention
    with pytest.raises(NothingTested, match="nothing was tested"):
        run([label], quick(tmp_path, devices=("cuda",)))


# -- the minimum examples per cell ------------------------------------------------------------

SLOW = """
import time as _time
_inner = implementation.algorithms["layer_norm"]

def _slow(inputs, params, ctx):
    _time.sleep(0.02)
    return _inner(inputs, params, ctx)

implementation.algorithms["layer_norm"] = _slow
"""


def test_a_cell_the_time_cap_leaves_short_keeps_searching(tmp_path, monkeypatch):
    """Under a cap that ends the search after one example, the cell searches on to the minimum."""
    label = example(tmp_path, monkeypatch, "api_slow", SLOW)
    # a cap shorter than one call: the first example always runs, the second never starts
    settings = quick(tmp_path, algorithms=("layer_norm",), dtypes=("float64",), seconds=0.001)
    result = run([label], settings)
    cell = next(c for c in result.cells if c.algorithm == "layer_norm")
    assert result.time_capped[("layer_norm", "float64")]
    assert cell.status == "pass" and cell.examples >= result.minimum == 2
    assert result.extension["searches"] == ["layer_norm/float64"]
    assert result.verdict == "partial"


def test_fewer_examples_than_the_minimum_are_inconclusive(tmp_path, monkeypatch):
    label = example(tmp_path, monkeypatch, "api_few")
    result = run([label], quick(tmp_path, examples=1, fixtures="all"))
    assert all(c.examples == 1 for c in result.cells if c.status == "pass")
    assert result.verdict == "inconclusive"
    assert any("1 of 2 examples" in r for r in result.reasons)


def test_a_failure_outranks_everything(tmp_path, monkeypatch):
    label = example(tmp_path, monkeypatch, "api_wrong", """
implementation.algorithms["rms_norm"] = lambda inputs, params, ctx: inputs["X"]
""")
    result = run([label], quick(tmp_path, examples=2, algorithms=("rms_norm",), dtypes=("float64",)))
    assert result.verdict == "non-conformant"
    assert any("rms_norm" in r and "fail" in r for r in result.reasons)


# -- the verdict, from recorded results ------------------------------------------------------

def _cell(status="pass", examples=10, **kw):
    return {"algorithm": "layer_norm", "implementation": "x", "dtype": "float64", "device": "cpu",
            "status": status, "examples": examples, **kw}


DECLARED = {"algorithms": ["layer_norm"], "dtypes": ["float64"], "devices": ["cpu"]}
EVERYTHING = {"algorithms": None, "dtypes": None, "devices": None, "fixtures": "all", "fixtures_required": "all"}


def test_the_verdicts_and_their_exit_codes():
    fixture = {"ok": True, "device": "cpu"}
    assert derive([_cell()], [fixture], minimum=5, selection=EVERYTHING, declared=DECLARED)[0] == "conformant"
    assert derive([_cell(examples=4)], [fixture], minimum=5, selection=EVERYTHING,
                  declared=DECLARED)[0] == "inconclusive"
    assert derive([_cell()], [], minimum=5, selection={**EVERYTHING, "fixtures": "none"},
                  declared=DECLARED)[0] == "partial"
    assert derive([_cell(status="fail")], [fixture], minimum=5, selection=EVERYTHING,
                  declared=DECLARED)[0] == "non-conformant"
    assert derive([_cell()], [{"ok": False, "device": "cpu"}], minimum=5, selection=EVERYTHING,
                  declared=DECLARED)[0] == "non-conformant"
    assert derive([_cell()], [fixture], minimum=5, selection=EVERYTHING, declared=DECLARED,
                  interrupted=True)[0] == "inconclusive"
    with pytest.raises(NothingTested):
        derive([_cell(status="not implemented", examples=0)], [], minimum=5, selection=EVERYTHING,
               declared=DECLARED)
    assert len(set(EXIT_CODES.values())) == 4 and EXIT_CODES["conformant"] == 0


def test_an_exhausted_cell_is_complete_below_the_minimum():
    """A search that judged every case it can draw (a mask: 128) has no further example to run; a
    claim of more cases than the cell ran, or of none, is no such search."""
    fixture = {"ok": True, "device": "cpu"}
    how = dict(minimum=200, selection=EVERYTHING, declared=DECLARED)
    assert derive([_cell(examples=128, exhausted=128)], [fixture], **how)[0] == "conformant"
    for claim in (None, 0, 129, True, "128"):
        assert derive([_cell(examples=128, exhausted=claim)], [fixture], **how)[0] == "inconclusive", claim


def test_a_selection_that_covers_everything_declared_is_not_partial():
    chosen = {**EVERYTHING, "algorithms": ["layer_norm"], "dtypes": ["float64"], "devices": ["cpu"]}
    assert narrowing(chosen, DECLARED) == []
    assert narrowing({**chosen, "dtypes": ["float32"]}, {**DECLARED, "dtypes": ["float64", "float32"]})


# -- empty_query="error": searched, and the implementation must raise ---------------------------

def _attention_only(name: str, fn) -> Implementation:
    numpy = load_target("numpy")
    return dataclasses.replace(numpy, name=name, algorithms={"attention": fn}, dtypes=("float64",),
                               variants=[PAPER])


@pytest.mark.parametrize("name", ["attention", "mh_attention"])
def test_the_paper_variant_draws_queries_with_no_key(name):
    """Once only the other empty_query settings drew an all-zero Mask column."""
    from hypothesis import find, settings

    from ftspec.conformance.core.strategies import cases

    found = find(cases(name, variants=[PAPER], budget="quick"),
                 lambda c: not np.asarray(c.inputs["Mask"], dtype=bool).any(axis=0).all(),
                 settings=settings(max_examples=400, database=None))
    assert found.variant.empty_query == "error"


def test_an_attention_that_answers_a_query_with_no_key_fails(tmp_path):
    """The paper's empty_query="error": a Mask column of zeros must raise, as the spec does; an
    implementation that lets such a query attend to every key is caught, one that raises passes."""
    numpy = load_target("numpy")

    def lenient(inputs, params, ctx):
        mask = np.array(inputs["Mask"], copy=True)
        mask[:, ~mask.any(axis=-2)] = True
        return numpy.algorithms["attention"]({**inputs, "Mask": mask}, params, ctx)

    plugins = [("lenient", _attention_only("lenient", lenient)),
               ("strict", _attention_only("strict", numpy.algorithms["attention"]))]
    result = run(plugins, quick(tmp_path, examples=40, algorithms=("attention",), dtypes=("float64",)))
    cells = {c.impl: c for c in result.cells}
    assert cells["lenient"].status == "fail" and cells["lenient"].failure.check == "refusal"
    # caught on a drawn empty query, or on the case with a column emptied by the refusal check
    # (core/refusals.py: the case file keeps the drawn case, which the replay transforms alike)
    failure = cells["lenient"].failure
    assert not failure.case.inputs["Mask"].any(axis=0).all() or "a query with no key" in failure.message
    assert cells["strict"].status == "pass" and cells["strict"].checks["refusal"] > 0


# -- the layers: the harness needs nothing from the CLI ---------------------------------------

def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_pytest_plugin_and_the_commands_keep_to_their_layers():
    assert not any("tools" in m for m in _imports(ROOT / "conformance" / "pytest_plugin.py"))
    assert not (ROOT / "tools" / "plugins.py").exists()
    for name in ("cmd_run.py", "cmd_certify.py"):  # commands parse and print: no search, no replay
        used = _imports(ROOT / "tools" / name)
        assert not any(m.endswith(("runner", "parallel", "fixture_replay")) for m in used), (name, used)


def test_a_selection_that_misses_everything_is_refused_before_any_search(tmp_path, monkeypatch):
    label = example(tmp_path, monkeypatch, "api_refuse")
    events: list[str] = []
    with pytest.raises(NothingTested, match="declares no float16"):
        run([label], quick(tmp_path, dtypes=("float16",), fixtures="all",
                           progress=lambda event, **info: events.append(event)))
    assert events == []  # no search planned, no fixture replayed


def test_an_extra_round_searches_only_the_members_that_are_short():
    """`make run` of 2026-12-06: JAX short of 50 on a search made NumPy and PyTorch, at 400 already,
    search 49 more examples beside it. The round leaves out every member with no short cell."""
    from ftspec.conformance.running.results import Cell, RunResult, Status
    from ftspec.conformance.session.phases import _enough

    cells = [Cell("layer_norm", "numpy", "float64", "cpu", examples=400),
             Cell("layer_norm", "jax", "float64", "cpu:0", examples=12),
             Cell("layer_norm", "torch", "float64", "cpu", examples=400),
             Cell("layer_norm", "torch", "float64", "cuda:0", examples=30),  # one short device keeps it
             Cell("attention", "jax", "float64", "cpu:0", examples=3),
             Cell("attention", "numpy", "float64", "cpu", status=Status.NOT_IMPLEMENTED)]
    result = RunResult(cells, "default", 0)
    short = [c for c in cells if c.status == Status.PASS and c.examples < 50]
    assert _enough(result, short) == [("numpy", "layer_norm", "float64")]


def test_a_member_left_out_of_an_extra_round_is_not_listed_in_its_progress_line(capsys):
    from ftspec.conformance.running.results import LEFT_OUT, Cell, Status
    from ftspec.tools.console import RunProgress

    progress = RunProgress()
    progress.live = False
    progress("plan", searches=1, examples=49)
    progress("end", algorithm="layer_norm", dtype="float64",
             cells=[Cell("layer_norm", "numpy", "float64", "cpu", status=Status.NO_EXAMPLES, note=LEFT_OUT),
                    Cell("layer_norm", "jax", "float64", "cpu:0", examples=49)])
    text = " ".join(capsys.readouterr().err.split())  # the console wraps at its width
    assert "[1/1] layer_norm float64: jax@cpu:0: pass (49)" in text and "numpy" not in text, text
