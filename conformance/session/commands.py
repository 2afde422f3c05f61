"""The library API under the ``ftspec`` command: a run, a certificate, a reproduction, an identification.

    from ftspec.conformance.session import Settings, certify, identify, run

    result = run(["numpy"], Settings(profile="quick", algorithms=("layer_norm",)))
    result.verdict, result.reasons, result.cells, result.fixtures
    cert = certify("my_module:impl", Settings(profile="default"))
    cert.verdict; cert.write("certificates/mine")
    identify("torch-nn", algorithms=("layer_norm",)).fits

The command-line modules (``tools/cmd_run.py``, ``cmd_certify.py``,
``cmd_identify.py``) only parse arguments into these calls and print what
they return, so a Python user gets exactly what the CLI does. ``identify``
lives in ``identify_command.py`` and is re-exported here.

The user's ``Settings`` are resolved once, after the plugins are loaded, into
one frozen ``RunConfig`` (conformance/running/config.py: the profile's
examples, time cap and call timeout filled in, the minimum and the fixtures
the command needs, the labels workers load, the workers), and that object is
what every phase passes down: to ``Runner`` in this process, to
``parallel.run_parallel``, and as JSON text to every worker.

A run has three phases (``phases.RunPhases``). The searches (``parallel.run_parallel``:
each (algorithm, dtype) search in a worker process, at ``jobs=1`` too, so a
plugin that ends or hangs its process cannot end the run; only with
``in_process`` or for an ``Implementation`` object with no label a worker
could load, ``Runner`` searches in this process). Then one extra round for
the searches whose cells ran fewer examples than the minimum (the profile's
``minimum`` for a run, ``certify_minimum`` for a certificate): the examples
they lack, from seed ``seed + EXTENSION_SEED``, at most the profile's
``ceiling`` seconds per search. Then the golden fixture replay. The verdict
(``conformance/core/verdict.py``) is derived from the per-cell results.

Plugins are loaded before all that, and loading is plugin code too. Unless
``in_process``, the run's worker pool (one for the whole command, shut down
with it, which ends every worker's process group) first loads each plugin
named by a label and calls its ``devices()`` in a worker, under the watchdog
and the load timeout (``load_timeout``, ``parallel.probe_plugins``); a
plugin whose loading hangs or takes that worker down is recorded as failed to
load (in ``broken``: the verdict is non-conformant) and never loaded here,
and one whose ``devices()`` does gets an error on every cell without this
process calling it. Only then does this process load them. ``in_process``
(and for implementation objects) loading and ``devices()`` run in a helper
thread abandoned after the load timeout: a hang that holds the GIL there
hangs the run. A plugin's ``devices()`` is called once per process
(``discovery.with_devices``).

A plugin whose call hung or crashed in the searches is not called again:
the extra round leaves it out (``exclude``) and the fixture replay skips it
(``parallel.hangs_of``, ``calling.skipping_hangs``) under the run's call
timeout, so a hang costs its timeout once. Ctrl-C keeps what had ended
(the ``partial`` of ``interruption.SearchesInterrupted`` or
``ReplayInterrupted``; cells of searches not ended become "no examples") and
marks the result interrupted.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from ftspec.impls.api import FLOAT_DTYPES, Implementation, select_devices
from ftspec.impls.discovery import (DEFAULT_LOAD_TIMEOUT, PluginError, PluginLost, PluginRecord, PluginTimeout,
                                    failing_devices, load_target, select, wanted, with_devices)
from ftspec.spec.registry import REGISTRY

from .certificate import Certificate, CertificateError, build
from .errors import SessionError
from .identify_command import Identification, identify
from .phases import EXTENSION_SEED, RunPhases
from ..running.config import DEFAULT_CASE_DIR, FIXTURE_CHOICES, NO_CAP, RunConfig
from ..core.blocks import MAX_BLOCK
from ..core.profiles import PROFILES, profile
from ..running.runner import RunResult
from ..core.verdict import NothingTested
from ..core.status import Status

__all__ = [
    "EXTENSION_SEED",
    "Certificate",
    "Identification",
    "NothingTested",
    "Reproduction",
    "RunResult",
    "SessionError",
    "Settings",
    "capped_jobs",
    "certify",
    "identify",
    "recorded_lines",
    "reproduce",
    "reproduction_settings",
    "run",
]

Plugin = Union[str, Implementation, tuple[str, Implementation]]


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(choices)}"


@dataclass(frozen=True)
class Settings:
    """Everything a run or a certification is asked to do (validated on construction).

    ``examples``: examples per (algorithm, dtype) search (None: the profile's; a certificate
    searches for at least the profile's ``certify_minimum``). ``seconds``: wall-time cap per search
    (None: the profile's, none when ``examples`` is given; 0: none). ``fixtures``: "all",
    "sample" or "none" (None: the command's default). ``jobs``: worker processes (None: one per
    CPU, at most 8). ``in_process``: search in this process (debugging; a plugin that crashes
    or hangs it ends the run). ``shards``: each search split into this many by seed (same seed
    and shards, same cases; None: 1). ``scheduler``: the address of a Dask scheduler whose
    workers run the tasks instead of local worker processes (``ftspec[dask]``; not recorded in
    a certificate: it says where, not what). ``load_timeout``: seconds loading one plugin, or
    its ``devices()``, may take (None: ``DEFAULT_LOAD_TIMEOUT``; not recorded in a certificate).
    ``block``: value sets per drawn case (conformance/core/blocks.py; None: the profile's, 1: one
    example per draw); it changes which cases a seed draws, so a certificate records it.
    ``case_dir``: where shrunk failing cases are written (None: ``reports/cases``; ``ftspec
    certify`` names ``OUT/cases``). ``jobs`` is capped at ``parallel.jobs_cap()``
    (``capped_jobs``). ``progress(event, **info)`` receives progress events."""

    profile: str = "default"
    algorithms: Optional[tuple[str, ...]] = None
    dtypes: Optional[tuple[str, ...]] = None
    devices: Optional[tuple[str, ...]] = None
    examples: Optional[int] = None
    seconds: Optional[float] = None
    seed: int = 0
    call_timeout: Optional[float] = None
    case_dir: Optional[str] = None
    fixtures: Optional[str] = None
    jobs: Optional[int] = None
    in_process: bool = False
    shards: Optional[int] = None
    scheduler: Optional[str] = None
    load_timeout: Optional[float] = None
    block: Optional[int] = None
    progress: Optional[Callable[..., None]] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("algorithms", "dtypes", "devices"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = (value,)
            if value is not None:
                value = tuple(dict.fromkeys(str(v) for v in value))  # repeats dropped, order kept
                if not value:
                    value = None
            object.__setattr__(self, name, value)
        if self.case_dir is not None:
            object.__setattr__(self, "case_dir", str(self.case_dir))
        if self.profile not in PROFILES:
            raise SessionError(f"unknown profile {self.profile!r}{_did_you_mean(str(self.profile), sorted(PROFILES))}")
        for name in self.algorithms or ():
            if name not in REGISTRY:
                raise SessionError(f"unknown algorithm {name!r}{_did_you_mean(name, list(REGISTRY))}")
        for name in self.dtypes or ():
            if name not in FLOAT_DTYPES:
                raise SessionError(f"unknown dtype {name!r}; choose from {', '.join(FLOAT_DTYPES)}")
        if self.examples is not None and (not _is_int(self.examples) or self.examples < 1):
            raise SessionError(f"examples must be a whole number of at least 1, given {self.examples!r}")
        if self.seconds is not None and (not _is_number(self.seconds) or self.seconds < 0):
            raise SessionError(f"seconds must be 0 (no cap) or positive, given {self.seconds!r}")
        if self.call_timeout is not None and (not _is_number(self.call_timeout) or not self.call_timeout > 0):
            raise SessionError(f"call timeout must be positive seconds, given {self.call_timeout!r}")
        if self.load_timeout is not None and (not _is_number(self.load_timeout) or not self.load_timeout > 0):
            raise SessionError(f"load timeout must be positive seconds, given {self.load_timeout!r}")
        if self.jobs is not None and (not _is_int(self.jobs) or self.jobs < 1):
            raise SessionError(f"jobs must be a whole number of at least 1, given {self.jobs!r}")
        if self.block is not None and (not _is_int(self.block) or not 1 <= self.block <= MAX_BLOCK):
            raise SessionError(f"block must be a whole number from 1 to {MAX_BLOCK}, given {self.block!r}")
        if self.shards is not None and (not _is_int(self.shards) or self.shards < 1):
            raise SessionError(f"shards must be a whole number of at least 1, given {self.shards!r}")
        if self.scheduler is not None and (not isinstance(self.scheduler, str) or not self.scheduler.strip()):
            raise SessionError(f"scheduler must be an address such as tcp://host:8786, given {self.scheduler!r}")
        if self.in_process and (self.scheduler or (self.shards or 1) > 1):
            raise SessionError("--in-process searches in this process: it takes neither --scheduler nor --shards "
                               "above 1")
        if not _is_int(self.seed) or self.seed < 0:
            raise SessionError(f"seed must be a whole number of at least 0, given {self.seed!r}")
        if self.fixtures is not None and self.fixtures not in FIXTURE_CHOICES:
            raise SessionError(f"fixtures must be one of {', '.join(FIXTURE_CHOICES)}, given {self.fixtures!r}")

    def recorded(self) -> dict[str, Any]:
        """The settings as plain values (what a certificate records, and ``reproduce`` reads back)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("progress", "case_dir", "scheduler", "load_timeout")}
        for name in ("algorithms", "dtypes", "devices"):
            out[name] = None if out[name] is None else list(out[name])
        out["block"] = self.block or profile(self.profile).block  # the cases a seed draws depend on it
        if out["seconds"] is not None and not math.isfinite(out["seconds"]):
            out["seconds"] = 0
        return out


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)


