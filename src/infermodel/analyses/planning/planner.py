"""``infermodel plan``: the cheapest deployments that meet percentile objectives at a load.

The steps, each in its own module:

1. :mod:`.table` reads ``[plan]`` (every problem at once) and the command line's
   overrides;
2. :mod:`.space` spans the candidates: cards × engines × layout degrees × pools, each a
   set of ``--set`` overrides of the scenario;
3. each candidate is read as ``infermodel simulate`` would read it
   (:func:`~infermodel.analyses.simulation.plan`: its cost model, workload, policy,
   objectives and price), and a candidate that cannot load (weights that do not fit, a
   degree the model cannot split) is set aside with the reason;
4. :mod:`.analytic` bounds what one replica can serve, dropping candidates that miss an
   objective alone and ordering the rest by the price of their replica bound;
5. :mod:`.search` simulates the finalists, card by card (serially, on worker processes
   or on Dask), each at the fewest replicas that meet the objectives, an unclear verdict
   grown one step (``requests`` × 4);
6. :mod:`.result` refines the cheapest deployment's edge (its count and one fewer on the
   same requests, grown until its verdict is clear or ``max_requests``), ranks the
   deployments, measures the headroom to the next-cheaper option that fails, and
   prints, plots and launches the answer;
7. :mod:`.model_error` puts the efficiency model's own error (its preset's held-out
   intervals, where it has them) on the answer's latency objectives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ...errors import InfermodelError, ScenarioError
from ...formatting import listed
from .analytic import Screen, screen
from .result import Considered, PlanResult, assemble
from .search import GROWTH, Finalist, Settings, search_card
from .space import DEGREES, ENGINES, Budget, Candidate, Pools, candidates
from .table import PlanTable, check_table, degree_values, objectives

#: ``efficiency.engine`` values and the engine a plan calls them by.
ENGINE_BY_MEMORY = {spec.memory: name for name, spec in ENGINES.items()}


def read_plan(scenario, overrides: Mapping[str, Any] | None = None) -> PlanTable:
    """The scenario's ``[plan]`` table typed and checked, with ``overrides`` (keys of the
    table, as the command line gives them) applied first; every problem at once.
    """
    if overrides:
        scenario = scenario.with_overrides({f"plan.{k}": v for k, v in overrides.items()})
    problems: list = []

    def add(key, message, expected=None, suggestion=None):
        problems.append(scenario.problem(key, message, expected=expected, suggestion=suggestion))

    if "plan" not in scenario.tables:
        add("plan", "the scenario has no [plan] table", expected='[plan] with a load and an objective, '
            'e.g. rate = 20 and ttft = "p95 <= 1 s"', suggestion="or give --rate and --ttft/--itl")
        raise ScenarioError(problems)
    table = scenario.read_table("plan", PlanTable, add)
    if table is not None:
        check_table(table, scenario, add)
    if problems:
        raise ScenarioError(problems)
    return table


def _engines(scenario, table: PlanTable) -> tuple[str, ...]:
    if table.engines:
        return table.engines
    engine = scenario.value("efficiency.engine")
    if engine not in ENGINE_BY_MEMORY:
        raise ScenarioError(scenario.problem(
            "plan.engines", f"efficiency.engine = {engine!r} is no serving engine to plan for",
            expected="engines = [...] among " + ", ".join(ENGINES)))
    return (ENGINE_BY_MEMORY[engine],)


def _degrees(scenario, table: PlanTable, max_gpus: int) -> dict[str, tuple[int, ...]]:
    """Each degree's values: listed, else its default, else the scenario's own setting."""
    out = {}
    listed = degree_values(table)
    for degree in DEGREES:
        values = listed[degree.key] if listed[degree.key] is not None else degree.default
        if values is None:
            lever = scenario.lever(degree.lever)
            own = getattr(lever, degree.setting, None) if lever is not None else None
            values = (own,) if isinstance(own, int) and own > 1 else None
        if values is not None:
            out[degree.key] = tuple(v for v in values if v <= max_gpus) or (1,)
    return out


def _slo_overrides(table: PlanTable) -> dict[str, Any]:
    """``simulation.slo.*`` for the plan's objectives, under the joint rule (percentiles
    and goodput), with ``"none"`` for a metric the plan sets no objective on.
    """
    out: dict[str, Any] = {"simulation.slo.goodput_itl": table.goodput_itl,
                           "simulation.slo.rule": "joint"}
    chosen = objectives(table)
    for metric in ("ttft", "itl", "tpot", "e2e"):
        target = chosen.get(metric)
        if target is None:
            out[f"simulation.slo.{metric}"] = "none"
        else:
            q = table.percentile if target.percentile is None else target.percentile
            out[f"simulation.slo.{metric}"] = f"p{q:g} <= {target.limit!r} s"
    return out


def candidate_overrides(scenario, table: PlanTable, candidate: Candidate,
                        values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``--set`` values that make the scenario one replica of ``candidate``, with the
    plan's load, objectives and seed in its ``[simulation]`` table.

    Where the scenario chooses no scheduling policy, the engine's own is simulated with
    its scheduler defaults on the card (:func:`engine_policy`): ``values``, the
    candidate's evaluated quantities, say how it admits and batches (without them, the
    chunked policy).
    """
    engine = ENGINES[candidate.engine]
    registries = scenario.host.registries
    out: dict[str, Any] = candidate.layout_overrides()
    if table.engines:
        preset = engine.preset(candidate.hardware, registries.presets.get("efficiency", {}))
        if preset is not None:
            out["efficiency.preset"] = preset
        out["efficiency.engine"] = engine.memory
    if not _scenario_schedules(scenario):
        memory = float(scenario.preset("hardware", candidate.hardware)["memory"])
        out["simulation.policies"] = [engine_policy(values or {}, engine.budget(candidate.hardware,
                                                                                 memory))]
    if table.rate is not None:
        out["simulation.rates"] = [table.rate]
    else:
        out["simulation.concurrency"] = [candidate_clients(table)]
    out["simulation.seed"] = table.seed
    out["simulation.router"] = table.router
    if candidate.pools.disaggregated:
        out["simulation.disaggregation.prefill"] = candidate.pools.prefill
        out["simulation.disaggregation.decode"] = candidate.pools.decode
    return out


