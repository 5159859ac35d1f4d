"""Number formats for stored weights and cached keys/values, with their metadata.

A :class:`Format` says how one class of values is stored: ``bits`` per code, whether
the codes are integers on a grid (``kind = "int"``) or small floating-point numbers
(``"float"``), a symmetric grid or one with a zero point, and how many values share
one scale (``granularity``: ``"none"``, ``"tensor"``, ``"channel"`` or ``"group"``
with ``group_size``). Scales and zero points are metadata, stored beside the codes:

* group of g values: ``bits + (scale_bits + zero_point_bits) / g`` bits per value
  (int4 with an fp16 scale per 128 values: 4 + 16/128 = 4.125);
* channel (one scale per row of length r): ``bits + (scale_bits + zero_point_bits) / r``
  (a 4,096-weight row: 16/4096 extra bits);
* tensor: one scale per tensor, a handful of bytes in a whole artifact;
* none: no metadata at all, for native floating formats (bf16, fp16, fp32) or for an
  idealised count "before scale metadata", as Module 10 states some of its figures.

Block-scaled (MX) formats are groups of 32 with an 8-bit shared scale: MXFP4 is
4 + 8/32 = 4.25 bits per value. NVFP4 has an FP8 (E4M3) scale per 16 values:
4 + 8/16 = 4.5 bits (its one fp32 scale per tensor is a few bytes). FP8 block-scaled
checkpoints (DeepSeek-V3's ``weight_block_size = [128, 128]``) keep one fp32 scale per
128×128 block of a weight matrix: 8 + 32/16,384 ≈ 8.002 bits.

Checkpoint formats read from a ``quantization_config``: AWQ and GPTQ store int4 (or
int8) codes with an fp16 scale and a packed zero point of the same width per group
(``int4-g128-zp4``: 4 + (16 + 4)/128 = 4.156 bits).

Named formats (:data:`NAMED_FORMATS`) cover the usual cases; a scenario may also give
an explicit table, optionally starting from a named format (``format = "int4-g128"``)
and overriding some keys.

References: Module 10: Inference and serving, "Range and resolution answer different
questions", "Symmetric round-to-nearest", "Offset the grid for a skewed range",
"Granularity costs metadata", "Quantise the cache and evaluate the final artifact";
Inference lab, "Fewer bits per weight".
"""

from __future__ import annotations

from typing import Any

import attrs

from infermodel.plugin import FieldValueError, structure, suggest

from . import M10

GRANULARITY = f"{M10}, 'Granularity costs metadata'"
RANGE = f"{M10}, 'Range and resolution answer different questions'"
CACHE = f"{M10}, 'Quantise the cache and evaluate the final artifact'"

KINDS = ("int", "float")
GRANULARITIES = ("none", "tensor", "channel", "group")
ACTIVATION_FORMATS = ("int8", "fp8", "fp4")
ACTIVATION_SCALES = ("static", "dynamic")
DISTRIBUTIONS = ("gaussian", "uniform")


@attrs.frozen
class Format:
    """A resolved storage format (what a scenario's format name or table means)."""

    bits: float
    kind: str = "int"
    symmetric: bool = True
    granularity: str = "tensor"
    group_size: int | None = None
    scale_bits: float = 16.0
    zero_point_bits: float = 0.0
    name: str | None = None
    description: str = ""
    #: Side of a square 2-D block sharing one scale (128 for 128×128), or None: the
    #: group runs along a row. Rows must then be tiled by ``block_side``, not the group.
    block_side: int | None = None
    #: The encoding of the codes (a name in :data:`encodings.ENCODINGS`), when known.
    element: str | None = None
    #: The encoding of the shared scale, when the format has one and it is known.
    scale_format: str | None = None

    @property
    def metadata_bits(self) -> float:
        """Bits of scale plus zero point stored per scale entry (0 without metadata)."""
        if self.granularity == "none":
            return 0.0
        return self.scale_bits + self.zero_point_bits

    def effective_bits(self, row_length: int | None = None, tensor_values: int | None = None) -> float:
        """Bits per stored value, metadata included.

        ``row_length`` is needed for per-channel scales and ``tensor_values`` (values
        sharing one per-tensor scale) for per-tensor scales; without it the per-tensor
        metadata counts as zero.

        >>> NAMED_FORMATS["int4-g128"].effective_bits()
        4.125
        >>> NAMED_FORMATS["mxfp4"].effective_bits()
        4.25
        """
        if self.granularity == "none":
            return float(self.bits)
        if self.granularity == "group":
            assert self.group_size is not None  # checked when the format is made
            return self.bits + self.metadata_bits / self.group_size
        if self.granularity == "channel":
            if row_length is None:
                raise ValueError("per-channel metadata needs the row length")
            return self.bits + self.metadata_bits / row_length
        return self.bits + (self.metadata_bits / tensor_values if tensor_values else 0.0)

    def label(self) -> str:
        """A short human description: the name, or the explicit settings."""
        parts = [f"{self.bits:g}-bit {self.kind}"]
        if self.granularity == "none":
            parts.append("no scale metadata")
        else:
            parts.append("symmetric" if self.symmetric else
                         f"zero point ({self.zero_point_bits:g}-bit)")
            where = {"tensor": "per tensor", "channel": "per channel (row)",
                     "group": f"per group of {self.group_size}"}[self.granularity]
            if self.block_side:
                where = f"per {self.block_side}×{self.block_side} block"
            parts.append(f"{self.scale_bits:g}-bit scale {where}")
        text = ", ".join(parts)
        return f"{self.name} ({text})" if self.name else text


