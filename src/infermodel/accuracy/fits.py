"""Efficiency presets fitted on the accuracy ledger: physical parameters inside their
bounds, cross-validated by leaving one source out.

**What is fitted.** Each engine family's parameters of the physical efficiency model
(:data:`.predictions.FITTED`: sustained bandwidth share, GEMM ceiling, attention share,
dequantising share, kernel time, launch time, host time per iteration and per sequence,
collective latency). Their bounds are their ``[efficiency]`` fields' ranges, declared by
the efficiency plugin (the field reference lists them with their sources): every
candidate the fit considers lies inside them, so no preset can leave them. A parameter
no training row is sensitive to (a collective latency without multi-card rows) stays at
its prior.

**How.** Every row is compiled once and evaluated on arrays: a fixed Latin-hypercube
design of :data:`DESIGN` candidates in the bounded box (times on a log scale), each
row's analytic steady state (:func:`.closed_loop.closed_loop`, exactly the roofline at
concurrency 1) at every candidate. The loss is the mean ``|log(predicted / measured)|``
per metric, averaged over metrics, plus a small pull (:data:`SHRINK`) toward an anchor
in the box's unit coordinates: the priors for the pooled fit of every engine's rows, the
pooled fit for an engine's. Each row's error counts robustly (:data:`ROBUST`): a figure
the physics cannot reach inside its bounds does not drag every parameter to a bound. The best candidate is refined by two rounds of local
samples. Rows at concurrency > 1 are predicted by the serving simulator; the stand-in is
scaled per row by its simulated / analytic ratio at the engine's in-sample fit (two
passes), and every error reported is the simulator's.

**Held out by source.** Each source (a published page, one URL) is predicted by fits on
every other source: the pooled fit without it, then its engine's fit without it pulled
toward that pooled fit. An engine with no other source is predicted by the pooled fit of
the other engines. A published table never predicts itself.

**Per-card refinements.** Where an engine's rows span several cards and one card has
rows from at least :data:`REFINE_MIN_SOURCES` independent sources, that card gets its own
bandwidth, GEMM and attention shares (the card's; the engine's host and kernel times
stay), fitted on its rows and held out by source the same way (``FAMILY-CARD``).

**Intervals.** The held-out residuals are grouped by what drives the error (engine,
dense or MoE, concurrency band, card generation) and each group gets an 80 % interval for
a source not yet seen (``infermodel.engine.intervals.calibrate``: rows from at least four
sources; the sum of a source effect and a within-source deviation, every source alike;
widened by the scale at which 80 % of each left-out source's rows fall inside). Their
coverage is itself checked on data they did not see: each source's rows against the
whole calibration redone on the other sources' residuals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..engine import intervals
from . import row_simulation
from .ledger import LedgerRow, engine_of_family, split_preset
from .predictions import (
    FITTED,
    WORKERS,
    Efficiency,
    Prediction,
    RowModel,
    Simulations,
    Validation,
    model_key,
    predict,
    predict_arrays,
    predict_group,
    refined_name,
    row_attributes,
    row_model,
    summarise,
)

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["DESIGN", "REFINE_MIN_SOURCES", "SHRINK", "Bounds", "Fit", "ParameterReport", "fit", "priors"]

#: Candidates of the global design (Latin hypercube, seeded).
DESIGN = 1536
#: Local samples per refinement round, and the rounds' radii in unit coordinates.
LOCAL = 96
RADII = (0.12, 0.04)
#: Pull toward the anchor: loss += SHRINK · mean over active parameters of (u − u_anchor)².
SHRINK = 0.05
#: Independent sources a card needs for its own refinement of an engine's preset.
REFINE_MIN_SOURCES = 2
#: Parameters a card's refinement refits (the card's own shares).
CARD_PARAMETERS = ("bandwidth_fraction", "expert_bandwidth_fraction", "gemm_fraction", "attention_fraction")
#: |Δ log prediction| across a parameter's bound that makes a row rest on it.
SENSITIVE = 0.02
SEED = 0


@attrs.frozen
class Bounds:
    """The bounded box of the fitted parameters, from their fields' ranges."""

    names: tuple[str, ...]
    low: np.ndarray
    high: np.ndarray
    log: np.ndarray  # bool: sampled on a log scale (times)
    prior: np.ndarray

    @classmethod
    def of(cls, host: PluginHost, priors: Mapping[str, float]) -> Bounds:
        host.check_loaded()
        fields = host.registries.fields["efficiency"]
        names = tuple(n for n in FITTED if n in fields)
        low = np.array([float(fields[n].minimum or 0.0) for n in names])
        high = np.array([float(fields[n].maximum or 0.0) for n in names])
        log = np.array([fields[n].unit == "s" for n in names])
        prior = np.array([priors.get(n, (low[i] + high[i]) / 2) for i, n in enumerate(names)])
        return cls(names, low, high, log, prior)

    def floor(self) -> np.ndarray:
        """The low end of each axis as sampled (a log axis cannot start at 0)."""
        return np.where(self.log, np.maximum(self.low, self.high * 1e-3), self.low)

    def values(self, unit: np.ndarray) -> dict[str, np.ndarray]:
        """Unit coordinates (candidates × parameters) to parameter values."""
        lo, hi = self.floor(), self.high
        out = np.where(self.log, lo * (hi / lo) ** unit, lo + (hi - lo) * unit)
        out = np.clip(out, self.low, self.high)
        return {name: out[:, i] for i, name in enumerate(self.names)}

    def unit(self, values: Mapping[str, float]) -> np.ndarray:
        lo, hi = self.floor(), self.high
        x = np.array([max(values[n], lo[i]) for i, n in enumerate(self.names)])
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(self.log, np.log(x / lo) / np.log(hi / lo), (x - lo) / (hi - lo))
        return np.clip(u, 0.0, 1.0)


