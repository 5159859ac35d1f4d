"""Simulating a scenario: its ``[simulation]`` table, its quantities, the serving simulator.

The simulator (:mod:`infermodel.simulator`) prices each iteration from the scenario's
own quantities — ``weight_bytes``, ``kv_bytes_per_token``, ``params_matmul``,
``layers``, ``query_width``, ``bandwidth``, the prefill compute and the KV-cache
budget — so a lever that changes those (number formats, a quantised cache, card
counts) changes the simulation too. A lever that changes the step time some other way
(speculative decoding, all-reduce time, expert routing, offload copies) is not part of
the iteration cost: :func:`plan` lists each such change in ``warnings`` and the command
line prints them, so a simulated figure is never silently missing a lever.

A scenario's ``[simulation]`` table (every key optional)::

    [simulation]
    policies = ["static", "reserve", "paged", "chunked"]   # or tables: {kind = "chunked", chunk_tokens = 512}
    rates = [0.10, 0.20, 0.25, 0.30, 0.35, 0.40]            # nominal requests/s
    seed = 0
    engine = "fast"                                         # or "reference"
    cache_memory = "16 GB"                                  # default: kv_budget_bytes

    [simulation.workload]                                   # default: Module 10 Lab 3's
    count = 300
    prompt = { law = "uniform", low = 2000, high = 6000 }
    output = { law = "lognormal", median = 1500, sigma = 0.6, min = 16, max = 4000 }
    sampler = "lab"

    [simulation.slo]
    ttft = "3 s"
    itl = "100 ms"

    [simulation.capacity]
    policy = "chunked"
    low = 0.01
    high = 4.0
    steps = 10
    neighbour = 0.005
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .errors import Problem, ScenarioError
from .formatting import non_finite_json

KEYS = ("policies", "rates", "concurrency", "think_time", "seed", "engine", "cache_memory",
        "replicas", "router", "disaggregation", "turns", "history", "prefix_caching",
        "block_tokens", "workload", "slo", "capacity", "table")
DISAGGREGATION_KEYS = ("prefill", "decode", "link_bandwidth", "link_latency")
#: The most requests one simulated workload may hold (each request costs a few dozen
#: bytes and its share of the run's time; tail percentiles settle long before this).
MAX_REQUESTS = 1_000_000
#: The largest length file (CSV) a workload may read.
MAX_LENGTH_FILE_BYTES = 64_000_000
#: The most runs (policies × rates) one simulation may ask for.
MAX_RUNS = 1_000
CAPACITY_KEYS = ("policy", "low", "high", "steps", "neighbour")
SLO_KEYS = ("ttft", "itl")


class SimulationWarning(UserWarning):
    """A lever's change that the simulation does not include."""


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


def _fail(scenario, key: str, message: str, expected: str | None = None, suggestion=None):
    raise ScenarioError(scenario.problem(key, message, expected=expected, suggestion=suggestion))


