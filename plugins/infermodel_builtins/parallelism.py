"""The parallelism lever: tensor parallel across N cards, pipeline parallel over P stages.

How cards are counted: ``hardware.count`` is the number of cards the deployment
rents, and the base physics already adds their memory, bandwidth and compute
ideally. ``[levers.parallelism]`` says how those cards are used: ``tensor × pipeline``
must equal ``hardware.count`` (``tensor`` defaults to ``hardware.count / pipeline``,
so sweeping ``hardware.count`` alone sweeps the tensor degree). The lever then takes
back what the ideal sum promised:

* **Communication.** By default (``communication = "collectives"``) each step pays
  two all-reduces of the activations per layer, each priced by its algorithm as the
  engines choose it: *one-shot* below a size (every card reads the others' buffers,
  ``α + λ + (N − 1)·S / β``) and *ring* above it (``α + 2(N − 1)·λ + 2(N − 1)/N · S /
  β``), with S the bytes reduced, β the card's interconnect bandwidth (NVLink, PCIe,
  Infinity Fabric, ICI: ``hardware.interconnect_bandwidth``) times the share a
  collective reaches, λ its per-step latency (``hardware.interconnect_latency``) and α
  the engine's fixed cost of one collective (``efficiency.collective_latency``, fitted
  with the physical model), plus one point-to-point hop between pipeline stages.
  Two stated conventions remain: ``"efficiency"`` scales the cards' rates by a
  tensor-parallel efficiency e (the Inference lab's illustrative table: 1, 0.9, 0.8,
  0.7 for 1, 2, 4 and 8 cards, which the lab's scenarios state), and ``"all_reduce"``
  pays a plain ring all-reduce, 2·(N − 1)/N · bytes / link + 2·(N − 1) · link latency.
  Communication is added to the step, not overlapped: an upper bound.
* **Memory per card.** Weights and the KV cache are split across the cards; the
  checks are made for the fullest card. A KV head cannot be split, so with more
  tensor ranks than KV heads each head is replicated; a pipeline whose stages do not
  divide the layers evenly is limited by its largest stage. The runtime reserve is
  kept on every card (an absolute reserve is per card; a fraction is of each card).
* **Pipeline.** Capacity adds, but one request still traverses every stage. The
  batch moves as ``min(batch, pipeline)`` micro-batches; each re-reads the stage's
  weights, and with fewer sequences than stages the other stages wait.
"""

from __future__ import annotations

import attrs
import sympy
from sympy import Min, Piecewise, ceiling

from infermodel.plugin import BytesPerSecond, S, Seconds, Stage, hookimpl

from . import LAB, M10
from .shapes import structure, tensor_parallel_reductions

DEPLOY = f"{M10}, 'Choose a deployment, not only a chip'"
PLANNER = f"{LAB}, 'What it costs to keep it running'"
BUDGET = f"{PLANNER}; {M10}, §11 'Budget memory at the accepted maximum length'"

#: The Inference lab's illustrative tensor-parallel efficiencies by degree.
LAB_EFFICIENCY = {"1": 1.0, "2": 0.9, "4": 0.8, "8": 0.7}
COMMUNICATION = ("collectives", "efficiency", "all_reduce")
COLLECTIVES = ("vLLM's custom all-reduce (csrc/custom_all_reduce.cuh): one stage on two cards "
               "and below 512 KiB on up to four NVLink cards or 256 KiB on eight, two stages "
               "(reduce-scatter and all-gather) above; NCCL's ring beyond its 8 MiB buffer")
#: Share of the link's one-way bandwidth a collective reaches (NCCL tests' bus bandwidth
#: on NVLink and Infinity Fabric is 75–85 % of the link's).
COLLECTIVE_BANDWIDTH_FRACTION = 0.8
#: The link assumed when a card declares none: PCIe Gen4 x16 (32 GB/s one way, 5 µs).
FALLBACK_LINK = (32e9, 5e-6)