def _check_case_dir(case_dir: Optional[str]) -> None:
    """The folder shrunk failing cases go to can be written, checked before the run: the runner
    writes a case file only when a cell fails, and one it cannot write leaves the failure without
    its reproducer, so an unwritable folder (``/proc/x``, a file, a read-only mount) must stop the
    command at its start, in one line (SessionError), not lose every case file of the run."""
    from .report import OutputPathError, check_writable

    try:
        check_writable(DEFAULT_CASE_DIR if case_dir is None else case_dir, directory=True)
    except OutputPathError as exc:
        raise SessionError(f"case directory (--case-dir): {exc}") from None


# -- plugins ---------------------------------------------------------------------------

def _loadable(label: str, impl: Implementation, timeout: Optional[float] = None) -> bool:
    """Whether a worker process that loads ``label`` gets this very implementation."""
    try:
        return load_target(label, timeout=timeout) is impl
    except Exception:  # noqa: BLE001 - not loadable, whatever the reason
        return False


class _Workers:
    """The command's local worker pool (``parallel.worker_pool``), started on first use and shut
    down with the command: every worker's process group ends then (isolation.py)."""

    def __init__(self, settings: Settings) -> None:
        self.jobs = _jobs(settings)
        self.load_timeout = settings.load_timeout or DEFAULT_LOAD_TIMEOUT
        self._pool: Any = None

    def pool(self) -> Any:
        if self._pool is None:
            from ..running.parallel import worker_pool

            self._pool = worker_pool(self.jobs)
        return self._pool

    def probe(self, labels: Sequence[str]) -> tuple[dict[str, str], dict[str, PluginError]]:
        """Each plugin loaded, and its ``devices()`` called, in a worker first
        (``parallel.probe_plugins``): ({label: why} of those whose loading hung or crashed the
        worker, {label: the error its ``devices()`` raises here} of those whose ``devices()`` did)."""
        from ..running.parallel import probe_plugins

        loading: dict[str, str] = {}
        devices: dict[str, PluginError] = {}
        if not labels:
            return loading, devices
        for label, exc in probe_plugins(labels, self.pool(), load_timeout=self.load_timeout).items():
            if (exc.call or {}).get("stage") == "devices()":
                devices[label] = (PluginTimeout if exc.deadline else PluginLost)(str(exc))
            else:
                loading[label] = str(exc)
        return loading, devices

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _plugins(plugins: Optional[Sequence[Plugin]], settings: Settings = Settings(),
             workers: Optional[_Workers] = None) -> tuple[list[tuple[str, Implementation]], list[PluginRecord],
                                                          bool]:
    """(loaded (label, implementation) pairs, records of those that failed to load, whether every
    label can be loaded again by a worker process). With ``workers``, each plugin named by a label
    is loaded in a worker first (``_Workers.probe``) and here only if that did not hang or crash;
    without, here in a helper thread abandoned after the load timeout. Every implementation comes
    back with its ``devices()`` answered from one call (``with_devices``)."""
    if plugins is None or isinstance(plugins, str):
        plugins = None if plugins is None else [plugins]
    names = [p for p in (plugins or []) if isinstance(p, str)]
    objects = [p for p in (plugins or []) if not isinstance(p, str)]
    loaded: list[tuple[str, Implementation]] = []
    broken: list[PluginRecord] = []
    timeout = settings.load_timeout or DEFAULT_LOAD_TIMEOUT
    failed: dict[str, str] = {}
    lost: dict[str, PluginError] = {}
    if plugins is None or names:
        try:
            labels = wanted(names or None)
            if workers is not None:
                failed, lost = workers.probe(labels)
            loaded, broken = select(names or None, timeout=None if workers is not None else timeout, failed=failed)
        except PluginError as exc:
            raise SessionError(str(exc)) from None
    portable = True
    for p in objects:
        if isinstance(p, Implementation):
            label, impl = p.name, p
        elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], Implementation):
            label, impl = str(p[0]), p[1]
        else:
            raise SessionError(f"a plugin is a name, 'module:object', an Implementation or a (label, "
                               f"Implementation) pair; given {type(p).__name__}")
        portable = portable and _loadable(label, impl, timeout)
        loaded.append((label, impl))
    labels = [label for label, _ in loaded]
    if len(set(labels)) != len(labels):
        raise SessionError(f"two implementations have one label: {sorted(labels)}")
    return [(label, _answering(label, impl, lost, timeout)) for label, impl in loaded], broken, portable


