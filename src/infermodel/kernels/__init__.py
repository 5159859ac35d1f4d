"""Measured operator times: NVIDIA's measured kernel tables (``aiconfigurator-core``,
the optional extra ``infermodel[kernels]``) read into numpy functions that price the
engine's operators.

* ``source`` — the one adapter to the installed tables: where they are, their folders,
  the schema check, columns as numpy arrays, a card's datasheet figures.
* ``grids`` — a measured configuration's curve and the lookup: log–log interpolation
  inside the grid, the roofline ratio outside it, vectorised and explained.
* ``families`` — which table holds each kernel family, its arguments and its roofline.

It reads its tables with the bottom of the core only (``errors``); the engine's plugins
reach it through :mod:`infermodel.plugin`, never the other way round.
"""

from __future__ import annotations

from .families import FAMILIES, MOE_DISTRIBUTIONS, Unavailable, check_version, lookup
from .grids import FULL_WINDOW, Lookup
from .source import INSTALL, TablesUnavailable, card, engine_versions, root, systems

__all__ = ["FAMILIES", "FULL_WINDOW", "INSTALL", "MOE_DISTRIBUTIONS", "Lookup", "TablesUnavailable",
           "Unavailable", "card", "check_version", "engine_versions", "lookup", "root", "systems"]
