"""Mixture of experts: weight traffic that grows with the batch.

The base physics already counts every expert in ``params_total`` (all must be stored,
so ``weight_bytes`` and the memory budget use them) and only the active ones in
``params_active`` (compute per token). At batch 1 a decode step reads the active
experts only. At batch B different tokens pick different experts: under uniform
routing, where each token picks k distinct experts of E at random, one expert is
missed by one token with probability 1 − k/E, so the expected number of distinct
experts read per layer is

    E·(1 − (1 − k/E)^B)

which is k at B = 1 and tends to E as B grows. This plugin, active for every model
with ``experts > 1``, defines that count and the total, active and expected-read
weight bytes, and replaces ``weight_bytes_per_step`` (order 200) with the expected
read, so decode traffic grows towards all experts with the batch. The step time at
capacity (``capacity_step_time``) uses the expected read at ``max_sequences``.

``[levers.moe]`` is optional: ``routing = "uniform"`` (default), ``"active"`` (every
token of the batch picks the same experts: the batch-1 share, a best case) or
``"all"`` (every expert is read each step, a worst case). ``expert_parallel = N`` splits
the routed experts over N cards: each card holds ⌈E/N⌉ experts of every MoE layer and a
whole copy of the other weights (attention, dense and shared layers, embeddings, as
data-parallel attention deployments keep them); ``weight_bytes_per_card_expert_parallel``
is what one card stores.

Bytes per routed-expert parameter: the block linears' effective bytes per weight when
a format lever sets them, otherwise the artifact's mean bytes per parameter.

``critical_batch`` keeps the base formula with the weight bytes read at the
scenario's batch; with MoE the weight read itself grows with the batch, so read it
as the batch at which decode turns compute-bound *if* the weight read stayed at the
scenario's level.

Reference: Module 10: Inference and serving, mixture-of-experts paragraph ("Other
proposals and smaller models").
"""

from __future__ import annotations

import attrs
from sympy import Max, ceiling

from infermodel.plugin import S, Stage, hookimpl

from . import M10
from .formats import choice_type
from .shapes import expert_block, expert_params, moe_layer_count

MOE = f"{M10}, mixture-of-experts paragraph ('Other proposals and smaller models')"
EP = ("DeepSeek-V3 (arXiv:2412.19437) §3.4 'Inference and Deployment' (expert parallelism "
      "with redundant attention)")

Routing = choice_type("Routing", ("uniform", "active", "all"),
                      "How a batch's tokens spread over experts: 'uniform', 'active' or 'all'.")


@attrs.frozen
class Moe:
    """Routing assumption for the expected experts read per decode step."""

    routing: Routing = attrs.field(default="uniform", metadata={
        "description": '"uniform": E·(1 − (1 − k/E)^B) experts read per layer; "active": only k '
                       '(best case); "all": all E (worst case)'})
    expert_parallel: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1)), metadata={
            "description": "cards the routed experts are split over: each holds ⌈E/N⌉ experts "
                           "per MoE layer and a whole copy of the other weights"})


@hookimpl
def infermodel_register_levers(register):
    register("moe", Moe,
             description="mixture of experts: expected distinct experts (and bytes) read per decode "
                         "step at the batch, under a routing assumption",
             reference=MOE)


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("moe")
    if lever is not None and scenario.value("model.experts") <= 1:
        report("levers.moe", "[levers.moe] needs a mixture-of-experts model, but model.experts = 1",
               expected="model.experts > 1, or no [levers.moe] table")
    elif (lever is not None and lever.expert_parallel is not None
          and lever.expert_parallel > scenario.value("model.experts")):
        report("levers.moe.expert_parallel", f"{lever.expert_parallel} cards for "
               f"{scenario.value('model.experts')} experts leaves cards without an expert",
               expected=f"at most {scenario.value('model.experts')}")


def _bytes_per_expert_param(scenario):
    """(expression, explanation) for the bytes one routed-expert parameter takes."""
    if scenario.value("model.weight_bytes") is not None:
        return S.weight_bytes / S.params_total, "mean bytes per parameter of the given artifact"
    from .quantization import effective_lever, weight_formats

    lever = effective_lever(scenario)
    if lever is not None and "experts" in weight_formats(scenario, lever):
        return S.weight_bytes_experts / S.params_routed_experts, \
            "effective bytes per routed-expert weight (the experts' own format)"
    if lever is not None:
        return S.bits_per_weight_linear / 8, \
            "effective bytes per block-linear weight (quantization lever)"
    if scenario.lever("number_formats") is not None:
        return S.weight_bits_linear / 8, "block-linear bits / 8 (number_formats lever)"
    return S.weight_value_bytes, "bytes per weight value"


def linear_bytes_per_param(scenario):
    """Bytes per block-linear weight (attention projections, dense feed-forward blocks,
    expert biases): the block linears' format (bf16 in gpt-oss's MXFP4 checkpoint, whose
    experts' matrices alone are MXFP4), or the artifact's mean bytes per parameter.
    """
    if scenario.value("model.weight_bytes") is not None:
        return S.weight_bytes / S.params_total
    from .quantization import effective_lever

    if effective_lever(scenario) is not None:
        return S.bits_per_weight_linear / 8
    if scenario.lever("number_formats") is not None:
        return S.weight_bits_linear / 8
    return S.weight_value_bytes


def _experts_read(routing: str, batch):
    if routing == "all":
        return S.experts
    if routing == "active":
        return S.active_experts
    return S.experts * (1 - (1 - S.active_experts / S.experts) ** batch)


