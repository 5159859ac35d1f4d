"""Predictions checked against the accuracy ledger: per-row errors, per-metric summaries,
and intervals from the held-out errors an efficiency preset records.

Each ledger row becomes a scenario: its model (preset or ``hf_config``) and hardware
preset, ``hardware.count = gpus``, the row's formats through the quantisation lever
(8-bit float weights also take 8-bit activations, as FP8 checkpoints run), tensor
parallelism with an explicit ring all-reduce over the card's interconnect, and the
``[efficiency] preset`` its engine family names. At concurrency 1 the row is the
scenario's roofline: the prefill of one prompt (TTFT), the decode step at batch 1
(ITL, TPOT) and ``osl / (TTFT + (osl − 1) · ITL)`` (throughput). At concurrency > 1 it
is a closed loop of the row's clients in the serving simulator
(:mod:`.row_simulation`: fixed lengths, the warm-up round excluded).

Errors are relative, ``(predicted − measured) / measured``; summaries give the median
and 90th percentile of ``|error|`` per metric.

Fitting the efficiency presets on these predictions is :mod:`.fits`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from . import row_simulation
from .closed_loop import closed_loop, prefill_pool_wait
from .ledger import ENGINE_FAMILIES, LedgerRow, Pool
from .tables import tables_version

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["Efficiency", "Prediction", "Validation", "errors_by_metric", "held_out_intervals",
           "predict_rows", "preset_efficiency", "preset_name", "refined_name", "scenario_data",
           "summarise"]

#: Efficiency inputs a fit sets, by quantity name.
EFFICIENCY_QUANTITIES = ("prefill_mfu", "decode_mfu", "mbu", "t0")
#: The per-step latency of one all-reduce transfer, fitted with the efficiencies: it is
#: the engine's collective library, not the wire (only rows on several cards have it).
LINK_LATENCY = "parallel_link_latency"
EIGHT_BIT_FLOATS = ("fp8-e4m3", "fp8-e5m2", "mxfp8")
EIGHT_BIT_INTS = ("int8",)
FOUR_BIT_FLOATS = ("nvfp4",)


@attrs.frozen
class Efficiency:
    """One set of efficiency values (what an ``[efficiency]`` table holds)."""

    prefill_mfu: float
    decode_mfu: float
    mbu: float
    t0: float  # seconds
    #: Latency of one step of a ring all-reduce (seconds); None keeps the card's.
    link_latency: float | None = None

    def candidates(self) -> dict[str, np.ndarray]:
        """This efficiency as a one-candidate grid."""
        out = {name: np.array([getattr(self, name)]) for name in EFFICIENCY_QUANTITIES}
        if self.link_latency is not None:
            out[LINK_LATENCY] = np.array([self.link_latency])
        return out


@attrs.frozen
class Prediction:
    """A ledger row with its prediction, or the reason it cannot be predicted."""

    row: LedgerRow
    predicted: float | None
    reason: str | None = None
    interval: tuple[float, float] | None = None
    #: How it was predicted: the roofline, a simulated or analytic closed loop, the
    #: disaggregated pools (empty where not recorded).
    method: str = ""
    #: Under measured kernels, the share of the decode step (at the row's running batch)
    #: that the tables time; the rest is operators they do not cover, at their roofline.
    measured_share: float | None = None

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return (self.predicted - self.row.value) / self.row.value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.row.id, "metric": self.row.metric,
                               "measured": self.row.value, "predicted": self.predicted,
                               "error": self.error, "method": self.method}
        if self.measured_share is not None:
            out["measured_share"] = self.measured_share
        if self.interval is not None:
            out["interval"] = list(self.interval)
        return out


@attrs.frozen
class Validation:
    """Predictions of a whole ledger and their summary."""

    points: tuple[Prediction, ...]

    @property
    def predicted(self) -> list[Prediction]:
        return [p for p in self.points if p.predicted is not None]

    @property
    def unpredictable(self) -> list[Prediction]:
        return [p for p in self.points if p.predicted is None]

    def summary(self) -> dict[str, dict[str, float]]:
        return summarise(self.predicted)

    def to_dict(self) -> dict[str, Any]:
        return {"points": [p.to_dict() for p in self.predicted],
                "summary": self.summary(),
                "unpredictable": [{"id": p.row.id, "metric": p.row.metric, "reason": p.reason}
                                  for p in self.unpredictable]}


def errors_by_metric(points: Iterable[Prediction]) -> dict[str, list[float]]:
    """The relative errors of the predicted points, per metric."""
    out: dict[str, list[float]] = {}
    for p in points:
        error = p.error
        if error is not None:
            out.setdefault(p.row.metric, []).append(error)
    return out


def summarise(points: Iterable[Prediction]) -> dict[str, dict[str, float]]:
    """Median and 90th-percentile |error| per metric.

    >>> from infermodel.accuracy.ledger import LedgerRow
    >>> row = LedgerRow("a", "u", "vllm", "h100-sxm", 1, "m", None, "", "", 1, 1, 8, 8, 1,
    ...                 "ttft_ms", "mean", 10.0)
    >>> summarise([Prediction(row, 12.0), Prediction(row, 9.0)])["ttft_ms"]["median_abs_error"]
    0.15
    """
    by_metric = {m: [abs(e) for e in errors] for m, errors in errors_by_metric(points).items()}
    return {metric: {"n": len(errors),
                     "median_abs_error": round(float(np.median(errors)), 6),
                     "p90_abs_error": round(float(np.percentile(errors, 90)), 6)}
            for metric, errors in sorted(by_metric.items())}


# ---------------------------------------------------------------------------------
# One row → a scenario → arrays of predictions over efficiency candidates
# ---------------------------------------------------------------------------------


def scenario_data(row: LedgerRow, efficiency: Mapping[str, Any] | None,
                  pool: Pool | None = None) -> dict[str, Any]:
    """The scenario tables that describe a ledger row's deployment (one server of
    ``pool`` for a disaggregated row).

    ``efficiency`` is an ``[efficiency]`` table; None names the engine family's preset.
    """
    model = {"preset": row.model} if row.model else {"hf_config": str(row.hf_config)}
    tensor, pipeline, attention = ((pool.tensor, pool.pipeline, pool.attention_dp) if pool
                                   else (row.tensor, row.pipeline, row.attention_dp))
    gpus = tensor * pipeline * attention
    data: dict[str, Any] = {
        "scenario": {"name": row.id, "description": f"ledger row {row.id} ({row.source})"},
        "model": model,
        "hardware": {"preset": row.hardware, "count": gpus},
        "workload": {"batch": 1, "prompt_tokens": row.isl, "output_tokens": row.osl},
        "efficiency": dict(efficiency) if efficiency is not None else {"preset": row.family},
    }
    levers: dict[str, Any] = {}
    if row.weights or row.kv_cache or row.expert_weights:
        quantization: dict[str, Any] = {}
        if row.weights:
            quantization["linear"] = row.weights
            if row.weights in EIGHT_BIT_FLOATS:
                quantization["activations"] = "fp8"
            elif row.weights in EIGHT_BIT_INTS:
                quantization["activations"] = "int8"
            elif row.weights in FOUR_BIT_FLOATS:
                quantization["activations"] = "fp4"
        if row.expert_weights:
            quantization["experts"] = row.expert_weights
        if row.kv_cache:
            quantization["kv_cache"] = row.kv_cache
        levers["quantization"] = quantization
    expert = pool.expert if pool else row.expert
    if gpus > 1:
        parallelism: dict[str, Any] = {"tensor": tensor, "pipeline": pipeline,
                                       "communication": "all_reduce"}
        if attention > 1:
            parallelism["attention_data"] = attention
            parallelism["dense_weights"] = DENSE_WEIGHTS.get(row.family, "replicated")
        if expert > 1:
            parallelism["expert"] = expert
        levers["parallelism"] = parallelism
    if levers:
        data["levers"] = levers
    return data


#: Where each engine family keeps the dense layers under data-parallel attention (the
#: parallelism lever's ``dense_weights``): SGLang splits them over the stage's cards,
#: vLLM's and TensorRT-LLM's attention-DP ranks each keep their own copy.
DENSE_WEIGHTS = {"sglang": "split", "vllm": "replicated", "trtllm": "replicated"}


def _unsupported(row: LedgerRow) -> str | None:
    if row.unexpressed:
        return row.unexpressed
    if row.family not in ENGINE_FAMILIES:
        return (f"engine {row.engine!r}: no efficiency preset for the family {row.family!r} "
                f"(known: {', '.join(ENGINE_FAMILIES)})")
    if row.tensor * row.pipeline * row.attention_dp != row.gpus:
        return (f"tensor = {row.tensor} with gpus = {row.gpus}: the cards must be the tensor "
                "degree times the pipeline stages and data-parallel attention ranks")
    if row.hf_config is not None and not row.hf_config.is_file():
        return f"hf_config {row.hf_config} does not exist"
    return None


@attrs.frozen
class RowModel:
    """A row's compiled graph (one server of a pool for a disaggregated row) and the
    inputs that do not change between candidates.
    """

    compiled: Any
    inputs: dict[str, Any]
    capacity: float
    #: The resolved scenario (a plugin may price the simulator's iterations from it).
    scenario: Any = None
    #: Whether the prompt and output lengths are plain values of this structure (no
    #: plugin reads them while building), so rows of other lengths can reuse it.
    lengths_are_values: bool = False

    def with_lengths(self, isl: float, osl: float) -> RowModel | str:
        """This structure at other prompt and output lengths (see
        :attr:`lengths_are_values`); a string where the sequence no longer fits.
        """
        inputs = {**self.inputs, "prompt_tokens": float(isl), "output_tokens": float(osl)}
        capacity = float(np.asarray(self.compiled(inputs)["max_sequences"]).ravel()[0])
        if not capacity >= 1:
            return NO_ROOM
        return RowModel(self.compiled, inputs, capacity, self.scenario, self.lengths_are_values)


NO_ROOM = ("the weights and one full-length sequence do not fit in the cards' memory "
           "after the runtime reserve")
LENGTHS = ("workload.prompt_tokens", "workload.output_tokens")


def efficiency_table(row: LedgerRow, *, engine_preset: bool, kernels: str | None,
                     host: PluginHost) -> dict[str, Any]:
    """The ``[efficiency]`` table a row's scenario is built with: placeholder rates that
    the candidates replace on the compiled inputs, the row's preset for what is not
    fitted (the runtime reserve) with ``engine_preset``, and with ``kernels`` the
    measured kernel tables of the row's engine (its version where the row names one).
    """
    table: dict[str, Any] = {"prefill_mfu": 1.0, "decode_mfu": 1.0, "mbu": 1.0, "t0": 0.0}
    if engine_preset:
        table["preset"] = preset_name(row, host=host)
    if kernels is not None:
        table["kernels"] = kernels
        table["engine"] = row.family
        version, _ = tables_version(row, host=host)
        if version:
            table["engine_version"] = version
    return table


def row_model(row: LedgerRow, *, engine_preset: bool = True, host: PluginHost,
              kernels: str | None = None, pool: Pool | None = None,
              reuse_lengths: bool = False) -> RowModel | str:
    """Compile the row's scenario once (one server of ``pool`` for a disaggregated
    row); a string is the reason it cannot be predicted.

    With ``engine_preset`` the row's efficiency preset (:func:`preset_name`) supplies
    what is not fitted (the runtime reserve); without it the card's defaults stay (no
    reserve). ``kernels = "measured"`` times the operators from the measured kernel
    tables (:func:`efficiency_table`). ``reuse_lengths`` finds out whether rows of other
    lengths may reuse the structure (:attr:`RowModel.lengths_are_values`).
    """
    from ..engine.evaluation import compile_graph
    from ..engine.graph import build_graph
    from ..errors import InfermodelError
    from ..scenario import resolve

    reason = _unsupported(row)
    if reason:
        return reason
    table = efficiency_table(row, engine_preset=engine_preset, kernels=kernels, host=host)
    data = scenario_data(row, table, pool)
    try:
        scenario = resolve(data, {}, None, host=host)
        graph = build_graph(scenario, host=host)
    except InfermodelError as exc:
        return "; ".join(p.message for p in exc.problems)
    compiled = compile_graph(graph)
    needed_inputs = ("batch",) if kernels is not None else (*EFFICIENCY_QUANTITIES, "batch")
    missing = [n for n in needed_inputs if n not in compiled.inputs]
    if missing:
        return f"a lever defines {', '.join(missing)} itself, so the fit cannot set it"
    for needed in ("prefill_time", "decode_step_time", "max_sequences"):
        if needed not in compiled.outputs:
            return f"the scenario defines no {needed}"
    inputs = {n: graph.quantities[n].value for n in compiled.inputs}
    capacity = float(np.asarray(compiled(inputs)["max_sequences"]).ravel()[0])
    if not capacity >= 1:
        return NO_ROOM
    lengths = False
    if reuse_lengths and all(n in compiled.inputs for n in ("prompt_tokens", "output_tokens")):
        lengths = _lengths_are_values(scenario, row, kernels, pool, host)
    return RowModel(compiled, inputs, capacity, scenario, lengths)


_LENGTH_READS: dict[tuple, bool] = {}


def _lengths_are_values(scenario, row: LedgerRow, kernels: str | None, pool: Pool | None,
                        host: PluginHost) -> bool:
    """Whether no plugin reads the prompt or output length while building ``scenario``.

    Which fields a plugin reads follows the model, its formats and which levers and
    options a scenario sets, not the cards' number or kind: the answer is kept per model
    config, formats, engine, measured kernels and kind of layout (finding it out costs
    about as much as building the graph).
    """
    from ..engine.reads import is_read, plugin_reads

    layout = (pool or row)
    key = (row.model, str(row.hf_config), row.weights, row.kv_cache, row.expert_weights,
           row.family, kernels, layout.pipeline > 1, layout.attention_dp > 1,
           layout.expert > 1, layout.tensor * layout.pipeline * layout.attention_dp > 1)
    if key not in _LENGTH_READS:
        built = plugin_reads(scenario, host=host).build
        _LENGTH_READS[key] = not any(is_read(path, built) for path in LENGTHS)
    return _LENGTH_READS[key]


def predict_arrays(model: RowModel, row: LedgerRow,
                    candidates: Mapping[str, np.ndarray]) -> np.ndarray:
    """The row's metric for every candidate (arrays of equal length), from the analytic
    steady state: the prediction at concurrency 1, the fit's stand-in above it. A row
    whose client draws its lengths is evaluated at their means (where the lengths are
    plain values of the structure), and one whose client measures its first round
    includes that round's queue of prompts (:func:`.closed_loop.closed_loop`).
    """
    client = row_simulation.CLIENTS[row.client]
    running = min(row.concurrency, int(model.capacity))
    values = dict(model.inputs)
    if client.range_ratio < 1 and model.lengths_are_values:
        values["prompt_tokens"] = client.mean_length(row.isl)
        values["output_tokens"] = client.mean_length(row.osl)
    values["batch"] = np.array([[1.0], [float(running)]])
    for name in (*EFFICIENCY_QUANTITIES, LINK_LATENCY):
        if name in candidates and name in values:
            values[name] = np.asarray(candidates[name], dtype=float)[None, :]
    if row.concurrency > 1 and "prefill_mfu" in values:
        # The simulator prices every iteration at the prefill compute rate.
        values["decode_mfu"] = values["prefill_mfu"]
    out = model.compiled(values)
    prefill = np.broadcast_to(out["prefill_time"], (2, len(candidates["t0"])))[0]
    decode = np.broadcast_to(out["decode_step_time"], (2, len(candidates["t0"])))[1]
    rounds = client.rounds if client.warmup_measured and row.concurrency > 1 else 0
    state = closed_loop(prefill, decode, row.concurrency, model.capacity,
                        values["output_tokens"], rounds=rounds)
    if row.metric == "ttft_ms":
        return state.ttft * 1e3
    if row.metric in ("itl_ms", "tpot_ms"):
        return state.itl * 1e3
    return state.output_tokens_per_s


def cost_model(model: RowModel, row: LedgerRow, efficiency: Efficiency, *,
               batch: float | None = None):
    """The simulator's iteration cost of the row's scenario at ``efficiency``: its
    roofline, or the iteration cost a plugin registers for the scenario (measured
    kernels price each iteration from its own prefill and decode counts).
    """
    from ..analyses.simulation.plan import iteration_cost
    from ..simulator import CostModel

    values = dict(model.inputs)
    values["batch"] = float(row.concurrency if batch is None else batch)
    for name, candidate in efficiency.candidates().items():
        if name in values:
            values[name] = float(candidate[0])
    out = {name: float(np.asarray(v).ravel()[0]) for name, v in model.compiled(values).items()
           if np.size(v) == 1}
    measured = iteration_cost(model.scenario, out) if model.scenario is not None else None
    return CostModel.from_quantities(out, measured=measured)


#: How a prediction was made (:attr:`Prediction.method`).
ROOFLINE, SIMULATED, ANALYTIC, POOLS, ANALYTIC_POOLS = (
    "roofline", "simulated closed loop", "analytic closed loop", "disaggregated pools",
    "disaggregated pools, analytic")


class Simulations:
    """Closed-loop runs of ledger rows, each run once per configuration, concurrency and
    efficiency (a run gives every metric of its rows).
    """

    def __init__(self) -> None:
        self.runs: dict[tuple, row_simulation.ServingFigures | row_simulation.PoolFigures
                        | str] = {}

    def value(self, model: RowModel, row: LedgerRow, efficiency: Efficiency) -> float | str:
        """The row's metric simulated at ``efficiency``, or why it cannot be."""
        from ..simulator import SimulationError

        key = (model_key(row), row.concurrency, row.client, efficiency)
        if key not in self.runs:
            reason = row_simulation.unsupported(row)
            try:
                self.runs[key] = reason or row_simulation.simulate_row(
                    cost_model(model, row, efficiency), row.family, row.isl, row.osl,
                    row.concurrency, row_simulation.CLIENTS[row.client])
            except SimulationError as exc:
                self.runs[key] = f"the closed-loop simulation failed: {exc}"
        run = self.runs[key]
        if isinstance(run, str):
            return run
        value = run.value(row.metric, row.statistic)
        if not math.isfinite(value) or value <= 0:
            return f"the simulated {row.metric} is not a positive number ({value})"
        return value

    def pools(self, models: tuple[RowModel, RowModel], row: LedgerRow,
              efficiency: Efficiency) -> float | str:
        """A disaggregated row's metric (:func:`.row_simulation.simulate_pools`)."""
        from ..simulator import SimulationError

        key = (model_key(row), row.concurrency, row.client, efficiency, "pools")
        if key not in self.runs:
            assert row.pools is not None
            prefill, decode = row.pools.prefill, row.pools.decode
            try:
                self.runs[key] = row_simulation.simulate_pools(
                    cost_model(models[0], row, efficiency, batch=prefill.batch),
                    cost_model(models[1], row, efficiency,
                               batch=decode.batch * decode.attention_dp),
                    row.pools, row.isl, row.osl, row.concurrency,
                    transfer=transfer_time(models[0], row),
                    client=row_simulation.CLIENTS[row.client])
            except SimulationError as exc:
                self.runs[key] = f"the disaggregated pools' simulation failed: {exc}"
        run = self.runs[key]
        if isinstance(run, str):
            return run
        value = run.value(row.metric, row.statistic)
        if not math.isfinite(value) or value <= 0:
            return f"the simulated {row.metric} is not a positive number ({value})"
        return value


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


