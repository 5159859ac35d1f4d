"""The simulator's contract with a scenario's quantity graph.

The serving simulator (:mod:`infermodel.simulator`) never sees a scenario: the bridge
reads numbers from the scenario's *evaluated* graph and hands them over. This module
says which quantities those are and what the simulation does with each
(:data:`CONTRACT`), builds the simulator's cost model from them (:func:`cost_model`)
and finds what a lever changed that the simulation cannot follow
(:func:`unmodelled_changes`).

Because every number is read from the evaluated graph, a lever that changes a
quantity of the contract — or anything that quantity is computed from — changes the
simulation with no further work (a third-party eviction lever that shrinks
``kv_bytes_per_sequence`` raises the simulated capacity). A lever that changes any
other quantity (``decode_step_time``, ``tpot``, ``max_sequences``…) is a warning of
``infermodel simulate`` naming the change and its size. The changes of a plugin that
defines one of the simulator's own cost terms
(:data:`infermodel.simulator.EXTENSION_QUANTITIES`: pipeline stages, communication,
a host-resident cache share, expert coverage, a shared prefix, speculation) are priced
by the simulator itself and raise no such warning.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

#: Every quantity the simulation may read, and what it does with it. A lever that
#: changes one of these (or anything it is computed from) changes the simulation.
CONTRACT: Mapping[str, str] = {
    "weight_bytes": "bytes of weights every iteration reads",
    "kv_bytes_per_token": "cache bytes a scheduled sequence reads per cached position in each "
                          "iteration, and moves per position (swap, cache transfers)",
    "kv_bytes_per_sequence": "with kv_positions_per_sequence: the memory one cached position "
                             "takes, their ratio, against which requests are admitted, grow "
                             "and are preempted",
    "kv_positions_per_sequence": "the positions kv_bytes_per_sequence is spread over",
    "kv_budget_bytes": "memory for the cache (unless [simulation] cache_memory is given)",
    "memory_bytes": "with reserve_bytes, the cache memory when kv_budget_bytes is absent",
    "reserve_bytes": "see memory_bytes",
    "params_matmul": "2 · params_matmul FLOPs per scheduled position",
    "layers": "4 · layers · query_width FLOPs per query–key pair",
    "query_width": "see layers",
    "bandwidth": "bytes per second of every iteration's reads",
    "flops_effective_prefill": "FLOP/s of every iteration, prefill and decode alike (Module "
                               "10 Lab 3 prices both at the prefill rate)",
    "flops_peak": "with prefill_mfu, the compute when flops_effective_prefill is absent",
    "prefill_mfu": "see flops_peak",
    "t0": "a fixed time added to every iteration",
    "experts": "with active_experts and routed_expert_bytes, the experts a micro-batch reads",
    "active_experts": "see experts",
    "sequence_length": "per-layer models: kv_bytes_per_sequence / sequence_length bytes read "
                       "per cached position",
    "kv_layers": "per-layer models: with attention_flops_decode and context, the attention "
                 "FLOPs per query–key pair",
    "attention_flops_decode": "see kv_layers",
    "context": "see kv_layers",
    "prompt_tokens": "the mean of the default prompt-length law (when [simulation.workload] "
                     "writes none)",
    "output_tokens": "the mean of the default output-length law (when [simulation.workload] "
                     "writes none)",
    "cost_per_hour": "the price of the simulated capacity",
    "prefix_block_tokens": "positions per prefix-cache block (else paged_block_tokens)",
    "paged_block_tokens": "see prefix_block_tokens",
}

#: The analytic figures the simulated metrics stand in for: a lever's change to one of
#: them, or to anything they are computed from, is what a simulation must follow.
SIMULATED = ("decode_step_time", "prefill_time", "tpot", "ttft", "ttft_batch", "e2e_latency",
             "tokens_per_s_per_user", "tokens_per_s_total", "max_sequences", "max_context")
#: Names read only by a per-layer model (windowed or fixed-state layers).
LAYERED = ("kv_layers", "attention_flops_decode", "context", "sequence_length")
#: Relative difference below which stored and read bytes per position count as equal.
SAME = 1e-9


def simulator_quantities() -> dict[str, str]:
    """:data:`CONTRACT` with the simulator's own cost terms and conventions, each with
    what it is for (the table the documentation prints).
    """
    from ...simulator import CONVENTION_QUANTITIES, EXTENSION_QUANTITIES, PHYSICAL_QUANTITIES

    out = dict(CONTRACT)
    for name in EXTENSION_QUANTITIES:
        out.setdefault(name, "a cost term the simulator prices itself (a lever defines it)")
    for name in PHYSICAL_QUANTITIES:
        out.setdefault(name, "a term of the physical efficiency model or of the collectives")
    for name in CONVENTION_QUANTITIES:
        out.setdefault(name, "an engine convention of the iteration cost")
    return out


def reads(values: Mapping[str, Any], workload: Mapping[str, Any] | None = None) -> set[str]:
    """The quantities of :func:`contract` this simulation reads: those the scenario has,
    less the per-layer ones for a uniform model and the lengths whose laws
    ``workload`` (the written ``[simulation.workload]`` table) gives itself.
    """
    names = {name for name in simulator_quantities() if name in values}
    if layered_values(values) is values:
        names -= set(LAYERED)
    written = workload if isinstance(workload, Mapping) else {}
    if "trace" in written:
        names -= {"prompt_tokens", "output_tokens"}
    for law, name in (("prompt", "prompt_tokens"), ("output", "output_tokens")):
        if law in written:
            names.discard(name)
    return names


def layered_values(values: Mapping) -> Mapping:
    """Per-layer model: bytes per position and FLOPs per pair from the layer model's sums."""
    names = ("kv_layers", "kv_bytes_per_sequence", "sequence_length", "attention_flops_decode",
             "context", "query_width")
    if not all(n in values for n in names) or min(float(values[n]) for n in names[2:]) <= 0:
        return values
    return {**values, "kv_bytes_per_token": values["kv_bytes_per_sequence"] / values["sequence_length"],
            "layers": values["attention_flops_decode"] / (4 * values["query_width"] * values["context"])}


