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
:class:`~infermodel.simulator.metrics.GapHistogram` as the block is run, and each
block keeps five numbers from which the rest (first and last tokens, the gaps into
blocks and between segments, each request's largest gap) is computed at the end.

The result (a :class:`~infermodel.simulator.metrics.RunRecord`) carries the same
timestamps, iteration count and counters as the reference engine's.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from .continuous import Blocks, too_many
from .cost import CostModel
from .errors import SimulationError
from .load import source_for
from .metrics import GapHistogram, RunRecord
from .policies import Policy
from .reference import check_fits, default_iteration_limit, reservation_tokens
from .speculation import Acceptance
from .speculative_run import continuous_state, static_batch
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
        tokens, counters = _static(workload, cost, policy, limit, series)
    else:
        state = continuous_state(workload, cost, policy, limit, source, _RunTimes(cost), series)
        state.run()
        blocks, segments, counters = state.result()
        if workload.session_starts is not None:  # prompts grew with each session's history
            workload = attrs.evolve(workload, prompts=np.array(state.prompts, dtype=np.int64))
        del state  # its per-request lists go before the per-block arrays are combined
        tokens = _tokens(workload.count, blocks, segments)
        del blocks, segments
    record = _record(workload, policy, tokens, counters, source.arrivals())
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
    tokens = _Tokens(count)
    acceptance = None if cost.speculation is None else Acceptance(cost.speculation, workload.seed,
                                                                  outputs.tolist())
    iterations = busy = decode_steps = 0
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
        tokens.admitted[batch] = now  # dispatched: the batch's prefill starts now
        head += size
        if points is not None:
            points.append((now, arrived - head, size, 0))
        batch_prompts = prompts[batch]
        batch_outputs = outputs[batch]
        # Prefill: every prompt is a chunk with nothing cached.
        positions = int(batch_prompts.sum())
        attention = int((batch_prompts * (batch_prompts + 1) // 2).sum())
        now += cost.time_from_counts(positions, attention, 0, size)
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
            ends = run_ends(now, steps, size, context, size, context, size, size)
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
            raise too_many(limit, head - size, count, 0)
    counters = {"end": now, "preemptions": 0, "rollbacks": 0, "recomputed": 0,
                "iterations": iterations, "busy": busy, "decode_steps": decode_steps,
                "series": points}
    return tokens, counters


class _Tokens:
    """Per request: first and last token time and largest gap; the pooled gaps."""

    def __init__(self, count: int):
        self.first = np.empty(count)
        self.last = np.empty(count)
        self.admitted = np.full(count, np.nan)
        self.max_gap = np.zeros(count)
        self.gaps = GapHistogram()

    def batch(self, batch: slice, outputs: np.ndarray, prefill_end: float, ends: np.ndarray) -> None:
        """A static batch: every request's first token at ``prefill_end``, its n-th at
        ``ends[n − 2]``; gap j (from ``prefill_end`` on) is shared by the requests
        with more than j + 1 tokens."""
        self.first[batch] = prefill_end
        later = outputs > 1
        self.last[batch] = prefill_end
        if not ends.size:
            return
        gaps = np.diff(ends, prepend=prefill_end)
        below = np.cumsum(np.bincount(outputs - 1, minlength=ends.size + 1)[: ends.size])
        self.gaps.add(gaps, outputs.size - below)
        index = np.maximum(outputs - 2, 0)
        self.last[batch] = np.where(later, ends[index], prefill_end)
        self.max_gap[batch] = np.where(later, np.maximum.accumulate(gaps)[index], 0.0)


# ---------------------------------------------------------------------------- results
def _series(points, cost: CostModel) -> dict[str, np.ndarray] | None:
    """The time series of a run: at every scheduling decision, the requests waiting,
    the requests running and the share of the cache in use."""
    if points is None:
        return None
    data = np.array(points, dtype=np.float64).reshape(-1, 4)
    return {"time": data[:, 0], "waiting": data[:, 1], "running": data[:, 2],
            "cache_use": data[:, 3] * cost.kv_bytes_per_token / cost.cache_memory}


_CHUNK = 1 << 18


def _tokens(count: int, blocks: Blocks, segments) -> _Tokens:
    """Per-request timestamps and pooled gaps from the blocks and token segments.

    A segment ``(r, s, e)`` says request ``r`` received a token at the end of every
    iteration from ``s`` to ``e``; ``s`` is the first iteration of a block and ``e``
    the last of one.  Its gaps are those inside its blocks (already counted in
    ``blocks.gaps``) and the entry gaps of its blocks after the first; between two
    segments of a request the gap is ``T[s'] − T[e]``.
    """
    request, first, last = segments
    order = np.lexsort((first, request))
    request, first, last = request[order], first[order], last[order]
    at_first = np.searchsorted(blocks.start, first, side="right") - 1
    at_last = np.searchsorted(blocks.start, last, side="right") - 1
    tokens = _Tokens(count)
    tokens.gaps = blocks.gaps
    # the first segment of each request holds its first token, the last its last
    starts = np.flatnonzero(np.r_[True, request[1:] != request[:-1]])
    ends = np.r_[starts[1:] - 1, request.size - 1]
    tokens.first[request[starts]] = blocks.first[at_first[starts]]
    tokens.last[request[ends]] = blocks.last[at_last[ends]]
    same = request[1:] == request[:-1]
    between = blocks.first[at_first[1:][same]] - blocks.last[at_last[:-1][same]]
    tokens.gaps.add(between, 1)
    # Block b's entry gap is counted by every segment holding blocks b − 1 and b.
    size = blocks.start.size
    spans = at_last > at_first
    change = (np.bincount(at_first[spans] + 1, minlength=size + 1)
              - np.bincount(at_last[spans] + 1, minlength=size + 1))
    level = np.cumsum(change[:size])
    del change
    for start in range(0, size, _CHUNK):  # in slices: the histogram merges as it goes
        tokens.gaps.add(blocks.entry[start : start + _CHUNK], level[start : start + _CHUNK])
    del level
    # Largest gap of a segment: inside its first block, or inside or into a later one.
    within = blocks.inner[at_first]
    if spans.any():
        later = np.r_[np.maximum(blocks.entry, blocks.inner), 0.0]
        bounds = np.empty(2 * int(spans.sum()), dtype=np.int64)
        bounds[0::2] = at_first[spans] + 1
        bounds[1::2] = at_last[spans] + 1
        within[spans] = np.maximum(within[spans], np.maximum.reduceat(later, bounds)[0::2])
    np.maximum.at(tokens.max_gap, request, within)
    if between.size:
        np.maximum.at(tokens.max_gap, request[1:][same], between)
    return tokens


def _record(workload: Workload, policy: Policy, tokens: _Tokens, counters, arrivals: np.ndarray) -> RunRecord:
    values, weights = tokens.gaps.result()
    return RunRecord(
        arrivals=arrivals,
        outputs=workload.outputs,
        prompts=workload.prompts,
        first_token=tokens.first,
        last_token=tokens.last,
        admitted=counters["admitted"] if "admitted" in counters else tokens.admitted,
        max_gap=tokens.max_gap,
        gap_values=values,
        gap_weights=weights,
        gaps_exact=tokens.gaps.exact,
        gap_max=None if tokens.gaps.exact or not values.size else tokens.gaps.maximum,
        end_time=float(counters["end"]),
        preemptions=int(counters["preemptions"]),
        rollbacks=int(counters["rollbacks"]),
        request_preemptions=counters.get("request_preemptions"),
        request_rollbacks=counters.get("request_rollbacks"),
        closed=workload.clients is not None,
        recomputed_tokens=int(counters["recomputed"]),
        swapped_tokens=int(counters.get("swapped", 0)),
        prefix_hits=counters.get("prefix_hits"),
        prefix_evicted=int(counters.get("prefix_evicted", 0)),
        iterations=int(counters["iterations"]),
        busy_slot_steps=int(counters["busy"]),
        decode_steps=int(counters["decode_steps"]),
        slots=policy.batch_size if policy.kind == "static" else policy.max_running,
    )