def engine_policy(values: Mapping[str, Any], budget: Budget) -> dict[str, Any]:
    """The simulator's policy for an engine, from the flags its scenario evaluates to: an
    engine that admits a request only when its prompt and whole output fit the cache
    (``engine_admits_on_demand`` 0: TensorRT-LLM's default capacity policy) runs
    ``reserve``; one that pages its cache in on demand runs ``chunked`` where it chunks
    prompts (``engine_chunked_prefill``, or no flag at all) and ``paged`` where it does
    not; an engine that prefills apart from the running decodes (``engine_mixed_batches``
    0: SGLang) runs it with ``mixed_batches = false``. The engine's evaluated scheduler
    settings (``engine_chunk_tokens``, ``engine_max_sequences``: its defaults on the card,
    or what the scenario states) cap an iteration's tokens (the chunks, or the whole
    prompts it carries) and the running sequences; ``budget`` stands in where one is not
    a finite count (SGLang bounds its running requests by its cache alone).

    >>> b = Budget(0, 8192, 2048)
    >>> engine_policy({"engine_admits_on_demand": 0, "engine_chunked_prefill": 0}, b)
    {'kind': 'reserve', 'max_running': 2048, 'max_tokens': 8192}
    >>> engine_policy({}, b)
    {'kind': 'chunked', 'chunk_tokens': 8192, 'max_running': 2048}
    >>> engine_policy({"engine_mixed_batches": 0}, b)["mixed_batches"]
    False
    """
    tokens = _count(values.get("engine_chunk_tokens"), budget.tokens)
    running = _count(values.get("engine_max_sequences"), budget.running)
    if values.get("engine_admits_on_demand") == 0:
        # No policy admits at full length and chunks: where the engine chunks, the reserve
        # policy prefills whole prompts without a budget, and simulate says so.
        chosen = {"kind": "reserve", "max_running": running}
        if values.get("engine_chunked_prefill") == 0:
            chosen["max_tokens"] = tokens
    elif values.get("engine_chunked_prefill") == 0:
        chosen = {"kind": "paged", "max_tokens": tokens, "max_running": running}
    else:
        chosen = {"kind": "chunked", "chunk_tokens": tokens, "max_running": running}
    if values.get("engine_mixed_batches") == 0:
        chosen["mixed_batches"] = False
    return chosen