def _named(name, bits, kind, granularity, *, group_size=None, scale_bits=16.0, zero_point_bits=0.0,
           description, block_side=None, element=None, scale_format=None):
    if element is None and kind == "int":
        element = f"uint{bits}" if zero_point_bits else f"int{bits}"
    if scale_format is None and granularity != "none":
        scale_format = {16: "fp16", 32: "fp32"}[int(scale_bits)]
    return Format(bits=float(bits), kind=kind, symmetric=zero_point_bits == 0, granularity=granularity,
                  group_size=group_size, scale_bits=float(scale_bits) if granularity != "none" else 0.0,
                  zero_point_bits=float(zero_point_bits), name=name, description=description,
                  block_side=block_side, element=element, scale_format=scale_format)


def _checkpoint_int_formats():
    """AWQ/GPTQ-style integer formats: int4/int8 per group, with a packed zero point or not."""
    for bits in (4, 8):
        for group in (32, 64, 128):
            if bits == 8:
                yield _named(f"int8-g{group}", 8, "int", "group", group_size=group,
                             description=f"symmetric int8, one fp16 scale per group of {group} values")
            yield _named(f"int{bits}-g{group}-zp{bits}", bits, "int", "group", group_size=group,
                         zero_point_bits=bits,
                         description=f"int{bits} with an fp16 scale and a packed {bits}-bit zero point "
                                     f"per {group} values (AWQ, GPTQ checkpoints)")


#: Named formats a scenario may use; each is a shorthand for an explicit table.
NAMED_FORMATS: dict[str, Format] = {f.name: f for f in (
    _named("fp32", 32, "float", "none", description="IEEE single precision, no scale",
           element="fp32"),
    _named("fp16", 16, "float", "none", description="IEEE half precision, no scale",
           element="fp16"),
    _named("bf16", 16, "float", "none", description="bfloat16 (fp32's range, 8 significand "
           "bits: 7 stored), no scale", element="bf16"),
    _named("fp8-e4m3", 8, "float", "tensor", scale_bits=32, element="E4M3",
           description="FP8 E4M3 (finite-only, max 448) with one fp32 scale per tensor"),
    _named("fp8-e5m2", 8, "float", "tensor", scale_bits=32, element="E5M2",
           description="FP8 E5M2 with one fp32 scale per tensor"),
    _named("int8", 8, "int", "channel",
           description="symmetric int8 with one fp16 scale per output row (per channel)"),
    _named("int8-b32", 8, "int", "group", group_size=32,
           description="block-scaled 8-bit (e.g. a KV cache): symmetric int8, one fp16 scale per 32 values"),
    _named("int4-g128", 4, "int", "group", group_size=128,
           description="symmetric int4, one fp16 scale per group of 128 values"),
    _named("int4-g64", 4, "int", "group", group_size=64,
           description="symmetric int4, one fp16 scale per group of 64 values"),
    _named("int4-g32", 4, "int", "group", group_size=32,
           description="symmetric int4, one fp16 scale per group of 32 values"),
    _named("int4-g128-zp", 4, "int", "group", group_size=128, zero_point_bits=16,
           description="int4 on a min-max grid, fp16 scale and fp16 zero point per 128 values"),
    _named("int4-g64-zp", 4, "int", "group", group_size=64, zero_point_bits=16,
           description="int4 on a min-max grid, fp16 scale and fp16 zero point per 64 values"),
    _named("mxfp4", 4, "float", "group", group_size=32, scale_bits=8, element="E2M1",
           scale_format="E8M0",
           description="OCP microscaling FP4 (E2M1 elements), one 8-bit shared scale per 32"),
    _named("mxfp6", 6, "float", "group", group_size=32, scale_bits=8, element="E2M3",
           scale_format="E8M0",
           description="OCP microscaling FP6 (E2M3 elements; the spec also defines E3M2), one "
                       "8-bit shared scale per 32"),
    _named("mxfp8", 8, "float", "group", group_size=32, scale_bits=8, element="E4M3",
           scale_format="E8M0",
           description="OCP microscaling FP8 (E4M3 elements; the spec also defines E5M2), one "
                       "8-bit shared scale per 32"),
    _named("nvfp4", 4, "float", "group", group_size=16, scale_bits=8, element="E2M1",
           scale_format="E4M3",
           description="NVIDIA FP4 (E2M1 elements), one FP8 E4M3 scale per 16 (plus one fp32 "
                       "scale per tensor)"),
    _named("fp8-b128", 8, "float", "group", group_size=128 * 128, scale_bits=32, block_side=128,
           element="E4M3",
           description="FP8 E4M3, one fp32 scale per 128×128 block of a weight matrix "
                       "(DeepSeek-V3's checkpoints)"),
    *_checkpoint_int_formats(),
)}


