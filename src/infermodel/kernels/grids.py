"""Measured latencies as functions you can read: log–log interpolation inside the grid,
the roofline ratio outside it.

A table family's columns fall into three groups (see :mod:`.families`):

* **categories**, matched exactly (a GEMM's dtype, a cache's dtype);
* **configuration** axes, fixed by the model and the layout (a GEMM's n and k; heads,
  KV heads, head width and window; experts, top-k, TP and EP);
* **curve** axes, that the workload moves (a GEMM's m; attention's batch and length; the
  tokens of a MoE layer; a collective's message size).

Each measured configuration has a **curve**: its latencies on the grid of curve values
measured (the fastest row of each cell), unmeasured cells of that grid filled from the
nearest measured cell (log distance) by the roofline ratio. A point's configuration
reads an **effective curve**:

1. measured exactly: its own curve;
2. between measured values on every configuration axis, every corner of the box
   measured: the corners' curves blended log–log on their grid,
   ``log t = Σ w_i log t_i`` with ``w = (log x − log x_lo)/(log x_hi − log x_lo)`` per axis;
3. otherwise (beyond the measured range, a corner missing): the nearest measured
   configuration (log distance; or the box's corners at the edge of the range), each grid
   point scaled by the roofline ratio ``R(point's configuration)/R(measured one)``.

Along the curve axes the effective curve is interpolated log–log between the bracketing
grid values; beyond the last one, the edge value is scaled by ``R(x)/R(x_edge)``.
``R`` is the family's roofline time on the card's datasheet peaks, so scaling keeps the
measured efficiency of the nearest measured point.

Everything is vectorised over numpy arrays (the compiled graph calls a lookup once for a
whole sweep); arguments that are plain numbers take a pure-Python path with the same
arithmetic, for the per-point speed of a kept scenario, and recent points are kept.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

#: A window of 0 in the tables means full attention: it is kept as this many positions,
#: so that a log distance between windows means something.
FULL_WINDOW = float(2**30)
#: Points whose latency a lookup keeps (plain-number arguments only).
KEPT_POINTS = 4096
#: The longest one-axis curve tabulated at every whole number (token counts up to it are
#: read from the table in a sweep).
WHOLE_NUMBERS = 65536

Roofline = Callable[[Mapping[str, Any]], Any]
_log, _exp = np.log, np.exp


def _fmt(value: float) -> str:
    if value == FULL_WINDOW:
        return "full"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.4g}"


def _grid(points: Sequence[np.ndarray], latency: np.ndarray,
          roofline: Callable[[Sequence[np.ndarray]], np.ndarray]):
    """(axes, log latency on the grid, measured mask) from measured rows: the fastest row
    of each cell; unmeasured cells filled from the nearest measured one by the roofline
    ratio.
    """
    axes = tuple(np.unique(p) for p in points)
    shape = tuple(len(a) for a in axes)
    index = tuple(np.searchsorted(a, p) for a, p in zip(axes, points))
    grid = np.full(shape, np.inf)
    np.minimum.at(grid, index, latency)
    measured = np.isfinite(grid)
    if not measured.all():
        cells = np.array(np.nonzero(~measured)).T
        known = np.array(np.nonzero(measured)).T
        log_axes = [np.log(a) for a in axes]

        def coords(ix):
            return np.stack([log_axes[d][ix[:, d]] for d in range(len(axes))], axis=1)

        distance = ((coords(cells)[:, None, :] - coords(known)[None, :, :]) ** 2).sum(-1)
        nearest = known[np.argmin(distance, axis=1)]
        at = [axes[d][cells[:, d]] for d in range(len(axes))]
        near = [axes[d][nearest[:, d]] for d in range(len(axes))]
        grid[tuple(cells.T)] = grid[tuple(nearest.T)] * roofline(at) / roofline(near)
    return axes, np.log(grid), measured


@attrs.frozen(eq=False)
class Curve:
    """Latencies (seconds) over the curve axes, on a grid, as a function of a point.

    ``log_latency`` holds every cell; ``measured`` says which were measured rather than
    filled or made from other configurations. ``rate(x)`` is the configuration's roofline
    time at curve points: beyond the grid the edge value is scaled by
    ``rate(x) / rate(edge)``.
    """

    axes: tuple[np.ndarray, ...]
    log_latency: np.ndarray
    measured: np.ndarray
    rate: Callable[[Sequence[Any]], Any] = attrs.field(repr=False)
    #: Plain-Python copies for the scalar path.
    axis_lists: tuple[list[float], ...] = attrs.field(init=False)
    log_axis_lists: tuple[list[float], ...] = attrs.field(init=False)
    log_axes: tuple[np.ndarray, ...] = attrs.field(init=False)
    flat: list[float] = attrs.field(init=False)
    #: The curve at every whole number of its range (None until made; False: not made).
    whole: Any = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "axis_lists", tuple(a.tolist() for a in self.axes))
        object.__setattr__(self, "log_axes", tuple(np.log(a) for a in self.axes))
        object.__setattr__(self, "log_axis_lists", tuple(a.tolist() for a in self.log_axes))
        object.__setattr__(self, "flat", self.log_latency.ravel().tolist())

    # -- one point, plain Python --------------------------------------------------
    # The scalar and array paths do the same floating-point operations in the same order
    # (numpy's log and exp on both), so a point gives the same bits either way: a sweep's
    # values are those of evaluating each point.
    def locate(self, x: Sequence[float]) -> tuple[list[tuple[int, Any]], list[float]]:
        """Per axis the lower grid index and the log weight of the upper one, and the
        point clamped to the grid.
        """
        found, clamped = [], []
        for axis, logs, value in zip(self.axis_lists, self.log_axis_lists, x):
            if len(axis) == 1:
                found.append((0, 0.0))
                clamped.append(axis[0])
                continue
            v = axis[0] if value < axis[0] else axis[-1] if value > axis[-1] else value
            i = bisect.bisect_right(axis, v) - 1
            i = 0 if i < 0 else len(axis) - 2 if i > len(axis) - 2 else i
            found.append((i, (_log(v) - logs[i]) / (logs[i + 1] - logs[i])))
            clamped.append(v)
        return found, clamped

    def value(self, x: Sequence[float]) -> float:
        """The latency at one point (interpolated, or scaled beyond the grid)."""
        f = self.flat
        if len(self.axis_lists) == 1:
            # np.interp's arithmetic, so that the array path's np.interp gives these bits.
            axis, logs, value = self.axis_lists[0], self.log_axis_lists[0], x[0]
            v = axis[0] if value < axis[0] else axis[-1] if value > axis[-1] else value
            clamped = [v]
            last = len(logs) - 1
            if last == 0:
                log = f[0]
            else:
                lv = _log(v)
                j = bisect.bisect_right(logs, lv) - 1
                if j >= last:
                    log = f[last]
                else:
                    log = (f[j + 1] - f[j]) / (logs[j + 1] - logs[j]) * (lv - logs[j]) + f[j]
        else:
            found, clamped = self.locate(x)
            (i, u), (j, w) = found
            n = len(self.axis_lists[1])
            i1 = i + 1 if len(self.axis_lists[0]) > 1 else i
            j1 = j + 1 if n > 1 else j
            low = f[i * n + j] + w * (f[i * n + j1] - f[i * n + j])
            high = f[i1 * n + j] + w * (f[i1 * n + j1] - f[i1 * n + j])
            log = low + u * (high - low)
        value = float(_exp(log))
        for a, b in zip(clamped, x):
            if a != b:
                return float(value / self.rate(clamped) * self.rate(x))
        return value

    # -- arrays ---------------------------------------------------------------------
    def values(self, x: Sequence[np.ndarray]) -> np.ndarray:
        """:meth:`value` on arrays (broadcast together: an axis the sweep does not move
        stays one number, and costs one).
        """
        if len(self.axes) == 1:
            return self._shaped(self._line(np.asarray(x[0], dtype=float)), x)
        beyond = any(np.min(v) < a[0] or np.max(v) > a[-1] for v, a in zip(x, self.axes))
        clamped = [np.clip(v, a[0], a[-1]) for v, a in zip(x, self.axes)] if beyond else list(x)
        index, weight = [], []
        for v, axis, logs in zip(clamped, self.axes, self.log_axes):
            if len(axis) == 1:
                index.append((np.zeros(np.shape(v), dtype=np.intp),) * 2)
                weight.append(np.zeros(np.shape(v)))
                continue
            i = np.clip(np.searchsorted(axis, v, side="right") - 1, 0, len(axis) - 2)
            index.append((i, i + 1))
            weight.append((np.log(v) - logs[i]) / (logs[i + 1] - logs[i]))
        grid = self.log_latency
        ((i, i1), (j, j1)), (u, w) = index, weight
        if np.ndim(j) == 0 and np.ndim(w) == 0:
            # The second axis holds one value (a sweep over the batch at one context): the
            # rows at that value first, each with the operations the scalar path does.
            rows = grid[:, j] + w * (grid[:, j1] - grid[:, j])
            low, high = rows[i], rows[i1]
        else:
            low = grid[i, j] + w * (grid[i, j1] - grid[i, j])
            high = grid[i1, j] + w * (grid[i1, j1] - grid[i1, j])
        time = np.exp(low + u * (high - low))
        if beyond:
            first, second = x
            if np.ndim(second) == 0 and clamped[1] == second:
                # Only the first axis leaves the grid: its edges' time over rate, as
                # numbers (the scalar path's own value at the edge), times rate(x).
                edges = self.axis_lists[0]
                for edge, side in ((edges[-1], first > edges[-1]), (edges[0], first < edges[0])):
                    if side.any():
                        point = [edge, float(second)]
                        scale = self.value(point) / self.rate(point)
                        time = np.where(side, scale * self.rate(x), time)
            else:
                outside = (clamped[0] != first) | (clamped[1] != second)
                time = np.where(outside, time / self.rate(clamped) * self.rate(x), time)
        return self._shaped(time, x)

    def _line(self, v: np.ndarray) -> np.ndarray:
        """One axis: a table of every whole number in the grid's range when the points are
        whole numbers inside it (token counts), else log–log interpolation; beyond the grid
        ``time(edge) / rate(edge) · rate(x)``. Every way gives the scalar path's bits (the
        table is this interpolation, made once).
        """
        axis = self.axis_lists[0]
        low, high = axis[0], axis[-1]
        if len(axis) == 1:
            time = np.full(v.shape, float(_exp(self.flat[0])))
        else:
            smallest, largest = float(np.min(v)), float(np.max(v))
            table = self._whole_numbers() if smallest >= low and largest <= high else None
            if table is not None:
                whole = v.astype(np.intp)
                if (whole == v).all():
                    return table[whole - int(low)]
            inside = np.clip(v, low, high) if smallest < low or largest > high else v
            time = np.exp(np.interp(np.log(inside), self.log_axes[0], self.log_latency))
        for edge, side in ((high, v > high), (low, v < low)):
            if side.any():
                scale = float(_exp(self.flat[-1 if edge == high else 0])) / self.rate([edge])
                time = np.where(side, scale * self.rate([v]), time)
        return time

    def _whole_numbers(self) -> np.ndarray | None:
        """The curve at every whole number of its range (one axis, from 1 to at most
        :data:`WHOLE_NUMBERS`), or None; made on first use.
        """
        if self.whole is None:
            low, high = self.axis_lists[0][0], self.axis_lists[0][-1]
            if low < 1 or high > WHOLE_NUMBERS or not float(low).is_integer():
                object.__setattr__(self, "whole", False)
            else:
                points = np.arange(int(low), int(high) + 1, dtype=float)
                object.__setattr__(self, "whole", np.exp(np.interp(
                    np.log(points), self.log_axes[0], self.log_latency)))
        return self.whole if self.whole is not False else None

    @staticmethod
    def _shaped(time: np.ndarray, x: Sequence[np.ndarray]) -> np.ndarray:
        shape = np.broadcast_shapes(*(np.shape(v) for v in x))
        return time if time.shape == shape else np.broadcast_to(time, shape).copy()

    def brackets(self, x: Sequence[float]) -> list[str]:
        """The grid values each axis used at ``x``, for a derivation."""
        found, clamped = self.locate(x)
        out = []
        for axis, (i, w), v, raw in zip(self.axis_lists, found, clamped, x):
            if len(axis) == 1 or (w == 0.0 and axis[i] == v):
                out.append(_fmt(axis[i]) + (" (the one measured)" if len(axis) == 1 else ""))
            elif v != raw:
                out.append(f"{_fmt(v)} (edge of the grid)")
            else:
                out.append(f"{_fmt(axis[i])}…{_fmt(axis[i + 1])} (w = {w:.3f})")
        return out

    def filled_at(self, x: Sequence[float]) -> bool:
        """Whether a cell that was not measured took part at ``x``."""
        found, _ = self.locate(x)
        ranges = [range(i, i + (2 if w and len(a) > 1 else 1))
                  for (i, w), a in zip(found, self.axis_lists)]
        if len(ranges) == 1:
            return not all(self.measured[i] for i in ranges[0])
        return not all(self.measured[i, j] for i in ranges[0] for j in ranges[1])


@attrs.frozen
class Blend:
    """How a configuration's curve is made of measured ones: their indices and log
    weights, the configuration they stand for (``at``: the point's own, or the nearest
    measured one, or the point clamped to the measured range) and what was done.
    """

    parts: tuple[tuple[int, float], ...]
    at: tuple[float, ...]
    how: str       # "exact", "interpolated", "clamped", "nearest"


class Lookup:
    """One family's measured latencies for one set of categories, as a numpy function of
    its arguments (configuration axes and curve axes in the family's order), in seconds.
    """

    def __init__(self, *, name: str, arguments: Sequence[str], configs: Sequence[str],
                 curve: Sequence[str], table: str, categories: Mapping[str, Any],
                 kernel_sources: Sequence[str], rows: Mapping[str, np.ndarray],
                 roofline: Roofline, describe_roofline: Callable[[Mapping[str, float]], str],
                 unit_note: str = "") -> None:
        self.name = name
        self.arguments = tuple(arguments)
        self.config_names = tuple(configs)
        self.curve_names = tuple(curve)
        self.table = table
        self.categories = dict(categories)
        self.kernel_sources = tuple(kernel_sources)
        self.roofline = roofline
        self.describe_roofline = describe_roofline
        self.unit_note = unit_note
        self._config_at = [self.arguments.index(n) for n in self.config_names]
        self._curve_at = [self.arguments.index(n) for n in self.curve_names]
        self.rows = len(rows["latency"])
        keys = (np.stack([rows[n] for n in self.config_names], axis=1) if self.config_names
                else np.zeros((self.rows, 0)))
        # Rows grouped by configuration (a lexicographic sort: np.unique over rows is slow).
        order = np.lexsort(keys.T[::-1]) if keys.shape[1] else np.arange(self.rows)
        ordered = keys[order]
        change = np.ones(self.rows, dtype=bool)
        if self.rows > 1:
            change[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
        starts = np.flatnonzero(change)
        unique = ordered[starts]
        self.configs = unique
        # Curves are built when a point first needs them: a table holds hundreds of
        # configurations, and a scenario uses a few.
        self._bounds = np.append(starts, self.rows)
        self._sorted = {n: rows[n][order] for n in (*self.curve_names, "latency")}
        self._curves: list[Curve | None] = [None] * len(unique)
        self._index = {tuple(row): c for c, row in enumerate(unique.tolist())}
        self._axis_values = [sorted(set(unique[:, j].tolist())) for j in range(unique.shape[1])]
        self._log_configs = np.log(np.maximum(unique, 1e-300)) if len(unique) else unique
        self._blends: dict[tuple[float, ...], Blend] = {}
        self._effective: dict[tuple[float, ...], Curve] = {}
        self._kept: dict[tuple[float, ...], float] = {}

    # -- curves -------------------------------------------------------------------------
    def _rate(self, config: Mapping[str, float]):
        names, fixed = self.curve_names, dict(config)

        def rate(points):
            return self.roofline(fixed | dict(zip(names, points)))
        return rate

    def _config(self, index: int) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.config_names, self.configs[index])}

    def curve(self, index: int) -> Curve:
        """The curve of measured configuration ``index`` (built on first use)."""
        found = self._curves[index]
        if found is None:
            lo, hi = self._bounds[index], self._bounds[index + 1]
            fixed = self._config(index)

            def roofline(points):
                return self.roofline(fixed | dict(zip(self.curve_names, points)))

            axes, log_latency, measured = _grid(
                [self._sorted[n][lo:hi] for n in self.curve_names],
                self._sorted["latency"][lo:hi], roofline)
            found = self._curves[index] = Curve(axes, log_latency, measured, self._rate(fixed))
        return found

    def effective(self, config: Sequence[float]) -> Curve:
        """The curve a configuration reads (see the module's steps 1–3), kept."""
        key = tuple(float(v) for v in config)
        found = self._effective.get(key)
        if found is not None:
            return found
        blend = self.blend(key)
        curves = [self.curve(i) for i, _ in blend.parts]
        if blend.how == "exact":
            found = curves[0]
        else:
            # Every part on the union of their grids, blended in logs.
            axes = tuple(np.unique(np.concatenate([c.axes[d] for c in curves]))
                         for d in range(len(self.curve_names)))
            mesh = np.meshgrid(*axes, indexing="ij")
            log = sum(w * np.log(c.values([m.ravel() for m in mesh])).reshape(mesh[0].shape)
                      for (_, w), c in zip(blend.parts, curves))
            measured = np.ones(mesh[0].shape, dtype=bool)
            for c in curves:
                same = all(len(a) == len(b) and np.array_equal(a, b) for a, b in zip(c.axes, axes))
                measured &= c.measured if same else False
            own = dict(zip(self.config_names, key))
            if blend.how in ("nearest", "clamped"):
                at = dict(zip(self.config_names, blend.at))
                points = dict(zip(self.curve_names, mesh))
                log = log + np.log(self.roofline(own | points) / self.roofline(at | points))
                measured &= False
            found = Curve(axes, np.asarray(log, dtype=float), measured, self._rate(own))
        self._effective[key] = found
        return found

    # -- configurations -----------------------------------------------------------------
    def blend(self, config: Sequence[float]) -> Blend:
        """How the measured configurations make ``config`` (kept per configuration)."""
        key = tuple(float(v) for v in config)
        found = self._blends.get(key)
        if found is None:
            found = self._blends[key] = self._make_blend(key)
        return found

    def _make_blend(self, key: tuple[float, ...]) -> Blend:
        exact = self._index.get(key)
        if exact is not None:
            return Blend(((exact, 1.0),), key, "exact")
        options: list[list[tuple[float, float]]] = []
        clamped = False
        for value, axis in zip(key, self._axis_values):
            if value in axis:
                options.append([(value, 1.0)])
            elif value < axis[0] or value > axis[-1]:
                options.append([(axis[0] if value < axis[0] else axis[-1], 1.0)])
                clamped = True
            else:
                hi = bisect.bisect_right(axis, value)
                lo_v, hi_v = axis[hi - 1], axis[hi]
                w = (math.log(value) - math.log(lo_v)) / (math.log(hi_v) - math.log(lo_v))
                options.append([(lo_v, 1 - w), (hi_v, w)])
        corners: list[tuple[tuple[float, ...], float]] = [((), 1.0)]
        for choices in options:
            corners = [((*c, v), w * u) for c, w in corners for v, u in choices]
        found = [(self._index.get(c), w) for c, w in corners]
        at = tuple(v[0][0] if len(v) == 1 else k for v, k in zip(options, key))
        parts = tuple((i, w) for i, w in found if i is not None and w > 0)
        if all(i is not None for i, _ in found) and parts:
            return Blend(parts, at, "clamped" if clamped else "interpolated")
        logs = np.log(np.maximum(np.asarray(key), 1e-300))
        nearest = int(np.argmin(((self._log_configs - logs) ** 2).sum(axis=1)))
        return Blend(((nearest, 1.0),), tuple(self.configs[nearest].tolist()), "nearest")

    # -- evaluation ----------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        key = []
        for a in args:
            kind = type(a)
            if kind is float:
                key.append(a)
            elif kind is np.float64 or kind is int or (kind is np.ndarray and a.ndim == 0):
                key.append(float(a))
            else:
                return self._arrays(args)
        values = tuple(key)
        found = self._kept.get(values)
        return found if found is not None else self.point(*values)

    def _arrays(self, args: Sequence[Any]) -> np.ndarray:
        arrays = [np.asarray(a, dtype=float) for a in args]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        config = [arrays[i] for i in self._config_at]
        if all(c.size == 1 or (c == c.flat[0]).all() for c in config):
            key = tuple(float(c.flat[0]) for c in config)
            values = self.effective(key).values([arrays[i] for i in self._curve_at])
            return values if values.shape == shape else np.broadcast_to(values, shape).copy()
        curve = [np.broadcast_to(arrays[i], shape) for i in self._curve_at]
        out = np.empty(shape)
        stacked = np.stack([np.broadcast_to(c, shape).ravel() for c in config], axis=1)
        unique, inverse = np.unique(stacked, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).reshape(shape)
        for g, row in enumerate(unique.tolist()):
            mask = inverse == g
            out[mask] = self.effective(row).values([c[mask] for c in curve])
        return out

    def point(self, *values: float) -> float:
        """The latency in seconds at one point (plain numbers), the scalar path."""
        found = self._kept.get(values)
        if found is not None:
            return found
        config = tuple([values[i] for i in self._config_at])
        curve = self._effective.get(config)
        if curve is None:
            curve = self.effective(config)
        value = curve.value([values[i] for i in self._curve_at])
        if len(self._kept) >= KEPT_POINTS:
            self._kept.clear()
        self._kept[values] = value
        return value

    # -- reading ----------------------------------------------------------------------------
    def outside(self, *values: float) -> str | None:
        """Why this point is not inside the measured grid (and how far out), or None."""
        key = tuple(values[i] for i in self._config_at)
        x = [values[i] for i in self._curve_at]
        blend = self.blend(key)
        reasons = []
        if blend.how in ("nearest", "clamped"):
            far = []
            for name, want, have in zip(self.config_names, key, blend.at):
                if want != have:
                    far.append(f"{name} {_fmt(want)} (measured {_fmt(have)}, "
                               f"{max(want, have) / min(want, have):.3g}× away)")
            what = "nearest measured configuration" if blend.how == "nearest" else "grid's edge"
            reasons.append(f"{', '.join(far)}: scaled from the {what} by the roofline ratio")
        curve = self.effective(key)
        _, clamped = curve.locate(x)
        for name, want, have in zip(self.curve_names, x, clamped):
            if want != have:
                reasons.append(f"{name} {_fmt(want)} is {max(want, have) / min(want, have):.3g}× "
                               f"beyond the measured {_fmt(have)}: scaled by the roofline ratio")
        if blend.how not in ("nearest", "clamped") and curve.filled_at(x):
            reasons.append("cells of the grid around " + ", ".join(
                f"{n} {_fmt(v)}" for n, v in zip(self.curve_names, x))
                + " were not measured: filled from the nearest measured cell by the roofline "
                  "ratio")
        return "; ".join(reasons) or None

    def explain(self, *values: float) -> list[str]:
        """What a derivation prints under a formula that uses this lookup at one point."""
        point = dict(zip(self.arguments, values))
        key = tuple(values[i] for i in self._config_at)
        x = [values[i] for i in self._curve_at]
        blend = self.blend(key)
        time = self.point(*values)
        roof = float(self.roofline(point))
        categories = ", ".join(f"{k} = {v}" for k, v in self.categories.items()) or "every row"
        lines = [f"table {self.table} ({self.rows} rows where {categories}; kernels: "
                 f"{', '.join(self.kernel_sources)}; the fastest row of each cell)",
                 "at " + ", ".join(f"{k} = {_fmt(v)}" for k, v in point.items())]
        for index, weight in blend.parts:
            config = ", ".join(f"{n} {_fmt(v)}" for n, v in self._config(index).items())
            curve = self.curve(index)
            grid = ", ".join(f"{n} {b}" for n, b in zip(self.curve_names, curve.brackets(x)))
            share = "" if len(blend.parts) == 1 else f"weight {weight:.3f}: "
            lines.append(f"  {share}measured configuration ({config or 'the one'}); grid {grid} "
                         f"→ {curve.value(x) * 1e3:.5g} ms")
        if blend.how == "interpolated":
            lines.append("  configurations blended log–log")
        far = self.outside(*values)
        if far:
            lines.append(f"  outside the measured grid: {far}")
        lines.append(f"latency {time * 1e3:.5g} ms{self.unit_note}; roofline {roof * 1e3:.5g} ms "
                     f"({self.describe_roofline(point)}): the kernel reaches "
                     f"{roof / time:.1%} of it")
        return lines


__all__ = ["FULL_WINDOW", "KEPT_POINTS", "Blend", "Curve", "Lookup"]
