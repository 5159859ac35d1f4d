"""KV-cache offload to host memory: a worked third-party infermodel lever.

A share ``fraction`` of every sequence's key/value cache is kept in host memory. At
each decode step that share is copied over the card's host link into a staging
buffer and read from there by attention, so the card's own memory traffic is
unchanged and the copy adds link time. The card then holds only the resident share of
each sequence, so more sequences fit; host memory bounds the offloaded share.

Module 10 names the trade-off — offloading the cache "increases capacity at the cost
of transfers across a much slower link" — without a formula; this plugin states one:

* capacity: ``min(kv_budget / ((1 - f) kv L), host_memory / (f kv L))`` sequences of
  ``L`` tokens at ``kv`` bytes per token;
* time: each decode step moves ``f B t kv`` bytes over the link (``B`` sequences at mean
  context ``t``), adding ``f B t kv / link_bandwidth`` to the step, or overlapping it
  with the step when ``overlap = true``.

The staging buffer on the card and the link's latency are ignored. It uses only the
public hooks: it registers two hardware fields and one lever, validates that the
fields are given when the lever is used, defines its quantities and transforms the
base physics' ``decode_step_time``, ``capacity_step_time``, ``max_sequences``,
``max_context``, ``memory_required`` and ``fits``.
"""

from __future__ import annotations

import attrs
import sympy
from sympy import Max, Min, Piecewise, floor, oo

from infermodel.plugin import Fraction, S, Stage, hookimpl

__version__ = "0.1.0"

M10 = "Module 10: Inference and serving"
TRADE_OFF = f"{M10}, §3 'Capacity and traffic are related but different'"
SWAP = f"{M10}, 'Map logical positions to physical blocks' (swapping cache to host storage)"
LINK = "PCI Express 5.0 x16: about 64 GB/s in each direction"

#: Transformation stage: the memory hierarchy is hardware, before algorithms.
ORDER = Stage.PARALLELISM


@attrs.frozen
class KvOffload:
    """``[levers.kv_offload]``: how much of the cache lives in host memory."""

    fraction: Fraction = attrs.field(default=0.5, metadata={
        "description": "share of every sequence's cache kept in host memory"})
    overlap: bool = attrs.field(default=False, metadata={
        "description": "copies overlap the decode step (only the longer of the two counts)"})


# ---------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_register_fields(register):
    register("hardware", "host_memory", kind="quantity", unit="B", default=None, minimum=0,
             exclusive_minimum=True, quantity="host_memory",
             description="host memory set aside for offloaded KV cache (kv_offload lever)")
    register("hardware", "host_link_bandwidth", kind="quantity", unit="B/s", default=None,
             minimum=0, exclusive_minimum=True, quantity="host_link_bandwidth",
             description="bandwidth of one card's link to host memory, one direction "
                         "(kv_offload lever)")


@hookimpl
def infermodel_register_levers(register):
    register("kv_offload", KvOffload,
             description="keep a share of each sequence's KV cache in host memory and copy it "
                         "over the host link every decode step: more capacity, slower steps",
             reference=TRADE_OFF)


# ---------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_validate_scenario(scenario, report):
    if scenario.lever("kv_offload") is None:
        return
    for field, example in (("host_memory", '"512 GB"'), ("host_link_bandwidth", '"64 GB/s"')):
        if scenario.value(f"hardware.{field}") is None:
            report("levers.kv_offload", f"the kv_offload lever needs hardware.{field}",
                   expected=f"hardware.{field} in the [hardware] table",
                   suggestion=f"add {field} = {example} to [hardware]")


