"""Choosing and loading implementations for a command."""

from __future__ import annotations

from typing import Optional, Sequence

from ftspec.impls.api import Implementation
from ftspec.impls.discovery import PluginError, PluginRecord, discover, load_record, load_target

__all__ = ["select"]


def select(names: Optional[Sequence[str]] = None) -> tuple[list[tuple[str, Implementation]], list[PluginRecord]]:
    """Loaded implementations to run, and the records of those that failed to load.

    ``names`` may mix registered names and ``module:object`` targets; none
    means every registered plugin.
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