def _count(value: Any, fallback: int) -> int:
    """``value`` as a whole count where it is a finite one of at least 1, else ``fallback``."""
    if isinstance(value, (int, float)) and math.isfinite(value) and value >= 1:
        return int(value)
    return fallback


def candidate_clients(table: PlanTable) -> int:
    return int(table.concurrency or 1)


def _scenario_schedules(scenario) -> bool:
    """Whether the scenario chooses its own policy (a ``[simulation]`` policy or a lever's
    proposal); otherwise each engine's scheduler defaults apply.
    """
    from ..simulation import lever_defaults

    written = scenario.tables.get("simulation", {})
    return "policies" in written or bool(lever_defaults(scenario).get("policies"))


def _consider(scenario, table: PlanTable, candidate: Candidate, index: int) -> tuple[Considered, Finalist | None]:
    """Read ``candidate`` as ``simulate`` would, screen it, and make it a finalist."""
    from ...engine.evaluation import evaluate_afresh
    from ..simulation import plan as simulation_plan

    sets = {**candidate_overrides(scenario, table, candidate), **_slo_overrides(table)}
    engine = ENGINES[candidate.engine]
    generation = scenario.preset("hardware", candidate.hardware).get("generation")
    if not engine.runs_on(generation):
        vendors = listed([VENDORS.get(v, v) for v in engine.vendors], "or")
        return Considered(candidate, sets, reason=(
            f"{candidate.engine} runs on {vendors} hardware only, not {generation} "
            f"({engine.vendor_source})")), None
    try:
        result = evaluate_afresh(scenario.with_overrides(sets))
        sets = {**candidate_overrides(scenario, table, candidate, result.values),
                **_slo_overrides(table)}
        chosen = scenario.with_overrides(sets)
        read = simulation_plan(chosen, result=result)
    except InfermodelError as exc:
        return Considered(candidate, sets, reason=_first(exc)), None
    if read.price_per_hour is None:
        return Considered(candidate, sets, reason="its cards have no price (hardware.price_per_hour)"), None
    policy = read.policies[0] if len(read.policies) == 1 else next(
        (p for p in read.policies if p.kind == "chunked"), read.policies[0])
    found: Screen = screen(read.cost_model, read.workload, read.slo,
                           policy.chunk_tokens if policy.kind == "chunked" else 10**9,
                           policy.max_running, candidate.pools, mixed=policy.mixed_batches)
    price = float(read.price_per_hour) * candidate.pools.servers
    considered = Considered(candidate, sets, screen=found, price_per_replica=price,
                            warnings=tuple(read.warnings))
    if not found.feasible:
        return considered, None
    if table.rate is not None:
        lower = max(1, math.ceil(table.rate / found.capacity * (1 - 1e-9)))
    else:
        lower = max(1, math.ceil(candidate_clients(table) / max(found.clients, 1e-9)))
    deployment = read.deployment
    finalist = Finalist(index, read.cost_model, read.workload, policy, read.slo, price,
                        candidate.gpus, lower, max(0, table.max_gpus // candidate.gpus),
                        table.rate, table.concurrency, table.router, candidate.pools.prefill,
                        candidate.pools.decode, float(deployment.link_bandwidth),
                        float(deployment.link_latency))
    return considered, finalist


#: Vendors as a hardware preset's ``generation`` begins, in words.
VENDORS = {"nvidia": "NVIDIA", "amd": "AMD", "google": "Google TPU", "intel": "Intel",
           "cpu": "CPU", "apple": "Apple"}


def _first(exc: InfermodelError) -> str:
    problem = exc.problems[0]
    return problem.message + (f" (expected {problem.expected})" if problem.expected else "")


def plan(scenario, *, overrides: Mapping[str, Any] | None = None, scheduler: str = "serial",
         address: str | None = None, progress: Callable[[int, int], None] | None = None,
         brute_force: bool = False) -> PlanResult:
    """Plan the cheapest deployments of ``scenario`` (a path or a scenario) that meet its
    ``[plan]`` objectives at its load (see the module docstring).

    ``overrides`` are keys of ``[plan]`` (``{"rate": 30}``).  ``brute_force`` simulates
    every candidate at every replica count up to the GPU cap, with no analytic order or
    pruning (the benchmark's yardstick).

    >>> found = plan("scenarios/plan-70b-chat.toml")  # doctest: +SKIP
    >>> found.best.label, found.best.replicas  # doctest: +SKIP
    """
    from ...scenario import Scenario, load_scenario

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(Path(scenario))
    table = read_plan(scenario, overrides)
    settings = Settings(table.seed, table.requests, table.max_requests, table.confidence)
    cards = table.hardware or (scenario.presets.get("hardware"),)
    if None in cards:
        raise ScenarioError(scenario.problem(
            "plan.hardware", "the scenario's card has no preset to plan replicas of",
            expected='hardware = ["h100-sxm", ...] in [plan]'))
    spanned = candidates(cards, _engines(scenario, table), _degrees(scenario, table, table.max_gpus),
                         table.pools or (Pools(),), table.max_gpus)
    considered, finalists = [], []
    for index, candidate in enumerate(spanned):
        seen, finalist = _consider(scenario, table, candidate, index)
        considered.append(seen)
        if finalist is not None:
            finalists.append(finalist)
    if brute_force:
        finalists = [attrs.evolve(f, lower=1) for f in finalists]
    # The cards' searches grow an unclear verdict one step (to requests × GROWTH); only
    # the answer's edge is refined to max_requests (result.assemble).  Brute force
    # judges every count to the end.
    searching = settings if brute_force else attrs.evolve(
        settings, max_requests=min(settings.max_requests, settings.requests * GROWTH))
    tasks = _card_tasks(spanned, finalists, searching, brute_force)
    from ...simulator.grid import execute

    try:
        outcomes = [o for found in execute(_search, tasks, scheduler, address, progress) for o in found]
    except InfermodelError as exc:
        raise ScenarioError(scenario.problem("plan", str(exc))) from None
    found = assemble(scenario, table, settings, considered, finalists, outcomes)
    from .model_error import model_intervals

    return attrs.evolve(found, model_intervals=model_intervals(scenario, found.best))


def _card_tasks(spanned, finalists, settings, brute_force) -> list[tuple]:
    by_card: dict[str, list[Finalist]] = {}
    for finalist in finalists:
        by_card.setdefault(spanned[finalist.index].hardware, []).append(finalist)
    tasks = []
    for group in by_card.values():
        ordered = sorted(group, key=lambda f: (f.lower * f.price_per_replica, f.index))
        tasks.append((ordered, settings, brute_force))
    return tasks


def _search(finalists, settings, brute_force):
    """One card's search (a module-level function, so a worker process can run it)."""
    if not brute_force:
        return search_card(finalists, settings)
    from .search import brute_force_card

    return brute_force_card(finalists, settings)


__all__ = ["candidate_overrides", "engine_policy", "plan", "read_plan"]
