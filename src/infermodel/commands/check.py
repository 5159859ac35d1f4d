"""``infermodel check``: validate a scenario without printing results."""

from __future__ import annotations

from . import add_scenario_arguments, load


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="validate a scenario",
                                   description="Read, type and validate a scenario, build its "
                                               "quantity graph, and check its [sweep], [search], "
                                               "[simulation] and [witness] tables; print only a "
                                               "summary.")
    add_scenario_arguments(parser)
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from ..errors import InfermodelError
    from ..graph import build_graph

    scenario = load(args)
    graph = build_graph(scenario)
    problems = []
    checked = []
    # Each table is read by its own feature; report what all of them find at once.
    if "sweep" in scenario.tables or "search" in scenario.tables:
        try:
            from ..sweeping import plan_sweep

            plan_sweep(scenario, select=False)
            checked.append("sweep")
        except InfermodelError as exc:
            problems.extend(exc.problems)
    if "search" in scenario.tables:
        try:
            from ..searching import search_spec

            search_spec(scenario)
            checked.append("search")
        except InfermodelError as exc:
            problems.extend(exc.problems)
    if "simulation" in scenario.tables:
        try:
            from ..simulation import plan

            plan(scenario)
            checked.append("simulation")
        except InfermodelError as exc:
            problems.extend(exc.problems)
    if "witness" in scenario.tables:
        try:
            from ..witnessing import scenario_witnesses

            scenario_witnesses(scenario)
            checked.append("witness")
        except InfermodelError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InfermodelError(problems)
    levers = ", ".join(sorted(scenario.levers)) or "none"
    tables = f", tables: {', '.join(checked)}" if checked else ""
    print(f"ok: {args.scenario} is valid — {len(graph)} quantities "
          f"({len(graph.inputs)} inputs), levers: {levers}{tables}")
    return 0
