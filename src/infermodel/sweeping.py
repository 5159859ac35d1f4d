"""Sweeps: a grid over scenario fields, every point evaluated with numpy arrays.

A sweep has **axes**. A field axis sets one field (``workload.batch``,
``hardware.preset``, ``levers.number_formats.kv_bits``) to each of its values; a
named choice axis (``[sweep.choices.NAME]``) sets several fields at once per
labelled choice. The grid is their product, first axis slowest.

How it is evaluated:

* An axis whose every field feeds an input quantity (the field registry's
  ``quantity``) and which no plugin reads while defining, transforming or
  validating quantities is a **vector** axis: its values go straight into the
  compiled numpy function as arrays. The graph is built and compiled once.
* Any other axis (preset names, lever settings and on/off, fields such as
  ``model.ffn`` that decide which formulas exist, fields a plugin inspects) is
  **structural**: the grid is split into blocks, one per combination of
  structural values; each block is resolved and validated as ``--set`` would do,
  and its graph is compiled once (compiled functions are cached by structure, so
  blocks with the same formulas share one).
* Points are evaluated in chunks (``chunk_size`` points at a time), so memory
  stays bounded however large the grid; only the quantities asked for (and what
  they depend on) are computed.

Values at every point are those of :func:`infermodel.evaluate` at that point: the
same compiled formulas applied to the same float64 inputs.

>>> result = sweep("scenarios/case-study-24gb.toml",  # doctest: +SKIP
...                {"workload.batch": "1..64 log2"}, quantities=["tpot"])
>>> result["tpot"]  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np

from .errors import InfermodelError, Problem, ScenarioError, UnknownQuantityError, close_match
from .output import atomic_stream

#: Points evaluated per chunk: small enough that the working set stays in cache.
DEFAULT_CHUNK = 16384
#: The most values one axis may have (checked before the values are built).
MAX_AXIS_VALUES = 1_000_000
#: The most points one grid may have (the product of its axes' lengths), checked before
#: anything is planned. Points are evaluated and written in chunks, so memory does not
#: grow with the grid; this bounds the time.
MAX_GRID_POINTS = 10_000_000
#: The most structural combinations (presets, levers, fields read while the graph is
#: built) one sweep may have: each is a scenario and a graph of its own.
MAX_BLOCKS = 10_000
#: The most points whose validation hooks are run one by one (vector fields that a
#: plugin's validation reads).
MAX_VALIDATED_POINTS = 1_000_000
#: The most values (points × columns) a sweep may hold in memory at once
#: (:meth:`SweepPlan.run`, :func:`sweep`): 400 MB of float64.
MAX_IN_MEMORY_VALUES = 50_000_000
#: The largest chunk evaluated at a time.
MAX_CHUNK = 1_000_000
#: Keys of ``[sweep]`` that are options rather than fields.
OPTION_KEYS = ("quantities", "choices")


class _Remove:
    def __repr__(self) -> str:
        return "REMOVE"


#: A setting that removes a lever table (``"levers.speculative" = [false, {k = 4}]``).
REMOVE: Any = _Remove()
_MISSING = object()


def _chunk_size(chunk_size: Any) -> int:
    """A checked chunk size (None: :data:`DEFAULT_CHUNK`)."""
    if chunk_size is None:
        return DEFAULT_CHUNK
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or not 1 <= chunk_size <= MAX_CHUNK:
        raise InfermodelError(Problem(f"chunk size {str(chunk_size)[:40]} is not a point count",
                                      expected=f"a whole number from 1 to {MAX_CHUNK:,}"))
    return int(chunk_size)


# ---------------------------------------------------------------------------------
# Axes
# ---------------------------------------------------------------------------------


@attrs.frozen(slots=False)
class Axis:
    """One dimension of the grid: labelled choices, each setting some fields.

    ``labels`` are what the CSV column shows (field values in base units, preset
    names, choice names); ``setting(i)`` maps field paths to the raw values the
    i-th choice writes into the scenario. A field axis keeps its raw values in
    ``raw`` (one field, ``field``); a choice axis keeps a mapping per label.
    """

    name: str
    labels: tuple[Any, ...]
    settings: tuple[Mapping[str, Any], ...] | None = attrs.field(default=None, repr=False)
    key: str | None = attrs.field(default=None, repr=False)
    origin: str | None = attrs.field(default=None, repr=False)
    field: str | None = attrs.field(default=None, repr=False)
    raw: tuple[Any, ...] | None = attrs.field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.labels)

    def setting(self, index: int) -> Mapping[str, Any]:
        """The fields choice ``index`` sets: ``{path: raw value}``."""
        if self.field is not None:
            return {self.field: self.raw[index]}
        return self.settings[index]

    def everywhere(self, path: str) -> bool:
        """Whether every choice sets ``path``."""
        return path == self.field or (self.settings is not None
                                      and all(path in s for s in self.settings))

    @cached_property
    def paths(self) -> tuple[str, ...]:
        if self.field is not None:
            return (self.field,)
        seen: dict[str, None] = {}
        for setting in self.settings or ():
            for path in setting:
                seen.setdefault(path, None)
        return tuple(seen)

    @cached_property
    def numeric(self) -> bool:
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.labels)


_RANGE = re.compile(
    r"^\s*(?P<start>[^.\s][^\s]*?(?:\s+[A-Za-z/%]+)?)\s*\.\.\s*(?P<stop>[^\s]+(?:\s+[A-Za-z/%]+)?)"
    r"(?:\s+(?:(?P<kind>step|times)\s+(?P<by>.+?)|(?P<log>log2|log10)|"
    r"(?P<count>\d+)\s+points(?P<geo>\s+log)?))?\s*$")


def is_range(text: Any) -> bool:
    """Whether ``text`` is written as a range (``"1..512 log2"``)."""
    return isinstance(text, str) and ".." in text and _RANGE.match(text) is not None


def _count_text(count: int) -> str:
    return f"{count:,}" if count < 10**15 else f"about {float(count):.3g}"


def _too_many(text: str, count: int, limit: int) -> ValueError:
    return ValueError(f"range {text!r} has {_count_text(count)} values, more than the "
                      f"{MAX_AXIS_VALUES:,} one axis may hold; split the range over several "
                      f"sweeps or ask for fewer values (\"A..B N points\")")


def expand_range(text: str, unit: str | None = None, *, integer: bool = False,
                 limit: int | None = None) -> list:
    """The values of a range string.

    ``"A..B"`` integers A to B; ``"A..B step S"`` A, A+S, ... up to B; ``"A..B log2"``
    (``log10``, ``times F``) A, 2A, 4A, ... up to B; ``"A..B N points"`` N evenly
    spaced values from A to B inclusive; ``"A..B N points log"`` N geometrically
    spaced. Endpoints and steps may carry units when the field has one
    (``"40 GB..80 GB step 20 GB"``). Raises ValueError with a message, also when the
    range has more than ``limit`` values (default :data:`MAX_AXIS_VALUES`), before any
    value is built.

    >>> expand_range("1..16 log2")
    [1, 2, 4, 8, 16]
    >>> expand_range("0.5..1 step 0.25")
    [0.5, 0.75, 1.0]
    """
    match = _RANGE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a range")

    def number(part: str, what: str) -> float | int:
        part = part.strip()
        try:
            value = int(part)
            return value
        except ValueError:
            pass
        try:
            value = float(part)
        except ValueError:
            if unit is None:
                raise ValueError(f"the {what} {part!r} of range {text!r} is not a number") from None
            from .units import UnitError, parse_quantity

            try:
                value = float(parse_quantity(part, unit))
            except UnitError as exc:
                raise ValueError(f"the {what} {part!r} of range {text!r}: {exc.message}") from None
        if not math.isfinite(value):
            raise ValueError(f"the {what} of range {text!r} is not finite")
        return int(value) if value.is_integer() and abs(value) < 2**53 and "." not in part \
            and "e" not in part.lower() else value

    limit = MAX_AXIS_VALUES if limit is None else limit
    start = number(match.group("start"), "start")
    stop = number(match.group("stop"), "end")
    values: list
    if match.group("count"):
        count = int(match.group("count"))
        if count < 1:
            raise ValueError(f"range {text!r} is empty (0 points)")
        if count > limit:
            raise _too_many(text, count, limit)
        if match.group("geo"):
            if start <= 0 or stop <= 0:
                raise ValueError(f"a geometric range needs positive ends, got {text!r}")
            values = [float(v) for v in np.geomspace(start, stop, count)]
        else:
            values = [float(v) for v in np.linspace(start, stop, count)]
        values = [_tidy(v) for v in values]
    elif match.group("log") or match.group("kind") == "times":
        factor = {"log2": 2, "log10": 10}.get(match.group("log") or "", None)
        if factor is None:
            factor = number(match.group("by"), "factor")
        if factor <= 1:
            raise ValueError(f"the factor of range {text!r} must be greater than 1")
        if start <= 0:
            raise ValueError(f"a geometric range must start above 0, got {text!r}")
        if stop < start:
            raise ValueError(f"range {text!r} is empty (its end is below its start)")
        count = math.floor(math.log(stop / start) / math.log(factor) + 1e-9) + 1
        if count > limit:
            raise _too_many(text, count, limit)
        if all(isinstance(v, int) for v in (start, factor)):
            values = [start * factor**i for i in range(count)]
        else:
            values = [_tidy(start * float(factor) ** i) for i in range(count)]
        values = [v for v in values if v <= stop * (1 + 1e-12)]
    else:
        step = 1 if match.group("kind") is None else number(match.group("by"), "step")
        if match.group("kind") is None and not (isinstance(start, int) and isinstance(stop, int)):
            raise ValueError(f"range {text!r} needs a step ('A..B step S') unless both ends are "
                             "integers")
        if step <= 0:
            raise ValueError(f"the step of range {text!r} must be positive")
        if stop < start:
            raise ValueError(f"range {text!r} is empty (its end is below its start)")
        count = math.floor((stop - start) / step + 1e-9) + 1
        if count > limit:
            raise _too_many(text, count, limit)
        if all(isinstance(v, int) for v in (start, stop, step)):
            values = list(range(start, stop + 1, step))
        else:
            values = [_tidy(start + i * step) for i in range(count)]
    if integer:
        bad = [v for v in values if not float(v).is_integer()]
        if bad:
            raise ValueError(f"range {text!r} gives {bad[0]!r}, but the field takes integers")
        values = [int(v) for v in values]
    if not values:
        raise ValueError(f"range {text!r} is empty")
    return values


def _tidy(value: float) -> float:
    """Round away the last-digit noise of ``start + i * step`` (12 significant digits)."""
    return float(f"{value:.12g}")


def _label(value: Any) -> Any:
    if value is REMOVE or value is False:
        return "off"
    if value is True:
        return "on"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k} = {_label(v)!r}" if isinstance(v, str) else f"{k} = {_label(v)}"
                          for k, v in value.items())
        return "{" + inner + "}"
    return value


def _field_paths(registries) -> list[str]:
    import attrs as _attrs

    from .registry import FIELD_SECTIONS
    from .scenario import LOADER_KEYS

    paths = [spec.path for spec in registries.all_fields()]
    for section in FIELD_SECTIONS:
        for key in LOADER_KEYS.get(section, ()):
            paths.append(f"{section}.{key}")
    for name, info in registries.levers.items():
        paths.append(f"levers.{name}")
        paths.extend(f"levers.{name}.{a.name}" for a in _attrs.fields(info.schema))
    return paths


class _Grid:
    """Turns ``[sweep]``, ``over`` and ``choices`` into checked axes."""

    def __init__(self, scenario, registries):
        self.scenario = scenario
        self.registries = registries
        self.known = _field_paths(registries)

    def problem(self, key: str | None, origin: str | None, message: str, **kw) -> Problem:
        if origin == "table" and key:
            return self.scenario.problem(key, message, **kw)
        return Problem(message, file=origin or None, key=key, **kw)

    def check_path(self, path: Any, key: str | None, origin: str | None) -> None:
        from .registry import FIELD_SECTIONS

        if not isinstance(path, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*", path):
            raise ScenarioError(self.problem(key, origin, f"{path!r} is not a field path",
                                             expected="a dotted field path such as workload.batch"))
        if path in self.known:
            return
        near = close_match(path, self.known)
        section = path.split(".")[0]
        if section == "levers" and path.count(".") >= 1:
            lever = path.split(".")[1]
            if lever not in self.registries.levers:
                near_lever = close_match(lever, self.registries.levers)
                raise ScenarioError(self.problem(
                    key, origin, f"no loaded plugin provides a lever named {lever!r}",
                    expected="one of " + (", ".join(sorted(self.registries.levers)) or "(none)"),
                    suggestion=f"did you mean 'levers.{near_lever}'?" if near_lever else None))
        expected = ("a field such as workload.batch, hardware.preset or levers.LEVER.SETTING"
                    if section not in FIELD_SECTIONS + ("levers",) else f"a field of [{section}]")
        raise ScenarioError(self.problem(key, origin, f"unknown field {path!r}", expected=expected,
                                         suggestion=f"did you mean {near!r}?" if near else
                                         "`infermodel check` and the docs list the fields"))

    def values(self, path: str, raw: Any, key: str | None, origin: str | None) -> tuple[list, list]:
        """The raw and typed values a field axis takes, ranges expanded and each checked."""
        spec = self.registries.field(path)
        lever_table = path.startswith("levers.") and path.count(".") == 1
        numeric = spec is None and path.startswith("levers.") or (spec is not None and spec.numeric)
        if isinstance(raw, list):
            items = list(raw)
        elif isinstance(raw, Mapping) and not lever_table:
            raise ScenarioError(self.problem(key, origin, "got a table",
                                             expected="a list of values or a range such as "
                                                      '"1..512 log2"'))
        else:
            items = [raw]
        if not items:
            raise ScenarioError(self.problem(key, origin, "the list of values is empty",
                                             expected="at least one value"))
        out: list = []
        for item in items:
            if numeric and is_range(item):
                unit = spec.unit if spec is not None and spec.kind == "quantity" else None
                try:
                    out.extend(expand_range(item, unit, integer=spec is not None and spec.kind == "int",
                                            limit=MAX_AXIS_VALUES - len(out)))
                except ValueError as exc:
                    raise ScenarioError(self.problem(
                        key, origin, str(exc),
                        expected='a range such as "1..512 log2", "0.5..1 step 0.1" or '
                                 '"1..100 10 points"')) from None
            elif lever_table:
                if item is False:
                    out.append(REMOVE)
                elif item is True:
                    out.append({})
                elif isinstance(item, Mapping):
                    out.append(dict(item))
                else:
                    raise ScenarioError(self.problem(
                        key, origin, f"got {item!r}",
                        expected="false (lever off), true (on with defaults) or a table of settings"))
            else:
                out.append(item)
        if len(out) > MAX_AXIS_VALUES:
            raise ScenarioError(self.problem(key, origin, f"{len(out):,} values, more than "
                                             f"the {MAX_AXIS_VALUES:,} one axis may hold",
                                             expected="fewer values",
                                             suggestion="split the values over several sweeps"))
        if spec is None:
            return out, out
        from .schema import FieldValueError, parse_field

        def check(item):
            try:
                return parse_field(spec, item)
            except FieldValueError as exc:
                raise ScenarioError(self.problem(key, origin, f"value {item!r}: {exc.message}",
                                                 expected=exc.expected or spec.expected(),
                                                 suggestion=exc.suggestion)) from None

        plain = spec.kind in ("int", "float", "quantity") and all(
            type(v) is (int if spec.kind == "int" else float) or
            (spec.kind != "int" and type(v) is int) for v in out)
        if plain and len(out) > 64:
            # Long numeric lists (ranges): check the bounds on an array, then type once.
            values = np.asarray(out, dtype=np.float64)
            bad = ~np.isfinite(values)
            if spec.minimum is not None:
                bad |= values <= spec.minimum if spec.exclusive_minimum else values < spec.minimum
            if spec.maximum is not None:
                bad |= values > spec.maximum
            if bad.any():
                check(out[int(np.flatnonzero(bad)[0])])
            typed = out if spec.kind == "int" else values.tolist()
            return out, typed
        return out, [check(item) for item in out]

    def field_axis(self, path: str, raw: Any, key: str | None, origin: str | None) -> Axis:
        self.check_path(path, key, origin)
        pairs = self.values(path, raw, key, origin)
        section, _, name = path.partition(".")
        if name == "preset" and section in self.registries.presets:
            known = self.registries.presets[section]
            for value in pairs[0]:
                if not isinstance(value, str) or value not in known:
                    near = close_match(str(value), known)
                    listing = "models" if section == "model" else "hardware"
                    raise ScenarioError(self.problem(
                        key, origin, f"no {section} preset named {value!r}",
                        expected=f"a known {section} preset (`infermodel presets {listing}` "
                                 "lists them)",
                        suggestion=f"did you mean {near!r}?" if near else None))
        spec = self.registries.field(path)
        raws, typed = pairs
        if spec is not None and spec.kind == "size_or_fraction":
            labels = raws
        elif spec is not None:
            labels = typed
        else:
            labels = [_label(v) for v in raws]
        return Axis(path, tuple(labels), None, key, origin, field=path, raw=tuple(raws))

    def choice_axis(self, name: Any, table: Any, key: str, origin: str | None) -> Axis:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_\-]*", name):
            raise ScenarioError(self.problem(key, origin, f"choice name {name!r} is not a plain name",
                                             expected="letters, digits, _ and -, starting with a letter"))
        if not isinstance(table, Mapping) or not table:
            raise ScenarioError(self.problem(key, origin, "got " + ("an empty table" if table == {}
                                                                    else f"{table!r}"),
                                             expected="a table of labelled choices, each a table of "
                                                      'field settings, e.g. bf16 = { "levers.'
                                                      'number_formats.weight_bits_linear" = 16 }'))
        labels, settings = [], []
        for label, setting in table.items():
            label_key = f"{key}.{label}"
            if not isinstance(setting, Mapping):
                raise ScenarioError(self.problem(label_key, origin, f"got {setting!r}",
                                                 expected="a table of field settings"))
            flat = {}
            for path, value in _flatten(setting):
                self.check_path(path, label_key, origin)
                if isinstance(value, list):
                    raise ScenarioError(self.problem(
                        label_key, origin, f"{path}: one choice sets one value, got a list",
                        expected="a single value (use a field axis for a list)"))
                if path.startswith("levers.") and path.count(".") == 1:
                    value = REMOVE if value is False else ({} if value is True else value)
                else:
                    spec = self.registries.field(path)
                    if spec is not None:
                        from .schema import FieldValueError, parse_field

                        try:
                            parse_field(spec, value)
                        except FieldValueError as exc:
                            raise ScenarioError(self.problem(
                                label_key, origin, f"{path} = {value!r}: {exc.message}",
                                expected=exc.expected or spec.expected())) from None
                flat[path] = value
            labels.append(str(label))
            settings.append(MappingProxyType(flat))
        return Axis(name, tuple(labels), tuple(settings), key, origin)  # a choice axis


def _flatten(table: Mapping, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted paths of a possibly nested table (``{workload: {batch: 1}}``)."""
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, path)
        else:
            yield path, value


