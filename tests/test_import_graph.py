"""The import graph: the spec is pure Python, the plugins are independent, the layers one way.

1. No module under spec/ imports NumPy, PyTorch or JAX: checked on the
   source (every import statement, parsed with ``ast``) and on the running
   interpreter (``import ftspec.spec`` in a fresh process leaves none of them
   in ``sys.modules``, so no indirect import sneaks one in either).
2. Each bundled implementation (impls/numpy, impls/torch, impls/jax) imports
   nothing from the other two, and from the spec only its definitions of
   variant sets (``ftspec.spec.variants``) and the plugin contract
   (``ftspec.impls.api``): an implementation that borrowed the spec's
   numerics would agree with it by construction and test nothing.
3. The layers import one way, ``spec`` <- ``impls`` <- ``conformance`` <-
   ``fixtures`` <- ``tools``, and no modules import each other in a circle.
   The graph is read from the source: every import statement anywhere in a
   file (inside functions too: a lazy import hides a cycle, it does not
   remove it), relative imports resolved, ``from pkg import name`` taken as
   an import of the submodule ``pkg.name`` when there is one, and
   ``importlib.import_module``/``__import__`` with a literal argument.

How packages count. A package is the node of its ``__init__.py``.
Importing ``a.b.c`` runs the ``__init__`` of ``a.b`` first, so an import
from outside ``a.b`` is also an edge to ``a.b``; from inside ``a.b`` it is
not (that ``__init__`` is already running, and counting it would make
every package whose ``__init__`` re-exports its submodules a cycle).
``from pkg import name`` where ``name`` is not a submodule is an edge to
``pkg``'s ``__init__``. So a submodule that takes a name from its own
package's ``__init__`` while that ``__init__`` imports it is reported as
the cycle it is: import the name from the submodule that defines it.

Imports under ``if TYPE_CHECKING:`` count for the layer order (a lower
layer should not even name a higher layer's types) but not for cycles:
they never run, and two modules naming each other's types in annotations
is no import-order dependency.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_SPEC = {"numpy", "torch", "jax", "jaxlib"}
PLUGINS = ("numpy", "torch", "jax", "torch_nn", "flax_linen", "hf")
#: The array framework of a plugin whose folder is not named for it.
FRAMEWORK = {"torch_nn": "torch", "flax_linen": "jax", "hf": "torch"}


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
        fw = FRAMEWORK.get(own, own)  # a library plugin uses its library's framework
        foreign = {"torch", "jax", "jaxlib"} - {fw, "jaxlib" if fw == "jax" else ""}
        return f"imports the {top(module)} library" if top(module) in foreign else None
    if module == own_pkg or module.startswith(own_pkg + "."):
        return None
    if module in ("ftspec.spec.variants", "ftspec.impls.api"):
        return None
    if module == "ftspec.impls._torch_boundary":  # the torch libraries' one conversion boundary
        return None if FRAMEWORK.get(own) == "torch" else "imports the torch libraries' boundary"
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


# --------------------------------------------------------------------------
# layers in one direction, and no cycle
# --------------------------------------------------------------------------

#: the layers, lowest first: each may import only its own and lower layers
LAYERS = ("spec", "impls", "conformance", "fixtures", "tools")
NAMESPACE = "ftspec"


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both module names) at ``path``:``line``."""

    source: str
    target: str
    path: str
    line: int
    #: under ``if TYPE_CHECKING:``: never runs
    typing_only: bool = False

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} -> {self.target}" + (
            " (under TYPE_CHECKING)" if self.typing_only else "")


def module_files(root: Path, layers=LAYERS, namespace: str = NAMESPACE) -> dict[str, Path]:
    """{module name: file} for every .py file under ``root/<layer>`` (a package is its __init__.py)."""
    out = {}
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            parts = list(path.relative_to(root / layer).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([namespace, layer, *parts])] = path
    return out


