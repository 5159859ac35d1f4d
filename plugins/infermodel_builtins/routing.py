"""The routing lever: a share of the requests served elsewhere.

``[levers.routing]`` sends a share s of the requests to another pool, and says what a
request costs there in one of three ways::

    [levers.routing]
    share = 0.3                  # share of requests routed away
    model = "llama-3.2-3b"       # a smaller model on the same kind of cards (its roofline)
    # cost_ratio = 0.25          # or: its device time per request relative to this pool's
    # price_per_million_tokens = 0.31   # or: a price per million tokens (a hosted API)
    # long_context_tokens = 8000 # the routed share is the requests longer than this

* **Cost.** With a model or a cost ratio r, a request costs on average (1 − s) + s·r of
  what it costs here (``routing_cost_factor``), and ``cost_per_million_tokens`` is
  multiplied by it; with a price P, ``cost_per_million_tokens`` becomes (1 − s)·C + s·P.
  The routed pool is priced per hour like this one and assumed as busy.
* **Latency.** With a model, ``routed_ttft``, ``routed_tpot``, ``routed_e2e_latency``
  (see :mod:`.pool_model`) and the mean over both pools, ``routing_mean_e2e_latency``.
* **Long requests.** Module 10 sizes memory at the accepted maximum length and asks
  "how long requests are routed" (§11, 'Budget memory at the accepted maximum length'):
  with ``long_context_tokens``, the requests longer than that go to the other pool, so
  this pool budgets each sequence at that length — ``sequence_length`` becomes
  min(sequence_length, long_context_tokens) and ``max_sequences`` grows.

Whether the routed requests are answered as well is not modelled: the share is an input.
"""

from __future__ import annotations

import attrs
from sympy import Min

from infermodel.plugin import S, Stage, accepts, hookimpl

from . import M10, pool_model

BUDGET = f"{M10}, §11 'Budget memory at the accepted maximum length' (decide how long requests are routed)"
PRICE = f"{M10}, §11 'Price output at the utilisation actually purchased'"
SMALLER = f"{M10}, 'Other proposals and smaller models'; {PRICE}"
#: The typical setting ``infermodel rank`` applies: a share and a relative cost.
TYPICAL_SHARE = 0.3
TYPICAL_COST_RATIO = 0.25
PREFIX = "routed"


@accepts("0 to 1")
def _share(instance, attribute, value):
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} = {value!r} is not a share in [0, 1]")


@accepts("> 0")
def _positive(instance, attribute, value):
    if value is not None and not value > 0:
        raise ValueError(f"{attribute.name} = {value!r} must be greater than 0")


@accepts("≥ 0")
def _non_negative(instance, attribute, value):
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} = {value!r} must not be negative")


@accepts("1 to 32")
def _bits(instance, attribute, value):
    if not 1 <= value <= 32:
        raise ValueError(f"{attribute.name} = {value!r} is outside 1–32 bits")


@attrs.frozen
class Routing:
    """The routed share and what a routed request costs (one of model, cost_ratio, price)."""

    share: float = attrs.field(validator=_share,
        metadata={"description": "share of requests sent to the other pool (0 to 1)"})
    model: str | None = attrs.field(default=None,
        metadata={"description": "model preset the routed requests are served by, on the same "
                                 "kind of cards (its roofline times)"})
    weight_bits: float = attrs.field(default=16.0, validator=_bits,
        metadata={"description": "bits per stored weight of that model"})
    cost_ratio: float | None = attrs.field(default=None, validator=_positive,
        metadata={"description": "device time of a routed request relative to one served here "
                                 "(measured or estimated)"})
    price_per_million_tokens: float | None = attrs.field(default=None, validator=_non_negative,
        metadata={"description": "USD per million tokens, input and output, the other pool or "
                                 "a hosted API charges"})
    long_context_tokens: int | None = attrs.field(default=None, validator=_positive,
        metadata={"description": "route the requests longer than this many tokens; this pool "
                                 "then budgets each sequence at this length"})


def _given(lever) -> list[str]:
    return [n for n in ("model", "cost_ratio", "price_per_million_tokens")
            if getattr(lever, n) is not None]


