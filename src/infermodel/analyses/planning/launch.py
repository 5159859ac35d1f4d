"""The chosen deployment as the engine's own launch command.

Each engine of :data:`~.space.ENGINES` names its flags as the version it follows does
(its ``version`` says which, and where they are documented).  A replica is one server
process (or, disaggregated, a unit of prefill and decode servers); the plan's replicas
run behind a load balancer that routes as the plan's ``router`` did.  What the line sets:
the layout degrees (:data:`~.space.DEGREES`: each engine's flag), the scheduler's token
budget and running limit the plan simulated, the share of memory the engine may use,
and the weight and cache formats where the engine names them.

>>> print(launch_text(found))  # doctest: +SKIP
# vLLM 0.8.5 engine arguments (...): 12 replicas of this server, 1 GPU each
vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 1 ...
"""

from __future__ import annotations

import shlex

from .space import DEGREES, ENGINES


def _formats(result) -> dict[str, str]:
    """The weight and cache formats the launch line names, where the scenario says."""
    scenario = result.scenario
    lever = scenario.lever("quantization")
    name = None
    if lever is not None:
        linear = getattr(lever, "linear", None)
        name = linear if isinstance(linear, str) else getattr(linear, "name", None)
    name = name or scenario.value("model.weight_format")
    out = {}
    if isinstance(name, str) and name.startswith("fp8"):
        out["quantization"] = "fp8"
    cache = getattr(lever, "kv_cache", None) if lever is not None else None
    cache = cache if isinstance(cache, str) else getattr(cache, "name", None)
    if isinstance(cache, str) and cache.startswith("fp8"):
        out["kv_cache"] = "fp8"
    return out


def _memory_share(result, planned) -> float | None:
    """The share of each card the engine may fill (vLLM's gpu-memory-utilization): one
    less the reserve the scenario states as a fraction, else the engine's kept fraction.
    """
    chosen = result.scenario.with_overrides({k: v for k, v in planned.overrides.items()
                                             if not k.startswith("simulation.")})
    reserve = chosen.value("hardware.reserve")  # ("fraction", 0.1) or ("bytes", 2.5e9)
    if reserve is not None:
        kind, amount = reserve
        return round(1 - float(amount), 4) if kind == "fraction" else None
    from ...engine.kept import evaluate

    kept = evaluate(chosen).values.get("engine_kept_fraction")
    return None if kept is None else round(1 - float(kept), 4)


def launch_lines(result, planned=None) -> list[str]:
    """The launch command of ``planned`` (default: the best deployment), as lines."""
    planned = planned if planned is not None else result.best
    if planned is None:
        return ["# no deployment meets the objectives: nothing to launch"]
    candidate = planned.candidate
    engine = ENGINES[candidate.engine]
    checkpoint = result.table.checkpoint or result.scenario.presets.get("model") or "MODEL"
    words = [w.format(checkpoint=checkpoint) for w in engine.command]
    for degree in DEGREES:
        value = candidate.degrees.get(degree.key)
        if value is None:
            continue
        if value > 1 and candidate.engine not in degree.engines():
            return [f"# {engine.name} has no launch flag for {degree.description or degree.key} "
                    f"({degree.key} = {value}): nothing to launch"]
        flag = degree.flags.get(candidate.engine)
        if flag is not None and (value > 1 or degree.default is not None):
            words += [flag, str(value)]
        switch = degree.switches.get(candidate.engine)
        if switch is not None and value > 1:
            words.append(switch)
    policy = planned.overrides.get("simulation.policies")
    if policy:
        # the iteration's token budget: the chunks' (chunked) or the whole prompts' (reserve,
        # paged under an engine that does not chunk); none where the policy has no budget
        tokens = policy[0].get("chunk_tokens", policy[0].get("max_tokens"))
        if tokens is not None:
            words += [engine.flags["tokens"], str(tokens)]
        words += [engine.flags["running"], str(policy[0]["max_running"])]
    share = _memory_share(result, planned)
    if share is not None and "memory" in engine.flags:
        words += [engine.flags["memory"], f"{share:g}"]
    for key, value in _formats(result).items():
        flag = engine.flags.get(key)
        if flag is not None:
            words += [flag, value if candidate.engine != "sglang" or key != "kv_cache" else "fp8_e4m3"]
    servers = planned.replicas * candidate.pools.servers
    total = servers * candidate.gpus_per_server
    each = f"{candidate.gpus_per_server} GPU{'s' * (candidate.gpus_per_server != 1)} each"
    if candidate.pools.disaggregated:
        head = (f"# {engine.version}: {servers} servers of this command, {each} ({total} GPUs): "
                f"{candidate.pools.prefill * planned.replicas} prefill and "
                f"{candidate.pools.decode * planned.replicas} decode (the engine's prefill/decode "
                "transfer settings are not written here)")
    else:
        head = (f"# {engine.version}: {planned.replicas} replica{'s' * (planned.replicas != 1)} "
                f"of this server, {each} ({total} GPU{'s' * (total != 1)}), behind a "
                f"{result.table.router.replace('_', '-')} load balancer")
    return [head, " ".join(shlex.quote(w) for w in words)]


def launch_text(result) -> str:
    """The best deployment's launch line, with its header comment."""
    return "\n".join(launch_lines(result))


__all__ = ["launch_lines", "launch_text"]
