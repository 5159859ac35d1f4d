"""Physical quantities written with units: parsing and human-readable formatting.

Scenario files may give a quantity either as a plain number already in the *base unit*
of its field, or as a string carrying its unit: ``"24 GB"``, ``"24 GiB"``,
``"3.35 TB/s"``, ``"989 TFLOP/s"``, ``"0.3 ms"``, ``"USD 2.50"``.  This module turns
both into a float in base units (:func:`parse_quantity`) and turns floats back into
short labels for reports (:func:`format_value`).

Base units (the ``unit`` argument of every function here)::

    "B"       bytes                "B/s"      bytes per second
    "s"       seconds              "FLOP"     floating-point operations
    "FLOP/s"  operations per s     "FLOP/B"   arithmetic intensity
    "USD"     US dollars           "USD/h"    US dollars per hour
    "W"       watts                "J"        joules
    "token"   tokens               "token/s"  tokens per second
    "bit"     bits                 "1"        dimensionless (also "param", a count)

Rules, chosen to be strict rather than clever:

* Decimal prefixes are ``k M G T P E`` (upper-case ``K`` is *not* accepted as a decimal
  prefix); binary prefixes ``Ki Mi Gi Ti Pi Ei`` apply to bytes and bytes/s only.
  ``"24 GB"`` is 24e9 bytes and ``"24 GiB"`` is 24 * 2**30 bytes; the two never mix.
* ``b`` after a prefix means *bits*: ``"24 Gb"`` is rejected where bytes are expected,
  with the suggestion ``"GB"``.
* ``"TFLOPS"`` and ``"TFLOPs"`` are read as TFLOP/s (datasheet usage), never as a
  count of operations.
* A unit of the wrong kind (``"24 GB"`` where a duration is expected) is an error that
  names what was expected.
* Negative numbers parse (``"-5 GB"`` is -5e9): whether a negative value is allowed is
  decided by the validation of each field, not here.
* Plain numbers must be finite and must not be booleans.  A string without a unit is
  accepted only for counts (``"1"``, ``"token"``, ``"param"``); elsewhere a unit is
  required so that ``"80"`` never silently means 80 bytes.

The module imports only the standard library so that it loads quickly.
"""

from __future__ import annotations

import math
import numbers
import re

__all__ = [
    "BASE_UNITS",
    "EXAMPLES",
    "EXPECTED",
    "UnitError",
    "accepted_units",
    "format_plain",
    "format_value",
    "parse_quantity",
    "parse_with_unit",
    "si_prefix",
]

# --------------------------------------------------------------------------- errors


class UnitError(ValueError):
    """A quantity could not be read in the unit a field expects.

    It has the three fields of :class:`infermodel.errors.Problem` that a value's error
    can know (this module imports nothing, not even the package's errors, so that it
    loads alone); :meth:`infermodel.errors.Problem.of` turns it into one.

    Attributes:
        message: what went wrong, naming the offending text.
        expected: what the field accepts, e.g. ``'a size such as "24 GB" ...'``.
        suggestion: a close, valid spelling of a misspelt unit, or ``None``.
    """

    def __init__(self, message: str, expected: str, suggestion: str | None = None):
        self.message = message
        self.expected = expected
        self.suggestion = suggestion
        super().__init__(str(self))

    def __str__(self) -> str:  # pragma: no cover - trivial
        text = f"{self.message}; expected {self.expected}"
        if self.suggestion:
            text += f' (did you mean "{self.suggestion}"?)'
        return text

    def __reduce__(self):
        return (type(self), (self.message, self.expected, self.suggestion))


# --------------------------------------------------------------------- unit tables

