"""Fixtures shared by the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "minimal_plugin" / "ftspec_example" / "__init__.py"


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A working directory holding the example plugin as ``cli_example:implementation``."""
    (tmp_path / "cli_example.py").write_text(EXAMPLE.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path
