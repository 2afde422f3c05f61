"""Finding and loading plugins from the ``ftspec.impls`` entry-point group.

Discovery is lazy: listing reads entry-point metadata only, and a plugin's
module is imported when it is first loaded. A plugin that fails to import is
recorded with the reason and an install hint instead of breaking discovery.
Two plugins with one name are an error. ``FTSPEC_NO_PLUGINS=1`` keeps only
the bundled implementations (those shipped by the ``ftspec`` distribution).

Loading and ``devices()`` are plugin code, so they can hang. ``select`` and
``load_target`` take a ``timeout``: the plugin is then loaded in a helper
thread and abandoned after ``timeout`` seconds (``PluginTimeout``), which
catches a hang that releases the GIL. ``with_devices`` calls ``devices()``
once (in a helper thread when given a timeout) and returns a copy of the
implementation that answers every later call from that first answer, so a
run calls a plugin's ``devices()`` once per process. A hang that holds the
GIL stops every thread of its process; ``ftspec run`` therefore loads each
plugin in a worker process first, under the worker pool's watchdog
(``conformance/parallel.probe_plugins``), and only then in its own.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata as md
import os
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from ftspec.spec.registry import REGISTRY

from .api import Implementation

__all__ = [
    "DEFAULT_LOAD_TIMEOUT",
    "GROUP",
    "PluginConflict",
    "PluginError",
    "PluginLost",
    "PluginRecord",
    "PluginTimeout",
    "discover",
    "failing_devices",
    "load",
    "listing",
    "load_target",
    "select",
    "wanted",
    "with_devices",
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
    "onnxruntime": "pip install 'ftspec[onnx]'",
    "onnx": "pip install 'ftspec[onnx]'",
    "onnxscript": "pip install 'ftspec[onnx]'",
    "matplotlib": "pip install 'ftspec[report]'",
}


class PluginError(RuntimeError):
    """A plugin could not be loaded or is malformed."""


class PluginConflict(PluginError):
    """Two entry points declare the same plugin name."""


class PluginTimeout(PluginError):
    """Loading a plugin, or its ``devices()``, gave no result within the time allowed."""


class PluginLost(PluginError):
    """Loading a plugin, or its ``devices()``, took down the worker process that tried it."""


#: seconds loading one plugin (import, factory) or its ``devices()`` may take (``--load-timeout``)
DEFAULT_LOAD_TIMEOUT = 60.0


def in_thread(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """``fn()`` in a daemon thread (named after ``what``), abandoned after ``timeout`` seconds
    (``PluginTimeout``); its exception, if any, is raised here. A hang that holds the GIL is not
    caught: no thread of this process runs again."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name=f"ftspec-load {what}"[:60])
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise PluginTimeout(f"no result after {timeout:g} s (load timeout)")
    if "error" in box:
        exc = box["error"]
        if not isinstance(exc, Exception):  # SystemExit and kin from plugin code: a failure, not our exit
            raise PluginError(f"{what}: raised {type(exc).__name__}: {exc}")
        raise exc
    return box.get("value")


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


def load_record(record: PluginRecord, *, timeout: Optional[float] = None) -> PluginRecord:
    """Import the plugin behind ``record`` (once); failures are recorded, not raised. With
    ``timeout``, in a helper thread abandoned after that many seconds (``in_thread``)."""
    if record.impl is not None or record.error is not None:
        return record
    where = f"plugin {record.name!r} ({record.target})"
    try:
        if timeout is None:
            impl = _materialise(_resolve(record.target), where)
        else:
            impl = in_thread(lambda: _materialise(_resolve(record.target), where), timeout, f"loading {where}")
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


def load_target(target: str, *, timeout: Optional[float] = None) -> Implementation:
    """A registered name, or ``module:object`` (an unregistered implementation).

    For ``module:object`` the current directory is importable, as with
    ``python -m``, so a user can certify a module next to them. With ``timeout``, loaded in a
    helper thread abandoned after that many seconds (``PluginTimeout``).
    """
    if ":" not in target:
        if timeout is None:
            return load(target)
        plugins = discover()
        if target not in plugins:
            raise PluginError(f"no plugin named {target!r}; registered: {sorted(plugins) or 'none'}")
        record = load_record(plugins[target], timeout=timeout)
        if record.impl is None:
            shown = f" (hint: {record.hint})" if record.hint else ""
            raise PluginError(f"plugin {target!r} failed to load: {record.error}{shown}")
        return record.impl
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if timeout is None:
            return _materialise(_resolve(target), target)
        return in_thread(lambda: _materialise(_resolve(target), target), timeout, f"loading {target!r}")
    except PluginTimeout as exc:
        raise PluginTimeout(f"cannot load {target!r}: {exc}") from None
    except PluginError:
        raise
    except Exception as exc:
        hint = _hint(exc)
        raise PluginError(f"cannot load {target!r}: {type(exc).__name__}: {exc}"
                          + (f" (hint: {hint})" if hint else "")) from exc


def wanted(names: Optional[Sequence[str]] = None) -> list[str]:
    """The labels ``select(names)`` loads, without loading any: ``names``, or every registered
    plugin. An unknown registered name raises PluginError."""
    registered = discover()
    out = list(names) if names else list(registered)
    for name in out:
        if ":" not in name and name not in registered:
            raise PluginError(f"no plugin named {name!r}; registered: {', '.join(sorted(registered)) or 'none'}")
    return out


