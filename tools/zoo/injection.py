"""Building a mutant: a correct implementation with one bug injected.

A mutant wraps the algorithm functions of a bundled plugin. Its bug is one
of:

- a changed variant (the implementation computes another convention than
  the one asked for): ``swap_variant``;
- changed inputs or parameters before the call, or changed outputs after
  it: ``change_inputs``, ``change_outputs``;
- misbehaviour (raise, hang, mutate inputs): ``replace_function``;
- a one-line source edit of one of the plugin's own helpers
  (``source_edit``): the helper's source is read with ``inspect``, one
  exact piece of text is replaced (it must occur exactly as often as
  stated, or the mutant refuses to build), the result is compiled in the
  helper's own module, and during each call of a broken algorithm every
  reference to the helper inside the plugin's package is patched
  (``unittest.mock.patch.object``). Algorithms built on the helper inherit
  the bug exactly as they would in real code. The harness calls a plugin
  sequentially, so a patch is active only while the mutant itself runs.
"""

from __future__ import annotations

import __future__
import dataclasses
import importlib
import inspect
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence
from unittest import mock

from ftspec.impls.api import Context, Implementation
from ftspec.impls.discovery import load

__all__ = ["Edit", "MutationError", "Mutant", "Witness", "active_patches", "build", "combine", "source_edit"]

Fn = Callable[[Mapping[str, Any], Mapping[str, Any], Context], Any]
Wrapper = Callable[[Fn, Implementation], Fn]


@dataclass(frozen=True)
class Witness:
    """A fixed case on which the mutant's output differs from the correct one.

    ``algorithm`` (default: the first of ``breaks``), ``hyper`` and
    ``variant`` override the defaults (the entry's ``DEFAULT_HYPER`` row of
    ``conformance/core/values.py``, the paper's variant set);
    ``inputs`` replaces drawn inputs by given values; ``params`` maps a
    flat parameter name to a value it is set to (a scalar fills it).
    """

    algorithm: Optional[str] = None
    hyper: Mapping[str, int] = field(default_factory=dict)
    variant: Mapping[str, Any] = field(default_factory=dict)
    inputs: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: str = "float64"
    seed: int = 0
    #: call with a leading batch axis of two examples (bugs only batching shows)
    batched: bool = False
    #: compare two identical calls of the mutant (bugs only the determinism check shows)
    repeat: bool = False


@dataclass(frozen=True)
class Mutant:
    """One injected bug.

    ``breaks``: the registry entries whose functions carry the bug (every
    algorithm whose code path reaches it under some variant).
    ``wrap(fn, base)`` returns the buggy function. ``equivalent``: dtypes at
    which the bug cannot change any output the harness can see (said
    honestly; such mutants are expected to survive there), with the reason
    in ``equivalence``. ``source``: where such a bug was seen.
    ``dtypes``: the dtypes ``ftspec bench power`` runs it at. ``where``: the
    code the bug is in, and ``edit`` the change (for reports).
    """

    id: str
    description: str
    breaks: tuple[str, ...]
    wrap: Wrapper
    base: str = "numpy"
    equivalent: tuple[str, ...] = ()
    source: str = ""
    kind: str = "numerics"  # numerics | behaviour
    tags: tuple[str, ...] = field(default_factory=tuple)
    dtypes: tuple[str, ...] = ("float64", "float32")
    equivalence: str = ""
    witness: Witness = field(default_factory=Witness)
    #: the entries ``ftspec bench power`` searches (default: the first of ``breaks``)
    bench: tuple[str, ...] = ()
    #: why the mutant may survive or be killed where declared equivalent (reports quote it)
    note: str = ""

    def __post_init__(self) -> None:
        if hasattr(self.wrap, "edit"):  # source edits name their mutant in error messages
            self.wrap.label = self.id  # type: ignore[attr-defined]

    @property
    def targets(self) -> tuple[str, ...]:
        """What the bench searches: ``bench`` or the first entry of ``breaks``."""
        return tuple(self.bench) or self.breaks[:1]

    @property
    def where(self) -> str:
        return getattr(self.wrap, "where", "") or ""

    @property
    def edit(self) -> str:
        """The injection, for reports: the source edit, or which wrapper with which change."""
        return getattr(self.wrap, "edit", "") or getattr(self.wrap, "how", "") or ""

    @property
    def family(self) -> str:
        """The family of the first algorithm it targets (component, layer, …)."""
        from ftspec.spec.registry import entry

        return entry(self.targets[0]).family


def build(m: Mutant, base: Optional[Implementation] = None) -> Implementation:
    """The mutant as an Implementation (correct everywhere but ``m.breaks``)."""
    impl = base or load(m.base)
    algorithms = dict(impl.algorithms)
    for name in m.breaks:
        if name in algorithms:
            algorithms[name] = m.wrap(algorithms[name], impl)
    return dataclasses.replace(impl, name=f"mutant:{m.id}", version=f"{impl.version}+{m.id}",
                               algorithms=algorithms, description=m.description)


