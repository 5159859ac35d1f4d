"""Building the quantity graph: create every node, apply transformations, wire, check.

The build runs in named stages (inputs, define, transform, wire); a failure is
reported with the stage and the plugin. Problems of the same stage are collected
and raised together. This module only builds and walks the graph; the formulas
live in plugins.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs
import sympy
from sympy.core.function import AppliedUndef

from ..declarations import Stage
from ..errors import (
    PLUGIN_FAILURES,
    GraphError,
    PluginError,
    Problem,
    UnknownQuantityError,
    suggest,
)
from ..quantity import (
    DEFINE,
    INPUT,
    REPLACE,
    WRAP,
    Change,
    Quantity,
    ResultWarning,
    check_name,
    is_tabulated,
)

if TYPE_CHECKING:  # annotations only
    from ..hookspecs import Define
    from ..host import PluginHost
    from ..registry import Registries
    from ..scenario import Scenario

DEFAULT_ORDER = Stage.DEFAULT


def check_definition(plugin: str, name: str, definition: Any, what: str) -> Any:
    """A plugin's definition of ``name`` as a sympy expression; a :class:`PluginError`
    naming the plugin for anything else (a boolean, None, a value sympy cannot hold).
    """
    if isinstance(definition, bool) or definition is None:
        raise PluginError(f"plugin {plugin!r} {what} {name!r} with {definition!r}, "
                          "which is neither a number nor a sympy expression")
    if isinstance(definition, numbers.Real) and not isinstance(definition, sympy.Basic):
        value = float(definition)
        if math.isnan(value):
            raise PluginError(f"plugin {plugin!r} {what} {name!r} as NaN")
        return value
    if isinstance(definition, sympy.Basic):
        for s in definition.free_symbols:
            if not isinstance(s, sympy.Symbol) or check_name(s.name):
                raise PluginError(f"plugin {plugin!r} {what} {name!r} with an invalid symbol {s!r}")
        undefined = sorted({str(f.func) for f in definition.atoms(AppliedUndef)
                            if not is_tabulated(f.func)})
        if undefined:
            raise PluginError(Problem(
                f"plugin {plugin!r} {what} {name!r} with the undefined function(s) "
                f"{', '.join(undefined)}, which cannot be evaluated",
                expected="sympy functions with a numeric meaning (Max, Min, floor, ceiling, "
                         "sqrt, log, exp, Abs, Piecewise, ...)"))
        return definition
    raise PluginError(f"plugin {plugin!r} {what} {name!r} with a {type(definition).__name__}, "
                      "which is neither a number nor a sympy expression")


@attrs.frozen
class _Request:
    order: int
    plugin: str
    sequence: int
    kind: str
    name: str
    payload: Any
    reason: str
    reference: str | None
    description: str | None = None


class Transformer:
    """What a plugin's ``infermodel_transform_quantities`` receives."""

    def __init__(self, plugin: str, requests: list[_Request],
                 notes: list[ResultWarning] | None = None):
        self._plugin = plugin
        self._requests = requests
        self._notes = notes if notes is not None else []

    def _add(self, kind, name, payload, reason, reference, order, description=None):
        if not isinstance(reason, str) or not reason:
            raise PluginError(f"plugin {self._plugin!r}: {kind} of {name!r} needs a reason")
        if description is not None and (not isinstance(description, str) or not description):
            raise PluginError(f"plugin {self._plugin!r}: {kind} of {name!r}: description must be "
                              "a non-empty string")
        if not isinstance(order, int) or isinstance(order, bool):
            raise PluginError(f"plugin {self._plugin!r}: order of {kind} of {name!r} must be an int")
        self._requests.append(_Request(int(order), self._plugin, len(self._requests), kind, name,
                                       payload, reason, reference, description))

    def replace(self, name: str, expression: Any, *, reason: str, reference: str | None = None,
                order: int = DEFAULT_ORDER, description: str | None = None) -> None:
        """Give ``name`` a new definition (and, optionally, a new one-line description)."""
        expression = check_definition(self._plugin, name, expression, "replaced")
        self._add(REPLACE, name, expression, reason, reference, order, description)

    def wrap(self, name: str, function: Callable[[Any], Any], *, reason: str,
             reference: str | None = None, order: int = DEFAULT_ORDER,
             description: str | None = None) -> None:
        """Define ``name`` anew in terms of its current definition: ``function(old)``."""
        if not callable(function):
            raise PluginError(f"plugin {self._plugin!r}: wrap of {name!r} needs a callable")
        self._add(WRAP, name, function, reason, reference, order, description)

    def warn(self, message: str, *, quantity: str | None = None) -> None:
        """Attach a warning to every result of this scenario: something the model leaves
        out or assumes, with how large its effect is (``result.warnings`` shows it), and
        the quantity it concerns, if one.
        """
        if not isinstance(message, str) or not message:
            raise PluginError(f"plugin {self._plugin!r}: a warning must be a non-empty string")
        self._notes.append(ResultWarning(quantity, f"{message} (plugin {self._plugin!r})"))


