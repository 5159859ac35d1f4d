"""Sweeps: a grid over scenario fields, every point evaluated with numpy arrays.

A sweep has **axes**. A field axis sets one field (``workload.batch``,
``hardware.preset``, ``levers.number_formats.kv_bits``) to each of its values; a
named choice axis (``[sweep.choices.NAME]``) sets several fields at once per
labelled choice. The grid is their product, first axis slowest.

How it is evaluated:

* An axis whose every field feeds an input quantity (the field registry's
  ``quantity``) and which no plugin reads while defining, transforming or
  validating quantities is a **vector** axis: its values go straight into the
  compiled numpy function as arrays. The graph is built and compiled once.
* Any other axis (preset names, lever settings and on/off, fields such as
  ``model.ffn`` that decide which formulas exist, fields a plugin inspects) is
  **structural**: the grid is split into blocks, one per combination of
  structural values; each block is resolved and validated as ``--set`` would do,
  and its graph is compiled once (compiled functions are cached by structure, so
  blocks with the same formulas share one).
* Points are evaluated in chunks (``chunk_size`` points at a time), so memory
  stays bounded however large the grid; only the quantities asked for (and what
  they depend on) are computed.

Values at every point are those of :func:`infermodel.evaluate` at that point: the
same compiled formulas applied to the same float64 inputs.

>>> result = sweep("scenarios/case-study-24gb.toml",  # doctest: +SKIP
...                {"workload.batch": "1..64 log2"}, quantities=["tpot"])
>>> result["tpot"]  # doctest: +SKIP

The package, one job per module: :mod:`.ranges` (range strings), :mod:`.axes` (the
grid), :mod:`.plan` (planning and evaluation), :mod:`.entry` (:func:`sweep`,
:func:`plan_sweep` and the plans a kept scenario keeps), :mod:`.result` (the finished columns),
:mod:`.writers` (CSV and JSON) and :mod:`.model` (:class:`~.model.Model`, a kept
scenario that also sweeps). Which fields plugins read (so which axes are vectors) and
the kept structures a sweep reuses belong to the engine: :mod:`infermodel.engine.reads`
and :mod:`infermodel.engine.kept`.
"""

from ..scenario import REMOVE
from .axes import Axis, grid_axes, parse_over
from .entry import plan_sweep, sweep
from .model import Model
from .plan import (
                   DEFAULT_CHUNK,
                   MAX_BLOCKS,
                   MAX_CHUNK,
                   MAX_GRID_POINTS,
                   MAX_IN_MEMORY_VALUES,
                   MAX_VALIDATED_POINTS,
                   SweepPlan,
)
from .ranges import MAX_AXIS_VALUES, expand_range, is_range
from .result import Chunk, SweepResult, render_table

__all__ = [
    "DEFAULT_CHUNK",
    "MAX_AXIS_VALUES",
    "MAX_BLOCKS",
    "MAX_CHUNK",
    "MAX_GRID_POINTS",
    "MAX_IN_MEMORY_VALUES",
    "MAX_VALIDATED_POINTS",
    "REMOVE",
    "Axis",
    "Chunk",
    "Model",
    "SweepPlan",
    "SweepResult",
    "expand_range",
    "grid_axes",
    "is_range",
    "parse_over",
    "plan_sweep",
    "render_table",
    "sweep",
]
