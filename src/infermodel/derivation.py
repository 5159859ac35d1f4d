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

    @property
    def is_input(self) -> bool:
        return self.expression is None


@attrs.frozen
class Derivation:
    """The chain of formulas behind one quantity; print it as text, Markdown, LaTeX, JSON."""

    target: str
    steps: tuple[Step, ...]
    values: Mapping[str, Any]

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
    """Build the derivation of ``name`` from an evaluated :class:`~infermodel.evaluation.Result`.

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
    steps = []
    for n in derived + inputs:
        q = graph[n]
        steps.append(Step(name=n, unit=q.unit, description=q.description, plugin=q.plugin,
                          value=result.values[n], expression=q.expression, history=q.history,
                          reference=q.reference, source=_source(result, q.history), latex=q.latex,
                          choice=graph.choice(n, result.values[n])))
    return Derivation(name, tuple(steps), dict(result.values))