def plan(scenario, *, policies: Sequence | None = None, rates: Sequence[float] | None = None,
         seed: int | None = None, engine: str | None = None, result=None,
         concurrency: Sequence[int] | None = None,
         deployment: Mapping[str, Any] | None = None) -> SimulationPlan:
    """Read the scenario's ``[simulation]`` table into a :class:`SimulationPlan`."""
    from . import simulator
    from .errors import close_match
    from .evaluation import evaluate
    from .units import UnitError, parse_quantity

    table = dict(scenario.tables.get("simulation", {}))
    for key in table:
        if key not in KEYS:
            near = close_match(key, KEYS)
            _fail(scenario, f"simulation.{key}", f"unknown key {key!r}", "one of " + ", ".join(KEYS),
                  f"did you mean {near!r}?" if near else None)

    def quantity(key, value, unit):
        try:
            return parse_quantity(value, unit)
        except UnitError as exc:
            _fail(scenario, key, exc.message, exc.expected)

    result = result if result is not None else evaluate(scenario)
    cache = table.get("cache_memory")
    cache_memory = quantity("simulation.cache_memory", cache, "B") if cache is not None else None
    notes: list[str] = []
    defaults = lever_defaults(scenario)
    try:
        cost = _cost_model(scenario, result.values, cache_memory)
        notes.extend(cost.describe())
        base = scenario.path.parent if scenario.path else None
        written = table.get("workload", {})
        _check_workload(scenario, written, base)
        workload_table, law_notes = workload_defaults(written, result.values, defaults)
        if workload_table.get("window") is not None:  # "60 s": arrivals stop after it
            workload_table["window"] = quantity("simulation.workload.window",
                                                workload_table["window"], "s")
        notes.extend(law_notes)
        workload = simulator.WorkloadSpec.from_mapping(workload_table, base_dir=base)
        if workload.trace is not None:
            from .output import protect

            trace = Path(workload_table["trace"])
            protect([trace if trace.is_absolute() or base is None else base / trace])
            notes.append(f"arrivals, prompts and outputs: the trace {workload_table['trace']} "
                         f"({workload.trace.count} requests, recorded rate "
                         f"{workload.trace.rate:.4g}/s; other rates scale its gaps)")
        chosen, rates_ = _policies_and_rates(scenario, table, defaults, policies, rates, workload)
        slo_table = table.get("slo", {})
        for key in slo_table:
            if key not in SLO_KEYS:
                _fail(scenario, f"simulation.slo.{key}", f"unknown key {key!r}", "ttft or itl")
        slo = simulator.SLO(
            ttft=quantity("simulation.slo.ttft", slo_table.get("ttft", 3.0), "s"),
            itl=quantity("simulation.slo.itl", slo_table.get("itl", 0.1), "s"))
    except simulator.SimulationError as exc:
        _fail(scenario, "simulation", str(exc))
    except (TypeError, ValueError) as exc:
        _fail(scenario, "simulation", str(exc))
    capacity = table.get("capacity", {})
    if not isinstance(capacity, Mapping):
        _fail(scenario, "simulation.capacity", f"got {capacity!r}",
              "a [simulation.capacity] table with keys " + ", ".join(CAPACITY_KEYS))
    capacity = dict(capacity)
    for key in capacity:
        if key not in CAPACITY_KEYS:
            near = close_match(key, CAPACITY_KEYS)
            _fail(scenario, f"simulation.capacity.{key}", f"unknown key {key!r}",
                  "one of " + ", ".join(CAPACITY_KEYS), f"did you mean {near!r}?" if near else None)
    layout = table.get("table", "scheduling")
    if not isinstance(layout, str) or layout not in simulator.TABLE_LAYOUTS:
        _fail(scenario, "simulation.table", f"got {layout!r}",
              "one of " + ", ".join(map(repr, simulator.TABLE_LAYOUTS)))
    seed_ = table.get("seed", 0) if seed is None else seed
    if isinstance(seed_, bool) or not isinstance(seed_, int):
        _fail(scenario, "simulation.seed", f"got {seed_!r}", "a whole number")
    engine_ = engine or table.get("engine", "fast")
    if engine_ not in ("fast", "reference"):
        _fail(scenario, "simulation.engine", f"got {engine_!r}", '"fast" or "reference"')
    clients = _concurrency(scenario, concurrency if concurrency is not None else table.get("concurrency"))
    think = quantity("simulation.think_time", table.get("think_time", 0), "s")
    if think < 0:
        _fail(scenario, "simulation.think_time", f"got {think!r}", "a non-negative time such as \"2 s\"")
    servers = _deployment(scenario, table, deployment or {}, quantity)
    notes.extend(_deployment_notes(servers, workload, cost))
    turns, reuse = _sessions(scenario, table, (deployment or {}).get("turns"))
    try:  # the prefix cache's block and switch, for every policy
        chosen, more = simulator.prefix_policies(chosen, table, result.values, workload, turns, reuse)
    except simulator.SimulationError as exc:
        _fail(scenario, "simulation", str(exc))
    notes.extend(more)
    price = result.values.get("cost_per_hour")
    if price is not None and not servers.single:
        price = float(price) * servers.servers  # every server is priced as the scenario's cards
    return SimulationPlan(cost, workload, chosen, tuple(float(r) for r in rates_), int(seed_),
                          engine_, slo, capacity, price,
                          tuple(unmodelled_changes(result, cost)) + _pool_notes(servers, cost, workload),
                          clients, float(think), tuple(notes), servers, turns, reuse)


