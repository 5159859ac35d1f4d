"""What a reader of a result timed by measured kernel tables must know, as warnings:
operators that fell back to the roofline and their share of the step, parts that kept
their roofline, notes on how a kernel was read, kernels taken as hidden on a second
stream and what that saves, table calls outside their measured grids (scaled from the
edge), levers that still price their own steps by the roofline, a stated activation
scale that no measured GEMM takes, and a stated MoE runner or MXFP4 activations that no
MoE kernel takes. Not a plugin: the measured-kernels plugin's ``infermodel_check_result`` calls
:func:`check`.
"""

from __future__ import annotations

import sympy

from infermodel.plugin import table_of, tabulated_calls

from . import kernel_plan
from .engines import ENGINES
from .kernel_plan import PHASES, Plan, time_name

#: Levers whose own step formulas stay the roofline's under measured kernels, and what.
ROOFLINE_LEVERS = {
    "speculative": "the draft's steps and the verification step behind spec_speedup (a ratio "
                   "of roofline steps, applied to the measured decode step)",
    "chunked_prefill": "the hybrid iteration of a prefill chunk and the decodes "
                       "(hybrid_time_compute, hybrid_time_memory, chunk_stall_vs_decode)",
    "prefix_cache": "the prefill time a prefix hit saves (prefix_prefill_time_saved, taken off "
                    "the measured prefill)",
    "batching": "the static batch's slot step",
}


def check(result, timed: Plan, warn, *, tables: str | None) -> None:
    """Warn about the result's measured timing (see the module docstring); ``tables`` is
    the engine's folder in the tables (None: none).
    """
    scenario = result.scenario
    _scales_without_effect(scenario, warn, tables)
    _kernel_choices_without_effect(scenario, warn)
    for lever, what in ROOFLINE_LEVERS.items():
        if scenario.lever(lever) is not None:
            warn("decode_step_time", f"measured kernels time the model's own operators; the "
                                     f"{lever} lever still prices {what} by its roofline "
                                     "formulas")
    for phase in PHASES:
        total = result[f"{phase}_time_kernels"]
        falls = [t for t in timed if t.phase == phase and t.how == "fallback"]
        if falls and total > 0:
            share = sum(result[time_name(phase, t.name)] for t in falls) / total
            by_reason: dict[str, list[str]] = {}
            for t in falls:
                by_reason.setdefault(t.reason, []).append(t.name)
            reasons = "; ".join(f"{', '.join(names)}: {reason}"
                                for reason, names in by_reason.items())
            warn(f"{phase}_time_kernels",
                 f"measured kernels: {len(falls)} {phase} operator(s) fell back to the roofline, "
                 f"{share:.1%} of the {phase} operators' time ({reasons})")
        parts = [(t.name, label, _number(time, result)) for t in timed if t.phase == phase
                 for label, time in t.stand_ins]
        if parts and total > 0:
            share = sum(value for *_, value in parts) / total
            what = "; ".join(f"{name}: {label}" for name, label, _ in parts)
            warn(f"{phase}_time_kernels",
                 f"measured kernels: {len(parts)} part(s) of {phase} operators kept their "
                 f"roofline, {share:.1%} of the {phase} operators' time ({what})")
        by_note: dict[str, list[str]] = {}
        for t in timed:
            if t.phase == phase:
                for note in t.notes:
                    by_note.setdefault(note, []).append(t.name)
        for note, names in by_note.items():
            share = (sum(result[time_name(phase, name)] for name in names) / total
                     if total > 0 else float("nan"))
            warn(f"{phase}_time_kernels",
                 f"measured kernels: in {phase} {', '.join(names)} ({share:.1%} of the {phase} "
                 f"operators' time) {note}")
        _overlaps(result, timed, phase, warn)
        for t in timed:
            if t.phase != phase or t.how != "measured":
                continue
            name = time_name(phase, t.name)
            where = _outside(result, timed.expand(result.quantity(name).expression))
            if where:
                warn(name, f"measured kernels: {phase} {t.name} lies outside the measured grid "
                           f"({where})")
    if "capacity_time_kernels_measured" in result:
        shared = [result.quantity("capacity" + name[len("decode"):]).expression
                  for phase, name, _ in timed.shared if phase == "decode"]
        where = _outside(result, sympy.Add(
            result.quantity("capacity_time_kernels_measured").expression, *shared))
        if where:
            warn("capacity_step_time", "measured kernels: the decode step with the cache full "
                                       f"lies outside the measured grid ({where})")


