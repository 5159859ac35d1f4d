"""The metrics of one simulated run, computed from its record.

Both engines fill a :class:`~infermodel.simulator.records.RunRecord`;
:func:`compute_metrics` turns it into the
metrics dictionary (base units: seconds, tokens/s, requests/s).  Percentiles use
numpy's default ("linear") quantile, as Module 10's Lab 3 does; the fast engine keeps
inter-token gaps as (value, multiplicity) pairs and :func:`weighted_quantile` repeats
numpy's arithmetic on them so both engines give the same numbers.

Metric names (all floats; counts are whole numbers stored as floats):

* ``requests``, ``realised_rate`` (count / last arrival), ``duration`` (time of the
  last token), ``mean_prompt_tokens``, ``mean_output_tokens``;
* ``ttft_p50/p90/p95/p99/max`` (first token − arrival), ``itl_p50/p90/p95/p99/max``
  (every gap between consecutive tokens of a request, pooled over requests),
  ``tpot_p50/p90/p95/p99`` ((last − first)/(n_out − 1), requests with n_out > 1 only),
  ``e2e_p50/p90/p95/p99/max`` (last token − arrival), ``e2e_mean`` (with ``e2e_p95``
  the Inference lab's "Mean latency" and "p95", "Many requests, one pass"), and any
  other percentile an objective of the SLO names (``ttft_p99_9``);
* ``queue_wait_mean``, ``queue_wait_p95``: time from arrival to the request's first
  admission (a static batch's dispatch, or a continuous scheduler taking it from the
  queue), the lab's "Wait";
* ``throughput_tokens_per_s`` (all output tokens / duration), ``requests_per_s``
  (requests / duration), ``goodput`` (requests meeting every objective themselves —
  TTFT ≤ ``slo_ttft``, every gap, or their TPOT, ≤ ``slo_itl``, TPOT and E2E within
  theirs — per second of duration), ``goodput_fraction``, ``slo_ttft``, ``slo_itl``,
  ``slo_met`` (the run meets its objectives and is not overloaded);
* ``prefix_hit_tokens`` (prompt tokens found in the prefix cache at each request's
  first admission), ``prefix_hit_rate`` (those over all prompt tokens),
  ``prefix_request_hit_rate`` (share of requests that found at least one block),
  ``prefix_evicted_tokens`` (positions of idle prefix blocks evicted to make room);
* ``preemptions``, ``recomputed_tokens`` (cached positions discarded by preemption),
  ``iterations`` (model iterations run);
* ``slot_use`` = busy slot-steps / (slots × decode steps) (Inference lab, "Many
  requests, one pass"): a busy slot-step is a token after a request's first, a decode
  step an iteration that emits one; slots are the static batch size, or
  ``max_running`` for continuous policies; ``mean_batch`` = busy slot-steps / decode
  steps;
* Little's law over the arrival window [0, A] (A = last arrival):
  ``little_l`` = (1/A)∫₀^A n(t) dt from arrivals and departures, ``little_lambda_w`` =
  realised rate × mean E2E, ``little_ratio`` = their ratio (near 1 when the system is
  stable; the gap is time spent in the system after A);
* ``in_system_growth_per_s``: least-squares slope of the number in the system, sampled
  at each arrival in the second half of the window (≈ 0 when stable, ≈ λ − μ past
  capacity); ``queue_growth_per_s`` and ``queue_growth_t``, ``ttft_trend`` and
  ``ttft_trend_t``: slopes of the queue (second half) and of TTFT (whole window) over
  batch means, with their t statistics, which decide ``overloaded``
  (:func:`overloaded`);
* ``n_ttft_samples``, ``n_itl_samples``, ``n_tpot_samples``: sample counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .policies import SLO, SLO_METRICS, percentile_key
from .records import RunRecord

__all__ = [
    "METRIC_NAMES",
    "QUANTILES",
    "batch_trend",
    "compute_metrics",
    "overload_state",
    "overloaded",
    "request_tpot",
    "samples",
    "weighted_quantile",
]

QUANTILES = (0.5, 0.9, 0.95, 0.99)

METRIC_NAMES = (
    "requests", "realised_rate", "duration", "mean_prompt_tokens", "mean_output_tokens",
    "ttft_p50", "ttft_p90", "ttft_p95", "ttft_p99", "ttft_max",
    "itl_p50", "itl_p90", "itl_p95", "itl_p99", "itl_max",
    "tpot_p50", "tpot_p90", "tpot_p95", "tpot_p99",
    "e2e_p50", "e2e_p90", "e2e_p95", "e2e_p99", "e2e_max", "e2e_mean",
    "queue_wait_mean", "queue_wait_p95",
    "throughput_tokens_per_s", "requests_per_s", "goodput", "goodput_fraction",
    "slo_ttft", "slo_itl",
    "transfer_time_mean", "prefix_hit_rate", "prefix_request_hit_rate", "prefix_hit_tokens",
    "prefix_evicted_tokens", "preemptions", "rollbacks", "recompute_preemptions", "recomputed_tokens",
    "swapped_tokens", "iterations",
    "slot_use", "mean_batch",
    "little_l", "little_lambda_w", "little_ratio", "in_system_growth_per_s", "ttft_trend", "ttft_trend_t",
    "queue_growth_per_s", "queue_growth_t", "overloaded", "slo_met",
    "n_ttft_samples", "n_itl_samples", "n_tpot_samples",
)


def weighted_quantile(values: np.ndarray, weights: np.ndarray | None, quantiles: Sequence[float]) -> list[float]:
    """Quantiles of the sample in which ``values[i]`` occurs ``weights[i]`` times
    (weights may be 0), with the same arithmetic as ``numpy.quantile(...,
    method="linear")`` on the expanded sample.

    >>> weighted_quantile(np.array([3.0, 1.0, 7.0]), np.array([1, 3, 0]), [0.5, 1.0])
    [1.0, 3.0]
    >>> [float(x) for x in np.quantile([1.0, 1.0, 1.0, 3.0], [0.5, 1.0])]
    [1.0, 3.0]
    """
    values = np.asarray(values, dtype=np.float64)
    if weights is None:
        return [float(x) for x in np.quantile(values, list(quantiles))]
    weights = np.asarray(weights)
    total = int(weights.sum(dtype=np.int64))
    if total <= 0:
        return [math.nan] * len(quantiles)
    plan = []
    for q in quantiles:
        index = (total - 1) * np.float64(q)
        if index >= total - 1:
            lower = upper = total - 1
        else:
            lower = int(np.floor(index))
            upper = lower + 1
        plan.append((index, lower, upper))
    ranks = sorted({rank for _, lower, upper in plan for rank in (lower, upper)})
    found = dict(zip(ranks, _select(values, weights, ranks)))
    results = []
    for index, lower, upper in plan:
        a, b = found[lower], found[upper]
        gamma = index - np.floor(index)
        difference = b - a
        value = b - difference * (1 - gamma) if gamma >= 0.5 else a + difference * gamma
        results.append(float(value))
    return results


_SORT_AT_MOST = 1 << 15
_BIN_BITS = 16


def _sorted_pick(values: np.ndarray, weights: np.ndarray, ranks: list[int]) -> list[float]:
    order = np.argsort(values)  # ties need no order: equal values are interchangeable
    cumulative = np.cumsum(weights[order], dtype=np.int64)
    return [float(v) for v in values[order][np.searchsorted(cumulative, ranks, side="right")]]


def _select(values: np.ndarray, weights: np.ndarray, ranks: list[int]) -> list[float]:
    """The values at 0-based ``ranks`` (sorted) of the weighted sample, without sorting
    it all.  Non-negative floats order like their bit patterns read as integers, so the
    top bits of ``bits − min(bits)`` are monotone bins that are roughly logarithmic in
    the value (tight clusters of gaps still spread over many bins).  Count the weight
    per bin and look for each rank inside its own bin only; each level narrows the bit
    spread by 2**16, so the recursion ends within four levels.
    """
    if values.size <= _SORT_AT_MOST or values.min() < 0:
        return _sorted_pick(values, weights, ranks)
    bits = values.view(np.int64)
    low = int(bits.min())
    spread = int(bits.max()) - low
    if spread == 0:
        return [float(values[0])] * len(ranks)
    shift = max(spread.bit_length() - _BIN_BITS, 0)
    bins = bits - low
    bins >>= shift
    cumulative = np.cumsum(np.bincount(bins, weights=weights))
    where = np.searchsorted(cumulative, ranks, side="right")
    wanted = np.zeros(cumulative.size, dtype=bool)
    wanted[where] = True
    keep = wanted[bins]
    kept_values, kept_weights, kept_bins = values[keep], weights[keep], bins[keep]
    del bins, keep
    results: list[float] = []
    for chosen in np.unique(where):
        inside = kept_bins == chosen
        before = int(cumulative[chosen - 1]) if chosen else 0
        local = [rank - before for rank, b in zip(ranks, where) if b == chosen]
        results.extend(_select(kept_values[inside], kept_weights[inside], local))
    return results


def _quantiles(sample: np.ndarray, quantiles: Sequence[float] = QUANTILES) -> list[float]:
    if sample.size == 0:
        return [math.nan] * len(quantiles)
    return [float(x) for x in np.quantile(sample, list(quantiles))]


def request_tpot(record: RunRecord) -> np.ndarray:
    """Each request's TPOT, (last − first token) / (output − 1); 0 for a one-token request."""
    outputs = record.outputs
    several = outputs > 1
    tpot = np.zeros(outputs.size)
    tpot[several] = ((record.last_token[several] - record.first_token[several])
                     / (outputs[several] - 1))
    return tpot


