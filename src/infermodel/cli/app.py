"""The ``infermodel`` command line: the parser, exit codes and the console script.

Exit codes: 0 success, 2 a user mistake (bad scenario, unknown name, bad
arguments), 1 an internal error. Each subcommand lives in :mod:`infermodel.cli`
as a module with ``add_parser(subparsers)``; heavy imports happen inside the
command that needs them, so start-up stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import traceback

COMMANDS = ("run", "explain", "check", "graph", "sweep", "search", "plot", "simulate",
            "witness", "validate", "calibrate", "presets", "plugins")
#: Modules named apart from their command, where the name is taken by the package
#: (``infermodel.cli.run`` is the console script).
MODULES = {"run": "run_command"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infermodel",
        description="What happens to the speed, memory and bill of serving a language model "
                    "if you change X — with every number's derivation.")
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        dotted = f"infermodel.cli.{MODULES.get(name, name)}"
        try:
            module = importlib.import_module(dotted)
        except ModuleNotFoundError as exc:
            if exc.name == dotted:
                continue  # this command is not part of this installation
            raise
        module.add_parser(subparsers)
    return parser


def _version() -> str:
    from .. import __version__

    return f"infermodel {__version__}"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    from ..errors import InfermodelError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = args.handler(args)
        return int(status or 0)
    except InfermodelError as exc:
        sys.stdout.flush()
        print(f"error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:
        traceback.print_exc()
        print("internal error: this is a bug in infermodel or a plugin; please report it "
              "with the traceback above", file=sys.stderr)
        return 1


def run() -> None:
    """The console script: :func:`main`, then a quick exit.

    Tearing down the interpreter (thousands of sympy objects and modules) takes longer
    than many a command's work, and a finished command needs none of it: every output
    file is already written and closed, so flush the standard streams and leave.
    """
    import gc
    import os

    # Start-up creates a few hundred thousand long-lived objects (sympy's modules, the
    # plugins' formulas), and the default collector walks them again every 700
    # allocations: collecting less often saves about a tenth of the start-up's CPU time.
    gc.set_threshold(100_000, 20, 20)
    status = main()
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