#: The closed loops a row above one client can be predicted with (:func:`predict_rows`).
LOOPS = ("simulated", "analytic")


def _predict(model: RowModel | tuple[RowModel, RowModel], row: LedgerRow,
             efficiency: Efficiency, simulations: Simulations,
             loop: str = "simulated") -> tuple[float | str, str]:
    """One row's prediction and how it was made: the roofline at concurrency 1, the
    simulator above (the analytic closed loop past the simulator's bound, or for every
    row with ``loop = "analytic"``), each pool for a disaggregated row.
    """
    if isinstance(model, tuple):
        if loop == "analytic":
            return analytic_pools(model, row, efficiency), ANALYTIC_POOLS
        return simulations.pools(model, row, efficiency), POOLS
    if (loop == "simulated" and row.concurrency > 1
            and row_simulation.unsupported(row) is None):
        return simulations.value(model, row, efficiency), SIMULATED
    value = float(predict_arrays(model, row, efficiency.candidates())[0])
    if not math.isfinite(value) or value <= 0:
        return f"the prediction is not a positive number ({value})", ROOFLINE
    return value, ROOFLINE if row.concurrency == 1 else ANALYTIC


def _at(model: RowModel, efficiency: Efficiency, batch: float) -> dict[str, float]:
    """The row's scalar quantities at ``batch`` and ``efficiency``."""
    values = dict(model.inputs)
    values["batch"] = float(batch)
    for name, candidate in efficiency.candidates().items():
        if name in values:
            values[name] = float(candidate[0])
    return {name: float(np.asarray(v).ravel()[0]) for name, v in model.compiled(values).items()
            if np.size(v) == 1}


