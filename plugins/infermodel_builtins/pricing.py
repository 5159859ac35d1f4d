"""The cost model: rented, owned and hosted-API prices of the same work.

Fields of the ``[pricing]`` section (the base physics registers ``utilisation``;
this plugin adds the rest). The plugin acts on scenarios that have a ``[pricing]``
table. It extends the base cost quantities (``cost_per_hour``,
``cost_per_million_output_tokens``, ``cost_per_request``, ``energy_per_token``):

* **Busy throughput.** ``throughput = "decode"`` (default) prices output at the decode
  rate of the scenario's batch, as the Inference lab's planner does;
  ``throughput = "full_load"`` uses Module 10's full-load accounting, which charges
  each request its prompt's prefill plus its share of a full decode batch
  (``max_sequences`` sequences), so input processing is paid by the output tokens.
* **Rented.** Cost per million output tokens when busy and at the utilisation
  purchased; for a daily volume, the busy hours needed against an always-on card and
  the always-on cost per request and per million tokens.
* **Owned.** Purchase price over a depreciation period plus power at an electricity
  price; energy per output token at the busy throughput.
* **Hosted API.** Prices per million fresh input, cached input and output tokens; cost
  per request, per day and per month, the input and output shares of the bill, and
  the daily volume at which an always-on rented card costs the same.

Cost transformations run at order 900, after every lever has changed the speed.
"""

from __future__ import annotations

import sympy
from sympy import Max, Rational

from infermodel.plugin import S, Stage, hookimpl

from . import LAB, M10

PRICE = f"{M10}, §11 'Price output at the utilisation actually purchased'"
LOADED = f"{M10}, §11 'Separate quiet-request latency from loaded throughput'"
PLANNER = f"{LAB}, 'What it costs to keep it running'"
QUEUE = f"{M10}, §12 'Queueing rises sharply near saturation'"

HOURS_PER_YEAR = Rational(8766)          # 365.25 days
DAYS_PER_MONTH = Rational(4870, 160)     # 30.4375 days, as the base physics uses
MILLION = 10**6


def _active(scenario) -> bool:
    return scenario.given("pricing")


@hookimpl
def infermodel_register_fields(register):
    def pricing(name, kind, description, **kw):
        register("pricing", name, kind=kind, description=description, **kw)

    pricing("throughput", "choice",
            'output rate that busy hours buy: "decode" (the batch\'s decode rate) or '
            '"full_load" (Module 10: each request pays its prefill and a share of a full batch)',
            choices=("decode", "full_load"), default="decode")
    pricing("purchase_price", "quantity", "purchase price of one card (owned hardware)", unit="USD",
            minimum=0, default=None)
    pricing("depreciation_years", "float", "years over which an owned card is written off",
            minimum=0, exclusive_minimum=True, default=None)
    pricing("electricity_price", "float", "price of electricity in USD per kWh", minimum=0,
            default=None)
    pricing("api_input_per_million", "quantity",
            "hosted API price of a million fresh input tokens", unit="USD", minimum=0, default=None)
    pricing("api_cached_input_per_million", "quantity",
            "hosted API price of a million cached input tokens (default: the fresh price)",
            unit="USD", minimum=0, default=None)
    pricing("api_output_per_million", "quantity",
            "hosted API price of a million output tokens", unit="USD", minimum=0, default=None)
    pricing("api_cached_input_tokens", "float",
            "input tokens per request the API bills as cached (default: the prefix_cache "
            "lever's expected cached prefix, else 0)", minimum=0, default=None)