#: What each base unit accepts, in words, for error messages.
EXPECTED: dict[str, str] = {
    "B": 'a size such as "24 GB" or "24 GiB", or a number of bytes',
    "B/s": 'a bandwidth such as "3.35 TB/s" or "900 GB/s", or a number of bytes per second',
    "s": 'a duration such as "0.3 ms", "2 s" or "1 h", or a number of seconds',
    "FLOP": 'an operation count such as "2 TFLOP", or a number of FLOP',
    "FLOP/s": 'a compute rate such as "989 TFLOP/s" (or "989 TFLOPS"), or a number of FLOP/s',
    "FLOP/B": 'an arithmetic intensity such as "295 FLOP/B", or a number of FLOP per byte',
    "USD": 'an amount such as "USD 2.50", "2.50 USD" or "$2.50", or a number of US dollars',
    "USD/h": 'an hourly price such as "2.5 USD/h" or "$2.50/h", or a number of US dollars per hour',
    "W": 'a power such as "700 W" or "0.45 kW", or a number of watts',
    "J": 'an energy such as "3.6 MJ" or "1 kWh", or a number of joules',
    "token": 'a token count such as "6000" or "6000 tokens"',
    "token/s": 'a token rate such as "959 token/s", or a number of tokens per second',
    "bit": 'a number of bits such as "4.125 bit"',
    "1": 'a plain number such as 0.5, or a percentage such as "50 %"',
    "param": 'a parameter count such as 8030261248 or "8,030,261,248 params"',
}

#: The base units understood by :func:`parse_quantity` and :func:`format_value`.
BASE_UNITS: frozenset[str] = frozenset(EXPECTED)

#: One short example string per base unit, for help texts and documentation.
EXAMPLES: dict[str, str] = {
    "B": "24 GB",
    "B/s": "3.35 TB/s",
    "s": "0.3 ms",
    "FLOP": "2 TFLOP",
    "FLOP/s": "989 TFLOP/s",
    "FLOP/B": "295 FLOP/B",
    "USD": "USD 2.50",
    "USD/h": "2.5 USD/h",
    "W": "700 W",
    "J": "1 kWh",
    "token": "6000 tokens",
    "token/s": "959 token/s",
    "bit": "4.125 bit",
    "1": "50 %",
    "param": "8,030,261,248 params",
}

#: Kinds of quantity in words, for "this is a ..., but ... was expected" messages.
_KIND: dict[str, str] = {
    "B": "a size in bytes",
    "B/s": "a bandwidth",
    "s": "a duration",
    "FLOP": "an operation count",
    "FLOP/s": "a compute rate",
    "FLOP/B": "an arithmetic intensity",
    "USD": "an amount of money",
    "USD/h": "an hourly price",
    "W": "a power",
    "J": "an energy",
    "token": "a token count",
    "token/s": "a token rate",
    "bit": "a number of bits",
    "1": "a plain number",
    "param": "a parameter count",
}

_DECIMAL = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


class _per(float):
    """A conversion factor stored as its exact inverse: x units = x / divisor base units.

    Dividing by 1e6 gives ``5e-06`` for ``"5 us"``; multiplying by 1e-6 would not.
    """

    divisor: float

    def __new__(cls, divisor: float) -> _per:
        self = super().__new__(cls, 1.0 / divisor)
        self.divisor = divisor
        return self


def _apply(number: float, factor: float) -> float:
    if isinstance(factor, _per):
        return number / factor.divisor
    return number * factor


# alias -> (base unit, factor to base)
_ALIASES: dict[str, tuple[str, float]] = {}
# canonical spellings per base unit (for suggestions, in preference order)
_CANONICAL: dict[str, list[str]] = {u: [] for u in BASE_UNITS}


def _add(alias: str, base: str, factor: float, canonical: bool = True) -> None:
    _ALIASES[alias] = (base, factor)
    if canonical:
        _CANONICAL[base].append(alias)


