"""Operators: one prefill pass and one decode step, split into the kernels that run.

Plugins describe operators through ``infermodel_define_operators``: for each phase
(``"prefill"`` or ``"decode"``) an operator has a name, its FLOPs and the bytes it moves,
both sympy expressions over quantities, and optionally its own time (a collective that is
neither compute nor memory bound on the card). This module collects them and evaluates
them against a result into an operator table; it knows no particular operator.

Each row of the table::

    intensity = FLOPs / bytes
    time      = max(FLOPs / F_phase, bytes / BW)    (or the operator's own time)
    bound     = "compute" when FLOPs / F_phase ≥ bytes / BW, else "memory" ("own" for
                an operator with its own time)

with ``F_phase`` the compute reached in that phase (``flops_effective_prefill`` or
``flops_effective_decode``) and ``BW`` the bandwidth reached (``bandwidth``).

>>> rows = operator_table(evaluate("scenarios/case-study-24gb.toml"), "decode")  # doctest: +SKIP
>>> rows[0].name  # doctest: +SKIP
'embedding'
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from ..errors import PluginError, Problem, ScenarioError

PHASES = ("prefill", "decode")
#: The compute rate each phase reaches, as a quantity name.
PHASE_RATE = {"prefill": "flops_effective_prefill", "decode": "flops_effective_decode"}
#: Columns of the table, in order, with their units (``infermodel ops`` prints these).
COLUMNS = (("operator", ""), ("flops", "FLOP"), ("bytes", "B"), ("intensity", "FLOP/B"),
           ("bound", ""), ("time_compute", "s"), ("time_memory", "s"), ("time", "s"),
           ("share", "1"))


@attrs.frozen
class Operator:
    """One operator of one phase, as a plugin defines it."""

    #: ``"prefill"`` or ``"decode"``.
    phase: str
    #: snake_case name, unique within the phase (``"qkv_projection"``).
    name: str
    #: FLOPs of the operator in one pass or step, a sympy expression over quantities.
    flops: Any
    #: Bytes it moves between memory and the compute units.
    bytes: Any
    description: str
    plugin: str
    reference: str | None = None
    #: Its own time (a collective over a link), replacing the roofline of the card.
    time: Any = None
    #: The measured kernels it is made of (:class:`~infermodel.declarations.Kernel`),
    #: for a lever that times operators from measured tables; empty when no table
    #: covers it (an elementwise operator).
    kernels: tuple = ()
    #: Its compute time where its FLOPs do not run at the phase's rate (a GEMM the engine
    #: keeps in 32 bits): its roofline takes this in place of ``flops / rate``.
    compute_time: Any = None


@attrs.frozen
class OperatorRow:
    """One evaluated row of an operator table."""

    name: str
    flops: float
    bytes: float
    intensity: float
    bound: str
    time_compute: float
    time_memory: float
    time: float
    #: Share of the phase's summed operator time.
    share: float
    description: str
    plugin: str
    #: The time the scenario's step charges the operator, where a plugin times it some
    #: other way than its roofline (:func:`~infermodel.hookspecs.infermodel_time_operators`),
    #: and what that time is ("measured").
    charged: float | None = None
    charged_by: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["operator"] = out.pop("name")
        return out


def collect_operators(scenario, phase: str, *, host=None) -> tuple[Operator, ...]:
    """Every plugin's operators of ``phase`` for ``scenario``, in definition order
    (plugins in name order; an operator defined with ``replace=True`` takes the place of
    the one it replaces).

    >>> [o.name for o in collect_operators(load_scenario("scenarios/case-study-24gb.toml"), "decode")]  # doctest: +SKIP
    ['embedding', 'norms', 'qkv_projection', ...]
    """
    import sympy

    from .graph import check_definition

    if phase not in PHASES:
        raise ScenarioError(Problem(f"no phase named {phase!r}", expected=" or ".join(PHASES)))
    host = host or scenario.host
    found: dict[str, Operator] = {}
    replacements: list[Operator] = []
    wanted = phase

    def definer(plugin: str):
        def define(phase, name, *, flops, bytes, description, reference=None, time=None,
                   replace=False, kernels=(), compute_time=None):
            if phase not in PHASES:
                raise PluginError(f"plugin {plugin!r} defined operator {name!r} for phase "
                                  f"{phase!r}; phases are {', '.join(PHASES)}")
            if not isinstance(description, str) or not description:
                raise PluginError(f"plugin {plugin!r} defined operator {name!r} without a "
                                  "one-line description")
            parts = ({"flops": flops, "bytes": bytes} | ({"time": time} if time is not None else {})
                     | ({"compute_time": compute_time} if compute_time is not None else {}))
            checked = {key: check_definition(plugin, f"{name}.{key}", value, "defined operator")
                       for key, value in parts.items()}
            checked = {key: sympy.Float(v) if isinstance(v, float) else v for key, v in checked.items()}
            op = Operator(phase, name, checked["flops"], checked["bytes"], description, plugin,
                          reference, checked.get("time"), _kernels(plugin, name, kernels),
                          checked.get("compute_time"))
            if phase != wanted:
                return
            if replace:
                replacements.append(op)
            elif name in found:
                raise PluginError(f"operator {name!r} ({wanted}) is defined by both "
                                  f"{found[name].plugin!r} and {plugin!r}; pass replace=True "
                                  "to take its place")
            else:
                found[name] = op
        return define

    host.call_each("infermodel_define_operators",
                   lambda p: {"scenario": scenario, "define": definer(p)}, "operators")
    for op in replacements:
        if op.name not in found:
            raise PluginError(f"plugin {op.plugin!r} replaces operator {op.name!r} ({phase}), "
                              "which no plugin defines")
        found[op.name] = op
    return tuple(found.values())


def _kernels(plugin: str, name: str, kernels) -> tuple:
    """An operator's kernels, checked: :class:`Kernel` records whose shapes and call
    counts are numbers or sympy expressions over quantities.
    """
    from ..declarations import Kernel
    from .graph import check_definition

    if isinstance(kernels, Kernel):
        kernels = (kernels,)
    out = []
    for kernel in kernels:
        if not isinstance(kernel, Kernel):
            raise PluginError(f"plugin {plugin!r} gave operator {name!r} a kernel that is a "
                              f"{type(kernel).__name__}, not an infermodel.plugin.Kernel")
        for key, value in (*kernel.shape.items(), ("calls", kernel.calls),
                           ("share", kernel.share)):
            check_definition(plugin, f"{name}.{kernel.family}.{key}", value, "defined operator")
        out.append(kernel)
    return tuple(out)


def operator_table(result, phase: str, *, host=None) -> list[OperatorRow]:
    """The operators of ``phase`` evaluated against ``result`` (an evaluated scenario).

    >>> for row in operator_table(evaluate("scenarios/case-study-24gb.toml"), "decode"):  # doctest: +SKIP
    ...     print(row.name, row.bound, row.time)
    """
    import numpy as np
    import sympy

    operators = collect_operators(result.scenario, phase, host=host)
    rate = float(result[PHASE_RATE[phase]])
    bandwidth = float(result["bandwidth"])
    expressions = []
    for op in operators:
        expressions += [op.flops, op.bytes, op.time if op.time is not None else sympy.Integer(0),
                        op.compute_time if op.compute_time is not None else sympy.Integer(0)]
    symbols = sorted(set().union(*(e.free_symbols for e in expressions)), key=lambda s: s.name)
    missing = [s.name for s in symbols if s.name not in result]
    if missing:
        raise PluginError(f"operators of phase {phase!r} use quantities no plugin defines: "
                          + ", ".join(missing))
    function = sympy.lambdify(symbols, expressions, modules="numpy")
    with np.errstate(all="ignore"):
        values = [float(v) for v in function(*[float(result[s.name]) for s in symbols])]
    rows = []
    for k, op in enumerate(operators):
        flops, moved, own, compute = values[4 * k: 4 * k + 4]
        t_compute = compute if op.compute_time is not None else flops / rate
        t_memory = moved / bandwidth
        if op.time is not None:
            time, bound = own, "own"
        else:
            time = max(t_compute, t_memory)
            bound = "compute" if t_compute >= t_memory and flops > 0 else "memory"
        intensity = flops / moved if moved > 0 else (math.inf if flops > 0 else 0.0)
        rows.append(OperatorRow(op.name, flops, moved, intensity, bound, t_compute, t_memory,
                                time, 0.0, op.description, op.plugin))
    total = sum(r.time for r in rows)
    charged = operator_times(result.scenario, phase, host=host)
    out = []
    for r in rows:
        found = charged.get(r.name)
        r = attrs.evolve(r, share=r.time / total if total > 0 else 0.0)
        if found is not None and found[0] in result:
            r = attrs.evolve(r, charged=float(result[found[0]]), charged_by=found[1])
        out.append(r)
    return out


def operator_times(scenario, phase: str, *, host=None) -> dict[str, tuple[str, str]]:
    """Operator name -> (quantity, label) for the operators of ``phase`` that a plugin
    times some other way than their roofline (:func:`~infermodel.hookspecs.infermodel_time_operators`).
    """
    host = host or scenario.host
    found: dict[str, tuple[str, str, str]] = {}

    def registrar(plugin: str):
        def register(phase_, operator, quantity, *, label):
            if phase_ not in PHASES:
                raise PluginError(f"plugin {plugin!r} timed operator {operator!r} for phase "
                                  f"{phase_!r}; phases are {', '.join(PHASES)}")
            if phase_ != phase:
                return
            if operator in found:
                raise PluginError(f"operator {operator!r} ({phase}) is timed by both "
                                  f"{found[operator][2]!r} and {plugin!r}")
            found[operator] = (str(quantity), str(label), plugin)
        return register

    host.call_each("infermodel_time_operators",
                   lambda p: {"scenario": scenario, "register": registrar(p)}, "operators")
    return {name: (quantity, label) for name, (quantity, label, _p) in found.items()}


def operator_summary(result, phase: str, rows: list[OperatorRow]) -> dict[str, float]:
    """Totals of an operator table beside the whole-step figures: FLOPs (equal by
    construction for the built-in operators), bytes, the sum of the operators' times, the
    whole-step roofline time and the phase's time as the scenario computes it.
    """
    step = "decode" if phase == "decode" else "prefill"
    rate = float(result[PHASE_RATE[phase]])
    step_flops, step_bytes = float(result[f"{step}_flops"]), float(result[f"{step}_bytes"])
    return {
        "flops": sum(r.flops for r in rows),
        "step_flops": step_flops,
        "bytes": sum(r.bytes for r in rows),
        "step_bytes": step_bytes,
        "time_operators": sum(r.time for r in rows),
        "time_step_roofline": max(step_flops / rate, step_bytes / float(result["bandwidth"])),
        "time_scenario": float(result["decode_step_time" if phase == "decode" else "prefill_time"]),
    } | ({"time_charged": sum(r.time if r.charged is None else r.charged for r in rows)}
         if any(r.charged is not None for r in rows) else {})


def _cells(row: OperatorRow, charged: bool = False) -> list[str]:
    from ..units import format_value

    intensity = "∞" if math.isinf(row.intensity) else format_value(row.intensity, "FLOP/B", digits=3)
    cells = [row.name, format_value(row.flops, "FLOP", digits=4),
             format_value(row.bytes, "B", digits=4), intensity, row.bound,
             format_value(row.time_compute, "s", digits=4),
             format_value(row.time_memory, "s", digits=4), format_value(row.time, "s", digits=4),
             f"{row.share:.1%}"]
    if charged:
        if row.charged is None:
            cells += ["", "", ""]
        else:
            reached = f"{row.time / row.charged:.0%}" if row.charged > 0 else ""
            cells += [format_value(row.charged, "s", digits=4), row.charged_by, reached]
    return cells


def format_table(result, phase: str, rows: list[OperatorRow]) -> str:
    """The operator table as aligned text, with the totals beside the whole-step figures."""
    from ..units import format_value

    header = ["operator", "FLOPs", "bytes", "intensity", "bound", "t_compute", "t_memory",
              "time", "share"]
    charged = any(r.charged is not None for r in rows)
    if charged:
        header += ["charged", "by", "roofline/charged"]
    body = [_cells(r, charged) for r in rows]
    widths = [max(len(line[k]) for line in [header, *body]) for k in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if k in (0, 4, 10) else c.rjust(w)
                         for k, (c, w) in enumerate(zip(cells, widths))).rstrip()

    total = operator_summary(result, phase, rows)
    out = [f"{result.scenario.name}: {phase} operators "
           f"(roofline = {result.scenario.value('efficiency.roofline')!r})",
           line(header), line(["-" * w for w in widths]), *[line(c) for c in body],
           line(["-" * w for w in widths]),
           f"sum of operator FLOPs    {format_value(total['flops'], 'FLOP')}  "
           f"(whole step {format_value(total['step_flops'], 'FLOP')})",
           f"sum of operator bytes    {format_value(total['bytes'], 'B')}  "
           f"(whole step {format_value(total['step_bytes'], 'B')})",
           f"sum of operator times    {format_value(total['time_operators'], 's')}  "
           f"(whole-step roofline {format_value(total['time_step_roofline'], 's')}; "
           f"{'decode_step_time' if phase == 'decode' else 'prefill_time'} "
           f"{format_value(total['time_scenario'], 's')})"]
    if charged:
        labels = sorted({r.charged_by for r in rows if r.charged is not None})
        out.append(f"charged ({', '.join(labels)}): the time the step charges each operator "
                   f"beside its roofline; sum {format_value(total['time_charged'], 's')}")
    # What a reader of these operators' times must know: the warnings about them
    # (fallbacks, stand-ins, points outside a measured grid).
    out += [f"warning: {w}" for w in operator_warnings(result, phase)]
    return "\n".join(out)


def operator_warnings(result, phase: str) -> list:
    """The result's warnings about the operators of ``phase``: their sum
    (``<phase>_time_kernels``), one of their times (``<phase>_kernel_*``), or a quantity
    an operator's own compute time reads (a 32-bit router's ``router_matmul_rate``).
    """
    reads = {s.name for op in collect_operators(result.scenario, phase)
             if op.compute_time is not None for s in op.compute_time.free_symbols}
    return [w for w in result.warnings if w.quantity is not None
            and (w.quantity == f"{phase}_time_kernels" or w.quantity.startswith(f"{phase}_kernel_")
                 or w.quantity in reads)]


def format_csv(rows: list[OperatorRow]) -> str:
    """The operator table as CSV in base units (FLOP, bytes, FLOP/B, seconds)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    names = [name for name, _ in COLUMNS]
    if any(r.charged is not None for r in rows):
        names += ["charged", "charged_by"]
    writer.writerow(names)
    for row in rows:
        data = row.as_dict()
        writer.writerow([repr(data[n]) if isinstance(data[n], float) else
                         "" if data[n] is None else data[n] for n in names])
    return buffer.getvalue()


def format_json(result, phase: str, rows: list[OperatorRow]) -> str:
    """The operator table as one JSON object: ``operators`` (rows in base units),
    ``units``, ``totals`` and ``warnings`` (:func:`operator_warnings`).
    """
    import json

    def plain(value):
        return "inf" if isinstance(value, float) and math.isinf(value) else value

    return json.dumps({
        "scenario": result.scenario.name,
        "phase": phase,
        "roofline": result.scenario.value("efficiency.roofline"),
        "units": {name: unit for name, unit in COLUMNS if unit},
        "operators": [{k: plain(v) for k, v in r.as_dict().items()} for r in rows],
        "totals": operator_summary(result, phase, rows),
        "warnings": [str(w) for w in operator_warnings(result, phase)],
    }, indent=2)


__all__ = ["COLUMNS", "PHASES", "PHASE_RATE", "Operator", "OperatorRow", "collect_operators",
           "format_csv", "format_json", "format_table", "operator_summary", "operator_table",
           "operator_times", "operator_warnings"]