def _package_of(module: str, path: Path) -> str:
    """The package relative imports in ``module`` resolve against."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _resolve_relative(name: str, level: int, package: str) -> str | None:
    parts = package.split(".")
    if level - 1 >= len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(tree: ast.AST) -> list[tuple[ast.AST, bool]]:
    """Every node of ``tree`` with whether it sits under ``if TYPE_CHECKING:``."""
    out: list[tuple[ast.AST, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, typing_only = stack.pop()
        out.append((node, typing_only))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, True) for child in node.body)
            stack.extend((child, typing_only) for child in node.orelse)
            stack.append((node.test, typing_only))
        else:
            stack.extend((child, typing_only) for child in ast.iter_child_nodes(node))
    return out


def _imports(tree: ast.AST, package: str) -> list[tuple[int, str, list[str], bool]]:
    """(line, absolute module, names, under TYPE_CHECKING) of every import in ``tree``.

    ``names`` is empty for ``import module``, else the imported names (``["*"]`` for a star).
    """
    out: list[tuple[int, str, list[str], bool]] = []
    for node, typing_only in _walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, [], typing_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = (_resolve_relative(node.module or "", node.level, package) if node.level
                      else node.module or "")
            if module is None:
                raise ValueError(f"line {node.lineno}: relative import beyond the top package {package!r}")
            out.append((node.lineno, module, [a.name for a in node.names], typing_only))
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            name = _literal(node.args[0])
            if called not in ("import_module", "__import__") or name is None:
                continue
            if name.startswith("."):  # import_module(".x", "pkg")
                anchor = _literal(node.args[1]) if len(node.args) > 1 else next(
                    (_literal(k.value) for k in node.keywords if k.arg == "package"), None)
                level = len(name) - len(name.lstrip("."))
                name = _resolve_relative(name.lstrip("."), level, anchor) if anchor else None
                if name is None:
                    continue
            out.append((node.lineno, name, [], typing_only))
    return sorted(out, key=lambda t: t[0])


def build_graph(root: Path, layers=LAYERS, namespace: str = NAMESPACE) -> tuple[dict[str, Path], list[Edge], list[str]]:
    """The modules under ``root``'s layers, the import edges between them, and imports of missing modules."""
    modules = module_files(root, layers, namespace)
    edges: set[Edge] = set()
    missing: list[str] = []
    for source, path in modules.items():
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module, names, typing_only in _imports(tree, _package_of(source, path)):
            if module != namespace and not module.startswith(namespace + "."):
                continue
            if module != namespace and module not in modules:
                missing.append(f"{rel}:{line}: {source} imports {module}, which is not a module here")
                continue
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
            if len(targets) < len(names) or not names:  # names from the package itself, or `import module`
                targets.append(module)
            for target in targets:
                # the target and every package above it whose __init__ the import runs
                parts = target.split(".")
                for k in range(len(parts), 1, -1):
                    node = ".".join(parts[:k])
                    if node not in modules:
                        continue
                    if node != target and (source == node or source.startswith(node + ".")):
                        break  # already running: the importer is inside it
                    edges.add(Edge(source, node, rel, line, typing_only))
    return modules, sorted(edges, key=lambda e: (e.path, e.line, e.target)), sorted(missing)


def layer_of(module: str) -> str:
    return module.split(".")[1]


def upward_imports(edges: list[Edge], layers=LAYERS) -> list[Edge]:
    """Edges from a layer to a higher one."""
    rank = {name: i for i, name in enumerate(layers)}
    return [e for e in edges if rank[layer_of(e.target)] > rank[layer_of(e.source)]]


def cycles(modules, edges: list[Edge]) -> list[list[Edge]]:
    """The edges inside each strongly connected component of more than one module, and every self-loop.

    Imports under ``TYPE_CHECKING`` never run and are left out. Tarjan's
    algorithm, iterative (no recursion limit to worry about).
    """
    edges = [e for e in edges if not e.typing_only]
    succ: dict[str, list[str]] = {m: [] for m in modules}
    for e in edges:
        succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.add(m)
                        if m == node:
                            break
                    components.append(component)
    out = []
    for component in components:
        inside = [e for e in edges if e.source in component and e.target in component]
        if len(component) > 1 or inside:  # inside non-empty for one module: a self-loop
            out.append(inside)
    return sorted(out, key=lambda c: (c[0].path, c[0].line))


def _describe(cycle: list[Edge]) -> str:
    names = sorted({e.source for e in cycle})
    return "cycle among " + ", ".join(names) + ":\n" + "\n".join(f"    {e}" for e in cycle)


GRAPH = build_graph(ROOT)


def test_the_graph_covers_every_layer():
    modules, edges, _ = GRAPH
    assert {layer_of(m) for m in modules} == set(LAYERS)
    assert len(modules) >= 100 and len(edges) >= 200, (len(modules), len(edges))
    # a lazy import is in the graph: cli.py imports the spec inside build_parser
    assert any(e.source == "ftspec.tools.cli" and e.target == "ftspec.spec" for e in edges)


def test_imports_name_modules_that_exist():
    _, _, missing = GRAPH
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_layers_import_only_downwards():
    _, edges, _ = GRAPH
    bad = upward_imports(edges)
    assert not bad, (f"imports against the layer order {' <- '.join(LAYERS)} (a module may import only its own "
                     "layer and lower ones; move the imported code down, or the importing code up):\n"
                     + "\n".join(f"  {e}" for e in bad))


