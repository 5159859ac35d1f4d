"""``infermodel validate``: predictions checked against measurements.

Two forms: ``validate --ledger FILE`` predicts every row of an accuracy ledger of
published serving measurements (:mod:`infermodel.accuracy.predictions`); ``validate SCENARIO``
builds a small random decoder of the scenario's shape and measures it on this machine
(:mod:`infermodel.accuracy.decoder`, needs the ``[validate]`` extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

FORMATS = ("table", "json")
KERNELS = ("measured",)
LOOPS = ("simulated", "analytic")
#: Ledgers of at most this many rows print every row by default.
ROWS_SHOWN = 500


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "validate", help="check predictions against measurements (a ledger, or this machine)",
        description="With --ledger FILE: predict every row of an accuracy ledger (published "
                    "serving measurements, one figure a row) and report measured, predicted and "
                    "relative error per row and the median and 90th-percentile |error| per "
                    "metric; rows that cannot be predicted are listed with the reason. "
                    "--calibrated predicts with the [efficiency] preset the row's engine "
                    "names (otherwise the ideal roofline); --fit refits those presets (the "
                    "physical efficiency model's parameters, inside their bounds) and "
                    "cross-validates them leaving one source out. With SCENARIO: build a small randomly "
                    "initialised decoder of the scenario's shape (PyTorch, the [validate] "
                    "extra) and compare its cache bytes, step times, batch invariance and "
                    "cached logits with the predictions.")
    parser.add_argument("scenario", nargs="?", help="a scenario TOML file (real-model checks)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a scenario field (repeatable)")
    parser.add_argument("--ledger", metavar="FILE",
                        help="an accuracy ledger CSV; 'builtin' for the one shipped with "
                             "infermodel; 'silicon' for the measured deployments shipped with "
                             "the measured kernel tables (the [kernels] extra)")
    parser.add_argument("--kernels", choices=KERNELS, metavar="measured",
                        help="ledger: time every operator from the measured kernel tables of "
                             "each row's engine ([efficiency] kernels = \"measured\", the "
                             "[kernels] extra)")
    parser.add_argument("--compare", action="store_true",
                        help="ledger: predict with the ideal roofline, the engine presets and "
                             "(where the [kernels] extra is installed) measured kernels, and "
                             "print their errors side by side per model, system, engine and mode")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="ledger: predict N measured points only, a fixed stratified sample "
                             "(every system, engine and mode represented)")
    parser.add_argument("--loop", choices=LOOPS, default=None,
                        help="ledger: predict rows above one client with the serving simulator "
                             "(simulated) or the analytic closed loop (analytic); default: "
                             "simulated, analytic for the silicon ledger")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="ledger: worker processes (default: every core for ledgers of "
                             f"more than {ROWS_SHOWN} rows, else 1)")
    parser.add_argument("--rows", action=argparse.BooleanOptionalAction, default=None,
                        help="ledger: print each row's measured and predicted figure (default: "
                             f"for ledgers of at most {ROWS_SHOWN} rows)")
    parser.add_argument("--calibrated", action="store_true",
                        help="ledger: predict with each engine's efficiency preset; scenario: "
                             "predict times from the hardware preset a calibrate run wrote "
                             "(--hardware-preset)")
    parser.add_argument("--fit", action="store_true",
                        help="ledger: refit the efficiency presets, with in-sample and held-out "
                             "errors side by side")
    parser.add_argument("--presets-dir", metavar="DIR",
                        help="with --fit: write the fitted efficiency presets into DIR")
    parser.add_argument("--hardware-preset", metavar="FILE",
                        help="scenario: a hardware preset TOML (from `infermodel calibrate`) "
                             "for the time predictions")
    parser.add_argument("--quick", action="store_true",
                        help="scenario: fewer and smaller timing points")
    parser.add_argument("--full-size", action="store_true",
                        help="scenario: build the decoder at the scenario's full shape (every "
                             "layer, the full width and vocabulary) instead of scaled down")
    parser.add_argument("--lab", action="append", type=int, choices=(2, 5, 6), default=[],
                        metavar="N",
                        help="scenario: also run Module 10 Lab N's experiments on the decoder "
                             "(2: positions, padding, prefix reuse, cached against recomputed; "
                             "5: draft and verification costs, speculative decoding with "
                             "rollback, an n-gram draft; 6: padded batches' throughput); "
                             "repeatable")
    parser.add_argument("--plot", metavar="FILE",
                        help="ledger: draw measured against predicted: the predictions "
                             "--compare makes side by side; otherwise the ideal roofline and the "
                             "engine presets in-sample and held out (a CSV ledger), or this "
                             "run's prediction (the silicon ledger); scenario with --lab 6: Lab "
                             "6's throughput against the batch (FILE.png or FILE.svg)")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (atomically)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from ..errors import InfermodelError, Problem

    if args.ledger and args.scenario:
        raise InfermodelError(Problem("give either SCENARIO or --ledger FILE, not both",
                                      expected="infermodel validate --ledger FILE, or "
                                               "infermodel validate SCENARIO"))
    if args.ledger:
        given = [flag for flag, value in (("--set", args.overrides),
                                          ("--hardware-preset", args.hardware_preset),
                                          ("--quick", args.quick), ("--full-size", args.full_size),
                                          ("--lab", args.lab)) if value]
        if given:
            raise InfermodelError(Problem(f"{', '.join(given)} applies to SCENARIO, not --ledger",
                                          suggestion="remove it, or validate a scenario"))
        return _ledger(args)
    if args.scenario:
        given = [flag for flag, value in (
            ("--fit", args.fit), ("--presets-dir", args.presets_dir),
            ("--kernels", args.kernels), ("--compare", args.compare),
            ("--sample", args.sample is not None), ("--rows", args.rows is not None),
            ("--loop", args.loop), ("--jobs", args.jobs is not None)) if value]
        if given:
            raise InfermodelError(Problem(f"{', '.join(given)} applies to --ledger, not SCENARIO",
                                          suggestion="add --ledger FILE"))
        if args.plot and 6 not in args.lab:
            raise InfermodelError(Problem("--plot with a scenario draws Lab 6's throughput",
                                          expected="--lab 6 beside --plot FILE",
                                          suggestion="add --lab 6, or validate --ledger FILE"))
        return _scenario(args)
    raise InfermodelError(Problem("nothing to validate",
                                  expected="infermodel validate --ledger FILE, or "
                                           "infermodel validate SCENARIO"))


def _ledger(args) -> int:
    import json

    from ..accuracy.fits import fit
    from ..accuracy.preset_files import preset_toml
    from ..accuracy.report import fit_table, grouped_summary, grouped_table, validation_table
    from ..errors import InfermodelError, Problem
    from ..host import get_host
    from ..output import atomic_write, emit
    from ..progress import Progress

    _check_ledger_options(args)
    directory = None
    if args.presets_dir:
        directory = Path(args.presets_dir)
        if not directory.is_dir():
            raise InfermodelError(Problem(f"--presets-dir {directory} is not a directory",
                                          expected="an existing directory"))
    if args.kernels and not _kernels_installed():
        from ..accuracy.silicon import EXTRA

        raise InfermodelError(Problem(
            "--kernels measured reads the measured kernel tables (aiconfigurator-core and "
            "pyarrow), which are not installed", suggestion=EXTRA))
    path, rows = _read(args)
    host = get_host()
    if args.fit:
        with Progress(len(rows), "ledger", unit="rows") as bar:
            result = fit(rows, progress=bar, host=host)
        if directory is not None:
            for family in result.efficiencies:
                atomic_write(directory / f"{family}.toml", preset_toml(family, result, path.name))
        text = (json.dumps(result.to_dict(), indent=2) if args.format == "json"
                else fit_table(result))
        emit(text, args.output)
        return 0
    panels = _panels(args, rows, host)
    if args.plot:
        from ..accuracy.report import plot_validation
        from ..analyses.figures import save

        drawn = list(panels)
        if not args.compare and args.ledger != SILICON:
            drawn = _plot_panels(args, rows, panels[0][1], host)
        save(plot_validation(drawn), args.plot)
    show_rows = args.rows if args.rows is not None else len(rows) <= ROWS_SHOWN
    if args.format == "json":
        data: dict[str, Any]
        if args.compare:
            data = {"ledger": str(path), "predictions": {
                title: {**validation.to_dict(), "groups": grouped_summary(validation)}
                for title, validation in panels}}
        else:
            title, validation = panels[0]
            data = validation.to_dict()
            data["efficiency"] = TITLES[title]
            data["groups"] = grouped_summary(validation)
        text = json.dumps(data, indent=2)
    elif args.compare:
        first = panels[0][1]
        text = "\n".join([f"{path}: {len(rows)} rows predicted {len(panels)} ways", "",
                          *(f"  {title}: {TITLES[title]}" for title, _ in panels), "",
                          grouped_table(panels)])
        if first.unpredictable:
            from ..accuracy.report import unpredictable_listing

            text += "\n\n" + unpredictable_listing(first, each=show_rows)
    else:
        title, validation = panels[0]
        text = validation_table(validation, rows=show_rows,
                                heading=f"{path}: {len(rows)} rows predicted with {TITLES[title]}")
        text += "\n\n" + grouped_table(panels)
    emit(text, args.output)
    return 0


def _check_ledger_options(args) -> None:
    """Refuse conflicting or out-of-range ledger options, each with one message."""
    from ..errors import InfermodelError, Problem
    from ..output import check_target

    if args.presets_dir and not args.fit:
        raise InfermodelError(Problem("--presets-dir needs --fit", suggestion="add --fit"))
    if args.fit and (args.calibrated or args.kernels or args.compare):
        given = "--calibrated" if args.calibrated else (
            "--kernels" if args.kernels else "--compare")
        raise InfermodelError(Problem(f"--fit determines the presets; {given} uses them",
                                      suggestion=f"give one of --fit and {given}"))
    if args.calibrated and args.kernels:
        raise InfermodelError(Problem("--calibrated predicts with the fitted engine presets; "
                                      "--kernels measured with the measured kernel tables",
                                      suggestion="give one of them, or --compare for both"))
    if args.compare and (args.calibrated or args.kernels):
        raise InfermodelError(Problem("--compare predicts with every efficiency in turn",
                                      suggestion="leave out --calibrated and --kernels"))
    if args.sample is not None and args.sample < 1:
        raise InfermodelError(Problem(f"--sample {args.sample}", expected="at least 1 point"))
    if args.jobs is not None and not 1 <= args.jobs <= 256:
        raise InfermodelError(Problem(f"--jobs {args.jobs}", expected="1 to 256 processes"))
    for target in (args.output, args.plot):
        if target:
            check_target(target)
    if args.plot and not str(args.plot).lower().endswith((".png", ".svg")):
        raise InfermodelError(Problem(f"cannot write a plot to {args.plot!r}",
                                      expected="a file name ending in .png or .svg"))
    if args.plot and args.fit:
        raise InfermodelError(Problem("--plot draws predictions; --fit prints a fit",
                                      suggestion="run them separately"))


SILICON = "silicon"
IDEAL_TITLE = "ideal roofline"
PRESETS_TITLE = "engine presets"
KERNELS_TITLE = "measured kernels"
#: What each prediction is, for a heading.
TITLES = {
    IDEAL_TITLE: "the ideal roofline (peak rates, t0 = 0)",
    PRESETS_TITLE: "each engine's [efficiency] preset (the physical model's fitted parameters)",
    KERNELS_TITLE: "measured kernels (each row's engine's tables; what they do not cover at "
                   "the engine preset's sustained bandwidth and GEMM shares, plus its host "
                   "time per iteration, and a request's way through the server where the "
                   "ledger states it; no t0)",
}


def _read(args) -> tuple[Path, list]:
    """The ledger's path and rows (a sample of its points with ``--sample``)."""
    from ..accuracy.ledger import DEFAULT_LEDGER, read_ledger
    from ..output import protect

    if args.ledger == SILICON:
        from ..accuracy.silicon import read_silicon, silicon_path

        path = silicon_path()
        protect([path])
        return path, list(read_silicon(path, sample=args.sample).rows)
    path = DEFAULT_LEDGER if args.ledger == "builtin" else Path(args.ledger)
    protect([path])
    rows = read_ledger(path)
    if args.sample is not None:
        from ..accuracy.silicon import sample_points

        rows = [point[0] for point in sample_points([[row] for row in rows], args.sample)]
    return path, rows


