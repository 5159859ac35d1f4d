"""``infermodel check``: validate a scenario without printing results."""

from __future__ import annotations

from . import add_scenario_arguments, load


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="validate a scenario",
                                   description="Read, type and validate a scenario, build its "
                                               "quantity graph, and check its [sweep], [search], "
                                               "[simulation], [witness] and [plan] tables; print only a "
                                               "summary.")
    add_scenario_arguments(parser)
    parser.set_defaults(handler=handle)


def _plan(scenario, plans: dict):
    """The scenario's sweep plan, built once for the sweep and search checks (a plan
    builds a quantity graph per structural combination: seconds for a preset grid).
    """
    from ..sweeping import plan_sweep

    if "sweep" not in plans:
        plans["sweep"] = plan_sweep(scenario, select=False)
    return plans["sweep"]


def _sweep(scenario, plans: dict):
    _plan(scenario, plans)


def _search(scenario, plans: dict):
    from ..analyses.searching import parse_search, search_spec

    # The formulas as search reads them: parsed against the sweep's quantities.
    parse_search(scenario, search_spec(scenario), _plan(scenario, plans))


def _simulation(scenario, plans: dict):
    from ..analyses.simulation.plan import plan

    plan(scenario)


def _plan_table(scenario, plans: dict):
    from ..analyses.planning import read_plan

    read_plan(scenario)


def _witness(scenario, plans: dict):
    from ..analyses.witnessing import scenario_witnesses

    scenario_witnesses(scenario)


def _memory_warning(scenario) -> None:
    """Weights that leave no memory for the KV cache: valid as a what-if (``run``
    reports fits = false), but nothing can be served; say so.
    """
    import sys

    from ..engine.evaluation import evaluate_afresh

    values = evaluate_afresh(scenario).values
    budget = values.get("kv_budget_bytes")
    if budget is not None and float(budget) <= 0:
        print(f"warning: {args_name(scenario)}: the weights ({float(values['weight_bytes']) / 1e9:.4g} GB) "
              f"leave no memory for the KV cache (kv_budget_bytes = {float(budget) / 1e9:.4g} GB); "
              "nothing can be served and `simulate` refuses it", file=sys.stderr)


def args_name(scenario) -> str:
    return str(scenario.path) if scenario.path else scenario.name


# table name, the tables that call for the check, the feature's own reader
TABLE_CHECKS = (
    ("sweep", ("sweep", "search"), _sweep),
    ("search", ("search",), _search),
    ("simulation", ("simulation",), _simulation),
    ("witness", ("witness",), _witness),
    ("plan", ("plan",), _plan_table),
)


def applied_levers(scenario, graph) -> list[str]:
    """Each lever table with what its plugin did to this graph: ``"speculative (defines
    24, changes 3)"``, or ``"(no effect)"`` when it neither defined nor changed a quantity.
    """
    from ..host import get_host

    registries = (scenario.host or get_host()).registries
    out = []
    for name in sorted(scenario.levers):
        plugin = registries.levers[name].plugin
        defined = sum(1 for q in graph.quantities.values() if q.plugin == plugin)
        changed = sum(1 for q in graph.quantities.values() if plugin in q.changed_by)
        done = [f"defines {defined}"] * bool(defined) + [f"changes {changed}"] * bool(changed)
        out.append(f"{name} ({', '.join(done) or 'no effect'})")
    return out


def handle(args) -> int:
    from ..engine.graph import build_graph
    from ..errors import InfermodelError

    scenario = load(args)
    graph = build_graph(scenario)
    problems = []
    checked = []
    plans: dict = {}
    # Each table is read by its own feature; report what all of them find at once.
    for name, triggers, read in TABLE_CHECKS:
        if not any(t in scenario.tables for t in triggers):
            continue
        try:
            read(scenario, plans)
            checked.append(name)
        except InfermodelError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InfermodelError(problems)
    _memory_warning(scenario)
    levers = ", ".join(applied_levers(scenario, graph)) or "none"
    tables = f", tables: {', '.join(checked)}" if checked else ""
    print(f"ok: {args.scenario} is valid — {len(graph)} quantities "
          f"({len(graph.inputs)} inputs), levers: {levers}{tables}")
    return 0
