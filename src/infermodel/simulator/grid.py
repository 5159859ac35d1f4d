"""Running the runs of a grid one after another or on a Dask cluster.

Every run of a grid (policy × load × deployment × seed) is independent and
deterministic, so where it runs does not change its result: :func:`execute` returns
the same list, in the same order, with ``scheduler="serial"`` (this process), with
``scheduler="processes"`` (a pool of worker processes on this machine, one per core)
and with ``scheduler="dask"`` (a local cluster of one single-threaded worker process per
core, started for the call and closed after it, or the cluster at ``address``).

Dask is an optional dependency (``pip install "infermodel[dask]"``); the serial
scheduler needs nothing.  On a cluster every worker needs infermodel installed (the
same version), since each receives the run's inputs and calls the simulator.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .errors import SimulationError

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

__all__ = ["SCHEDULERS", "execute", "start_local_cluster"]

#: Where a grid's runs go: this process, a pool of worker processes on this machine
#: (one per core), or a Dask cluster.
SCHEDULERS = ("serial", "processes", "dask")


#: Dask settings for the local cluster's workers.  Dask's nanny starts workers with
#: ``MALLOC_TRIM_THRESHOLD_=65536`` (memory handed back to the system at every free of
#: more than 64 kB), which makes the simulator's many short-lived numpy arrays cost
#: 20–28 % more CPU time (measured: 32 runs of Lab 3's workload, 4.2 CPU s in this
#: process, 5.1 with that variable set, 5.3–5.5 in a default worker); the workers here
#: keep the allocator's default and the nanny's one-thread limits for numerical
#: libraries.  The statistical profiler (every 10 ms) and the GIL monitor (every 1 ms)
#: serve the dashboard, which is not started: they are off.
WORKER_CONFIG = {
    "distributed.nanny.pre-spawn-environ": {
        "OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1},
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
}


def start_local_cluster(workers: int | None = None, module: str = "infermodel.simulator.api",
                        ) -> tuple[LocalCluster, Client]:
    """A local Dask cluster of ``workers`` single-threaded worker processes (default: the
    cores), with ``module`` (the code the tasks run) already imported on every worker;
    returns ``(cluster, client)``.  Processes, not threads: the simulator is Python code
    that holds the GIL, so threads of one process would take turns.  Start one and pass
    its ``cluster.scheduler_address`` as ``address`` to run several grids on it and pay
    the start-up once.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SimulationError('the dask scheduler needs Dask: pip install "infermodel[dask]"') from None
    import dask

    if multiprocessing.current_process().daemon:  # Dask would try, log, leak and fail
        raise SimulationError("cannot start a local Dask cluster from a daemonic process (a "
                              "worker of a multiprocessing pool may not start processes): "
                              "run with --scheduler serial, or give the --address of a "
                              "running cluster")
    with _dask_records() as records:
        try:
            with dask.config.set(WORKER_CONFIG):
                cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1,
                                       threads_per_worker=1, processes=True,
                                       dashboard_address=None)
        except Exception as error:  # Dask reports a failed start in many exception types
            raise SimulationError(f"cannot start a local Dask cluster ({_reason(error, records)}): "
                                  "run with --scheduler serial, or give the --address of a "
                                  "running cluster") from None
    client = Client(cluster)
    client.run(importlib.import_module, module)
    return cluster, client


class _Keep(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.NOTSET)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _dask_records() -> Iterator[list[logging.LogRecord]]:
    """Dask's log records while a local cluster starts, kept instead of printed.

    A worker process that fails to start is logged by Dask with its whole traceback on
    standard error before the start raises; the failure is reported once, as a
    :class:`SimulationError` naming the cause (:func:`_reason`).  When the cluster starts,
    the kept records go to Dask's own handlers as they would have.
    """
    logger = logging.getLogger("distributed")
    records: list[logging.LogRecord] = []
    saved = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [_Keep(records)], False
    started = False
    try:
        yield records
        started = True
    finally:
        logger.handlers, logger.propagate = saved
        if started:
            for record in records:
                logger.handle(record)