def parse_over(items: Iterable[str]) -> dict[str, Any]:
    """Parse ``--over FIELD=VALUES`` arguments (comma lists or one range).

    >>> parse_over(["workload.batch=1,2,4", "hardware.preset=h100-sxm"])
    {'workload.batch': [1, 2, 4], 'hardware.preset': ['h100-sxm']}
    """
    import tomli

    out: dict[str, Any] = {}
    for item in items:
        path, sep, text = item.partition("=")
        path = path.strip()
        if not sep or not path or not text.strip():
            raise ScenarioError(Problem(f"--over {item!r} is not of the form FIELD=VALUES",
                                        file="--over",
                                        expected='for example --over workload.batch=1,2,4 or '
                                                 '--over "workload.batch=1..512 log2"'))
        text = text.strip()
        if text.startswith("["):
            try:
                values = tomli.loads(f"v = {text}")["v"]
            except tomli.TOMLDecodeError as exc:
                raise ScenarioError(Problem(f"--over {path}: {text!r} is not a TOML array ({exc})",
                                            file="--over", key=path)) from None
        elif is_range(text):
            values = text
        else:
            values = []
            for piece in text.split(","):
                piece = piece.strip()
                if not piece:
                    raise ScenarioError(Problem(f"--over {path}: empty value in {text!r}",
                                                file="--over", key=path))
                try:
                    values.append(tomli.loads(f"v = {piece}")["v"])
                except tomli.TOMLDecodeError:
                    values.append(piece)
        if path in out:
            raise ScenarioError(Problem(f"--over {path} is given twice", file="--over", key=path))
        out[path] = values
    return out


