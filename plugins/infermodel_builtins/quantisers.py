"""Round-to-nearest quantisers of given values: a symmetric grid and a min-max grid.

For b signed bits let q = 2^(b−1) − 1. **Symmetric absmax** rounding uses the codes
−q … q (the extra negative code unused) with one scale s = max|w|/q:

    c = clamp(round(w/s), −q, q),      ŵ = s·c.

Nothing is clipped and zero stays exactly zero; |w − ŵ| ≤ s/2 (Module 10: Inference and
serving, "Symmetric round-to-nearest"; Inference lab, "Fewer bits per weight").

A **min-max zero-point** grid uses the unsigned codes 0 … 2^b − 1 with

    s = (max w − min w)/(2^b − 1),     z = round(−min w / s),
    c = clamp(round(w/s) + z, 0, 2^b − 1),     ŵ = s·(c − z),

so a skewed range spends its levels where the values are (Module 10, "Offset the grid
for a skewed range"). The zero point is an integer kept beside the scale and is not
clamped to the code range (Lab 4's floating zero-point convention: when every value is
positive it is negative). Rounding is to the nearest integer with ties to even, as
numpy and PyTorch round.

A constant group has no spread to divide: its scale is |w|/(2^b − 1) (the code range
spans the value from zero), or 1 for an all-zero group, whose codes are all zero under
any scale. That is the "special case" Module 10 asks for; Lab 4 instead clamps the
scale to at least 10^−12, which gives the same reconstruction.

:func:`quantise_values` is the ``rtn`` quantiser ``infermodel quantize`` runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from infermodel.plugin import InfermodelError, Problem, Quantisation, hookimpl

from . import LAB, M10

SYMMETRIC = f"{M10}, 'Symmetric round-to-nearest'; {LAB}, 'Fewer bits per weight'"
ZERO_POINT = f"{M10}, 'Offset the grid for a skewed range'"
#: Bits a quantiser accepts: one bit leaves a symmetric grid no non-zero level.
SYMMETRIC_BITS = (2, 16)
ZERO_POINT_BITS = (1, 16)


def levels(bits: int) -> int:
    """q = 2^(b−1) − 1, the non-zero levels on each side of a symmetric grid.

    >>> levels(4), levels(8)
    (7, 127)
    """
    return 2 ** (bits - 1) - 1


def symmetric_grid(rows: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes and scales of symmetric absmax rounding, one scale per row.

    >>> codes, scale = symmetric_grid(np.array([[0.7, -0.1, 0.35]]), 4)
    >>> codes.tolist(), scale.ravel().tolist()
    ([[7.0, -1.0, 4.0]], [0.09999999999999999])
    """
    q = levels(bits)
    scale = np.abs(rows).max(axis=-1, keepdims=True) / q
    scale = np.where(scale > 0, scale, 1.0)
    return np.clip(np.round(rows / scale), -q, q), scale


def zero_point_grid(rows: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes, scales and zero points of min-max rounding, one of each per row.

    >>> codes, scale, zero = zero_point_grid(np.array([[-0.3, 0.0, 1.2]]), 4)
    >>> codes.tolist(), round(float(scale[0, 0]), 6), zero.ravel().tolist()
    ([[0.0, 3.0, 15.0]], 0.1, [3.0])
    """
    top = 2 ** bits - 1
    low = rows.min(axis=-1, keepdims=True)
    high = rows.max(axis=-1, keepdims=True)
    scale = (high - low) / top
    # A constant row reconstructs exactly with scale |w| / top (code top or 0); one whose
    # |w| / top underflows to zero (a subnormal value) takes scale 1 instead.
    constant = np.abs(low) / top
    scale = np.where(scale > 0, scale, np.where(constant > 0, constant, 1.0))
    zero = np.round(-low / scale)
    return np.clip(np.round(rows / scale) + zero, 0, top), scale, zero


def rms(errors: np.ndarray) -> float:
    """Root mean square of the errors."""
    return math.sqrt(float(np.mean(np.square(errors))))


def _check_bits(bits: int, zero_point: bool) -> None:
    low, high = ZERO_POINT_BITS if zero_point else SYMMETRIC_BITS
    if isinstance(bits, bool) or not isinstance(bits, int) or not low <= bits <= high:
        grid = "a zero-point grid" if zero_point else "a symmetric grid (1 bit has no non-zero level)"
        raise InfermodelError(Problem(f"--bits {bits!r} is outside {low}–{high} for {grid}",
                                      key="--bits", expected=f"an integer from {low} to {high}"))


def quantise_values(values: Sequence[float], *, bits: int, zero_point: bool) -> Quantisation:
    """Round ``values`` with one scale onto a b-bit symmetric or min-max grid.

    Module 10's eight-weight example has scale 1.39/15 and zero point 5 at 4 bits:

    >>> q = quantise_values([-0.48, 0.91], bits=4, zero_point=True)
    >>> q.codes, q.zero_point, round(q.scale * 15, 12)
    ((0, 15), 5, 1.39)
    """
    _check_bits(bits, zero_point)
    w = np.asarray(values, dtype=float).reshape(1, -1)
    if w.size == 0 or not np.all(np.isfinite(w)):
        raise InfermodelError(Problem("a quantiser needs at least one finite value",
                                      expected="numbers such as 0.12 -0.48 0.91"))
    if zero_point:
        codes, scale, zero = zero_point_grid(w, bits)
        low, high, z = 0, 2 ** bits - 1, int(zero[0, 0])
        method = "rtn, min-max grid with a zero point"
    else:
        codes, scale = symmetric_grid(w, bits)
        low, high, z = -levels(bits), levels(bits), 0
        method = "rtn, symmetric absmax grid"
    s = float(scale[0, 0])
    if not math.isfinite(s):
        raise InfermodelError(Problem("the values spread wider than a float64 scale can hold",
                                      expected="values of magnitude at most 1e300"))
    reconstruction = s * (codes[0] - z)
    error = reconstruction - w[0]
    return Quantisation(
        method=method, bits=bits, values=tuple(float(v) for v in w[0]), scale=s, zero_point=z,
        lowest_code=low, highest_code=high, codes=tuple(int(c) for c in codes[0]),
        reconstruction=tuple(float(v) for v in reconstruction), rms_error=rms(error),
        max_error=float(np.max(np.abs(error))))


@hookimpl
def infermodel_register_quantisers(register):
    register("rtn", quantise_values,
             description="round to nearest with one scale: symmetric absmax codes −q…q, or "
                         "unsigned codes 0…2^b − 1 with a zero point (min-max)",
             reference=f"{SYMMETRIC}; {ZERO_POINT}")


__all__ = [
    "SYMMETRIC",
    "ZERO_POINT",
    "levels",
    "quantise_values",
    "rms",
    "symmetric_grid",
    "zero_point_grid",
]