def _positive_int(instance, attribute, value):
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} = {value!r} must be at least 1")


def _efficiency(instance, attribute, value):
    if value is not None and not 0 < value <= 1:
        raise ValueError(f"{attribute.name} = {value!r} is not an efficiency in (0, 1]")


def _table(instance, attribute, value):
    if value is None:
        return
    for degree, e in value.items():
        if not degree.isdigit() or int(degree) < 1:
            raise ValueError(f"efficiency_table key {degree!r} is not a tensor degree "
                             "(a positive integer written as a key, such as \"4\")")
        if not 0 < e <= 1:
            raise ValueError(f"efficiency_table[{degree!r}] = {e!r} is not an efficiency in (0, 1]")


def _choice(instance, attribute, value):
    if value not in COMMUNICATION:
        raise ValueError(f"communication = {value!r} is not one of "
                         + ", ".join(repr(c) for c in COMMUNICATION))


def _positive(instance, attribute, value):
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} = {value!r} must be greater than 0")


def _non_negative(instance, attribute, value):
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} = {value!r} must not be negative")


@attrs.frozen
class Parallelism:
    """How ``hardware.count`` cards share the model: tensor degree, pipeline stages and
    what the split costs (an efficiency, or an explicit all-reduce).
    """

    tensor: int | None = attrs.field(default=None, validator=_positive_int,
        metadata={"description": "tensor-parallel degree (default: hardware.count / pipeline)"})
    pipeline: int = attrs.field(default=1, validator=_positive_int,
        metadata={"description": "pipeline stages; tensor × pipeline must equal hardware.count"})
    communication: str = attrs.field(default="collectives", validator=_choice,
        metadata={"description": (
            "\"collectives\" (default: two all-reduces per layer, one-shot below a size and "
            "ring above, over the card's interconnect), \"efficiency\" (rates scaled by a "
            "share reached: the Inference lab's table by card count) or \"all_reduce\" (a "
            "plain ring all-reduce time added per layer)")})
    efficiency: float | None = attrs.field(default=None, validator=_efficiency,
        metadata={"description": (
            "share of the summed bandwidth and compute the cards reach together "
            "(default: the lab's table by card count)")})
    efficiency_table: dict[str, float] | None = attrs.field(default=None, validator=_table,
        metadata={"description": 'shares by card count, e.g. {"2" = 0.9, "4" = 0.8}'})
    link_bandwidth: BytesPerSecond | None = attrs.field(default=None, validator=_positive,
        metadata={"description": (
            "bandwidth of one card's link to the others (default: the hardware "
            "preset's)")})
    link_latency: Seconds | None = attrs.field(default=None, validator=_non_negative,
        metadata={"description": "latency of one transfer between cards (default: the hardware preset's)"})
    activation_bytes: float = attrs.field(default=2.0, validator=_positive,
        metadata={"description": "bytes per activation value sent between cards"})


