"""What a run records: per request, per token segment, per block of iterations, and pooled.

Both engines fill a :class:`RunRecord` (every request's arrival, first and last token,
largest gap and evictions; the pooled inter-token gaps; the run's counters), from which
:func:`infermodel.simulator.metrics.compute_metrics` computes the metrics.  The
reference engine stamps every token; the fast engine keeps less and builds the same
record at the end:

* :class:`Blocks` — per *block* of iterations (a run of identical composition, or one
  iteration in which prefills complete): its first iteration, the end times of its
  first and last iterations, the gap into it and the largest gap inside it;
* token *segments* ``(request, first iteration, last iteration)`` — a request received
  a token at the end of every iteration of a segment, which begins and ends on block
  boundaries;
* :class:`GapHistogram` — the pooled gaps as distinct values with their counts, built
  as the run goes;
* :class:`TokenTimes` — per request, first and last token time and largest gap:
  :func:`token_times` computes them from the blocks and segments, and
  :func:`timeline_record` makes the run's record of them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import attrs
import numpy as np

from .cost import CostModel
from .policies import Policy
from .workload import Workload

__all__ = [
    "DISTINCT_BUDGET",
    "SKETCH_BITS",
    "Blocks",
    "Counters",
    "GapHistogram",
    "Point",
    "RunRecord",
    "Segments",
    "TokenTimes",
    "first_admissions",
    "series_of",
    "timeline_record",
    "token_times",
]

#: A scheduling decision of a run's time series: (time, waiting, running, cached positions).
Point = tuple[float, int, int, int]
#: Token segments, one entry per segment: (request, first iteration, last iteration).
Segments = tuple[np.ndarray, np.ndarray, np.ndarray]
#: A run's totals by name (``end``, ``preemptions``, ``iterations``, ...).
Counters = dict[str, Any]


@attrs.define(eq=False)
class RunRecord:
    """Raw results of one run, per request and pooled.

    ``gap_values``/``gap_weights`` hold the pooled inter-token gaps: each value occurs
    ``weight`` times (``gap_weights`` None means every weight is 1).
    """

    arrivals: np.ndarray
    outputs: np.ndarray
    prompts: np.ndarray
    first_token: np.ndarray
    last_token: np.ndarray
    max_gap: np.ndarray  # 0 for a request with a single token
    gap_values: np.ndarray
    gap_weights: np.ndarray | None
    end_time: float
    preemptions: int
    recomputed_tokens: int
    iterations: int
    busy_slot_steps: int
    decode_steps: int
    slots: int
    rollbacks: int = 0
    request_preemptions: np.ndarray | None = None  # per request: evictions that discarded cache
    request_rollbacks: np.ndarray | None = None  # per request: admissions undone, nothing cached
    closed: bool = False  # closed-loop load: the population is bounded, never unstable
    series: dict[str, np.ndarray] | None = None  # time, waiting, running, cache_use
    transfer: np.ndarray | None = None  # per request: cache transfer time (disaggregated)
    swapped_tokens: int = 0  # cached positions copied to host memory by swap preemption
    gaps_exact: bool = True  # False: the gaps were binned by GapHistogram's sketch
    gap_max: float | None = None  # the largest gap, exact even when the gaps were binned
    prefix_hits: np.ndarray | None = None  # per request: prompt tokens found in the prefix cache
    prefix_evicted: int = 0  # positions of idle prefix blocks evicted to make room
    admitted: np.ndarray | None = None  # per request: time of its first admission (NaN: none)


def first_admissions(times: list[float]) -> np.ndarray:
    """Per-request first admission times from a list holding -1 for "never admitted"."""
    admitted = np.asarray(times, dtype=np.float64)
    return np.where(admitted < 0, np.nan, admitted)


#: Distinct gap values kept exactly; past this many a run's gaps are binned.
DISTINCT_BUDGET = 1 << 21
#: Mantissa bits a binned gap keeps: every binned gap is within 2**-17 of its value.
SKETCH_BITS = 16
_PENDING = 1 << 18


class GapHistogram:
    """The pooled inter-token gaps of a run as (value → count), built as they come.

    A gap repeats an iteration's duration once per request that received tokens at
    both of its ends, so the distinct values are far fewer than the gaps (Lab 3's
    100,000-request run: 172 million gaps, a few million values).  Values are kept
    exactly, sorted with their counts, and quantiles from them are exact.  Past
    :data:`DISTINCT_BUDGET` distinct values the histogram becomes a sketch: each value
    is replaced by the middle of its bin of floats sharing the top
    :data:`SKETCH_BITS` mantissa bits (relative error at most 2**-17), counts stay
    exact and the maximum is kept exactly.
    """

    def __init__(self, budget: int = DISTINCT_BUDGET):
        self.budget = budget
        self.values = np.empty(0)
        self.counts = np.empty(0, dtype=np.int64)
        self.exact = True
        self.maximum = -math.inf
        self._values: list[np.ndarray] = []
        self._weights: list[np.ndarray] = []
        self._pending = 0

    def add(self, values: np.ndarray, weights: np.ndarray | int) -> None:
        """Count each of ``values`` ``weights`` times (an array or one whole number)."""
        values = np.asarray(values, dtype=np.float64)
        weights = np.broadcast_to(np.asarray(weights, dtype=np.int64), values.shape)
        positive = weights > 0
        if not positive.all():
            values, weights = values[positive], weights[positive]
        if not values.size:
            return
        self.maximum = max(self.maximum, float(values.max()))
        self._values.append(values)
        self._weights.append(np.array(weights, dtype=np.int64))
        self._pending += values.size
        if self._pending > max(_PENDING, self.values.size // 4):
            self._compact()

    def merge(self, other: GapHistogram) -> None:
        other._compact()
        self.exact = self.exact and other.exact
        self.add(other.values, other.counts)

    def _compact(self) -> None:
        """Merge the pending gaps into the sorted (value, count) arrays."""
        if not self._values:
            return
        values = np.concatenate(self._values)
        weights = np.concatenate(self._weights)
        self._values, self._weights, self._pending = [], [], 0
        if not self.exact:
            values = _binned(values)
        unique, where = np.unique(values, return_inverse=True)
        # float sums of whole numbers below 2**53 are exact
        counts = np.bincount(where, weights=weights).astype(np.int64)
        del values, weights, where
        at = np.searchsorted(self.values, unique)
        hit = at < self.values.size
        hit[hit] = self.values[at[hit]] == unique[hit]
        self.counts[at[hit]] += counts[hit]
        new = ~hit
        if new.any():
            self.values = np.insert(self.values, at[new], unique[new])
            self.counts = np.insert(self.counts, at[new], counts[new])
        if self.exact and self.values.size > self.budget:
            self.exact = False
            unique, where = np.unique(_binned(self.values), return_inverse=True)
            self.counts = np.bincount(where, weights=self.counts).astype(np.int64)
            self.values = unique

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted distinct values and their counts."""
        self._compact()
        return self.values, self.counts


