"""``infermodel plot``: roofline, throughput, memory, cost or any sweep, as PNG or SVG."""

from __future__ import annotations

from . import add_scenario_arguments, load, split_names

KINDS = ("roofline", "operators", "throughput", "memory", "cost", "sweep")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "plot", help="draw a plot of a scenario (PNG or SVG)",
        description="Draw a plot: roofline (prefill and decode operating points), operators "
                    "(every operator of a prefill pass and a decode step on the roofline), throughput "
                    "(tokens/s per user and in total vs batch), memory (weights, KV cache and "
                    "reserve vs batch, or vs context with --x context), cost (per million "
                    "output tokens vs users), sweep (any quantities vs a swept field, one line "
                    "per other swept field). Points that do not fit in memory are hollow.")
    add_scenario_arguments(parser)
    parser.add_argument("kind", choices=KINDS, help="which plot")
    parser.add_argument("--over", action="append", default=[], metavar="FIELD=VALUES",
                        help="sweep a field (as for `infermodel sweep`); for throughput and "
                             "cost, other fields than workload.batch give one line per value")
    parser.add_argument("--x", metavar="FIELD",
                        help="the swept field across (sweep: default the first numeric one; "
                             "memory: workload.batch or context)")
    parser.add_argument("--y", metavar="A,B,...",
                        help="sweep: quantities to draw, one panel each (default: [sweep] "
                             "quantities, else tokens_per_s_total)")
    parser.add_argument("--no-table", dest="use_table", action="store_false",
                        help="throughput and cost: ignore the scenario's [sweep] table (by "
                             "default its batches are the x axis and its other fields give "
                             "one line each)")
    parser.add_argument("--title", help="the figure's title")
    parser.add_argument("--output", "-o", metavar="FILE",
                        help="FILE.png or FILE.svg (default: SCENARIO-KIND.png here)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from ..analyses.plots import plot

    scenario = load(args)
    output = args.output or f"{_file_stem(scenario.name)}-{args.kind}.png"
    plot(scenario, args.kind, over=args.over or None, x=args.x, y=split_names(args.y),
         output=output, title=args.title, use_table=args.use_table)
    print(f"wrote {output}")
    return 0


def _file_stem(name: str) -> str:
    """The scenario's name as a file name in the working directory: no directories, no
    characters a shell would need quoted, at most 100 characters.

    >>> _file_stem("../../etc/x y")
    'etc-x-y'
    """
    import re

    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")[:100].strip(".-")
    return stem or "scenario"
