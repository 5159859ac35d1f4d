"""The ``[search]`` table: its keys typed through the strict converter lever tables go
through (every problem reported at once, with its file, key path and line), and
:class:`SearchSpec`, what a search optimises under which constraints, read from the
table and the caller's arguments (arguments win). :mod:`.searching` runs the search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import FormulaError, Problem, ScenarioError
from ..schema import FieldValueError, TableValue

#: Default number of runners-up shown.
DEFAULT_SHOW = 5
OBJECTIVE_KEYS = ("minimise", "maximise", "minimize", "maximize")


class ObjectiveText(TableValue):
    """An objective: a quantity or a formula over quantities, as text."""

    @classmethod
    def structure(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise FieldValueError(f"got {value!r}", expected='a quantity or formula, e.g. '
                                                             '"cost_per_million_output_tokens"')
        return value


class ConstraintList(TableValue):
    """``constraints``: one formula or a list of them, each a condition."""

    @classmethod
    def structure(cls, value: Any) -> tuple[str, ...]:
        listed = [value] if isinstance(value, str) else value
        if not isinstance(listed, list) or not all(isinstance(c, str) for c in listed):
            raise FieldValueError(f"got {value!r}", expected='a list of formulas, e.g. ["fits", '
                                                             '"tokens_per_s_per_user >= 25"]')
        return tuple(listed)


class RunnersUp(TableValue):
    """``show``: how many runners-up are shown, a whole number >= 0."""

    @classmethod
    def structure(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FieldValueError(f"got {value!r}", expected="a number of runners-up, e.g. 5")
        return value


class QuantityNames(TableValue):
    """``quantities``: more quantities to report at each point."""

    @classmethod
    def structure(cls, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
            raise FieldValueError(f"got {value!r}", expected="a list of quantity names")
        return tuple(value)


class SearchRate(TableValue):
    """``rate``: requests/s each choice is simulated at, for simulated constraints."""

    @classmethod
    def structure(cls, value: Any) -> float:
        import math

        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                value > 0 and math.isfinite(value)):
            raise FieldValueError(f"got {value!r}", expected="an arrival rate in requests/s, > 0")
        return float(value)


class ServerCount(TableValue):
    """``replicas``: servers of each simulated choice, a whole number >= 1."""

    @classmethod
    def structure(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
            raise FieldValueError(f"got {value!r}", expected="a number of servers, 1 to 1,024")
        return value


if TYPE_CHECKING:
    Objective = str
    Constraints = tuple[str, ...]
    Show = int
    Names = tuple[str, ...]
    RateValue = float
    Servers = int
else:
    Objective, Constraints, Show, Names = ObjectiveText, ConstraintList, RunnersUp, QuantityNames
    RateValue, Servers = SearchRate, ServerCount


@attrs.frozen
class SearchTable:
    """The ``[search]`` table, typed: one objective (either spelling), the constraints,
    the runners-up shown and more quantities to report.
    """

    minimise: Objective | None = None
    maximise: Objective | None = None
    minimize: Objective | None = None
    maximize: Objective | None = None
    constraints: Constraints = ()
    show: Show | None = None
    quantities: Names = ()
    rate: RateValue | None = None
    replicas: Servers | None = None


SEARCH_KEYS = tuple(a.name for a in attrs.fields(SearchTable))


@attrs.frozen
class SearchSpec:
    """What a search optimises and under which constraints (formulas as text)."""

    sense: str  # "minimise" or "maximise"
    objective: str
    constraints: tuple[str, ...] = ()
    show: int = DEFAULT_SHOW
    quantities: tuple[str, ...] = ()
    keys: Mapping[str, str] = attrs.field(factory=dict, repr=False)  # formula text -> table key
    #: requests/s and servers each choice is simulated at, for simulated constraints
    rate: float | None = None
    replicas: int | None = None


def _read_search_table(scenario) -> tuple[SearchTable, dict[str, str], str | None]:
    """The ``[search]`` table typed as a lever table is, every problem raised at once;
    with the table key of each formula and the objective's key.
    """
    problems: list[Problem] = []

    def add(key, message, expected=None, suggestion=None):
        problems.append(scenario.problem(key, message, expected=expected, suggestion=suggestion))

    table = scenario.read_table("search", SearchTable, add)
    given = [k for k in OBJECTIVE_KEYS if table is not None and getattr(table, k) is not None]
    if len(given) > 1:
        add(f"search.{given[1]}", "give one objective: minimise or maximise")
    if problems:
        raise ScenarioError(problems)
    assert table is not None
    keys: dict[str, str] = {}
    if given:
        keys[getattr(table, given[0])] = f"search.{given[0]}"
    for text in table.constraints:
        keys.setdefault(text, "search.constraints")
    return table, keys, given[0] if given else None


def search_spec(scenario, *, minimise: str | None = None, maximise: str | None = None,
                constraints: Sequence[str] | None = None, show: int | None = None,
                use_table: bool = True, rate: float | None = None,
                replicas: int | None = None) -> SearchSpec:
    """Read ``[search]`` (unless ``use_table`` is false); arguments given here win."""
    if use_table and scenario.tables.get("search") is not None:
        table, keys, key = _read_search_table(scenario)
    else:
        table, keys, key = SearchTable(), {}, None
    sense = None if key is None else ("minimise" if key.startswith("mini") else "maximise")
    objective = None if key is None else getattr(table, key)
    if minimise is not None and maximise is not None:
        raise ScenarioError(Problem("give one objective: minimise or maximise, not both"))
    if minimise is not None or maximise is not None:
        sense = "minimise" if minimise is not None else "maximise"
        objective = minimise if minimise is not None else maximise
        assert objective is not None
        keys.pop(objective, None)
    if objective is None:
        raise ScenarioError(Problem(
            "nothing to search for: no objective",
            file=str(scenario.path) if scenario.path else None, key="search",
            expected='[search] with minimise = "QUANTITY" (or maximise), or --minimise QUANTITY',
            suggestion='for example: minimise = "cost_per_million_output_tokens"'))
    if constraints is not None:
        chosen = list(constraints)
        for text in chosen:
            if text not in table.constraints:
                keys.pop(text, None)
    else:
        chosen = list(table.constraints)
    assert sense is not None  # set with the objective
    return SearchSpec(sense, objective, tuple(chosen),
                      show if show is not None else
                      (table.show if table.show is not None else DEFAULT_SHOW),
                      tuple(table.quantities), keys,
                      rate if rate is not None else table.rate,
                      replicas if replicas is not None else table.replicas)


def located(exc: FormulaError, scenario, key: str | None) -> FormulaError:
    """``exc``'s problems placed at ``key`` of the scenario's file (unchanged without one)."""
    if key is None:
        return exc
    problems = []
    for p in exc.problems:
        where = scenario.problem(key, p.message, expected=p.expected, suggestion=p.suggestion)
        problems.append(where)
    return FormulaError(problems)


__all__ = ["DEFAULT_SHOW", "OBJECTIVE_KEYS", "SEARCH_KEYS", "SearchSpec", "SearchTable", "located",
           "search_spec"]
