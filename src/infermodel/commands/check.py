"""``infermodel check``: validate a scenario without printing results."""

from __future__ import annotations

from . import add_scenario_arguments, load


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="validate a scenario",
                                   description="Read, type and validate a scenario and build its "
                                               "quantity graph; print nothing but a summary.")
    add_scenario_arguments(parser)
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from ..graph import build_graph

    scenario = load(args)
    graph = build_graph(scenario)
    levers = ", ".join(sorted(scenario.levers)) or "none"
    print(f"ok: {args.scenario} is valid — {len(graph)} quantities "
          f"({len(graph.inputs)} inputs), levers: {levers}")
    return 0
