"""Efficiency presets fitted on the accuracy ledger, with held-out cross-validation.

Fitting (:func:`fit`) evaluates every row once on a grid of efficiency candidates
(prefill MFU × MBU × t0 × all-reduce latency, the decode MFU equal to the prefill MFU,
see :func:`efficiency_grid`: the graph is compiled
once per row and evaluated on arrays), then picks per engine family the candidate with
the smallest mean |log(predicted / measured)|, each metric weighted equally. A
simulation per candidate would be far too slow, so the search runs on a stand-in: the
analytic steady state of :func:`.closed_loop.closed_loop` (exactly the
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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from . import row_simulation
from .ledger import LedgerRow
from .predictions import (
    EFFICIENCY_QUANTITIES,
    LINK_LATENCY,
    Efficiency,
    Prediction,
    RowModel,
    Simulations,
    Validation,
    errors_by_metric,
    model_key,
    predict_arrays,
    refined_name,
    row_model,
    summarise,
)

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["ENGINE_RESERVES", "FIT_PASSES", "REFINE_MIN_TABLES", "Fit", "efficiency_grid", "fit",
           "preset_toml"]


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


class _Fitter:
    """The fit's state: every row's analytic stand-in on the grid, and the simulations."""

    def __init__(self, grid: Mapping[str, np.ndarray], folds: int) -> None:
        self.grid, self.folds = grid, folds
        self.model_of: dict[str, RowModel] = {}
        self.analytic: dict[str, np.ndarray] = {}
        self.log_errors: dict[str, np.ndarray] = {}
        self.simulations = Simulations()

    def add(self, row: LedgerRow, model: RowModel) -> None:
        values = predict_arrays(model, row, self.grid)
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
    models: dict[tuple, RowModel | str] = {}
    unpredictable: list[Prediction] = []
    predictable: list[LedgerRow] = []
    for row in rows:
        key = model_key(row)
        if key not in models:
            models[key] = row_model(row, host=host)
        model = models[key]
        if progress is not None:
            progress.update()
        reason = model if isinstance(model, str) else (
            row_simulation.unsupported(row) if row.concurrency > 1 else None)
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
