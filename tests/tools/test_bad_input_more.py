"""Bad input that used to get through (issue 35, finding 14): each is refused in one line, exit 2,
before any work, or (Ctrl-C in this process) reported with what did not finish.

Every test is in this process and costs a second or two: a refusal must come before the run, so
the refused commands search nothing, and the one search that runs is a tiny one.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import pytest

from ftspec.conformance.core.intermediates import MAX_SIZE, MAX_WORK, check_sizes, work
from ftspec.conformance.core.profiles import profile
from ftspec.conformance.running.interruption import SearchesInterrupted, search_here
from ftspec.conformance.running.config import RunConfig
from ftspec.conformance.running.runner import Runner
from ftspec.conformance.session import phases
from ftspec.conformance.session.certificate import CertificateError, content_hash
from ftspec.conformance.session.commands import (MIN_CALL_TIMEOUT, SessionError, Settings, certify,
                                                 recorded_lines, reproduction_settings, run)
from ftspec.spec.registry import REGISTRY
from ftspec.tools.cli import main



def _one_line_refusal(capsys, argv: list[str], *words: str, seconds: float = 10.0) -> str:
    """``ftspec ARGV`` exits 2 with one line on stderr holding ``words``, no traceback, nothing
    searched (no summary table on stdout) and within ``seconds``."""
    started = time.perf_counter()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    elapsed = time.perf_counter() - started
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in " ".join(err.split()), err
    assert "Conformance" not in out and "Certification" not in out, out
    assert elapsed < seconds, elapsed
    return err


# -- output paths, before the run ---------------------------------------------------------------

UNWRITABLE = ["/proc/x", "/proc/x/y"]  # /proc takes no new file, whoever asks (root included)


@pytest.mark.parametrize("case_dir", UNWRITABLE)
@pytest.mark.parametrize("command", ["run", "certify"])
def test_an_unwritable_case_dir_is_refused_before_the_run(here, capsys, command, case_dir):
    """``--case-dir /proc/x`` once ran the whole search and lost every failure's case file."""
    target = ["--impl", "cli_example:implementation"] if command == "run" else ["cli_example:implementation"]
    _one_line_refusal(capsys, [command, *target, "--case-dir", case_dir, "--profile", "quick", "--in-process"],
                      "--case-dir", case_dir)


def test_a_case_dir_that_is_a_file_is_refused(here, capsys):
    (here / "a_file").write_text("not a folder")
    _one_line_refusal(capsys, ["run", "--impl", "cli_example:implementation", "--case-dir", "a_file",
                               "--profile", "quick", "--in-process"], "a_file", "not a directory")


def test_the_library_refuses_it_before_loading_anything(here):
    """The API (``session.run``/``certify``) checks it too, before any plugin is loaded: a target
    that does not exist is never reached."""
    for call in (lambda s: run(["no_such_module:x"], s), lambda s: certify("no_such_module:x", s)):
        with pytest.raises(SessionError, match="case directory"):
            call(Settings(profile="quick", in_process=True, case_dir="/proc/x"))


def test_a_writable_case_dir_still_runs(here, capsys):
    code = main(["run", "--impl", "cli_example:implementation", "--case-dir", str(here / "new" / "cases"),
                 "--profile", "quick", "--in-process", "--quiet", "--algorithm", "rms_norm", "--dtype", "float64",
                 "--examples", "2", "--no-fixtures"])
    assert code == 3, capsys.readouterr()  # partial: a selection; it ran


def test_fixtures_regenerate_refuses_an_unwritable_out_before_computing(capsys):
    _one_line_refusal(capsys, ["fixtures", "regenerate", "--out", "/proc/x/fixtures", "--quiet"], "--out", "/proc")


# -- spec intermediates: bounded like case files, before computing ---------------------------------

def test_a_huge_case_is_refused_in_one_line_before_computing(capsys):
    """``--hyper d_e=1000,ell=1000`` ran for 24 s and ended in NumPy's ArrayMemoryError (246 GiB)."""
    _one_line_refusal(capsys, ["spec", "intermediates", "gpt2_layer", "--hyper", "d_e=1000,ell=1000"],
                      "too large", f"{MAX_WORK:,}", seconds=5.0)


