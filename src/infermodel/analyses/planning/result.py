"""A plan's answer: the feasible deployments ranked by monthly cost, the best one with its
intervals and its headroom to the next-cheaper option that fails, the cheapest
deployment per card, and why every other candidate was set aside.

Costs follow :mod:`infermodel.analyses.costs`: a deployment's rent per hour and per
month (730.5 h), and per million tokens at the **planned load** with every objective
met — prompt and output tokens together, and output tokens alone, each labelled.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import Any

import attrs

from ..costs import CostBasis
from .analytic import Screen
from .space import Candidate


@attrs.frozen
class Considered:
    """A candidate as read from the scenario: its overrides, and either the reason it
    cannot be planned or its analytic screen and price per replica.
    """

    candidate: Candidate
    overrides: dict = attrs.field(eq=False)
    reason: str = ""
    screen: Screen | None = None
    price_per_replica: float | None = None
    warnings: tuple[str, ...] = ()


@attrs.frozen
class Planned:
    """One deployment: a candidate at a replica count, with its trial and price."""

    candidate: Candidate
    replicas: int
    trial: Any
    cost: CostBasis
    overrides: dict = attrs.field(eq=False)
    feasible: bool = True
    below: Any = None
    note: str = ""

    @property
    def gpus(self) -> int:
        return self.candidate.gpus * self.replicas

    @property
    def label(self) -> str:
        return f"{self.replicas} × {self.candidate.label}"

    def command(self, scenario_path: str) -> str:
        """The ``infermodel simulate`` line that reproduces this deployment."""
        words = ["infermodel", "simulate", shlex.quote(scenario_path)]
        for key, value in self.overrides.items():
            words += ["--set", shlex.quote(f"{key}={_toml(value)}")]
        if not self.candidate.pools.disaggregated and self.trial is not None and \
                self.overrides.get("simulation.concurrency") is None:
            words += ["--replicas", str(self.replicas)]
        return " ".join(words)

    def to_dict(self) -> dict[str, Any]:
        from ...formatting import json_value

        metrics = {} if self.trial is None else {
            name: json_value(value) for name, value in self.trial.metrics.items()}
        verdict = None if self.trial is None else self.trial.verdict
        out: dict[str, Any] = {
            "hardware": self.candidate.hardware, "engine": self.candidate.engine,
            **self.candidate.json_degrees(), "pools": self.candidate.pools.label,
            "replicas": self.replicas, "gpus": self.gpus, "feasible": self.feasible,
            "cost_per_month": json_value(self.cost.per_month),
            "cost_per_million_tokens": json_value(self.cost.per_million_tokens),
            "cost_per_million_output_tokens": json_value(self.cost.per_million_output),
            "cost": self.cost.to_dict(), "metrics": metrics,
            "verdict": None if verdict is None else verdict.to_dict(),
            "requests": None if self.trial is None else self.trial.requests,
            "overrides": dict(self.overrides),
        }
        if self.note:
            out["note"] = self.note
        return out


def _toml(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value) if any(c in value for c in " <=\"'") else value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v) if not isinstance(v, str) else json.dumps(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(json.dumps(v) if isinstance(v, str) else _toml(v) for v in value) + "]"
    return str(value)


@attrs.frozen
class Point:
    """A simulated deployment on the Pareto plot."""

    label: str
    hardware: str
    per_gpu: float
    per_user: float
    met: bool


@attrs.frozen
class PlanResult:
    """What ``infermodel plan`` found (see the module docstring)."""

    scenario: Any = attrs.field(repr=False)
    table: Any = attrs.field(repr=False)
    settings: Any
    considered: tuple[Considered, ...]
    deployments: tuple[Planned, ...]
    failed: tuple[Planned, ...]
    #: Why a candidate (by its index) was set aside or has no feasible replica count.
    notes: dict = attrs.field(eq=False)
    #: The objectives every candidate was judged by (None when none was simulated).
    slo: Any = None
    points: tuple[Point, ...] = ()
    runs: int = 0
    next_cheaper: Planned | None = None
    #: Each finalist with its analytic curve (tokens/s per user, per GPU) for the plot.
    curves: tuple = attrs.field(default=(), eq=False, repr=False)
    #: The efficiency model's intervals on the best deployment's objectives
    #: (:mod:`.model_error`; None where its preset calibrated none).
    model_intervals: Any = attrs.field(default=None, eq=False)

    def plot(self, output):
        """Draw the Pareto plot and the cross-card table (see :mod:`.figure`)."""
        from .figure import plot_plan

        return plot_plan(self, output)

    def launch(self) -> str:
        """The chosen deployment's launch command (see :mod:`.launch`)."""
        from .launch import launch_text

        return launch_text(self)

    @property
    def best(self) -> Planned | None:
        return self.deployments[0] if self.deployments else None

    def per_card(self) -> dict[str, Planned]:
        """The cheapest feasible deployment of each card."""
        out: dict[str, Planned] = {}
        for found in self.deployments:
            out.setdefault(found.candidate.hardware, found)
        return out

    @property
    def load(self) -> str:
        table = self.table
        if table.rate is not None:
            return f"{table.rate:g} requests/s"
        return f"{table.concurrency} concurrent clients"

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "scenario": self.scenario.name,
            "load": {"rate": self.table.rate, "concurrency": self.table.concurrency},
            "slo": None if self.slo is None else self.slo.to_dict(),
            "best": None if best is None else best.to_dict(),
            "deployments": [d.to_dict() for d in (*self.deployments, *self.failed)],
            "next_cheaper_infeasible": None if self.next_cheaper is None else self.next_cheaper.to_dict(),
            "cheapest_per_card": {card: d.to_dict() for card, d in self.per_card().items()},
            "set_aside": [{"hardware": c.candidate.hardware, "engine": c.candidate.engine,
                           **c.candidate.json_degrees(), "pools": c.candidate.pools.label,
                           "reason": self.notes[i]}
                          for i, c in enumerate(self.considered) if i in self.notes],
            "runs": self.runs,
            "intervals": _interval_words(self.settings.confidence),
            "model_intervals": None if self.model_intervals is None else self.model_intervals.to_dict(),
        }

    def text(self) -> str:
        from .report import plan_text

        return plan_text(self)


