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
  Communication is added to the step, not overlapped: an upper bound. Under measured
  kernels (``efficiency.kernels = "measured"``) the default's collectives are timed from
  the measured collective tables instead (``"all_reduce"`` keeps the lever's ring).
* **Memory per card.** Weights and the KV cache are split across the cards; the
  checks are made for the fullest card. A KV head cannot be split, so with more
  tensor ranks than KV heads each head is replicated; a pipeline whose stages do not
  divide the layers evenly is limited by its largest stage. The runtime reserve is
  kept on every card (an absolute reserve is per card; a fraction is of each card).
* **Pipeline.** Capacity adds, but one request still traverses every stage. The
  batch moves as ``min(batch, pipeline)`` micro-batches; each re-reads the stage's
  weights, and with fewer sequences than stages the other stages wait.
* **Expert parallelism and data-parallel attention** (``expert``, ``attention_data``):
  ``tensor × attention_data × pipeline`` cards; each attention rank keeps the attention
  weights and the cache of its own sequences, the routed experts are split over the expert
  ranks, and the step waits for the busiest card. The formulas live in :mod:`.layouts`.
"""

from __future__ import annotations

import attrs
import sympy
from sympy import Min, ceiling

from infermodel.plugin import BytesPerSecond, S, Seconds, Stage, accepts, hookimpl

from . import LAB, M10
from . import layouts as lay_formulas
from .layout_kernels import all_reduce, qk_norm_all_reduce
from .layouts import DENSE_CHOICES, DISPATCH_CHOICES, Layout, dense_placement
from .moe import linear_bytes_per_param
from .parallel_communication import DEPLOY, define_communication, link, oneshot_limit
from .parallel_replicas import indexer_replicas, latent_replicas, replica_reads
from .shapes import (
    QK_NORM_REDUCED_BYTES,
    qk_norm_reductions,
    structure,
    tensor_parallel_reductions,
)

PLANNER = f"{LAB}, 'What it costs to keep it running'"
BUDGET = f"{PLANNER}; {M10}, §11 'Budget memory at the accepted maximum length'"

#: The Inference lab's illustrative tensor-parallel efficiencies by degree.
LAB_EFFICIENCY = {"1": 1.0, "2": 0.9, "4": 0.8, "8": 0.7}
COMMUNICATION = ("collectives", "efficiency", "all_reduce")


@accepts("≥ 1")
def _positive_int(instance, attribute, value):
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} = {value!r} must be at least 1")


@accepts("> 0 and ≤ 1")
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


@accepts("> 0")
def _positive(instance, attribute, value):
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} = {value!r} must be greater than 0")


@accepts("≥ 1")
def _at_least_one(instance, attribute, value):
    if value is not None and not value >= 1:
        raise ValueError(f"{attribute.name} = {value!r} must be at least 1 (a maximum over a mean)")


def _one_of(choices):
    @accepts("one of " + ", ".join(repr(c) for c in choices))
    def check(instance, attribute, value):
        if value is not None and value not in choices:
            raise ValueError(f"{attribute.name} = {value!r} is not one of "
                             + ", ".join(repr(c) for c in choices))
    return check


@accepts("≥ 0")
def _non_negative(instance, attribute, value):
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} = {value!r} must not be negative")


@attrs.frozen
class Parallelism:
    """How ``hardware.count`` cards share the model: tensor degree, pipeline stages and
    what the split costs (an efficiency, or an explicit all-reduce).
    """

    tensor: int | None = attrs.field(default=None, validator=_positive_int,
        metadata={"description": (
            "tensor-parallel degree: cards splitting each attention layer (default: "
            "hardware.count / (pipeline × attention_data))")})
    pipeline: int = attrs.field(default=1, validator=_positive_int,
        metadata={"description": (
            "pipeline stages; tensor × attention_data × pipeline must equal hardware.count")})
    attention_data: int = attrs.field(default=1, validator=_positive_int,
        metadata={"description": (
            "data-parallel attention ranks: each keeps the attention weights (split over its "
            "tensor cards) and the cache of its own sequences only; feed-forward blocks run "
            "across every card of the stage")})
    expert: int = attrs.field(default=1, validator=_positive_int,
        metadata={"description": (
            "expert-parallel degree: ranks the routed experts of each MoE layer are split "
            "over (each rank tensor × attention_data / expert cards); 1: every expert split "
            "over all the stage's cards")})
    dense_weights: str | None = attrs.field(default=None, validator=_one_of(DENSE_CHOICES),
        metadata={"description": (
            "with attention_data > 1, where the dense layers, shared experts and head go: "
            "\"replicated\" on every DP rank (vLLM, TensorRT-LLM) or \"split\" over the "
            "stage's cards, the input table whole on each (SGLang); default by "
            "efficiency.engine")})
    expert_dispatch: str = attrs.field(default="all_gather", validator=_one_of(DISPATCH_CHOICES),
        metadata={"description": (
            "how MoE layers reach tokens on other DP ranks: \"all_gather\" (gather every "
            "rank's tokens, reduce-scatter the result: vLLM's and SGLang's defaults) or "
            "\"all_to_all\" (dispatch each token to its experts' ranks and combine: DeepEP, "
            "pplx)")})
    expert_imbalance: float | None = attrs.field(default=None, validator=_at_least_one,
        metadata={"description": (
            "busiest expert rank's token load over the mean, measured (1 / vLLM's EPLB "
            "balancedness); default: the expected maximum under uniform routing")})
    attention_imbalance: float = attrs.field(default=1.0, validator=_at_least_one,
        metadata={"description": (
            "largest DP rank's share of the sequences over the mean, beyond whole-sequence "
            "rounding (default 1: requests balanced by count)")})
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
    dispatch_activation_bytes: float | None = attrs.field(default=None, validator=_positive,
        metadata={"description": (
            "bytes per activation value in the expert dispatch (default: activation_bytes; "
            "DeepEP's DeepSeek-V3 setting dispatches in FP8, 1 byte, and combines in BF16)")})


def degrees(scenario) -> tuple[int, int]:
    """(tensor, pipeline) degrees of a scenario using the lever."""
    lever = scenario.lever("parallelism")
    count = scenario.value("hardware.count")
    pipeline = lever.pipeline
    tensor = (lever.tensor if lever.tensor is not None
              else max(1, count // (pipeline * lever.attention_data)))
    return tensor, pipeline


def layout(scenario) -> Layout:
    """The scenario's layout: tensor, pipeline, attention-data and expert degrees, where
    the dense weights go and how MoE layers reach tokens.

    >>> layout(load_scenario("scenarios/deepseek-r1-ep8-dp8.toml")).stage_cards  # doctest: +SKIP
    8
    """
    lever = scenario.lever("parallelism")
    tensor, pipeline = degrees(scenario)
    return Layout(tensor, pipeline, lever.attention_data, lever.expert,
                  dense_placement(lever, scenario.value("efficiency.engine")),
                  lever.expert_dispatch, scenario.value("model.experts") > 1)


def efficiency_of(lever, tensor: int) -> float | None:
    if lever.efficiency is not None:
        return lever.efficiency
    if lever.communication != "efficiency":
        return 1.0
    table = lever.efficiency_table if lever.efficiency_table is not None else LAB_EFFICIENCY
    return table.get(str(tensor))


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
             description="tensor, pipeline, expert and data-parallel attention layouts over "
                         "hardware.count cards: efficiency or collective costs, weights and cache "
                         "per card, the busiest card",
             reference=f"{DEPLOY}; {PLANNER}; {lay_formulas.VLLM_EP}; {lay_formulas.SGLANG_DPA}")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("parallelism")
    if lever is None:
        return
    key = "levers.parallelism"
    if not _counts_fit(scenario, lever, report):
        return
    tensor, pipeline = degrees(scenario)
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
    group = tensor * lever.attention_data
    _check_experts(scenario, lever, group, report)
    if efficiency_of(lever, group) is None:
        table = lever.efficiency_table if lever.efficiency_table is not None else LAB_EFFICIENCY
        what = (f"tensor degree {tensor}" if lever.attention_data == 1 else
                f"{group} cards per stage (tensor × attention_data)")
        report(f"{key}.efficiency",
               f"the efficiency table has no entry for {what}",
               expected="a degree among " + ", ".join(sorted(table, key=int)),
               suggestion=f"give efficiency = ... or efficiency_table = {{ \"{group}\" = ... }}, "
                          "or communication = \"all_reduce\"")
    if lever.communication == "all_reduce" and (group > 1 or pipeline > 1):
        bandwidth, latency = link(scenario, lever)
        for name, value in (("bandwidth", bandwidth), ("latency", latency)):
            if value is None:
                report(f"{key}.link_{name}",
                       f"the all-reduce model needs the link {name}, and neither "
                       f"hardware.interconnect_{name} nor levers.parallelism.link_{name} is set",
                       expected="a hardware preset with interconnect fields, or link_bandwidth "
                                "and link_latency in the lever")


def _counts_fit(scenario, lever, report) -> bool:
    """tensor × attention_data × pipeline = hardware.count (reported when not)."""
    key = "levers.parallelism"
    count = scenario.value("hardware.count")
    tensor, pipeline = degrees(scenario)
    data = lever.attention_data
    if lever.tensor is None:
        if count % (pipeline * data):
            what = ("pipeline stages" if data == 1 else
                    f"pipeline stages of {data} data-parallel attention ranks")
            report(f"{key}.pipeline" if data == 1 else f"{key}.attention_data",
                   f"hardware.count = {count} cards cannot form {pipeline} equal {what}",
                   expected=(f"a pipeline degree dividing {count}" if data == 1 else
                             f"pipeline × attention_data = {pipeline * data} dividing {count}"),
                   suggestion="set hardware.count to a multiple of pipeline"
                              + (" × attention_data" if data > 1 else ""))
            return False
    elif tensor * data * pipeline != count:
        if data == 1:
            report(f"{key}.tensor",
                   f"tensor × pipeline = {tensor} × {pipeline} = {tensor * pipeline} cards, but "
                   f"hardware.count = {count}",
                   expected="tensor × pipeline equal to hardware.count",
                   suggestion=f"set hardware.count = {tensor * pipeline}, or leave tensor out "
                              "to use every card")
        else:
            report(f"{key}.tensor",
                   f"tensor × attention_data × pipeline = {tensor} × {data} × {pipeline} = "
                   f"{tensor * data * pipeline} cards, but hardware.count = {count}",
                   expected="tensor × attention_data × pipeline equal to hardware.count (the "
                            "cards of one attention group are tensor × attention_data)",
                   suggestion=f"set hardware.count = {tensor * data * pipeline}, or leave tensor "
                              "out to use every card")
        return False
    return True


def _check_experts(scenario, lever, group: int, report) -> None:
    """The expert-parallel degree against the model's experts and the stage's cards."""
    key = "levers.parallelism.expert"
    experts = scenario.value("model.experts")
    degree = lever.expert
    if degree > 1 and experts <= 1:
        report(key, f"expert = {degree} asks for expert parallelism, but model.experts = "
                    f"{experts}: a dense model has no experts to split",
               expected="expert = 1, or a mixture-of-experts model")
        return
    if degree > experts:
        report(key, f"{degree} expert ranks for {experts} experts leaves ranks without an expert",
               expected=f"at most {experts}")
    elif group % degree:
        divisors = [d for d in range(1, min(group, experts) + 1) if group % d == 0]
        report(key, f"expert-parallel degree {degree} does not divide the {group} cards of a "
                    "stage (tensor × attention_data): each expert rank is a whole group of cards",
               expected="a divisor of tensor × attention_data: " + ", ".join(map(str, divisors)))
    if lever.expert_imbalance is not None and lever.expert_imbalance > degree:
        report("levers.parallelism.expert_imbalance",
               f"expert_imbalance = {lever.expert_imbalance:g} exceeds the {degree} expert ranks "
               "(the busiest rank cannot take more than every token)",
               expected=f"a factor between 1 and {degree}")
    if lever.attention_imbalance > lever.attention_data:
        report("levers.parallelism.attention_imbalance",
               f"attention_imbalance = {lever.attention_imbalance:g} exceeds the "
               f"{lever.attention_data} data-parallel attention ranks",
               expected=f"a factor between 1 and {lever.attention_data}")
    moe = scenario.lever("moe")
    if (moe is not None and moe.expert_parallel is not None and degree > 1
            and moe.expert_parallel != degree):
        report("levers.moe.expert_parallel",
               f"levers.moe.expert_parallel = {moe.expert_parallel} and levers.parallelism.expert "
               f"= {degree} give two expert-parallel degrees",
               expected="one degree: levers.parallelism.expert sets the deployment's layout",
               suggestion="remove levers.moe.expert_parallel")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("parallelism")
    if lever is None:
        return
    tensor, pipeline = degrees(scenario)
    lay = layout(scenario)
    define("parallel_tensor_degree", tensor, unit="1", latex="T" if lay.active else "N",
           description=("cards splitting every layer (tensor parallel)" if not lay.active else
                        "cards splitting each attention layer of a DP rank (tensor parallel)"),
           reference=DEPLOY)
    define("parallel_pipeline_degree", pipeline, unit="1", latex="P",
           description="pipeline stages, each holding a run of layers", reference=DEPLOY)
    define("parallel_attention_data_degree", lever.attention_data, unit="1", latex="D",
           description="data-parallel attention ranks, each with its own sequences and cache",
           reference=lay_formulas.LAYOUT)
    define("parallel_expert_degree", lever.expert, unit="1", latex="X",
           description="expert-parallel ranks the routed experts are split over",
           reference=lay_formulas.VLLM_EP)
    define("parallel_stage_cards", S.parallel_tensor_degree * S.parallel_attention_data_degree,
           unit="1", latex="G", description="cards of one pipeline stage: tensor × attention_data",
           reference=lay_formulas.SGLANG_DPA)
    e = efficiency_of(lever, lay.stage_cards)
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
    if lay.active:
        lay_formulas.define_layout(scenario, lever, lay, define, linear_bytes_per_param(scenario))
        busiest = S.parallel_attention_batch_factor
        define("parallel_kv_bytes_per_card", S.kv_bytes_total * busiest / S.card_count, unit="B",
               description="the batch's full-length cache on the fullest card (the largest DP "
                           "rank's sequences)", reference=f"{BUDGET}; {lay_formulas.SGLANG_DPA}")
        define("parallel_memory_required_per_card",
               (S.memory_required + (busiest - 1) * S.kv_bytes_total) / S.card_count, unit="B",
               description="weights, cache and reserve on the fullest card (the largest DP rank)",
               reference=BUDGET)
    else:
        tensor = degrees(scenario)[0]
        latent = latent_replicas(scenario, define, tensor)
        indexer = indexer_replicas(scenario, define, tensor)
        whole = [what for what, bytes_ in (("a latent mixture of experts' projections", latent),
                                           ("the sparse-attention indexers", indexer)) if bytes_]
        define("parallel_weight_bytes_per_card",
               S.weight_bytes * S.parallel_weight_stage_factor / S.card_count + latent + indexer,
               unit="B", description="weights on the fullest card"
               + (f" ({' and '.join(whole)} whole on each)" if whole else ""), reference=BUDGET)
        define("parallel_kv_bytes_per_card", S.kv_bytes_total / S.card_count, unit="B",
               description="the batch's full-length cache on the fullest card", reference=BUDGET)
        define("parallel_memory_required_per_card",
               S.memory_required / S.card_count + latent + indexer, unit="B",
               description="weights, cache and reserve on the fullest card", reference=BUDGET)
    define("parallel_fits_per_card", sympy.Le(S.parallel_memory_required_per_card, S.card_memory),
           unit="bool", description="the fullest card holds its weights, cache and reserve",
           reference=BUDGET)
    define("pipeline_stages", S.parallel_pipeline_degree, unit="1",
           description="stages every token traverses (the serving simulator prices "
                       "min(stages, sequences) micro-batches per iteration)", reference=DEPLOY)
    if lever.communication != "efficiency":
        define_communication(scenario, lever, define, layout(scenario), degrees(scenario)[0])


def times_collectives(scenario, lever) -> bool:
    """Whether the lever prices the collectives and adds them to the step:
    ``communication = "all_reduce"`` always, ``"collectives"`` unless measured kernel
    tables time them (``efficiency.kernels = "measured"`` times the layout's collectives
    from its measured collective tables, which take precedence).
    """
    if lever.communication == "all_reduce":
        return True
    if lever.communication != "collectives":
        return False
    try:
        return scenario.value("efficiency.kernels") != "measured"
    except AttributeError:  # no loaded plugin declares measured kernels
        return True


@hookimpl
def infermodel_define_operators(scenario, define):
    lever = scenario.lever("parallelism")
    if lever is None or not times_collectives(scenario, lever):
        return
    lay = layout(scenario)
    if lay.data > 1:
        wire = (lever.dispatch_activation_bytes if lever.dispatch_activation_bytes is not None
                else lever.activation_bytes)
        lay_formulas.define_operators(scenario, lay, define, wire)
        return
    for phase, tokens, time in (("decode", S.batch, S.parallel_decode_comm_time),
                                ("prefill", S.batch * S.prompt_tokens, S.parallel_prefill_comm_time)):
        norms = qk_norm_reductions(scenario) if lay.tensor > 1 else 0
        define(phase, "all_reduce", flops=0,
               bytes=tensor_parallel_reductions(scenario) * tokens * S.d_model
               * S.parallel_activation_bytes + norms * tokens * QK_NORM_REDUCED_BYTES, time=time,
               description="tensor-parallel all-reduces (two per layer) and pipeline hops over "
                           "the link; added to the step by the parallelism lever",
               reference=DEPLOY,
               kernels=all_reduce(tokens * S.d_model / S.parallel_microbatches,
                                  S.parallel_tensor_degree,
                                  tensor_parallel_reductions(scenario) * S.parallel_microbatches)
               + qk_norm_all_reduce(scenario, tokens / S.parallel_microbatches,
                                    S.parallel_tensor_degree, S.parallel_microbatches))


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
    lay = layout(scenario)
    if lay.active:
        _transform_layout(scenario, lay, transform)
    else:
        excess = S.weight_bytes * (S.parallel_weight_stage_factor - 1)
        transform.wrap("memory_required", lambda old: old + excess,
                       reason="the largest pipeline stage sets the weights per card",
                       reference=BUDGET, order=Stage.PARALLELISM)
        transform.wrap("kv_budget_bytes", lambda old: old - excess,
                       reason="the largest pipeline stage sets the weights per card",
                       reference=BUDGET, order=Stage.PARALLELISM)
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
    bandwidth, latency = link(scenario, lever)
    if lever.communication == "collectives" and (bandwidth is None or latency is None) and (
            lay.stage_cards > 1 or pipeline > 1):
        transform.warn("the card declares no interconnect (hardware.interconnect_bandwidth and "
                       "_latency): the collectives are priced over PCIe Gen4 x16 (32 GB/s one "
                       "way, 5 µs per step); NVLink-class links make them 10–25 times faster",
                       quantity="parallel_decode_comm_time")
    if times_collectives(scenario, lever):
        why = "activations are all-reduced twice per layer and cross each stage boundary"
        transform.wrap("decode_step_time", lambda old: old + S.parallel_decode_comm_time,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)
        transform.wrap("prefill_time", lambda old: old + S.parallel_prefill_comm_time,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)
        transform.wrap("capacity_step_time", lambda old: old + S.parallel_capacity_comm_time,
                       reason=why, reference=DEPLOY, order=Stage.PARALLELISM)


def _transform_layout(scenario, lay: Layout, transform) -> None:
    """Expert parallelism and data-parallel attention: replicated weights, whole sequences
    per DP rank, and the busiest card's extra time (see :mod:`.layouts`).
    """
    where = lay_formulas.LAYOUT
    extra = S.parallel_weight_bytes_replicated
    why = ("the fullest card sets the weights: replicas on the DP ranks and the largest stage "
           "and expert rank")
    transform.wrap("memory_required", lambda old: old + extra, reason=why, reference=where,
                   order=Stage.PARALLELISM)
    transform.wrap("kv_budget_bytes", lambda old: old - extra, reason=why, reference=where,
                   order=Stage.PARALLELISM)
    transform.wrap("fits", lambda old: sympy.And(old, S.parallel_fits_per_card),
                   reason="the fullest card (the largest DP rank's sequences) must hold its share",
                   reference=where, order=Stage.PARALLELISM)
    if lay.data > 1:
        # After every lever that sets the pooled count (offload, prefix sharing).
        transform.wrap("max_sequences", lay_formulas.round_sequences,
                       reason="each DP rank holds whole sequences: the pooled count rounded down "
                              "to a multiple of attention_data", reference=lay_formulas.SGLANG_DPA,
                       order=Stage.DEFAULT + 100)
    busiest = "the step waits for the busiest card: " + ", ".join(
        part for part, on in (("the other DP ranks' own weight reads", lay.data > 1),
                              ("the largest DP rank's sequences", lay.data > 1),
                              ("the busiest expert rank's tokens", lay.moe and lay.expert > 1)) if on)
    for name, (memory, compute) in (
            ("decode", lay_formulas.decode_extra(scenario, lay)),
            ("prefill", lay_formulas.prefill_extra(scenario, lay)),
            ("capacity", lay_formulas.capacity_extra(scenario, lay))):
        quantity = {"decode": "decode_time", "prefill": "prefill_time", "capacity": "capacity_time"}[name]
        for suffix, extra_time in (("memory", memory), ("compute", compute)):
            if extra_time == 0:
                continue
            # After the pipeline's micro-batches, which the extra terms count themselves.
            transform.wrap(f"{quantity}_{suffix}", lambda old, t=extra_time: old + t,
                           reason=busiest, reference=where, order=Stage.PARALLELISM + 10)
    experts = scenario.value("model.experts")
    if lay.moe and experts % lay.expert:
        most = -(-experts // lay.expert)
        transform.warn(f"{experts} experts over {lay.expert} expert ranks: {experts % lay.expert} "
                       f"ranks hold {most} experts of each MoE layer and the others {most - 1}; "
                       f"the weights per card and the busiest rank's work are counted at the "
                       f"fullest ({most}, {lay.expert * most / experts:.4g}× the mean share)",
                       quantity="parallel_weight_bytes_per_card")
    if scenario.value("efficiency.roofline") == "operator":
        transform.warn("efficiency.roofline = \"operator\" sums the operators of the whole "
                       "model; the layout's busiest-card terms (replica reads, the largest DP "
                       "rank, the busiest expert rank) are not added to that sum",
                       quantity="decode_step_time")


@hookimpl
def infermodel_check_result(result, warn):
    values = result.values
    replica_reads(values, warn)
    if "parallel_expert_imbalance" not in values or "expert_imbalance_given" in values:
        return
    fast, slow = lay_formulas.MEASURED_SLOWDOWN
    warn("parallel_expert_imbalance",
         f"the busiest expert rank's load is the uniform-routing expectation "
         f"({values['parallel_expert_imbalance']:.3g}× the mean in a decode step of "
         f"{values['batch']:g} tokens, {values['parallel_expert_imbalance_prefill']:.3g}× in "
         f"prefill); real routing is more skewed: SGLang's DeepSeek-V3 prefill at 32 expert "
         f"ranks ran {fast / slow:.2f}× faster with a perfectly balanced expert placement than "
         f"with its default one ({fast:,} vs {slow:,} tokens/s per node, "
         f"{lay_formulas.MEASURED}); state levers.parallelism.expert_imbalance from a "
         "measurement (1 / the balancedness vLLM's EPLB logs) to use it")


@hookimpl
def infermodel_register_headlines(register):
    register("parallelism", "parallel_efficiency", label="share of ideal rates reached")
    register("parallelism", "parallel_memory_required_per_card", label="memory needed per card")
    register("parallelism", "parallel_weight_bytes_per_card", label="weights on the fullest card")
    register("parallelism", "parallel_weight_bytes_replicated", label="weight replicas across cards")
    register("parallelism", "parallel_expert_imbalance", label="busiest expert rank / mean")
    register("parallelism", "parallel_decode_comm_time", label="communication per decode step")


__all__ = ["COMMUNICATION", "LAB_EFFICIENCY", "Parallelism", "degrees", "efficiency_of", "oneshot_limit",
           "times_collectives"]
