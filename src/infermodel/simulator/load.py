"""Where requests come from during a run: an open stream of fixed arrival times, or a
closed loop of clients that each send their next request when the last one ends.

Both engines ask a source the same three things: which requests have arrived by
``now`` (:meth:`due`), when the next one arrives (:meth:`next_time`, ∞ when none is
known yet), and they tell it when a request finishes (:meth:`finished`).  Requests are
numbered in arrival order, so request ``i`` always takes the ``i``-th drawn prompt and
output length, whatever the load shape.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .errors import SimulationError

if TYPE_CHECKING:
    from .prefixes import PrefixCache
    from .workload import Workload

__all__ = ["ClosedLoop", "OpenArrivals", "Sessions", "Source", "source_for"]


class Source(Protocol):
    """What an engine asks of where its requests come from (see the module text)."""

    closed: bool

    def due(self, now: float) -> Sequence[int]:
        """The requests that have arrived by ``now`` and were not returned before."""
        ...

    def next_time(self) -> float:
        """When the next request arrives (∞ when none is known yet)."""
        ...

    def finished(self, request: int, now: float) -> None:
        """``request`` received its last token at ``now``."""
        ...


class OpenArrivals:
    """Arrival times fixed in advance (Poisson, gamma, a replayed trace)."""

    closed = False

    def __init__(self, arrivals: np.ndarray):
        self.times = arrivals.tolist()
        self.count = len(self.times)
        self.next = 0

    def due(self, now: float) -> range | tuple[()]:
        start = self.next
        times, count = self.times, self.count
        if start >= count or times[start] > now:
            return ()
        stop = start
        while stop < count and times[stop] <= now:
            stop += 1
        self.next = stop
        return range(start, stop)

    def next_time(self) -> float:
        return self.times[self.next] if self.next < self.count else math.inf

    def finished(self, request: int, now: float) -> None:
        """Open arrivals do not depend on completions."""

    def arrivals(self) -> np.ndarray:
        return np.asarray(self.times, dtype=np.float64)


class ClosedLoop:
    """``clients`` users, each sending a request at time 0 and its next one ``think``
    seconds after the previous one's last token, until ``count`` requests are sent.
    """

    closed = True

    def __init__(self, count: int, clients: int, think: float):
        self.count = count
        self.think = float(think)
        self.times = [math.nan] * count
        self.pending: list[tuple[float, int]] = []  # (submission time, order of submission)
        self.submitted = 0
        self.assigned = 0
        for order in range(min(clients, count)):
            self._submit(0.0, order)

    def _submit(self, when: float, order: int) -> None:
        heapq.heappush(self.pending, (when, order))
        self.submitted += 1

    def due(self, now: float) -> list[int]:
        arrived = []
        while self.pending and self.pending[0][0] <= now:
            when, _ = heapq.heappop(self.pending)
            self.times[self.assigned] = when
            arrived.append(self.assigned)
            self.assigned += 1
        return arrived

    def next_time(self) -> float:
        return self.pending[0][0] if self.pending else math.inf

    def finished(self, request: int, now: float) -> None:
        if self.submitted < self.count:
            self._submit(now + self.think, self.submitted)

    def arrivals(self) -> np.ndarray:
        times = np.asarray(self.times, dtype=np.float64)
        if np.isnan(times).any():
            raise SimulationError("closed-loop run ended before every request was sent")
        return times


class Sessions:
    """Multi-turn sessions: each session starts at its own arrival time and sends
    ``turns`` requests, each ``think`` seconds after the previous one's last token.
    Turn k's prompt is the session's history (every earlier prompt and output) plus a
    new message (the drawn prompt length); with ``reuse`` the history is the start of
    the session's prefix chain, which the server's prefix cache finds as far as it
    still holds it (:mod:`infermodel.simulator.prefixes`), so only the rest is
    prefilled.
    """

    closed = True

    def __init__(self, starts: np.ndarray, turns: int, think: float, reuse: bool):
        self.count = len(starts) * turns
        self.turns, self.think, self.reuse = turns, float(think), reuse
        self.times = [math.nan] * self.count
        self.pending: list[tuple[float, int, int]] = []  # (time, order, session)
        self.order = 0
        for session, start in enumerate(starts.tolist()):
            self._submit(start, session)
        self.assigned = 0
        self.history = [0] * len(starts)
        self.sent = [0] * len(starts)
        self.session_of = [0] * self.count
        self.prompts: list[int] = []
        self.outputs: list[int] = []
        self.prefix: PrefixCache | None = None

    def attach(self, prompts: list[int], cached: list[int], outputs: list[int],
               prefix: PrefixCache | None = None) -> None:
        """The engine's prompt lengths (set as turns arrive), output lengths (a turn's
        output joins the session's history) and prefix cache (None: the history is
        prefilled again).  ``cached`` is the engine's cached positions (unused).
        """
        self.prompts, self.outputs, self.prefix = prompts, outputs, prefix

    def _submit(self, when: float, session: int) -> None:
        heapq.heappush(self.pending, (when, self.order, session))
        self.order += 1

    def due(self, now: float) -> list[int]:
        arrived = []
        while self.pending and self.pending[0][0] <= now:
            when, _, session = heapq.heappop(self.pending)
            request = self.assigned
            self.assigned += 1
            self.times[request] = when
            self.session_of[request] = session
            message = self.prompts[request]
            self.prompts[request] = self.history[session] + message
            if self.reuse and self.prefix is not None:
                self.prefix.set_session(request, session, self.history[session])
            self.sent[session] += 1
            arrived.append(request)
        return arrived

    def next_time(self) -> float:
        return self.pending[0][0] if self.pending else math.inf

    def finished(self, request: int, now: float) -> None:
        session = self.session_of[request]
        self.history[session] = self.prompts[request] + self.outputs[request]
        if self.sent[session] < self.turns:
            self._submit(now + self.think, session)

    def arrivals(self) -> np.ndarray:
        times = np.asarray(self.times, dtype=np.float64)
        if np.isnan(times).any():
            raise SimulationError("multi-turn run ended before every turn was sent")
        return times


def source_for(workload: Workload) -> OpenArrivals | ClosedLoop | Sessions:
    """The arrival source of a drawn workload (closed loop when it names clients,
    sessions when it has session start times).
    """
    if workload.session_starts is not None:
        return Sessions(workload.session_starts, workload.turns, workload.think_time,
                        workload.reuse_history)
    if workload.clients is None:
        return OpenArrivals(workload.arrivals)
    return ClosedLoop(workload.count, workload.clients, workload.think_time)