def _interval_words(confidence: float) -> str:
    from ...simulator.verdicts import INTERVAL_METHOD

    return f"{confidence:.0%} {INTERVAL_METHOD}"


def _deployment(considered: Considered, finalist, outcome, table, replicas: int,
                trial, feasible: bool = True, note: str = "") -> Planned:
    candidate = considered.candidate
    metrics = trial.metrics
    if table.rate is not None:
        rate, rate_words = table.rate, f"{table.rate:g} requests/s"
    else:
        rate = metrics["requests_per_s"] * replicas
        rate_words = f"{table.concurrency} clients, {rate:.4g} requests/s simulated"
    verdict = "every objective met" if feasible else "objectives NOT met"
    cost = CostBasis(finalist.price_per_replica * replicas, rate * metrics["mean_output_tokens"],
                     rate * metrics["mean_prompt_tokens"],
                     rate=f"at the planned load ({rate_words}, {verdict})")
    overrides = dict(considered.overrides)
    overrides["simulation.workload.count"] = trial.requests
    if table.concurrency is not None:
        overrides["simulation.concurrency"] = [finalist.clients(replicas)]
    if candidate.pools.disaggregated:
        overrides["simulation.disaggregation.prefill"] = candidate.pools.prefill * replicas
        overrides["simulation.disaggregation.decode"] = candidate.pools.decode * replicas
    return Planned(candidate, replicas, trial, cost, overrides, feasible, note=note)


def assemble(scenario, table, settings, considered: Sequence[Considered], finalists, outcomes
             ) -> PlanResult:
    """Rank what the search found, and measure the best deployment's headroom."""
    by_index = {f.index: f for f in finalists}
    notes: dict[int, str] = {}
    found, failed, points, runs = [], [], [], 0
    for outcome in outcomes:
        seen, finalist = considered[outcome.index], by_index[outcome.index]
        runs += len(outcome.trials)
        for t in outcome.trials:
            points.append(_point(seen.candidate, finalist, t, table))
        if outcome.replicas is None:
            notes[outcome.index] = outcome.note
            last = outcome.trials[-1] if outcome.trials else None
            if last is not None:
                failed.append(_deployment(seen, finalist, outcome, table, last.replicas, last,
                                          feasible=False, note=outcome.note))
            continue
        chosen = outcome.trial(outcome.replicas)
        found.append(_deployment(seen, finalist, outcome, table, outcome.replicas, chosen))
    for index, seen in enumerate(considered):
        if seen.reason:
            notes[index] = seen.reason
        elif seen.screen is not None and not seen.screen.feasible:
            notes[index] = seen.screen.reason
    found.sort(key=lambda d: (d.cost.price_per_hour, d.gpus, d.candidate.label))
    next_cheaper = None
    refined: set[str] = set()
    while found and found[0].candidate.label not in refined:
        first = found.pop(0)
        settled, checked = _refine(first, considered, finalists, outcomes, table, settings)
        runs += checked
        refined.add(first.candidate.label)
        (found if settled.feasible else failed).append(settled)
        found.sort(key=lambda d: (d.cost.price_per_hour, d.gpus, d.candidate.label))
    if found:
        next_cheaper = _next_cheaper(found[0], considered, finalists, outcomes, table)
    from .figure import curve

    slo = finalists[0].slo if finalists else None
    curves = tuple((f, curve(f)) for f in finalists)
    return PlanResult(scenario, table, settings, tuple(considered), tuple(found), tuple(failed),
                      notes, slo, tuple(points), runs, next_cheaper, curves)


