"""The plan's picture: output tokens/s per GPU against tokens/s per user, across layouts.

Each layout's curve is its analytic steady state (:func:`~.analytic.steady`) as the load
per replica rises: more users per replica raise what each GPU produces and lower what
each user sees.  The thick line is the Pareto front over every layout; the markers are
the simulated deployments (filled: objectives met, hollow: missed); the shaded band is
the per-user speed the ITL objective asks for (1 / ITL), and the star is the chosen
deployment.  Below, a table gives the cheapest feasible deployment of each card.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .analytic import mean_lengths, steady


def curve(finalist, points: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens/s per user, output tokens/s per GPU)`` of one replica of ``finalist`` as
    its load rises to the most its iteration carries (empty for a disaggregated unit,
    whose pools the mean field does not follow).
    """
    if finalist.prefill:
        return np.array([]), np.array([])
    prompt, output = mean_lengths(finalist.workload)
    budget = finalist.policy.chunk_tokens if finalist.policy.kind == "chunked" else 10**9
    top, low = 1e-3, 0.0
    while steady(finalist.cost_model, top, prompt, output, budget) is not None and top < 1e6:
        low, top = top, top * 2
    users, per_gpu = [], []
    for rate in np.geomspace(max(low, 1e-3) / 200, max(low, 1e-3), points):
        found = steady(finalist.cost_model, float(rate), prompt, output, budget)
        if found is None or found.decodes * (prompt + output / 2) > finalist.cost_model.cache_tokens():
            continue
        users.append(1 / found.mean)
        per_gpu.append(rate * output / finalist.gpus_per_replica)
    return np.array(users), np.array(per_gpu)


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


def plot_plan(result, output: str | Path) -> Path:
    """Draw ``result`` (a :class:`~.result.PlanResult`) to ``output`` (.png or .svg)."""
    from ..figures import COLOURS, load_matplotlib, save

    _, Figure = load_matplotlib()
    figure = Figure(figsize=(9.0, 7.4), dpi=110, layout="constrained")
    top, bottom = figure.subplots(2, 1, height_ratios=[3.2, 1.0])
    cards = list(dict.fromkeys(c.candidate.hardware for c in result.considered))
    colour = {card: COLOURS[i % len(COLOURS)] for i, card in enumerate(cards)}
    every_u, every_g = [], []
    for finalist, (users, per_gpu) in result.curves:
        candidate = result.considered[finalist.index].candidate
        if users.size:
            top.plot(users, per_gpu, color=colour[candidate.hardware], linewidth=0.9, alpha=0.55)
            middle = int(np.argmin(np.abs(per_gpu - per_gpu.max() / 2)))
            top.annotate(f"{candidate.engine} {candidate.layout}", (users[middle], per_gpu[middle]),
                         fontsize=6.5, color=colour[candidate.hardware], xytext=(3, 0),
                         textcoords="offset points")
            every_u.append(users)
            every_g.append(per_gpu)
    if every_u:
        fu, fg = front(np.concatenate(every_u), np.concatenate(every_g))
        top.plot(fu, fg, color="black", linewidth=2.2, alpha=0.7, label="Pareto front (analytic, all layouts)")
    for card in cards:
        mine = [p for p in result.points if p.hardware == card]
        for met in (True, False):
            chosen = [p for p in mine if p.met is met]
            if chosen:
                top.scatter([p.per_user for p in chosen], [p.per_gpu for p in chosen], s=26,
                            color=colour[card] if met else "none", edgecolors=colour[card],
                            label=f"{card}: simulated, {'met' if met else 'missed'}", zorder=3)
    best = result.best
    if best is not None:
        m = best.trial.metrics
        users = 1 / m["tpot_p50"]
        per_gpu = m["throughput_tokens_per_s"] / best.gpus
        top.scatter([users], [per_gpu], marker="*", s=260, color="gold", edgecolors="black",
                    zorder=4, label=f"chosen: {best.label}")
    top.set_xscale("log")
    _shade(top, result)
    top.set_xlabel("tokens/s per user (1 / median TPOT)")
    top.set_ylabel("output tokens/s per GPU")
    top.grid(True, alpha=0.3)
    top.legend(fontsize=7, loc="upper right")
    top.set_title(f"{result.scenario.name}: {result.load}; throughput per GPU vs speed per user")
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
