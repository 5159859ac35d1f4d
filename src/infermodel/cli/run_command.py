"""``infermodel run``: evaluate a scenario and print its headline figures (or every quantity)."""

from __future__ import annotations

from . import add_scenario_arguments, load, split_names

FORMATS = ("table", "json", "markdown", "latex")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="evaluate a scenario and print its quantities",
                                   description="Evaluate a scenario and print a short summary: "
                                               "memory, latency, throughput, cost and each active "
                                               "lever's gain, the assumptions behind them and any "
                                               "warning. --all prints every quantity with its unit "
                                               "and meaning; --quantities only those chosen.")
    add_scenario_arguments(parser)
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--quantities", metavar="A,B,...", help="only these quantities")
    parser.add_argument("--all", action="store_true",
                        help="every quantity (the table format's default is a short summary)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from .. import printing
    from ..engine.evaluation import evaluate_afresh
    from ..output import emit

    result = evaluate_afresh(load(args))
    names = split_names(args.quantities)
    if names:
        for name in names:
            result.graph[name]  # unknown names raise with a suggestion
    if args.format == "json":
        import json

        data = result.to_dict()
        if names:
            data["quantities"] = {n: data["quantities"][n] for n in names}
        text = json.dumps(data, indent=2)
    elif args.format == "markdown":
        text = printing.result_markdown(result, names)
    elif args.format == "latex":
        text = printing.result_latex(result, names)
    elif names or args.all:
        text = printing.result_table(result, names)
    else:
        text = printing.result_summary(result)
    emit(text, args.output)
    return 0
