"""The step-by-step reference engine: one loop turn per model iteration.

It applies the policy rules of :mod:`infermodel.simulator.policies` literally, keeps
every token timestamp of every request, costs each iteration with the public
:meth:`CostModel.iteration_time`, and computes percentiles with ``numpy.quantile`` on
the raw samples.  It is slow on purpose (simple enough to check by reading) and is the
yardstick the fast engine is tested against.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from .cost import CostModel
from .errors import SimulationError
from .load import source_for
from .metrics import RunRecord
from .policies import Policy
from .workload import Workload

__all__ = ["check_fits", "default_iteration_limit", "run_reference"]


def default_iteration_limit(workload: Workload) -> int:
    """A generous bound on model iterations: every iteration advances at least one
    token, so ten times all prompt and output tokens (plus a margin) is reached only
    by a simulation that thrashes."""
    return int(10 * (int(workload.prompts.sum()) + int(workload.outputs.sum())) + 1_000_000)


def reservation_tokens(workload: Workload, policy: Policy) -> int:
    return int(policy.reserve_output_tokens or workload.max_output)


def check_fits(workload: Workload, cost: CostModel, policy: Policy) -> None:
    """Raise :class:`SimulationError` naming the first request that can never be
    served within the cache budget under ``policy``."""
    kv = cost.kv_bytes_per_token
    memory = cost.cache_memory
    admit_limit = memory * policy.admit_fraction
    if policy.kind == "static" and not policy.static_memory_check:
        return
    prompts, outputs = workload.prompts, workload.outputs
    if policy.kind in ("reserve", "static"):
        need = prompts + reservation_tokens(workload, policy)
        limit, rule = admit_limit, f"{policy.admit_fraction:g} of the cache budget"
    else:
        # admission needs the prompt; growing to completion needs prompt + output − 1
        # positions cached together with the last token's.
        need = np.maximum(prompts, prompts + outputs - 1)
        too_big_admission = prompts * kv > admit_limit
        bad = np.flatnonzero(too_big_admission)
        if bad.size:
            index = int(bad[0])
            raise SimulationError(
                f"request {index} can never be admitted: its prompt of {int(prompts[index]):,} tokens "
                f"needs {prompts[index] * kv:,.0f} bytes of KV cache, more than "
                f"{policy.admit_fraction:g} of the cache budget ({admit_limit:,.0f} of {memory:,.0f} bytes)"
            )
        limit, rule = memory, "the cache budget"
    bad = np.flatnonzero(need * kv > limit)
    if bad.size:
        index = int(bad[0])
        raise SimulationError(
            f"request {index} can never fit the cache: it needs {int(need[index]):,} tokens × "
            f"{kv:,.0f} bytes = {need[index] * kv:,.0f} bytes, more than {rule} "
            f"({limit:,.0f} bytes; cache budget {memory:,.0f} bytes)"
        )


def run_reference(
    workload: Workload, cost: CostModel, policy: Policy, max_iterations: int | None = None,
    series: bool = False,
) -> tuple[RunRecord, list[list[float]]]:
    """Simulate ``workload`` under ``policy`` one iteration at a time.

    Returns the run record and every request's token timestamps.
    """
    check_fits(workload, cost, policy)
    limit = default_iteration_limit(workload) if max_iterations is None else int(max_iterations)
    source = source_for(workload)
    prompts = workload.prompts.tolist()
    outputs = workload.outputs.tolist()
    count = workload.count
    kv = cost.kv_bytes_per_token
    memory = cost.cache_memory
    admit_limit = memory * policy.admit_fraction
    reserve_out = reservation_tokens(workload, policy)

    filled = [0] * count  # positions in the cache
    generated = [0] * count  # tokens emitted
    stamps: list[list[float]] = [[] for _ in range(count)]
    queue: deque[int] = deque()
    running: list[int] = []
    evicted = [0] * count  # per request: preemptions that discarded cached positions
    undone = [0] * count  # per request: rollbacks of an admission with nothing cached
    blocked = -1  # the request rolled back in this scheduling turn waits for an iteration
    points: list[tuple[float, int, int, int]] | None = [] if series else None
    rollbacks = 0
    now = 0.0
    completed = 0
    iterations = 0
    preemptions = 0
    recomputed = 0
    busy = 0
    decode_steps = 0
    stalled_preemptions = 0

    def count_iteration():
        nonlocal iterations
        iterations += 1
        if iterations > limit:
            raise SimulationError(
                f"simulation stopped after {limit:,} iterations without finishing "
                f"({completed} of {count} requests done, {preemptions} preemptions); "
                "the policy thrashes on this workload or max_iterations is too small"
            )

    while completed < count:
        queue.extend(source.due(now))
        if not running and not queue:
            now = source.next_time()
            if now == math.inf:
                raise SimulationError("no request left to arrive and none running")
            continue

        if policy.kind == "static":
            if not running:
                dispatch_at = source.times[queue[0]] + policy.timeout
                if len(queue) < policy.batch_size and now < dispatch_at:
                    now = min(dispatch_at, source.next_time())
                    continue
                size = min(policy.batch_size, len(queue))
                if policy.static_memory_check:
                    reserved, size = 0, 0
                    for index in list(queue)[: policy.batch_size]:
                        need = prompts[index] + reserve_out
                        if (reserved + need) * kv > admit_limit:
                            break
                        reserved += need
                        size += 1
                running = [queue.popleft() for _ in range(size)]
                now += cost.iteration_time([], [(prompts[r], 0) for r in running])
                count_iteration()
                for r in running:
                    filled[r] = prompts[r]
                    generated[r] = 1
                    stamps[r].append(now)
            else:
                now += cost.iteration_time([filled[r] for r in running], [])
                count_iteration()
                decode_steps += 1
                for r in running:
                    filled[r] += 1
                    if generated[r] < outputs[r]:
                        generated[r] += 1
                        stamps[r].append(now)
                        busy += 1
            if all(generated[r] == outputs[r] for r in running):
                completed += len(running)
                for r in running:
                    source.finished(r, now)
                running = []
            continue

        # Continuous policies: FIFO admission, then one iteration.
        if policy.kind == "reserve":
            used = sum(prompts[r] + reserve_out for r in running)
        else:
            used = sum(filled[r] for r in running)
        while queue and len(running) < policy.max_running:
            candidate = queue[0]
            if candidate == blocked:
                break
            if policy.kind == "reserve":
                need = prompts[candidate] + reserve_out
            else:
                need = prompts[candidate] + generated[candidate]
            if (used + need) * kv > admit_limit:
                break
            running.append(queue.popleft())
            used += need
        if not running:
            head = queue[0]
            raise SimulationError(
                f"request {head} cannot be admitted into an empty server: it needs "
                f"{(prompts[head] + generated[head]) * kv:,.0f} bytes of cache, budget {admit_limit:,.0f} bytes"
            )

        if points is not None:
            points.append((now, len(queue), len(running), sum(filled[r] for r in running)))
        budget = policy.chunk_tokens if policy.kind == "chunked" else math.inf
        chunks: list[tuple[int, int]] = []
        scheduled: list[tuple[int, int]] = []
        for r in running:
            remaining = prompts[r] + generated[r] - filled[r]
            take = remaining if remaining <= budget else int(budget)
            if take > 0:
                chunks.append((take, filled[r]))
                scheduled.append((r, take))
                budget -= take
        growth = sum(take for _, take in scheduled)
        current = sum(filled[r] for r in running)
        if (current + growth) * kv > memory:
            victim = running.pop()
            if filled[victim]:
                evicted[victim] += 1
            else:
                undone[victim] += 1
                rollbacks += 1
                blocked = victim
            recomputed += filled[victim]
            filled[victim] = 0
            queue.appendleft(victim)
            preemptions += 1
            stalled_preemptions += 1
            if stalled_preemptions > policy.max_running + 1:
                raise SimulationError(
                    "preemption livelock: the cache cannot hold the next iteration of the running "
                    f"requests even after {stalled_preemptions} evictions at t = {now:.6g} s"
                )
            continue
        stalled_preemptions = 0
        blocked = -1
        # A decode is a one-token chunk over its cached positions.
        now += cost.iteration_time([], chunks)
        count_iteration()
        later = 0
        for r, take in scheduled:
            filled[r] += take
            if filled[r] == prompts[r] + generated[r]:
                if generated[r]:
                    later += 1
                generated[r] += 1
                stamps[r].append(now)
        if later:
            busy += later
            decode_steps += 1
        still = [r for r in running if generated[r] < outputs[r]]
        for r in running:
            if generated[r] == outputs[r]:
                source.finished(r, now)
        completed += len(running) - len(still)
        running = still

    first = np.array([s[0] for s in stamps])
    last = np.array([s[-1] for s in stamps])
    diffs = [np.diff(np.asarray(s)) for s in stamps]
    max_gap = np.array([d.max() if d.size else 0.0 for d in diffs])
    gaps = np.concatenate(diffs) if diffs else np.empty(0)
    record = RunRecord(
        arrivals=source.arrivals(),
        outputs=workload.outputs,
        prompts=workload.prompts,
        first_token=first,
        last_token=last,
        max_gap=max_gap,
        gap_values=gaps,
        gap_weights=None,
        end_time=now,
        preemptions=preemptions,
        rollbacks=rollbacks,
        closed=source.closed,
        series=None if points is None else {
            "time": np.array([p[0] for p in points]), "waiting": np.array([p[1] for p in points]),
            "running": np.array([p[2] for p in points]),
            "cache_use": np.array([p[3] for p in points]) * kv / memory},
        request_preemptions=np.array(evicted, dtype=np.int64),
        request_rollbacks=np.array(undone, dtype=np.int64),
        recomputed_tokens=recomputed,
        iterations=iterations,
        busy_slot_steps=busy,
        decode_steps=decode_steps,
        slots=policy.batch_size if policy.kind == "static" else policy.max_running,
    )
    return record, stamps
