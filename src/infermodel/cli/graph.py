"""``infermodel graph``: the dependency graph of a scenario's quantities."""

from __future__ import annotations

from . import add_scenario_arguments, load


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("graph", help="print the quantity dependency graph",
                                   description="Print the dependency graph: as text (each quantity "
                                               "with what it uses), Graphviz DOT or JSON.")
    add_scenario_arguments(parser)
    parser.add_argument("--format", choices=("text", "dot", "json", "png", "svg"), default="text",
                        help="png and svg draw the graph (inputs left, results right) and need "
                             "--output")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import json

    from ..engine.graph import build_graph
    from ..output import emit

    if args.format in ("png", "svg"):
        from ..errors import InfermodelError, Problem

        if not args.output:
            raise InfermodelError(Problem(f"--format {args.format} writes a picture",
                                          expected=f"--output FILE.{args.format}"))
    graph = build_graph(load(args))
    if args.format in ("png", "svg"):
        draw(graph, args.output, args.format)
        return 0
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


def draw(graph, output: str, fmt: str) -> None:
    """Draw the dependency graph in layers: inputs on the left, each quantity one layer
    right of the last thing it uses. Colours tell the plugin that last changed a node.
    """
    import io

    import networkx

    from ..analyses.figures import load_matplotlib
    from ..output import atomic_write

    _, Figure = load_matplotlib()
    g = graph.nx
    for layer, names in enumerate(networkx.topological_generations(g)):
        for name in names:
            g.nodes[name]["layer"] = layer
    positions = networkx.multipartite_layout(g, subset_key="layer")
    layers = 1 + max(g.nodes[n]["layer"] for n in g)
    figure = Figure(figsize=(max(8.0, 2.2 * layers), max(6.0, 0.28 * len(g))), dpi=100,
                    layout="constrained")
    ax = figure.subplots()
    ax.set_axis_off()
    owners = sorted({(graph[n].changed_by or (graph[n].plugin,))[-1] for n in g})
    palette = [f"C{i % 10}" for i in range(len(owners))]
    colour = {owner: palette[i] for i, owner in enumerate(owners)}
    networkx.draw_networkx_edges(g, positions, ax=ax, alpha=0.25, arrows=True, arrowsize=6,
                                 node_size=30)
    nodes = list(g)
    networkx.draw_networkx_nodes(
        g, positions, ax=ax, nodelist=nodes, node_size=30,
        node_color=[colour[(graph[n].changed_by or (graph[n].plugin,))[-1]] for n in nodes])
    networkx.draw_networkx_labels(g, positions, ax=ax, font_size=6,
                                  labels={n: n for n in nodes}, verticalalignment="bottom")
    for owner in owners:
        ax.scatter([], [], color=colour[owner], label=owner)
    ax.legend(title="plugin", fontsize=7, loc="upper left")
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt)
    atomic_write(output, buffer.getvalue())
