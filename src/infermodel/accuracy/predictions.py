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

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from . import row_simulation
from .closed_loop import closed_loop
from .ledger import ENGINE_FAMILIES, LedgerRow

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
#: 8-bit float weight formats whose checkpoints also run 8-bit float activations
#: (DeepSeek-V3's 128×128-block FP8 quantises activations per 1×128 tile).
EIGHT_BIT_FLOATS = ("fp8-e4m3", "fp8-e5m2", "mxfp8", "fp8-b128")
EIGHT_BIT_INTS = ("int8",)


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

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return (self.predicted - self.row.value) / self.row.value

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


def scenario_data(row: LedgerRow, efficiency: Mapping[str, Any] | None) -> dict[str, Any]:
    """The scenario tables that describe a ledger row's deployment.

    ``efficiency`` is an ``[efficiency]`` table; None names the engine family's preset.
    """
    model = {"preset": row.model} if row.model else {"hf_config": str(row.hf_config)}
    data: dict[str, Any] = {
        "scenario": {"name": row.id, "description": f"ledger row {row.id} ({row.source})"},
        "model": model,
        "hardware": {"preset": row.hardware, "count": row.gpus},
        "workload": {"batch": 1, "prompt_tokens": row.isl, "output_tokens": row.osl},
        "efficiency": dict(efficiency) if efficiency is not None else {"preset": row.family},
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
        levers["parallelism"] = {"tensor": row.tensor, "communication": "all_reduce"}
    if levers:
        data["levers"] = levers
    return data


def _unsupported(row: LedgerRow) -> str | None:
    if row.family not in ENGINE_FAMILIES:
        return (f"engine {row.engine!r}: no efficiency preset for the family {row.family!r} "
                f"(known: {', '.join(ENGINE_FAMILIES)})")
    if row.expert > 1:
        return "expert parallelism is not modelled by the levers yet"
    if row.attention_dp > 1:
        return (f"data-parallel attention (attention_dp = {row.attention_dp}) is not modelled by "
                "the levers yet")
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


def row_model(row: LedgerRow, *, engine_preset: bool = True, host: PluginHost) -> RowModel | str:
    """Compile the row's scenario once; a string is the reason it cannot be predicted.

    With ``engine_preset`` the row's efficiency preset (:func:`preset_name`) supplies
    what is not fitted (the runtime reserve); without it the card's defaults stay (no
    reserve).
    """
    from ..engine.evaluation import compile_graph
    from ..engine.graph import build_graph
    from ..errors import InfermodelError
    from ..scenario import resolve

    reason = _unsupported(row)
    if reason:
        return reason
    # Placeholder efficiency: the candidates are set on the compiled inputs.
    table: dict[str, Any] = {"prefill_mfu": 1.0, "decode_mfu": 1.0, "mbu": 1.0, "t0": 0.0}
    if engine_preset:
        table["preset"] = preset_name(row, host=host)
    data = scenario_data(row, table)
    try:
        scenario = resolve(data, {}, None, host=host)
        graph = build_graph(scenario, host=host)
    except InfermodelError as exc:
        return "; ".join(p.message for p in exc.problems)
    compiled = compile_graph(graph)
    missing = [n for n in (*EFFICIENCY_QUANTITIES, "batch") if n not in compiled.inputs]
    if missing:
        return f"a lever defines {', '.join(missing)} itself, so the fit cannot set it"
    for needed in ("prefill_time", "decode_step_time", "max_sequences"):
        if needed not in compiled.outputs:
            return f"the scenario defines no {needed}"
    inputs = {n: graph.quantities[n].value for n in compiled.inputs}
    capacity = float(np.asarray(compiled(inputs)["max_sequences"]).ravel()[0])
    if not capacity >= 1:
        return ("the weights and one full-length sequence do not fit in the cards' memory "
                "after the runtime reserve")
    return RowModel(compiled, inputs, capacity)


def predict_arrays(model: RowModel, row: LedgerRow,
                    candidates: Mapping[str, np.ndarray]) -> np.ndarray:
    """The row's metric for every candidate (arrays of equal length), from the analytic
    steady state: the prediction at concurrency 1, the fit's stand-in above it.
    """
    running = min(row.concurrency, int(model.capacity))
    values = dict(model.inputs)
    values["batch"] = np.array([[1.0], [float(running)]])
    for name in (*EFFICIENCY_QUANTITIES, LINK_LATENCY):
        if name in candidates and name in values:
            values[name] = np.asarray(candidates[name], dtype=float)[None, :]
    if row.concurrency > 1:
        # The simulator prices every iteration at the prefill compute rate.
        values["decode_mfu"] = values["prefill_mfu"]
    out = model.compiled(values)
    prefill = np.broadcast_to(out["prefill_time"], (2, len(candidates["t0"])))[0]
    decode = np.broadcast_to(out["decode_step_time"], (2, len(candidates["t0"])))[1]
    state = closed_loop(prefill, decode, row.concurrency, model.capacity, row.osl)
    if row.metric == "ttft_ms":
        return state.ttft * 1e3
    if row.metric in ("itl_ms", "tpot_ms"):
        return state.itl * 1e3
    return row_simulation.rate_metric(row, state.output_tokens_per_s)


def cost_model(model: RowModel, row: LedgerRow, efficiency: Efficiency):
    """The simulator's iteration cost of the row's scenario at ``efficiency``."""
    from ..simulator import CostModel

    values = dict(model.inputs)
    values["batch"] = float(row.concurrency)
    for name, candidate in efficiency.candidates().items():
        if name in values:
            values[name] = float(candidate[0])
    out = {name: float(np.asarray(v).ravel()[0]) for name, v in model.compiled(values).items()
           if np.size(v) == 1}
    return CostModel.from_quantities(out)


class Simulations:
    """Closed-loop runs of ledger rows, each run once per configuration, concurrency and
    efficiency (a run gives every metric of its rows).
    """

    def __init__(self) -> None:
        self.runs: dict[tuple, row_simulation.ServingFigures | str] = {}

    def value(self, model: RowModel, row: LedgerRow, efficiency: Efficiency) -> float | str:
        """The row's metric simulated at ``efficiency``, or why it cannot be."""
        from ..simulator import SimulationError

        key = (model_key(row), row.concurrency, row.load, row.requests, row.request_rate,
               efficiency)
        if key not in self.runs:
            reason = row_simulation.unsupported(row)
            try:
                self.runs[key] = reason or row_simulation.simulate_row(
                    cost_model(model, row, efficiency), row.family, row.isl, row.osl,
                    row.concurrency, load=row.load, requests=row.requests,
                    request_rate=row.request_rate)
            except SimulationError as exc:
                self.runs[key] = f"the closed-loop simulation failed: {exc}"
        run = self.runs[key]
        if isinstance(run, str):
            return run
        value = run.value(row.metric, row.statistic)
        if row.metric in row_simulation.RATE_METRICS:
            value = row_simulation.rate_metric(row, value)
        if not math.isfinite(value) or value <= 0:
            return f"the simulated {row.metric} is not a positive number ({value})"
        return value


def _predict(model: RowModel, row: LedgerRow, efficiency: Efficiency,
             simulations: Simulations) -> float | str:
    """One row's prediction: the roofline at concurrency 1, the simulator above."""
    if row.concurrency > 1:
        return simulations.value(model, row, efficiency)
    value = float(predict_arrays(model, row, efficiency.candidates())[0])
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
                 host: PluginHost, progress=None,
                 simulations: Simulations | None = None) -> Validation:
    """Predict every row: with its efficiency preset (``calibrated``; the family's, or
    its refinement for the row's card, :func:`preset_name`), or with the ideal roofline
    and no runtime reserve (today's defaults).

    ``efficiencies`` replaces a preset's values (keyed by preset or family name).
    Calibrated predictions carry an interval: the range of measurements the preset's
    held-out errors allow.
    """
    models: dict[tuple, RowModel | str] = {}
    simulations = simulations if simulations is not None else Simulations()
    chosen: dict[str, Efficiency] = dict(efficiencies or {})
    bands: dict[str, dict[str, tuple[float, float]]] = {}
    points = []
    for row in rows:
        key = model_key(row)
        if key not in models:
            models[key] = row_model(row, engine_preset=calibrated, host=host)
        model = models[key]
        if progress is not None:
            progress.update()
        if isinstance(model, str):
            points.append(Prediction(row, None, model))
            continue
        name = preset_name(row, host=host) if calibrated else row.family
        if not calibrated:
            chosen.setdefault(name, IDEAL)
        if name not in chosen and row.family in (efficiencies or {}):
            chosen[name] = chosen[row.family]
        if name not in chosen:
            try:
                chosen[name] = preset_efficiency(name, host=host)
            except KeyError:
                points.append(Prediction(row, None, f"no efficiency preset {name!r}"))
                continue
        value = _predict(model, row, chosen[name], simulations)
        if isinstance(value, str):
            points.append(Prediction(row, None, value))
            continue
        band = None
        if calibrated and name not in bands:
            bands[name] = held_out_intervals(name, host=host)
        if calibrated and row.metric in bands[name]:
            low, high = bands[name][row.metric]
            # measured = predicted / (1 + error): the held-out errors' spread, inverted.
            band = (value / (1.0 + high), value / (1.0 + low))
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