# -- wrapper factories ------------------------------------------------------------

def swap_variant(change: Callable[[Any, str], Any]) -> Wrapper:
    """The implementation computes ``change(variant, algorithm)`` instead of the variant asked for."""
    def wrap(fn: Fn, base: Implementation) -> Fn:
        def buggy(inputs, params, ctx):
            return fn(inputs, params, dataclasses.replace(ctx, variant=change(ctx.variant, ctx.algorithm)))
        return buggy
    wrap.how = f"swap_variant({change.__name__})"  # type: ignore[attr-defined]
    return wrap


def change_inputs(change: Callable[[dict, dict, Context, Implementation], tuple[dict, dict]]) -> Wrapper:
    def wrap(fn: Fn, base: Implementation) -> Fn:
        def buggy(inputs, params, ctx):
            i, p = change(dict(inputs), dict(params), ctx, base)
            return fn(i, p, ctx)
        return buggy
    wrap.how = f"change_inputs({change.__name__})"  # type: ignore[attr-defined]
    return wrap


def change_outputs(change: Callable[[Any, Context, Implementation], Any]) -> Wrapper:
    def wrap(fn: Fn, base: Implementation) -> Fn:
        def buggy(inputs, params, ctx):
            return change(fn(inputs, params, ctx), ctx, base)
        return buggy
    wrap.how = f"change_outputs({change.__name__})"  # type: ignore[attr-defined]
    return wrap


