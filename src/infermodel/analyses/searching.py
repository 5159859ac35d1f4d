"""What-if search: the best point of a sweep under constraints.

``[search]`` in a scenario (or the arguments of :func:`search`) names an objective
to minimise or maximise and constraints, each a formula over quantities parsed by
:mod:`infermodel.analyses.formula` (never executed)::

    [search]
    minimise = "cost_per_million_output_tokens"
    constraints = ["fits", "tokens_per_s_per_user >= 25"]

Constraints may also name simulated figures at a load (``simulated_ttft_p95 <= 1`` with
``rate = 20``): :mod:`infermodel.analyses.simulated`.

The table is typed in :mod:`.search_table` (:class:`SearchTable`, :class:`SearchSpec`)
through the strict converter lever tables go through, so every problem in it is reported
at once with its file, key path and line.
The choices are the points of the scenario's sweep (``[sweep]`` and ``over``).
Objective and constraints are evaluated on the sweep's arrays. A point is
feasible when every constraint holds and the objective is a number; the result
ranks the feasible points (ties keep grid order) and, for each rejected point,
names the first constraint it failed.

>>> found = search("scenarios/planner-70b-32-users.toml")  # doctest: +SKIP
>>> found.best_labels  # doctest: +SKIP
{'hardware.preset': 'h200', ...}
>>> print(found.explain("tpot"))  # doctest: +SKIP
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormulaError, InfermodelError, ScenarioError, suggest
from .formula import CONDITION, NUMBER, Formula, parse_formula
from .search_table import SEARCH_KEYS, SearchSpec, SearchTable, located, search_spec
from .simulated import uses_simulation

#: Default number of rejected points listed one by one.
DEFAULT_REJECTED = 100
#: Objective undefined (NaN, or a quantity the point lacks): the "constraint" index used.
OBJECTIVE = -2
FEASIBLE = -1


class SearchResult:
    """The outcome of a search: the ranking of feasible points and why others failed."""

    def __init__(self, spec: SearchSpec, objective: Formula, constraints: list[Formula], sweep,
                 values: np.ndarray, failed: np.ndarray):
        self.spec = spec
        self.objective = objective
        self.constraints = constraints
        self.sweep = sweep
        #: The objective at every point (NaN where undefined).
        self.values = values
        #: Per point: -1 feasible, k the first failed constraint, -2 objective undefined.
        self.failed = failed
        feasible = np.flatnonzero(failed == FEASIBLE)
        key = values[feasible] if spec.sense == "minimise" else -values[feasible]
        self.ranking = feasible[np.argsort(key, kind="stable")]
        #: For each condition quantity a constraint names, the quantities it compares.
        self.details: dict[str, tuple[str, ...]] = {}
        #: Simulated figures (``simulated_*``) of the choices simulated (NaN elsewhere).
        self.simulated: dict[str, np.ndarray] = {}

    def _defined(self, name: str, index: int) -> bool:
        if name in self.simulated:
            return not np.isnan(self.simulated[name][index])
        return bool(self.sweep.defined(name)[index])

    def _value(self, name: str, index: int) -> float:
        return float(self.simulated[name][index] if name in self.simulated else self.sweep[name][index])

    def _unit(self, name: str) -> str:
        from .simulated import PREFIX, metric_unit

        return metric_unit(name[len(PREFIX):]) if name in self.simulated else self.sweep.units[name]

    def _reason_names(self, formula: Formula) -> list[str]:
        names = list(formula.names)
        for name in formula.names:
            for dep in self.details.get(name, ()):
                if dep not in names:
                    names.append(dep)
        return names

    @property
    def sense(self) -> str:
        return self.spec.sense

    @property
    def best(self) -> int | None:
        """The index of the best point in the sweep, or None when nothing is feasible."""
        return int(self.ranking[0]) if len(self.ranking) else None

    @property
    def best_labels(self) -> dict[str, Any] | None:
        return None if self.best is None else self.sweep.labels(self.best)

    def best_scenario(self):
        """The winning point as a resolved scenario."""
        if self.best is None:
            raise InfermodelError("no choice satisfies every constraint")
        return self.sweep.scenario_at(self.best)

    def evaluate_best(self):
        """:func:`infermodel.evaluate` of the winning point."""
        if self.best is None:
            raise InfermodelError("no choice satisfies every constraint")
        return self.sweep.evaluate_at(self.best)

    def warnings(self) -> list:
        """The result warnings (as ``infermodel run`` prints them) of the winning point,
        or of the scenario as written when no choice satisfies every constraint.
        """
        from ..engine.evaluation import evaluate_afresh

        if self.best is None:
            return list(evaluate_afresh(self.sweep.scenario).warnings)
        return list(self.evaluate_best().warnings)

    def explain(self, name: str, index: int | None = None, *, depth: int | None = None):
        """The derivation of quantity ``name`` at the winner (or at point ``index``)."""
        from ..derivation import derive

        index = self.best if index is None else index
        if index is None:
            raise InfermodelError("no choice satisfies every constraint, so there is no winner "
                                  "to explain")
        return derive(self.sweep.evaluate_at(index), name, depth=depth)

    def failure(self, index: int) -> str | None:
        """Why point ``index`` was rejected (None when it is feasible)."""
        code = int(self.failed[index])
        if code == FEASIBLE:
            return None
        if code == OBJECTIVE:
            return f"the objective {self.objective.text} is undefined"
        return self.constraints[code].text

    def rejected_counts(self) -> dict[str, int]:
        """How many points failed first on each constraint."""
        counts = Counter(int(c) for c in self.failed if c != FEASIBLE)
        out = {}
        for k, formula in enumerate(self.constraints):
            if counts.get(k):
                out[formula.text] = counts[k]
        if counts.get(OBJECTIVE):
            out[f"objective {self.objective.text} undefined"] = counts[OBJECTIVE]
        return out

    def eliminated(self) -> list[tuple[str, Any, dict[str | None, int]]]:
        """Axis values no feasible point has: (axis, value, first failures by constraint)."""
        out: list[tuple[str, Any, dict[str | None, int]]] = []
        index = self.sweep.plan.indices(0, len(self.sweep)) if len(self.sweep) <= 10_000_000 else None
        if index is None:
            return out
        feasible = self.failed == FEASIBLE
        if sum(len(a) > 1 for a in self.sweep.axes) < 2:
            return out  # one field: the list of rejected points says it all
        for axis, positions in zip(self.sweep.axes, index):
            if len(axis) < 2:
                continue
            for j, label in enumerate(axis.labels):
                mine = positions == j
                if not feasible[mine].any():
                    reasons = Counter(self.failure(int(i)) for i in np.flatnonzero(mine))
                    out.append((axis.name, label, dict(reasons.most_common())))
        return out

    def _shown(self) -> list[str]:
        names = []
        for name in (*self.objective.names, *[n for c in self.constraints for n in c.names],
                     *self.spec.quantities):
            if name not in names:
                names.append(name)
        return names

    def _values_text(self, index: int, names: Iterable[str]) -> str:
        from ..printing import show

        parts = []
        for name in names:
            if not self._defined(name, index):
                parts.append(f"{name} undefined" if name not in self.simulated else f"{name} not simulated")
                continue
            value = self._value(name, index)
            unit = self._unit(name)
            if unit == "bool":
                parts.append(f"{name} = {'yes' if value else 'no'}")
            else:
                parts.append(f"{name} = {show(float(value), unit)}")
        return ", ".join(parts)

    def best_intervals(self) -> dict[str, tuple[float, float]]:
        """The 80 % interval of each shown latency or throughput at the winner, where its
        efficiency preset calibrated one (``infermodel.engine.intervals``).
        """
        from ..engine.intervals import interval

        if self.best is None:
            return {}
        names = [n for n in self._shown() if n.startswith(("ttft", "tpot", "tokens_per_s"))]
        if not names:
            return {}
        result = self.evaluate_best()
        found = {name: interval(result, name) for name in names if name in result.values}
        return {name: band for name, band in found.items() if band is not None}

    def _intervals_text(self) -> str:
        from ..printing import show

        parts = [f"{name} {show(low, self._unit(name))} … {show(high, self._unit(name))}"
                 for name, (low, high) in self.best_intervals().items()]
        return "80 % interval of a measurement: " + "; ".join(parts) if parts else ""

    def _assumptions(self) -> list[str]:
        """What the prices shown and the simulated figures assume, one line each."""
        lines = []
        known = self.sweep.plan.all_quantities
        for name in self._shown():
            quantity = known.get(name)
            if quantity is not None and quantity.unit == "USD" and "per_" in name:
                lines.append(f"  {name}: {quantity.description} (a busy rate: not the rate "
                             "meeting latency objectives, which `infermodel plan` prices)")
        if self.simulated:
            servers = self.spec.replicas or "the [simulation] table's"
            lines.append(f"  simulated_*: each choice simulated at {self.spec.rate:g} requests/s "
                         f"on {servers} server(s), after every other constraint")
        return lines

    def _objective_text(self, index: int) -> str:
        from ..printing import show

        value = float(self.values[index])
        if self.objective.names == (self.objective.text,):
            return show(value, self.sweep.units[self.objective.text])
        return f"{value:.6g}"

    def _point_text(self, index: int) -> str:
        labels = self.sweep.labels(index)
        return ", ".join(f"{k} = {_show_label(v)}" for k, v in labels.items()) or "(the scenario)"

    def set_arguments(self, index: int) -> list[str]:
        """``--set`` arguments that reproduce point ``index`` with ``infermodel run``."""
        from ..scenario import REMOVE

        out = []
        for path, value in self.sweep.overrides(index).items():
            if value is REMOVE:
                continue
            out.append(shlex.quote(f"{path}={_toml(value)}"))
        return out

    def _misfit(self, index: int) -> str:
        """`` ✗ does not fit`` for a choice whose batch does not fit in memory."""
        if "fits" in self.sweep.quantities and not bool(self.sweep["fits"][index]):
            return "  ✗ does not fit"
        return ""

    def report(self, show: int | None = None, rejected: int | None = DEFAULT_REJECTED) -> str:
        """The search as text: the winner, runners-up and rejected choices."""
        show = self.spec.show if show is None else show
        names = self._shown()
        total = len(self.sweep)
        plural = "s" if total != 1 else ""
        lines = [(f"search over {total:,} choice{plural} of {self.sweep.scenario.name}: "
                  f"{self.sense} {self.objective.text}")]
        if self.constraints:
            lines.append("subject to: " + "; ".join(c.text for c in self.constraints))
        lines += self._assumptions()
        lines.append("")
        best = self.best
        if best is None:
            lines.append("no choice satisfies every constraint")
        else:
            lines.append(f"best: {self._point_text(best)}{self._misfit(best)}")
            if self.objective.names != (self.objective.text,):
                lines.append(f"  objective {self.objective.text} = {self._objective_text(best)}")
            lines.append(f"  {self._values_text(best, names)}")
            band = self._intervals_text()
            if band:
                lines.append(f"  {band}")
            scenario_path = self.sweep.scenario.path
            if scenario_path is not None:
                command = ["infermodel", "run", shlex.quote(str(scenario_path))]
                for argument in self.set_arguments(best):
                    command += ["--set", argument]
                lines.append("  reproduce: " + " ".join(command))
            runners = self.ranking[1:1 + show]
            if len(runners):
                lines.append("")
                lines.append("runners-up:")
                for rank, index in enumerate(runners, start=2):
                    lines.append(f"  {rank}. {self._point_text(int(index))}: "
                                 f"{self.objective.text} {self._objective_text(int(index))}"
                                 f"{self._misfit(int(index))}")
        counts = self.rejected_counts()
        count = sum(counts.values())
        if count:
            lines.append("")
            lines.append(f"rejected: {count:,} of {total:,} (first failed constraint)")
            for text, n in counts.items():
                lines.append(f"  {text}: {n:,}")
            for axis, label, reasons in self.eliminated():
                why = ", ".join(f"{text} {n}" for text, n in reasons.items())
                lines.append(f"  no feasible choice with {axis} = {_show_label(label)} ({why})")
            if rejected:
                listed = np.flatnonzero(self.failed != FEASIBLE)
                lines.append("")
                lines.append("each rejected choice, with the first constraint it failed:")
                for index in listed[:rejected]:
                    index = int(index)
                    code = int(self.failed[index])
                    formula = self.objective if code == OBJECTIVE else self.constraints[code]
                    lines.append(f"  {self._point_text(index)}: fails {self.failure(index)} "
                                 f"({self._values_text(index, self._reason_names(formula))})")
                if len(listed) > rejected:
                    lines.append(f"  ... and {len(listed) - rejected:,} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def _point_dict(self, index: int) -> dict:
        from ..formatting import json_value

        values: dict[str, Any] = {}
        for name in self._shown():
            if not self._defined(name, index):
                values[name] = None
            elif self._unit(name) == "bool":
                values[name] = bool(self._value(name, index))
            else:
                values[name] = json_value(self._value(name, index))
        labels = {k: (json_value(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool)
                      else v) for k, v in self.sweep.labels(index).items()}
        return {"index": index, "choice": labels,
                "objective": json_value(float(self.values[index])), "quantities": values}

    def to_dict(self, show: int | None = None, rejected: int | None = DEFAULT_REJECTED) -> dict:
        """The search as JSON-ready data (values in base units)."""
        show = self.spec.show if show is None else show
        best = self.best
        listed = np.flatnonzero(self.failed != FEASIBLE)
        if rejected is not None:
            listed = listed[:rejected]
        return {
            "scenario": self.sweep.scenario.name,
            "objective": {"sense": self.sense, "formula": self.objective.text},
            "constraints": [c.text for c in self.constraints],
            "count": len(self.sweep),
            "feasible": len(self.ranking),
            "best": None if best is None else {**self._point_dict(best),
                                               "set": self.set_arguments(best),
                                               "intervals": {k: list(v) for k, v in
                                                             self.best_intervals().items()}},
            "runners_up": [self._point_dict(int(i)) for i in self.ranking[1:1 + show]],
            "rejected_by_constraint": self.rejected_counts(),
            "rejected": [{**self._point_dict(int(i)), "failed": self.failure(int(i))}
                         for i in listed],
        }


def _show_label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        import json

        return "{" + ", ".join(f"{k} = {json.dumps(v) if isinstance(v, str) else _toml(v)}"
                               for k, v in value.items()) + "}"
    return str(value)


def parse_search(scenario, spec: SearchSpec, plan) -> tuple[Formula, list[Formula]]:
    """Parse a search's objective and constraints against a sweep plan's quantities and
    check its extra quantities; ``check`` and :func:`search` share it, so that what one
    accepts the other does.
    """
    from .simulated import simulated_units

    units = {**simulated_units(), **{name: q.unit for name, q in plan.all_quantities.items()}}
    try:
        objective = parse_formula(spec.objective, units, kind=NUMBER, what="the objective")
    except FormulaError as exc:
        raise located(exc, scenario, spec.keys.get(spec.objective)) from None
    formulas = []
    for text in spec.constraints:
        try:
            formulas.append(parse_formula(text, units, kind=CONDITION, what="the constraint"))
        except FormulaError as exc:
            raise located(exc, scenario, spec.keys.get(text)) from None
    if any(n.startswith("simulated_") for n in objective.names):
        raise ScenarioError(scenario.problem(
            spec.keys.get(spec.objective, "search"), "the objective names a simulated figure",
            expected="an objective over quantities; simulated figures go in constraints"))
    for name in spec.quantities:
        if name not in units:
            raise ScenarioError(scenario.problem(
                "search.quantities", f"no quantity named {name!r}",
                suggestion=suggest(name, units)))
    return objective, formulas


def search(scenario, over: Mapping[str, Any] | Iterable[str] | None = None, *,
           choices: Mapping[str, Mapping] | None = None, minimise: str | None = None,
           maximise: str | None = None, constraints: Sequence[str] | None = None,
           show: int | None = None, use_table: bool = True, chunk_size: int | None = None,
           progress: bool | None = False, host=None, rate: float | None = None,
           replicas: int | None = None) -> SearchResult:
    """Find the sweep point that minimises (or maximises) an objective under constraints.

    ``scenario`` is a :class:`~infermodel.scenario.Scenario` or a path; the choices
    are its sweep (``[sweep]``, plus ``over`` and ``choices`` as for
    :func:`~infermodel.sweeping.sweep`). ``minimise``/``maximise`` and
    ``constraints`` replace those of ``[search]``. Formulas may use any quantity,
    numbers, arithmetic, comparisons, ``and``/``or``/``not`` and a few functions;
    they are parsed, never executed. Constraints may name simulated figures
    (``simulated_ttft_p95``), judged by simulating each choice at ``rate`` requests/s on
    ``replicas`` servers (or ``[search]``'s) after every other constraint.
    """
    from ..scenario import Scenario, load_scenario
    from ..sweeping import plan_sweep

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(Path(scenario), host=host)
    spec = search_spec(scenario, minimise=minimise, maximise=maximise, constraints=constraints,
                       show=show, use_table=use_table, rate=rate, replicas=replicas)
    plan = plan_sweep(scenario, over, choices=choices, use_table=use_table,
                      progress=progress, select=False, host=host)
    objective, formulas = parse_search(scenario, spec, plan)
    units = {name: q.unit for name, q in plan.all_quantities.items()}
    # A failed condition quantity (such as fits) is explained by what it compares.
    details = {}
    for formula in formulas:
        for name in formula.names:
            quantity = plan.all_quantities.get(name)
            if quantity is not None and quantity.unit == "bool":
                details[name] = tuple(d for d in quantity.dependencies if d in units)
    wanted = []
    # fits is always read, so a choice that does not fit is marked even when no
    # constraint asks for it
    fits = ("fits",) if "fits" in plan.all_quantities else ()
    for name in (*objective.names, *[n for f in formulas for n in f.names], *spec.quantities,
                 *[d for deps in details.values() for d in deps], *fits):
        if name not in wanted and name in units:
            wanted.append(name)
    plan.select(wanted)
    result = plan.run(chunk_size)
    n = len(result)
    failed = np.full(n, FEASIBLE, dtype=np.int16)
    step = 1 << 20
    values = np.empty(n, dtype=np.float64)
    for start in range(0, n, step):
        stop = min(start + step, n)
        part = slice(start, stop)
        columns = {name: result[name][part] for name in wanted}
        defined = {name: result.defined(name)[part] for name in wanted}
        chunk_failed = failed[part]
        for k, formula in enumerate(formulas):
            if uses_simulation(formula):
                continue  # judged below, on the choices that pass every other constraint
            holds = formula.evaluate(columns, stop - start)
            for name in formula.names:
                holds &= defined[name]
            chunk_failed[(chunk_failed == FEASIBLE) & ~holds] = k
        value = objective.evaluate(columns, stop - start)
        ok = ~np.isnan(value)
        for name in objective.names:
            ok &= defined[name]
        value[~ok] = np.nan
        chunk_failed[(chunk_failed == FEASIBLE) & ~ok] = OBJECTIVE
        values[part] = value
    simulated = _simulated(result, formulas, failed, wanted, spec)
    found = SearchResult(spec, objective, formulas, result, values, failed)
    found.details = details
    found.simulated = simulated
    return found


def _simulated(result, formulas, failed: np.ndarray, wanted, spec) -> dict[str, np.ndarray]:
    """Simulate the choices that pass every other constraint, and judge the constraints
    that name simulated figures (:mod:`infermodel.analyses.simulated`).
    """
    from .simulated import simulate_choices

    if not any(uses_simulation(f) for f in formulas):
        return {}
    survivors = [int(i) for i in np.flatnonzero(failed == FEASIBLE)]
    columns = simulate_choices(result, survivors, spec.rate, spec.replicas)
    every = {**{name: result[name] for name in wanted}, **columns}
    for k, formula in enumerate(formulas):
        if not uses_simulation(formula):
            continue
        holds = formula.evaluate(every, len(result))
        for name in formula.names:
            holds &= (~np.isnan(columns[name]) if name in columns else result.defined(name))
        failed[(failed == FEASIBLE) & ~holds] = k
    return columns


__all__ = ["SEARCH_KEYS", "SearchResult", "SearchSpec", "SearchTable", "parse_search", "search",
           "search_spec"]
