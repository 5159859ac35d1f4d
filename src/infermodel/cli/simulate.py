"""``infermodel simulate``: the serving simulator on a scenario's iteration cost."""

from __future__ import annotations

from . import add_scenario_arguments, load


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate", help="simulate serving policies under a seeded arrival stream",
        description="Run the serving simulator (static, reserve, paged, chunked policies) on a "
                    "seeded workload, with the scenario's quantities as the iteration cost. "
                    "Settings come from the scenario's [simulation] table; options override them.")
    add_scenario_arguments(parser)
    parser.add_argument("--policy", action="append", default=[], metavar="NAME",
                        help="policy to run: static, reserve, paged or chunked (repeatable)")
    parser.add_argument("--rate", action="append", default=[], type=float, metavar="R",
                        help="nominal arrival rate in requests/s (repeatable)")
    parser.add_argument("--concurrency", action="append", default=[], type=int, metavar="N",
                        help="closed-loop load: N clients, each sending its next request when "
                             "the last one ends (repeatable; replaces the rates)")
    parser.add_argument("--think-time", type=float, default=None, metavar="SECONDS",
                        help="closed loop: seconds between a response and the client's next "
                             "request (default: the table's think_time, else 0)")
    parser.add_argument("--turns", type=int, default=None, metavar="T",
                        help="multi-turn sessions of T turns (rates are then sessions/s; each "
                             "prompt is the session's history plus a new message)")
    parser.add_argument("--replicas", type=int, default=None, metavar="N",
                        help="N servers behind a router (default: the table's replicas, else 1)")
    parser.add_argument("--router", choices=("round_robin", "least_outstanding", "prefix_affinity"),
                        default=None, help="how requests are spread over replicas")
    parser.add_argument("--prefill", type=int, default=None, metavar="X",
                        help="disaggregated: X prefill servers (with --decode)")
    parser.add_argument("--decode", type=int, default=None, metavar="Y",
                        help="disaggregated: Y decode servers (with --prefill)")
    parser.add_argument("--seed", type=int, action="append", default=[], metavar="SEED",
                        help="workload seed (repeatable: a run per seed)")
    parser.add_argument("--scheduler", choices=("serial", "processes", "dask"), default="serial",
                        help="run the grid here one run at a time (serial), on worker processes "
                             "of this machine, one per core (processes), or on Dask: a local "
                             "cluster, one worker per core, or the cluster at --address "
                             '(needs pip install "infermodel[dask]")')
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="with --scheduler dask: the address of a running Dask scheduler")
    parser.add_argument("--engine", choices=("fast", "reference"), default=None,
                        help="event-skipping (fast) or step-by-step (reference); same metrics")
    parser.add_argument("--capacity", action="store_true",
                        help="search the highest nominal rate meeting the [simulation.slo] "
                             "objectives (p99 TTFT and ITL by default) with the scenario's own "
                             "policy, re-check its neighbours, and price it")
    parser.add_argument("--pool", choices=("both", "prefill", "decode"), default="both",
                        help="with --capacity: judge both objectives, or one pool of a "
                             "disaggregated deployment by its own (prefill: TTFT, decode: ITL)")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
    parser.add_argument("--table", choices=("scheduling", "batching"), default=None,
                        help="the table's columns: scheduling (Module 10 Lab 3: TTFT and ITL "
                             "percentiles, tokens/s, preemptions) or batching (Inference lab: "
                             "tokens/s, mean latency, p95, queue wait, slot use); default: the "
                             "[simulation] table's table key, else scheduling")
    parser.add_argument("--plot", metavar="FILE", help="also plot latency percentiles vs load "
                                                       "(.png or .svg)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.add_argument("--requests", metavar="FILE.csv",
                        help="also write one CSV row per request of every run: arrival, first "
                             "token, finish, tokens, preemptions, rollbacks")
    parser.add_argument("--timeseries", metavar="FILE",
                        help="also write the time series of waiting and running requests and "
                             "cache use at every scheduling decision, one series per server "
                             "(replica or pool): .csv, or a plot (.png/.svg)")
    parser.set_defaults(handler=handle)


