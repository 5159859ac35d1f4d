"""Predictions checked against the accuracy ledger: per-row errors, per-metric summaries,
efficiency fits with held-out cross-validation, and intervals from held-out errors.

Each ledger row becomes a scenario: its model (preset or ``hf_config``) and hardware
preset, ``hardware.count = gpus``, the row's formats through the quantisation lever
(8-bit float weights also take 8-bit activations, as FP8 checkpoints run), tensor
parallelism with an explicit ring all-reduce over the card's interconnect, and the
``[efficiency] preset`` its engine family names. At concurrency 1 the row is the
scenario's roofline: the prefill of one prompt (TTFT), the decode step at batch 1
(ITL, TPOT) and ``osl / (TTFT + (osl − 1) · ITL)`` (throughput). At concurrency > 1 it
is a closed loop of the row's clients in the serving simulator
(:mod:`infermodel.ledger_simulation`: fixed lengths, the warm-up round excluded).

Errors are relative, ``(predicted − measured) / measured``; summaries give the median
and 90th percentile of ``|error|`` per metric.

Fitting (:func:`fit`) evaluates every row once on a grid of efficiency candidates
(prefill MFU × MBU × t0 × all-reduce latency, the decode MFU equal to the prefill MFU,
see :func:`efficiency_grid`: the graph is compiled
once per row and evaluated on arrays), then picks per engine family the candidate with
the smallest mean |log(predicted / measured)|, each metric weighted equally. A
simulation per candidate would be far too slow, so the search runs on a stand-in: the
analytic steady state of :func:`infermodel.closed_loop.closed_loop` (exactly the
roofline at concurrency 1), each row at concurrency > 1 scaled by its simulated /
analytic ratio at the previous pass's choice; passes repeat until the choice is a
fixed point (at most :data:`FIT_PASSES`), and of the candidates visited the one whose
*simulated* loss is smallest is kept. Every error the fit reports, in-sample and
held-out, is the simulator's. Cross-validation holds out whole published tables (a
source's one configuration at every concurrency), so a held-out point's configuration
was never seen by its fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from . import ledger_simulation
from .closed_loop import closed_loop
from .ledger import ENGINE_FAMILIES, LedgerRow

if TYPE_CHECKING:
    from .host import PluginHost

__all__ = ["Efficiency", "Fit", "Prediction", "Validation", "efficiency_grid", "fit",
           "predict_rows", "summarise"]

#: Efficiency inputs a fit sets, by quantity name.
EFFICIENCY_QUANTITIES = ("prefill_mfu", "decode_mfu", "mbu", "t0")
#: The per-step latency of one all-reduce transfer, fitted with the efficiencies: it is
#: the engine's collective library, not the wire (only rows on several cards have it).
LINK_LATENCY = "parallel_link_latency"
EIGHT_BIT_FLOATS = ("fp8-e4m3", "fp8-e5m2", "mxfp8")
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

    >>> from infermodel.ledger import LedgerRow
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
    if row.tensor != row.gpus:
        return (f"tensor = {row.tensor} with gpus = {row.gpus}: only pure tensor parallelism "
                "(tensor = gpus) is mapped")
    if row.hf_config is not None and not row.hf_config.is_file():
        return f"hf_config {row.hf_config} does not exist"
    return None


@attrs.frozen
class _RowModel:
    """A row's compiled graph and the inputs that do not change between candidates."""

    compiled: Any
    inputs: dict[str, Any]
    capacity: float


def _row_model(row: LedgerRow, *, engine_preset: bool = True, host: PluginHost) -> _RowModel | str:
    """Compile the row's scenario once; a string is the reason it cannot be predicted.

    With ``engine_preset`` the row's efficiency preset (:func:`preset_name`) supplies
    what is not fitted (the runtime reserve); without it the card's defaults stay (no
    reserve).
    """
    from .errors import InfermodelError
    from .evaluation import compile_graph
    from .graph import build_graph
    from .scenario import resolve

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
    return _RowModel(compiled, inputs, capacity)