def replace_function(make: Callable[[Fn, Implementation], Fn]) -> Wrapper:
    def wrap(fn: Fn, base: Implementation) -> Fn:
        return make(fn, base)
    wrap.how = f"replace_function({make.__name__})"  # type: ignore[attr-defined]
    return wrap


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` by ``new`` in the source of ``module.function`` (``count`` occurrences exactly).

    ``function`` may be dotted (``Grads.add``: a method). Several edits of
    one function apply in order to the same source. ``factory``: the
    function is a factory of entry functions (``_training_entry(model)``);
    the mutated entry is ``mutated_factory(factory(ctx.algorithm))``.
    """

    module: str  # e.g. "ftspec.impls.numpy.components"
    function: str
    old: str
    new: str
    count: int = 1
    factory: Optional[Callable[[str], Any]] = None

    def describe(self) -> str:
        short = self.module.replace("ftspec.impls.", "")
        return f"{short}.{self.function}: `{self.old.strip()}` → `{self.new.strip()}`"


class MutationError(RuntimeError):
    """A source edit no longer applies (the plugin's code changed)."""


def _owner(module: Any, dotted: str) -> tuple[Any, str]:
    parts = dotted.split(".")
    owner = module
    for p in parts[:-1]:
        owner = getattr(owner, p)
    return owner, parts[-1]


def _compile(group: list[Edit], label: str) -> tuple[Any, Any, Any, str]:
    """(owner, attribute, original, mutated) for the edits of one function."""
    e0 = group[0]
    module = importlib.import_module(e0.module)
    owner, attr = _owner(module, e0.function)
    original = inspect.getattr_static(owner, attr)
    src = textwrap.dedent(inspect.getsource(original))
    for e in group:
        found = src.count(e.old)
        if found != e.count:
            raise MutationError(f"mutant {label}: {e.module}.{e.function} contains {e.old!r} {found} time(s), "
                                f"expected {e.count}; the plugin changed, update the mutant")
        src = src.replace(e.old, e.new)
    code = compile(src, f"<mutant {label}: {e0.module}.{e0.function}>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace: dict[str, Any] = {}
    exec(code, module.__dict__, namespace)  # globals: the helper's own module, unchanged
    return owner, attr, original, namespace[attr]


def _references(package: str, original: Any) -> list[tuple[Any, str]]:
    """Every (module, attribute) of ``package`` bound to ``original`` (``from x import f as g`` included)."""
    out = []
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == package or name.startswith(package + ".")):
            continue
        for attr, value in list(vars(mod).items()):
            if value is original:
                out.append((mod, attr))
    return out


class _Patches:
    """Installs a mutant's patches while at least one of its calls runs.

    Reference-counted rather than nested ``mock.patch`` contexts: a call the
    harness abandoned (a timeout) may still be running in its thread when
    the next call starts, and nested patches leaving in the wrong order
    could leave a bug installed for good.
    """

    _lock = threading.Lock()
    _active: dict[int, int] = {}

    def __init__(self, patches: list[tuple[Any, str, Any]]) -> None:
        self.patches = patches
        self.handles: list[Any] = []

    def __enter__(self) -> None:
        with self._lock:
            n = self._active.get(id(self), 0)
            if n == 0:
                self.handles = [mock.patch.object(mod, attr, mutated) for mod, attr, mutated in self.patches]
                for h in self.handles:
                    h.start()
            self._active[id(self)] = n + 1

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            n = self._active[id(self)] - 1
            if n == 0:
                for h in reversed(self.handles):
                    h.stop()
                self.handles = []
                del self._active[id(self)]
            else:
                self._active[id(self)] = n


def active_patches() -> int:
    """How many mutants have patches installed right now (0 between calls)."""
    with _Patches._lock:
        return len(_Patches._active)


def source_edit(*edits: Edit, package: Optional[str] = None) -> Wrapper:
    """A wrapper that runs the algorithm with the helpers ``edits`` mutated.

    ``package``: where references to the helpers are patched (default: the
    package of the first edit's module, e.g. ``ftspec.impls.numpy``).
    """
    if not edits:
        raise ValueError("source_edit needs at least one Edit")
    compiled: dict[str, Any] = {}

    def prepare() -> tuple[_Patches, dict[int, Any], list[tuple[Callable[[str], Any], Any]]]:
        if "patches" not in compiled:
            label = getattr(wrap, "label", "?")
            first = importlib.import_module(edits[0].module)
            pkg = package or (first.__name__ if hasattr(first, "__path__") else first.__name__.rsplit(".", 1)[0])
            groups: dict[tuple[str, str], list[Edit]] = {}
            for e in edits:
                groups.setdefault((e.module, e.function), []).append(e)
            patches, direct, factories = [], {}, []
            for group in groups.values():
                owner, attr, original, mutated = _compile(group, label)
                if group[0].factory is not None:
                    factories.append((group[0].factory, mutated))
                    continue
                if isinstance(owner, type):  # a method: patch the class
                    patches.append((owner, attr, mutated))
                    continue
                refs = _references(pkg, original)
                if not refs:
                    raise MutationError(f"mutant {label}: nothing in {pkg} refers to {original.__qualname__}")
                patches.extend((mod, a, mutated) for mod, a in refs)
                direct[id(original)] = mutated  # an edited entry function replaces itself
            compiled.update(patches=_Patches(patches), direct=direct, factories=factories)
        return compiled["patches"], compiled["direct"], compiled["factories"]

    def wrap(fn: Fn, base: Implementation) -> Fn:
        patches, direct, factories = prepare()
        target = direct.get(id(fn), fn)
        rebuilt: dict[str, Fn] = {}

        def buggy(inputs, params, ctx):
            call = target
            if factories:
                if ctx.algorithm not in rebuilt:
                    arg_of, mutated_factory = factories[0]
                    rebuilt[ctx.algorithm] = mutated_factory(arg_of(ctx.algorithm))
                call = rebuilt[ctx.algorithm]
            with patches:
                return call(inputs, params, ctx)
        return buggy

    places = (f"{e.module.replace('ftspec.impls.', '')}.{e.function}" for e in edits)
    wrap.where = ", ".join(dict.fromkeys(places))  # type: ignore[attr-defined]
    wrap.edit = "; ".join(e.describe() for e in edits)  # type: ignore[attr-defined]
    return wrap


def combine(*bugs: tuple[Wrapper, Sequence[str]]) -> Wrapper:
    """Several independent bugs in one implementation: each ``(wrapper, breaks)`` applies to the
    algorithms of its own ``breaks`` (the combined mutant's ``breaks`` is their union); an
    algorithm two of them break has both (the later one wraps the earlier one)."""
    if not bugs:
        raise ValueError("combine needs at least one bug")

    def wrap(fn: Fn, base: Implementation) -> Fn:
        layers = [(w, frozenset(b)) for w, b in bugs]
        built: dict[str, Fn] = {}

        def for_algorithm(name: str) -> Fn:
            if name not in built:
                f = fn
                for w, breaks in layers:
                    if name in breaks:
                        f = w(f, base)
                built[name] = f
            return built[name]

        def buggy(inputs, params, ctx):
            return for_algorithm(ctx.algorithm)(inputs, params, ctx)
        return buggy

    parts = [getattr(w, "edit", "") or getattr(w, "how", "") or "?" for w, _ in bugs]
    wrap.how = "combine(" + " + ".join(parts) + ")"  # type: ignore[attr-defined]
    wheres = [getattr(w, "where", "") for w, _ in bugs]
    wrap.where = ", ".join(w for w in wheres if w)  # type: ignore[attr-defined]
    return wrap


def on_numpy(base: Implementation, value: Any, f: Callable[[Any], Any], dtype: str, device: str) -> Any:
    """Apply a NumPy function to a native array (through the plugin's own conversion)."""
    import numpy as np

    arr = np.asarray(base.to_numpy(value))
    out = np.asarray(f(arr))
    if out.dtype == np.bool_:
        return base.from_numpy(out, "bool", device)
    if out.dtype.kind in "iu":
        return base.from_numpy(out.astype(np.int64), "int64", device)
    return base.from_numpy(out.astype(np.float64), dtype, device)


def names(*groups: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for g in groups:
        out.extend(g)
    return tuple(out)