def _scales_without_effect(scenario, warn, tables: str | None) -> None:
    """A stated ``activation_scales`` that no GEMM the tables time takes: SGLang's FP8 rows
    are read as measured; only per-tensor FP8 weights take a scale per tensor
    (block-scaled FP8 takes its scales per token group, on the fly).
    """
    stated = getattr(scenario.lever("quantization"), "activation_scales", None)
    engine = tables
    if stated is None or engine is None:
        return
    formats, activations, _kv = kernel_plan.formats_of(scenario)
    per_tensor = any(kernel_plan.gemm_dtype(f, activations) == "fp8" for f in formats.values())
    if not per_tensor:
        warn("decode_step_time", f"levers.quantization.activation_scales = {stated!r} has no "
                                 "effect: no weights are in per-tensor FP8 (block-scaled FP8 "
                                 "takes its scales per token group, on the fly)")
    elif engine not in kernel_plan.FP8_GEMM_SCALES:
        warn("decode_step_time", f"levers.quantization.activation_scales has no effect under "
                                 f"{engine}'s measured kernels: its FP8 GEMM rows are read as "
                                 "measured (its amax table times the amax at zero)")


def _kernel_choices_without_effect(scenario, warn) -> None:
    """Stated kernel choices that no MoE kernel takes: ``efficiency.moe_backend`` for a
    model without routed experts; ``efficiency.mxfp4_activations`` for one without MXFP4
    experts, or (MXFP8) on a card without FP4 tensor cores, where every engine widens the
    experts to 16 bits.
    """
    backend = scenario.value("efficiency.moe_backend")
    stated = scenario.value("efficiency.mxfp4_activations")
    if backend is None and stated is None:
        return
    routed = (scenario.value("model.experts") or 1) > 1
    if backend is not None and not routed:
        warn("decode_step_time", f"efficiency.moe_backend = {backend!r} has no effect: the "
                                 "model has no routed experts")
    if stated is None:
        return
    from .formats import NAMED_FORMATS
    from .kernel_dtypes import moe_dtype

    formats, _activations, _kv = kernel_plan.formats_of(scenario)
    experts = formats.get("experts", formats.get("linear", NAMED_FORMATS["bf16"]))
    if not routed or moe_dtype(experts) != kernel_plan.MXFP4_WEIGHT_ONLY:
        warn("decode_step_time", f"efficiency.mxfp4_activations = {stated!r} has no effect: "
                                 "the model has no MXFP4 experts")
    elif stated == "mxfp8" and scenario.value("hardware.flops_fp4") is None:
        warn("decode_step_time", "efficiency.mxfp4_activations = 'mxfp8' has no effect: the "
                                 "card has no FP4 tensor cores, so the MXFP4 experts are "
                                 "widened and multiplied with 16-bit activations "
                                 "(w4a16_mxfp4)")


def _outside(result, expression) -> str:
    """Why the table calls of an expression lie outside their measured grids ('' if none)."""
    outside: dict[str, list[str]] = {}
    for call in tabulated_calls(expression):
        known = {s: result[s.name] for s in call.free_symbols}
        try:
            values = [float(a.xreplace(known)) for a in call.args]
        except (TypeError, ValueError):
            continue
        # A table that keeps no grid (a share, a plugin's own function) says nothing.
        outside_of = getattr(table_of(call), "outside", None)
        far = outside_of(*values) if outside_of is not None else None
        if far:
            outside.setdefault(far, []).append(call.func.__name__)
    return "; ".join(f"{', '.join(dict.fromkeys(calls))}: {far}" for far, calls in outside.items())


def _overlaps(result, timed, phase: str, warn) -> None:
    """Say where kernels on a second stream are taken as hidden behind the first (the
    shared experts beside the routed ones), and what that saves at the scenario's batch.
    """
    step = "decode_step_time" if phase == "decode" else "prefill_time"
    found = ENGINES.get(result.scenario.value("efficiency.engine") or "")
    engine = found.label if found is not None else "the engine"
    for t in timed:
        if t.phase != phase:
            continue
        for streams in t.streams:
            when = streams.when
            known = {s: result[s.name] for s in getattr(when, "free_symbols", ())}
            if not bool(when.xreplace(known)):
                continue
            main, side = (_number(timed.expand(e), result)
                          for e in (streams.first, streams.second))
            saved = min(main, side)
            if not saved > 0:
                continue
            warn(time_name(phase, t.name),
                 f"measured kernels: in {phase} {t.name} the {streams.name} run on a second stream "
                 f"({side * 1e6:.4g} µs a step) beside the routed experts ({main * 1e6:.4g} µs), "
                 f"as {engine} does at this batch; taken as wholly "
                 f"hidden behind the longer, which saves {saved * 1e3:.4g} ms "
                 f"({saved / result[step]:.1%} of the {phase} step) against one after the "
                 "other" + ("; a serving iteration with a prompt in it is not replayed as a "
                            "CUDA graph and runs them one after the other"
                            if streams.graphs else "")
                 + ". Two streams that both fill the card (compute-bound, a large batch) "
                 "overlap less.")


def _number(expression, result) -> float:
    """An expression over the result's quantities, as a number."""
    known = {s: result[s.name] for s in expression.free_symbols}
    try:
        return float(expression.xreplace(known))
    except (TypeError, ValueError):
        return float("nan")


__all__ = ["ROOFLINE_LEVERS", "check"]
