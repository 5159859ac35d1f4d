"""The figure helpers every plot of infermodel shares: matplotlib loaded on first use,
a new figure of stacked panels, axis formatters in a quantity's unit, and an atomic save.

matplotlib is imported only when a figure is made, and only its object-oriented API is
used (a :class:`~matplotlib.figure.Figure` saved through the Agg or SVG canvas), so that
drawing never touches a global backend or opens a window. The format follows the file's
extension (:data:`FORMATS`).

>>> figure, (top, bottom) = new_figure(rows=2)  # doctest: +SKIP
>>> save(figure, "out.svg")  # doctest: +SKIP
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..errors import InfermodelError, Problem

FORMATS = (".png", ".svg")
#: The line colours, in the order plots use them.
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def load_matplotlib():
    """matplotlib and its :class:`~matplotlib.figure.Figure`, or a user error saying how
    to install it.
    """
    try:
        import matplotlib
    except ImportError:
        raise InfermodelError(Problem(
            "plots need matplotlib, which is not installed",
            suggestion="pip install 'infermodel[plot]'")) from None
    from matplotlib.figure import Figure

    matplotlib.rcParams["svg.hashsalt"] = "infermodel"  # reproducible SVG ids
    return matplotlib, Figure


def new_figure(rows: int = 1, height: float = 4.6):
    """A figure of ``rows`` panels stacked on one x axis, and the panels."""
    _, Figure = load_matplotlib()
    figure = Figure(figsize=(8.0, height if rows == 1 else 3.3 * rows + 0.6), dpi=110,
                    layout="constrained")
    axes = figure.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    for ax in axes:
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
        ax.spines[["top", "right"]].set_visible(False)
    return figure, list(axes)


def unit_formatter(unit: str):
    """An axis formatter that writes values in ``unit`` (``"3.35 TB/s"``)."""
    from matplotlib.ticker import FuncFormatter

    from ..units import format_value

    if unit in ("1", "bool"):
        return FuncFormatter(lambda v, _: f"{v:g}")
    return FuncFormatter(lambda v, _: format_value(v, unit, digits=3))


def log_worthy(values: np.ndarray) -> bool:
    """Whether positive ``values`` span enough (30× or more) to want a log axis."""
    values = values[np.isfinite(values)]
    return bool(len(values) > 1 and (values > 0).all() and values.max() / values.min() >= 30)


def save(figure, output: str | Path) -> Path:
    """Write ``figure`` to ``output`` (``.png`` or ``.svg``) atomically; return the path."""
    from ..output import atomic_write

    path = Path(output)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InfermodelError(Problem(f"cannot write a plot to {str(path)!r}",
                                      expected="a file name ending in .png or .svg"))
    buffer = io.BytesIO()
    metadata = {"Software": "infermodel"} if suffix == ".png" else {"Date": None}
    figure.savefig(buffer, format=suffix[1:], metadata=metadata)
    atomic_write(path, buffer.getvalue())
    return path


__all__ = ["COLOURS", "FORMATS", "load_matplotlib", "log_worthy", "new_figure", "save",
           "unit_formatter"]
