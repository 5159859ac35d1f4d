"""The cascade lever: a small model answers first, a share is escalated to this one.

``[levers.cascade]`` puts a cheaper model in front of the scenario's::

    [levers.cascade]
    escalation = 0.2             # share of requests the small model passes on
    model = "llama-3.2-3b"       # the small model, on the same kind of cards (its roofline)
    # cost_ratio = 0.25          # or: its device time per request relative to this model's

Every request runs on the small model; an escalated one runs here as well, prompt and
answer again (Module 10, "Other proposals and smaller models": a cheaper model is a
quality trade that evaluation decides). A request therefore costs on average r + e of
what it costs here (``cascade_cost_factor``, r the small model's relative cost, e the
escalated share), and ``cost_per_million_tokens`` is multiplied by it; the cascade saves
money only while r + e < 1. With a model, the small model's times (``cascade_small_*``,
see :mod:`.pool_model`) give the mean latency ``cascade_mean_e2e_latency`` = small E2E
+ e · E2E here. Which requests need escalating, and how well the small model answers the
rest, is not modelled: the share is an input.
"""

from __future__ import annotations

import attrs

from infermodel.plugin import S, Stage, accepts, hookimpl

from . import M10, pool_model

SMALLER = f"{M10}, 'Other proposals and smaller models'"
PRICE = f"{M10}, §11 'Price output at the utilisation actually purchased'"
#: The typical setting ``infermodel rank`` applies.
TYPICAL_ESCALATION = 0.2
TYPICAL_COST_RATIO = 0.25
PREFIX = "cascade_small"


@accepts("0 to 1")
def _share(instance, attribute, value):
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} = {value!r} is not a share in [0, 1]")


@accepts("> 0")
def _positive(instance, attribute, value):
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} = {value!r} must be greater than 0")


@accepts("1 to 32")
def _bits(instance, attribute, value):
    if not 1 <= value <= 32:
        raise ValueError(f"{attribute.name} = {value!r} is outside 1–32 bits")


@attrs.frozen
class Cascade:
    """The escalated share and the small model (a preset, or its relative cost)."""

    escalation: float = attrs.field(validator=_share,
        metadata={"description": "share of requests the small model escalates to this one"})
    model: str | None = attrs.field(default=None,
        metadata={"description": "model preset of the small model, on the same kind of cards"})
    weight_bits: float = attrs.field(default=16.0, validator=_bits,
        metadata={"description": "bits per stored weight of the small model"})
    cost_ratio: float | None = attrs.field(default=None, validator=_positive,
        metadata={"description": "device time of a request on the small model relative to one "
                                 "here (measured or estimated)"})


@hookimpl
def infermodel_register_levers(register):
    register("cascade", Cascade,
             description="cascade: a small model answers every request first and escalates a "
                         "share to this one", reference=SMALLER)


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("cascade")
    if lever is None:
        return
    key = "levers.cascade"
    if (lever.model is None) == (lever.cost_ratio is None):
        report(f"{key}.{'cost_ratio' if lever.model is not None else 'model'}",
               "give one of model or cost_ratio" + (", not both" if lever.model else ""),
               expected="the small model: a model preset, or its cost relative to this model's",
               suggestion="for example cost_ratio = 0.25")
    if lever.model is None and lever.weight_bits != 16.0:
        report(f"{key}.weight_bits", "weight_bits applies only to a cascade model")
    if lever.model is not None:
        pool_model.check_preset(scenario, report, f"{key}.model", lever.model)


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("cascade")
    if lever is None:
        return
    define("cascade_escalation", lever.escalation, unit="1",
           description="share of requests escalated to this model", reference=SMALLER)
    priced = scenario.value("hardware.price_per_hour") is not None
    if lever.model is not None:
        pool_model.define_model(define, PREFIX, lever.model,
                                pool_model.shape(scenario, lever.model), lever.weight_bits)
        define("cascade_mean_e2e_latency",
               S.cascade_small_e2e_latency + S.cascade_escalation * S.e2e_latency, unit="s",
               description="end-to-end latency of one request alone, averaged: the small "
                           "model's, plus this model's for the escalated share", reference=SMALLER)
        if priced:
            define("cascade_cost_ratio",
                   S.cascade_small_device_seconds_per_request / S.device_seconds_per_request,
                   unit="1", description="device time of a request on the small model relative "
                                         "to one here", reference=SMALLER)
    else:
        define("cascade_cost_ratio", lever.cost_ratio, unit="1",
               description="device time of a request on the small model relative to one here "
                           "(given)", reference=SMALLER)
    if priced or lever.cost_ratio is not None:
        define("cascade_cost_factor", S.cascade_cost_ratio + S.cascade_escalation, unit="1",
               description="average cost of a request relative to serving it here alone: the "
                           "small model's r plus the escalated share e", reference=SMALLER)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if scenario.lever("cascade") is None or scenario.value("hardware.price_per_hour") is None:
        return
    transform.wrap("cost_per_million_tokens", lambda old: old * S.cascade_cost_factor,
                   reason="every request runs on the small model, the escalated share here too",
                   reference=f"{SMALLER}; {PRICE}", order=Stage.COST)


@hookimpl
def infermodel_check_result(result, warn):
    lever = result.scenario.lever("cascade")
    if lever is None:
        return
    if lever.model is not None:
        warn("cascade_mean_e2e_latency",
             pool_model.caveat(result, PREFIX, lever.model, lever.weight_bits))
    factor = result.values.get("cascade_cost_factor")
    if factor is not None and factor >= 1:
        warn("cascade_cost_factor",
             f"the cascade costs {factor:.3g}× serving every request here: the small model's "
             "relative cost plus the escalated share is at least 1")


@hookimpl
def infermodel_register_headlines(register):
    register("cascade", "cascade_cost_factor", label="cost per request vs. this model alone")
    register("cascade", "cascade_mean_e2e_latency", label="end-to-end, mean over the cascade")


@hookimpl
def infermodel_register_typical_settings(register):
    def setting(result):
        if result.scenario.lever("cascade") is not None or "cost_per_million_tokens" not in result:
            return None
        return {"levers.cascade.escalation": TYPICAL_ESCALATION,
                "levers.cascade.cost_ratio": TYPICAL_COST_RATIO}

    register("cascade from a smaller model", setting, lever="cascade",
             description=f"a model about a quarter the size first (cost ratio "
                         f"{TYPICAL_COST_RATIO:g}), {TYPICAL_ESCALATION:.0%} escalated",
             reference=SMALLER)


__all__ = ["Cascade"]
