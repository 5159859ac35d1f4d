"""``infermodel validate``: predictions checked against measurements.

Two forms: ``validate --ledger FILE`` predicts every row of an accuracy ledger of
published serving measurements (:mod:`infermodel.accuracy.predictions`); ``validate SCENARIO``
builds a small random decoder of the scenario's shape and measures it on this machine
(:mod:`infermodel.accuracy.decoder`, needs the ``[validate]`` extra).
"""

from __future__ import annotations

FORMATS = ("table", "json")


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
                        help="an accuracy ledger CSV; 'builtin' for the one shipped with infermodel")
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
                        help="ledger: draw measured against predicted, the ideal roofline and "
                             "the engine presets side by side; scenario with --lab 6: Lab 6's "
                             "throughput against the batch (FILE.png or FILE.svg)")
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
        if args.fit or args.presets_dir:
            raise InfermodelError(Problem("--fit and --presets-dir apply to --ledger",
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
    from pathlib import Path

    from ..accuracy.fits import fit
    from ..accuracy.ledger import DEFAULT_LEDGER, read_ledger
    from ..accuracy.predictions import predict_rows
    from ..accuracy.preset_files import preset_toml
    from ..accuracy.report import fit_table, validation_table
    from ..errors import InfermodelError, Problem
    from ..host import get_host
    from ..output import atomic_write, check_target, emit, protect
    from ..progress import Progress

    if args.presets_dir and not args.fit:
        raise InfermodelError(Problem("--presets-dir needs --fit", suggestion="add --fit"))
    if args.fit and args.calibrated:
        raise InfermodelError(Problem("--fit determines the presets; --calibrated uses them",
                                      suggestion="give one of --fit and --calibrated"))
    path = DEFAULT_LEDGER if args.ledger == "builtin" else Path(args.ledger)
    protect([path])
    for target in (args.output, args.plot):
        if target:
            check_target(target)
    if args.plot and not str(args.plot).lower().endswith((".png", ".svg")):
        raise InfermodelError(Problem(f"cannot write a plot to {args.plot!r}",
                                      expected="a file name ending in .png or .svg"))
    if args.plot and args.fit:
        raise InfermodelError(Problem("--plot draws predictions; --fit prints a fit",
                                      suggestion="run them separately"))
    directory = None
    if args.presets_dir:
        directory = Path(args.presets_dir)
        if not directory.is_dir():
            raise InfermodelError(Problem(f"--presets-dir {directory} is not a directory",
                                          expected="an existing directory"))
    rows = read_ledger(path)
    host = get_host()
    with Progress(len(rows), "ledger", unit="rows") as bar:
        if args.fit:
            result = fit(rows, progress=bar, host=host)
        else:
            validation = predict_rows(rows, calibrated=args.calibrated, progress=bar,
                                      host=host)
    if args.fit:
        if directory is not None:
            for family in result.efficiencies:
                atomic_write(directory / f"{family}.toml", preset_toml(family, result, path.name))
        text = (json.dumps(result.to_dict(), indent=2) if args.format == "json"
                else fit_table(result))
        emit(text, args.output)
        return 0
    if args.plot:
        from ..accuracy.report import plot_validation
        from ..analyses.figures import save

        other = predict_rows(rows, calibrated=not args.calibrated, host=host)
        ideal, presets = (other, validation) if args.calibrated else (validation, other)
        held_out = fit(rows, host=host).held_out
        save(plot_validation([("ideal roofline (peak rates, t0 = 0)", ideal),
                              ("engine presets, in-sample (--calibrated)", presets),
                              ("engine presets, held out (one source left out)", held_out)]),
             args.plot)
    if args.format == "json":
        data = validation.to_dict()
        data["efficiency"] = "engine presets" if args.calibrated else "ideal roofline"
        text = json.dumps(data, indent=2)
    else:
        how = ("each engine's [efficiency] preset" if args.calibrated
               else "the ideal roofline (peak rates, t0 = 0, no reserve); --calibrated uses "
                    "the engine presets")
        text = validation_table(validation, heading=f"{path}: {len(rows)} rows predicted with {how}")
    emit(text, args.output)
    return 0


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