def degrees(scenario) -> tuple[int, int]:
    """(tensor, pipeline) degrees of a scenario using the lever."""
    lever = scenario.lever("parallelism")
    count = scenario.value("hardware.count")
    pipeline = lever.pipeline
    tensor = lever.tensor if lever.tensor is not None else max(1, count // pipeline)
    return tensor, pipeline


def efficiency_of(lever, tensor: int) -> float | None:
    if lever.efficiency is not None:
        return lever.efficiency
    if lever.communication != "efficiency":
        return 1.0
    table = lever.efficiency_table if lever.efficiency_table is not None else LAB_EFFICIENCY
    return table.get(str(tensor))


def _link(scenario, lever):
    bandwidth = lever.link_bandwidth
    if bandwidth is None:
        bandwidth = scenario.value("hardware.interconnect_bandwidth")
    latency = lever.link_latency
    if latency is None:
        latency = scenario.value("hardware.interconnect_latency")
    return bandwidth, latency


# ---------------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_fields(register):
    register("hardware", "interconnect_bandwidth", kind="quantity", unit="B/s", default=None,
             minimum=0, exclusive_minimum=True,
             description="card-to-card link bandwidth in one direction, per card (NVLink, "
                         "PCIe), as a ring all-reduce sees it")
    register("hardware", "interconnect_latency", kind="quantity", unit="s", default=None,
             minimum=0, description="latency of one card-to-card transfer step")


@hookimpl
def infermodel_register_levers(register):
    register("parallelism", Parallelism,
             description="tensor and pipeline parallelism over hardware.count cards: efficiency "
                         "or all-reduce cost, weights and cache split, memory per card",
             reference=f"{DEPLOY}; {PLANNER}")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("parallelism")
    if lever is None:
        return
    key = "levers.parallelism"
    count = scenario.value("hardware.count")
    tensor, pipeline = degrees(scenario)
    if lever.tensor is None:
        if count % pipeline:
            report(f"{key}.pipeline",
                   f"hardware.count = {count} cards cannot form {pipeline} equal pipeline stages",
                   expected=f"a pipeline degree dividing {count}",
                   suggestion="set hardware.count to a multiple of pipeline")
            return
    elif tensor * pipeline != count:
        report(f"{key}.tensor",
               f"tensor × pipeline = {tensor} × {pipeline} = {tensor * pipeline} cards, but "
               f"hardware.count = {count}",
               expected="tensor × pipeline equal to hardware.count",
               suggestion=f"set hardware.count = {tensor * pipeline}, or leave tensor out "
                          "to use every card")
        return
    heads = scenario.value("model.heads")
    kv_heads = scenario.value("model.kv_heads") or heads
    if heads % tensor:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0]
        report(f"{key}.tensor" if lever.tensor is not None else "hardware.count",
               f"tensor-parallel degree {tensor} does not divide the {heads} attention heads "
               "(each card must hold whole heads)",
               expected="a divisor of heads: " + ", ".join(map(str, divisors)))
    elif kv_heads % tensor and tensor % kv_heads:
        report(f"{key}.tensor" if lever.tensor is not None else "hardware.count",
               f"tensor-parallel degree {tensor} and the {kv_heads} KV heads do not divide one "
               "another (KV heads are split evenly or replicated whole)",
               expected=f"a divisor or a multiple of kv_heads = {kv_heads}")
    layers = scenario.value("model.layers")
    if pipeline > layers:
        report(f"{key}.pipeline", f"{pipeline} pipeline stages for {layers} layers",
               expected=f"at most {layers} stages (one layer each)")
    if efficiency_of(lever, tensor) is None:
        table = lever.efficiency_table if lever.efficiency_table is not None else LAB_EFFICIENCY
        report(f"{key}.efficiency",
               f"the efficiency table has no entry for tensor degree {tensor}",
               expected="a degree among " + ", ".join(sorted(table, key=int)),
               suggestion=f"give efficiency = ... or efficiency_table = {{ \"{tensor}\" = ... }}, "
                          "or communication = \"all_reduce\"")
    if lever.communication == "all_reduce" and (tensor > 1 or pipeline > 1):
        bandwidth, latency = _link(scenario, lever)
        for name, value in (("bandwidth", bandwidth), ("latency", latency)):
            if value is None:
                report(f"{key}.link_{name}",
                       f"the all-reduce model needs the link {name}, and neither "
                       f"hardware.interconnect_{name} nor levers.parallelism.link_{name} is set",
                       expected="a hardware preset with interconnect fields, or link_bandwidth "
                                "and link_latency in the lever")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("parallelism")
    if lever is None:
        return
    tensor, pipeline = degrees(scenario)
    define("parallel_tensor_degree", tensor, unit="1", latex="N",
           description="cards splitting every layer (tensor parallel)", reference=DEPLOY)
    define("parallel_pipeline_degree", pipeline, unit="1", latex="P",
           description="pipeline stages, each holding a run of layers", reference=DEPLOY)
    e = efficiency_of(lever, tensor)
    if lever.efficiency is not None:
        source = "given"
    elif lever.communication != "efficiency":
        source = "1: communication is modelled explicitly"
    else:
        source = ("from the Inference lab's table" if lever.efficiency_table is None
                  else "from the scenario's table")
    define("parallel_efficiency", e, unit="1", latex="e",
           description=f"share of the ideal rates the cards reach together ({source})",
           reference=PLANNER)
    define("parallel_microbatches", Min(S.batch, S.parallel_pipeline_degree), unit="1",
           description="micro-batches in flight through the pipeline (at most one per stage)",
           reference=DEPLOY)
    define("parallel_stage_layers", ceiling(S.layers / S.parallel_pipeline_degree), unit="1",
           description="layers on the largest pipeline stage", reference=DEPLOY)
    latent = structure(scenario).mla
    if latent:
        # One latent per token serves every head: each tensor rank keeps the whole of it.
        define("parallel_kv_heads_per_card", 1, unit="1",
               description="latent caches each tensor rank holds (latent attention: the one "
                           "latent is replicated on every rank)", reference=DEPLOY)
    else:
        define("parallel_kv_heads_per_card", ceiling(S.kv_heads / S.parallel_tensor_degree),
               unit="1", description="KV heads each tensor rank holds (whole heads; replicated "
                                     "when fewer than ranks)", reference=DEPLOY)
    define("parallel_weight_stage_factor",
           S.parallel_pipeline_degree * S.parallel_stage_layers / S.layers, unit="1",
           description="largest stage's share of the layers times the stages (1 when even)",
           reference=DEPLOY)
    define("parallel_kv_storage_factor",
           S.parallel_weight_stage_factor
           * S.parallel_tensor_degree * S.parallel_kv_heads_per_card / (1 if latent else S.kv_heads),
           unit="1",
           description="cache stored across the cards relative to one copy (fullest card × cards)",
           reference=DEPLOY)
    define("parallel_weight_bytes_per_card",
           S.weight_bytes * S.parallel_weight_stage_factor / S.card_count, unit="B",
           description="weights on the fullest card", reference=BUDGET)
    define("parallel_kv_bytes_per_card", S.kv_bytes_total / S.card_count, unit="B",
           description="the batch's full-length cache on the fullest card", reference=BUDGET)
    define("parallel_memory_required_per_card", S.memory_required / S.card_count, unit="B",
           description="weights, cache and reserve on the fullest card", reference=BUDGET)
    define("parallel_fits_per_card", sympy.Le(S.parallel_memory_required_per_card, S.card_memory),
           unit="bool", description="the fullest card holds its weights, cache and reserve",
           reference=BUDGET)
    define("pipeline_stages", S.parallel_pipeline_degree, unit="1",
           description="stages every token traverses (the serving simulator prices "
                       "min(stages, sequences) micro-batches per iteration)", reference=DEPLOY)
    if lever.communication != "efficiency":
        _communication(scenario, lever, define)


