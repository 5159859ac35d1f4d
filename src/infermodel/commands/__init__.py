"""One module per CLI subcommand, each with ``add_parser(subparsers)``."""

from __future__ import annotations

import argparse


def add_scenario_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every scenario-reading command takes."""
    parser.add_argument("scenario", help="path to a scenario TOML file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field, e.g. --set workload.batch=64 (repeatable)")


def load(args):
    """Load the scenario named by ``args`` with its ``--set`` overrides."""
    from ..scenario import load_scenario

    return load_scenario(args.scenario, args.overrides)


def split_names(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [n.strip() for n in text.split(",") if n.strip()]