def _sessions(scenario, table: Mapping, chosen) -> tuple[int, bool]:
    turns = chosen if chosen is not None else table.get("turns", 1)
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        _fail(scenario, "simulation.turns", f"got {turns!r}", "a whole number of turns >= 1")
    history = table.get("history", "reuse")
    if history not in ("reuse", "recompute"):
        _fail(scenario, "simulation.history", f"got {history!r}", '"reuse" or "recompute"')
    return int(turns), history == "reuse"


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


def _deployment(scenario, table: Mapping, chosen: Mapping, quantity):
    """The :class:`~infermodel.simulator.Deployment` from the table and command-line choices."""
    from . import simulator

    split = dict(table.get("disaggregation", {}))
    for key in split:
        if key not in DISAGGREGATION_KEYS:
            _fail(scenario, f"simulation.disaggregation.{key}", f"unknown key {key!r}",
                  "one of " + ", ".join(DISAGGREGATION_KEYS))
    split.update({k: v for k, v in chosen.items() if k in ("prefill", "decode") and v})
    replicas = chosen.get("replicas") or table.get("replicas", 1)
    router = chosen.get("router") or table.get("router", "round_robin")
    link = split.get("link_bandwidth")
    latency = split.get("link_latency")
    bandwidth = (quantity("simulation.disaggregation.link_bandwidth", link, "B/s") if link is not None
                 else scenario.value("hardware.interconnect_bandwidth"))
    delay = (quantity("simulation.disaggregation.link_latency", latency, "s") if latency is not None
             else scenario.value("hardware.interconnect_latency") or 0.0)
    try:
        if split.get("prefill") or split.get("decode"):
            if bandwidth is None:
                _fail(scenario, "simulation.disaggregation.link_bandwidth",
                      "a disaggregated deployment moves each prompt's cache over a link, and "
                      "neither the table nor hardware.interconnect_bandwidth gives its bandwidth",
                      "a bandwidth such as \"50 GB/s\"")
            return simulator.Deployment(1, router, split.get("prefill", 0), split.get("decode", 0),
                                        float(bandwidth), float(delay))
        return simulator.Deployment(replicas, router)
    except simulator.SimulationError as exc:
        _fail(scenario, "simulation", str(exc))


def _policies_and_rates(scenario, table, defaults, policies, rates, workload):
    """The policies and nominal rates to run (the table is checked even where
    command-line choices replace it).
    """
    from . import simulator

    listed = table.get("policies", defaults.get("policies") or list(simulator.POLICY_KINDS))
    if isinstance(listed, (str, Mapping)):
        listed = [listed]
    for p in listed:
        _policy(p, defaults)
    chosen = tuple(_policy(p, defaults) for p in (policies or listed))
    if not chosen:
        _fail(scenario, "simulation.policies", "no policy chosen", "at least one policy")
    listed_rates = table.get("rates", [workload.trace.rate] if workload.trace is not None
                             else [0.2])
    if isinstance(listed_rates, (int, float)):
        listed_rates = [listed_rates]
    rates_ = list(rates or listed_rates)
    for rate in [*listed_rates, *rates_]:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0 \
                or not _finite(rate):
            _fail(scenario, "simulation.rates", f"got rate {rate!r}",
                  "arrival rates in requests/s, each > 0")
    if not rates_:
        _fail(scenario, "simulation.rates", "no arrival rate given", "at least one rate > 0")
    runs = len(chosen) * len(rates_)
    if runs > MAX_RUNS:
        _fail(scenario, "simulation.rates",
              f"{len(chosen)} policies × {len(rates_)} rates make {runs:,} runs, over the "
              f"limit of {MAX_RUNS:,} runs for one simulation",
              f"at most {MAX_RUNS:,} policy and rate pairs",
              "split the rates over several runs, or use --capacity to search the rate")
    return chosen, rates_


