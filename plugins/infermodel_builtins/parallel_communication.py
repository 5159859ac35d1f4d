"""The parallelism lever's communication: the card-to-card link, each all-reduce's time
(one-shot below a size, ring above, or the ring alone) and the pipeline stages' hops,
per decode step, per prefill pass, with the cache full and per serving iteration.

Not a plugin (no entry point): :mod:`.parallelism` defines these quantities when its
``communication`` is ``"collectives"`` or ``"all_reduce"``; a layout with data-parallel
attention hands them to :mod:`.layouts` (its gathers and all-to-alls).

References: Module 10: Inference and serving, "Choose a deployment, not only a chip";
vLLM's custom all-reduce (csrc/custom_all_reduce.cuh).
"""

from __future__ import annotations

import sympy
from sympy import Min, Piecewise

from infermodel.plugin import S

from . import M10
from . import layouts as lay_formulas
from .layouts import qk_norm_comm
from .shapes import QK_NORM_REDUCED_BYTES, qk_norm_reductions, tensor_parallel_reductions

DEPLOY = f"{M10}, 'Choose a deployment, not only a chip'"
COLLECTIVES = ("vLLM's custom all-reduce (csrc/custom_all_reduce.cuh): one stage on two cards "
               "and below 512 KiB on up to four NVLink cards or 256 KiB on eight, two stages "
               "(reduce-scatter and all-gather) above; NCCL's ring beyond its 8 MiB buffer")
#: Share of the link's one-way bandwidth a collective reaches (NCCL tests' bus bandwidth
#: on NVLink and Infinity Fabric is 75–85 % of the link's).
COLLECTIVE_BANDWIDTH_FRACTION = 0.8
#: The link assumed when a card declares none: PCIe Gen4 x16 (32 GB/s one way, 5 µs).
FALLBACK_LINK = (32e9, 5e-6)


def link(scenario, lever):
    """The link's one-way bandwidth and latency: the lever's, else the card's."""
    bandwidth = lever.link_bandwidth
    if bandwidth is None:
        bandwidth = scenario.value("hardware.interconnect_bandwidth")
    latency = lever.link_latency
    if latency is None:
        latency = scenario.value("hardware.interconnect_latency")
    return bandwidth, latency


def _ring(tokens):
    """Time of one ring all-reduce of ``tokens`` activation vectors across N cards (the one
    ring formula, :func:`.layouts.ring`, which the layouts' collectives use too).
    """
    return lay_formulas.ring(S.parallel_tensor_degree, tokens)


def _hops(tokens):
    """Time for activations to cross every boundary between pipeline stages once."""
    size = tokens * S.d_model * S.parallel_activation_bytes
    return (S.parallel_pipeline_degree - 1) * (size / S.parallel_link_bandwidth + S.parallel_link_latency)


def oneshot_limit(tensor: int) -> float:
    """Largest all-reduce (bytes) the engines run in one shot on ``tensor`` cards
    (:data:`COLLECTIVES`).

    >>> oneshot_limit(2), oneshot_limit(4), oneshot_limit(8)
    (8388608, 524288, 262144)
    """
    if tensor <= 2:
        return 8 * 1024**2
    return 512 * 1024 if tensor <= 4 else 256 * 1024


def _collective(tokens):
    """One all-reduce of ``tokens`` activation vectors: one-shot below the limit, ring above."""
    n = S.parallel_tensor_degree
    size = tokens * S.d_model * S.parallel_activation_bytes
    rate = S.parallel_link_bandwidth * S.collective_bandwidth_fraction
    return Piecewise(
        (S.parallel_collective_latency + S.parallel_link_latency + (n - 1) * size / rate,
         size <= S.collective_oneshot_bytes),
        (S.parallel_collective_latency + 2 * (n - 1) * S.parallel_link_latency
         + 2 * (n - 1) / n * size / rate, True))


def _link_quantities(scenario, lever, define, lay):
    bandwidth, latency = link(scenario, lever)
    if lever.communication == "collectives" and (bandwidth is None or latency is None):
        fallback = "PCIe Gen4 x16, 32 GB/s and 5 µs (the card declares no interconnect)"
        bandwidth = FALLBACK_LINK[0] if bandwidth is None else bandwidth
        latency = FALLBACK_LINK[1] if latency is None else latency
    else:
        fallback = None
    where = "levers.parallelism" if lever.link_bandwidth is not None else "hardware.interconnect_bandwidth"
    define("parallel_link_bandwidth", bandwidth if bandwidth is not None else 1.0, unit="B/s",
           description=f"card-to-card bandwidth one way (from {fallback or where})", reference=DEPLOY)
    where = "levers.parallelism" if lever.link_latency is not None else "hardware.interconnect_latency"
    define("parallel_link_latency", latency if latency is not None else 0.0, unit="s",
           description=f"latency of one transfer step (from {fallback or where})", reference=DEPLOY)
    if not lay.active:
        define("parallel_activation_bytes", lever.activation_bytes, unit="B",
               description="bytes per activation value exchanged", reference=DEPLOY)