def _panels(args, rows, host) -> list:
    """(title, validation) for each prediction the command makes."""
    from ..accuracy.workers import predict
    from ..progress import Progress

    wanted: list[tuple[str, bool, str | None]]
    if args.compare:
        wanted = [(IDEAL_TITLE, False, None), (PRESETS_TITLE, True, None)]
        if _kernels_installed():
            wanted.append((KERNELS_TITLE, False, "measured"))
    elif args.kernels:
        wanted = [(KERNELS_TITLE, False, args.kernels)]
    else:
        wanted = [(PRESETS_TITLE, True, None) if args.calibrated else (IDEAL_TITLE, False, None)]
    import os

    loop = args.loop or ("analytic" if args.ledger == SILICON else "simulated")
    jobs = args.jobs or ((os.cpu_count() or 1) if len(rows) > ROWS_SHOWN else 1)
    panels = []
    with Progress(len(rows) * len(wanted), "ledger", unit="rows") as bar:
        for title, calibrated, kernels in wanted:
            panels.append((title, predict(rows, calibrated=calibrated, kernels=kernels,
                                          progress=bar, host=host, loop=loop, jobs=jobs)))
    return panels


def _kernels_installed() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) is not None
               for name in ("aiconfigurator_core", "pyarrow"))


def _plot_panels(args, rows, validation, host) -> list:
    """A CSV ledger's plot: the ideal roofline, the engine presets in-sample and held
    out by a fit of the presets on the ledger.
    """
    from ..accuracy.fits import fit
    from ..accuracy.predictions import predict_rows

    other = predict_rows(rows, calibrated=not args.calibrated, host=host)
    ideal, presets = (other, validation) if args.calibrated else (validation, other)
    held_out = fit(rows, host=host).held_out
    return [("ideal roofline (peak rates, t0 = 0)", ideal),
            ("engine presets, in-sample (--calibrated)", presets),
            ("engine presets, held out (one source left out)", held_out)]


