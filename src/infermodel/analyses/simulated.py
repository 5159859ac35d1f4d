"""Simulated figures as search constraints: percentiles at a rate beside the quantities.

A search's formulas may name ``simulated_METRIC`` — any metric of ``infermodel
simulate`` (``simulated_ttft_p95``, ``simulated_itl_p99``, ``simulated_goodput_fraction``,
``simulated_slo_met``) — when ``[search]`` gives the load to simulate each choice at::

    [search]
    minimise = "cost_per_million_output_tokens"
    rate = 20                      # requests/s offered to each choice (--rate)
    replicas = 4                   # servers of each choice (--replicas; default: [simulation]'s)
    constraints = ["fits", "simulated_ttft_p95 <= 1", "simulated_itl_p95 <= 0.05"]

Each choice is simulated as ``infermodel simulate`` would simulate it at that rate (its
``[simulation]`` table for the workload and objectives, and for the policy the one a
capacity search would run: the chunked one of several), after the constraints
that name no simulated figure: a choice that fails one of those is not simulated.  A
search simulates at most :data:`MAX_SIMULATED` choices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..errors import InfermodelError, Problem, ScenarioError

PREFIX = "simulated_"
#: The most choices one search simulates (each a run of the scenario's workload).
MAX_SIMULATED = 200


def metric_unit(metric: str) -> str:
    """The unit a metric prints in (seconds, tokens/s, or a plain number)."""
    if metric.startswith(("ttft", "itl", "tpot", "e2e", "queue_wait", "transfer")) or metric in (
            "duration", "slo_ttft", "slo_itl"):
        return "s"
    if metric == "throughput_tokens_per_s":
        return "token/s"
    if metric == "slo_met":
        return "bool"
    return "1"


def simulated_units() -> dict[str, str]:
    """Every name a formula may use for a simulated metric, with its unit."""
    from ..simulator import METRIC_NAMES

    return {PREFIX + m: metric_unit(m) for m in METRIC_NAMES}


def uses_simulation(formula) -> bool:
    return any(name.startswith(PREFIX) for name in formula.names)


def simulate_choices(sweep, indices: Sequence[int], rate: float | None, replicas: int | None,
                     progress: Callable[[int, int], None] | None = None
                     ) -> dict[str, np.ndarray]:
    """Each choice at ``indices`` of ``sweep`` simulated at ``rate``: a column per
    simulated name, NaN for choices not simulated.
    """
    from ..simulator import METRIC_NAMES
    from .simulation.runs import simulate

    if rate is None:
        raise ScenarioError(Problem(
            "a constraint names a simulated figure, and no rate to simulate at is given",
            key="search.rate", expected="[search] rate = REQUESTS_PER_S, or --rate R"))
    if len(indices) > MAX_SIMULATED:
        raise ScenarioError(Problem(
            f"{len(indices):,} choices pass the other constraints, more than the {MAX_SIMULATED} "
            "one search simulates", key="search.constraints",
            suggestion="narrow the sweep, or add a quantity constraint that screens choices first"))
    columns = {PREFIX + m: np.full(len(sweep), np.nan) for m in METRIC_NAMES}
    for done, index in enumerate(indices, start=1):
        try:
            scenario = sweep.scenario_at(int(index))
            found = simulate(scenario, rates=[rate], replicas=replicas,
                             policies=[_policy(scenario)])
        except InfermodelError:
            continue  # a choice the simulator refuses (weights that do not fit) stays NaN
        metrics: Mapping[str, float] = found.runs[0].metrics
        for m in METRIC_NAMES:
            columns[PREFIX + m][index] = metrics[m]
        if progress is not None:
            progress(done, len(indices))
    return columns


def _policy(scenario):
    """The one policy a choice is simulated with: the simulation's own, as a capacity
    search picks it (its chunked one when it lists several).
    """
    from .simulation import lever_defaults
    from .simulation.plan import plan
    from .simulation.runs import capacity_policy

    chosen = plan(scenario)
    return capacity_policy(chosen.capacity.get("policy"), chosen.policies, lever_defaults(scenario))


__all__ = ["MAX_SIMULATED", "PREFIX", "metric_unit", "simulate_choices", "simulated_units",
           "uses_simulation"]