def _ring(tokens):
    """Time of one ring all-reduce of ``tokens`` activation vectors across N cards."""
    n = S.parallel_tensor_degree
    size = tokens * S.d_model * S.parallel_activation_bytes
    return 2 * (n - 1) / n * size / S.parallel_link_bandwidth + 2 * (n - 1) * S.parallel_link_latency


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


def _link_quantities(scenario, lever, define):
    bandwidth, latency = _link(scenario, lever)
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
    define("parallel_activation_bytes", lever.activation_bytes, unit="B",
           description="bytes per activation value exchanged", reference=DEPLOY)


def _collective_quantities(scenario, define):
    from .physical_efficiency import parameter

    latency, where = parameter(scenario, "collective_latency")
    define("parallel_collective_latency", latency, unit="s",
           description=f"fixed time of one collective on the cards (from {where})",
           reference=COLLECTIVES)
    define("collective_bandwidth_fraction", COLLECTIVE_BANDWIDTH_FRACTION, unit="1",
           description="share of the link's one-way bandwidth a collective reaches (NCCL tests' "
                       "bus bandwidth)", reference=COLLECTIVES)
    define("collective_oneshot_bytes", oneshot_limit(degrees(scenario)[0]), unit="B",
           description="largest all-reduce run in one shot on these cards (ring above)",
           reference=COLLECTIVES)
    define("collective_count", tensor_parallel_reductions(scenario), unit="1",
           description="all-reduces per forward pass (after each layer's mixer and feed-forward "
                       "block; the serving simulator prices each by its size)", reference=DEPLOY)
    define("collective_bytes_per_token", S.d_model * S.parallel_activation_bytes, unit="B",
           description="bytes one token adds to each all-reduce", reference=DEPLOY)


