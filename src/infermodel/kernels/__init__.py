"""Measured operator times: NVIDIA's measured kernel tables (``aiconfigurator-core``,
the optional extra ``infermodel[kernels]``) read into numpy functions that price the
engine's operators.

* ``source`` — the one adapter to the installed tables: where they are, their folders,
  the schema check, columns as numpy arrays, a card's datasheet figures, the published
  configs of the models the tables were measured for.
* ``curves`` — a measured configuration's latencies along the axes a workload moves:
  log–log interpolation inside the grid; blocks or the roofline ratio beyond it.
* ``grids`` — a table's configurations and the lookup: the curve an unmeasured
  configuration reads, vectorised and explained.
* ``rooflines`` — each family's roofline on the card's datasheet peaks.
* ``families`` and ``catalog`` — what a family is, and every family: its table, its
  arguments and its roofline.

It reads its tables with the bottom of the core only (``errors``); the engine's plugins
reach it through :mod:`infermodel.plugin`, never the other way round.
"""

from __future__ import annotations

from .catalog import FAMILIES
from .families import (
                       MOE_BACKENDS,
                       Unavailable,
                       architecture,
                       check_version,
                       collection_field,
                       lookup,
)
from .grids import FULL_WINDOW, Lookup
from .rescaled import Extended, Offset, Rescaled
from .rooflines import GEMM_DTYPES, KV_BYTES, MOE_DTYPES
from .source import INSTALL, TablesUnavailable, card, engine_versions, root, systems

#: The routing a MoE table's rows were measured under, most realistic first.
MOE_DISTRIBUTIONS = ("power_law_1.01", "balanced")

__all__ = ["FAMILIES", "FULL_WINDOW", "GEMM_DTYPES", "INSTALL", "KV_BYTES", "MOE_BACKENDS",
           "MOE_DISTRIBUTIONS",
           "MOE_DTYPES", "Extended", "Lookup", "Offset", "Rescaled", "TablesUnavailable", "Unavailable", "architecture", "card",
           "check_version", "collection_field",
           "engine_versions", "lookup", "root", "systems"]
