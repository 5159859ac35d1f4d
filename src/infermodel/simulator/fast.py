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

import heapq
import math
from collections import deque

import numpy as np

from .cost import CostModel
from .errors import SimulationError
from .metrics import RunRecord
from .policies import Policy
from .reference import check_fits, default_iteration_limit, reservation_tokens
from .workload import Workload

__all__ = ["run_fast"]

# Runs shorter than this are stepped with Python floats: numpy's call overhead is
# larger than the work for a handful of iterations.
_SCALAR_RUN = 12


def run_fast(
    workload: Workload, cost: CostModel, policy: Policy, max_iterations: int | None = None
) -> RunRecord:
    """Simulate ``workload`` under ``policy`` with the event-skipping engine."""
    check_fits(workload, cost, policy)
    limit = default_iteration_limit(workload) if max_iterations is None else int(max_iterations)
    if policy.kind == "static":
        timeline, segments, counters = _static(workload, cost, policy, limit)
    else:
        timeline, segments, counters = _continuous(workload, cost, policy, limit)
    return _record(workload, policy, timeline, segments, counters)


def _too_many(limit: int, completed: int, count: int, preemptions: int) -> SimulationError:
    return SimulationError(
        f"simulation stopped after {limit:,} iterations without finishing "
        f"({completed} of {count} requests done, {preemptions} preemptions); "
        "the policy thrashes on this workload or max_iterations is too small"
    )


