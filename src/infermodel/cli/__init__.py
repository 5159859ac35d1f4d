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


def print_warnings(warnings, *, where: str | None = None) -> None:
    """Print each warning once on standard error as ``infermodel run`` words it,
    ``warning: <message>`` (``warning (<where>): <message>`` when ``where`` says at which
    point or block it holds). ``warnings`` holds result warnings or strings, or
    ``(where, warning)`` pairs. Every command that evaluates a scenario but prints
    something other than ``run``'s summary (sweep, search, simulate, plan) shows its
    warnings through this, so none is lost.

    >>> print_warnings(["a", "a", ("batch 4", "b")])  # doctest: +SKIP
    warning: a
    warning (batch 4): b
    """
    import sys

    seen = set()
    for item in warnings:
        place, warning = item if isinstance(item, tuple) else (where, item)
        line = f"warning ({place}): {warning}" if place else f"warning: {warning}"
        if line not in seen:
            seen.add(line)
            print(line, file=sys.stderr)


def split_names(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]


from .app import COMMANDS, build_parser, main, run  # noqa: E402  (after the helpers the commands use)

__all__ = ["COMMANDS", "add_scenario_arguments", "build_parser", "load", "main",
           "print_warnings", "run", "split_names"]
