"""The codes of a number format: range and resolution, computed from the bit layout.

A floating-point code has a sign, ``e`` exponent bits and ``m`` fraction bits, with an
exponent bias. Exponent bits set the range, fraction bits the resolution near a given
magnitude (Module 10: Inference and serving, "Range and resolution answer different
questions"):

* machine epsilon, the spacing above one: 2^−m;
* smallest normal: 2^(1 − bias); smallest subnormal: 2^(1 − bias − m);
* largest finite value, by how the top of the code space is spent:

  - ``"ieee"``: the all-ones exponent holds infinities and NaN, so the largest finite is
    (2 − 2^−m)·2^(2^e − 2 − bias) (fp32, fp16, bf16, FP8 E5M2: 57,344);
  - ``"nan-only"``: only the all-ones exponent *and* fraction is NaN, no infinity, so the
    largest finite is (2 − 2^(1−m))·2^(2^e − 1 − bias) (FP8 E4M3 in the finite-only
    convention of Micikevicius et al.: 1.75·2^8 = 448);
  - ``"none"``: every code is a finite number, (2 − 2^−m)·2^(2^e − 1 − bias) (the OCP
    microscaling elements E2M1: 6, E2M3: 7.5, E3M2: 28).

The shared scale of the OCP MX formats, E8M0, is an exponent alone: unsigned powers of
two 2^−127 … 2^127 with one NaN code, no fraction, no subnormals and a spacing above
one of one (the next value after 1 is 2).

An integer grid of b bits has codes, not values: a symmetric grid uses
−(2^(b−1) − 1) … 2^(b−1) − 1 (the extra negative code left unused), a zero-point grid the
unsigned codes 0 … 2^b − 1 (Module 10, "Symmetric round-to-nearest", "Offset the grid
for a skewed range"). Its figures are in units of the scale: the step is one code.

References: Micikevicius et al., "FP8 formats for deep learning" (2022); the OCP
Microscaling Formats (MX) specification v1.0; IEEE 754-2019.
"""

from __future__ import annotations

import math

from infermodel.plugin import Encoding

from . import M10

RANGE = f"{M10}, 'Range and resolution answer different questions'"
SPECIALS = ("ieee", "nan-only", "none")

_OVERFLOW = {
    "ieee": "rounds to ±infinity",
    "nan-only": "no infinity: a cast saturates to the largest finite value or gives NaN, "
                "by the kernel's convention",
    "none": "no infinity and no NaN: a cast saturates to the largest finite value",
}


def float_encoding(name: str, exponent_bits: int, fraction_bits: int, bias: int,
                   specials: str, *, description: str = "") -> Encoding:
    """The range and resolution of a signed floating-point code.

    >>> e4m3 = float_encoding("E4M3", 4, 3, 7, "nan-only")
    >>> e4m3.largest, e4m3.smallest_normal, e4m3.smallest_subnormal, e4m3.epsilon
    (448.0, 0.015625, 0.001953125, 0.125)
    >>> float_encoding("fp16", 5, 10, 15, "ieee").largest
    65504.0
    """
    if specials not in SPECIALS:
        raise ValueError(f"specials must be one of {SPECIALS}, not {specials!r}")
    if exponent_bits < 1 or fraction_bits < 1:
        raise ValueError("a signed float code needs at least one exponent and one fraction bit")
    top = 2 ** exponent_bits - 1                       # the all-ones exponent field
    if specials == "ieee":
        largest = (2 - 2.0 ** -fraction_bits) * 2.0 ** (top - 1 - bias)
    elif specials == "nan-only":
        largest = (2 - 2.0 ** (1 - fraction_bits)) * 2.0 ** (top - bias)
    else:
        largest = (2 - 2.0 ** -fraction_bits) * 2.0 ** (top - bias)
    return Encoding(
        name=name, kind="float", bits=1 + exponent_bits + fraction_bits, largest=largest,
        lowest=-largest, smallest_normal=2.0 ** (1 - bias),
        smallest_subnormal=2.0 ** (1 - bias - fraction_bits), epsilon=2.0 ** -fraction_bits,
        infinity=specials == "ieee", nan=specials != "none", overflow=_OVERFLOW[specials],
        description=description or f"{exponent_bits} exponent bits (bias {bias}), "
                                   f"{fraction_bits} fraction bits")


