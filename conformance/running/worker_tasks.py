"""What a worker process runs (conformance/running/parallel.py submits these):
one shard of one (algorithm, dtype) search (``_search_task``), a chunk of the
fixture replay (``_replay_task``) and a plugin's trial load (``_probe_task``).

Each takes plain values (the run's configuration as JSON text, names) and
returns JSON text; the plugins a worker needs are loaded once per process
(``_plugin``, under the watchdog with the load timeout: a load or a
``devices()`` that hangs ends the worker, not the task's wait).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from typing import Any, Optional, Sequence

from ..core.calling import known_hangs, skipping_hangs, watched
from .config import RunConfig
from .executors import init_worker
from .runner import Runner
from .wire import cell_to_plain

__all__: list[str] = []  # tasks and their helpers: parallel.py's own


_WORKER: dict[tuple, Any] = {}
_WORKER_LOCK = threading.Lock()  # a Dask worker runs tasks in threads of one process
#: one task at a time per process: Hypothesis and the hang record (calling.skipping_hangs) are
#: per process, not per thread, so the tasks a multi-threaded Dask worker gets wait their turn
_TASK_LOCK = threading.Lock()


def _plugin(label: str, timeout: Optional[float] = None):
    """The implementation ``label``, loaded once per process, with its ``devices()`` called once
    (``discovery.with_devices``). Both are published to the watchdog as the ``stage`` of
    ``label`` with the load timeout, so a hang there, in C code or not, ends this worker (in a
    pool of ours) instead of hanging the task."""
    from ftspec.impls.discovery import DEFAULT_LOAD_TIMEOUT, load_target, with_devices

    key = ("plugin", label)
    limit = timeout or DEFAULT_LOAD_TIMEOUT
    with _WORKER_LOCK:
        if key not in _WORKER:
            init_worker()  # idempotent; a Dask worker has no initializer of ours
            with watched({"implementation": label, "stage": "loading"}, limit):
                impl = load_target(label)
            with watched({"implementation": label, "stage": "devices()"}, limit):
                _WORKER[key] = with_devices(impl)
        return _WORKER[key]


def _plugins(labels: Sequence[str], timeout: Optional[float] = None):
    """The implementations of ``labels``, each loaded once per process (``_plugin``)."""
    return [(label, _plugin(label, timeout)) for label in labels]


def _runner(config: RunConfig, excluded: tuple[str, ...] = (), shard: int = 0) -> Runner:
    """A runner for one task (its reference cache is the task's: runners are not shared between
    tasks, which a Dask worker may run at the same time in threads). The plugins in ``excluded``
    are not even loaded."""
    plugins = _plugins([label for label in config.labels if label not in excluded], config.load_timeout)
    return Runner(plugins, config, shard=shard)


def _search_task(config: Any, algorithm: str, dtype: str, excluded: Sequence[str] = (), shard: int = 0) -> str:
    """Shard ``shard`` of one (algorithm, dtype) search, without the implementations in ``excluded``
    (labels); ``config``: the run's configuration as JSON text (or its plain values). The result as
    a JSON string of plain values, failing cells with their shrunk cases (``wire.cell_to_plain``)."""
    runner = _runner(RunConfig.from_plain(config), tuple(excluded), shard)
    with _TASK_LOCK:
        res = runner.run([algorithm], [dtype])
    key = (algorithm, dtype)
    return json.dumps({
        "cells": [cell_to_plain(c) for c in res.cells],
        "generated": res.generated.get(key, 0),
        "repeated": res.repeated.get(key, 0),
        "rejected": res.rejected.get(key, 0),
        "unmodelled": res.unmodelled.get(key, 0),
        "time_capped": bool(res.time_capped.get(key, False)),
        "agreement": [[a, b, r] for (a, b), r in res.agreement.get(key, {}).items()],
        "reference_seconds": res.reference_seconds,
        "reference_evaluations": runner.reference_evaluations,
        "implementation_seconds": dict(res.implementation_seconds),
    })


def _replay_task(config: Any, case_ids: Sequence[str], directory: Optional[str],
                 hangs: Sequence[Sequence[str]] = ()) -> str:
    """Replay ``case_ids`` on the implementations of ``config.labels`` (``config``: the run's
    configuration as JSON text, its labels those this task replays); (implementation, algorithm,
    device) in ``hangs`` are not called again."""
    from .fixture_replay import replay_fixtures

    config = RunConfig.from_plain(config)
    plugins = _plugins(config.labels, config.load_timeout)
    with _TASK_LOCK, skipping_hangs(hangs):
        results = replay_fixtures(plugins, cases=set(case_ids), dtypes=config.dtypes, devices=config.devices,
                                  directory=directory, timeout=config.call_timeout)
        found = known_hangs()
    return json.dumps({"results": [asdict(r) for r in results], "hangs": found})


def _probe_task(label: str, load_timeout: Optional[float] = None) -> str:
    """Load ``label`` and call its ``devices()`` here (``_plugin``: under the watchdog). An error
    comes back as text; the caller's own loading reports it as usual."""
    try:
        _plugin(label, load_timeout)
    except Exception as exc:  # noqa: BLE001 - e.g. an ImportError: the parent's load says it, with a hint
        return json.dumps({"loaded": False, "error": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"loaded": True})
