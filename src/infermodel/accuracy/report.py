"""Accuracy reports (:mod:`.predictions`, :mod:`.fits`): the per-row table, the per-metric summary,
the fit's side-by-side table and the measured-against-predicted plot.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .fits import Fit
from .ledger import METRICS, split_preset
from .results import Prediction, Validation, summarise

__all__ = ["GROUPINGS", "fit_table", "grouped_summary", "grouped_table", "plot_validation",
           "summary_table", "unpredictable_listing", "validation_table"]


# ---------------------------------------------------------------------------------
# Text reports
# ---------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def validation_table(result: Validation, *, heading: str, rows: bool = True) -> str:
    """Every row's measured and predicted figure (with ``rows``), the per-metric summary,
    and the rows that could not be predicted with their reasons.
    """
    lines = [heading, ""]
    if rows:
        width = max([len(p.row.id) for p in result.points] + [2])
        lines.append(f"{'id'.ljust(width)}  {'metric':<20} {'measured':>10} {'predicted':>10} "
                     f"{'error':>8}  interval")
        for p in result.predicted:
            band = f"{_num(p.interval[0])} … {_num(p.interval[1])}" if p.interval else ""
            lines.append(f"{p.row.id.ljust(width)}  {p.row.metric:<20} {_num(p.row.value):>10} "
                         f"{_num(p.predicted):>10} {_pct(p.error):>8}  {band}")
        lines.append("")
    lines.append(summary_table(result.summary()))
    coverage = result.coverage()
    if coverage is not None:
        lines.append(f"80 % intervals: {coverage['covered']:.0%} of {coverage['n']} measurements "
                     "inside (in sample: the preset's own rows)")
    if result.unpredictable:
        lines += ["", unpredictable_listing(result, each=rows)]
    return "\n".join(lines)


def unpredictable_listing(result: Validation, *, each: bool = True) -> str:
    """The rows that could not be predicted with the reason: one line each, or (``each``
    False) one paragraph per reason naming its rows.
    """
    missing = result.unpredictable
    lines = [f"{len(missing)} rows could not be predicted:"]
    if each:
        lines += [f"  {p.row.id} ({p.row.metric}): {p.reason}" for p in missing]
        return "\n".join(lines)
    by_reason: dict[str, list[str]] = {}
    for p in missing:
        by_reason.setdefault(p.reason or "no reason recorded", []).append(p.row.id)
    for reason, ids in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
        lines += ["", f"  {len(ids)} rows: {reason}"]
        lines += textwrap.wrap(", ".join(ids), width=100, initial_indent="    ",
                               subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines)


def _group_all(point: Prediction) -> str:
    return "all"


def _coverage(point: Prediction) -> str:
    share = point.measured_share
    if share is None:
        return ""
    return "≥ 90 % measured" if share >= 0.9 else "< 90 % measured"


#: How the grouped summaries split the predictions: a heading and a prediction's group in
#: it (empty: not in that grouping). ``kernels`` splits measured-kernel predictions by the
#: share of the decode step the tables time.
GROUPINGS: tuple[tuple[str, Callable[[Prediction], str]], ...] = (
    ("all", _group_all),
    ("model", lambda p: p.row.model_name),
    ("system", lambda p: p.row.hardware),
    ("engine", lambda p: p.row.family),
    ("mode", lambda p: p.row.mode),
    ("kernels", _coverage),
)


def grouped_summary(validation: Validation) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """Median and p90 |error| per metric for each group of each grouping (see
    :data:`GROUPINGS`): ``{grouping: {group: {metric: summary}}}``.
    """
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for heading, group_of in GROUPINGS:
        members: dict[str, list] = {}
        for p in validation.predicted:
            group = group_of(p)
            if group:
                members.setdefault(group, []).append(p)
        if members:
            out[heading] = {group: summarise(points) for group, points in sorted(members.items())}
    return out


def grouped_table(panels: Sequence[tuple[str, Validation]]) -> str:
    """Median and 90th-percentile |error| per metric, overall and per model, system,
    engine and mode, one column block per prediction (``panels``: title, validation).
    """
    summaries = [(title, grouped_summary(v)) for title, v in panels]
    metrics = sorted({m for _, v in panels for m in v.summary()})
    cell = 15
    block = 6 + cell * len(metrics)
    groups_of = {h: list(dict.fromkeys(g for _, summary in summaries for g in summary.get(h, {})))
                 for h, _ in GROUPINGS}
    labels = [f"{h} {g}" if h != "all" else "all" for h, groups in groups_of.items()
              for g in groups]
    width = max([len(label) for label in labels] + [10])
    head1 = " " * width + "".join(f" {title[:block - 1]:^{block - 1}}" for title, _ in summaries)
    head2 = f"{'group':<{width}}" + "".join(
        f" {'n':>5}" + "".join(f"{m.removesuffix('_ms') + ' med/p90':>{cell}}" for m in metrics)
        for _ in summaries)
    lines = ["Median and 90th-percentile |error| (predicted − measured) / measured; n: rows "
             "predicted", "", head1, head2]
    for heading, groups in groups_of.items():
        if not groups:
            continue
        if heading != "all":
            lines.append("")
        for group in groups:
            label = "all" if heading == "all" else f"{heading} {group}"
            text = f"{label:<{width}}"
            for _, summary in summaries:
                by_metric = summary.get(heading, {}).get(group, {})
                n = sum(s["n"] for s in by_metric.values())
                text += f" {n:>5}"
                for metric in metrics:
                    s = by_metric.get(metric)
                    text += (f"{s['median_abs_error']:>{cell - 7}.0%}/{s['p90_abs_error']:<5.0%} "
                             if s else f"{'—':>{cell}}")
            lines.append(text.rstrip())
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
    if any(split_preset(name)[1] for name in result.points):
        lines += ["", "Each preset on its own rows (a card's refinement beside its family's fit):",
                  "", f"{'preset':<{width}} {head}"]
        for name, (inside, held) in sorted(result.points.items()):
            lines += _side_by_side(name, inside, held, width)
    coverage = result.coverage()
    if coverage:
        lines += ["", "80 % intervals built without each row's source, share of held-out rows "
                      "inside: " + " · ".join(f"{k} {v['covered']:.0%} of {v['n']}"
                                              for k, v in coverage.items())]
        widths = result.widths()
        lines += ["Their width (high / low), median and p90, and share inside, by metric kind: "
                  + " · ".join(f"{k} ×{v['median_ratio']:.1f} (p90 ×{v['p90_ratio']:.1f}, "
                               f"{v['covered']:.0%} of {v['n']})" for k, v in widths.items())
                  + f"; the two-level intervals carry a scale of {result.interval_scale:.2f}"]
    missing = result.in_sample.unpredictable
    if missing:
        lines += ["", f"{len(missing)} rows could not be predicted:"]
        lines += [f"  {p.row.id} ({p.row.metric}): {p.reason}" for p in missing]
    return "\n".join(lines)


def plot_validation(panels: Sequence[tuple[str, Validation]]):
    """Measured against predicted, one panel per prediction (log-log, one colour per
    metric), with the diagonal and a ±25 % band; returns a matplotlib figure. On a
    ledger of thousands of points the markers shrink and turn translucent, so that where
    most points lie shows through.
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
            dense = len(points) > 500
            ax.scatter([p.row.value for p in chosen], [p.predicted for p in chosen],
                       s=5 if dense else 16, linewidths=0, color=colours[metric],
                       alpha=0.3 if dense else 0.85,
                       label=f"{metric} (median |error| {summary['median_abs_error']:.0%})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_xlabel("measured (published; ms, or tokens/s)")
        ax.set_ylabel("predicted (same unit)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.35)
        legend = ax.legend(fontsize=7, loc="upper left", markerscale=2.0)
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            if text.get_text() != "±25 %":
                handle.set_alpha(0.85)
    return figure
