"""One run's configuration: every default resolved here, once, then passed down.

A ``RunConfig`` is the run's only configuration. ``session.commands`` builds
it from the user's ``Settings`` after the plugins are loaded and the executor
is known; a test, a bench or a library caller builds one directly. Either way
the values left open (``None``: the profile's examples, call timeout, time cap
and block, the command's minimum and fixtures, the default case directory and
load timeout) are filled in on construction (``__post_init__``), so that what
reads a configuration (``Runner``, the parallel driver, the fixture replay's
workers, the session's phases) resolves nothing: a field of a ``RunConfig`` is
always its final value. The extra round for cells short of the minimum is the
same configuration with its own seed, examples and cap (``extension``).

"No time cap" has one spelling here: ``NO_CAP`` (``math.inf``), a cap that no
wall clock reaches. The user's spellings of it (``--seconds 0``, a profile
whose ``seconds`` is None, an explicit example count) become it on the way in;
the JSON report and a certificate still write theirs (``null``, ``0``).

It travels to workers as JSON text (``to_json``/``from_json``): numbers,
strings, lists, never a pickled object; a non-finite number (``NO_CAP``) is
written as the string ``"inf"``, so the text is standard JSON.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Optional, Union

from ftspec.impls.discovery import DEFAULT_LOAD_TIMEOUT

from ..core.profiles import Profile, profile as profile_named

__all__ = ["COMMANDS", "DEFAULT_CASE_DIR", "FIXTURE_CHOICES", "NO_CAP", "RunConfig"]

#: where shrunk failing cases go when the configuration names no directory (``case_dir=None``)
DEFAULT_CASE_DIR = "reports/cases"
#: a search's time cap when it has none: the one spelling of "no time cap" in a configuration
NO_CAP = math.inf
#: what a configuration's searches are for: "run" or "certify" (which minimum, which fixtures)
COMMANDS = ("run", "certify")
#: the golden fixtures a run replays
FIXTURE_CHOICES = ("all", "sample", "none")

#: a field's default when it is left open (None): ``RunConfig.__post_init__`` fills it in, so a
#: constructed configuration never holds it (typed Any so that each field keeps its resolved type)
OPEN: Any = None

_TUPLES = ("labels", "devices", "algorithms", "dtypes")
_FLOATS = ("call_timeout", "seconds", "load_timeout")


@dataclass(frozen=True)
class RunConfig:
    """What a run's searches and fixture replay are asked to do (frozen; plain values only; every
    field resolved on construction: see the module docstring).

    The first fields are what a worker needs to rebuild the parent's runner; the rest are the
    session's view of the run as a whole (workers receive them and ignore them)."""

    #: the implementations, by the label a worker process loads each one by (a runner given its
    #: implementations in this process needs none)
    labels: tuple[str, ...] = ()
    #: the Hypothesis profile's name (conformance/core/profiles.py)
    profile: str = "default"
    seed: int = 0
    #: where shrunk failing cases are written (None: ``DEFAULT_CASE_DIR``)
    case_dir: str = OPEN
    #: examples per (algorithm, dtype) search of each implementation (None: the profile's, and
    #: under ``certify`` at least the minimum)
    examples: int = OPEN
    #: seconds one implementation call may take (None: the profile's)
    call_timeout: float = OPEN
    #: only these devices (None: every device each implementation lists)
    devices: Optional[tuple[str, ...]] = None
    #: wall-time cap per implementation search, positive; ``NO_CAP``: none (None: the profile's
    #: when ``examples`` is None, none when an example count is given: it means exactly that many)
    seconds: float = OPEN
    #: each search split into this many shards by seed (``search_keys.shard_seed``)
    shards: int = 1
    #: seconds loading a plugin, or its ``devices()``, may take in a worker (None: the default)
    load_timeout: float = OPEN
    #: value sets per drawn case (None: the profile's; conformance/core/blocks.py)
    block: int = OPEN
    # -- the session's ---------------------------------------------------------------------------
    #: "run" or "certify": which minimum and which fixtures a complete run needs
    command: str = "run"
    #: the selection (None: everything declared)
    algorithms: Optional[tuple[str, ...]] = None
    dtypes: Optional[tuple[str, ...]] = None
    #: examples a cell must run for a verdict (None: the profile's for ``command``)
    minimum: int = OPEN
    #: the golden fixtures replayed, "all", "sample" or "none" (None: ``fixtures_required``)
    fixtures: str = OPEN
    #: worker processes (local), or the cluster's threads (Dask)
    jobs: int = 1
    #: searches and replays in the calling process (``--in-process``, or an implementation object
    #: no worker could load by its label)
    in_process: bool = False

    def __post_init__(self) -> None:
        """Fill in what was left open, once (the one place defaults are resolved); a value out of
        its range is a ValueError. Resolving a resolved configuration changes nothing, so
        ``replace`` and ``from_json`` give back the same values."""
        for name in _TUPLES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                self._set(name, tuple(value))
        prof = self.hypothesis_profile  # ValueError for an unknown name
        if self.command not in COMMANDS:
            raise ValueError(f"command must be one of {', '.join(COMMANDS)}, given {self.command!r}")
        certify = self.command == "certify"
        if self.minimum is None:
            self._set("minimum", prof.certify_minimum if certify else prof.minimum)
        explicit = self.examples is not None  # an explicit example count means exactly that many
        if self.examples is None:
            self._set("examples", max(prof.examples, self.minimum) if certify else prof.examples)
        if self.seconds is None:
            self._set("seconds", NO_CAP if explicit or prof.seconds is None else prof.seconds)
        if self.call_timeout is None:
            self._set("call_timeout", prof.call_timeout)
        if self.load_timeout is None:
            self._set("load_timeout", DEFAULT_LOAD_TIMEOUT)
        if self.block is None:
            self._set("block", prof.block)
        self._set("case_dir", DEFAULT_CASE_DIR if self.case_dir is None else os.fspath(self.case_dir))
        if self.fixtures is None:
            self._set("fixtures", self.fixtures_required)
        self._check()

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # frozen: only __post_init__ fills fields in

    def _check(self) -> None:
        for name in ("examples", "block", "shards", "jobs"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, given {value!r}")
        for name in ("seconds", "call_timeout", "load_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                hint = " (no time cap: NO_CAP, math.inf)" if name == "seconds" else ""
                raise ValueError(f"{name} must be positive seconds{hint}, given {value!r}")
        if self.fixtures not in FIXTURE_CHOICES:
            raise ValueError(f"fixtures must be one of {', '.join(FIXTURE_CHOICES)}, given {self.fixtures!r}")

    @property
    def hypothesis_profile(self) -> Profile:
        """The profile named by ``profile``."""
        return profile_named(self.profile)

    @property
    def fixtures_required(self) -> str:
        """The least fixture replay a complete run of ``command`` makes: every fixture for a
        certificate, the profile's choice for a run."""
        return "all" if self.command == "certify" else self.hypothesis_profile.fixtures

    @property
    def capped(self) -> bool:
        """Whether the searches have a time cap (``seconds`` is not ``NO_CAP``)."""
        return math.isfinite(self.seconds)

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
