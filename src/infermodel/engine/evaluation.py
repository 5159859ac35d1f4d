"""Numeric evaluation: one compiled numpy function per graph structure.

The graph's formulas are turned into a single numpy function with
:func:`sympy.lambdify`, one assignment per quantity in dependency order, so each
quantity is computed once from its direct dependencies. The function is cached by
the graph's structure (its formulas, not its input values): changing a number in a
scenario reuses it, and a sweep evaluates it once on arrays. No per-point ``subs``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..quantity import ResultWarning, is_tabulated, table_of
from .graph import QuantityGraph, build_graph, unknown_quantity

_CACHE_SIZE = 64
_COMPILED: OrderedDict[tuple, CompiledGraph] = OrderedDict()


@attrs.frozen
class CompiledGraph:
    """A graph's formulas as one vectorised numpy function."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    function: Any = attrs.field(repr=False)
    #: function name -> (quantity, plugin) of the formulas calling it, to name the plugin
    #: whose formula uses a function the numeric code does not know.
    callers: Mapping[str, tuple[str, str]] = attrs.field(factory=dict, repr=False)

    def __call__(self, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Evaluate every quantity; inputs may be scalars or broadcastable arrays."""
        args = [np.asarray(values[name], dtype=float) for name in self.inputs]
        return dict(zip(self.outputs, self.call(args)))

    def call(self, arguments) -> tuple:
        """The outputs, in :attr:`outputs` order, for ``arguments`` in :attr:`inputs` order
        (float64 arrays, as :meth:`__call__` makes them).
        """
        try:
            with np.errstate(all="ignore"):
                return self.function(*arguments)
        except NameError as exc:
            from ..errors import PluginError, Problem

            quantity, plugin = self.callers.get(getattr(exc, "name", None) or "", ("?", "?"))
            raise PluginError(Problem(
                f"plugin {plugin!r}: the formula of {quantity!r} calls {exc.name!r}, a function "
                "with no numeric implementation",
                expected="sympy functions with a numeric meaning (Max, Min, floor, ceiling, "
                         "sqrt, log, exp, Abs, Piecewise, ...)")) from None


def compile_graph(graph: QuantityGraph) -> CompiledGraph:
    """Compile (or fetch from the cache) the numpy function for ``graph``."""
    key = graph.structure_key
    found = _COMPILED.get(key)
    if found is not None:
        _COMPILED.move_to_end(key)
        return found
    import sympy

    inputs = graph.inputs
    derived = [n for n in graph.order if not graph.quantities[n].is_input]
    assignments = [(graph.quantities[n].symbol, graph.quantities[n].expression) for n in derived]
    outputs = tuple(graph.order)
    output_symbols = [graph.quantities[n].symbol for n in outputs]

    def sequential(_exprs):
        # Our own "common subexpressions": one assignment per quantity, in order.
        return assignments, output_symbols

    printer = _printer()
    namespace = _numpy_namespace()
    # Every function a formula calls, found in one walk of each formula.
    calls = {n: _function_calls(graph.quantities[n].expression) for n in derived}
    for n in derived:
        # Tabulated functions (measured tables): their numpy implementations join the
        # namespace of the generated code, under their own names.
        for call in calls[n]:
            if is_tabulated(call.func):
                namespace[call.func.__name__] = table_of(call)
    try:
        function = sympy.lambdify([graph.quantities[n].symbol for n in inputs], output_symbols,
                                  modules=[namespace], printer=printer, cse=sequential,
                                  docstring_limit=0)
    except NotImplementedError:  # sympy's printer: a function with no numpy counterpart
        _unprintable(graph, derived, printer)
        raise
    callers: dict[str, tuple[str, str]] = {}
    for n in derived:
        for call in calls[n]:
            callers.setdefault(str(call.func), (n, graph.quantities[n].history[-1].plugin))
    compiled = CompiledGraph(inputs, outputs, function, callers)
    _COMPILED[key] = compiled
    if len(_COMPILED) > _CACHE_SIZE:
        _COMPILED.popitem(last=False)
    return compiled


def _function_calls(expression: Any) -> set:
    """The function calls in a formula (``expression.atoms(sympy.Function)``), tabulated
    ones included.
    """
    import sympy

    return expression.atoms(sympy.Function) if isinstance(expression, sympy.Basic) else set()


def _printer():
    """sympy's numpy printer, as lambdify would make it with our settings.

    The code printer first rewrites every ``re(...)`` of an unevaluated expression in a
    formula, walking and rebuilding the whole formula to find none (formulas have no
    complex parts); the walk is skipped where a cheaper look finds no ``re`` at all,
    which leaves the formula, and so the printed code, as it was.
    """
    from sympy import re
    from sympy.printing.numpy import NumPyPrinter

    class Printer(NumPyPrinter):
        def _handle_UnevaluatedExpr(self, expr):
            if not expr.has(re):
                return expr
            return super()._handle_UnevaluatedExpr(expr)

    return Printer({"fully_qualified_modules": False, "inline": True,
                    "allow_unknown_functions": True, "user_functions": {}})


def _unprintable(graph: QuantityGraph, derived: list[str], printer) -> None:
    """Raise a :class:`PluginError` naming the plugin whose formula cannot be printed as
    numpy code (a sympy function with no numeric counterpart).
    """
    from ..errors import PluginError, Problem

    for name in derived:
        quantity = graph.quantities[name]
        try:
            printer.doprint(quantity.expression)
        except NotImplementedError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise PluginError(Problem(
                f"plugin {quantity.history[-1].plugin!r}: the formula of {name!r} cannot be "
                f"evaluated numerically ({first})",
                expected="sympy functions with a numeric meaning (Max, Min, floor, ceiling, "
                         "sqrt, log, exp, Abs, Piecewise, ...)")) from None


def _numpy_namespace() -> dict:
    # lambdify's default numpy namespace runs ``from numpy import *``, which touches every
    # lazily loaded numpy submodule; the printer only needs these names.
    from ..quantity import NUMERIC_NAMES

    namespace = {name: getattr(np, name) for name in NUMERIC_NAMES if hasattr(np, name)}
    namespace["numpy"] = np
    return namespace


def _plain(value: Any) -> Any:
    array = np.asarray(value)
    if array.dtype == bool:
        return bool(array)
    number = float(array)
    if number.is_integer() and abs(number) < 2**53:
        return number
    return number


@attrs.frozen(slots=False)
class Result:
    """Every quantity of one scenario: value, unit, derivation and provenance.

    >>> result = evaluate("scenarios/case-study-24gb.toml")  # doctest: +SKIP
    >>> result["tpot"]  # seconds  # doctest: +SKIP
    0.00623728
    """

    scenario: Any
    graph: QuantityGraph
    values: Mapping[str, Any]

    def __getitem__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise unknown_quantity(name, self.values) from None

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def __iter__(self):
        return iter(self.graph.order)

    def quantity(self, name: str) -> QuantityValue:
        """One quantity with its value: ``result.quantity("tpot").value`` is the number in
        base units; its unit, description, formula and history read as on the graph's
        quantity.
        """
        return QuantityValue(self.graph[name], self[name], self)

    def unit(self, name: str) -> str:
        return self.graph[name].unit

    def show(self, name: str, value: Any = None) -> str:
        """A quantity's value (or ``value`` in its unit) as printed: ``"6.237 ms"``."""
        from ..printing import show

        return show(self[name] if value is None else value, self.unit(name))

    @property
    def warnings(self) -> list[ResultWarning]:
        """What a reader must know, as (quantity, message) records: notes from reading
        the scenario (an approximation by the config loader) and from building the graph
        (a lever's replacement that discarded another's change), quantities that
        evaluated to NaN (with the plugin responsible), and every plugin's
        :func:`~infermodel.hookspecs.infermodel_check_result` (a lever that slows things
        down, an effect not counted, a default the scenario did not state).
        """
        out = [ResultWarning(None, note) for note in self.scenario.notes]
        out += list(self.graph.notes)
        for name, value in self.values.items():
            if isinstance(value, float) and math.isnan(value):
                q = self.graph[name]
                who = q.history[-1].plugin
                out.append(ResultWarning(name, f"quantity {name!r} evaluated to NaN "
                                               f"(last defined by plugin {who!r})"))
        return out + list(self._checked)

    @cached_property
    def _checked(self) -> tuple[ResultWarning, ...]:
        found: list[ResultWarning] = []

        def warn(quantity, message):
            if quantity is not None and quantity not in self.values:
                raise ValueError(f"warning about {quantity!r}, which this result lacks")
            found.append(ResultWarning(quantity, str(message)))

        self.scenario.host.call_each("infermodel_check_result", lambda _p: {"result": self, "warn": warn},
                       "check")
        return tuple(found)

    def explain(self, name: str):
        from ..derivation import derive

        return derive(self, name)

    def to_dict(self) -> dict:
        from ..printing import result_to_dict

        return result_to_dict(self)

    def to_json(self, **kwargs) -> str:
        import json

        return json.dumps(self.to_dict(), **kwargs)

    def table(self, names=None) -> ResultTable:
        """Every quantity (or those named) as a table; prints as text, and a notebook
        shows it as HTML or Markdown.
        """
        return ResultTable(self, tuple(names) if names is not None else None)

    def summary(self) -> str:
        """The short summary ``infermodel run`` prints: headline figures, assumptions,
        warnings.
        """
        from ..printing import result_summary

        return result_summary(self)

    def __str__(self) -> str:
        return str(self.table())

    def _repr_markdown_(self) -> str:
        from ..printing import result_markdown

        return result_markdown(self)

    def _repr_html_(self) -> str:
        from ..printing import result_html

        return result_html(self, headline=True)

    def _repr_latex_(self) -> str:
        from ..printing import result_latex

        return "$$" + result_latex(self) + "$$"


@attrs.frozen
class QuantityValue:
    """A quantity of an evaluated scenario: the graph's quantity with its value.

    >>> q = evaluate("scenarios/case-study-24gb.toml").quantity("tpot")  # doctest: +SKIP
    >>> q.value, q.unit  # doctest: +SKIP
    (0.00623728, 's')
    """

    quantity: Any = attrs.field(repr=False)
    value: Any
    result: Any = attrs.field(repr=False, eq=False)

    def __getattr__(self, name: str) -> Any:
        # name, unit, description, plugin, expression, history, changed_by, reference...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.quantity, name)

    def __float__(self) -> float:
        return float(self.value)

    def explain(self):
        return self.result.explain(self.quantity.name)

    def __str__(self) -> str:
        from ..printing import show

        return f"{self.quantity.name} = {show(self.value, self.quantity.unit)}  ({self.quantity.description})"

    def _repr_markdown_(self) -> str:
        from ..printing import show

        return (f"`{self.quantity.name}` = **{show(self.value, self.quantity.unit)}** — "
                f"{self.quantity.description}")


@attrs.frozen
class ResultTable:
    """A result's quantities as a table: text by ``str``, HTML and Markdown in notebooks."""

    result: Any = attrs.field(repr=False)
    names: tuple[str, ...] | None = None

    def __str__(self) -> str:
        from ..printing import result_table

        return result_table(self.result, self.names)

    def __repr__(self) -> str:
        return str(self)

    def _repr_markdown_(self) -> str:
        from ..printing import result_markdown

        return result_markdown(self.result, self.names)

    def _repr_html_(self) -> str:
        from ..printing import result_html

        return result_html(self.result, self.names)


def evaluate_afresh(scenario, overrides: Mapping[str, Any] | None = None, *,
                    host=None) -> Result:
    """Evaluate every quantity of a scenario (a :class:`Scenario` or a path) afresh:
    load, build the graph, compile it (compiled functions are cached by structure) and
    call it. ``infermodel.evaluate`` (:func:`infermodel.engine.kept.evaluate`) gives the
    same result and keeps the structure for the next call.

    >>> r = evaluate_afresh("scenarios/case-study-24gb.toml", {"workload.batch": 18})  # doctest: +SKIP
    >>> round(r["tokens_per_s_total"], 1)  # doctest: +SKIP
    958.9
    """
    from ..scenario import Scenario, load_scenario

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(Path(scenario), overrides, host=host)
    elif overrides:
        scenario = scenario.with_overrides(overrides, host=host)
    graph = build_graph(scenario, host=host)
    compiled = compile_graph(graph)
    inputs = {n: graph.quantities[n].value for n in compiled.inputs}
    raw = compiled(inputs)
    values = {name: _plain(raw[name]) for name in graph.order}
    return Result(scenario, graph, values)
