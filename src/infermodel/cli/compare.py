"""``infermodel compare``: two or more scenarios side by side, with differences and ratios.

Columns are the scenarios named (each with the common ``--set`` and ``--unset``), and
for each scenario one more column per ``--against`` group of settings applied on top::

    infermodel compare a.toml b.toml --quantities tpot,max_sequences
    infermodel compare a.toml --set workload.context=1000 --against workload.context=128000

The first column is the reference: every other column shows its value, its difference
from the reference and their ratio (what a document means by "a 128k context costs N
times a 1k one"). :func:`comparison` computes the table from evaluated results; the
printers lay it out as text, Markdown or JSON.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

FORMATS = ("table", "json", "markdown")
#: The most columns one comparison may have (scenarios × groups).
MAX_COLUMNS = 32


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare scenarios (or one under several settings): values, "
                        "differences and ratios",
        description="Evaluate two or more scenarios, or one scenario under several groups of "
                    "settings (--against), and print each quantity's value in every column with "
                    "its difference from the first column and their ratio. Without --quantities, "
                    "the headline figures ``run`` shows.")
    parser.add_argument("scenario", nargs="+", help="scenario TOML files (the first is the "
                                                    "reference)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a field in every column (repeatable)")
    parser.add_argument("--unset", dest="unsets", action="append", default=[], metavar="KEY",
                        help="remove a key or table in every column (repeatable)")
    parser.add_argument("--against", action="append", nargs="+", default=[],
                        metavar="KEY=VALUE",
                        help="one more column per scenario with these fields set on top of "
                             "--set (repeatable: a column per group)")
    parser.add_argument("--quantities", metavar="A,B,...", help="only these quantities")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


@attrs.frozen
class Column:
    """One evaluated column: its label, the scenario file and the settings on top."""

    label: str
    path: str
    overrides: tuple[str, ...]
    result: Any = attrs.field(repr=False, eq=False)


@attrs.frozen
class Row:
    """One quantity across the columns; None where a column lacks it or it has no number."""

    name: str
    unit: str
    values: tuple[Any, ...]
    shown: tuple[str, ...]
    differences: tuple[float | None, ...]
    ratios: tuple[float | None, ...]


@attrs.frozen
class Comparison:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def ratio(value: float, reference: float) -> float:
    """``value / reference``; 1 when both are 0, ±∞ over 0, NaN when undefined.

    >>> ratio(6.0, 3.0), ratio(0.0, 0.0), ratio(2.0, 0.0)
    (2.0, 1.0, inf)
    """
    if reference == 0:
        return 1.0 if value == 0 else math.copysign(math.inf, value)
    if math.isinf(value) and math.isinf(reference):
        return math.nan
    return value / reference


def _row(name: str, columns: Sequence[Column]) -> Row:
    results = [c.result for c in columns]
    present = [r for r in results if name in r]
    unit = present[0].unit(name)
    values = tuple(r.values.get(name) for r in results)
    choices = [r.graph.choice(name, r[name]) if name in r else None for r in results]
    shown = tuple("—" if v is None else (c if c is not None else r.show(name))
                  for v, c, r in zip(values, choices, results))
    numbers = [None if any(choices) else _number(v) for v in values]
    ref = numbers[0]
    differences = tuple(None if i == 0 or ref is None or n is None else n - ref
                        for i, n in enumerate(numbers))
    ratios = tuple(None if i == 0 or ref is None or n is None else ratio(n, ref)
                   for i, n in enumerate(numbers))
    return Row(name, unit, values, shown, differences, ratios)


def default_names(results: Sequence[Any]) -> list[str]:
    """The headline quantities that any column has, in the order of ``run``'s summary
    (its groups, then the limits line).
    """
    from ..printing import LIMITS, summary_groups

    names: list[str] = []
    for result in results:
        rows = [h for _, group in summary_groups(result) for h in group]
        rows += [h for h in result.graph.headlines if h.group == LIMITS]
        names += [h.name for h in rows if h.name not in names]
    return names


def comparison(columns: Sequence[Column], names: Sequence[str] | None = None) -> Comparison:
    """Rows of ``names`` (default: the headline quantities) across evaluated ``columns``;
    the first column is the reference. An unknown name raises with a close match.

    >>> table = comparison([Column("1k", "a.toml", (), r1), Column("128k", "a.toml", (), r2)],
    ...                    ["tpot"])  # doctest: +SKIP
    >>> table.rows[0].ratios[1]  # doctest: +SKIP
    4.46...
    """
    chosen = list(names) if names else default_names([c.result for c in columns])
    for name in chosen:
        if not any(name in c.result for c in columns):
            columns[0].result.graph[name]  # raises with a suggestion
    return Comparison(tuple(columns), tuple(_row(name, columns) for name in chosen))


# ---------------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------------


def _signed(row: Row, value: float | None, result) -> str:
    if value is None:
        return ""
    text = result.show(row.name, abs(value)) if math.isfinite(value) else f"{value}"
    return ("−" if value < 0 else "+") + text if math.isfinite(value) else text


def _times(value: float | None) -> str:
    return "" if value is None else f"×{value:.4g}"


def _cells(table: Comparison) -> tuple[list[str], list[list[str]]]:
    head = ["quantity", table.columns[0].label]
    for column in table.columns[1:]:
        head += [column.label, "Δ", "ratio"]
    rows = []
    for row in table.rows:
        unit_result = next(c.result for c, v in zip(table.columns, row.values) if v is not None)
        cells = [row.name, row.shown[0]]
        for i in range(1, len(table.columns)):
            cells += [row.shown[i], _signed(row, row.differences[i], unit_result),
                      _times(row.ratios[i])]
        rows.append(cells)
    return head, rows


def text_table(table: Comparison) -> str:
    head, rows = _cells(table)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["compare: " + "; ".join(f"{c.label} = {c.path}" + (
        f" with {', '.join(c.overrides)}" if c.overrides else "") for c in table.columns), ""]
    for cells in [head, ["-" * w for w in widths], *rows]:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
    lines += ["", "Δ and ratio: each column against the first"]
    return "\n".join(lines)


def markdown(table: Comparison) -> str:
    head, rows = _cells(table)
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    out += ["| " + " | ".join([f"`{r[0]}`", *r[1:]]) + " |" for r in rows]
    return "\n".join(out)


def to_dict(table: Comparison) -> dict:
    from ..formatting import json_value

    def number(value):
        return None if value is None else json_value(value)

    return {
        "columns": [{"label": c.label, "scenario": c.path, "overrides": list(c.overrides)}
                    for c in table.columns],
        "reference": 0,
        "quantities": {row.name: {"unit": row.unit, "values": [number(v) for v in row.values],
                                  "shown": list(row.shown),
                                  "differences": [number(v) for v in row.differences],
                                  "ratios": [number(v) for v in row.ratios]}
                       for row in table.rows},
    }


# ---------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------


def _columns(args) -> list[Column]:
    from ..engine.evaluation import evaluate_afresh
    from ..errors import InfermodelError, Problem
    from ..output import protect_scenario
    from ..scenario import load_scenario

    groups: list[list[str]] = [list(g) for g in args.against]
    plans = [(path, group) for path in args.scenario for group in ([], *groups)]
    if len(plans) < 2:
        raise InfermodelError(Problem(
            "compare needs two or more columns", expected="two scenario files, or one with "
            "--against KEY=VALUE ...", suggestion="for example: infermodel compare a.toml "
            "--against workload.batch=32"))
    if len(plans) > MAX_COLUMNS:
        raise InfermodelError(Problem(f"{len(plans)} columns is over the limit of {MAX_COLUMNS}",
                                      expected=f"at most {MAX_COLUMNS} scenarios × groups"))
    columns = []
    for path, group in plans:
        scenario = load_scenario(path, [*args.overrides, *group], unset=args.unsets)
        protect_scenario(scenario)
        columns.append(Column(_label(path, group, args), str(path), tuple(group),
                              evaluate_afresh(scenario)))
    return columns


def _label(path: str, group: Sequence[str], args) -> str:
    from pathlib import Path

    stem = Path(path).stem if len(args.scenario) > 1 else ""
    settings = " ".join(group)
    if settings:
        return f"{stem}: {settings}" if stem else settings
    return stem or "as written"


def handle(args) -> int:
    import json

    from ..output import check_target, emit
    from . import split_names

    if args.output:
        check_target(args.output)
    table = comparison(_columns(args), split_names(args.quantities))
    if args.format == "json":
        text = json.dumps(to_dict(table), indent=2)
    elif args.format == "markdown":
        text = markdown(table)
    else:
        text = text_table(table)
    emit(text, args.output)
    return 0
