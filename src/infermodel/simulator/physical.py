"""The physical efficiency model's terms of one serving iteration (see
:mod:`infermodel.simulator.cost`): products with rows padded to tiles (the routed
experts' per expert read), the weights and cache at the sustained bandwidth, every
kernel's fixed time, a graph replay or the host's launches, the engine's host work, and
tensor-parallel all-reduces priced by their size.

:class:`Physical` and :class:`Collectives` are the terms a scenario's quantities give
(:meth:`CostModel.from_quantities <infermodel.simulator.cost.CostModel.from_quantities>`);
:func:`products`, :func:`step` and :func:`one_iteration` price an iteration with them,
the last in plain floats with the array path's operations in its order (the same bits).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .errors import SimulationError

if TYPE_CHECKING:
    from .cost import CostModel

__all__ = ["Collectives", "Physical", "one_iteration", "products", "step"]


def _positive(name: str):
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value > 0):
            raise SimulationError(f"cost model: {name} must be a positive finite number, got {value!r}")

    return check


def _non_negative(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value >= 0):
        raise SimulationError(
            f"cost model: {attribute.name} must be a non-negative finite number, got {value!r}")


def _at_least_one(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value < math.inf:
        raise SimulationError(f"cost model: {attribute.name} must be a number ≥ 1, got {value!r}")


@attrs.frozen
class Physical:
    """The physical efficiency model's terms of an iteration (see the module docstring)."""

    #: Rows of one product tile: m rows cost ⌈m / tile⌉ · tile.
    tile: float = attrs.field(validator=_positive("tile"))
    #: Attention's FLOP/s (peak × attention_fraction).
    attention_compute: float = attrs.field(validator=_positive("attention_compute"))
    #: Every kernel's fixed time in one pass (s).
    kernel_fixed: float = attrs.field(default=0.0, validator=_non_negative)
    #: Host time to launch one pass's kernels without a graph (s).
    launch_bound: float = attrs.field(default=0.0, validator=_non_negative)
    #: Largest decode-only batch replayed as a captured graph.
    graph_max_batch: float = attrs.field(default=0.0, validator=_non_negative)
    #: Host time per iteration and per scheduled sequence (s).
    host_fixed: float = attrs.field(default=0.0, validator=_non_negative)
    host_per_sequence: float = attrs.field(default=0.0, validator=_non_negative)
    #: FLOPs of one token row through one routed expert in every MoE layer (0: dense).
    expert_flops_per_row: float = attrs.field(default=0.0, validator=_non_negative)
    #: Routed experts' bandwidth over the dense products' (grouped products stream slower).
    expert_bandwidth_ratio: float = attrs.field(default=1.0, validator=_positive("expert_bandwidth_ratio"))

    @classmethod
    def from_quantities(cls, values: Mapping[str, float],
                        number: Callable[[str], float]) -> Physical | None:
        """The physical model's terms, where the scenario is priced by it."""
        if "kernel_fixed_time" not in values or "gemm_tile_rows" not in values:
            return None
        peak = number("flops_peak")
        fraction = number("attention_fraction") if "attention_fraction" in values else 1.0

        def optional(name: str) -> float:
            return number(name) if name in values else 0.0

        return cls(tile=number("gemm_tile_rows"), attention_compute=peak * fraction,
                   kernel_fixed=number("kernel_fixed_time"),
                   launch_bound=optional("launch_bound_time"),
                   graph_max_batch=optional("graph_max_batch"),
                   host_fixed=optional("step_overhead"),
                   host_per_sequence=optional("sequence_overhead"),
                   expert_flops_per_row=optional("expert_flops_per_row"),
                   expert_bandwidth_ratio=(number("expert_bandwidth_fraction")
                                           / number("bandwidth_fraction"))
                   if "expert_bandwidth_fraction" in values and "bandwidth_fraction" in values
                   else 1.0)

    def padded(self, rows: np.ndarray) -> np.ndarray:
        """⌈rows / tile⌉ · tile, 0 for no rows."""
        return np.ceil(rows / self.tile) * self.tile

    def describe(self) -> str:
        moe = " (routed experts padded per expert)" if self.expert_flops_per_row else ""
        return (f"physical model: rows padded to tiles of {self.tile:g}{moe}; attention at "
                f"{self.attention_compute / 1e12:.4g} TFLOP/s; kernels {self.kernel_fixed * 1e3:.4g} ms "
                f"fixed, {self.launch_bound * 1e3:.4g} ms to launch without a graph (decode "
                f"batches up to {self.graph_max_batch:g} replay one); host "
                f"{self.host_fixed * 1e3:.4g} ms + {self.host_per_sequence * 1e6:.4g} µs per sequence")


