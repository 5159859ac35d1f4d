"""What to simulate, read from a scenario's ``[simulation]`` table and its quantities.

The simulator (:mod:`infermodel.simulator`) prices each iteration from the scenario's
own quantities — ``weight_bytes``, ``kv_bytes_per_token``, ``params_matmul``,
``layers``, ``query_width``, ``bandwidth``, the prefill compute and the KV-cache
budget — so a lever that changes those (number formats, a quantised cache, card
counts) changes the simulation too. A lever that changes the step time some other way
(speculative decoding, all-reduce time, expert routing, offload copies) is not part of
the iteration cost: :func:`plan` lists each such change in ``warnings`` and the command
line prints them, so a simulated figure is never silently missing a lever.

The table itself is typed in :mod:`.table`; :func:`plan` reads it with the command
line's choices and the scenario's evaluated quantities.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs

from ...errors import ScenarioError
from ...schema import FieldValueError, TableValue
from .contract import (
    cost_model,
    layered_values,  # noqa: F401  (read from here before contract.py held it)
    storage_notes,
)
from .defaults import engine_defaults, lever_defaults, policy_with_defaults
from .notices import (
    budget_warnings,
    engine_policy_warnings,
    interval_notes,
    names_engine,
    policy_notes,
    simulation_warnings,
)
from .table import (
    CAPACITY_KEYS,
    ClientCounts,
    EngineName,
    PolicyEntry,
    PolicyList,
    RateList,
    Seed,
    SimulationTable,
    TurnCount,
)

#: The most requests one simulated workload may hold (each request costs a few dozen
#: bytes and its share of the run's time; tail percentiles settle long before this).
MAX_REQUESTS = 1_000_000
#: The largest length file (CSV) a workload may read.
MAX_LENGTH_FILE_BYTES = 64_000_000
#: The most runs (policies × rates) one simulation may ask for.
MAX_RUNS = 1_000


class _Problems:
    """The problems found in a scenario's ``[simulation]`` table, raised together."""

    def __init__(self, scenario) -> None:
        self.scenario = scenario
        self.found: list = []

    def add(self, key: str, message: str, expected: str | None = None,
            suggestion: str | None = None) -> None:
        self.found.append(self.scenario.problem(key, message, expected=expected,
                                                suggestion=suggestion))

    def raise_any(self) -> None:
        if self.found:
            raise ScenarioError(self.found)

    def fail(self, key: str, message: str, expected: str | None = None,
             suggestion: str | None = None) -> NoReturn:
        """Add one problem and raise what was found (a check that cannot go on)."""
        self.add(key, message, expected, suggestion)
        raise ScenarioError(self.found)


def read_table(scenario, problems: _Problems) -> SimulationTable | None:
    """The scenario's ``[simulation]`` table typed by :class:`SimulationTable`, its
    problems added to ``problems`` (None when it does not fit).
    """
    return scenario.read_table("simulation", SimulationTable, problems.add)


@attrs.frozen
class SimulationPlan:
    """What to simulate, read and checked from a scenario (and command-line choices)."""

    cost_model: Any
    workload: Any
    policies: tuple
    rates: tuple[float, ...]
    seed: int
    engine: str
    slo: Any
    capacity: Mapping[str, Any]
    price_per_hour: float | None
    warnings: tuple[str, ...] = ()
    concurrency: tuple[int, ...] | None = None
    think_time: float = 0.0
    notes: tuple[str, ...] = ()
    deployment: Any = None
    turns: int = 1
    reuse_history: bool = True
    #: The settings a policy named without them takes (the levers' proposals, then the
    #: engine's: :func:`engine_defaults`), for a policy chosen later (a capacity search's).
    defaults: Mapping[str, Any] = attrs.field(factory=dict, eq=False)


@attrs.frozen
class _Choices:
    """The table's settings with the command line's choices applied, all checked."""

    policies: tuple
    rates: tuple[float, ...] | None
    seed: int
    engine: str
    concurrency: tuple[int, ...] | None
    turns: int
    reuse_history: bool