def samples(record: RunRecord, metric: str) -> np.ndarray:
    """The per-request samples of ``ttft``, ``tpot`` (requests with more than one token)
    or ``e2e`` (ITL is pooled over gaps: see :func:`weighted_quantile`).
    """
    if metric == "ttft":
        return record.first_token - record.arrivals
    if metric == "e2e":
        return record.last_token - record.arrivals
    if metric == "tpot":
        return request_tpot(record)[record.outputs > 1]
    raise KeyError(metric)


def _gap_quantiles(record: RunRecord, quantiles: Sequence[float]) -> tuple[list[float], int]:
    gap_count = int(
        record.gap_values.size if record.gap_weights is None else record.gap_weights.sum(dtype=np.int64)
    )
    if not gap_count:
        return [math.nan] * len(quantiles), 0
    return weighted_quantile(record.gap_values, record.gap_weights, quantiles), gap_count


def _latencies(record: RunRecord, slo: SLO) -> tuple[dict[str, float], int]:
    """Percentiles of TTFT, pooled ITL, TPOT and E2E (the standard ones and any an
    objective names), their maxima, and the pooled gap count.
    """
    out: dict[str, float] = {}
    extra = {metric: [q / 100 for m, q, _ in slo.targets() if m == metric
                      and q / 100 not in QUANTILES] for metric in SLO_METRICS}
    (*itl, itl_max), gap_count = _gap_quantiles(record, (*QUANTILES, *extra["itl"], 1.0))
    if gap_count and record.gap_max is not None:
        itl_max = record.gap_max
    for metric in SLO_METRICS:
        wanted = (*QUANTILES, *extra[metric])
        values = itl if metric == "itl" else _quantiles(samples(record, metric), wanted)
        out.update({f"{metric}_{percentile_key(q * 100)}": v for q, v in zip(wanted, values)})
    ttft, e2e = samples(record, "ttft"), samples(record, "e2e")
    out.update(ttft_max=float(ttft.max()), itl_max=itl_max, e2e_max=float(e2e.max()),
               e2e_mean=float(np.mean(e2e)))
    return out, gap_count


