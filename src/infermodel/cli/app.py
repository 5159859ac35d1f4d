"""The ``infermodel`` command line: the parser, exit codes and the console script.

Exit codes: 0 success, 2 a user mistake (bad scenario, unknown name, bad
arguments), 1 an internal error. Each subcommand lives in :mod:`infermodel.cli`
as a module with ``add_parser(subparsers)``; heavy imports happen inside the
command that needs them, so start-up stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sys
import traceback
import warnings
from collections.abc import Callable

COMMANDS = ("run", "explain", "check", "graph", "sweep", "search", "plot", "simulate",
            "witness", "validate", "calibrate", "ops", "layers", "presets", "formats",
            "quantize", "plugins", "rank", "compare", "plan")
#: Modules named apart from their command, where the name is taken by the package
#: (``infermodel.cli.run`` is the console script).
MODULES = {"run": "run_command"}


class _Parser(argparse.ArgumentParser):
    """argparse, with the value it echoes in a usage error cut to a readable length."""

    def error(self, message: str):
        from ..errors import shorten

        super().error(shorten(message) or message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of command ``only`` alone (what :func:`main` builds
    when the command line names one: importing and building the others' arguments is a
    tenth of a cold start).
    """
    parser = _Parser(
        prog="infermodel",
        description="What happens to the speed, memory and bill of serving a language model "
                    "if you change X — with every number's derivation.")
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS if only not in COMMANDS else (only,):
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


def main(argv: list[str] | None = None, *, started: Callable[[], None] | None = None) -> int:
    """Run the command line; return the exit status. ``started`` is called once the
    plugins are loaded, before the command's own work (the console script's
    :func:`freeze_start_up`).
    """
    from ..errors import InfermodelError
    from ..output import reset_protection

    given = sys.argv[1:] if argv is None else argv
    parser = build_parser(given[0] if given else None)
    args = parser.parse_args(argv)
    reset_protection()  # this command's inputs are recorded as it reads them
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            _protect_presets()
            if started is not None:
                started()
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


def _protect_presets() -> None:
    """Every preset file of the loaded plugins is an input, whether this command reads it
    or not (``calibrate -o`` reads none): no output may replace one.
    """
    from ..errors import InfermodelError
    from ..host import get_host
    from ..output import protect

    try:
        registries = get_host().registries
    except InfermodelError:
        return  # the command reports a broken plugin itself
    protect(info.path for found in registries.presets.values() for info in found.values())


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Our own warnings as one plain line; others as Python prints them."""
    if category.__module__.startswith("infermodel"):
        print(f"warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def freeze_start_up() -> None:
    """The console script's start-up is over: freeze what it made, collect from here on."""
    gc.freeze()
    gc.enable()


def run() -> None:
    """The console script: :func:`main`, then a quick exit.

    Tearing down the interpreter (thousands of sympy objects and modules) takes longer
    than many a command's work, and a finished command needs none of it: every output
    file is already written and closed, so flush the standard streams and leave.
    """
    import os

    # Start-up creates a few hundred thousand long-lived objects (sympy's modules, the
    # plugins and their declarations), and the default collector walks them again every
    # 700 allocations. None of them is garbage: no collection runs until the plugins are
    # loaded, and then they are frozen (moved out of the collector's sight, as
    # gc.freeze's documentation advises for a process's start-up objects), so the
    # collector runs on the command's own objects, every 100,000 allocations.
    gc.set_threshold(100_000, 20, 20)
    gc.disable()
    status = main(started=freeze_start_up)
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
