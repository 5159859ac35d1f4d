"""Measured rates: latency from the prefill and decode rates a person measured.

The simplest model a practitioner argues with. When ``[efficiency]`` gives the rates
measured on the real deployment, they replace the roofline's times::

    [efficiency]
    prefill_rate = 8000          # prompt tokens per second, one request's prefill
    decode_rate = 45             # output tokens per second one stream sees, at workload.batch
    request_overhead = "30 ms"   # fixed time per request (tokenising, scheduling, transport)

* ``prefill_time`` = B · n_uncached / prefill_rate + overhead, so ``ttft`` (one request
  alone) is n_uncached / prefill_rate + overhead, where n_uncached is the prompt less
  what the prefix cache holds on average (``prefix_effective_prefill_tokens`` when the
  ``prefix_cache`` lever is on: its hits are counted here, not by its roofline saving);
* ``decode_step_time`` = 1 / decode_rate, so ``tpot`` is one over the measured rate and
  ``tokens_per_s_total`` is B times it;
* ``machine_seconds_per_request`` = (``ttft_batch`` + (n_out − 1) · ``tpot``) / B, and
  with a request volume ``machine_hours_per_month`` (30.4375 days a month) and, priced,
  ``machine_cost_per_month``.

Every replaced derivation says it comes from the measured rates, and a result warning
sets the measured figures beside the roofline's (``roofline_prefill_time``,
``roofline_tpot``), so a measurement far from the ceiling shows. What a measured rate leaves out is
everything the measurement did not see: a rate measured at one batch, prompt length or
context does not follow them when they change (the roofline does).
"""

from __future__ import annotations

from sympy import Max

from infermodel.plugin import S, hookimpl

from . import LAB, M10
from .limits import LIMITS

MEASURE = f"{M10}, 'Measure the resource the phase uses'; Lab 6 (measured beside the roofline)"
TWO_TIMES = f"{M10}, §1 'Estimate the two times'; {LAB}, 'Two costs for one answer'"
PRICE = f"{M10}, §11 'Price output at the utilisation actually purchased'"
DAYS_PER_MONTH = 30.4375
#: How far (as a ratio either way) a measured time may sit from the roofline's before
#: the warning calls it out as far from the ceiling.
FAR_FROM_ROOFLINE = 3.0
MEASURED = LIMITS.index("measured rate")


def _measured(scenario) -> tuple[bool, bool]:
    return (scenario.value("efficiency.prefill_rate") is not None,
            scenario.value("efficiency.decode_rate") is not None)


@hookimpl
def infermodel_register_fields(register):
    register("efficiency", "prefill_rate", kind="quantity", unit="token/s", minimum=0,
             exclusive_minimum=True, default=None, quantity="measured_prefill_rate",
             description="measured prompt tokens per second of one request's prefill; with it "
                         "TTFT is the uncached prompt over this rate plus request_overhead")
    register("efficiency", "decode_rate", kind="quantity", unit="token/s", minimum=0,
             exclusive_minimum=True, default=None, quantity="measured_decode_rate",
             description="measured output tokens per second one stream sees at workload.batch; "
                         "with it TPOT is one over this rate")
    register("efficiency", "request_overhead", kind="quantity", unit="s", minimum=0,
             default=None, quantity="measured_request_overhead",
             description="fixed time each request adds to its TTFT: in the measured-rates model "
                         "(with prefill_rate) and under measured kernels (kernels = \"measured\": "
                         "the request's way through the server, which no kernel table times)")


@hookimpl
def infermodel_validate_scenario(scenario, report):
    if (scenario.value("efficiency.request_overhead") is not None
            and scenario.value("efficiency.prefill_rate") is None
            and scenario.value("efficiency.kernels") != "measured"):
        report("efficiency.request_overhead",
               "request_overhead is part of the measured-rates TTFT, which needs the measured "
               "prefill rate, or of the measured kernels' TTFT",
               expected="efficiency.prefill_rate beside it, in tokens/s, or efficiency.kernels "
                        '= "measured"',
               suggestion='add prefill_rate = <prompt tokens per second you measured>, or '
                          'time the operators from the kernel tables: kernels = "measured"')


def _uncached_prompt(scenario):
    if scenario.lever("prefix_cache") is not None:
        return S.prefix_effective_prefill_tokens, " (the prefix cache's hits taken off)"
    return S.prompt_tokens, ""


