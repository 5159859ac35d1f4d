"""The plan's picture: output tokens/s per GPU against tokens/s per user, across layouts.

Each layout's curve (colour: the card, line style: the layout) is its analytic steady
state (:func:`~.analytic.steady`) as the load per replica rises: more users per replica
raise what each GPU produces and lower what each user sees.  The curve is drawn solid
where the mean field carries that load within the objectives (:func:`~.analytic.carries`:
prefill stalls rare enough for the ITL percentile, prompts within TTFT) and faint where
it does not; the thick grey line is the Pareto front of the solid parts, over every
layout.  The markers are the simulated deployments (filled: objectives met, hollow:
missed), the shaded band the per-user speed the ITL objective asks for (1 / ITL), and
the star the chosen deployment.  Below, a table gives the cheapest feasible deployment
of each card.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .analytic import carries, mean_lengths, steady


def curve(finalist, points: int = 48) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(tokens/s per user, output tokens/s per GPU, within the objectives)`` of one
    replica of ``finalist`` as its load rises to the most its iteration carries (empty
    for a disaggregated unit, whose pools the mean field does not follow).
    """
    if finalist.prefill:
        return np.array([]), np.array([]), np.array([], dtype=bool)
    prompt, output = mean_lengths(finalist.workload)
    policy = finalist.policy
    budget = policy.chunk_tokens if policy.kind == "chunked" else 10**9
    top, low = 1e-3, 0.0
    while steady(finalist.cost_model, top, prompt, output, budget) is not None and top < 1e6:
        low, top = top, top * 2
    users, per_gpu, within = [], [], []
    for rate in np.geomspace(max(low, 1e-3) / 200, max(low, 1e-3), points):
        found = steady(finalist.cost_model, float(rate), prompt, output, budget)
        if found is None or found.decodes * (prompt + output / 2) > finalist.cost_model.cache_tokens():
            continue
        users.append(1 / found.mean)
        per_gpu.append(rate * output / finalist.gpus_per_replica)
        within.append(carries(finalist.cost_model, float(rate), prompt, output, finalist.slo,
                              budget, policy.max_running))
    return np.array(users), np.array(per_gpu), np.array(within, dtype=bool)


