"""How a scenario's evaluated quantities become the simulator's cost model: the names it
reads (:data:`QUANTITY_NAMES` and the optional groups a lever, the engine conventions and
the physical efficiency model define) and the fields they give
(:meth:`infermodel.simulator.CostModel.from_quantities` builds the model from them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .errors import SimulationError
from .layout import LAYOUT_QUANTITIES, ParallelLayout
from .physical import Collectives, Physical
from .speculation import SPECULATION_QUANTITIES, Speculation

__all__ = ["CONVENTION_QUANTITIES", "EXTENSION_QUANTITIES", "PHYSICAL_QUANTITIES", "QUANTITY_NAMES",
           "Number", "conventions", "cost_fields", "extensions"]

#: Quantities a lever defines so that the simulator prices its effect on every
#: iteration (read by :meth:`infermodel.simulator.CostModel.from_quantities`; all optional).
EXTENSION_QUANTITIES = (
    "pipeline_stages",          # stages a token traverses (the parallelism lever)
    "comm_time_per_iteration",  # s of communication per iteration (latency terms)
    "comm_time_per_token",      # s of communication per token of a micro-batch
    "kv_host_fraction",         # share of each cached position kept in host memory
    "kv_host_bandwidth",        # B/s of the host link(s)
    "kv_host_memory",           # B of host memory for the cache
    "kv_host_overlap",          # 1: the host copy overlaps the step; 0: it adds
    "routed_expert_bytes",      # B of one routed expert over all layers (uniform routing)
    "warm_prefix_tokens",       # shared prefix held once in the cache (prefix caching)
    "warm_prefix_hit_rate",     # share of requests that find it cached
    *SPECULATION_QUANTITIES,    # speculative decoding (see infermodel.simulator.speculation)
    *LAYOUT_QUANTITIES,         # expert parallelism, DP attention (infermodel.simulator.layout)
)

#: Quantities that say which conventions a scenario follows (the physics defines them;
#: read by :meth:`infermodel.simulator.CostModel.from_quantities`, all optional).
CONVENTION_QUANTITIES = (
    "embedding_bytes_unread",   # > 0: the engine reads input-table rows, not the table
    "embedding_row_bytes",      # B of one input-table row
    "vocab",                    # rows of the input table
    "prefill_logit_positions",  # < prompt_tokens: the head scores the last position only
    "prompt_tokens",
    "params_head_matmul",       # N_head = vocab · d, the head's weights per scored position
)

#: Quantities of the physical efficiency model and the collectives (all optional; read
#: by :meth:`infermodel.simulator.CostModel.from_quantities`).
PHYSICAL_QUANTITIES = (
    "gemm_tile_rows",           # rows of one product tile (padding)
    "attention_fraction",       # attention kernels' share of peak compute
    "kernel_fixed_time",        # s: every kernel's fixed time, one pass
    "launch_bound_time",        # s: host launches of one pass without a graph
    "graph_max_batch",          # largest decode batch replayed as a graph
    "step_overhead",            # s of host time per iteration
    "sequence_overhead",        # s of host time per scheduled sequence
    "expert_flops_per_row",     # FLOPs of one token through one routed expert, all layers
    "expert_bandwidth_fraction",  # grouped expert products' share of peak bandwidth
    "bandwidth_fraction",       # dense products' share (the bandwidth above is peak × it)
    "collective_count",         # all-reduces per pass
    "collective_bytes_per_token",
    "collective_oneshot_bytes",
    "collective_bandwidth_fraction",
    "parallel_collective_latency",
    "parallel_link_latency",
    "parallel_link_bandwidth",
    "parallel_tensor_degree",
)

#: Scenario quantity names read by :meth:`infermodel.simulator.CostModel.from_quantities`.
QUANTITY_NAMES = (
    "weight_bytes",
    "kv_bytes_per_token",
    "params_matmul",
    "layers",
    "query_width",
    "bandwidth",
    "flops_effective_prefill",
    "flops_peak",
    "prefill_mfu",
    "kv_budget_bytes",
    "memory_bytes",
    "reserve_bytes",
    "t0",
    "experts",
    "active_experts",
    *EXTENSION_QUANTITIES,
    *CONVENTION_QUANTITIES,
    *PHYSICAL_QUANTITIES,
)

#: Reads one scenario quantity as a float (raising a SimulationError that names it).
Number = Callable[[str], float]


def cost_fields(values: Mapping[str, float], cache_memory: float | None = None,
                measured: Any = None) -> dict[str, Any]:
    """The cost model's fields from evaluated scenario quantities (base units); see
    :meth:`infermodel.simulator.CostModel.from_quantities` for the names read.
    """
    required = ("weight_bytes", "kv_bytes_per_token", "params_matmul", "layers",
                "query_width", "bandwidth")
    missing = [name for name in required if name not in values]
    if "flops_effective_prefill" not in values and "flops_peak" not in values:
        missing.append("flops_effective_prefill (or flops_peak)")
    if cache_memory is None and "kv_budget_bytes" not in values and "memory_bytes" not in values:
        missing.append("kv_budget_bytes (or memory_bytes)")
    if missing:
        raise SimulationError(
            "cannot build the simulator's cost model: missing quantities "
            + ", ".join(missing)
        )

    def number(name: str) -> float:
        value = values[name]
        if isinstance(value, (bool, str, bytes)):
            raise SimulationError(f"quantity {name} must be a number, got {value!r}")
        try:
            return float(value)  # plain, numpy or sympy numbers
        except (TypeError, ValueError):
            raise SimulationError(f"quantity {name} must be a number, got {value!r}") from None

    if "flops_effective_prefill" in values:
        compute = number("flops_effective_prefill")
    else:
        compute = number("flops_peak") * (number("prefill_mfu") if "prefill_mfu" in values else 1.0)
    if cache_memory is None:
        if "kv_budget_bytes" in values:
            cache_memory = number("kv_budget_bytes")
        else:
            reserve = number("reserve_bytes") if "reserve_bytes" in values else 0.0
            cache_memory = number("memory_bytes") - number("weight_bytes") - reserve
            if cache_memory <= 0:
                raise SimulationError(
                    f"no memory left for the KV cache: memory_bytes {number('memory_bytes'):.4g} − "
                    f"weight_bytes {number('weight_bytes'):.4g} − reserve_bytes {reserve:.4g} "
                    f"= {cache_memory:.4g} bytes"
                )
    extra = extensions(values, number, float(cache_memory))
    # A plugin's measured pricing replaces the roofline, the physical terms with it.
    physical = Physical.from_quantities(values, number) if measured is None else None
    if physical is not None:
        extra["physical"] = physical
        # The physical terms carry the fixed time t0 stands for in the graph.
        values = {k: v for k, v in values.items() if k != "t0"}
    collectives = Collectives.from_quantities(values, number)
    if collectives is not None:
        extra["collectives"] = collectives
    return dict(
        weight_bytes=number("weight_bytes"),
        kv_bytes_per_token=number("kv_bytes_per_token"),
        params_matmul=number("params_matmul"),
        layers=number("layers"),
        query_width=number("query_width"),
        bandwidth=number("bandwidth"),
        compute=compute,
        cache_memory=float(extra.get("cache_memory", cache_memory)),
        overhead=number("t0") if "t0" in values else 0.0,
        measured=measured,
        **{k: v for k, v in extra.items() if k != "cache_memory"},
    )


def extensions(values: Mapping[str, float], number: Number,
               cache_memory: float) -> dict[str, Any]:
    """Fields from :data:`EXTENSION_QUANTITIES` (absent ones keep Lab 3's cost)."""
    extra: dict[str, Any] = {}
    speculation = Speculation.from_quantities(values, number)
    if speculation is not None:
        extra["speculation"] = speculation
    layout = ParallelLayout.from_quantities(values, number)
    if layout is not None:
        extra["layout"] = layout
    if "pipeline_stages" in values:
        extra["stages"] = round(number("pipeline_stages"))
    for name, field in (("comm_time_per_iteration", "comm_fixed"),
                        ("comm_time_per_token", "comm_per_token"),
                        ("routed_expert_bytes", "routed_expert_bytes")):
        if name in values:
            extra[field] = number(name)
    if extra.get("routed_expert_bytes"):
        extra["experts"] = number("experts")
        extra["active_experts"] = number("active_experts")
    extra.update(conventions(values, number))
    if "kv_host_fraction" in values and number("kv_host_fraction") > 0:
        f = number("kv_host_fraction")
        if f >= 1:
            raise SimulationError("the simulator needs part of every cached position on the "
                                  f"cards: kv_host_fraction must be < 1, got {f}")
        kv = number("kv_bytes_per_token")
        # The cards hold the resident share of every position, host memory the rest.
        tokens = cache_memory / ((1 - f) * kv)
        if "kv_host_memory" in values:
            tokens = min(tokens, number("kv_host_memory") / (f * kv))
        extra.update(host_fraction=f, host_bandwidth=number("kv_host_bandwidth"),
                     host_overlap=bool(values.get("kv_host_overlap", 0)),
                     cache_memory=tokens * kv)
    return extra


def conventions(values: Mapping[str, float], number: Number) -> dict[str, float]:
    """Fields for a scenario's engine conventions (absent quantities: Lab 3's)."""
    extra: dict[str, float] = {}
    if (all(n in values for n in ("embedding_bytes_unread", "embedding_row_bytes", "vocab"))
            and number("embedding_bytes_unread") > 0):
        extra["embedding_row_bytes"] = number("embedding_row_bytes")
        extra["embedding_rows"] = number("vocab")
    if ("params_head_matmul" in values and "prefill_logit_positions" in values
            and "prompt_tokens" in values
            and number("prefill_logit_positions") < number("prompt_tokens")):
        extra["head_params"] = number("params_head_matmul")
    return extra