# ---------------------------------------------------------------------------------
# Quantities
# ---------------------------------------------------------------------------------


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("kv_offload")
    if lever is None:
        return
    f = S.kv_offload_fraction
    define("kv_offload_fraction", float(lever.fraction), unit="1",
           latex="f_{\\mathrm{off}}", reference=TRADE_OFF,
           description="share of each sequence's KV cache kept in host memory")
    define("kv_offload_link_bandwidth", S.host_link_bandwidth * S.card_count, unit="B/s",
           latex="\\mathrm{BW}_{\\mathrm{link}}", reference=LINK,
           description="host-link bandwidth of all cards (one link per card)")
    define("kv_offload_bytes_per_step", f * S.batch * S.kv_bytes_read_per_sequence, unit="B",
           reference=TRADE_OFF,
           description="offloaded cache bytes copied over the host link in one decode step")
    define("kv_offload_time", S.kv_offload_bytes_per_step / S.kv_offload_link_bandwidth, unit="s",
           reference=TRADE_OFF, description="time to copy one decode step's offloaded cache")
    define("kv_offload_host_bytes", f * S.kv_bytes_total, unit="B", reference=SWAP,
           description="host memory the batch's offloaded cache takes at full length")
    per_sequence = S.kv_bytes_per_sequence  # (shared bytes, if any, stay on the cards)
    define("kv_offload_device_sequences",
           Piecewise((floor((S.kv_budget_bytes - S.kv_bytes_shared) / ((1 - f) * per_sequence)),
                      f < 1), (oo, True)),
           unit="seq", reference=TRADE_OFF,
           description="full-length sequences whose resident cache share fits on the cards "
                       "(∞ when everything is offloaded)")
    define("kv_offload_host_sequences", floor(S.host_memory / (f * per_sequence)), unit="seq",
           reference=SWAP,
           description="full-length sequences whose offloaded cache share fits in host memory")
    define("kv_host_fraction", f, unit="1", reference=TRADE_OFF,
           description="share of each cached position in host memory (the serving simulator's "
                       "cache and host-link copy)")
    define("kv_host_bandwidth", S.kv_offload_link_bandwidth, unit="B/s", reference=LINK,
           description="host-link bandwidth the serving simulator copies the offloaded share over")
    define("kv_host_memory", S.host_memory, unit="B", reference=SWAP,
           description="host memory the serving simulator lets the offloaded share fill")
    define("kv_host_overlap", 1 if lever.overlap else 0, unit="1", reference=TRADE_OFF,
           description="1 when the host copy overlaps the step, 0 when it adds to it")
    full = Max(1, S.max_sequences)
    define("kv_offload_capacity_time",
           f * full * S.kv_bytes_read_per_sequence / S.kv_offload_link_bandwidth, unit="s",
           reference=TRADE_OFF,
           description="host-link copy time of one decode step with the cache full")


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    lever = scenario.lever("kv_offload")
    if lever is None:
        return
    f = S.kv_offload_fraction
    transform.wrap(
        "memory_required",
        lambda old: _substitute(old, S.kv_bytes_total, (1 - f) * S.kv_bytes_total, "memory_required"),
        reason="only the resident share of the cache occupies card memory",
        reference=TRADE_OFF, order=ORDER)
    transform.wrap(
        "fits", lambda old: sympy.And(old, sympy.Le(S.kv_offload_host_bytes, S.host_memory)),
        reason="the offloaded share must also fit in host memory", reference=SWAP, order=ORDER)
    transform.replace(
        "max_sequences", Max(0, Min(S.kv_offload_device_sequences, S.kv_offload_host_sequences)),
        reason="the smaller of what the cards hold of the resident share and what host memory "
               "holds of the offloaded share", reference=TRADE_OFF, order=ORDER)
    per_context = S.kv_bytes_per_token * S.batch
    device_tokens = Piecewise((S.kv_budget_bytes / ((1 - f) * per_context), f < 1), (oo, True))
    transform.replace(
        "max_context", Max(0, floor(Min(device_tokens, S.host_memory / (f * per_context)))),
        reason="the cache budget on the cards holds the resident share, host memory the rest "
               "(every layer counted as keeping every position: with windowed layers, a lower "
               "bound)",
        reference=TRADE_OFF, order=ORDER)
    note = _max_context_note(scenario)
    if note:
        transform.warn(note, quantity="max_context")
    if lever.overlap:
        def step(old):
            return Max(old, S.kv_offload_time + S.t0)
        def capacity(old):
            return Max(old, S.kv_offload_capacity_time + S.t0)
        how = "the copy overlaps the step, which takes the longer of the two"
    else:
        def step(old):
            return old + S.kv_offload_time
        def capacity(old):
            return old + S.kv_offload_capacity_time
        how = "the copy of the offloaded cache share adds to every step"
    transform.wrap("decode_step_time", step, reason=how, reference=TRADE_OFF, order=ORDER)
    transform.wrap("capacity_step_time", capacity, reason=how, reference=TRADE_OFF, order=ORDER)