def exponent_encoding(name: str, exponent_bits: int, bias: int, *, description: str = "") -> Encoding:
    """An unsigned power-of-two code with one NaN (the MX scale E8M0).

    >>> e8m0 = exponent_encoding("E8M0", 8, 127)
    >>> e8m0.largest == 2.0 ** 127, e8m0.smallest_normal == 2.0 ** -127, e8m0.epsilon
    (True, True, 1.0)
    """
    top = 2 ** exponent_bits - 1
    return Encoding(
        name=name, kind="float", bits=exponent_bits, largest=2.0 ** (top - 1 - bias),
        lowest=2.0 ** -bias, smallest_normal=2.0 ** -bias, smallest_subnormal=None,
        epsilon=1.0, infinity=False, nan=True,
        overflow="no infinity: the all-ones code is NaN",
        description=description or f"unsigned power of two, 2^(k − {bias}); no sign, no fraction")


def int_encoding(bits: int, *, zero_point: bool = False) -> Encoding:
    """The codes of a b-bit integer grid: symmetric signed, or unsigned with a zero point.

    >>> int_encoding(4).range, int_encoding(4, zero_point=True).range
    ((-7, 7), (0, 15))
    """
    if bits < 2 and not zero_point:
        raise ValueError("a symmetric grid needs at least 2 bits")
    if zero_point:
        low, high = 0, 2 ** bits - 1
        name, what = f"uint{bits}", "unsigned codes on a min-max grid with a zero point"
    else:
        high = 2 ** (bits - 1) - 1
        low = -high
        name, what = f"int{bits}", "signed codes on a symmetric grid (the extra negative code unused)"
    return Encoding(name=name, kind="int", bits=bits, largest=high, lowest=low,
                    smallest_normal=1, smallest_subnormal=None, epsilon=1, infinity=False,
                    nan=False, overflow="clamped to the end codes by the quantiser",
                    description=f"{what}, in units of the scale")


FP32 = float_encoding("fp32", 8, 23, 127, "ieee", description="IEEE 754 binary32")
FP16 = float_encoding("fp16", 5, 10, 15, "ieee", description="IEEE 754 binary16")
BF16 = float_encoding("bf16", 8, 7, 127, "ieee",
                      description="bfloat16: fp32's exponent (range) with 7 fraction bits")
E4M3 = float_encoding("E4M3", 4, 3, 7, "nan-only",
                      description="FP8 E4M3, finite-only (max 448; S.1111.111 is NaN)")
E5M2 = float_encoding("E5M2", 5, 2, 15, "ieee", description="FP8 E5M2, IEEE-like with infinities")
E2M1 = float_encoding("E2M1", 2, 1, 1, "none",
                      description="FP4 element of MXFP4 and NVFP4: 0, 0.5, 1, 1.5, 2, 3, 4, 6")
E2M3 = float_encoding("E2M3", 2, 3, 1, "none", description="FP6 element of MXFP6 (E2M3 variant)")
E3M2 = float_encoding("E3M2", 3, 2, 3, "none", description="FP6 element of MXFP6 (E3M2 variant)")
E8M0 = exponent_encoding("E8M0", 8, 127, description="the OCP MX shared scale: a power of two")

#: Encodings by name, for the storage formats that use them.
ENCODINGS: dict[str, Encoding] = {e.name: e for e in (
    FP32, FP16, BF16, E4M3, E5M2, E2M1, E2M3, E3M2, E8M0,
    *(int_encoding(b) for b in (2, 3, 4, 5, 6, 8)),
    *(int_encoding(b, zero_point=True) for b in (2, 3, 4, 5, 6, 8, 16)),
)}


def encoding_values(encoding: Encoding) -> list[float]:
    """Every finite non-negative value of a small float code (at most 8 bits), ascending.

    >>> encoding_values(E2M1)
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    """
    if encoding.kind != "float" or encoding.bits > 8 or encoding.smallest_subnormal is None:
        raise ValueError("only small signed float codes are enumerated")
    fraction_bits = round(-math.log2(encoding.epsilon))
    tiny = encoding.smallest_subnormal
    values = [k * tiny for k in range(2 ** fraction_bits)]          # zero and subnormals
    scale = encoding.smallest_normal
    while True:
        for k in range(2 ** fraction_bits):
            value = scale * (1 + k * encoding.epsilon)
            if value > encoding.largest:
                return values
            values.append(value)
        scale *= 2


__all__ = [
    "BF16",
    "E2M1",
    "E2M3",
    "E3M2",
    "E4M3",
    "E5M2",
    "E8M0",
    "ENCODINGS",
    "FP16",
    "FP32",
    "RANGE",
    "encoding_values",
    "exponent_encoding",
    "float_encoding",
    "int_encoding",
]