def grid_axes(scenario, over: Mapping[str, Any] | Iterable[str] | None = None,
              choices: Mapping[str, Mapping] | None = None, *, use_table: bool = True,
              host=None) -> tuple[list[Axis], list[str] | None]:
    """The axes of a sweep and the quantities its ``[sweep]`` table asks for.

    The ``[sweep]`` table comes first (unless ``use_table`` is false); ``over``
    (a mapping of field path to values, or ``--over`` strings) replaces an axis of
    the same field or adds one; ``choices`` adds named choice axes.
    """
    from .host import get_host

    host = host or get_host()
    grid = _Grid(scenario, host.registries)
    axes: list[Axis] = []
    quantities = None
    table = scenario.tables.get("sweep") if use_table else None
    if table is not None:
        for key, value in table.items():
            if key == "quantities":
                if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
                    raise ScenarioError(scenario.problem("sweep.quantities", f"got {value!r}",
                                                         expected="a list of quantity names"))
                quantities = list(value)
            elif key == "choices":
                if not isinstance(value, Mapping):
                    raise ScenarioError(scenario.problem("sweep.choices", f"got {value!r}",
                                                         expected="[sweep.choices.NAME] tables"))
                for name, options in value.items():
                    axes.append(grid.choice_axis(name, options, f"sweep.choices.{name}", "table"))
            elif isinstance(value, Mapping) and "." not in key:
                for path, leaf in _flatten(value, key):
                    axes.append(grid.field_axis(path, leaf, f"sweep.{path}", "table"))
            elif "." in key or isinstance(value, (list, str, int, float)):
                if "." not in key:
                    near = close_match(key, [*OPTION_KEYS, *grid.known]) or next(
                        (p for p in grid.known if p.endswith("." + key)), None)
                    raise ScenarioError(scenario.problem(
                        f"sweep.{key}", f"unknown key {key!r} in [sweep]",
                        expected="a field path such as \"workload.batch\", quantities, or "
                                 "[sweep.choices.NAME]",
                        suggestion=f"did you mean {near!r}?" if near else None))
                axes.append(grid.field_axis(key, value, f"sweep.{key}", "table"))
            else:
                raise ScenarioError(scenario.problem(f"sweep.{key}", f"got {value!r}",
                                                     expected="a list of values or a range"))
    if over is not None:
        if not isinstance(over, Mapping):
            over = parse_over(over)
        for path, values in over.items():
            if isinstance(values, Mapping) and not str(path).startswith("levers."):
                axis = grid.choice_axis(path, values, str(path), "over")
            else:
                axis = grid.field_axis(path, values, path, "--over")
            axes = [a for a in axes if a.name != axis.name] + [axis]
    if choices:
        for name, options in choices.items():
            axis = grid.choice_axis(name, options, name, "choices")
            axes = [a for a in axes if a.name != axis.name] + [axis]
    owner: dict[str, str] = {}
    for axis in axes:
        for path in axis.paths:
            other = owner.get(path)
            if other is not None:
                raise ScenarioError(Problem(
                    f"field {path} is set by two axes, {other!r} and {axis.name!r}",
                    file=str(scenario.path) if scenario.path else None,
                    expected="each field swept by one axis only"))
            owner[path] = axis.name
    return axes, quantities