def _collective_quantities(scenario, define, tensor: int):
    from .efficiency_parameters import parameter

    latency, where = parameter(scenario, "collective_latency")
    define("parallel_collective_latency", latency, unit="s",
           description=f"fixed time of one collective on the cards (from {where})",
           reference=COLLECTIVES)
    define("collective_bandwidth_fraction", COLLECTIVE_BANDWIDTH_FRACTION, unit="1",
           description="share of the link's one-way bandwidth a collective reaches (NCCL tests' "
                       "bus bandwidth)", reference=COLLECTIVES)
    define("collective_oneshot_bytes", oneshot_limit(tensor), unit="B",
           description="largest all-reduce run in one shot on these cards (ring above)",
           reference=COLLECTIVES)
    define("collective_count", tensor_parallel_reductions(scenario) if tensor > 1 else 0, unit="1",
           description="all-reduces per forward pass (after each layer's mixer and feed-forward "
                       "block; the serving simulator prices each by its size)", reference=DEPLOY)
    define("collective_bytes_per_token", S.d_model * S.parallel_activation_bytes, unit="B",
           description="bytes one token adds to each all-reduce", reference=DEPLOY)


def define_communication(scenario, lever, define, lay, tensor: int) -> None:
    """The communication quantities of the lever's layout ``lay`` on ``tensor`` cards a
    layer: the link, the all-reduces and the hops per step, pass and iteration.
    """
    _link_quantities(scenario, lever, define, lay)
    if lay.data > 1:
        # Data-parallel attention: the layout's own collectives (gathers, all-to-alls).
        lay_formulas.define_communication(scenario, lay, define, _hops)
        return
    collectives = lever.communication == "collectives"
    if collectives:
        _collective_quantities(scenario, define, tensor)
    reduce = _collective if collectives else _ring
    per_micro = S.batch / S.parallel_microbatches
    # One card per stage (a pipeline alone, or tensor = 1) all-reduces nothing.
    reductions = tensor_parallel_reductions(scenario) if tensor > 1 else 0
    how = ("one-shot below collective_oneshot_bytes, ring above" if collectives
           else "2(N−1)/N·bytes/link + 2(N−1)·latency")
    define("parallel_allreduce_time", reduce(per_micro), unit="s",
           description=f"one all-reduce of a decode micro-batch's activations: {how}",
           reference=COLLECTIVES if collectives else DEPLOY)
    qk = qk_norm_reductions(scenario) if tensor > 1 else 0
    norms = (" and one of the query/key norms' mean squares per attention layer (norms over the "
             "layer's heads)") if qk else ""
    define("parallel_decode_comm_time",
           reductions * S.parallel_allreduce_time + _hops(per_micro)
           + qk_norm_comm(scenario, per_micro, tensor, collectives), unit="s",
           description=f"communication per decode step: two all-reduces per layer{norms} and the "
                       "pipeline hops, not overlapped", reference=DEPLOY)
    define("parallel_prefill_comm_time",
           reductions * reduce(per_micro * S.prompt_tokens) + _hops(per_micro * S.prompt_tokens)
           + qk_norm_comm(scenario, per_micro * S.prompt_tokens, tensor, collectives),
           unit="s", description="communication in prefill: the prompts' activations, two "
                                 f"all-reduces per layer{norms} and the pipeline hops",
           reference=DEPLOY)
    n, p = S.parallel_tensor_degree, S.parallel_pipeline_degree
    if collectives:
        # The simulator prices the all-reduces by size itself (collective_*); these carry
        # the pipeline hops only.
        define("comm_time_per_iteration", (p - 1) * S.parallel_link_latency
               + qk * (S.parallel_collective_latency + S.parallel_link_latency), unit="s",
               description="latency of the pipeline hops per iteration" + (
                   " and of the query/key norms' all-reduces" if qk else "")
               + " (the serving simulator adds it; the all-reduces after each block it prices "
                 "from collective_*)", reference=DEPLOY)
        define("comm_time_per_token",
               (p - 1) * S.d_model * S.parallel_activation_bytes / S.parallel_link_bandwidth
               + qk * (n - 1) * QK_NORM_REDUCED_BYTES
               / (S.parallel_link_bandwidth * S.collective_bandwidth_fraction),
               unit="s", description="pipeline-hop time per token of a micro-batch" + (
                   " and the query/key norms' all-reduces" if qk else "")
               + " (the serving simulator's iteration cost)", reference=DEPLOY)
    else:
        define("comm_time_per_iteration",
               (reductions + qk) * 2 * (n - 1) * S.parallel_link_latency
               + (p - 1) * S.parallel_link_latency,
               unit="s", description="latency part of an iteration's communication (the serving "
                                     "simulator adds it to every iteration)", reference=DEPLOY)
        define("comm_time_per_token",
               ((reductions * 2 * (n - 1) / n + (p - 1)) * S.d_model * S.parallel_activation_bytes
                + qk * 2 * (n - 1) / n * QK_NORM_REDUCED_BYTES) / S.parallel_link_bandwidth,
               unit="s",
               description="communication per token of a micro-batch: two ring all-reduces per "
                           "layer and the stage hops (the serving simulator's iteration cost)",
               reference=DEPLOY)
    full = sympy.Max(1, S.max_sequences)
    per_micro_full = full / Min(full, S.parallel_pipeline_degree)
    define("parallel_capacity_comm_time", reductions * reduce(per_micro_full) + _hops(per_micro_full)
           + qk_norm_comm(scenario, per_micro_full, tensor, collectives),
           unit="s", description="communication per decode step with the cache full", reference=DEPLOY)


__all__ = ["COLLECTIVES", "COLLECTIVE_BANDWIDTH_FRACTION", "DEPLOY", "FALLBACK_LINK",
           "define_communication", "link", "oneshot_limit"]
