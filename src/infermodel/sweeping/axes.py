"""Sweep axes: the grid a scenario's ``[sweep]`` table and ``--over`` describe."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np

from ..errors import Problem, ScenarioError, close_match, did_you_mean, suggest
from ..scenario import REMOVE
from .ranges import MAX_AXIS_VALUES, expand_range, is_range

#: Keys of ``[sweep]`` that are options rather than fields.
OPTION_KEYS = ("quantities", "choices")


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
            assert self.raw is not None
            return {self.field: self.raw[index]}
        assert self.settings is not None
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
        # Checked per type, not per label: a long range has one or two types.
        return all(issubclass(t, (int, float)) and not issubclass(t, bool)
                   for t in set(map(type, self.labels)))



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

    from ..registry import FIELD_SECTIONS
    from ..scenario import LOADER_KEYS

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
        from ..registry import FIELD_SECTIONS

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
                    suggestion=did_you_mean(near_lever and f"levers.{near_lever}")))
        expected = ("a field such as workload.batch, hardware.preset or levers.LEVER.SETTING"
                    if section not in (*FIELD_SECTIONS, "levers") else f"a field of [{section}]")
        raise ScenarioError(self.problem(key, origin, f"unknown field {path!r}", expected=expected,
                                         suggestion=did_you_mean(near) or
                                         "`infermodel check` and the docs list the fields"))

    def values(self, path: str, raw: Any, key: str | None, origin: str | None) -> tuple[list, list]:
        """The raw and typed values a field axis takes, ranges expanded and each checked."""
        spec = self.registries.field(path)
        lever_table = path.startswith("levers.") and path.count(".") == 1
        numeric = (spec is None and path.startswith("levers.")) or (spec is not None and spec.numeric)
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
        from ..schema import FieldValueError, parse_field

        def check(item):
            try:
                return parse_field(spec, item)
            except FieldValueError as exc:
                raise ScenarioError(self.problem(key, origin, f"value {item!r}: {exc.message}",
                                                 expected=exc.expected or spec.expected(),
                                                 suggestion=exc.suggestion)) from None

        plain = spec.kind in ("int", "float", "quantity") and all(
            t is (int if spec.kind == "int" else float) or (spec.kind != "int" and t is int)
            for t in set(map(type, out)))
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
                    listing = "models" if section == "model" else "hardware"
                    raise ScenarioError(self.problem(
                        key, origin, f"no {section} preset named {value!r}",
                        expected=f"a known {section} preset (`infermodel presets {listing}` "
                                 "lists them)",
                        suggestion=suggest(str(value), known)))
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
                        from ..schema import FieldValueError, parse_field

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
            except RecursionError:
                raise ScenarioError(Problem(f"--over {path}: the array is nested too deeply",
                                            file="--over", key=path,
                                            expected="a flat TOML array such as [1, 2, 4]")) from None
            except ValueError as exc:  # not TOML, or an integer of over 4,300 digits
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
                except RecursionError:
                    raise ScenarioError(Problem(f"--over {path}: a value is nested too deeply",
                                                file="--over", key=path,
                                                expected="numbers or names separated by commas"
                                                )) from None
                except ValueError:  # not TOML (a name), or an integer of over 4,300 digits
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
    host = host or scenario.host
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
                        suggestion=did_you_mean(near)))
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
