"""Ledger predictions spread over worker processes (``validate --ledger ... --jobs N``):
each deployment's rows (its structure) in one worker, the numbers those of one process.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .ledger import LedgerRow
from .predictions import Prediction, Validation, predict_rows, structure_key

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["predict", "predict_in_processes"]


def predict(rows: Sequence[LedgerRow], *, jobs: int = 1, progress=None,
            **options: Any) -> Validation:
    """:func:`.predictions.predict_rows` (``options`` are its keywords but ``host``), with
    ``jobs`` > 1 the rows of each deployment in one of that many worker processes (the
    numbers are the same: each row's prediction depends on its deployment only).
    """
    if jobs > 1 and len(rows) > 1:
        options.pop("host", None)
        return predict_in_processes(rows, jobs, progress, **options)
    return predict_rows(rows, progress=progress, **options)


@functools.cache
def _worker_host() -> PluginHost:
    """A worker process's plugin host: the entry-point group's plugins, loaded once."""
    from ..host import PluginHost

    return PluginHost()


def _predict_group(rows: Sequence[LedgerRow], options: Mapping[str, Any]) -> list[Prediction]:
    """One worker's share (:func:`predict_in_processes`): the plugins loaded once per
    worker process (from the entry-point group), every structure it builds kept for its
    next groups, its simulations run in the worker itself.
    """
    return list(predict_rows(rows, host=_worker_host(), workers=1, **options).points)


def predict_in_processes(rows: Sequence[LedgerRow], jobs: int, progress,
                         **options: Any) -> Validation:
    """:func:`.predictions.predict_rows` with each deployment's rows (its structure) in one
    of ``jobs`` worker processes, the largest groups first; the points come back in
    ``rows`` order.
    """
    import concurrent.futures
    import multiprocessing

    groups: dict[tuple, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(structure_key(row, options.get("kernels")), []).append(index)
    order = sorted(groups.values(), key=len, reverse=True)
    points: list[Prediction | None] = [None] * len(rows)
    # Fresh workers (not forked): a forked child could inherit a lock held by a thread of
    # this process (the table reader's pool, say).
    context = multiprocessing.get_context(
        "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(_predict_group, [rows[i] for i in members], options): members
                   for members in order}
        for future in concurrent.futures.as_completed(futures):
            members = futures[future]
            for index, point in zip(members, future.result()):
                points[index] = point
            if progress is not None:
                progress.update(len(members))
    assert all(p is not None for p in points)
    return Validation(tuple(p for p in points if p is not None))
