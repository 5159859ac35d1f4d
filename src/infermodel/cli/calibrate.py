"""``infermodel calibrate``: measure this machine and write a hardware preset."""

from __future__ import annotations

FORMATS = ("table", "json")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="measure this machine's bandwidth, compute and per-call time",
        description="Measure this machine as Module 10 Lab 1 does: float32 matrix-vector and "
                    "matrix-matrix products of growing size, each repeated after a warm-up; "
                    "print the table (with the arithmetic FLOP/byte column), the effective "
                    "bandwidth at B = 1, the largest achieved FLOP/s, the ridge and the "
                    "per-call time t0, and write a hardware preset a scenario can load with "
                    "[hardware] preset = \"FILE\".")
    parser.add_argument("--quick", action="store_true",
                        help="a 2,048-wide matrix and six column counts: a few seconds")
    parser.add_argument("--output", "-o", metavar="FILE",
                        help="write the hardware preset TOML to FILE (atomically)")
    parser.add_argument("--plot", metavar="FILE",
                        help="draw the measured points on the roofline (FILE.png or FILE.svg)")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import json
    from pathlib import Path

    from ..accuracy.calibration import (
        LAB1_BATCHES,
        QUICK_BATCHES,
        T0_WIDTHS,
        measure,
        plot_calibration,
        preset_toml,
    )
    from ..errors import InfermodelError, Problem
    from ..output import atomic_write, check_target
    from ..progress import Progress

    for target in (args.output, args.plot):
        if target:
            check_target(target)
    if args.output and not str(args.output).endswith(".toml"):
        raise InfermodelError(Problem(f"cannot write a preset to {args.output!r}",
                                      expected="a file name ending in .toml"))
    if args.plot and not str(args.plot).lower().endswith((".png", ".svg")):
        raise InfermodelError(Problem(f"cannot write a plot to {args.plot!r}",
                                      expected="a file name ending in .png or .svg"))
    steps = len(QUICK_BATCHES if args.quick else LAB1_BATCHES) + len(T0_WIDTHS)
    with Progress(steps, "calibrate", unit="products") as bar:
        result = measure(quick=args.quick, progress=bar)
    if args.output:
        atomic_write(args.output, preset_toml(result, Path(args.output).stem))
    if args.plot:
        from ..analyses.figures import save

        save(plot_calibration(result), args.plot)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.table())
        if args.output:
            print(f"\nwrote {args.output}: use it with [hardware] preset = \"{args.output}\"")
        if args.plot:
            print(f"wrote {args.plot}")
    return 0
