"""A disaggregated ledger row (prefill and decode pools, as the silicon ledger gives),
predicted from one server of each pool: simulated (:func:`.row_simulation.simulate_pools`)
or analytic (:func:`analytic_pools`); and the share of a row's decode step that measured
kernel tables time (:func:`measured_share`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from . import row_simulation
from .closed_loop import decode_running, prefill_pool_wait
from .ledger import LedgerRow
from .row_simulation import at, cost_model, request_time

if TYPE_CHECKING:
    from .predictions import Efficiency, RowModel, Simulations

__all__ = ["ANALYTIC_POOLS", "NO_ROOM", "POOLS", "analytic_pools", "handoff_time",
           "measured_share", "predict_pools", "simulated_pools", "transfer_time"]

NO_ROOM = ("the weights and one full-length sequence do not fit in the cards' memory "
           "after the runtime reserve")
#: How a disaggregated row was predicted (:attr:`.predictions.Prediction.method`).
POOLS, ANALYTIC_POOLS = "disaggregated pools", "disaggregated pools, analytic"


def predict_pools(models: tuple[RowModel, RowModel], row: LedgerRow, efficiency: Efficiency,
                  simulations: Simulations, loop: str) -> tuple[float | str, str]:
    """A disaggregated row's prediction and how it was made."""
    if loop == "analytic":
        return analytic_pools(models, row, efficiency), ANALYTIC_POOLS
    return simulated_pools(models, row, efficiency, simulations), POOLS


def simulated_pools(models: tuple[RowModel, RowModel], row: LedgerRow, efficiency: Efficiency,
                    simulations: Simulations) -> float | str:
    """A disaggregated row's metric (:func:`.row_simulation.simulate_pools`), each run
    once in ``simulations``.
    """
    from ..simulator import SimulationError

    key = (simulations.key(row, efficiency), "pools")
    if key not in simulations.runs:
        assert row.pools is not None
        prefill, decode = row.pools.prefill, row.pools.decode
        try:
            simulations.runs[key] = row_simulation.simulate_pools(
                cost_model(models[0], row, efficiency, batch=prefill.batch),
                cost_model(models[1], row, efficiency, batch=decode.batch * decode.attention_dp),
                row.pools, row.isl, row.osl, row.concurrency,
                transfer=transfer_time(models[0], row),
                client=row_simulation.CLIENTS[row.client],
                request_time=request_time(models[0], efficiency),
                handoff_time=handoff_time(models[1], row, efficiency))
        except SimulationError as exc:
            simulations.runs[key] = f"the disaggregated pools' simulation failed: {exc}"
    return row_simulation.row_value(simulations.runs[key], row)


def handoff_time(model: RowModel, row: LedgerRow, efficiency: Efficiency) -> float:
    """The second hop before the first token where the router hands the request to the
    decode server only after the prefill has answered (:attr:`.ledger.Pools.handoff`
    ``"sequential"``): the decode worker taking the request, pulling its cache and
    scheduling it into its running batch, and the first token's way back. No table or
    published figure times that hop apart; it is taken as the engine's time per request
    once more (``request_overhead``, the decode server's scenario's), an approximation
    whose size the disaggregated points do not pin down (their first tokens stay short
    after it). None where the decode server took the request together with the prefill
    server (``"concurrent"``).
    """
    assert row.pools is not None
    return request_time(model, efficiency) if row.pools.handoff == "sequential" else 0.0


def transfer_time(model: RowModel, row: LedgerRow) -> float:
    """Seconds to move one prompt's cache from a prefill server to a decode server: its
    bytes over the cards' links (every card of the prefill server sends its share at
    once), plus one link latency.
    """
    out = model.compiled(dict(model.inputs))
    assert row.pools is not None
    cards = row.pools.prefill.gpus

    def scalar(name: str, default: float) -> float:
        value = out.get(name, model.inputs.get(name))
        return float(np.asarray(value).ravel()[0]) if value is not None else default

    bandwidth = scalar("parallel_link_bandwidth", math.inf)
    latency = scalar("parallel_link_latency", 0.0)
    cache = row.isl * scalar("kv_bytes_per_token", 0.0)
    return cache / (bandwidth * cards) + latency if math.isfinite(bandwidth) else latency


