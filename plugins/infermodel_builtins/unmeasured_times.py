"""What no measured kernel table times, under ``efficiency.kernels = "measured"``: the
engine's scheduler and host time per iteration (``step_overhead``) and a request's way
through the server outside the engine's iterations (``request_overhead``: API server,
tokenisation, the engine's queues, the first token's return), which ``ttft`` adds.

Helpers of :mod:`.measured_kernels` (no hooks of their own). Their sizes on NVIDIA's
measured deployments: ``docs/kernels.rst``, "A request's way through the server".
"""

from __future__ import annotations

from infermodel.plugin import S

from .efficiency_parameters import BY_NAME, HOST, engine_values

REQUEST_REFERENCE = ("a request's way through the server; its size on NVIDIA's measured "
                     "deployments: aiconfigurator-core silicon_sample.csv (docs/kernels.rst)")

#: What a first token's time leaves out under measured kernels unless the scenario states
#: it (efficiency.request_overhead, efficiency.request_overhead_per_token), and how large
#: that was on NVIDIA's measured deployments (docs/kernels.rst, "A request's way through
#: the server").
REQUEST_PATH = ("ttft under measured kernels is the prefill's kernels and the engine's step, "
                "not a request's way through the server (API server, tokenisation, the "
                "engine's queues, the first token's return); state it in "
                "efficiency.request_overhead (and what grows with the prompt in "
                "efficiency.request_overhead_per_token). On NVIDIA's measured deployments "
                "(aiconfigurator-core silicon_sample.csv) it was about 30 ms (vLLM), 70 ms "
                "(TensorRT-LLM) and 257 ms (SGLang) per request, 20–60, 35–170 and 120–260 ms "
                "by model at four clients or fewer; SGLang's own published benchmarks at one "
                "client miss about 85 ms")


def check_per_token(scenario, report, *, measured: bool) -> None:
    """``efficiency.request_overhead_per_token`` is read only under measured kernels and
    not beside a measured prefill rate (whose rate holds what grows with the prompt).
    """
    if scenario.value("efficiency.request_overhead_per_token") is None:
        return
    if not measured:
        report("efficiency.request_overhead_per_token",
               "request_overhead_per_token is read only when the operators are timed "
               "from the measured kernel tables",
               expected='efficiency.kernels = "measured" beside it',
               suggestion='time the operators from the kernel tables (kernels = '
                          '"measured"), or remove request_overhead_per_token')
    elif rated(scenario):
        report("efficiency.request_overhead_per_token",
               "with a measured prefill rate (efficiency.prefill_rate) the first token "
               "is the prompt over that rate, which holds what grows with the prompt "
               "already: request_overhead_per_token would not be read",
               expected="efficiency.prefill_rate or request_overhead_per_token, not both",
               suggestion="remove request_overhead_per_token, or efficiency.prefill_rate "
                          "to time the prefill from the kernel tables")


def host_time(scenario, define) -> None:
    """The engine's scheduler and host time per iteration, which no kernel table measures:
    the scenario's ``efficiency.step_overhead``, else its engine preset's fitted one.

    Each engine generation has its own preset (vLLM's V0 engine, before 0.8, is
    ``vllm-v0``), so the host time is the generation's: on the silicon ledger, a source
    no fit sees, adding it brought the measured kernels' TPOT from a median 18.7 % off to
    17.2 % (SGLang 20.9 % → 16.1 %, vLLM 18.9 % → 17.9 %, TensorRT-LLM 17.2 % → 18.0 %).
    Before vLLM's generations were split, its preset carried V0's 7.4 ms a step, and
    added here it over-predicted a current vLLM's decode by half.
    """
    given = scenario.value("efficiency.step_overhead")
    if given is not None:
        value, origin = given, "efficiency.step_overhead"
    else:
        values, where = engine_values(scenario)
        value = values.get("step_overhead", 0.0)
        origin = (f"{where}, fitted on the accuracy ledger's runs of that engine generation"
                  if "step_overhead" in values else
                  "none: the engine has no fitted preset; state efficiency.step_overhead")
    define("step_overhead", value, unit="s",
           description=f"{BY_NAME['step_overhead'].meaning} ({origin}; no kernel table "
                       "times it; no per-sequence host time is added: the engine prepares "
                       "the next batch while the GPU runs)",
           reference=HOST)


def request_time(scenario, define) -> None:
    """A request's way through the server, which no kernel table times: the scenario's
    ``efficiency.request_overhead``, else none (warned: :data:`REQUEST_PATH`). With a
    measured prefill rate the measured-rates model's prefill already holds it.
    """
    if rated(scenario):
        value, origin = 0.0, ("none here: the measured-rates prefill (efficiency.prefill_rate) "
                              "already adds efficiency.request_overhead")
    elif scenario.value("efficiency.request_overhead") is not None:
        value, origin = S.measured_request_overhead, "efficiency.request_overhead"
    else:
        value, origin = 0.0, "none stated; set efficiency.request_overhead"
    if not rated(scenario) and scenario.value("efficiency.request_overhead_per_token") is not None:
        # What grows with the prompt: a time per prompt token, read as the request's own.
        tokens = S.measured_request_overhead_per_token * S.prompt_tokens
        if scenario.value("efficiency.request_overhead") is None:
            value, origin = tokens, "efficiency.request_overhead_per_token × prompt_tokens"
        else:
            value = value + tokens
            origin = ("efficiency.request_overhead + efficiency.request_overhead_per_token × "
                      "prompt_tokens")
    define("request_overhead", value, unit="s",
           description="time a request spends outside the kernels and the engine's steps, "
                       "which its first token and its end-to-end time include: API server, "
                       "tokenisation, the engine's queues, the streamed response "
                       f"({origin})",
           reference=REQUEST_REFERENCE)


def rated(scenario) -> bool:
    """Whether the measured-rates model times the prefill (its prefill holds the
    request's time already).
    """
    return scenario.value("efficiency.prefill_rate") is not None


def first_token(scenario, transform, order: int) -> None:
    """One request's first token as its client sees it: ``ttft`` plus ``request_overhead``
    (the batch's prefill pass, ``ttft_batch``, which the card-time figures read, stays the
    engine's); a warning with its sizes where the scenario states none.
    """
    transform.wrap("ttft", lambda old: old + S.request_overhead, order=order,
                   reason="measured kernels: the prefill's kernels and the engine's step, plus "
                          "the request's way through the server (request_overhead), which no "
                          "kernel table times", reference=REQUEST_REFERENCE)
    if (scenario.value("efficiency.request_overhead") is None and not rated(scenario)
            and scenario.value("efficiency.request_overhead_per_token") is None):
        transform.warn(REQUEST_PATH, quantity="ttft")