def plan(scenario, *, policies: Sequence | None = None, rates: Sequence[float] | None = None,
         seed: int | None = None, engine: str | None = None, result=None,
         concurrency: Sequence[int] | None = None,
         deployment: Mapping[str, Any] | None = None) -> SimulationPlan:
    """Read the scenario's ``[simulation]`` table into a :class:`SimulationPlan`.

    The table is typed as a lever table is (:class:`SimulationTable`) and checked with
    the command line's choices before anything is evaluated; every problem found then is
    raised at once, each with its file, key path and line.
    """
    from ... import simulator
    from ...engine.evaluation import evaluate_afresh

    problems = _Problems(scenario)
    table = read_table(scenario, problems)
    result = result if result is not None else evaluate_afresh(scenario)
    defaults = engine_defaults(lever_defaults(scenario), result.values, names_engine(scenario))
    base = scenario.path.parent if scenario.path else None
    written = scenario.tables.get("simulation", {}).get("workload")
    if isinstance(written, Mapping):
        _check_workload(written, base, problems)
    chosen = _choices(scenario, table, defaults, problems, policies=policies, rates=rates,
                      seed=seed, engine=engine, concurrency=concurrency,
                      turns=(deployment or {}).get("turns"))
    problems.raise_any()
    assert table is not None and chosen is not None  # no problem, so both were read
    notes: list[str] = []
    cost = _cost_model(scenario, result.values, table.cache_memory)
    notes.extend(cost.describe() + storage_notes(result.values, cost))
    notes.extend(interval_notes(result))
    workload, more = _workload(scenario, table, result.values, defaults, base, problems)
    notes.extend(more)
    rates_ = _rates(table, chosen, workload, problems)
    servers = _deployment(scenario, table, deployment or {}, problems, result.values)
    notes.extend(_deployment_notes(servers, workload, cost))
    settings = {"prefix_caching": table.prefix_caching, "block_tokens": table.block_tokens}
    try:  # the prefix cache's block and switch, for every policy
        ran, more = simulator.prefix_policies(chosen.policies, settings, result.values, workload,
                                              chosen.turns, chosen.reuse_history)
    except simulator.SimulationError as exc:
        problems.fail("simulation", str(exc))
    notes.extend(more)
    notes.extend(policy_notes(ran, workload))
    price = result.values.get("cost_per_hour")
    if price is not None and not servers.single:
        price = float(price) * servers.servers  # every server is priced as the scenario's cards
    slo = table.slo.slo()
    capacity = {name: getattr(table.capacity, name) for name in CAPACITY_KEYS}
    return SimulationPlan(cost, workload, ran, rates_, chosen.seed, chosen.engine, slo,
                          capacity, price,
                          simulation_warnings(result, cost, _laws(written, defaults))
                          + engine_policy_warnings(scenario, result.values, ran, workload)
                          + budget_warnings(ran, workload, chosen.turns or 1)
                          + _pool_notes(servers, cost, workload),
                          chosen.concurrency, float(table.think_time), tuple(notes), servers,
                          chosen.turns, chosen.reuse_history, defaults)


def _choices(scenario, table: SimulationTable | None, defaults, problems: _Problems, *,
             policies, rates, seed, engine, concurrency, turns) -> _Choices | None:
    """The settings that need no evaluation, from the table and the command line's
    choices, each choice read as the table's own value would be (the table's policies
    are checked even where the command line replaces them).
    """
    typed = table if table is not None else SimulationTable()
    engine_ = typed.engine if engine is None else _given("simulation.engine", EngineName,
                                                         engine, problems)
    seed_ = typed.seed if seed is None else _given("simulation.seed", Seed, seed, problems)
    turns_ = typed.turns if turns is None else _given("simulation.turns", TurnCount, turns,
                                                      problems)
    clients = typed.concurrency if concurrency is None else _given(
        "simulation.concurrency", ClientCounts, concurrency, problems)
    given_rates = None if not rates else _given("simulation.rates", RateList, list(rates),
                                                problems)
    if table is None:  # the table's problems are found: check only what it lists
        listed, searched = _written_policies(scenario)
        typed = attrs.evolve(typed, policies=listed,
                             capacity=attrs.evolve(typed.capacity, policy=searched))
    chosen = _policies(typed, defaults, policies, problems)
    if problems.found:
        return None
    return _Choices(chosen, given_rates, seed_, engine_, clients, turns_,
                    typed.history == "reuse")


def _written_policies(scenario) -> tuple[tuple | None, Any]:
    """The policies the table lists and the capacity search's, where they read; the
    others were reported with the table.
    """
    written = scenario.tables.get("simulation", {})
    capacity = written.get("capacity") if isinstance(written.get("capacity"), Mapping) else {}
    try:
        listed = PolicyList.structure(written["policies"]) if "policies" in written else None
    except FieldValueError:
        listed = ()
    try:
        searched = (PolicyEntry.structure(capacity["policy"]) if capacity.get("policy") is not None
                    else None)
    except FieldValueError:
        searched = None
    return listed, searched