@attrs.frozen
class QuantityGraph:
    """The resolved quantities of one scenario, in dependency order. Immutable."""

    quantities: Mapping[str, Quantity]
    order: tuple[str, ...]
    #: Things a reader should know about how the graph was built (a replacement that
    #: discarded another lever's change, ...); results show them as warnings.
    notes: tuple[ResultWarning, ...] = ()
    #: The rows of the short summary: the plugins' registered headlines
    #: (:class:`~infermodel.declarations.HeadlineInfo`) that this graph has, in order.
    headlines: tuple = ()

    def __getitem__(self, name: str) -> Quantity:
        try:
            return self.quantities[name]
        except KeyError:
            raise unknown_quantity(name, self.quantities) from None

    def __contains__(self, name: str) -> bool:
        return name in self.quantities

    def choice(self, name: str, value: Any) -> str | None:
        """The outcome a headline's ``choices`` give ``value`` of ``name`` (which limit
        binds, say), or None when ``name`` has no choices.
        """
        for headline in self.headlines:
            if headline.name == name:
                return headline.show_choice(value)
        return None

    def __iter__(self):
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if self.quantities[n].is_input)

    @cached_property
    def nx(self):
        """The graph as a :class:`networkx.DiGraph`; an edge ``a → b`` means b uses a."""
        import networkx

        g = networkx.DiGraph()
        for name in self.order:
            q = self.quantities[name]
            g.add_node(name, unit=q.unit, plugin=q.plugin, input=q.is_input)
            for dep in q.dependencies:
                g.add_edge(dep, name)
        return g

    def ancestors(self, name: str) -> tuple[str, ...]:
        """Every quantity ``name`` depends on, transitively, in dependency order."""
        self[name]
        seen = set()
        stack = [name]
        while stack:
            current = stack.pop()
            for dep in self.quantities[current].dependencies:
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        return tuple(n for n in self.order if n in seen)

    @cached_property
    def structure_key(self) -> tuple:
        """Identifies the graph's formulas (not input values), for compile caching.

        sympy expressions hash and compare structurally, so they serve as keys directly
        (no printing to text needed).
        """
        return tuple((n, q.expression) for n, q in self.quantities.items())

    def to_dot(self) -> str:
        """Graphviz DOT text of the graph (inputs as boxes, coloured by plugin)."""
        lines = ["digraph infermodel {", "  rankdir=LR;", '  node [fontname="Helvetica"];']
        for name in self.order:
            q = self.quantities[name]
            shape = "box" if q.is_input else "ellipse"
            label = f"{name}\\n[{q.unit}] {q.plugin}"
            lines.append(f'  "{name}" [shape={shape}, label="{label}"];')
        for name in self.order:
            for dep in self.quantities[name].dependencies:
                lines.append(f'  "{dep}" -> "{name}";')
        lines.append("}")
        return "\n".join(lines)


