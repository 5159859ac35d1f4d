"""A finished sweep: columns per axis and quantity, and their text table."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..errors import Problem, UnknownQuantityError, suggest
from .axes import Axis
from .writers import WRITERS

if TYPE_CHECKING:
    from .plan import SweepPlan


@attrs.frozen
class Chunk:
    """Points ``start`` to ``stop`` of a sweep: label and quantity columns."""

    start: int
    stop: int
    labels: Mapping[str, np.ndarray]
    columns: Mapping[str, np.ndarray]
    defined: Mapping[str, np.ndarray]


# ---------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------


class SweepResult:
    """Every point of a sweep: a column per axis and per quantity, base units.

    ``result["tpot"]`` is a numpy array over the points (grid order, first axis
    slowest); condition quantities are bool arrays. ``result.defined(name)`` says
    where a quantity exists (a structural choice may remove it, e.g. a preset
    without a price has no cost). In ``result.columns`` a quantity the swept fields
    do not reach may be a read-only view of its one value; ``result[name]`` gives it
    as an array of its own.
    """

    def __init__(self, plan: SweepPlan, columns: Mapping[str, np.ndarray],
                 defined: Mapping[str, np.ndarray]):
        self.plan = plan
        self.columns = dict(columns)
        self._defined = dict(defined)

    @property
    def axes(self) -> list[Axis]:
        return self.plan.axes

    @property
    def quantities(self) -> list[str]:
        return self.plan.quantities

    @property
    def units(self) -> Mapping[str, str]:
        return self.plan.units

    @property
    def scenario(self):
        return self.plan.scenario

    @property
    def shape(self) -> tuple[int, ...]:
        return self.plan.shape

    def __len__(self) -> int:
        return self.plan.total

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            column = self.columns[name]
        except KeyError:
            raise UnknownQuantityError(Problem(
                f"the sweep has no column {name!r}",
                suggestion=suggest(str(name), self.columns))) from None
        if not column.flags.writeable:
            # A constant column, kept as a view of one value until it is read.
            column = self.columns[name] = np.array(column)
        return column

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def defined(self, name: str) -> np.ndarray:
        """Where quantity ``name`` is defined (all True unless a choice removes it)."""
        mask = self._defined.get(name)
        return np.ones(len(self), bool) if mask is None else mask

    def labels(self, index: int) -> dict[str, Any]:
        return self.plan.labels(index)

    def overrides(self, index: int) -> dict[str, Any]:
        return self.plan.overrides(index)

    def scenario_at(self, index: int):
        return self.plan.scenario_at(index)

    def evaluate_at(self, index: int):
        """:func:`infermodel.evaluate` of point ``index``: every quantity, with derivations."""
        from ..engine.evaluation import evaluate_afresh

        return evaluate_afresh(self.scenario_at(index), host=self.plan.host)

    def row(self, index: int) -> dict[str, Any]:
        """Point ``index`` as a dict: labels, then quantity values (None where undefined)."""
        out = self.labels(index)
        for name in self.quantities:
            if not self.defined(name)[index]:
                out[name] = None
            else:
                value = self.columns[name][index]
                out[name] = bool(value) if self.units[name] == "bool" else float(value)
        return out

    def _chunk(self, start: int, stop: int) -> Chunk:
        labels = {a.name: self.columns[a.name][start:stop] for a in self.axes}
        columns = {n: self.columns[n][start:stop] for n in self.quantities}
        defined = {n: m[start:stop] for n, m in self._defined.items()}
        return Chunk(start, stop, labels, columns, defined)

    def _render(self, format: str) -> str:
        writer = WRITERS[format](self.plan)
        parts = [writer.header()]
        for start in range(0, len(self), 65536):
            parts.append(writer.chunk(self._chunk(start, min(start + 65536, len(self)))))
        parts.append(writer.footer())
        return "".join(parts)

    def _text_or_file(self, format: str, path: str | os.PathLike | None) -> str | None:
        text = self._render(format)
        if path is None:
            return text
        from ..output import atomic_write

        atomic_write(path, text)
        return None

    def to_csv(self, path: str | os.PathLike | None = None) -> str | None:
        """CSV text (or write it atomically to ``path``): a column per axis, then per quantity."""
        return self._text_or_file("csv", path)

    def to_json(self, path: str | os.PathLike | None = None) -> str | None:
        """JSON text (or write it to ``path``): axes, quantity units, and one object per point."""
        return self._text_or_file("json", path)

    def table(self, names: Sequence[str] | None = None) -> str:
        """An aligned text table with units in readable prefixes."""
        return render_table(self, names)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        axes = ", ".join(f"{a.name}[{len(a)}]" for a in self.axes)
        return f"<SweepResult {len(self)} points over {axes or 'no axes'}, {len(self.quantities)} quantities>"


def render_table(result: SweepResult, names: Sequence[str] | None = None) -> str:
    """Aligned text: a column per axis and per quantity, values with unit prefixes."""
    from ..printing import show

    names = list(names or result.quantities)
    headers = [a.name for a in result.axes] + [
        f"{n} [{result.units[n]}]" if result.units[n] not in ("1", "bool") else n for n in names]
    rows = []
    for i in range(len(result)):
        row = [str(_label_text(a, result.columns[a.name][i])) for a in result.axes]
        for name in names:
            if not result.defined(name)[i]:
                row.append("—")
            elif result.units[name] == "bool":
                row.append("yes" if result.columns[name][i] else "no")
            else:
                row.append(show(float(result.columns[name][i]), result.units[name]))
        rows.append(row)
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    # A point whose batch does not fit in memory is marked at the row's end, so its
    # speed and cost are not read as achievable.
    misfit = _does_not_fit(result)
    for i, row in enumerate(rows):
        line = "  ".join(c.rjust(w) if k >= len(result.axes) else c.ljust(w)
                         for k, (c, w) in enumerate(zip(row, widths))).rstrip()
        lines.append(line + ("  ✗ does not fit" if misfit[i] else ""))
    if any(misfit):
        lines.append("✗ does not fit: the batch's weights, full-length cache and reserve exceed "
                     "memory (fits = no)")
    return "\n".join(lines)


def _does_not_fit(result: SweepResult) -> list[bool]:
    if "fits" not in result.columns:
        return [False] * len(result)
    defined = result.defined("fits")
    return [bool(defined[i]) and not bool(result.columns["fits"][i]) for i in range(len(result))]


def _label_text(axis: Axis, value: Any) -> str:
    if axis.numeric:
        value = float(value)
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    return str(value)