def _given(key: str, reader: type[TableValue], value: Any, problems: _Problems) -> Any:
    """A command-line (or keyword) choice read as the table's own value would be."""
    try:
        return reader.structure(value)
    except FieldValueError as exc:
        problems.add(key, exc.message, exc.expected, exc.suggestion)
        return None


def _policies(table: SimulationTable, defaults, policies, problems: _Problems) -> tuple:
    """The policies to run: the command line's, else the table's, else the levers'
    proposals, else every kind (the table's, and the capacity search's, are checked even
    when they are not run).
    """
    from ... import simulator

    def read(key: str, entries) -> tuple:
        out = []
        for entry in entries:
            try:
                out.append(policy_with_defaults(entry, defaults))
            except simulator.SimulationError as exc:
                problems.add(key, str(exc))
        return tuple(out)

    listed = (table.policies if table.policies is not None
              else defaults.get("policies") or simulator.POLICY_KINDS)
    from_table = read("simulation.policies", listed)
    given = read("simulation.policies", policies or ())
    if table.capacity.policy is not None:
        read("simulation.capacity.policy", [table.capacity.policy])
    chosen = given if policies else from_table
    if not chosen and not problems.found:
        problems.add("simulation.policies", "no policy chosen", "at least one policy")
    return chosen


def _rates(table: SimulationTable, chosen: _Choices, workload, problems: _Problems
           ) -> tuple[float, ...]:
    """The nominal rates to run: the command line's, else the table's, else the trace's
    recorded rate (or 0.2/s), within :data:`MAX_RUNS` runs.
    """
    listed = table.rates if table.rates is not None else (
        (workload.trace.rate,) if workload.trace is not None else (0.2,))
    rates_ = chosen.rates or listed
    if not rates_:
        problems.fail("simulation.rates", "no arrival rate given", "at least one rate > 0")
    runs = len(chosen.policies) * len(rates_)
    if runs > MAX_RUNS:
        problems.fail("simulation.rates",
                      f"{len(chosen.policies)} policies × {len(rates_)} rates make {runs:,} runs, "
                      f"over the limit of {MAX_RUNS:,} runs for one simulation",
                      f"at most {MAX_RUNS:,} policy and rate pairs",
                      "split the rates over several runs, or use --capacity to search the rate")
    return tuple(float(r) for r in rates_)


def _workload(scenario, table: SimulationTable, values: Mapping, defaults, base: Path | None,
              problems: _Problems) -> tuple[Any, list[str]]:
    """The simulator's workload spec from ``[simulation.workload]`` and the scenario's
    own lengths, and the lines that say where its laws came from.
    """
    from ... import simulator
    from ...units import UnitError, parse_quantity

    workload_table, notes = workload_defaults(table.workload, values, defaults)
    if workload_table.get("window") is not None:  # "60 s": arrivals stop after it
        try:
            workload_table["window"] = parse_quantity(workload_table["window"], "s")
        except UnitError as exc:
            problems.fail("simulation.workload.window", exc.message, exc.expected)
    try:
        workload = simulator.WorkloadSpec.from_mapping(workload_table, base_dir=base)
    except (simulator.SimulationError, TypeError, ValueError) as exc:
        problems.fail("simulation.workload", str(exc))
    if workload.trace is not None:
        from ...output import protect

        trace = Path(workload_table["trace"])
        protect([trace if trace.is_absolute() or base is None else base / trace])
        notes.append(f"arrivals, prompts and outputs: the trace {workload_table['trace']} "
                     f"({workload.trace.count} requests, recorded rate "
                     f"{workload.trace.rate:.4g}/s; other rates scale its gaps)")
    return workload, notes


def _deployment_notes(servers, workload, cost) -> list[str]:
    """Derivation lines of a deployment: its servers and the priced cache transfer."""
    notes = []
    if not servers.single:
        notes.append(f"deployment: {servers.label}" + ("" if servers.disaggregated else
                     f" ({servers.replicas} servers, each with the cost and cache above)"))
    if servers.disaggregated:
        mean_prompt = _mean_prompt(workload)
        transfer = float(servers.transfer_time(mean_prompt, cost.kv_bytes_per_token))
        notes.append(
            f"cache transfer prefill -> decode: prompt x kv_bytes_per_token / link + latency = "
            f"{mean_prompt:.0f} x {cost.kv_bytes_per_token:.6g} B / "
            f"{servers.link_bandwidth / 1e9:.4g} GB/s + {servers.link_latency * 1e3:.4g} ms = "
            f"{transfer * 1e3:.4g} ms for the mean prompt")
    return notes


