"""The step-by-step reference engine: one loop turn per model iteration.

It applies the policy rules of :mod:`infermodel.simulator.policies` literally (their
shared parts are :mod:`infermodel.simulator.rules`), keeps
every token timestamp of every request, costs each iteration with the public
:meth:`CostModel.iteration_time`, and computes percentiles with ``numpy.quantile`` on
the raw samples.  It is slow on purpose (simple enough to check by reading) and is the
yardstick the fast engine is tested against.  :func:`~infermodel.simulator.engines.run_reference`
runs it (with :mod:`~.reference_speculative`'s state when the cost model speculates).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..cost import CostModel
from ..errors import SimulationError
from ..load import source_for
from ..policies import WHOLE_PROMPT_KINDS, Policy
from ..prefixes import prefix_cache_for
from ..records import Point, RunRecord, first_admissions
from ..rules import (
    Evictions,
    PrefillQueue,
    admission_need,
    cannot_admit,
    out_of_iterations,
    reservation_tokens,
)
from ..workload import Workload

__all__ = ["Reference"]


class Reference:
    """The reference engine's state; :meth:`run` takes one loop turn per iteration."""

    def __init__(self, workload: Workload, cost: CostModel, policy: Policy, limit: int, series: bool):
        self.workload, self.cost, self.policy, self.limit = workload, cost, policy, limit
        self.source = source_for(workload)
        self.prompts = workload.prompts.tolist()
        self.outputs = workload.outputs.tolist()
        count = self.count = workload.count
        self.kv = cost.kv_bytes_per_token
        self.memory = cost.cache_memory
        self.admit_limit = self.memory * policy.admit_fraction
        self.reserve_out = reservation_tokens(workload, policy)
        self.filled = [0] * count  # positions in the cache
        self.decoding = [False] * count  # (re)prefill complete since its admission
        # Shared prefix blocks, held once (None without any shared prefix).
        self.prefix = prefix_cache_for(workload, policy) if policy.kind != "static" else None
        if hasattr(self.source, "attach"):
            self.source.attach(self.prompts, self.filled, self.outputs, self.prefix)
        self.generated = [0] * count  # tokens emitted
        self.stamps: list[list[float]] = [[] for _ in range(count)]
        self.queue: deque[int] = deque()
        self.running: list[int] = []
        # counts evictions; the request rolled back in a scheduling turn waits for an iteration
        self.evictions = Evictions(count, policy, self.kv)
        self.admitted = [-1.0] * count  # per request: time of its first admission (-1: none)
        self.points: list[Point] | None = [] if series else None
        self.completed = self.iterations = self.busy = self.decode_steps = 0
        self.now = 0.0

    def count_iteration(self) -> None:
        self.iterations += 1
        if self.iterations > self.limit:
            raise out_of_iterations(self.limit, self.completed, self.count,
                                    self.evictions.preemptions)

    def run(self) -> None:
        source, queue = self.source, self.queue
        while self.completed < self.count:
            queue.extend(source.due(self.now))
            if not self.running and not queue:
                self.now = source.next_time()
                if self.now == math.inf:
                    raise SimulationError("no request left to arrive and none running")
                continue
            if self.policy.kind == "static":
                self.static_turn()
            else:
                self.continuous_turn()

    def retire(self, done: list[int]) -> None:
        for r in done:
            if self.prefix is not None:
                self.prefix.leave(r, self.prompts[r] + self.outputs[r] - 1, self.now)
            self.source.finished(r, self.now)
        self.completed += len(done)

    # ------------------------------------------------------------------ static
    def static_turn(self) -> None:
        policy, queue, prompts = self.policy, self.queue, self.prompts
        filled, generated, stamps = self.filled, self.generated, self.stamps
        if not self.running:
            dispatch_at = self.source.times[queue[0]] + policy.timeout
            if len(queue) < policy.batch_size and self.now < dispatch_at:
                self.now = min(dispatch_at, self.source.next_time())
                return
            size = min(policy.batch_size, len(queue))
            if policy.static_memory_check:
                reserved, size = 0, 0
                for index in list(queue)[: policy.batch_size]:
                    need = prompts[index] + self.reserve_out
                    if (reserved + need) * self.kv > self.admit_limit:
                        break
                    reserved += need
                    size += 1
            self.running = [queue.popleft() for _ in range(size)]
            for r in self.running:
                self.admitted[r] = self.now
            self.now += self.cost.iteration_time([], [(prompts[r], 0) for r in self.running])
            self.count_iteration()
            for r in self.running:
                filled[r] = prompts[r]
                generated[r] = 1
                stamps[r].append(self.now)
        else:
            self.now += self.cost.iteration_time([filled[r] for r in self.running], [])
            self.count_iteration()
            self.decode_steps += 1
            for r in self.running:
                filled[r] += 1
                if generated[r] < self.outputs[r]:
                    generated[r] += 1
                    stamps[r].append(self.now)
                    self.busy += 1
        if all(generated[r] == self.outputs[r] for r in self.running):
            self.retire(self.running)
            self.running = []

    # ------------------------------------------------------------------ continuous
    def admit(self) -> None:
        """FIFO admission under the policy's rule."""
        policy, queue, running, prompts = self.policy, self.queue, self.running, self.prompts
        if policy.kind == "reserve":
            used = sum(prompts[r] + self.reserve_out for r in running)
        else:
            used = self.occupancy()
        while queue and len(running) < policy.max_running:
            candidate = queue[0]
            if candidate == self.evictions.blocked:
                break
            total = prompts[candidate] + self.generated[candidate]
            need = admission_need(policy.kind == "reserve", candidate, prompts[candidate],
                                  self.generated[candidate], self.reserve_out, self.prefix)
            if (used + need) * self.kv > self.admit_limit:
                break
            running.append(queue.popleft())
            if self.admitted[candidate] < 0:
                self.admitted[candidate] = self.now
            self.decoding[candidate] = False
            hit = self.prefix.take(candidate, total) if self.prefix is not None else 0
            self.now, back = self.evictions.swap_in(candidate, hit, self.now)
            if back:
                self.filled[candidate] = back
            self.filled[candidate] = max(self.filled[candidate], hit)
            used += need
        if not running:
            head = queue[0]
            raise cannot_admit(head, prompts[head] + self.generated[head], self.kv,
                               self.admit_limit)
        self.trim(self.occupancy())

    def occupancy(self) -> int:
        """Positions the cache holds for running requests: each one's own, and every
        prefix block one of them references, once (idle prefix blocks not counted).
        """
        own = sum(self.filled[r] for r in self.running)
        if self.prefix is None:
            return own
        return own - sum(self.prefix.held[r] for r in self.running) * self.prefix.block \
            + self.prefix.referenced

    def trim(self, occupied: int) -> None:
        """Evict idle prefix blocks until ``occupied`` positions and the rest fit."""
        if self.prefix is not None:
            self.prefix.trim(occupied, self.kv, self.memory)

    def evict(self) -> None:
        """The newest running request leaves; it re-prefills later."""
        victim = self.running.pop()
        own = self.filled[victim]
        if self.prefix is not None:
            # its prefix blocks stay cached (idle once nobody references them)
            own -= self.prefix.held[victim] * self.prefix.block
            self.prefix.leave(victim, self.filled[victim], self.now)
        self.queue.appendleft(victim)
        self.now = self.evictions.evict(victim, own, self.filled[victim], self.now)
        self.filled[victim] = 0

    def continuous_turn(self) -> None:
        """FIFO admission, then one iteration (or an eviction)."""
        budget = self.begin_turn()
        running, filled, generated, prompts = self.running, self.filled, self.generated, self.prompts
        chunks: list[tuple[int, int]] = []
        scheduled: list[tuple[int, int]] = []
        prefill_only = self.prefill_only()
        prefills = self.prefills(prefill_only)
        for r in running:
            remaining = prompts[r] + generated[r] - filled[r]
            if self.decoding[r]:
                take = 0 if prefill_only else remaining if remaining <= budget else int(budget)
            else:
                take = prefills.take(remaining, budget)
            if take > 0:
                chunks.append((take, filled[r]))
                scheduled.append((r, take))
                budget -= take
        if not self.make_room(sum(take for _, take in scheduled)):
            return
        # A decode is a one-token chunk over its cached positions.
        self.now += self.cost.iteration_time([], chunks)
        self.count_iteration()
        self.complete(scheduled, 0)

    def begin_turn(self) -> float:
        """Admit (FIFO), record a series point, and return the iteration's token budget."""
        self.admit()
        if self.points is not None:
            idle = self.prefix.idle if self.prefix is not None else 0
            self.points.append((self.now, len(self.queue), len(self.running),
                                self.occupancy() + idle))
        return self.policy.token_budget

    def prefill_only(self) -> bool:
        """Whether this turn's iteration takes prompts alone: a policy that does not mix
        them with the decodes (``mixed_batches`` false) while a prompt has more than one
        position to fill (one left is a decode's work: a request handed over with its
        cache, or swapped back in).
        """
        if self.policy.mixed_batches:
            return False
        prompts, generated, filled = self.prompts, self.generated, self.filled
        return any(not self.decoding[r] and prompts[r] + generated[r] - filled[r] > 1
                   for r in self.running)

    def prefills(self, prefill_only: bool = False) -> PrefillQueue:
        """What each prompt of this turn takes, in running order (:class:`PrefillQueue`):
        it runs alone when no decode takes part.
        """
        return PrefillQueue(self.policy.kind in WHOLE_PROMPT_KINDS,
                            prefill_only or not any(self.decoding[r] for r in self.running))

    def make_room(self, growth: int) -> bool:
        """Whether ``growth`` more cached positions fit; if not, evict (the turn ends)."""
        if (self.occupancy() + growth) * self.kv > self.memory:
            self.evict()
            return False
        self.evictions.progress()
        self.trim(self.occupancy() + growth)
        return True

    def complete(self, scheduled: list[tuple[int, int]], later: int) -> None:
        """Apply the iteration's ``scheduled`` (request, tokens) chunks after ``later``
        decode tokens already emitted this iteration; retire the finished requests.
        """
        running, filled, generated, prompts = self.running, self.filled, self.generated, self.prompts
        for r, take in scheduled:
            filled[r] += take
            if filled[r] == prompts[r] + generated[r]:
                if not self.decoding[r]:  # its (re)prefill completes
                    self.decoding[r] = True
                    if self.prefix is not None:
                        self.prefix.register(r, filled[r], self.now, running=True)
                if generated[r]:
                    later += 1
                generated[r] += 1
                self.stamps[r].append(self.now)
        if later:
            self.busy += later
            self.decode_steps += 1
        self.retire([r for r in running if generated[r] == self.outputs[r]])
        self.running = [r for r in running if generated[r] < self.outputs[r]]

    # ------------------------------------------------------------------ result
    def record(self) -> RunRecord:
        stamps, policy, kv, memory = self.stamps, self.policy, self.kv, self.memory
        evictions = self.evictions
        diffs = [np.diff(np.asarray(s)) for s in stamps]
        points = self.points
        return RunRecord(
            arrivals=self.source.arrivals(),
            outputs=self.workload.outputs,
            prompts=np.array(self.prompts, dtype=np.int64),
            first_token=np.array([s[0] for s in stamps]),
            last_token=np.array([s[-1] for s in stamps]),
            admitted=first_admissions(self.admitted),
            max_gap=np.array([d.max() if d.size else 0.0 for d in diffs]),
            gap_values=np.concatenate(diffs) if diffs else np.empty(0),
            gap_weights=None,
            end_time=self.now,
            preemptions=evictions.preemptions,
            rollbacks=evictions.rollbacks,
            closed=self.workload.clients is not None,  # sessions arrive open: they can overload
            series=None if points is None else {
                "time": np.array([p[0] for p in points]), "waiting": np.array([p[1] for p in points]),
                "running": np.array([p[2] for p in points]),
                "cache_use": np.array([p[3] for p in points]) * kv / memory},
            request_preemptions=np.array(evictions.preempted, dtype=np.int64),
            request_rollbacks=np.array(evictions.rolled_back, dtype=np.int64),
            recomputed_tokens=evictions.recomputed,
            swapped_tokens=evictions.swapped_tokens,
            prefix_hits=(None if self.prefix is None
                         else np.array(self.prefix.hits, dtype=np.int64)),
            prefix_evicted=0 if self.prefix is None else self.prefix.evicted,
            iterations=self.iterations,
            busy_slot_steps=self.busy,
            decode_steps=self.decode_steps,
            slots=policy.batch_size if policy.kind == "static" else policy.max_running,
        )