@hookimpl
def infermodel_define_quantities(scenario, define):
    if scenario.value("model.experts") <= 1:
        return
    lever = scenario.lever("moe")
    routing = lever.routing if lever is not None else "uniform"
    how = {"uniform": "E·(1 − (1 − k/E)^B) under uniform routing",
           "active": "the active experts only (routing = \"active\")",
           "all": "every expert (routing = \"all\")"}[routing]
    per_param, why = _bytes_per_expert_param(scenario)
    define("expert_params", expert_block(scenario), unit="param",
           description="weights of one routed expert's matrices in one layer"
           + (" (at the latent width moe_latent_size)"
              if scenario.value("model.moe_latent_size") is not None else ""), reference=MOE)
    if scenario.value("model.expert_bias"):
        define("expert_params_with_biases", expert_params(scenario), unit="param",
               description="weights of one routed expert in one layer, its biases included",
               reference=MOE)
    define("expert_bytes_per_param", per_param, unit="B",
           description=f"bytes per routed-expert weight ({why})", reference=MOE)
    define("experts_read_per_layer", _experts_read(routing, S.batch), unit="1",
           description=f"expected distinct routed experts read per layer in one decode step: {how}",
           reference=MOE)
    define("weight_bytes_total", S.weight_bytes, unit="B",
           description="bytes of every expert and shared weight: all must be stored", reference=MOE)
    one_expert = S.expert_params * S.expert_bytes_per_param
    if scenario.value("model.expert_bias"):
        define("expert_bias_params", S.expert_params_with_biases - S.expert_params, unit="param",
               description="biases of one routed expert in one layer (gate/up and down)",
               reference=MOE)
        define("expert_bias_bytes_per_param", linear_bytes_per_param(scenario), unit="B",
               description="bytes per expert bias (the block linears' format: biases are not "
                           "in the experts' own format)", reference=MOE)
        one_expert += S.expert_bias_params * S.expert_bias_bytes_per_param
    # Only the experts a step reads are read, biases included (per expert, not per layer).
    missed = moe_layer_count(scenario) * one_expert
    define("weight_bytes_routed_experts", missed * S.experts, unit="B",
           description="bytes of every routed expert of every MoE layer (shared experts, routers, "
                       "attention and embeddings excluded)", reference=MOE)
    expert = S.expert_params_with_biases if scenario.value("model.expert_bias") else S.expert_params
    define("params_routed_active", moe_layer_count(scenario) * S.active_experts * expert,
           unit="param", description="routed-expert weights one token multiplies (its k experts in "
                                     "every MoE layer)", reference=MOE)
    define("weight_bytes_active", S.weight_bytes - missed * (S.experts - S.active_experts), unit="B",
           description="weight bytes one token reads (active and shared experts, attention, embeddings)",
           reference=MOE)
    define("weight_bytes_expected_read", S.weight_bytes - missed * (S.experts - S.experts_read_per_layer),
           unit="B", description="expected weight bytes read per decode step at the batch",
           reference=MOE)
    define("expert_bytes_all_layers", missed, unit="B",
           description="bytes of one routed expert over all its layers", reference=MOE)
    if routing == "uniform":
        define("routed_expert_bytes", S.expert_bytes_all_layers, unit="B",
               description="bytes of one routed expert over all layers (the serving simulator "
                           "reads E·(1 − (1 − k/E)^tokens) of them per layer each iteration)",
               reference=MOE)
    define("experts_read_at_capacity", _experts_read(routing, Max(1, S.max_sequences)), unit="1",
           description=f"expected distinct experts read per layer with the cache full: {how}",
           reference=MOE)
    define("weight_bytes_read_at_capacity",
           S.weight_bytes - missed * (S.experts - S.experts_read_at_capacity), unit="B",
           description="expected weight bytes read per decode step with the cache full",
           reference=MOE)
    if lever is not None and lever.expert_parallel is not None:
        define("moe_expert_parallel", lever.expert_parallel, unit="1",
               description="cards the routed experts are split over", reference=EP)
        define("moe_experts_per_card", ceiling(S.experts / S.moe_expert_parallel), unit="1",
               description="routed experts of each MoE layer one card holds (whole experts)",
               reference=EP)
        define("weight_bytes_per_card_expert_parallel",
               S.weight_bytes - missed * (S.experts - S.moe_experts_per_card), unit="B",
               description="weight bytes one card stores under the expert split: its experts "
                           "and a whole copy of every other weight", reference=EP)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if scenario.value("model.experts") <= 1:
        return
    # The input table's unread rows (embedding_reads = "rows") come off either way.
    transform.replace("weight_bytes_per_step", S.weight_bytes_expected_read - S.embedding_bytes_unread,
                      reason="a batch's tokens read more distinct experts than one token does",
                      reference=MOE, order=Stage.MODEL_STRUCTURE,
                      description="weight bytes read per decode step (experts the batch's tokens "
                                  "choose, uniform routing; less the input-table rows not used)")
    transform.wrap("capacity_time_memory",
                   lambda old: old.xreplace({S.weight_bytes_per_step: S.weight_bytes_read_at_capacity
                                             - S.embedding_bytes_unread}),
                   reason="with the cache full, max_sequences tokens choose experts, not the scenario's batch",
                   reference=MOE, order=Stage.MODEL_STRUCTURE)


@hookimpl
def infermodel_register_headlines(register):
    register("mixture of experts", "weight_bytes_expected_read", label="weight bytes read per step")


__all__ = ["Moe", "linear_bytes_per_param"]
