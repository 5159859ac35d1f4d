"""Range strings of a sweep axis: ``"1..512 log2"``, ``"0.5..1 step 0.1"``, ``"1..100 10 points"``."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..errors import count_text

#: The most values one axis may have (checked before the values are built).
MAX_AXIS_VALUES = 1_000_000


_RANGE = re.compile(
    r"^\s*(?P<start>[^.\s][^\s]*?(?:\s+[A-Za-z/%]+)?)\s*\.\.\s*(?P<stop>[^\s]+(?:\s+[A-Za-z/%]+)?)"
    r"(?:\s+(?:(?P<kind>step|times)\s+(?P<by>.+?)|(?P<log>log2|log10)|"
    r"(?P<count>\d+)\s+points(?P<geo>\s+log)?))?\s*$")


def is_range(text: Any) -> bool:
    """Whether ``text`` is written as a range (``"1..512 log2"``)."""
    return isinstance(text, str) and ".." in text and _RANGE.match(text) is not None


def _too_many(text: str, count: int | None) -> ValueError:
    many = "too many" if count is None else count_text(count)
    return ValueError(f"range {text!r} has {many} values, more than the "
                      f"{MAX_AXIS_VALUES:,} one axis may hold; split the range over several "
                      f"sweeps or ask for fewer values (\"A..B N points\")")


def _count(span: float, step: float, text: str, limit: int) -> int:
    """How many steps of ``step`` fit in ``span``, plus one; refused beyond ``limit``
    (an infinite quotient included) before any value is built.
    """
    steps = span / step
    if not math.isfinite(steps) or steps + 1 > limit:
        raise _too_many(text, math.floor(steps) + 1 if math.isfinite(steps) else None)
    return math.floor(steps + 1e-9) + 1


def _power(start: float, factor: float, i: int) -> float:
    """``start * factor**i``, also where ``factor**i`` alone would overflow a float."""
    try:
        return start * factor**i
    except OverflowError:
        return math.exp(math.log(start) + i * math.log(factor))


def _number(part: str, what: str, text: str, unit: str | None) -> float | int:
    """One end, step or factor of range ``text``: an integer when written as one (up to
    2**53, beyond which float64 holds integers inexactly), else a finite float.
    """
    part = part.strip()
    try:
        whole = int(part)
        if abs(whole) <= 2**53:
            return whole
    except ValueError:
        pass
    value: float
    try:
        value = float(part)
    except ValueError:
        if unit is None:
            raise ValueError(f"the {what} {part!r} of range {text!r} is not a number") from None
        from ..units import UnitError, parse_quantity

        try:
            value = float(parse_quantity(part, unit))
        except UnitError as exc:
            raise ValueError(f"the {what} {part!r} of range {text!r}: {exc.message}") from None
    if not math.isfinite(value):
        raise ValueError(f"the {what} of range {text!r} is not finite")
    return int(value) if value.is_integer() and abs(value) < 2**53 and "." not in part \
        and "e" not in part.lower() else value


def expand_range(text: str, unit: str | None = None, *, integer: bool = False,
                 limit: int | None = None) -> list:
    """The values of a range string.

    ``"A..B"`` integers A to B; ``"A..B step S"`` A, A+S, ... up to B; ``"A..B log2"``
    (``log10``, ``times F``) A, 2A, 4A, ... up to B; ``"A..B N points"`` N evenly
    spaced values from A to B inclusive; ``"A..B N points log"`` N geometrically
    spaced. Endpoints and steps may carry units when the field has one
    (``"40 GB..80 GB step 20 GB"``). Raises ValueError with a message, also when the
    range has more than ``limit`` values (default :data:`MAX_AXIS_VALUES`), before any
    value is built.

    >>> expand_range("1..16 log2")
    [1, 2, 4, 8, 16]
    >>> expand_range("0.5..1 step 0.25")
    [0.5, 0.75, 1.0]
    """
    match = _RANGE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a range")

    limit = MAX_AXIS_VALUES if limit is None else limit
    start = _number(match.group("start"), "start", text, unit)
    stop = _number(match.group("stop"), "end", text, unit)
    values: list
    if match.group("count"):
        count = int(match.group("count"))
        if count < 1:
            raise ValueError(f"range {text!r} is empty (0 points)")
        if count > limit:
            raise _too_many(text, count)
        if match.group("geo"):
            if start <= 0 or stop <= 0:
                raise ValueError(f"a geometric range needs positive ends, got {text!r}")
            spaced = np.geomspace(start, stop, count)
        else:
            with np.errstate(all="ignore"):  # a span beyond float64 shows as inf or nan
                spaced = np.linspace(start, stop, count)
        if not np.isfinite(spaced).all():
            raise ValueError(f"range {text!r} spans more than float64 holds")
        values = [_tidy(float(v)) for v in spaced]
    elif match.group("log") or match.group("kind") == "times":
        factor: float | None = {"log2": 2, "log10": 10}.get(match.group("log") or "")
        if factor is None:
            factor = _number(match.group("by"), "factor", text, unit)
        if factor <= 1:
            raise ValueError(f"the factor of range {text!r} must be greater than 1")
        if start <= 0:
            raise ValueError(f"a geometric range must start above 0, got {text!r}")
        if stop < start:
            raise ValueError(f"range {text!r} is empty (its end is below its start)")
        count = _count(math.log(stop) - math.log(start), math.log(factor), text, limit)
        if all(isinstance(v, int) for v in (start, factor)):
            values = [start * factor**i for i in range(count)]
        else:
            values = [_tidy(_power(start, float(factor), i)) for i in range(count)]
        values = [v for v in values if v <= stop * (1 + 1e-12)]
    else:
        step = 1 if match.group("kind") is None else _number(match.group("by"), "step", text, unit)
        if match.group("kind") is None and not (isinstance(start, int) and isinstance(stop, int)):
            raise ValueError(f"range {text!r} needs a step ('A..B step S') unless both ends are "
                             "integers")
        if step <= 0:
            raise ValueError(f"the step of range {text!r} must be positive")
        if stop < start:
            raise ValueError(f"range {text!r} is empty (its end is below its start)")
        count = _count(stop - start, step, text, limit)
        if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
            values = list(range(start, stop + 1, step))
        else:
            values = [_tidy(start + i * step) for i in range(count)]
    if integer and set(map(type, values)) != {int}:
        bad = [v for v in values if not float(v).is_integer()]
        if bad:
            raise ValueError(f"range {text!r} gives {bad[0]!r}, but the field takes integers")
        values = [int(v) for v in values]
    if not values:
        raise ValueError(f"range {text!r} is empty")
    return values


def _tidy(value: float) -> float:
    """Round away the last-digit noise of ``start + i * step`` (12 significant digits)."""
    return float(f"{value:.12g}")
