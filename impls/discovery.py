"""Finding and loading plugins from the ``ftspec.impls`` entry-point group.

Discovery is lazy: listing reads entry-point metadata only, and a plugin's
module is imported when it is first loaded. A plugin that fails to import is
recorded with the reason and an install hint instead of breaking discovery.
Two plugins with one name are an error. ``FTSPEC_NO_PLUGINS=1`` keeps only
the bundled implementations (those shipped by the ``ftspec`` distribution).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ftspec.spec.registry import REGISTRY

from .api import Implementation

__all__ = [
    "GROUP",
    "PluginConflict",
    "PluginError",
    "PluginRecord",
    "discover",
    "load",
    "listing",
    "load_target",
    "select",
]

GROUP = "ftspec.impls"
BUNDLED_DIST = "ftspec"
#: The project's own independent implementations; every other bundled plugin wraps a library at its
#: boundary (``ftspec bench libraries`` certifies those).
INDEPENDENT = ("numpy", "torch", "jax")

#: Install hints for modules the bundled plugins need.
_HINTS = {
    "torch": "pip install 'ftspec[torch]'  (PyTorch; CPU build: pip install torch==2.13.0)",
    "jax": "pip install 'ftspec[jax]'",
    "jaxlib": "pip install 'ftspec[jax]'",
    "numpy": "pip install numpy",
    "transformers": "pip install 'ftspec[transformers]'",
    "flax": "pip install 'ftspec[flax]'",
}


class PluginError(RuntimeError):
    """A plugin could not be loaded or is malformed."""


class PluginConflict(PluginError):
    """Two entry points declare the same plugin name."""


@dataclass
class PluginRecord:
    name: str
    target: str  # "module:attribute"
    distribution: str
    bundled: bool
    impl: Optional[Implementation] = None
    error: Optional[str] = None
    hint: Optional[str] = None
    details: list[str] = field(default_factory=list)

    @property
    def loaded(self) -> bool:
        return self.impl is not None


_cache: dict[str, PluginRecord] = {}


def _entry_points() -> list[md.EntryPoint]:
    return list(md.entry_points(group=GROUP))


def discover(*, outside: Optional[bool] = None) -> dict[str, PluginRecord]:
    """All registered plugins by name, not yet loaded.

    ``outside``: include plugins from other distributions (default: unless
    ``FTSPEC_NO_PLUGINS=1``). Raises ``PluginConflict`` on a duplicate name.
    """
    if outside is None:
        outside = os.environ.get("FTSPEC_NO_PLUGINS", "") not in ("1", "true", "yes")
    found: dict[str, PluginRecord] = {}
    for ep in _entry_points():
        dist = ep.dist.name if ep.dist is not None else "?"
        bundled = dist.lower().replace("_", "-") == BUNDLED_DIST
        if not bundled and not outside:
            continue
        if ep.name in found:
            other = found[ep.name]
            if other.target == ep.value and other.distribution == dist:
                continue  # the same distribution seen twice on sys.path
            raise PluginConflict(
                f"two plugins are named {ep.name!r}: {other.target} (from {other.distribution}) "
                f"and {ep.value} (from {dist}); rename one of them"
            )
        found[ep.name] = _cache.get(f"{dist}:{ep.name}:{ep.value}") or PluginRecord(
            ep.name, ep.value, dist, bundled
        )
    return found


def _hint(exc: BaseException) -> Optional[str]:
    missing = getattr(exc, "name", None)
    if isinstance(exc, ImportError) and missing:
        root = missing.split(".")[0]
        return _HINTS.get(root, f"pip install {root}  (the module {missing!r} is missing)")
    return None


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise PluginError(f"plugin target {target!r}: expected 'module:object'")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _materialise(obj: Any, where: str) -> Implementation:
    if not isinstance(obj, Implementation) and callable(obj):
        obj = obj()
    if not isinstance(obj, Implementation):
        raise PluginError(f"{where}: expected an ftspec.impls.api.Implementation (or a callable returning one), "
                          f"got {type(obj).__name__}")
    problems = obj.problems()
    unknown = sorted(set(obj.algorithms) - set(REGISTRY))
    if unknown:
        problems.append(f"algorithms not in the spec registry: {unknown}")
    if problems:
        raise PluginError(f"{where}: malformed plugin: " + "; ".join(problems))
    return obj


def load_record(record: PluginRecord) -> PluginRecord:
    """Import the plugin behind ``record`` (once); failures are recorded, not raised."""
    if record.impl is not None or record.error is not None:
        return record
    try:
        impl = _materialise(_resolve(record.target), f"plugin {record.name!r} ({record.target})")
        if impl.name != record.name:
            raise PluginError(f"plugin {record.name!r} ({record.target}) calls itself {impl.name!r}; "
                              "the entry-point name and Implementation.name must agree")
        record.impl = impl
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not break discovery
        record.error = f"{type(exc).__name__}: {exc}"
        record.hint = _hint(exc)
        record.details = traceback.format_exception_only(type(exc), exc)
    _cache[f"{record.distribution}:{record.name}:{record.target}"] = record
    return record


def load(name: str) -> Implementation:
    """The implementation registered as ``name``; raises PluginError with the reason."""
    plugins = discover()
    if name not in plugins:
        raise PluginError(f"no plugin named {name!r}; registered: {sorted(plugins) or 'none'}")
    record = load_record(plugins[name])
    if record.impl is None:
        hint = f" (hint: {record.hint})" if record.hint else ""
        raise PluginError(f"plugin {name!r} failed to load: {record.error}{hint}")
    return record.impl


def load_target(target: str) -> Implementation:
    """A registered name, or ``module:object`` (an unregistered implementation).

    For ``module:object`` the current directory is importable, as with
    ``python -m``, so a user can certify a module next to them.
    """
    if ":" not in target:
        return load(target)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return _materialise(_resolve(target), target)
    except PluginError:
        raise
    except Exception as exc:
        hint = _hint(exc)
        raise PluginError(f"cannot load {target!r}: {type(exc).__name__}: {exc}"
                          + (f" (hint: {hint})" if hint else "")) from exc


def select(names: Optional[Sequence[str]] = None) -> tuple[list[tuple[str, Implementation]], list[PluginRecord]]:
    """Loaded implementations to run, and the records of those that failed to load.

    ``names`` may mix registered names and ``module:object`` targets; none
    means every registered plugin. An unknown registered name raises
    PluginError (a typo is the user's to fix, not a plugin that failed).
    """
    loaded: list[tuple[str, Implementation]] = []
    broken: list[PluginRecord] = []
    registered = discover()
    wanted = list(names) if names else list(registered)
    for name in wanted:
        if ":" in name:
            try:
                loaded.append((name, load_target(name)))
            except PluginError as exc:
                broken.append(PluginRecord(name, name, "-", False, error=str(exc)))
            continue
        if name not in registered:
            raise PluginError(f"no plugin named {name!r}; registered: {', '.join(sorted(registered)) or 'none'}")
        record = load_record(registered[name])
        if record.impl is None:
            broken.append(record)
        else:
            loaded.append((name, record.impl))
    return loaded, broken


def listing() -> list[dict[str, Any]]:
    """Every registered plugin as plain values: name, target, distribution, and what it declares
    (version, devices, dtypes, precision, variants, algorithms covered and missing, shape limits per
    algorithm where declared), or why it
    failed to load (``ftspec list``)."""
    rows = []
    for name, record in sorted(discover().items()):
        load_record(record)
        row: dict[str, Any] = {"name": name, "target": record.target, "distribution": record.distribution,
                               "bundled": record.bundled}
        if record.impl is None:
            row.update(loaded=False, error=record.error, hint=record.hint)
        else:
            impl = record.impl
            try:
                devices = [str(d) for d in impl.devices()]
            except Exception as exc:  # noqa: BLE001 - the plugin's failure, shown in the listing
                devices = [f"error: {type(exc).__name__}: {exc}"]
            covered = [a for a in REGISTRY if a in impl.algorithms]
            row.update(
                loaded=True, version=impl.version, description=impl.description, devices=devices,
                dtypes=list(impl.dtypes), precision=impl.precision,
                variants="all" if impl.variants == "all" else [v.describe() for v in impl.variants],
                algorithms=covered, missing=[a for a in REGISTRY if a not in impl.algorithms],
                coverage=f"{len(covered)}/{len(REGISTRY)}",
                limits={a: impl.limits_for(a).describe() for a in covered if not impl.limits_for(a).unconstrained},
            )
        rows.append(row)
    return rows


def clear_cache() -> None:
    _cache.clear()
