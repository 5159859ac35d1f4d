"""A plan as text: the best deployment with its intervals, headroom and reproduction,
the ranking, the cheapest deployment per card, and what was set aside.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import Planned, PlanResult


#: Numbers in a warning: two warnings equal but for them are one note on several candidates.
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*(?:e[+-]?\d+)?")


def _seconds(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g} s" if value >= 1 else f"{value * 1000:.3g} ms"


def _gpus(count: int) -> str:
    return f"{count} GPU" + ("s" if count != 1 else "")


def _targets(found: Planned) -> list[str]:
    from ...simulator.policies import percentile_key

    lines = []
    verdict = found.trial.verdict
    for t in verdict.targets:
        name = f"{percentile_key(t.percentile)} {t.metric.upper()}"
        lines.append(f"  {name:<10} {_seconds(t.value):>9}  [{_seconds(t.low)}, {_seconds(t.high)}]"
                     f"  objective {_seconds(t.limit)}, {t.headroom:.0%} to spare")
    if verdict.share is not None:
        lines.append(f"  goodput    {verdict.goodput:9.1%}  [{verdict.goodput_low:.1%}, "
                     f"{verdict.goodput_high:.1%}]  of requests meet every objective (at least "
                     f"{verdict.share:.0%} needed)")
    return lines


def _best(result: PlanResult, best: Planned) -> list[str]:
    path = str(result.scenario.path) if result.scenario.path else "SCENARIO"
    lines = [f"best: {best.label} — {_gpus(best.gpus)}, USD {best.cost.per_month:,.0f} per month",
             *_targets(best)]
    if result.model_intervals is not None:
        lines += result.model_intervals.lines()
    lines.append("  cost")
    lines += best.cost.lines(indent="    ")
    if best.below is not None:
        state = "misses the objectives" if not best.below.met else "also meets them (unclear edge)"
        lines.append(f"  one replica fewer ({best.replicas - 1}) {state}: "
                     + _missed_words(best.below))
    cheaper = result.next_cheaper
    if cheaper is not None:
        lines.append(f"  next-cheaper option that fails: {cheaper.label}, USD {cheaper.cost.per_month:,.0f} "
                     f"per month: {cheaper.note}")
    else:
        lines.append("  next-cheaper option that fails: none simulated (the cheapest bound met)")
    lines.append(f"  judged on {best.trial.requests:,} requests; intervals: "
                 f"{result.settings.confidence:.0%} simulation sampling intervals")
    if best.trial.verdict.state == "unclear":
        lines.append(f"  borderline: its verdict is still unclear at {best.trial.requests:,} requests "
                     "(max_requests, the most a verdict grows to); decided on the point estimates")
    elif best.below is not None and not best.below.clear:
        lines.append(f"  met clearly; one replica fewer is borderline at {best.trial.requests:,} "
                     "requests (its interval straddles an objective), and misses on its point "
                     "estimates")
    lines.append(f"  reproduce: {best.command(path)}")
    return lines


def _missed_words(trial) -> str:
    from ...simulator.policies import percentile_key

    parts = [f"{percentile_key(t.percentile)} {t.metric.upper()} {_seconds(t.value)}"
             for t in trial.verdict.targets]
    v = trial.verdict
    if v.share is not None:
        parts.append(f"goodput {v.goodput:.1%}")
    if v.overload != "stable":
        parts.append(v.overload)
    return ", ".join(parts)


def _row(rank: int, d: Planned, names: list[str]) -> str:
    m = d.trial.metrics
    shown = [f"{m[name]:.1%}" if name == "goodput_fraction" else _seconds(m[name]) for name in names]
    mark = "" if d.trial.clear else f"  * unclear at {d.trial.requests:,} requests"
    return (f"  {rank:>3}  {d.candidate.hardware:<10} {d.candidate.engine:<7} {d.candidate.layout:<12}"
            f" {d.replicas:>4} {d.gpus:>5} {d.cost.per_month:>12,.0f} {d.cost.per_million_tokens:>9.3g}"
            f" {d.cost.per_million_output:>9.3g}  " + "  ".join(shown) + mark)


def plan_text(result: PlanResult) -> str:
    """The whole answer as text (what ``infermodel plan`` prints)."""
    table = result.table
    slo = result.slo
    lines = [f"{result.scenario.name}: plan for {result.load}"
             + (f", {slo.describe()}" if slo is not None else "")]
    set_aside = len(result.notes)
    lines.append(f"candidates: {len(result.considered)} (cards × engines × layouts × pools); "
                 f"{len(result.deployments)} feasible, {set_aside} set aside; {result.runs} "
                 f"replica counts simulated, each on {result.settings.requests:,} requests, "
                 f"grown up to {result.settings.max_requests:,} while its verdict is unclear")
    lines.append("")
    best = result.best
    if best is None:
        lines.append(f"no deployment within {table.max_gpus} GPUs meets the objectives")
    else:
        lines += _best(result, best)
        names = [*slo.names(), "goodput_fraction"]
        titles = [n.replace("_", " ") for n in slo.names()] + ["goodput"]
        lines += ["", "feasible deployments, cheapest first (USD per month; per 1M tokens in + out; "
                  "per 1M output tokens, output only; at the planned load):",
                  f"  {'#':>3}  {'hardware':<10} {'engine':<7} {'layout':<12} {'rep':>4} {'GPUs':>5}"
                  f" {'USD/month':>12} {'in+out':>9} {'output':>9}  " + "  ".join(titles)]
        lines += [_row(rank, d, names) for rank, d in enumerate(result.deployments[:table.show], start=1)]
        if len(result.deployments) > table.show:
            lines.append(f"  ... and {len(result.deployments) - table.show} more (--show N)")
        if any(not d.trial.clear for d in result.deployments[:table.show]):
            lines.append("  * judged on its point estimates: its verdict was not clear at the requests "
                         "the search grew it to (the best is refined further)")
        lines += ["", "cheapest feasible deployment per card:"]
        for card, d in result.per_card().items():
            lines.append(f"  {card:<10} {d.label}: {_gpus(d.gpus)}, USD {d.cost.per_month:,.0f} per month, "
                         f"USD {d.cost.per_million_output:.3g} per 1M output tokens")
        for card in dict.fromkeys(c.candidate.hardware for c in result.considered):
            if card not in result.per_card():
                # simulated (and short of the objectives within the cap), or set aside
                # before any simulation: it cannot load, or misses them alone or on average
                loaded = any(c.candidate.hardware == card and not c.reason
                             and c.screen is not None and c.screen.feasible
                             for c in result.considered)
                lines.append(f"  {card:<10} " + (f"none within {table.max_gpus} GPUs" if loaded
                                                 else "none: every candidate set aside (below)"))
    if result.notes:
        lines += ["", "set aside:"]
        for index, why in result.notes.items():
            lines.append(f"  {result.considered[index].candidate.label}: {why}")
    lines += warning_lines(result)
    return "\n".join(lines)


def warning_lines(result: PlanResult) -> list[str]:
    """Each warning once, naming the candidate it holds for unless it holds for all; those
    that differ between candidates only in their numbers (the same lever's note on every
    tensor degree) once for all of them, with their count.

    >>> from types import SimpleNamespace as N
    >>> one = lambda label, *w: N(candidate=N(label=label), warnings=w)
    >>> warning_lines(N(considered=[one("a TP1", "x is 2", "y"), one("a TP2", "x is 4")]))
    ['warning (a TP1, and 1 other candidate alike): x is 2', 'warning (a TP1): y']
    """
    groups: dict[str, list[tuple[str, str]]] = {}
    for considered in result.considered:
        for warning in dict.fromkeys(considered.warnings):
            groups.setdefault(_DIGITS.sub("#", warning), []).append((considered.candidate.label, warning))
    lines = []
    for found in groups.values():
        texts = dict.fromkeys(text for _label, text in found)
        if len(texts) == 1 and len(found) == len(result.considered):
            lines.append(f"warning: {found[0][1]}")
            continue
        others = len(found) - 1
        alike = f", and {others} other candidate{'s' if others != 1 else ''} alike" if others else ""
        lines.append(f"warning ({found[0][0]}{alike}): {found[0][1]}")
    return lines


__all__ = ["plan_text", "warning_lines"]
