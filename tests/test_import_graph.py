"""The import graph: the spec is pure Python, the plugins are independent.

1. No module under spec/ imports NumPy, PyTorch or JAX: checked on the
   source (every import statement, parsed with ``ast``) and on the running
   interpreter (``import ftspec.spec`` in a fresh process leaves none of them
   in ``sys.modules``, so no indirect import sneaks one in either).
2. Each bundled implementation (impls/numpy, impls/torch, impls/jax) imports
   nothing from the other two, and from the spec only its definitions of
   variant sets (``ftspec.spec.variants``) and the plugin contract
   (``ftspec.impls.api``): an implementation that borrowed the spec's
   numerics would agree with it by construction and test nothing.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_SPEC = {"numpy", "torch", "jax", "jaxlib"}
PLUGINS = ("numpy", "torch", "jax")


def imported_modules(path: Path, package: str) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module name, imported names) for every import in ``path``.

    ``package`` is the dotted package the file belongs to, for resolving
    relative imports. ``import a.b`` gives ("a.b", []); ``from a import b, c``
    gives ("a", ["b", "c"]). Calls ``importlib.import_module("x")`` and
    ``__import__("x")`` with a literal argument count as imports of x.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module, [a.name for a in node.names]))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__"):
                out.append((node.lineno, node.args[0].value, []))
    return out


def top(module: str) -> str:
    return module.split(".")[0]


# --------------------------------------------------------------------------
# the spec
# --------------------------------------------------------------------------

SPEC_FILES = sorted((ROOT / "spec").rglob("*.py"))


def test_spec_has_modules():
    assert len(SPEC_FILES) >= 10


@pytest.mark.parametrize("path", SPEC_FILES, ids=[p.name for p in SPEC_FILES])
def test_spec_source_imports_no_array_library(path):
    package = "ftspec.spec" + "".join("." + p for p in path.relative_to(ROOT / "spec").parent.parts)
    bad = [(line, m) for line, m, names in imported_modules(path, package)
           if top(m) in FORBIDDEN_IN_SPEC
           or (m == "ftspec" and FORBIDDEN_IN_SPEC & set(names))]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_importing_the_spec_loads_no_array_library():
    code = (
        "import sys\n"
        "import ftspec.spec\n"
        "from ftspec.spec import evaluate\n"
        "evaluate('layer_norm', {'X': [[1.0], [2.0]]}, {'gamma': [1.0, 1.0], 'beta': [0.0, 0.0]})\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN_IN_SPEC)!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "[]", result.stdout


# --------------------------------------------------------------------------
# the bundled implementations
# --------------------------------------------------------------------------


def test_the_three_plugin_directories_exist():
    for name in PLUGINS:
        d = ROOT / "impls" / name
        assert d.is_dir() and any(d.glob("*.py")), f"impls/{name} is missing or empty"


PLUGIN_FILES = [(name, p) for name in PLUGINS if (ROOT / "impls" / name).is_dir()
                for p in sorted((ROOT / "impls" / name).rglob("*.py"))]


def _allowed(own: str, module: str, names: list[str]) -> str | None:
    """None if importing (module, names) is allowed in plugin ``own``; else why not."""
    own_pkg = f"ftspec.impls.{own}"
    if top(module) != "ftspec":
        # NumPy is everyone's interchange format; the other frameworks are not
        foreign = {"torch", "jax", "jaxlib"} - {own, "jaxlib" if own == "jax" else ""}
        return f"imports the {top(module)} library" if top(module) in foreign else None
    if module == own_pkg or module.startswith(own_pkg + "."):
        return None
    if module in ("ftspec.spec.variants", "ftspec.impls.api"):
        return None
    if module == "ftspec.spec" and names and set(names) <= {"variants"}:
        return None
    if module == "ftspec.impls" and names and set(names) <= {"api", own}:
        return None
    for other in PLUGINS:
        if other != own and (module == f"ftspec.impls.{other}" or module.startswith(f"ftspec.impls.{other}.")
                             or (module == "ftspec.impls" and other in names)):
            return f"imports the {other} plugin"
    if module == "ftspec.spec" or module.startswith("ftspec.spec.") or (module == "ftspec" and "spec" in names):
        return "imports the spec beyond ftspec.spec.variants"
    return None


@pytest.mark.parametrize("own,path", PLUGIN_FILES, ids=[f"{n}/{p.name}" for n, p in PLUGIN_FILES])
def test_plugin_imports_only_its_own_code_the_contract_and_variants(own, path):
    package = f"ftspec.impls.{own}" + "".join(
        "." + p for p in path.relative_to(ROOT / "impls" / own).parent.parts)
    problems = []
    for line, module, names in imported_modules(path, package):
        why = _allowed(own, module, names)
        if why:
            problems.append(f"line {line}: {module} {names or ''}: {why}")
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_checker_catches_what_it_should():
    """Controls for the checker itself."""
    assert _allowed("numpy", "ftspec.spec.variants", ["VariantSet"]) is None
    assert _allowed("numpy", "ftspec.impls.api", ["Context"]) is None
    assert _allowed("numpy", "ftspec.impls.numpy.components", ["x"]) is None
    assert _allowed("numpy", "ftspec.spec", ["variants"]) is None
    assert _allowed("numpy", "ftspec.spec", ["VariantSet"]) is not None
    assert _allowed("numpy", "ftspec.spec.numbers", ["FLOAT"]) is not None
    assert _allowed("numpy", "ftspec", ["spec"]) is not None
    assert _allowed("numpy", "ftspec.impls.torch", []) is not None
    assert _allowed("torch", "ftspec.impls", ["jax"]) is not None
    assert _allowed("jax", "ftspec.impls.numpy.components", ["softmax"]) is not None
    assert _allowed("numpy", "torch", []) is not None
    assert _allowed("torch", "numpy", []) is None
