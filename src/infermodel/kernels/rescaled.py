"""A lookup read for what its table does not measure — another format, another card —
from the measured rows of one that it does, scaled by the family's roofline ratio
(:class:`Rescaled`); read from rows that time work the engine does not do, less that
work's time as other cards' rows measured it both ways (:class:`Offset`); or read beyond
the largest value its rows reach along one configuration axis as another card of the same
design measured the growth from there (:class:`Extended`). The measured rows stay a
:class:`~.grids.Lookup`'s; this keeps their grid, their warnings and their derivation, and
says why they are read so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..units import format_value
from .grids import Lookup, Roofline


class _FromRows:
    """What a lookup read from another's measured rows (``source``) keeps of them: its
    name and arguments, table, kernels, release and unit note; where a point lies outside
    their grid and computes in their blocks. Beside them, the categories it is read at,
    the family's roofline on the card it stands for and why it is read so.
    """

    def __init__(self, source: Lookup, categories: Mapping[str, Any], roofline: Roofline,
                 describe_roofline: Callable[[Mapping[str, float]], str], why: str) -> None:
        self.source = source
        self.name = source.name
        self.arguments = source.arguments
        self.table = source.table
        self.kernel_sources = source.kernel_sources
        self.version = source.version
        self.later_than = source.later_than
        self.unit_note = source.unit_note
        self.categories = dict(categories)
        self.roofline = roofline
        self.describe_roofline = describe_roofline
        self.why = why

    def outside(self, *values: float) -> str | None:
        """Why this point lies outside the source's grid, or None."""
        return self.source.outside(*values)

    def blocks_at(self, *values: float) -> str | None:
        """The arguments this point computes in blocks of the largest measured size, or None."""
        return self.source.blocks_at(*values)


class Rescaled(_FromRows):
    """A lookup read for a format its table does not measure: the measured rows of
    another format (``source``, a :class:`Lookup`), each point scaled by the ratio of the
    family's roofline in the wanted format to its roofline in the measured one,
    ``t = t_measured · R_wanted / R_measured`` — the measured kernel's efficiency kept,
    the format's bytes and peak taken from the card's datasheet. ``why`` says which
    kernel the engine runs that no table times: a derivation prints it at every point,
    and the plugin that reads a rescaled lookup states it as a warning; :meth:`outside`
    keeps the measured format's own grid distance.

    >>> import numpy as np
    >>> from infermodel.kernels.rooflines import gemm
    >>> card = {"mem_bw": 8e12, "bfloat16_tc_flops": 2.25e15, "fp8_tc_flops": 4.5e15}
    >>> rows = {"m": np.array([1.0, 1024.0]), "n": np.array([4096.0] * 2),
    ...         "k": np.array([4096.0] * 2), "latency": np.array([0.02, 0.08])}
    >>> measured = Lookup(name="gemm", arguments=("m", "n", "k"), configs=("n", "k"),
    ...                   curve=("m",), table="demo", categories={"dtype": "bfloat16"},
    ...                   kernel_sources=("demo",), rows=rows,
    ...                   roofline=gemm({"dtype": "bfloat16"}, card)[0],
    ...                   describe_roofline=gemm({"dtype": "bfloat16"}, card)[1])
    >>> fp8 = gemm({"dtype": "fp8"}, card)
    >>> scaled = Rescaled(measured, {"dtype": "fp8"}, *fp8, "an FP8 kernel no table times")
    >>> scaled.explain(1.0, 4096.0, 4096.0)[0]
    'an FP8 kernel no table times: read as the measured rows below, scaled from dtype bfloat16 to fp8 by the roofline ratio 0.5001'
    >>> round(scaled(1.0, 4096.0, 4096.0) / measured(1.0, 4096.0, 4096.0), 3)   # half the bytes
    0.5
    """

    def __init__(self, source: Lookup, categories: Mapping[str, Any], roofline: Roofline,
                 describe_roofline: Callable[[Mapping[str, float]], str], why: str,
                 measured: Mapping[str, Any] | None = None) -> None:
        super().__init__(source, categories, roofline, describe_roofline, why)
        #: The categories the source was read at, in ``categories``' terms (default the
        #: source's own, as its table names them).
        self.measured = dict(source.categories if measured is None else measured)

    def _ratio(self, args: Sequence[Any]) -> Any:
        point = dict(zip(self.arguments, args))
        return self.roofline(point) / self.source.roofline(point)

    def __call__(self, *args: Any) -> Any:
        out = self.source(*args) * self._ratio(args)
        return float(out) if np.ndim(out) == 0 else out

    def point(self, *values: float) -> float:
        """The latency in seconds at one point (plain numbers)."""
        return float(self.source.point(*values) * self._ratio(values))

    def explain(self, *values: float) -> list[str]:
        """What a derivation prints under a formula that uses this lookup at one point
        (the scaling between formats or cards is stated here, as ``why``, at every point,
        not as a point outside the grid).
        """
        point = dict(zip(self.arguments, values))
        changed = [f"{k} {self.measured.get(k, '?')} to {v}"
                   for k, v in self.categories.items() if self.measured.get(k) != v]
        ratio = float(self._ratio(values))
        time = self.point(*values)
        roof = float(self.roofline(point))
        return [f"{self.why}: read as the measured rows below, scaled from "
                f"{', '.join(changed) or 'them'} by the roofline ratio {ratio:.4g}",
                *(f"  {line}" for line in self.source.explain(*values)),
                f"latency {time * 1e3:.5g} ms{self.unit_note}; roofline {roof * 1e3:.5g} ms "
                f"({self.describe_roofline(point)}): {roof / time:.1%} of it, the measured "
                "rows' own share, which the scaling keeps"]


