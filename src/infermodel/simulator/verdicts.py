"""Whether a run meets its objectives, with the sampling interval of every figure.

A simulated percentile is an estimate from a finite sample, so a verdict near an
objective can flip with more requests.  :func:`judge` puts an interval on each figure it
decides by and says whether the verdict is **clear** at the chosen confidence:

* **A percentile** (TTFT, TPOT, E2E: one sample per request) gets the distribution-free
  order-statistic interval: the sample's quantiles at ranks ``q ± z·√(q(1 − q)/n)``
  (the normal approximation of the binomial count of samples below the true
  percentile).  **Pooled ITL** takes the same ranks over the pooled gaps with the
  number of requests as the sample size, because the gaps of one request move
  together (an interval over 300 gaps per request as if independent would be far too
  narrow).
* **Goodput's share** (requests meeting every objective) gets the Wilson score interval
  of a binomial proportion.
* **Overload** is the batch-means test of :func:`~.metrics.overload_state`.

A target *passes* when its interval lies within the objective, *fails* when it lies
beyond, and is *unclear* otherwise.  The run *meets* the objectives when every target
and the goodput share pass and the queue is stable; it *misses* them when any fails or
the run is overloaded; otherwise the verdict is unclear, and simulating more requests
narrows every interval (as 1/√n).

These intervals describe the simulation's own sampling: requests are treated as
independent draws, which queueing makes only approximately true, and they say nothing
about the error of the cost model itself.

>>> from .workload import WorkloadSpec
>>> from .cost import CostModel
>>> from .api import run_record
>>> from .policies import SLO
>>> slo = SLO(ttft=3.0, itl=0.1, ttft_percentile=90, itl_percentile=90, rule="joint")
>>> record, metrics = run_record(CostModel.lab3(), WorkloadSpec.lab3().generate(0.1, 0), slo=slo)
>>> verdict = judge(record, metrics, slo)
>>> verdict.state, [round(x, 2) for x in (verdict.targets[0].low, verdict.targets[0].high)]
('met', [1.39, 1.44])

At p99 the same 300 requests cannot be clear: 300 of 300 meeting every objective
gives a Wilson interval reaching down to 0.987, below the 0.99 share (simulate more).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import attrs
import numpy as np

from .metrics import overload_state, samples, weighted_quantile
from .policies import SLO, percentile_key
from .records import RunRecord

#: The words every interval is labelled with.
INTERVAL_METHOD = ("simulation sampling interval: order statistics of the simulated requests "
                   "(pooled ITL with requests as the sample size), Wilson for goodput")


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def rank_bounds(q: float, n: int, confidence: float) -> tuple[float, float]:
    """Quantile levels bracketing the ``q`` quantile of a sample of ``n`` at a confidence.

    >>> [round(x, 4) for x in rank_bounds(0.95, 1000, 0.95)]
    [0.9365, 0.9635]
    """
    if n <= 0:
        return 0.0, 1.0
    half = _z(confidence) * math.sqrt(q * (1 - q) / n)
    return max(0.0, q - half), min(1.0, q + half)


def wilson(successes: int, n: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion.

    >>> [round(x, 4) for x in wilson(95, 100, 0.95)]
    [0.8882, 0.9785]
    """
    if n <= 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _state(low: float, high: float, limit: float, *, at_most: bool = True) -> str:
    if at_most:
        return "pass" if high <= limit else "fail" if low > limit else "unclear"
    return "pass" if low >= limit else "fail" if high < limit else "unclear"


@attrs.frozen
class TargetVerdict:
    """One objective: the simulated percentile, its interval and the verdict."""

    metric: str
    percentile: float
    limit: float
    value: float
    low: float
    high: float
    state: str

    @property
    def name(self) -> str:
        return f"{self.metric}_{percentile_key(self.percentile)}"

    @property
    def headroom(self) -> float:
        """Share of the objective left unused: (limit − value) / limit (negative: over)."""
        return (self.limit - self.value) / self.limit

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.name, "value": self.value, "interval": [self.low, self.high],
                "limit": self.limit, "verdict": self.state}


@attrs.frozen
class Verdict:
    """A run judged against its objectives (see the module docstring)."""

    targets: tuple[TargetVerdict, ...]
    goodput: float
    goodput_low: float
    goodput_high: float
    share: float | None
    goodput_state: str
    overload: str
    requests: int
    confidence: float

    @property
    def state(self) -> str:
        """``"met"``, ``"missed"`` or ``"unclear"``."""
        states = [t.state for t in self.targets] + [self.goodput_state]
        if "fail" in states or self.overload == "overloaded":
            return "missed"
        if "unclear" in states or self.overload == "unclear":
            return "unclear"
        return "met"

    @property
    def met(self) -> bool:
        """The verdict on the point estimates (what ``simulate`` prints as met)."""
        held = all(t.value <= t.limit for t in self.targets)
        if self.share is not None:
            held = held and self.goodput >= self.share
        return held and self.overload != "overloaded"

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "met": self.met, "requests": self.requests,
                "confidence": self.confidence, "interval_method": INTERVAL_METHOD,
                "targets": [t.to_dict() for t in self.targets],
                "goodput_fraction": {"value": self.goodput,
                                     "interval": [self.goodput_low, self.goodput_high],
                                     "share": self.share, "verdict": self.goodput_state},
                "overload": self.overload}


def percentile_interval(record: RunRecord, metric: str, percentile: float,
                        confidence: float = 0.95) -> tuple[float, float]:
    """The ``confidence`` interval of a run's ``percentile`` of ``metric`` (``ttft``,
    ``itl``, ``tpot`` or ``e2e``), by order statistics (see the module docstring).
    """
    q = percentile / 100
    if metric == "itl":
        weights = record.gap_weights
        if record.gap_values.size == 0 or (weights is not None and int(weights.sum()) == 0):
            return math.nan, math.nan
        n = int(np.count_nonzero(record.outputs > 1))
        low, high = rank_bounds(q, n, confidence)
        found = weighted_quantile(record.gap_values, weights, (low, high))
        return found[0], found[1]
    sample = samples(record, metric)
    if sample.size == 0:
        return math.nan, math.nan
    low, high = rank_bounds(q, sample.size, confidence)
    found = np.quantile(sample, [low, high])
    return float(found[0]), float(found[1])


def judge(record: RunRecord, metrics: Mapping[str, float], slo: SLO,
          confidence: float = 0.95) -> Verdict:
    """The run's verdict against ``slo`` with every figure's interval."""
    targets = []
    for name, (metric, q, limit) in zip(slo.names(), slo.targets()):
        low, high = percentile_interval(record, metric, q, confidence)
        value = float(metrics[name])
        if math.isnan(low):
            low = high = value
        targets.append(TargetVerdict(metric, q, limit, value, low, high, _state(low, high, limit)))
    count = int(record.arrivals.size)
    good = round(metrics["goodput_fraction"] * count)
    low, high = wilson(good, count, confidence)
    share = slo.share if slo.rule == "joint" else None
    state = "pass" if share is None else _state(low, high, share, at_most=False)
    return Verdict(tuple(targets), float(metrics["goodput_fraction"]), low, high, share, state,
                   overload_state(metrics), count, confidence)


__all__ = ["INTERVAL_METHOD", "TargetVerdict", "Verdict", "judge", "percentile_interval",
           "rank_bounds", "wilson"]