#: The most replica counts the edge refinement judges (each at a growing request count).
MAX_REFINEMENTS = 24


def _refine(best: Planned, considered, finalists, outcomes, table, settings
            ) -> tuple[Planned, int]:
    """The best deployment's edge judged on one request count for both sides: its replica
    count meets the objectives and one replica fewer misses them on the same requests
    (the seed and count ``simulate`` reproduces them with), the requests growing from
    the search's count while its own verdict is unclear.  The count moves down while one
    fewer also meets them, up while it does not meet them itself.
    """
    from .search import GROWTH
    from .search import trial as judge_count

    finalist = next(f for f in finalists if considered[f.index].candidate == best.candidate)
    # The search's own trials of this candidate are reused (same seed, same counts).
    judged: dict[tuple[int, int], object] = {
        (t.replicas, t.requests): t for o in outcomes if o.index == finalist.index for t in o.trials}

    def at(replicas: int, requests: int):
        if (replicas, requests) not in judged:
            judged[replicas, requests] = judge_count(finalist, replicas, settings,
                                                     requests=requests, grow=False)
        return judged[replicas, requests]

    replicas, requests = best.replicas, best.trial.requests
    below = None
    for _ in range(MAX_REFINEMENTS):
        top = at(replicas, requests)
        if not top.met:
            if replicas >= finalist.max_replicas:
                break
            replicas += 1
            continue
        if replicas == 1:
            below = None
            break
        below = at(replicas - 1, requests)
        if below.met:
            replicas -= 1
            continue
        if top.clear or requests >= settings.max_requests:
            break
        requests = min(GROWTH * requests, settings.max_requests)
    top = at(replicas, requests)
    refined = _deployment(considered[finalist.index], finalist, None, table, replicas, top,
                          feasible=top.met)
    new = len(judged) - sum(len(o.trials) for o in outcomes if o.index == finalist.index)
    return attrs.evolve(refined, below=below if replicas > 1 else None), new


def _point(candidate: Candidate, finalist, trial, table) -> Point:
    m = trial.metrics
    replicas = 1 if table.concurrency is not None else trial.replicas
    per_gpu = m["throughput_tokens_per_s"] / (replicas * finalist.gpus_per_replica)
    tpot = m.get("tpot_p50", math.nan)
    per_user = 1 / tpot if tpot and tpot > 0 else math.nan
    return Point(f"{trial.replicas} × {candidate.label}", candidate.hardware, per_gpu, per_user,
                 trial.met)


def _next_cheaper(best: Planned, considered, finalists, outcomes, table) -> Planned | None:
    """The most expensive simulated option cheaper than ``best`` that misses the
    objectives: how far the answer is from one that fails.
    """
    by_index = {f.index: f for f in finalists}
    options = []
    if best.below is not None and not best.below.met:
        finalist = next(f for f in finalists if considered[f.index].candidate == best.candidate)
        options.append((considered[finalist.index], finalist, best.below))
    for outcome in outcomes:
        finalist = by_index[outcome.index]
        for t in outcome.trials:
            price = finalist.price_per_replica * t.replicas
            if not t.met and price < best.cost.price_per_hour:
                options.append((considered[outcome.index], finalist, t))
    if not options:
        return None
    seen, finalist, t = max(options, key=lambda o: (o[1].price_per_replica * o[2].replicas,
                                                     o[2].requests))
    return _deployment(seen, finalist, None, table, t.replicas, t, feasible=False,
                       note=_missed(t))


def _missed(trial) -> str:
    """What a trial misses, in words: ``p95 ITL 57.2 ms > 50 ms``."""
    from ...simulator.policies import percentile_key

    parts = []
    verdict = trial.verdict
    for target in verdict.targets:
        if target.value > target.limit:
            parts.append(f"{percentile_key(target.percentile)} {target.metric.upper()} "
                         f"{_seconds(target.value)} > {_seconds(target.limit)}")
    if verdict.share is not None and verdict.goodput < verdict.share:
        parts.append(f"goodput {verdict.goodput:.1%} < {verdict.share:.0%}")
    if verdict.overload == "overloaded":
        parts.append("overloaded (the queue grows)")
    return "misses " + ", ".join(parts) if parts else "unclear"


def _seconds(value: float) -> str:
    return f"{value:.3g} s" if value >= 1 else f"{value * 1000:.3g} ms"


__all__ = ["Considered", "PlanResult", "Planned", "Point", "assemble"]
