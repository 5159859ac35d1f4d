"""Quantities: named, unit-carrying sympy definitions, and the symbol registry.

A :class:`Quantity` knows its name, its sympy symbol, its definition (an
expression over other quantities' symbols, or an input value), its unit, a one-line
description, the plugin that defined it, an optional published reference, and the
history of every lever that changed it.

Symbol names reach the code that :func:`sympy.lambdify` generates, so they are
validated here, once, before any symbol exists: only ``[A-Za-z][A-Za-z0-9_]*``,
no Python keyword, builtin or name the numeric printer uses.
"""

from __future__ import annotations

import builtins
import keyword
import re
from typing import Any

import attrs
import sympy

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
MAX_NAME_LENGTH = 64

#: numpy names the generated numeric code may call (its whole namespace).
NUMERIC_NAMES = (
    "select", "where", "maximum", "minimum", "amax", "amin", "floor", "ceil", "sqrt", "log",
    "log10", "log2", "exp", "absolute", "sign", "inf", "nan", "pi", "e", "less", "less_equal",
    "greater", "greater_equal", "equal", "not_equal", "logical_and", "logical_or",
    "logical_not", "logical_xor", "power", "isnan", "isinf", "array", "asarray", "square",
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
    "mod", "fmod", "floor_divide", "heaviside", "round", "clip", "log1p", "expm1", "hypot",
    "reduce",
)

# Names the generated numeric code needs for itself.
_RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | frozenset(NUMERIC_NAMES) | {
    "numpy", "np", "math", "mpmath", "sympy", "select", "where", "maximum", "minimum",
    "amax", "amin", "floor", "ceil", "sqrt", "log", "log10", "log2", "exp", "absolute",
    "inf", "nan", "pi", "e", "errstate", "less", "less_equal", "greater", "greater_equal",
    "equal", "not_equal", "logical_and", "logical_or", "logical_not", "true", "false",
    "power", "isnan", "isinf", "array", "asarray", "broadcast_to", "x", "Dummy",
}

#: Kinds of change a lever can make to a quantity.
DEFINE, INPUT, REPLACE, WRAP = "define", "input", "replace", "wrap"


def check_name(name: object) -> str | None:
    """Why ``name`` cannot be a quantity name, or None when it can.

    >>> check_name("decode_step_time") is None
    True
    >>> check_name("import os")
    "'import os' is not a valid quantity name: use letters, digits and underscores, starting with a letter"
    """
    if not isinstance(name, str):
        return f"a quantity name must be a string, not {type(name).__name__}"
    if len(name) > MAX_NAME_LENGTH:
        return f"quantity name {name[:20]!r}... is longer than {MAX_NAME_LENGTH} characters"
    if not NAME_PATTERN.match(name):
        return (
            f"{name!r} is not a valid quantity name: use letters, digits and underscores, "
            "starting with a letter"
        )
    if name in _RESERVED:
        return f"{name!r} is reserved (a Python or numpy name) and cannot name a quantity"
    return None


_SYMBOLS: dict[str, sympy.Symbol] = {}


def symbol(name: str) -> sympy.Symbol:
    """The one sympy symbol for quantity ``name`` (validated, created once).

    >>> symbol("layers") is symbol("layers")
    True
    """
    found = _SYMBOLS.get(name)
    if found is not None:
        return found
    problem = check_name(name)
    if problem:
        raise ValueError(problem)
    made = _SYMBOLS[name] = sympy.Symbol(name, real=True)
    return made


class _SymbolNamespace:
    """Attribute access to quantity symbols: ``S.layers`` is ``symbol("layers")``."""

    def __getattr__(self, name: str) -> sympy.Symbol:
        if name.startswith("_"):
            raise AttributeError(name)
        return symbol(name)

    def __getitem__(self, name: str) -> sympy.Symbol:
        return symbol(name)


#: ``from infermodel import S``; then ``S.layers * S.d_model`` builds a formula.
S = _SymbolNamespace()


#: Tabulated functions by name (see :func:`tabulated`).
_TABULATED: dict[str, Any] = {}