def _communication(scenario, lever, define):
    _link_quantities(scenario, lever, define)
    collectives = lever.communication == "collectives"
    if collectives:
        _collective_quantities(scenario, define)
    reduce = _collective if collectives else _ring
    per_micro = S.batch / S.parallel_microbatches
    reductions = tensor_parallel_reductions(scenario)
    how = ("one-shot below collective_oneshot_bytes, ring above" if collectives
           else "2(N−1)/N·bytes/link + 2(N−1)·latency")
    define("parallel_allreduce_time", reduce(per_micro), unit="s",
           description=f"one all-reduce of a decode micro-batch's activations: {how}",
           reference=COLLECTIVES if collectives else DEPLOY)
    define("parallel_decode_comm_time",
           reductions * S.parallel_allreduce_time + _hops(per_micro), unit="s",
           description="communication per decode step: two all-reduces per layer and the "
                       "pipeline hops, not overlapped", reference=DEPLOY)
    define("parallel_prefill_comm_time",
           reductions * reduce(per_micro * S.prompt_tokens) + _hops(per_micro * S.prompt_tokens),
           unit="s", description="communication in prefill: the prompts' activations, two "
                                 "all-reduces per layer and the pipeline hops", reference=DEPLOY)
    n, p = S.parallel_tensor_degree, S.parallel_pipeline_degree
    if collectives:
        # The simulator prices the all-reduces by size itself (collective_*); these carry
        # the pipeline hops only.
        define("comm_time_per_iteration", (p - 1) * S.parallel_link_latency, unit="s",
               description="latency of the pipeline hops per iteration (the serving simulator "
                           "adds it; the all-reduces it prices from collective_*)",
               reference=DEPLOY)
        define("comm_time_per_token",
               (p - 1) * S.d_model * S.parallel_activation_bytes / S.parallel_link_bandwidth,
               unit="s", description="pipeline-hop time per token of a micro-batch (the serving "
                                     "simulator's iteration cost)", reference=DEPLOY)
    else:
        define("comm_time_per_iteration",
               reductions * 2 * (n - 1) * S.parallel_link_latency + (p - 1) * S.parallel_link_latency,
               unit="s", description="latency part of an iteration's communication (the serving "
                                     "simulator adds it to every iteration)", reference=DEPLOY)
        define("comm_time_per_token",
               (reductions * 2 * (n - 1) / n + (p - 1)) * S.d_model * S.parallel_activation_bytes
               / S.parallel_link_bandwidth, unit="s",
               description="communication per token of a micro-batch: two ring all-reduces per "
                           "layer and the stage hops (the serving simulator's iteration cost)",
               reference=DEPLOY)
    full = sympy.Max(1, S.max_sequences)
    per_micro_full = full / Min(full, S.parallel_pipeline_degree)
    define("parallel_capacity_comm_time", reductions * reduce(per_micro_full) + _hops(per_micro_full),
           unit="s", description="communication per decode step with the cache full", reference=DEPLOY)