def _answering(label: str, impl: Implementation, lost: dict[str, PluginError], timeout: float) -> Implementation:
    """``impl`` with its ``devices()`` answered from one call: made here in a helper thread (at most
    ``timeout`` seconds), or, when that call hung or crashed a worker, never made."""
    if label in lost:
        return failing_devices(impl, lost[label])
    return with_devices(impl, timeout)


# -- the configuration -------------------------------------------------------------------

def capped_jobs(jobs: Optional[int]) -> tuple[Optional[int], Optional[str]]:
    """``jobs`` within ``parallel.jobs_cap()`` (``MAX_JOBS_PER_CPU`` per usable CPU), and a
    one-line note saying so when it was cut (None when it was not)."""
    from ..running.executors import MAX_JOBS_PER_CPU, jobs_cap, usable_cpus

    cap = jobs_cap()
    if jobs is None or not _is_int(jobs) or jobs <= cap:
        return jobs, None
    cpus = usable_cpus()
    return cap, (f"--jobs {jobs} capped at {cap} ({MAX_JOBS_PER_CPU} worker processes per CPU, "
                 f"{cpus} CPU{'s' if cpus != 1 else ''} here)")


def _jobs(settings: Settings) -> int:
    """Worker processes: ``settings.jobs`` up to ``capped_jobs``'s cap, or one per CPU (at most 8)."""
    from ..running.executors import default_jobs

    return capped_jobs(settings.jobs)[0] or default_jobs()


