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

from .closed_loop import decode_running

__all__ = ["BURST", "CHUNK_TOKENS", "CLIENTS", "GAP", "GAP_ROUNDS", "INFERENCEMAX", "MAX_TOKENS", "RATE_METRICS", "ROUNDS",
           "SEED", "Client", "PoolFigures", "ServingFigures", "at", "beyond_bound", "cost_model", "rate_metric",
           "run_row",
           "run_row_packed", "simulate_pools", "simulate_row", "unsupported"]

#: Metrics that are the system's output rate, scaled (:func:`rate_metric`).
RATE_METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s")
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
#: Requests per client of the silicon ledger's gap-analysis runs (the file does not say;
#: see :data:`GAP`).
GAP_ROUNDS = 4
#: The measured kernel tables' gap-analysis runs: GAP_ROUNDS fixed-length requests per
#: client, every client starting at once and every request measured (the first round's
#: queue of prompts averaged with the closed loop after it). Their first-token time grows
#: with the clients more slowly than a burst's and faster than a steady closed loop's;
#: the rounds are estimated on TensorRT-LLM's gap-analysis points and checked on vLLM's
#: and SGLang's, held out (``docs/accuracy.rst``, the silicon ledger).
GAP = Client(f"gap analysis ({GAP_ROUNDS} fixed-length requests per client, the first round "
             "measured)", GAP_ROUNDS, True, 1.0,
             "aiconfigurator-core 0.12 silicon_sample.csv, aic-auto-gap-analysis sources (the "
             "rounds estimated on one engine's points, checked on the others')")
