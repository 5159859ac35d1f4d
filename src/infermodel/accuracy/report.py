"""Accuracy reports (:mod:`.predictions`, :mod:`.fits`): the per-row table, the per-metric summary,
the fit's side-by-side table and the measured-against-predicted plot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .fits import Fit
from .ledger import METRICS
from .predictions import Validation, summarise

__all__ = ["fit_table", "plot_validation", "summary_table", "validation_table"]


# ---------------------------------------------------------------------------------
# Text reports
# ---------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def validation_table(result: Validation, *, heading: str) -> str:
    """Every row's measured and predicted figure, the per-metric summary, and the rows
    that could not be predicted with their reasons.
    """
    lines = [heading, ""]
    width = max([len(p.row.id) for p in result.points] + [2])
    lines.append(f"{'id'.ljust(width)}  {'metric':<20} {'measured':>10} {'predicted':>10} "
                 f"{'error':>8}  interval")
    for p in result.predicted:
        band = f"{_num(p.interval[0])} … {_num(p.interval[1])}" if p.interval else ""
        lines.append(f"{p.row.id.ljust(width)}  {p.row.metric:<20} {_num(p.row.value):>10} "
                     f"{_num(p.predicted):>10} {_pct(p.error):>8}  {band}")
    lines += ["", summary_table(result.summary())]
    coverage = result.coverage()
    if coverage is not None:
        lines.append(f"80 % intervals: {coverage['covered']:.0%} of {coverage['n']} measurements "
                     "inside (in sample: the preset's own rows)")
    if result.unpredictable:
        lines += ["", f"{len(result.unpredictable)} rows could not be predicted:"]
        lines += [f"  {p.row.id} ({p.row.metric}): {p.reason}" for p in result.unpredictable]
    return "\n".join(lines)


def summary_table(summary: Mapping[str, Mapping[str, float]]) -> str:
    lines = [f"{'metric':<20} {'n':>4} {'median |error|':>15} {'p90 |error|':>12}"]
    for metric, s in summary.items():
        lines.append(f"{metric:<20} {s['n']:>4} {s['median_abs_error']:>15.1%} "
                     f"{s['p90_abs_error']:>12.1%}")
    return "\n".join(lines)


def _side_by_side(label: str, inside_points, held_points, width: int) -> list[str]:
    inside = summarise(p for p in inside_points if p.predicted is not None)
    held = summarise(p for p in held_points if p.predicted is not None)
    lines = []
    for metric, a in inside.items():
        b = held.get(metric)
        lines.append(f"{label:<{width}} {metric:<28} {a['n']:>4} {a['median_abs_error']:>17.1%} "
                     f"{a['p90_abs_error']:>7.1%} "
                     f"{(b['median_abs_error'] if b else float('nan')):>16.1%} "
                     f"{(b['p90_abs_error'] if b else float('nan')):>7.1%}")
    return lines


def _parameter_lines(result: Fit, width: int) -> list[str]:
    names = sorted({n for e in result.efficiencies.values() for n, _ in e.values})
    lines = [f"{'preset':<{width}} {'rows':>5} {'sources':>7}  " + "  ".join(
        f"{n:>{max(len(n), 9)}}" for n in names)]
    for preset, efficiency in sorted(result.efficiencies.items()):
        values = efficiency.as_dict()
        cells = []
        for n in names:
            v = values.get(n, float("nan"))
            text = (f"{v * 1e6:.3g} µs" if v < 1e-3 else f"{v * 1e3:.3g} ms") if (
                n.endswith(("_time", "_overhead", "_latency"))) else f"{v:.3g}"
            report = result.parameters.get(preset, {}).get(n)
            if report is not None and not report.fitted:
                text += "*"
            cells.append(f"{text:>{max(len(n), 9)}}")
        lines.append(f"{preset:<{width}} {len(result.used[preset]):>5} "
                     f"{len(result.sources.get(preset, ())):>7}  " + "  ".join(cells))
    lines.append("* no row rests on it: its prior (or, in a card's refinement, its engine's value)")
    return lines


def fit_table(result: Fit) -> str:
    """Fitted parameters, then in-sample and held-out errors side by side: per engine
    family as ``validate --calibrated`` predicts (each row with its card's refinement
    where there is one), then each preset on its own rows, and the intervals' coverage.
    """
    width = max([len(name) for name in result.efficiencies] + [8])
    lines = ["Physical-model parameters fitted per engine family, inside their bounds "
             "(cross-validation leaves one source out):", ""]
    lines += _parameter_lines(result, width)
    head = (f"{'metric':<28} {'n':>4} {'in-sample median':>17} {'p90':>7} "
            f"{'held-out median':>16} {'p90':>7}")
    lines += ["", f"{'family':<{width}} {head}"]
    families = sorted({p.row.family for p in result.in_sample.predicted})
    for label, only in [("all", None), *[(f, f) for f in families]]:
        lines += _side_by_side(
            label, [p for p in result.in_sample.points if only in (None, p.row.family)],
            [p for p in result.held_out.points if only in (None, p.row.family)], width)
    if any("-" in name for name in result.points):
        lines += ["", "Each preset on its own rows (a card's refinement beside its family's fit):",
                  "", f"{'preset':<{width}} {head}"]
        for name, (inside, held) in sorted(result.points.items()):
            lines += _side_by_side(name, inside, held, width)
    coverage = result.coverage()
    if coverage:
        lines += ["", "80 % intervals built without each row's source, share of held-out rows "
                      "inside: " + " · ".join(f"{k} {v['covered']:.0%} of {v['n']}"
                                              for k, v in coverage.items())]
    missing = result.in_sample.unpredictable
    if missing:
        lines += ["", f"{len(missing)} rows could not be predicted:"]
        lines += [f"  {p.row.id} ({p.row.metric}): {p.reason}" for p in missing]
    return "\n".join(lines)


def plot_validation(panels: Sequence[tuple[str, Validation]]):
    """Measured against predicted, one panel per prediction (log-log, one colour per
    metric), with the diagonal and a ±25 % band; returns a matplotlib figure.
    """
    from ..analyses.figures import COLOURS, load_matplotlib

    _, Figure = load_matplotlib()
    figure = Figure(figsize=(5.0 * len(panels), 4.8), dpi=110, layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    colours = dict(zip(METRICS, COLOURS))
    for ax, (title, validation) in zip(axes, panels):
        points = validation.predicted
        values = [v for p in points for v in (p.row.value, p.predicted) if v is not None]
        low, high = min(values) / 2, max(values) * 2
        line = np.array([low, high])
        ax.fill_between(line, line * 0.75, line * 1.25, color="#999999", alpha=0.2,
                        label="±25 %")
        ax.plot(line, line, color="#555555", linewidth=1)
        for metric in METRICS:
            chosen = [p for p in points if p.row.metric == metric]
            if not chosen:
                continue
            summary = summarise(chosen)[metric]
            ax.scatter([p.row.value for p in chosen], [p.predicted for p in chosen], s=16,
                       color=colours[metric], alpha=0.85,
                       label=f"{metric} (median |error| {summary['median_abs_error']:.0%})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_xlabel("measured (published)")
        ax.set_ylabel("predicted")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.35)
        ax.legend(fontsize=7, loc="upper left")
    return figure