def _scenario(args) -> int:
    from ..errors import InfermodelError, Problem
    from ..output import check_target, emit, protect_scenario
    from ..scenario import load_scenario

    scenario = load_scenario(args.scenario, args.overrides)
    protect_scenario(scenario)
    for target in (args.output, args.plot):
        if target:
            check_target(target)
    if args.plot and not args.plot.lower().endswith((".png", ".svg")):
        raise InfermodelError(Problem(f"cannot write a plot to {args.plot!r}",
                                      expected="a file name ending in .png or .svg"))
    from ..accuracy.decoder import MachineModel, RealModelUnavailable, check_decoder, read_machine

    if args.hardware_preset:
        machine = read_machine(args.hardware_preset)
    else:
        from ..accuracy.calibration import hardware_overrides, measure

        measured = measure(quick=True)
        machine = MachineModel(hardware_overrides(measured), measured.t0,
                               "this machine (a quick calibration made now)")
    try:
        experiments = None
        if args.lab:
            from ..accuracy.labs import run_labs

            def experiments(model, predict, small, kv_bytes_per_token):
                return run_labs(model, sorted(set(args.lab)), predict, scenario=small,
                                quick=args.quick, kv_bytes_per_token=kv_bytes_per_token)

        report = check_decoder(scenario, machine, calibrated=args.calibrated,
                               quick=args.quick, full_size=args.full_size,
                               experiments=experiments)
    except RealModelUnavailable as exc:
        raise InfermodelError(Problem(str(exc), suggestion="pip install 'infermodel[validate]'")) from None
    import json

    text = json.dumps(report.to_dict(), indent=2) if args.format == "json" else report.text()
    emit(text, args.output)
    if args.plot:
        from ..accuracy.labs import plot_lab6
        from ..analyses.figures import save

        table = next(t for t in report.tables if t.title.startswith("Lab 6"))
        save(plot_lab6(table), args.plot)
    return 0 if report.passed else 1