def compute_metrics(record: RunRecord, slo: SLO) -> dict[str, float]:
    """The metrics of one run (see the module docstring for every name)."""
    arrivals, outputs = record.arrivals, record.outputs
    count = arrivals.size
    end = record.end_time
    ttft = samples(record, "ttft")
    e2e = samples(record, "e2e")
    tpot = request_tpot(record)
    latencies, gap_count = _latencies(record, slo)
    good = int(np.count_nonzero(slo.request_meets(ttft, record.max_gap, tpot, e2e)))
    last_arrival = float(arrivals[-1])
    realised = count / last_arrival if last_arrival > 0 else math.inf

    metrics: dict[str, float] = dict(latencies)
    metrics["requests"] = float(count)
    metrics["realised_rate"] = realised
    metrics["duration"] = end
    metrics["mean_prompt_tokens"] = float(np.mean(record.prompts))
    metrics["mean_output_tokens"] = float(np.mean(outputs))
    metrics["queue_wait_mean"], metrics["queue_wait_p95"] = _waits(record)
    metrics["throughput_tokens_per_s"] = float(outputs.sum()) / end if end > 0 else math.inf
    metrics["requests_per_s"] = count / end if end > 0 else math.inf
    metrics["goodput"] = good / end if end > 0 else math.inf
    metrics["goodput_fraction"] = good / count
    metrics["slo_ttft"] = float(slo.ttft)
    metrics["slo_itl"] = float(slo.itl)
    metrics["transfer_time_mean"] = float(np.mean(record.transfer)) if record.transfer is not None else 0.0
    hits = record.prefix_hits if record.prefix_hits is not None else np.zeros(count, dtype=np.int64)
    metrics["prefix_hit_rate"] = float(hits.sum()) / float(np.sum(record.prompts))
    metrics["prefix_request_hit_rate"] = float(np.count_nonzero(hits)) / count
    metrics["prefix_hit_tokens"] = float(hits.sum())
    metrics["prefix_evicted_tokens"] = float(record.prefix_evicted)
    metrics["preemptions"] = float(record.preemptions)
    metrics["rollbacks"] = float(record.rollbacks)
    metrics["recompute_preemptions"] = float(record.preemptions - record.rollbacks)
    metrics["recomputed_tokens"] = float(record.recomputed_tokens)
    metrics["swapped_tokens"] = float(record.swapped_tokens)
    metrics["iterations"] = float(record.iterations)
    if record.decode_steps:
        metrics["slot_use"] = record.busy_slot_steps / (record.slots * record.decode_steps)
        metrics["mean_batch"] = record.busy_slot_steps / record.decode_steps
    else:
        metrics["slot_use"] = metrics["mean_batch"] = math.nan
    metrics.update(_load(record, realised, e2e, ttft))
    metrics["overloaded"] = float(not record.closed and overloaded(metrics))
    metrics["slo_met"] = float(slo.passes(metrics) and not metrics["overloaded"])
    metrics["n_ttft_samples"] = float(count)
    metrics["n_itl_samples"] = float(gap_count)
    metrics["n_tpot_samples"] = float(np.count_nonzero(outputs > 1))
    # METRIC_NAMES order first, then any percentile an objective asked for.
    return {**{name: metrics[name] for name in METRIC_NAMES}, **metrics}


