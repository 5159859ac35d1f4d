"""Predictions checked against the accuracy ledger: per-row errors, per-metric summaries,
and intervals from the held-out errors an efficiency preset records.

Each ledger row becomes a scenario: its model (preset or ``hf_config``) and hardware
preset, ``hardware.count = gpus``, the row's formats through the quantisation lever
(8-bit float weights also take 8-bit activations, as FP8 checkpoints run), tensor
parallelism with its collectives priced by size over the card's interconnect, and the
physical efficiency model (``[efficiency] model = "physical"``) with the engine its
family runs as (``ENGINE_OF_FAMILY``: its scheduler and memory defaults) and, calibrated,
the preset that prices it (:func:`preset_name`). At concurrency 1 the row is the
scenario's roofline: the prefill of one prompt (TTFT), the decode step at batch 1 (ITL,
TPOT) and ``osl / (TTFT + (osl − 1) · ITL)`` (throughput). At concurrency > 1 it is a
closed loop of the row's clients in the serving simulator (:mod:`.row_simulation`: fixed
lengths, the engine's chunk budget and sequence cap, the warm-up round excluded).

Errors are relative, ``(predicted − measured) / measured``; summaries give the median
and 90th percentile of ``|error|`` per metric.

Fitting the efficiency presets on these predictions is :mod:`.fits`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..engine import intervals
from . import row_simulation
from .closed_loop import ClosedLoop, closed_loop, offline_batch
from .ledger import ENGINE_FAMILIES, ENGINE_OF_FAMILY, LedgerRow

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["FITTED", "Efficiency", "Prediction", "RowModel", "Simulations", "Validation",
           "errors_by_metric", "predict_group", "predict_rows", "preset_efficiency", "preset_intervals",
           "preset_name", "refined_name", "row_attributes", "row_model", "scenario_data",
           "summarise"]

#: The physical model's engine parameters a fit sets (``[efficiency]`` fields whose
#: ranges are their physical bounds).
FITTED = ("bandwidth_fraction", "expert_bandwidth_fraction", "gemm_fraction", "attention_fraction",
          "dequant_fraction",
          "kernel_time", "launch_time", "step_overhead", "sequence_overhead",
          "collective_latency")
#: 8-bit float weight formats whose checkpoints also run 8-bit float activations
#: (DeepSeek-V3's 128×128-block FP8 quantises activations per 1×128 tile).
EIGHT_BIT_FLOATS = ("fp8-e4m3", "fp8-e5m2", "mxfp8", "fp8-b128")
EIGHT_BIT_INTS = ("int8",)
#: Processes the ledger's simulations run in.
WORKERS = 2
#: The documents' ideal roofline: peak rates, no fixed time, no engine (nothing kept back).
IDEAL_TABLE = {"model": "fixed", "prefill_mfu": 1.0, "decode_mfu": 1.0, "mbu": 1.0, "t0": 0.0,
               "engine": "none"}


@attrs.frozen
class Efficiency:
    """Values of the physical model's engine parameters (what a fitted preset sets), as
    ``(name, value)`` pairs; an empty one leaves the scenario's own values.
    """

    values: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, float]) -> Efficiency:
        """>>> Efficiency.of({"kernel_time": 3e-6})["kernel_time"]
        3e-06
        """
        return cls(tuple(sorted((k, float(v)) for k, v in mapping.items())))

    def as_dict(self) -> dict[str, float]:
        return dict(self.values)

    def __getitem__(self, name: str) -> float:
        return self.as_dict()[name]

    def candidates(self) -> dict[str, np.ndarray]:
        """This efficiency as a one-candidate grid."""
        return {name: np.array([value]) for name, value in self.values}


@attrs.frozen
class Prediction:
    """A ledger row with its prediction, or the reason it cannot be predicted."""

    row: LedgerRow
    predicted: float | None
    reason: str | None = None
    interval: tuple[float, float] | None = None

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return (self.predicted - self.row.value) / self.row.value

    @property
    def covered(self) -> bool | None:
        """Whether the measurement lies in the interval (None without one)."""
        if self.interval is None:
            return None
        return self.interval[0] <= self.row.value <= self.interval[1]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.row.id, "metric": self.row.metric,
                               "measured": self.row.value, "predicted": self.predicted,
                               "error": self.error}
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

    def coverage(self) -> dict[str, float] | None:
        """Share of the predicted rows whose measurement lies in its interval, overall."""
        marks = [p.covered for p in self.predicted if p.covered is not None]
        return {"n": len(marks), "covered": sum(marks) / len(marks)} if marks else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"points": [p.to_dict() for p in self.predicted],
               "summary": self.summary(),
               "unpredictable": [{"id": p.row.id, "metric": p.row.metric, "reason": p.reason}
                                 for p in self.unpredictable]}
        if self.coverage() is not None:
            out["interval_coverage"] = self.coverage()
        return out


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


def efficiency_table(row: LedgerRow, preset: str | None) -> dict[str, Any]:
    """The ``[efficiency]`` table of a row: the physical model with the row's engine, and
    ``preset`` (a fitted efficiency preset) when given.
    """
    table: dict[str, Any] = {"model": "physical", "engine": ENGINE_OF_FAMILY[row.family]}
    if preset is not None:
        table["preset"] = preset
    return table


def scenario_data(row: LedgerRow, efficiency: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario tables that describe a ledger row's deployment, with ``efficiency``
    as its ``[efficiency]`` table.
    """
    model = {"preset": row.model} if row.model else {"hf_config": str(row.hf_config)}
    data: dict[str, Any] = {
        "scenario": {"name": row.id, "description": f"ledger row {row.id} ({row.source})"},
        "model": model,
        "hardware": {"preset": row.hardware, "count": row.gpus},
        "workload": {"batch": 1, "prompt_tokens": row.isl, "output_tokens": row.osl},
        "efficiency": dict(efficiency),
    }
    levers: dict[str, Any] = {}
    if row.weights or row.kv_cache:
        quantization: dict[str, Any] = {}
        if row.weights:
            quantization["linear"] = row.weights
            if row.weights in EIGHT_BIT_FLOATS:
                quantization["activations"] = "fp8"
            elif row.weights in EIGHT_BIT_INTS:
                quantization["activations"] = "int8"
        if row.kv_cache:
            quantization["kv_cache"] = row.kv_cache
        levers["quantization"] = quantization
    if row.gpus > 1:
        # The ledger's tensor degree counts the cards attention is split or shared over;
        # the lever's is per data-parallel attention rank (tensor × attention_data = gpus).
        parallelism: dict[str, Any] = {"tensor": row.gpus // row.attention_dp}
        if row.attention_dp > 1:
            parallelism["attention_data"] = row.attention_dp
        if row.expert > 1:
            parallelism["expert"] = row.expert
        levers["parallelism"] = parallelism
    if levers:
        data["levers"] = levers
    return data


def _unsupported(row: LedgerRow) -> str | None:
    if row.family not in ENGINE_FAMILIES:
        return (f"engine {row.engine!r}: no efficiency preset for the family {row.family!r} "
                f"(known: {', '.join(ENGINE_FAMILIES)})")
    if row.gpus % row.attention_dp:
        return f"attention_dp = {row.attention_dp} does not divide gpus = {row.gpus}"
    if row.tensor != row.gpus:
        return (f"tensor = {row.tensor} with gpus = {row.gpus}: only pure tensor parallelism "
                "(tensor = gpus) is mapped")
    if row.hf_config is not None and not row.hf_config.is_file():
        return f"hf_config {row.hf_config} does not exist"
    return None


@attrs.frozen
class RowModel:
    """A row's compiled graph and the inputs that do not change between candidates."""

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


#: Inputs a row's lengths feed; rows that differ only in them share one structure.
LENGTH_INPUTS = ("prompt_tokens", "output_tokens")


def row_model(row: LedgerRow, *, preset: str | None = None, ideal: bool = False,
              host: PluginHost, structures: dict | None = None) -> RowModel | str:
    """Compile the row's scenario once; a string is the reason it cannot be predicted.

    The physical model with the row's engine, priced by ``preset`` where given (else the
    candidates a fit sets, over the engine's own defaults); ``ideal``: the documents'
    ideal roofline with nothing kept back. ``structures`` keeps built graphs between
    calls: a row that differs from a kept one only in its lengths reuses its compiled
    function with its own ``prompt_tokens`` and ``output_tokens`` (no plugin reads them
    while building; ``tests/test_accuracy.py`` checks the numbers are a fresh build's).
    """
    from ..engine.evaluation import compile_graph
    from ..engine.graph import build_graph
    from ..errors import InfermodelError
    from ..scenario import resolve

    reason = _unsupported(row)
    if reason:
        return reason
    table = IDEAL_TABLE if ideal else efficiency_table(row, preset)
    key = (model_key(row)[:-2], tuple(sorted(table.items())))
    kept = structures.get(key) if structures is not None else None
    if kept is None:
        data = scenario_data(row, table)
        try:
            scenario = resolve(data, {}, None, host=host)
            graph = build_graph(scenario, host=host)
        except InfermodelError as exc:
            return "; ".join(p.message for p in exc.problems)
        kept = (scenario, graph, compile_graph(graph))
        if structures is not None:
            structures[key] = kept
    scenario, graph, compiled = kept
    if "batch" not in compiled.inputs or not all(n in compiled.inputs for n in LENGTH_INPUTS):
        return "a lever defines batch or the lengths itself, so the row cannot be set"
    for needed in ("prefill_time", "decode_step_time", "max_sequences"):
        if needed not in compiled.outputs:
            return f"the scenario defines no {needed}"
    inputs = {n: graph.quantities[n].value for n in compiled.inputs}
    inputs.update(prompt_tokens=float(row.isl), output_tokens=float(row.osl))
    out = compiled(inputs)
    capacity = float(np.asarray(out["max_sequences"]).ravel()[0])
    if not capacity >= 1:
        return ("the weights and one full-length sequence do not fit in the cards' memory "
                "after the runtime reserve")
    attributes = {"engine": row.family,
                  "moe": "moe" if scenario.value("model.experts") > 1 else "dense",
                  "generation": scenario.value("hardware.generation") or "unknown"}

    def scalar(name: str, default: float) -> float:
        return float(np.asarray(out[name]).ravel()[0]) if name in out else default

    return RowModel(compiled, inputs, capacity, attributes,
                    int(scalar("engine_chunk_tokens", row_simulation.CHUNK_TOKENS))
                    or row_simulation.CHUNK_TOKENS,
                    scalar("engine_max_sequences", math.inf) or math.inf, key)


def row_attributes(model: RowModel, row: LedgerRow) -> dict[str, str]:
    """The row's interval attributes (``infermodel.engine.intervals``)."""
    return {**model.attributes, "band": intervals.band(row.concurrency)}


def predict_arrays(model: RowModel, row: LedgerRow,
                   candidates: Mapping[str, np.ndarray]) -> np.ndarray:
    """The row's metric for every candidate (arrays of equal length), from the analytic
    steady state: the prediction at concurrency 1, the fit's stand-in above it.
    """
    return predict_group([model], [row], candidates)[0]


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
    values["prompt_tokens"] = np.array([float(r.isl) for r in rows])[None, :, None]
    values["output_tokens"] = np.array([float(r.osl) for r in rows])[None, :, None]
    for name, candidate in candidates.items():
        if name in values:
            values[name] = np.asarray(candidate, dtype=float)[None, None, :]
    out = model.compiled(values)
    prefill = np.broadcast_to(out["prefill_time"], (3, count, size))
    decode = np.broadcast_to(out["decode_step_time"], (3, count, size))[1]
    osl = np.array([float(r.osl) for r in rows])[:, None]
    state = closed_loop(prefill[0], decode, clients, np.minimum(capacity, cap), osl)
    offline = np.array([r.load == "offline" for r in rows])
    if offline.any():
        batch = offline_batch(prefill[2], decode, clients, running, osl)
        pick = offline[:, None]
        state = ClosedLoop(*(np.where(pick, getattr(batch, f), getattr(state, f))
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


def cost_model(model: RowModel, row: LedgerRow, efficiency: Efficiency):
    """The simulator's iteration cost of the row's scenario at ``efficiency``."""
    from ..simulator import CostModel

    values = dict(model.inputs)
    values["batch"] = float(row.concurrency)
    for name, value in efficiency.values:
        if name in values:
            values[name] = value
    out = {name: float(np.asarray(v).ravel()[0]) for name, v in model.compiled(values).items()
           if np.size(v) == 1}
    return CostModel.from_quantities(out)


class Simulations:
    """Closed-loop runs of ledger rows, each run once per configuration, concurrency and
    efficiency (a run gives every metric of its rows).
    """

    def __init__(self) -> None:
        self.runs: dict[tuple, row_simulation.ServingFigures | str] = {}

    @staticmethod
    def key(row: LedgerRow, efficiency: Efficiency) -> tuple:
        return (model_key(row), row.concurrency, row.load, row.requests, row.request_rate,
                efficiency)

    @staticmethod
    def arguments(model: RowModel, row: LedgerRow, efficiency: Efficiency) -> tuple:
        """What :func:`.row_simulation.run_row` needs: plain, picklable values."""
        return (cost_model(model, row, efficiency), row.family, row.isl, row.osl, row.concurrency,
                model.chunk_tokens, model.max_sequences, row.load, row.requests,
                row.request_rate)

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
        if workers <= 1 or len(todo) < 2 * workers:
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
        run = self.runs[key]
        if isinstance(run, str):
            return run
        value = run.value(row.metric, row.statistic)
        if row.metric in row_simulation.RATE_METRICS:
            value = row_simulation.rate_metric(row, value)
        if not math.isfinite(value) or value <= 0:
            return f"the simulated {row.metric} is not a positive number ({value})"
        return value


def predict(model: RowModel, row: LedgerRow, efficiency: Efficiency,
            simulations: Simulations) -> float | str:
    """One row's prediction: the roofline at concurrency 1, the simulator above."""
    if row.concurrency > 1:
        return simulations.value(model, row, efficiency)
    value = float(predict_arrays(model, row, efficiency.candidates())[0])
    if not math.isfinite(value) or value <= 0:
        return f"the prediction is not a positive number ({value})"
    return value


def preset_efficiency(name: str, *, host: PluginHost) -> Efficiency:
    """The engine parameters an efficiency preset sets (those it writes)."""
    from ..scenario import read_toml
    from ..schema import parse_field

    host.check_loaded()
    registries = host.registries
    info = registries.presets["efficiency"][name]
    data, _ = read_toml(info.path)
    table = data.get("efficiency", {})
    specs = registries.fields["efficiency"]
    return Efficiency.of({n: parse_field(specs[n], table[n]) for n in FITTED
                          if n in table and n in specs})


def preset_intervals(name: str, *, host: PluginHost) -> list[intervals.Entry]:
    """The interval groups an efficiency preset records (none for an unknown preset)."""
    from ..scenario import read_toml

    info = host.registries.presets.get("efficiency", {}).get(name)
    if info is None:
        return []
    data, _ = read_toml(info.path)
    return intervals.entries_of(data.get("preset", {}).get("interval", []))


def predict_rows(rows: Sequence[LedgerRow], *, calibrated: bool = True,
                 efficiencies: Mapping[str, Efficiency] | None = None,
                 host: PluginHost, progress=None,
                 simulations: Simulations | None = None) -> Validation:
    """Predict every row: with its efficiency preset (``calibrated``; the family's, or
    its refinement for the row's card, :func:`preset_name`), or with the ideal roofline
    and nothing kept back (the documents' convention).

    ``efficiencies`` replaces a preset's values (keyed by preset or family name).
    Calibrated predictions carry the 80 % interval of the preset's held-out errors for
    the row's group (engine, dense or MoE, concurrency band, card generation).
    """
    models: dict[tuple, RowModel | str] = {}
    structures: dict = {}
    simulations = simulations if simulations is not None else Simulations()
    chosen = dict(efficiencies or {})
    groups: dict[str, list[intervals.Entry]] = {}
    planned: list[tuple[LedgerRow, str | None, RowModel | str, Efficiency]] = []
    for row in rows:
        name = preset_name(row, host=host) if calibrated and row.family in ENGINE_FAMILIES else None
        key = (model_key(row), name)
        if key not in models:
            models[key] = row_model(row, preset=name, ideal=not calibrated, host=host,
                                    structures=structures)
        if progress is not None:
            progress.update()
        efficiency = Efficiency()
        if name is not None:
            efficiency = chosen.get(name, chosen.get(row.family, Efficiency()))
        planned.append((row, name, models[key], efficiency))
    simulations.prefetch([(m, r, e) for r, _, m, e in planned if not isinstance(m, str)],
                         workers=WORKERS)
    points = []
    for row, name, model, efficiency in planned:
        if isinstance(model, str):
            points.append(Prediction(row, None, model))
            continue
        value = predict(model, row, efficiency, simulations)
        if isinstance(value, str):
            points.append(Prediction(row, None, value))
            continue
        band = None
        if name is not None:
            if name not in groups:
                groups[name] = preset_intervals(name, host=host)
            entry = intervals.choose(groups[name], intervals.kind_of(row.metric),
                                     row_attributes(model, row))
            if entry is not None:
                band = intervals.bounds(value, entry)
        points.append(Prediction(row, value, interval=band))
    return Validation(tuple(points))


def model_key(row: LedgerRow) -> tuple:
    return (row.engine, row.family, row.hardware, row.gpus, row.model, str(row.hf_config),
            row.weights, row.kv_cache, row.tensor, row.expert, row.attention_dp, row.isl, row.osl)


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
