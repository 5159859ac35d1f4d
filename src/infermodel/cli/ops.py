"""``infermodel ops``: the operator-level roofline of one prefill pass or decode step."""

from __future__ import annotations

from . import add_scenario_arguments, load

FORMATS = ("table", "csv", "json")
PHASES = ("prefill", "decode")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "ops", help="per-operator roofline of a prefill pass or a decode step",
        description="Split one decode step (or one prefill pass) into its operators — "
                    "embedding, norms, QKV projection, attention score and value, output "
                    "projection, router, FFN or experts, head, all-reduce — and print each "
                    "one's FLOPs, bytes moved, intensity (FLOP/B), bound (compute, memory, "
                    "or own for a link-timed collective), compute time, memory time, time "
                    "(the larger; its own for a collective) and share of the summed time, "
                    "then the totals beside the whole-step figures. CSV and JSON give base "
                    "units (FLOP, B, FLOP/B, s).")
    add_scenario_arguments(parser)
    parser.add_argument("--phase", choices=PHASES, default="decode",
                        help="which pass to split (default: decode)")
    parser.add_argument("--kernels", choices=("roofline", "measured"), default=None,
                        help="time the operators from the measured kernel tables and show "
                             "each one's measured time beside its roofline (the same as "
                             "--set efficiency.kernels=measured; needs infermodel[kernels])")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from ..engine.evaluation import evaluate_afresh
    from ..engine.operators import format_csv, format_json, format_table, operator_table
    from ..output import emit

    if args.kernels is not None:
        args.overrides = [*args.overrides, f"efficiency.kernels={args.kernels}"]
    result = evaluate_afresh(load(args))
    rows = operator_table(result, args.phase)
    if args.format == "csv":
        text = format_csv(rows)
    elif args.format == "json":
        text = format_json(result, args.phase, rows)
    else:
        text = format_table(result, args.phase, rows)
    emit(text, args.output)
    return 0
