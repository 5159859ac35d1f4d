"""What plugins declare: scenario fields, levers, presets, witnesses and their options,
number formats and quantisers.

These records get their own module, at the bottom of the package, so that the
schema, the registries and the plugin host can all import them without importing
each other. It imports nothing of :mod:`infermodel` (a test checks it).

>>> FieldSpec("workload", "batch", "int", "requests decoded together", "physics").path
'workload.batch'
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default for a field the scenario must give.
REQUIRED: Any = _Required()

#: Sections whose fields are declared by plugins through ``infermodel_register_fields``.
FIELD_SECTIONS = ("model", "hardware", "workload", "efficiency", "pricing")
#: What a field may hold (see :meth:`FieldSpec.expected` for each one's wording).
FIELD_KINDS = ("int", "float", "quantity", "bool", "str", "choice", "size_or_fraction")
#: Kinds of preset file a plugin may contribute: each names the scenario table it fills.
PRESET_KINDS = ("model", "hardware", "efficiency")

#: Base units in words, for "a number in ..." phrases.
UNIT_WORDS = {"B": "bytes", "s": "seconds", "B/s": "bytes per second", "FLOP/s": "FLOP per second",
              "USD": "US dollars", "USD/h": "US dollars per hour", "W": "watts", "J": "joules"}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


@attrs.frozen
class FieldSpec:
    """One scenario field: where it lives, what it accepts, what it feeds.

    ``example`` is a value with a unit (``"24 GB"``) quoted in messages about a
    ``quantity`` field; the registry fills it in from :data:`infermodel.units.EXAMPLES`.
    """

    section: str
    name: str
    kind: str
    description: str
    plugin: str
    unit: str = "1"
    default: Any = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    choices: tuple[str, ...] | None = None
    quantity: str | None = None
    example: str | None = None

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float", "quantity")

    def expected(self) -> str:
        """A phrase saying what the field accepts, for error messages and docs.

        >>> FieldSpec("workload", "batch", "int", "d", "p", minimum=1).expected()
        'an integer, >= 1'
        """
        if self.kind == "int":
            text = "an integer"
        elif self.kind == "float":
            text = "a number"
        elif self.kind == "quantity":
            example = f" such as {self.example!r}" if self.example else ""
            text = f"a string with a unit{example}, or a number in {UNIT_WORDS.get(self.unit, self.unit)}"
        elif self.kind == "bool":
            text = "true or false"
        elif self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.choices or ())
        elif self.kind == "size_or_fraction":
            text = 'a size with a unit such as "2.5 GB", or a fraction such as 0.1'
        else:
            text = "a string"
        bounds = []
        if self.minimum is not None:
            bounds.append(f"{'>' if self.exclusive_minimum else '>='} {_num(self.minimum)}")
        if self.maximum is not None:
            bounds.append(f"<= {_num(self.maximum)}")
        if bounds and self.kind in ("int", "float", "quantity"):
            text += ", " + " and ".join(bounds)
        return text


class Stage(enum.IntEnum):
    """When a transformation runs: ``transform.wrap(..., order=Stage.PARALLELISM)``.

    Transformations apply in ascending order (then plugin name, then call order), so
    that a lever changing a quantity sees the changes of the stages before it. A
    plugin may use any integer in between (``Stage.PARALLELISM + 10``).

    >>> sorted([Stage.COST, Stage.NUMBER_FORMATS]) == [100, 900]
    True
    """

    #: Number formats and quantization: bytes per weight and per cached value.
    NUMBER_FORMATS = 100
    #: Model structure: mixture of experts, what a token reads.
    MODEL_STRUCTURE = 200
    #: Hardware and parallelism: several cards, links, offload.
    PARALLELISM = 300
    #: Serving algorithms: speculative decoding, prefix caching.
    ALGORITHMS = 400
    #: Everything else (batching policies); the default.
    DEFAULT = 500
    #: Prices and costs, computed from everything above.
    COST = 900


@attrs.frozen
class LeverInfo:
    """A lever: the attrs class its ``[levers.<name>]`` table is structured into."""

    name: str
    schema: type
    description: str
    plugin: str
    reference: str | None = None


#: Option kinds a user may write (in a scenario table or as ``--option key=value``).
OPTION_KINDS = (int, float, bool, str)


@attrs.frozen
class Option:
    """One option of a witness: its default, what it means and its accepted range.

    The kind (int, float, bool or str) is the default's type unless ``kind`` says
    otherwise (needed when the default is ``None``, meaning "derive it").

    >>> Option(16, "model width", minimum=1, maximum=512).kind
    <class 'int'>
    """

    default: Any
    description: str
    kind: type = attrs.field(default=None)
    minimum: float | None = None
    maximum: float | None = None

    def __attrs_post_init__(self) -> None:
        kind = self.kind if self.kind is not None else type(self.default)
        if kind not in OPTION_KINDS:
            raise TypeError(f"an option's kind is one of int, float, bool, str, not {kind!r} "
                            "(give kind= when the default is None)")
        object.__setattr__(self, "kind", kind)

    def expected(self) -> str:
        text = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[self.kind]
        bounds = []
        if self.minimum is not None:
            bounds.append(f">= {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        return text + (", " + " and ".join(bounds) if bounds else "")

    def parse(self, value: Any) -> Any:
        """The typed value of ``value`` (a TOML value, or the text of ``--option``).

        Raises ``ValueError`` saying what is wrong.
        """
        kind = self.kind
        if value is None and self.default is None:
            return None         # "derive it", as the default says (TOML and --option cannot write it)
        if kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ValueError(f"got {value!r}")
        if kind is str:
            if isinstance(value, str):
                return value
            raise ValueError(f"got {value!r}")
        if isinstance(value, bool):
            raise ValueError(f"got {value!r}")
        number: Any = value
        if isinstance(value, str):
            try:
                number = int(value.strip()) if kind is int else float(value.strip())
            except ValueError:
                raise ValueError(f"got {value!r}") from None
        if kind is int and not isinstance(number, int):
            raise ValueError(f"got {value!r}")
        if kind is float:
            if not isinstance(number, (int, float)):
                raise ValueError(f"got {value!r}")
            number = float(number)
            if not math.isfinite(number):
                raise ValueError(f"got {value!r}")
        if self.minimum is not None and number < self.minimum:
            raise ValueError(f"{number!r} is below {self.minimum:g}")
        if self.maximum is not None and number > self.maximum:
            raise ValueError(f"{number!r} is above {self.maximum:g}")
        return number


@attrs.frozen
class WitnessInfo:
    """A witness experiment: its function, its options and who registered it."""

    name: str
    function: Callable[..., Any]
    description: str
    plugin: str
    reference: str | None = None
    options: Mapping[str, Option] = attrs.field(factory=dict)


#: What a number format's codes are: floating-point numbers or integers on a grid.
ENCODING_KINDS = ("float", "int")


@attrs.frozen
class Encoding:
    """How one stored code becomes a number: its range and its resolution.

    For a floating-point encoding the figures are numbers; for an integer grid they are
    codes, in units of the scale the grid is stored with (largest code 7 for symmetric
    int4). ``epsilon`` is the spacing above one (``2**-m`` for m fraction bits; one code
    for an integer grid), not an error bound over all values; ``smallest_subnormal`` is
    None when the encoding has none (or is an integer grid).

    >>> Encoding("int4", "int", 4, 7, -7, 1, None, 1, False, False, "clamped").range
    (-7, 7)
    """

    name: str
    kind: str
    bits: int
    largest: float
    lowest: float
    smallest_normal: float
    smallest_subnormal: float | None
    epsilon: float
    infinity: bool
    nan: bool
    #: What a value beyond ``largest`` becomes, in words.
    overflow: str
    description: str = ""

    @property
    def range(self) -> tuple[float, float]:
        return (self.lowest, self.largest)


@attrs.frozen
class NumberFormatInfo:
    """A storage format: its element codes, the scale beside them and their bits.

    ``metadata_bits`` are the bits of one shared scale plus its zero point;
    ``values_per_scale`` how many values share them (None when that depends on the
    tensor: one scale per row or per tensor). ``granularity`` is ``"none"`` (no
    metadata), ``"tensor"``, ``"channel"`` or ``"group"``.
    """

    name: str
    description: str
    bits: float
    element: Encoding
    plugin: str
    metadata_bits: float = 0.0
    granularity: str = "none"
    values_per_scale: int | None = None
    scale: Encoding | None = None
    reference: str | None = None

    @property
    def bits_per_value(self) -> float | None:
        """Bits per stored value with the metadata spread over the values sharing it:
        ``bits + metadata_bits / values_per_scale`` (None when that is unknown).
        """
        if self.granularity == "none":
            return float(self.bits)
        if self.values_per_scale is None:
            return None
        return self.bits + self.metadata_bits / self.values_per_scale


@attrs.frozen
class Quantisation:
    """Values rounded onto a grid of integer codes, and what came back.

    ``reconstruction[i] = scale * (codes[i] - zero_point)``; the codes run from
    ``lowest_code`` to ``highest_code``. ``rms_error`` is the root mean square of
    ``reconstruction - values`` and ``max_error`` its largest magnitude.
    """

    method: str
    bits: int
    values: tuple[float, ...]
    scale: float
    zero_point: int
    lowest_code: int
    highest_code: int
    codes: tuple[int, ...]
    reconstruction: tuple[float, ...]
    rms_error: float
    max_error: float


@attrs.frozen
class QuantiserInfo:
    """A quantiser of given values: ``function(values, *, bits, zero_point)`` returns a
    :class:`Quantisation`.
    """

    name: str
    function: Callable[..., Any]
    description: str
    plugin: str
    reference: str | None = None


@attrs.frozen
class HeadlineInfo:
    """A quantity the short summary of ``infermodel run`` shows, under ``group``."""

    group: str
    name: str
    label: str
    plugin: str
    #: The outcome each whole-number value names (``choices[value]``), or None.
    choices: tuple[str, ...] | None = None
    #: Quantities bounding the range a measurement of it is expected in (low, high),
    #: shown beside it where the result has them; None: no interval.
    interval: tuple[str, str] | None = None

    def show_choice(self, value: Any) -> str | None:
        """``choices[value]`` for a whole-number value within range, else None."""
        if self.choices is None:
            return None
        try:
            index = int(value)
        except (TypeError, ValueError, OverflowError):
            return None
        if index != value or not 0 <= index < len(self.choices):
            return None
        return self.choices[index]


@attrs.frozen
class TypicalSettingInfo:
    """A lever's typical setting, which ``infermodel rank`` applies, and who declared it."""

    name: str
    #: ``setting(result)``: the fields to set on the evaluated scenario, or None.
    setting: Callable[..., Any]
    description: str
    plugin: str
    lever: str | None = None
    reference: str | None = None


