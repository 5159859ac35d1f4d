"""A lookup read for what its table does not measure — another format, another card —
from the measured rows of one that it does, scaled by the family's roofline ratio
(:class:`Rescaled`). The measured rows stay a :class:`~.grids.Lookup`'s; this keeps
their grid, their warnings and their derivation, and says why they stand in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .grids import Lookup, Roofline


class Rescaled:
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
        self.source = source
        #: The categories the source was read at, in ``categories``' terms (default the
        #: source's own, as its table names them).
        self.measured = dict(source.categories if measured is None else measured)
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

    def _ratio(self, args: Sequence[Any]) -> Any:
        point = dict(zip(self.arguments, args))
        return self.roofline(point) / self.source.roofline(point)

    def __call__(self, *args: Any) -> Any:
        out = self.source(*args) * self._ratio(args)
        return float(out) if np.ndim(out) == 0 else out

    def point(self, *values: float) -> float:
        """The latency in seconds at one point (plain numbers)."""
        return float(self.source.point(*values) * self._ratio(values))

    def outside(self, *values: float) -> str | None:
        """Why this point lies outside the measured format's grid, or None (the scaling
        between formats is the reader's to state, as ``why``: every point has it).
        """
        return self.source.outside(*values)

    def blocks_at(self, *values: float) -> str | None:
        """The arguments this point computes in blocks of the largest measured size, or None."""
        return self.source.blocks_at(*values)

    def explain(self, *values: float) -> list[str]:
        """What a derivation prints under a formula that uses this lookup at one point."""
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


__all__ = ["Rescaled"]
