"""The reference engine's state with speculative decoding (see
:mod:`infermodel.simulator.speculation`): one verification step per decoding request per
iteration, applied literally, every token stamped; the yardstick the fast engine's
:class:`~infermodel.simulator.engines.fast_speculative.SpeculativeRun` is tested
against.  The reference engine's module needs no knowledge of speculation beyond
choosing this state.
"""

from __future__ import annotations

from ..cost import CostModel
from ..policies import Policy
from ..speculation import Acceptance, Speculation
from ..workload import Workload
from .reference import Reference

__all__ = ["SpeculativeReference"]


class SpeculativeReference(Reference):
    """The reference engine's state with speculative verification steps: one per
    decoding request per iteration, literally.
    """

    def __init__(self, speculation: Speculation, workload: Workload, cost: CostModel,
                 policy: Policy, limit: int, series: bool):
        super().__init__(workload, cost, policy, limit, series)
        self.speculation = speculation
        self.acceptance = Acceptance(speculation, workload.seed, self.outputs)

    def static_turn(self) -> None:
        if not self.running:
            super().static_turn()  # dispatch and prefill a batch as without speculation
            return
        running, filled, generated, outputs = self.running, self.filled, self.generated, self.outputs
        emitted = [self.acceptance.tokens(r, outputs[r] - generated[r])
                   if generated[r] < outputs[r] else 0 for r in running]
        self.now += self.speculation.step_time(self.cost, [filled[r] for r in running])
        self.count_iteration()
        self.decode_steps += 1
        for r, tokens in zip(running, emitted):
            if not tokens:
                filled[r] += 1  # a finished slot runs padded
                continue
            filled[r] += tokens
            generated[r] += tokens
            self.stamps[r].extend([self.now] * tokens)
            self.busy += 1
            self.acceptance.taken(r, generated[r] == outputs[r])
        if all(generated[r] == outputs[r] for r in running):
            self.retire(running)
            self.running = []

    def continuous_turn(self) -> None:
        budget = self.begin_turn()
        running, filled, generated, prompts = self.running, self.filled, self.generated, self.prompts
        width = self.speculation.width
        chunks: list[tuple[int, int]] = []
        scheduled: list[tuple[int, int]] = []
        verifying: list[tuple[int, int]] = []
        prefill_only = self.prefill_only()
        prefills = self.prefills(prefill_only)
        for r in running:
            if self.decoding[r]:  # a verification step, if the budget holds its k + 1
                if budget >= width and not prefill_only:
                    verifying.append((r, self.acceptance.tokens(r, self.outputs[r] - generated[r])))
                    budget -= width
                continue
            remaining = prompts[r] + generated[r] - filled[r]
            take = prefills.take(remaining, budget)
            if take > 0:
                chunks.append((take, filled[r]))
                scheduled.append((r, take))
                budget -= take
        if not self.make_room(sum(t for _, t in verifying) + sum(take for _, take in scheduled)):
            return
        self.now += self.speculation.step_time(self.cost, [filled[r] for r, _ in verifying], chunks)
        self.count_iteration()
        for r, tokens in verifying:
            filled[r] += tokens
            generated[r] += tokens
            self.stamps[r].extend([self.now] * tokens)
            self.acceptance.taken(r, generated[r] == self.outputs[r])
        self.complete(scheduled, len(verifying))  # prefill chunks; their first tokens