def _configure(settings: Settings, command: str, labels: Sequence[str], *, jobs: int,
               in_process: bool) -> RunConfig:
    """The run's one configuration for ``command`` ("run" or "certify"): what ``settings`` gives,
    the rest left open for ``RunConfig`` to fill in (the profile's examples, time cap, call
    timeout and block, the command's minimum and fixtures: conformance/running/config.py)."""
    given: dict[str, Any] = {name: getattr(settings, name)
                             for name in ("case_dir", "examples", "call_timeout", "load_timeout", "block", "fixtures")}
    if settings.seconds is not None:  # the user's "no cap" (--seconds 0) is the configuration's NO_CAP
        given["seconds"] = settings.seconds or NO_CAP
    return RunConfig(labels=tuple(labels), profile=settings.profile, seed=settings.seed, devices=settings.devices,
                     shards=settings.shards or 1, command=command, algorithms=settings.algorithms,
                     dtypes=settings.dtypes, jobs=jobs, in_process=in_process, **given)


def _declared(loaded: Sequence[tuple[str, Implementation]]) -> dict[str, list[str]]:
    """What the implementations declare: algorithms, dtypes, devices (union, in a fixed order)."""
    algorithms = [a for a in REGISTRY if any(a in impl.algorithms for _, impl in loaded)]
    dtypes = [d for d in FLOAT_DTYPES if any(d in tuple(impl.dtypes) for _, impl in loaded)]
    devices: list[str] = []
    for _, impl in loaded:
        try:
            found = [str(d) for d in impl.devices()]  # answered from one call (_plugins: with_devices)
        except Exception:  # noqa: BLE001 - the runner reports it per cell
            found = []
        devices += [d for d in found if d not in devices]
    return {"algorithms": algorithms, "dtypes": dtypes, "devices": devices}


