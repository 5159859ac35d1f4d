"""The fast engine's continuous policies (``reserve``, ``paged``, ``chunked``) as one state.

Between two events (an arrival that could be admitted, a prefill that completes, a
request that finishes, a cache overflow, the end of a steady chunked prefill) every
iteration has the same composition, so a whole run of iterations is priced at once
(see :mod:`~infermodel.simulator.engines.fast`).  :class:`ContinuousRun` holds the scheduler's
state; each step of the loop is one method:

* :meth:`~ContinuousRun.admit` — FIFO admission under the policy's rule;
* :meth:`~ContinuousRun.share` — the iteration's token budget, decoders first;
* :meth:`~ContinuousRun.evict` — the newest running request leaves when the cache
  would overflow (a *rollback* when it had nothing cached yet, a *preemption* when
  cached positions are discarded; :class:`~infermodel.simulator.rules.Evictions`);
* :meth:`~ContinuousRun.steady` — a run of identical-composition iterations;
* :meth:`~ContinuousRun.single` — one iteration in which prefills complete.

A request rolled back in a scheduling turn is not admitted again in that same turn:
it would find the same state and be rolled back again forever.  It waits for the next
iteration (engines likewise do not reschedule in the step that preempted).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from ..cost import CostModel
from ..errors import SimulationError
from ..load import Source
from ..policies import WHOLE_PROMPT_KINDS, Policy
from ..prefixes import prefix_cache_for
from ..records import Blocks, Counters, GapHistogram, Point, Segments, first_admissions
from ..rules import (
    Evictions,
    PrefillQueue,
    admission_need,
    cannot_admit,
    out_of_iterations,
    reservation_tokens,
)
from ..workload import Workload

if TYPE_CHECKING:
    from .fast import RunTimes

__all__ = ["ContinuousRun"]

# Runs shorter than this are stepped with Python floats: numpy's call overhead is
# larger than the work for a handful of iterations.
SCALAR_RUN = 12


class ContinuousRun:
    """The state of one continuous-batching run in the event-skipping engine.

    For a decoding request, ``gen``/``fil`` hold its values at iteration ``base[r]``;
    it gains one of each per iteration since then.  For any other request they are
    current.
    """

    def __init__(self, workload: Workload, cost: CostModel, policy: Policy, limit: int,
                 source: Source, run_times: RunTimes, series: bool = False):
        count = workload.count
        self.source = source
        self.prompts = workload.prompts.tolist()
        self.outputs = workload.outputs.tolist()
        self.count = count
        self.fil = [0] * count
        # Shared prefix blocks (None without any): ``offset`` is what the cache holds
        # beyond Σ fil of the running requests (each shared block once; 0 without a
        # prefix cache, leaving Lab 3's arithmetic unchanged).
        self.prefix = prefix_cache_for(workload, policy)
        self.offset = 0
        if hasattr(source, "attach"):
            source.attach(self.prompts, self.fil, self.outputs, self.prefix)
        self.kv = cost.kv_bytes_per_token
        self.memory = cost.cache_memory
        self.admit_limit = self.memory * policy.admit_fraction
        self.reserve = policy.kind == "reserve"
        self.reserve_out = reservation_tokens(workload, policy)
        self.whole = policy.kind in WHOLE_PROMPT_KINDS
        self.mixed = policy.mixed_batches
        self.token_budget = policy.token_budget
        self.max_running = policy.max_running
        self.time_from_counts = cost.time_from_counts
        self.run_ends = run_times
        self.limit = limit
        self.gen = [0] * count
        self.base = [0] * count
        self.seg_open = [0] * count  # first iteration of the decoding request's open segment
        self.finish_at = [0] * count  # iteration count at which a decoding request is done
        self.decoding = [False] * count
        self.evictions = Evictions(count, policy, self.kv)
        self.admitted = [-1.0] * count  # per request: time of its first admission (-1: none)
        self.decoders: list[int] = []  # running requests that decode, in running order
        self.prefillers: list[int] = []  # running requests still (re)filling; after decoders
        self.queue: deque[int] = deque()
        self.finish_heap: list[tuple[int, int]] = []
        self.decoder_filled = 0  # Σ cached positions of decoders (current)
        self.prefiller_filled = 0
        self.reserved = 0  # Σ full-length reservations of running requests
        # Blocks of iterations (a steady run or one single iteration): token segments
        # start and end on block boundaries, so per block its first iteration, the end
        # times of its first and last iterations, the gap into it from the previous
        # iteration and the largest gap inside it are all the timeline that is kept.
        # Gaps inside a block are counted as it is run: every decoder receives a token
        # at each of its iterations.
        self.block_start = array("q")
        self.block_first = array("d")
        self.block_last = array("d")
        self.block_entry = array("d")
        self.block_inner = array("d")
        self.last_end = 0.0
        self.gaps = GapHistogram()
        self._scalar_gaps = array("d")
        self._scalar_weights = array("q")
        self.seg_request = array("q")
        self.seg_first = array("q")
        self.seg_last = array("q")
        self.now = 0.0
        self.iterations = 0
        self.completed = 0
        self.busy = 0
        self.decode_steps = 0
        # (time, waiting, running, cached positions) at every scheduling turn, if asked
        self.series: list[Point] | None = [] if series else None

    # ------------------------------------------------------------------ bookkeeping
    def close(self, request: int, first: int, last: int) -> None:
        self.seg_request.append(request)
        self.seg_first.append(first)
        self.seg_last.append(last)

    def done(self, request: int) -> None:
        if self.prefix is not None:
            self.prefix.leave(request, self.prompts[request] + self.outputs[request] - 1, self.now)
            self.offset = self.prefix.excess
        self.completed += 1
        self.source.finished(request, self.now)

    def finish_due(self) -> None:
        """Retire the decoders whose last token came at the end of the last iteration."""
        heap, iterations = self.finish_heap, self.iterations
        while heap and heap[0][0] <= iterations:
            due, request = heapq.heappop(heap)
            if not self.decoding[request] or self.finish_at[request] != due:
                continue  # stale entry (preempted or rescheduled)
            self.decoding[request] = False
            self.decoders.remove(request)
            self.decoder_filled -= self.fil[request] + (iterations - self.base[request])
            if self.reserve:
                self.reserved -= self.prompts[request] + self.reserve_out
            self.close(request, self.seg_open[request], iterations - 1)
            self.done(request)

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        while self.completed < self.count:
            if not self.turn():
                raise SimulationError("no request left to arrive and none running")

    def has_work(self) -> bool:
        """Whether a request is running or waiting (arrived) here."""
        return bool(self.decoders or self.prefillers or self.queue)

    def turn(self) -> bool:
        """One scheduling turn: take arrivals, admit, then evict or run iterations.
        Returns False when nothing runs, waits or is still to arrive.
        """
        queue, source = self.queue, self.source
        arrived = source.due(self.now)
        if arrived:
            queue.extend(arrived)
        if not self.decoders and not self.prefillers and not queue:
            arrival = source.next_time()
            if arrival == math.inf:
                return False
            self.now = max(self.now, arrival)
            return True
        running = self.admit()
        if self.series is not None:
            self.series.append((self.now, len(queue), running, self._cached_now()))
        self.schedule(running)
        return True

    def schedule(self, running: int) -> None:
        """Evict, or run one iteration or a steady run of them (``running`` requests)."""
        takes, remainders, taking_decoders = self.share()
        growth = taking_decoders + sum(takes)
        if (self.decoder_filled + self.prefiller_filled + self.offset + growth) * self.kv > self.memory:
            self.evict()
            return
        if self.evictions.stalled:  # evictions since the last iteration: their stall ends
            self.evictions.progress()
        partial = len(takes) == 1 and takes[0] < remainders[0]
        if taking_decoders == len(self.decoders) and (not takes or partial):
            self.steady(takes, remainders, partial, growth, running)
        else:
            self.single(takes, taking_decoders)

    def _cached_now(self) -> int:
        """Positions the cache holds (idle prefix blocks included)."""
        idle = self.prefix.idle if self.prefix is not None else 0
        return self.decoder_filled + self.prefiller_filled + self.offset + idle

    def _trim(self, occupied: int) -> None:
        """Evict idle prefix blocks until ``occupied`` positions and the rest fit."""
        if self.prefix is not None and self.prefix.idle:
            self.prefix.trim(occupied, self.kv, self.memory)

    def admit(self) -> int:
        """FIFO admission; returns how many requests run."""
        queue, prompts, gen = self.queue, self.prompts, self.gen
        reserve, reserve_out, kv = self.reserve, self.reserve_out, self.kv
        used = self.reserved if reserve else self.decoder_filled + self.prefiller_filled + self.offset
        prefix, evictions = self.prefix, self.evictions
        running = len(self.decoders) + len(self.prefillers)
        while queue and running < self.max_running:
            candidate = queue[0]
            if candidate == evictions.blocked:
                break
            total = prompts[candidate] + gen[candidate]
            need = admission_need(reserve, candidate, prompts[candidate], gen[candidate],
                                  reserve_out, prefix)
            if (used + need) * kv > self.admit_limit:
                break
            queue.popleft()
            if self.admitted[candidate] < 0:
                self.admitted[candidate] = self.now
            hit = 0
            if prefix is not None:
                # the cached blocks of its prefix: only the rest is prefilled
                hit = prefix.take(candidate, total)
                self.offset = prefix.excess
            if evictions.swap:
                # A swapped cache comes back from host memory (what the prefix cache
                # does not hold) instead of being recomputed.
                self.now, back = evictions.swap_in(candidate, hit, self.now)
                if back:
                    self.fil[candidate] = back
            if hit > self.fil[candidate]:
                self.fil[candidate] = hit
            self.prefillers.append(candidate)
            self.prefiller_filled += self.fil[candidate]  # 0 unless it arrives with its prompt cached
            used += need
            running += 1
            if reserve:
                self.reserved += need
        if not running:
            head = queue[0]
            raise cannot_admit(head, prompts[head] + gen[head], kv, self.admit_limit)
        self._trim(self.decoder_filled + self.prefiller_filled + self.offset)
        return running

    def decoder_share(self, width: int = 1) -> tuple[int, float]:
        """How many decoders take part in the iteration, each taking ``width`` positions
        of a chunked policy's budget, and the budget left for prefills.
        """
        n_dec = len(self.decoders)
        budget = self.token_budget
        if budget == math.inf:
            return n_dec, math.inf
        taking = min(n_dec, int(budget) // width)
        return taking, budget - taking * width

    def share(self) -> tuple[list[int], list[int], int]:
        """The iteration's token budget in running order: decoders first."""
        taking_decoders, left = self.decoder_share()
        prompts, gen, fil = self.prompts, self.gen, self.fil
        # prompts alone while one has more than a position to fill (one left is a decode's
        # work: handed over with its cache, or swapped back in); the decoders wait
        prefill_only = not self.mixed and any(prompts[r] + gen[r] - fil[r] > 1
                                              for r in self.prefillers)
        if prefill_only:
            taking_decoders, left = 0, self.token_budget
        takes: list[int] = []
        remainders: list[int] = []
        queue = PrefillQueue(self.whole, prefill_only or not self.decoders)
        for request in self.prefillers:
            if left <= 0:
                break
            remaining = prompts[request] + gen[request] - fil[request]
            take = queue.take(remaining, left)
            if queue.waiting:
                break
            takes.append(take)
            remainders.append(remaining)
            left -= take
        return takes, remainders, taking_decoders

    def evict(self) -> None:
        """Evict the newest running request; it re-prefills prompt + generated later."""
        fil = self.fil
        if self.prefillers:
            victim = self.prefillers.pop()
            self.prefiller_filled -= fil[victim]
        else:
            victim = self.decoders.pop()
            elapsed = self.iterations - self.base[victim]
            self.gen[victim] += elapsed
            fil[victim] += elapsed
            self.decoding[victim] = False
            self.decoder_filled -= fil[victim]
            if self.seg_open[victim] <= self.iterations - 1:
                self.close(victim, self.seg_open[victim], self.iterations - 1)
        own = fil[victim]
        if self.prefix is not None:
            # its prefix blocks stay cached (idle once nobody references them)
            own -= self.prefix.held[victim] * self.prefix.block
            self.prefix.leave(victim, fil[victim], self.now)
            self.offset = self.prefix.excess
        if self.reserve:
            self.reserved -= self.prompts[victim] + self.reserve_out
        self.queue.appendleft(victim)
        self.now = self.evictions.evict(victim, own, fil[victim], self.now)
        fil[victim] = 0

    def _next_due(self) -> int:
        heap = self.finish_heap
        while True:
            due, request = heap[0]
            if self.decoding[request] and self.finish_at[request] == due:
                return due
            heapq.heappop(heap)

    def _fits(self, growth: int, length: int) -> int:
        """Iterations of the run the cache check passes: (C + j·g + g)·kv ≤ memory."""
        kv, memory = self.kv, self.memory
        current = self.decoder_filled + self.prefiller_filled + self.offset
        fits = int((memory / kv - current - growth) // growth) + 1
        while fits > 1 and (current + (fits - 1) * growth + growth) * kv > memory:
            fits -= 1
        while (current + fits * growth + growth) * kv <= memory and fits < length:
            fits += 1
        return fits

    def steady(self, takes: list[int], remainders: list[int], partial: bool, growth: int,
               running: int) -> None:
        """A run of identical-composition iterations."""
        length = self.limit - self.iterations
        if length <= 0:
            raise out_of_iterations(self.limit, self.completed, self.count,
                                    self.evictions.preemptions)
        n_dec = len(self.decoders)
        if n_dec:
            length = min(length, self._next_due() - self.iterations)
        positions = n_dec
        attention = self.decoder_filled + n_dec  # each decode: one query over c cached + itself
        cached = self.decoder_filled
        step_attention = step_cached = n_dec
        sequences = n_dec
        if partial:
            chunk = takes[0]
            head = self.prefillers[0]
            already = self.fil[head]
            length = min(length, (remainders[0] - 1) // chunk)
            positions += chunk
            attention += chunk * already + chunk * (chunk + 1) // 2
            cached += already
            step_attention += chunk * chunk
            step_cached += chunk
            sequences += 1
        length = min(length, self._fits(growth, length))
        queue = self.queue
        if queue and not self.reserve and running < self.max_running:
            # On-demand admission charges only cached positions of the running
            # requests, so a request admitted this turn but not yet prefilled stops
            # counting next turn: the head may fit then, though not now.  Later
            # turns only cache more, so the next turn is the one to check.
            waiting = queue[0]
            current = self.decoder_filled + self.prefiller_filled + self.offset
            # idle blocks evicted during the run change the hit and the revived
            # blocks alike: the need stays what it is now
            need = admission_need(False, waiting, self.prompts[waiting], self.gen[waiting],
                                  self.reserve_out, self.prefix)
            if (current + growth + need) * self.kv <= self.admit_limit:
                length = 1
        arrival = self.source.next_time()
        watch = not queue and arrival < math.inf
        if watch:
            # Iteration times never shrink within a run: bound the run by the arrival.
            first_dt = self.time_from_counts(positions, attention, cached, sequences, None, n_dec)
            length = min(length, int((arrival - self.now) / first_dt) + 2)
        done = self._advance(length, watch, arrival, positions, attention, step_attention,
                             cached, step_cached, sequences, n_dec)
        self.iterations += done
        self.decoder_filled += done * n_dec
        self.busy += done * n_dec
        if n_dec:
            self.decode_steps += done
        if partial:
            self.fil[head] += done * chunk
            self.prefiller_filled += done * chunk
        self._trim(self.decoder_filled + self.prefiller_filled + self.offset)
        self.finish_due()

    def _advance(self, length: int, watch: bool, arrival: float, positions: int, attention: int,
                 step_attention: int, cached: int, step_cached: int, sequences: int,
                 decodes: int) -> int:
        """Price ``length`` iterations (fewer when an arrival comes first); returns how many."""
        decoders = len(self.decoders)
        if length < SCALAR_RUN:
            done = 0
            now = first = self.now
            inner = 0.0
            while done < length:
                if done and watch and now >= arrival:
                    break
                previous = now
                now += self.time_from_counts(positions, attention + done * step_attention,
                                             cached + done * step_cached, sequences, None,
                                             decodes)
                if done:
                    gap = now - previous
                    inner = max(inner, gap)
                    if decoders:
                        self._scalar_gaps.append(gap)
                        self._scalar_weights.append(decoders)
                else:
                    first = now
                done += 1
            self.now = now
            if len(self._scalar_gaps) > 1 << 16:
                self._flush_scalar_gaps()
            self.block(first, now, inner)
            return done
        ends = self.run_ends(self.now, length, positions, attention, step_attention, cached,
                             step_cached, sequences, decodes)
        if watch:
            done = 1 + int(np.searchsorted(ends[: length - 1], arrival, side="left"))
            ends = ends[:done]
        else:
            done = length
        self.now = float(ends[-1])
        inner = 0.0
        if done > 1:
            inside = np.diff(ends)
            inner = float(inside.max())
            if decoders:
                self.gaps.add(inside, decoders)
        self.block(float(ends[0]), self.now, inner)
        return done

    def block(self, first: float, last: float, inner: float) -> None:
        """Record a block of iterations that starts at iteration ``self.iterations``."""
        self.block_start.append(self.iterations)
        self.block_first.append(first)
        self.block_last.append(last)
        self.block_entry.append(first - self.last_end if self.iterations else 0.0)
        self.block_inner.append(inner)
        self.last_end = last

    def _flush_scalar_gaps(self) -> None:
        if self._scalar_gaps:
            self.gaps.add(np.frombuffer(self._scalar_gaps, dtype=np.float64),
                          np.frombuffer(self._scalar_weights, dtype=np.int64))
            self._scalar_gaps = array("d")
            self._scalar_weights = array("q")

    def single(self, takes: list[int], taking_decoders: int) -> None:
        """One iteration with prefill completions (or starved decoders)."""
        if self.iterations >= self.limit:
            raise out_of_iterations(self.limit, self.completed, self.count,
                                    self.evictions.preemptions)
        fil, base, decoders = self.fil, self.base, self.decoders
        positions = taking_decoders
        if taking_decoders == len(decoders):
            attention = self.decoder_filled + taking_decoders
            cached = self.decoder_filled
        else:
            cached = 0
            for request in decoders[:taking_decoders]:
                cached += fil[request] + (self.iterations - base[request])
            attention = cached + taking_decoders
        for request, take in zip(self.prefillers, takes):
            positions += take
            attention += take * fil[request] + take * (take + 1) // 2
            cached += fil[request]
        self._trim(self.decoder_filled + self.prefiller_filled + self.offset + positions)
        self.now += self.time_from_counts(positions, attention, cached,
                                          taking_decoders + len(takes), None, taking_decoders)
        self.block(self.now, self.now, 0.0)
        index = self.iterations
        self.iterations += 1
        self.decoder_filled += taking_decoders
        # Starved decoders emit nothing this iteration: rebase them one iteration on.
        for request in decoders[taking_decoders:]:
            elapsed = index - base[request]
            self.gen[request] += elapsed
            fil[request] += elapsed
            base[request] = index + 1
            if self.seg_open[request] <= index - 1:
                self.close(request, self.seg_open[request], index - 1)
            self.seg_open[request] = index + 1
            self.finish_at[request] = base[request] + self.outputs[request] - self.gen[request]
            heapq.heappush(self.finish_heap, (self.finish_at[request], request))
        later = taking_decoders + self._complete_prefills(takes, index)
        if later:
            self.busy += later
            self.decode_steps += 1
        self.finish_due()

    def _complete_prefills(self, takes: list[int], index: int) -> int:
        """Apply the prefill chunks of iteration ``index``; returns the re-prefills whose
        token follows tokens sent before an eviction.
        """
        fil, gen, prompts, outputs = self.fil, self.gen, self.prompts, self.outputs
        later = completions = 0
        for request, take in zip(self.prefillers, takes):
            fil[request] += take
            self.prefiller_filled += take
            if fil[request] != prompts[request] + gen[request]:
                continue
            completions += 1
            if self.prefix is not None:
                self.prefix.register(request, fil[request], self.now, running=True)
                self.offset = self.prefix.excess
            if gen[request]:
                later += 1
            gen[request] += 1
            self.prefiller_filled -= fil[request]
            if gen[request] == outputs[request]:
                self.close(request, index, index)
                if self.reserve:
                    self.reserved -= prompts[request] + self.reserve_out
                self.done(request)
                continue
            self.decoder_filled += fil[request]
            self.base[request] = self.iterations
            self.seg_open[request] = index
            self.decoding[request] = True
            self.finish_at[request] = self.iterations + outputs[request] - gen[request]
            heapq.heappush(self.finish_heap, (self.finish_at[request], request))
            self.decoders.append(request)
        if completions:
            del self.prefillers[:completions]
        return later

    # ------------------------------------------------------------------ results
    def result(self) -> tuple[Blocks, Segments, Counters]:
        """(blocks, segments, counters) for
        :func:`~infermodel.simulator.records.timeline_record`.
        """
        self._flush_scalar_gaps()
        blocks = Blocks(np.frombuffer(self.block_start, dtype=np.int64),
                        np.frombuffer(self.block_first, dtype=np.float64),
                        np.frombuffer(self.block_last, dtype=np.float64),
                        np.frombuffer(self.block_entry, dtype=np.float64),
                        np.frombuffer(self.block_inner, dtype=np.float64), self.gaps)
        segments = (
            np.array(self.seg_request, dtype=np.int64),
            np.array(self.seg_first, dtype=np.int64),
            np.array(self.seg_last, dtype=np.int64),
        )
        evictions = self.evictions
        counters = {"end": self.now, "preemptions": evictions.preemptions,
                    "rollbacks": evictions.rollbacks, "recomputed": evictions.recomputed,
                    "swapped": evictions.swapped_tokens, "iterations": self.iterations,
                    "busy": self.busy, "decode_steps": self.decode_steps,
                    "request_preemptions": np.array(evictions.preempted, dtype=np.int64),
                    "request_rollbacks": np.array(evictions.rolled_back, dtype=np.int64),
                    "admitted": first_admissions(self.admitted),
                    "series": self.series,
                    "prefix_hits": (None if self.prefix is None
                                    else np.array(self.prefix.hits, dtype=np.int64)),
                    "prefix_evicted": 0 if self.prefix is None else self.prefix.evicted}
        return blocks, segments, counters