def _concurrency(scenario, value) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in value):
        _fail(scenario, "simulation.concurrency", f"got {value!r}",
              "closed-loop client counts, whole numbers >= 1 (e.g. [1, 8, 32])")
    return tuple(int(n) for n in value)


def lever_defaults(scenario) -> dict[str, Any]:
    """What the scenario's levers propose for the simulation.

    A lever's settings object may define ``simulation_defaults(scenario)`` returning a
    mapping with ``"policy"`` (a policy table: ``kind`` and its limits) and/or
    ``"output"`` (an output-length law table).  Proposed policies become the default
    ``policies`` (a chunked proposal replaces a paged one: chunked is paged plus a
    token budget) and fill the limits of a policy named without them.
    """
    proposed: list[dict] = []
    output = None
    for name in sorted(scenario.levers):
        method = getattr(scenario.levers[name], "simulation_defaults", None)
        if method is None:
            continue
        offer = method(scenario) or {}
        if offer.get("policy"):
            proposed.append(dict(offer["policy"]))
        if offer.get("output") is not None and output is None:
            output = (name, offer["output"])
    kinds = {p["kind"] for p in proposed}
    if "chunked" in kinds:
        proposed = [p for p in proposed if p["kind"] != "paged"]
    fields: dict[str, dict] = {}
    for p in proposed:
        fields.setdefault(p["kind"], {}).update({k: v for k, v in p.items() if k != "kind"})
    defaults: dict[str, Any] = {"fields": fields}
    if proposed:
        defaults["policies"] = [dict(kind=k, **v) for k, v in fields.items()]
    if output is not None:
        defaults["output"] = output
    return defaults


def _policy(value, defaults):
    """A policy, with the limits the levers propose for a kind named without them."""
    from . import simulator

    if isinstance(value, str):
        value = {"kind": value}
    if isinstance(value, Mapping) and "kind" in value:
        extra = defaults["fields"].get(value["kind"], {})
        value = {**extra, **value}
    return simulator.policy(value)


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
    from . import simulator

    budget = values.get("kv_budget_bytes")
    if cache_memory is None and budget is not None and float(budget) <= 0:
        weights = float(values.get("weight_bytes", math.nan))
        memory = float(values.get("memory_bytes", math.nan))
        raise ScenarioError(scenario.problem(
            "hardware", f"the weights ({weights / 1e9:.4g} GB) leave no memory for the KV cache on "
            f"{memory / 1e9:.4g} GB of cards (kv_budget_bytes = {float(budget) / 1e9:.4g} GB): "
            "nothing can be served",
            expected="weights and reserve smaller than the cards' memory",
            suggestion="more or larger cards (hardware.count, hardware.preset), fewer weight "
                       "bits, or a smaller model"))
    return simulator.CostModel.from_quantities(values, cache_memory=cache_memory)


def _check_workload(scenario, table: Any, base: Path | None) -> None:
    """Check what the simulator would allocate or read before it does: the request count
    against :data:`MAX_REQUESTS`, and each length file's path (recorded as an input, so
    that no output of the run replaces it).
    """
    from .errors import count_text
    from .output import note_read, path_problem

    if not isinstance(table, Mapping):
        return  # the simulator's own reader names the mistake
    count = table.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count > MAX_REQUESTS:
        _fail(scenario, "simulation.workload.count",
              f"{count_text(count)} requests is over the limit of {MAX_REQUESTS:,} for one "
              "simulated workload", f"a request count of at most {MAX_REQUESTS:,}",
              "percentiles settle within a few thousand requests: simulate fewer, or run "
              "several seeds with --seed and compare")
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
            _fail(scenario, key, f"cannot read the length file: {problem}",
                  "a CSV file of lengths, relative to the scenario")
        note_read(path)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


#: Quantities whose changes by levers the iteration cost does not follow. (Every
#: iteration is priced at the prefill compute rate, as Module 10 Lab 3 does, so
#: ``decode_mfu`` plays no part.)
STEP_QUANTITIES = ("decode_step_time", "prefill_time", "tpot", "weight_bytes_per_step")


