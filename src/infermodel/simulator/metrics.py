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
* ``ttft_p50/p90/p99/max`` (first token − arrival), ``itl_p50/p90/p99/max`` (every
  gap between consecutive tokens of a request, pooled over requests),
  ``tpot_p50/p90/p99`` ((last − first)/(n_out − 1), requests with n_out > 1 only),
  ``e2e_p50/p90/p99/max`` (last token − arrival), ``e2e_mean`` and ``e2e_p95`` (the
  Inference lab's "Mean latency" and "p95", "Many requests, one pass");
* ``queue_wait_mean``, ``queue_wait_p95``: time from arrival to the request's first
  admission (a static batch's dispatch, or a continuous scheduler taking it from the
  queue), the lab's "Wait";
* ``throughput_tokens_per_s`` (all output tokens / duration), ``requests_per_s``
  (requests / duration), ``goodput`` (requests with TTFT ≤ ``slo_ttft`` and every gap
  ≤ ``slo_itl``, per second of duration), ``goodput_fraction``, ``slo_ttft``,
  ``slo_itl``;
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
  capacity);
* ``n_ttft_samples``, ``n_itl_samples``, ``n_tpot_samples``: sample counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .policies import SLO
from .records import RunRecord

__all__ = ["METRIC_NAMES", "QUANTILES", "compute_metrics", "overloaded", "weighted_quantile"]

QUANTILES = (0.5, 0.9, 0.99)

