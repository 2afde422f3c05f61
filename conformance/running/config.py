"""One run's configuration: resolved once from the session's ``Settings``, then passed down.

``session.commands`` turns the user's ``Settings`` (optional values, the
profile's defaults left open) into a ``RunConfig`` once, after the plugins are
loaded and the executor is known; the searches in this process
(``Runner.from_config``), the parallel driver (``parallel.run_parallel``) and,
as JSON text, every worker task read that one object. The extra round for
cells short of the minimum is the same configuration with its own seed,
examples and cap (``RunConfig.extension``).

A configuration made by hand (tests, the library) may leave values open
(``None``: the profile's examples, call timeout and time cap, the default
case directory); the runner resolves them as it always has. The session's
are resolved.

It travels to workers as JSON text (``to_json``/``from_json``): numbers,
strings, lists, never a pickled object; a non-finite number (a time cap of
``inf``: none) is written as the string ``"inf"``, so the text is standard
JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Optional, Union

from ..core.profiles import Profile, profile as profile_named

__all__ = ["DEFAULT_CASE_DIR", "RunConfig"]

#: where shrunk failing cases go when the configuration names no directory (``case_dir=None``)
DEFAULT_CASE_DIR = "reports/cases"

_TUPLES = ("labels", "devices", "algorithms", "dtypes")
_FLOATS = ("call_timeout", "seconds", "load_timeout")


@dataclass(frozen=True)
class RunConfig:
    """What a run's searches and fixture replay are asked to do (frozen; plain values only).

    The first fields are what a worker needs to rebuild the parent's runner; the rest are the
    session's view of the run as a whole (workers receive them and ignore them)."""

    #: the implementations, by the label a worker process loads each one by
    labels: tuple[str, ...]
    #: the Hypothesis profile's name (conformance/core/profiles.py)
    profile: str
    seed: int = 0
    #: where shrunk failing cases are written (None: ``DEFAULT_CASE_DIR``)
    case_dir: Optional[str] = None
    #: examples per (algorithm, dtype) search of each implementation (None: the profile's)
    examples: Optional[int] = None
    #: seconds one implementation call may take (None: the profile's)
    call_timeout: Optional[float] = None
    #: only these devices (None: every device each implementation lists)
    devices: Optional[tuple[str, ...]] = None
    #: wall-time cap per implementation search (None: the profile's when ``examples`` is None;
    #: 0 or inf: none)
    seconds: Optional[float] = None
    #: each search split into this many shards by seed (``runner.shard_seed``)
    shards: int = 1
    #: seconds loading a plugin, or its ``devices()``, may take in a worker (None: the default)
    load_timeout: Optional[float] = None
    #: value sets per drawn case (None: the profile's; conformance/core/blocks.py)
    block: Optional[int] = None
    # -- the session's ---------------------------------------------------------------------------
    #: "run" or "certify": which minimum and which fixtures a complete run needs
    command: str = "run"
    #: the selection (None: everything declared)
    algorithms: Optional[tuple[str, ...]] = None
    dtypes: Optional[tuple[str, ...]] = None
    #: examples a cell must run for a verdict
    minimum: int = 0
    #: the golden fixtures replayed ("all", "sample", "none"), and the least a complete run replays
    fixtures: str = "none"
    fixtures_required: str = "none"
    #: worker processes (local), or the cluster's threads (Dask)
    jobs: int = 1
    #: searches and replays in the calling process (``--in-process``, or an implementation object
    #: no worker could load by its label)
    in_process: bool = False

    def __post_init__(self) -> None:
        for name in _TUPLES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    @property
    def hypothesis_profile(self) -> Profile:
        """The profile named by ``profile``."""
        return profile_named(self.profile)

    @property
    def timeout(self) -> float:
        """Seconds one implementation call may take: ``call_timeout``, or the profile's."""
        return self.call_timeout or self.hypothesis_profile.call_timeout

    def extension(self, *, seed: int, examples: int, seconds: float) -> "RunConfig":
        """The configuration of an extra search round: the same run with its own seed, examples and
        time cap."""
        return replace(self, seed=seed, examples=examples, seconds=seconds)

    # -- to and from workers ---------------------------------------------------------------------
    def to_plain(self) -> dict[str, Any]:
        """Plain values (lists for tuples, "inf" for a non-finite number): what ``to_json`` writes."""
        out = asdict(self)
        for name in _TUPLES:
            if out[name] is not None:
                out[name] = list(out[name])
        for name in _FLOATS:
            value = out[name]
            if isinstance(value, float) and not math.isfinite(value):
                out[name] = "inf" if value > 0 else "-inf"
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_plain(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_plain(cls, values: Union[str, bytes, dict[str, Any]]) -> "RunConfig":
        """The configuration ``to_json`` wrote (or its plain values, as ``to_plain`` or
        ``dataclasses.asdict`` give them). Unknown fields are refused (TypeError)."""
        if isinstance(values, (str, bytes)):
            values = json.loads(values)
        if not isinstance(values, dict):
            raise TypeError(f"a run configuration is a JSON object, not a {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(f"unknown run configuration fields: {', '.join(map(str, unknown))}")
        given = dict(values)
        for name in _FLOATS:
            if isinstance(given.get(name), str):
                given[name] = float(given[name])  # "inf", "-inf"
        return cls(**given)

    from_json = from_plain
