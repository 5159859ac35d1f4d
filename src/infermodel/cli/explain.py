"""``infermodel explain``: the derivation of one quantity, down to the inputs."""

from __future__ import annotations

from . import add_scenario_arguments, load

FORMATS = ("text", "markdown", "latex", "json")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain", help="show how a quantity is derived",
        description="Print the derivation chain of a quantity: for each step the formula, the "
                    "formula with numbers, the value with its unit, the plugin that defined or "
                    "changed it and the published reference.")
    add_scenario_arguments(parser)
    parser.add_argument("quantity", help="quantity name, e.g. tpot")
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("--depth", type=int, default=None,
                        help="levels of dependencies to include (default: all, down to inputs)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import json

    from ..derivation import derive
    from ..engine.evaluation import evaluate_afresh
    from ..output import emit

    result = evaluate_afresh(load(args))
    derivation = derive(result, args.quantity, depth=args.depth)
    if args.format == "json":
        text = json.dumps(derivation.to_dict(), indent=2)
    elif args.format == "markdown":
        text = derivation.markdown()
    elif args.format == "latex":
        text = derivation.latex()
    else:
        text = derivation.text()
        # the warnings about any quantity in the chain, or about the whole scenario
        shown = {step.name for step in derivation.steps}
        notes = [w for w in result.warnings if w.quantity is None or w.quantity in shown]
        if notes:
            text += "".join(f"warning: {w}\n" for w in notes)
    emit(text, args.output)
    return 0