def unmodelled_changes(result, cost=None) -> list[str]:
    """Lever changes to the step time that the simulator's iteration cost leaves out.

    A plugin that defines one of the simulator's cost terms
    (:data:`infermodel.simulator.EXTENSION_QUANTITIES`: pipeline stages, communication,
    a host-resident cache share, expert coverage) has its step-time changes priced by
    the simulator itself, so they are not reported.
    """
    from .simulator import EXTENSION_QUANTITIES

    modelled = {result.graph[name].plugin for name in EXTENSION_QUANTITIES if name in result.graph}
    notes = []
    for name in STEP_QUANTITIES:
        if name not in result.graph:
            continue
        quantity = result.graph[name]
        for change in quantity.history[1:]:
            if change.plugin in modelled:
                continue
            notes.append(f"{name} is changed by plugin {change.plugin!r} ({change.reason}); "
                         "the simulator's iteration cost does not include that change"
                         + _effect(result, quantity))
    values = result.values
    if "kv_bytes_per_sequence" in values and "kv_bytes_per_token" in values:
        linear = values["kv_bytes_per_token"] * values.get("sequence_length", 0)
        held = values["kv_bytes_per_sequence"]
        if held and linear and abs(linear / held - 1) > 0.01 and "kv_layers" in values:
            notes.append(f"the simulator charges kv_bytes_per_token for every cached position, "
                         f"but this model's windowed or fixed-state layers hold "
                         f"{held / 1e6:.4g} MB per full-length sequence, not {linear / 1e6:.4g} MB "
                         f"({linear / held:.2f}x): its cache occupancy and reads are approximate")
    notes.extend(cost.unmodelled() if cost is not None else [])
    return notes


def _effect(result, quantity) -> str:
    """How big the left-out change is: the quantity with and without the levers."""
    first = quantity.history[0]
    expression = first.expression
    try:
        if first.kind == "input" or not hasattr(expression, "free_symbols"):
            before = float(expression)
        else:
            before = float(expression.subs({s: result.values[s.name] for s in expression.free_symbols}))
        after = float(result.values[quantity.name])
    except (KeyError, TypeError, ValueError):
        return ""
    if not (math.isfinite(before) and math.isfinite(after)) or before == 0 or after == before:
        return ""
    return (f" (with it {quantity.name} = {after:.4g}, without it {before:.4g}: "
            f"{after / before:.3g}x; the simulated times follow the value without it)")


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
    from . import simulator
    from .scenario import Scenario, load_scenario

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
        return attrs.evolve(result, notes=chosen.notes)
    except simulator.SimulationError as exc:
        raise ScenarioError(Problem(str(exc), file=str(scenario.path) if scenario.path else None,
                                    key="simulation")) from None


def _capacity(scenario, chosen, policies, seeds, scheduler, address, progress, pool="both"):
    """One capacity search, or one per policy and seed (run by the grid's scheduler)."""
    from . import simulator
    from .simulator.grid import execute

    settings = dict(chosen.capacity)
    named = settings.pop("policy", "chunked")
    defaults = lever_defaults(scenario)
    first = chosen.policies[0]  # its prefix-cache settings apply to the searched policy too
    searched = list(chosen.policies) if policies else [attrs.evolve(_policy(named, defaults),
        prefix_caching=first.prefix_caching, block_tokens=first.block_tokens)]
    seed_list = list(seeds) if seeds else [chosen.seed]
    tasks = [(chosen.cost_model, chosen.workload, p, chosen.slo, settings.get("low", 0.01),
              settings.get("high", 4.0), settings.get("steps", 10), settings.get("neighbour", 0.005),
              s, chosen.engine, None, None, chosen.deployment, pool)
             for p in searched for s in seed_list]
    if len(tasks) == 1:
        return CapacityReport(simulator.capacity_search(*tasks[0][:10], progress=progress,
                                                        deployment=chosen.deployment, pool=pool),
                              chosen.price_per_hour)
    found = execute(simulator.capacity_search, tasks, scheduler, address, progress)
    return CapacityReports(tuple(CapacityReport(f, chosen.price_per_hour) for f in found),
                           tuple(s for _ in searched for s in seed_list))


