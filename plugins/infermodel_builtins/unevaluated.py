"""``Max`` and ``Min`` left unevaluated, as every formula of the built-ins writes them.

Shown as written in a derivation (the plain maximum or minimum of its arguments), and
built without sympy's assumption queries, which would dominate graph-building time.
Not a plugin (no entry point).
"""

from __future__ import annotations

from sympy import Max as _Max
from sympy import Min as _Min


def Max(*args):
    """``sympy.Max`` of ``args``, unevaluated."""
    return _Max(*args, evaluate=False)


def Min(*args):
    """``sympy.Min`` of ``args``, unevaluated."""
    return _Min(*args, evaluate=False)


__all__ = ["Max", "Min"]
