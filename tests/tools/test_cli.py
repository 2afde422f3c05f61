"""The ``ftspec run`` and ``ftspec certify`` commands: exit codes, bad input, what a plugin prints.

Most tests call ``main`` in this process with a selection refused before any
search, or one tiny search in this process (``--in-process``); the Ctrl-C
test needs a real process to interrupt.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ftspec.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()
QUICK = ["--profile", "quick", "--quiet", "--in-process"]


@pytest.mark.parametrize("argv, words", [
    (["run", "--examples", "0"], "must be at least 1"),
    (["run", "--examples", "-4"], "must be at least 1"),
    (["run", "--jobs", "0"], "must be at least 1"),
    (["run", "--jobs", "two"], "whole number"),
    (["certify", "--examples", "0", "x:y"], "must be at least 1"),
    (["run", "--block", "0"], "must be at least 1"),
])
def test_bad_numbers_are_one_line_and_exit_2(capsys, argv, words):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err


def test_a_typo_in_algorithm_is_named_with_a_suggestion(here, capsys):
    assert main(["run", "--impl", "cli_example:implementation", "--algorithm", "layer_nrom", *QUICK]) == 2
    err = capsys.readouterr().err
    assert "unknown algorithm 'layer_nrom'" in err and "layer_norm" in err and "Traceback" not in err


def test_a_selection_of_nothing_is_an_error_not_conformant(here, capsys):
    """`ftspec run --impl numpy --dtype bfloat16` once printed "conformant: 0 of 0 cells" and exited 0."""
    assert main(["run", "--impl", "numpy", "--dtype", "bfloat16", *QUICK]) == 2
    assert "nothing was tested" in " ".join(capsys.readouterr().err.split())
    assert main(["certify", "cli_example:implementation", "--algorithm", "attention", *QUICK]) == 2
    assert "nothing was tested" in " ".join(capsys.readouterr().err.split())
    assert not (here / "certificates").exists()


def test_output_paths_are_checked_before_the_run(here, capsys):
    blocker = here / "a-file"
    blocker.write_text("")
    rc = main(["run", "--impl", "cli_example:implementation", "--json-report", str(blocker / "r.json"), *QUICK])
    assert rc == 2 and "not a directory" in capsys.readouterr().err
    assert not (here / "reports").exists()  # no search ran: no case directory either
    rc = main(["certify", "cli_example:implementation", "--out", str(blocker), *QUICK])
    assert rc == 2 and "not a directory" in capsys.readouterr().err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_folder_that_refuses_files_is_found_before_the_run(here, capsys):
    """/proc passes an access() check as root, yet no file can be made there: tried, not assumed."""
    rc = main(["run", "--impl", "cli_example:implementation", "--json-report", "/proc/ftspec-none/r.json", *QUICK])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot create a file in /proc" in err and len(err.strip().splitlines()) == 1
    assert not (here / "reports").exists()  # no search ran


def test_verify_a_missing_or_malformed_file(here, capsys):
    assert main(["certify", "--verify", str(here / "none.json")]) == 1
    assert "no such file" in capsys.readouterr().err
    (here / "bad.json").write_text("{not json")
    assert main(["certify", "--verify", str(here / "bad.json")]) == 1
    err = capsys.readouterr().err
    assert "not JSON" in err and "Traceback" not in err


def test_a_selection_exits_partial_and_a_complete_certificate_conformant(here, capsys):
    rc = main(["certify", "cli_example:implementation", "--algorithm", "layer_norm", "--fixtures", "none", *QUICK])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 3 and "partial" in out and "--algorithm leaves out rms_norm" in out
    doc = json.loads((here / "certificates" / "example" / "certificate.json").read_text())
    assert doc["verdict"] == "partial" and doc["selection"]["algorithms"] == ["layer_norm"]
    assert main(["certify", "--verify", str(here / "certificates" / "example" / "certificate.json")]) == 0


MARKUP = """
def factory():
    def broken(inputs, params, ctx):
        raise RuntimeError("notimpl:factory: [/bold] closes nothing, [red]opens")
    impl = implementation
    impl.algorithms["layer_norm"] = broken
    return impl
"""


def test_what_a_plugin_says_is_printed_as_written(here, capsys):
    """A message holding rich markup once crashed the summary (MarkupError, no report)."""
    (here / "notimpl.py").write_text(EXAMPLE + MARKUP)
    rc = main(["run", "--impl", "notimpl:factory", "--algorithm", "layer_norm", "--dtype", "float64",
               "--examples", "3", "--fixtures", "none", "--json-report", "r.json", *QUICK])
    out = capsys.readouterr().out
    assert rc == 1
    assert "notimpl:factory: [/bold] closes nothing, [red]opens" in " ".join(out.split())
    assert "\N{FACTORY}" not in out
    assert json.loads((here / "r.json").read_text())["verdict"] == "non-conformant"


# "inherited": started as a script's `&` job is, with SIGINT ignored (POSIX), which Python keeps
# unless told otherwise; `kill -INT` must still stop the run with its report
#
# The report lists every planned search, those Ctrl-C left unfinished as "not run: interrupted":
# the in-process path wrote only the searches that had ended (interruption.search_here).


@pytest.mark.parametrize("where, inherited", [("--in-process", False),
                                              ("--jobs=1", False), ("--jobs=1", True)],
                         ids=["in-process", "jobs-1", "jobs-1-sigint-ignored"])
def test_ctrl_c_writes_the_partial_report_and_the_summary(tmp_path, where, inherited):
    report = tmp_path / "r.json"
    command = [sys.executable, "-m", "ftspec.tools.cli", "run", "--impl", "numpy", "--profile", "quick",
               "--fixtures", "none", where, "--json-report", str(report)]
    if inherited:  # the shell ignores SIGINT and execs: the disposition is inherited (no fork here)
        command = ["sh", "-c", "trap '' INT; exec " + shlex.join(command)]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:  # wait until two searches have ended
        if line.startswith("[2/"):
            break
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)  # seconds, not the rest of the run (it once hung here)
    assert proc.returncode == 130, out
    doc = json.loads(report.read_text())
    assert doc["interrupted"] and doc["verdict"] == "inconclusive"
    assert len([c for c in doc["cells"] if c["status"] == "pass"]) >= 2
    assert "interrupted" in out
    # the summary table shows the searches that ended (names whole at 80 columns, in any of its layouts)
    assert re.search(r"token_embedding[\s│]+numpy[\s│]+float64[\s│]+cpu[\s│]+\d+[\s│]+pass", out), out
    from ftspec.impls.numpy import implementation as numpy_impl

    planned = {(a, d) for a in numpy_impl.algorithms for d in numpy_impl.dtypes_for(a)}
    assert {(c["algorithm"], c["dtype"]) for c in doc["cells"]} == planned  # every search, ended or not
    assert any("interrupted" in (c["note"] or "") and c["examples"] == 0 for c in doc["cells"])