def unknown_format(name: str) -> FieldValueError:
    return FieldValueError(
        f"unknown number format {name!r}",
        expected="a named format (" + ", ".join(NAMED_FORMATS) + ") or a table with bits, granularity, ...",
        suggestion=suggest(name, NAMED_FORMATS))


# ---------------------------------------------------------------------------------
# Strict scenario types (each a marker with its own structure hook)
# ---------------------------------------------------------------------------------


def _number(value, expected):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldValueError(f"got {value!r}", expected=expected)
    return value


class Bits(float):
    """Bits per value: a number from 1 to 32."""


class MetadataBits(float):
    """Bits per scale or zero point: a number from 0 to 32."""


class SqnrBits(int):
    """Bits of a symmetric integer grid: an integer from 2 to 32."""


class GroupSize(int):
    """Values sharing one scale: a positive integer."""


def _bits(value, _type):
    number = _number(value, "a number of bits from 1 to 32")
    if not 1 <= number <= 32:
        raise FieldValueError(f"{number!r} bits is outside 1–32", expected="a number of bits from 1 to 32")
    return float(number)


def _metadata_bits(value, _type):
    number = _number(value, "a number of bits from 0 to 32")
    if not 0 <= number <= 32:
        raise FieldValueError(f"{number!r} bits is outside 0–32", expected="a number of bits from 0 to 32")
    return float(number)


def _sqnr_bits(value, _type):
    expected = "an integer number of bits from 2 to 32 (1 bit leaves no non-zero symmetric level)"
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldValueError(f"got {value!r}", expected=expected)
    if not 2 <= value <= 32:
        raise FieldValueError(f"{value!r} bits is outside 2–32", expected=expected)
    return value


def _group_size(value, _type):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FieldValueError(f"got {value!r}", expected="a positive integer number of values")
    return value


#: (type, structuring function) pairs; the quantization plugin registers them through
#: the ``infermodel_register_value_types`` hook.
VALUE_TYPES: list[tuple[type, object]] = []


def choice_type(name: str, choices: tuple[str, ...], doc: str) -> type:
    """A string type accepting only ``choices`` (with a close-match suggestion otherwise)."""
    cls = type(name, (str,), {"__doc__": doc, "choices": choices})

    def hook(value, _type):
        if not isinstance(value, str):
            raise FieldValueError(f"got {value!r}", expected="one of " + ", ".join(map(repr, choices)))
        if value not in choices:
            raise FieldValueError(f"got {value!r}", expected="one of " + ", ".join(map(repr, choices)),
                                  suggestion=suggest(value, choices))
        return value

    VALUE_TYPES.append((cls, hook))
    return cls


Kind = choice_type("Kind", KINDS, "How codes map to numbers: 'int' (a uniform grid) or 'float'.")
Granularity = choice_type("Granularity", GRANULARITIES,
                      "How many values share a scale: 'none', 'tensor', 'channel' or 'group'.")
ActivationFormat = choice_type("ActivationFormat", ACTIVATION_FORMATS,
                           "Arithmetic format of quantised activations: 'int8', 'fp8' or 'fp4'.")
ActivationScales = choice_type("ActivationScales", ACTIVATION_SCALES,
                               "Where per-tensor 8-bit activations take their scale: 'static' "
                               "(the checkpoint's calibrated input scales) or 'dynamic' (each "
                               "pass's amax).")
Distribution = choice_type("Distribution", DISTRIBUTIONS,
                       "Weight distribution giving max/σ: 'gaussian' or 'uniform'.")

VALUE_TYPES.extend([(Bits, _bits), (MetadataBits, _metadata_bits), (SqnrBits, _sqnr_bits),
                    (GroupSize, _group_size)])


