"""What each plugin declared when last loaded, kept for ``ftspec list`` while it still holds.

Loading a plugin imports its libraries (torch, JAX, transformers, ONNX Runtime), seconds each; its
name, version, algorithms and dtypes then come from code that depends only on what is installed,
on source files and on the environment. A record is kept under a key made of all of these that
can be read without importing anything:

- the Python (version, executable, prefix) and ``sys.path``;
- every distribution installed on ``sys.path`` (the names of its ``*.dist-info`` and ``*.egg-info``
  folders, which carry the version): installing, removing or upgrading anything changes it;
- the plugin's entry point (name, ``module:object``, distribution);
- the size and modification time of every source file of the plugin's top-level package (its
  module file alone when it is not a package), and of ftspec's own ``spec`` and ``impls``, which
  every bundled plugin is;
- the environment variables ftspec and the bundled libraries read (``ENV_PREFIXES``).

A record whose key differs is loaded again. What the key cannot see (a library edited in place
without a version change, a variable outside ``ENV_PREFIXES`` that a plugin reads) can leave a
record stale: ``ftspec list`` says which lines come from the cache and when they were loaded, and
``--fresh`` or ``ftspec list NAME`` loads now. A plugin whose loading timed out is never kept (a
hang may not recur), nor one whose package holds more than ``MAX_FILES`` files (too many to stamp
on every call).

The cache is one JSON file per Python environment in ``$FTSPEC_CACHE_DIR``, else
``$XDG_CACHE_HOME/ftspec``, else ``~/.cache/ftspec``; a file that cannot be read or written is
ignored (every plugin is then loaded, as without a cache).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional

__all__ = ["CACHE_ENV", "ENV_PREFIXES", "MAX_FILES", "PluginCache", "cache_dir"]

CACHE_ENV = "FTSPEC_CACHE_DIR"
#: environment variables that ftspec, PyTorch, JAX/XLA, Hugging Face and ONNX Runtime read when they load
ENV_PREFIXES = ("FTSPEC_", "JAX_", "XLA_", "TORCH_", "PYTORCH_", "CUDA_", "HF_", "TRANSFORMERS_", "ORT_",
                "ONNX", "OMP_", "MKL_")
#: a plugin package with more source files than this is not cached (stamping it would cost what loading does)
MAX_FILES = 5000
_SOURCES = (".py", ".so", ".pyd", ".pth")
_SCHEMA = "ftspec-plugin-cache/1"


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ftspec"


def _stamp_files(paths: Iterable[str]) -> Optional[list[Any]]:
    """(path, size, mtime) of each source file under ``paths``; None past ``MAX_FILES``."""
    out: list[Any] = []
    for top in paths:
        if os.path.isfile(top):
            st = os.stat(top)
            out.append([top, st.st_size, st.st_mtime_ns])
            continue
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(_SOURCES):
                    try:
                        st = os.stat(os.path.join(folder, f))
                    except OSError:
                        continue
                    out.append([os.path.join(folder, f), st.st_size, st.st_mtime_ns])
                    if len(out) > MAX_FILES:
                        return None
    return out


def _distributions() -> list[str]:
    names: set[str] = set()
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                names.update(f"{entry}/{d.name}" for d in it if d.name.endswith((".dist-info", ".egg-info")))
        except OSError:  # a zip, a missing folder
            continue
    return sorted(names)


def _environment() -> list[list[str]]:
    return sorted([k, v] for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) and k != CACHE_ENV)


def _own_sources() -> Optional[list[Any]]:
    import ftspec.impls
    import ftspec.spec

    return _stamp_files([*ftspec.spec.__path__, *ftspec.impls.__path__])


def _plugin_sources(target: str) -> Optional[list[Any]]:
    """The stamps of the plugin's top-level package, found without importing it (ftspec's own are
    in the environment key); None when too many files to stamp."""
    top = target.partition(":")[0].split(".")[0]
    if top == "ftspec":
        return []
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return [["absent", top]]  # its loading fails; installing it changes the distributions
    if spec.submodule_search_locations:
        return _stamp_files(list(spec.submodule_search_locations))
    if spec.origin and os.path.isfile(spec.origin):
        return _stamp_files([spec.origin])
    return [["origin", str(spec.origin)]]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _well_formed(row: Any, name: str) -> bool:
    """A short row as ``cmd_list.short_row`` makes it (a damaged file is a cache miss, not a crash)."""
    if not isinstance(row, dict) or row.get("name") != name or not isinstance(row.get("loaded"), bool):
        return False
    if row["loaded"]:
        return (isinstance(row.get("version"), str) and isinstance(row.get("coverage"), str)
                and isinstance(row.get("dtypes"), list) and all(isinstance(d, str) for d in row["dtypes"]))
    return isinstance(row.get("error"), str) and (row.get("hint") is None or isinstance(row.get("hint"), str))


class PluginCache:
    """The records of one Python environment: ``get(record)`` (a short row, or None when absent or
    stale), ``put(record, row)``, ``save()``."""

    def __init__(self, path: Optional[Path] = None) -> None:
        env = hashlib.sha256(sys.prefix.encode()).hexdigest()[:16]
        self.path = path or cache_dir() / f"plugins-{env}.json"
        self.records: dict[str, Any] = {}
        self.changed = False
        self._environment: Optional[str] = None
        try:
            doc = json.loads(self.path.read_text())
            if isinstance(doc, dict) and doc.get("schema") == _SCHEMA and isinstance(doc.get("records"), dict):
                self.records = doc["records"]
        except (OSError, ValueError):
            pass

    def _environment_key(self) -> str:
        if self._environment is None:
            self._environment = _digest([sys.version, sys.executable, sys.prefix, sys.path, _distributions(),
                                         _environment(), _own_sources()])
        return self._environment

    def key(self, record: Any) -> Optional[str]:
        sources = _plugin_sources(record.target)
        if sources is None:
            return None
        return _digest([self._environment_key(), record.name, record.target, record.distribution, sources])

    def get(self, record: Any) -> Optional[dict[str, Any]]:
        kept = self.records.get(record.name)
        if not isinstance(kept, dict) or not _well_formed(kept.get("row"), record.name):
            return None
        key = self.key(record)
        if key is None or kept.get("key") != key:
            return None
        return dict(kept["row"], cached=str(kept.get("when", "")))

    def put(self, record: Any, row: dict[str, Any]) -> None:
        key = self.key(record)
        if key is None:
            return
        when = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
        self.records[record.name] = {"key": key, "row": row, "when": when}
        self.changed = True

    def save(self) -> None:
        """Write the records (atomically) if any changed; a cache that cannot be written is none."""
        if not self.changed:
            return
        temporary: Optional[str] = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, delete=False, suffix=".tmp") as f:
                temporary = f.name
                json.dump({"schema": _SCHEMA, "records": self.records}, f)
            os.replace(temporary, self.path)
        except OSError:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)

    @staticmethod
    def oldest(rows: Iterable[dict[str, Any]]) -> str:
        """When the oldest cached row among ``rows`` was loaded, for the listing's note."""
        times = sorted(r["cached"] for r in rows if r.get("cached"))
        if not times:
            return "unknown"
        try:
            return _dt.datetime.fromisoformat(times[0]).strftime("%Y-%m-%d %H:%M")
        except ValueError:
            return times[0]
