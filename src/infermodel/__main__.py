"""``python -m infermodel``: the command line."""

from .cli import run

run()
