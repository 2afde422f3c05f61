"""pyproject.toml ships every package and the type marker.

The five top-level folders are mapped onto the ``ftspec`` namespace by
``package-dir``, and setuptools is given an explicit package list, so a new
subfolder with Python files is silently left out of a wheel unless someone
lists it. These tests read pyproject.toml and the tree, not the installed
package, so they hold for a wheel built from this checkout.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("spec", "impls", "conformance", "fixtures", "tools")


def _setuptools() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def _package_folders() -> set[str]:
    """Dotted ftspec names of every folder under the layers that holds a .py file."""
    found = set()
    for layer in LAYERS:
        for py in (ROOT / layer).rglob("*.py"):
            rel = py.parent.relative_to(ROOT)
            if "__pycache__" in rel.parts:
                continue
            found.add("ftspec." + ".".join(rel.parts))
    return found


def test_package_dir_maps_each_layer_to_its_folder() -> None:
    assert _setuptools()["package-dir"] == {f"ftspec.{layer}": layer for layer in LAYERS}


def test_every_folder_with_python_files_is_a_listed_package() -> None:
    listed = set(_setuptools()["packages"])
    missing = sorted(_package_folders() - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_every_listed_package_is_a_folder_with_an_init() -> None:
    stale = [name for name in _setuptools()["packages"]
             if not (ROOT.joinpath(*name.split(".")[1:]) / "__init__.py").is_file()]
    assert not stale, f"listed in pyproject.toml but not a package folder: {stale}"


def test_each_layer_ships_a_py_typed_marker() -> None:
    """PEP 561: in a namespace package each top-level subpackage carries py.typed."""
    data = _setuptools()["package-data"]
    assert "py.typed" in data.get("*", []), "package-data does not ship py.typed"
    missing = [layer for layer in LAYERS if not (ROOT / layer / "py.typed").is_file()]
    assert not missing, f"no py.typed in {missing}"