class Offset(_FromRows):
    """A lookup read from rows that time work the engine does not do (``source``, a
    :class:`Lookup`), each point less that work's time as other cards measured it: the
    median, at the same point, of the rows of cards collected with the work
    (``with_work``, by card; the median, so that one card's outlier does not carry where
    three or more hold the work — with two it is their mean) less
    the rows of a card re-collected without it (``without``, on ``without_card``), never
    below zero, ``t = max(t_source − max(median(t_with) − t_without, 0), R)`` with ``R``
    the family's roofline on this card, the floor no kernel goes under. ``why`` says what
    the work is: a derivation prints it, and the work's time, at every point, and the
    plugin that reads such a lookup states it as a warning. The work is taken to cost
    this card what it cost those: fit for a time per call set by launches, not for work
    that scales with a card's bandwidth.

    >>> import numpy as np
    >>> from infermodel.kernels.rooflines import gemm
    >>> card = {"mem_bw": 8e12, "bfloat16_tc_flops": 2.25e15}
    >>> def rows(latency):
    ...     return Lookup(name="gemm", arguments=("m", "n", "k"), configs=("n", "k"),
    ...                   curve=("m",), table="demo", categories={"dtype": "bfloat16"},
    ...                   kernel_sources=("demo",), rows={"m": np.array([1.0, 1024.0]),
    ...                   "n": np.array([4096.0] * 2), "k": np.array([4096.0] * 2),
    ...                   "latency": np.array(latency)}, roofline=gemm({"dtype": "bfloat16"}, card)[0],
    ...                   describe_roofline=gemm({"dtype": "bfloat16"}, card)[1])
    >>> here, earlier, again = rows([50e-6, 1e-4]), rows([40e-6, 9e-5]), rows([10e-6, 6e-5])
    >>> less = Offset(here, {"card A": earlier}, again, "card B", *gemm({"dtype": "bfloat16"}, card),
    ...               "a chain no engine runs")
    >>> round(less(1.0, 4096.0, 4096.0) * 1e6, 3)          # 50 µs less the 30 µs the chain took
    20.0
    >>> less.explain(1.0, 4096.0, 4096.0)[0]
    'a chain no engine runs: these rows less its time at this point, 30 µs: the rows of card A, 40 µs, less those of card B, 10 µs'
    """

    def __init__(self, source: Lookup, with_work: Mapping[str, Lookup], without: Lookup,
                 without_card: str, roofline: Roofline,
                 describe_roofline: Callable[[Mapping[str, float]], str], why: str,
                 categories: Mapping[str, Any] | None = None) -> None:
        if not with_work:
            raise ValueError("an offset needs the rows of at least one card collected with the work")
        super().__init__(source, source.categories if categories is None else categories,
                         roofline, describe_roofline, why)
        #: The cards whose rows were collected with the work, and those rows.
        self.with_work = dict(with_work)
        self.without = without
        self.without_card = without_card

    @property
    def cards_named(self) -> str:
        """The cards collected with the work, in words ("a, b and c")."""
        cards = sorted(self.with_work)
        return cards[0] if len(cards) == 1 else ", ".join(cards[:-1]) + " and " + cards[-1]

    def _parts(self, reader: Callable[[Lookup], Any]) -> tuple[Any, Any, Any]:
        """(the rows with the work, their median across the cards; the rows without it;
        the work's time, never below zero).
        """
        with_work = np.median(np.stack(np.broadcast_arrays(
            *(np.asarray(reader(lookup), dtype=float) for lookup in self.with_work.values()))),
            axis=0)
        without = np.asarray(reader(self.without), dtype=float)
        return with_work, without, np.maximum(with_work - without, 0.0)

    def __call__(self, *args: Any) -> Any:
        _, _, work = self._parts(lambda lookup: lookup(*args))
        floor = self.roofline(dict(zip(self.arguments, args)))
        out = np.maximum(self.source(*args) - work, floor)
        return float(out) if np.ndim(out) == 0 else out

    def point(self, *values: float) -> float:
        """The latency in seconds at one point (plain numbers)."""
        _, _, work = self._parts(lambda lookup: lookup.point(*values))
        floor = float(self.roofline(dict(zip(self.arguments, values))))
        return max(float(self.source.point(*values)) - float(work), floor)

    def outside(self, *values: float) -> str | None:
        """Why this point lies outside the source's grid, or outside a grid the work's
        time is read from; or None.
        """
        own = self.source.outside(*values)
        others: dict[str, list[str]] = {}
        for card, lookup in (*self.with_work.items(), (self.without_card, self.without)):
            why = lookup.outside(*values)
            if why and why != own:
                others.setdefault(why, []).append(card)
        found = [own] if own else []
        found += [f"the work's time on {', '.join(cards)}: {why}" for why, cards in others.items()]
        return "; ".join(found) if found else None

    def explain(self, *values: float) -> list[str]:
        """What a derivation prints under a formula that uses this lookup at one point."""
        with_work, without, work = (float(x) for x in self._parts(
            lambda lookup: lookup.point(*values)))
        middle = "the rows" if len(self.with_work) == 1 else "the median of the rows"
        point = dict(zip(self.arguments, values))
        time = self.point(*values)
        roof = float(self.roofline(point))
        floored = " (the roofline: the rows less the work go under it)" if time <= roof else ""
        return [f"{self.why}: these rows less its time at this point, {format_value(work, 's')}: "
                f"{middle} of {self.cards_named}, {format_value(with_work, 's')}, less those of "
                f"{self.without_card}, {format_value(without, 's')}",
                *(f"  {line}" for line in self.source.explain(*values)),
                f"less the work: latency {time * 1e3:.5g} ms{self.unit_note}{floored}; roofline "
                f"{roof * 1e3:.5g} ms ({self.describe_roofline(point)}): {roof / time:.1%} of it"]


