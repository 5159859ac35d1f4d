"""The event-skipping engine: the reference engine's rules, advanced in vectorised runs.

Between two events (an arrival that could be admitted, a prefill that completes, a
request that finishes, a cache overflow, the end of a steady chunked prefill) every
iteration has the same composition: the same decoding requests, each one position
longer than in the previous iteration, and at most one prompt being prefilled by a
fixed chunk.  The three counts that price an iteration (positions, attention pairs,
cached positions) are then arithmetic progressions, so the whole run's iteration times
come from one vectorised call of :meth:`CostModel.iteration_times`, and their end times
from one ``cumsum`` that adds them in the same order as the reference's ``now += dt``.

Decoding requests are not touched during a run: each keeps the values it had at a base
iteration and its current values follow from the global iteration counter.  Token
timestamps are never stored per token: a request's tokens are recorded as segments of
consecutive iterations, and the gaps, their multiplicities and each request's largest
gap are computed once at the end from the global timeline of iteration end times.

The result (a :class:`~infermodel.simulator.metrics.RunRecord`) carries the same
timestamps, iteration count and counters as the reference engine's.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from .continuous import ContinuousRun, too_many
from .cost import CostModel
from .errors import SimulationError
from .load import source_for
from .metrics import RunRecord
from .policies import Policy
from .reference import check_fits, default_iteration_limit, reservation_tokens
from .workload import Workload

__all__ = ["run_fast"]


def run_fast(
    workload: Workload, cost: CostModel, policy: Policy, max_iterations: int | None = None,
    series: bool = False,
) -> RunRecord:
    """Simulate ``workload`` under ``policy`` with the event-skipping engine."""
    check_fits(workload, cost, policy)
    limit = default_iteration_limit(workload) if max_iterations is None else int(max_iterations)
    source = source_for(workload)
    if policy.kind == "static":
        if source.closed:
            raise SimulationError("closed-loop and multi-turn load need a continuous policy (reserve, paged or "
                                  "chunked) in the fast engine; use engine=\"reference\" for static")
        timeline, segments, counters = _static(workload, cost, policy, limit, series)
    else:
        state = ContinuousRun(workload, cost, policy, limit, source, _RunTimes(cost), series)
        state.run()
        timeline, segments, counters = state.result()
        if workload.session_starts is not None:  # prompts grew with each session's history
            workload = attrs.evolve(workload, prompts=np.array(state.prompts, dtype=np.int64))
    record = _record(workload, policy, timeline, segments, counters, source.arrivals())
    record.series = _series(counters.get("series"), cost)
    return record


class _RunTimes:
    """End times of a run of iterations whose counts grow linearly.

    Iteration ``j`` has ``positions`` positions, ``attention + j·step_attention``
    attention pairs and ``cached + j·step_cached`` cached positions.  The arithmetic is
    :meth:`CostModel.iteration_times` operation for operation (so every time is the
    same float), done in place in one buffer, and the end times are accumulated from
    ``now`` in iteration order as the reference's ``now += dt`` does.
    """

    def __init__(self, cost: CostModel):
        self.cost = cost
        self.simple = cost.simple
        self.weight_bytes = cost.weight_bytes
        self.kv = cost.kv_bytes_per_token
        self.bandwidth = cost.bandwidth
        self.compute = cost.compute
        self.per_position = cost.flops_per_position
        self.per_pair = cost.flops_per_attention_pair
        self.overhead = cost.overhead
        self.steps = np.arange(4096, dtype=np.float64)

    def _memory_time(self, cached: float) -> float:
        return (self.weight_bytes + self.kv * cached) / self.bandwidth

    def _compute_time(self, positions: float, attention: float) -> float:
        return (self.per_position * positions + self.per_pair * attention) / self.compute

    def __call__(self, now, length, positions, attention, step_attention, cached, step_cached,
                 sequences=None):
        if length > self.steps.size:
            self.steps = np.arange(max(length, 2 * self.steps.size), dtype=np.float64)
        steps = self.steps[:length]
        times = np.empty(length + 1)
        times[0] = now
        body = times[1:]
        if not self.simple:
            # Stages, communication, a host-resident cache share or expert coverage: the
            # cost model's own vectorised form (positions and sequences are constant).
            body[:] = self.cost.iteration_times(
                np.full(length, float(positions)), steps * float(step_attention) + attention,
                steps * float(step_cached) + cached, sequences)
            np.cumsum(times, out=times)
            return body
        # Both times are affine in j.  When one exceeds the other at both ends by far
        # more than rounding can move them, it is the maximum throughout, and the other
        # need not be computed (the values are the same floats either way).
        last = length - 1
        memory_first = self._memory_time(cached)
        memory_last = self._memory_time(cached + last * step_cached)
        compute_first = self._compute_time(positions, attention)
        compute_last = self._compute_time(positions, attention + last * step_attention)
        margin = 1e-9
        if memory_first > compute_first * (1 + margin) and memory_last > compute_last * (1 + margin):
            np.multiply(steps, float(step_cached), out=body)
            body += cached
            body *= self.kv
            body += self.weight_bytes
            body /= self.bandwidth
        elif compute_first > memory_first * (1 + margin) and compute_last > memory_last * (1 + margin):
            np.multiply(steps, float(step_attention), out=body)
            body += attention
            body *= self.per_pair
            body += np.float64(self.per_position) * np.float64(positions)
            body /= self.compute
        else:
            memory_time = steps * float(step_cached)
            memory_time += cached
            memory_time *= self.kv
            memory_time += self.weight_bytes
            memory_time /= self.bandwidth
            np.multiply(steps, float(step_attention), out=body)
            body += attention
            body *= self.per_pair
            body += np.float64(self.per_position) * np.float64(positions)
            body /= self.compute
            np.maximum(memory_time, body, out=body)
        if self.overhead:
            body += self.overhead
        np.cumsum(times, out=times)
        return body


# ---------------------------------------------------------------------------- static
def _static(workload: Workload, cost: CostModel, policy: Policy, limit: int, series: bool = False):
    arrivals = workload.arrivals.tolist()
    prompts = workload.prompts
    outputs = workload.outputs
    count = len(arrivals)
    kv = cost.kv_bytes_per_token
    admit_limit = cost.cache_memory * policy.admit_fraction
    reserve_out = reservation_tokens(workload, policy)
    batch_size = policy.batch_size
    run_ends = _RunTimes(cost)

    times: list[np.ndarray] = []
    seg_request: list[np.ndarray] = []
    seg_first: list[np.ndarray] = []
    seg_last: list[np.ndarray] = []
    iterations = 0
    busy = 0
    decode_steps = 0
    now = 0.0
    head = 0  # first waiting request; requests head..arrived-1 wait in FIFO order
    arrived = 0
    points: list[tuple[float, int, int, int]] | None = [] if series else None
    while head < count:
        while arrived < count and arrivals[arrived] <= now:
            arrived += 1
        if head == arrived:
            now = arrivals[arrived]
            continue
        waiting = arrived - head
        dispatch_at = arrivals[head] + policy.timeout
        if waiting < batch_size and now < dispatch_at:
            now = min(dispatch_at, arrivals[arrived] if arrived < count else math.inf)
            continue
        size = min(batch_size, waiting)
        if policy.static_memory_check:
            need = np.cumsum(prompts[head : head + size] + reserve_out)
            size = int(np.count_nonzero(need * kv <= admit_limit))
        batch = slice(head, head + size)
        head += size
        if points is not None:
            points.append((now, arrived - head, size, 0))
        batch_prompts = prompts[batch]
        batch_outputs = outputs[batch]
        # Prefill: every prompt is a chunk with nothing cached.
        positions = int(batch_prompts.sum())
        attention = int((batch_prompts * (batch_prompts + 1) // 2).sum())
        now += cost.time_from_counts(positions, attention, 0, size)
        prefill_index = iterations
        iterations += 1
        longest = int(batch_outputs.max())
        if longest > 1:
            # Every slot decodes until the longest output is done; finished slots keep
            # their cache and keep growing.
            steps = longest - 1
            context = int(batch_prompts.sum())
            ends = run_ends(now, steps, size, context, size, context, size, size)
            times.append(np.array([now]))
            times.append(ends)
            now = float(ends[-1])
            iterations += steps
            decode_steps += steps
            busy += int((batch_outputs - 1).sum())
        else:
            times.append(np.array([now]))
        if points is not None:
            final = int(prompts[batch].sum()) + size * (longest - 1)
            points.append((now, arrived - head, size, final))
        if iterations > limit:
            raise too_many(limit, head - size, count, 0)
        seg_request.append(np.arange(batch.start, batch.stop))
        seg_first.append(np.full(size, prefill_index))
        seg_last.append(prefill_index + batch_outputs - 1)
    segments = (
        np.concatenate(seg_request),
        np.concatenate(seg_first),
        np.concatenate(seg_last),
    )
    counters = {"end": now, "preemptions": 0, "rollbacks": 0, "recomputed": 0,
                "iterations": iterations, "busy": busy, "decode_steps": decode_steps,
                "series": points}
    return np.concatenate(times), segments, counters


# ---------------------------------------------------------------------------- results
def _series(points, cost: CostModel) -> dict[str, np.ndarray] | None:
    """The time series of a run: at every scheduling decision, the requests waiting,
    the requests running and the share of the cache in use."""
    if points is None:
        return None
    data = np.array(points, dtype=np.float64).reshape(-1, 4)
    return {"time": data[:, 0], "waiting": data[:, 1], "running": data[:, 2],
            "cache_use": data[:, 3] * cost.kv_bytes_per_token / cost.cache_memory}


def _record(workload: Workload, policy: Policy, timeline: np.ndarray, segments, counters,
            arrivals: np.ndarray) -> RunRecord:
    """Per-request timestamps and pooled gaps from the timeline and token segments.

    A segment ``(r, s, e)`` says request ``r`` received a token at the end of every
    iteration from ``s`` to ``e``.  Its gaps are the timeline's differences
    ``T[i] − T[i−1]`` for ``s < i ≤ e``; between two segments of a request the gap
    is ``T[s'] − T[e]``.
    """
    count = workload.count
    request, first, last = segments
    order = np.lexsort((first, request))
    request, first, last = request[order], first[order], last[order]
    first_token = np.empty(count)
    last_token = np.empty(count)
    # the first segment of each request holds its first token, the last its last
    starts = np.flatnonzero(np.r_[True, request[1:] != request[:-1]])
    ends = np.r_[starts[1:] - 1, request.size - 1]
    first_token[request[starts]] = timeline[first[starts]]
    last_token[request[ends]] = timeline[last[ends]]

    total = timeline.size
    same = request[1:] == request[:-1]
    between = timeline[first[1:][same]] - timeline[last[:-1][same]]
    gap_values = np.empty(max(total - 1, 0) + between.size)
    differences = gap_values[: max(total - 1, 0)]
    np.subtract(timeline[1:], timeline[:-1], out=differences)
    gap_values[differences.size :] = between
    # Multiplicity of T[i] − T[i−1] (i = 1 … total−1): the segments holding both
    # iterations i−1 and i, i.e. with first + 1 ≤ i ≤ last.  It is piecewise constant
    # between the segments' ends, so it is built with one repeat; the gaps between
    # segments follow with multiplicity 1.
    spans = last > first
    events = np.concatenate((first[spans] + 1, last[spans] + 1))
    change = np.concatenate((np.ones(int(spans.sum()), np.int32), -np.ones(int(spans.sum()), np.int32)))
    order = np.argsort(events, kind="stable")
    events = events[order]
    level = np.cumsum(change[order], dtype=np.int32)
    final_at_position = np.r_[events[1:] != events[:-1], True] if events.size else np.empty(0, bool)
    boundaries = np.clip(np.r_[0, events[final_at_position], total], 1, max(total, 1))
    levels = np.r_[np.int32(0), level[final_at_position], np.int32(1)]
    lengths = np.r_[np.diff(boundaries), between.size]
    gap_weights = np.repeat(levels, lengths)

    max_gap = np.zeros(count)
    if spans.any():
        # max of differences[s:e] for each segment, with e = last; reduceat needs every
        # bound inside the array, so a segment ending at the very last iteration takes
        # its final difference separately.
        final = differences.size
        starts_, stops_ = first[spans], last[spans]
        at_end = stops_ == final
        bounds = np.empty(2 * starts_.size, dtype=np.int64)
        bounds[0::2] = starts_
        bounds[1::2] = np.minimum(stops_, final - 1)
        within = np.maximum.reduceat(differences, bounds)[0::2]
        within[at_end] = np.maximum(within[at_end], differences[final - 1])
        np.maximum.at(max_gap, request[spans], within)
    if between.size:
        np.maximum.at(max_gap, request[1:][same], between)

    return RunRecord(
        arrivals=arrivals,
        outputs=workload.outputs,
        prompts=workload.prompts,
        first_token=first_token,
        last_token=last_token,
        max_gap=max_gap,
        gap_values=gap_values,
        gap_weights=gap_weights,
        end_time=float(counters["end"]),
        preemptions=int(counters["preemptions"]),
        rollbacks=int(counters["rollbacks"]),
        request_preemptions=counters.get("request_preemptions"),
        request_rollbacks=counters.get("request_rollbacks"),
        timeline=timeline,
        closed=workload.clients is not None,
        recomputed_tokens=int(counters["recomputed"]),
        swapped_tokens=int(counters.get("swapped", 0)),
        iterations=int(counters["iterations"]),
        busy_slot_steps=int(counters["busy"]),
        decode_steps=int(counters["decode_steps"]),
        slots=policy.batch_size if policy.kind == "static" else policy.max_running,
    )
