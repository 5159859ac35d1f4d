"""``infermodel search``: the best choice of a sweep under constraints."""

from __future__ import annotations

from . import add_scenario_arguments, load, print_warnings, split_names
from .sweep import add_over_arguments


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "search", help="find the best choice of a sweep under constraints",
        description="Minimise or maximise an objective over the points of the scenario's "
                    "sweep, subject to constraints (from [search], or given here). Prints the "
                    "best choice, the runners-up and, for each rejected choice, the first "
                    "constraint it failed. Formulas are parsed, never executed: quantities, "
                    "numbers, + - * / ** // %, comparisons, and/or/not, 'a if c else b', "
                    "Max Min floor ceiling sqrt log exp Abs.")
    add_scenario_arguments(parser)
    add_over_arguments(parser)
    goal = parser.add_mutually_exclusive_group()
    goal.add_argument("--minimise", "--minimize", metavar="FORMULA",
                      help="objective to minimise (replaces [search]'s)")
    goal.add_argument("--maximise", "--maximize", metavar="FORMULA",
                      help="objective to maximise (replaces [search]'s)")
    parser.add_argument("--constraint", action="append", default=None, metavar="FORMULA",
                        help="a constraint such as 'tokens_per_s_per_user >= 25' or 'fits' "
                             "(repeatable; replaces [search]'s constraints)")
    parser.add_argument("--rate", type=float, default=None, metavar="R",
                        help="requests/s each choice is simulated at, for constraints on "
                             "simulated figures such as 'simulated_ttft_p95 <= 1' (replaces "
                             "[search]'s rate)")
    parser.add_argument("--replicas", type=int, default=None, metavar="N",
                        help="servers of each simulated choice (replaces [search]'s replicas)")
    parser.add_argument("--show", type=int, default=None, metavar="N",
                        help="runners-up to show (default: [search] show, else 5)")
    parser.add_argument("--rejected", type=int, default=100, metavar="N",
                        help="rejected choices to list one by one (default 100)")
    parser.add_argument("--explain", action="append", default=[], metavar="QUANTITY",
                        help="print the derivation of QUANTITY at the winner (repeatable, or "
                             "a comma list)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import json

    from ..analyses.searching import search
    from ..errors import InfermodelError, Problem
    from ..output import emit

    for option, value in (("--show", args.show), ("--rejected", args.rejected)):
        if value is not None and value < 0:
            raise InfermodelError(Problem(f"{option} {value} must be 0 or more"))
    scenario = load(args)
    found = search(scenario, args.over, minimise=args.minimise, maximise=args.maximise,
                   constraints=args.constraint, show=args.show, use_table=args.use_table,
                   progress=args.progress, rate=args.rate, replicas=args.replicas)
    explain = [n for item in args.explain for n in (split_names(item) or [])]
    derivations = []
    if explain:
        if found.best is None:
            raise InfermodelError(Problem(
                "no choice satisfies every constraint, so there is no winner to explain"))
        result = found.evaluate_best()
        from ..derivation import derive

        derivations = [(name, derive(result, name)) for name in explain]
    warnings = found.warnings()
    where = "at the winner" if found.best is not None else "the scenario as written"
    if args.format == "json":
        data = found.to_dict(rejected=args.rejected)
        data["warnings"] = [str(w) for w in warnings]
        if derivations:
            data["explain"] = {name: d.to_dict() for name, d in derivations}
        text = json.dumps(data, indent=2)
    else:
        parts = [found.report(rejected=args.rejected)]
        for name, derivation in derivations:
            parts.append(f"\nderivation of {name} at the winner:\n\n{derivation.text()}")
        text = "\n".join(parts)
    print_warnings(warnings, where=where)
    emit(text, args.output)
    return 0