@attrs.frozen
class Collectives:
    """Tensor-parallel all-reduces priced by size: one-shot below a limit, ring above."""

    count: float = attrs.field(validator=_non_negative)
    cards: float = attrs.field(validator=_at_least_one)
    bytes_per_token: float = attrs.field(validator=_non_negative)
    oneshot_bytes: float = attrs.field(validator=_non_negative)
    bandwidth: float = attrs.field(validator=_positive("collective bandwidth"))
    fixed_latency: float = attrs.field(default=0.0, validator=_non_negative)
    step_latency: float = attrs.field(default=0.0, validator=_non_negative)

    @classmethod
    def from_quantities(cls, values: Mapping[str, float],
                        number: Callable[[str], float]) -> Collectives | None:
        """All-reduces by size, where the parallelism lever prices them so."""
        needed = ("collective_count", "collective_bytes_per_token", "collective_oneshot_bytes",
                  "parallel_link_bandwidth", "parallel_tensor_degree")
        if not all(name in values for name in needed) or number("parallel_tensor_degree") <= 1:
            return None
        fraction = (number("collective_bandwidth_fraction")
                    if "collective_bandwidth_fraction" in values else 1.0)
        return cls(
            count=number("collective_count"), cards=number("parallel_tensor_degree"),
            bytes_per_token=number("collective_bytes_per_token"),
            oneshot_bytes=number("collective_oneshot_bytes"),
            bandwidth=number("parallel_link_bandwidth") * fraction,
            fixed_latency=(number("parallel_collective_latency")
                           if "parallel_collective_latency" in values else 0.0),
            step_latency=number("parallel_link_latency") if "parallel_link_latency" in values else 0.0)

    def time(self, tokens: np.ndarray) -> np.ndarray:
        """Seconds of all-reduces for a micro-batch of ``tokens``.

        >>> c = Collectives(count=2, cards=4, bytes_per_token=16384, oneshot_bytes=524288,
        ...                 bandwidth=360e9, fixed_latency=5e-6, step_latency=1e-6)
        >>> round(float(c.time(np.array(1.0))) * 1e6, 3)   # two one-shot all-reduces
        12.273
        """
        n = self.cards
        size = np.asarray(tokens, dtype=np.float64) * self.bytes_per_token
        oneshot = self.fixed_latency + self.step_latency + (n - 1) * size / self.bandwidth
        ring = (self.fixed_latency + 2 * (n - 1) * self.step_latency
                + 2 * (n - 1) / n * size / self.bandwidth)
        return self.count * np.where(size <= self.oneshot_bytes, oneshot, ring)

    def describe(self) -> str:
        return (f"all-reduces: {self.count:g} per pass on {self.cards:g} cards, one-shot up to "
                f"{self.oneshot_bytes / 1024:g} KiB, ring above, at "
                f"{self.bandwidth / 1e9:.4g} GB/s, {self.fixed_latency * 1e6:.4g} µs each")


def products(cost: CostModel, positions: np.ndarray, heads: np.ndarray,
             micro: np.ndarray) -> np.ndarray:
    """The products' FLOPs of one physical-model iteration, rows padded to tiles (the
    routed experts' per expert read).
    """
    phys = cost.physical
    assert phys is not None
    rows = positions / micro
    body = cost.flops_per_body_position if cost.head_params else cost.flops_per_position
    products = micro * phys.padded(rows)
    if phys.expert_flops_per_row:
        e, k = cost.experts, cost.active_experts
        with np.errstate(divide="ignore", invalid="ignore"):
            read = e * (1 - (1 - k / e) ** rows)
            per_expert = np.where(read > 0, rows * k / read, 0.0)
        expert = micro * phys.expert_flops_per_row * read * phys.padded(per_expert)
        matmul = (body - k * phys.expert_flops_per_row) * products + expert
    else:
        matmul = body * products
    if cost.head_params:
        matmul = matmul + cost.flops_per_head_position * heads
    return matmul