def analytic_pools(models: tuple[RowModel, RowModel], row: LedgerRow,
                   efficiency: Efficiency) -> float | str:
    """A disaggregated row from its pools' roofline times, without simulation:

    * TPOT: one decode step of a decode server at its running sequences (its share of
      the clients, at most the pool's ``batch × attention_dp`` and what its cache holds);
    * TTFT: the prefill of one prompt on a prefill server, with the queueing of its share
      of the clients whose think time is their decode
      (:func:`.closed_loop.prefill_pool_wait`), plus the cache transfer; a client that
      measures its first round adds that round's queue (the i-th prompt waits for i
      prefills) to one request in ``rounds``.

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
    running = max(1, min(math.ceil(row.concurrency / decode_pool.workers),
                         decode_pool.batch * decode_pool.attention_dp, int(decode.capacity)))
    tpot = _at(decode, efficiency, running)["decode_step_time"]
    if row.metric in ("tpot_ms", "itl_ms"):
        value = tpot * 1e3
    else:
        transfer = transfer_time(prefill, row)
        service = _at(prefill, efficiency, 1)["prefill_time"]
        clients = math.ceil(row.concurrency / prefill_pool.workers)
        servers = prefill_pool.batch * prefill_pool.attention_dp
        ttft = prefill_pool_wait(service, clients, (osl - 1) * tpot + transfer,
                                 servers=servers)
        if client.warmup_measured:
            burst = service * (clients / servers + 1.0) / 2.0
            ttft = (burst + (client.rounds - 1) * ttft) / client.rounds
        ttft += transfer
        if row.metric == "ttft_ms":
            value = ttft * 1e3
        else:
            value = row.concurrency * osl / (ttft + (osl - 1) * tpot)
    if not math.isfinite(value) or value <= 0:
        return f"the prediction is not a positive number ({value})"
    return value


def preset_efficiency(family: str, *, host: PluginHost) -> Efficiency:
    """The efficiency values an engine family's ``[efficiency] preset`` sets."""
    from ..scenario import read_toml
    from ..schema import parse_field

    host.check_loaded()
    registries = host.registries
    info = registries.presets["efficiency"][family]
    data, _ = read_toml(info.path)
    table = data["efficiency"]
    values: dict[str, Any] = {}
    for name in EFFICIENCY_QUANTITIES:
        spec = registries.fields["efficiency"][name]
        values[name] = parse_field(spec, table[name]) if name in table else spec.default
    latency = data.get("hardware", {}).get("interconnect_latency")
    latency_spec = registries.fields["hardware"].get("interconnect_latency")
    if latency is not None and latency_spec is not None:
        values["link_latency"] = parse_field(latency_spec, latency)
    return Efficiency(**values)


