"""Prediction intervals: how far a measurement may sit from a prediction, by what drives
the error.

An efficiency preset fitted on the accuracy ledger records, for groups of held-out rows,
the 10th and 90th percentiles of ``e = log(predicted / measured)`` (each row predicted by a
fit that never saw its source). A group is named by its attributes — the metric kind
(:data:`KINDS`), whether the model is dense or a mixture of experts, the concurrency band
(:func:`band`), the card generation and the engine — each either a value or ``"any"``.
For a new prediction the most specific group that matches and has at least
:data:`MIN_ROWS` rows is used, and the 80 % interval of the measurement is::

    predicted · exp(−p90)  …  predicted · exp(−p10)

This module is the one place that chooses a group; the efficiency plugin turns the
choice into quantities (``ttft_expected_low`` …), the accuracy report uses it on ledger
rows and any analysis can call :func:`interval` on a result.

>>> entries = [Entry("itl", {"moe": "any"}, 40, -0.1, 0.2), Entry("itl", {"moe": "dense"}, 12, -0.05, 0.1)]
>>> choose(entries, "itl", {"moe": "dense"}).n
12
>>> [round(x, 4) for x in bounds(10.0, choose(entries, "itl", {"moe": "moe"}))]
[8.1873, 11.0517]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["ANY", "BANDS", "KINDS", "MIN_ROWS", "RATIO_QUANTITIES", "Entry", "band", "bounds",
           "choose", "entries_of", "interval", "kind_of"]

ANY = "any"
#: Metric kinds, and the ledger metrics each covers.
KINDS = {"ttft": ("ttft_ms",), "itl": ("itl_ms", "tpot_ms"),
         "throughput": ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s")}
#: Concurrency bands (upper bounds, inclusive) and their names.
BANDS = ((1, "1"), (16, "2-16"), (64, "17-64"), (math.inf, "65+"))
#: Rows a group needs before its percentiles are used (fewer: a wider group is).
MIN_ROWS = 8
#: The quantities a result carries per kind: (low ratio, high ratio) of measured to predicted.
RATIO_QUANTITIES = {kind: (f"{kind}_interval_low_ratio", f"{kind}_interval_high_ratio")
                    for kind in KINDS}


def kind_of(metric: str) -> str:
    """The metric kind of a ledger metric.

    >>> kind_of("tpot_ms")
    'itl'
    """
    for kind, metrics in KINDS.items():
        if metric in metrics:
            return kind
    raise KeyError(metric)


def band(concurrency: float) -> str:
    """The concurrency band of a number of requests in flight.

    >>> band(1), band(8), band(64), band(200)
    ('1', '2-16', '17-64', '65+')
    """
    for top, name in BANDS:
        if concurrency <= top:
            return name
    return BANDS[-1][1]


@attrs.frozen
class Entry:
    """One group of held-out rows: its attributes, size and error percentiles."""

    kind: str
    attributes: Mapping[str, str]
    n: int
    #: 10th and 90th percentiles of log(predicted / measured).
    low: float
    high: float

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return all(v == ANY or attributes.get(k) == v for k, v in self.attributes.items())

    @property
    def specificity(self) -> int:
        return sum(v != ANY for v in self.attributes.values())

    def describe(self) -> str:
        named = [f"{k} {v}" for k, v in self.attributes.items() if v != ANY]
        return f"{', '.join(named) or 'every row'} ({self.n} held-out rows)"

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Entry:
        attributes = {k: str(v) for k, v in table.items()
                      if k not in ("kind", "n", "low", "high")}
        return cls(str(table["kind"]), attributes, int(table["n"]), float(table["low"]),
                   float(table["high"]))

    def to_table(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.attributes, "n": self.n, "low": round(self.low, 4),
                "high": round(self.high, 4)}


def choose(entries: Iterable[Entry], kind: str, attributes: Mapping[str, str],
           min_rows: int = MIN_ROWS) -> Entry | None:
    """The most specific matching group of ``kind`` with at least ``min_rows`` rows (ties:
    the larger group); None when no group qualifies.
    """
    found = [e for e in entries if e.kind == kind and e.n >= min_rows and e.matches(attributes)]
    if not found:
        return None
    return max(found, key=lambda e: (e.specificity, e.n))


def bounds(predicted: float, entry: Entry) -> tuple[float, float]:
    """The 80 % interval of a measurement around ``predicted``."""
    return predicted * math.exp(-entry.high), predicted * math.exp(-entry.low)


def interval(result, quantity: str, value: float | None = None,
             kind: str | None = None) -> tuple[float, float] | None:
    """The 80 % interval of a measurement of ``quantity`` (or of ``value``, a figure of the
    same kind such as a simulated percentile) from the ratios a result carries; None when
    the scenario has no calibrated interval.

    ``kind`` is the metric kind (:data:`KINDS`); by default ``ttft*`` is ``"ttft"``,
    ``tpot``/``itl*`` ``"itl"`` and ``tokens_per_s*`` ``"throughput"``.

    >>> interval(evaluate("scenarios/engine-trtllm-llama-3.1-8b.toml"), "tpot")  # doctest: +SKIP
    (0.0081..., 0.0103...)
    """
    kind = kind or _kind_of_quantity(quantity)
    if kind is None:
        return None
    low_name, high_name = RATIO_QUANTITIES[kind]
    values = result.values
    if low_name not in values or high_name not in values:
        return None
    figure = values[quantity] if value is None else value
    return float(figure) * float(values[low_name]), float(figure) * float(values[high_name])


def _kind_of_quantity(quantity: str) -> str | None:
    if quantity.startswith("ttft"):
        return "ttft"
    if quantity.startswith(("tpot", "itl", "decode_step")):
        return "itl"
    if quantity.startswith(("tokens_per_s", "output_tokens")):
        return "throughput"
    return None


def entries_of(tables: Sequence[Mapping[str, Any]]) -> list[Entry]:
    """Entries from a preset's ``[[preset.interval]]`` tables (malformed ones skipped)."""
    out = []
    for table in tables:
        try:
            out.append(Entry.from_table(table))
        except (KeyError, TypeError, ValueError):
            continue
    return out
