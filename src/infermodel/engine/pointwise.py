"""One point on plain Python floats: the graph's formulas, evaluated exactly as numpy does.

The compiled numpy function (:mod:`.evaluation`) serves a sweep's arrays and a fresh
evaluation alike, but on one point every numpy operation pays for its array machinery:
about 1 µs each, a quarter of a millisecond for a graph of 300 quantities. The same
assignments on Python floats cost some 40 ns each. A kept structure that is evaluated
again and again with changed values (:class:`~infermodel.engine.kept.Structure`) compiles
this second function once and calls it for every value change.

It must give numpy's result to the bit, and does, operation by operation:

* ``+ − × ÷``, comparisons and ``**`` are the same IEEE double operations (Python's
  ``**`` and numpy's scalar power both call the C library's ``pow``; ``sqrt`` is
  correctly rounded in both);
* ``Max`` and ``Min`` are numpy's ``maximum`` and ``minimum`` folded left to right,
  NaN and the sign of zero included (:func:`maximum2`, :func:`minimum2`);
* ``floor`` and ``ceiling`` return floats, as numpy's do;
* every other function (``log``, ``exp``, …) is numpy's own, on a float;
* ``Piecewise`` takes its first true branch, NaN where none is (numpy's ``select``);
* a table function (:func:`infermodel.quantity.tabulated`) takes its scalar path, which
  gives its array path's bits.

Where numpy would carry on with an infinity or a NaN and Python raises instead (a
division by zero, an overflowing power, the square root of a negative number) the point
function gives up and the caller evaluates the point with numpy; so it does where Python
makes a complex number (a negative number to a fractional power), where numpy makes NaN.
Infinities and NaN that both make (an overflowing product, ``inf − inf``) come out the
same. numpy's ``select`` evaluates every branch and Python only the one taken, which
changes nothing but the work done.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..quantity import table_of, tabulated_calls
from .graph import QuantityGraph

#: What the point function may raise where numpy would return an infinity or a NaN.
DECLINED = (ArithmeticError, ValueError, TypeError, NameError)


def maximum2(a: float, b: float) -> float:
    """numpy's ``maximum(a, b)`` on floats: NaN if either is NaN, ``b`` on a tie.

    >>> maximum2(1.0, 2.0), maximum2(-0.0, 0.0), maximum2(0.0, -0.0)
    (2.0, 0.0, -0.0)
    """
    if b >= a:
        return b
    if a > b:
        return a
    return a if a != a else b


def minimum2(a: float, b: float) -> float:
    """numpy's ``minimum(a, b)`` on floats: NaN if either is NaN, ``b`` on a tie.

    >>> minimum2(1.0, 2.0), minimum2(-0.0, 0.0), minimum2(0.0, -0.0)
    (1.0, 0.0, -0.0)
    """
    if b <= a:
        return b
    if a < b:
        return a
    return a if a != a else b


def _floor(x: float) -> float:
    """numpy's ``floor``: a float, and a zero keeps the sign of ``x`` (``floor(-0.0)``).

    >>> _floor(2.5), _floor(-0.0), _floor(0.25)
    (2.0, -0.0, 0.0)
    """
    whole = float(math.floor(x))
    return whole if whole else math.copysign(0.0, x)


def _ceil(x: float) -> float:
    """numpy's ``ceil``: a float, and a zero keeps the sign of ``x`` (``ceil(-0.5)``).

    >>> _ceil(2.5), _ceil(-0.5), _ceil(0.0)
    (3.0, -0.0, 0.0)
    """
    whole = float(math.ceil(x))
    return whole if whole else math.copysign(0.0, x)


def _numpy_function(name: str) -> Callable[..., float]:
    function = getattr(np, name)

    def call(*args: float) -> float:
        with np.errstate(all="ignore"):  # as the numpy path runs: log(-1) is NaN, quietly
            return float(function(*args))

    call.__name__ = name
    return call


#: numpy's own functions, each returning a float: the same results as the numpy path.
_NUMPY_FUNCTIONS = ("log", "log10", "log2", "exp", "expm1", "log1p", "sin", "cos", "tan",
                    "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "hypot",
                    "sign", "heaviside")


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {name: _numpy_function(name) for name in _NUMPY_FUNCTIONS}
    # sympy's Python printer names some of them as the math module does
    namespace.update(asin=namespace["arcsin"], acos=namespace["arccos"],
                     atan=namespace["arctan"], atan2=namespace["arctan2"],
                     asinh=_numpy_function("arcsinh"), acosh=_numpy_function("arccosh"),
                     atanh=_numpy_function("arctanh"))
    namespace.update(maximum2=maximum2, minimum2=minimum2, floor=_floor, ceil=_ceil,
                     sqrt=math.sqrt, fabs=abs, abs=abs, inf=math.inf, nan=math.nan,
                     pi=math.pi, e=math.e, math=math)
    return namespace


def _printer():
    from sympy.printing.pycode import PythonCodePrinter

    class PointPrinter(PythonCodePrinter):
        """Python code for one point, operation for operation as the numpy printer's."""

        def _fold(self, name: str, args) -> str:
            text = self._print(args[0])
            for arg in args[1:]:
                text = f"{name}({text}, {self._print(arg)})"
            return text

        def _print_Max(self, expr) -> str:
            return self._fold("maximum2", expr.args)

        def _print_Min(self, expr) -> str:
            return self._fold("minimum2", expr.args)

        def _print_floor(self, expr) -> str:
            return f"floor({self._print(expr.args[0])})"

        def _print_ceiling(self, expr) -> str:
            return f"ceil({self._print(expr.args[0])})"

        def _print_Piecewise(self, expr) -> str:
            text = "nan"
            for value, condition in reversed(expr.args):
                if condition == True:  # noqa: E712 (sympy's true)
                    text = self._print(value)
                else:
                    text = f"(({self._print(value)}) if ({self._print(condition)}) else ({text}))"
            return text

    return PointPrinter({"fully_qualified_modules": False, "inline": True,
                         "allow_unknown_functions": True, "user_functions": {}})


def compile_point(graph: QuantityGraph, outputs: Sequence[str]) -> Callable[..., tuple]:
    """The graph's formulas as one function of plain floats, inputs in ``graph.inputs``
    order, returning ``outputs`` (every quantity, in graph order) as a tuple.
    """
    import sympy

    quantities = graph.quantities
    derived = [n for n in graph.order if not quantities[n].is_input]
    assignments = [(quantities[n].symbol, quantities[n].expression) for n in derived]
    output_symbols = [quantities[n].symbol for n in outputs]

    def sequential(_exprs):
        return assignments, output_symbols

    namespace = _namespace()
    for name in derived:
        # Tables (measured kernels) evaluate plain floats on their own scalar path, which
        # gives their array path's bits.
        for call in tabulated_calls(quantities[name].expression):
            namespace[call.func.__name__] = table_of(call)
    return sympy.lambdify([quantities[n].symbol for n in graph.inputs], output_symbols,
                          modules=[namespace], printer=_printer(), cse=sequential,
                          docstring_limit=0)


def evaluate_point(function: Callable[..., tuple], arguments: Sequence[float]) -> tuple | None:
    """``function(*arguments)``, or None where numpy must decide: the point function
    raised where numpy would not, or made a complex number where numpy makes NaN.
    """
    try:
        raw = function(*arguments)
        # a complex output makes the sum complex (floats and bools add up to a float)
        if type(sum(raw)) is complex:
            return None
    except DECLINED:
        return None
    return raw


__all__ = ["DECLINED", "compile_point", "evaluate_point", "maximum2", "minimum2"]
