"""A certificate document with the run it came from, and its two files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...core.verdict import exit_code
from ...running.runner import RunResult
from ..report import write_json
from .rendering import render_markdown


@dataclass
class Certificate:
    """A certificate document, with the run it came from when it was made here."""

    doc: dict[str, Any]
    result: Optional[RunResult] = None

    @property
    def verdict(self) -> str:
        return str(self.doc["verdict"])

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdict)

    def markdown(self) -> str:
        return render_markdown(self.doc)

    def write_json(self, path: Path | str) -> Path:
        return write_json(path, self.doc)

    def write_markdown(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.markdown())
        return path

    def write(self, directory: Path | str) -> tuple[Path, Path]:
        """``certificate.json`` and ``certificate.md`` in ``directory``."""
        directory = Path(directory)
        return self.write_json(directory / "certificate.json"), self.write_markdown(directory / "certificate.md")
