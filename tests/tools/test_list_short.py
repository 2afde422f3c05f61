"""``ftspec list``: one line per plugin from a cache of what each declared, kept while nothing it
depends on changed (tools/cmd_list.py, tools/plugin_cache.py); ``ftspec list NAME`` the details.

The plugins here are the NumPy plugin, the example plugin as a module in a temporary folder, and
one whose module does not exist, registered through a patched entry-point list: no test loads
torch or JAX.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import sys
from pathlib import Path

import pytest

from ftspec.impls import discovery
from ftspec.spec.registry import REGISTRY
from ftspec.tools import cmd_list
from ftspec.tools.cli import main

GROUP = "ftspec.impls"


@pytest.fixture
def plugins(here, monkeypatch, tmp_path):
    """Three registered plugins (numpy, the example as ``cli_example``, one that cannot load), a
    cache folder of the test's own, and a count of the plugins loaded."""
    points = [md.EntryPoint("numpy", "ftspec.impls.numpy:implementation", GROUP),
              md.EntryPoint("example", "cli_example:implementation", GROUP),
              md.EntryPoint("gone", "no_such_module_issue39:implementation", GROUP)]
    monkeypatch.setattr(discovery, "_entry_points", lambda: points)
    monkeypatch.delitem(sys.modules, "cli_example", raising=False)  # another test's, from its own folder
    monkeypatch.setenv("FTSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FTSPEC_NO_PLUGINS", raising=False)
    loads: list[str] = []
    real = discovery.load_record

    def counting(record, **kw):
        loads.append(record.name)
        return real(record, **kw)

    monkeypatch.setattr(discovery, "load_record", counting)
    discovery.clear_cache()
    yield loads
    discovery.clear_cache()


def _short(timeout: float = 30.0) -> tuple[list[dict], str]:
    discovery.clear_cache()  # as a new process starts: no record loaded yet
    return cmd_list.short_rows(timeout)


def test_one_line_per_plugin_at_80_columns(plugins, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list"]) == 1  # one plugin failed to load
    lines = capsys.readouterr().out.splitlines()
    # a plugin that loaded fits in 80 columns; a failure's error is one line, never cut (a terminal folds it)
    assert all(len(line.rstrip()) <= 80 for line in lines if "failed to load" not in line), lines
    by_name = {line.split()[0]: line for line in lines[1:] if line.strip()}
    numpy = discovery.load("numpy")
    covered = sum(1 for a in REGISTRY if a in numpy.algorithms)
    assert by_name["numpy"].split()[1] == f"{covered}/{len(REGISTRY)}"
    assert "f64 f32" in by_name["numpy"] and numpy.version in by_name["numpy"]
    assert by_name["example"].split()[1] == f"2/{len(REGISTRY)}"  # layer_norm and rms_norm (docs/plugins.md)
    assert "failed to load" in by_name["gone"] and "No module named 'no_such_module_issue39'" in by_name["gone"]
    assert [line.split()[0] for line in lines[1:4]] == ["example", "gone", "numpy"]  # a line each
    assert "every plugin loaded now" in " ".join(lines[4:])


def test_a_second_listing_loads_nothing_and_says_so(plugins):
    first, _ = _short()
    assert sorted(plugins) == ["example", "gone", "numpy"]
    plugins.clear()
    second, note = _short()
    assert plugins == []
    assert [{k: v for k, v in r.items() if k != "cached"} for r in second] == first
    assert note.startswith("3 of 3 as declared when last loaded") and "--fresh" in note
    assert not next(r for r in second if r["name"] == "gone")["loaded"]  # a failure is kept as a failure
    rows, note = cmd_list.short_rows(30.0, fresh=True)
    assert sorted(plugins) == ["example", "gone", "numpy"] and note.startswith("every plugin loaded now")


def test_what_a_record_depends_on_changing_loads_it_again(plugins, here, monkeypatch):
    _short()
    plugins.clear()
    source = here / "cli_example.py"
    st = os.stat(source)
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the plugin's source edited
    _short()
    assert plugins == ["example"]  # the others' records still hold
    plugins.clear()
    (here / "newlib-1.0.dist-info").mkdir()  # something installed on sys.path
    _short()
    assert sorted(plugins) == ["example", "gone", "numpy"]
    plugins.clear()
    monkeypatch.setenv("JAX_ENABLE_X64", "1")  # a variable the libraries read
    _short()
    assert sorted(plugins) == ["example", "gone", "numpy"]


def test_a_load_that_timed_out_is_not_kept(plugins, monkeypatch):
    def timing_out(record, **kw):
        plugins.append(record.name)
        record.error = "PluginTimeout: no result after 1 s (load timeout)"
        return record

    monkeypatch.setattr(discovery, "load_record", timing_out)
    rows, _ = _short()
    assert all(not r["loaded"] and "PluginTimeout" in r["error"] for r in rows)
    plugins.clear()
    _short()
    assert sorted(plugins) == ["example", "gone", "numpy"]


def test_an_unwritable_cache_is_no_cache(plugins, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("FTSPEC_CACHE_DIR", str(blocker / "cache"))  # below a file: cannot be made
    first, _ = _short()
    plugins.clear()
    second, note = _short()
    assert second == first and sorted(plugins) == ["example", "gone", "numpy"]


@pytest.mark.parametrize("version, room, shown", [
    ("transformers5.24.0+torch2.13.0+cpu", 24, "transformers5.24.0+…"),
    ("transformers5.24.0+torch2.13.0+cpu", 34, "transformers5.24.0+torch2.13.0+cpu"),
    ("transformers5.24.0+torch2.13.0+cpu", 32, "transformers5.24.0+torch2.13.0+…"),
    ("transformers5.24.0+torch2.13.0+cpu", 31, "transformers5.24.0+…"),
    ("onnxruntime1.32.0+onnx1.23.2", 10, "onnxruntime1.32.0+onnx1.23.2"),  # no part fits: whole, wrapped
])
def test_a_version_loses_whole_parts_only(version, room, shown):
    assert cmd_list.fit_version(version, room) == shown


def test_details_of_a_name_are_the_listing_s_row(plugins, capsys):
    assert cmd_list.detail_rows(["gone", "numpy"], 30.0) == [r for r in discovery.listing(30.0)
                                                               if r["name"] in ("numpy", "gone")]
    assert main(["list", "example"]) == 0
    out = capsys.readouterr().out
    assert "layer_norm" in out and "rms_norm" in out and "phuong-hutter" in out


def test_an_unknown_name_is_one_line(plugins, capsys):
    assert main(["list", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no plugin named 'nope'" in err and "numpy" in err


def test_a_damaged_cache_is_a_miss(plugins):
    first, _ = _short()
    path = next(Path(os.environ["FTSPEC_CACHE_DIR"]).glob("plugins-*.json"))
    doc = json.loads(path.read_text())
    doc["records"]["numpy"]["row"]["dtypes"] = 3  # not a list: formatting it would fail
    path.write_text(json.dumps(doc))
    plugins.clear()
    second, _ = _short()
    assert plugins == ["numpy"] and [{k: v for k, v in r.items() if k != "cached"} for r in second] == first
    path.write_text("{not json")
    plugins.clear()
    _short()
    assert sorted(plugins) == ["example", "gone", "numpy"]