def tabulated(name: str, table: Any) -> Any:
    """A sympy function whose numbers come from a table rather than a formula.

    ``table`` is called with numpy arrays (or floats), one per argument, broadcast
    together, and returns the function's values as an array of their common shape:
    the compiled graph calls it once for a whole sweep, never once per point. It may
    also have ``explain(*values) -> list[str]``: lines that say, for one point, which
    rows of the table gave the number (a derivation prints them under the formula).
    The name is a quantity-like name (``[A-Za-z][A-Za-z0-9_]*``) naming the table, so
    that the same name always means the same numbers: asking again with the same name
    and table returns the same function, and a different table under a name already
    used replaces it for formulas built from then on.

    >>> import numpy as np
    >>> double = tabulated("twice_measured", lambda x: 2 * np.asarray(x, dtype=float))
    >>> formula = double(S.batch) + 1
    >>> sympy.lambdify([S.batch], formula, modules="numpy")(np.array([1.0, 2.0])).tolist()
    [3.0, 5.0]
    """
    problem = check_name(name)
    if problem:
        raise ValueError(problem.replace("quantity name", "table function name"))
    if not callable(table):
        raise TypeError(f"table function {name!r}: the table must be callable on numpy arrays")
    found = _TABULATED.get(name)
    if found is not None and found.table is table:
        return found
    from sympy.core.function import UndefinedFunction

    # sympy's own convention: lambdify finds a function's numbers in ``_imp_``.
    made = UndefinedFunction(name, _imp_=staticmethod(table), table=table, real=True)
    _TABULATED[name] = made
    return made


def is_tabulated(function: Any) -> bool:
    """Whether ``function`` (a sympy function class) was made by :func:`tabulated`."""
    return _TABULATED.get(getattr(function, "__name__", "")) is function


def tabulated_calls(expression: Any) -> list[Any]:
    """The calls of tabulated functions in a sympy expression, in a stable order."""
    if not isinstance(expression, sympy.Basic):
        return []
    from sympy.core.function import AppliedUndef

    calls = [call for call in expression.atoms(AppliedUndef) if is_tabulated(call.func)]
    return sorted(calls, key=sympy.default_sort_key)


def table_of(call: Any) -> Any:
    """The table behind a tabulated function call (or function)."""
    function: Any = call if isinstance(call, type) else call.func
    return function.table


@attrs.frozen
class Change:
    """One step in a quantity's history: its definition or a lever's change to it.

    ``field`` is the dotted path of the scenario field an input's number was read
    from (``"workload.batch"``), or None; ``reason`` is the same in words.
    """

    kind: str  # define | input | replace | wrap
    plugin: str
    expression: Any  # sympy expression, or the input value
    reason: str = ""
    reference: str | None = None
    order: int = 0
    field: str | None = None


@attrs.frozen
class ResultWarning:
    """Something a reader of a result should know, and the quantity it concerns.

    Reads as its message (``str(warning)``, ``"NaN" in warning``); code that needs
    the quantity reads ``warning.quantity`` rather than parsing the message.

    >>> w = ResultWarning("tpot", "quantity 'tpot' evaluated to NaN")
    >>> w.quantity, "NaN" in w, str(w)
    ('tpot', True, "quantity 'tpot' evaluated to NaN")
    """

    quantity: str | None
    message: str

    def __str__(self) -> str:
        return self.message

    def __contains__(self, text: str) -> bool:
        return text in self.message


@attrs.frozen
class Quantity:
    """A named quantity in the graph.

    ``expression`` is a sympy expression over other quantities' symbols, or None for
    an input, whose number is ``value``. ``history`` lists the definition first, then
    every lever's change in the order applied.
    """

    name: str
    unit: str
    description: str
    plugin: str
    expression: Any = None
    value: Any = None
    reference: str | None = None
    history: tuple[Change, ...] = ()
    latex: str | None = None

    @property
    def symbol(self) -> sympy.Symbol:
        return symbol(self.name)

    @property
    def is_input(self) -> bool:
        return self.expression is None

    @property
    def dependencies(self) -> tuple[str, ...]:
        if self.expression is None:
            return ()
        return tuple(sorted(s.name for s in self.expression.free_symbols))

    @property
    def field(self) -> str | None:
        """The scenario field this input's number was read from, or None."""
        return self.history[0].field if self.history else None

    @property
    def changed_by(self) -> tuple[str, ...]:
        """Plugins that replaced or wrapped the original definition, in order."""
        return tuple(c.plugin for c in self.history if c.kind in (REPLACE, WRAP))
