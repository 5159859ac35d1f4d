"""What a family of measured kernels is (:class:`Family`), and why a kernel has no table
(:class:`Unavailable`): plain records, a leaf of the package (the catalog lists families,
the families module reads their tables).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

Columns = Mapping[str, np.ndarray]


@attrs.frozen
class Family:
    """One family of measured kernels."""

    name: str
    directory: str
    table: str
    #: Argument names in call order, and which are configuration and curve axes.
    arguments: tuple[str, ...]
    configs: tuple[str, ...]
    curve: tuple[str, ...]
    #: argument -> table column.
    columns: Mapping[str, str]
    #: category name -> table column.
    categories: Mapping[str, str]
    #: (categories, card) -> (roofline of named arrays, its description at one point).
    roofline: Callable[[Mapping[str, str], Mapping[str, float]], tuple[Callable, Callable]]
    description: str
    #: Arguments made from the read columns (argument -> function of the columns).
    derived: Mapping[str, Callable[[Columns], np.ndarray]] = attrs.field(factory=dict)
    unit_note: str = ""
    #: Raw columns the derived arguments read.
    reads: tuple[str, ...] = ()
    #: Column -> the value (a tuple: any of the values) every row of the family has.
    fixed: Mapping[str, Any] = attrs.field(factory=dict)
    #: The column holding the measured time, and its unit in seconds.
    latency: str = "latency"
    seconds: float = 1e-3
    #: Arguments beyond whose largest measured value the work is blocks of that size.
    blocks: tuple[str, ...] = ()
    #: The tables' folder for this family when it is not the engine's own (``nccl``);
    #: its newest version serves every engine version.
    engine: str | None = None
    #: The configurations that do a configuration's work the same way per GPU, most alike
    #: first, read where the configuration itself lies outside the measured grid (see
    #: :meth:`.grids.Lookup.blend`), and the rule that makes them, as a derivation says it.
    stand_ins: Callable[[Mapping[str, float]], list[dict[str, float]]] | None = None
    stand_in_rule: str = ""


@attrs.frozen
class Unavailable:
    """Why no measured table serves a kernel (the caller falls back to the roofline)."""

    reason: str


__all__ = ["Columns", "Family", "Unavailable"]