def _build_tables() -> None:
    # bytes and bytes per second
    for name in ("B", "byte", "bytes"):
        _add(name, "B", 1.0, canonical=name == "B")
    _add("B/s", "B/s", 1.0)
    for table in (_DECIMAL, _BINARY):
        for prefix, factor in table.items():
            _add(prefix + "B", "B", factor)
            _add(prefix + "B/s", "B/s", factor)
    # bits
    _add("bit", "bit", 1.0)
    _add("bits", "bit", 1.0, canonical=False)
    for prefix, factor in _DECIMAL.items():
        _add(prefix + "bit", "bit", factor)
    # operations and operation rates
    _add("FLOP", "FLOP", 1.0)
    _add("FLOP/s", "FLOP/s", 1.0)
    _add("FLOPS", "FLOP/s", 1.0, canonical=False)
    _add("FLOPs", "FLOP/s", 1.0, canonical=False)
    for prefix, factor in _DECIMAL.items():
        _add(prefix + "FLOP", "FLOP", factor)
        _add(prefix + "FLOP/s", "FLOP/s", factor)
        _add(prefix + "FLOPS", "FLOP/s", factor, canonical=False)
        _add(prefix + "FLOPs", "FLOP/s", factor, canonical=False)
    _add("FLOP/B", "FLOP/B", 1.0)
    _add("FLOP/byte", "FLOP/B", 1.0, canonical=False)
    # time
    for alias, factor in (
        ("s", 1.0), ("ms", _per(1e3)), ("us", _per(1e6)), ("\u00b5s", _per(1e6)),
        ("\u03bcs", _per(1e6)), ("ns", _per(1e9)), ("min", 60.0), ("h", 3600.0), ("day", 86400.0),
    ):
        _add(alias, "s", factor)
    for alias, factor in (("sec", 1.0), ("hr", 3600.0), ("hour", 3600.0), ("hours", 3600.0),
                          ("days", 86400.0)):
        _add(alias, "s", factor, canonical=False)
    # power and energy
    _add("mW", "W", _per(1e3))
    for prefix, factor in (("", 1.0), *_DECIMAL.items()):
        _add(prefix + "W", "W", factor)
        _add(prefix + "J", "J", factor)
    for prefix, factor in (("", 3600.0), ("k", 3.6e6), ("M", 3.6e9)):
        _add(prefix + "Wh", "J", factor)
    # money
    _add("USD", "USD", 1.0)
    _add("$", "USD", 1.0, canonical=False)
    for cur in ("USD", "$"):
        for per, factor in (("/h", 1.0), ("/hour", 1.0), ("/hr", 1.0), ("/day", _per(24.0)), ("/s", 3600.0)):
            _add(cur + per, "USD/h", factor, canonical=cur == "USD" and per in ("/h", "/day", "/s"))
    # tokens
    for alias in ("token", "tokens", "tok"):
        _add(alias, "token", 1.0, canonical=alias == "tokens")
        _add(alias + "/s", "token/s", 1.0, canonical=alias == "tokens")
    for prefix in ("k", "M", "G"):
        for alias in ("token", "tokens", "tok"):
            _add(prefix + alias, "token", _DECIMAL[prefix], canonical=alias == "tokens")
            _add(prefix + alias + "/s", "token/s", _DECIMAL[prefix], canonical=alias == "tokens")
    # counts
    _add("%", "1", _per(100.0))
    for alias in ("param", "params", "parameters"):
        _add(alias, "param", 1.0, canonical=alias == "params")


_build_tables()

# Units for which a string holding only a number is unambiguous.
_COUNT_UNITS = frozenset({"1", "token", "param"})

_NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+(?:_\d+)*)?(?:\.\d*)?(?:[eE][+-]?\d+)?"
_NUMBER_RE = re.compile(_NUMBER)
_GENERAL_RE = re.compile(rf"(?P<num>{_NUMBER})\s*(?P<unit>.*)", re.DOTALL)
_CURRENCY_RE = re.compile(rf"(?P<cur>USD|\$)\s*(?P<num>{_NUMBER})\s*(?P<per>/\s*\w+)?", re.DOTALL)
_BITS_RE = re.compile(r"(?P<prefix>[kKMGTPE]i?)?(?P<b>b)(?P<rate>/s|ps)?")