# ---------------------------------------------------------------------------------
# Which fields plugins read
# ---------------------------------------------------------------------------------


def _recording_scenario(scenario, reads: set):
    from .scenario import Scenario

    class Recording(Scenario):
        """The scenario, noting every field and lever a plugin asks for."""

        def value(self, path: str):
            reads.add(path)
            return Scenario.value(scenario, path)

        def lever(self, name: str):
            reads.add(f"levers.{name}")
            return Scenario.lever(scenario, name)

        def given(self, path: str):
            # Whether anything under ``path`` is written: every field below it counts.
            reads.add(path)
            reads.add(f"{path}.*")
            return Scenario.given(scenario, path)

    class Sections(Mapping):
        def __init__(self, data, prefix):
            self._data = data
            self._prefix = prefix

        def __getitem__(self, key):
            reads.add(f"{self._prefix}{key}.*")
            return self._data[key]

        def __iter__(self):
            reads.add(f"{self._prefix}*")
            return iter(self._data)

        def __len__(self):
            return len(self._data)

    values = {f.name: getattr(scenario, f.name) for f in attrs.fields(Scenario)}
    values["sections"] = Sections(scenario.sections, "")
    values["levers"] = Sections(scenario.levers, "levers.")
    return Recording(**values)


@attrs.frozen
class PluginReads:
    """Field paths (and ``levers.NAME``) plugins read from a scenario.

    ``validation``: read by ``infermodel_validate_scenario``; ``build``: read while
    defining or transforming quantities. A path ending in ``.*`` means a whole
    section or lever table was read.
    """

    validation: frozenset
    build: frozenset


def plugin_reads(scenario, *, host=None) -> PluginReads:
    """Which fields the loaded plugins read to validate ``scenario`` and to build its graph.

    The hooks are called with a recording copy of the scenario and callbacks that
    do nothing; a field no plugin reads while building can only reach the
    formulas as an input quantity's value, so a sweep may vary it in arrays.
    """
    from .graph import Transformer
    from .host import get_host

    host = host or get_host()

    def ignore(*args, **kwargs):
        return None

    validation: set[str] = set()
    recorder = _recording_scenario(scenario, validation)
    host.call_each("infermodel_validate_scenario",
                   lambda p: {"scenario": recorder, "report": ignore}, "validation")
    build: set[str] = set()
    recorder = _recording_scenario(scenario, build)
    host.call_each("infermodel_define_quantities",
                   lambda p: {"scenario": recorder, "define": ignore}, "define")
    host.call_each("infermodel_transform_quantities",
                   lambda p: {"scenario": recorder, "transform": Transformer(p, [])}, "transform")
    return PluginReads(frozenset(validation), frozenset(build))


def _is_read(path: str, reads: frozenset[str]) -> bool:
    if path in reads or "*" in reads:
        return True
    parts = path.split(".")
    return any(".".join(parts[:i]) + ".*" in reads for i in range(1, len(parts)))


def scenario_with(base, overrides: Mapping[str, Any], *, host=None, where: Mapping[str, Any] | None = None):
    """``base`` with fields set (as ``--set`` does) and lever tables removed (:data:`REMOVE`)."""
    from .scenario import Origin, apply_overrides, resolve

    if not overrides:
        return base
    origins = dict(base.origins)
    sets = {k: v for k, v in overrides.items() if v is not REMOVE}
    data = apply_overrides(dict(base.raw), origins, sets)
    for path, value in overrides.items():
        if value is REMOVE:
            parts = path.split(".")
            node = data
            for part in parts[:-1]:
                node = node.get(part, {}) if isinstance(node, dict) else {}
            if isinstance(node, dict):
                node.pop(parts[-1], None)
    for path in overrides:
        found = (where or {}).get(path)
        if found is not None:
            origins[path] = found
        elif path in origins and origins[path].file == "--set":
            origins[path] = Origin("sweep")
        section, _, key = path.partition(".")
        old = base.presets.get(section)
        if key == "preset" and old is not None:
            # Forget where the previous preset's values came from, so that the new
            # preset's file is named as their origin.
            from .host import get_host

            info = (host or get_host()).registries.presets[section].get(old)
            if info is not None:
                stale = str(info.path)
                for name in [k for k, o in origins.items()
                             if k.startswith(section + ".") and o.file == stale]:
                    del origins[name]
    return resolve(data, origins, base.path, host=host)


# ---------------------------------------------------------------------------------
# Planning: structural blocks and vector axes
# ---------------------------------------------------------------------------------


@attrs.frozen
class _Block:
    scenario: Any
    compiled: Any
    base: Mapping[str, Any]
    names: frozenset
    vectors: tuple  # (axis index, quantity name, float64 values per label)


def _subgraph(graph, wanted: Sequence[str]):
    """The part of ``graph`` that ``wanted`` needs (so a sweep computes nothing more)."""
    from .graph import QuantityGraph

    keep = set()
    for name in wanted:
        if name in graph:
            keep.add(name)
            keep.update(graph.ancestors(name))
    if len(keep) == len(graph.order):
        return graph
    order = tuple(n for n in graph.order if n in keep)
    return QuantityGraph(MappingProxyType({n: graph.quantities[n] for n in order}), order)


