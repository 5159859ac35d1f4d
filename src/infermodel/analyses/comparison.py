"""Scenarios side by side: each quantity's values, and each scenario's difference from and
ratio to the first.

This module only computes; the documentation's ``.. infermodel-compare::`` directive
renders what :func:`compare` returns, and a command-line printer can do the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs


@attrs.frozen
class ComparedQuantity:
    """One quantity across several evaluated scenarios.

    ``values`` has one entry per scenario (None where a scenario does not define the
    quantity); ``differences`` and ``ratios`` have one per scenario after the first,
    against the first (None where either value is missing or not a number, and a ratio
    also where the first is zero).
    """

    name: str
    unit: str
    description: str
    values: tuple[Any, ...]
    differences: tuple[float | None, ...]
    ratios: tuple[float | None, ...]

    @property
    def changed(self) -> bool:
        """Whether any scenario's value differs from the first's (a quantity one of them
        lacks counts as changed).
        """
        return any(not _same(self.values[0], v) for v in self.values[1:])


def _same(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        x, y = float(a), float(b)
        return x == y or (math.isnan(x) and math.isnan(y))
    return bool(a == b)


def _is_number(value: Any) -> bool:
    """A real number (Python's or numpy's), not a truth value."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and getattr(value, "shape", None) == () and dtype.kind in "iuf"


def _difference(first: Any, other: Any) -> tuple[float | None, float | None]:
    if not (_is_number(first) and _is_number(other)):
        return None, None
    a, b = float(first), float(other)
    difference = b - a if math.isfinite(a) and math.isfinite(b) else None
    ratio = b / a if a != 0 and math.isfinite(a) and math.isfinite(b) else None
    return difference, ratio


def compare(results: Sequence[Any], names: Sequence[str] | None = None) -> list[ComparedQuantity]:
    """Compare evaluated scenarios (:class:`~infermodel.engine.evaluation.Result`), the first as
    the base.

    ``names`` are the quantities to compare (default: every quantity all of them define,
    in the first's order). A name some scenario lacks is compared where it is defined.

    >>> import infermodel  # doctest: +SKIP
    >>> bf16, int4 = (infermodel.evaluate(f"scenarios/quant-{n}.toml") for n in ("bf16", "int4"))  # doctest: +SKIP
    >>> (row,) = compare([bf16, int4], ["weight_bytes"])  # doctest: +SKIP
    >>> round(row.ratios[0], 3)  # doctest: +SKIP
    0.355
    """
    if len(results) < 2:
        raise ValueError("compare needs two or more evaluated scenarios")
    if names is None:
        names = [n for n in results[0].graph.order if all(n in r.values for r in results[1:])]
    rows = []
    for name in names:
        defined = [r for r in results if name in r.values]
        if not defined:
            raise KeyError(name)
        quantity = defined[0].graph[name]
        values = tuple(r.values.get(name) if name in r.values else None for r in results)
        pairs = [_difference(values[0], v) for v in values[1:]]
        rows.append(ComparedQuantity(name, quantity.unit, quantity.description, values,
                                     tuple(d for d, _ in pairs), tuple(r for _, r in pairs)))
    return rows


__all__ = ["ComparedQuantity", "compare"]