@pytest.mark.parametrize("value", ["-1", "0", str(MAX_SIZE + 1), "10000000000000"])
def test_negative_zero_and_huge_sizes_are_ours_not_numpys(capsys, value):
    """``d_e=-1`` answered "negative dimensions are not allowed", in NumPy's words."""
    err = _one_line_refusal(capsys, ["spec", "intermediates", "gpt2_layer", "--hyper", f"d_e={value}"],
                            f"d_e = {value}", f"from 1 to {MAX_SIZE}", seconds=5.0)
    assert "dimension" not in err


def test_spec_params_refuses_a_negative_size_in_one_line(capsys):
    _one_line_refusal(capsys, ["spec", "params", "gpt2_layer", "--hyper", "d_e=-3"], "d_e = -3", "at least 1")


def test_the_work_bound_lets_the_default_cases_through_and_grows_with_every_size():
    """Every entry's default case is within the bound (what `spec intermediates ENTRY` shows), and
    the estimate grows with each size, so a larger case is never let through where a smaller one
    was refused."""
    from ftspec.conformance.core.values import default_hyper

    for name, entry in REGISTRY.items():
        hyper = default_hyper(name)
        check_sizes(entry, hyper)  # raises if refused
        for key in hyper:
            assert work({**hyper, key: hyper[key] + 1}) >= work(hyper), (name, key)
    entry = REGISTRY["gpt2_layer"]
    with pytest.raises(ValueError, match="too large"):
        check_sizes(entry, {**default_hyper("gpt2_layer"), "d_e": 1000, "ell": 1000})


# -- Ctrl-C in this process: the unfinished searches are reported -------------------------------

def test_an_in_process_interruption_keeps_every_planned_search(here):
    """``--in-process`` Ctrl-C wrote a report with only the searches that had ended: the rms_norm
    cells vanished. ``search_here`` raises what the parallel path raises, every planned cell in it;
    the session marks those of unfinished searches "not run" (phases._not_ended). Ctrl-C comes
    where a held one is raised, at the start of a search (the layer_norm searches, planned
    first, have ended by then; the rms_norm ones have not)."""
    import importlib

    impl = importlib.import_module("cli_example").implementation
    runner = Runner([("cli_example", impl)], RunConfig(profile="quick", seed=0, case_dir=here / "cases", examples=4))
    ended: list = []

    def progress(event, **info):
        if event == "end":
            ended.extend(info["cells"])
        if event == "start" and info["algorithm"] == "rms_norm":
            raise KeyboardInterrupt

    runner.progress = progress
    with pytest.raises(SearchesInterrupted) as info:
        search_here(runner, ["layer_norm", "rms_norm"], ["float64", "float32"], ended)
    partial = phases._not_ended(info.value.partial, ended)
    by = {(c.algorithm, c.dtype): c for c in partial.cells}
    assert set(by) == {(a, d) for a in ("layer_norm", "rms_norm") for d in ("float64", "float32")}
    for d in ("float64", "float32"):
        assert by[("layer_norm", d)].status == "pass" and by[("layer_norm", d)].examples > 0
        assert by[("rms_norm", d)].status == "no examples" and "interrupted" in by[("rms_norm", d)].note


def test_an_extra_rounds_interruption_never_takes_an_earlier_rounds_cell(here):
    """Only the cells that ended during this call count as ended: a cell of the same key from an
    earlier round is not (it would be marked not run through the extra round's cell)."""
    import importlib

    impl = importlib.import_module("cli_example").implementation
    runner = Runner([("cli_example", impl)], RunConfig(profile="quick", seed=0, case_dir=here / "cases", examples=2))
    earlier, _ = runner.plan(["rms_norm"], ["float64"])
    ended = list(earlier.cells)  # as if an earlier round had ended this very cell

    def stop(event, **info):
        if event == "start":
            raise KeyboardInterrupt

    runner.progress = stop
    with pytest.raises(SearchesInterrupted) as info:
        search_here(runner, ["rms_norm"], ["float64"], ended)
    assert all(c is not earlier.cells[0] for c in info.value.partial.cells)