def _check_something(settings: Settings, declared: dict[str, list[str]], loaded) -> None:
    """NothingTested before any work when the selection misses everything the implementations declare."""
    names = ", ".join(label for label, _ in loaded)
    for key, chosen in (("algorithms", settings.algorithms), ("dtypes", settings.dtypes)):
        if chosen and not set(chosen) & set(declared[key]):
            raise NothingTested(f"nothing was tested: {names} declare{'s' if len(loaded) == 1 else ''} no "
                                f"{' or '.join(chosen)} (declared {key}: {', '.join(declared[key]) or 'none'})")
    if settings.algorithms and settings.dtypes and not any(
            a in impl.algorithms and d in tuple(impl.dtypes)
            for _, impl in loaded for a in settings.algorithms for d in settings.dtypes):
        raise NothingTested(f"nothing was tested: no implementation declares {' or '.join(settings.algorithms)} "
                            f"at {' or '.join(settings.dtypes)}")
    if settings.devices and declared["devices"] and not select_devices(declared["devices"], settings.devices):
        raise NothingTested(f"nothing was tested: no device {' or '.join(settings.devices)} (the implementations "
                            f"have {', '.join(declared['devices'])})")


def _execute(loaded, settings: Settings, command: str, portable: bool, broken=(),
             workers: Optional[_Workers] = None) -> RunResult:
    """The run of ``command`` over ``loaded``: its configuration built once (``_configure``), on the
    command's worker pool (``workers``), a Dask cluster (``settings.scheduler``) or, ``in_process``
    or for implementations no worker can load, in this process; the caller shuts ``workers`` down."""
    declared = _declared(loaded)
    _check_something(settings, declared, loaded)
    if (settings.scheduler or (settings.shards or 1) > 1) and not portable:
        raise SessionError("--scheduler and --shards above 1 need implementations a worker process can load "
                           "by name (a registered plugin or module:object), not an object made here")
    in_process = settings.in_process or not portable
    labels = [label for label, _ in loaded]
    if workers is not None and (in_process or settings.scheduler):
        workers.close()  # it only loaded the plugins first: the run is elsewhere
    if settings.scheduler:
        from ..running.executors import ExecutorError, dask_executor

        try:
            with dask_executor(settings.scheduler) as executor:
                config = _configure(settings, command, labels, jobs=executor.threads(), in_process=in_process)
                return RunPhases(loaded, config, executor=executor, declared=declared, broken=broken,
                            progress=settings.progress).execute()
        except ExecutorError as exc:
            raise SessionError(str(exc)) from None
    config = _configure(settings, command, labels, jobs=_jobs(settings), in_process=in_process)
    pool = workers.pool() if workers is not None and not in_process else None
    return RunPhases(loaded, config, executor=pool, declared=declared, broken=broken,
                progress=settings.progress).execute()


# -- the API -----------------------------------------------------------------------------

def run(plugins: Optional[Sequence[Plugin]] = None, settings: Settings = Settings()) -> RunResult:
    """Search (and replay the fixtures of) ``plugins``: names or ``module:object`` labels, loaded
    here, or (label, Implementation) pairs and Implementation objects (None: every registered
    plugin). The result carries ``verdict``, ``reasons``, ``cells``, ``fixtures``, ``broken``
    (plugins that failed to load) and ``interrupted``. Raises SessionError for bad input and
    NothingTested when the selection leaves nothing to run."""
    _check_case_dir(settings.case_dir)  # before any plugin is loaded or searched
    workers = None if settings.in_process else _Workers(settings)
    try:
        loaded, broken, portable = _plugins(plugins, settings, workers)
        if not loaded:
            failed = "; ".join(f"{r.name}: {r.error}" for r in broken)
            raise SessionError("no implementation to run" + (f" (failed to load: {failed})" if failed else ""))
        return _execute(loaded, settings, "run", portable, broken, workers)
    finally:
        if workers is not None:
            workers.close()