class SweepPlan:
    """A checked grid, ready to evaluate in chunks (see :func:`plan_sweep`)."""

    def __init__(self, scenario, axes: list[Axis], quantities: list[str] | None, *, host=None,
                 progress: bool | None = False, select: bool = True):
        from .host import get_host

        self.scenario = scenario
        self.axes = list(axes)
        self.host = host or get_host()
        self.shape = tuple(len(a) for a in self.axes)
        self.total = math.prod(self.shape)
        if self.total > MAX_GRID_POINTS:
            sizes = " × ".join(f"{len(a):,} ({a.name})" for a in self.axes)
            raise ScenarioError(Problem(
                f"the sweep has {_count_text(self.total)} points ({sizes}), more than the "
                f"{MAX_GRID_POINTS:,} one sweep may have",
                file=str(scenario.path) if scenario.path else None,
                expected=f"at most {MAX_GRID_POINTS:,} points",
                suggestion="use coarser ranges (\"A..B log2\", \"A..B N points\"), or run one "
                           "sweep per value of an axis, each written to its own file with -o"))
        self._progress = progress
        self._cache: dict[tuple, tuple] = {}
        self._label_arrays = None
        self._where = {}
        from .scenario import Origin

        for axis in self.axes:
            if axis.origin == "table" and axis.key:
                origin = scenario.where(axis.key)
            else:
                origin = Origin(axis.origin or "sweep")
            for path in axis.paths:
                if origin is not None:
                    self._where[path] = origin
        self.structural = self._classify()
        self._plan(quantities, select)

    # -- classification ------------------------------------------------------------

    def _vector_capable(self, axis: Axis) -> bool:
        for path in axis.paths:
            spec = self.host.registries.field(path)
            if spec is None or spec.quantity is None or not spec.numeric and spec.kind != "bool":
                return False
        return True

    def _classify(self) -> set[int]:
        self._base_reads = plugin_reads(self.scenario, host=self.host)
        structural = set()
        for i, axis in enumerate(self.axes):
            if not self._vector_capable(axis) or any(_is_read(p, self._base_reads.build)
                                                     for p in axis.paths):
                structural.add(i)
        return structural

    def _block_for(self, combination: tuple) -> tuple:
        """(scenario, graph, reads) for one combination of structural choices."""
        found = self._cache.get(combination)
        if found is not None:
            return found
        from .graph import build_graph

        overrides: dict[str, Any] = {}
        for axis_index, label_index in combination:
            overrides.update(self.axes[axis_index].setting(label_index))
        try:
            scenario = scenario_with(self.scenario, overrides, host=self.host, where=self._where)
            graph = build_graph(scenario, host=self.host)
        except InfermodelError as exc:
            shown = ", ".join(f"{self.axes[a].name} = {self.axes[a].labels[k]!r}"
                              for a, k in combination)
            raise type(exc)(exc.problems, heading=f"at the sweep point {shown}") from None
        reads = plugin_reads(scenario, host=self.host) if combination else self._base_reads
        found = (scenario, graph, reads)
        self._cache[combination] = found
        return found

    def _plan(self, quantities: list[str] | None, select: bool = True) -> None:
        from .progress import Progress

        while True:
            structural = sorted(self.structural)
            vector = [i for i in range(len(self.axes)) if i not in self.structural]
            blocks = math.prod(len(self.axes[i]) for i in structural)
            if blocks > MAX_BLOCKS:
                names = ", ".join(self.axes[i].name for i in structural)
                raise ScenarioError(Problem(
                    f"the sweep has {_count_text(blocks)} structural combinations (of {names}), "
                    f"more than the {MAX_BLOCKS:,} one sweep may build: each is a scenario and "
                    "a quantity graph of its own",
                    file=str(self.scenario.path) if self.scenario.path else None,
                    expected=f"at most {MAX_BLOCKS:,} combinations of presets, levers and "
                             "fields read while the graph is built",
                    suggestion="sweep fewer of those values at once (one sweep per preset, say)"))
            combos = list(itertools.product(*[
                [(i, j) for j in range(len(self.axes[i]))] for i in structural]))
            promote: set[int] = set()
            graphs = []
            with Progress(len(combos), "preparing", unit="blocks",
                          enabled=self._progress if self._progress is not None else None,
                          delay=1.0) as bar:
                for combination in combos:
                    scenario, graph, reads = self._block_for(tuple(combination))
                    for i in vector:
                        if any(_is_read(p, reads.build) for p in self.axes[i].paths):
                            promote.add(i)
                            continue
                        for path in self.axes[i].paths:
                            spec = self.host.registries.field(path)
                            q = graph.quantities.get(spec.quantity)
                            simple = (q is not None and q.is_input and len(q.history) == 1
                                      and q.history[0].kind == "input"
                                      and q.history[0].plugin == spec.plugin)
                            if not simple or (not self.axes[i].everywhere(path)
                                              and scenario.value(path) is None):
                                promote.add(i)
                    graphs.append((combination, scenario, graph, reads))
                    bar.update(1)
            if not promote:
                break
            self.structural |= promote
        self.vector = vector
        self.structural_order = structural
        names: dict[str, Any] = {}
        for _, _, graph, _ in graphs:
            for name in graph.order:
                names.setdefault(name, graph.quantities[name])
        clash = [a.name for a in self.axes if a.name in names]
        if clash:
            raise ScenarioError(Problem(f"the choice name {clash[0]!r} is also a quantity name",
                                        expected="a choice name that names no quantity"))
        for combination, scenario, _graph, reads in graphs:
            self._validate_points(combination, scenario, reads, vector)
        self._graphs = graphs
        #: Every quantity some block defines, name -> Quantity (of the first block defining it).
        self.all_quantities = MappingProxyType(names)
        if select:
            self.select(quantities)
        self._structural_strides = []
        stride = 1
        for i in reversed(structural):
            self._structural_strides.insert(0, (i, stride))
            stride *= len(self.axes[i])
        strides = []
        stride = 1
        for length in reversed(self.shape):
            strides.insert(0, stride)
            stride *= length
        self.strides = strides

    def select(self, quantities: Sequence[str] | None) -> None:
        """Compute only ``quantities`` (and what they depend on); None: every quantity."""
        from .evaluation import compile_graph

        names = self.all_quantities
        if quantities is None:
            wanted = list(names)
        else:
            wanted = []
            for name in quantities:
                if name not in names:
                    near = close_match(str(name), names)
                    raise UnknownQuantityError(Problem(
                        f"no quantity named {name!r}", expected="a quantity defined by a loaded plugin",
                        suggestion=(f"did you mean {near!r}?" if near else "check for typos?")
                        + " (`infermodel run SCENARIO --format json` lists every quantity)"))
                if name not in wanted:
                    wanted.append(name)
        self.quantities = wanted
        self.units = {n: names[n].unit for n in wanted}
        self.descriptions = {n: names[n].description for n in wanted}
        self.blocks: list[_Block] = []
        for _combination, scenario, graph, _reads in self._graphs:
            sub = _subgraph(graph, wanted)
            compiled = compile_graph(sub)
            base = {n: sub.quantities[n].value for n in compiled.inputs}
            vectors = []
            for i in self.vector:
                axis = self.axes[i]
                for path in axis.paths:
                    spec = self.host.registries.field(path)
                    if spec.quantity not in base:
                        continue  # the quantities asked for do not depend on it
                    vectors.append((i, spec.quantity, self._vector_values(axis, path, spec, scenario)))
            self.blocks.append(_Block(scenario, compiled, base, frozenset(sub.order), tuple(vectors)))

    def _validate_points(self, combination, scenario, reads: PluginReads, vector) -> None:
        """Run the validation hooks on every combination of the vector values they read.

        A vector value never goes through :func:`~infermodel.scenario.resolve`, so the
        cross-field checks that read it are run here, on the block's scenario with
        those fields replaced, once per distinct combination.
        """
        from .progress import Progress
        from .schema import parse_field

        checked = [i for i in vector if any(_is_read(p, reads.validation) for p in self.axes[i].paths)]
        if not checked:
            return
        registries = self.host.registries
        count = math.prod(len(self.axes[i]) for i in checked)
        if count > MAX_VALIDATED_POINTS:
            names = ", ".join(self.axes[i].name for i in checked)
            raise ScenarioError(Problem(
                f"the sweep has {_count_text(count)} combinations of fields that validation "
                f"checks one by one ({names}), more than {MAX_VALIDATED_POINTS:,}",
                file=str(self.scenario.path) if self.scenario.path else None,
                expected=f"at most {MAX_VALIDATED_POINTS:,} such combinations",
                suggestion="sweep fewer values of those fields at once"))
        with Progress(count, "validating", unit="points", enabled=self._progress, delay=1.0) as bar:
            for labels in itertools.product(*[range(len(self.axes[i])) for i in checked]):
                sections = dict(scenario.sections)
                changes: dict[str, dict[str, Any]] = {}
                for i, j in zip(checked, labels):
                    for path, raw in self.axes[i].setting(j).items():
                        section, _, name = path.partition(".")
                        changes.setdefault(section, {})[name] = parse_field(registries.field(path), raw)
                for section, values in changes.items():
                    sections[section] = attrs.evolve(sections[section], **values)
                point = attrs.evolve(scenario, sections=MappingProxyType(sections))
                problems: list[Problem] = []

                def report(key, message, *, expected=None, suggestion=None, point=point,
                           problems=problems):
                    problems.append(point.problem(key, message, expected=expected,
                                                  suggestion=suggestion))

                self.host.call_each("infermodel_validate_scenario",
                                    lambda p, point=point, report=report:
                                    {"scenario": point, "report": report}, "validation")
                if problems:
                    shown = ", ".join(
                        [f"{self.axes[a].name} = {self.axes[a].labels[k]!r}" for a, k in combination]
                        + [f"{self.axes[i].name} = {self.axes[i].labels[j]!r}"
                           for i, j in zip(checked, labels)])
                    raise ScenarioError(problems, heading=f"at the sweep point {shown}")
                bar.update(1)

    @staticmethod
    def _vector_values(axis: Axis, path: str, spec, scenario) -> np.ndarray:
        from .schema import parse_field

        if axis.field == path:
            return np.asarray(axis.labels, dtype=np.float64)  # labels hold the typed values
        values = np.empty(len(axis), dtype=np.float64)
        for j, setting in enumerate(axis.settings):
            raw = setting.get(path, _MISSING)
            typed = scenario.value(path) if raw is _MISSING else parse_field(spec, raw)
            values[j] = float(typed)
        return values

    # -- evaluation ----------------------------------------------------------------

    def __len__(self) -> int:
        return self.total

    def indices(self, start: int, stop: int) -> list[np.ndarray]:
        """Each axis's label index for the points ``start`` to ``stop`` (grid order)."""
        flat = np.arange(start, stop, dtype=np.int64)
        return [(flat // stride) % length for stride, length in zip(self.strides, self.shape)]

    def evaluate_range(self, start: int, stop: int) -> tuple[dict, dict]:
        """Quantity columns (and masks of where each is defined) for points ``start``..``stop``."""
        n = stop - start
        index = self.indices(start, stop)
        if self._structural_strides:
            block_id = sum(index[i] * s for i, s in self._structural_strides)
            first = int(block_id[0])
            if n and (block_id == first).all():
                groups = [(self.blocks[first], None)]
            else:
                order = np.argsort(block_id, kind="stable")
                ordered = block_id[order]
                cuts = np.flatnonzero(np.diff(ordered)) + 1
                groups = [(self.blocks[int(ordered[a])], order[a:b])
                          for a, b in zip(np.r_[0, cuts], np.r_[cuts, n])]
        else:
            groups = [(self.blocks[0], None)]
        columns: dict[str, np.ndarray] = {}
        defined: dict[str, np.ndarray] = {}
        for block, selection in groups:
            inputs = dict(block.base)
            for axis_index, quantity, values in block.vectors:
                positions = index[axis_index] if selection is None else index[axis_index][selection]
                inputs[quantity] = values[positions]
            size = n if selection is None else len(selection)
            outputs = block.compiled(inputs)
            for name in self.quantities:
                boolean = self.units[name] == "bool"
                value = outputs.get(name)
                if selection is None:
                    if value is None:
                        columns[name] = np.zeros(n, bool) if boolean else np.full(n, np.nan)
                        defined[name] = np.zeros(n, bool)
                        continue
                    array = np.asarray(value)
                    dtype = bool if boolean else np.float64
                    if array.shape != (n,) or array.dtype != dtype or not array.flags.writeable:
                        array = np.array(np.broadcast_to(array, (n,)), dtype=dtype)
                    columns[name] = array
                    continue
                if name not in columns:
                    columns[name] = np.zeros(n, bool) if boolean else np.full(n, np.nan)
                if value is None:
                    defined.setdefault(name, np.ones(n, bool))[selection] = False
                    continue
                columns[name][selection] = np.broadcast_to(np.asarray(value), (size,))
        return columns, defined

    def label_columns(self, index: list[np.ndarray]) -> dict[str, np.ndarray]:
        """The axes' label columns for a chunk's indices."""
        if self._label_arrays is None:
            self._label_arrays = [np.asarray(a.labels, dtype=np.float64 if a.numeric else object)
                                  for a in self.axes]
        return {axis.name: labels[positions]
                for axis, labels, positions in zip(self.axes, self._label_arrays, index)}

    def chunks(self, chunk_size: int | None = None) -> Iterator[Chunk]:
        """Evaluate the grid chunk by chunk, in grid order, showing progress if asked."""
        from .progress import Progress

        chunk_size = _chunk_size(chunk_size)
        with Progress(self.total, "sweep", enabled=self._progress) as bar:
            for start in range(0, self.total, chunk_size):
                stop = min(start + chunk_size, self.total)
                columns, defined = self.evaluate_range(start, stop)
                labels = self.label_columns(self.indices(start, stop))
                yield Chunk(start, stop, labels, columns, defined)
                bar.update(stop - start)

    def run(self, chunk_size: int | None = None) -> SweepResult:
        """Evaluate every point and keep the columns in memory.

        Refused, before anything is allocated, when the columns would hold more than
        :data:`MAX_IN_MEMORY_VALUES` values: :meth:`write` and :meth:`chunks` stream
        any grid instead.
        """
        chunk_size = _chunk_size(chunk_size)
        held = self.total * (len(self.axes) + len(self.quantities))
        if held > MAX_IN_MEMORY_VALUES:
            raise InfermodelError(Problem(
                f"keeping {_count_text(self.total)} points × {len(self.axes) + len(self.quantities)} "
                f"columns in memory is {_count_text(held)} values, more than the "
                f"{MAX_IN_MEMORY_VALUES:,} one sweep result may hold",
                expected="fewer points or fewer quantities",
                suggestion="stream the points instead: SweepPlan.write(path) or "
                           "SweepPlan.chunks() (the command line's sweep -o FILE.csv does), or "
                           "ask for only the quantities you need"))
        columns = {a.name: np.empty(self.total, dtype=np.float64 if a.numeric else object)
                   for a in self.axes}
        for name in self.quantities:
            columns[name] = np.empty(self.total, dtype=bool if self.units[name] == "bool"
                                     else np.float64)
        defined: dict[str, np.ndarray] = {}
        for chunk in self.chunks(chunk_size):
            for name, values in {**chunk.labels, **chunk.columns}.items():
                columns[name][chunk.start:chunk.stop] = values
            for name, mask in chunk.defined.items():
                defined.setdefault(name, np.ones(self.total, bool))[chunk.start:chunk.stop] = mask
        return SweepResult(self, columns, defined)

    def write(self, output: str | os.PathLike | None, format: str = "csv", *,
              chunk_size: int | None = None, stream=None) -> None:
        """Write every point as CSV or JSON, chunk by chunk.

        To a file: through a temporary file renamed into place at the end, so an
        interruption (Ctrl-C) leaves no partial file. Without ``output``: to
        ``stream`` (standard output).
        """
        writer = _WRITERS[format](self)
        if output is None:
            import sys

            stream = stream or sys.stdout
            stream.write(writer.header())
            for chunk in self.chunks(chunk_size):
                stream.write(writer.chunk(chunk))
            stream.write(writer.footer())
            return
        with atomic_stream(output) as handle:
            handle.write(writer.header())
            for chunk in self.chunks(chunk_size):
                handle.write(writer.chunk(chunk))
            handle.write(writer.footer())

    # -- points ----------------------------------------------------------------------

    def point_indices(self, index: int) -> tuple[int, ...]:
        if not 0 <= index < self.total:
            raise IndexError(f"point {index} outside the sweep's {self.total} points")
        return tuple(int(i) for i in np.unravel_index(index, self.shape)) if self.axes else ()

    def labels(self, index: int) -> dict[str, Any]:
        """The axis labels of point ``index``: ``{"workload.batch": 8, ...}``."""
        return {a.name: a.labels[j] for a, j in zip(self.axes, self.point_indices(index))}

    def overrides(self, index: int) -> dict[str, Any]:
        """The field settings of point ``index`` (``REMOVE`` removes a lever table)."""
        out: dict[str, Any] = {}
        for axis, j in zip(self.axes, self.point_indices(index)):
            out.update(axis.setting(j))
        return out

    def scenario_at(self, index: int):
        """The scenario of point ``index``, resolved and validated."""
        return scenario_with(self.scenario, self.overrides(index), host=self.host, where=self._where)


@attrs.frozen
class Chunk:
    """Points ``start`` to ``stop`` of a sweep: label and quantity columns."""

    start: int
    stop: int
    labels: Mapping[str, np.ndarray]
    columns: Mapping[str, np.ndarray]
    defined: Mapping[str, np.ndarray]


# ---------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------


class SweepResult:
    """Every point of a sweep: a column per axis and per quantity, base units.

    ``result["tpot"]`` is a numpy array over the points (grid order, first axis
    slowest); condition quantities are bool arrays. ``result.defined(name)`` says
    where a quantity exists (a structural choice may remove it, e.g. a preset
    without a price has no cost).
    """

    def __init__(self, plan: SweepPlan, columns: Mapping[str, np.ndarray],
                 defined: Mapping[str, np.ndarray]):
        self.plan = plan
        self.columns = dict(columns)
        self._defined = dict(defined)

    @property
    def axes(self) -> list[Axis]:
        return self.plan.axes

    @property
    def quantities(self) -> list[str]:
        return self.plan.quantities

    @property
    def units(self) -> Mapping[str, str]:
        return self.plan.units

    @property
    def scenario(self):
        return self.plan.scenario

    @property
    def shape(self) -> tuple[int, ...]:
        return self.plan.shape

    def __len__(self) -> int:
        return self.plan.total

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.columns[name]
        except KeyError:
            near = close_match(str(name), self.columns)
            raise UnknownQuantityError(Problem(
                f"the sweep has no column {name!r}",
                suggestion=f"did you mean {near!r}?" if near else None)) from None

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def defined(self, name: str) -> np.ndarray:
        """Where quantity ``name`` is defined (all True unless a choice removes it)."""
        mask = self._defined.get(name)
        return np.ones(len(self), bool) if mask is None else mask

    def labels(self, index: int) -> dict[str, Any]:
        return self.plan.labels(index)

    def overrides(self, index: int) -> dict[str, Any]:
        return self.plan.overrides(index)

    def scenario_at(self, index: int):
        return self.plan.scenario_at(index)

    def evaluate_at(self, index: int):
        """:func:`infermodel.evaluate` of point ``index``: every quantity, with derivations."""
        from .evaluation import evaluate

        return evaluate(self.scenario_at(index), host=self.plan.host)

    def row(self, index: int) -> dict[str, Any]:
        """Point ``index`` as a dict: labels, then quantity values (None where undefined)."""
        out = self.labels(index)
        for name in self.quantities:
            if not self.defined(name)[index]:
                out[name] = None
            else:
                value = self.columns[name][index]
                out[name] = bool(value) if self.units[name] == "bool" else float(value)
        return out

    def _chunk(self, start: int, stop: int) -> Chunk:
        labels = {a.name: self.columns[a.name][start:stop] for a in self.axes}
        columns = {n: self.columns[n][start:stop] for n in self.quantities}
        defined = {n: m[start:stop] for n, m in self._defined.items()}
        return Chunk(start, stop, labels, columns, defined)

    def _render(self, format: str) -> str:
        writer = _WRITERS[format](self.plan)
        parts = [writer.header()]
        for start in range(0, len(self), 65536):
            parts.append(writer.chunk(self._chunk(start, min(start + 65536, len(self)))))
        parts.append(writer.footer())
        return "".join(parts)

    def _text_or_file(self, format: str, path: str | os.PathLike | None) -> str | None:
        text = self._render(format)
        if path is None:
            return text
        from .output import atomic_write

        atomic_write(path, text)
        return None

    def to_csv(self, path: str | os.PathLike | None = None) -> str | None:
        """CSV text (or write it atomically to ``path``): a column per axis, then per quantity."""
        return self._text_or_file("csv", path)

    def to_json(self, path: str | os.PathLike | None = None) -> str | None:
        """JSON text (or write it to ``path``): axes, quantity units, and one object per point."""
        return self._text_or_file("json", path)

    def table(self, names: Sequence[str] | None = None) -> str:
        """An aligned text table with units in readable prefixes."""
        return render_table(self, names)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        axes = ", ".join(f"{a.name}[{len(a)}]" for a in self.axes)
        return f"<SweepResult {len(self)} points over {axes or 'no axes'}, {len(self.quantities)} quantities>"


# ---------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------


def _number_text(values: np.ndarray) -> list[str]:
    """Shortest round-trip text of floats; integral values without a decimal point."""
    if values.dtype == bool:
        return ["true" if v else "false" for v in values.tolist()]
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(values) & (values == np.trunc(values)) & (np.abs(values) < 2**53)
    if integral.all():
        return values.astype(np.int64).astype(str).tolist()
    return list(map(float.__repr__, values.tolist()))


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


class _CsvWriter:
    def __init__(self, plan: SweepPlan):
        self.plan = plan
        self.names = [a.name for a in plan.axes] + list(plan.quantities)
        self._label_text = {a.name: {lbl: _csv_field(str(lbl)) for lbl in a.labels}
                            for a in plan.axes if not a.numeric}

    def header(self) -> str:
        return ",".join(_csv_field(n) for n in self.names) + "\n"

    def chunk(self, chunk: Chunk) -> str:
        texts = []
        for axis in self.plan.axes:
            values = chunk.labels[axis.name]
            if axis.numeric:
                texts.append(_number_text(values))
            else:
                lookup = self._label_text[axis.name]
                texts.append([lookup[v] for v in values.tolist()])
        for name in self.plan.quantities:
            text = _number_text(chunk.columns[name])
            mask = chunk.defined.get(name)
            if mask is not None and not mask.all():
                text = [t if ok else "" for t, ok in zip(text, mask.tolist())]
            texts.append(text)
        if not texts:
            return ""
        return "\n".join(map(",".join, zip(*texts))) + "\n"

    def footer(self) -> str:
        return ""


def _json_number(value: Any) -> Any:
    from .printing import json_value

    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.integer, np.floating)):
        value = float(value)
    return json_value(value)