@attrs.frozen
class CapacityReports:
    """Several capacity searches (one per policy and seed)."""

    reports: tuple
    seeds: tuple

    def to_dict(self) -> dict:
        return {"searches": [dict(r.to_dict(), seed=s) for r, s in zip(self.reports, self.seeds)]}

    def text(self) -> str:
        return "\n\n".join(f"seed {s}: {r.text()}" for r, s in zip(self.reports, self.seeds))


@attrs.frozen
class CapacityReport:
    """A capacity search result priced with the scenario's hourly cost."""

    search: Any
    price_per_hour: float | None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        if self.price_per_hour is None:
            return None
        return self.search.usd_per_million_output_tokens(self.price_per_hour)

    def to_dict(self) -> dict:
        data = self.search.to_dict()
        data["price_per_hour"] = self.price_per_hour
        cost = self.usd_per_million_output_tokens
        # Nothing finished (no throughput) prices at infinity: JSON writes it as "inf".
        data["usd_per_million_output_tokens"] = (
            non_finite_json(cost) if cost is not None and not math.isfinite(cost) else cost)
        return data

    def text(self) -> str:
        s = self.search
        m = s.metrics
        judged = {"both": f"p99 TTFT <= {s.slo.ttft:g} s and p99 ITL <= {s.slo.itl * 1000:g} ms",
                  "prefill": f"prefill pool: p99 TTFT <= {s.slo.ttft:g} s",
                  "decode": f"decode pool: p99 ITL <= {s.slo.itl * 1000:g} ms"}[s.pool]
        head = f"capacity ({s.policy}, {judged}):"
        if not s.passes:
            return "\n".join([head, f"  {s.message}",
                               "  try looser objectives, another policy or more hardware"])
        lines = [
            head,
            f"  nominal rate      {s.rate:.3f} requests/s ({s.rate * 3600:.0f} requests/h)",
            f"  realised rate     {m['realised_rate']:.3f} requests/s",
            f"  output            {m['throughput_tokens_per_s']:.1f} tokens/s",
            f"  goodput           {m['goodput']:.3f} requests/s (per-request TTFT and max-gap rule)",
            f"  TTFT p50/p99      {m['ttft_p50']:.2f} / {m['ttft_p99']:.2f} s",
            f"  ITL p50/p99/max   {m['itl_p50'] * 1000:.1f} / {m['itl_p99'] * 1000:.1f} / "
            f"{m['itl_max'] * 1000:.1f} ms",
        ]
        for rate, passed, _ in s.neighbours:
            lines.append(f"  neighbour {rate:.3f}/s  {'passes' if passed else 'fails'}")
        if not s.monotone:
            lines.append("  note: the neighbours do not bracket a clean pass/fail boundary here")
        if s.widened:
            lines.append(f"  note: {s.message}")
        cost = self.usd_per_million_output_tokens
        if cost is not None:
            lines.append(f"  cost              USD {cost:.3f} per million output tokens "
                         f"at USD {self.price_per_hour:.2f}/h")
        return "\n".join(lines)


def plot_latency(result, output: str | Path) -> Path:
    """Latency percentiles vs offered load, one line per policy (PNG or SVG)."""
    from .plots import _figure, save

    figure, axes = _figure(rows=2)
    top, bottom = axes
    for name in dict.fromkeys(run.policy for run in result.runs):
        runs = sorted((r for r in result.runs if r.policy == name), key=lambda r: r.rate)
        rates = [r.rate for r in runs]
        line, = top.plot(rates, [r.metrics["ttft_p99"] for r in runs], marker="o", label=f"{name} p99")
        top.plot(rates, [r.metrics["ttft_p50"] for r in runs], linestyle=":", color=line.get_color(),
                 label=f"{name} p50")
        bottom.plot(rates, [r.metrics["itl_p99"] * 1000 for r in runs], marker="o",
                    color=line.get_color(), label=f"{name} p99")
        bottom.plot(rates, [r.metrics["itl_p50"] * 1000 for r in runs], linestyle=":",
                    color=line.get_color(), label=f"{name} p50")
    top.axhline(result.slo.ttft, color="black", linestyle="--", linewidth=0.8)
    bottom.axhline(result.slo.itl * 1000, color="black", linestyle="--", linewidth=0.8)
    # Log axes with plain numbers (0.5, 2, 30), not powers of ten.
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _position: f"{value:g}")
    for panel in (top, bottom):
        panel.set_yscale("log")
        panel.yaxis.set_major_formatter(plain)
        panel.yaxis.set_minor_formatter(FuncFormatter(lambda _value, _position: ""))
    top.set_ylabel("TTFT (s)")
    bottom.set_ylabel("ITL (ms)")
    bottom.set_xlabel("nominal arrival rate (requests/s)")
    top.legend(fontsize=7, ncol=2)
    bottom.legend(fontsize=7, ncol=2)
    top.set_title("Latency percentiles vs offered load (dashed: objective)")
    return save(figure, output)