class _RunTimes:
    """End times of a run of iterations whose counts grow linearly.

    Iteration ``j`` has ``positions`` positions, ``attention + j·step_attention``
    attention pairs and ``cached + j·step_cached`` cached positions.  The arithmetic is
    :meth:`CostModel.iteration_times` operation for operation (so every time is the
    same float), done in place in one buffer, and the end times are accumulated from
    ``now`` in iteration order as the reference's ``now += dt`` does.
    """

    def __init__(self, cost: CostModel):
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

    def __call__(self, now, length, positions, attention, step_attention, cached, step_cached):
        if length > self.steps.size:
            self.steps = np.arange(max(length, 2 * self.steps.size), dtype=np.float64)
        steps = self.steps[:length]
        times = np.empty(length + 1)
        times[0] = now
        body = times[1:]
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
def _static(workload: Workload, cost: CostModel, policy: Policy, limit: int):
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
        batch_prompts = prompts[batch]
        batch_outputs = outputs[batch]
        # Prefill: every prompt is a chunk with nothing cached.
        positions = int(batch_prompts.sum())
        attention = int((batch_prompts * (batch_prompts + 1) // 2).sum())
        now += cost.time_from_counts(positions, attention, 0)
        prefill_index = iterations
        iterations += 1
        longest = int(batch_outputs.max())
        if longest > 1:
            # Every slot decodes until the longest output is done; finished slots keep
            # their cache and keep growing.
            steps = longest - 1
            context = int(batch_prompts.sum())
            ends = run_ends(now, steps, size, context, size, context, size)
            times.append(np.array([now]))
            times.append(ends)
            now = float(ends[-1])
            iterations += steps
            decode_steps += steps
            busy += int((batch_outputs - 1).sum())
        else:
            times.append(np.array([now]))
        if iterations > limit:
            raise _too_many(limit, head - size, count, 0)
        seg_request.append(np.arange(batch.start, batch.stop))
        seg_first.append(np.full(size, prefill_index))
        seg_last.append(prefill_index + batch_outputs - 1)
    segments = (
        np.concatenate(seg_request),
        np.concatenate(seg_first),
        np.concatenate(seg_last),
    )
    counters = {"end": now, "preemptions": 0, "recomputed": 0, "iterations": iterations,
                "busy": busy, "decode_steps": decode_steps}
    return np.concatenate(times), segments, counters


# ---------------------------------------------------------------------------- continuous
def _continuous(workload: Workload, cost: CostModel, policy: Policy, limit: int):
    arrivals = workload.arrivals.tolist()
    prompts = workload.prompts.tolist()
    outputs = workload.outputs.tolist()
    count = len(arrivals)
    kv = cost.kv_bytes_per_token
    memory = cost.cache_memory
    admit_limit = memory * policy.admit_fraction
    reserve = policy.kind == "reserve"
    reserve_out = reservation_tokens(workload, policy)
    chunked = policy.kind == "chunked"
    chunk_tokens = policy.chunk_tokens
    max_running = policy.max_running
    time_from_counts = cost.time_from_counts
    run_ends = _RunTimes(cost)

    # Per request.  For a decoding request, gen/fil hold its values at iteration
    # base[r]; it gains one of each per iteration since then.  For any other request
    # they are current.
    gen = [0] * count
    fil = [0] * count
    base = [0] * count
    seg_open = [0] * count  # first iteration of the decoding request's open segment
    finish_at = [0] * count  # iteration count at which a decoding request is done
    decoding = [False] * count

    decoders: list[int] = []  # running requests that decode, in running order
    prefillers: list[int] = []  # running requests still (re)filling their cache; after decoders
    queue: deque[int] = deque()
    finish_heap: list[tuple[int, int]] = []
    decoder_filled = 0  # Σ cached positions of decoders (current)
    prefiller_filled = 0
    reserved = 0  # Σ full-length reservations of running requests

    times_done: list[np.ndarray] = []
    times_pending: list[float] = []
    seg_request: list[int] = []
    seg_first: list[int] = []
    seg_last: list[int] = []

    now = 0.0
    iterations = 0
    next_arrival = 0
    completed = 0
    preemptions = 0
    recomputed = 0
    busy = 0
    decode_steps = 0
    stalled_preemptions = 0

    def close(request: int, first: int, last: int) -> None:
        seg_request.append(request)
        seg_first.append(first)
        seg_last.append(last)

    def finish_due() -> None:
        """Retire the decoders whose last token came at the end of the last iteration."""
        nonlocal decoder_filled, reserved, completed
        while finish_heap and finish_heap[0][0] <= iterations:
            due, request = heapq.heappop(finish_heap)
            if not decoding[request] or finish_at[request] != due:
                continue  # stale entry (preempted or rescheduled)
            decoding[request] = False
            decoders.remove(request)
            decoder_filled -= fil[request] + (iterations - base[request])
            if reserve:
                reserved -= prompts[request] + reserve_out
            close(request, seg_open[request], iterations - 1)
            completed += 1

    while completed < count:
        while next_arrival < count and arrivals[next_arrival] <= now:
            queue.append(next_arrival)
            next_arrival += 1
        if not decoders and not prefillers and not queue:
            now = arrivals[next_arrival]
            continue

        # FIFO admission.
        used = reserved if reserve else decoder_filled + prefiller_filled
        running = len(decoders) + len(prefillers)
        while queue and running < max_running:
            candidate = queue[0]
            need = prompts[candidate] + (reserve_out if reserve else gen[candidate])
            if (used + need) * kv > admit_limit:
                break
            queue.popleft()
            prefillers.append(candidate)
            used += need
            running += 1
            if reserve:
                reserved += need
        if not running:
            head = queue[0]
            raise SimulationError(
                f"request {head} cannot be admitted into an empty server: it needs "
                f"{(prompts[head] + gen[head]) * kv:,.0f} bytes of cache, budget {admit_limit:,.0f} bytes"
            )

        # Share the iteration's token budget in running order: decoders first.
        n_dec = len(decoders)
        if chunked:
            taking_decoders = min(n_dec, chunk_tokens)
            left = chunk_tokens - taking_decoders
        else:
            taking_decoders = n_dec
            left = math.inf
        takes: list[int] = []
        remainders: list[int] = []
        for request in prefillers:
            if left <= 0:
                break
            remaining = prompts[request] + gen[request] - fil[request]
            take = remaining if remaining <= left else int(left)
            takes.append(take)
            remainders.append(remaining)
            left -= take
        growth = taking_decoders + sum(takes)
        if (decoder_filled + prefiller_filled + growth) * kv > memory:
            # Evict the newest running request; it re-prefills prompt + generated later.
            if prefillers:
                victim = prefillers.pop()
                prefiller_filled -= fil[victim]
            else:
                victim = decoders.pop()
                elapsed = iterations - base[victim]
                gen[victim] += elapsed
                fil[victim] += elapsed
                decoding[victim] = False
                decoder_filled -= fil[victim]
                if seg_open[victim] <= iterations - 1:
                    close(victim, seg_open[victim], iterations - 1)
            recomputed += fil[victim]
            fil[victim] = 0
            if reserve:
                reserved -= prompts[victim] + reserve_out
            queue.appendleft(victim)
            preemptions += 1
            stalled_preemptions += 1
            if stalled_preemptions > max_running + 1:
                raise SimulationError(
                    "preemption livelock: the cache cannot hold the next iteration of the running "
                    f"requests even after {stalled_preemptions} evictions at t = {now:.6g} s"
                )
            continue
        stalled_preemptions = 0

        partial = len(takes) == 1 and takes[0] < remainders[0]
        steady = taking_decoders == n_dec and (not takes or partial)
        if steady:
            # ---- a run of identical-composition iterations
            length = limit - iterations
            if length <= 0:
                raise _too_many(limit, completed, count, preemptions)
            if n_dec:
                while True:
                    due, request = finish_heap[0]
                    if decoding[request] and finish_at[request] == due:
                        break
                    heapq.heappop(finish_heap)
                length = min(length, due - iterations)
            positions = n_dec
            attention = decoder_filled + n_dec  # each decode: one query over c cached + itself
            cached = decoder_filled
            step_attention = n_dec
            step_cached = n_dec
            if partial:
                chunk = takes[0]
                head = prefillers[0]
                already = fil[head]
                length = min(length, (remainders[0] - 1) // chunk)
                positions += chunk
                attention += chunk * already + chunk * (chunk + 1) // 2
                cached += already
                step_attention += chunk * chunk
                step_cached += chunk
            # The cache check passes for iteration j while (C + j·g + g)·kv ≤ memory.
            current = decoder_filled + prefiller_filled
            fits = int((memory / kv - current - growth) // growth) + 1
            while fits > 1 and (current + (fits - 1) * growth + growth) * kv > memory:
                fits -= 1
            while (current + fits * growth + growth) * kv <= memory and fits < length:
                fits += 1
            length = min(length, fits)
            if queue and not reserve and running < max_running:
                # On-demand admission charges only cached positions of the running
                # requests, so a request admitted this turn but not yet prefilled stops
                # counting next turn: the head may fit then, though not now.  Later
                # turns only cache more, so the next turn is the one to check.
                waiting = queue[0]
                if (current + growth + prompts[waiting] + gen[waiting]) * kv <= admit_limit:
                    length = 1
            watch = not queue and next_arrival < count
            if watch:
                # Iteration times never shrink within a run: bound the run by the arrival.
                arrival = arrivals[next_arrival]
                first_dt = time_from_counts(positions, attention, cached)
                length = min(length, int((arrival - now) / first_dt) + 2)
            if length < _SCALAR_RUN:
                done = 0
                while done < length:
                    if done and watch and now >= arrival:
                        break
                    now += time_from_counts(
                        positions, attention + done * step_attention, cached + done * step_cached
                    )
                    times_pending.append(now)
                    done += 1
            else:
                ends = run_ends(now, length, positions, attention, step_attention, cached, step_cached)
                if watch:
                    done = 1 + int(np.searchsorted(ends[: length - 1], arrival, side="left"))
                    ends = ends[:done]
                else:
                    done = length
                if times_pending:
                    times_done.append(np.array(times_pending))
                    times_pending = []
                times_done.append(ends)
                now = float(ends[-1])
            iterations += done
            decoder_filled += done * n_dec
            busy += done * n_dec
            if n_dec:
                decode_steps += done
            if partial:
                fil[head] += done * chunk
                prefiller_filled += done * chunk
            finish_due()
            continue

        # ---- one iteration with prefill completions (or starved decoders)
        if iterations >= limit:
            raise _too_many(limit, completed, count, preemptions)
        positions = taking_decoders
        if taking_decoders == n_dec:
            attention = decoder_filled + n_dec
            cached = decoder_filled
        else:
            cached = 0
            for request in decoders[:taking_decoders]:
                cached += fil[request] + (iterations - base[request])
            attention = cached + taking_decoders
        for request, take in zip(prefillers, takes):
            positions += take
            attention += take * fil[request] + take * (take + 1) // 2
            cached += fil[request]
        now += time_from_counts(positions, attention, cached)
        times_pending.append(now)
        index = iterations
        iterations += 1
        decoder_filled += taking_decoders
        later = taking_decoders
        # Starved decoders emit nothing this iteration: rebase them one iteration on.
        for request in decoders[taking_decoders:]:
            elapsed = index - base[request]
            gen[request] += elapsed
            fil[request] += elapsed
            base[request] = index + 1
            if seg_open[request] <= index - 1:
                close(request, seg_open[request], index - 1)
            seg_open[request] = index + 1
            finish_at[request] = base[request] + outputs[request] - gen[request]
            heapq.heappush(finish_heap, (finish_at[request], request))
        completions = 0
        for request, take in zip(prefillers, takes):
            fil[request] += take
            prefiller_filled += take
            if fil[request] != prompts[request] + gen[request]:
                continue
            completions += 1
            if gen[request]:
                later += 1  # a re-prefill's token follows tokens sent before eviction
            gen[request] += 1
            prefiller_filled -= fil[request]
            if gen[request] == outputs[request]:
                close(request, index, index)
                if reserve:
                    reserved -= prompts[request] + reserve_out
                completed += 1
                continue
            decoder_filled += fil[request]
            base[request] = iterations
            seg_open[request] = index
            decoding[request] = True
            finish_at[request] = iterations + outputs[request] - gen[request]
            heapq.heappush(finish_heap, (finish_at[request], request))
            decoders.append(request)
        if completions:
            del prefillers[:completions]
        if later:
            busy += later
            decode_steps += 1
        finish_due()

    if times_pending:
        times_done.append(np.array(times_pending))
    timeline = np.concatenate(times_done) if times_done else np.empty(0)
    segments = (
        np.array(seg_request, dtype=np.int64),
        np.array(seg_first, dtype=np.int64),
        np.array(seg_last, dtype=np.int64),
    )
    counters = {"end": now, "preemptions": preemptions, "recomputed": recomputed,
                "iterations": iterations, "busy": busy, "decode_steps": decode_steps}
    return timeline, segments, counters


# ---------------------------------------------------------------------------- results
def _record(workload: Workload, policy: Policy, timeline: np.ndarray, segments, counters) -> RunRecord:
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
        arrivals=workload.arrivals,
        outputs=workload.outputs,
        prompts=workload.prompts,
        first_token=first_token,
        last_token=last_token,
        max_gap=max_gap,
        gap_values=gap_values,
        gap_weights=gap_weights,
        end_time=float(counters["end"]),
        preemptions=int(counters["preemptions"]),
        recomputed_tokens=int(counters["recomputed"]),
        iterations=int(counters["iterations"]),
        busy_slot_steps=int(counters["busy"]),
        decode_steps=int(counters["decode_steps"]),
        slots=policy.batch_size if policy.kind == "static" else policy.max_running,
    )