def select(names: Optional[Sequence[str]] = None, *, timeout: Optional[float] = None,
           failed: Optional[Mapping[str, str]] = None) -> tuple[list[tuple[str, Implementation]], list[PluginRecord]]:
    """Loaded implementations to run, and the records of those that failed to load.

    ``names`` may mix registered names and ``module:object`` targets; none
    means every registered plugin. An unknown registered name raises
    PluginError (a typo is the user's to fix, not a plugin that failed).
    ``timeout``: each plugin is loaded in a helper thread abandoned after that
    many seconds (``in_thread``). ``failed``: {label: reason} of plugins found
    to hang or crash elsewhere (a worker process): not loaded here, recorded as
    failed with that reason.
    """
    loaded: list[tuple[str, Implementation]] = []
    broken: list[PluginRecord] = []
    registered = discover()
    failed = failed or {}
    for name in wanted(names):
        if name in failed:
            record = registered.get(name)
            broken.append(PluginRecord(name, record.target if record else name,
                                       record.distribution if record else "-", bool(record and record.bundled),
                                       error=failed[name]))
            continue
        if ":" in name:
            try:
                loaded.append((name, load_target(name, timeout=timeout)))
            except PluginError as exc:
                broken.append(PluginRecord(name, name, "-", False, error=str(exc)))
            continue
        record = load_record(registered[name], timeout=timeout)
        if record.impl is None:
            broken.append(record)
        else:
            loaded.append((name, record.impl))
    return loaded, broken


class _Devices:
    """A plugin's ``devices()`` answered from its first answer (the list, or the exception)."""

    def __init__(self, found: Optional[list[str]], error: Optional[BaseException]) -> None:
        self.found = found
        self.error = error

    def __call__(self) -> list[str]:
        if self.error is not None:
            raise self.error
        return list(self.found or [])


def _with(impl: Implementation, devices: _Devices) -> Implementation:
    clone = copy.copy(impl)  # the caller's object is left as it is
    object.__setattr__(clone, "devices", devices)  # frozen dataclass: set past its __setattr__
    return clone


def with_devices(impl: Implementation, timeout: Optional[float] = None) -> Implementation:
    """A copy of ``impl`` whose ``devices()`` gives what ``impl.devices()`` gave (or raised) when
    called here, once: in this thread, or with ``timeout`` in a helper thread abandoned after that
    many seconds (later calls then raise ``PluginTimeout``)."""
    if isinstance(getattr(impl, "devices", None), _Devices):
        return impl
    error: Optional[BaseException] = None
    found: Optional[list[str]] = None
    try:
        if timeout is None:
            found = [str(d) for d in impl.devices()]
        else:
            found = in_thread(lambda: [str(d) for d in impl.devices()], timeout, "devices()")
    except Exception as exc:  # noqa: BLE001 - the plugin's failure (PluginTimeout too), raised on every call
        error = exc
    return _with(impl, _Devices(found, error))


def failing_devices(impl: Implementation, error: BaseException) -> Implementation:
    """A copy of ``impl`` whose ``devices()`` raises ``error`` without calling the plugin (its
    ``devices()`` hung or crashed a worker process)."""
    return _with(impl, _Devices(None, error))


def listing(timeout: float = DEFAULT_LOAD_TIMEOUT, names: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    """Every registered plugin as plain values: name, target, distribution, and what it declares
    (version, devices, dtypes, precision, variants, algorithms covered and missing, shape limits and
    dtypes per algorithm where declared, the formats a mixed-precision call computes in), or why it
    failed to load (``ftspec list``). Loading and ``devices()``
    each run in a helper thread abandoned after ``timeout`` seconds (``in_thread``: a hang that
    holds the GIL is not caught). ``names``: those registered plugins only, in that order
    (LookupError naming the registered ones for an unknown name: ``ftspec list NAME``)."""
    found = discover()
    if names is None:
        chosen = sorted(found.items())
    else:
        unknown = [n for n in names if n not in found]
        if unknown:
            raise LookupError(f"no plugin named {unknown[0]!r}; registered: {', '.join(sorted(found)) or 'none'}")
        chosen = [(n, found[n]) for n in dict.fromkeys(names)]
    rows = []
    for name, record in chosen:
        load_record(record, timeout=timeout)
        row: dict[str, Any] = {"name": name, "target": record.target, "distribution": record.distribution,
                               "bundled": record.bundled}
        if record.impl is None:
            row.update(loaded=False, error=record.error, hint=record.hint)
        else:
            impl = record.impl
            try:
                devices = [str(d) for d in in_thread(impl.devices, timeout, f"devices() of {name}")]
            except Exception as exc:  # noqa: BLE001 - the plugin's failure, shown in the listing
                devices = [f"error: {type(exc).__name__}: {exc}"]
            covered = [a for a in REGISTRY if a in impl.algorithms]
            row.update(
                loaded=True, version=impl.version, description=impl.description, devices=devices,
                dtypes=list(impl.dtypes), precision=impl.precision,
                variants=_variants_row(impl, covered),
                algorithms=covered, missing=[a for a in REGISTRY if a not in impl.algorithms],
                coverage=f"{len(covered)}/{len(REGISTRY)}",
                limits={a: impl.limits_for(a).describe() for a in covered if not impl.limits_for(a).unconstrained},
                dtypes_by_algorithm={a: list(ds) for a, ds in impl.dtypes_by_algorithm.items() if a in covered},
                mixed_precision=impl.mixed_precision(),
            )
        rows.append(row)
    return rows


def _variants_row(impl: Implementation, covered: Sequence[str]) -> Any:
    """What ``listing`` shows of a plugin's variant sets: "all" or [set, ...] when they are the same
    for every algorithm; {algorithm: "all" | [set, ...]} for each covered algorithm when the plugin
    declares them per algorithm (a "*" key spelled out)."""
    def shown(declared: Any) -> Any:
        return "all" if declared == "all" else [v.describe() for v in declared]

    if not impl.per_algorithm:
        return shown(impl.variants_for(""))
    return {a: shown(impl.variants_for(a)) for a in covered}


def clear_cache() -> None:
    _cache.clear()
