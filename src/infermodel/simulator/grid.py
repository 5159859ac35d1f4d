"""Running the runs of a grid one after another or on a Dask cluster.

Every run of a grid (policy × load × deployment × seed) is independent and
deterministic, so where it runs does not change its result: :func:`execute` returns
the same list, in the same order, with ``scheduler="serial"`` (this process) and with
``scheduler="dask"`` (a local cluster of one single-threaded worker process per core,
started for the call and closed after it, or the cluster at ``address``).

Dask is an optional dependency (``pip install "infermodel[dask]"``); the serial
scheduler needs nothing.  On a cluster every worker needs infermodel installed (the
same version), since each receives the run's inputs and calls the simulator.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from .errors import SimulationError

__all__ = ["SCHEDULERS", "execute"]

SCHEDULERS = ("serial", "dask")


def execute(function: Callable[..., Any], tasks: Sequence[tuple], scheduler: str = "serial",
            address: str | None = None, progress: Callable[[int, int], None] | None = None,
            workers: int | None = None) -> list[Any]:
    """``[function(*task) for task in tasks]``, serially or on Dask.

    :param scheduler: ``"serial"`` or ``"dask"``.
    :param address: a Dask scheduler address (``"tcp://host:8786"``); without it a
        local cluster is started with ``workers`` processes (default: the cores).
    :param progress: called as ``progress(done, total)`` as runs complete.
    """
    if scheduler not in SCHEDULERS:
        raise SimulationError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    total = len(tasks)
    if scheduler == "serial":
        results = []
        for task in tasks:
            results.append(function(*task))
            if progress is not None:
                progress(len(results), total)
        return results
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise SimulationError('the dask scheduler needs Dask: pip install "infermodel[dask]"') from None
    if address is None:
        try:
            cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                   processes=True, dashboard_address=None)
        except Exception as error:  # Dask reports a failed start in many exception types
            raise SimulationError(f"cannot start a local Dask cluster ({error}): run with "
                                  "--scheduler serial, or give the --address of a running "
                                  "cluster") from None
        client = Client(cluster)
    else:
        cluster = None
        try:
            client = Client(address, timeout=30)
        except (OSError, TimeoutError) as error:
            raise SimulationError(f"cannot reach the Dask scheduler at {address!r}: {error}") from None
    try:
        futures = [client.submit(function, *task, pure=False) for task in tasks]
        index = {future.key: position for position, future in enumerate(futures)}
        results: list[Any] = [None] * total
        done = 0
        for future in as_completed(futures):
            results[index[future.key]] = future.result()
            done += 1
            if progress is not None:
                progress(done, total)
        return results
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
