"""Where a run's tasks go: the local worker pool or a Dask cluster, and how many workers.

Each search task and each chunk of fixture cases goes to a
``concurrent.futures.Executor`` (conformance/running/parallel.py):

- by default ``isolation.IsolatedPool``, local worker processes (``worker_pool``;
  jobs=1 too: one worker, so a plugin that ends its process cannot end the run).
  It is an ``Executor`` subclass written for this project and is kept rather
  than replaced by ``concurrent.futures.ProcessPoolExecutor``, which cannot do
  what a run needs: a worker death breaks a ``ProcessPoolExecutor`` for good
  (``BrokenProcessPool`` for every pending task), it has no way to kill a call
  hung in C code (no per-task watchdog), and it unpickles what workers send;
- with ``--scheduler ADDRESS``, a Dask distributed cluster's executor
  (``dask_executor``: ``Client.get_executor``, optional extra ``ftspec[dask]``):
  the workers need ftspec and the plugins installed; a lost Dask worker fails
  its task as an error (Dask's own exception), and a call hung in C code is not
  killed there (its worker stays busy until Dask's own timeouts): use the local
  executor to find crashes and hangs. A worker process runs one task at a time
  (Hypothesis is not thread-safe): start workers with ``--nthreads 1`` and as
  many processes as cores.

``--jobs`` is capped at ``MAX_JOBS_PER_CPU`` workers per usable CPU
(``jobs_cap``): each worker imports every framework.
"""

from __future__ import annotations

import os
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .isolation import IsolatedPool

__all__ = ["MAX_DEFAULT_JOBS", "MAX_JOBS_PER_CPU", "DaskPool", "ExecutorError", "dask_executor", "default_jobs",
           "init_worker", "jobs_cap", "usable_cpus", "worker_pool"]

#: default ceiling on worker processes: each imports every framework (~1 GB resident with JAX)
MAX_DEFAULT_JOBS = 8
#: ceiling on an explicit --jobs, per usable CPU: searches are CPU-bound, and each worker holds
#: every framework in memory, so more workers only share the CPUs (and the memory runs out)
MAX_JOBS_PER_CPU = 4


def usable_cpus() -> int:
    """The CPUs this process may use (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_jobs() -> int:
    """One worker per CPU this process may use, at most ``MAX_DEFAULT_JOBS``."""
    return max(1, min(MAX_DEFAULT_JOBS, usable_cpus()))


def jobs_cap() -> int:
    """The most worker processes a run starts: ``MAX_JOBS_PER_CPU`` per usable CPU."""
    return MAX_JOBS_PER_CPU * usable_cpus()


def init_worker() -> None:
    """What every worker process does first (idempotent; a Dask worker gets it from the first task)."""
    # Several processes share one accelerator: JAX must not claim most of its memory up front.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import warnings

    warnings.filterwarnings("ignore")


def worker_pool(jobs: int) -> IsolatedPool:
    """``jobs`` local worker processes (an ``IsolatedPool``), for ``executor=``: the caller shuts it
    down (which ends every worker's process group)."""
    return IsolatedPool(jobs, initializer=init_worker)


class ExecutorError(RuntimeError):
    """The executor cannot be had (no Dask installed, no scheduler at the address): one line."""


class DaskPool(Executor):
    """A Dask client's executor with the ``shutdown``/``terminate`` the parallel driver calls: tasks
    are submitted impure (a task sent again after a loss runs again), and the client stays open."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._inner = client.get_executor(pure=False)
        self._futures: list[Future] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future = self._inner.submit(fn, *args, **kwargs)
        self._futures.append(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            for f in self._futures:
                f.cancel()
        self._futures = [f for f in self._futures if not f.done()]

    def terminate(self) -> None:
        self.shutdown(cancel_futures=True)

    def threads(self) -> int:
        """Worker threads in the cluster now (what shards can keep busy)."""
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:  # noqa: BLE001 - a cluster that cannot say: one
            return 1


@contextmanager
def dask_executor(address: str, *, timeout: float = 10.0) -> Iterator[DaskPool]:
    """An executor on the Dask scheduler at ``address`` (e.g. ``tcp://host:8786``); the client is
    closed on exit. Raises ExecutorError with one line when Dask is missing or nobody answers."""
    try:
        from distributed import Client
    except ImportError:
        raise ExecutorError("--scheduler needs Dask: pip install 'ftspec[dask]'") from None
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 - OSError, TimeoutError, ValueError from an address
        raise ExecutorError(f"cannot reach a Dask scheduler at {address!r} within {timeout:g} s: "
                            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    try:
        yield DaskPool(client)
    finally:
        client.close()