# -- a reproduction says what came from the file, and refuses absurd values ------------------------

@pytest.fixture
def small_certificate(here) -> dict:
    """A cheap certificate of the example (rms_norm at float64, 4 examples, no fixtures)."""
    settings = Settings(profile="quick", in_process=True, examples=4, seconds=0, algorithms=("rms_norm",),
                        dtypes=("float64",), fixtures="none", case_dir=str(here / "cases"))
    return certify("cli_example:implementation", settings).doc


def _written(doc: dict, path: Path, **changes) -> Path:
    doc = copy.deepcopy(doc)
    doc["run"]["settings"].update(changes)
    doc["content_hash"] = content_hash(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("changes, words", [
    ({"call_timeout": 1e-9}, "run.settings.call_timeout 1e-09 s"),
    ({"call_timeout": MIN_CALL_TIMEOUT / 2}, "run.settings.call_timeout"),
    ({"seconds": 1e-9}, "run.settings.seconds 1e-09 s"),
])
def test_an_absurd_recorded_setting_is_refused_before_anything_runs(small_certificate, here, capsys, changes,
                                                                     words):
    """A certificate's call timeout of 1e-9 s was taken as it was: every call then fails as a hang."""
    path = _written(small_certificate, here / "cert.json", **changes)
    with pytest.raises(CertificateError, match="run.settings"):
        reproduction_settings(json.loads(path.read_text()), path)
    _one_line_refusal(capsys, ["certify", "--reproduce", str(path), "--impl", "cli_example:implementation"],
                      words, str(path), seconds=5.0)


def test_a_reproduction_says_which_settings_come_from_the_file(small_certificate, here, capsys, monkeypatch):
    """The line before the run names every setting the certificate gives it, with its value."""
    import ftspec.conformance.session.commands as commands

    path = _written(small_certificate, here / "cert.json", call_timeout=7.5)

    def stop(*args, **kwargs):  # the run itself is not what is tested: stop where it would begin
        raise SessionError("stopped before the run")

    monkeypatch.setattr(commands, "reproduce", stop)
    assert main(["certify", "--reproduce", str(path), "--impl", "cli_example:implementation"]) == 2
    out, err = capsys.readouterr()
    text = " ".join(out.split())  # wrapped at spaces to the terminal's width
    line = text[text.index("settings from the certificate:"):]
    for shown in ("profile quick", "seed 0", "algorithms rms_norm", "dtypes float64", "examples 4",
                  "seconds 0 (no cap)", "call_timeout 7.5 s", "fixtures none"):
        assert shown in line, line
    assert "stopped before the run" in err
    assert recorded_lines(reproduction_settings(json.loads(path.read_text())))[0] == "profile quick"


def test_a_recorded_setting_left_out_runs_at_the_profiles_value_and_says_so():
    lines = recorded_lines({"profile": "default", "seed": 3})
    prof = profile("default")
    assert f"call_timeout the profile's ({prof.call_timeout:g} s)" in lines
    assert f"examples the profile's ({prof.examples})" in lines and f"block {prof.block}" in lines
    assert math.isfinite(prof.call_timeout)


@pytest.mark.parametrize("option", [["--examples", "5"], ["--seed", "3"], ["--profile", "quick"],
                                    ["--call-timeout", "9"]])
def test_run_options_given_with_reproduce_are_refused_not_ignored(small_certificate, here, capsys, option):
    """They were silently ignored: the reproduction ran with the file's settings, not these."""
    path = _written(small_certificate, here / "cert.json")
    _one_line_refusal(capsys, ["certify", "--reproduce", str(path), "--impl", "cli_example:implementation",
                               *option], option[0], "--reproduce", seconds=5.0)
