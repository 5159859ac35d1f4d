"""Numbers as text: one convention for NaN and infinities in every JSON output.

``run``, ``sweep`` and ``search`` JSON, witness reports and derivations write a
number in base units; a number that is not finite becomes a string, since JSON has
no literal for it:

=========  ==========  =================================
value      JSON        formula text (:func:`plain_number`)
=========  ==========  =================================
NaN        ``"nan"``   ``nan``
+∞         ``"inf"``   ``∞``
−∞         ``"-inf"``  ``-∞``
=========  ==========  =================================

Whole numbers below 2**53 are written as integers. The module uses only the standard
library; prefixed units (``5.528 GB``) are :func:`infermodel.units.format_value`'s job.
"""

from __future__ import annotations

import math
from typing import Any

#: JSON text for the values JSON cannot write as numbers.
NAN_JSON = "nan"
INF_JSON = "inf"
NEG_INF_JSON = "-inf"
#: The same values in formula text (substituted derivations).
NAN_TEXT = "nan"
INF_TEXT = "∞"
NEG_INF_TEXT = "-∞"

#: Floats at or above this magnitude are not written as integers (doubles stop being exact).
EXACT_INTEGER_LIMIT = 2**53


def non_finite_json(value: float) -> str:
    """The JSON string for a NaN or an infinity.

    >>> non_finite_json(float("-inf"))
    '-inf'
    """
    if math.isnan(value):
        return NAN_JSON
    return INF_JSON if value > 0 else NEG_INF_JSON


def json_value(value: Any) -> Any:
    """A value in base units for JSON: booleans as booleans, whole floats as integers,
    NaN and infinities as ``"nan"``, ``"inf"``, ``"-inf"``.

    >>> json_value(3.0), json_value(0.25), json_value(float("inf")), json_value(True)
    (3, 0.25, 'inf', True)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return non_finite_json(value)
        if value.is_integer() and abs(value) < EXACT_INTEGER_LIMIT:
            return int(value)
    return value


def json_number(value: Any) -> Any:
    """:func:`json_value` for a Python or numpy scalar (``numpy.float64``, ``numpy.bool_``).

    >>> json_number(7)
    7
    """
    if not isinstance(value, (bool, int, float, str)) and hasattr(value, "item"):
        value = value.item()        # a numpy scalar, without importing numpy here
        if isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
    return json_value(value)


def plain_number(value: Any) -> str:
    """A compact exact-enough number for substituted formulas (base units).

    >>> plain_number(2048.0), plain_number(0.1234567), plain_number(float("inf"))
    ('2048', '0.123457', '∞')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    value = float(value)
    if math.isnan(value):
        return NAN_TEXT
    if math.isinf(value):
        return INF_TEXT if value > 0 else NEG_INF_TEXT
    if value.is_integer() and abs(value) < 1e7:
        return str(int(value))
    text = f"{value:.6g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def listed(names, conjunction: str = "and") -> str:
    """Names in a sentence: ``a``, ``a and b``, ``a, b and c`` (or another conjunction).

    >>> listed(["reserve"]), listed(["paged", "chunked"]), listed(["a", "b", "c"], "or")
    ('reserve', 'paged and chunked', 'a, b or c')
    """
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


__all__ = [
    "INF_JSON",
    "INF_TEXT",
    "NAN_JSON",
    "NAN_TEXT",
    "NEG_INF_JSON",
    "NEG_INF_TEXT",
    "json_number",
    "json_value",
    "listed",
    "non_finite_json",
    "plain_number",
]