def _one(target: Plugin, settings: Settings, workers: Optional[_Workers]) -> tuple[str, Implementation, bool]:
    if isinstance(target, str):
        loaded, broken, _ = _plugins([target], settings, workers)
        if not loaded:  # the messages load_target gives
            record = broken[0]
            error = str(record.error)
            if ":" in target:
                raise SessionError(error if error.startswith("cannot load") else f"cannot load {target!r}: {error}")
            hint = f" (hint: {record.hint})" if record.hint else ""
            raise SessionError(f"plugin {target!r} failed to load: {error}{hint}")
        return loaded[0][0], loaded[0][1], True
    loaded, _, portable = _plugins([target], settings, workers)
    return loaded[0][0], loaded[0][1], portable


def certify(target: Plugin, settings: Settings = Settings(), *,
            issued: Optional[_dt.datetime] = None,
            case_dir_of: Optional[Callable[[Implementation], str]] = None) -> Certificate:
    """Certify one implementation (a name, ``module:object``, an Implementation or a (label,
    Implementation) pair) against every algorithm, dtype and device it declares, and every golden
    fixture; the certificate's verdict is ``conformant`` only if all of that ran and passed.
    ``case_dir_of(impl)``: where failing cases go, once the target is loaded (``ftspec certify``
    puts them beside the certificate, in a folder named for the implementation, without loading
    the target a second time); it replaces ``settings.case_dir``."""
    if case_dir_of is None:
        _check_case_dir(settings.case_dir)  # before the target is loaded
    workers = None if settings.in_process else _Workers(settings)
    try:
        label, impl, portable = _one(target, settings, workers)
        if case_dir_of is not None:
            settings = replace(settings, case_dir=case_dir_of(impl))
            _check_case_dir(settings.case_dir)  # known once the target is loaded; still before the run
        issued = issued or _dt.datetime.now(_dt.timezone.utc)
        result = _execute([(label, impl)], settings, "certify", portable, workers=workers)
    finally:
        if workers is not None:
            workers.close()
    return Certificate(build(label, impl, result, settings=settings, issued=issued), result)


@dataclass
class Reproduction:
    """``reproduce``'s answer: the new certificate and, per cell, the recorded and new status."""

    recorded: dict
    certificate: Certificate
    rows: list[dict] = field(default_factory=list)  # {algorithm, dtype, device, recorded, got, same}
    differences: list[str] = field(default_factory=list)  # versions that differ from the recorded ones

    @property
    def same(self) -> bool:
        return (all(r["same"] for r in self.rows)
                and self.recorded.get("verdict") == self.certificate.verdict)


def reproduce(path: Path | str, impl: Plugin, *, jobs: Optional[int] = None,
              case_dir: Optional[str] = None, load_timeout: Optional[float] = None,
              progress: Optional[Callable[..., None]] = None) -> Reproduction:
    """Run a certificate's certification again on ``impl`` (always the caller's choice: the target
    a certificate records is data, never imported from it) with its recorded seed and settings
    (bounded by ``certificate.recorded_settings``), and compare verdicts cell by cell. ``case_dir``:
    where failing cases go (None: the default); ``load_timeout``: as in ``Settings`` (never recorded).
    Raises CertificateError if the file is not an intact, consistent certificate, or records a
    setting no reproduction should run with (``reproduction_settings``)."""
    from .certificate import load
    from .report import package_versions

    doc = load(path)
    kwargs = reproduction_settings(doc, path)
    kwargs.update(progress=progress, jobs=jobs, load_timeout=load_timeout)
    if case_dir is not None:
        kwargs["case_dir"] = case_dir
    if impl is None or impl == "":
        raise SessionError("reproduce needs the implementation to run (the certificate's recorded target is "
                           "never imported from the file)")
    new = certify(impl, Settings(**kwargs))
    rep = Reproduction(doc, new)
    got = {(c["algorithm"], c["dtype"], c["device"]): c["status"] for c in new.doc["results"]}
    for c in doc["results"]:
        if c["status"] == Status.NOT_IMPLEMENTED:
            continue
        key = (c["algorithm"], c["dtype"], c["device"])
        now = got.get(key, "not run")
        rep.rows.append({"algorithm": key[0], "dtype": key[1], "device": key[2], "recorded": c["status"],
                         "got": now, "same": now == c["status"]})
    seen = {(r["algorithm"], r["dtype"], r["device"]) for r in rep.rows}
    for key, status in got.items():
        if key not in seen and status != "not implemented":
            rep.rows.append({"algorithm": key[0], "dtype": key[1], "device": key[2], "recorded": "not run",
                             "got": status, "same": False})
    subject, now_subject = doc["subject"], new.doc["subject"]
    if subject.get("version") != now_subject.get("version"):
        rep.differences.append(f"{subject.get('name')}: recorded {subject.get('version')}, "
                               f"now {now_subject.get('version')}")
    if doc.get("spec_version") != new.doc.get("spec_version"):
        rep.differences.append(f"spec: recorded {doc.get('spec_version')}, now {new.doc.get('spec_version')}")
    now_packages = package_versions()
    for name, version in sorted(doc.get("environment", {}).get("packages", {}).items()):
        if now_packages.get(name) != version:
            rep.differences.append(f"{name}: recorded {version}, now {now_packages.get(name)}")
    return rep


