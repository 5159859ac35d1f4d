"""What checking predictions against the accuracy ledger gives: the efficiency a row is
predicted at (:class:`Efficiency`), each row's prediction or the reason there is none
(:class:`Prediction`), a whole ledger's (:class:`Validation`), and the per-metric errors
and summaries (median and 90th percentile of ``|error|``) of :mod:`.predictions` and
:mod:`.fits`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import numpy as np

from .ledger import LedgerRow

__all__ = ["Efficiency", "Prediction", "Validation", "errors_by_metric", "summarise"]


@attrs.frozen
class Efficiency:
    """Values of the physical model's engine parameters (what a fitted preset sets), as
    ``(name, value)`` pairs; an empty one leaves the scenario's own values.
    """

    values: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, float]) -> Efficiency:
        """>>> Efficiency.of({"kernel_time": 3e-6})["kernel_time"]
        3e-06
        """
        return cls(tuple(sorted((k, float(v)) for k, v in mapping.items())))

    def as_dict(self) -> dict[str, float]:
        return dict(self.values)

    def __getitem__(self, name: str) -> float:
        return self.as_dict()[name]

    def candidates(self) -> dict[str, np.ndarray]:
        """This efficiency as a one-candidate grid."""
        return {name: np.array([value]) for name, value in self.values}


@attrs.frozen
class Prediction:
    """A ledger row with its prediction, or the reason it cannot be predicted."""

    row: LedgerRow
    predicted: float | None
    reason: str | None = None
    interval: tuple[float, float] | None = None
    #: How it was predicted: the roofline, a simulated or analytic closed loop, the
    #: disaggregated pools (empty where not recorded).
    method: str = ""
    #: Under measured kernels, the share of the decode step (at the row's running batch)
    #: that the tables time; the rest is operators they do not cover, at their roofline.
    measured_share: float | None = None

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return (self.predicted - self.row.value) / self.row.value

    @property
    def covered(self) -> bool | None:
        """Whether the measurement lies in the interval (None without one)."""
        if self.interval is None:
            return None
        return self.interval[0] <= self.row.value <= self.interval[1]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.row.id, "metric": self.row.metric,
                               "measured": self.row.value, "predicted": self.predicted,
                               "error": self.error, "method": self.method}
        if self.measured_share is not None:
            out["measured_share"] = self.measured_share
        if self.interval is not None:
            out["interval"] = list(self.interval)
        return out


@attrs.frozen
class Validation:
    """Predictions of a whole ledger and their summary."""

    points: tuple[Prediction, ...]

    @property
    def predicted(self) -> list[Prediction]:
        return [p for p in self.points if p.predicted is not None]

    @property
    def unpredictable(self) -> list[Prediction]:
        return [p for p in self.points if p.predicted is None]

    def summary(self) -> dict[str, dict[str, float]]:
        return summarise(self.predicted)

    def coverage(self) -> dict[str, float] | None:
        """Share of the predicted rows whose measurement lies in its interval, overall."""
        marks = [p.covered for p in self.predicted if p.covered is not None]
        return {"n": len(marks), "covered": sum(marks) / len(marks)} if marks else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"points": [p.to_dict() for p in self.predicted],
               "summary": self.summary(),
               "unpredictable": [{"id": p.row.id, "metric": p.row.metric, "reason": p.reason}
                                 for p in self.unpredictable]}
        if self.coverage() is not None:
            out["interval_coverage"] = self.coverage()
        return out


def errors_by_metric(points: Iterable[Prediction]) -> dict[str, list[float]]:
    """The relative errors of the predicted points, per metric."""
    out: dict[str, list[float]] = {}
    for p in points:
        error = p.error
        if error is not None:
            out.setdefault(p.row.metric, []).append(error)
    return out


def summarise(points: Iterable[Prediction]) -> dict[str, dict[str, float]]:
    """Median and 90th-percentile |error| per metric.

    >>> from infermodel.accuracy.ledger import LedgerRow
    >>> row = LedgerRow("a", "u", "vllm", "h100-sxm", 1, "m", None, "", "", 1, 1, 8, 8, 1,
    ...                 "ttft_ms", "mean", 10.0)
    >>> summarise([Prediction(row, 12.0), Prediction(row, 9.0)])["ttft_ms"]["median_abs_error"]
    0.15
    """
    by_metric = {m: [abs(e) for e in errors] for m, errors in errors_by_metric(points).items()}
    return {metric: {"n": len(errors),
                     "median_abs_error": round(float(np.median(errors)), 6),
                     "p90_abs_error": round(float(np.percentile(errors, 90)), 6)}
            for metric, errors in sorted(by_metric.items())}
