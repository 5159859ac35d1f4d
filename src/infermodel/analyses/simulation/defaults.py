"""The settings a simulated policy named without them takes: what the scenario's levers
propose (:func:`lever_defaults`), then its engine's scheduler defaults
(:func:`engine_defaults`), applied by :func:`policy_with_defaults`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["ENGINE_FIELDS", "UNBOUNDED_RUNNING", "engine_defaults", "lever_defaults",
           "policy_with_defaults"]


def lever_defaults(scenario) -> dict[str, Any]:
    """What the scenario's levers propose for the simulation.

    A lever's settings object may define ``simulation_defaults(scenario)`` returning a
    mapping with ``"policy"`` (a policy table: ``kind`` and its limits) and/or
    ``"output"`` (an output-length law table).  Proposed policies become the default
    ``policies`` (a chunked proposal replaces a paged one: chunked is paged plus a
    token budget) and fill the limits of a policy named without them.
    """
    proposed: list[dict] = []
    output = None
    for name in sorted(scenario.levers):
        method = getattr(scenario.levers[name], "simulation_defaults", None)
        if method is None:
            continue
        offer = method(scenario) or {}
        if offer.get("policy"):
            proposed.append(dict(offer["policy"]))
        if offer.get("output") is not None and output is None:
            output = (name, offer["output"])
    kinds = {p["kind"] for p in proposed}
    if "chunked" in kinds:
        proposed = [p for p in proposed if p["kind"] != "paged"]
    fields: dict[str, dict] = {}
    for p in proposed:
        fields.setdefault(p["kind"], {}).update({k: v for k, v in p.items() if k != "kind"})
    defaults: dict[str, Any] = {"fields": fields}
    if proposed:
        defaults["policies"] = [dict(kind=k, **v) for k, v in fields.items()]
    if output is not None:
        defaults["output"] = output
    return defaults


#: The sequence cap a policy takes from a named engine that sets none (SGLang bounds its
#: running requests by its cache alone, which the simulation's cache does too).
UNBOUNDED_RUNNING = 1_000_000
#: The policy fields a scenario's engine sets (its scheduler defaults, quantities of the
#: efficiency plugin), by policy kind. The whole-prompt policies take the token budget of
#: an engine that does not chunk (``engine_chunked_prefill`` 0) as their ``max_tokens``:
#: it still bounds an iteration's tokens (TensorRT-LLM's max_num_tokens); every
#: continuous policy also takes ``engine_mixed_batches`` (:func:`engine_defaults`).
ENGINE_FIELDS = {"chunked": {"chunk_tokens": "engine_chunk_tokens", "max_running": "engine_max_sequences"},
                 "paged": {"max_tokens": "engine_chunk_tokens", "max_running": "engine_max_sequences"},
                 "reserve": {"max_tokens": "engine_chunk_tokens", "max_running": "engine_max_sequences"}}


def engine_defaults(defaults: dict[str, Any], values: Mapping[str, Any],
                    named: bool = True) -> dict[str, Any]:
    """``defaults`` with the engine's scheduler defaults for a policy named without them
    (its chunk budget and sequence cap, the whole-prompt budget of an engine that does not
    chunk, and whether it runs a prompt beside the decodes: ``engine_mixed_batches``); a
    lever's proposal comes first. The last two follow an engine the scenario ``named``
    (:func:`~.notices.names_engine`); Lab 3's rules stand otherwise.
    """
    fields = {kind: dict(v) for kind, v in defaults.get("fields", {}).items()}
    whole = named and values.get("engine_chunked_prefill") == 0
    for kind, names in ENGINE_FIELDS.items():
        for field, quantity in names.items():
            if field == "max_tokens" and not whole:
                continue  # an engine that chunks has no budget for whole prompts
            value = values.get(quantity)
            if named and field == "max_running" and value == math.inf:
                value = UNBOUNDED_RUNNING  # SGLang: its running requests bounded by the cache
            if value is None or not math.isfinite(float(value)) or float(value) < 1:
                continue
            fields.setdefault(kind, {}).setdefault(field, int(value))
    mixed = values.get("engine_mixed_batches")
    if named and mixed in (0, 1):
        for kind in ENGINE_FIELDS:
            fields.setdefault(kind, {}).setdefault("mixed_batches", bool(mixed))
    return {**defaults, "fields": fields}


def policy_with_defaults(value, defaults):
    """A policy, with the limits the levers propose for a kind named without them."""
    from ... import simulator

    if isinstance(value, str):
        value = {"kind": value}
    if isinstance(value, Mapping) and "kind" in value:
        extra = defaults["fields"].get(value["kind"], {})
        value = {**extra, **value}
    return simulator.policy(value)
