"""The sweep's entry points, :func:`sweep` and :func:`plan_sweep`, and the plans a kept
scenario keeps for them (:func:`_kept_plan`, keyed by the call's arguments).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..scenario import REMOVE
from .axes import grid_axes
from .plan import SweepPlan
from .result import SweepResult

__all__ = ["PLANS_KEPT", "plan_sweep", "sweep"]


def _as_scenario(scenario, host):
    from ..engine.kept import model_for
    from ..scenario import Scenario

    if isinstance(scenario, Scenario):
        return scenario
    # The kept model's scenario: read once, read again when its files change.
    return model_for(Path(scenario), host=host).scenario


def plan_sweep(scenario, over: Mapping[str, Any] | Iterable[str] | None = None, *,
               choices: Mapping[str, Mapping] | None = None,
               quantities: Sequence[str] | None = None, use_table: bool = True,
               progress: bool | None = False, select: bool = True, host=None) -> SweepPlan:
    """Check a grid and prepare it (structural blocks resolved and compiled).

    Takes the same arguments as :func:`sweep`; evaluate with ``plan.run()``,
    ``plan.chunks()`` or ``plan.write(path, "csv")``. With ``select=False`` nothing
    is compiled until ``plan.select(quantities)`` (``plan.all_quantities`` lists
    what there is to choose from).
    """
    scenario = _as_scenario(scenario, host)
    axes, table_quantities = grid_axes(scenario, over, choices, use_table=use_table, host=host)
    if quantities is None:
        quantities = table_quantities
    elif isinstance(quantities, str):
        quantities = [quantities]
    return SweepPlan(scenario, axes, list(quantities) if quantities is not None else None,
                     host=host, progress=progress, select=select)


def sweep(scenario, over: Mapping[str, Any] | Iterable[str] | None = None, *,
          choices: Mapping[str, Mapping] | None = None,
          quantities: Sequence[str] | None = None, use_table: bool = True,
          chunk_size: int | None = None, progress: bool | None = False, host=None) -> SweepResult:
    """Evaluate a scenario over a grid of field values.

    ``scenario``: a :class:`~infermodel.scenario.Scenario` or a path. ``over``
    maps field paths to values: a list (``[1, 2, 4]``, ``["h100-sxm", "h200"]``),
    a range string (``"1..512 log2"``, ``"0.5..1 step 0.1"``, ``"1..100 10 points"``)
    or one value; it adds to (or replaces axes of) the scenario's ``[sweep]``
    table, which ``use_table=False`` ignores. ``choices`` adds named choice axes:
    ``{"weights": {"bf16": {"levers.number_formats.weight_bits_linear": 16}, ...}}``.
    ``quantities`` limits the columns (default: the table's list, else every
    quantity). ``progress`` draws a bar on standard error (None: when it is a
    terminal).

    The plan is kept by the scenario's kept model: a call with the same arguments (compared
    exactly: ``1``, ``1.0`` and ``True`` differ) only evaluates the arrays again, until a
    file the scenario or one of its blocks was read from changes.

    >>> r = sweep("scenarios/case-study-24gb.toml", {"workload.batch": [1, 18]},  # doctest: +SKIP
    ...           quantities=["tokens_per_s_total"])
    >>> r["tokens_per_s_total"]  # doctest: +SKIP
    array([160.3..., 958.9...])
    """
    def plan() -> SweepPlan:
        return plan_sweep(scenario, over, choices=choices, quantities=quantities,
                          use_table=use_table, progress=progress, host=host)

    key = _sweep_key((over, choices, quantities, use_table, progress))
    return (plan() if key is None else _kept_plan(scenario, host, key, plan)).run(chunk_size)


#: Where an axis's values come from (see SweepPlan): names, not files.
_AXIS_ORIGINS = frozenset({"--over", "over", "choices", "table"})
#: Sweep plans kept per kept scenario (see :func:`_kept_plan`).
PLANS_KEPT = 32
_PLAIN = frozenset({str, int, float, bool})


def _sweep_key(value: Any) -> Any:
    """A hashable stand-in for :func:`sweep`'s arguments, or None where one is not of a
    kind keyed here (an array, an iterator, an object): that sweep is planned afresh.

    Values that could plan a different grid never share a key: types are kept apart
    (``1``, ``1.0``, ``True``) and so are ``0.0`` and ``-0.0``; mappings keep their order
    (the order of the axes).
    """
    kind = type(value)
    if kind is float:
        return ("float", repr(value))
    if value is None or kind in _PLAIN:
        return (kind.__name__, value)
    if value is REMOVE:
        return ("remove",)
    if kind is list or kind is tuple:
        items = tuple(value)
        types = tuple(map(type, items))
        if _PLAIN.issuperset(types):
            # Long ranges and lists key at C speed; a zero is told apart by its sign.
            signs = tuple(map(repr, items)) if float in types and 0.0 in items else None
            return (kind.__name__, items, types, signs)
        inner = tuple(_sweep_key(v) for v in items)
        return None if None in inner else (kind.__name__, inner)
    if isinstance(value, Mapping):
        pairs = tuple((k, _sweep_key(v)) for k, v in value.items())
        if any(type(k) is not str or v is None for k, v in pairs):
            return None
        return ("table", pairs)
    return None


def _kept_plan(scenario, host, key: tuple, make) -> SweepPlan:
    """The plan of a sweep, kept by the scenario's kept model (so read again when its
    files change) and reused while the same arguments come again.

    Each call gets a shallow copy: :meth:`SweepPlan.select` on a result's plan changes
    that copy only. Planning failures are not kept: they are raised again. A file one of
    the plan's blocks was resolved from (a preset or a Hugging Face config an axis names)
    that has changed since makes it planned again, as the model does for the scenario's
    own files.
    """
    import copy

    from ..engine.kept import NOT_FILES, files_signature, model_for
    from ..scenario import Scenario

    model = model_for(scenario if isinstance(scenario, Scenario) else Path(scenario), host=host)
    plans = model.sweep_plans
    found = plans.get(key)
    if found is not None and files_signature(found[1]) == found[2]:
        plans.move_to_end(key)
        return copy.copy(found[0])
    plan = make()
    files = tuple(sorted({o.file for _, block, _, _ in plan._graphs
                         for o in block.origins.values()
                         if isinstance(o.file, str) and o.file not in NOT_FILES
                         and o.file not in _AXIS_ORIGINS}))
    plans[key] = (plan, files, files_signature(files))
    plans.move_to_end(key)
    if len(plans) > PLANS_KEPT:
        plans.popitem(last=False)
    return copy.copy(plan)
