"""A newcomer's first steps (issue 35, finding 13): README and docs/plugins.md, as written.

After the quick start, ``ftspec certify ...`` in a new shell answered "ftspec: command not found":
nothing said the command lives in ``.venv/bin``. And the pages a newcomer reads had drifted from
the code they describe (the run minimum, the coverage, ``--block``'s default, the fixture count).
Each figure a page states is checked here against where it comes from; the README's own commands
for the example plugin are run (a small selection of them, in this process).
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path


from ftspec.conformance.core.fixture_files import load_manifest
from ftspec.conformance.core.profiles import PROFILES
from ftspec.conformance.running.fixture_replay import applicable_cases, replay_fixtures
from ftspec.spec.registry import REGISTRY
from ftspec.tools.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PLUGINS = (ROOT / "docs" / "plugins.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _console_commands(text: str) -> list[list[str]]:
    """The commands of every ``console`` block (``$ ...`` lines), comments dropped, as words."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append(shlex.split(line[2:], comments=True))
    return out


def test_the_quick_start_says_how_to_reach_ftspec():
    """The quick start names the environment's activation and ``make env``, before any
    ``ftspec`` command is shown, and ``make env`` is a target of the Makefile."""
    quick = README[README.index("## Quick start"):README.index("## Real libraries")]
    assert ". .venv/bin/activate" in quick and ".venv/bin/ftspec" in quick and "make env" in quick
    assert README.index(". .venv/bin/activate") < README.index("$ ftspec list")
    targets = set(re.findall(r"^([\w-]+):", MAKEFILE, flags=re.M))
    named = set(re.findall(r"`make ([\w-]+)", README)) | set(re.findall(r"^\s+make ([\w-]+)", README, flags=re.M))
    assert "env" in named and named <= targets, named - targets


def test_the_plugin_page_installs_into_the_environment():
    """``pip install -e examples/minimal_plugin`` outside the environment installs into another
    Python: the page activates it first, in the same block."""
    install = PLUGINS[PLUGINS.index("## 4. Install and run"):]
    block = re.search(r"```console\n(.*?)```", install, flags=re.S).group(1)
    assert block.index(". .venv/bin/activate") < block.index("pip install -e examples/minimal_plugin")
    assert "make env" in _flat(install[:install.index("```")])


def test_the_readme_certifies_the_example_as_written(tmp_path, monkeypatch, capsys):
    """The README's commands for the example plugin, run as written but for a small selection
    (one algorithm, one dtype, the quick profile, in this process, added at the end): the
    directory it names holds the module, the target loads from there, and the certificate is
    written where the README says."""
    commands = _console_commands(README[README.index("## Certify your own implementation"):])
    assert [c[0] for c in commands] == [".", "cd", "ftspec"], commands
    folder = ROOT / commands[1][1]
    assert (folder / "ftspec_example" / "__init__.py").is_file(), folder
    assert commands[2][1:3] == ["certify", "ftspec_example:implementation"], commands
    argv = commands[2][1:]
    shutil.copytree(folder, tmp_path / "example")  # a copy: the certificate is written beside it
    monkeypatch.chdir(tmp_path / "example")
    monkeypatch.syspath_prepend(str(tmp_path / "example"))  # the console script puts the cwd first
    monkeypatch.delitem(sys.modules, "ftspec_example", raising=False)
    code = main([*argv, "--profile", "quick", "--in-process", "--quiet", "--algorithm", "rms_norm",
                 "--dtype", "float64", "--no-fixtures"])
    out = capsys.readouterr().out
    assert code == 3, out  # partial: the selection; the full command is conformant (tests/impls)
    named = re.findall(r"`(certificates/\w+/certificate\.json)`", README)
    assert named and (tmp_path / "example" / named[0]).is_file(), named


def test_the_run_minimum_the_page_states_is_the_profiles():
    """docs/plugins.md said "run: 2, 2 and 1000"; the default profile's run minimum is 50."""
    for name, prof in PROFILES.items():
        assert f"{prof.minimum} at `{name}`" in _flat(PLUGINS), (name, prof.minimum)
        assert f"{prof.certify_minimum}" in _flat(PLUGINS)


def test_the_coverage_the_page_states_is_the_registrys(monkeypatch):
    """"coverage (here 2/19)": the registry has grown; the example implements 2 of all of it."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "minimal_plugin"))
    monkeypatch.delitem(sys.modules, "ftspec_example", raising=False)
    from ftspec_example import implementation

    stated = re.search(r"coverage\s+\(here (\d+)/(\d+)", PLUGINS)
    assert stated, "docs/plugins.md no longer states the example's coverage"
    assert (int(stated[1]), int(stated[2])) == (len(implementation.algorithms), len(REGISTRY))


def test_the_block_help_gives_every_profiles_block():
    """``--block``'s help said "default 8" for every profile (4 at quick, 16 at thorough)."""
    parser = build_parser()
    run = next(a for a in parser._subparsers._group_actions[0].choices["run"]._actions if "--block" in a.option_strings)
    for name, prof in PROFILES.items():
        assert f"{name} {prof.block}" in run.help, run.help


def test_the_fixture_progress_counts_the_cases_that_apply(tmp_path, monkeypatch):
    """"replaying 1103 golden fixture cases" for a plugin of two norms, of which 12 apply: the count
    is of the cases the replay runs on the plugin (what ``replay_fixtures`` itself replays)."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "minimal_plugin"))
    monkeypatch.delitem(sys.modules, "ftspec_example", raising=False)
    from ftspec_example import implementation

    records = load_manifest()["cases"]
    every = [(r["id"], r["algorithm"]) for r in records]
    applying = applicable_cases([("example", implementation)], every)
    norms = [(cid, a) for cid, a in every if a in implementation.algorithms]
    replayed = {r.case for r in replay_fixtures([("example", implementation)], cases={c for c, _ in norms})}
    assert {cid for cid, _ in applying} == replayed and 0 < len(applying) < len(every)
    assert applicable_cases([("example", implementation)], every, dtypes=["bfloat16"]) == []


def test_progress_lines_count_in_words(capsys):
    """"1 cells ran fewer than 100 examples: one more round for them", "1 searches": one is singular."""
    from ftspec.tools.console import RunProgress

    progress = RunProgress()
    progress.live = False  # the lines a log gets, whatever the terminal
    progress("plan", searches=1, examples=84)
    progress("extend", cells=1, minimum=100, seconds=120.0)
    progress("fixtures", done=0, total=1, which="all")
    progress("plan", searches=4, examples=400)
    progress("extend", cells=2, minimum=100, seconds=120.0)
    err = " ".join(capsys.readouterr().err.split())
    for words in ("1 search (algorithm × dtype), up to 84 examples each", "1 cell ran fewer than 100 examples: "
                  "one more round for it", "replaying 1 golden fixture case (all)", "4 searches (algorithm",
                  "2 cells ran fewer than 100 examples: one more round for them"):
        assert words in err, err
