"""The simulated part of a plan: each finalist's replica count, judged statistically.

A :class:`Finalist` carries what the simulator needs for one candidate (its cost model,
workload, policy, objectives, routing and price) and nothing of the scenario, so that a
card's search runs in another process or on a Dask worker.  :func:`search_card` takes a
card's finalists in the order of their analytic price bound and, for each, finds the
fewest replicas that meet the objectives:

* it starts at the analytic lower bound and climbs (1, 2, 4, ... replicas more, then
  bisects) until a count is met, then checks the count below;
* every count is judged by :func:`~infermodel.simulator.verdicts.judge`: while the
  verdict is unclear and the point estimates meet the objectives, the requests grow
  fourfold (from ``requests`` up to ``max_requests``), with the same seed, so that the verdict
  grows more certain only where it is close (a count that misses on its estimates is
  not recommended, clear or not, and needs no more requests);
* a finalist whose bound, or whose next count, already costs as much as the card's
  best deployment found so far is not simulated further.

Adding a replica is assumed never to make a deployment miss its objectives at a fixed
rate (the bisection rests on it; ``tests/test_planning.py`` checks it as a property).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

#: The factor an unclear verdict's requests grow by: each step halves its intervals'
#: width (they narrow as 1/√n), and the runs before the last cost a third of it.
GROWTH = 4


@attrs.frozen
class Settings:
    """How verdicts are reached: the seed, the request counts, the confidence."""

    seed: int = 0
    requests: int = 1000
    max_requests: int = 16000
    confidence: float = 0.95


@attrs.frozen
class Finalist:
    """One candidate as the simulator sees it (see the module docstring)."""

    index: int
    cost_model: Any
    workload: Any
    policy: Any
    slo: Any
    price_per_replica: float
    gpus_per_replica: int
    lower: int
    max_replicas: int
    rate: float | None = None
    concurrency: int | None = None
    router: str = "round_robin"
    prefill: int = 0
    decode: int = 0
    link_bandwidth: float = math.inf
    link_latency: float = 0.0

    def clients(self, replicas: int) -> int:
        """Closed-loop clients one replica serves (the load split evenly)."""
        assert self.concurrency is not None
        return math.ceil(self.concurrency / replicas)


@attrs.frozen
class Trial:
    """One simulated replica count: its metrics (the figures a plan reports) and verdict."""

    replicas: int
    requests: int
    metrics: dict = attrs.field(eq=False)
    verdict: Any = attrs.field(eq=False)

    @property
    def met(self) -> bool:
        """Met on the point estimates (what ``simulate`` prints), which a clear verdict
        confirms and an unclear one at the request cap leaves borderline.
        """
        return bool(self.metrics["slo_met"])

    @property
    def clear(self) -> bool:
        return self.verdict.state != "unclear"


@attrs.frozen
class Outcome:
    """What the search found for one finalist: its fewest replicas meeting the objectives
    (None: none within the GPU cap, or not searched), every trial, and why it stopped.
    """

    index: int
    replicas: int | None
    trials: tuple[Trial, ...]
    note: str = ""

    def trial(self, replicas: int) -> Trial | None:
        found = [t for t in self.trials if t.replicas == replicas]
        return found[-1] if found else None


def simulate_count(finalist: Finalist, replicas: int, requests: int, settings: Settings):
    """One run of ``replicas`` replicas with ``requests`` requests: ``(record, metrics)``."""
    from ...simulator import Deployment, run_record

    workload = attrs.evolve(finalist.workload, count=requests)
    if finalist.concurrency is not None:
        drawn = workload.closed_loop(finalist.clients(replicas), 0.0, settings.seed)
        return run_record(finalist.cost_model, drawn, finalist.policy, finalist.slo)
    assert finalist.rate is not None
    if finalist.prefill:
        deployment = Deployment(1, finalist.router, finalist.prefill * replicas,
                                finalist.decode * replicas, finalist.link_bandwidth,
                                finalist.link_latency)
    else:
        deployment = Deployment(replicas, finalist.router)
    drawn = workload.generate(finalist.rate, settings.seed)
    return run_record(finalist.cost_model, drawn, finalist.policy, finalist.slo,
                      deployment=deployment)


#: The metrics a trial keeps (the rest of a run's record is dropped to keep results small).
KEPT = ("ttft_p50", "ttft_p95", "ttft_p99", "itl_p50", "itl_p95", "itl_p99", "tpot_p50",
        "tpot_p95", "e2e_p50", "e2e_p95", "e2e_p99", "throughput_tokens_per_s", "requests_per_s",
        "mean_prompt_tokens", "mean_output_tokens", "goodput", "goodput_fraction", "overloaded",
        "slo_met", "realised_rate", "preemptions", "mean_batch")


def trial(finalist: Finalist, replicas: int, settings: Settings, requests: int | None = None,
          grow: bool = True) -> Trial:
    """Judge ``replicas`` replicas, growing the requests while the verdict is unclear and
    the point estimates meet the objectives: a count is recommended only when it meets
    them clearly, so one that misses them on its estimates is settled (not recommended)
    without more requests.
    """
    from ...simulator.verdicts import judge

    count = requests or settings.requests
    while True:
        record, metrics = simulate_count(finalist, replicas, count, settings)
        verdict = judge(record, metrics, finalist.slo, settings.confidence)
        kept = {k: float(metrics[k]) for k in (*KEPT, *finalist.slo.names()) if k in metrics}
        found = Trial(replicas, count, kept, verdict)
        if found.clear or not found.met or not grow or count >= settings.max_requests:
            return found
        count = min(GROWTH * count, settings.max_requests)


def _fewest(finalist: Finalist, settings: Settings, ceiling: int, trials: list[Trial]) -> int | None:
    """The fewest replicas (at most ``ceiling``) that meet the objectives, or None."""
    def judged(replicas: int) -> Trial:
        found = next((t for t in trials if t.replicas == replicas), None)
        if found is None:
            found = trial(finalist, replicas, settings)
            trials.append(found)
        return found

    low = max(1, min(finalist.lower, ceiling))
    if judged(low).met:
        while low > 1 and judged(low - 1).met:
            low -= 1
        return low
    step, failed = 1, low
    while True:
        nxt = min(failed + step, ceiling)
        if nxt <= failed:
            return None
        if judged(nxt).met:
            break
        failed, step = nxt, step * 2
    high = nxt
    while high - failed > 1:
        middle = (failed + high) // 2
        if judged(middle).met:
            high = middle
        else:
            failed = middle
    return high


def search_card(finalists: Sequence[Finalist], settings: Settings) -> list[Outcome]:
    """Each finalist's fewest replicas, in order, skipping what cannot beat the card's
    best deployment found so far (see the module docstring).
    """
    best = math.inf
    out = []
    for finalist in finalists:
        bound = finalist.lower * finalist.price_per_replica
        if bound >= best:
            out.append(Outcome(finalist.index, None, (), f"not simulated: its analytic bound "
                               f"(USD {bound:,.2f}/h) is no cheaper than this card's best "
                               f"(USD {best:,.2f}/h)"))
            continue
        affordable = finalist.max_replicas
        if math.isfinite(best):
            affordable = min(affordable, math.ceil(best / finalist.price_per_replica) - 1)
        trials: list[Trial] = []
        found = _fewest(finalist, settings, affordable, trials) if affordable >= 1 else None
        note = "" if found is not None else (
            f"no replica count up to {affordable} meets the objectives"
            + ("" if affordable == finalist.max_replicas else " (more would cost as much as "
               "this card's best)"))
        if found is not None:
            best = min(best, found * finalist.price_per_replica)
        out.append(Outcome(finalist.index, found, tuple(trials), note))
    return out


def brute_force_card(finalists: Sequence[Finalist], settings: Settings) -> list[Outcome]:
    """Every finalist at every replica count up to its GPU cap, each judged as the search
    judges it, with no order, bound or pruning: the yardstick the search is measured
    against (``benchmarks/bench_plan.py``).
    """
    out = []
    for finalist in finalists:
        trials = [trial(finalist, replicas, settings)
                  for replicas in range(1, finalist.max_replicas + 1)]
        met = [t.replicas for t in trials if t.met]
        out.append(Outcome(finalist.index, min(met) if met else None, tuple(trials),
                           "" if met else f"no replica count up to {finalist.max_replicas} "
                                          "meets the objectives"))
    return out


__all__ = ["GROWTH", "Finalist", "Outcome", "Settings", "Trial", "brute_force_card", "search_card",
           "simulate_count", "trial"]