def _load(record: RunRecord, realised: float, e2e: np.ndarray, ttft: np.ndarray) -> dict[str, float]:
    """Little's law over the arrival window [0, A], the growth of the number in the
    system and of the queue, and the TTFT trend (the overload verdict reads them).
    """
    arrivals, departures = record.arrivals, record.last_token
    last_arrival = float(arrivals[-1])
    out: dict[str, float] = {}
    if last_arrival > 0:
        inside = float(np.sum(np.minimum(departures, last_arrival) - arrivals))
        out["little_l"] = inside / last_arrival
        out["little_lambda_w"] = realised * float(np.mean(e2e))
        out["little_ratio"] = (out["little_l"] / out["little_lambda_w"]
                               if out["little_lambda_w"] > 0 else math.nan)
    else:
        out["little_l"] = out["little_lambda_w"] = out["little_ratio"] = math.nan
    # Arrival times near the float range (a rate of 1e-300/s) overflow the squares of
    # the regressions: their slopes are then undefined (NaN), not a warning.
    with np.errstate(over="ignore", invalid="ignore"):
        out["in_system_growth_per_s"] = _growth(arrivals, departures)
        out["ttft_trend"], out["ttft_trend_t"] = batch_trend(arrivals, ttft)
        out["queue_growth_per_s"], out["queue_growth_t"] = _queue_growth(record)
    return out