def unknown_quantity(name: str, known) -> UnknownQuantityError:
    return UnknownQuantityError(Problem(
        f"no quantity named {name!r}", expected="a quantity defined by a loaded plugin",
        suggestion=(suggest(str(name), known) or "check for typos?") +
        " (`infermodel run SCENARIO --format json` lists every quantity)"))


def build_graph(scenario: Scenario, *, host: PluginHost | None = None) -> QuantityGraph:
    """Resolve a scenario into its quantity graph, in four named stages: inputs from
    fields, every plugin's definitions, transformations, wiring.

    >>> graph = build_graph(load_scenario("scenarios/case-study-24gb.toml"))  # doctest: +SKIP
    >>> graph["tpot"].plugin  # doctest: +SKIP
    'physics'
    """
    host = host or scenario.host
    nodes = _field_inputs(scenario, host.registries)
    held = _define(scenario, host, nodes)
    notes = _transform(scenario, host, nodes)
    _hold_all(nodes, held)
    order = _wire(nodes)
    ordered = {n: nodes[n] for n in order}
    headlines = tuple(h for h in host.registries.headlines.values() if h.name in ordered)
    return QuantityGraph(MappingProxyType(ordered), order, tuple(notes), headlines)


def _field_inputs(scenario: Scenario, registries: Registries) -> dict[str, Quantity]:
    """Stage 1: an input quantity for every field that names one and has a value."""
    nodes: dict[str, Quantity] = {}
    for spec in registries.all_fields():
        if spec.quantity is None:
            continue
        value = scenario.value(spec.path)
        if value is None:
            continue
        if isinstance(value, bool):
            value = float(value)
        nodes[spec.quantity] = Quantity(
            name=spec.quantity, unit=spec.unit, description=spec.description, plugin=spec.plugin,
            value=float(value), history=(Change(INPUT, spec.plugin, float(value), f"from {spec.path}",
                                                field=spec.path),))
    return nodes


def _define(scenario: Scenario, host: PluginHost,
            nodes: dict[str, Quantity]) -> dict[str, tuple[str, dict[str, float]]]:
    """Stage 2: every plugin's ``infermodel_define_quantities``; a name defined twice is
    an error naming both plugins. Returns the quantities defined with inputs held
    (``at=``): name → (plugin, held inputs).
    """
    problems: list[Problem] = []
    held: dict[str, tuple[str, dict[str, float]]] = {}

    def definer(plugin: str) -> Define:
        def define(name, definition, *, unit, description, reference=None, latex=None, at=None):
            problem = check_name(name)
            if problem:
                raise PluginError(f"plugin {plugin!r}: {problem}")
            if at is not None:
                held[name] = (plugin, _check_at(plugin, name, at))
            if not isinstance(unit, str) or not isinstance(description, str) or not description:
                raise PluginError(f"plugin {plugin!r} defined {name!r} without a unit string "
                                  "and a one-line description")
            definition = check_definition(plugin, name, definition, "defined")
            if name in nodes:
                problems.append(Problem(
                    f"quantity {name!r} is defined by both {nodes[name].plugin!r} and {plugin!r}"))
                return
            if isinstance(definition, float):
                nodes[name] = Quantity(name=name, unit=unit, description=description, plugin=plugin,
                                       value=definition, reference=reference, latex=latex,
                                       history=(Change(INPUT, plugin, definition, "", reference),))
            else:
                nodes[name] = Quantity(name=name, unit=unit, description=description, plugin=plugin,
                                       expression=definition, reference=reference, latex=latex,
                                       history=(Change(DEFINE, plugin, definition, "", reference),))
        return define

    host.call_each("infermodel_define_quantities",
                   lambda p: {"scenario": scenario, "define": definer(p)}, "define")
    if problems:
        raise GraphError(problems, heading="quantities defined twice")
    return held