def _binned(values: np.ndarray) -> np.ndarray:
    """Non-negative gaps to the middle of their bin (the top SKETCH_BITS mantissa bits)."""
    shift = 52 - SKETCH_BITS
    bits = np.maximum(values, 0.0).view(np.int64)
    bits = ((bits >> shift) << shift) | (1 << (shift - 1))
    return bits.view(np.float64)


class Blocks(NamedTuple):
    """What the fast engine keeps of a run's timeline (see the module text); one entry per block."""

    start: np.ndarray  # first iteration
    first: np.ndarray  # end time of the first iteration
    last: np.ndarray  # end time of the last iteration
    entry: np.ndarray  # first − the previous iteration's end time
    inner: np.ndarray  # largest gap between consecutive iterations inside (0 for one)
    gaps: GapHistogram  # the gaps inside blocks, counted once per decoder


class TokenTimes:
    """Per request: first and last token time, first admission (a static batch's
    dispatch) and largest gap; the pooled gaps.
    """

    def __init__(self, count: int):
        self.first = np.empty(count)
        self.last = np.empty(count)
        self.admitted = np.full(count, np.nan)
        self.max_gap = np.zeros(count)
        self.gaps = GapHistogram()

    def batch(self, batch: slice, outputs: np.ndarray, prefill_end: float, ends: np.ndarray) -> None:
        """A static batch: every request's first token at ``prefill_end``, its n-th at
        ``ends[n − 2]``; gap j (from ``prefill_end`` on) is shared by the requests
        with more than j + 1 tokens.
        """
        self.first[batch] = prefill_end
        later = outputs > 1
        self.last[batch] = prefill_end
        if not ends.size:
            return
        gaps = np.diff(ends, prepend=prefill_end)
        below = np.cumsum(np.bincount(outputs - 1, minlength=ends.size + 1)[: ends.size])
        self.gaps.add(gaps, outputs.size - below)
        index = np.maximum(outputs - 2, 0)
        self.last[batch] = np.where(later, ends[index], prefill_end)
        self.max_gap[batch] = np.where(later, np.maximum.accumulate(gaps)[index], 0.0)