@hookimpl
def infermodel_validate_scenario(scenario, report):
    value = scenario.value
    api = {n: value(f"pricing.{n}") for n in
           ("api_input_per_million", "api_cached_input_per_million", "api_output_per_million")}
    if any(v is not None for v in api.values()):
        for name in ("api_input_per_million", "api_output_per_million"):
            if api[name] is None:
                report(f"pricing.{name}", f"pricing.{name} is missing",
                       expected="both api_input_per_million and api_output_per_million for a "
                                "hosted-API comparison")
    cached = value("pricing.api_cached_input_tokens")
    prompt = value("workload.prompt_tokens")
    if cached is not None and cached > prompt:
        report("pricing.api_cached_input_tokens",
               f"{cached:,g} cached input tokens exceed the prompt of {prompt:,} tokens",
               expected=f"at most workload.prompt_tokens = {prompt:,}")
    if value("pricing.purchase_price") is not None and value("pricing.depreciation_years") is None:
        report("pricing.depreciation_years", "an owned card needs a depreciation period",
               expected="depreciation_years, for example 3")
    if value("pricing.depreciation_years") is not None and value("pricing.purchase_price") is None:
        report("pricing.purchase_price", "depreciation_years is given without a purchase price",
               expected="purchase_price of one card, for example \"USD 2000\"")
    if value("pricing.electricity_price") is not None and value("hardware.power") is None:
        report("pricing.electricity_price", "an electricity price needs the cards' power draw",
               expected="hardware.power, for example \"450 W\"")


@hookimpl
def infermodel_register_headlines(register):
    register("cost", "api_cost_per_million_tokens",
             label="hosted API per 1M tokens, input + output")
    register("cost", "api_cost_per_request", label="hosted API per request")


@hookimpl
def infermodel_define_quantities(scenario, define):
    if not _active(scenario):
        return
    value = scenario.value
    _throughput(scenario, define)
    priced = value("hardware.price_per_hour") is not None
    volume = (value("workload.requests_per_day") is not None
              or value("workload.requests_per_month") is not None)
    if priced:
        define("cost_per_million_output_tokens_busy",
               S.cost_per_hour / (3600 * S.busy_tokens_per_s) * MILLION, unit="USD",
               description="price of a million output tokens while busy (every paid hour used)",
               reference=PRICE)
        define("always_on_cost_per_day", 24 * S.cost_per_hour, unit="USD",
               description="rent of the cards kept on all day", reference=PRICE)
    if volume:
        define("busy_hours_per_day", S.requests_per_day * S.busy_seconds_per_request / 3600,
               unit="1", description="hours of busy cards the daily volume needs", reference=PRICE)
        define("always_on_utilisation", S.busy_hours_per_day / 24, unit="1",
               description="share of an always-on deployment's hours that are busy",
               reference=PRICE)
        define("capacity_requests_per_day", 86400 / S.busy_seconds_per_request, unit="1",
               description="requests per day the cards complete when always busy", reference=LOADED)
        define("volume_within_capacity", sympy.Le(S.requests_per_day, S.capacity_requests_per_day),
               unit="bool", description="the daily volume fits the cards' busy throughput",
               reference=LOADED)
        if priced:
            define("busy_cost_per_day", S.busy_hours_per_day * S.cost_per_hour, unit="USD",
                   description="rent of the busy hours alone (as if paid by the hour used)",
                   reference=PRICE)
            define("always_on_cost_per_request", S.always_on_cost_per_day / S.requests_per_day,
                   unit="USD", description="always-on rent per completed request", reference=PRICE)
            define("always_on_cost_per_million_output_tokens",
                   S.always_on_cost_per_day / (S.requests_per_day * S.output_tokens) * MILLION,
                   unit="USD", description="always-on rent per million output tokens delivered",
                   reference=PRICE)
            define("always_on_cost_per_month", S.always_on_cost_per_day * DAYS_PER_MONTH,
                   unit="USD", description="always-on rent per month (30.4375 days)",
                   reference=PRICE)
    _owned(scenario, define, volume)
    _api(scenario, define, priced, volume)