def test_no_import_cycles():
    modules, edges, _ = GRAPH
    found = cycles(modules, edges)
    assert not found, ("import cycles (function-level imports count: a lazy import hides a cycle, it does not "
                       "remove it; move the shared code into a module both can import):\n"
                       + "\n".join(_describe(c) for c in found))


#: the rooms of the harness (conformance/), lowest first: each may import only its own and lower rooms
#: (docs/development.md, "Rooms of the harness"); ``conformance/pytest_plugin.py`` and
#: ``conformance/suite`` are the pytest face above them all
ROOMS = ("core", "forensics", "running", "session")
TOP_OF_HARNESS = {"ftspec.conformance", "ftspec.conformance.pytest_plugin", "ftspec.conformance.suite",
                  "ftspec.conformance.suite.test_conformance"}


def room_of(module: str) -> str | None:
    """The room of a harness module (None outside the harness, or at its top)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["ftspec", "conformance"] and parts[2] in ROOMS else None


def rooms_upward(edges: list[Edge]) -> list[Edge]:
    """Edges from a room of the harness to a higher room (TYPE_CHECKING imports included)."""
    rank = {name: i for i, name in enumerate(ROOMS)}
    out = []
    for e in edges:
        a, b = room_of(e.source), room_of(e.target)
        if a is not None and b is not None and rank[b] > rank[a]:
            out.append(e)
        elif a is not None and e.target in TOP_OF_HARNESS - {"ftspec.conformance"}:
            out.append(e)
    return out


def test_every_harness_module_lives_in_a_room():
    modules, _, _ = GRAPH
    loose = [m for m in modules if m.startswith("ftspec.conformance.") and room_of(m) is None
             and m not in TOP_OF_HARNESS]
    assert loose == [], f"harness modules outside core/forensics/running/session: {loose}"
    assert {room_of(m) for m in modules} >= set(ROOMS)


def test_the_rooms_of_the_harness_import_one_way():
    _, edges, _ = GRAPH
    bad = rooms_upward(edges)
    assert not bad, "a room imports a higher one:\n" + "\n".join(str(e) for e in bad)


def test_the_rooms_check_catches_an_upward_import(tmp_path):
    root = _plant(tmp_path, {
        **{f"conformance/{room}/__init__.py": "" for room in ROOMS},
        "conformance/core/judge.py": "def f():\n    from ftspec.conformance.forensics import diagnosis\n",
        "conformance/forensics/diagnosis.py": "from ..core import judge\n",
        "conformance/running/runner.py": "from ftspec.conformance.session.commands import run\n",
        "conformance/session/commands.py": "from ftspec.conformance.running import runner\n",
    })
    _, edges, _ = build_graph(root)
    got = sorted((e.source, e.target) for e in rooms_upward(edges))
    assert ("ftspec.conformance.core.judge", "ftspec.conformance.forensics.diagnosis") in got
    assert ("ftspec.conformance.running.runner", "ftspec.conformance.session.commands") in got
    assert not any(s.startswith("ftspec.conformance.forensics") or s.startswith("ftspec.conformance.session")
                   for s, _ in got)


def test_the_harness_reads_the_bundled_fixtures_without_importing_the_fixtures_package():
    """The runtime side of the layer order where it is least obvious: the golden reader finds
    ``fixtures/data`` through the import system without running ``ftspec.fixtures``."""
    code = (
        "import sys\n"
        "from ftspec.conformance.running import fixture_replay\n"
        "from ftspec.conformance.core import fixture_files as golden\n"
        "print(golden.data_dir())\n"
        "print(len(golden.load_manifest()['cases']))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ftspec.fixtures', 'ftspec.tools'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    directory, count, loaded = result.stdout.splitlines()
    assert Path(directory) == (ROOT / "fixtures" / "data").resolve()
    assert int(count) > 0
    assert loaded == "[]", f"importing the harness loaded {loaded}"


# --------------------------------------------------------------------------
# the checker, on a planted package tree
# --------------------------------------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> Path:
    for layer in LAYERS:
        (root / layer).mkdir(parents=True, exist_ok=True)
        (root / layer / "__init__.py").touch()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_clean_planted_tree_passes(tmp_path):
    root = _plant(tmp_path, {
        "spec/core.py": "import math\n",
        "impls/api.py": "from ftspec.spec import core\n",
        "conformance/judge.py": "from ..spec.core import x\nfrom . import findings\n",
        "conformance/findings.py": "from ftspec.impls.api import Contract\n",
        "tools/cli.py": "import importlib\nimportlib.import_module('ftspec.conformance.judge')\n",
    })
    modules, edges, missing = build_graph(root)
    assert not missing and not upward_imports(edges) and not cycles(modules, edges)
    got = {(e.source, e.target) for e in edges}
    assert ("ftspec.conformance.judge", "ftspec.spec.core") in got  # relative, two levels
    assert ("ftspec.conformance.judge", "ftspec.spec") in got  # the package __init__ the import runs
    assert ("ftspec.conformance.judge", "ftspec.conformance.findings") in got  # `from . import submodule`
    assert ("ftspec.impls.api", "ftspec.spec.core") in got  # `from pkg import submodule`
    assert ("ftspec.tools.cli", "ftspec.conformance.judge") in got  # import_module with a literal


def test_a_planted_lazy_cycle_is_caught(tmp_path):
    root = _plant(tmp_path, {
        "conformance/judge.py": "from .tolerances import Reference\n",
        "conformance/tolerances.py": "def f():\n    from .token_judge import sampled\n",
        "conformance/token_judge.py": "\n\nfrom ftspec.conformance.judge import Finding\n",
    })
    modules, edges, _ = build_graph(root)
    found = cycles(modules, edges)
    assert len(found) == 1
    text = _describe(found[0])
    assert {e.source for e in found[0]} == {"ftspec.conformance.judge", "ftspec.conformance.tolerances",
                                            "ftspec.conformance.token_judge"}
    assert "conformance/tolerances.py:2: ftspec.conformance.tolerances -> ftspec.conformance.token_judge" in text
    assert "conformance/token_judge.py:3:" in text


def test_a_planted_upward_import_is_caught(tmp_path):
    root = _plant(tmp_path, {
        "fixtures/generate.py": "import ftspec.conformance.replay\n",
        "conformance/replay.py": "def load():\n    import ftspec.fixtures.generate as g\n",
    })
    modules, edges, _ = build_graph(root)
    bad = upward_imports(edges)
    assert [str(e) for e in bad] == ["conformance/replay.py:2: ftspec.conformance.replay -> ftspec.fixtures",
                                     "conformance/replay.py:2: ftspec.conformance.replay -> ftspec.fixtures.generate"]
    assert len(cycles(modules, edges)) == 1  # and the two form a cycle


def test_a_name_from_the_own_package_init_is_a_cycle_when_the_init_imports_the_module(tmp_path):
    root = _plant(tmp_path, {
        "spec/__init__.py": "from .attention import attention\nfrom .errors import SpecError\n",
        "spec/errors.py": "class SpecError(Exception): pass\n",
        "spec/attention.py": "from ftspec.spec import SpecError\n",
    })
    modules, edges, _ = build_graph(root)
    found = cycles(modules, edges)
    assert len(found) == 1 and {e.source for e in found[0]} == {"ftspec.spec", "ftspec.spec.attention"}
    # importing it from the submodule that defines it is no cycle
    (root / "spec/attention.py").write_text("from .errors import SpecError\n", encoding="utf-8")
    modules, edges, _ = build_graph(root)
    assert not cycles(modules, edges)


def test_a_planted_self_loop_and_a_missing_module_are_caught(tmp_path):
    root = _plant(tmp_path, {
        "tools/__init__.py": "from ftspec.tools import VERSION\nVERSION = 1\n",
        "tools/cli.py": "from ftspec.tools.plugins import select\n",
    })
    modules, edges, missing = build_graph(root)
    assert [[str(e) for e in c] for c in cycles(modules, edges)] == [
        ["tools/__init__.py:1: ftspec.tools -> ftspec.tools"]]
    assert missing == ["tools/cli.py:1: ftspec.tools.cli imports ftspec.tools.plugins, which is not a module here"]


def test_type_checking_imports_count_for_the_layers_but_not_for_cycles(tmp_path):
    root = _plant(tmp_path, {
        "fixtures/cases.py": "from .values import build\n",
        "fixtures/values.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .cases import CaseSpec\n"
                               "else:\n    import ftspec.fixtures.swap\n"),
        "fixtures/swap.py": "",
        "conformance/values.py": "import typing\nif typing.TYPE_CHECKING:\n    from ftspec.tools.cli import main\n",
        "tools/cli.py": "",
    })
    modules, edges, _ = build_graph(root)
    assert not cycles(modules, edges)
    assert [str(e) for e in upward_imports(edges)] == [
        "conformance/values.py:3: ftspec.conformance.values -> ftspec.tools (under TYPE_CHECKING)",
        "conformance/values.py:3: ftspec.conformance.values -> ftspec.tools.cli (under TYPE_CHECKING)"]
    # the else branch of the guard runs: an ordinary edge
    assert Edge("ftspec.fixtures.values", "ftspec.fixtures.swap", "fixtures/values.py", 5) in edges
    # the same mutual import without the guard is a cycle
    (root / "fixtures/values.py").write_text("from .cases import CaseSpec\n", encoding="utf-8")
    modules, edges, _ = build_graph(root)
    assert len(cycles(modules, edges)) == 1
