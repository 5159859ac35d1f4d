"""Typing scenario values: the private strict converter and the unit types.

One :class:`cattrs.Converter` is built here with ``forbid_extra_keys`` and strict
hooks for ``int``, ``float``, ``str`` and ``bool`` (the default converter would turn
``"80"`` into ``80.0`` and ``True`` into ``1.0``). Lever plugins describe their
tables with attrs classes; fields that take unit strings use the types below::

    @attrs.frozen
    class Offload:
        link_bandwidth: BytesPerSecond
        latency: Seconds = 2e-6
"""

from __future__ import annotations

import math
import typing
from functools import lru_cache
from typing import Any

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from .registry import REQUIRED, FieldSpec


class FieldValueError(ValueError):
    """A value that does not fit its field; carries what was expected."""

    def __init__(self, message: str, expected: str | None = None, suggestion: str | None = None):
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.suggestion = suggestion


class UnitValue:
    """Base of the unit types; a subclass's ``unit`` says which base unit it holds.

    Used only as an annotation: the structured value is a plain ``float`` in base units.
    (Not a ``float`` subclass, so the strict ``float`` hook never claims it.)"""

    unit = "1"


@lru_cache(maxsize=None)
def unit_type(unit: str) -> type:
    """The type for a lever field holding a quantity in ``unit`` (``"B"``, ``"s"`` ...).

    >>> unit_type("B") is Bytes
    True
    """
    return type(f"UnitValue[{unit}]", (UnitValue,), {"unit": unit})


Bytes = unit_type("B")
Seconds = unit_type("s")
BytesPerSecond = unit_type("B/s")
FlopsPerSecond = unit_type("FLOP/s")
Dollars = unit_type("USD")
DollarsPerHour = unit_type("USD/h")
Watts = unit_type("W")


class Fraction:
    """Annotation for a number in (0, 1]; the structured value is a plain ``float``."""


def _suggest(text: str | None) -> str | None:
    if text and " " not in text.strip():
        return f"did you mean {text.strip()!r}?"
    return text


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            dict: "a table", list: "an array"}.get(type(value), type(value).__name__)


#: The largest integer a field takes: every quantity is evaluated in float64, which holds
#: integers exactly up to 2**53.
MAX_INTEGER = 2**53


def _strict_int(value, _type=int):
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            raise FieldValueError(f"got {value!r}", expected="an integer (write it without a decimal point)")
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="an integer")
    if abs(value) > MAX_INTEGER:
        raise FieldValueError(f"got an integer of {len(str(abs(value))):,} digits",
                              expected=f"an integer of at most {MAX_INTEGER:,} (2**53, the "
                                       "largest that float64 arithmetic holds exactly)")
    return value


def _strict_float(value, _type=float):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="a number")
    try:
        value = float(value)
    except OverflowError:
        raise FieldValueError(f"got an integer of {len(str(abs(value))):,} digits",
                              expected="a finite number (at most about 1.8e308)") from None
    if not math.isfinite(value):
        raise FieldValueError(f"got {value!r}", expected="a finite number")
    return value


def _strict_str(value, _type=str):
    if not isinstance(value, str):
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="a string")
    return value


def _strict_bool(value, _type=bool):
    if not isinstance(value, bool):
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="true or false")
    return value


def _unit_value(value, type_):
    from .units import UnitError, parse_quantity

    if isinstance(value, bool):
        raise FieldValueError(f"got a boolean {_show(value)}", expected=f"a quantity in {type_.unit}")
    try:
        return float(parse_quantity(value, type_.unit))
    except UnitError as exc:
        raise FieldValueError(exc.message, expected=exc.expected, suggestion=_suggest(exc.suggestion)) from None


def _fraction(value, _type):
    number = _strict_float(value)
    if not 0 < number <= 1:
        raise FieldValueError(f"got {number!r}", expected="a fraction in (0, 1]")
    return number


