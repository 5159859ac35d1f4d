"""The efficiency preset files a fit writes (:func:`preset_toml`) and what
``infermodel presets efficiency`` reads back from them (:func:`describe_preset`).

A preset holds the engine's parameters of the physical efficiency model in its
``[efficiency]`` table (with ``engine``, so its scheduler and memory defaults come too),
and in ``[preset]`` everything a reader needs to trust them: the sources and rows it rests
on, each parameter's value with its bound, its value in every held-out fit and the rows
and sources it rests on, the held-out errors per metric, the domain of its rows and the
interval groups of its held-out errors (``infermodel.engine.intervals``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..engine import intervals
from ..units import parse_quantity
from .fits import Fit
from .ledger import ENGINE_OF_FAMILY, split_preset
from .results import summarise

__all__ = ["ENGINE_NAMES", "describe_preset", "preset_toml"]

ENGINE_NAMES = {"vllm": "vLLM", "vllm-v0": "vLLM V0 (before 0.8)", "sglang": "SGLang",
                "trtllm": "TensorRT-LLM"}
#: Parameters written with a time unit.
TIMES = ("kernel_time", "launch_time", "step_overhead", "sequence_overhead", "collective_latency")


def _time(value: float) -> str:
    if value >= 1e-3:
        return f"{value * 1e3:.4g} ms"
    return f"{value * 1e6:.4g} us"


def _value(name: str, value: float, bound: tuple[float, float] | None = None) -> str:
    """The value as the preset writes it: a time with its unit, else four digits; where
    that rounding would read back outside the parameter's bound (a value fitted at its
    bound: 40 µs written "40 us" reads as 4e-05 s, one rounding above 40 × 1e-6), the
    value itself, exactly, in seconds.
    """
    text = f'"{_time(value)}"' if name in TIMES else f"{value:.4g}"
    if bound is not None:
        read = parse_quantity(text.strip('"'), "s") if name in TIMES else float(text)
        if not bound[0] <= read <= bound[1]:
            return repr(min(max(value, bound[0]), bound[1]))
    return text


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _list(items) -> str:
    return "[" + ", ".join(_string(str(i)) if isinstance(i, str) else f"{i:g}" for i in items) + "]"


def preset_toml(name: str, result: Fit, ledger: str) -> str:
    """The efficiency preset file ``name`` (a family, or a family on one card) that a fit
    determines.
    """
    values = result.efficiencies[name].as_dict()
    ids = result.used[name]
    family, card = split_preset(name)
    inside_points, held_points = result.points[name]
    held = summarise(p for p in held_points if p.predicted is not None)
    inside = summarise(p for p in inside_points if p.predicted is not None)
    served = ENGINE_NAMES[family] + (f" on {card} cards" if card else "")
    sources = result.sources.get(name, ())
    lines = [
        f'# Efficiency preset "{name}": the physical efficiency model\'s parameters for '
        f"{served}.",
        "# Written by `infermodel validate --ledger LEDGER --fit --presets-dir DIR` from the",
        f"# {ledger}: inside their physical bounds (the [efficiency] fields' ranges), the values",
        f"# below minimise the mean |log(predicted / measured)| over the {len(ids)} rows listed in",
        "# [preset] rows (each metric weighted equally), pulled toward the pooled fit of every",
        "# engine. Cross-validation leaves one source out. Errors, |predicted − measured| / measured:",
    ]
    for metric in sorted(inside):
        a, b = inside[metric], held.get(metric)
        held_text = (f"held-out median {b['median_abs_error']:.1%}, p90 {b['p90_abs_error']:.1%}"
                     if b else "no held-out estimate")
        lines.append(f"#   {metric}: n = {a['n']}, in-sample median {a['median_abs_error']:.1%}, "
                     f"p90 {a['p90_abs_error']:.1%}; {held_text}")
    lines += [
        "# `infermodel presets efficiency` shows each value with its bound, its held-out",
        "# values and the rows it rests on. Any field a scenario writes overrides the value here.",
        "",
        "[preset]",
        (f"description = {_string(f'{served}: physical-model parameters fitted on the accuracy ledger (a refinement of the {family} preset)')}"
         if card else
         f"description = {_string(f'{served}: physical-model parameters fitted on the accuracy ledger')}"),
        f"source = {_string(f'infermodel accuracy ledger ({len(ids)} published measurements from {len(sources)} independent source(s)), cross-validated leaving one source out')}",
        f"sources = {_list(sources)}",
        f"urls = {_list(result.urls.get(name, ()))}",
        "rows = [",
        *[f"    {_string(i)}," for i in ids],
        "]",
        "",
        "# Held-out errors per metric (each source predicted by fits on the others).",
        "[preset.held_out]",
        *[f"{m} = {{ n = {s['n']}, median = {s['median_abs_error']:.4f}, p90 = {s['p90_abs_error']:.4f} }}"
          for m, s in sorted(held.items())],
        "",
        "# What its rows cover: a scenario outside it gets a warning with the size of the doubt.",
        "[preset.domain]",
    ]
    for key, value in result.domains.get(name, {}).items():
        lines.append(f"{key} = {_list(value)}")
    for parameter, report in result.parameters.get(name, {}).items():
        lines += ["", f"[preset.parameters.{parameter}]",
                  f"value = {report.value:.6g}",
                  f"bound = [{report.low:.6g}, {report.high:.6g}]",
                  f"fitted = {'true' if report.fitted else 'false'}",
                  f"held_out = [{', '.join(f'{v:.6g}' for v in report.folds)}]",
                  f"rows = {len(report.rows)}",
                  f"sources = {_list(report.sources)}"]
    lines += ["", "# 80 % intervals of log(predicted / measured) for a source the fit has not seen, by",
              "# group of held-out rows (each from at least four independent sources; the group of",
              "# every row of a kind from two): the 10th and 90th percentiles of a source effect plus",
              "# a within-source deviation, widened about their median by "
              f"{result.interval_scale:.3f}, the scale at which",
              "# 80 % of each left-out source's rows fell inside (infermodel.engine.intervals).",
              "# A measurement is expected within predicted · exp(−high) … predicted · exp(−low)."]
    for entry in result.groups.get(name, ()):
        table = entry.to_table()
        lines += ["", "[[preset.interval]]"]
        lines += [f"{k} = {_string(v) if isinstance(v, str) else v}" for k, v in table.items()]
    lines += ["", "[efficiency]", f"engine = {_string(ENGINE_OF_FAMILY[family])}",
              'model = "physical"']
    reports = result.parameters.get(name, {})
    lines += [f"{n} = {_value(n, v, (reports[n].low, reports[n].high) if n in reports else None)}"
              for n, v in values.items()]
    return "\n".join(lines) + "\n"


def _show(name: str, value: float) -> str:
    if name in TIMES:
        return "0" if value == 0 else _time(value).replace("us", "µs")
    return f"{value:.3g}"


def _span(name: str, values) -> str:
    if not values:
        return "—"
    low, high = _show(name, min(values)), _show(name, max(values))
    return low if low == high else f"{low}–{high}"


def describe_preset(name: str, data: Mapping[str, Any]) -> list[str]:
    """Lines for ``infermodel presets efficiency``: each parameter with its bound, its
    held-out values and the rows and sources it rests on; the held-out errors; the
    sources. ``data`` is the preset file's tables.
    """
    meta = data.get("preset", {})
    lines = []
    parameters = meta.get("parameters", {})
    efficiency = data.get("efficiency", {})
    if parameters:
        lines.append("parameters (value · bound · held-out fits · rows it rests on):")
        width = max(len(p) for p in parameters)
        for parameter, report in parameters.items():
            value = report.get("value", math.nan)
            low, high = report.get("bound", [math.nan, math.nan])
            fitted = report.get("fitted", False)
            rests = (f"{report.get('rows', 0)} rows from {', '.join(report.get('sources', []))}"
                     if fitted else "no row moves it: its prior")
            lines.append(f"  {parameter.ljust(width)}  {_show(parameter, value):>9}  "
                         f"[{_show(parameter, low)}, {_show(parameter, high)}]  "
                         f"held out {_span(parameter, report.get('held_out', []))}  {rests}")
    elif efficiency:
        lines.append("values: " + " · ".join(f"{k} {v}" for k, v in efficiency.items()))
    held = meta.get("held_out", {})
    if held:
        lines.append("held-out |error| (source left out): " + " · ".join(
            f"{m} median {v['median']:.0%}, p90 {v['p90']:.0%} (n {v['n']})"
            for m, v in held.items() if isinstance(v, Mapping)))
    groups = intervals.entries_of(meta.get("interval", []))
    if groups:
        counted = [g.sources for g in groups if g.sources is not None]
        least = f"; each from {min(counted)} or more independent sources" if counted else ""
        lines.append(f"interval groups: {len(groups)} (by engine, dense or MoE, concurrency "
                     f"band, card generation{least})")
    domain = meta.get("domain", {})
    if domain:
        lines.append("fitted on: " + "; ".join(
            f"{k} {'–'.join(str(v) for v in values)}" if k in ("concurrency", "tensor")
            else f"{k} {', '.join(str(v) for v in values)}" for k, values in domain.items()))
    sources = meta.get("sources", [])
    if sources:
        lines.append("sources: " + ", ".join(sources))
    for url in meta.get("urls", []):
        lines.append(f"  {url}")
    return lines