_MAX_TEXT = 200


# -------------------------------------------------------------------------- parsing


def _number_from_text(text: str) -> float | None:
    if not text or not any(ch.isdigit() for ch in text):
        return None
    if not _NUMBER_RE.fullmatch(text):
        return None
    try:
        value = float(text.replace(",", "").replace("_", ""))
    except ValueError:
        return None
    return value


def _check_unit(unit: str) -> None:
    if unit not in BASE_UNITS:
        raise ValueError(f"unknown base unit {unit!r}; known: {', '.join(sorted(BASE_UNITS))}")


def _suggest(unit_text: str, base: str) -> str | None:
    """A close valid spelling of ``unit_text`` for quantities in ``base``."""
    candidates = _CANONICAL[base]
    if not candidates:
        return None
    bits = _BITS_RE.fullmatch(unit_text)
    if bits and base in ("B", "B/s", "bit"):
        prefix = bits.group("prefix") or ""
        if prefix == "K":
            prefix = "k"
        if base == "bit":
            return (prefix.rstrip("i") + "bit") if prefix.rstrip("i") + "bit" in _ALIASES else "bit"
        guess = prefix + "B" + ("/s" if base == "B/s" else "")
        if guess in _ALIASES:
            return guess
    folded = {c.casefold(): c for c in reversed(candidates)}
    if unit_text.casefold() in folded:
        return folded[unit_text.casefold()]
    # "K" is the binary-looking habit for kilo: KB -> kB
    if unit_text.startswith("K") and not unit_text.startswith("Ki"):
        guess = "k" + unit_text[1:]
        if guess in candidates:
            return guess
    import difflib  # only on the error path

    close = difflib.get_close_matches(unit_text, candidates, n=1, cutoff=0.6)
    if close:
        return close[0]
    close = difflib.get_close_matches(unit_text.casefold(), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else None


def _lookup(unit_text: str, base: str, original: str) -> float:
    """Factor converting ``unit_text`` into ``base``, or raise :class:`UnitError`."""
    expected = EXPECTED[base]
    found = _ALIASES.get(unit_text)
    if found is not None:
        found_base, factor = found
        if found_base == base:
            return factor
        hint = None
        if found_base == "FLOP/s" and base == "FLOP" and unit_text.endswith(("FLOPS", "FLOPs")):
            hint = unit_text[:-1]
        raise UnitError(
            f"{original!r} is {_KIND[found_base]} ({found_base}), not {_KIND[base]}",
            expected,
            hint,
        )
    bits = _BITS_RE.fullmatch(unit_text)
    if bits and base in ("B", "B/s"):
        raise UnitError(
            f"{original!r} uses {unit_text!r}, and a lower-case 'b' means bits, not bytes",
            expected,
            _suggest(unit_text, base),
        )
    raise UnitError(f"{original!r} has an unknown unit {unit_text!r}", expected, _suggest(unit_text, base))


def parse_quantity(value: object, unit: str) -> float:
    """Read ``value`` as a quantity in base unit ``unit`` and return it in that unit.

    ``value`` is either a finite int/float already in base units (booleans, NaN and
    infinities are rejected), or a string ``"<number> <unit>"`` (the space is optional;
    the number may use ``_`` or ``,`` as a thousands separator and an exponent).  Money
    may also be written ``"USD 2.50"`` or ``"$2.50"`` (``"$2.50/h"`` for an hourly price).

    >>> parse_quantity("24 GB", "B"), parse_quantity("24 GiB", "B")
    (24000000000.0, 25769803776.0)
    >>> parse_quantity("989 TFLOPS", "FLOP/s")
    9.89e+14

    Raises :class:`UnitError` for anything else, naming what ``unit`` expects.
    """
    _check_unit(unit)
    expected = EXPECTED[unit]
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is a boolean, not a number", expected)
    if isinstance(value, numbers.Real):
        try:
            number = float(value)
        except (OverflowError, ValueError, TypeError):
            raise UnitError(f"{value!r} is too large", expected) from None
        if not math.isfinite(number):
            raise UnitError(f"{value!r} is not a finite number", expected)
        return number
    if not isinstance(value, str):
        raise UnitError(f"{value!r} ({type(value).__name__}) is neither a number nor a string", expected)
    if len(value) > _MAX_TEXT:
        raise UnitError(f"the text starting {value[:20]!r} is too long ({len(value)} characters)", expected)
    text = value.strip()
    if not text:
        raise UnitError("an empty string is not a quantity", expected)

    currency = _CURRENCY_RE.fullmatch(text)
    read: float | None
    if currency:
        read = _number_from_text(currency.group("num"))
        if read is None:
            raise UnitError(f"could not read a number in {value!r}", expected)
        unit_text = currency.group("cur") + re.sub(r"\s+", "", currency.group("per") or "")
    else:
        match = _GENERAL_RE.fullmatch(text)
        read = _number_from_text(match.group("num")) if match else None
        if match is None or read is None:
            raise UnitError(f"could not read a number in {value!r}", expected)
        unit_text = match.group("unit").strip()
    number = read
    if not unit_text:
        if unit in _COUNT_UNITS:
            factor = 1.0
        else:
            raise UnitError(
                f"{value!r} has no unit (write a unit, or give a plain number without quotes "
                f"in {unit})",
                expected,
            )
    else:
        factor = _lookup(unit_text, unit, value)
    result = _apply(number, factor)
    if not math.isfinite(result):
        raise UnitError(f"{value!r} is not a finite quantity", expected)
    return result


def parse_with_unit(text: str) -> tuple[float, str]:
    """Read a string with any known unit and return ``(value_in_base_units, base_unit)``.

    Useful for fields that accept more than one kind of quantity (an absolute memory
    reserve such as ``"2.5 GB"`` or a fraction such as ``"10 %"``).  A string holding only
    a number is returned with base unit ``"1"``.

    >>> parse_with_unit("2.5 GB")
    (2500000000.0, 'B')
    """
    if not isinstance(text, str):
        raise UnitError(f"{text!r} is not a string", "a quantity such as \"2.5 GB\" or \"10 %\"")
    stripped = text.strip()
    currency = _CURRENCY_RE.fullmatch(stripped)
    if currency:
        unit_text = currency.group("cur") + re.sub(r"\s+", "", currency.group("per") or "")
    else:
        match = _GENERAL_RE.fullmatch(stripped)
        unit_text = match.group("unit").strip() if match else ""
    if not unit_text:
        return parse_quantity(text, "1"), "1"
    found = _ALIASES.get(unit_text)
    if found is None:
        raise UnitError(
            f"{text!r} has an unknown unit {unit_text!r}",
            "a quantity with a known unit, such as \"2.5 GB\", \"0.3 ms\" or \"10 %\"",
        )
    return parse_quantity(text, found[0]), found[0]


def accepted_units(unit: str) -> list[str]:
    """Every unit spelling :func:`parse_quantity` accepts for base unit ``unit``."""
    _check_unit(unit)
    return sorted(alias for alias, (base, _) in _ALIASES.items() if base == unit)


# ----------------------------------------------------------------------- formatting

_UP = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
_DOWN = [(1e3, "m"), (1e6, "\u00b5"), (1e9, "n"), (1e12, "p"), (1e15, "f")]  # inverse factors
_BIN_UP = [(2.0**60, "Ei"), (2.0**50, "Pi"), (2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki")]


def si_prefix(value: float, *, small: bool = True, binary: bool = False) -> tuple[float, str]:
    """Scale ``value`` by a decimal SI prefix so that ``1 <= |scaled| < 1000``.

    Returns ``(scaled, prefix)``; ``prefix`` is one of ``"" k M G T P E`` and, when
    ``small`` is true, ``m µ n p f`` for values below 1.  With ``binary`` the prefixes are
    ``Ki Mi Gi Ti Pi Ei`` and the scaled value lies below 1024.  Zero, infinities and NaN
    come back unscaled.

    >>> si_prefix(5.528429e9)
    (5.528429, 'G')
    """
    magnitude = abs(value)
    if magnitude == 0 or not math.isfinite(magnitude):
        return value, ""
    if binary:
        for factor, prefix in _BIN_UP:
            if magnitude >= factor:
                return value / factor, prefix
        return value, ""
    for factor, prefix in _UP:
        if magnitude >= factor:
            return value / factor, prefix
    if magnitude >= 1 or not small:
        return value, ""
    for inverse, prefix in _DOWN:
        if magnitude * inverse >= 1:
            return value * inverse, prefix
    return value * _DOWN[-1][0], _DOWN[-1][1]


def _group(integer_text: str) -> str:
    sign = "-" if integer_text.startswith("-") else ""
    digits = integer_text.lstrip("-")
    groups = []
    while len(digits) > 3:
        groups.append(digits[-3:])
        digits = digits[:-3]
    groups.append(digits)
    return sign + ",".join(reversed(groups))


def _fixed(value: float, decimals: int, min_decimals: int = 0) -> str:
    """``value`` with ``decimals`` places, trailing zeros stripped down to ``min_decimals``."""
    text = f"{value:.{max(decimals, 0)}f}"
    if "." in text:
        whole, frac = text.split(".")
        frac = frac.rstrip("0")
        if len(frac) < min_decimals:
            frac = frac + "0" * (min_decimals - len(frac))
    else:
        whole, frac = text, "0" * min_decimals
    if whole in ("-0",) and not frac.strip("0"):
        whole = "0"
    whole = _group(whole)
    return f"{whole}.{frac}" if frac else whole


def _sig(value: float, digits: int, min_decimals: int = 0) -> str:
    """``value`` with ``digits`` significant digits, no exponent in the usual range."""
    if value == 0:
        return _fixed(0.0, 0, min_decimals)
    magnitude = abs(value)
    if magnitude < 1e-6 or magnitude >= 1e21:
        mantissa, exponent_text = f"{value:.{digits - 1}e}".split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent_text)}"
    mantissa_text = f"{value:.{digits - 1}e}"  # rounds to significant digits
    rounded = float(mantissa_text)
    exponent = int(mantissa_text.split("e")[1])
    decimals = max(digits - 1 - exponent, min_decimals, 0)
    if decimals == min_decimals > 0:
        # keep every place down to the forced minimum (money keeps its cents)
        return _fixed(value, decimals, min_decimals)
    if decimals == 0:
        return _group(str(int(rounded)))
    return _fixed(rounded, decimals, min_decimals)


def _round_sig(value: float, digits: int) -> float:
    return float(f"{value:.{digits - 1}e}")


def _scaled(value: float, digits: int, *, binary: bool = False) -> tuple[str, str]:
    if not binary:
        # round first so that 999.96e9 becomes 1 TB, not "1000 GB"
        scaled, prefix = si_prefix(_round_sig(value, digits), small=False)
        return _sig(scaled, digits), prefix
    scaled, prefix = si_prefix(value, binary=True)
    if abs(_round_sig(scaled, digits)) >= 1024 and prefix != _BIN_UP[0][1]:
        order = [p for _, p in reversed(_BIN_UP)]
        index = order.index(prefix) + 1 if prefix else 0
        scaled, prefix = scaled / 1024, order[index]
    return _sig(scaled, digits), prefix


_COUNT_WORDS = {"token": ("token", "tokens"), "param": ("param", "params"), "token/s": ("tokens/s", "tokens/s")}


def format_plain(value: float, unit: str, digits: int = 4, *, binary: bool = False) -> tuple[str, str]:
    """Format ``value`` (in base unit ``unit``) as a ``(number, unit_label)`` pair.

    A unit outside :data:`BASE_UNITS` is kept as given, with the number unscaled.
    The pair suits renderers that typeset number and unit separately (LaTeX, tables):
    ``format_plain(5.528429e9, "B") == ("5.528", "GB")``.  Booleans give
    ``("yes", "")``/``("no", "")``, infinities ``("∞", unit)``.  ``digits`` is the
    number of significant digits (money at or above one dollar always keeps cents).
    With ``binary`` sizes and bandwidths use ``KiB``, ``MiB``, ... instead.
    """
    if not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= 17:
        raise ValueError(f"digits must be an integer from 1 to 17, got {digits!r}")
    if isinstance(value, bool):
        return ("yes" if value else "no"), ""
    value = float(value)
    if math.isnan(value):
        return "NaN", "" if unit in ("1",) else unit
    if math.isinf(value):
        symbol = "\u221e" if value > 0 else "-\u221e"
        label = {"1": "", "token": "tokens", "param": "params", "token/s": "tokens/s"}.get(unit, unit)
        return symbol, label
    if unit not in BASE_UNITS:
        # a unit this module does not know (a plugin's own): no prefixes, no conversion
        return _sig(value, digits), unit
    if unit == "s":
        value = _round_sig(value, digits)
        magnitude = abs(value)
        if magnitude == 0 or magnitude >= 1:
            return _sig(value, digits), "s"
        if magnitude >= 1e-3:
            return _sig(value * 1e3, digits), "ms"
        if magnitude >= 1e-6:
            return _sig(value * 1e6, digits), "\u00b5s"
        return _sig(value * 1e9, digits), "ns"
    if unit in ("USD", "USD/h"):
        magnitude = abs(value)
        text = _sig(value, digits, min_decimals=2) if magnitude >= 1 else _sig(value, digits)
        return text, unit
    if unit in ("1", "token", "param", "token/s"):
        if value == int(value) and abs(value) < 1e21 and unit != "token/s":
            text = _group(str(int(value)))
        else:
            text = _sig(value, digits)
        if unit == "1":
            return text, ""
        singular, plural = _COUNT_WORDS[unit]
        return text, singular if value == 1 else plural
    if unit == "FLOP/B":
        return _sig(value, digits), unit
    if unit in ("B", "B/s") and binary:
        text, prefix = _scaled(value, digits, binary=True)
        return text, prefix + unit
    text, prefix = _scaled(value, digits)
    return text, prefix + unit


def format_value(value: float, unit: str, digits: int = 4, *, binary: bool = False) -> str:
    """A short human-readable label for ``value`` given in base unit ``unit``.

    >>> format_value(5.528429e9, "B"), format_value(0.00624, "s"), format_value(989e12, "FLOP/s")
    ('5.528 GB', '6.24 ms', '989 TFLOP/s')
    >>> format_value(9550729216, "param"), format_value(1 / 2.4, "USD"), format_value(True, "1")
    ('9,550,729,216 params', 'USD 0.4167', 'yes')

    Durations of a second or more are shown in s, shorter ones in ms, then µs and ns.
    Sizes, rates, operations, power and energy use decimal SI prefixes (binary ones
    with ``binary=True``).  Integral counts are written in full with thousands
    separators.  Money is ``"USD 0.4167"`` / ``"USD 24.00"`` / ``"USD 2.50/h"``.  Every
    label except ``∞``/``NaN``/``yes``/``no`` reads back with :func:`parse_quantity`.
    """
    number, label = format_plain(value, unit, digits, binary=binary)
    if unit == "USD" and label:
        return f"USD {number}"
    if unit == "USD/h" and label:
        return f"USD {number}/h"
    return f"{number} {label}" if label else number