@attrs.frozen
class PresetInfo:
    """A preset file (a model, a card or an engine's efficiencies) and the plugin that provides it."""

    kind: str
    name: str
    path: Path
    plugin: str


def _names(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen
class Kernel:
    """A measured kernel an operator runs, described for the measured kernel tables.

    An operator (:func:`~infermodel.hookspecs.infermodel_define_operators`) names the
    kernels it is made of, whole-model: a lever that prices operators from measured
    tables (``efficiency.kernels = "measured"``) splits the arguments named in ``split``
    among the tensor-parallel ranks, picks the dtype from the format of the weight
    class ``weights``, and multiplies the kernel's time by ``calls`` and ``share``.

    Kernels with an ``option`` are alternatives: of an operator's options, the first
    (in the order they appear) whose kernels the tables all serve is used, with the
    kernels that have no option (a latent attention module measured whole, or its
    parts). The family ``"roofline"`` is work no table measures, named so that it is
    timed at its roofline and reported as such: its shape holds ``flops`` and ``bytes``.
    The family ``"elementwise"`` is a kernel no table measures by nature (a norm, an
    activation): its roofline (an operator's own, or its shape's ``flops`` and ``bytes``
    beside measured kernels) plus ``calls`` times the card's fixed kernel time, unwarned.

    >>> Kernel("gemm", {"m": 32, "n": 6144, "k": 4096}, calls=32, split=("n",)).family
    'gemm'
    """

    #: The table family (see :mod:`infermodel.kernels.catalog`: ``"gemm"``,
    #: ``"context_attention"``, ``"moe"``, ``"all_reduce"``, ...), or ``"roofline"``.
    family: str
    #: The family's arguments, each a sympy expression over quantities (or a number).
    shape: Mapping[str, Any] = attrs.field(converter=dict)
    #: Calls per pass or step (the layers that run it), an expression or a number.
    calls: Any = 1
    #: Arguments divided among the tensor-parallel ranks (a GEMM's n when its columns
    #: are split, its k when its rows are; attention's heads and KV heads).
    split: tuple[str, ...] = attrs.field(default=(), converter=_names)
    #: Weight class whose number format sets the dtype (``"linear"``, ``"experts"``,
    #: ``"embedding"``; ``"attention"``, ``"latent"`` and ``"mixers"``: the block linears'
    #: format unless the checkpoint keeps that group in 16 bits, ``model.unquantized``),
    #: or None for 16-bit weights; an unknown name keeps the kernel at its roofline, warned.
    weights: str | None = None
    #: Share of the kernel's time this operator takes (a fused kernel shared by two), a
    #: number or an expression.
    share: Any = 1.0
    #: A short name for the kernel within its operator (``"gate_up"``, ``"down"``).
    label: str = ""
    #: The alternative this kernel belongs to (``""``: every alternative).
    option: str = ""
    #: Whose tokens and which cards run it under a layout with data-parallel attention
    #: or expert parallelism: ``"mixer"`` (each attention rank's own tokens, split over
    #: its tensor cards), ``"dense"`` and ``"shared"`` (dense layers, the head, the
    #: router; shared experts: placed as the layout places their weights), ``"routed"``
    #: (the routed experts: every token of the stage, over the expert ranks).
    group: str = "mixer"
    #: Kernels the engine runs on two CUDA streams at once (``""``: none). Of an
    #: operator's kernels that name the same ``overlap``, those with ``side`` run on a
    #: second stream beside the others; where ``overlap_when`` holds (a sympy condition
    #: over quantities, or True) the group takes the longer stream's time, else both
    #: streams' sum. ``overlap_graphs``: the engine overlaps them only in the passes it
    #: replays as a captured CUDA graph, so a serving iteration with a prompt in it runs
    #: them one after the other.
    overlap: str = ""
    side: bool = False
    overlap_when: Any = True
    overlap_graphs: bool = False
    #: An elementwise kernel that every tensor-parallel card of an attention rank runs
    #: over all of that rank's tokens (a norm over the model width, which no card splits):
    #: its roofline is one card's, at the card's own bandwidth, rather than the cards'
    #: even share of the whole model's.
    whole: bool = False
    #: A GEMM the engine runs in a format no table holds (a router kept in 32 bits): the
    #: card's rate for it, FLOP/s (an expression over quantities). Its table's rows in the
    #: dtype ``weights`` names stand in, and it takes at least its ``2·m·n·k`` FLOPs (of
    #: one rank's shape) at this rate; a note says so.
    compute_rate: Any = None


def accepts(text: str) -> Callable[[Any], Any]:
    """Mark a lever field's attrs validator with what it accepts, in words (``"> 0"``,
    ``"0 to 32"``): the documentation's lever tables show it beside the field's type,
    as they show the bounds of attrs' own validators (``attrs.validators.ge(1)``).
    A field's ``metadata={"accepts": ...}`` says the same for one field.

    >>> @accepts("> 0")
    ... def positive(instance, attribute, value):
    ...     if not value > 0:
    ...         raise ValueError(f"{attribute.name} = {value!r} must be greater than 0")
    >>> validator_bounds(positive)
    '> 0'
    """
    def mark(validator: Any) -> Any:
        setattr(validator, "accepts", text)  # noqa: B010  (a function's own attribute)
        return validator

    return mark


#: attrs' comparison validators' operators, as the documentation writes them.
_COMPARISONS = {">=": "≥", ">": ">", "<=": "≤", "<": "<"}


def validator_bounds(validator: Any) -> str | None:
    """What an attrs validator accepts, in words, where that can be known: the text
    :func:`accepts` gave it, or the bound of attrs' own ``ge``/``gt``/``le``/``lt``
    and ``in_`` validators (also inside ``optional``); None otherwise.

    >>> validator_bounds(attrs.validators.optional(attrs.validators.ge(1)))
    '≥ 1'
    """
    if validator is None:
        return None
    text = getattr(validator, "accepts", None)
    if isinstance(text, str):
        return text
    op = getattr(validator, "compare_op", None)
    if op in _COMPARISONS:
        return f"{_COMPARISONS[op]} {validator.bound!r}"
    options = getattr(validator, "options", None)
    if isinstance(options, (tuple, list, set, frozenset)):
        return "one of " + ", ".join(repr(o) for o in options)
    inner = getattr(validator, "validator", None)  # attrs.validators.optional
    return validator_bounds(inner) if inner is not None and inner is not validator else None


__all__ = [
    "ENCODING_KINDS",
    "FIELD_KINDS",
    "FIELD_SECTIONS",
    "OPTION_KINDS",
    "PRESET_KINDS",
    "REQUIRED",
    "UNIT_WORDS",
    "Encoding",
    "FieldSpec",
    "Kernel",
    "LeverInfo",
    "NumberFormatInfo",
    "Option",
    "PresetInfo",
    "Quantisation",
    "QuantiserInfo",
    "Stage",
    "TypicalSettingInfo",
    "WitnessInfo",
    "accepts",
    "validator_bounds",
]
