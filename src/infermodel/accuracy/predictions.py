"""Predictions checked against the accuracy ledger: per-row errors, per-metric summaries,
and intervals from the held-out errors an efficiency preset records.

Each ledger row becomes a scenario (:mod:`.row_scenarios`): its model (preset or ``hf_config``) and hardware
preset, ``hardware.count = gpus``, the row's formats through the quantisation lever
(8-bit float weights also take 8-bit activations, as FP8 checkpoints run), tensor
parallelism with its collectives priced by size over the card's interconnect, and the
physical efficiency model (``[efficiency] model = "physical"``) with the engine its
family runs as (``ENGINE_OF_FAMILY``: its scheduler and memory defaults) and, calibrated,
the preset that prices it (:func:`preset_name`). At concurrency 1 the row is the
scenario's roofline: the prefill of one prompt (TTFT), the decode step at batch 1 (ITL,
TPOT) and ``osl / (TTFT + (osl − 1) · ITL)`` (throughput). At concurrency > 1 it is a
closed loop of the row's clients in the serving simulator (:mod:`.row_simulation`: fixed
lengths, the engine's chunk budget and sequence cap, the warm-up round excluded; the
row's benchmark client where it names one), or, past the simulator's bound or with
``loop = "analytic"``, the analytic closed loop (:mod:`.closed_loop`). A disaggregated
row (prefill and decode pools, as the silicon ledger gives) is one server of each pool
(:mod:`.pools`). With ``kernels = "measured"`` the operators are timed from the measured
kernel tables of the row's engine instead (:func:`.tables.kernels_table`).

Errors are relative, ``(predicted − measured) / measured``; summaries give the median
and 90th percentile of ``|error|`` per metric (the records: :mod:`.results`; which
preset prices a row: :mod:`.row_presets`).

Fitting the efficiency presets on these predictions is :mod:`.fits`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..engine import intervals
from . import row_simulation
from .closed_loop import ClosedLoop, closed_loop, offline_batch
from .ledger import ENGINE_FAMILIES, LedgerRow, Pool, engine_release
from .pools import NO_ROOM, measured_share, predict_pools
from .results import Efficiency, Prediction, Validation, errors_by_metric, summarise
from .row_presets import (
    FITTED,
    kernels_efficiency,
    preset_efficiency,
    preset_intervals,
    preset_name,
    refined_name,
)
from .row_scenarios import IDEAL_TABLE, efficiency_table, layout, scenario_data, unsupported
from .row_simulation import cost_model, request_time
from .tables import kernels_table, lengths_are_values

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["ANALYTIC", "FITTED", "LOOPS", "ROOFLINE", "SIMULATED", "Efficiency", "Prediction",
           "RowModel", "Simulations", "Validation", "cost_model", "errors_by_metric", "kernels_efficiency",
           "predict", "predict_group", "predict_how", "predict_rows", "preset_efficiency",
           "preset_intervals", "preset_name", "refined_name", "row_attributes", "row_model",
           "running_capacity", "structure_key", "summarise"]

#: Processes the ledger's simulations run in.
WORKERS = 2


# ---------------------------------------------------------------------------------
# One row → a compiled scenario → arrays of predictions over efficiency candidates
# ---------------------------------------------------------------------------------


@attrs.frozen
class RowModel:
    """A row's compiled graph (one server of a pool for a disaggregated row) and the
    inputs that do not change between candidates.
    """

    compiled: Any
    inputs: dict[str, Any]
    capacity: float
    #: The interval attributes of the row's deployment but its band (engine, moe, generation).
    attributes: Mapping[str, str] = attrs.Factory(dict)
    #: The engine's tokens per iteration and most running sequences (0: no cap).
    chunk_tokens: int = row_simulation.CHUNK_TOKENS
    max_sequences: float = math.inf
    #: Rows with the same structure share a compiled function (their inputs differ only
    #: in the lengths), so :func:`predict_group` evaluates them together.
    structure: Any = None
    #: The resolved scenario (a plugin may price the simulator's iterations from it).
    scenario: Any = None
    #: Whether the prompt and output lengths are plain values of this structure (no
    #: plugin reads them while building), so rows of other lengths can reuse it.
    lengths_are_values: bool = False
    #: Whether :attr:`capacity` follows the engine's admission (:func:`running_capacity`)
    #: rather than every sequence at full length.
    admission: bool = True

    def with_lengths(self, isl: float, osl: float) -> RowModel | str:
        """This structure at other prompt and output lengths (see
        :attr:`lengths_are_values`); a string where the sequence no longer fits.
        """
        inputs = {**self.inputs, "prompt_tokens": float(isl), "output_tokens": float(osl)}
        out = self.compiled(inputs)
        capacity = float(np.asarray(out["max_sequences"]).ravel()[0])
        if not capacity >= 1:
            return NO_ROOM
        if self.admission:
            capacity = running_capacity(self.compiled, inputs, out, capacity)
        return attrs.evolve(self, inputs=inputs, capacity=capacity)


def running_capacity(compiled, inputs: Mapping[str, Any], out: Mapping[str, Any],
                     capacity: float) -> float:
    """The most sequences a closed loop keeps running: ``capacity`` (``max_sequences``,
    each sequence budgeted at its full length) for an engine that admits a request only
    when its whole output fits, or, for one that pages the cache in on demand
    (``engine_admits_on_demand``), the sequences that fit at the mean length a running
    sequence holds in a steady closed loop, its prompt and half its output (the
    ``max_sequences`` of the scenario at ``(output_tokens − 1) / 2`` output tokens), where
    that is more.

    A steady closed loop staggers its requests, so the running sequences are spread over
    their outputs; the engine admits by what they hold now and preempts when the cache
    runs out (the serving simulator's paged policies play that out). Where a plugin reads
    the lengths while building (:attr:`RowModel.lengths_are_values` false: DeepSeek
    Sparse Attention's indexer, say), or a scenario states ``workload.sequence_length``,
    the budget stays at full length.

    A toy graph whose cache holds 1,000 positions, 100-token prompts and 101-token
    outputs: 4 sequences at full length, 6 at the mean length of 150 positions.

    >>> def compiled(values):
    ...     return {"max_sequences": 1000 // (values["prompt_tokens"] + values["output_tokens"])}
    >>> inputs = {"prompt_tokens": 100.0, "output_tokens": 101.0}
    >>> running_capacity(compiled, inputs, {"engine_admits_on_demand": 1.0}, 4.0)
    6.0
    >>> running_capacity(compiled, inputs, {"engine_admits_on_demand": 0.0}, 4.0)
    4.0
    """
    if float(np.asarray(out.get("engine_admits_on_demand", 0.0)).ravel()[0]) != 1.0:
        return capacity
    output = float(inputs["output_tokens"])
    mean = compiled({**inputs, "output_tokens": max(output - 1.0, 0.0) / 2.0})
    return max(capacity, float(np.asarray(mean["max_sequences"]).ravel()[0]))


#: Inputs a row's lengths feed; rows that differ only in them share one structure.
LENGTH_INPUTS = ("prompt_tokens", "output_tokens")


def row_model(row: LedgerRow, *, preset: str | None = None, ideal: bool = False,
              kernels: str | None = None, pool: Pool | None = None,
              host: PluginHost, structures: dict | None = None,
              admission: bool = True) -> RowModel | str:
    """Compile the row's scenario once (one server of ``pool`` for a disaggregated row);
    a string is the reason it cannot be predicted.

    The physical model with the row's engine, priced by ``preset`` where given (else the
    candidates a fit sets, over the engine's own defaults); ``ideal``: the documents'
    ideal roofline with nothing kept back; ``kernels = "measured"``: the operators timed
    from the measured kernel tables (:func:`.tables.kernels_table`). ``structures`` keeps built
    graphs between calls: a row that differs from a kept one only in its lengths reuses
    its compiled function with its own ``prompt_tokens`` and ``output_tokens`` where no
    plugin reads them while building (``tests/test_accuracy.py`` checks the numbers are a
    fresh build's; under measured kernels it is found out, :func:`.tables.lengths_are_values`).
    ``admission``: the closed loop runs what the engine's admission lets in
    (:func:`running_capacity`); False keeps every sequence at full length (the fit's
    stand-in, :mod:`.fits`).
    """
    reason = unsupported(row)
    if reason:
        return reason
    if kernels is not None:
        table = kernels_table(row, kernels, host=host)
    else:
        table = IDEAL_TABLE if ideal else efficiency_table(row, preset)
    key = (structure_key(row, kernels), pool, tuple(sorted(table.items())))
    kept = structures.get(key) if structures is not None else None
    if kept is None:
        built = _build(row, table, pool, host)
        if isinstance(built, str):
            return built
        scenario, graph, compiled = built
        lengths = all(n in compiled.inputs for n in LENGTH_INPUTS) and (
            kernels is None or lengths_are_values(scenario, _reads_key(row, kernels, pool),
                                                  host=host))
        kept = (scenario, graph, compiled, lengths)
        if structures is not None and lengths:
            structures[key] = kept
    scenario, graph, compiled, lengths = kept
    if "batch" not in compiled.inputs or (kernels is None and not lengths):
        return "a lever defines batch or the lengths itself, so the row cannot be set"
    for needed in ("prefill_time", "decode_step_time", "max_sequences"):
        if needed not in compiled.outputs:
            return f"the scenario defines no {needed}"
    inputs = {n: graph.quantities[n].value for n in compiled.inputs}
    if lengths:
        inputs.update(prompt_tokens=float(row.isl), output_tokens=float(row.osl))
    out = compiled(inputs)
    capacity = float(np.asarray(out["max_sequences"]).ravel()[0])
    if not capacity >= 1:
        return NO_ROOM
    if lengths and admission:
        capacity = running_capacity(compiled, inputs, out, capacity)
    attributes = {"engine": row.engine_name,
                  "moe": "moe" if scenario.value("model.experts") > 1 else "dense",
                  "generation": scenario.value("hardware.generation") or "unknown"}

    def scalar(name: str, default: float) -> float:
        return float(np.asarray(out[name]).ravel()[0]) if name in out else default

    return RowModel(compiled, inputs, capacity, attributes,
                    int(scalar("engine_chunk_tokens", row_simulation.CHUNK_TOKENS))
                    or row_simulation.CHUNK_TOKENS,
                    scalar("engine_max_sequences", math.inf) or math.inf, key,
                    scenario=scenario, lengths_are_values=lengths, admission=admission)


def _build(row: LedgerRow, table: Mapping[str, Any], pool: Pool | None, host: PluginHost):
    """(scenario, graph, compiled function) of the row's scenario, or why not."""
    from ..engine.evaluation import compile_graph
    from ..engine.graph import build_graph
    from ..errors import InfermodelError
    from ..scenario import resolve

    try:
        scenario = resolve(scenario_data(row, table, pool), {}, None, host=host)
        graph = build_graph(scenario, host=host)
    except InfermodelError as exc:
        return "; ".join(p.message for p in exc.problems)
    return scenario, graph, compile_graph(graph)


def _reads_key(row: LedgerRow, kernels: str | None, pool: Pool | None) -> tuple:
    """What decides which fields the plugins read while building a row's scenario: the
    model config, its formats, the engine, measured kernels and the kind of layout, not
    the cards' number or kind.
    """
    tensor, pipeline, attention = layout(row, pool)
    expert = pool.expert if pool else row.expert
    return (row.model, str(row.hf_config), row.weights, row.kv_cache, row.expert_weights,
            row.unquantized, row.family, kernels, pipeline > 1, attention > 1, expert > 1,
            tensor * pipeline * attention > 1)


def row_attributes(model: RowModel, row: LedgerRow) -> dict[str, str]:
    """The row's interval attributes (``infermodel.engine.intervals``)."""
    return {**model.attributes, "band": intervals.band(row.concurrency)}


def predict_arrays(model: RowModel, row: LedgerRow,
                   candidates: Mapping[str, np.ndarray]) -> np.ndarray:
    """The row's metric for every candidate (arrays of equal length), from the analytic
    steady state: the prediction at concurrency 1, the fit's stand-in above it.
    """
    return predict_group([model], [row], candidates)[0]


def _lengths(models: Sequence[RowModel], rows: Sequence[LedgerRow]):
    """Prompt and output lengths (rows × 1), and the measured first rounds (rows × 1), of
    each row: a client that draws its lengths is evaluated at their means where the
    lengths are plain values of the structure; one that measures its first round adds
    that round's queue of prompts (:func:`.closed_loop.closed_loop`).
    """
    isl, osl, rounds = [], [], []
    for model, row in zip(models, rows):
        client = row_simulation.CLIENTS[row.client]
        drawn = client.range_ratio < 1 and model.lengths_are_values
        isl.append(client.mean_length(row.isl) if drawn else float(row.isl))
        osl.append(client.mean_length(row.osl) if drawn else float(row.osl))
        rounds.append(client.rounds if client.warmup_measured and row.concurrency > 1 else 0)
    return (np.array(isl)[:, None], np.array(osl)[:, None],
            np.array(rounds, dtype=float)[:, None])


def predict_group(models: Sequence[RowModel], rows: Sequence[LedgerRow],
                  candidates: Mapping[str, np.ndarray]) -> np.ndarray:
    """:func:`predict_arrays` of rows that share one compiled structure (their models
    differ only in the lengths), evaluated together: rows × candidates.
    """
    model = models[0]
    count = len(rows)
    size = max([len(np.atleast_1d(v)) for v in candidates.values()] + [1])
    capacity = np.array([m.capacity for m in models])[:, None]
    clients = np.array([float(r.concurrency) for r in rows])[:, None]
    running = np.minimum(clients, np.floor(capacity))
    cap = np.array([min(m.max_sequences, m.capacity) for m in models])[:, None]
    running = np.minimum(running, np.maximum(np.floor(cap), 1.0))
    values = dict(model.inputs)
    # Axis 0: prefill (batch 1), the decode step at the running batch, the prefill of the
    # running batch's prompts; axis 1: rows; axis 2: candidates.
    values["batch"] = np.stack([np.ones_like(running), running, running])
    isl, osl, rounds = _lengths(models, rows)
    if model.lengths_are_values:
        values["prompt_tokens"] = isl[None, :, :]
        values["output_tokens"] = osl[None, :, :]
    for name, candidate in candidates.items():
        if name in values:
            values[name] = np.asarray(candidate, dtype=float)[None, None, :]
    out = model.compiled(values)
    prefill = np.broadcast_to(out["prefill_time"], (3, count, size))
    decode = np.broadcast_to(out["decode_step_time"], (3, count, size))[1]
    path = (np.broadcast_to(out["request_overhead"], (3, count, size))[0]
            if "request_overhead" in out else 0.0)
    # A scheduler that reads new requests every N decode iterations holds each arrival
    # (N − 1)/2 steps at the running batch (none at one client: the engine is idle, nor
    # in a measured first round, every client at once on an idle engine).
    hold = (np.broadcast_to(out["scheduler_recv_hold"], (3, count, size))[1]
            if "scheduler_recv_hold" in out else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        hold = hold * np.where(rounds > 0, (rounds - 1) / np.maximum(rounds, 1), 1.0)
    # A scheduler that waits for more prompts, or for every attention-DP rank to hold
    # one, holds each, in its slot, before its prefill (none at one client: no
    # generation runs).
    held = sum((np.broadcast_to(out[name], (3, count, size))[1]
                for name in ("batch_wait_hold", "dp_balance_hold") if name in out), 0.0)
    # An engine that runs a new prompt's prefill beside the running decodes gives its
    # first token at the end of that iteration, which their attention lengthens
    # (``mixed_iteration_decode_time``, none at one client).
    if "mixed_iteration_decode_time" in out:
        held = held + np.broadcast_to(out["mixed_iteration_decode_time"], (3, count, size))[1]
    state = closed_loop(prefill[0], decode, clients, np.minimum(capacity, cap), osl,
                        rounds=rounds, request_time=path + hold, held=held)
    offline = np.array([r.load == "offline" for r in rows])
    if offline.any():
        batch = offline_batch(prefill[2], decode, clients, running, osl)
        pick = offline[:, None]
        # An offline run's requests all go through the server once, at its start, and
        # are read before its first iteration.
        state = ClosedLoop(*(np.where(pick, getattr(batch, f) + (path if f == "ttft" else 0.0),
                                      getattr(state, f))
                             for f in ("ttft", "itl", "e2e", "output_tokens_per_s", "running",
                                       "saturated")))
    result = np.empty((count, size))
    for i, row in enumerate(rows):
        if row.metric == "ttft_ms":
            result[i] = state.ttft[i] * 1e3
        elif row.metric in ("itl_ms", "tpot_ms"):
            result[i] = state.itl[i] * 1e3
        else:
            result[i] = row_simulation.rate_metric(row, state.output_tokens_per_s[i])
    return result


#: How a prediction was made (:attr:`Prediction.method`).
ROOFLINE, SIMULATED, ANALYTIC = "roofline", "simulated closed loop", "analytic closed loop"
#: The closed loops a row above one client can be predicted with (:func:`predict_rows`).
LOOPS = ("simulated", "analytic")


class Simulations:
    """Closed-loop runs of ledger rows, each run once per configuration, concurrency and
    efficiency (a run gives every metric of its rows).
    """

    def __init__(self) -> None:
        self.runs: dict[tuple, row_simulation.ServingFigures | row_simulation.PoolFigures
                        | str] = {}

    @staticmethod
    def key(row: LedgerRow, efficiency: Efficiency) -> tuple:
        return (model_key(row), row.concurrency, row.load, row.requests, row.request_rate,
                row.client, row.request_time, efficiency)

    @staticmethod
    def arguments(model: RowModel, row: LedgerRow, efficiency: Efficiency) -> tuple:
        """What :func:`.row_simulation.run_row` needs: plain, picklable values."""
        return (cost_model(model, row, efficiency), row.family, row.isl, row.osl, row.concurrency,
                model.chunk_tokens, model.max_sequences, row.load, row.requests,
                row.request_rate, row.client,
                request_time(model, efficiency), row_simulation.scheduler_hold(model, row, efficiency))

    def prefetch(self, jobs: Sequence[tuple[RowModel, LedgerRow, Efficiency]], *,
                 workers: int = 1) -> None:
        """Run the simulations ``jobs`` need and have not run, in ``workers`` processes
        (one: here); the results are those of :meth:`value` to the bit.
        """
        todo: dict[tuple, tuple] = {}
        for model, row, efficiency in jobs:
            key = self.key(row, efficiency)
            if key in self.runs or key in todo or row.concurrency <= 1:
                continue
            reason = row_simulation.unsupported(row)
            if reason:
                self.runs[key] = reason
                continue
            todo[key] = self.arguments(model, row, efficiency)
        # Forked workers only while no other thread runs (a forked child could inherit a
        # lock one holds: the kernel table reader's pool, say).
        if workers <= 1 or len(todo) < 2 * workers or threading.active_count() > 1:
            for key, arguments in todo.items():
                self.runs[key] = row_simulation.run_row(*arguments)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            done = pool.map(row_simulation.run_row_packed, todo.values(), chunksize=4)
            self.runs.update(zip(todo, done))

    def value(self, model: RowModel, row: LedgerRow, efficiency: Efficiency) -> float | str:
        """The row's metric simulated at ``efficiency``, or why it cannot be."""
        key = self.key(row, efficiency)
        if key not in self.runs:
            reason = row_simulation.unsupported(row)
            self.runs[key] = reason or row_simulation.run_row(
                *self.arguments(model, row, efficiency))
        return row_simulation.row_value(self.runs[key], row)


def predict_how(model: RowModel | tuple[RowModel, RowModel], row: LedgerRow,
                efficiency: Efficiency, simulations: Simulations,
                loop: str = "simulated") -> tuple[float | str, str]:
    """One row's prediction and how it was made: the roofline at concurrency 1, the
    simulator above (the analytic closed loop past the simulator's token bound, or for
    every row with ``loop = "analytic"``), each pool for a disaggregated row
    (:mod:`.pools`).
    """
    if isinstance(model, tuple):
        return predict_pools(model, row, efficiency, simulations, loop)
    if row.concurrency > 1 and loop == "simulated" and not row_simulation.beyond_bound(row):
        return simulations.value(model, row, efficiency), SIMULATED
    value = float(predict_arrays(model, row, efficiency.candidates())[0])
    if not math.isfinite(value) or value <= 0:
        return f"the prediction is not a positive number ({value})", ROOFLINE
    return value, ROOFLINE if row.concurrency == 1 else ANALYTIC


def predict(model: RowModel, row: LedgerRow, efficiency: Efficiency,
            simulations: Simulations) -> float | str:
    """One row's prediction (:func:`predict_how`, the serving simulator above one client)."""
    return predict_how(model, row, efficiency, simulations)[0]


def predict_rows(rows: Sequence[LedgerRow], *, calibrated: bool = True,
                 efficiencies: Mapping[str, Efficiency] | None = None,
                 host: PluginHost, progress=None, kernels: str | None = None,
                 simulations: Simulations | None = None, loop: str = "simulated",
                 workers: int = WORKERS) -> Validation:
    """Predict every row: with its efficiency preset (``calibrated``; the family's, or
    its refinement for the row's card, :func:`preset_name`), or with the ideal roofline
    and nothing kept back (the documents' convention); ``kernels = "measured"`` times the
    operators from the measured kernel tables of the row's engine instead, the operators
    no table covers at their roofline at the engine preset's sustained rates, with no
    ``t0`` (:func:`kernels_efficiency`; ``calibrated`` is then not used).

    ``loop`` predicts rows above one client with the serving simulator (``"simulated"``,
    in ``workers`` processes) or the analytic closed loop (``"analytic"``,
    :mod:`.closed_loop`). :func:`.workers.predict` spreads the rows over worker processes.

    ``efficiencies`` replaces a preset's values (keyed by preset or family name).
    Calibrated predictions carry the 80 % interval of the preset's held-out errors for
    the row's group (engine, dense or MoE, concurrency band, card generation).
    """
    models: dict[tuple, RowModel | str] = {}
    structures: dict = {}
    simulations = simulations if simulations is not None else Simulations()
    chosen = dict(efficiencies or {})
    groups: dict[str, list[intervals.Entry]] = {}
    planned: list[tuple[LedgerRow, str | None, Any, Efficiency]] = []

    def compiled(row: LedgerRow, name: str | None, pool: Pool | None) -> RowModel | str:
        key = (model_key(row), name, pool)
        if key not in models:
            models[key] = row_model(row, preset=name, ideal=not calibrated, kernels=kernels,
                                    pool=pool, host=host, structures=structures)
        return models[key]

    for row in rows:
        name = None
        if calibrated and kernels is None and row.family in ENGINE_FAMILIES:
            name = preset_name(row, host=host)
        model: RowModel | str | tuple[RowModel, RowModel]
        if row.pools is not None and not row.unexpressed:
            prefill = compiled(row, name, row.pools.prefill)
            decode = compiled(row, name, row.pools.decode)
            reason = next((m for m in (prefill, decode) if isinstance(m, str)), None)
            model = reason if reason is not None else (prefill, decode)  # type: ignore[assignment]
        else:
            model = compiled(row, name, None)
        if progress is not None:
            progress.update()
        planned.append((row, name, model, _efficiency(row, name, kernels, chosen, host)))
    if loop == "simulated":
        simulations.prefetch([(m, r, e) for r, _, m, e in planned if isinstance(m, RowModel)],
                             workers=1 if kernels is not None else workers)
    points = []
    for row, name, model, efficiency in planned:
        if isinstance(model, str):
            points.append(Prediction(row, None, model))
            continue
        value, method = predict_how(model, row, efficiency, simulations, loop)
        if isinstance(value, str):
            points.append(Prediction(row, None, value, method=method))
            continue
        share = measured_share(model, row, efficiency) if kernels is not None else None
        band = None
        if name is not None:
            if name not in groups:
                groups[name] = preset_intervals(name, host=host)
            single = model if isinstance(model, RowModel) else model[1]
            entry = intervals.choose(groups[name], intervals.kind_of(row.metric),
                                     row_attributes(single, row))
            if entry is not None:
                band = intervals.bounds(value, entry)
        points.append(Prediction(row, value, interval=band, method=method,
                                 measured_share=share))
    return Validation(tuple(points))


def _efficiency(row: LedgerRow, name: str | None, kernels: str | None,
                chosen: dict[str, Efficiency], host: PluginHost) -> Efficiency:
    """The efficiency a row is predicted at: ``chosen``'s for its preset (or family), the
    preset's own values otherwise (an empty one), :func:`kernels_efficiency` under
    measured kernels.
    """
    if kernels is not None:
        key = f"{row.family} (measured kernels)"
        if key not in chosen:
            chosen[key] = kernels_efficiency(row.family, host=host)
        return chosen[key]
    if name is None:
        return Efficiency()
    return chosen.get(name, chosen.get(row.family, Efficiency()))


def model_key(row: LedgerRow) -> tuple:
    """What decides a row's compiled scenario (rows that share it share one compile);
    the lengths last.
    """
    return (row.engine, row.family, row.hardware, row.gpus, row.model, str(row.hf_config),
            row.weights, row.kv_cache, row.tensor, row.expert, row.attention_dp, row.pipeline,
            row.expert_weights, row.unquantized, row.pools, row.engine_version, row.unexpressed,
            row.recv_interval, row.launch,
            row.batch_wait, row.dp_balance, row.mxfp4_activations, row.moe_backend,
            row.fp32_matmul, row.isl, row.osl)


def structure_key(row: LedgerRow, kernels: str | None) -> tuple:
    """What decides a row's scenario apart from its lengths and the engine's name (the
    engine's version where the kernel tables are read, and SGLang's release, which
    chooses its memory defaults: rows that share a key share the built scenario's
    values).
    """
    release = engine_release(row.engine) if row.family == "sglang" and not kernels else None
    return (row.family, row.engine_version if kernels else "", release, row.hardware, row.gpus,
            row.model, str(row.hf_config), row.weights, row.kv_cache, row.tensor, row.expert,
            row.pipeline, row.attention_dp, row.expert_weights, row.unquantized, row.pools,
            row.unexpressed,
            row.recv_interval, row.launch, row.batch_wait, row.dp_balance, row.mxfp4_activations,
            row.moe_backend, row.fp32_matmul)