def _waits(record: RunRecord) -> tuple[float, float]:
    """Mean and 95th percentile of the time from arrival to first admission (the
    scheduler taking the request from the queue); NaN where the engine did not record it.
    """
    if record.admitted is None or np.isnan(record.admitted).any():
        return math.nan, math.nan
    wait = record.admitted - record.arrivals
    return float(np.mean(wait)), float(np.quantile(wait, 0.95))


#: A run is overloaded when its queue grows by more than this share of the arrival rate
#: (requests waiting per second), or its TTFT by more than this many seconds per second
#: of arrivals, and the growth is statistically clear (:data:`OVERLOAD_T`).
OVERLOAD_GROWTH = 0.05

#: A TTFT trend is also material when, over the run's arrival window, it adds more than
#: this share of the median TTFT: a card near its capacity whose TTFT grows by 20 ms per
#: second of arrivals (below :data:`OVERLOAD_GROWTH`) still doubles a 0.2 s median within
#: ten seconds, and its percentiles then depend on the run's length.
OVERLOAD_RISE = 0.5

#: Batches of consecutive samples whose means the growth tests regress (batch means: the
#: samples of a queue are strongly correlated, the means of long batches nearly not).
OVERLOAD_BATCHES = 10

#: A growth counts only when its t statistic over the batch means (slope / standard
#: error, 8 degrees of freedom) exceeds this: one-sided p below 0.2 %.  A short run's
#: noise, or the filling of an empty system, is not a trend.
OVERLOAD_T = 4.0


def overloaded(metrics: Mapping[str, float]) -> bool:
    """Past saturation, by a statistical test on growth: the queue (requests arrived and
    not yet admitted, over the second half of the arrival window) grows by more than
    :data:`OVERLOAD_GROWTH` × the realised rate, or TTFT trends upward by more than
    :data:`OVERLOAD_GROWTH` s per s of arrivals or by more than :data:`OVERLOAD_RISE` ×
    the median TTFT over the arrival window (requests / realised rate; used when the
    metrics carry ``requests`` and ``ttft_p50``), each with a t statistic over
    :data:`OVERLOAD_BATCHES` batch means above :data:`OVERLOAD_T`.  Percentiles of such
    a run depend on how many requests were simulated, not on a steady state.

    >>> overloaded({"queue_growth_per_s": 2.0, "queue_growth_t": 9.0, "realised_rate": 10.0,
    ...             "ttft_trend": 0.0, "ttft_trend_t": 0.0})
    True
    >>> overloaded({"queue_growth_per_s": 2.0, "queue_growth_t": 1.5, "realised_rate": 10.0,
    ...             "ttft_trend": 0.0, "ttft_trend_t": 0.0})
    False
    """
    return overload_state(metrics) == "overloaded"


