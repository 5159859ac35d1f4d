"""Pictures of a scenario: roofline, throughput, memory, cost and any sweep.

matplotlib is imported only when a plot is drawn, and only its object-oriented
API is used (a :class:`~matplotlib.figure.Figure` saved through the Agg or SVG
canvas), so drawing never touches a global backend or opens a window. Files are
written atomically; the format follows the extension (``.png`` or ``.svg``). The
helpers every plot shares are :mod:`.figures`.

Kinds (``infermodel plot SCENARIO KIND``):

``roofline``
    Attainable compute against arithmetic intensity, with the prefill and decode
    operating points (one per sweep point when a sweep is given).
``throughput``
    Tokens per second per user and in total against the batch.
``memory``
    Weights, KV cache and reserve stacked against the batch or the context, with
    the cards' memory.
``cost``
    Cost per million output tokens against the number of users (the batch).
``sweep``
    Any quantities against a swept field, one line per combination of the other
    swept fields.

Points where the batch does not fit in memory are drawn hollow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InfermodelError, Problem, ScenarioError
from .figures import COLOURS, log_worthy, new_figure, save, unit_formatter

KINDS = ("roofline", "operators", "throughput", "memory", "cost", "sweep")
#: At most this many lines in one panel.
MAX_LINES = 24
#: The most points one plot draws (a sweep beyond this belongs in a CSV file).
MAX_PLOT_POINTS = 100_000
DEFAULT_BATCHES = "1..512 log2"
#: The axis a memory plot against the context sweeps (sets workload.sequence_length).
CONTEXT_AXIS = "context_length"

_STYLES = ["-", "--", ":", "-."]


# ---------------------------------------------------------------------------------
# Sweeps behind the plots
# ---------------------------------------------------------------------------------


def _sweep(scenario, over, quantities, *, default_axis: str | None = None,
           default_values: Any = None, host=None, use_table: bool = True, x: str | None = None):
    from ..sweeping import grid_axes, parse_over, plan_sweep

    over = dict(over if isinstance(over, Mapping) else parse_over(over or []))
    axes, _ = grid_axes(scenario, over, use_table=use_table, host=host)
    if default_axis is not None and not any(a.name == default_axis for a in axes):
        over[default_axis] = default_values
        axes, _ = grid_axes(scenario, over, use_table=use_table, host=host)
    _check_size(axes, x or default_axis)
    plan = plan_sweep(scenario, over, use_table=use_table, select=False, host=host)
    present = [q for q in quantities if q in plan.all_quantities]
    extra = [q for q in ("fits",) if q in plan.all_quantities and q not in present]
    plan.select(present + extra)
    return plan.run()


def _check_size(axes, x: str | None) -> None:
    """Refuse a plot with more lines or points than a figure can show, before the sweep
    behind it is planned or run.
    """
    points = math.prod(len(a) for a in axes)
    if points > MAX_PLOT_POINTS:
        raise ScenarioError(Problem(
            f"the plot would have {points:,} points, more than {MAX_PLOT_POINTS:,}",
            expected="fewer swept values",
            suggestion="narrow the sweep with --over, or write the points with "
                       "`infermodel sweep ... -o points.csv` and plot them elsewhere"))
    lines = math.prod(len(a) for a in axes if a.name != x and len(a) > 1)
    if any(a.name == x for a in axes) and lines > MAX_LINES:
        raise ScenarioError(Problem(
            f"the plot would have {lines:,} lines, more than {MAX_LINES}",
            expected="fewer values on the fields other than the x axis",
            suggestion="narrow the sweep with --over, or plot without the scenario's [sweep] "
                       "table (--no-table)"))


def _series(result, x: str):
    """Split a sweep into lines along axis ``x``: [(label, point indices in x order)]."""
    names = [a.name for a in result.axes]
    if x not in names:
        from ..errors import suggest

        raise ScenarioError(Problem(
            f"{x!r} is not a swept field of this plot",
            expected="one of " + (", ".join(names) or "(no swept fields)"),
            suggestion=(suggest(x, names) or "sweep it with --over")))
    shape = result.shape
    k = names.index(x)
    grid = np.arange(len(result)).reshape(shape)
    moved = np.moveaxis(grid, k, -1).reshape(-1, shape[k])
    others = [a for a in result.axes if a.name != x and len(a) > 1]
    lines = []
    for row in moved:
        labels = result.labels(int(row[0]))
        text = ", ".join(f"{a.name} = {_short(labels[a.name])}" for a in others)
        # Colour follows the first other field, the line style the rest.
        positions = [list(a.labels).index(labels[a.name]) for a in others]
        colour = positions[0] if positions else 0
        style = 0
        for a, p in zip(others[1:], positions[1:]):
            style = style * len(a) + p
        lines.append((text, row, colour, style))
    if len(lines) > MAX_LINES:
        raise ScenarioError(Problem(
            f"the plot would have {len(lines)} lines, more than {MAX_LINES}",
            expected="fewer values on the fields other than the x axis",
            suggestion="narrow the sweep with --over, or ignore the scenario's [sweep] with "
                       "--no-table"))
    return lines


def _short(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _x_values(result, x: str, rows: np.ndarray):
    axis = next(a for a in result.axes if a.name == x)
    if axis.numeric:
        return np.asarray(result[x][rows], dtype=float), None
    return np.arange(len(rows), dtype=float), [str(v) for v in result[x][rows]]


def _plot_lines(ax, result, x: str, y: str, lines, *, colours=None, label_prefix: str = ""):
    """One line per series; points that do not fit drawn hollow."""
    fits = result.columns.get("fits")
    categories = None
    for label, rows, colour_index, style_index in lines:
        palette = colours or COLOURS
        colour = palette[colour_index % len(palette)]
        style = _STYLES[style_index % len(_STYLES)]
        xs, categories = _x_values(result, x, rows)
        ys = np.where(result.defined(y)[rows], result[y][rows], np.nan).astype(float)
        text = (label_prefix + label).strip(", ") or None
        ax.plot(xs, ys, style, color=colour, linewidth=1.6, label=text)
        ok = np.ones(len(rows), bool) if fits is None else fits[rows].astype(bool)
        ax.plot(xs[ok], ys[ok], "o", color=colour, markersize=4)
        if (~ok).any():
            ax.plot(xs[~ok], ys[~ok], "o", markerfacecolor="white", markeredgecolor=colour,
                    markersize=5)
    if categories is not None:
        ax.set_xticks(np.arange(len(categories)), categories, rotation=30, ha="right")
    return categories


def _finish_x(ax, result, x: str, label: str | None = None):
    axis = next(a for a in result.axes if a.name == x)
    if axis.numeric:
        values = np.asarray(axis.labels, dtype=float)
        if log_worthy(values):
            ax.set_xscale("log", base=2 if _powers_of_two(values) else 10)
        spec = result.scenario.host.registries.field(x)
        unit = spec.unit if spec is not None and spec.kind == "quantity" else "1"
        ax.xaxis.set_major_formatter(unit_formatter(unit))
    ax.set_xlabel(label or x)


def _powers_of_two(values: np.ndarray) -> bool:
    logs = np.log2(values[values > 0])
    return bool(np.allclose(logs, np.round(logs)))


def _hollow_note(ax, result):
    if "fits" in result and not result["fits"].all():
        ax.text(0.99, 0.01, "hollow: does not fit in memory", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="#555555")


def _legend(ax, lines):
    if not any(line[0] for line in lines):
        return
    if len(lines) <= 5:
        ax.legend(fontsize=8, frameon=False)
    else:
        ax.figure.legend(*ax.get_legend_handles_labels(), loc="outside right upper", fontsize=7,
                         frameon=False)


# ---------------------------------------------------------------------------------
# The kinds
# ---------------------------------------------------------------------------------


def plot_sweep(scenario, over=None, *, x: str | None = None, y: Sequence[str] | None = None,
               title: str | None = None, host=None):
    """Quantities ``y`` against swept field ``x``, one line per other combination."""
    from ..sweeping import grid_axes

    axes, table_quantities = grid_axes(scenario, over, host=host)
    if not axes:
        raise ScenarioError(Problem("nothing to plot: the scenario has no [sweep] and no --over",
                                    expected="--over FIELD=VALUES, e.g. --over "
                                             "'workload.batch=1..256 log2'"))
    if x is None:
        numeric = [a.name for a in axes if a.numeric and len(a) > 1]
        x = numeric[0] if numeric else axes[0].name
    y = list(y or table_quantities or ["tokens_per_s_total"])
    result = _sweep(scenario, over, y, host=host, x=x)
    missing = [q for q in y if q not in result]
    if missing:
        from ..engine.graph import unknown_quantity

        raise unknown_quantity(missing[0], result.plan.all_quantities)
    lines = _series(result, x)
    figure, panels = new_figure(len(y))
    for ax, name in zip(panels, y):
        _plot_lines(ax, result, x, name, lines)
        unit = result.units[name]
        values = result[name].astype(float)
        if unit != "bool" and log_worthy(values):
            ax.set_yscale("log")
        ax.yaxis.set_major_formatter(unit_formatter(unit))
        ax.set_ylabel(name)
    _finish_x(panels[-1], result, x)
    _legend(panels[0], lines)
    _hollow_note(panels[-1], result)
    figure.suptitle(title or f"{scenario.name}: against {x}", fontsize=11)
    return figure


def plot_throughput(scenario, over=None, *, title: str | None = None, host=None,
                    use_table: bool = True):
    """Tokens per second per user and in total against the batch; the scenario's
    ``[sweep]`` (unless ``use_table`` is false) gives the batches and one line per value
    of its other fields.
    """
    names = ["tokens_per_s_per_user", "tokens_per_s_total"]
    result = _sweep(scenario, over, names, default_axis="workload.batch",
                    default_values=DEFAULT_BATCHES, host=host, use_table=use_table)
    lines = _series(result, "workload.batch")
    figure, panels = new_figure(2)
    for ax, name, label in zip(panels, names, ["per user", "all users together"]):
        _plot_lines(ax, result, "workload.batch", name, lines)
        ax.yaxis.set_major_formatter(unit_formatter("token/s"))
        ax.set_ylabel(f"tokens/s {label}")
    _finish_x(panels[-1], result, "workload.batch", "batch (sequences decoded together)")
    _legend(panels[0], lines)
    _hollow_note(panels[-1], result)
    figure.suptitle(title or f"{scenario.name}: decode speed against the batch", fontsize=11)
    return figure


def plot_cost(scenario, over=None, *, title: str | None = None, host=None,
              use_table: bool = True):
    """Cost per million output tokens against the number of users (the batch); the
    scenario's ``[sweep]`` (unless ``use_table`` is false) gives the batches and one line
    per value of its other fields.
    """
    result = _sweep(scenario, over, ["cost_per_million_output_tokens"],
                    default_axis="workload.batch", default_values=DEFAULT_BATCHES, host=host,
                    use_table=use_table)
    if "cost_per_million_output_tokens" not in result:
        raise ScenarioError(Problem(
            "the scenario has no cost: cost_per_million_output_tokens needs a price",
            file=str(scenario.path) if scenario.path else None, key="hardware.price_per_hour",
            expected="hardware.price_per_hour, e.g. 2.5 (USD per card-hour)"))
    lines = _series(result, "workload.batch")
    figure, panels = new_figure(1)
    ax = panels[0]
    _plot_lines(ax, result, "workload.batch", "cost_per_million_output_tokens", lines)
    values = result["cost_per_million_output_tokens"].astype(float)
    if log_worthy(values):
        ax.set_yscale("log")
    ax.yaxis.set_major_formatter(unit_formatter("USD"))
    ax.set_ylabel("cost per million output tokens")
    _finish_x(ax, result, "workload.batch", "users (sequences decoded together)")
    _legend(ax, lines)
    _hollow_note(ax, result)
    figure.suptitle(title or f"{scenario.name}: cost per million output tokens against users",
                    fontsize=11)
    return figure


def _crossing_range(scenario, limit: str, low: int, host=None) -> str:
    """A log2 range from ``low`` to at least twice the point where the memory runs out
    (``max_sequences`` or ``max_context`` plus one), so the plot shows the crossing.
    """
    from ..engine.evaluation import evaluate_afresh

    first_misfit = float(evaluate_afresh(scenario, host=host)[limit]) + 1
    high = max(8 * low, 2 * first_misfit)
    top = low * 2 ** max(3, math.ceil(math.log2(high / low)))
    return f"{low}..{int(min(top, low * 2**20))} log2"


def plot_memory(scenario, over=None, *, x: str | None = None, title: str | None = None, host=None):
    """Weights, cache and reserve stacked against the batch (or, with ``x="context"``,
    the context: ``workload.sequence_length``, and ``workload.context`` with it when the
    scenario sets one).
    """
    x = x or "workload.batch"
    context = x in ("context", CONTEXT_AXIS, "workload.context", "workload.sequence_length")
    over = dict(over or {})
    if context:
        x = CONTEXT_AXIS
        if not any(k in over for k in ("workload.sequence_length", "workload.context")):
            values = _crossing_range(scenario, "max_context", 1024, host)
        else:
            values = over.pop("workload.sequence_length", None) or over.pop("workload.context")
        from ..sweeping import expand_range, is_range

        numbers = expand_range(values, integer=True) if is_range(values) else list(values)
        both = scenario.value("workload.context") is not None
        over[CONTEXT_AXIS] = {str(n): ({"workload.sequence_length": n, "workload.context": n}
                                    if both else {"workload.sequence_length": n})
                           for n in numbers}
    names = ["weight_bytes", "kv_bytes_total", "memory_reserved", "memory_bytes"]
    result = _sweep(scenario, over, names,
                    default_axis=None if context else x,
                    default_values=None if context else _crossing_range(
                        scenario, "max_sequences", 1, host),
                    host=host, use_table=False)
    if len(result.axes) != 1:
        raise ScenarioError(Problem(
            "the memory plot takes one swept field",
            expected=f"only {x} swept (the scenario's [sweep] and --over give "
                     + ", ".join(a.name for a in result.axes) + ")"))
    axis = result.axes[0]
    rows = np.arange(len(result))
    if context:
        xs = np.asarray([float(v) for v in axis.labels])
    else:
        xs, _ = _x_values(result, axis.name, rows)
    layers = [("weights", "weight_bytes"), ("KV cache (full length)", "kv_bytes_total"),
              ("runtime reserve", "memory_reserved")]
    figure, panels = new_figure(1)
    ax = panels[0]
    stack = [np.asarray(result[name], dtype=float) for _, name in layers]
    ax.stackplot(xs, *stack, labels=[label for label, _ in layers],
                 colors=["#4c72b0", "#dd8452", "#8c8c8c"], alpha=0.85)
    ax.plot(xs, result["memory_bytes"], "k--", linewidth=1.4, label="memory of the cards")
    if log_worthy(xs):
        ax.set_xscale("log", base=2 if _powers_of_two(xs) else 10)
    ax.xaxis.set_major_formatter(unit_formatter("1"))
    ax.yaxis.set_major_formatter(unit_formatter("B"))
    ax.set_ylabel("memory")
    ax.set_xlabel("context (tokens per sequence at full length)" if context
                  else "batch (sequences decoded together)")
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    figure.suptitle(title or f"{scenario.name}: what fills the memory", fontsize=11)
    return figure


def _finish_roofline(ax, peak: float, lowest: float, ylabel: str) -> None:
    """Log axes of a roofline: attained FLOP/s from a third of the lowest point shown
    (``lowest``, the memory roof at the smallest intensity, or ``peak``) to 2.5× the peak.
    """
    from matplotlib.ticker import EngFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(min(peak, lowest) / 3, peak * 2.5)
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.yaxis.set_major_formatter(unit_formatter("FLOP/s"))
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8, frameon=False, loc="lower right")


def plot_roofline(scenario, over=None, *, title: str | None = None, host=None):
    """The roofline with the prefill and decode operating points."""
    from ..units import format_value

    names = ["flops_peak", "flops_effective_prefill", "flops_effective_decode", "bandwidth",
             "ridge_intensity", "decode_intensity", "decode_flops", "decode_step_time",
             "prefill_intensity", "prefill_flops", "prefill_time"]
    result = _sweep(scenario, over, names, host=host, use_table=False)
    peak = float(np.max(result["flops_peak"]))
    bandwidth = float(np.max(result["bandwidth"]))
    intensities = np.concatenate([result["decode_intensity"], result["prefill_intensity"],
                                  [peak / bandwidth]])
    low = max(min(intensities.min() / 4, 1.0), 1e-3)
    high = intensities.max() * 4
    grid = np.geomspace(low, high, 400)
    figure, panels = new_figure(1, height=5.0)
    ax = panels[0]
    ax.set_xlim(low, high * 3)
    ax.plot(grid, np.minimum(peak, grid * bandwidth), color="black", linewidth=2,
            label="roof: min(peak, intensity × bandwidth)")
    roofs = [("prefill", float(result["flops_effective_prefill"][0]), "#d62728"),
             ("decode", float(result["flops_effective_decode"][0]), "#1f77b4")]
    for name, level, colour in roofs:
        if level < peak * (1 - 1e-9):
            ax.plot(grid, np.minimum(level, grid * bandwidth), "--", color=colour, linewidth=1,
                    label=f"{name} compute reached ({level / peak:.0%} of peak)")
    ridge = peak / bandwidth
    ax.axvline(ridge, color="#777777", linestyle=":", linewidth=1)
    ax.text(ridge * 1.1, peak / 12, f"ridge {ridge:,.0f} FLOP/B", rotation=90, va="top",
            fontsize=8, color="#555555")
    points = [("decode", "decode_intensity", "decode_flops", "decode_step_time", "#1f77b4", "o"),
              ("prefill", "prefill_intensity", "prefill_flops", "prefill_time", "#d62728", "s")]
    batch_axis = next((a for a in result.axes if a.name == "workload.batch"), None)
    for name, i_name, f_name, t_name, colour, marker in points:
        xs = np.asarray(result[i_name], dtype=float)
        ys = np.asarray(result[f_name], dtype=float) / np.asarray(result[t_name], dtype=float)
        if len(xs) > 1:
            ax.plot(xs, ys, "-", color=colour, alpha=0.5, linewidth=1)
        ax.plot(xs, ys, marker, color=colour, markersize=6, label=f"{name} operating point"
                + ("s" if len(xs) > 1 else ""))
        if len(xs) == 1 or batch_axis is not None:
            ends = [0, len(xs) - 1] if len(xs) > 1 else [0]
            for k in ends:
                text = f"{name}: {format_value(xs[k], 'FLOP/B', digits=3)}"
                if batch_axis is not None:
                    text += f", batch {_short(result['workload.batch'][k])}"
                last = k == ends[-1] and len(ends) > 1
                if name == "prefill":
                    offset, align = ((-4, 9), "right") if last else ((4, -15), "left")
                else:
                    offset, align = (9, -4), "left"
                ax.annotate(text, (xs[k], ys[k]), textcoords="offset points", xytext=offset,
                            ha=align, fontsize=8, color=colour)
    _finish_roofline(ax, peak, low * bandwidth, "attained compute")
    figure.suptitle(title or f"{scenario.name}: roofline", fontsize=11)
    return figure


def plot_operators(scenario, over=None, *, title: str | None = None, host=None):
    """Every operator of one prefill pass and one decode step on the roofline: its
    intensity across, the compute it attains (FLOPs over its own time) up; marker area
    grows with its share of the phase's time. Operators timed by a link (an all-reduce)
    have no place on the card's roofline and are listed in the legend only.
    """
    from ..engine.evaluation import evaluate_afresh
    from ..engine.operators import PHASE_RATE, operator_table

    if over:
        raise InfermodelError(Problem("the operators plot shows one scenario",
                                      expected="no --over (use --set to change a field)"))
    result = evaluate_afresh(scenario, host=host)
    peak = float(result["flops_peak"])
    bandwidth = float(result["bandwidth"])
    phases = [("decode", "#1f77b4", "o"), ("prefill", "#d62728", "s")]
    tables = {phase: operator_table(result, phase, host=host) for phase, _, _ in phases}
    placed = [r for rows in tables.values() for r in rows
              if r.bound != "own" and r.flops > 0 and r.bytes > 0]
    intensities = [r.intensity for r in placed] + [peak / bandwidth]
    low = max(min(min(intensities) / 4, 1.0), 1e-3)
    high = max(intensities) * 4
    grid = np.geomspace(low, high, 400)
    figure, panels = new_figure(1, height=5.4)
    ax = panels[0]
    ax.plot(grid, np.minimum(peak, grid * bandwidth), color="black", linewidth=2,
            label="roof: min(peak, intensity × bandwidth)")
    ridge = peak / bandwidth
    ax.axvline(ridge, color="#777777", linestyle=":", linewidth=1)
    ax.text(ridge * 1.1, peak / 12, f"ridge {ridge:,.0f} FLOP/B", rotation=90, va="top",
            fontsize=8, color="#555555")
    for phase, colour, marker in phases:
        level = float(result[PHASE_RATE[phase]])
        if level < peak * (1 - 1e-9):
            ax.plot(grid, np.minimum(level, grid * bandwidth), "--", color=colour, linewidth=1,
                    label=f"{phase} compute reached ({level / peak:.0%} of peak)")
        rows = [r for r in tables[phase] if r.bound != "own" and r.flops > 0 and r.bytes > 0]
        xs = np.asarray([r.intensity for r in rows])
        ys = np.asarray([r.flops / r.time for r in rows])
        sizes = np.asarray([20 + 400 * r.share for r in rows])
        ax.scatter(xs, ys, s=sizes, marker=marker, color=colour, alpha=0.7, edgecolors="white",
                   label=f"{phase} operators (area: share of time)")
        # Operators at the same point (the projections of a step share one intensity)
        # get one label listing them all.
        groups: dict[tuple[float, float], list[str]] = {}
        for r, x, y in zip(rows, xs, ys):
            groups.setdefault((round(float(np.log10(x)), 1), round(float(np.log10(y)), 1)),
                              []).append(r.name)
        offset = (6, 4) if phase == "decode" else (6, -11)
        for k, ((lx, ly), names) in enumerate(groups.items()):
            ax.annotate(", ".join(names), (10**lx, 10**ly), textcoords="offset points",
                        xytext=(offset[0] if lx < 3 else -offset[0],
                                offset[1] - (10 * (k % 2) if phase == "prefill" else 0)),
                        fontsize=7, color=colour, ha="left" if lx < 3 else "right")
        for r in tables[phase]:
            if r.bound == "own":
                ax.plot([], [], " ", label=f"{phase} {r.name}: {r.time * 1e3:.3g} ms over the link")
    _finish_roofline(ax, peak, low * bandwidth, "attained compute (FLOPs / operator time)")
    ax.set_xlim(low, high * 3)
    figure.suptitle(title or f"{scenario.name}: operators on the roofline", fontsize=11)
    return figure


def plot(scenario, kind: str, *, over: Mapping[str, Any] | Sequence[str] | None = None,
         x: str | None = None, y: Sequence[str] | None = None, output: str | Path | None = None,
         title: str | None = None, host=None, use_table: bool = True):
    """Draw plot ``kind`` of ``scenario`` (a Scenario or path); save it if ``output`` is given.
    ``use_table`` false ignores the scenario's ``[sweep]`` (throughput and cost).

    Returns the :class:`matplotlib.figure.Figure`.

    >>> plot("scenarios/inference-lab-roofline.toml", "roofline", output="roofline.svg")  # doctest: +SKIP
    """
    from ..scenario import Scenario, load_scenario
    from ..sweeping import parse_over

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(Path(scenario), host=host)
    if over is not None and not isinstance(over, Mapping):
        over = parse_over(over)
    if kind not in KINDS:
        from ..errors import suggest

        raise InfermodelError(Problem(f"no plot named {kind!r}", expected="one of " + ", ".join(KINDS),
                                      suggestion=suggest(str(kind), KINDS)))
    if kind == "sweep":
        figure = plot_sweep(scenario, over, x=x, y=y, title=title, host=host)
    elif kind == "memory":
        figure = plot_memory(scenario, over, x=x, title=title, host=host)
    elif kind == "throughput":
        figure = plot_throughput(scenario, over, title=title, host=host, use_table=use_table)
    elif kind == "cost":
        figure = plot_cost(scenario, over, title=title, host=host, use_table=use_table)
    elif kind == "operators":
        figure = plot_operators(scenario, over, title=title, host=host)
    else:
        figure = plot_roofline(scenario, over, title=title, host=host)
    if output is not None:
        save(figure, output)
    return figure


__all__ = [
    "KINDS",
    "plot",
    "plot_cost",
    "plot_memory",
    "plot_operators",
    "plot_roofline",
    "plot_sweep",
    "plot_throughput",
    "save",
]