def _json_text(values: np.ndarray) -> list[str]:
    """JSON text of a column: numbers, true/false, and "inf"/"-inf"/"nan" as strings."""
    text = _number_text(values)
    if values.dtype != bool and not np.isfinite(values).all():
        special = {"inf": '"inf"', "-inf": '"-inf"', "nan": '"nan"'}
        text = [special.get(t, t) for t in text]
    return text


class _JsonWriter:
    def __init__(self, plan: SweepPlan):
        self.plan = plan
        self._first = True
        names = [a.name for a in plan.axes] + list(plan.quantities)
        self._row = "{" + ", ".join(json.dumps(n, ensure_ascii=False).replace("%", "%%") + ": %s"
                                    for n in names) + "}"
        self._label_json = {a.name: {lbl: json.dumps(lbl, ensure_ascii=False) for lbl in a.labels}
                            for a in plan.axes if not a.numeric}

    def header(self) -> str:
        plan = self.plan
        head = {
            "scenario": plan.scenario.name,
            "points": None,
            "axes": [{"name": a.name, "fields": list(a.paths),
                      "values": [_json_number(v) if a.numeric else v for v in a.labels]}
                     for a in plan.axes],
            "quantities": {n: {"unit": plan.units[n], "description": plan.descriptions[n]}
                           for n in plan.quantities},
        }
        text = json.dumps(head, indent=1, ensure_ascii=False)
        # The point list is streamed: open it where the placeholder is.
        before, _, after = text.partition('"points": null')
        self._tail = after
        return before + '"count": ' + str(plan.total) + ',\n "points": ['

    def chunk(self, chunk: Chunk) -> str:
        plan = self.plan
        texts = []
        for axis in plan.axes:
            values = chunk.labels[axis.name]
            if axis.numeric:
                texts.append(_json_text(values))
            else:
                lookup = self._label_json[axis.name]
                texts.append([lookup[v] for v in values.tolist()])
        for name in plan.quantities:
            text = _json_text(chunk.columns[name])
            mask = chunk.defined.get(name)
            if mask is not None and not mask.all():
                text = [t if ok else "null" for t, ok in zip(text, mask.tolist())]
            texts.append(text)
        if not texts or chunk.stop == chunk.start:
            return ""
        rows = [self._row % row for row in zip(*texts)]
        prefix = "\n  " if self._first else ",\n  "
        self._first = False
        return prefix + ",\n  ".join(rows)

    def footer(self) -> str:
        return "\n ]" + self._tail + "\n"