def overload_state(metrics: Mapping[str, float]) -> str:
    """``"overloaded"`` (a material growth, statistically clear), ``"unclear"`` (a
    material growth the test cannot yet tell from noise: simulate more requests) or
    ``"stable"``.
    """
    rate = metrics["realised_rate"]
    tests = ((metrics["queue_growth_per_s"], metrics["queue_growth_t"],
              OVERLOAD_GROWTH * rate if math.isfinite(rate) else math.inf),
             (metrics["ttft_trend"], metrics["ttft_trend_t"],
              min(OVERLOAD_GROWTH, _relative_rise(metrics))))
    state = "stable"
    for slope, t, material in tests:
        if not (math.isfinite(slope) and slope > material):
            continue
        if t > OVERLOAD_T:
            return "overloaded"
        state = "unclear"
    return state


def _relative_rise(metrics: Mapping[str, float]) -> float:
    """The TTFT slope (s per s of arrivals) that adds :data:`OVERLOAD_RISE` × the median
    TTFT over the arrival window; infinite where the window or the median is unknown.

    >>> _relative_rise({"requests": 200.0, "realised_rate": 20.0, "ttft_p50": 0.2})
    0.01
    """
    window = metrics.get("requests", math.nan) / metrics["realised_rate"]
    median = metrics.get("ttft_p50", math.nan)
    if not (math.isfinite(window) and window > 0 and math.isfinite(median) and median > 0):
        return math.inf
    return OVERLOAD_RISE * median / window


def batch_trend(x: np.ndarray, y: np.ndarray, batches: int = OVERLOAD_BATCHES) -> tuple[float, float]:
    """Least-squares slope of the batch means of y on those of x (consecutive batches of
    equal count) and its t statistic; NaN with fewer than 3 samples per batch.
    """
    if x.size < 3 * batches:
        return math.nan, math.nan
    starts = np.linspace(0, x.size, batches + 1).astype(np.int64)
    sizes = np.diff(starts)
    return _slope(np.add.reduceat(x, starts[:-1]) / sizes, np.add.reduceat(y, starts[:-1]) / sizes)


def _queue_growth(record: RunRecord) -> tuple[float, float]:
    """Growth of the queue (requests arrived and not yet admitted; the number in the
    system where admissions are not recorded) at each arrival in the second half of the
    arrival window, per second, with its batch-means t statistic.
    """
    arrivals = record.arrivals
    last = float(arrivals[-1])
    late = np.flatnonzero(arrivals >= last / 2)
    if last <= 0 or late.size < 3 * OVERLOAD_BATCHES:
        return math.nan, math.nan
    times = arrivals[late]
    admitted = record.admitted
    leave = (record.last_token if admitted is None or np.isnan(admitted).any() else admitted)
    left = np.searchsorted(np.sort(leave), times, side="right")
    return batch_trend(times, ((late + 1) - left).astype(np.float64))


def _slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x and its t statistic (NaN with fewer than 3
    points or no spread).
    """
    if x.size < 3:
        return math.nan, math.nan
    centred = x - x.mean()
    spread = float(np.dot(centred, centred))
    if spread <= 0:
        return math.nan, math.nan
    slope = float(np.dot(centred, y - y.mean()) / spread)
    residual = (y - y.mean()) - slope * centred
    variance = float(np.dot(residual, residual)) / (x.size - 2)
    error = math.sqrt(variance / spread)
    return slope, (slope / error if error > 0 else math.inf)


def _growth(arrivals: np.ndarray, departures: np.ndarray) -> float:
    """Slope of the number in the system at each arrival in the window's second half."""
    last = float(arrivals[-1])
    late = np.flatnonzero(arrivals >= last / 2)
    if late.size < 3 or last <= 0:
        return math.nan
    times = arrivals[late]
    left = np.searchsorted(np.sort(departures), times, side="right")
    in_system = (late + 1) - left
    centred = times - times.mean()
    spread = float(np.dot(centred, centred))
    if spread == 0:
        return math.nan
    return float(np.dot(centred, in_system - in_system.mean()) / spread)