METRIC_NAMES = (
    "requests", "realised_rate", "duration", "mean_prompt_tokens", "mean_output_tokens",
    "ttft_p50", "ttft_p90", "ttft_p99", "ttft_max",
    "itl_p50", "itl_p90", "itl_p99", "itl_max",
    "tpot_p50", "tpot_p90", "tpot_p99",
    "e2e_p50", "e2e_p90", "e2e_p99", "e2e_max", "e2e_mean", "e2e_p95",
    "queue_wait_mean", "queue_wait_p95",
    "throughput_tokens_per_s", "requests_per_s", "goodput", "goodput_fraction",
    "slo_ttft", "slo_itl",
    "transfer_time_mean", "prefix_hit_rate", "prefix_request_hit_rate", "prefix_hit_tokens",
    "prefix_evicted_tokens", "preemptions", "rollbacks", "recompute_preemptions", "recomputed_tokens",
    "swapped_tokens", "iterations",
    "slot_use", "mean_batch",
    "little_l", "little_lambda_w", "little_ratio", "in_system_growth_per_s", "ttft_trend", "ttft_trend_t",
    "overloaded",
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


def _quantiles(sample: np.ndarray) -> list[float]:
    if sample.size == 0:
        return [math.nan] * len(QUANTILES)
    return [float(x) for x in np.quantile(sample, list(QUANTILES))]


def compute_metrics(record: RunRecord, slo: SLO) -> dict[str, float]:
    """The metrics of one run (see the module docstring for every name)."""
    arrivals, outputs = record.arrivals, record.outputs
    count = arrivals.size
    end = record.end_time
    ttft = record.first_token - arrivals
    e2e = record.last_token - arrivals
    several = outputs > 1
    tpot = (record.last_token[several] - record.first_token[several]) / (outputs[several] - 1)
    gap_count = int(
        record.gap_values.size if record.gap_weights is None else record.gap_weights.sum(dtype=np.int64)
    )
    if gap_count:
        *itl, itl_max = weighted_quantile(record.gap_values, record.gap_weights, (*QUANTILES, 1.0))
        if record.gap_max is not None:
            itl_max = record.gap_max
    else:
        itl, itl_max = [math.nan] * len(QUANTILES), math.nan
    good = int(np.count_nonzero((ttft <= slo.ttft) & (record.max_gap <= slo.itl)))
    last_arrival = float(arrivals[-1])
    realised = count / last_arrival if last_arrival > 0 else math.inf

    metrics: dict[str, float] = {}
    metrics["requests"] = float(count)
    metrics["realised_rate"] = realised
    metrics["duration"] = end
    metrics["mean_prompt_tokens"] = float(np.mean(record.prompts))
    metrics["mean_output_tokens"] = float(np.mean(outputs))
    for name, sample in (("ttft", ttft),):
        p50, p90, p99 = _quantiles(sample)
        metrics.update({f"{name}_p50": p50, f"{name}_p90": p90, f"{name}_p99": p99,
                        f"{name}_max": float(sample.max())})
    metrics["itl_p50"], metrics["itl_p90"], metrics["itl_p99"] = itl
    metrics["itl_max"] = itl_max
    metrics["tpot_p50"], metrics["tpot_p90"], metrics["tpot_p99"] = _quantiles(tpot)
    p50, p90, p99 = _quantiles(e2e)
    metrics.update({"e2e_p50": p50, "e2e_p90": p90, "e2e_p99": p99, "e2e_max": float(e2e.max())})
    metrics["e2e_mean"] = float(np.mean(e2e))
    metrics["e2e_p95"] = float(np.quantile(e2e, 0.95))
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
    # Little's law over the arrival window [0, A].
    departures = record.last_token
    if last_arrival > 0:
        inside = float(np.sum(np.minimum(departures, last_arrival) - arrivals))
        metrics["little_l"] = inside / last_arrival
        metrics["little_lambda_w"] = realised * float(np.mean(e2e))
        metrics["little_ratio"] = (
            metrics["little_l"] / metrics["little_lambda_w"] if metrics["little_lambda_w"] > 0 else math.nan
        )
    else:
        metrics["little_l"] = metrics["little_lambda_w"] = metrics["little_ratio"] = math.nan
    metrics["in_system_growth_per_s"] = _growth(arrivals, departures)
    metrics["ttft_trend"], metrics["ttft_trend_t"] = _slope(arrivals, ttft)
    metrics["overloaded"] = float(not record.closed and overloaded(metrics))
    metrics["n_ttft_samples"] = float(count)
    metrics["n_itl_samples"] = float(gap_count)
    metrics["n_tpot_samples"] = float(tpot.size)
    return metrics


def _waits(record: RunRecord) -> tuple[float, float]:
    """Mean and 95th percentile of the time from arrival to first admission (the
    scheduler taking the request from the queue); NaN where the engine did not record it.
    """
    if record.admitted is None or np.isnan(record.admitted).any():
        return math.nan, math.nan
    wait = record.admitted - record.arrivals
    return float(np.mean(wait)), float(np.quantile(wait, 0.95))


#: A run is flagged overloaded when its waiting time grows by more than this many
#: seconds per second of arrivals, or the number in the system grows by more than
#: this share of the arrival rate over the second half of the arrival window.
OVERLOAD_GROWTH = 0.05


def overloaded(metrics: Mapping[str, float]) -> bool:
    """Past saturation: TTFT trends upward with the arrival time (least-squares slope
    ``ttft_trend`` above :data:`OVERLOAD_GROWTH`), or the number of requests in the
    system keeps growing (``in_system_growth_per_s`` above :data:`OVERLOAD_GROWTH` ×
    the realised rate).  Percentiles of such a run depend on how many requests were
    simulated, not on a steady state.
    """
    growth, trend = metrics["in_system_growth_per_s"], metrics["ttft_trend"]
    rate, t = metrics["realised_rate"], metrics["ttft_trend_t"]
    grows = (metrics["requests"] >= OVERLOAD_MIN_REQUESTS and math.isfinite(growth)
             and math.isfinite(rate) and growth > OVERLOAD_GROWTH * rate)
    trending = math.isfinite(trend) and trend > OVERLOAD_GROWTH and t > OVERLOAD_T
    return bool(grows or trending)


#: The growth of the number in the system counts only over at least this many requests.
OVERLOAD_MIN_REQUESTS = 100

#: The TTFT trend counts only when its t statistic (slope / standard error) exceeds
#: this: a short run's noise is not a trend.
OVERLOAD_T = 4.0


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