_WRITERS = {"csv": _CsvWriter, "json": _JsonWriter}


def render_table(result: SweepResult, names: Sequence[str] | None = None) -> str:
    """Aligned text: a column per axis and per quantity, values with unit prefixes."""
    from .printing import show

    names = list(names or result.quantities)
    headers = [a.name for a in result.axes] + [
        f"{n} [{result.units[n]}]" if result.units[n] not in ("1", "bool") else n for n in names]
    rows = []
    for i in range(len(result)):
        row = [str(_label_text(a, result.columns[a.name][i])) for a in result.axes]
        for name in names:
            if not result.defined(name)[i]:
                row.append("—")
            elif result.units[name] == "bool":
                row.append("yes" if result.columns[name][i] else "no")
            else:
                row.append(show(float(result.columns[name][i]), result.units[name]))
        rows.append(row)
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(c.rjust(w) if k >= len(result.axes) else c.ljust(w)
                               for k, (c, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(lines)


def _label_text(axis: Axis, value: Any) -> str:
    if axis.numeric:
        value = float(value)
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    return str(value)


# ---------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------


def _as_scenario(scenario, host):
    from .scenario import Scenario, load_scenario

    if isinstance(scenario, Scenario):
        return scenario
    return load_scenario(Path(scenario), host=host)


def plan_sweep(scenario, over: Mapping[str, Any] | Iterable[str] | None = None, *,
               choices: Mapping[str, Mapping] | None = None,
               quantities: Sequence[str] | None = None, use_table: bool = True,
               progress: bool | None = False, select: bool = True, host=None) -> SweepPlan:
    """Check a grid and prepare it (structural blocks resolved and compiled).

    Takes the same arguments as :func:`sweep`; evaluate with ``plan.run()``,
    ``plan.chunks()`` or ``plan.write(path, "csv")``. With ``select=False`` nothing
    is compiled until ``plan.select(quantities)`` (``plan.all_quantities`` lists
    what there is to choose from).
    """
    scenario = _as_scenario(scenario, host)
    axes, table_quantities = grid_axes(scenario, over, choices, use_table=use_table, host=host)
    if quantities is None:
        quantities = table_quantities
    elif isinstance(quantities, str):
        quantities = [quantities]
    return SweepPlan(scenario, axes, list(quantities) if quantities is not None else None,
                     host=host, progress=progress, select=select)


def sweep(scenario, over: Mapping[str, Any] | Iterable[str] | None = None, *,
          choices: Mapping[str, Mapping] | None = None,
          quantities: Sequence[str] | None = None, use_table: bool = True,
          chunk_size: int | None = None, progress: bool | None = False, host=None) -> SweepResult:
    """Evaluate a scenario over a grid of field values.

    ``scenario``: a :class:`~infermodel.scenario.Scenario` or a path. ``over``
    maps field paths to values: a list (``[1, 2, 4]``, ``["h100-sxm", "h200"]``),
    a range string (``"1..512 log2"``, ``"0.5..1 step 0.1"``, ``"1..100 10 points"``)
    or one value; it adds to (or replaces axes of) the scenario's ``[sweep]``
    table, which ``use_table=False`` ignores. ``choices`` adds named choice axes:
    ``{"weights": {"bf16": {"levers.number_formats.weight_bits_linear": 16}, ...}}``.
    ``quantities`` limits the columns (default: the table's list, else every
    quantity). ``progress`` draws a bar on standard error (None: when it is a
    terminal).

    >>> r = sweep("scenarios/case-study-24gb.toml", {"workload.batch": [1, 18]},  # doctest: +SKIP
    ...           quantities=["tokens_per_s_total"])
    >>> r["tokens_per_s_total"]  # doctest: +SKIP
    array([160.3..., 958.9...])
    """
    plan = plan_sweep(scenario, over, choices=choices, quantities=quantities,
                      use_table=use_table, progress=progress, host=host)
    return plan.run(chunk_size)


__all__ = [
    "REMOVE",
    "Axis",
    "Chunk",
    "SweepPlan",
    "SweepResult",
    "expand_range",
    "grid_axes",
    "is_range",
    "parse_over",
    "plan_sweep",
    "plugin_reads",
    "render_table",
    "scenario_with",
    "sweep",
]