#: the least call timeout a reproduction takes from a certificate: a timeout exists to catch a hang,
#: and below a second it fails ordinary calls as hangs (a first call that imports or compiles, a
#: loaded machine), so a smaller recorded value would make the reproduction fail a correct
#: implementation for a reason the file chose
MIN_CALL_TIMEOUT = 1.0
#: the least positive per-search time cap a reproduction takes from a certificate (0 is "no cap"):
#: below it a search ends after its first example, whatever the machine
MIN_SECONDS = 0.1


def reproduction_settings(doc: dict, path: Path | str = "the certificate") -> dict[str, Any]:
    """The ``Settings`` keywords a reproduction of ``doc`` takes from the file: its recorded settings
    as ``certificate.recorded_settings`` bounds them, and refused (CertificateError, one line) where
    a value is inside those bounds yet absurd for a run: a call timeout below ``MIN_CALL_TIMEOUT``,
    a positive time cap below ``MIN_SECONDS``."""
    from .certificate import recorded_settings

    known = {f.name for f in fields(Settings)}
    try:
        kwargs = {k: v for k, v in recorded_settings(doc).items() if k in known}
    except CertificateError as exc:
        raise CertificateError(f"{path}: {exc}") from None
    timeout, seconds = kwargs.get("call_timeout"), kwargs.get("seconds")
    if timeout is not None and timeout < MIN_CALL_TIMEOUT:
        raise CertificateError(f"{path}: run.settings.call_timeout {timeout:g} s is below {MIN_CALL_TIMEOUT:g} s: "
                               "ordinary calls would fail as hangs; not reproduced (certify again with a "
                               "--call-timeout of at least that)")
    if seconds is not None and 0 < seconds < MIN_SECONDS:
        raise CertificateError(f"{path}: run.settings.seconds {seconds:g} s is below {MIN_SECONDS:g} s (0 is no "
                               "cap): each search would stop after one example; not reproduced")
    return kwargs


def recorded_lines(settings: dict[str, Any]) -> list[str]:
    """What a reproduction takes from the certificate, one ``name value`` per setting, each value as
    it will run (a setting the file leaves out runs at the recorded profile's value, and says so)."""
    prof = profile(settings["profile"])
    shown = {"profile": settings["profile"], "seed": settings["seed"]}
    for key in ("algorithms", "dtypes", "devices"):
        value = settings.get(key)
        shown[key] = ", ".join(value) if value else "all declared"
    examples = settings.get("examples")
    shown["examples"] = examples if examples is not None else f"the profile's ({prof.examples})"
    seconds = settings.get("seconds")
    if seconds is not None:
        shown["seconds"] = "0 (no cap)" if seconds == 0 else f"{seconds:g} s"
    elif examples is not None or not prof.seconds:  # a count of examples runs uncapped (_configure)
        shown["seconds"] = "no cap"
    else:
        shown["seconds"] = f"the profile's ({prof.seconds:g} s)"
    timeout = settings.get("call_timeout")
    shown["call_timeout"] = f"{timeout:g} s" if timeout is not None else f"the profile's ({prof.call_timeout:g} s)"
    shown["fixtures"] = settings.get("fixtures") or "all (certify)"
    shown["shards"] = settings.get("shards") or 1
    shown["block"] = settings.get("block") or prof.block
    return [f"{key} {value}" for key, value in shown.items()]
