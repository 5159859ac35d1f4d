"""The ``infermodel`` command line.

:mod:`.app` holds the parser, :func:`main` and the console script :func:`run`; every
other module is one subcommand with ``add_parser(subparsers)``. The helpers below are
shared by the subcommands.
"""

from __future__ import annotations

import argparse


def add_scenario_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every scenario-reading command takes."""
    parser.add_argument("scenario", help="path to a scenario TOML file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field, e.g. --set workload.batch=64 (repeatable)")
    parser.add_argument("--unset", dest="unsets", action="append", default=[], metavar="KEY",
                        help="remove a key or table the scenario (or a file it extends) writes, "
                             "e.g. --unset levers.speculative (repeatable; applied before --set)")


def load(args):
    """Load the scenario named by ``args`` with its ``--set`` overrides."""
    from ..output import check_target, protect_scenario
    from ..scenario import load_scenario

    scenario = load_scenario(args.scenario, args.overrides, unset=getattr(args, "unsets", ()))
    protect_scenario(scenario)
    # Fail on an unwritable target before the work, not after it.
    for target in (getattr(args, "output", None), getattr(args, "plot", None)):
        if target:
            check_target(target)
    plot = getattr(args, "plot", None)
    if plot and not str(plot).lower().endswith((".png", ".svg")):
        from ..errors import InfermodelError, Problem

        raise InfermodelError(Problem(f"cannot write a plot to {plot!r}",
                                      expected="a file name ending in .png or .svg"))
    return scenario


def split_names(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


from .app import COMMANDS, build_parser, main, run  # noqa: E402  (after the helpers the commands use)

__all__ = ["COMMANDS", "add_scenario_arguments", "build_parser", "load", "main", "run",
           "split_names"]
