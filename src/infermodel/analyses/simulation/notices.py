"""What a reader of a simulation must know beside its figures: the 80 % interval the
scenario's efficiency preset gives them, the scenario's own warnings, the lever changes
and scheduler settings the simulation leaves out, and where a simulated policy admits or
batches otherwise than the engine the scenario names. :func:`.plan.plan` gathers them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...formatting import listed
from .contract import reads, unmodelled_changes

__all__ = ["SCHEDULER_HOLDS", "budget_warnings", "engine_policy_warnings", "interval_notes", "names_engine",
           "policy_notes", "simulation_warnings"]


def interval_notes(result) -> list[str]:
    """The 80 % interval of the simulated figures, where the scenario's efficiency preset
    calibrated one (``infermodel.engine.intervals``): ratios of measured to predicted at
    the scenario's batch band.
    """
    from ...engine.intervals import RATIO_QUANTITIES

    values = result.values
    parts = [f"{label} ×{values[low]:.2f}–{values[high]:.2f}"
             for label, (low, high) in zip(("TTFT", "ITL", "tokens/s"), RATIO_QUANTITIES.values())
             if low in values and high in values]
    if not parts:
        return []
    return ["80 % interval of a measurement (the efficiency preset's held-out errors, by engine, "
            "dense or MoE, concurrency band and card): " + ", ".join(parts)
            + " of the simulated figures"]


#: Scheduler settings that hold a new request and the simulated engine does not: the
#: field, the value that holds nothing, what it does, what the simulation does instead,
#: and the hold the scenario prices.
SCHEDULER_HOLDS = (
    ("recv_interval", 1, "the scheduler reads new requests every that many decode iterations",
     "reads them at every iteration",
     "a request arriving while others decode waits scheduler_recv_hold more on average"),
    ("batch_wait_iterations", 0,
     "new prompts wait for more before their prefill while others decode",
     "prefills them at once", "each waits batch_wait_hold more on average"),
    ("dp_balance_timeout", None,
     "new prompts wait until every data-parallel attention rank holds one",
     "prefills each at once", "each waits dp_balance_hold more on average"),
)


def names_engine(scenario) -> bool:
    """Whether a scenario names its serving engine: in ``efficiency.engine``, or through
    an efficiency preset, which states its engine (engine ``"none"`` names none).
    """
    return scenario.value("efficiency.engine") != "none" and (
        scenario.given("efficiency.engine") or scenario.presets.get("efficiency") is not None)


def engine_policy_warnings(scenario, values: Mapping[str, Any], policies,
                           workload=None) -> tuple[str, ...]:
    """Where a scenario names its engine (:func:`names_engine`) and a simulated policy
    admits or batches otherwise: the engine's admission (``engine_admits_on_demand``)
    against the policy's (``reserve`` at full length, ``paged`` and ``chunked`` on
    demand; SGLang's room for the running outputs, which no policy keeps), whether it
    chunks prompts (``engine_chunked_prefill``) against the policy's (``chunked`` does,
    ``reserve`` and ``paged`` prefill whole prompts) where the workload's prompts are
    long enough for it to matter, and a prompt's prefill beside the running decodes or
    apart from them (``engine_mixed_batches``) against the policy's ``mixed_batches``
    (the engine's own unless a policy table states one). A setting the scenario states
    itself (``efficiency.admission``, ``efficiency.mixed_batches``) is named as the
    scenario's.
    """
    if not names_engine(scenario):
        return ()
    engine = scenario.value("efficiency.engine")
    preset = scenario.presets.get("efficiency")
    named = (f"efficiency.engine = {engine!r}" if scenario.given("efficiency.engine")
             else f"the efficiency preset {preset!r} (engine {engine!r})")

    def who(field: str, value: str) -> str:
        stated = f" with efficiency.{field} = {value}" if scenario.given(f"efficiency.{field}") else ""
        return f"{named}{stated}"

    def policies_(names: list[str], plural: str, singular: str) -> str:
        return (f"the {listed(names)} polic" + (f"ies {plural}" if len(names) > 1
                                                  else f"y {singular}"))

    kinds = list(dict.fromkeys(p.kind for p in policies))
    found = []
    on_demand = values.get("engine_admits_on_demand")
    capacity = values.get("max_sequences")
    paged = [k for k in kinds if k in ("paged", "chunked")]
    if on_demand == 0 and paged:
        fits = f", {capacity:,.0f} in this scenario" if isinstance(capacity, (int, float)) else ""
        found.append(
            who("admission", '"reserve"') + " admits a request only when its prompt and whole "
            f"output fit the cache; {policies_(paged, 'admit', 'admits')} on demand and "
            + ("preempt: near the cache's capacity they run" if len(paged) > 1
               else "preempts: near the cache's capacity it runs")
            + f" more sequences at once than the engine, whose limit is max_sequences{fits}; "
            "the reserve policy admits as it does")
    if on_demand == 1 and "reserve" in kinds:
        found.append(
            who("admission", '"paged"') + " admits a request once its prompt fits the cache "
            "and pages the rest in; the reserve policy holds each request's whole output from "
            "the start: near the cache's capacity it runs fewer sequences than the engine (the "
            "paged and chunked policies admit as it does)")
    if on_demand == 1 and engine == "sglang" and paged:
        found.append(
            f"{named} admits a request when its prompt and an estimated share of the running "
            "requests' remaining outputs fit the cache (its new-token ratio); "
            f"{policies_(paged, 'admit', 'admits')} on the prompt alone: near the cache's "
            "capacity the simulation admits, and preempts, more than SGLang, the more so "
            "where its prompts run apart from the decodes (mixed_batches = false), whose "
            "waiting decodes free no memory")
    chunks = values.get("engine_chunked_prefill")
    longest = _longest(workload, "prompt") if workload is not None else None
    budget = values.get("engine_chunk_tokens")
    whole = [k for k in kinds if k in ("reserve", "paged")]
    if chunks == 1 and whole and (longest is None or not isinstance(budget, (int, float))
                                  or longest > budget):
        found.append(
            who("chunked_prefill", "true") + " splits a prompt longer than its budget into "
            f"chunks that share iterations with the running decodes; "
            f"{policies_(whole, 'prefill', 'prefills')} each prompt whole: such a prompt "
            "stalls the running sequences for its whole prefill at once, and their simulated "
            "longest inter-token times are longer than the engine's (the chunked policy chunks "
            "as it does)")
    chunked = [p for p in policies if p.kind == "chunked"]
    if chunks == 0 and chunked and (longest is None
                                    or any(longest > p.chunk_tokens for p in chunked)):
        found.append(
            who("chunked_prefill", "false") + " prefills each prompt whole; the chunked policy "
            "splits a prompt longer than its chunk_tokens into chunks beside the running "
            "decodes: their simulated longest inter-token times are shorter, and such "
            "prompts' first tokens later, than the engine's (the reserve and paged policies "
            "prefill whole prompts, under its token budget)")
    mixes = values.get("engine_mixed_batches")
    mixing = list(dict.fromkeys(p.kind for p in policies
                                if p.kind != "static" and getattr(p, "mixed_batches", True)))
    apart = list(dict.fromkeys(p.kind for p in policies
                               if p.kind != "static" and not getattr(p, "mixed_batches", True)))
    if mixes == 0 and mixing:
        found.append(
            who("mixed_batches", "false") + " runs a prompt's prefill apart from the running "
            f"decodes, which wait for it whole; {policies_(mixing, 'run', 'runs')} it beside "
            "them (mixed_batches = true), giving them a token in each iteration it shares: "
            "the simulated inter-token times differ from the engine's, more of them stretched "
            "a little and the longest shorter")
    if mixes == 1 and apart:
        found.append(
            who("mixed_batches", "true") + " runs a prompt's prefill beside the running "
            f"decodes; {policies_(apart, 'run', 'runs')} prompts alone (mixed_batches = "
            "false), the decodes waiting for each whole prefill: the simulated inter-token "
            "times differ from the engine's, fewer of them stretched and the longest longer")
    return tuple(found)


def policy_notes(policies, workload) -> list[str]:
    """Derivation lines of the policies whose limits are not Lab 3's plain rules: what a
    reserve policy's request holds (its prompt and the output a client allows, the
    output law's maximum unless ``reserve_output_tokens`` says otherwise) and a
    whole-prompt policy's token budget (``max_tokens``).
    """
    lines = []
    law = getattr(getattr(workload, "output", None), "maximum", None)
    trace = getattr(workload, "trace", None)
    longest = int(trace.max_output) if trace is not None else law
    for policy in dict.fromkeys(policies):
        parts = []
        if policy.kind == "reserve":
            held = policy.reserve_output_tokens or longest
            if held is not None:
                source = ("reserve_output_tokens" if policy.reserve_output_tokens
                          else "the output law's maximum, as a client's max_tokens")
                parts.append(f"a request is admitted when its prompt and {int(held):,} output "
                             f"tokens fit the cache ({source})")
        if getattr(policy, "max_tokens", None) is not None:
            parts.append(f"an iteration carries at most {policy.max_tokens:,} tokens, each "
                         "prompt whole (max_tokens)")
        if parts:
            lines.append(f"{policy.kind} policy: " + "; ".join(parts))
    return lines


def budget_warnings(policies, workload, turns: int = 1) -> tuple[str, ...]:
    """Where a whole-prompt policy's token budget (``max_tokens``) is shorter than a
    prefill the workload can ask for: its longest prompt, a session's prompt with its
    history (``turns`` > 1), or, under ``paged``, a preempted request's re-prefill of its
    prompt and output so far. An engine that does not chunk refuses such a prompt
    (TensorRT-LLM accepts none longer than max_num_tokens); the simulation runs it in an
    iteration of its own instead.
    """
    prompt, output = _longest(workload, "prompt"), _longest(workload, "output")
    found = []
    for policy in dict.fromkeys(policies):
        budget = getattr(policy, "max_tokens", None)
        if budget is None or prompt is None:
            continue
        over = []
        if prompt > budget:
            over.append(f"the prompts reach {prompt:,} tokens")
        if turns > 1 and output is not None and turns * prompt + (turns - 1) * output > budget:
            over.append(f"a session's prompt, its history included, reaches "
                        f"{turns * prompt + (turns - 1) * output:,} tokens where its history is "
                        "not cached")
        if (policy.kind == "paged" and policy.preemption == "recompute" and output is not None
                and prompt + output - 1 > budget):
            over.append(f"a preempted request re-prefills up to {prompt + output - 1:,} tokens "
                        "(its prompt and output so far)")
        if over:
            found.append(
                f"the {policy.kind} policy carries at most max_tokens = {budget:,} tokens an "
                f"iteration, each prompt whole, but {'; '.join(over)}: the simulation runs such "
                "a prefill in an iteration of its own (once no decode runs, or at once where "
                "prompts run apart), where an engine that does not chunk refuses it (TensorRT-LLM without chunked "
                "prefill accepts no prompt longer than max_num_tokens): those requests' "
                "simulated times stand for a deployment that would have to split or chunk them")
    return tuple(found)


def _longest(workload, which: str) -> int | None:
    """The longest prompt or output (``which``) a workload (spec or drawn) can hold."""
    trace = getattr(workload, "trace", None)
    drawn = trace if trace is not None else workload
    lengths = getattr(drawn, f"{which}s", None)
    if lengths is not None and hasattr(lengths, "max"):
        return int(lengths.max()) if lengths.size else None
    law = getattr(workload, which, None)
    maximum = getattr(law, "maximum", None)
    return int(maximum) if isinstance(maximum, (int, float)) and math.isfinite(maximum) else None


def simulation_warnings(result, cost=None, workload: Mapping | None = None) -> tuple[str, ...]:
    """What a reader of a simulation must know: the evaluated scenario's own result
    warnings (as ``infermodel run`` prints them), the lever changes the simulation
    leaves out (:func:`~.contract.unmodelled_changes`), a stated time per request
    outside the engine (``request_overhead``), a stated interval between the
    scheduler's reads of new requests (``recv_interval``), a stated wait for more
    prompts (``batch_wait_iterations``) and a stated attention-DP balance
    (``dp_balance_timeout``), each once.
    """
    found = [str(w) for w in result.warnings]
    found += unmodelled_changes(result, cost, reads(result.values, workload))
    path = result.values.get("request_overhead")
    if isinstance(path, float) and path > 0:
        found.append(f"request_overhead ({path * 1e3:.4g} ms a request, its way through the "
                     "server) is not simulated: the simulated first-token and end-to-end times "
                     "run from the request's arrival at the engine to its last token there; "
                     "the scenario's ttft and e2e_latency include it")
    for field, idle, what, does, hold in SCHEDULER_HOLDS:
        value = result.values.get(field)
        if isinstance(value, (int, float)) and value != idle:
            found.append(f"efficiency.{field} ({value:g}: {what}) is not simulated: the "
                         f"simulated engine {does}; {hold}")
    return tuple(dict.fromkeys(found))