def _layer_counts(scenario) -> dict[str, int] | None:
    """Layers of each kind ("full", "sliding", "chunked", "linear") from the model's
    ``layer_pattern`` (repeated from the first layer), or None for a uniform stack or when
    no plugin declares per-layer kinds. The scenario is already validated.
    """
    model = scenario.sections["model"]
    if not hasattr(model, "layer_pattern"):
        return None
    layers = scenario.value("model.layers")
    pattern = scenario.value("model.layer_pattern")
    if pattern is None:
        pattern = "sliding" if getattr(model, "sliding_window", None) is not None else "full"
    period: list[str] = []
    for item in pattern.lower().split(","):
        parts = [p.strip() for p in item.split("*")]
        repeat = next((int(p) for p in parts if p.isdigit()), 1)
        kind = next(p for p in parts if not p.isdigit())
        period.extend([kind] * repeat)
    counts = dict.fromkeys(("full", "sliding", "chunked", "linear"), 0)
    for position, kind in enumerate(period):
        if position < layers:
            counts[kind] += (layers - 1 - position) // len(period) + 1
    return None if counts["full"] == layers else counts


def _max_context_note(scenario) -> str | None:
    """What this lever's ``max_context`` leaves out for a model with windowed or fixed-state
    layers, with its size; None for a uniform stack of full-attention layers.
    """
    counts = _layer_counts(scenario)
    if counts is None:
        return None
    value = scenario.value
    parts = []
    windowed = counts["sliding"] + counts["chunked"]
    kv_layers = counts["full"] + windowed
    if windowed:
        sizes = " and ".join(f"{n} {kind} layers keep at most {value(field):,} tokens"
                             for kind, n, field in (("sliding-window", counts["sliding"], "model.sliding_window"),
                                                    ("chunked-local", counts["chunked"], "model.attention_chunk"))
                             if n)
        if counts["full"]:
            size = (f"past the windows a token costs only {counts['full']} / {kv_layers} of what is "
                    f"counted, so the longest context can be up to {kv_layers / counts['full']:.1f}× "
                    "the one shown (a lower bound)")
        else:
            size = "no layer keeps every position, so the cache stops growing and the longest context is unbounded"
        parts.append(f"every cache layer is counted as keeping every position, but {sizes}: {size}")
    if counts["linear"]:
        kh, vh = value("model.linear_key_heads"), value("model.linear_value_heads")
        kd, vd = value("model.linear_key_head_dim"), value("model.linear_value_head_dim")
        per_layer = vh * kd * vd + (value("model.linear_conv_kernel") - 1) * (2 * kh * kd + vh * vd)
        state = counts["linear"] * per_layer * value("model.linear_state_bits") / 8
        parts.append(f"the fixed state of the {counts['linear']} linear layers ({state / 1e6:,.2f} MB "
                     "per sequence) is not charged, so the longest context is overstated by up to "
                     "that many bytes of cache per sequence")
    return "kv_offload's max_context: " + "; ".join(parts)


def _substitute(expression, old, new, name):
    # A lever that wraps must not silently do nothing when another lever has already
    # rewritten the formula it expects: say so instead.
    if old not in expression.free_symbols:
        raise ValueError(f"{name} no longer uses {old}; kv_offload cannot apply its change")
    return expression.subs(old, new)


__all__ = ["KvOffload"]