@hookimpl
def infermodel_register_levers(register):
    register("routing", Routing,
             description="routing: a share of requests (or the long ones) served by a smaller "
                         "model, another pool or a hosted API", reference=f"{SMALLER}; {BUDGET}")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    lever = scenario.lever("routing")
    if lever is None:
        return
    key = "levers.routing"
    given = _given(lever)
    if len(given) != 1:
        report(f"{key}.{given[1] if given else 'model'}",
               "give one of model, cost_ratio or price_per_million_tokens"
               + (", not " + " and ".join(given) if given else ""),
               expected="what a routed request costs: a model preset, a relative cost or a price",
               suggestion="for example cost_ratio = 0.25")
    if lever.model is None and lever.weight_bits != 16.0:
        report(f"{key}.weight_bits", "weight_bits applies only to a routing model")
    if lever.model is not None:
        pool_model.check_preset(scenario, report, f"{key}.model", lever.model)
    if lever.price_per_million_tokens is not None and \
            scenario.value("hardware.price_per_hour") is None:
        report(f"{key}.price_per_million_tokens",
               "a routed price is blended with this pool's cost, which needs its rent",
               expected="hardware.price_per_hour", suggestion="add hardware.price_per_hour")


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("routing")
    if lever is None:
        return
    define("routing_share", lever.share, unit="1", description="share of requests routed away",
           reference=SMALLER)
    priced = scenario.value("hardware.price_per_hour") is not None
    if lever.model is not None:
        pool_model.define_model(define, PREFIX, lever.model,
                                pool_model.shape(scenario, lever.model), lever.weight_bits)
        define("routed_tpot", S.routed_decode_step_time, unit="s",
               description=f"time per output token of a routed request ({lever.model})",
               reference=pool_model.ROOFLINE)
        define("routing_mean_e2e_latency",
               (1 - S.routing_share) * S.e2e_latency + S.routing_share * S.routed_e2e_latency,
               unit="s", description="end-to-end latency of one request alone, averaged over "
                                     "both pools", reference=SMALLER)
        if priced:
            define("routing_cost_ratio",
                   S.routed_device_seconds_per_request / S.device_seconds_per_request, unit="1",
                   description="device time of a routed request relative to one served here",
                   reference=SMALLER)
    elif lever.cost_ratio is not None:
        define("routing_cost_ratio", lever.cost_ratio, unit="1",
               description="device time of a routed request relative to one served here (given)",
               reference=SMALLER)
    else:
        define("routing_price_per_million_tokens", lever.price_per_million_tokens, unit="USD",
               description="price of a million tokens (input and output) where routed requests "
                           "go", reference=PRICE)
    if lever.price_per_million_tokens is None and (priced or lever.cost_ratio is not None):
        define("routing_cost_factor", (1 - S.routing_share) + S.routing_share * S.routing_cost_ratio,
               unit="1", description="average cost of a request relative to serving it here: "
                                     "(1 − s) + s · cost ratio", reference=SMALLER)
    if lever.long_context_tokens is not None:
        define("routing_long_context_tokens", lever.long_context_tokens, unit="token",
               description="longest sequence this pool keeps; longer requests are routed away",
               reference=BUDGET)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = scenario.lever("routing")
    if lever is None:
        return
    if scenario.value("hardware.price_per_hour") is not None:
        if lever.price_per_million_tokens is not None:
            transform.wrap("cost_per_million_tokens",
                           lambda old: (1 - S.routing_share) * old
                           + S.routing_share * S.routing_price_per_million_tokens,
                           reason="a share of requests is billed at the routed price",
                           reference=PRICE, order=Stage.COST)
        else:
            transform.wrap("cost_per_million_tokens", lambda old: old * S.routing_cost_factor,
                           reason="a share of requests is served at the routed pool's cost",
                           reference=SMALLER, order=Stage.COST)
    if lever.long_context_tokens is not None:
        scenario.value("workload.sequence_length")  # read: a sweep of it rebuilds the graph
        transform.wrap("sequence_length", lambda old: Min(old, S.routing_long_context_tokens),
                       reason="requests longer than long_context_tokens are routed away, so this "
                              "pool budgets each sequence at that length", reference=BUDGET,
                       order=Stage.MODEL_STRUCTURE)


@hookimpl
def infermodel_check_result(result, warn):
    lever = result.scenario.lever("routing")
    if lever is not None and lever.model is not None:
        warn("routing_mean_e2e_latency",
             pool_model.caveat(result, PREFIX, lever.model, lever.weight_bits))


@hookimpl
def infermodel_register_headlines(register):
    register("routing", "routing_cost_factor", label="cost per request vs. all served here")
    register("routing", "routing_mean_e2e_latency", label="end-to-end, mean over both pools")


@hookimpl
def infermodel_register_typical_settings(register):
    def setting(result):
        scenario = result.scenario
        if scenario.lever("routing") is not None or "cost_per_million_tokens" not in result:
            return None
        return {"levers.routing.share": TYPICAL_SHARE,
                "levers.routing.cost_ratio": TYPICAL_COST_RATIO}

    register("route to a smaller model", setting, lever="routing",
             description=f"{TYPICAL_SHARE:.0%} of requests to a model about a quarter the size "
                         f"(cost ratio {TYPICAL_COST_RATIO:g}: decode is weight-bound, so time "
                         "per request follows the weights read)", reference=SMALLER)


__all__ = ["Routing"]