def _reason(error: Exception, records: list[logging.LogRecord]) -> str:
    """The failed start in one line: Dask's exception and, when a logged error carries
    one, the exception underneath it (``daemonic processes are not allowed to have
    children`` in a worker of a multiprocessing pool, for one).
    """
    reason = str(error) or type(error).__name__
    for record in records:  # the first: later ones follow from it
        cause = record.exc_info[1] if record.exc_info else None
        if cause is not None:
            text = f"{type(cause).__name__}: {cause}".strip()
            if text not in reason:
                reason = f"{reason} {text}"
            break
    return reason[:300]


def _in_processes(function: Callable[..., Any], tasks: Sequence[tuple], workers: int | None,
                  progress: Callable[[int, int], None] | None) -> list[Any]:
    """The tasks on a pool of worker processes of this machine, results in task order."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if multiprocessing.current_process().daemon:
        raise SimulationError("cannot start worker processes from a daemonic process: run with "
                              "the serial scheduler")
    count = min(len(tasks), workers or os.cpu_count() or 1)
    results: list[Any] = [None] * len(tasks)
    with ProcessPoolExecutor(max_workers=count) as pool:
        futures = {pool.submit(function, *task): position for position, task in enumerate(tasks)}
        for done, future in enumerate(as_completed(futures), start=1):
            results[futures[future]] = future.result()
            if progress is not None:
                progress(done, len(tasks))
    return results


def execute(function: Callable[..., Any], tasks: Sequence[tuple], scheduler: str = "serial",
            address: str | None = None, progress: Callable[[int, int], None] | None = None,
            workers: int | None = None) -> list[Any]:
    """``[function(*task) for task in tasks]``, serially, on worker processes or on Dask.

    :param scheduler: ``"serial"``, ``"processes"`` (a pool of ``workers`` processes on
        this machine, default one per core) or ``"dask"``.
    :param address: a Dask scheduler address (``"tcp://host:8786"``); without it a
        local cluster is started with ``workers`` processes (default: the cores).
    :param progress: called as ``progress(done, total)`` as runs complete.
    """
    if scheduler not in SCHEDULERS:
        raise SimulationError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    total = len(tasks)
    if scheduler == "serial" or (scheduler == "processes" and total <= 1):
        results: list[Any] = []
        for task in tasks:
            results.append(function(*task))
            if progress is not None:
                progress(len(results), total)
        return results
    if scheduler == "processes":
        return _in_processes(function, tasks, workers, progress)
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise SimulationError('the dask scheduler needs Dask: pip install "infermodel[dask]"') from None
    if address is None:
        cluster, client = start_local_cluster(workers, function.__module__)
    else:
        cluster = None
        why = None
        try:
            client = Client(address, timeout=30)
        except (OSError, TimeoutError, ValueError, AssertionError) as error:
            # ValueError: Dask could not read the address (no port, an unknown protocol);
            # AssertionError: the client's own event loop did not start within Dask's 10 s
            # (a loaded machine), which Dask asserts rather than reports
            why = str(error) or "the Dask client's event loop did not start"
        if why is not None:
            # The half-built client is collected now, outside the handler (whose traceback
            # held it): left to a later collection, its __del__ closes it inside whatever
            # runs then, and inside another client's start, which holds the lock of Dask's
            # loop runners that closing waits for, that is a hang.
            gc.collect()
            raise SimulationError(f"cannot reach the Dask scheduler at {address!r}: {why} "
                                  "(an address reads like 'tcp://host:8786')")
    try:
        futures = [client.submit(function, *task, pure=False) for task in tasks]
        index = {future.key: position for position, future in enumerate(futures)}
        results = [None] * total
        for done, future in enumerate(as_completed(futures), start=1):
            results[index[future.key]] = future.result()
            if progress is not None:
                progress(done, total)
        return results
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