@hookimpl
def infermodel_define_operators(scenario, define):
    lever = scenario.lever("parallelism")
    if lever is None or lever.communication == "efficiency":
        return
    for phase, tokens, time in (("decode", S.batch, S.parallel_decode_comm_time),
                                ("prefill", S.batch * S.prompt_tokens, S.parallel_prefill_comm_time)):
        define(phase, "all_reduce", flops=0,
               bytes=tensor_parallel_reductions(scenario) * tokens * S.d_model
               * S.parallel_activation_bytes, time=time,
               description="tensor-parallel all-reduces (two per layer) and pipeline hops over "
                           "the link; added to the step by the parallelism lever",
               reference=DEPLOY)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = scenario.lever("parallelism")
    if lever is None:
        return
    _tensor, pipeline = degrees(scenario)
    e = S.parallel_efficiency
    transform.wrap("bandwidth", lambda old: old * e,
                   reason="the cards reach only a share e of their summed bandwidth",
                   reference=PLANNER, order=Stage.PARALLELISM)
    transform.wrap("flops_peak", lambda old: old * e,
                   reason="the cards reach only a share e of their summed compute",
                   reference=PLANNER, order=Stage.PARALLELISM)
    latent = structure(scenario).mla
    transform.wrap("kv_bytes_per_token", lambda old: old * S.parallel_kv_storage_factor,
                   reason=("a latent cache is not split by heads: every tensor rank keeps the whole "
                           "latent of its layers (replicas counted)" if latent else
                           "the cache is split by whole KV heads and whole layers: the fullest "
                           "card's share times the cards (replicas counted)"),
                   reference=DEPLOY, order=Stage.PARALLELISM)
    excess = S.weight_bytes * (S.parallel_weight_stage_factor - 1)
    transform.wrap("memory_required", lambda old: old + excess,
                   reason="the largest pipeline stage sets the weights per card", reference=BUDGET,
                   order=Stage.PARALLELISM)
    transform.wrap("kv_budget_bytes", lambda old: old - excess,
                   reason="the largest pipeline stage sets the weights per card", reference=BUDGET,
                   order=Stage.PARALLELISM)
    if pipeline > 1:
        p, m = S.parallel_pipeline_degree, S.parallel_microbatches
        why = ("one token traverses every stage; the batch moves as micro-batches that each "
               "re-read the stage's weights")
        transform.wrap("decode_time_memory",
                       lambda old: old * p / m + (p - p / m) * S.weight_bytes_per_step / S.bandwidth,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)
        transform.wrap("decode_time_compute", lambda old: old * p / m, reason=why,
                       reference=DEPLOY, order=Stage.PARALLELISM)
        transform.wrap("prefill_time_memory",
                       lambda old: old * p / m + (p - p / m) * S.weight_bytes / S.bandwidth,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)
        transform.wrap("prefill_time_compute", lambda old: old * p / m, reason=why,
                       reference=DEPLOY, order=Stage.PARALLELISM)
    bandwidth, latency = _link(scenario, lever)
    if lever.communication == "collectives" and (bandwidth is None or latency is None) and (
            _tensor > 1 or pipeline > 1):
        transform.warn("the card declares no interconnect (hardware.interconnect_bandwidth and "
                       "_latency): the collectives are priced over PCIe Gen4 x16 (32 GB/s one "
                       "way, 5 µs per step); NVLink-class links make them 10–25 times faster",
                       quantity="parallel_decode_comm_time")
    if lever.communication != "efficiency":
        why = "activations are all-reduced twice per layer and cross each stage boundary"
        transform.wrap("decode_step_time", lambda old: old + S.parallel_decode_comm_time,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)
        transform.wrap("prefill_time", lambda old: old + S.parallel_prefill_comm_time,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)
        transform.wrap("capacity_step_time", lambda old: old + S.parallel_capacity_comm_time,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)


@hookimpl
def infermodel_register_headlines(register):
    register("parallelism", "parallel_efficiency", label="share of ideal rates reached")
    register("parallelism", "parallel_memory_required_per_card", label="memory needed per card")


__all__ = ["COMMUNICATION", "LAB_EFFICIENCY", "Parallelism", "degrees", "efficiency_of", "oneshot_limit"]