REQUEST_COLUMNS = ("policy", "rate", "concurrency", "request", "arrival", "first_token", "finish",
                   "prompt_tokens", "output_tokens", "preemptions", "rollbacks")


def requests_csv(result) -> str:
    """One row per request of every run (runs kept with ``keep_records``): times in
    seconds from the start of the run; ``preemptions`` counts evictions that discarded
    the request's cached positions, ``rollbacks`` admissions undone with nothing cached.
    """
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(REQUEST_COLUMNS)
    for run in result.runs:
        r = run.record
        zeros = [0] * r.arrivals.size
        evicted = r.request_preemptions if r.request_preemptions is not None else zeros
        undone = r.request_rollbacks if r.request_rollbacks is not None else zeros
        rate = "" if math.isnan(run.rate) else repr(run.rate)
        clients = "" if run.concurrency is None else run.concurrency
        for i in range(r.arrivals.size):
            writer.writerow([run.policy, rate, clients, i, repr(float(r.arrivals[i])),
                             repr(float(r.first_token[i])), repr(float(r.last_token[i])),
                             int(r.prompts[i]), int(r.outputs[i]), int(evicted[i]), int(undone[i])])
    return buffer.getvalue()


def _series_of(run) -> tuple[dict, list[str]]:
    """A run's time series and each point's server: ``server``, ``replica i``, ``prefill i``..."""
    series = run.record.series
    return series, list(series.get("server", ["server"] * len(series["time"])))


def timeseries_csv(result) -> str:
    """Every run's time series: at each scheduling decision, the requests waiting, the
    requests running and the share of the cache in use.
    """
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["policy", "rate", "concurrency", "time", "waiting", "running", "cache_use", "server"])
    for run in result.runs:
        series, servers = _series_of(run)
        rate = "" if math.isnan(run.rate) else repr(run.rate)
        clients = "" if run.concurrency is None else run.concurrency
        for t, w, n, c, server in zip(series["time"], series["waiting"], series["running"],
                                      series["cache_use"], servers):
            writer.writerow([run.policy, rate, clients, repr(float(t)), int(w), int(n),
                             repr(float(c)), server])
    return buffer.getvalue()


def plot_timeseries(result, output: str | Path) -> Path:
    """Waiting requests, running batch and cache use over time, one line per run and server."""
    from .plots import _figure, save

    figure, axes = _figure(rows=3)
    for run in result.runs:
        series, servers = _series_of(run)
        label = run.policy + (f" N={run.concurrency}" if run.concurrency is not None
                              else f" {run.rate:g}/s")
        for server in dict.fromkeys(servers):
            at = [i for i, s in enumerate(servers) if s == server]
            name = label if server == "server" else f"{label} {server}"
            line, = axes[0].step(series["time"][at], series["waiting"][at], where="post", label=name)
            axes[1].step(series["time"][at], series["running"][at], where="post", color=line.get_color())
            axes[2].plot(series["time"][at], series["cache_use"][at], color=line.get_color())
    axes[0].set_ylabel("waiting")
    axes[1].set_ylabel("running")
    axes[2].set_ylabel("cache use")
    axes[2].set_xlabel("time (s)")
    axes[0].legend(fontsize=7, ncol=2)
    axes[0].set_title("Queue, running batch and cache use over time")
    return save(figure, output)
