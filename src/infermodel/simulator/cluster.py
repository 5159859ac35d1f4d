"""Deployments of several servers: replicas behind a router, and disaggregated
prefill and decode pools (xPyD).

**Replicas.** ``replicas`` identical servers, each with its own cache and scheduler
(the fast engine's :class:`~infermodel.simulator.engines.fast_continuous.ContinuousRun`), advance
together in time.  At each arrival every server is first brought up to that time, then
the router picks one:

``round_robin``
    servers in turn;
``least_outstanding``
    the server with the fewest requests sent to it and not yet finished (ties: the
    lowest index);
``prefix_affinity``
    requests sharing a prefix identifier (a trace's ``prefix`` column) go where the
    first of them went, so the prefix is cached in one place; others as
    ``least_outstanding``.

**Disaggregated pools.** ``prefill`` servers run only prompts (each request's first
token is produced there), then the request's cache — prompt × cache bytes per token —
crosses the interconnect (bytes / link bandwidth + link latency) to one of ``decode``
servers, which admits it with its prompt already cached and generates the rest.  No
decode server pushes back on a prefill server, so the prefill pool is simulated first
and its completions, plus the transfer, are the decode pool's arrivals (exactly).

The merged :class:`~infermodel.simulator.records.RunRecord` carries every request's
timestamps; a request's gaps across servers (the transfer) are counted as gaps.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from .cost import CostModel
from .engines.fast import RunTimes, continuous_state
from .engines.fast_continuous import ContinuousRun
from .errors import SimulationError
from .policies import Policy
from .records import (
    Blocks,
    Counters,
    GapHistogram,
    RunRecord,
    series_of,
    timeline_record,
    token_times,
)
from .rules import check_fits, default_iteration_limit
from .workload import Workload

__all__ = ["ROUTERS", "Deployment", "run_deployment"]

ROUTERS = ("round_robin", "least_outstanding", "prefix_affinity")


#: Servers of one simulated deployment (replicas, or prefill plus decode servers): each
#: keeps its own queue and cache, so the count is checked before any is built.
MAX_SERVERS = 1_024


def _count(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise SimulationError(f"{what} must be a whole number ≥ {minimum}, got {value!r}")
    if value > MAX_SERVERS:
        raise SimulationError(f"{what}: {int(value):,} is over the limit of {MAX_SERVERS:,} "
                              "servers for one simulated deployment; simulate one replica at "
                              "its share of the load instead")
    return int(value)


@attrs.frozen
class Deployment:
    """How many servers and how requests reach them.

    :param replicas: servers that each run whole requests (colocated), 1 by default.
    :param router: ``round_robin``, ``least_outstanding`` or ``prefix_affinity``.
    :param prefill: with ``decode``, a disaggregated deployment: servers for prompts…
    :param decode: …and servers for the rest of the output.
    :param link_bandwidth: bytes/s of the link a request's cache crosses (disaggregated).
    :param link_latency: seconds added to each transfer.
    """

    replicas: int = attrs.field(default=1, converter=lambda v: _count(v, "replicas"))
    router: str = attrs.field(default="round_robin")
    prefill: int = attrs.field(default=0, converter=lambda v: _count(v, "prefill servers", 0))
    decode: int = attrs.field(default=0, converter=lambda v: _count(v, "decode servers", 0))
    link_bandwidth: float = attrs.field(default=math.inf)
    link_latency: float = attrs.field(default=0.0)

    @router.validator
    def _router(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in ROUTERS:
            raise SimulationError(f"router must be one of {', '.join(ROUTERS)}, got {value!r}")

    def __attrs_post_init__(self) -> None:
        if (self.prefill == 0) != (self.decode == 0):
            raise SimulationError("a disaggregated deployment needs both prefill and decode "
                                  f"servers, got prefill={self.prefill}, decode={self.decode}")
        if self.prefill + self.decode > MAX_SERVERS:
            raise SimulationError(f"{self.prefill:,} prefill and {self.decode:,} decode servers "
                                  f"are over the limit of {MAX_SERVERS:,} servers for one "
                                  "simulated deployment")
        if self.disaggregated and self.replicas != 1:
            raise SimulationError("give either replicas or prefill/decode pools, not both")
        if not (isinstance(self.link_bandwidth, (int, float)) and self.link_bandwidth > 0):
            raise SimulationError(f"link bandwidth must be positive, got {self.link_bandwidth!r}")
        if not (isinstance(self.link_latency, (int, float)) and 0 <= self.link_latency < math.inf):
            raise SimulationError(f"link latency must be a non-negative time, got {self.link_latency!r}")

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    @property
    def single(self) -> bool:
        return self.replicas == 1 and not self.disaggregated

    @property
    def servers(self) -> int:
        return self.prefill + self.decode if self.disaggregated else self.replicas

    @property
    def label(self) -> str:
        if self.disaggregated:
            return f"{self.prefill}P{self.decode}D"
        return f"{self.replicas}x {self.router}" if self.replicas > 1 else "1 server"

    def transfer_time(self, prompt_tokens: np.ndarray, kv_bytes_per_token: float) -> np.ndarray:
        """Seconds to move a prompt's cache from a prefill to a decode server."""
        return np.asarray(prompt_tokens, dtype=np.float64) * kv_bytes_per_token / \
            self.link_bandwidth + self.link_latency


