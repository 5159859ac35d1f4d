"""Measured latencies as functions you can read: a table's rows grouped by configuration,
each configuration's curve (:mod:`.curves`), and the curve a configuration that was not
measured reads.

A table family's columns fall into three groups (see :mod:`.families`):

* **categories**, matched exactly (a GEMM's dtype, a cache's dtype);
* **configuration** axes, fixed by the model and the layout (a GEMM's n and k; heads,
  KV heads, head width and window; experts, top-k, TP and EP);
* **curve** axes, that the workload moves (a GEMM's m; attention's batch and length; the
  tokens of a MoE layer; a collective's message size).

Each measured configuration has a **curve** (:class:`~.curves.Curve`): its latencies on
the grid of curve values measured (the fastest row of each cell), unmeasured cells of
that grid filled from the nearest measured cell (log distance) by the roofline ratio. A
point's configuration reads an **effective curve**:

1. measured exactly: its own curve;
2. between measured values on every configuration axis, every corner of the box
   measured: the corners' curves blended log–log on their grid,
   ``log t = Σ w_i log t_i`` with ``w = (log x − log x_lo)/(log x_hi − log x_lo)`` per axis;
3. otherwise, where the family names configurations that do the same work per GPU
   another way (:attr:`.records.Family.stand_ins`: a MoE layer's experts split over 8
   GPUs as 4-way tensor parallel within each expert and 2-way over the experts, for one
   split 8-way within each that no table measured) and step 4 would not keep the
   point's own values of the axes they change: the first of them that steps 1–2 read,
   else the first read at the grid's edge or nearest with those axes measured, scaled
   to the point's own configuration by the roofline ratio;
4. otherwise (beyond the measured range, a corner missing): the nearest measured
   configuration (log distance; or the box's corners at the edge of the range), scaled
   to the point's own configuration: along an axis the family computes in **blocks**
   (a GEMM's n: a weight wider than any measured is column blocks of the widest) by the
   ratio of the values, along any other by the roofline ratio
   ``R(point's configuration)/R(measured one)``.

Along the curve axes the effective curve is interpolated log–log; beyond the grid it is
extended by blocks or by the roofline ratio (:mod:`.curves`). ``R`` is the family's
roofline time on the card's datasheet peaks, so scaling keeps the measured efficiency of
the nearest measured point; blocks keep the edge's time per unit of work.

Everything is vectorised over numpy arrays (the compiled graph calls a lookup once for a
whole sweep); arguments that are plain numbers take a pure-Python path with the same
arithmetic, for the per-point speed of a kept scenario, and recent points are kept.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..units import format_value
from .curves import Curve, broadcast_shape, grid

if TYPE_CHECKING:
    from .rescaled import Extended, Offset, Rescaled

#: A window of 0 in the tables means full attention: it is kept as this many positions,
#: so that a log distance between windows means something.
FULL_WINDOW = float(2**30)
#: Points whose latency a lookup keeps (plain-number arguments only).
KEPT_POINTS = 4096

Roofline = Callable[[Mapping[str, Any]], Any]


def _fmt(value: float) -> str:
    if value == FULL_WINDOW:
        return "full"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.4g}"


def brackets(curve: Curve, x: Sequence[float]) -> list[str]:
    """The grid values each curve axis used at ``x``, for a derivation."""
    found, clamped = curve.locate(x)
    out = []
    for axis, (i, w), v, raw, blocks in zip(curve.axis_lists, found, clamped, x, curve.blocks):
        if v != raw:
            edge = "the largest measured" if v == axis[-1] else "the smallest measured"
            rule = ("in blocks of it" if blocks and v == axis[-1] else "by the roofline ratio")
            out.append(f"{_fmt(v)} ({edge}; {_fmt(raw)} {rule})")
        elif len(axis) == 1 or (w == 0.0 and axis[i] == v):
            out.append(_fmt(axis[i]) + (" (the one measured)" if len(axis) == 1 else ""))
        else:
            out.append(f"{_fmt(axis[i])}…{_fmt(axis[i + 1])} (w = {w:.3f})")
    return out


@attrs.frozen
class Blend:
    """How a configuration's curve is made of measured ones: their indices and log
    weights, the configuration they stand for (``at``: the point's own, or the nearest
    measured one, or the point clamped to the measured range; for a stand-in, the
    stand-in's own configuration read the same ways) and what was done.
    """

    parts: tuple[tuple[int, float], ...]
    at: tuple[float, ...]
    how: str       # "exact", "interpolated", "clamped", "nearest", "stand-in"
    #: The configuration a stand-in blend reads in the point's place (``how`` "stand-in"),
    #: and how that configuration was read (``how``'s other values).
    via: tuple[float, ...] = ()
    via_how: str = ""


class Lookup:
    """One family's measured latencies for one set of categories, as a numpy function of
    its arguments (configuration axes and curve axes in the family's order), in seconds.

    ``blocks`` names the arguments beyond whose largest measured value the kernel is
    taken as blocks of that size (time proportional: see :mod:`.curves`).
    """

    def __init__(self, *, name: str, arguments: Sequence[str], configs: Sequence[str],
                 curve: Sequence[str], table: str, categories: Mapping[str, Any],
                 kernel_sources: Sequence[str], rows: Mapping[str, np.ndarray],
                 roofline: Roofline, describe_roofline: Callable[[Mapping[str, float]], str],
                 unit_note: str = "", blocks: Sequence[str] = (),
                 inherited: Mapping[tuple[float, ...], str] | None = None,
                 version: str = "", later_than: str = "",
                 lanes: Mapping[tuple[float, ...], str] | None = None,
                 lane_rule: str = "",
                 stand_ins: Callable[[Mapping[str, float]], list[dict[str, float]]] | None = None,
                 stand_in_rule: str = "", row_kernels: np.ndarray | None = None) -> None:
        self.name = name
        #: Lookups of this table's rows read for another format or card
        #: (:class:`.rescaled.Rescaled`), less work the engine does not do
        #: (:class:`.rescaled.Offset`) or grown beyond their grid as another card measured
        #: it (:class:`.rescaled.Extended`), kept with it by whoever makes them, so that one
        #: reading stays one object.
        self.rescaled: dict[Any, Rescaled | Offset | Extended] = {}
        #: The kernel each configuration reads where the table timed several (see
        #: :mod:`.lanes`), and the rule that chose it ("": the fastest row of each cell).
        self.lanes = dict(lanes or {})
        self.lane_rule = lane_rule
        #: Configurations doing a configuration's work the same way per GPU (see step 3).
        self.stand_ins = stand_ins
        self.stand_in_rule = stand_in_rule
        #: Configurations read from an older folder than ``table``'s, with that table.
        self.inherited = dict(inherited or {})
        #: The engine version of ``table``'s folder.
        self.version = version
        #: The engine version asked for where no table of it or an older release served
        #: and this later release's stands in ("": the version's own or an older one's).
        self.later_than = later_than
        self.arguments = tuple(arguments)
        self.config_names = tuple(configs)
        self.curve_names = tuple(curve)
        self.table = table
        self.categories = dict(categories)
        self.kernel_sources = tuple(kernel_sources)
        self.roofline = roofline
        self.describe_roofline = describe_roofline
        self.unit_note = unit_note
        self.blocks = tuple(blocks)
        self._curve_blocks = tuple(n in self.blocks for n in self.curve_names)
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
        #: The kernel each row names, in the same order (None: the table's kernels only).
        self._row_kernels = (np.asarray(row_kernels)[order]
                             if row_kernels is not None and len(row_kernels) == self.rows else None)
        self._curves: list[Curve | None] = [None] * len(unique)
        self._index = {tuple(row): c for c, row in enumerate(unique.tolist())}
        self._axis_values = [sorted(set(unique[:, j].tolist())) for j in range(unique.shape[1])]
        self._log_configs = np.log(np.maximum(unique, 1e-300)) if len(unique) else unique
        self._blends: dict[tuple[float, ...], Blend] = {}
        self._effective: dict[tuple[float, ...], Curve] = {}
        self._fixed_times: dict[int, float] = {}
        self._kept: dict[tuple, float] = {}

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
            rate = self._rate(self._config(index))
            axes, log_latency, measured = grid(
                [self._sorted[n][lo:hi] for n in self.curve_names],
                self._sorted["latency"][lo:hi], rate)
            found = self._curves[index] = Curve(axes, log_latency, measured, rate,
                                                self._curve_blocks)
        return found

    def effective(self, config: Sequence[float]) -> Curve:
        """The curve a configuration reads (see the module's steps 1–4), kept."""
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
            if blend.how in ("nearest", "clamped", "stand-in"):
                at = dict(zip(self.config_names, blend.at))
                points = dict(zip(self.curve_names, mesh))
                # Block axes beyond the measured range scale by the ratio of the values;
                # the others by the roofline ratio at the measured block sizes.
                ratio = 1.0
                between = dict(own)
                for name in self.config_names:
                    if name in self.blocks and own[name] > at[name] == self._largest(name):
                        ratio *= own[name] / at[name]
                        between[name] = at[name]
                log = log + np.log(ratio * self.roofline(between | points)
                                   / self.roofline(at | points))
                measured &= False
            found = Curve(axes, np.asarray(log, dtype=float), measured, self._rate(own),
                          self._curve_blocks)
        self._effective[key] = found
        return found

    def _largest(self, name: str) -> float:
        return self._axis_values[self.config_names.index(name)][-1]

    def measured_values(self, name: str) -> tuple[float, ...]:
        """The values a configuration axis was measured at, ascending."""
        return tuple(self._axis_values[self.config_names.index(name)])

    def kernels_along(self, name: str) -> dict[float, frozenset[str]]:
        """The kernels the rows name at each value a configuration axis was measured at
        (every kernel of the table at each, where the rows were not given one by one).
        """
        at = self.config_names.index(name)
        if self._row_kernels is None:
            return {v: frozenset(self.kernel_sources) for v in self._axis_values[at]}
        out: dict[float, set[str]] = {}
        for index, (lo, hi) in enumerate(zip(self._bounds[:-1], self._bounds[1:])):
            value = float(self.configs[index][at])
            out.setdefault(value, set()).update(self._row_kernels[lo:hi].tolist())
        return {v: frozenset(k) for v, k in out.items()}

    # -- configurations -----------------------------------------------------------------
    def blend(self, config: Sequence[float]) -> Blend:
        """How the measured configurations make ``config`` (kept per configuration)."""
        key = tuple(float(v) for v in config)
        found = self._blends.get(key)
        if found is None:
            found = self._blends[key] = self._make_blend(key)
        return found

    def _make_blend(self, key: tuple[float, ...]) -> Blend:
        found = self._grid_blend(key)
        if found.how not in ("clamped", "nearest") or self.stand_ins is None:
            return found
        usable: list[tuple[bool, int, tuple[float, ...], Blend]] = []
        for other in self.stand_ins(dict(zip(self.config_names, key))):
            via = tuple(float(other[n]) for n in self.config_names)
            changed = [j for j, (a, b) in enumerate(zip(key, via)) if a != b]
            if all(found.at[j] == key[j] for j in changed):
                # The nearest configuration keeps the point's own values of these axes
                # (the table measured them for another shape).
                return found
            alike = self._grid_blend(via)
            # Usable where its changed axes are measured (others may be clamped); one
            # read inside the grid first, then the most alike.
            if all(alike.at[j] == via[j] for j in changed):
                usable.append((alike.how not in ("exact", "interpolated"), len(usable), via, alike))
        if not usable:
            return found
        _, _, via, alike = min(usable)
        return Blend(alike.parts, alike.at, "stand-in", via, alike.how)

    def _grid_blend(self, key: tuple[float, ...]) -> Blend:
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

    def read_from(self, config: Sequence[float]) -> tuple[tuple[str, float], ...]:
        """The table each measured configuration behind ``config`` was read from (this
        lookup's own, or the older folder's it inherited the configuration from), with
        its blend weight.
        """
        blend = self.blend(config)
        return tuple((self.inherited.get(tuple(float(v) for v in self.configs[index]), self.table),
                      weight) for index, weight in blend.parts)

    # -- evaluation ----------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        # A point already asked for: plain numbers (floats, numpy floats, ints) hash as
        # the numbers they are; arrays do not hash.
        try:
            found = self._kept.get(args)
        except TypeError:
            found = None
        if found is not None:
            return found
        key = []
        for a in args:
            kind = type(a)
            if kind is float:
                key.append(a)
            elif kind is np.float64 or kind is int or (kind is np.ndarray and a.ndim == 0):
                key.append(float(a))
            else:
                return self._arrays(args)
        return self.point(*key)

    def _arrays(self, args: Sequence[Any]) -> np.ndarray:
        key = []
        for i in self._config_at:
            c = args[i]
            if type(c) is not float:
                c = np.asarray(c, dtype=float)
                if c.size != 1 and not (c == c.flat[0]).all():
                    return self._grouped(args)
                c = float(c.flat[0])
            key.append(c)
        config = tuple(key)
        curve = self._effective.get(config) or self.effective(config)
        shape = broadcast_shape(*(np.shape(a) for a in args))
        if curve.one is not None:
            v = np.asarray(args[self._curve_at[0]], dtype=float)
            out = curve.one.values(v.ravel()).reshape(v.shape)
        else:
            out = curve.values([args[i] for i in self._curve_at])
        return out if out.shape == shape else np.broadcast_to(out, shape).copy()

    def _grouped(self, args: Sequence[Any]) -> np.ndarray:
        """Configurations that differ point by point: each distinct one's points at once."""
        arrays = [np.asarray(a, dtype=float) for a in args]
        shape = broadcast_shape(*(a.shape for a in arrays))
        config = [arrays[i] for i in self._config_at]
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
        config = tuple([values[i] for i in self._config_at])
        curve = self._effective.get(config) or self.effective(config)
        line = curve.one
        if line is not None:
            value = line.value(values[self._curve_at[0]])
        else:
            value = curve.value([values[i] for i in self._curve_at])
        kept = self._kept
        if len(kept) >= KEPT_POINTS:
            kept.clear()
        kept[values] = value
        return value

    # -- reading ----------------------------------------------------------------------------
    def _reasons(self, values: Sequence[float]) -> tuple[list[str], list[str]]:
        """(what is outside the measured grid and scaled by the roofline ratio — a reader
        must be warned —, what is beyond it and computed in blocks — stated).
        """
        key = tuple(values[i] for i in self._config_at)
        x = [values[i] for i in self._curve_at]
        blend = self.blend(key)
        warned, stated = [], []
        if blend.how == "stand-in":
            changed = [(n, w, v) for n, w, v in zip(self.config_names, key, blend.via) if w != v]
            warned.append(
                f"{', '.join(f'{n} {_fmt(w)}' for n, w, _ in changed)} is not measured: read as "
                f"{', '.join(f'{n} {_fmt(v)}' for n, _, v in changed)} ({self.stand_in_rule}), "
                "scaled by the roofline ratio")
        if blend.how in ("nearest", "clamped", "stand-in"):
            far, columns = [], []
            base = blend.via if blend.how == "stand-in" else key
            for name, want, have in zip(self.config_names, base, blend.at):
                if want == have:
                    continue
                text = (f"{name} {_fmt(want)} (measured {_fmt(have)}, "
                        f"{max(want, have) / min(want, have):.3g}× away)")
                if name in self.blocks and want > have == self._largest(name):
                    columns.append(f"{name} {_fmt(want)}: {want / have:.4g} blocks of the largest "
                                   f"measured {_fmt(have)} (time proportional)")
                else:
                    far.append(text)
            if far:
                how = blend.via_how if blend.how == "stand-in" else blend.how
                what = "nearest measured configuration" if how == "nearest" else "grid's edge"
                warned.append(f"{', '.join(far)}: scaled from the {what} by the roofline ratio"
                              + self._fixed_note(key, blend, x))
            stated += columns
        curve = self.effective(key)
        _, clamped = curve.locate(x)
        for name, want, have, in_blocks in zip(self.curve_names, x, clamped, curve.blocks):
            if want == have:
                continue
            if in_blocks and want > have:
                stated.append(f"{name} {_fmt(want)}: {want / have:.4g} blocks of the largest "
                              f"measured {_fmt(have)} (time proportional)")
            else:
                warned.append(f"{name} {_fmt(want)} is {max(want, have) / min(want, have):.3g}× "
                              f"beyond the measured {_fmt(have)}: scaled by the roofline ratio")
        if blend.how not in ("nearest", "clamped", "stand-in") and curve.filled_at(x):
            warned.append("cells of the grid around " + ", ".join(
                f"{n} {_fmt(v)}" for n, v in zip(self.curve_names, x))
                + " were not measured: filled from the nearest measured cell by the roofline "
                  "ratio")
        return warned, stated

    def _fixed_note(self, key: tuple[float, ...], blend: Blend, x: Sequence[float]) -> str:
        """How much of a call's fixed time a scaling from another configuration may get
        wrong: the measured configurations' least time above their roofline over their
        measured cells (``F``, what a call takes whatever its work: launches, the kernel's
        own start) is scaled with the rest, though it does not shrink or grow with the
        work, so the scaled call may be up to ``F·(1 − r)`` short (``r`` < 1, scaled down)
        or ``F·(r − 1)`` too long (``r`` > 1), ``r`` the roofline part of the scaled over
        the measured time at the point (blocks of a wider configuration are stated, not
        counted). Empty where that is under a microsecond, or where the point's times are
        not positive numbers: a warning never stops a prediction.
        """
        try:
            points = [np.asarray([float(v)]) for v in x]
            parts = [(weight, float(self.curve(index).values(points)[0]), self._fixed_time(index))
                     for index, weight in blend.parts]
            scaled = float(self.effective(key).values(points)[0])
            if not (scaled > 0 and math.isfinite(scaled)
                    and all(t > 0 and math.isfinite(t) for _, t, _ in parts)):
                return ""
            measured = math.exp(sum(w * math.log(t) for w, t, _ in parts))
            fixed = sum(w * f for w, _, f in parts)
            own, at = dict(zip(self.config_names, key)), dict(zip(self.config_names, blend.at))
            blocks = math.prod(own[n] / at[n] for n in self.config_names
                               if n in self.blocks and own[n] > at[n] == self._largest(n))
            ratio = scaled / measured / blocks
        except (ValueError, ZeroDivisionError, FloatingPointError, OverflowError):
            return ""
        wrong = fixed * abs(1.0 - ratio)
        if not wrong >= 1e-6:
            return ""
        side = "short" if ratio < 1 else "too long"
        return (f" (the measured configuration's least time above its roofline, "
                f"{format_value(fixed, 's')}, is scaled too, though a call's fixed time does not "
                f"scale: this call may be up to {format_value(wrong, 's')} {side})")

    def _fixed_time(self, index: int) -> float:
        """A measured configuration's least time above its roofline over its measured
        cells, at least 0 (kept).
        """
        found = self._fixed_times.get(index)
        if found is None:
            curve = self.curve(index)
            mesh = np.meshgrid(*curve.axes, indexing="ij")
            with np.errstate(all="ignore"):
                above = np.exp(curve.log_latency) - np.asarray(
                    curve.rate([m.ravel() for m in mesh]), dtype=float).reshape(mesh[0].shape)
            mask = np.asarray(curve.measured, dtype=bool) & np.isfinite(above)
            found = max(float(np.min(above[mask])), 0.0) if mask.any() else 0.0
            self._fixed_times[index] = found
        return found

    def outside(self, *values: float) -> str | None:
        """Why this point is not inside the measured grid (and how far out), or None: the
        roofline-ratio scalings a reader must be warned of (blocks are stated, not warned).
        """
        return "; ".join(self._reasons(values)[0]) or None

    def blocks_at(self, *values: float) -> str | None:
        """The arguments this point computes in blocks of the largest measured size, or None."""
        return "; ".join(self._reasons(values)[1]) or None

    def explain(self, *values: float) -> list[str]:
        """What a derivation prints under a formula that uses this lookup at one point."""
        point = dict(zip(self.arguments, values))
        key = tuple(values[i] for i in self._config_at)
        x = [values[i] for i in self._curve_at]
        blend = self.blend(key)
        time = self.point(*values)
        roof = float(self.roofline(point))
        categories = ", ".join(f"{k} = {v}" for k, v in self.categories.items()) or "every row"
        rule = (f"{self.lane_rule}; the fastest row of each cell within it" if self.lane_rule
                else "the fastest row of each cell")
        lines = [f"table {self.table} ({self.rows} rows where {categories}; kernels: "
                 f"{', '.join(self.kernel_sources)}; {rule})"]
        if self.later_than:
            lines.append(f"  release {self.version}'s, standing in for the stated "
                         f"{self.later_than}: no table of {self.later_than} or older serves it")
        lines.append("at " + ", ".join(f"{k} = {_fmt(v)}" for k, v in point.items()))
        for index, weight in blend.parts:
            config = ", ".join(f"{n} {_fmt(v)}" for n, v in self._config(index).items())
            curve = self.curve(index)
            at = ", ".join(f"{n} {b}" for n, b in zip(self.curve_names, brackets(curve, x)))
            share = "" if len(blend.parts) == 1 else f"weight {weight:.3f}: "
            measured = tuple(float(v) for v in self.configs[index])
            older = self.inherited.get(measured)
            where = f" in {older}" if older else ""
            if measured in self.lanes:
                where += f", kernel {self.lanes[measured]}"
            lines.append(f"  {share}measured configuration ({config or 'the one'}){where}; grid "
                         f"{at} → {curve.value(x) * 1e3:.5g} ms")
        if len(blend.parts) > 1:
            lines.append("  configurations blended log–log")
        warned, stated = self._reasons(values)
        if stated:
            lines.append(f"  beyond the measured grid, in blocks: {'; '.join(stated)}")
        if warned:
            lines.append(f"  outside the measured grid: {'; '.join(warned)}")
        lines.append(f"latency {time * 1e3:.5g} ms{self.unit_note}; roofline {roof * 1e3:.5g} ms "
                     f"({self.describe_roofline(point)}): the kernel reaches "
                     f"{roof / time:.1%} of it")
        return lines


__all__ = ["FULL_WINDOW", "KEPT_POINTS", "Blend", "Lookup", "Roofline", "brackets"]
