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
iteration and its current values follow from the global iteration counter.  Neither
token timestamps nor iteration end times are stored: a request's tokens are recorded
as segments of consecutive iterations that begin and end on block boundaries (a block
is one run of iterations), the gaps inside a block are counted into a
:class:`~infermodel.simulator.records.GapHistogram` as the block is run, and each
block keeps five numbers from which the rest (first and last tokens, the gaps into
blocks and between segments, each request's largest gap) is computed at the end.

The result (a :class:`~infermodel.simulator.records.RunRecord`) carries the same
timestamps, iteration count and counters as the reference engine's.  This module holds
the engine's entry point, its vectorised pricing (:class:`RunTimes`) and its static
policy; its continuous policies are :mod:`~.fast_continuous`'s state, or
:mod:`~.fast_speculative`'s when the cost model speculates.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from ..cost import CostModel
from ..errors import SimulationError
from ..load import Source, source_for
from ..policies import Policy
from ..records import (
    Counters,
    Point,
    RunRecord,
    TokenTimes,
    series_of,
    timeline_record,
    token_times,
)
from ..rules import check_fits, default_iteration_limit, out_of_iterations, reservation_tokens
from ..speculation import Acceptance
from ..workload import Workload
from .fast_continuous import ContinuousRun
from .fast_speculative import SpeculativeRun, static_batch

__all__ = ["RunTimes", "continuous_state", "run_fast"]


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
        tokens, counters = _static(workload, cost, policy, limit, series)
    else:
        state = continuous_state(workload, cost, policy, limit, source, RunTimes(cost), series)
        state.run()
        blocks, segments, counters = state.result()
        if workload.session_starts is not None:  # prompts grew with each session's history
            workload = attrs.evolve(workload, prompts=np.array(state.prompts, dtype=np.int64))
        del state  # its per-request lists go before the per-block arrays are combined
        tokens = token_times(workload.count, blocks, segments)
        del blocks, segments
    record = timeline_record(workload, policy, tokens, counters, source.arrivals())
    record.series = series_of(counters.get("series"), cost)
    return record


def continuous_state(workload: Workload, cost: CostModel, policy: Policy, limit: int,
                     source: Source, run_times: RunTimes, series: bool = False) -> ContinuousRun:
    """The fast engine's state for a continuous policy: speculative when ``cost`` has it."""
    if cost.speculation is None:
        return ContinuousRun(workload, cost, policy, limit, source, run_times, series)
    return SpeculativeRun(cost.speculation, workload, cost, policy, limit, source, run_times, series)


class RunTimes:
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

    def __call__(self, now: float, length: int, positions: int, attention: int,
                 step_attention: int, cached: int, step_cached: int,
                 sequences: int | None = None, decodes: int | None = None) -> np.ndarray:
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
                steps * float(step_cached) + cached, sequences, None, decodes)
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
def _static(workload: Workload, cost: CostModel, policy: Policy, limit: int,
            series: bool = False) -> tuple[TokenTimes, Counters]:
    arrivals = workload.arrivals.tolist()
    prompts = workload.prompts
    outputs = workload.outputs
    count = len(arrivals)
    kv = cost.kv_bytes_per_token
    admit_limit = cost.cache_memory * policy.admit_fraction
    reserve_out = reservation_tokens(workload, policy)
    batch_size = policy.batch_size
    run_ends = RunTimes(cost)
    tokens = TokenTimes(count)
    acceptance = None if cost.speculation is None else Acceptance(cost.speculation, workload.seed,
                                                                  outputs.tolist())
    iterations = busy = decode_steps = 0
    now = 0.0
    head = 0  # first waiting request; requests head..arrived-1 wait in FIFO order
    arrived = 0
    points: list[Point] | None = [] if series else None
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
        tokens.admitted[batch] = now  # dispatched: the batch's prefill starts now
        head += size
        if points is not None:
            points.append((now, arrived - head, size, 0))
        batch_prompts = prompts[batch]
        batch_outputs = outputs[batch]
        # Prefill: every prompt is a chunk with nothing cached.
        positions = int(batch_prompts.sum())
        attention = int((batch_prompts * (batch_prompts + 1) // 2).sum())
        now += cost.time_from_counts(positions, attention, 0, size, None, 0)
        prefill_end = now
        iterations += 1
        longest = int(batch_outputs.max())
        ends = np.empty(0)
        if acceptance is not None:
            now, steps, slot_steps, final = static_batch(cost, acceptance, batch, batch_prompts,
                                                         batch_outputs, tokens, prefill_end)
            iterations += steps
            decode_steps += steps
            busy += slot_steps
            if points is not None:
                points.append((now, arrived - head, size, final))
        elif longest > 1:
            # Every slot decodes until the longest output is done; finished slots keep
            # their cache and keep growing.
            steps = longest - 1
            context = int(batch_prompts.sum())
            ends = run_ends(now, steps, size, context, size, context, size, size, size)
            now = float(ends[-1])
            iterations += steps
            decode_steps += steps
            busy += int((batch_outputs - 1).sum())
        if acceptance is None:
            tokens.batch(batch, batch_outputs, prefill_end, ends)
        if points is not None and acceptance is None:
            final = int(prompts[batch].sum()) + size * (longest - 1)
            points.append((now, arrived - head, size, final))
        if iterations > limit:
            raise out_of_iterations(limit, head - size, count, 0)
    counters = {"end": now, "preemptions": 0, "rollbacks": 0, "recomputed": 0,
                "iterations": iterations, "busy": busy, "decode_steps": decode_steps,
                "series": points}
    return tokens, counters
