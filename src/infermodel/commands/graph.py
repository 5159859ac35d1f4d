"""``infermodel graph``: the dependency graph of a scenario's quantities."""

from __future__ import annotations

from . import add_scenario_arguments, load


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("graph", help="print the quantity dependency graph",
                                   description="Print the dependency graph: as text (each quantity "
                                               "with what it uses), Graphviz DOT or JSON.")
    add_scenario_arguments(parser)
    parser.add_argument("--format", choices=("text", "dot", "json"), default="text")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import json

    from ..graph import build_graph
    from ..output import emit

    graph = build_graph(load(args))
    if args.format == "dot":
        text = graph.to_dot()
    elif args.format == "json":
        text = json.dumps({
            "nodes": [{"name": n, "unit": graph[n].unit, "plugin": graph[n].plugin,
                       "input": graph[n].is_input, "changed_by": list(graph[n].changed_by)}
                      for n in graph.order],
            "edges": [[dep, n] for n in graph.order for dep in graph[n].dependencies],
        }, indent=2)
    else:
        lines = []
        for name in graph.order:
            q = graph[name]
            uses = ", ".join(q.dependencies) if q.dependencies else "(input)"
            lines.append(f"{name} [{q.unit}] <- {uses}")
        text = "\n".join(lines)
    emit(text, args.output)
    return 0
