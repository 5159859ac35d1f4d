"""Range strings of a sweep axis: ``"1..512 log2"``, ``"0.5..1 step 0.1"``, ``"1..100 10 points"``."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

#: The most values one axis may have.
MAX_AXIS_VALUES = 100_000_000


_RANGE = re.compile(
    r"^\s*(?P<start>[^.\s][^\s]*?(?:\s+[A-Za-z/%]+)?)\s*\.\.\s*(?P<stop>[^\s]+(?:\s+[A-Za-z/%]+)?)"
    r"(?:\s+(?:(?P<kind>step|times)\s+(?P<by>.+?)|(?P<log>log2|log10)|"
    r"(?P<count>\d+)\s+points(?P<geo>\s+log)?))?\s*$")


def is_range(text: Any) -> bool:
    """Whether ``text`` is written as a range (``"1..512 log2"``)."""
    return isinstance(text, str) and ".." in text and _RANGE.match(text) is not None


def expand_range(text: str, unit: str | None = None, *, integer: bool = False) -> list:
    """The values of a range string.

    ``"A..B"`` integers A to B; ``"A..B step S"`` A, A+S, ... up to B; ``"A..B log2"``
    (``log10``, ``times F``) A, 2A, 4A, ... up to B; ``"A..B N points"`` N evenly
    spaced values from A to B inclusive; ``"A..B N points log"`` N geometrically
    spaced. Endpoints and steps may carry units when the field has one
    (``"40 GB..80 GB step 20 GB"``). Raises ValueError with a message.

    >>> expand_range("1..16 log2")
    [1, 2, 4, 8, 16]
    >>> expand_range("0.5..1 step 0.25")
    [0.5, 0.75, 1.0]
    """
    match = _RANGE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a range")

    def number(part: str, what: str) -> float | int:
        part = part.strip()
        try:
            return int(part)
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

    start = number(match.group("start"), "start")
    stop = number(match.group("stop"), "end")
    values: list
    if match.group("count"):
        count = int(match.group("count"))
        if count < 1:
            raise ValueError(f"range {text!r} is empty (0 points)")
        if count > MAX_AXIS_VALUES:
            raise ValueError(f"range {text!r} has more than {MAX_AXIS_VALUES:,} values")
        if match.group("geo"):
            if start <= 0 or stop <= 0:
                raise ValueError(f"a geometric range needs positive ends, got {text!r}")
            values = [float(v) for v in np.geomspace(start, stop, count)]
        else:
            values = [float(v) for v in np.linspace(start, stop, count)]
        values = [_tidy(v) for v in values]
    elif match.group("log") or match.group("kind") == "times":
        factor: float | None = {"log2": 2, "log10": 10}.get(match.group("log") or "")
        if factor is None:
            factor = number(match.group("by"), "factor")
        if factor <= 1:
            raise ValueError(f"the factor of range {text!r} must be greater than 1")
        if start <= 0:
            raise ValueError(f"a geometric range must start above 0, got {text!r}")
        if stop < start:
            raise ValueError(f"range {text!r} is empty (its end is below its start)")
        count = math.floor(math.log(stop / start) / math.log(factor) + 1e-9) + 1
        if count > MAX_AXIS_VALUES:
            raise ValueError(f"range {text!r} has more than {MAX_AXIS_VALUES:,} values")
        if all(isinstance(v, int) for v in (start, factor)):
            values = [start * factor**i for i in range(count)]
        else:
            values = [_tidy(start * float(factor) ** i) for i in range(count)]
        values = [v for v in values if v <= stop * (1 + 1e-12)]
    else:
        step = 1 if match.group("kind") is None else number(match.group("by"), "step")
        if match.group("kind") is None and not (isinstance(start, int) and isinstance(stop, int)):
            raise ValueError(f"range {text!r} needs a step ('A..B step S') unless both ends are "
                             "integers")
        if step <= 0:
            raise ValueError(f"the step of range {text!r} must be positive")
        if stop < start:
            raise ValueError(f"range {text!r} is empty (its end is below its start)")
        count = math.floor((stop - start) / step + 1e-9) + 1
        if count > MAX_AXIS_VALUES:
            raise ValueError(f"range {text!r} has {count:,} values, more than {MAX_AXIS_VALUES:,}")
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