def stored_bytes_per_position(values: Mapping[str, Any]) -> float | None:
    """The memory one cached position takes: ``kv_bytes_per_sequence /
    kv_positions_per_sequence`` (None when the scenario lacks either or they are not
    positive and finite).

    >>> stored_bytes_per_position({"kv_bytes_per_sequence": 884736000.0,
    ...                            "kv_positions_per_sequence": 6000.0})
    147456.0
    """
    try:
        held = float(values["kv_bytes_per_sequence"])
        positions = float(values["kv_positions_per_sequence"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(held) and math.isfinite(positions) and held > 0 and positions > 0):
        return None
    return held / positions


def cost_model(values: Mapping[str, Any], cache_memory: float | None = None, *,
               measured: Any = None):
    """The simulator's :class:`~infermodel.simulator.CostModel` from evaluated quantities.

    Reads ``kv_bytes_per_token`` as the bytes read per cached position. Where a position
    takes a different amount of memory (:func:`stored_bytes_per_position`: a lever kept
    only part of each sequence's cache, say), the cache memory is rescaled so that it
    holds ``memory / stored`` positions: the engines count positions at
    ``kv_bytes_per_token`` each, so capacity, admission and preemption follow the stored
    size while the traffic stays the read size. ``measured`` is a plugin's iteration
    cost (:func:`~infermodel.hookspecs.infermodel_iteration_cost`), None for the roofline.
    """
    from ... import simulator

    cost = simulator.CostModel.from_quantities(layered_values(values), cache_memory=cache_memory,
                                               measured=measured)
    stored = stored_bytes_per_position(values)
    if stored is None or abs(stored / cost.kv_bytes_per_token - 1) <= SAME:
        return cost
    return attrs.evolve(cost, cache_memory=cost.cache_memory * cost.kv_bytes_per_token / stored)


def storage_notes(values: Mapping[str, Any], cost) -> list[str]:
    """A derivation line when a cached position's memory differs from its traffic."""
    stored = stored_bytes_per_position(values)
    if stored is None or abs(stored / cost.kv_bytes_per_token - 1) <= SAME:
        return []
    positions = cost.cache_memory / cost.kv_bytes_per_token
    return [f"cache storage: a cached position takes {stored:,.6g} B (kv_bytes_per_sequence / "
            f"kv_positions_per_sequence) and is read as {cost.kv_bytes_per_token:,.6g} B "
            f"(kv_bytes_per_token): the cache memory holds {positions:,.0f} positions"]


def unmodelled_changes(result, cost=None, read: Iterable[str] | None = None) -> list[str]:
    """Lever changes the simulation leaves out, each with its size.

    A change is left out when it is made to one of the figures the simulation stands
    in for (:data:`SIMULATED`: step times, latencies, throughputs, capacity) or to
    anything they are computed from, but to no quantity the simulation reads (``read``,
    default :func:`reads` of the result) nor anything those are computed from; and when
    it is made by a plugin the simulator does not follow in its own way: one that
    defines none of its cost terms (:data:`infermodel.simulator.EXTENSION_QUANTITIES`,
    :data:`~infermodel.simulator.PHYSICAL_QUANTITIES`)
    and registers no lever whose settings propose the simulation's policy or lengths
    (``simulation_defaults``). Also listed: what a per-layer model's charge per
    position approximates, and the cost model's own omissions.
    """
    graph = result.graph
    modelled = _modelled_plugins(result)
    # a plugin pricing the iterations itself (measured kernels): its step-time changes are
    # what the simulator prices
    pricing = getattr(getattr(cost, "measured", None), "plugin", None)
    if isinstance(pricing, str):
        modelled.add(pricing)
    names = set(reads(result.values) if read is None else read)
    used = set(names)
    for name in names:
        if name in graph:
            used.update(graph.ancestors(name))
    matters = {name for name in SIMULATED if name in graph}
    for name in tuple(matters):
        matters.update(graph.ancestors(name))
    notes = []
    for name in graph:
        if name in used or name not in matters or _twin(name, graph):
            continue
        quantity = graph[name]
        for change in quantity.history[1:]:
            if change.plugin in modelled:
                continue
            notes.append(f"{name} is changed by plugin {change.plugin!r} ({change.reason}); "
                         f"the simulation reads neither {name} nor anything computed from it, "
                         "so its figures leave that change out" + _effect(result, quantity))
    values = result.values
    if "kv_bytes_per_sequence" in values and "kv_bytes_per_token" in values:
        linear = values["kv_bytes_per_token"] * values.get("sequence_length", 0)
        held = values["kv_bytes_per_sequence"]
        if held and linear and abs(linear / held - 1) > 0.01 and "kv_layers" in values:
            notes.append(f"windowed or fixed-state layers hold {held / 1e6:.4g} MB per full-length "
                         f"sequence, charged as {layered_values(values)['kv_bytes_per_token']:,.0f} B "
                         "per cached position: exact at full length, a shorter sequence up to "
                         f"{abs(held - linear) / 1e6:.4g} MB off (its fixed state, saturated windows)")
    notes.extend(cost.unmodelled() if cost is not None else [])
    return notes


def _modelled_plugins(result) -> set[str]:
    """Plugins whose changes the simulator follows in its own way (see
    :func:`unmodelled_changes`).
    """
    from ...simulator import EXTENSION_QUANTITIES, PHYSICAL_QUANTITIES

    graph = result.graph
    # The physical efficiency model and the collectives are priced term by term too.
    modelled = {graph[name].plugin for name in (*EXTENSION_QUANTITIES, *PHYSICAL_QUANTITIES)
                if name in graph}
    scenario = result.scenario
    levers = scenario.host.registries.levers
    for name, settings in scenario.levers.items():
        if hasattr(settings, "simulation_defaults") and name in levers:
            modelled.add(levers[name].plugin)
    return modelled


def _twin(name: str, graph) -> bool:
    """Whether ``name`` is a held copy of another quantity (``ttft``'s
    ``prefill_time_at_batch_1``), whose changes are its original's.
    """
    original, held, _ = name.partition("_at_")
    return bool(held) and original in graph


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
            f"{after / before:.3g}x; the simulated figures follow the value without it)")


__all__ = [
    "CONTRACT",
    "cost_model",
    "layered_values",
    "reads",
    "simulator_quantities",
    "storage_notes",
    "stored_bytes_per_position",
    "unmodelled_changes",
]
