"""The one door for plugin authors: everything a plugin may import from infermodel.

A plugin (built-in or third-party) imports only :mod:`infermodel` and this module;
the rest of the package may change between releases, this interface will not
without notice. A test checks that every shipped plugin keeps to it.

>>> from infermodel.plugin import S, Seconds, Stage, hookimpl
>>> Stage.PARALLELISM < Stage.COST
True

What is here, by what a plugin does with it:

* hooks: :data:`hookimpl` (mark an implementation), :data:`S` (quantity symbols:
  ``S.layers * S.d_model``), :class:`Stage` (when a transformation runs);
* scenario fields and lever schemas: :data:`REQUIRED`, the unit types
  (:data:`Bytes`, :data:`Seconds`, :data:`BytesPerSecond`, :data:`FlopsPerSecond`,
  :data:`Dollars`, :data:`DollarsPerHour`, :data:`Watts`, :func:`unit_type`),
  :class:`Fraction`, :func:`accepts` (a validator's bounds in words, for the
  documentation's tables); in a value-type function, :func:`structure` and
  :class:`FieldValueError`;
* witnesses: :class:`Option`, :class:`Row`, :class:`Witness`, :class:`DecisionMap` (a
  picture a witness can draw; the last three loaded when first used);
* number formats and quantisers: :class:`Encoding` (a format's codes: range and
  resolution) and :class:`Quantisation` (what a quantiser returns);
* operators: :func:`collect_operators` (every plugin's operators of a phase) and
  :func:`operator_table` (evaluated against a result); :class:`Kernel` (a measured
  kernel an operator is made of);
* tables: :func:`tabulated` (a sympy function whose numbers come from a table,
  evaluated on numpy arrays inside the compiled graph), :func:`tabulated_calls` and
  :func:`table_of` (find them in a formula); :mod:`infermodel.kernels`, as
  ``infermodel.plugin.kernels`` (the measured kernel tables of the optional extra
  ``infermodel[kernels]``, loaded when first used);
* prediction intervals: :mod:`intervals <infermodel.engine.intervals>` (a preset's
  groups of held-out errors, the group a prediction falls in, its 80 % interval);
* mistakes: :class:`InfermodelError` and :class:`Problem` (one user mistake, with
  what was expected), :func:`suggest` and :func:`close_match` (the "did you mean"
  helpers);
* the typed contracts of the callbacks the hooks receive (:class:`FieldRegistrar`,
  :class:`Define`, :class:`Report`, :class:`Transform`, ...), for annotations;
* :mod:`infermodel.simulator`, as ``infermodel.plugin.simulator`` (loaded when first
  used, so that importing a plugin stays cheap).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .declarations import REQUIRED, Encoding, Kernel, Option, Quantisation, Stage, accepts
from .engine import intervals
from .engine.operators import collect_operators, operator_table
from .errors import InfermodelError, Problem, close_match, suggest
from .hookspecs import (
    Define,
    FieldRegistrar,
    HeadlineRegistrar,
    IterationCostRegistrar,
    LeverRegistrar,
    NumberFormatRegistrar,
    OperatorDefine,
    OperatorTimeRegistrar,
    PresetRegistrar,
    Quantiser,
    QuantiserRegistrar,
    Report,
    Transform,
    TypicalSettingRegistrar,
    ValueTypeRegistrar,
    Warn,
    WitnessRegistrar,
    hookimpl,
)
from .quantity import S, table_of, tabulated, tabulated_calls
from .schema import FieldValueError, structure, unit_type

if TYPE_CHECKING:
    from .analyses.witnessing import DecisionMap, Row, Witness

    # To a type checker a unit or fraction field holds what the scenario reader hands
    # the plugin: a plain float in base units (``fraction: Fraction = 0.5``).
    Bytes = float
    Seconds = float
    BytesPerSecond = float
    FlopsPerSecond = float
    Dollars = float
    DollarsPerHour = float
    Watts = float
    Fraction = float
else:
    from .schema import (
        Bytes,
        BytesPerSecond,
        Dollars,
        DollarsPerHour,
        FlopsPerSecond,
        Fraction,
        Seconds,
        Watts,
    )


#: Names loaded on first use: the witness records are the analyses' (a command that runs
#: no witness never imports them), the simulator and the kernel tables are packages.
_LAZY = {"DecisionMap": ".analyses.witnessing", "Row": ".analyses.witnessing",
         "Witness": ".analyses.witnessing"}


def __getattr__(name: str) -> Any:
    if name in ("simulator", "kernels"):
        return importlib.import_module(f".{name}", __package__)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __package__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'infermodel.plugin' has no attribute {name!r}")


__all__ = [
    "REQUIRED",
    "Bytes",
    "BytesPerSecond",
    "DecisionMap",
    "Define",
    "Dollars",
    "DollarsPerHour",
    "Encoding",
    "FieldRegistrar",
    "FieldValueError",
    "FlopsPerSecond",
    "Fraction",
    "HeadlineRegistrar",
    "InfermodelError",
    "IterationCostRegistrar",
    "Kernel",
    "LeverRegistrar",
    "NumberFormatRegistrar",
    "OperatorDefine",
    "OperatorTimeRegistrar",
    "Option",
    "PresetRegistrar",
    "Problem",
    "Quantisation",
    "Quantiser",
    "QuantiserRegistrar",
    "Report",
    "Row",
    "S",
    "Seconds",
    "Stage",
    "Transform",
    "TypicalSettingRegistrar",
    "ValueTypeRegistrar",
    "Warn",
    "Watts",
    "Witness",
    "WitnessRegistrar",
    "accepts",
    "close_match",
    "collect_operators",
    "hookimpl",
    "intervals",
    "operator_table",
    "structure",
    "suggest",
    "table_of",
    "tabulated",
    "tabulated_calls",
    "unit_type",
]
