"""``python -m infermodel.cli``: the command line."""

from .app import run

run()