@attrs.frozen
class ParameterReport:
    """One fitted parameter of one preset, as ``infermodel presets efficiency`` shows it."""

    value: float
    low: float
    high: float
    fitted: bool
    #: Its value in each held-out fit (one per source left out).
    folds: tuple[float, ...]
    #: Rows (and their sources) whose prediction moves by more than 2 % across its bound.
    rows: tuple[str, ...]
    sources: tuple[str, ...]


@attrs.frozen
class Fit:
    """Fitted parameters per preset with in-sample and held-out predictions."""

    efficiencies: Mapping[str, Efficiency]
    in_sample: Validation
    held_out: Validation
    #: Rows each preset's fit used, by preset (a family, or a family on one card).
    used: Mapping[str, tuple[str, ...]]
    #: Each preset's own in-sample and held-out predictions of its rows.
    points: Mapping[str, tuple[tuple[Prediction, ...], tuple[Prediction, ...]]] = {}
    #: Each preset's independent sources (source groups) and their pages (URLs),
    #: parameters and interval groups.
    sources: Mapping[str, tuple[str, ...]] = {}
    urls: Mapping[str, tuple[str, ...]] = {}
    parameters: Mapping[str, Mapping[str, ParameterReport]] = {}
    groups: Mapping[str, tuple[intervals.Entry, ...]] = {}
    domains: Mapping[str, Mapping[str, Any]] = {}
    #: Held-out predictions with intervals built without their own source.
    checked: Validation = attrs.field(factory=lambda: Validation(()))
    #: The factor the groups' two-level intervals were widened by (``intervals.calibrate``).
    interval_scale: float = 1.0

    def coverage(self) -> dict[str, dict[str, float]]:
        """Share of held-out rows inside intervals built without their source, overall
        and per engine family.
        """
        out: dict[str, dict[str, float]] = {}
        marks: dict[str, list[bool]] = {}
        for p in self.checked.predicted:
            if p.covered is None:
                continue
            for key in ("all", p.row.family):
                marks.setdefault(key, []).append(bool(p.covered))
        for key, found in sorted(marks.items()):
            out[key] = {"n": len(found), "covered": round(sum(found) / len(found), 4)}
        return out

    def widths(self) -> dict[str, dict[str, float]]:
        """Per metric kind and overall: the rows with an interval built without their
        source, the share inside, and the median and 90th percentile of its width as the
        ratio of its ends (high / low).
        """
        found: dict[str, list[tuple[float, bool]]] = {}
        for p in self.checked.predicted:
            if p.interval is None:
                continue
            low, high = p.interval
            for key in ("all", intervals.kind_of(p.row.metric)):
                found.setdefault(key, []).append((high / low, bool(p.covered)))
        out = {}
        for key, items in sorted(found.items()):
            ratios = [r for r, _ in items]
            out[key] = {"n": len(items), "covered": round(sum(c for _, c in items) / len(items), 4),
                        "median_ratio": round(float(np.median(ratios)), 3),
                        "p90_ratio": round(float(np.percentile(ratios, 90)), 3)}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"efficiency": {f: e.as_dict() for f, e in sorted(self.efficiencies.items())},
                "cross_validation": "leave one source out",
                "in_sample": self.in_sample.summary(), "held_out": self.held_out.summary(),
                "interval_coverage": self.coverage(),
                "interval_widths": self.widths(), "interval_scale": round(self.interval_scale, 4),
                "rows_used": {f: list(ids) for f, ids in sorted(self.used.items())},
                "sources": {f: list(s) for f, s in sorted(self.sources.items())}}