#: Clients by the name a ledger row gives (``LedgerRow.client``; empty: DEFAULT).
CLIENTS = {"": DEFAULT, "inferencemax": INFERENCEMAX, "burst": BURST, "gap": GAP}
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
                 request_rate: float | None = None, client: Client = DEFAULT,
                 request_time: float = 0.0, hold: float = 0.0) -> ServingFigures:
    """Run the row's load of ``isl``/``osl`` requests on ``cost`` with the chunked policy
    at ``chunk_tokens`` per iteration and at most ``max_sequences`` running (see the
    module docstring): ``concurrency`` closed-loop clients (``client``'s rounds, length
    law and measured requests), an offline run of ``concurrency`` requests, or
    ``requests`` Poisson arrivals at ``request_rate``. ``family`` names the row's engine
    family (its scenario sets the budget and cap). ``request_time`` is a request's way
    through the server outside the engine's iterations: it adds to each first-token and
    end-to-end time (a closed loop's throughput is over that longer cycle). The engine's
    iterations are simulated without it: fixed-length clients lock into phase with their
    arrivals, and a think time of even a millisecond shifts that phase (the analytic
    closed loop, :func:`.closed_loop.closed_loop`, takes the same time per request).
    ``hold`` is a scheduler's hold of a request that arrives while others run
    (:func:`scheduler_hold`), added the same way to every request but those that arrive
    at the start, on an idle engine.
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
        spec = WorkloadSpec(prompt=client.lengths(isl), output=client.lengths(osl),
                            count=client.rounds * concurrency, sampler="numpy")
        workload = spec.closed_loop(concurrency, 0.0, SEED)
        measured = client.measured(concurrency)
        warmup = 0 if client.warmup_measured else concurrency
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
    held = np.where(record.arrivals > 0, hold, 0.0)[measured]
    ttft = (record.first_token - record.arrivals)[measured] + request_time + held
    e2e = (record.last_token - record.arrivals)[measured] + request_time + held
    spans = (record.last_token - record.first_token)[measured]
    gaps = (record.outputs[measured] - 1).astype(np.float64)
    tpot = spans[gaps > 0] / gaps[gaps > 0]
    itl_mean = float(spans.sum() / gaps.sum()) if gaps.sum() > 0 else math.nan
    if record.gap_values.size:
        itl_median, itl_p99 = weighted_quantile(record.gap_values, record.gap_weights, (0.5, 0.99))
    else:
        itl_median = itl_p99 = math.nan
    if load == "closed" and not (requests is not None and requests > concurrency):
        # Little's law over the measured requests (their mean output, for drawn lengths).
        outputs = float(np.mean(record.outputs[measured]))
        throughput = concurrency * outputs / float(np.mean(e2e))
    else:
        duration = float(np.max(record.last_token) - np.min(record.arrivals))
        throughput = float(np.sum(record.outputs)) / duration
    return ServingFigures(ttft, tpot, itl_mean, float(itl_median), float(itl_p99), throughput,
                          int(ttft.size), warmup, int(record.preemptions))


def run_row(cost, family: str, isl: int, osl: int, concurrency: int, chunk_tokens: int,
            max_sequences: float, load: str, requests: int | None,
            request_rate: float | None, client: str = "",
            request_time: float = 0.0, hold: float = 0.0) -> ServingFigures | str:
    """:func:`simulate_row`, a failure given as its reason (what a ledger row's prediction
    holds; a worker process returns it as it is); ``client`` names one of :data:`CLIENTS`.
    """
    from ..simulator import SimulationError

    try:
        return simulate_row(cost, family, isl, osl, concurrency, chunk_tokens=chunk_tokens,
                            max_sequences=max_sequences, load=load, requests=requests,
                            request_rate=request_rate, client=CLIENTS[client],
                            request_time=request_time, hold=hold)
    except SimulationError as exc:
        return f"the closed-loop simulation failed: {exc}"


def run_row_packed(arguments: tuple) -> ServingFigures | str:
    """:func:`run_row` of one tuple (a process pool's map)."""
    return run_row(*arguments)


def row_value(run, row) -> float | str:
    """The row's metric read from its simulated ``run`` (or the reason there is none)."""
    if isinstance(run, str):
        return run
    value = run.value(row.metric, row.statistic)
    if row.metric in RATE_METRICS:
        value = rate_metric(row, value)
    if not math.isfinite(value) or value <= 0:
        return f"the simulated {row.metric} is not a positive number ({value})"
    return value


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
        if metric in RATE_METRICS:
            return self.output_tokens_per_s  # the system's output rate: see rate_metric
        if metric in ("tpot_ms", "itl_ms"):
            return self.tpot * 1e3
        if statistic == "median":
            return float(np.median(self.ttft)) * 1e3
        if statistic == "p99":
            return float(np.quantile(self.ttft, 0.99)) * 1e3
        return float(np.mean(self.ttft)) * 1e3


def simulate_pools(prefill_cost, decode_cost, pools, isl: int, osl: int, concurrency: int,
                   *, transfer: float = 0.0, client: Client = DEFAULT,
                   request_time: float = 0.0, handoff_time: float = 0.0) -> PoolFigures:
    """``concurrency`` clients of fixed ``isl``/``osl`` requests on disaggregated ``pools``.

    * **Decode**: the clients in decode are spread evenly over the decode servers, each
      running at most ``batch × attention_dp`` sequences (the pool's configured batch) and
      no more than its cache holds; a step decodes every running sequence, their contexts
      spread evenly over ``isl … isl + osl − 1``, so the time per output token is that
      step's time (the decode servers run no prefills). The clients in decode are their
      share of the cycle spent decoding (:func:`.closed_loop.decode_running`: a prefill
      pool that queues keeps the others waiting for their first token), found by
      bisection (a prefill simulation for each batch tried, about log₂ of the clients).
    * **Prefill**: the clients are spread evenly over the prefill servers; each server is a
      closed loop of its share of the clients (``client``'s rounds, lengths and measured
      requests), each request a prompt whose first token ends it, the client's next
      prompt following after its decode
      (``(osl − 1) · TPOT``) and the cache transfer; the server runs at most
      ``batch × attention_dp`` prompts at once in iterations of :data:`CHUNK_TOKENS`.
    * TTFT is the prefill server's first-token time plus the cache transfer (the decode
      server emits the first token once it holds the cache), ``request_time``, the
      request's way through the server outside the iterations, and ``handoff_time``, the
      second hop where the router hands the request to the decode server after the
      prefill (:func:`.pools.handoff_time`); a client's cycle is that much longer.
    """
    from ..simulator import FixedLength, Policy, WorkloadSpec, run_record

    decode, prefill = pools.decode, pools.prefill
    held = max(1, int(decode_cost.cache_memory // (decode_cost.kv_bytes_per_token * (isl + osl))))
    cap = max(1, min(decode.batch * decode.attention_dp, held))
    prompt, output = client.mean_length(isl), client.mean_length(osl)
    clients = max(1, math.ceil(concurrency / prefill.workers))
    policy = Policy("chunked", chunk_tokens=CHUNK_TOKENS,
                    max_running=max(1, prefill.batch * prefill.attention_dp))
    spec = WorkloadSpec(prompt=client.lengths(isl), output=FixedLength(1),
                        count=client.rounds * clients, sampler="numpy")
    measured = client.measured(clients)
    runs: dict[int, tuple[float, np.ndarray]] = {}

    def cycle(running: int) -> tuple[float, float]:
        if running not in runs:
            contexts = np.linspace(prompt, prompt + output - 1, running).round().astype(int)
            tpot = float(decode_cost.iteration_time(contexts.tolist(), []))
            think = (output - 1) * tpot + transfer + request_time + handoff_time
            record, _ = run_record(prefill_cost, spec.closed_loop(clients, think, SEED), policy)
            runs[running] = tpot, (record.first_token - record.arrivals)[measured]
        tpot, first = runs[running]
        return tpot, float(np.mean(first))

    between = transfer + request_time + handoff_time
    running = decode_running(concurrency, decode.workers, cap, output, between, cycle)
    cycle(running)
    tpot, first = runs[running]
    ttft = first + between
    e2e = float(np.mean(ttft)) + (output - 1) * tpot
    return PoolFigures(ttft, tpot, concurrency * output / e2e, running)


def unsupported(row) -> str | None:
    """Why a row's load is not simulated (None: it is)."""
    if row.metric == "itl_ms" and row.statistic in ("p90", "p95"):
        return (f"the simulator pools the inter-token gaps' median and p99, not their "
                f"{row.statistic}")
    if row.load == "poisson" and row.requests is not None and row.concurrency < row.requests:
        return (f"a Poisson load capped at {row.concurrency:,} requests in flight is not "
                "simulated (only an uncapped one: concurrency = requests)")
    tokens, what = _work(row)
    if tokens > MAX_TOKENS:
        return (f"the {row.load} run would simulate {tokens:,} tokens ({what}, {row.isl:,} + "
                f"{row.osl:,} tokens each), over the {MAX_TOKENS:,}-token bound of a ledger "
                "row's simulation")
    return None


def beyond_bound(row) -> bool:
    """Whether the token bound is the only reason a closed or offline row is not
    simulated (its prediction then takes the analytic closed loop).
    """
    return (row.load in ("closed", "offline") and _work(row)[0] > MAX_TOKENS
            and not (row.metric == "itl_ms" and row.statistic in ("p90", "p95")))


def _work(row) -> tuple[int, str]:
    """The tokens a row's simulation would run, and what they are."""
    if row.load == "closed":
        rounds = CLIENTS[row.client].rounds
        return (rounds * row.concurrency * (row.isl + row.osl),
                f"{rounds} requests from each of {row.concurrency:,} clients")
    count = row.concurrency if row.load == "offline" else (row.requests or 0)
    return count * (row.isl + row.osl), f"{count:,} requests"


# ---------------------------------------------------------------------------------
# A row's compiled scenario as the simulator's iteration cost
# ---------------------------------------------------------------------------------


def cost_model(model, row, efficiency, *, batch: float | None = None):
    """The simulator's iteration cost of the row's scenario (``model``, a
    :class:`.predictions.RowModel`) at ``efficiency`` (an :class:`.predictions.Efficiency`): its
    roofline (the physical model's terms where it prices the row), or the iteration cost
    a plugin registers for the scenario (measured kernels price each iteration from its
    own prefill and decode counts).
    """
    from ..analyses.simulation.plan import iteration_cost
    from ..simulator import CostModel

    out = at(model, efficiency, float(row.concurrency if batch is None else batch))
    measured = iteration_cost(model.scenario, out) if model.scenario is not None else None
    return CostModel.from_quantities(out, measured=measured)


def request_time(model, efficiency) -> float:
    """A request's way through the server outside the engine's iterations, where the
    row's scenario states one (``request_overhead``: measured kernels do), else 0.
    """
    return at(model, efficiency, 1.0).get("request_overhead", 0.0)


def scheduler_hold(model, row, efficiency) -> float:
    """The wait of a request that arrives while the row's batch decodes, where the row's
    scenario states a scheduler that holds it (``scheduler_recv_hold``: reads of new
    requests every few decode iterations; ``batch_wait_hold``: prompts waiting for more;
    ``dp_balance_hold``: prompts waiting until every attention-DP rank holds one),
    at the running batch, else 0; added to the simulated times after the run, which the
    simulated engine does not hold. An offline run's requests are all read, and
    prefilled, before any decodes.
    """
    if row.load == "offline" or row.concurrency <= 1:
        return 0.0
    batch = min(float(row.concurrency), model.max_sequences, model.capacity)
    out = at(model, efficiency, max(batch, 1.0))
    return sum(out.get(name, 0.0)
               for name in ("scheduler_recv_hold", "batch_wait_hold", "dp_balance_hold"))


def at(model, efficiency, batch: float) -> dict[str, float]:
    """The row's scalar quantities at ``batch`` and ``efficiency``."""
    values = dict(model.inputs)
    values["batch"] = float(batch)
    for name, value in efficiency.values:
        if name in values:
            values[name] = value
    return {name: float(np.asarray(v).ravel()[0]) for name, v in model.compiled(values).items()
            if np.size(v) == 1}