def front(users: np.ndarray, per_gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points no other point beats on both axes, in order of per-user speed.

    >>> front(np.array([1.0, 2.0, 3.0]), np.array([3.0, 1.0, 2.0]))
    (array([1., 3.]), array([3., 2.]))
    """
    order = np.argsort(-users, kind="stable")
    keep, best = [], -math.inf
    for i in order:
        if per_gpu[i] > best:
            keep.append(i)
            best = per_gpu[i]
    keep = keep[::-1]
    return users[keep], per_gpu[keep]


#: Line styles of the layouts' curves, in the order the plan lists them.
STYLES: tuple = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 1)))


def plot_plan(result, output: str | Path) -> Path:
    """Draw ``result`` (a :class:`~.result.PlanResult`) to ``output`` (.png or .svg)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from ..figures import COLOURS, load_matplotlib, save

    _, Figure = load_matplotlib()
    figure = Figure(figsize=(9.0, 7.6), dpi=110, layout="constrained")
    top, bottom = figure.subplots(2, 1, height_ratios=[3.2, 1.0])
    cards = list(dict.fromkeys(c.candidate.hardware for c in result.considered))
    colour = {card: COLOURS[i % len(COLOURS)] for i, card in enumerate(cards)}
    layouts = list(dict.fromkeys(c.candidate.layout for c in result.considered))
    style: dict[str, Any] = {layout: STYLES[i % len(STYLES)] for i, layout in enumerate(layouts)}
    every_u, every_g = [], []
    for finalist, (users, per_gpu, within) in result.curves:
        candidate = result.considered[finalist.index].candidate
        if not users.size:
            continue
        drawn = dict(color=colour[candidate.hardware], linestyle=style[candidate.layout])
        top.plot(users, per_gpu, linewidth=0.8, alpha=0.3, **drawn)
        top.plot(np.where(within, users, np.nan), per_gpu, linewidth=1.6, alpha=0.9, **drawn)
        every_u.append(users[within])
        every_g.append(per_gpu[within])
    if every_u and sum(u.size for u in every_u):
        fu, fg = front(np.concatenate(every_u), np.concatenate(every_g))
        top.plot(fu, fg, color="black", linewidth=2.6, alpha=0.45, zorder=2)
    for card in cards:
        mine = [p for p in result.points if p.hardware == card]
        for met in (True, False):
            chosen = [p for p in mine if p.met is met]
            if chosen:
                top.scatter([p.per_user for p in chosen], [p.per_gpu for p in chosen], s=28,
                            color=colour[card] if met else "white", edgecolors=colour[card],
                            zorder=3)
    best = result.best
    if best is not None:
        m = best.trial.metrics
        top.scatter([1 / m["tpot_p50"]], [m["throughput_tokens_per_s"] / best.gpus], marker="*",
                    s=280, color="gold", edgecolors="black", zorder=4)
    top.set_xscale("log")
    plain = FuncFormatter(lambda value, _position: f"{value:g}")
    top.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    top.xaxis.set_major_formatter(plain)
    top.xaxis.set_minor_formatter(NullFormatter())
    _shade(top, result)
    top.set_xlabel("tokens/s per user (1 / median TPOT)")
    top.set_ylabel("output tokens/s per GPU")
    top.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=colour[c], linewidth=2, label=c) for c in cards]
    handles += [Line2D([], [], color="grey", linestyle=style[lay], label=lay) for lay in layouts]
    handles += [Line2D([], [], color="black", alpha=0.45, linewidth=2.6,
                       label="Pareto front within the objectives (analytic)"),
                Line2D([], [], color="grey", linewidth=0.8, alpha=0.3,
                       label="faint: a load that misses them"),
                Line2D([], [], marker="o", color="grey", linestyle="", label="simulated: met"),
                Line2D([], [], marker="o", color="grey", markerfacecolor="white", linestyle="",
                       label="simulated: missed")]
    if best is not None:
        handles.append(Line2D([], [], marker="*", color="gold", markeredgecolor="black",
                              markersize=14, linestyle="", label=f"chosen: {best.label}"))
    top.legend(handles=handles, fontsize=7, loc="upper right", ncol=2, framealpha=0.92)
    top.set_title(f"{result.scenario.name}: {result.load} — each layout as its load per replica rises")
    _table(bottom, result)
    return save(figure, output)


def _shade(axes, result) -> None:
    slo = result.slo
    if slo is None or not math.isfinite(slo.itl):
        return
    need = 1 / slo.itl
    low, high = axes.get_xlim()
    axes.axvspan(need, max(high, need * 2), color="tab:green", alpha=0.08,
                 label=f"ITL objective: >= {need:.3g} tokens/s per user")
    axes.axvline(need, color="tab:green", linewidth=0.8, linestyle="--")
    axes.set_xlim(min(low, need / 1.2), max(high, need * 1.2))


def _table(axes, result) -> None:
    axes.axis("off")
    rows = []
    for card, d in result.per_card().items():
        rows.append([card, f"{d.replicas} × {d.candidate.engine} {d.candidate.layout}",
                     str(d.gpus), f"{d.cost.per_month:,.0f}", f"{d.cost.per_million_tokens:.3g}",
                     f"{d.cost.per_million_output:.3g}"])
    if not rows:
        axes.text(0.5, 0.5, "no feasible deployment", ha="center", va="center")
        return
    table = axes.table(cellText=rows, colLabels=["card", "cheapest feasible", "GPUs", "USD/month",
                                                 "USD/1M in+out", "USD/1M output"],
                       loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1, 1.3)
    axes.set_title("cheapest feasible deployment per card (at the planned load, every paid hour busy)",
                   fontsize=9)


__all__ = ["curve", "front", "plot_plan"]