def _hold_all(nodes: dict[str, Quantity], held: Mapping[str, tuple[str, dict[str, float]]]) -> None:
    """Stage 3b: quantities defined with inputs held get twins of what they use."""
    problems: list[Problem] = []
    for name, (plugin, at) in held.items():
        _hold(nodes, name, plugin, at, problems)
    if problems:
        raise GraphError(problems, heading="quantities defined at fixed inputs")


def _transform(scenario: Scenario, host: PluginHost,
               nodes: dict[str, Quantity]) -> list[ResultWarning]:
    """Stage 3: every plugin's requests, applied in (order, plugin, call) order; returns
    notes for the result (a replacement that discarded another plugin's change).
    """
    requests: list[_Request] = []
    notes: list[ResultWarning] = []
    problems: list[Problem] = []
    transformers: dict[str, Transformer] = {}

    def transformer_for(plugin: str) -> Transformer:
        transformers.setdefault(plugin, Transformer(plugin, requests, notes))
        return transformers[plugin]

    host.call_each("infermodel_transform_quantities",
                   lambda p: {"scenario": scenario, "transform": transformer_for(p)}, "transform")
    for request in sorted(requests, key=lambda r: (r.order, r.plugin, r.sequence)):
        current = nodes.get(request.name)
        if current is None:
            problems.append(Problem(
                f"plugin {request.plugin!r} tried to {request.kind} {request.name!r}, which no plugin defines",
                suggestion=suggest(request.name, nodes)))
            continue
        nodes[request.name] = _apply(request, current, notes)
    if problems:
        raise GraphError(problems, heading="transformations refer to unknown quantities")
    return notes


def _apply(request: _Request, current: Quantity, notes: list[ResultWarning]) -> Quantity:
    """``current`` with one replace or wrap applied and recorded in its history."""
    if request.kind == REPLACE:
        new = request.payload
        discarded = sorted({c.plugin for c in current.history[1:] if c.plugin != request.plugin})
        if discarded:
            notes.append(ResultWarning(request.name, (
                f"plugin {request.plugin!r} replaced {request.name!r}, discarding the "
                f"change(s) by {', '.join(repr(p) for p in discarded)}; compose with "
                "wrap to keep them")))
    else:
        old = current.expression if current.expression is not None else sympy.Float(current.value)
        try:
            new = request.payload(old)
        except PLUGIN_FAILURES as exc:
            raise PluginError(f"plugin {request.plugin!r} failed wrapping {request.name!r} "
                              f"(transform): {type(exc).__name__}: {exc}") from exc
        new = check_definition(request.plugin, request.name, new, "wrapped")
    change = Change(request.kind, request.plugin, new, request.reason, request.reference, request.order)
    description = request.description or current.description
    if isinstance(new, float):
        return attrs.evolve(current, expression=None, value=new,
                            history=(*current.history, change), description=description)
    return attrs.evolve(current, expression=new, value=None,
                        history=(*current.history, change), description=description)


def _wire(nodes: Mapping[str, Quantity]) -> tuple[str, ...]:
    """Stage 4: check every dependency is defined and there is no cycle; the order."""
    problems: list[Problem] = []
    for name in sorted(nodes):
        for dep in nodes[name].dependencies:
            if dep not in nodes:
                q = nodes[name]
                last = q.history[-1].plugin
                problems.append(Problem(
                    f"quantity {name!r} (defined by {q.plugin!r}"
                    + (f", last changed by {last!r}" if last != q.plugin else "")
                    + f") uses {dep!r}, which no plugin defines",
                    suggestion=suggest(dep, nodes)))
    if problems:
        raise GraphError(problems, heading="undefined quantities")
    order = _stable_order(nodes)
    if order is None:
        raise GraphError([Problem("dependency cycle: " + " -> ".join(c) + " (formulas from "
                                  + ", ".join(sorted({p for n in c[:-1] for p in
                                                      (nodes[n].plugin, *nodes[n].changed_by)}))
                                  + ")")
                          for c in _cycles(nodes)], heading="the quantity graph has cycles")
    return order