@hookimpl
def infermodel_define_quantities(scenario, define):
    prefill, decode = _measured(scenario)
    if not (prefill or decode):
        return
    roofline = Max(S.prefill_time_compute, S.prefill_time_memory) + S.t0
    if scenario.lever("prefix_cache") is not None:
        roofline = roofline - S.prefix_hit_rate * S.prefix_prefill_time_saved
    define("roofline_prefill_time", roofline,
           unit="s", description="prefill time of the batch's prompts on the roofline, prefix "
                                 "hits included (what the measured rate replaces)",
           reference=TWO_TIMES)
    define("roofline_tpot", Max(S.decode_time_memory, S.decode_time_compute) + S.t0, unit="s",
           description="time per output token on the roofline (what the measured rate replaces)",
           reference=TWO_TIMES)
    if prefill:
        uncached, why = _uncached_prompt(scenario)
        define("measured_uncached_prompt_tokens", uncached, unit="token",
               description="prompt tokens one request prefills on average" + why,
               reference=MEASURE)
        if scenario.value("efficiency.request_overhead") is None:
            define("measured_request_overhead", 0.0, unit="s",
                   description="fixed time per request (none given)", reference=MEASURE)
    define("machine_seconds_per_request",
           (S.ttft_batch + (S.output_tokens - 1) * S.tpot) / S.batch, unit="s",
           description="machine time one request occupies: its share of the batch's prefill "
                       "and decode", reference=PRICE)
    if scenario.value("workload.requests_per_day") is None and \
            scenario.value("workload.requests_per_month") is None:
        return
    define("machine_hours_per_month",
           S.requests_per_day * DAYS_PER_MONTH * S.machine_seconds_per_request / 3600, unit="h",
           description="machine-hours the monthly volume needs at the measured rates "
                       "(30.4375 days a month)", reference=PRICE)
    if scenario.value("hardware.price_per_hour") is not None:
        define("machine_cost_per_month", S.machine_hours_per_month * S.cost_per_hour, unit="USD",
               description="rent of those machine-hours (as if paid by the hour used)",
               reference=PRICE)


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    prefill, decode = _measured(scenario)
    if prefill:
        measured = (S.batch * S.measured_uncached_prompt_tokens / S.measured_prefill_rate
                    + S.measured_request_overhead)
        # wrap, not replace: the measured model takes the prefix cache's hits into its
        # uncached prompt itself, so the roofline saving it set aside is deliberate.
        transform.wrap("prefill_time", lambda old: measured,
                       reason="measured-rates model (the simplest one): uncached prompt tokens / "
                              "measured prefill rate + request overhead, in place of the roofline "
                              "and any lever's change to it", reference=MEASURE,
                       description="prefill time from the measured prefill rate (batch × "
                                   "uncached prompt / prefill_rate + request overhead)")
        transform.replace("prefill_limit", MEASURED, reason="prefill is timed by its measured rate",
                          reference=MEASURE)
    if decode:
        transform.wrap("decode_step_time", lambda old: 1 / S.measured_decode_rate,
                       reason="measured-rates model (the simplest one): one over the measured "
                              "decode rate, in place of the roofline and any lever's change to it",
                       reference=MEASURE,
                       description="decode step time from the measured decode rate (1 / "
                                   "decode_rate)")
        transform.replace("decode_limit", MEASURED, reason="decode is timed by its measured rate",
                          reference=MEASURE)
    if prefill or decode:
        transform.warn("latency comes from the measured rates (the simplest model: TTFT = "
                       "uncached prompt / prefill_rate + overhead, TPOT = 1 / decode_rate); a "
                       "rate measured at one batch, prompt or context does not follow them when "
                       "they change, as the roofline does", quantity="tpot" if decode else "ttft")


@hookimpl
def infermodel_check_result(result, warn):
    values = result.values
    for name, roofline in (("ttft_batch", "roofline_prefill_time"), ("tpot", "roofline_tpot")):
        if roofline not in values or not values[roofline] > 0:
            continue
        ratio = values[name] / values[roofline]
        if ratio > FAR_FROM_ROOFLINE or ratio < 1 / FAR_FROM_ROOFLINE:
            warn(name, f"the measured {name} ({result.show(name)}) is {ratio:.3g}× the roofline's "
                       f"({result.show(roofline)}): check the measurement's batch, lengths and "
                       "what it timed")


@hookimpl
def infermodel_register_headlines(register):
    register("measured rates", "machine_hours_per_month", label="machine-hours per month")
    register("measured rates", "machine_cost_per_month", label="machine cost per month")


__all__ = ["DAYS_PER_MONTH", "FAR_FROM_ROOFLINE"]