def _throughput(scenario, define):
    define("full_load_prefill_seconds", S.prefill_time / S.batch, unit="s",
           description="device time one request's prefill occupies", reference=LOADED)
    define("full_load_decode_seconds",
           S.output_tokens * S.capacity_step_time / Max(1, S.max_sequences), unit="s",
           description="one request's share of a full decode batch over its output tokens",
           reference=LOADED)
    define("full_load_seconds_per_request", S.full_load_prefill_seconds + S.full_load_decode_seconds,
           unit="s", description="device time charged to each request at full load",
           reference=LOADED)
    define("full_load_requests_per_hour", 3600 / S.full_load_seconds_per_request, unit="1",
           description="requests completed per busy hour at full load", reference=LOADED)
    define("full_load_output_tokens_per_hour", S.full_load_requests_per_hour * S.output_tokens,
           unit="token", description="output tokens per busy hour at full load", reference=LOADED)
    define("full_load_tokens_per_s", S.output_tokens / S.full_load_seconds_per_request,
           unit="token/s", description="output tokens per second at full load, prefill paid",
           reference=LOADED)
    define("full_load_prefill_share", S.full_load_prefill_seconds / S.full_load_seconds_per_request,
           unit="1", description="share of full-load device time spent in prefill", reference=LOADED)
    define("full_load_effective_step_time",
           S.capacity_step_time / (1 - S.full_load_prefill_share), unit="s",
           description="decode step stretched by the prefills interleaved with it", reference=LOADED)
    define("full_load_e2e_latency",
           S.full_load_prefill_seconds + S.output_tokens * S.full_load_effective_step_time, unit="s",
           description="latency of one request on a saturated device", reference=LOADED)
    define("full_load_requests_in_system",
           S.full_load_requests_per_hour / 3600 * S.output_tokens * S.full_load_effective_step_time,
           unit="1", description="Little's law check: arrival rate times decode time in the "
                                 "system (equals the full batch)", reference=f"{LOADED}; {QUEUE}")
    if scenario.value("pricing.throughput") == "full_load":
        busy, what = S.full_load_tokens_per_s, "full-load accounting (prefill paid)"
    else:
        busy, what = S.tokens_per_s_total, "decode rate of the scenario's batch"
    define("busy_tokens_per_s", busy, unit="token/s",
           description=f"output tokens per busy second that prices use ({what})", reference=PRICE)
    define("busy_seconds_per_request", S.output_tokens / S.busy_tokens_per_s, unit="s",
           description="busy device time per request at that rate", reference=PRICE)


def _owned(scenario, define, volume):
    value = scenario.value
    if value("pricing.electricity_price") is not None and value("hardware.power") is not None:
        define("electricity_price", value("pricing.electricity_price"), unit="USD/kWh",
               description="price of one kilowatt-hour", reference=PRICE)
        define("owned_energy_cost_per_hour", S.power_total / 1000 * S.electricity_price,
               unit="USD/h", description="electricity for the cards at full power", reference=PRICE)
    if value("pricing.purchase_price") is None:
        return
    define("purchase_price", value("pricing.purchase_price"), unit="USD",
           description="purchase price of one card", reference=PRICE)
    define("depreciation_years", value("pricing.depreciation_years"), unit="year",
           description="years over which a card is written off", reference=PRICE)
    define("owned_depreciation_per_hour",
           S.purchase_price * S.card_count / (S.depreciation_years * HOURS_PER_YEAR), unit="USD/h",
           description="purchase price spread over every hour of the depreciation period",
           reference=PRICE)
    energy = S.owned_energy_cost_per_hour if value("pricing.electricity_price") is not None else 0
    define("owned_cost_per_hour", S.owned_depreciation_per_hour + energy, unit="USD/h",
           description="depreciation plus electricity per hour (no host, cooling or operations)",
           reference=PRICE)
    define("owned_cost_per_million_output_tokens",
           S.owned_cost_per_hour / (3600 * S.busy_tokens_per_s * S.utilisation) * MILLION,
           unit="USD", description="owned cost of a million output tokens at the utilisation",
           reference=PRICE)
    if volume:
        define("owned_cost_per_request", 24 * S.owned_cost_per_hour / S.requests_per_day,
               unit="USD", description="owned, always-available cost per completed request",
               reference=PRICE)


