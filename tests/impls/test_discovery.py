"""Plugin discovery through the ``ftspec.impls`` entry-point group.

Outside plugins are simulated the way Python sees an installed package: a
``NAME-VERSION.dist-info`` folder with ``entry_points.txt`` on ``sys.path``.
The example plugin of docs/plugins.md is also installed for real with pip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Optional

import pytest

from ftspec.impls import discovery
from ftspec.impls.discovery import PluginConflict, PluginError, discover, load, load_record
from ftspec.spec.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[2]


def fake_dist(tmp: Path, dist: str, plugins: dict[str, str], modules: Optional[dict[str, str]] = None) -> Path:
    """An installed distribution ``dist`` declaring ``plugins`` {name: target}, with source ``modules``."""
    modules = modules or {}
    info = tmp / f"{dist.replace('-', '_')}-1.0.dist-info"  # as pip names it
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in plugins.items())
    (info / "entry_points.txt").write_text(f"[ftspec.impls]\n{lines}\n")
    for name, source in modules.items():
        (tmp / f"{name}.py").write_text(textwrap.dedent(source))
    return tmp


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    discovery.clear_cache()
    monkeypatch.delenv("FTSPEC_NO_PLUGINS", raising=False)
    yield
    discovery.clear_cache()


def test_the_three_bundled_plugins_are_found_through_entry_points():
    found = discover()
    for name in ("numpy", "torch", "jax"):
        assert name in found and found[name].bundled and found[name].distribution == "ftspec"
        assert not found[name].loaded  # lazy: nothing imported by listing
        impl = load(name)
        assert impl.name == name


def test_a_broken_plugin_is_reported_with_reason_and_hint(tmp_path, monkeypatch):
    fake_dist(tmp_path, "broken-plugin", {"broken": "broken_mod:implementation"},
              {"broken_mod": "import definitely_not_installed_xyz\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover()
    assert {"numpy", "torch", "jax", "broken"} <= set(found)  # discovery did not break
    record = load_record(found["broken"])
    assert not record.loaded
    assert "ModuleNotFoundError" in record.error and "definitely_not_installed_xyz" in record.error
    assert "pip install definitely_not_installed_xyz" in record.hint
    with pytest.raises(PluginError, match="failed to load.*definitely_not_installed_xyz"):
        load("broken")
    assert load("numpy").name == "numpy"  # the others still load


def test_a_malformed_plugin_is_reported(tmp_path, monkeypatch):
    fake_dist(tmp_path, "malformed-plugin", {"malformed": "malformed_mod:implementation"},
              {"malformed_mod": "implementation = 42\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    record = load_record(discover()["malformed"])
    assert "expected an ftspec.impls.api.Implementation" in record.error


def test_two_plugins_with_one_name_are_an_error(tmp_path, monkeypatch):
    fake_dist(tmp_path / "a", "plugin-a", {"twin": "mod_a:implementation"})
    fake_dist(tmp_path / "b", "plugin-b", {"twin": "mod_b:implementation"})
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    with pytest.raises(PluginConflict, match="two plugins are named 'twin'.*plugin-[ab].*plugin-[ab]"):
        discover()


def test_an_outside_plugin_may_not_take_a_bundled_name(tmp_path, monkeypatch):
    fake_dist(tmp_path, "impostor", {"numpy": "impostor_mod:implementation"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginConflict, match="'numpy'"):
        discover()


def test_ftspec_no_plugins_keeps_only_the_bundled(tmp_path, monkeypatch):
    fake_dist(tmp_path, "other-plugin", {"other": "other_mod:implementation"})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "other" in discover()
    monkeypatch.setenv("FTSPEC_NO_PLUGINS", "1")
    # the bundled plugins are exactly those pyproject.toml registers for ftspec itself
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    bundled = set(project["project"]["entry-points"]["ftspec.impls"])
    assert {"numpy", "torch", "jax", "torch-nn"} <= bundled
    assert set(discover()) == bundled


def _run(cmd: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_example_plugin_installs_is_listed_and_certifies(tmp_path):
    """docs/plugins.md step by step: install with pip, list, certify (from outside the repository)."""
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": str(site), "FTSPEC_NO_PLUGINS": ""}
    install = _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(site), str(ROOT / "examples" / "minimal_plugin")],
                   env, tmp_path)
    assert install.returncode == 0, install.stderr
    listed = _run([sys.executable, "-m", "ftspec.tools.cli", "list", "--json"], env, tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["example"]["loaded"] and rows["example"]["algorithms"] == ["layer_norm", "rms_norm"]
    assert rows["example"]["coverage"] == f"2/{len(REGISTRY)}" and rows["example"]["variants"] == ["phuong-hutter"]
    cert = _run([sys.executable, "-m", "ftspec.tools.cli", "certify", "example", "--profile", "quick",
                 "--no-fixtures", "--quiet", "--out", str(tmp_path / "cert")], env, tmp_path)
    assert cert.returncode == 3, cert.stdout + cert.stderr  # partial: no fixtures replayed
    doc = json.loads((tmp_path / "cert" / "certificate.json").read_text())
    assert doc["verdict"] == "partial" and doc["coverage"]["fraction"] == f"2/{len(REGISTRY)}"


def test_certify_a_module_object_target_from_outside_the_repository(tmp_path):
    """No packaging needed: module:object, with the current directory importable."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    source = (ROOT / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py").read_text()
    (work / "my_layernorm.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = _run([sys.executable, "-m", "ftspec.tools.cli", "certify", "my_layernorm:implementation",
                 "--profile", "quick", "--no-fixtures", "--quiet", "--algorithm", "layer_norm"], env, work)
    assert done.returncode == 3, done.stdout + done.stderr  # partial: one of two algorithms, no fixtures
    cert = work / "certificates" / "example" / "certificate.json"
    assert cert.exists()
    verify = _run([sys.executable, "-m", "ftspec.tools.cli", "certify", "--verify", str(cert)], env, work)
    assert verify.returncode == 0 and "intact" in verify.stdout
    doc = json.loads(cert.read_text())
    doc["verdict"] = "conformant!"  # an edited certificate is detected
    cert.write_text(json.dumps(doc))
    verify = _run([sys.executable, "-m", "ftspec.tools.cli", "certify", "--verify", str(cert)], env, work)
    assert verify.returncode == 1 and "mismatch" in verify.stdout + verify.stderr