def step(cost: CostModel, positions: np.ndarray, count: np.ndarray, micro: np.ndarray,
         weights: Any, cached: np.ndarray, matmul: Any, pairs: Any) -> np.ndarray:
    """One iteration on the physical model, from its products' FLOPs (see the module
    docstring).
    """
    phys = cost.physical
    assert phys is not None
    scale = cost.stages / micro
    rows = positions / micro
    gemm = scale * matmul / cost.compute
    attend = scale * pairs / phys.attention_compute
    weight_time = cost.stages * weights / cost.bandwidth
    if cost.routed_expert_bytes and phys.expert_bandwidth_ratio != 1.0:
        e, k = cost.experts, cost.active_experts
        expert_bytes = cost.routed_expert_bytes * e * (1 - (1 - k / e) ** rows)
        weight_time = weight_time + cost.stages * expert_bytes * (
            1 / phys.expert_bandwidth_ratio - 1) / cost.bandwidth
    cache_time = scale * (1.0 - cost.host_fraction) * cost.kv_bytes_per_token * cached / cost.bandwidth
    gpu = np.maximum(weight_time, gemm) + np.maximum(cache_time, attend) + phys.kernel_fixed
    captured = (positions == count) & (count <= phys.graph_max_batch)
    time = np.where(captured, gpu, np.maximum(gpu, phys.launch_bound))
    return time + phys.host_fixed + phys.host_per_sequence * count

def one_iteration(cost: CostModel, positions: float, attention: float, cached: float,
                  count: float, heads: float) -> float:
    """:meth:`CostModel.iteration_times` of one physical-model iteration without a layout, in
    floats: the same operations in the same order, so the same bits.
    """
    phys = cost.physical
    assert phys is not None
    micro = max(1.0, min(float(cost.stages), count))
    scale = cost.stages / micro
    rows = positions / micro
    tile = phys.tile
    e, k = cost.experts, cost.active_experts
    body = cost.flops_per_body_position if cost.head_params else cost.flops_per_position
    products = micro * (math.ceil(rows / tile) * tile)
    if phys.expert_flops_per_row:
        read = e * (1 - (1 - k / e) ** rows)
        per_expert = rows * k / read if read > 0 else 0.0
        expert = micro * phys.expert_flops_per_row * read * (math.ceil(per_expert / tile) * tile)
        matmul = (body - k * phys.expert_flops_per_row) * products + expert
    else:
        matmul = body * products
    if cost.head_params:
        matmul = matmul + cost.flops_per_head_position * heads
    pairs = cost.flops_per_attention_pair * attention
    comm = cost.comm_per_token * positions / micro
    weights = cost.weight_bytes
    if cost.routed_expert_bytes:
        weights = weights - cost.routed_expert_bytes * (e - e * (1 - (1 - k / e) ** rows))
    if cost.embedding_row_bytes:
        weights = weights - cost.embedding_row_bytes * (
            cost.embedding_rows - min(rows, cost.embedding_rows))
    gemm = scale * matmul / cost.compute
    attend = scale * pairs / phys.attention_compute
    weight_time = cost.stages * weights / cost.bandwidth
    if cost.routed_expert_bytes and phys.expert_bandwidth_ratio != 1.0:
        expert_bytes = cost.routed_expert_bytes * e * (1 - (1 - k / e) ** rows)
        weight_time = weight_time + cost.stages * expert_bytes * (
            1 / phys.expert_bandwidth_ratio - 1) / cost.bandwidth
    cache_time = scale * (1.0 - cost.host_fraction) * cost.kv_bytes_per_token * cached / cost.bandwidth
    gpu = max(weight_time, gemm) + max(cache_time, attend) + phys.kernel_fixed
    if not (positions == count and count <= phys.graph_max_batch):
        gpu = max(gpu, phys.launch_bound)
    time = gpu + phys.host_fixed + phys.host_per_sequence * count
    if cost.host_fraction:
        host = cost.host_fraction * cost.kv_bytes_per_token * cached / cost.host_bandwidth
        time = max(time, host) if cost.host_overlap else time + host
    if cost.collectives is not None:
        time = time + float(cost.collectives.time(np.array(rows)))
    return time + cost.overhead + cost.comm_fixed + comm

