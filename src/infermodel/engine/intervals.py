"""Prediction intervals: how far a measurement may sit from a prediction, by what drives
the error, for a source the fit has not seen.

An efficiency preset fitted on the accuracy ledger records groups of held-out rows (each
row predicted by a fit that never saw its source) and, for each, an 80 % interval of
``e = log(predicted / measured)``. A group is named by its attributes — the metric kind
(:data:`KINDS`), whether the model is dense or a mixture of experts, the concurrency band
(:func:`band`), the card generation and the engine — each either a value or ``"any"``.
For a new prediction the most specific group that matches, has at least :data:`MIN_ROWS`
rows and rows from at least :data:`MIN_SOURCES` independent sources is used (the group of
every row of a kind is the last resort, from two sources), and the 80 % interval of the
measurement is::

    predicted · exp(−high)  …  predicted · exp(−low)

**How a group's interval is built** (:func:`calibrate`). Errors are strongly correlated
within a source (one publisher's setup, engine version and benchmark client move all its
rows together), so the percentiles of a group's rows describe the scatter within the
sources it happens to hold, not how far a new source can sit. Each group's interval is
therefore two-level, with the sources as the units:

1. *between sources*: each source's median error in the group (its source effect), every
   source weighing the same;
2. *within a source*: each row's error less its source's median, every source's rows
   together weighing the same;
3. the 10th and 90th percentiles of the sum of a draw from each (every pair of a source
   effect and a within-source deviation), with the median of that sum as the centre;
4. a scale (:data:`Calibration.scale`) by which every interval is widened (or narrowed)
   about its centre, chosen by leaving each source out *within* the calibration rows: the
   groups are rebuilt without it, and the scale is the smallest at which 80 % of its rows
   fall inside their group's scaled interval (a conformal calibration with sources as
   the exchangeable units).

A group needs rows from at least :data:`MIN_SOURCES` sources: with fewer, its percentiles
rest on one or two source effects, which is no estimate of the next one. Why these
choices, and the coverage they reach on held-out sources, is measured on the accuracy
page (docs: How accurate is it?, "Intervals").

This module is the one place that builds and chooses a group; the efficiency plugin
turns the choice into quantities (``ttft_expected_low`` …), the accuracy report uses it
on ledger rows and any analysis can call :func:`interval` on a result.

>>> entries = [Entry("itl", {"moe": "any"}, 40, -0.1, 0.2), Entry("itl", {"moe": "dense"}, 12, -0.05, 0.1)]
>>> choose(entries, "itl", {"moe": "dense"}).n
12
>>> [round(x, 4) for x in bounds(10.0, choose(entries, "itl", {"moe": "moe"}))]
[8.1873, 11.0517]
>>> narrow = Entry("itl", {"moe": "dense"}, 30, -0.05, 0.1, sources=2)  # two sources: too few
>>> choose([entries[0], narrow], "itl", {"moe": "dense"}).n
40
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import product
from typing import Any

import attrs

__all__ = ["ANY", "ATTRIBUTES", "BANDS", "COVERAGE", "KINDS", "MIN_ROWS", "MIN_SOURCES",
           "RATIO_QUANTITIES", "Calibration", "Entry", "Residual", "band", "bounds", "calibrate",
           "choose", "entries_of", "interval", "kind_of", "spread"]

ANY = "any"
#: Metric kinds, and the ledger metrics each covers.
KINDS = {"ttft": ("ttft_ms",), "itl": ("itl_ms", "tpot_ms"),
         "throughput": ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s")}
#: Concurrency bands (upper bounds, inclusive) and their names.
BANDS = ((1, "1"), (16, "2-16"), (64, "17-64"), (math.inf, "65+"))
#: The attributes a group is named by, besides the metric kind.
ATTRIBUTES = ("engine", "moe", "band", "generation")
#: Rows a group needs before its interval is used (fewer: a wider group is).
MIN_ROWS = 8
#: Independent sources a group needs before its interval is used (fewer: a wider group
#: is); the group of every row of a kind needs two. Chosen by measurement on the ledger's
#: held-out sources (docs: How accurate is it?): three let two sources' effects decide an
#: interval, five leave most groups empty.
MIN_SOURCES = 4
#: The intervals' nominal coverage of a new source's rows.
COVERAGE = 0.8
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
    #: The ends of the 80 % interval of log(predicted / measured) for a new source.
    low: float
    high: float
    #: Independent sources among its rows (None: not recorded, a preset written before
    #: the count was; such a group is chosen by its rows alone).
    sources: int | None = None

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return all(v == ANY or attributes.get(k) == v for k, v in self.attributes.items())

    @property
    def specificity(self) -> int:
        return sum(v != ANY for v in self.attributes.values())

    def qualifies(self, min_rows: int = MIN_ROWS, min_sources: int = MIN_SOURCES) -> bool:
        """Whether it holds enough rows and sources to be used (every row of a kind: two
        sources).
        """
        if self.n < min_rows:
            return False
        if self.sources is None:
            return True
        return self.sources >= (min(2, min_sources) if self.specificity == 0 else min_sources)

    def describe(self) -> str:
        named = [f"{k} {v}" for k, v in self.attributes.items() if v != ANY]
        sources = "" if self.sources is None else f" from {self.sources} sources"
        return f"{', '.join(named) or 'every row'} ({self.n} held-out rows{sources})"

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Entry:
        attributes = {k: str(v) for k, v in table.items()
                      if k not in ("kind", "n", "low", "high", "sources")}
        sources = table.get("sources")
        return cls(str(table["kind"]), attributes, int(table["n"]), float(table["low"]),
                   float(table["high"]), None if sources is None else int(sources))

    def to_table(self) -> dict[str, Any]:
        out = {"kind": self.kind, **self.attributes, "n": self.n}
        if self.sources is not None:
            out["sources"] = self.sources
        return {**out, "low": round(self.low, 4), "high": round(self.high, 4)}


def choose(entries: Iterable[Entry], kind: str, attributes: Mapping[str, str],
           min_rows: int = MIN_ROWS, min_sources: int = MIN_SOURCES) -> Entry | None:
    """The most specific matching group of ``kind`` with at least ``min_rows`` rows from at
    least ``min_sources`` sources (:meth:`Entry.qualifies`; ties: the larger group); None
    when no group qualifies.
    """
    found = [e for e in entries
             if e.kind == kind and e.qualifies(min_rows, min_sources) and e.matches(attributes)]
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


# -- building the groups from held-out residuals --------------------------------------


@attrs.frozen
class Residual:
    """One held-out row: its interval attributes (:data:`ATTRIBUTES`), metric kind,
    independent source, and ``log(predicted / measured)`` by a fit that never saw it.
    """

    kind: str
    attributes: Mapping[str, str]
    source: str
    error: float


@attrs.frozen
class Calibration:
    """The groups built from a set of residuals, and the scale their intervals carry."""

    entries: tuple[Entry, ...]
    #: The factor by which every group's two-level interval was widened about its centre
    #: so that 80 % of each left-out source's rows fall inside (1: no source left out).
    scale: float
    #: Rows the scale was chosen on (those with a group when their source was left out).
    scored: int


def _quantiles(values, weights, levels: Sequence[float]) -> list[float]:
    """Weighted quantiles (each value at the middle of its weight, linear between)."""
    import numpy as np

    order = np.argsort(values, kind="stable")
    v = np.asarray(values, dtype=float)[order]
    w = np.asarray(weights, dtype=float)[order]
    total = w.sum()
    middle = (np.cumsum(w) - w / 2) / total
    return [float(np.interp(q, middle, v)) for q in levels]


def spread(errors: Mapping[str, Sequence[float]],
           coverage: float = COVERAGE) -> tuple[float, float, float]:
    """The two-level interval of a group's errors by source: (low, centre, high) of the
    sum of a source effect (each source's median, every source alike) and a deviation
    within a source (a row's error less its source's median, every source's rows alike).

    Three sources whose effects are 0.2, 1.2 and 3.2, each with rows 0.2 either side:

    >>> [round(x, 3) for x in spread({"a": [0.0, 0.4], "b": [1.0, 1.4], "c": [3.0, 3.4, 3.2]})]
    [0.0, 1.2, 3.4]
    """
    import numpy as np

    medians, deviations, weights = [], [], []
    for values in errors.values():
        centre = float(np.median(values))
        medians.append(centre)
        deviations += [v - centre for v in values]
        weights += [1.0 / len(values)] * len(values)
    sums = (np.asarray(medians)[:, None] + np.asarray(deviations)[None, :]).ravel()
    tail = (1 - coverage) / 2
    low, centre, high = _quantiles(sums, np.tile(weights, len(medians)), (tail, 0.5, 1 - tail))
    return low, centre, high


def _grouped(residuals: Sequence[Residual]) -> dict[tuple, dict[str, list[float]]]:
    """Every group's errors by source: each attribute its value or "any"."""
    found: dict[tuple, dict[str, list[float]]] = {}
    for r in residuals:
        options = [(ANY, r.attributes[a]) if a in r.attributes else (ANY,) for a in ATTRIBUTES]
        for values in product(*options):
            found.setdefault((r.kind, *values), {}).setdefault(r.source, []).append(r.error)
    return found


def _raw(residuals: Sequence[Residual], min_rows: int, min_sources: int,
         coverage: float) -> list[tuple[Entry, float]]:
    """Each qualifying group with its unscaled two-level interval and centre."""
    out = []
    for key, by_source in sorted(_grouped(residuals).items()):
        n = sum(len(v) for v in by_source.values())
        attributes = dict(zip(ATTRIBUTES, key[1:]))
        entry = Entry(key[0], attributes, n, 0.0, 0.0, len(by_source))
        if not entry.qualifies(min_rows, min_sources):
            continue
        low, centre, high = spread(by_source, coverage)
        out.append((attrs.evolve(entry, low=low, high=high), centre))
    return out


def _scaled(entry: Entry, centre: float, scale: float) -> Entry:
    return attrs.evolve(entry, low=centre - scale * (centre - entry.low),
                        high=centre + scale * (entry.high - centre))


def _needed(entry: Entry, centre: float, error: float) -> float:
    """The scale at which ``entry``'s interval just reaches ``error``."""
    if error >= centre:
        return (error - centre) / max(entry.high - centre, 1e-9)
    return (centre - error) / max(centre - entry.low, 1e-9)


def calibrate(residuals: Sequence[Residual], *, min_rows: int = MIN_ROWS,
              min_sources: int = MIN_SOURCES, coverage: float = COVERAGE) -> Calibration:
    """The interval groups of held-out residuals (see the module docstring): two-level
    intervals, widened by the scale at which, leaving each source out in turn and
    rebuilding the groups from the others, ``coverage`` of its rows fall inside the
    interval :func:`choose` gives them.
    """
    raw = _raw(residuals, min_rows, min_sources, coverage)
    needed: list[float] = []
    for source in sorted({r.source for r in residuals}):
        rest = [r for r in residuals if r.source != source]
        groups = _raw(rest, min_rows, min_sources, coverage)
        centres = {id(e): c for e, c in groups}
        entries = [e for e, _ in groups]
        for r in residuals:
            if r.source != source:
                continue
            entry = choose(entries, r.kind, r.attributes, min_rows, min_sources)
            if entry is not None:
                needed.append(_needed(entry, centres[id(entry)], r.error))
    scale = 1.0
    if needed:
        # The conformal rank: the smallest scale that covers ``coverage`` of the rows.
        ordered = sorted(needed)
        scale = ordered[min(len(ordered) - 1, math.ceil(coverage * (len(ordered) + 1)) - 1)]
    return Calibration(tuple(_scaled(e, c, scale) for e, c in raw), scale, len(needed))
