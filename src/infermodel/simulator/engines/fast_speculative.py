"""The fast engine's continuous policies with speculative decoding.

A verification step emits a random number of tokens per sequence (see
:mod:`infermodel.simulator.speculation`), so iterations no longer repeat with the same
composition and cannot be priced in runs: :class:`SpeculativeRun` keeps
:class:`~infermodel.simulator.engines.fast_continuous.ContinuousRun`'s admission, eviction, chunk
budget, swap and prefix rules and its timeline records, and takes one iteration per
scheduling turn.  Every decoding request is kept current (its values rebased to the
iteration count after each iteration), so the parent's bookkeeping of evictions and
segments applies unchanged.

Inter-token gaps: the tokens one step emits arrive together.  The first of them
follows the request's previous token by the step's time; the others follow it by 0.
So every token after a request's first contributes one gap, as serving benchmarks
count per-token inter-token latency, and TPOT = (last − first)/(n − 1) is the mean gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..cost import CostModel
from ..load import Source
from ..policies import Policy
from ..records import Blocks, Counters, Segments, TokenTimes
from ..rules import out_of_iterations
from ..speculation import Acceptance, Speculation
from ..workload import Workload
from .fast_continuous import ContinuousRun

if TYPE_CHECKING:
    from .fast import RunTimes

__all__ = ["SpeculativeRun", "static_batch"]


class SpeculativeRun(ContinuousRun):
    """:class:`ContinuousRun` with every decode a verification step of ``k + 1`` positions."""

    def __init__(self, speculation: Speculation, workload: Workload, cost: CostModel,
                 policy: Policy, limit: int, source: Source, run_times: RunTimes,
                 series: bool = False):
        super().__init__(workload, cost, policy, limit, source, run_times, series)
        self.speculation = speculation
        self.cost = cost
        self.acceptance = Acceptance(speculation, workload.seed, self.outputs)
        self.zero_gaps = 0  # tokens that arrive together with the one before them

    def decoder_share(self, width: int = 1) -> tuple[int, float]:
        """Each verifying sequence takes k + 1 positions of a chunked policy's budget."""
        return super().decoder_share(self.speculation.width)

    def schedule(self, running: int) -> None:
        """Evict, or run one iteration of verification steps and prefill chunks."""
        takes, _, taking_decoders = self.share()
        verifying = self.decoders[:taking_decoders]
        gen, outputs = self.gen, self.outputs
        emitted = [self.acceptance.tokens(r, outputs[r] - gen[r]) for r in verifying]
        growth = sum(emitted) + sum(takes)
        if (self.decoder_filled + self.prefiller_filled + self.offset + growth) * self.kv > self.memory:
            self.evict()
            return
        if self.evictions.stalled:
            self.evictions.progress()
        self.verify(takes, verifying, emitted)

    def verify(self, takes: list[int], verifying: list[int], emitted: list[int]) -> None:
        """One iteration: verification steps, prefill chunks, completions."""
        if self.iterations >= self.limit:
            raise out_of_iterations(self.limit, self.completed, self.count,
                                    self.evictions.preemptions)
        fil, gen, decoders = self.fil, self.gen, self.decoders
        self._trim(self.decoder_filled + self.prefiller_filled + self.offset + sum(emitted) + sum(takes))
        chunks = [(take, fil[request]) for request, take in zip(self.prefillers, takes)]
        self.now += self.speculation.step_time(self.cost, [fil[r] for r in verifying], chunks)
        self.block(self.now, self.now, 0.0)
        index = self.iterations
        self.iterations += 1
        finished = []
        for request, tokens in zip(verifying, emitted):
            fil[request] += tokens
            gen[request] += tokens
            self.decoder_filled += tokens
            self.zero_gaps += tokens - 1
            done = gen[request] == self.outputs[request]
            self.acceptance.taken(request, done)
            if done:
                finished.append(request)
        # Starved decoders emit nothing this iteration: their token segment ends.
        for request in decoders[len(verifying):]:
            if self.seg_open[request] <= index - 1:
                self.close(request, self.seg_open[request], index - 1)
            self.seg_open[request] = index + 1
        for request in finished:
            decoders.remove(request)
            self.decoding[request] = False
            self.decoder_filled -= fil[request]
            if self.reserve:
                self.reserved -= self.prompts[request] + self.reserve_out
            self.close(request, self.seg_open[request], index)
            self.done(request)
        later = len(verifying) + self._complete_prefills(takes, index)
        self.finish_heap.clear()  # finishing is decided per step here, not by a schedule
        for request in decoders:
            self.base[request] = self.iterations
        if later:
            self.busy += later
            self.decode_steps += 1

    def result(self) -> tuple[Blocks, Segments, Counters]:
        blocks, segments, counters = super().result()
        if self.zero_gaps:
            blocks.gaps.add(np.zeros(1), self.zero_gaps)
        return blocks, segments, counters


# ---------------------------------------------------------------------------- static
def static_batch(cost: CostModel, acceptance: Acceptance, batch: slice, prompts: np.ndarray,
                 outputs: np.ndarray, tokens: TokenTimes,
                 prefill_end: float) -> tuple[float, int, int, int]:
    """Decode one static batch with verification steps (fast engine): every slot, done
    or not, is verified each step (a static batch runs its finished slots padded, which
    grow by one position); the unfinished ones emit their drawn tokens.  Fills
    ``tokens`` for the batch; returns the end time, steps, busy slot-steps and the
    batch's final cached positions.
    """
    speculation = acceptance.speculation
    requests = range(batch.start, batch.stop)
    filled = [int(p) for p in prompts]
    goal = [int(o) for o in outputs]
    generated = [1] * len(goal)
    last = [prefill_end] * len(goal)
    max_gap = [0.0] * len(goal)
    gaps: list[float] = []
    zeros = steps = busy = 0
    now = prefill_end
    left = sum(1 for o in goal if o > 1)
    while left:
        emitted = [acceptance.tokens(r, o - g) if g < o else 0
                   for r, g, o in zip(requests, generated, goal)]
        now += speculation.step_time(cost, filled)
        steps += 1
        for i, tokens_now in enumerate(emitted):
            if not tokens_now:
                filled[i] += 1
                continue
            gap = now - last[i]
            gaps.append(gap)
            max_gap[i] = max(max_gap[i], gap)
            last[i] = now
            zeros += tokens_now - 1
            filled[i] += tokens_now
            generated[i] += tokens_now
            busy += 1
            done = generated[i] == goal[i]
            acceptance.taken(requests[i], done)
            left -= done
    tokens.first[batch] = prefill_end
    tokens.last[batch] = last
    tokens.max_gap[batch] = max_gap
    if gaps:
        tokens.gaps.add(np.array(gaps), 1)
    if zeros:
        tokens.gaps.add(np.zeros(1), zeros)
    return now, steps, busy, sum(filled)