def _pool_notes(servers, cost, workload) -> tuple[str, ...]:
    """What a disaggregated deployment leaves out of speculation, with its size."""
    if not servers.disaggregated or getattr(cost, "speculation", None) is None:
        return ()
    spec = workload.trace if workload.trace is not None else workload.output
    mean = float(spec.outputs.mean() if workload.trace is not None else spec.mean())
    return (f"speculative decoding: the decode pool's first step after each cache transfer "
            f"is a plain one-token step, not a verification (1 of the mean {mean:.0f} output "
            f"tokens per request, {1 / max(mean, 1):.2%})",)


def _mean_prompt(workload) -> float:
    return float(workload.trace.prompts.mean() if workload.trace is not None else workload.prompt.mean())


#: Quantities a plugin may define for the link a disaggregated deployment moves each
#: prompt's cache over (the measured-kernels plugin: the tables' network figures), used
#: where the ``[simulation.disaggregation]`` table gives none.
TRANSFER_QUANTITIES = ("kv_transfer_bandwidth", "kv_transfer_latency")


def _deployment(scenario, table: SimulationTable, chosen: Mapping, problems: _Problems,
                values: Mapping | None = None):
    """The :class:`~infermodel.simulator.Deployment` from the table and command-line
    choices; the link from the table, else a plugin's ``kv_transfer_*`` quantities, else
    the card's ``interconnect_*`` fields.
    """
    from ... import simulator

    split = table.disaggregation
    prefill = chosen.get("prefill") or split.prefill
    decode = chosen.get("decode") or split.decode
    replicas = chosen.get("replicas") or table.replicas
    router = chosen.get("router") or table.router
    values = values or {}
    bandwidth = (split.link_bandwidth if split.link_bandwidth is not None
                 else values.get("kv_transfer_bandwidth",
                                 scenario.value("hardware.interconnect_bandwidth")))
    delay = (split.link_latency if split.link_latency is not None
             else values.get("kv_transfer_latency",
                             scenario.value("hardware.interconnect_latency") or 0.0))
    try:
        if prefill or decode:
            if bandwidth is None:
                problems.fail("simulation.disaggregation.link_bandwidth",
                              "a disaggregated deployment moves each prompt's cache over a link, "
                              "and neither the table nor hardware.interconnect_bandwidth gives "
                              "its bandwidth", "a bandwidth such as \"50 GB/s\"")
            return simulator.Deployment(1, router, prefill, decode, float(bandwidth), float(delay))
        return simulator.Deployment(replicas, router)
    except simulator.SimulationError as exc:
        problems.fail("simulation", str(exc))


#: σ of the default output law (log-normal around the scenario's mean output length).
DEFAULT_OUTPUT_SIGMA = 0.6


def workload_defaults(written: Mapping, values: Mapping, defaults: Mapping) -> tuple[dict, list[str]]:
    """The ``[simulation.workload]`` table with the scenario's own lengths filled in.

    A law the table does not write comes from a lever (the batching lever's output
    law) or is the documented default around the scenario's ``prompt_tokens`` and
    ``output_tokens``: prompts uniform on [m − ⌊m/2⌋, m + ⌊m/2⌋] (mean m), outputs
    log-normal with σ = 0.6 and median m·e^(−σ²/2) (mean m before clipping), clipped
    to [1, 4m].
    """
    if not isinstance(written, Mapping):
        return dict(written), []  # the simulator reports the wrong type
    table = dict(written)
    notes: list[str] = []
    if "prefix_tokens" not in table and values.get("warm_prefix_tokens"):
        table["prefix_tokens"] = round(float(values["warm_prefix_tokens"]))
        table["prefix_hit_rate"] = float(values.get("warm_prefix_hit_rate", 1.0))
        notes.append(f"shared prefix: {table['prefix_tokens']} tokens start a share "
                     f"{table['prefix_hit_rate']:g} of the prompts; once computed, requests find "
                     "it in the prefix cache and prefill only what follows it")
    if "trace" in table:
        return table, notes
    if "prompt" not in table and "prompt_tokens" in values:
        m = max(1, round(float(values["prompt_tokens"])))
        half = m // 2
        table["prompt"] = {"law": "uniform", "low": m - half, "high": m + half} if half else m
        notes.append(f"prompt lengths: default law around the scenario's prompt_tokens = {m}: "
                     f"uniform on [{m - half}, {m + half}]")
    if "output" not in table and "output" in defaults:
        lever, law = defaults["output"]
        table["output"] = law
        notes.append(f"output lengths: the {lever} lever's output law {law}")
    elif "output" not in table and "output_tokens" in values:
        m = max(1, round(float(values["output_tokens"])))
        sigma = DEFAULT_OUTPUT_SIGMA
        median = m * math.exp(-sigma * sigma / 2)
        table["output"] = ({"law": "lognormal", "median": median, "sigma": sigma, "min": 1,
                            "max": 4 * m} if m > 1 else 1)
        notes.append(f"output lengths: default law around the scenario's output_tokens = {m}: "
                     f"log-normal, sigma {sigma}, median {median:.1f}, clipped to [1, {4 * m}]")
    return table, notes


