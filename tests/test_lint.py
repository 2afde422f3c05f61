"""ruff and mypy over the repository, as configured in pyproject.toml.

Both run from the repository root in a subprocess, exactly as a developer
runs them (``python -m ruff check .``, ``python -m mypy``), and a failure
shows their own output. mypy keeps its incremental cache in .mypy_cache
(gitignored): about a minute cold, a few seconds warm. Two probes check
that the configuration is live: a planted unused import must fail ruff, and
a number system without ``relu`` must fail the ``NumberSystem`` protocol.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL = "pip install -c constraints.txt -e '.[test]'"


def _tool(module: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed in this environment ({sys.executable}); run: {INSTALL}")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=600)


def _failure(what: str, proc: subprocess.CompletedProcess[str]) -> str:
    return (f"{what} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}\n"
            f"reproduce: cd {ROOT} && python -m {what}")


def test_ruff_passes() -> None:
    proc = _tool("ruff", "check", "--no-fix", "--output-format", "concise", ".")
    if proc.returncode != 0:
        pytest.fail(_failure("ruff check .", proc), pytrace=False)


def test_ruff_config_catches_an_unused_import() -> None:
    proc = _tool("ruff", "check", "--no-fix", "--no-cache", "--stdin-filename", "spec/_probe.py", "-",
                 stdin="import os\n")
    assert proc.returncode == 1 and "F401" in proc.stdout, proc.stdout + proc.stderr


def test_mypy_passes() -> None:
    proc = _tool("mypy")
    if proc.returncode != 0:
        pytest.fail(_failure("mypy", proc), pytrace=False)


#: NumberSystem's methods (spec/numbers.py), each taking numbers and giving one
_METHODS = ("num", "to_float", "detach", "exp", "log", "sqrt", "tanh", "erf", "sin", "cos", "relu", "isfinite",
            "isnan")


def _system(cls: str, methods: tuple[str, ...]) -> str:
    body = "".join(f"    def {m}(self, x: Any) -> Any:\n        return x\n\n" for m in methods)
    return (f"class {cls}:\n    name = {cls!r}\n    inf = nan = pi = tiny = 0.0\n\n"
            "    def const(self, text: str) -> Any:\n        return float(text)\n\n"
            "    def fsum(self, xs: Iterable[Any]) -> Any:\n        return sum(xs)\n\n"
            "    def dot(self, xs: Sequence[Any], ys: Sequence[Any]) -> Any:\n        return 0.0\n\n"
            "    def pow(self, base: Any, exponent: Any) -> Any:\n        return base\n\n" + body + "\n")


def test_mypy_checks_number_systems_against_the_protocol(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    lines = ["from typing import Any, Iterable, Sequence", "from ftspec.spec.numbers import NumberSystem", "", "",
             _system("Complete", _METHODS), _system("NoRelu", tuple(m for m in _METHODS if m != "relu"))]
    source = "\n".join(lines) + "_ok: type[NumberSystem] = Complete\n_bad: type[NumberSystem] = NoRelu\n"
    probe.write_text(source)
    bad_line = source.splitlines().index("_bad: type[NumberSystem] = NoRelu") + 1
    proc = _tool("mypy", "--follow-imports=silent", str(probe))
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and f"probe.py:{bad_line}: error" in errors[0] and "NumberSystem" in errors[0], (
        f"expected one error, for NoRelu, at line {bad_line}:\n{proc.stdout}{proc.stderr}")