@attrs.frozen
class FormatTable:
    """An explicit format: start from ``format`` (a name) or give ``bits``; other keys
    override. Unset: an integer grid, symmetric, per tensor (per group when
    ``group_size`` is given), fp16 scales, an fp16 zero point when not symmetric.
    """

    format: str | None = None
    bits: Bits | None = None
    kind: Kind | None = None
    symmetric: bool | None = None
    granularity: Granularity | None = None
    group_size: GroupSize | None = None
    scale_bits: MetadataBits | None = None
    zero_point_bits: MetadataBits | None = None


class FormatSpec:
    """A number format: a name such as ``"int4-g128"`` or a table (:class:`FormatTable`)."""

    #: How the levers page names this value type.
    type_description = 'number format name (such as "int4-g128") or a table of its bits, granularity, ...'


def resolve_table(table: FormatTable) -> Format:
    """Turn an explicit table into a :class:`Format`; raise FieldValueError if inconsistent."""
    base = None
    if table.format is not None:
        base = NAMED_FORMATS.get(table.format)
        if base is None:
            raise unknown_format(table.format)
    elif table.bits is None:
        raise FieldValueError("a format table needs bits (or a named base format)",
                              expected='bits = 4, or format = "int4-g128"')
    # base is set whenever bits is not (checked above).
    bits = table.bits if table.bits is not None else base.bits  # type: ignore[union-attr]
    kind = table.kind or (base.kind if base else "int")
    granularity = table.granularity
    group_size: int | None = table.group_size
    if granularity is None:
        if group_size is not None:
            granularity = "group"
        else:
            granularity = base.granularity if base else "tensor"
            group_size = base.group_size if base else None
    elif granularity == "group" and group_size is None and base is not None:
        group_size = base.group_size
    if granularity == "group" and group_size is None:
        raise FieldValueError('granularity = "group" needs group_size', expected="group_size = 128, for example")
    if granularity != "group" and table.group_size is not None:
        raise FieldValueError(f"group_size is given but granularity is {granularity!r}",
                              expected='granularity = "group" (or leave group_size out)')
    if granularity != "group":
        group_size = None
    if granularity == "none":
        if table.scale_bits is not None or table.zero_point_bits is not None or table.symmetric is False:
            raise FieldValueError('granularity = "none" stores no scale or zero point',
                                  expected="no scale_bits, zero_point_bits or symmetric = false")
        return Format(bits=bits, kind=kind, symmetric=True, granularity="none", scale_bits=0.0,
                      zero_point_bits=0.0, name=None, description="explicit format")
    if table.symmetric is not None:
        symmetric = table.symmetric
    elif table.zero_point_bits is not None:
        symmetric = table.zero_point_bits == 0
    else:
        symmetric = base.symmetric if base else True
    scale_bits: float
    if table.scale_bits is not None:
        scale_bits = table.scale_bits
    elif base is not None and base.granularity != "none":
        scale_bits = base.scale_bits
    else:
        scale_bits = 16.0
    if symmetric:
        if table.zero_point_bits:
            raise FieldValueError("a symmetric grid has no zero point",
                                  expected="symmetric = false, or no zero_point_bits")
        zero_point_bits = 0.0
    elif table.zero_point_bits is not None:
        zero_point_bits = table.zero_point_bits
    elif base is not None and base.zero_point_bits:
        zero_point_bits = base.zero_point_bits
    else:
        zero_point_bits = 16.0
    if kind == "float" and not symmetric:
        raise FieldValueError("a floating-point format has no zero point",
                              expected='kind = "int" for a zero-point grid')
    return Format(bits=bits, kind=kind, symmetric=symmetric, granularity=granularity,
                  group_size=group_size, scale_bits=scale_bits, zero_point_bits=zero_point_bits,
                  name=None, description="explicit format")


def _format_hook(value: Any, _type) -> Format:
    if isinstance(value, str):
        found = NAMED_FORMATS.get(value)
        if found is None:
            raise unknown_format(value)
        return found
    if isinstance(value, dict):
        keys = [a.name for a in attrs.fields(FormatTable)]
        for key in value:
            if key not in keys:
                raise FieldValueError(f"unknown key {key!r} in a format table",
                                      expected="keys among " + ", ".join(keys),
                                      suggestion=suggest(str(key), keys))
        return resolve_table(structure(value, FormatTable))
    raise FieldValueError(f"got {value!r}",
                          expected='a format name such as "int4-g128", or a table such as { bits = 4, group_size = 128 }')


VALUE_TYPES.append((FormatSpec, _format_hook))


__all__ = [
    "ACTIVATION_SCALES",
    "CACHE",
    "GRANULARITY",
    "NAMED_FORMATS",
    "RANGE",
    "ActivationFormat",
    "ActivationScales",
    "Bits",
    "Distribution",
    "Format",
    "FormatSpec",
    "FormatTable",
    "Granularity",
    "GroupSize",
    "Kind",
    "MetadataBits",
    "SqnrBits",
    "choice_type",
    "resolve_table",
    "unknown_format",
]