class _Routed:
    """One server's arrival source: the requests the router sent it, and the next
    arrival of the whole stream as a horizon its runs must stop at.
    """

    closed = False

    def __init__(self, horizon: Callable[[], float]):
        self.times: list[float] = []
        self.requests: list[int] = []
        self.next = 0
        self.horizon = horizon
        self.finishes: list[float] = []

    def send(self, request: int, when: float) -> None:
        self.times.append(when)
        self.requests.append(request)

    def due(self, now: float) -> list[int]:
        start = self.next
        while self.next < len(self.times) and self.times[self.next] <= now:
            self.next += 1
        return self.requests[start:self.next]

    def next_time(self) -> float:
        pending = self.times[self.next] if self.next < len(self.times) else math.inf
        return min(pending, self.horizon())

    def finished(self, request: int, now: float) -> None:
        bisect.insort(self.finishes, now)

    def outstanding(self, at: float) -> int:
        return len(self.times) - bisect.bisect_right(self.finishes, at)


def _serve(workload: Workload, cost: CostModel, policy: Policy, arrivals: Sequence[float],
           order: Sequence[int], prefixes: Sequence[str] | None, router: str, servers: int,
           limit: int, run_times: RunTimes, prefilled: list[int] | None = None,
           series: bool = False) -> list[ContinuousRun]:
    """Route ``order`` (request indices, by ``arrivals``) to ``servers`` servers and run
    them together; returns the servers' states.
    """
    stream = iter(order)
    upcoming = [next(stream, None)]

    def horizon() -> float:
        return arrivals[upcoming[0]] if upcoming[0] is not None else math.inf

    sources = [_Routed(horizon) for _ in range(servers)]
    states = [continuous_state(workload, cost, policy, limit, source, run_times, series)
              for source in sources]
    if prefilled is not None:
        for state in states:
            state.fil = list(prefilled)  # the prompt arrives already cached
            state.gen = [1] * workload.count
            state.prefix = None  # nothing is prefilled here: no prefix cache
    affinity: dict[str, int] = {}
    turn = 0
    while upcoming[0] is not None:
        request = upcoming[0]
        when = arrivals[request]
        for state, source in zip(states, sources):
            while state.now < when and (state.has_work() or source.next < len(source.times)):
                state.turn()
        if router == "round_robin":
            chosen = turn % servers
            turn += 1
        else:
            loads = [source.outstanding(when) for source in sources]
            chosen = loads.index(min(loads))
            key = prefixes[request] if prefixes is not None else ""
            if router == "prefix_affinity" and key:
                chosen = affinity.setdefault(key, chosen)
        sources[chosen].send(request, when)
        upcoming[0] = next(stream, None)
    for state, source in zip(states, sources):
        while state.has_work() or source.next < len(source.times):
            state.turn()
    return states


