"""A ledger row at concurrency > 1: a closed loop of the row's clients in the serving
simulator.

Benchmarks such as ``vllm bench serve --max-concurrency``, genai-perf's concurrency mode
and a static batch of ``concurrency`` requests keep that many requests in flight: each
client sends its next request as soon as the previous one ends. The simulator runs
exactly that (:meth:`infermodel.simulator.WorkloadSpec.closed_loop`, no think time)
with

* the row's fixed lengths (``isl`` prompt tokens, ``osl`` output tokens: the
  benchmarks send fixed lengths), seed :data:`SEED`;
* :data:`ROUNDS` requests per client; every client starts at once, so the first round
  is the warm-up and the last one drains the server: the statistics are taken over
  the requests in between (rounds 2 … ROUNDS − 1);
* continuous batching with chunked prefill (the simulator's ``chunked`` policy: paged
  admission, preemption by recompute) at the engine's per-iteration token budget and
  running-sequence cap on the row's card (the scenario's ``engine_chunk_tokens`` and
  ``engine_max_sequences``: vLLM's ``max_num_batched_tokens``/``max_num_seqs``, SGLang's
  ``chunked_prefill_size``, TensorRT-LLM's ``max_num_tokens``/``max_batch_size``;
  :data:`CHUNK_TOKENS` where the scenario names no engine);
* the iteration cost of the row's scenario (:meth:`CostModel.from_quantities`: its
  weights, cache bytes, bandwidth × MBU, peak × prefill MFU, ``t0``, all-reduce
  terms and the cache budget after the engine's reserve).

The measured figure maps to the run as follows (``unspecified`` is read as the mean):

* ``ttft_ms``: first-token time of the measured requests (mean, median or p99);
* ``tpot_ms``: each measured request's (last − first token) / (osl − 1);
* ``itl_ms``: the mean is the pooled mean gap of the measured requests (with equal
  output lengths, the mean TPOT); the median and p99 are the pooled gaps of the whole
  run, warm-up round included (the simulator pools gaps over a run);
* ``output_tokens_per_s``: the whole system's output rate, concurrency × osl / mean
  end-to-end time of the measured requests (Little's law for a closed loop with no
  think time).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = ["CHUNK_TOKENS", "MAX_TOKENS", "ROUNDS", "SEED", "ServingFigures", "simulate_row",
           "unsupported"]

#: Requests each client sends (the first and last rounds are not measured).
ROUNDS = 4
SEED = 0
#: The most tokens (prompt and output) a row's closed loop may simulate, ROUNDS ×
#: concurrency × (isl + osl): a bound on the run's work, about three times the largest
#: shipped row's.
MAX_TOKENS = 50_000_000
#: The per-iteration token budget where a scenario names no engine (vLLM V1's
#: max_num_batched_tokens for online serving on large cards, SGLang's
#: chunked_prefill_size, TensorRT-LLM's max_num_tokens: 8,192 each).
CHUNK_TOKENS = 8192


@attrs.frozen
class ServingFigures:
    """The measured requests' figures of one closed-loop run (seconds, tokens/s)."""

    ttft: np.ndarray  # per measured request
    tpot: np.ndarray  # per measured request (empty when osl = 1)
    itl_mean: float
    itl_median: float
    itl_p99: float
    output_tokens_per_s: float
    measured: int  # requests the statistics are taken over
    warmup: int  # requests of the first round, not measured
    preemptions: int

    def value(self, metric: str, statistic: str) -> float:
        """The figure a ledger row's ``metric`` and ``statistic`` name (``ms`` metrics
        in milliseconds).
        """
        if metric == "output_tokens_per_s":
            return self.output_tokens_per_s
        if metric == "itl_ms":
            chosen = {"median": self.itl_median, "p99": self.itl_p99}.get(statistic, self.itl_mean)
            return chosen * 1e3
        sample = self.ttft if metric == "ttft_ms" else self.tpot
        if sample.size == 0:
            return math.nan
        if statistic == "median":
            return float(np.median(sample)) * 1e3
        if statistic == "p99":
            return float(np.quantile(sample, 0.99)) * 1e3
        return float(np.mean(sample)) * 1e3


def simulate_row(cost, isl: int, osl: int, concurrency: int, *, chunk_tokens: int = CHUNK_TOKENS,
                 max_sequences: float = math.inf) -> ServingFigures:
    """Run ``concurrency`` clients of fixed ``isl``/``osl`` requests on ``cost`` with the
    chunked policy at ``chunk_tokens`` per iteration and at most ``max_sequences``
    running (see the module docstring).
    """
    from ..simulator import FixedLength, Policy, WorkloadSpec, run_record
    from ..simulator.metrics import weighted_quantile

    running = int(min(max(concurrency, 1), max_sequences))
    policy = Policy("chunked", chunk_tokens=int(chunk_tokens), max_running=running)
    spec = WorkloadSpec(prompt=FixedLength(isl), output=FixedLength(osl),
                        count=ROUNDS * concurrency, sampler="numpy")
    record, _ = run_record(cost, spec.closed_loop(concurrency, 0.0, SEED), policy)
    measured = slice(concurrency, (ROUNDS - 1) * concurrency)
    ttft = (record.first_token - record.arrivals)[measured]
    e2e = (record.last_token - record.arrivals)[measured]
    spans = (record.last_token - record.first_token)[measured]
    gaps = (record.outputs[measured] - 1).astype(np.float64)
    tpot = spans[gaps > 0] / gaps[gaps > 0]
    itl_mean = float(spans.sum() / gaps.sum()) if gaps.sum() > 0 else math.nan
    if record.gap_values.size:
        itl_median, itl_p99 = weighted_quantile(record.gap_values, record.gap_weights, (0.5, 0.99))
    else:
        itl_median = itl_p99 = math.nan
    throughput = concurrency * osl / float(np.mean(e2e))
    return ServingFigures(ttft, tpot, itl_mean, float(itl_median), float(itl_p99), throughput,
                          int(ttft.size), concurrency, int(record.preemptions))


def unsupported(row) -> str | None:
    """Why a row's closed loop is not simulated (None: it is)."""
    tokens = ROUNDS * row.concurrency * (row.isl + row.osl)
    if tokens > MAX_TOKENS:
        return (f"the closed loop would simulate {tokens:,} tokens ({ROUNDS} requests from each "
                f"of {row.concurrency:,} clients, {row.isl:,} + {row.osl:,} tokens each), over "
                f"the {MAX_TOKENS:,}-token bound of a ledger row's simulation")
    return None
