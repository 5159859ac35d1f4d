"""Typing scenario values: the strict converters and the unit types.

:func:`make_converter` builds a :class:`cattrs.Converter` with ``forbid_extra_keys``
and strict hooks for ``int``, ``float``, ``str`` and ``bool`` (the default converter
would turn ``"80"`` into ``80.0`` and ``True`` into ``1.0``). Each set of registries
owns one, copied from it (:class:`infermodel.registry.Registries`), so that the value
types one plugin host registers never leak into another. Lever plugins describe
their tables with attrs classes; fields that take unit strings use the types below::

    @attrs.frozen
    class Offload:
        link_bandwidth: BytesPerSecond
        latency: Seconds = 2e-6
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError

from .declarations import REQUIRED, FieldSpec
from .errors import CarriesProblem, Problem, did_you_mean, suggest
from .units import UnitError, parse_quantity


class FieldValueError(CarriesProblem, ValueError):
    """A value that does not fit its field; its :class:`~infermodel.errors.Problem`
    (``.problem``) says what was expected.
    """

    def __init__(self, message: str, expected: str | None = None, suggestion: str | None = None):
        super().__init__(message)
        self.problem = Problem(message, expected=expected, suggestion=suggestion)


class UnitValue:
    """Base of the unit types; a subclass's ``unit`` says which base unit it holds.

    Used only as an annotation: the structured value is a plain ``float`` in base units.
    (Not a ``float`` subclass, so the strict ``float`` hook never claims it.)
    """

    unit = "1"


class Bytes(UnitValue):
    """A size: ``"24 GB"``, ``"24 GiB"`` or a number of bytes."""

    unit = "B"


class Seconds(UnitValue):
    """A duration: ``"0.3 ms"`` or a number of seconds."""

    unit = "s"


class BytesPerSecond(UnitValue):
    """A bandwidth: ``"3.35 TB/s"`` or a number of bytes per second."""

    unit = "B/s"


class FlopsPerSecond(UnitValue):
    """A compute rate: ``"989 TFLOP/s"`` or a number of FLOP per second."""

    unit = "FLOP/s"


class Dollars(UnitValue):
    """An amount: ``"USD 2.50"`` or a number of US dollars."""

    unit = "USD"


class DollarsPerHour(UnitValue):
    """An hourly price: ``"2.5 USD/h"`` or a number of US dollars per hour."""

    unit = "USD/h"


class Watts(UnitValue):
    """A power: ``"700 W"`` or a number of watts."""

    unit = "W"


_UNIT_TYPES: dict[str, type[UnitValue]] = {
    t.unit: t for t in (Bytes, Seconds, BytesPerSecond, FlopsPerSecond, Dollars, DollarsPerHour, Watts)}


def unit_type(unit: str) -> type[UnitValue]:
    """The type for a lever field holding a quantity in ``unit`` (``"B"``, ``"s"`` ...).

    >>> unit_type("B") is Bytes
    True
    """
    found = _UNIT_TYPES.get(unit)
    if found is None:
        found = _UNIT_TYPES[unit] = type(f"UnitValue[{unit}]", (UnitValue,), {"unit": unit})
    return found


class Fraction:
    """Annotation for a number in (0, 1]; the structured value is a plain ``float``."""


def _suggest(text: str | None) -> str | None:
    # A unit error's suggestion is the unit alone ("GB"), or already a sentence.
    if text and " " not in text.strip():
        return did_you_mean(text.strip())
    return text


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            dict: "a table", list: "an array"}.get(type(value), type(value).__name__)


#: The largest integer a field takes: every quantity is evaluated in float64, which holds
#: integers exactly up to 2**53.
MAX_INTEGER = 2**53


def _strict_int(value, _type=int):
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            raise FieldValueError(f"got {value!r}", expected="an integer (write it without a decimal point)")
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="an integer")
    if abs(value) > MAX_INTEGER:
        raise FieldValueError(f"got an integer of {len(str(abs(value))):,} digits",
                              expected=f"an integer of at most {MAX_INTEGER:,} (2**53, the "
                                       "largest that float64 arithmetic holds exactly)")
    return value


def _strict_float(value, _type=float):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="a number")
    try:
        value = float(value)
    except OverflowError:
        raise FieldValueError(f"got an integer of {len(str(abs(value))):,} digits",
                              expected="a finite number (at most about 1.8e308)") from None
    if not math.isfinite(value):
        raise FieldValueError(f"got {value!r}", expected="a finite number")
    return value


def _strict_str(value, _type=str):
    if not isinstance(value, str):
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="a string")
    return value


def _strict_bool(value, _type=bool):
    if not isinstance(value, bool):
        raise FieldValueError(f"got {_type_name(value)} {_show(value)}", expected="true or false")
    return value


def _field_error(exc: UnitError, expected: str | None = None, *,
                 prefer_field: bool = False) -> FieldValueError:
    """A unit error as the field's error: its problem, with the field's expectation."""
    problem = Problem.of(exc)
    said = expected if prefer_field else (problem.expected or expected)
    return FieldValueError(problem.message, expected=said, suggestion=_suggest(problem.suggestion))


def _unit_value(value, type_):
    if isinstance(value, bool):
        raise FieldValueError(f"got a boolean {_show(value)}", expected=f"a quantity in {type_.unit}")
    try:
        return float(parse_quantity(value, type_.unit))
    except UnitError as exc:
        raise _field_error(exc) from None


def _fraction(value, _type):
    number = _strict_float(value)
    if not 0 < number <= 1:
        raise FieldValueError(f"got {number!r}", expected="a fraction in (0, 1]")
    return number


def parse_field(spec: FieldSpec, value: Any) -> Any:
    """Type and range-check one scenario value for ``spec``; raise FieldValueError."""
    if value is None:
        raise FieldValueError("got an empty value", expected=spec.expected())
    kind = spec.kind
    if kind == "int":
        out = _strict_int(value)
    elif kind == "float":
        out = _strict_float(value)
    elif kind == "quantity":
        if isinstance(value, bool):
            raise FieldValueError(f"got a boolean {_show(value)}", expected=spec.expected())
        try:
            out = float(parse_quantity(value, spec.unit))
        except UnitError as exc:
            raise _field_error(exc, spec.expected()) from None
    elif kind == "bool":
        out = _strict_bool(value)
    elif kind == "str":
        out = _strict_str(value)
    elif kind == "choice":
        out = _strict_str(value)
        if out not in (spec.choices or ()):
            raise FieldValueError(f"got {out!r}", expected=spec.expected(),
                                  suggestion=suggest(out, spec.choices or ()))
        return out
    elif kind == "size_or_fraction":
        if isinstance(value, str):
            try:
                size = float(parse_quantity(value, "B"))
            except UnitError as exc:
                raise _field_error(exc, spec.expected(), prefer_field=True) from None
            if size < 0:
                raise FieldValueError(f"got {value!r}", expected="a size >= 0")
            return ("bytes", size)
        number = _strict_float(value)
        if not 0 <= number < 1:
            raise FieldValueError(f"got {number!r}", expected=(
                'a fraction in [0, 1), or a size as a string with a unit such as "2.5 GB"'))
        return ("fraction", number)
    else:
        raise AssertionError(kind)
    if spec.minimum is not None:
        bad = out <= spec.minimum if spec.exclusive_minimum else out < spec.minimum
        if bad:
            raise FieldValueError(f"got {value!r}", expected=spec.expected())
    if spec.maximum is not None and out > spec.maximum:
        raise FieldValueError(f"got {value!r}", expected=spec.expected())
    return out


class _FieldMarker:
    """Annotation of one attribute of a section class: the field it was built from."""

    spec: FieldSpec


def _field_hook(value: Any, type_: type[_FieldMarker]) -> Any:
    return parse_field(type_.spec, value)


def _table_value(value: Any, type_: type[TableValue]) -> Any:
    return type_.structure(value)


def section_class(section: str, specs: Mapping[str, FieldSpec]) -> type:
    """A frozen attrs class for one section, built from the registered fields."""
    attributes = {}
    # attrs needs defaulted fields after mandatory ones.
    ordered = sorted(specs.values(), key=lambda s: s.default is not REQUIRED)
    for spec in ordered:
        marker = type(f"Field[{spec.path}]", (_FieldMarker,), {"spec": spec})
        if spec.default is REQUIRED:
            attributes[spec.name] = attrs.field(type=marker)
        else:
            attributes[spec.name] = attrs.field(type=marker, default=spec.default)
    return attrs.make_class(section.capitalize() + "Section", attributes, frozen=True)


def section_structure_hook(cls: type, converter: cattrs.Converter) -> Any:
    """The structuring function of section class ``cls`` on ``converter``: what cattrs
    generates for an attrs class with ``detailed_validation`` and ``forbid_extra_keys``,
    step for step, written out once here.

    cattrs writes such a function as source and compiles it for each class, a few
    milliseconds per section on every start; the sections are made at run time from the
    plugins' fields, so they would pay it on every command. This function gives the same
    result and raises the same errors, with the same notes on each field's failure
    (:func:`structure_errors` and ``cattrs.transform_error`` read them as they read
    cattrs' own): each field's value through the converter's hook for its type (looked
    up on first use, as cattrs looks it up when it generates), a missing field a
    ``KeyError``, unknown keys a ``ForbiddenExtraKeysError``, every failure collected
    into one ``ClassValidationError``.
    """
    from cattrs.errors import AttributeValidationNote, ClassValidationError

    fields = [(a.name, a.type, a.default is attrs.NOTHING) for a in attrs.fields(cls)]
    allowed = {name for name, _, _ in fields}
    handlers: list[Any] = []

    def structure_section(value: Mapping[str, Any], _type: Any = cls) -> Any:
        if not handlers:
            for _, type_, _ in fields:
                found = converter.get_structure_hook(type_, cache_result=False)
                if found is None:  # a value taken as written
                    handlers.append(lambda v, _t: v)
                elif found == converter._structure_call:  # the type called on the value
                    handlers.append(lambda v, t: t(v))
                else:
                    handlers.append(found)
        result: dict[str, Any] = {}
        errors: list[Exception] = []
        for (name, type_, required), handler in zip(fields, handlers):
            if not required and name not in value:
                continue
            try:
                result[name] = handler(value[name], type_)
            except Exception as exc:
                exc.__notes__ = [*getattr(exc, "__notes__", []), AttributeValidationNote(
                    f"Structuring class {cls.__qualname__} @ attribute {name}", name, type_)]
                errors.append(exc)
        unknown = set(value.keys()) - allowed
        if unknown:
            errors.append(ForbiddenExtraKeysError("", cls, unknown))
        if errors:
            raise ClassValidationError("While structuring " + cls.__name__, errors, cls)
        try:
            return cls(**result)
        except Exception as exc:
            raise ClassValidationError("While structuring " + cls.__name__, [exc], cls)  # noqa: B904 (as cattrs raises it)

    return structure_section


def make_converter() -> cattrs.Converter:
    """A fresh strict converter: extra keys forbidden, no silent coercion."""
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook_func(lambda t: t is Fraction, _fraction)
    converter.register_structure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, UnitValue), _unit_value)
    converter.register_structure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, _FieldMarker), _field_hook)
    converter.register_structure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, TableValue), _table_value)
    return converter


#: The converter with only the standard strict hooks; registries start from a copy.
BASE_CONVERTER = make_converter()

# The converter structuring the scenario now, so that a plugin's value-type hook that
# calls :func:`structure` on a nested table uses the same registries' hooks.
_ACTIVE: contextvars.ContextVar[cattrs.Converter] = contextvars.ContextVar(
    "infermodel_converter", default=BASE_CONVERTER)


@contextlib.contextmanager
def converting_with(converter: cattrs.Converter) -> Iterator[cattrs.Converter]:
    """Make ``converter`` the one :func:`structure` uses inside the ``with`` block."""
    token = _ACTIVE.set(converter)
    try:
        yield converter
    finally:
        _ACTIVE.reset(token)


def structure(value: Any, type_: Any) -> Any:
    """Type ``value`` as ``type_`` with the strict converter (for nested lever tables).

    Inside a value-type hook this is the converter of the registries reading the
    scenario, with every plugin's value types.

    >>> structure(4, int)
    4
    """
    return _ACTIVE.get().structure(value, type_)


def describe_error(exc: BaseException, type_: Any) -> str:
    """Format one structuring failure; used with :func:`cattrs.transform_error`."""
    if isinstance(exc, FieldValueError):
        return exc.problem.render()
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ForbiddenExtraKeysError):
        return "unknown key(s) " + ", ".join(sorted(exc.extra_fields))
    if isinstance(exc, (ValueError, TypeError)):
        name = getattr(type_, "__name__", None)
        message = str(exc) or type(exc).__name__
        return f"{message}" + (f" (expected {name})" if name else "")
    return f"{type(exc).__name__}: {exc}"


@attrs.frozen
class StructureProblem:
    """One failure inside a structured table: where (a path relative to the table, ""
    for the table itself), the message, and the facts a reader acts on as data.
    """

    path: str
    message: str
    #: Keys the table has that its class does not (``ForbiddenExtraKeysError``).
    unknown_keys: tuple[str, ...] = ()
    #: A required key is absent.
    missing: bool = False


def structure_errors(exc: BaseException) -> list[StructureProblem]:
    """One :class:`StructureProblem` per failure in a cattrs error, in cattrs' order.

    :func:`cattrs.transform_error` writes each failure as ``"<message> @ <path>"``,
    calling the formatter once per failure in the same order; the formatter keeps
    each failure, so nothing is read back from the text but the path cattrs wrote.
    """
    failures: list[tuple[BaseException, str]] = []

    def describe(error: BaseException, type_: Any) -> str:
        message = describe_error(error, type_)
        failures.append((error, message))
        return message

    out = []
    lines = cattrs.transform_error(exc, path="$", format_exception=describe)
    for line, (failure, message) in zip(lines, failures, strict=True):
        path = line[len(message) + len(" @ "):]
        unknown = (tuple(sorted(failure.extra_fields))
                   if isinstance(failure, ForbiddenExtraKeysError) else ())
        out.append(StructureProblem(path.removeprefix("$").lstrip("."), message, unknown,
                                    missing=isinstance(failure, KeyError)))
    return out


# ---------------------------------------------------------------------------------
# Tables: a lever's, or one an analysis reads ([simulation], [search])
# ---------------------------------------------------------------------------------


class TableValue:
    """Base of a type that reads one value of a table itself: a subclass's
    :meth:`structure` returns the typed value or raises :class:`FieldValueError`. It lets
    a table's schema say more than a plain type does (a number or a list of numbers, each
    above zero), and the converter collects its failures with every other.
    """

    @classmethod
    def structure(cls, value: Any) -> Any:
        raise NotImplementedError(cls.__name__)


def structure_table(converter: cattrs.Converter, table: Any, schema: type, prefix: str,
                    add) -> Any | None:
    """``table`` typed as the attrs class ``schema`` by ``converter`` (strict: no silent
    coercion, extra keys refused), or None when it does not fit. Every problem, however
    deep, goes to ``add(key, message, expected=None, suggestion=None)`` with its key path
    under ``prefix``: the way lever tables and the tables of the analyses are read.
    """
    if not isinstance(table, Mapping):
        add(prefix, f"got {table!r}", expected=f"a [{prefix}] table")
        return None
    try:
        return converter.structure(dict(table), schema)
    except Exception as exc:  # cattrs groups every field's failure
        keys = [a.name for a in attrs.fields(schema)]
        report_structure(exc, prefix, table, keys, add, schema=schema, converter=converter)
        return None


def _nested_keys(schema: type | None, relative: str) -> list[str] | None:
    """Field names of the attrs class found by walking ``relative`` from ``schema``."""
    import typing

    current = schema
    for part in relative.split(".") if relative else []:
        if current is None or not attrs.has(current):
            return None
        field = next((a for a in attrs.fields(current) if a.name == part), None)
        if field is None:
            return None
        candidates = [field.type, *typing.get_args(field.type)]
        current = next((c for c in candidates if isinstance(c, type) and attrs.has(c)), None)
    if current is None or not attrs.has(current):
        return None
    return [a.name for a in attrs.fields(current)]


def _validator_failures(schema: type, table: Mapping, converter,
                        skip: set[str]) -> list[tuple[str, str]]:
    """Every field of ``schema`` whose attrs validator rejects ``table``'s value, as
    ``(field, message)`` in attrs' order. A validator fails the whole class, and attrs
    stops at the first, so each field is structured on its own (validators off) and
    every validator is run on what structured; fields in ``skip`` (already reported: an
    unknown key, a value of the wrong type) and fields that do not structure are left
    out, so a type error no longer hides a bound elsewhere in the table.
    """
    import types

    if not attrs.has(schema):
        return []
    with contextlib.suppress(Exception):  # unresolvable annotations stay as written
        attrs.resolve_types(schema)
    values: dict[str, Any] = {}
    for field in attrs.fields(schema):
        key = field.alias or field.name
        if key not in table or key in skip or field.name in skip:
            continue
        try:
            with attrs.validators.disabled():
                value = converter.structure(table[key], field.type)
                values[field.name] = field.converter(value) if callable(field.converter) else value
        except Exception:
            continue
    defaults = {f.name: f.default for f in attrs.fields(schema)
                if f.default is not attrs.NOTHING and not isinstance(f.default, attrs.Factory)}  # type: ignore[arg-type]
    instance = types.SimpleNamespace(**{**defaults, **values})
    failures = []
    for field in attrs.fields(schema):
        if field.validator is None or field.name not in values:
            continue
        try:
            field.validator(instance, field, values[field.name])
        except (ValueError, TypeError) as exc:
            failures.append((field.alias or field.name, str(exc) or type(exc).__name__))
        except Exception:  # a validator that needs the real instance: judged with the class
            continue
    return failures


def report_structure(exc: BaseException, prefix: str, table: Mapping, known: Iterable[str], add,
                     quiet: bool = False, schema: type | None = None,
                     converter=None) -> None:
    """Report each failure of structuring ``table`` (the error ``exc``) through
    ``add(key, message, expected=None, suggestion=None)`` at its key path under
    ``prefix``: an unknown key with the known ones and a close match, a value that does
    not fit its field, a missing key (unless ``quiet``), the field a validator rejected.
    """
    known = list(known)
    reported: set[str] = set()
    whole: list[str] = []  # failures of the class itself (a validator, a post-init check)
    for problem in structure_errors(exc):
        relative, message = problem.path, problem.message
        reported.add(relative.split(".")[0])
        reported.update(problem.unknown_keys)
        if quiet and problem.missing:
            continue
        if relative and problem.unknown_keys:
            # An unknown key inside a nested table: name it at its own path.
            nested = _nested_keys(schema, relative) or []
            for extra in problem.unknown_keys:
                add(f"{prefix}.{relative}.{extra}", f"unknown key {extra!r}",
                    expected="one of " + ", ".join(sorted(nested)) if nested else None,
                    suggestion=suggest(extra, nested) if nested else None)
            continue
        if problem.unknown_keys:
            for extra in problem.unknown_keys:
                add(f"{prefix}.{extra}", f"unknown key {extra!r}",
                    expected=("one of " + ", ".join(sorted(known))) if known
                    else f"no keys: no loaded plugin declares fields of {prefix!r}",
                    suggestion=suggest(extra, known))
            continue
        if not relative and schema is not None and converter is not None:
            whole.append(message)  # every field a validator rejects is reported below
            continue
        written = _written(table, relative)
        if relative and _is_table_field(schema, relative) and not isinstance(written, Mapping):
            # A nested table written as a value: say so rather than cattrs' type error.
            add(f"{prefix}.{relative}", f"got {written!r}",
                expected=f"a [{prefix}.{relative}] table")
            continue
        add(f"{prefix}.{relative}" if relative else prefix, message)
    if schema is None or converter is None:
        return
    failures = _validator_failures(schema, table, converter, reported - {""})
    for name, message in failures:
        add(f"{prefix}.{name}", message)
    if whole and not failures:
        add(prefix, whole[0])


def _is_table_field(schema: type | None, relative: str) -> bool:
    """Whether the field at ``relative`` (dotted) of ``schema`` is a nested attrs table
    and nothing else (a union with another type has that type's own message).
    """
    parent, _, name = relative.rpartition(".")
    current = schema
    for part in parent.split(".") if parent else []:
        found = next((a for a in attrs.fields(current) if a.name == part), None) \
            if current is not None and attrs.has(current) else None
        current = found.type if found is not None else None
    if current is None or not (isinstance(current, type) and attrs.has(current)):
        return False
    field = next((a for a in attrs.fields(current) if a.name == name), None)
    return field is not None and isinstance(field.type, type) and attrs.has(field.type)


def _written(table: Mapping, relative: str) -> Any:
    """The value written at ``relative`` (dotted) inside ``table``, or None."""
    node: Any = table
    for part in relative.split(".") if relative else []:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


__all__ = [
    "BASE_CONVERTER",
    "Bytes",
    "BytesPerSecond",
    "Dollars",
    "DollarsPerHour",
    "FieldValueError",
    "FlopsPerSecond",
    "Fraction",
    "Seconds",
    "StructureProblem",
    "TableValue",
    "UnitValue",
    "Watts",
    "converting_with",
    "parse_field",
    "report_structure",
    "section_class",
    "structure",
    "structure_errors",
    "structure_table",
    "unit_type",
]