class Extended(_FromRows):
    """A lookup whose rows end along one configuration axis (``axis``, at ``edge``, the
    largest value they were measured at) where another card's rows of the same release
    (``beyond``, on ``beyond_card``) go further: inside the edge the own rows as they are;
    beyond it the own rows at the edge grown as the other card measured the growth from
    the edge to the point, ``t = t_own(edge) · t_other(x) / t_other(edge)``, in place of
    the roofline ratio a lookup extends its grid by. Fit where the two cards run the same
    kernels over the same fabric (a collective over more GPUs than one node holds, on
    racks whose NVLink reaches beyond the node): the other card's measured ratio carries
    the algorithm the engine switches to there, which no roofline knows. ``why`` says
    so: a derivation prints it, with both of the other card's times, at every point
    beyond the edge, and :meth:`outside` reports such a point (a warning says how it was
    read), as a lookup reports a point beyond its grid.

    >>> import numpy as np
    >>> from infermodel.kernels.rooflines import gemm
    >>> card = {"mem_bw": 8e12, "bfloat16_tc_flops": 2.25e15}
    >>> def rows(gpus, latency):
    ...     n = len(gpus)
    ...     return Lookup(name="demo", arguments=("m", "n", "k"), configs=("n", "k"),
    ...                   curve=("m",), table="demo", categories={"dtype": "bfloat16"},
    ...                   kernel_sources=("demo",), rows={"m": np.array([1.0] * n),
    ...                   "n": np.array(gpus), "k": np.array([4096.0] * n),
    ...                   "latency": np.array(latency)}, roofline=gemm({"dtype": "bfloat16"}, card)[0],
    ...                   describe_roofline=gemm({"dtype": "bfloat16"}, card)[1])
    >>> own, other = rows([2.0, 4.0], [10e-6, 12e-6]), rows([2.0, 4.0, 8.0], [9e-6, 12e-6, 6e-6])
    >>> wider = Extended(own, other, "card B", "n", "a faster kernel beyond the node")
    >>> round(wider(1.0, 8.0, 4096.0) * 1e6, 3)        # 12 µs at the edge, halved as on card B
    6.0
    >>> round(wider(1.0, 2.0, 4096.0) * 1e6, 3)        # inside the edge: the own rows
    10.0
    >>> wider.outside(1.0, 8.0, 4096.0)
    "n 8 beyond these rows (measured to 4): grown from there as card B's rows of the same release measure it (×0.5)"
    >>> wider.outside(1.0, 4.0, 4096.0) is None
    True
    """

    def __init__(self, source: Lookup, beyond: Lookup, beyond_card: str, axis: str,
                 why: str, categories: Mapping[str, Any] | None = None) -> None:
        super().__init__(source, source.categories if categories is None else categories,
                         source.roofline, source.describe_roofline, why)
        self.beyond = beyond
        self.beyond_card = beyond_card
        self.axis = axis
        self._at = source.arguments.index(axis)
        #: The largest value the own rows reach along the axis.
        self.edge = source.measured_values(axis)[-1]

    def _edge(self, args: Sequence[Any]) -> list[Any]:
        """The arguments with the axis held at the edge wherever they pass it."""
        out = list(args)
        out[self._at] = np.minimum(np.asarray(args[self._at], dtype=float), self.edge)
        return out

    def _edge_point(self, values: Sequence[float]) -> tuple[float, ...]:
        """One point's plain numbers with the axis held at the edge."""
        return tuple(float(v) for v in self._edge(values))

    def __call__(self, *args: Any) -> Any:
        passed = np.asarray(args[self._at], dtype=float) > self.edge
        if not np.any(passed):
            return self.source(*args)
        # Each point is read once: inside the edge from the own rows, beyond it from the
        # own rows at the edge and the other card's.
        shape = np.broadcast_shapes(*(np.shape(a) for a in args))
        where = np.broadcast_to(passed, shape)
        full = [np.broadcast_to(np.asarray(a, dtype=float), shape) for a in args]
        out = np.empty(shape)
        if not np.all(where):
            out[~where] = self.source(*(a[~where] for a in full))
        picked = [a[where] for a in full]
        edge = self._edge(picked)
        out[where] = self.source(*edge) * self.beyond(*picked) / self.beyond(*edge)
        return float(out) if np.ndim(out) == 0 else out

    def _growth(self, values: Sequence[float]) -> tuple[float, float]:
        """The other card's times at the point and at the edge."""
        return (float(self.beyond.point(*values)),
                float(self.beyond.point(*self._edge_point(values))))

    def point(self, *values: float) -> float:
        """The latency in seconds at one point (plain numbers)."""
        if values[self._at] <= self.edge:
            return float(self.source.point(*values))
        there, edge = self._growth(values)
        return float(self.source.point(*self._edge_point(values))) * there / edge

    def outside(self, *values: float) -> str | None:
        """Why this point lies outside the own grid, or None. Beyond the edge it always
        does: how it is read from there, then where it lies outside the own rows along
        the other axes or outside the other card's.
        """
        at = float(values[self._at])
        if at <= self.edge:
            return self.source.outside(*values)
        there, edge = self._growth(values)
        found = [f"{self.axis} {at:g} beyond these rows (measured to {self.edge:g}): grown "
                 f"from there as {self.beyond_card}'s rows of the same release measure it "
                 f"(×{there / edge:.3g})"]
        own = self.source.outside(*self._edge_point(values))
        if own:
            found.append(own)
        other = self.beyond.outside(*values)
        if other:
            found.append(f"the growth on {self.beyond_card}: {other}")
        return "; ".join(found)

    def blocks_at(self, *values: float) -> str | None:
        """The arguments this point computes in blocks of the largest measured size, or None."""
        return self.source.blocks_at(*self._edge_point(values))

    def explain(self, *values: float) -> list[str]:
        """What a derivation prints under a formula that uses this lookup at one point."""
        if values[self._at] <= self.edge:
            return self.source.explain(*values)
        there, edge = self._growth(values)
        at = float(values[self._at])
        point = dict(zip(self.arguments, values))
        time = self.point(*values)
        roof = float(self.roofline(point))
        return [f"{self.why}: these rows at {self.axis} {self.edge:g}, the most they reach, "
                f"grown to {at:g} by {self.beyond_card}'s rows, {format_value(there, 's')} at "
                f"{at:g} over {format_value(edge, 's')} at {self.edge:g} (×{there / edge:.4g})",
                *(f"  {line}" for line in self.source.explain(*self._edge_point(values))),
                f"grown: latency {time * 1e3:.5g} ms{self.unit_note}; roofline "
                f"{roof * 1e3:.5g} ms ({self.describe_roofline(point)}): {roof / time:.1%} of it"]


__all__ = ["Extended", "Offset", "Rescaled"]