def _api(scenario, define, priced, volume):
    value = scenario.value
    fresh = value("pricing.api_input_per_million")
    output = value("pricing.api_output_per_million")
    if fresh is None or output is None:
        return
    cached_price = value("pricing.api_cached_input_per_million")
    define("api_input_price", fresh, unit="USD",
           description="hosted API price of a million fresh input tokens", reference=PRICE)
    if cached_price is None:
        define("api_cached_input_price", S.api_input_price, unit="USD",
               description="hosted API price of a million cached input tokens (no discount given)",
               reference=PRICE)
    else:
        define("api_cached_input_price", cached_price, unit="USD",
               description="hosted API price of a million cached input tokens", reference=PRICE)
    define("api_output_price", output, unit="USD",
           description="hosted API price of a million output tokens", reference=PRICE)
    cached = value("pricing.api_cached_input_tokens")
    if cached is not None:
        define("api_cached_input_tokens", cached, unit="token",
               description="input tokens per request billed as cached", reference=PRICE)
    elif scenario.lever("prefix_cache") is not None:
        define("api_cached_input_tokens", S.prefix_cached_input_tokens, unit="token",
               description="input tokens per request billed as cached (the prefix_cache lever's "
                           "hit rate times its prefix)", reference=PRICE)
    else:
        define("api_cached_input_tokens", 0.0, unit="token",
               description="input tokens per request billed as cached (none given)",
               reference=PRICE)
    define("api_cache_hit_share", S.api_cached_input_tokens / S.prompt_tokens, unit="1",
           description="share of input tokens billed at the cached price", reference=PRICE)
    define("api_input_cost_per_request",
           ((S.prompt_tokens - S.api_cached_input_tokens) * S.api_input_price
            + S.api_cached_input_tokens * S.api_cached_input_price) / MILLION, unit="USD",
           description="hosted API input charge of one request", reference=PRICE)
    define("api_output_cost_per_request", S.output_tokens * S.api_output_price / MILLION,
           unit="USD", description="hosted API output charge of one request", reference=PRICE)
    define("api_cost_per_request", S.api_input_cost_per_request + S.api_output_cost_per_request,
           unit="USD", description="hosted API charge of one request", reference=PRICE)
    define("api_cost_per_request_uncached",
           (S.prompt_tokens * S.api_input_price + S.output_tokens * S.api_output_price) / MILLION,
           unit="USD", description="hosted API charge of one request with no cached input",
           reference=PRICE)
    define("api_cost_per_million_tokens",
           S.api_cost_per_request / (S.prompt_tokens + S.output_tokens) * MILLION, unit="USD",
           description="hosted API charge per million tokens, input and output together (the "
                       "units of cost_per_million_tokens)", reference=PRICE)
    define("api_input_share", S.api_input_cost_per_request / S.api_cost_per_request, unit="1",
           description="input's share of the API bill", reference=PRICE)
    define("api_output_share", S.api_output_cost_per_request / S.api_cost_per_request, unit="1",
           description="output's share of the API bill", reference=PRICE)
    if volume:
        define("api_cost_per_day", S.api_cost_per_request * S.requests_per_day, unit="USD",
               description="hosted API bill per day", reference=PRICE)
        define("api_cost_per_day_uncached", S.api_cost_per_request_uncached * S.requests_per_day,
               unit="USD", description="hosted API bill per day with no cached input",
               reference=PRICE)
        define("api_cost_per_month", S.api_cost_per_day * DAYS_PER_MONTH, unit="USD",
               description="hosted API bill per month (30.4375 days)", reference=PRICE)
    if priced:
        define("api_break_even_requests_per_day", S.always_on_cost_per_day / S.api_cost_per_request,
               unit="1", description="daily volume at which an always-on rented deployment costs "
                                     "what the API bills", reference=PRICE)
        define("api_break_even_requests_per_day_uncached",
               S.always_on_cost_per_day / S.api_cost_per_request_uncached, unit="1",
               description="break-even daily volume against the API with no cached input",
               reference=PRICE)
        define("api_break_even_within_capacity",
               sympy.Le(S.api_break_even_requests_per_day, 86400 / S.busy_seconds_per_request),
               unit="bool", description="the cards can serve the break-even volume at all",
               reference=PRICE)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if not _active(scenario):
        return
    value = scenario.value
    if value("hardware.price_per_hour") is not None:
        transform.replace("cost_per_million_output_tokens",
                          S.cost_per_million_output_tokens_busy / S.utilisation,
                          reason="busy price divided by the share of paid hours in use",
                          reference=PRICE, order=Stage.COST,
                          description="price of a million output tokens at the busy throughput "
                                      "(pricing.throughput) and utilisation")
    if value("hardware.power") is not None:
        transform.replace("energy_per_token", S.power_total / S.busy_tokens_per_s,
                          reason="power over the busy output rate that prices use",
                          reference=PRICE, order=Stage.COST,
                          description="energy per output token at the busy throughput that "
                                      "prices use")


__all__ = ["DAYS_PER_MONTH", "HOURS_PER_YEAR"]