def analytic_pools(models: tuple[RowModel, RowModel], row: LedgerRow,
                   efficiency: Efficiency) -> float | str:
    """A disaggregated row from its pools' roofline times, without simulation:

    * TPOT: one decode step of a decode server at its running sequences (its share of
      the clients in decode, at most the pool's ``batch × attention_dp`` and what its
      cache holds; the clients in decode are their share of the cycle spent decoding,
      :func:`.closed_loop.decode_running`);
    * TTFT: the prefill of one prompt on a prefill server, with the queueing of its share
      of the clients whose think time is their decode
      (:func:`.closed_loop.prefill_pool_wait`: the server takes ``batch × attention_dp``
      prompts at once, at the pace of a pass over that many — its attention ranks share
      the experts and the GEMMs — where one prompt alone takes its own prefill), plus the
      cache transfer and the request's
      way through the server outside the iterations (``request_overhead``, where the
      scenario states one; twice where the router hands the request to the decode server
      after the prefill has answered, :func:`handoff_time`); a client that
      measures its first round adds that round's queue (the i-th prompt waits for i
      prefills, at the server's pace over its batch) to one request in ``rounds``.

    Lengths are the client's means where they are plain values of the structures.
    """
    assert row.pools is not None
    client = row_simulation.CLIENTS[row.client]
    prefill_pool, decode_pool = row.pools.prefill, row.pools.decode
    prefill, decode = models
    if client.range_ratio < 1 and prefill.lengths_are_values and decode.lengths_are_values:
        isl, osl = client.mean_length(row.isl), client.mean_length(row.osl)
        prefill = prefill.with_lengths(isl, osl)  # type: ignore[assignment]
        decode = decode.with_lengths(isl, osl)  # type: ignore[assignment]
        if isinstance(prefill, str) or isinstance(decode, str):
            return NO_ROOM
    else:
        isl, osl = row.isl, row.osl
    cap = max(1, min(decode_pool.batch * decode_pool.attention_dp, int(decode.capacity)))
    transfer = transfer_time(prefill, row)
    service = at(prefill, efficiency, 1)["prefill_time"]
    clients = math.ceil(row.concurrency / prefill_pool.workers)
    servers = prefill_pool.batch * prefill_pool.attention_dp
    path = request_time(prefill, efficiency) + handoff_time(decode, row, efficiency)
    full = at(prefill, efficiency, servers)["prefill_time"] if servers > 1 else service

    def cycle(running: int) -> tuple[float, float]:
        tpot = at(decode, efficiency, running)["decode_step_time"]
        return tpot, prefill_pool_wait(service, clients, (osl - 1) * tpot + transfer + path,
                                       servers=servers, full=full)

    running = decode_running(row.concurrency, decode_pool.workers, cap, osl, transfer + path,
                             cycle)
    tpot, ttft = cycle(running)
    if row.metric in ("tpot_ms", "itl_ms"):
        value = tpot * 1e3
    else:
        if client.warmup_measured:
            burst = (full * clients / servers + service) / 2.0
            ttft = (burst + (client.rounds - 1) * ttft) / client.rounds
        ttft += transfer + path
        if row.metric == "ttft_ms":
            value = ttft * 1e3
        else:
            value = row_simulation.rate_metric(
                row, row.concurrency * osl / (ttft + (osl - 1) * tpot))
    if not math.isfinite(value) or value <= 0:
        return f"the prediction is not a positive number ({value})"
    return value


def measured_share(model: RowModel | tuple[RowModel, RowModel], row: LedgerRow,
                   efficiency: Efficiency) -> float | None:
    """The share of the row's decode step (a decode server's, for pools) that measured
    kernel tables time, at its running batch; None where the scenario has no such split.
    """
    if isinstance(model, tuple):
        assert row.pools is not None
        model = model[1]
        running = min(row.pools.decode.batch * row.pools.decode.attention_dp, model.capacity)
    else:
        running = min(row.concurrency, model.capacity)
    out = at(model, efficiency, max(1.0, float(running)))
    total = out.get("decode_time_kernels")
    if not total or "decode_time_kernels_measured" not in out:
        return None
    return float(out["decode_time_kernels_measured"] / total)
