"""The arrival window: an open stream cut at a time or a request count, whichever first.

The Inference lab's "Many requests, one pass" lets requests arrive "for 60 seconds or
400 requests": a workload drawn with ``count`` requests keeps those that arrive within
``window`` seconds (:class:`~infermodel.simulator.WorkloadSpec` ``window``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .errors import SimulationError

if TYPE_CHECKING:
    from .workload import Workload

__all__ = ["first", "refuse_window", "within_window"]


def first(workload: Workload, count: int) -> Workload:
    """The first ``count`` requests of an open stream (a :class:`Workload`)."""
    if workload.session_starts is not None or workload.clients is not None:
        raise SimulationError("only an open arrival stream can be cut short")
    if count >= workload.count:
        return workload
    cut: dict[str, Any] = {
        name: None if getattr(workload, name) is None else getattr(workload, name)[:count]
        for name in ("arrivals", "prompts", "outputs", "prefixes", "prefix_tokens")}
    return attrs.evolve(workload, **cut)


def within_window(workload: Workload, window: float | None) -> Workload:
    """The requests of ``workload`` that arrive by ``window`` seconds (all without one)."""
    if window is None:
        return workload
    inside = int(np.searchsorted(workload.arrivals, window, side="right"))
    if inside == 0:
        raise SimulationError(
            f"no request arrives within the {window:g} s window: the first arrives at "
            f"{workload.arrivals[0]:.6g} s (raise the rate or the window)")
    return first(workload, inside)


def refuse_window(window: float | None, why: str) -> None:
    """Refuse a window where the load is not an open stream (``why`` says what it is)."""
    if window is not None:
        raise SimulationError(f"an arrival window cuts an open stream short; {why} (remove it)")