def _csv(result) -> str:
    import csv
    import io

    from ..simulator import METRIC_NAMES

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["policy", "rate", "concurrency", "seed", *METRIC_NAMES])
    for run in result.runs:
        writer.writerow([run.policy, "" if run.rate != run.rate else repr(run.rate),
                         "" if run.concurrency is None else run.concurrency,
                         result.seed if run.seed is None else run.seed,
                         *(repr(float(run.metrics[m])) for m in METRIC_NAMES)])
    return buffer.getvalue()


def _costs(outcome) -> list[str]:
    """The deployment's price at each run's simulated load, with what it assumes."""
    from ..analyses.simulation import run_cost

    lines = []
    for run in outcome.runs:
        basis = run_cost(outcome, run)
        if basis is not None:
            load = f"N={run.concurrency}" if run.concurrency is not None else f"{run.rate:g}/s"
            lines += [f"cost of the deployment, {run.policy} {load}:", *basis.lines()]
    return lines


def handle(args) -> int:
    import json

    from ..analyses.simulation import plot_latency, run_cost, simulate
    from ..output import emit
    from ..progress import Progress

    if args.pool != "both" and not args.capacity:
        from ..errors import InfermodelError, Problem

        raise InfermodelError(Problem(f"--pool {args.pool} judges one pool in a capacity search",
                                      expected="--pool with --capacity"))
    scenario = load(args)
    from ..output import check_target

    for target in (args.requests, args.timeseries):
        if target:
            check_target(target)
    if args.timeseries and not args.timeseries.lower().endswith((".csv", ".png", ".svg")):
        from ..errors import InfermodelError, Problem

        raise InfermodelError(Problem(f"cannot write a time series to {args.timeseries!r}",
                                      expected="a file name ending in .csv, .png or .svg"))
    bar = Progress(1, "simulate", unit="runs")

    def progress(done, total):
        bar.total = total
        bar.update(done - bar.done)

    import sys
    import warnings

    from ..analyses.simulation import SimulationWarning

    with bar, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SimulationWarning)
        outcome = simulate(scenario, policies=args.policy or None, rates=args.rate or None,
                           seed=args.seed[0] if len(args.seed) == 1 else None,
                           seeds=args.seed if len(args.seed) > 1 else None,
                           scheduler=args.scheduler, address=args.address,
                           engine=args.engine, capacity=args.capacity,
                           progress=progress, concurrency=args.concurrency or None,
                           think_time=args.think_time, replicas=args.replicas,
                           router=args.router, prefill=args.prefill, decode=args.decode,
                           turns=args.turns, pool=args.pool,
                           keep_records=bool(args.requests or args.timeseries))
    for warning in caught:
        if issubclass(warning.category, SimulationWarning):
            print(f"warning: {warning.message}", file=sys.stderr)
    if args.capacity:
        text = (json.dumps(outcome.to_dict(), indent=2, allow_nan=False) if args.format == "json"
                else outcome.text())
        emit(text, args.output)
        return 0
    if args.format == "json":
        data = outcome.to_dict()
        for run, shown in zip(outcome.runs, data["runs"]):
            basis = run_cost(outcome, run)
            shown["cost"] = None if basis is None else basis.to_dict()
        text = json.dumps(data, indent=2, allow_nan=False)
    elif args.format == "csv":
        text = _csv(outcome)
    else:
        notes = "".join(f"note: {note}\n" for note in outcome.notes)
        layout = args.table or scenario.tables.get("simulation", {}).get("table", "scheduling")
        text = (f"{scenario.name}: seed {outcome.seed}, {outcome.engine} engine\n" + notes
                + "\n".join([outcome.table(layout), *outcome.footnotes, *_costs(outcome)]))
    emit(text, args.output)
    if args.plot:
        plot_latency(outcome, args.plot)
    if args.requests:
        from ..analyses.simulation import requests_csv
        from ..output import atomic_write

        atomic_write(args.requests, requests_csv(outcome))
    if args.timeseries:
        from ..analyses.simulation import plot_timeseries, timeseries_csv

        if args.timeseries.lower().endswith(".csv"):
            from ..output import atomic_write

            atomic_write(args.timeseries, timeseries_csv(outcome))
        else:
            plot_timeseries(outcome, args.timeseries)
    return 0
