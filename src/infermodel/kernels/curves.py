"""A measured configuration's latencies along the axes a workload moves: one axis (a
:class:`Line`) or two (a :class:`Curve` of lines), interpolated log–log inside the grid
and extended beyond it.

Inside the grid, between the bracketing grid values x_i < x < x_{i+1}::

    u = (log x − log x_i) / (log x_{i+1} − log x_i)
    log t = log t_i + u · (log t_{i+1} − log t_i)

On a two-axis grid the row at the second axis's value is made first (the same formula
along that axis, cell by cell), then the first axis is read along it: a batch sweep at
one context reads one line.

Beyond the grid, two rules:

* **blocks** (axes a family names: a GEMM's m, a MoE layer's tokens, attention's batch,
  a collective's message): beyond the largest measured value x_e the work is that many
  blocks of x_e, each a measured kernel, so ``t(x) = t(x_e) · x / x_e``. Physically
  right past saturation: a GEMM with more rows than the largest measured runs at the
  efficiency it reached there (compute-bound), a batch of sequences is sequences side
  by side;
* **the roofline ratio** (every other axis and below the smallest measured value):
  ``t(x) = t(x_e) · R(x) / R(x_e)``, R the kernel's roofline on the card's datasheet
  peaks: the measured efficiency of the edge kept.

Every point has a scalar path (plain Python floats, for a kept scenario's value change)
and an array path (numpy, for sweeps) that do the same floating-point operations in the
same order: a sweep's values are those of evaluating each point, to the bit. Whole
numbers inside a one-axis range (token counts, batches) are read from a table of every
whole number in it, made once with the array path's formula.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: The longest range of whole numbers a line tabulates (token counts up to it are read
#: from the table).
WHOLE_NUMBERS = 65536
#: Lines a two-axis curve keeps (one per value of its second axis asked for).
LINES_KEPT = 512

_log, _exp = np.log, np.exp
Rate = Callable[[Any], Any]


def grid(points: Sequence[np.ndarray], latency: np.ndarray,
         roofline: Callable[[Sequence[np.ndarray]], np.ndarray]):
    """(axes, log latency on the grid, measured mask) from measured rows: the fastest row
    of each cell; unmeasured cells filled from the nearest measured one (log distance) by
    the roofline ratio.
    """
    axes = tuple(np.unique(p) for p in points)
    shape = tuple(len(a) for a in axes)
    index = tuple(np.searchsorted(a, p) for a, p in zip(axes, points))
    cells = np.full(shape, np.inf)
    np.minimum.at(cells, index, latency)
    measured = np.isfinite(cells)
    if not measured.all():
        empty = np.array(np.nonzero(~measured)).T
        known = np.array(np.nonzero(measured)).T
        log_axes = [np.log(a) for a in axes]

        def coords(ix):
            return np.stack([log_axes[d][ix[:, d]] for d in range(len(axes))], axis=1)

        distance = ((coords(empty)[:, None, :] - coords(known)[None, :, :]) ** 2).sum(-1)
        nearest = known[np.argmin(distance, axis=1)]
        at = [axes[d][empty[:, d]] for d in range(len(axes))]
        near = [axes[d][nearest[:, d]] for d in range(len(axes))]
        cells[tuple(empty.T)] = cells[tuple(nearest.T)] * roofline(at) / roofline(near)
    return axes, np.log(cells), measured


class Line:
    """Latencies (seconds) along one axis at fixed values of everything else.

    ``rate(x)`` is the roofline time at points x of the line (numbers or arrays);
    ``blocks``: beyond the largest grid value the time is proportional to x.
    """

    def __init__(self, axis: np.ndarray, log_latency: np.ndarray, rate: Rate, *,
                 blocks: bool = False) -> None:
        self.axis = np.asarray(axis, dtype=float)
        self.logs = np.log(self.axis)
        self.f = np.asarray(log_latency, dtype=float)
        self.rate = rate
        self.blocks = blocks
        self.values_list = self.axis.tolist()
        self.logs_list = self.logs.tolist()
        self.f_list = self.f.tolist()
        self.low, self.high = self.values_list[0], self.values_list[-1]
        self._table: Any = None
        self._list: list[float] = []
        self._edge: dict[str, float] = {}

    # -- inside the grid ---------------------------------------------------------------
    def _inside(self, x: float) -> float:
        values, logs, f = self.values_list, self.logs_list, self.f_list
        last = len(values) - 2
        if last < 0:
            return float(_exp(f[0]))
        i = bisect.bisect_right(values, x) - 1
        i = 0 if i < 0 else last if i > last else i
        u = (_log(x) - logs[i]) / (logs[i + 1] - logs[i])
        return float(_exp(f[i] + u * (f[i + 1] - f[i])))

    def _inside_arrays(self, v: np.ndarray) -> np.ndarray:
        if len(self.values_list) == 1:
            return np.full(v.shape, float(_exp(self.f_list[0])))
        last = len(self.values_list) - 2
        i = np.clip(np.searchsorted(self.axis, v, side="right") - 1, 0, last)
        logs, f = self.logs, self.f
        u = (np.log(v) - logs[i]) / (logs[i + 1] - logs[i])
        return np.exp(f[i] + u * (f[i + 1] - f[i]))

    def table(self) -> np.ndarray | None:
        """The line at every whole number of its range, indexed by the number itself (from
        0; the entries below the grid's first value are not read), at most
        :data:`WHOLE_NUMBERS` long; None when the range is not whole numbers from 1. Made
        on first use.
        """
        if self._table is None:
            low, high = self.low, self.high
            if low < 1 or high >= WHOLE_NUMBERS or not float(low).is_integer():
                self._table = False
            else:
                points = np.arange(0, int(high) + 1, dtype=float)
                points[: int(low)] = low
                self._table = self._inside_arrays(points)
                self._list = self._table.tolist()
        return self._table if self._table is not False else None

    # -- beyond the grid -----------------------------------------------------------------
    def _scale(self, side: str) -> float:
        """``t(edge) / edge`` (blocks) or ``t(edge) / R(edge)`` at one edge of the grid."""
        found = self._edge.get(side)
        if found is None:
            edge = self.high if side == "high" else self.low
            time = self._inside(edge)
            found = self._edge[side] = (time / edge if side == "high" and self.blocks
                                        else time / float(self.rate(edge)))
        return found

    def beyond_high(self, x: Any) -> Any:
        scale = self._scale("high")
        return scale * x if self.blocks else scale * self.rate(x)

    # -- evaluation ------------------------------------------------------------------------
    def value(self, x: float) -> float:
        """The latency at one point."""
        if x > self.high:
            return float(self.beyond_high(x))
        if x < self.low:
            return float(self._scale("low") * self.rate(x))
        if x != x:
            return x
        if self._table is None:
            self.table()
        whole = int(x)
        if whole == x and self._list:
            return self._list[whole]
        return self._inside(x)

    def values(self, v: np.ndarray) -> np.ndarray:
        """:meth:`value` on an array."""
        smallest, largest = float(v.min()), float(v.max())
        low, high = self.low, self.high
        if smallest > high:
            return np.asarray(self.beyond_high(v), dtype=float)
        table = self.table() if smallest >= low else None
        out = None
        if table is not None:
            whole = v.astype(np.intp)
            if (whole == v).all():
                # Whole numbers beyond the range read the last entry, replaced below.
                out = table.take(whole, mode="clip")
                if largest <= high:
                    return out
        if out is None:
            inside = np.clip(v, low, high) if smallest < low or largest > high else v
            out = self._inside_arrays(inside)
        if largest > high:
            out = np.where(v > high, self.beyond_high(v), out)
        if smallest < low:
            out = np.where(v < low, self._scale("low") * self.rate(v), out)
        return out

    def locate(self, x: float) -> tuple[int, float, float]:
        """(lower grid index, log weight of the upper one, the point clamped to the grid)."""
        values = self.values_list
        if len(values) == 1:
            return 0, 0.0, values[0]
        v = values[0] if x < values[0] else values[-1] if x > values[-1] else x
        i = min(max(bisect.bisect_right(values, v) - 1, 0), len(values) - 2)
        return i, float((_log(v) - self.logs_list[i]) / (self.logs_list[i + 1] - self.logs_list[i])), v


class Curve:
    """Latencies (seconds) over a configuration's curve axes (one or two), on a grid.

    ``log_latency`` holds every cell; ``measured`` says which were measured rather than
    filled or made from other configurations. ``rate(points)`` is the configuration's
    roofline at curve points; ``blocks`` says, per axis, whether beyond its largest grid
    value the time is proportional (see the module docstring).
    """

    def __init__(self, axes: Sequence[np.ndarray], log_latency: np.ndarray, measured: np.ndarray,
                 rate: Callable[[Sequence[Any]], Any], blocks: Sequence[bool] = ()) -> None:
        self.axes = tuple(np.asarray(a, dtype=float) for a in axes)
        self.log_latency = np.asarray(log_latency, dtype=float)
        self.measured = measured
        self.rate = rate
        self.blocks = tuple(blocks) or (False,) * len(self.axes)
        self.axis_lists = tuple(a.tolist() for a in self.axes)
        self.log_axes = tuple(np.log(a) for a in self.axes)
        self._lines: dict[float, Line] = {}
        if len(self.axes) == 1:
            self.one: Line | None = Line(self.axes[0], self.log_latency,
                                          lambda x: self.rate([x]), blocks=self.blocks[0])
        else:
            self.one = None
        self._second = Line(self.axes[1], np.zeros(len(self.axes[1])), lambda x: 0.0) \
            if len(self.axes) == 2 else None

    # -- lines ----------------------------------------------------------------------------
    def line(self, second: float) -> Line:
        """The line along the first axis at ``second`` on the second (clamped to its grid),
        kept.
        """
        found = self._lines.get(second)
        if found is None:
            assert self._second is not None
            j, w, clamped = self._second.locate(second)
            cells = self.log_latency
            if len(self.axis_lists[1]) == 1:
                rows = cells[:, 0]
            else:
                rows = cells[:, j] + w * (cells[:, j + 1] - cells[:, j])
            found = Line(self.axes[0], rows, lambda x: self.rate([x, clamped]),
                         blocks=self.blocks[0])
            if len(self._lines) >= LINES_KEPT:
                self._lines.clear()
            self._lines[second] = found
        return found

    def _clamp_second(self, second: float) -> float:
        values = self.axis_lists[1]
        return values[0] if second < values[0] else values[-1] if second > values[-1] else second

    # -- one point -----------------------------------------------------------------------
    def value(self, x: Sequence[float]) -> float:
        """The latency at one point."""
        if self.one is not None:
            return self.one.value(x[0])
        first, second = x
        clamped = self._clamp_second(second)
        time = self.line(clamped).value(first)
        if clamped != second:
            time = float(time / self.rate([first, clamped]) * self.rate([first, second]))
        return time

    # -- arrays ------------------------------------------------------------------------------
    def values(self, x: Sequence[Any]) -> np.ndarray:
        """:meth:`value` on arrays (broadcast together: an axis the sweep does not move stays
        one number, and costs one).
        """
        shape = broadcast_shape(*(np.shape(v) for v in x))
        if self.one is not None:
            out = self.one.values(np.asarray(x[0], dtype=float).ravel())
            return _shaped(out.reshape(np.shape(x[0])), shape)
        first = np.asarray(x[0], dtype=float)
        second = np.asarray(x[1], dtype=float)
        if second.size == 1 or (second == second.flat[0]).all():
            value = float(second.flat[0])
            clamped = self._clamp_second(value)
            out = self.line(clamped).values(first.ravel()).reshape(first.shape)
            if clamped != value:
                out = out / self.rate([first, clamped]) * self.rate([first, value])
            return _shaped(out, shape)
        first, second = np.broadcast_arrays(first, second)
        return self._general(first.ravel(), second.ravel()).reshape(shape)

    def _general(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """Both axes moving: each point's row made cell by cell, as :meth:`line` makes it."""
        values2 = self.axes[1]
        clamped2 = np.clip(second, values2[0], values2[-1])
        cells = self.log_latency
        if len(values2) == 1:
            j = np.zeros(first.shape, dtype=np.intp)
            w = np.zeros(first.shape)
            j1 = j
        else:
            j = np.clip(np.searchsorted(values2, clamped2, side="right") - 1, 0, len(values2) - 2)
            logs2 = self.log_axes[1]
            w = (np.log(clamped2) - logs2[j]) / (logs2[j + 1] - logs2[j])
            j1 = j + 1
        axis, logs = self.axes[0], self.log_axes[0]
        low, high = self.axis_lists[0][0], self.axis_lists[0][-1]
        n = len(axis)

        def row(i):
            return cells[i, j] + w * (cells[i, j1] - cells[i, j])

        def inside(v):
            if n == 1:
                return np.exp(row(np.zeros(v.shape, dtype=np.intp)))
            i = np.clip(np.searchsorted(axis, v, side="right") - 1, 0, n - 2)
            u = (np.log(v) - logs[i]) / (logs[i + 1] - logs[i])
            lo, hi = row(i), row(i + 1)
            return np.exp(lo + u * (hi - lo))

        clamped1 = np.clip(first, low, high)
        out = inside(clamped1)
        above, below = first > high, first < low
        if above.any():
            edge = inside(np.full(first.shape, high))
            if self.blocks[0]:
                out = np.where(above, edge / high * first, out)
            else:
                out = np.where(above, edge / self.rate([high, clamped2])
                               * self.rate([first, clamped2]), out)
        if below.any():
            edge = inside(np.full(first.shape, low))
            out = np.where(below, edge / self.rate([low, clamped2]) * self.rate([first, clamped2]),
                           out)
        outside = clamped2 != second
        if outside.any():
            out = np.where(outside, out / self.rate([first, clamped2]) * self.rate([first, second]),
                           out)
        return out

    # -- reading --------------------------------------------------------------------------------
    def locate(self, x: Sequence[float]) -> tuple[list[tuple[int, float]], list[float]]:
        """Per axis the lower grid index and the log weight of the upper one, and the
        point clamped to the grid.
        """
        found, clamped = [], []
        for axis, logs, value in zip(self.axis_lists, self.log_axes, x):
            if len(axis) == 1:
                found.append((0, 0.0))
                clamped.append(axis[0])
                continue
            v = axis[0] if value < axis[0] else axis[-1] if value > axis[-1] else value
            i = min(max(bisect.bisect_right(axis, v) - 1, 0), len(axis) - 2)
            found.append((i, float((_log(v) - logs[i]) / (logs[i + 1] - logs[i]))))
            clamped.append(v)
        return found, clamped

    def filled_at(self, x: Sequence[float]) -> bool:
        """Whether a cell that was not measured took part at ``x``."""
        found, _ = self.locate(x)
        ranges = [range(i, i + (2 if w and len(a) > 1 else 1))
                  for (i, w), a in zip(found, self.axis_lists)]
        if len(ranges) == 1:
            return not all(self.measured[i] for i in ranges[0])
        return not all(self.measured[i, j] for i in ranges[0] for j in ranges[1])


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast shape, without its cost when every shape but one is a number's."""
    found: tuple[int, ...] = ()
    for shape in shapes:
        if shape and shape != found:
            if found:
                return np.broadcast_shapes(*shapes)
            found = shape
    return found


def _shaped(time: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return time if time.shape == shape else np.broadcast_to(time, shape).copy()


__all__ = ["LINES_KEPT", "WHOLE_NUMBERS", "Curve", "Line", "broadcast_shape", "grid"]
