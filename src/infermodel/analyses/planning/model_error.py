"""The efficiency model's error on a plan's answer: where a measurement of the chosen
deployment is expected, beside the simulation's own sampling intervals.

A plan's intervals (``[300 ms, 301 ms]``) say how sure the simulation is of its figure on
the model it was given; they say nothing of how far that model is from a real card.  An
efficiency preset fitted on the accuracy ledger records that second error: the ratios of
measured to predicted that bound 80 % of its held-out rows, by engine, dense or MoE,
card generation and concurrency band (:mod:`infermodel.engine.intervals`).  The answer's
scenario is evaluated once more at its simulated mean batch per replica (which chooses
the band), and each latency objective's simulated percentile is scaled by those ratios,
as ``infermodel simulate`` scales its figures in its notes.  A scenario whose preset
records no intervals (a fixed-efficiency convention) gets none: nothing is invented.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

#: Objective metrics and the interval kind that covers them (e2e has none).
KINDS = {"ttft": "ttft", "itl": "itl", "tpot": "itl"}


@attrs.frozen
class ModelInterval:
    """One latency objective: its simulated percentile and the 80 % interval of a
    measurement of it.
    """

    metric: str
    percentile: float
    limit: float
    value: float
    low: float
    high: float

    @property
    def name(self) -> str:
        from ...simulator.policies import percentile_key

        return f"{percentile_key(self.percentile)} {self.metric.upper()}"

    @property
    def may_miss(self) -> bool:
        """Whether a measurement may exceed the objective (the interval reaches past it)."""
        return self.high > self.limit


@attrs.frozen
class ModelIntervals:
    """The chosen deployment's objectives with the efficiency model's intervals."""

    batch: int
    items: tuple[ModelInterval, ...]

    def lines(self, indent: str = "  ") -> list[str]:
        parts = [f"{i.name} {_seconds(i.low)} … {_seconds(i.high)}" for i in self.items]
        out = [f"{indent}efficiency model: 80 % interval of a measurement (its preset's "
               f"held-out errors, at {self.batch} sequence{'s' if self.batch != 1 else ''} a "
               f"replica): " + ", ".join(parts)]
        missed = [i.name for i in self.items if i.may_miss]
        if missed:
            out.append(f"{indent}  on real cards {' and '.join(missed)} may miss "
                       f"{'its objective' if len(missed) == 1 else 'their objectives'}: the "
                       "simulated verdict assumes the efficiency model is exact")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "coverage": 0.8,
                "objectives": {f"{i.metric}_p{i.percentile:g}": {
                    "value": i.value, "low": i.low, "high": i.high, "limit": i.limit,
                    "may_miss": i.may_miss} for i in self.items}}


def model_intervals(scenario, best) -> ModelIntervals | None:
    """The efficiency model's 80 % intervals on ``best``'s latency objectives, or None
    where its efficiency preset calibrated none (or the answer cannot be evaluated).
    """
    from ...engine.evaluation import evaluate_afresh
    from ...engine.intervals import interval
    from ...errors import InfermodelError

    if best is None or best.trial is None:
        return None
    mean_batch = best.trial.metrics.get("mean_batch", math.nan)
    batch = max(1, round(mean_batch)) if math.isfinite(mean_batch) else 1
    try:
        result = evaluate_afresh(scenario.with_overrides({**best.overrides, "workload.batch": batch}))
    except InfermodelError:
        return None
    items = []
    for target in best.trial.verdict.targets:
        kind = KINDS.get(target.metric)
        found = None if kind is None else interval(result, target.metric, value=target.value,
                                                   kind=kind)
        if found is not None:
            items.append(ModelInterval(target.metric, target.percentile, target.limit,
                                       target.value, *found))
    return ModelIntervals(batch, tuple(items)) if items else None


def _seconds(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g} s" if value >= 1 else f"{value * 1000:.3g} ms"


__all__ = ["ModelInterval", "ModelIntervals", "model_intervals"]
