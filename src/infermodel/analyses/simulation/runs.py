"""Simulating a scenario: :func:`simulate` runs the plan read from its ``[simulation]``
table (:mod:`.table`) in the serving simulator, or searches its capacity.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ...errors import Problem, ScenarioError
from .defaults import lever_defaults, policy_with_defaults
from .plan import plan
from .reports import CapacityReport, CapacityReports


class SimulationWarning(UserWarning):
    """A lever's change that the simulation does not include."""



def simulate(scenario, *, policies=None, rates=None, seed=None, engine=None, capacity=False,
             overrides: Mapping[str, Any] | None = None, progress: Callable | None = None,
             concurrency: Sequence[int] | int | None = None, think_time: float | None = None,
             keep_records: bool = False, replicas: int | None = None, router: str | None = None,
             prefill: int | None = None, decode: int | None = None,
             seeds: Sequence[int] | None = None, scheduler: str = "serial",
             address: str | None = None, turns: int | None = None, pool: str = "both"):
    """Simulate a scenario (a path or a :class:`~infermodel.scenario.Scenario`).

    ``concurrency`` (or the table's ``concurrency``) runs a closed loop of that many
    clients instead of open arrivals, each waiting ``think_time`` seconds (or the
    table's ``think_time``) between a response and its next request.

    Returns a :class:`~infermodel.simulator.SimulationResult`, or with ``capacity=True``
    a :class:`CapacityReport` (the highest nominal rate meeting the objectives, its
    neighbours re-checked, and its price from the scenario's cost model).

    >>> r = simulate("scenarios/module10-lab3-policies.toml", policies=["chunked"], rates=[0.2])  # doctest: +SKIP
    >>> round(r.runs[0].metrics["ttft_p50"], 2)  # doctest: +SKIP
    1.09
    """
    from ... import simulator
    from ...scenario import Scenario, load_scenario

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(Path(scenario), overrides)
    elif overrides:
        scenario = scenario.with_overrides(overrides)
    clients: Sequence[int] | None = (
        [concurrency] if isinstance(concurrency, int) and not isinstance(concurrency, bool)
        else concurrency)  # type: ignore[assignment]
    chosen = plan(scenario, policies=policies, rates=rates, seed=seed, engine=engine,
                  concurrency=clients, deployment={"replicas": replicas, "router": router,
                                                       "prefill": prefill, "decode": decode,
                                                       "turns": turns})
    if pool != "both" and not chosen.deployment.disaggregated:
        raise ScenarioError(scenario.problem(
            "simulation.disaggregation",
            f"the {pool} pool is judged on its own only in a disaggregated deployment, and "
            "this one has no prefill and decode pools",
            expected="[simulation.disaggregation] prefill and decode server counts, or "
                     "--prefill X --decode Y",
            suggestion="drop --pool to judge the whole deployment"))
    think = chosen.think_time if think_time is None else think_time
    for note in chosen.warnings:
        warnings.warn(note, SimulationWarning, stacklevel=2)
    try:
        if capacity:
            return _capacity(scenario, chosen, policies, seeds, scheduler, address, progress, pool)
        closed = bool(chosen.concurrency) and not rates
        result = simulator.simulate(chosen.cost_model, chosen.workload, chosen.policies,
                                    chosen.rates, seed=chosen.seed, slo=chosen.slo,
                                    engine=chosen.engine, progress=progress,
                                    keep_records=keep_records, deployment=chosen.deployment,
                                    seeds=seeds, scheduler=scheduler, address=address,
                                    concurrency=chosen.concurrency if closed else None,
                                    think_time=think if closed or chosen.turns > 1 else 0.0,
                                    turns=1 if closed else chosen.turns,
                                    reuse_history=chosen.reuse_history)
        return attrs.evolve(result, notes=chosen.notes, price_per_hour=chosen.price_per_hour)
    except simulator.SimulationError as exc:
        raise ScenarioError(Problem(str(exc), file=str(scenario.path) if scenario.path else None,
                                    key="simulation")) from None


def capacity_policy(named, policies: Sequence, defaults: Mapping):
    """The policy a capacity search runs: the simulation's own (its chunked one if it has
    one, with every setting the table or the levers give it), or the
    ``[simulation.capacity]`` policy: a kind named alone takes the settings of the
    simulation's policy of that kind, then the levers'.
    """
    first = policies[0]  # its prefix-cache settings apply to the searched policy too
    if named is None:
        return next((p for p in policies if p.kind == "chunked"), first)
    if isinstance(named, str):
        same = next((p for p in policies if p.kind == named), None)
        if same is not None:
            return same
    return attrs.evolve(policy_with_defaults(named, defaults),
                        prefix_caching=first.prefix_caching, block_tokens=first.block_tokens)


def _capacity(scenario, chosen, policies, seeds, scheduler, address, progress, pool="both"):
    """One capacity search, or one per policy and seed (run by the grid's scheduler)."""
    from ... import simulator
    from ...simulator.grid import execute

    settings = dict(chosen.capacity)
    named = settings.pop("policy", None)
    searched = (list(chosen.policies) if policies
                else [capacity_policy(named, chosen.policies,
                                      chosen.defaults or lever_defaults(scenario))])
    seed_list = list(seeds) if seeds else [chosen.seed]
    overload = settings.get("overload", "fails")
    tasks = [(chosen.cost_model, chosen.workload, p, chosen.slo, settings.get("low", 0.01),
              settings.get("high", 4.0), settings.get("steps", 10), settings.get("neighbour", 0.005),
              s, chosen.engine, None, None, chosen.deployment, pool, overload)
             for p in searched for s in seed_list]
    if len(tasks) == 1:
        return CapacityReport(simulator.capacity_search(*tasks[0][:10], progress=progress,
                                                        deployment=chosen.deployment, pool=pool,
                                                        overload=overload),
                              chosen.price_per_hour)
    found = execute(simulator.capacity_search, tasks, scheduler, address, progress)
    return CapacityReports(tuple(CapacityReport(f, chosen.price_per_hour) for f in found),
                           tuple(s for _ in searched for s in seed_list))
