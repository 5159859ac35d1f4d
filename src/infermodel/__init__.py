"""infermodel: what happens to the speed, memory and bill of serving a language model
if you change X, with every number's derivation.

>>> import infermodel
>>> result = infermodel.evaluate("scenarios/case-study-24gb.toml")  # doctest: +SKIP
>>> print(infermodel.explain(result, "tpot"))  # doctest: +SKIP

Plugins import from :mod:`infermodel.plugin` (``from infermodel.plugin import S,
hookimpl``), the interface that stays stable; ``hookimpl`` and ``S`` are here too.
"""

from __future__ import annotations

from typing import Any

from .hookspecs import hookimpl

__version__ = "0.1.0"

_LAZY = {
    "S": ("quantity", "S"),
    "symbol": ("quantity", "symbol"),
    "Quantity": ("quantity", "Quantity"),
    "load_scenario": ("scenario", "load_scenario"),
    "Scenario": ("scenario", "Scenario"),
    # The one evaluate (infermodel.engine.kept): a fresh evaluation's result, reusing the
    # scenario's graph and compiled function when only values change.
    "evaluate": ("engine.kept", "evaluate"),
    "Result": ("engine.evaluation", "Result"),
    "Model": ("sweeping", "Model"),
    "build_graph": ("engine.graph", "build_graph"),
    "REQUIRED": ("declarations", "REQUIRED"),
    "InfermodelError": ("errors", "InfermodelError"),
    "get_host": ("host", "get_host"),
    # Modules are named apart from their functions (sweeping.sweep, ...) so that
    # importing a module never shadows the function on the package.
    "sweep": ("sweeping", "sweep"),
    "search": ("analyses.searching", "search"),
    "simulate": ("analyses.simulation.runs", "simulate"),
    "plan": ("analyses.planning", "plan"),
    "run_witness": ("analyses.witnessing", "run_witness"),
    "collect_operators": ("engine.operators", "collect_operators"),
    "operator_table": ("engine.operators", "operator_table"),
}


def explain(result, name: str, *, depth: int | None = None):
    """The derivation of quantity ``name`` in an evaluated result.

    >>> print(explain(evaluate("scenarios/case-study-24gb.toml"), "tpot"))  # doctest: +SKIP
    """
    from .derivation import derive

    return derive(result, name, depth=depth)


def __getattr__(name: str) -> Any:
    # Heavy modules (sympy, numpy) load only when the API that needs them is used.
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'infermodel' has no attribute {name!r}")


__all__ = [
    "REQUIRED",
    "InfermodelError",
    "Model",
    "Quantity",
    "Result",
    "S",
    "Scenario",
    "build_graph",
    "collect_operators",
    "evaluate",
    "explain",
    "get_host",
    "hookimpl",
    "load_scenario",
    "operator_table",
    "plan",
    "run_witness",
    "search",
    "simulate",
    "sweep",
    "symbol",
]