#: Scale of the robust loss: a row's |log error| counts as ROBUST · tanh(|e| / ROBUST),
#: so a row off by far more than e^ROBUST (a figure the physics cannot reach inside its
#: bounds) stops pulling every parameter to a bound.
ROBUST = 1.0


def _loss(log_errors: np.ndarray, metrics: Sequence[str]) -> np.ndarray:
    """Mean robust |log error| per metric, averaged over metrics: each metric weighs the same."""
    metrics_array = np.array(metrics)
    total = np.zeros(log_errors.shape[1])
    names = sorted(set(metrics))
    with np.errstate(invalid="ignore"):
        robust = ROBUST * np.tanh(np.abs(log_errors) / ROBUST)
    robust = np.where(np.isnan(robust), ROBUST, robust)
    for metric in names:
        mask = metrics_array == metric
        total += robust[mask].mean(axis=0)
    return total / max(len(names), 1)


class _Fitter:
    """Every row's analytic stand-in on the design, the corrections and the simulations."""

    def __init__(self, bounds: Bounds, rows: Sequence[LedgerRow],
                 models: Mapping[str, RowModel]) -> None:
        self.bounds, self.rows, self.models = bounds, list(rows), dict(models)
        rng = np.random.default_rng(SEED)
        k = len(bounds.names)
        # Latin hypercube: each axis cut in DESIGN strata, one sample per stratum.
        unit = (rng.permuted(np.tile(np.arange(DESIGN), (k, 1)), axis=1).T
                + rng.random((DESIGN, k))) / DESIGN
        self.design = np.vstack([bounds.unit(dict(zip(bounds.names, bounds.prior))), unit])
        values = bounds.values(self.design)
        self.analytic = self._log_errors_of(self.rows, values)
        self.correction = {r.id: 0.0 for r in self.rows}
        self.simulations = Simulations()

    # -- evaluation -------------------------------------------------------------
    def _log_errors_of(self, rows: Sequence[LedgerRow],
                       values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """log(predicted / measured) of every row at every candidate, the rows of one
        structure evaluated together.
        """
        groups: dict[Any, list[LedgerRow]] = {}
        for row in rows:
            groups.setdefault(self.models[row.id].structure, []).append(row)
        out = {}
        for members in groups.values():
            predicted = predict_group([self.models[r.id] for r in members], members, values)
            measured = np.array([r.value for r in members])[:, None]
            with np.errstate(all="ignore"):
                errors = np.where(np.isfinite(predicted) & (predicted > 0),
                                  np.log(predicted / measured), np.inf)
            out.update({r.id: errors[i] for i, r in enumerate(members)})
        return out

    def efficiency(self, values: Mapping[str, float]) -> Efficiency:
        return Efficiency.of(values)

    def simulate(self, row: LedgerRow, values: Mapping[str, float]) -> Prediction:
        value = predict(self.models[row.id], row, self.efficiency(values), self.simulations)
        return Prediction(row, None, value) if isinstance(value, str) else Prediction(row, value)

    def sensitivity(self, rows: Sequence[LedgerRow], at: Mapping[str, float]) -> dict[str, list[str]]:
        """The rows whose prediction moves by more than :data:`SENSITIVE` across each
        parameter's bound, others held at ``at``.
        """
        out: dict[str, list[str]] = {}
        for i, name in enumerate(self.bounds.names):
            grid = {n: np.array([at[n], at[n]]) for n in self.bounds.names}
            grid[name] = np.array([self.bounds.low[i], self.bounds.high[i]])
            if self.bounds.log[i]:
                grid[name] = np.array([self.bounds.floor()[i], self.bounds.high[i]])
            errors = self._log_errors_of(rows, grid)
            moved = []
            for row in rows:
                change = abs(errors[row.id][1] - errors[row.id][0])
                if math.isfinite(change) and change > SENSITIVE:
                    moved.append(row.id)
            out[name] = moved
        return out

    # -- choosing ---------------------------------------------------------------
    def choose(self, rows: Sequence[LedgerRow], anchor: Mapping[str, float],
               active: Sequence[str] | None = None, base: Mapping[str, float] | None = None
               ) -> dict[str, float]:
        """The parameters minimising the loss on ``rows`` plus the pull toward ``anchor``;
        only ``active`` parameters move (the others stay at ``base``, else the anchor).
        """
        names = self.bounds.names
        active = [n for n in (active or names) if n in names]
        keep = dict(anchor if base is None else base)
        mask = np.array([n in active for n in names])
        target = self.bounds.unit(anchor)
        metrics = [r.metric for r in rows]
        fixed = self.bounds.unit(keep)
        if base is None and len(active) == len(names):
            matrix = np.stack([self.analytic[r.id] + self.correction[r.id] for r in rows])
            loss = _loss(matrix, metrics) + self._pull(self.design, target, mask)
            best = self.design[int(np.argmin(loss))]
            best_loss = float(np.min(loss))
        else:
            best, best_loss = fixed, math.inf
            units = self._around(fixed, mask, 0.5, LOCAL * 3)
            best, best_loss = self._better(rows, metrics, units, target, mask, best, best_loss)
        for radius in RADII:
            units = self._around(best, mask, radius, LOCAL)
            best, best_loss = self._better(rows, metrics, units, target, mask, best, best_loss)
        chosen = {n: float(v[0]) for n, v in self.bounds.values(best[None, :]).items()}
        return {n: (chosen[n] if n in active else keep[n]) for n in names}

    def _pull(self, units: np.ndarray, target: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if not mask.any():
            return np.zeros(len(units))
        return SHRINK * ((units[:, mask] - target[mask]) ** 2).mean(axis=1)

    def _around(self, centre: np.ndarray, mask: np.ndarray, radius: float, count: int) -> np.ndarray:
        rng = np.random.default_rng(SEED + int(radius * 1e4) + count)
        units = np.tile(centre, (count, 1))
        step = radius * (2 * rng.random((count, int(mask.sum()))) - 1)
        units[:, mask] = np.clip(units[:, mask] + step, 0.0, 1.0)
        return np.vstack([centre[None, :], units])

    def _better(self, rows, metrics, units, target, mask, best, best_loss):
        errors = self._log_errors_of(rows, self.bounds.values(units))
        matrix = np.stack([errors[r.id] + self.correction[r.id] for r in rows])
        loss = _loss(matrix, metrics) + self._pull(units, target, mask)
        index = int(np.argmin(loss))
        if float(loss[index]) < best_loss:
            return units[index], float(loss[index])
        return best, best_loss

    # -- the simulator's correction -----------------------------------------------
    def simulate_all(self, jobs: Sequence[tuple[LedgerRow, Mapping[str, float]]]
                     ) -> dict[str, Prediction]:
        """Every (row, values) simulated, the runs spread over :data:`WORKERS` processes."""
        self.simulations.prefetch([(self.models[r.id], r, self.efficiency(v)) for r, v in jobs],
                                  workers=WORKERS)
        return {row.id: self.simulate(row, values) for row, values in jobs}

    def correct_all(self, groups: Sequence[tuple[Sequence[LedgerRow], Mapping[str, float]]]) -> None:
        """Simulate each group of rows at its values and set their corrections."""
        self.simulate_all([(r, v) for rows, v in groups for r in rows if r.concurrency > 1])
        for rows, values in groups:
            self.correct(rows, values)

    def correct(self, rows: Sequence[LedgerRow], values: Mapping[str, float]) -> float:
        """Simulate ``rows`` at ``values``: set their corrections, return the simulated loss."""
        errors, metrics = [], []
        grid = {n: np.array([v]) for n, v in values.items()}
        for row in rows:
            point = self.simulate(row, values)
            if point.predicted is None:
                continue
            errors.append(math.log(point.predicted / row.value))
            metrics.append(row.metric)
            if row.concurrency > 1:
                stand_in = float(predict_arrays(self.models[row.id], row, grid)[0])
                if math.isfinite(stand_in) and stand_in > 0:
                    self.correction[row.id] = math.log(point.predicted / stand_in)
        return float(_loss(np.array(errors)[:, None], metrics)[0]) if errors else math.inf


def _sources(rows: Sequence[LedgerRow]) -> list[str]:
    return list(dict.fromkeys(r.group for r in rows))


def _refined_cards(members: Sequence[LedgerRow]) -> list[str]:
    """Cards with rows from at least :data:`REFINE_MIN_SOURCES` sources, in a family
    with rows on several cards.
    """
    sources: dict[str, set] = {}
    for row in members:
        sources.setdefault(row.hardware, set()).add(row.group)
    if len(sources) < 2:
        return []
    return sorted(card for card, found in sources.items() if len(found) >= REFINE_MIN_SOURCES)


def _models(rows, host, progress) -> tuple[dict[str, RowModel], list[Prediction]]:
    cache: dict[tuple, RowModel | str] = {}
    structures: dict = {}
    models: dict[str, RowModel] = {}
    unpredictable = []
    for row in rows:
        key = model_key(row)
        if key not in cache:
            # The stand-in keeps every sequence at full length: the simulator, whose
            # figures every error reported is, pages the cache in itself, and a stand-in at
            # the mean length moved the held-out errors both ways (docs/accuracy.rst).
            cache[key] = row_model(row, host=host, structures=structures, admission=False)
        model = cache[key]
        if progress is not None:
            progress.update()
        reason = model if isinstance(model, str) else (
            row_simulation.unsupported(row) if row.concurrency > 1 else None)
        if reason is not None:
            unpredictable.append(Prediction(row, None, reason))
            continue
        assert not isinstance(model, str)
        models[row.id] = model
    return models, unpredictable


def priors(host: PluginHost) -> dict[str, float]:
    """The physical model's priors: what a scenario that sets none of its parameters,
    on an engine without a fitted preset, evaluates them to.
    """
    from ..engine.evaluation import evaluate_afresh
    from ..scenario import resolve

    data = {"scenario": {"name": "priors"}, "model": {"preset": "llama-3.1-8b"},
            "hardware": {"preset": "h100-sxm", "count": 2},
            "workload": {"prompt_tokens": 16, "output_tokens": 4},
            "efficiency": {"model": "physical", "engine": "none"},
            "levers": {"parallelism": {"tensor": 2}}}
    values = evaluate_afresh(resolve(data, {}, None, host=host)).values
    out = {name: float(values[name]) for name in FITTED if name in values}
    if "parallel_collective_latency" in values:
        out["collective_latency"] = float(values["parallel_collective_latency"])
    return out


def fit(rows: Sequence[LedgerRow], *, host: PluginHost, progress=None) -> Fit:
    """Fit every engine family's parameters on the ledger, leaving one source out to
    cross-validate (see the module docstring).
    """
    bounds = Bounds.of(host, priors(host))
    models, unpredictable = _models(rows, host, progress)
    usable = [r for r in rows if r.id in models]
    fitter = _Fitter(bounds, usable, models)
    prior = dict(zip(bounds.names, bounds.prior))
    families = sorted({r.family for r in usable})
    members = {f: [r for r in usable if r.family == f] for f in families}

    # In sample: the pooled fit; each family's, corrected once by the simulator; each
    # refined card's.
    fitted: dict[str, dict[str, float]] = {}
    pooled = fitter.choose(usable, prior)
    first = {family: fitter.choose(members[family], pooled) for family in families}
    fitter.correct_all([(members[f], first[f]) for f in families])
    moved: dict[str, dict[str, list[str]]] = {}
    for family in families:
        fitted[family] = fitter.choose(members[family], pooled)
        moved[family] = fitter.sensitivity(members[family], fitted[family])
        # A parameter no row rests on keeps its prior rather than a design's accident.
        fitted[family].update({n: prior[n] for n, ids in moved[family].items() if not ids})
    used = {f: tuple(r.id for r in members[f]) for f in families}
    card_rows: dict[str, list[LedgerRow]] = {}
    preset_of = {r.id: r.family for r in usable}
    for family in families:
        for card in _refined_cards(members[family]):
            name = refined_name(family, card)
            group = [r for r in members[family] if r.hardware == card]
            fitted[name] = fitter.choose(group, fitted[family], CARD_PARAMETERS, fitted[family])
            card_rows[name] = group
            used[name] = tuple(r.id for r in group)
            preset_of.update({r.id: name for r in group})
    inside = fitter.simulate_all([(r, fitted[preset_of[r.id]]) for r in usable])

    # Held out: each source by fits on the others.
    folds: dict[str, list[dict[str, float]]] = {name: [] for name in fitted}
    jobs: list[tuple[LedgerRow, dict[str, float]]] = []
    alone: set[str] = set()
    for source in _sources(usable):
        test = [r for r in usable if r.group == source]
        rest = [r for r in usable if r.group != source]
        pooled_without = fitter.choose(rest, prior) if rest else dict(prior)
        for family in sorted({r.family for r in test}):
            others = [r for r in members[family] if r.group != source]
            own = fitter.choose(others, pooled_without) if others else pooled_without
            folds[family].append(own)
            refined: dict[str, dict[str, float]] = {}
            for row in (r for r in test if r.family == family):
                name = preset_of[row.id]
                values = own
                if name != family:
                    if name not in refined:
                        group = [r for r in card_rows[name] if r.group != source]
                        refined[name] = (fitter.choose(group, own, CARD_PARAMETERS, own)
                                         if group else own)
                        if group:
                            folds[name].append(refined[name])
                    values = refined[name]
                jobs.append((row, values))
                if not others:
                    alone.add(row.id)
    held = fitter.simulate_all(jobs)
    for row_id in alone:
        family = held[row_id].row.family
        held[row_id] = attrs.evolve(held[row_id], reason=(
            f"no other {family} source: predicted by the other engines' fit (the priors "
            "where there is no other source at all)"))
    # Report.
    missing = {p.row.id: p for p in unpredictable}
    ordered_inside = tuple(inside.get(r.id) or missing[r.id] for r in rows)
    ordered_held = tuple(held.get(r.id) or missing[r.id] for r in rows)
    points = {name: (tuple(inside[i] for i in ids), tuple(held[i] for i in ids))
              for name, ids in used.items()}
    efficiencies = {name: Efficiency.of(values) for name, values in fitted.items()}
    by_id = {r.id: r for r in usable}
    groups, scale = _groups(held, models, by_id, preset_of)
    checked = _checked(held, models, by_id)
    parameters = {}
    sources = {}
    urls = {}
    domains = {}
    for name, ids in used.items():
        group_rows = [by_id[i] for i in ids]
        sources[name] = tuple(_sources(group_rows))
        urls[name] = tuple(dict.fromkeys(r.source for r in group_rows))
        rests = moved.get(name) or fitter.sensitivity(group_rows, fitted[name])
        parameters[name] = {
            n: ParameterReport(fitted[name][n], float(bounds.low[i]), float(bounds.high[i]),
                               bool(rests[n]) and (n in CARD_PARAMETERS or name in families),
                               tuple(f[n] for f in folds[name]) if rests[n] else (fitted[name][n],),
                               tuple(rests[n]), tuple(_sources([by_id[i] for i in rests[n]])))
            for i, n in enumerate(bounds.names)}
        domains[name] = _domain(group_rows, models)
    return Fit(efficiencies, Validation(ordered_inside), Validation(ordered_held), used, points,
               sources, urls, parameters, groups, domains, Validation(tuple(checked)), scale)


def _residuals(held: Mapping[str, Prediction], models, by_id) -> list[intervals.Residual]:
    """The held-out predictions as interval residuals: log(predicted / measured)."""
    out = []
    for row_id, point in held.items():
        row = by_id[row_id]
        if point.predicted is None:
            continue
        attributes = row_attributes(models[row_id], row)
        out.append(intervals.Residual(intervals.kind_of(row.metric),
                                      {a: attributes[a] for a in intervals.ATTRIBUTES},
                                      row.group, math.log(point.predicted / row.value)))
    return out


def _own(entries: Sequence[intervals.Entry], family: str) -> tuple[intervals.Entry, ...]:
    """The groups a preset of ``family`` records: its own engine's and every engine's."""
    return tuple(e for e in entries if e.attributes.get("engine") in (intervals.ANY, family))


def _groups(held, models, by_id, preset_of) -> tuple[dict[str, tuple[intervals.Entry, ...]], float]:
    """Each preset's interval groups (``intervals.calibrate`` on every held-out residual)
    and the scale they carry.
    """
    calibration = intervals.calibrate(_residuals(held, models, by_id))
    out = {name: _own(calibration.entries, engine_of_family(split_preset(name)[0]))
           for name in set(preset_of.values())}
    return out, calibration.scale


def _checked(held, models, by_id) -> list[Prediction]:
    """Each held-out prediction with an interval built without its own source: the whole
    calibration (groups and scale) redone on the other sources' residuals.
    """
    residuals = _residuals(held, models, by_id)
    out = []
    for source in dict.fromkeys(by_id[i].group for i in held):
        calibration = intervals.calibrate([r for r in residuals if r.source != source])
        for row_id, point in held.items():
            row = by_id[row_id]
            if row.group != source or point.predicted is None:
                continue
            entry = intervals.choose(calibration.entries, intervals.kind_of(row.metric),
                                     row_attributes(models[row_id], row))
            band = intervals.bounds(point.predicted, entry) if entry is not None else None
            out.append(attrs.evolve(point, interval=band))
    return out


def _domain(rows: Sequence[LedgerRow], models: Mapping[str, RowModel]) -> dict[str, Any]:
    concurrency = [r.concurrency for r in rows]
    tensor = [r.tensor for r in rows]
    return {"cards": sorted({r.hardware for r in rows}),
            "generations": sorted({models[r.id].attributes["generation"] for r in rows}),
            "models": sorted({models[r.id].attributes["moe"] for r in rows}),
            "concurrency": [min(concurrency), max(concurrency)],
            "tensor": [min(tensor), max(tensor)]}


def summary_of(points) -> dict[str, dict[str, float]]:
    """Median and 90th-percentile |error| of the predicted points, per metric."""
    return summarise(p for p in points if p.predicted is not None)