def _predict_arrays(model: _RowModel, row: LedgerRow,
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
    return state.output_tokens_per_s


def _cost_model(model: _RowModel, row: LedgerRow, efficiency: Efficiency):
    """The simulator's iteration cost of the row's scenario at ``efficiency``."""
    from .simulator import CostModel

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
        self.runs: dict[tuple, ledger_simulation.ServingFigures | str] = {}

    def value(self, model: _RowModel, row: LedgerRow, efficiency: Efficiency) -> float | str:
        """The row's metric simulated at ``efficiency``, or why it cannot be."""
        from .simulator import SimulationError

        key = (_model_key(row), row.concurrency, efficiency)
        if key not in self.runs:
            reason = ledger_simulation.unsupported(row)
            try:
                self.runs[key] = reason or ledger_simulation.simulate_row(
                    _cost_model(model, row, efficiency), row.family, row.isl, row.osl,
                    row.concurrency)
            except SimulationError as exc:
                self.runs[key] = f"the closed-loop simulation failed: {exc}"
        run = self.runs[key]
        if isinstance(run, str):
            return run
        value = run.value(row.metric, row.statistic)
        if not math.isfinite(value) or value <= 0:
            return f"the simulated {row.metric} is not a positive number ({value})"
        return value


def _predict(model: _RowModel, row: LedgerRow, efficiency: Efficiency,
             simulations: Simulations) -> float | str:
    """One row's prediction: the roofline at concurrency 1, the simulator above."""
    if row.concurrency > 1:
        return simulations.value(model, row, efficiency)
    value = float(_predict_arrays(model, row, efficiency.candidates())[0])
    if not math.isfinite(value) or value <= 0:
        return f"the prediction is not a positive number ({value})"
    return value


def preset_efficiency(family: str, *, host: PluginHost) -> Efficiency:
    """The efficiency values an engine family's ``[efficiency] preset`` sets."""
    from .scenario import read_toml
    from .schema import parse_field

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
    models: dict[tuple, _RowModel | str] = {}
    simulations = simulations if simulations is not None else Simulations()
    chosen: dict[str, Efficiency] = dict(efficiencies or {})
    bands: dict[str, dict[str, tuple[float, float]]] = {}
    points = []
    for row in rows:
        key = _model_key(row)
        if key not in models:
            models[key] = _row_model(row, engine_preset=calibrated, host=host)
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


def _model_key(row: LedgerRow) -> tuple:
    return (row.engine, row.family, row.hardware, row.gpus, row.model, str(row.hf_config),
            row.weights, row.kv_cache, row.tensor, row.expert, row.isl, row.osl)


# ---------------------------------------------------------------------------------
# Fitting with held-out cross-validation
# ---------------------------------------------------------------------------------


def efficiency_grid(*, fine: bool = False) -> dict[str, np.ndarray]:
    """Candidate efficiencies: every combination of the axes below (t0 in seconds).

    The decode MFU is the prefill MFU: the serving simulator, which predicts every row
    at concurrency > 1, prices every iteration at one compute rate, and the rows at
    concurrency 1 are bound by memory, so the ledger cannot tell the two apart.
    """
    step = 0.025 if fine else 0.05
    axes = {
        "prefill_mfu": np.round(np.arange(0.15, 0.95 + 1e-9, step), 4),
        "mbu": np.round(np.arange(0.20, 1.0 + 1e-9, step), 4),
        "t0": np.array([0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0]) * 1e-3,
        LINK_LATENCY: np.array([1.0, 3.0, 10.0, 30.0]) * 1e-6,
    }
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    grid = {name: m.ravel() for name, m in zip(axes, mesh)}
    grid["decode_mfu"] = grid["prefill_mfu"].copy()
    return grid


@attrs.frozen
class Fit:
    """Fitted efficiencies per family with in-sample and held-out predictions."""

    efficiencies: Mapping[str, Efficiency]
    in_sample: Validation
    held_out: Validation
    folds: int
    #: Rows each preset's fit used, by preset (a family, or a family on one card).
    used: Mapping[str, tuple[str, ...]]
    #: Each preset's own in-sample and held-out predictions of its rows.
    points: Mapping[str, tuple[tuple[Prediction, ...], tuple[Prediction, ...]]] = {}

    def intervals(self) -> dict[str, tuple[float, float]]:
        """Per metric, the 10th and 90th percentiles of held-out relative errors."""
        errors = errors_by_metric(self.held_out.predicted)
        return {m: (float(np.percentile(e, 10)), float(np.percentile(e, 90)))
                for m, e in sorted(errors.items())}

    def to_dict(self) -> dict[str, Any]:
        return {"efficiency": {f: attrs.asdict(e) for f, e in sorted(self.efficiencies.items())},
                "folds": self.folds,
                "in_sample": self.in_sample.summary(), "held_out": self.held_out.summary(),
                "intervals": {m: list(b) for m, b in self.intervals().items()},
                "rows_used": {f: list(ids) for f, ids in sorted(self.used.items())}}


def _loss(log_errors: np.ndarray, metrics: Sequence[str]) -> np.ndarray:
    """Mean |log error| per metric, averaged over metrics: each metric weighs the same."""
    metrics_array = np.array(metrics)
    total = np.zeros(log_errors.shape[1])
    names = sorted(set(metrics))
    for metric in names:
        mask = metrics_array == metric
        total += np.abs(log_errors[mask]).mean(axis=0)
    return total / len(names)


#: Most passes of the fit's simulated / analytic correction (see the module docstring).
FIT_PASSES = 4
#: Published tables a card needs, in a family with rows on several cards, for a
#: per-card refinement of the family's preset (``FAMILY-CARD``, e.g. ``trtllm-l40s``).
REFINE_MIN_TABLES = 5


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


class _Fitter:
    """The fit's state: every row's analytic stand-in on the grid, and the simulations."""

    def __init__(self, grid: Mapping[str, np.ndarray], folds: int) -> None:
        self.grid, self.folds = grid, folds
        self.model_of: dict[str, _RowModel] = {}
        self.analytic: dict[str, np.ndarray] = {}
        self.log_errors: dict[str, np.ndarray] = {}
        self.simulations = Simulations()

    def add(self, row: LedgerRow, model: _RowModel) -> None:
        values = _predict_arrays(model, row, self.grid)
        with np.errstate(all="ignore"):
            self.log_errors[row.id] = np.where(np.isfinite(values) & (values > 0),
                                               np.log(values / row.value), np.inf)
        self.analytic[row.id] = values
        self.model_of[row.id] = model

    def efficiency_at(self, index: int) -> Efficiency:
        return Efficiency(**{n: float(self.grid[n][index]) for n in EFFICIENCY_QUANTITIES},
                          link_latency=float(self.grid[LINK_LATENCY][index]))

    def predicted(self, row: LedgerRow, index: int) -> Prediction:
        if row.concurrency == 1:
            return Prediction(row, float(row.value * math.exp(self.log_errors[row.id][index])))
        value = self.simulations.value(self.model_of[row.id], row, self.efficiency_at(index))
        return Prediction(row, None, value) if isinstance(value, str) else Prediction(row, value)

    def loss(self, train: Sequence[LedgerRow], index: int) -> tuple[float, np.ndarray]:
        """The simulated loss at ``index`` and each row's log correction (simulated /
        analytic; 0 at concurrency 1 and where either is not a positive number).
        """
        correction, errors, metrics = np.zeros(len(train)), [], []
        for i, row in enumerate(train):
            value = self.predicted(row, index).predicted
            if value is None:
                continue
            errors.append(math.log(value / row.value))
            metrics.append(row.metric)
            stand_in = self.analytic[row.id][index]
            if row.concurrency > 1 and math.isfinite(stand_in) and stand_in > 0:
                correction[i] = math.log(value / stand_in)
        total = float(_loss(np.array(errors)[:, None], metrics)[0]) if errors else math.inf
        return total, correction

    def choose(self, train: Sequence[LedgerRow]) -> int | None:
        if not train:
            return None
        matrix = np.stack([self.log_errors[r.id] for r in train])
        metrics = [r.metric for r in train]
        index = int(np.argmin(_loss(matrix, metrics)))
        visited: dict[int, float] = {}
        for _ in range(FIT_PASSES):
            if index in visited:
                break
            visited[index], correction = self.loss(train, index)
            index = int(np.argmin(_loss(matrix + correction[:, None], metrics)))
        return min(visited, key=lambda i: (visited[i], i))

    def group(self, members: Sequence[LedgerRow], label: str
              ) -> tuple[Efficiency, list[Prediction], list[Prediction]]:
        """Fit ``members``; their in-sample predictions, and their held-out ones (each
        fold of whole tables predicted by a fit on the others).
        """
        best = self.choose(members)
        assert best is not None  # every group has members
        inside = [self.predicted(r, best) for r in members]
        tables = list(dict.fromkeys(r.table for r in members))
        fold_of = {table: i % self.folds for i, table in enumerate(tables)}
        held: list[Prediction] = []
        for k in range(self.folds):
            test = [r for r in members if fold_of[r.table] == k]
            if not test:
                continue
            index = self.choose([r for r in members if fold_of[r.table] != k])
            if index is None:
                held.extend(Prediction(r, None, f"no other {label} table to fit on") for r in test)
                continue
            held.extend(self.predicted(r, index) for r in test)
        return self.efficiency_at(best), inside, held


def _refined_cards(members: Sequence[LedgerRow]) -> list[str]:
    """Cards with at least :data:`REFINE_MIN_TABLES` tables, in a family on several."""
    tables: dict[str, set] = {}
    for row in members:
        tables.setdefault(row.hardware, set()).add(row.table)
    if len(tables) < 2:
        return []
    return sorted(card for card, found in tables.items() if len(found) >= REFINE_MIN_TABLES)


def fit(rows: Sequence[LedgerRow], *, host: PluginHost, folds: int = 5, progress=None,
        fine: bool = False) -> Fit:
    """Fit each engine family's efficiency on the ledger, and cross-validate the fit.

    Rows are grouped into published tables (:attr:`LedgerRow.table`); the tables are
    dealt round-robin into ``folds`` folds (in ledger order, so the split is
    deterministic), and each fold is predicted by a fit on the others. A card with
    :data:`REFINE_MIN_TABLES` tables or more, in a family with rows on several cards,
    also gets its own fit (a refinement of the family's preset, cross-validated on that
    card's tables alone); its rows' in-sample and held-out predictions are then the
    refinement's, as ``validate --calibrated`` predicts them with it.
    """
    fitter = _Fitter(efficiency_grid(fine=fine), folds)
    models: dict[tuple, _RowModel | str] = {}
    unpredictable: list[Prediction] = []
    predictable: list[LedgerRow] = []
    for row in rows:
        key = _model_key(row)
        if key not in models:
            models[key] = _row_model(row, host=host)
        model = models[key]
        if progress is not None:
            progress.update()
        reason = model if isinstance(model, str) else (
            ledger_simulation.unsupported(row) if row.concurrency > 1 else None)
        if reason is not None:
            unpredictable.append(Prediction(row, None, reason))
            continue
        assert not isinstance(model, str)
        fitter.add(row, model)
        predictable.append(row)
    efficiencies: dict[str, Efficiency] = {}
    used: dict[str, tuple[str, ...]] = {}
    points: dict[str, tuple[tuple[Prediction, ...], tuple[Prediction, ...]]] = {}
    chosen: dict[str, tuple[Prediction, Prediction]] = {}
    for family in sorted({r.family for r in predictable}):
        members = [r for r in predictable if r.family == family]
        groups = [(family, members)] + [
            (refined_name(family, card), [r for r in members if r.hardware == card])
            for card in _refined_cards(members)]
        for name, group in groups:
            efficiencies[name], inside, held = fitter.group(group, name)
            used[name] = tuple(r.id for r in group)
            points[name] = (tuple(inside), tuple(held))
            by_id = {p.row.id: p for p in held}
            chosen.update({p.row.id: (p, by_id[p.row.id]) for p in inside})
    in_sample = [chosen[r.id][0] if r.id in chosen else None for r in rows]
    held_out = [chosen[r.id][1] if r.id in chosen else None for r in rows]
    missing = {p.row.id: p for p in unpredictable}
    return Fit(efficiencies,
               Validation(tuple(p or missing[r.id] for p, r in zip(in_sample, rows))),
               Validation(tuple(p or missing[r.id] for p, r in zip(held_out, rows))),
               folds, used, points)


__all__ += ["ENGINE_RESERVES", "REFINE_MIN_TABLES", "errors_by_metric", "held_out_intervals",
            "preset_efficiency", "preset_name", "preset_toml", "refined_name", "scenario_data"]


# ---------------------------------------------------------------------------------
# Engine defaults that are not fitted, and the preset files a fit writes
# ---------------------------------------------------------------------------------

#: Runtime memory kept back by each engine family by default, as a fraction of a card
#: (what the ledger cannot measure: it holds speeds, not memory), with its source.
ENGINE_RESERVES = {
    "vllm": (0.10, "vLLM's default gpu_memory_utilization = 0.9 (engine arguments)"),
    "sglang": (0.12, "SGLang's mem_fraction_static = 0.88 at one card (the SGLang v0.3 "
                     "benchmark notes; it lowers the fraction on larger tensor degrees)"),
    "trtllm": (0.10, "TensorRT-LLM's kv_cache_free_gpu_mem_fraction = 0.9 of the memory "
                     "left after the weights; 0.1 of the card is the same reserve only when "
                     "the weights are small, and larger than TensorRT-LLM's otherwise"),
}
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


def preset_toml(name: str, result: Fit, ledger: str) -> str:
    """The efficiency preset file ``name`` (a family, or a family on one card) that a fit
    determines.
    """
    eff = result.efficiencies[name]
    ids = result.used[name]
    family, _, card = name.partition("-")
    inside_points, held_points = result.points[name]
    held = summarise(p for p in held_points if p.predicted is not None)
    inside = summarise(p for p in inside_points if p.predicted is not None)
    errors = errors_by_metric(held_points)
    reserve, reserve_source = ENGINE_RESERVES[family]
    served = ENGINE_NAMES[family] + (f" on {card} cards" if card else "")
    lines = [
        f'# Efficiency preset "{name}": the [efficiency] table of a scenario served by '
        f"{served}.",
        "# Written by `infermodel validate --ledger LEDGER --fit --presets-dir DIR` from the",
        f"# {ledger}: the efficiencies below minimise the mean |log(predicted / "
        "measured)| over the",
        f"# {len(ids)} rows listed in [preset] rows (each metric weighted equally). "
        "Errors, |predicted − measured| / measured:",
    ]
    for metric in sorted(inside):
        a, b = inside[metric], held.get(metric)
        held_text = (f"held-out median {b['median_abs_error']:.1%}, p90 {b['p90_abs_error']:.1%}"
                     if b else "no held-out estimate")
        lines.append(f"#   {metric}: n = {a['n']}, in-sample median {a['median_abs_error']:.1%}, "
                     f"p90 {a['p90_abs_error']:.1%}; {held_text}")
    lines += [
        "# Any field written in a scenario's [efficiency] table overrides the value here.",
        "",
        "[preset]",
        (f'description = "{served}: efficiencies fitted on the accuracy ledger\'s {card} rows '
         f'(a refinement of the {family} preset)"' if card else
         f'description = "{served}: efficiencies fitted on the accuracy ledger"'),
        f'source = "infermodel accuracy ledger ({len(ids)} published measurements), '
        f'{result.folds}-fold cross-validation by published table"',
        "rows = [",
        *[f'    "{i}",' for i in ids],
        "]",
        "",
        "# 10th and 90th percentiles of the held-out relative errors, per metric: a",
        "# measurement is expected within predicted / (1 + p90) … predicted / (1 + p10).",
        "[preset.held_out_error]",
        *[f"{m} = [{np.percentile(e, 10):.4f}, {np.percentile(e, 90):.4f}]"
          for m, e in sorted(errors.items())],
        "",
        "[efficiency]",
        f"prefill_mfu = {eff.prefill_mfu:g}",
        f"decode_mfu = {eff.decode_mfu:g}",
        f"mbu = {eff.mbu:g}",
        f'''t0 = "{eff.t0 * 1e3:g} ms"''',
        "",
        "[hardware]",
        f"# {reserve_source}.",
        f"reserve = {reserve:g}",
    ]
    if eff.link_latency is not None:
        lines += ["# Latency of one ring all-reduce step on several cards (the engine's collectives,",
                  "# fitted with the efficiencies; it replaces the card preset's illustrative value).",
                  f'interconnect_latency = "{eff.link_latency * 1e6:g} us"']
    return "\n".join(lines) + "\n"


def held_out_intervals(family: str, *, host: PluginHost) -> dict[str, tuple[float, float]]:
    """The held-out error percentiles an efficiency preset records (empty if none)."""
    from .scenario import read_toml

    info = host.registries.presets["efficiency"].get(family)
    if info is None:
        return {}
    data, _ = read_toml(info.path)
    table = data.get("preset", {}).get("held_out_error", {})
    return {m: (float(v[0]), float(v[1])) for m, v in table.items()
            if isinstance(v, list) and len(v) == 2}
