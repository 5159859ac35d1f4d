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

KEYS = ("policies", "rates", "seed", "engine", "cache_memory", "workload", "slo", "capacity")
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


def _fail(scenario, key: str, message: str, expected: str | None = None, suggestion=None):
    raise ScenarioError(scenario.problem(key, message, expected=expected, suggestion=suggestion))


def plan(scenario, *, policies: Sequence | None = None, rates: Sequence[float] | None = None,
         seed: int | None = None, engine: str | None = None, result=None) -> SimulationPlan:
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
    try:
        cost = simulator.CostModel.from_quantities(result.values, cache_memory=cache_memory)
        base = scenario.path.parent if scenario.path else None
        workload = simulator.WorkloadSpec.from_mapping(table.get("workload", {}), base_dir=base)
        # The table is checked even where command-line choices replace it.
        listed = table.get("policies", list(simulator.POLICY_KINDS))
        if isinstance(listed, (str, Mapping)):
            listed = [listed]
        for p in listed:
            simulator.policy(p)
        chosen = tuple(simulator.policy(p) for p in (policies or listed))
        if not chosen:
            _fail(scenario, "simulation.policies", "no policy chosen", "at least one policy")
        listed_rates = table.get("rates", [0.2])
        if isinstance(listed_rates, (int, float)):
            listed_rates = [listed_rates]
        rates_ = list(rates or listed_rates)
        for rate in [*listed_rates, *rates_]:
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
                _fail(scenario, "simulation.rates", f"got rate {rate!r}",
                      "arrival rates in requests/s, each > 0")
        if not rates_:
            _fail(scenario, "simulation.rates", "no arrival rate given", "at least one rate > 0")
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
    capacity = dict(table.get("capacity", {}))
    for key in capacity:
        if key not in CAPACITY_KEYS:
            near = close_match(key, CAPACITY_KEYS)
            _fail(scenario, f"simulation.capacity.{key}", f"unknown key {key!r}",
                  "one of " + ", ".join(CAPACITY_KEYS), f"did you mean {near!r}?" if near else None)
    seed_ = table.get("seed", 0) if seed is None else seed
    if isinstance(seed_, bool) or not isinstance(seed_, int):
        _fail(scenario, "simulation.seed", f"got {seed_!r}", "a whole number")
    engine_ = engine or table.get("engine", "fast")
    if engine_ not in ("fast", "reference"):
        _fail(scenario, "simulation.engine", f"got {engine_!r}", '"fast" or "reference"')
    price = result.values.get("cost_per_hour")
    return SimulationPlan(cost, workload, chosen, tuple(float(r) for r in rates_), int(seed_),
                          engine_, slo, capacity, price, tuple(unmodelled_changes(result)))


#: Quantities whose changes by levers the iteration cost does not follow. (Every
#: iteration is priced at the prefill compute rate, as Module 10 Lab 3 does, so
#: ``decode_mfu`` plays no part.)
STEP_QUANTITIES = ("decode_step_time", "prefill_time", "tpot", "weight_bytes_per_step")


def unmodelled_changes(result) -> list[str]:
    """Lever changes to the step time that the simulator's iteration cost leaves out."""
    notes = []
    for name in STEP_QUANTITIES:
        if name not in result.graph:
            continue
        for change in result.graph[name].history[1:]:
            notes.append(f"{name} is changed by plugin {change.plugin!r} ({change.reason}); "
                         "the simulator's iteration cost does not include that change")
    values = result.values
    if "kv_bytes_per_sequence" in values and "kv_bytes_per_token" in values:
        linear = values["kv_bytes_per_token"] * values.get("sequence_length", 0)
        held = values["kv_bytes_per_sequence"]
        if held and linear and abs(linear / held - 1) > 0.01 and "kv_layers" in values:
            notes.append(f"the simulator charges kv_bytes_per_token for every cached position, "
                         f"but this model's windowed or fixed-state layers hold "
                         f"{held / 1e6:.4g} MB per full-length sequence, not {linear / 1e6:.4g} MB "
                         f"({linear / held:.2f}x): its cache occupancy and reads are approximate")
    return notes


def simulate(scenario, *, policies=None, rates=None, seed=None, engine=None, capacity=False,
             overrides: Mapping[str, Any] | None = None, progress: Callable | None = None):
    """Simulate a scenario (a path or a :class:`~infermodel.scenario.Scenario`).

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
    chosen = plan(scenario, policies=policies, rates=rates, seed=seed, engine=engine)
    for note in chosen.warnings:
        warnings.warn(note, SimulationWarning, stacklevel=2)
    try:
        if capacity:
            settings = dict(chosen.capacity)
            settings.setdefault("policy", chosen.policies[0].name if policies else "chunked")
            found = simulator.capacity_search(chosen.cost_model, chosen.workload, slo=chosen.slo,
                                              seed=chosen.seed, engine=chosen.engine,
                                              progress=progress, **settings)
            return CapacityReport(found, chosen.price_per_hour)
        return simulator.simulate(chosen.cost_model, chosen.workload, chosen.policies, chosen.rates,
                                  seed=chosen.seed, slo=chosen.slo, engine=chosen.engine,
                                  progress=progress)
    except simulator.SimulationError as exc:
        raise ScenarioError(Problem(str(exc), file=str(scenario.path) if scenario.path else None,
                                    key="simulation")) from None


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
        lines = [
            f"capacity ({s.policy}, p99 TTFT <= {s.slo.ttft:g} s and p99 ITL <= {s.slo.itl * 1000:g} ms):",
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
    top.axhline(result.slo.ttft, color="black", linestyle="--", linewidth=0.8)
    bottom.axhline(result.slo.itl * 1000, color="black", linestyle="--", linewidth=0.8)
    top.set_yscale("log")
    bottom.set_yscale("log")
    top.set_ylabel("TTFT (s)")
    bottom.set_ylabel("ITL (ms)")
    bottom.set_xlabel("nominal arrival rate (requests/s)")
    top.legend(fontsize=7, ncol=2)
    top.set_title("Latency percentiles vs offered load (dashed: objective)")
    return save(figure, output)