def _merge(workload: Workload, policy: Policy, states: Sequence[ContinuousRun],
           arrivals: np.ndarray) -> RunRecord:
    """One record from several servers' blocks and token segments."""
    parts: list[list[np.ndarray]] = [[], [], [], [], []]
    requests: list[np.ndarray] = []
    firsts: list[np.ndarray] = []
    lasts: list[np.ndarray] = []
    gaps = GapHistogram()
    offset = 0
    totals: Counters = {"end": 0.0, "preemptions": 0, "rollbacks": 0, "recomputed": 0, "swapped": 0,
              "iterations": 0, "busy": 0, "decode_steps": 0, "prefix_evicted": 0}
    evicted = np.zeros(workload.count, dtype=np.int64)
    undone = np.zeros(workload.count, dtype=np.int64)
    hits = np.zeros(workload.count, dtype=np.int64)
    admitted = np.full(workload.count, np.nan)
    cached = False
    for state in states:
        blocks, (request, first, last), counters = state.result()
        for part, column in zip(parts, blocks[:5]):
            part.append(column + offset if part is parts[0] else column)
        gaps.merge(blocks.gaps)
        requests.append(request)
        firsts.append(first + offset)
        lasts.append(last + offset)
        offset += counters["iterations"]
        totals["end"] = max(totals["end"], counters["end"])
        for key in ("preemptions", "rollbacks", "recomputed", "swapped", "iterations", "busy",
                    "decode_steps"):
            totals[key] += counters[key]
        admitted = np.fmin(admitted, counters["admitted"])  # the first server to admit it
        evicted += counters["request_preemptions"]
        undone += counters["request_rollbacks"]
        if counters["prefix_hits"] is not None:  # a request is admitted first on one server
            hits += counters["prefix_hits"]
            cached = True
        totals["prefix_evicted"] += counters["prefix_evicted"]
    totals["request_preemptions"], totals["request_rollbacks"] = evicted, undone
    totals["admitted"] = admitted
    totals["prefix_hits"] = hits if cached else None
    segments = (np.concatenate(requests), np.concatenate(firsts), np.concatenate(lasts))
    start, first_end, last_end, entry, inner = (np.concatenate(part) for part in parts)
    blocks = Blocks(start, first_end, last_end, entry, inner, gaps)
    return timeline_record(workload, policy, token_times(workload.count, blocks, segments),
                           totals, arrivals)


def _labelled_series(groups: Sequence[tuple[str, Sequence[ContinuousRun]]],
                     cost: CostModel) -> dict[str, np.ndarray] | None:
    """Every server's time series, one after another, with its label in ``server``."""
    parts = [(f"{pool} {i}", series)
             for pool, states in groups for i, state in enumerate(states)
             if (series := series_of(state.series, cost)) is not None]
    if not parts:
        return None
    joined = {key: np.concatenate([part[key] for _, part in parts])
              for key in ("time", "waiting", "running", "cache_use")}
    joined["server"] = np.concatenate([np.full(part["time"].size, label) for label, part in parts])
    return joined


def run_deployment(workload: Workload, cost: CostModel, policy: Policy, deployment: Deployment,
                   max_iterations: int | None = None, series: bool = False) -> RunRecord:
    """Simulate ``workload`` on a deployment of several servers (fast engine); with
    ``series``, each server's time series, labelled ``replica i``, ``prefill i`` or
    ``decode i``.
    """
    if policy.kind == "static":
        raise SimulationError("replicas and disaggregated pools need a continuous policy "
                              "(reserve, paged or chunked)")
    if workload.clients is not None or workload.session_starts is not None:
        raise SimulationError("replicas and disaggregated pools take open arrivals (rates or a "
                              "trace), not a closed loop or multi-turn sessions")
    check_fits(workload, cost, policy)
    limit = default_iteration_limit(workload) if max_iterations is None else int(max_iterations)
    arrivals = workload.arrivals.tolist()
    order = range(workload.count)
    run_times = RunTimes(cost)
    if not deployment.disaggregated:
        states = _serve(workload, cost, policy, arrivals, order, workload.prefixes,
                        deployment.router, deployment.replicas, limit, run_times, series=series)
        record = _merge(workload, policy, states, workload.arrivals)
        record.slots *= deployment.replicas
        record.series = _labelled_series([("replica", states)], cost)
        return record
    # Prefill pool: every request ends with its first token.
    first_only = attrs.evolve(workload, outputs=np.ones(workload.count, dtype=np.int64))
    prefill = _serve(first_only, cost, policy, arrivals, order, workload.prefixes,
                     deployment.router, deployment.prefill, limit, run_times, series=series)
    first_record = _merge(first_only, policy, prefill, workload.arrivals)
    ready = first_record.first_token + deployment.transfer_time(workload.prompts,
                                                               cost.kv_bytes_per_token)
    rest = workload.outputs > 1
    later = np.flatnonzero(rest)
    decode_order = later[np.argsort(ready[later], kind="stable")].tolist()
    decode = _serve(workload, cost, policy, ready.tolist(), decode_order, workload.prefixes,
                    deployment.router, deployment.decode, limit, run_times,
                    prefilled=workload.prompts.tolist(), series=series)
    record = _merge(workload, policy, [*prefill, *decode], workload.arrivals)
    record.slots *= deployment.decode
    record.transfer = ready - first_record.first_token
    record.series = _labelled_series([("prefill", prefill), ("decode", decode)], cost)
    return record
