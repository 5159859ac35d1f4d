"""``infermodel plan``: the cheapest deployments that meet percentile objectives at a load."""

from __future__ import annotations

from . import add_scenario_arguments, load

#: Command-line options that set a key of ``[plan]`` (option dest → key).
TABLE_OPTIONS = {"rate": "rate", "concurrency": "concurrency", "ttft": "ttft", "itl": "itl",
                 "tpot": "tpot", "e2e": "e2e", "hardware": "hardware", "engine": "engines",
                 "max_gpus": "max_gpus", "requests": "requests", "max_requests": "max_requests",
                 "seed": "seed", "show": "show", "checkpoint": "checkpoint"}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan", help="find the cheapest deployments that meet latency percentiles at a load",
        description="Plan a deployment: the cards, engines and layouts of the scenario's [plan] "
                    "table (or the options here), each at the fewest replicas whose simulation "
                    "meets every objective with a statistically clear verdict, ranked by "
                    "monthly cost. Candidates are bounded analytically first; only finalists "
                    "are simulated, and the request count grows where a verdict is close. "
                    "Options set keys of [plan]; --set plan.KEY=VALUE sets any.")
    add_scenario_arguments(parser)
    parser.add_argument("--rate", type=float, metavar="R",
                        help="requests/s offered to the whole deployment ([plan] rate)")
    parser.add_argument("--concurrency", type=int, metavar="N",
                        help="closed-loop clients instead of a rate ([plan] concurrency)")
    for name in ("ttft", "itl", "tpot", "e2e"):
        parser.add_argument(f"--{name}", metavar="OBJECTIVE",
                            help=f'{name.upper()} objective such as "p95 <= 1 s" ([plan] {name})')
    parser.add_argument("--hardware", action="append", metavar="PRESET",
                        help="a card to consider (repeatable; [plan] hardware)")
    parser.add_argument("--engine", action="append", metavar="NAME",
                        help="a serving engine: vllm, sglang, trtllm (repeatable; [plan] engines)")
    parser.add_argument("--max-gpus", type=int, metavar="N", help="the most GPUs ([plan] max_gpus)")
    parser.add_argument("--requests", type=int, metavar="N",
                        help="requests of a first verdict ([plan] requests)")
    parser.add_argument("--max-requests", type=int, metavar="N",
                        help="the most requests an unclear verdict grows to ([plan] max_requests)")
    parser.add_argument("--seed", type=int, help="workload seed ([plan] seed)")
    parser.add_argument("--show", type=int, metavar="N", help="deployments listed ([plan] show)")
    parser.add_argument("--checkpoint", metavar="MODEL",
                        help="the model path or identifier the launch line serves ([plan] checkpoint)")
    parser.add_argument("--scheduler", choices=("serial", "processes", "dask"), default="serial",
                        help="simulate the cards' finalists here one after another (serial), on "
                             "worker processes of this machine (processes), or on Dask (a local "
                             "cluster, or the one at --address)")
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="with --scheduler dask: the address of a running Dask scheduler")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--plot", metavar="FILE",
                        help="also draw the Pareto front (tokens/s per GPU vs per user) and the "
                             "cheapest deployment per card (.png or .svg)")
    parser.add_argument("--launch", action="store_true",
                        help="also print the chosen deployment's engine launch command")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def table_overrides(args) -> dict:
    """The ``[plan]`` keys the options set."""
    out = {}
    for dest, key in TABLE_OPTIONS.items():
        value = getattr(args, dest)
        if value is not None:
            out[key] = value
    return out


def handle(args) -> int:
    import json

    from ..analyses.planning import plan
    from ..output import emit
    from ..progress import Progress

    scenario = load(args)
    bar = Progress(1, "plan", unit="cards")

    def progress(done, total):
        bar.total = total
        bar.update(done - bar.done)

    with bar:
        found = plan(scenario, overrides=table_overrides(args), scheduler=args.scheduler,
                     address=args.address, progress=progress)
    if args.format == "json":
        data = found.to_dict()
        if args.launch:
            data["launch"] = found.launch()
        text = json.dumps(data, indent=2, allow_nan=False)
    else:
        text = found.text()
        if args.launch:
            text += "\n\nlaunch:\n" + found.launch()
    emit(text, args.output)
    if args.plot:
        found.plot(args.plot)
    return 0
