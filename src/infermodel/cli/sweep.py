"""``infermodel sweep``: evaluate a scenario over a grid of field values."""

from __future__ import annotations

import argparse

from . import add_scenario_arguments, load, print_warnings, split_names

FORMATS = ("table", "csv", "json")
#: Columns a table shows when no quantities are asked for (those the scenario has).
TABLE_QUANTITIES = ("fits", "ttft", "tpot", "tokens_per_s_per_user", "tokens_per_s_total",
                    "memory_required", "cost_per_million_output_tokens")
#: A table longer than this is refused: CSV or JSON suit it better.
MAX_TABLE_ROWS = 100_000


def add_over_arguments(parser: argparse.ArgumentParser) -> None:
    """``--over FIELD=VALUES`` (repeatable), shared by sweep, search and plot."""
    parser.add_argument("--over", action="append", default=[], metavar="FIELD=VALUES",
                        help="sweep a field: a comma list (--over workload.batch=1,2,4, "
                             "--over hardware.preset=h100-sxm,h200) or a range "
                             "(--over 'workload.batch=1..512 log2', '0.5..1 step 0.1', "
                             "'1..100 10 points'); adds to or replaces the scenario's [sweep] "
                             "(repeatable)")
    parser.add_argument("--no-table", dest="use_table", action="store_false",
                        help="ignore the scenario's [sweep] table (use only --over)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show a progress bar on standard error (default: when it is a "
                             "terminal)")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "sweep", help="evaluate a scenario over a grid of field values",
        description="Evaluate a scenario at every point of a grid: the scenario's [sweep] "
                    "table and --over fields. Numeric fields that feed input quantities are "
                    "evaluated as numpy arrays; presets, levers and other structural choices "
                    "are grouped into blocks compiled once each. CSV and JSON have a column "
                    "per swept field, then one per quantity, in base units.")
    add_scenario_arguments(parser)
    add_over_arguments(parser)
    parser.add_argument("--quantities", metavar="A,B,...",
                        help="only these quantities (default: [sweep] quantities, else every "
                             "quantity for CSV and JSON and a few key ones for a table)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="table, csv or json (default: from the --output extension, else "
                             "table)")
    parser.add_argument("--output", "-o", metavar="FILE",
                        help="write to FILE, atomically (an interrupted sweep leaves no file)")
    parser.add_argument("--chunk-size", type=int, default=None, metavar="N",
                        help="points evaluated at a time (default 16384)")
    parser.set_defaults(handler=handle)


def output_format(args) -> str:
    if args.format:
        return args.format
    if args.output:
        suffix = args.output.rsplit(".", 1)[-1].lower() if "." in args.output else ""
        if suffix in ("csv", "json"):
            return suffix
    return "table"


def handle(args) -> int:
    from ..errors import InfermodelError, Problem
    from ..output import emit
    from ..sweeping import grid_axes, plan_sweep

    scenario = load(args)
    fmt = output_format(args)
    names = split_names(args.quantities)
    axes, table_quantities = grid_axes(scenario, args.over, use_table=args.use_table)
    if not axes:
        raise InfermodelError(Problem(
            "nothing to sweep: the scenario has no [sweep] table and no --over was given",
            file=args.scenario,
            expected="--over FIELD=VALUES, e.g. --over 'workload.batch=1..512 log2', or a "
                     '[sweep] table such as "workload.batch" = [1, 2, 4, 8]'))
    if args.chunk_size is not None and args.chunk_size < 1:
        raise InfermodelError(Problem(f"--chunk-size {args.chunk_size} must be at least 1"))
    total = 1
    for axis in axes:
        total *= len(axis)
    if fmt == "table" and total > MAX_TABLE_ROWS:
        raise InfermodelError(Problem(
            f"a table of {total:,} rows is not readable",
            expected=f"at most {MAX_TABLE_ROWS:,} points for a table",
            suggestion="use --format csv or json with --output FILE"))
    plan = plan_sweep(scenario, args.over, use_table=args.use_table, select=False,
                      progress=args.progress)
    if names is None and table_quantities is None and fmt == "table":
        names = [q for q in TABLE_QUANTITIES if q in plan.all_quantities]
    chosen = names if names is not None else table_quantities
    if fmt == "table" and chosen is not None and "fits" in plan.all_quantities:
        # fits marks the rows that do not fit, whichever columns were asked for
        chosen = list(chosen) + ([] if "fits" in chosen else ["fits"])
    plan.select(chosen)
    print_warnings(plan.warnings())
    if fmt == "table":
        result = plan.run(args.chunk_size)
        emit(result.table(), args.output)
        return 0
    plan.write(args.output, fmt, chunk_size=args.chunk_size)
    return 0
