"""A ledger row at concurrency > 1: its benchmark's load in the serving simulator.

The row's ``load`` (:data:`infermodel.accuracy.ledger.LOADS`) says how requests were sent:

* ``closed``: ``vllm bench serve --max-concurrency`` and genai-perf's concurrency mode
  keep ``concurrency`` requests in flight: each client sends its next request as soon as
  the previous one ends. The simulator runs exactly that
  (:meth:`infermodel.simulator.WorkloadSpec.closed_loop`, no think time), with the rounds
  described below;
* ``offline``: every one of the ``concurrency`` requests arrives at time 0 and none after
  (a static batch, vLLM's ``benchmark_throughput``, ``trtllm-bench throughput``); every
  request is measured, and the output rate is the output tokens over the time the last
  one ends;
* ``poisson``: ``requests`` requests arrive at random at ``request_rate`` per second
  (seed :data:`SEED`); every request is measured, and the output rate is the output
  tokens over the time from the first arrival to the last token. A cap on the requests
  in flight below ``requests`` is not simulated (the row gives a reason).

A closed loop runs

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
  think time; an offline or open-loop run's output tokens over its duration);
  ``output_tokens_per_s_per_gpu`` that rate over the row's gpus, and
  ``total_tokens_per_s`` that rate × (isl + osl) / osl (:func:`rate_metric`).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = ["CHUNK_TOKENS", "MAX_TOKENS", "RATE_METRICS", "ROUNDS", "SEED", "ServingFigures",
           "rate_metric", "run_row", "run_row_packed", "simulate_row", "unsupported"]

#: Metrics that are the system's output rate, scaled (:func:`rate_metric`).
RATE_METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s")
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
        if metric in RATE_METRICS:
            return self.output_tokens_per_s  # the system's output rate: see rate_metric
        if metric == "itl_ms":
            if statistic in ("p90", "p95"):
                return math.nan  # the simulator pools median and p99 gaps only
            chosen = {"median": self.itl_median, "p99": self.itl_p99}.get(statistic, self.itl_mean)
            return chosen * 1e3
        sample = self.ttft if metric == "ttft_ms" else self.tpot
        if sample.size == 0:
            return math.nan
        if statistic == "median":
            return float(np.median(sample)) * 1e3
        if statistic in ("p90", "p95", "p99"):
            return float(np.quantile(sample, int(statistic[1:]) / 100)) * 1e3
        return float(np.mean(sample)) * 1e3


def simulate_row(cost, family: str, isl: int, osl: int, concurrency: int, *,
                 chunk_tokens: int = CHUNK_TOKENS, max_sequences: float = math.inf,
                 load: str = "closed", requests: int | None = None,
                 request_rate: float | None = None) -> ServingFigures:
    """Run the row's load of fixed ``isl``/``osl`` requests on ``cost`` with the chunked
    policy at ``chunk_tokens`` per iteration and at most ``max_sequences`` running (see
    the module docstring): ``concurrency`` closed-loop clients, an offline run of
    ``concurrency`` requests, or ``requests`` Poisson arrivals at ``request_rate``.
    ``family`` names the row's engine family (its scenario sets the budget and cap).
    """
    from ..simulator import FixedLength, Policy, Workload, WorkloadSpec, run_record
    from ..simulator.metrics import weighted_quantile

    running = int(min(max(concurrency, 1), max_sequences))
    policy = Policy("chunked", chunk_tokens=int(chunk_tokens), max_running=running)
    if load == "closed" and requests is not None and requests > concurrency:
        # A benchmark that states how many requests it sent reports all of them, the
        # first wave (every client at once) included, as vllm bench serve does.
        spec = WorkloadSpec(prompt=FixedLength(isl), output=FixedLength(osl), count=requests,
                            sampler="numpy")
        workload = spec.closed_loop(concurrency, 0.0, SEED)
        measured, warmup = slice(0, requests), 0
    elif load == "closed":
        spec = WorkloadSpec(prompt=FixedLength(isl), output=FixedLength(osl),
                            count=ROUNDS * concurrency, sampler="numpy")
        workload = spec.closed_loop(concurrency, 0.0, SEED)
        measured, warmup = slice(concurrency, (ROUNDS - 1) * concurrency), concurrency
    elif load == "offline":
        workload = Workload.from_arrays(np.zeros(concurrency), np.full(concurrency, isl),
                                        np.full(concurrency, osl))
        measured, warmup = slice(0, concurrency), 0
    else:
        if requests is None or request_rate is None:
            raise ValueError("a poisson load needs requests and request_rate")
        spec = WorkloadSpec(prompt=FixedLength(isl), output=FixedLength(osl), count=requests,
                            sampler="numpy")
        workload = spec.generate(request_rate, SEED)
        measured, warmup = slice(0, requests), 0
    record, _ = run_record(cost, workload, policy)
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
    if load == "closed" and warmup:
        throughput = concurrency * osl / float(np.mean(e2e))
    else:
        duration = float(np.max(record.last_token) - np.min(record.arrivals))
        throughput = float(np.sum(record.outputs)) / duration
    return ServingFigures(ttft, tpot, itl_mean, float(itl_median), float(itl_p99), throughput,
                          int(ttft.size), warmup, int(record.preemptions))


def run_row(cost, family: str, isl: int, osl: int, concurrency: int, chunk_tokens: int,
            max_sequences: float, load: str, requests: int | None,
            request_rate: float | None) -> ServingFigures | str:
    """:func:`simulate_row`, a failure given as its reason (what a ledger row's prediction
    holds; a worker process returns it as it is).
    """
    from ..simulator import SimulationError

    try:
        return simulate_row(cost, family, isl, osl, concurrency, chunk_tokens=chunk_tokens,
                            max_sequences=max_sequences, load=load, requests=requests,
                            request_rate=request_rate)
    except SimulationError as exc:
        return f"the closed-loop simulation failed: {exc}"


def run_row_packed(arguments: tuple) -> ServingFigures | str:
    """:func:`run_row` of one tuple (a process pool's map)."""
    return run_row(*arguments)


def rate_metric(row, output_tokens_per_s):
    """A rate metric of ``row`` from the system's output rate (arrays broadcast):
    itself, per card (``output_tokens_per_s_per_gpu``), or with the input tokens
    (``total_tokens_per_s``: every request brings ``isl`` input tokens per ``osl`` output).

    >>> from infermodel.accuracy.ledger import LedgerRow
    >>> row = LedgerRow("a", "u", "vllm", "h100-sxm", 4, "m", None, "", "", 4, 1, 300, 100, 8,
    ...                 "total_tokens_per_s", "mean", 10.0)
    >>> rate_metric(row, 1000.0)
    4000.0
    """
    if row.metric == "output_tokens_per_s_per_gpu":
        return output_tokens_per_s / row.gpus
    if row.metric == "total_tokens_per_s":
        return output_tokens_per_s * (row.isl + row.osl) / row.osl
    return output_tokens_per_s


def unsupported(row) -> str | None:
    """Why a row's load is not simulated (None: it is)."""
    if row.metric == "itl_ms" and row.statistic in ("p90", "p95"):
        return (f"the simulator pools the inter-token gaps' median and p99, not their "
                f"{row.statistic}")
    if row.load == "poisson" and row.requests is not None and row.concurrency < row.requests:
        return (f"a Poisson load capped at {row.concurrency:,} requests in flight is not "
                "simulated (only an uncapped one: concurrency = requests)")
    if row.load == "closed":
        tokens = ROUNDS * row.concurrency * (row.isl + row.osl)
        what = f"{ROUNDS} requests from each of {row.concurrency:,} clients"
    else:
        count = row.concurrency if row.load == "offline" else (row.requests or 0)
        tokens = count * (row.isl + row.osl)
        what = f"{count:,} requests"
    if tokens > MAX_TOKENS:
        return (f"the {row.load} run would simulate {tokens:,} tokens ({what}, {row.isl:,} + "
                f"{row.osl:,} tokens each), over the {MAX_TOKENS:,}-token bound of a ledger "
                "row's simulation")
    return None