def parse_field(spec: FieldSpec, value: Any) -> Any:
    """Type and range-check one scenario value for ``spec``; raise FieldValueError."""
    from .units import UnitError, parse_quantity

    if value is None:
        raise FieldValueError("got an empty value", expected=spec.expected())
    kind = spec.kind
    if kind == "int":
        out = _strict_int(value)
    elif kind == "float":
        out = _strict_float(value)
    elif kind == "quantity":
        if isinstance(value, bool):
            raise FieldValueError(f"got a boolean {_show(value)}", expected=spec.expected())
        try:
            out = float(parse_quantity(value, spec.unit))
        except UnitError as exc:
            raise FieldValueError(exc.message, expected=exc.expected or spec.expected(),
                                  suggestion=_suggest(exc.suggestion)) from None
    elif kind == "bool":
        out = _strict_bool(value)
    elif kind == "str":
        out = _strict_str(value)
    elif kind == "choice":
        out = _strict_str(value)
        if out not in (spec.choices or ()):
            from .errors import close_match

            near = close_match(out, spec.choices or ())
            raise FieldValueError(f"got {out!r}", expected=spec.expected(),
                                  suggestion=f"did you mean {near!r}?" if near else None)
        return out
    elif kind == "size_or_fraction":
        if isinstance(value, str):
            try:
                size = float(parse_quantity(value, "B"))
            except UnitError as exc:
                raise FieldValueError(exc.message, expected=spec.expected(), suggestion=_suggest(exc.suggestion)) from None
            if size < 0:
                raise FieldValueError(f"got {value!r}", expected="a size >= 0")
            return ("bytes", size)
        number = _strict_float(value)
        if not 0 <= number < 1:
            raise FieldValueError(f"got {number!r}", expected=(
                'a fraction in [0, 1), or a size as a string with a unit such as "2.5 GB"'))
        return ("fraction", number)
    else:
        raise AssertionError(kind)
    if spec.minimum is not None:
        bad = out <= spec.minimum if spec.exclusive_minimum else out < spec.minimum
        if bad:
            raise FieldValueError(f"got {value!r}", expected=spec.expected())
    if spec.maximum is not None and out > spec.maximum:
        raise FieldValueError(f"got {value!r}", expected=spec.expected())
    return out


def make_converter() -> cattrs.Converter:
    """The private converter: extra keys forbidden, no silent coercion."""
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook_func(lambda t: t is Fraction, _fraction)
    converter.register_structure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, UnitValue), _unit_value)
    return converter


CONVERTER = make_converter()


def structure(value: Any, type_: type) -> Any:
    """Type ``value`` as ``type_`` with the strict converter (for nested lever tables).

    >>> structure(4, int)
    4
    """
    return CONVERTER.structure(value, type_)


def describe_error(exc: BaseException, type_: Any) -> str:
    """Format one structuring failure; used with :func:`cattrs.transform_error`."""
    if isinstance(exc, FieldValueError):
        text = exc.message
        if exc.expected:
            text += f" (expected {exc.expected})"
        if exc.suggestion:
            text += f"; {exc.suggestion}"
        return text
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ForbiddenExtraKeysError):
        return "unknown key(s) " + ", ".join(sorted(exc.extra_fields))
    if isinstance(exc, (ValueError, TypeError)):
        name = getattr(type_, "__name__", None)
        message = str(exc) or type(exc).__name__
        return f"{message}" + (f" (expected {name})" if name else "")
    return f"{type(exc).__name__}: {exc}"


def structure_errors(exc: BaseException) -> list[tuple[str, str]]:
    """(path relative to the table, message) pairs from a cattrs failure."""
    out = []
    for line in cattrs.transform_error(exc, path="$", format_exception=describe_error):
        message, _, path = line.rpartition(" @ ")
        out.append((path.removeprefix("$").lstrip("."), message))
    return out


def schema_keys(schema: type) -> list[str]:
    return [a.name for a in attrs.fields(schema)]


def lever_field_expected(schema: type, key: str) -> str | None:
    """What a lever schema's field accepts, for suggestions."""
    for a in attrs.fields(schema):
        if a.name == key:
            t = a.type
            if isinstance(t, str):
                return t
            return getattr(t, "__name__", str(t))
    return None


__all__ = [
    "Bytes", "Seconds", "BytesPerSecond", "FlopsPerSecond", "Dollars", "DollarsPerHour",
    "Watts", "Fraction", "UnitValue", "unit_type", "CONVERTER", "FieldValueError",
    "parse_field", "structure_errors", "structure", "REQUIRED", "ClassValidationError",
    "IterableValidationError", "typing",
]