def series_of(points: list[Point] | None, cost: CostModel) -> dict[str, np.ndarray] | None:
    """The time series of a run: at every scheduling decision, the requests waiting,
    the requests running and the share of the cache in use.
    """
    if points is None:
        return None
    data = np.array(points, dtype=np.float64).reshape(-1, 4)
    return {"time": data[:, 0], "waiting": data[:, 1], "running": data[:, 2],
            "cache_use": data[:, 3] * cost.kv_bytes_per_token / cost.cache_memory}


_CHUNK = 1 << 18


def token_times(count: int, blocks: Blocks, segments: Segments) -> TokenTimes:
    """Per-request timestamps and pooled gaps from the blocks and token segments.

    A segment ``(r, s, e)`` says request ``r`` received a token at the end of every
    iteration from ``s`` to ``e``; ``s`` is the first iteration of a block and ``e``
    the last of one.  Its gaps are those inside its blocks (already counted in
    ``blocks.gaps``) and the entry gaps of its blocks after the first; between two
    segments of a request the gap is ``T[s'] − T[e]``.
    """
    request, first, last = segments
    order = np.lexsort((first, request))
    request, first, last = request[order], first[order], last[order]
    at_first = np.searchsorted(blocks.start, first, side="right") - 1
    at_last = np.searchsorted(blocks.start, last, side="right") - 1
    tokens = TokenTimes(count)
    tokens.gaps = blocks.gaps
    # the first segment of each request holds its first token, the last its last
    starts = np.flatnonzero(np.r_[True, request[1:] != request[:-1]])
    ends = np.r_[starts[1:] - 1, request.size - 1]
    tokens.first[request[starts]] = blocks.first[at_first[starts]]
    tokens.last[request[ends]] = blocks.last[at_last[ends]]
    same = request[1:] == request[:-1]
    between = blocks.first[at_first[1:][same]] - blocks.last[at_last[:-1][same]]
    tokens.gaps.add(between, 1)
    # Block b's entry gap is counted by every segment holding blocks b − 1 and b.
    size = blocks.start.size
    spans = at_last > at_first
    change = (np.bincount(at_first[spans] + 1, minlength=size + 1)
              - np.bincount(at_last[spans] + 1, minlength=size + 1))
    level = np.cumsum(change[:size])
    del change
    for start in range(0, size, _CHUNK):  # in slices: the histogram merges as it goes
        tokens.gaps.add(blocks.entry[start : start + _CHUNK], level[start : start + _CHUNK])
    del level
    # Largest gap of a segment: inside its first block, or inside or into a later one.
    within = blocks.inner[at_first]
    if spans.any():
        later = np.r_[np.maximum(blocks.entry, blocks.inner), 0.0]
        bounds = np.empty(2 * int(spans.sum()), dtype=np.int64)
        bounds[0::2] = at_first[spans] + 1
        bounds[1::2] = at_last[spans] + 1
        within[spans] = np.maximum(within[spans], np.maximum.reduceat(later, bounds)[0::2])
    np.maximum.at(tokens.max_gap, request, within)
    if between.size:
        np.maximum.at(tokens.max_gap, request[1:][same], between)
    return tokens


def timeline_record(workload: Workload, policy: Policy, tokens: TokenTimes, counters: Counters,
                    arrivals: np.ndarray) -> RunRecord:
    """The run's record from its token times and counters (the fast engine's)."""
    values, weights = tokens.gaps.result()
    return RunRecord(
        arrivals=arrivals,
        outputs=workload.outputs,
        prompts=workload.prompts,
        first_token=tokens.first,
        last_token=tokens.last,
        admitted=counters.get("admitted", tokens.admitted),
        max_gap=tokens.max_gap,
        gap_values=values,
        gap_weights=weights,
        gaps_exact=tokens.gaps.exact,
        gap_max=None if tokens.gaps.exact or not values.size else tokens.gaps.maximum,
        end_time=float(counters["end"]),
        preemptions=int(counters["preemptions"]),
        rollbacks=int(counters["rollbacks"]),
        request_preemptions=counters.get("request_preemptions"),
        request_rollbacks=counters.get("request_rollbacks"),
        closed=workload.clients is not None,
        recomputed_tokens=int(counters["recomputed"]),
        swapped_tokens=int(counters.get("swapped", 0)),
        prefix_hits=counters.get("prefix_hits"),
        prefix_evicted=int(counters.get("prefix_evicted", 0)),
        iterations=int(counters["iterations"]),
        busy_slot_steps=int(counters["busy"]),
        decode_steps=int(counters["decode_steps"]),
        slots=policy.batch_size if policy.kind == "static" else policy.max_running,
    )
