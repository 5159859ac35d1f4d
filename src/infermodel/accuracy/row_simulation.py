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
  admission, preemption by recompute) at the engine family's per-iteration token budget
  (:data:`ENGINE_POLICIES`, 8,192 for each), with no limit on running sequences other
  than the KV cache (the ledger's engines were configured
  with batch limits at or above each row's concurrency);
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

__all__ = ["BURST", "CLIENTS", "ENGINE_POLICIES", "INFERENCEMAX", "MAX_TOKENS", "ROUNDS", "SEED", "Client",
           "PoolFigures", "ServingFigures", "simulate_pools", "simulate_row", "unsupported"]

#: Requests each client sends (the first and last rounds are not measured).
ROUNDS = 4


@attrs.frozen
class Client:
    """How a benchmark client drives a closed loop: requests per client (``rounds``),
    whether the first round (every client starting at once) and the last (the server
    draining) are measured, and the length law: uniform on ``range_ratio × L … L`` for
    a nominal length L (1: every request exactly L).
    """

    name: str
    rounds: int
    warmup_measured: bool
    range_ratio: float
    source: str

    def lengths(self, nominal: int):
        """The length law of requests of ``nominal`` tokens."""
        from ..simulator import FixedLength, UniformLength

        low = max(1, int(self.range_ratio * nominal))
        return FixedLength(nominal) if low >= nominal else UniformLength(low, nominal)

    def measured(self, clients: int) -> slice:
        """The requests (in issue order) the statistics are taken over."""
        if self.warmup_measured:
            return slice(0, self.rounds * clients)
        return slice(clients, (self.rounds - 1) * clients)

    def mean_length(self, nominal: int) -> float:
        """The mean request length for ``nominal`` tokens."""
        low = max(1, int(self.range_ratio * nominal))
        return (low + nominal) / 2


#: The shipped ledger's reading of a concurrency benchmark: fixed lengths, ROUNDS
#: requests per client, the warm-up and draining rounds left out.
DEFAULT = Client("fixed lengths, warm-up excluded", ROUNDS, False, 1.0,
                 "the published benchmarks' fixed-length concurrency runs")
#: InferenceMAX's client (vLLM's benchmark_serving): 10 × C prompts at concurrency C
#: and infinite rate, every request measured (the first round starts all at once), input
#: and output lengths uniform between 0.8 × and 1 × the nominal lengths, EOS ignored.
INFERENCEMAX = Client("InferenceMAX (benchmark_serving, 10 prompts per client, range ratio "
                      "0.8)", 10, True, 0.8,
                      "InferenceMAX README, 'Benchmark Client Configuration' (--num-prompts "
                      "CONC × 10, --max-concurrency CONC, --request-rate inf, "
                      "--random-range-ratio 0.8, --ignore-eos)")
#: One request per client, every client starting at once and every request measured: a
#: burst of ``concurrency`` fixed-length requests (a static batch seen by a client).
BURST = Client("one request per client, all at once (a burst)", 1, True, 1.0,
               "a burst's mean first-token time grows in proportion to the clients")
#: Clients by the name a ledger row gives (``LedgerRow.client``; empty: DEFAULT).
CLIENTS = {"": DEFAULT, "inferencemax": INFERENCEMAX, "burst": BURST}
SEED = 0
#: The most tokens (prompt and output) a row's closed loop may simulate, ROUNDS ×
#: concurrency × (isl + osl): a bound on the run's work, about three times the largest
#: shipped row's.
MAX_TOKENS = 50_000_000
#: The per-iteration token budget (vLLM V1's max_num_batched_tokens for online serving
#: on large cards, SGLang's chunked_prefill_size, TensorRT-LLM's max_num_tokens: 8,192
#: each).
CHUNK_TOKENS = 8192

#: The chunked policy's token budget per engine family, with the engine setting it
#: stands for.
ENGINE_POLICIES = {
    "vllm": (CHUNK_TOKENS, "chunked prefill, 8,192 tokens per iteration (vLLM V1's "
                           "max_num_batched_tokens)"),
    "sglang": (CHUNK_TOKENS, "chunked prefill, 8,192 tokens per iteration (SGLang's "
                             "chunked_prefill_size)"),
    "trtllm": (CHUNK_TOKENS, "8,192 tokens per iteration (TensorRT-LLM's max_num_tokens; its "
                             "in-flight batching fits prompts into that budget)"),
}


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


def simulate_row(cost, family: str, isl: int, osl: int, concurrency: int,
                 client: Client = DEFAULT) -> ServingFigures:
    """Run ``concurrency`` clients of ``isl``/``osl`` requests (``client``'s rounds and
    length law) on ``cost`` with ``family``'s policy (see the module docstring).
    """
    from ..simulator import Policy, WorkloadSpec, run_record
    from ..simulator.metrics import weighted_quantile

    budget, _ = ENGINE_POLICIES[family]
    policy = Policy("chunked", chunk_tokens=budget, max_running=max(concurrency, 1))
    spec = WorkloadSpec(prompt=client.lengths(isl), output=client.lengths(osl),
                        count=client.rounds * concurrency, sampler="numpy")
    record, _ = run_record(cost, spec.closed_loop(concurrency, 0.0, SEED), policy)
    measured = client.measured(concurrency)
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
    outputs = float(np.mean(record.outputs[measured]))
    throughput = concurrency * outputs / float(np.mean(e2e))
    warmup = 0 if client.warmup_measured else concurrency
    return ServingFigures(ttft, tpot, itl_mean, float(itl_median), float(itl_p99), throughput,
                          int(ttft.size), warmup, int(record.preemptions))


@attrs.frozen
class PoolFigures:
    """A disaggregated deployment's figures (seconds, tokens/s): the measured requests'
    first-token times and the decode pool's time per output token.
    """

    ttft: np.ndarray  # per measured request, the cache transfer included
    tpot: float
    output_tokens_per_s: float
    decode_running: int  # sequences one decode server runs

    def value(self, metric: str, statistic: str) -> float:
        """The figure a ledger row's ``metric`` and ``statistic`` name."""
        if metric == "output_tokens_per_s":
            return self.output_tokens_per_s
        if metric in ("tpot_ms", "itl_ms"):
            return self.tpot * 1e3
        if statistic == "median":
            return float(np.median(self.ttft)) * 1e3
        if statistic == "p99":
            return float(np.quantile(self.ttft, 0.99)) * 1e3
        return float(np.mean(self.ttft)) * 1e3


def simulate_pools(prefill_cost, decode_cost, pools, isl: int, osl: int, concurrency: int,
                   *, transfer: float = 0.0, client: Client = DEFAULT) -> PoolFigures:
    """``concurrency`` clients of fixed ``isl``/``osl`` requests on disaggregated ``pools``.

    * **Decode**: the clients are spread evenly over the decode servers, each running at
      most ``batch × attention_dp`` sequences (the pool's configured batch) and no more
      than its cache holds; a step decodes every running sequence, their contexts spread
      evenly over ``isl … isl + osl − 1``, so the time per output token is that step's
      time (the decode servers run no prefills).
    * **Prefill**: the clients are spread evenly over the prefill servers; each server is a
      closed loop of its share of the clients (``client``'s rounds, lengths and measured
      requests), each request a prompt whose first token ends it, the client's next
      prompt following after its decode
      (``(osl − 1) · TPOT``) and the cache transfer; the server runs at most
      ``batch × attention_dp`` prompts at once in iterations of :data:`CHUNK_TOKENS`.
    * TTFT is the prefill server's first-token time plus the cache transfer (the decode
      server emits the first token once it holds the cache).
    """
    from ..simulator import FixedLength, Policy, WorkloadSpec, run_record

    decode, prefill = pools.decode, pools.prefill
    per_decode = math.ceil(concurrency / decode.workers)
    held = max(1, int(decode_cost.cache_memory // (decode_cost.kv_bytes_per_token * (isl + osl))))
    running = max(1, min(per_decode, decode.batch * decode.attention_dp, held))
    prompt, output = client.mean_length(isl), client.mean_length(osl)
    contexts = np.linspace(prompt, prompt + output - 1, running).round().astype(int)
    tpot = float(decode_cost.iteration_time(contexts.tolist(), []))
    clients = max(1, math.ceil(concurrency / prefill.workers))
    policy = Policy("chunked", chunk_tokens=CHUNK_TOKENS,
                    max_running=max(1, prefill.batch * prefill.attention_dp))
    spec = WorkloadSpec(prompt=client.lengths(isl), output=FixedLength(1),
                        count=client.rounds * clients, sampler="numpy")
    think = (output - 1) * tpot + transfer
    record, _ = run_record(prefill_cost, spec.closed_loop(clients, think, SEED), policy)
    measured = client.measured(clients)
    ttft = (record.first_token - record.arrivals)[measured] + transfer
    e2e = float(np.mean(ttft)) + (output - 1) * tpot
    return PoolFigures(ttft, tpot, concurrency * output / e2e, running)


def unsupported(row) -> str | None:
    """Why a row's closed loop is not simulated (None: it is)."""
    rounds = CLIENTS[row.client].rounds
    tokens = rounds * row.concurrency * (row.isl + row.osl)
    if tokens > MAX_TOKENS:
        return (f"the closed loop would simulate {tokens:,} tokens ({rounds} requests from each "
                f"of {row.concurrency:,} clients, {row.isl:,} + {row.osl:,} tokens each), over "
                f"the {MAX_TOKENS:,}-token bound of a ledger row's simulation")
    return None