#: The ideal roofline: peak rates, no fixed time per step (infermodel's defaults).
IDEAL = Efficiency(prefill_mfu=1.0, decode_mfu=1.0, mbu=1.0, t0=0.0)


def predict_rows(rows: Sequence[LedgerRow], *, calibrated: bool = True,
                 efficiencies: Mapping[str, Efficiency] | None = None,
                 host: PluginHost, progress=None, kernels: str | None = None,
                 simulations: Simulations | None = None, loop: str = "simulated",
                 jobs: int = 1) -> Validation:
    """Predict every row: with its efficiency preset (``calibrated``; the family's, or
    its refinement for the row's card, :func:`preset_name`), or with the ideal roofline
    (today's defaults); ``kernels = "measured"`` times the operators from the measured
    kernel tables of the row's engine instead, the operators no table covers at their
    roofline at the engine preset's rates, with no ``t0`` (``calibrated`` is then not
    used).

    ``loop`` predicts rows above one client with the serving simulator (``"simulated"``)
    or the analytic closed loop (``"analytic"``, :mod:`.closed_loop`). ``jobs`` > 1
    predicts the rows of each deployment in one of that many worker processes (the
    numbers are the same: each row's prediction depends on its deployment only).

    ``efficiencies`` replaces a preset's values (keyed by preset or family name).
    Calibrated predictions carry an interval: the range of measurements the preset's
    held-out errors allow.
    """
    if jobs > 1 and len(rows) > 1:
        return _predict_in_processes(rows, jobs, progress, calibrated=calibrated,
                                     efficiencies=efficiencies, kernels=kernels, loop=loop)
    models: dict[tuple, RowModel | str] = {}
    simulations = simulations if simulations is not None else Simulations()
    chosen: dict[str, Efficiency] = dict(efficiencies or {})
    bands: dict[str, dict[str, tuple[float, float]]] = {}
    points = []

    def compiled(row: LedgerRow, pool: Pool | None) -> RowModel | str:
        # One structure per deployment; rows of other lengths reuse it where the
        # lengths are plain values (RowModel.lengths_are_values).
        key = (structure_key(row, kernels), pool)
        if key not in models:
            models[key] = row_model(row, engine_preset=calibrated and kernels is None,
                                    host=host, kernels=kernels, pool=pool, reuse_lengths=True)
        found = models[key]
        if isinstance(found, str):
            return found
        sized = (key, row.isl, row.osl)
        if sized not in models:
            models[sized] = (found.with_lengths(row.isl, row.osl) if found.lengths_are_values
                             else row_model(row, engine_preset=calibrated and kernels is None,
                                            host=host, kernels=kernels, pool=pool))
        return models[sized]

    for row in rows:
        model: RowModel | str | tuple[RowModel, RowModel]
        if row.pools is not None and not row.unexpressed:
            prefill = compiled(row, row.pools.prefill)
            decode = compiled(row, row.pools.decode)
            reason = next((m for m in (prefill, decode) if isinstance(m, str)), None)
            model = reason if reason is not None else (prefill, decode)  # type: ignore[assignment]
        else:
            model = compiled(row, None)
        if progress is not None:
            progress.update()
        if isinstance(model, str):
            points.append(Prediction(row, None, model))
            continue
        name = preset_name(row, host=host) if calibrated else row.family
        if kernels is not None:
            # Measured kernels time what the tables cover; the operators they do not cover
            # keep their roofline at the engine preset's rates, and no fitted t0 or link
            # latency is added (those stood in for the kernels and the collectives).
            name = f"{row.family} (measured kernels)"
            if name not in chosen:
                try:
                    chosen[name] = attrs.evolve(preset_efficiency(row.family, host=host),
                                                t0=0.0, link_latency=None)
                except KeyError:
                    chosen[name] = IDEAL
        elif not calibrated:
            chosen.setdefault(name, IDEAL)
        if name not in chosen and row.family in (efficiencies or {}):
            chosen[name] = chosen[row.family]
        if name not in chosen:
            try:
                chosen[name] = preset_efficiency(name, host=host)
            except KeyError:
                points.append(Prediction(row, None, f"no efficiency preset {name!r}"))
                continue
        value, method = _predict(model, row, chosen[name], simulations, loop)
        if isinstance(value, str):
            points.append(Prediction(row, None, value, method=method))
            continue
        share = (measured_share(model, row, chosen[name]) if kernels is not None else None)
        band = None
        if calibrated and kernels is None and name not in bands:
            bands[name] = held_out_intervals(name, host=host)
        if calibrated and kernels is None and row.metric in bands[name]:
            low, high = bands[name][row.metric]
            # measured = predicted / (1 + error): the held-out errors' spread, inverted.
            band = (value / (1.0 + high), value / (1.0 + low))
        points.append(Prediction(row, value, interval=band, method=method,
                                 measured_share=share))
    return Validation(tuple(points))


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
    out = _at(model, efficiency, max(1.0, float(running)))
    total = out.get("decode_time_kernels")
    if not total or "decode_time_kernels_measured" not in out:
        return None
    return float(out["decode_time_kernels_measured"] / total)


