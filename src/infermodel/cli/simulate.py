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
    parser.add_argument("--seed", type=int, default=None, help="workload seed")
    parser.add_argument("--engine", choices=("fast", "reference"), default=None,
                        help="event-skipping (fast) or step-by-step (reference); same metrics")
    parser.add_argument("--capacity", action="store_true",
                        help="search the highest nominal rate meeting p99 TTFT and p99 ITL "
                             "objectives, re-check its neighbours, and price it")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
    parser.add_argument("--plot", metavar="FILE", help="also plot latency percentiles vs load "
                                                       "(.png or .svg)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def _csv(result) -> str:
    import csv
    import io

    from ..simulator import METRIC_NAMES

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["policy", "rate", *METRIC_NAMES])
    for run in result.runs:
        writer.writerow([run.policy, repr(run.rate), *(repr(float(run.metrics[m])) for m in METRIC_NAMES)])
    return buffer.getvalue()


def handle(args) -> int:
    import json

    from ..output import emit
    from ..progress import Progress
    from ..simulation import plot_latency, simulate

    scenario = load(args)
    bar = Progress(1, "simulate", unit="runs")

    def progress(done, total):
        bar.total = total
        bar.update(done - bar.done)

    import sys
    import warnings

    from ..simulation import SimulationWarning

    with bar, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SimulationWarning)
        outcome = simulate(scenario, policies=args.policy or None, rates=args.rate or None,
                           seed=args.seed, engine=args.engine, capacity=args.capacity,
                           progress=progress)
    for warning in caught:
        if issubclass(warning.category, SimulationWarning):
            print(f"warning: {warning.message}", file=sys.stderr)
    if args.capacity:
        text = (json.dumps(outcome.to_dict(), indent=2, allow_nan=False) if args.format == "json"
                else outcome.text())
        emit(text, args.output)
        return 0
    if args.format == "json":
        text = json.dumps(outcome.to_dict(), indent=2, allow_nan=False)
    elif args.format == "csv":
        text = _csv(outcome)
    else:
        text = f"{scenario.name}: seed {outcome.seed}, {outcome.engine} engine\n" + outcome.table()
    emit(text, args.output)
    if args.plot:
        plot_latency(outcome, args.plot)
    return 0
