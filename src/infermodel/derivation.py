"""Derivations: how each number came to be, from the asked quantity down to inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .quantity import Change


@attrs.frozen
class Step:
    """One quantity in a derivation chain."""

    name: str
    unit: str
    description: str
    plugin: str
    value: Any
    expression: Any
    history: tuple[Change, ...]
    reference: str | None
    source: str | None  # for inputs: where the number was written
    latex: str | None
    choice: str | None = None  # the outcome a whole-number value names (a headline's choices)
    #: For a formula that reads a table (a measured kernel): what each lookup used, a line
    #: each (the table, the grid points, the latency read).
    tables: tuple[str, ...] = ()

    @property
    def is_input(self) -> bool:
        return self.expression is None


@attrs.frozen
class LeverChange:
    """A lever's change to a quantity that a shown formula rests on but a depth cut hides."""

    quantity: str
    unit: str
    plugin: str
    kind: str  # "replace" or "wrap"
    reason: str


@attrs.frozen
class Derivation:
    """The chain of formulas behind one quantity; print it as text, Markdown, LaTeX, JSON.

    When a depth cuts the chain, ``cut`` holds the quantities the shown formulas name
    but do not derive (so a legend can still say what each symbol is), and
    ``changed_below`` maps each of them to the lever changes made to it or to anything
    it rests on: a lever's effect below the cut stays visible.
    """

    target: str
    steps: tuple[Step, ...]
    values: Mapping[str, Any]
    cut: tuple[Step, ...] = ()
    changed_below: Mapping[str, tuple[LeverChange, ...]] = attrs.field(factory=dict)

    def text(self) -> str:
        from .printing import derivation_text

        return derivation_text(self)

    def markdown(self) -> str:
        from .printing import derivation_markdown

        return derivation_markdown(self)

    def latex(self) -> str:
        from .printing import derivation_latex

        return derivation_latex(self)

    def to_dict(self) -> dict:
        from .printing import derivation_to_dict

        return derivation_to_dict(self)

    def __str__(self) -> str:
        return self.text()

    def _repr_markdown_(self) -> str:
        return self.markdown()


def _source(result, history) -> str | None:
    first = history[0]
    if first.kind != "input":
        return None
    key = first.field
    if key is not None:
        origin = result.scenario.origins.get(key)
        if origin is not None:
            where = origin.file + (f":{origin.line}" if origin.line else "")
            return f"{key} ({where})"
        return f"{key} (default)"
    return None


def derive(result, name: str, *, depth: int | None = None) -> Derivation:
    """Build the derivation of ``name`` from an evaluated :class:`~infermodel.engine.evaluation.Result`.

    ``depth`` limits how many levels of dependencies are included (None: all).
    """
    graph = result.graph
    graph[name]  # raises a helpful error for unknown names
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        from .errors import InfermodelError, Problem

        raise InfermodelError(Problem(f"depth {str(depth)[:40]} is not a level count",
                                      expected="a whole number, 0 or more"))
    if depth is None:
        chain = [name, *list(reversed(graph.ancestors(name)))]
    else:
        chain, frontier = [name], [name]
        for _ in range(depth):
            if not frontier:
                break  # the inputs are reached: deeper levels add nothing
            nxt = []
            for n in frontier:
                for dep in graph[n].dependencies:
                    if dep not in chain and dep not in nxt:
                        nxt.append(dep)
            chain += nxt
            frontier = nxt
    # Derived quantities first (closest to the target), inputs last.
    derived = [n for n in chain if not graph[n].is_input]
    inputs = sorted(n for n in chain if graph[n].is_input)
    shown = set(chain)
    cut = [d for n in derived for d in graph[n].dependencies if d not in shown]
    cut = list(dict.fromkeys(cut))
    below = {n: changes for n in cut if (changes := _changes_below(graph, n))}
    return Derivation(name, tuple(_step(result, n) for n in derived + inputs), dict(result.values),
                      cut=tuple(_step(result, n) for n in cut), changed_below=below)


def _step(result, name: str) -> Step:
    q = result.graph[name]
    return Step(name=name, unit=q.unit, description=q.description, plugin=q.plugin,
                value=result.values[name], expression=q.expression, history=q.history,
                reference=q.reference, source=_source(result, q.history), latex=q.latex,
                choice=result.graph.choice(name, result.values[name]),
                tables=table_lines(q.expression, result.values))


def table_lines(expression, values: Mapping[str, Any]) -> tuple[str, ...]:
    """What each table lookup in ``expression`` read at these values: the call with its
    arguments, then the table's own explanation (``explain`` of the table), indented.
    """
    from .quantity import table_of, tabulated_calls

    lines: list[str] = []
    for call in tabulated_calls(expression):
        explain = getattr(table_of(call), "explain", None)
        if explain is None:
            continue
        known = {s: values[s.name] for s in call.free_symbols if s.name in values}
        try:
            arguments = [float(a.xreplace(known)) for a in call.args]
        except (TypeError, ValueError):
            continue  # an argument the values do not settle: nothing to read
        shown = ", ".join(f"{a:.6g}" for a in arguments)
        lines.append(f"{call.func.__name__}({shown}):")
        lines += [f"  {line}" for line in explain(*arguments)]
    return tuple(lines)


def _changes_below(graph, name: str) -> tuple[LeverChange, ...]:
    """Every lever change to ``name`` or to a quantity it rests on, nearest first."""
    out = []
    for n in (name, *reversed(graph.ancestors(name))):
        for change in graph[n].history[1:]:
            out.append(LeverChange(n, graph[n].unit, change.plugin, change.kind, change.reason))
    return tuple(out)