def _cost_model(scenario, values: Mapping, cache_memory):
    """The simulator's cost model, with a clear message when nothing is left for the cache."""
    budget = values.get("kv_budget_bytes")
    # Weights that do not fit are refused even when the table names a cache size: the
    # cards could not load the model, whatever cache is assumed beside it.
    if budget is not None and float(budget) <= 0:
        weights = float(values.get("weight_bytes", math.nan))
        memory = float(values.get("memory_bytes", math.nan))
        raise ScenarioError(scenario.problem(
            "hardware", f"the weights ({weights / 1e9:.4g} GB) leave no memory for the KV cache on "
            f"{memory / 1e9:.4g} GB of cards (kv_budget_bytes = {float(budget) / 1e9:.4g} GB): "
            "nothing can be served",
            expected="weights and reserve smaller than the cards' memory",
            suggestion="more or larger cards (hardware.count, hardware.preset), fewer weight "
                       "bits, or a smaller model"))
    return cost_model(values, cache_memory, measured=iteration_cost(scenario, values))


def iteration_cost(scenario, values: Mapping):
    """The iteration cost a plugin registers for ``scenario``
    (:func:`~infermodel.hookspecs.infermodel_iteration_cost`), or None for the roofline.
    """
    from ...errors import PluginError

    found: list[tuple[str, object]] = []

    def registrar(plugin: str):
        def register(cost):
            if found:
                raise PluginError(f"the simulator's iteration cost is registered by both "
                                  f"{found[0][0]!r} and {plugin!r}")
            found.append((plugin, cost))
        return register

    scenario.host.call_each("infermodel_iteration_cost",
                            lambda p: {"scenario": scenario, "values": values,
                                       "register": registrar(p)}, "simulation")
    return RegisteredCost(*found[0]) if found else None


@attrs.frozen
class RegisteredCost:
    """A plugin's iteration cost, with the plugin's name (its step-time changes are then
    what the simulator prices, not changes it leaves out).
    """

    plugin: str
    cost: Any

    def times(self, *counts):
        return self.cost.times(*counts)

    def describe(self):
        return self.cost.describe()


def _laws(written: Any, defaults: Mapping) -> Mapping:
    """The length laws the simulation does not take from the scenario's own lengths:
    those the table writes, and a lever's output law.
    """
    laws = dict(written) if isinstance(written, Mapping) else {}
    if "output" in defaults:
        laws.setdefault("output", defaults["output"])
    return laws


def _check_workload(table: Mapping, base: Path | None, problems: _Problems) -> None:
    """Check what the simulator would allocate or read before it does: the request count
    against :data:`MAX_REQUESTS`, and each length file's path (recorded as an input, so
    that no output of the run replaces it).
    """
    from ...errors import count_text
    from ...output import note_read, path_problem

    count = table.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count > MAX_REQUESTS:
        problems.add("simulation.workload.count",
                     f"{count_text(count)} requests is over the limit of {MAX_REQUESTS:,} for "
                     "one simulated workload", f"a request count of at most {MAX_REQUESTS:,}",
                     "percentiles settle within a few thousand requests: simulate fewer, or "
                     "run several seeds with --seed and compare")
    for law in ("prompt", "output"):
        spec = table.get(law)
        if not isinstance(spec, Mapping) or not isinstance(spec.get("file"), str):
            continue
        key = f"simulation.workload.{law}.file"
        path = Path(spec["file"])
        if base is not None and path_problem(path) is None and not path.is_absolute():
            path = base / path
        problem = path_problem(path)
        if problem is None and path.exists():
            if not path.is_file():
                problem = "it is not a regular file"
            elif path.stat().st_size > MAX_LENGTH_FILE_BYTES:
                problem = (f"it is {path.stat().st_size:,} bytes, over the "
                           f"{MAX_LENGTH_FILE_BYTES:,}-byte limit for a length file")
        if problem is not None:
            problems.add(key, f"cannot read the length file: {problem}",
                         "a CSV file of lengths, relative to the scenario")
        else:
            note_read(path)