def model_key(row: LedgerRow) -> tuple:
    """What decides a row's compiled scenario (rows that share it share one compile)."""
    return (row.engine, row.family, row.hardware, row.gpus, row.model, str(row.hf_config),
            row.weights, row.kv_cache, row.tensor, row.expert, row.isl, row.osl,
            row.pipeline, row.attention_dp, row.expert_weights, row.pools, row.engine_version,
            row.unexpressed)


@functools.cache
def _worker_host() -> PluginHost:
    """A worker process's plugin host: the entry-point group's plugins, loaded once."""
    from ..host import PluginHost

    return PluginHost()


def _predict_group(rows: Sequence[LedgerRow], options: Mapping[str, Any]) -> list[Prediction]:
    """One worker's share (:func:`_predict_in_processes`): the plugins loaded once per
    worker process (from the entry-point group), every structure it builds kept for its
    next groups.
    """
    return list(predict_rows(rows, host=_worker_host(), **options).points)


def _predict_in_processes(rows: Sequence[LedgerRow], jobs: int, progress,
                          **options: Any) -> Validation:
    """:func:`predict_rows` with each deployment's rows (its structure) in one of ``jobs``
    worker processes, the largest groups first; the points come back in ``rows`` order.
    """
    import concurrent.futures
    import multiprocessing

    groups: dict[tuple, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(structure_key(row, options.get("kernels")), []).append(index)
    order = sorted(groups.values(), key=len, reverse=True)
    points: list[Prediction | None] = [None] * len(rows)
    # Fresh workers (not forked): a forked child could inherit a lock held by a thread of
    # this process (the table reader's pool, say).
    context = multiprocessing.get_context(
        "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(_predict_group, [rows[i] for i in members], options): members
                   for members in order}
        for future in concurrent.futures.as_completed(futures):
            members = futures[future]
            for index, point in zip(members, future.result()):
                points[index] = point
            if progress is not None:
                progress.update(len(members))
    assert all(p is not None for p in points)
    return Validation(tuple(p for p in points if p is not None))


def structure_key(row: LedgerRow, kernels: str | None) -> tuple:
    """What decides a row's scenario apart from its lengths and the engine's name (the
    engine's version only where the kernel tables are read).
    """
    return (row.family, row.engine_version if kernels else "", row.hardware, row.gpus,
            row.model, str(row.hf_config), row.weights, row.kv_cache, row.tensor, row.expert,
            row.pipeline, row.attention_dp, row.expert_weights, row.pools, row.unexpressed)


def refined_name(family: str, hardware: str) -> str:
    """The efficiency preset refining ``family`` on one hardware preset."""
    return f"{family}-{hardware}"


def preset_name(row: LedgerRow, *, host: PluginHost) -> str:
    """The efficiency preset that predicts ``row``: its family's refinement for its card
    where one is shipped, else its family's.
    """
    name = refined_name(row.family, row.hardware)
    host.check_loaded()
    return name if name in host.registries.presets.get("efficiency", {}) else row.family


def held_out_intervals(family: str, *, host: PluginHost) -> dict[str, tuple[float, float]]:
    """The held-out error percentiles an efficiency preset records (empty if none)."""
    from ..scenario import read_toml

    info = host.registries.presets["efficiency"].get(family)
    if info is None:
        return {}
    data, _ = read_toml(info.path)
    table = data.get("preset", {}).get("held_out_error", {})
    return {m: (float(v[0]), float(v[1])) for m, v in table.items()
            if isinstance(v, list) and len(v) == 2}