def _check_at(plugin: str, name: str, at: Any) -> dict[str, float]:
    if not isinstance(at, Mapping) or not at:
        raise PluginError(f"plugin {plugin!r} defined {name!r} with at={at!r}: expected a "
                          "mapping of input quantity names to numbers")
    checked = {}
    for key, value in at.items():
        if check_name(key) or isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise PluginError(f"plugin {plugin!r} defined {name!r} with at={{{key!r}: {value!r}}}: "
                              "expected a quantity name and a number")
        checked[key] = float(value)
    return checked


def _hold(nodes: dict[str, Quantity], name: str, plugin: str, at: Mapping[str, float],
          problems: list[Problem]) -> None:
    """Rewrite ``name`` so that it reads the inputs in ``at`` as those fixed numbers.

    Every quantity it uses that depends (transitively) on a held input gets a twin named
    ``<quantity>_at_<input>_<value>`` with the same formula, levers' changes included,
    over twins and the fixed numbers; quantities that do not depend on them are shared.
    ``ttft`` is ``prefill_time`` with ``batch`` held at 1: one request's own prefill.
    """
    from ..formatting import plain_number
    from ..quantity import symbol

    for key in at:
        if key not in nodes or not nodes[key].is_input:
            problems.append(Problem(
                f"plugin {plugin!r} defined {name!r} at a fixed {key!r}, which is not an input "
                "quantity", suggestion=suggest(key, nodes)))
            return
    suffix = "".join(f"_at_{key}_{plain_number(value).replace('.', '_')}"
                     for key, value in sorted(at.items()))
    fixed = {key: sympy.Integer(int(v)) if v.is_integer() else sympy.Float(v) for key, v in at.items()}
    memo: dict[str, Any] = {}

    def twin(dep: str) -> Any:
        if dep in fixed:
            return fixed[dep]
        if dep not in memo:
            memo[dep] = None
            q = nodes.get(dep)
            if q is not None and not q.is_input:
                replacements = {symbol(d): r for d in q.dependencies
                                if (r := twin(d)) is not None}
                if replacements:
                    twin_name = dep + suffix
                    if twin_name in nodes or check_name(twin_name):
                        problems.append(Problem(f"cannot make {twin_name!r} for {name!r}: the "
                                                "name is taken or too long"))
                        return None
                    held_text = ", ".join(f"{k} = {plain_number(v)}" for k, v in sorted(at.items()))
                    nodes[twin_name] = attrs.evolve(
                        q, name=twin_name, expression=q.expression.xreplace(replacements),
                        description=f"{q.description} (with {held_text})")
                    memo[dep] = symbol(twin_name)
        return memo[dep]

    q = nodes[name]
    if q.is_input:
        return
    replacements = {symbol(d): r for d in q.dependencies if (r := twin(d)) is not None}
    if replacements:
        nodes[name] = attrs.evolve(q, expression=q.expression.xreplace(replacements))


def _stable_order(nodes: Mapping[str, Quantity]) -> tuple[str, ...] | None:
    """Dependency order that otherwise keeps definition order (None if there is a cycle)."""
    import heapq

    position = {name: i for i, name in enumerate(nodes)}
    users: dict[str, list[str]] = {name: [] for name in nodes}
    waiting = {}
    for name, q in nodes.items():
        deps = q.dependencies
        waiting[name] = len(deps)
        for dep in deps:
            users[dep].append(name)
    ready = [(position[n], n) for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for user in users[name]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user))
    return tuple(order) if len(order) == len(nodes) else None


def _cycles(nodes: Mapping[str, Quantity]) -> list[list[str]]:
    import networkx

    g = networkx.DiGraph()
    for name, q in nodes.items():
        for dep in q.dependencies:
            g.add_edge(name, dep)
    cycles = []
    for cycle in sorted(networkx.simple_cycles(g), key=lambda c: (len(c), sorted(c)))[:10]:
        start = cycle.index(min(cycle))
        cycle = cycle[start:] + cycle[:start]
        cycles.append([*cycle, cycle[0]])
    return cycles
