"""Registries filled by the registration hooks: scenario fields, levers, presets, witnesses."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs

from .errors import PluginError, Problem
from .quantity import NAME_PATTERN, check_name


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default for a field the scenario must give.
REQUIRED: Any = _Required()

#: Sections whose fields are declared by plugins through ``infermodel_register_fields``.
FIELD_SECTIONS = ("model", "hardware", "workload", "efficiency", "pricing")
FIELD_KINDS = ("int", "float", "quantity", "bool", "str", "choice", "size_or_fraction")


@attrs.frozen
class FieldSpec:
    """One scenario field: where it lives, what it accepts, what it feeds."""

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

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float", "quantity")

    def expected(self) -> str:
        """A phrase saying what the field accepts, for error messages and docs."""
        if self.kind == "int":
            text = "an integer"
        elif self.kind == "float":
            text = "a number"
        elif self.kind == "quantity":
            from .units import EXAMPLES

            example = f" such as {EXAMPLES[self.unit]!r}" if self.unit in EXAMPLES else ""
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


UNIT_WORDS = {"B": "bytes", "s": "seconds", "B/s": "bytes per second", "FLOP/s": "FLOP per second",
              "USD": "US dollars", "USD/h": "US dollars per hour", "W": "watts", "J": "joules"}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


@attrs.frozen
class LeverInfo:
    name: str
    schema: type
    description: str
    plugin: str
    reference: str | None = None


@attrs.frozen
class WitnessInfo:
    """A witness experiment: its function, its options and who registered it."""

    name: str
    function: Any
    description: str
    plugin: str
    reference: str | None = None
    options: Any = attrs.field(factory=dict)   # name -> infermodel.witnessing.Option


@attrs.frozen
class PresetInfo:
    kind: str
    name: str
    path: Path
    plugin: str


@attrs.frozen
class HeadlineInfo:
    """A quantity the short summary of ``infermodel run`` shows, under ``group``."""

    group: str
    name: str
    label: str
    plugin: str


@attrs.define
class Registries:
    fields: dict[str, dict[str, FieldSpec]]
    levers: dict[str, LeverInfo]
    presets: dict[str, dict[str, PresetInfo]]
    witnesses: dict[str, WitnessInfo] = attrs.field(factory=dict)
    headlines: dict[str, HeadlineInfo] = attrs.field(factory=dict)
    _section_classes: dict[str, type] = attrs.field(factory=dict)

    def field(self, path: str) -> FieldSpec | None:
        section, _, name = path.partition(".")
        return self.fields.get(section, {}).get(name)

    def all_fields(self) -> list[FieldSpec]:
        return [spec for section in FIELD_SECTIONS for spec in self.fields[section].values()]


def build_registries(host) -> Registries:
    """Call the registration hooks of every plugin and check what they declared."""
    fields: dict[str, dict[str, FieldSpec]] = {s: {} for s in FIELD_SECTIONS}
    levers: dict[str, LeverInfo] = {}
    presets: dict[str, dict[str, PresetInfo]] = {"model": {}, "hardware": {}}
    problems: list[Problem] = []

    def field_registrar(plugin: str):
        def register(section, name, *, kind, description, unit="1", default=REQUIRED,
                     minimum=None, maximum=None, exclusive_minimum=False, choices=None,
                     quantity=None):
            if section not in FIELD_SECTIONS:
                raise PluginError(f"plugin {plugin!r} registered field {name!r} in unknown section "
                                  f"{section!r}; sections are {', '.join(FIELD_SECTIONS)}")
            if kind not in FIELD_KINDS:
                raise PluginError(f"plugin {plugin!r} registered field {section}.{name} with "
                                  f"unknown kind {kind!r}; kinds are {', '.join(FIELD_KINDS)}")
            if not isinstance(name, str) or not NAME_PATTERN.match(name):
                raise PluginError(f"plugin {plugin!r}: field name {name!r} is not a valid key "
                                  "(letters, digits and underscores, starting with a letter)")
            if quantity is not None and check_name(quantity):
                raise PluginError(f"plugin {plugin!r}: field {section}.{name}: {check_name(quantity)}")
            if kind == "choice" and not choices:
                raise PluginError(f"plugin {plugin!r}: choice field {section}.{name} needs choices")
            existing = fields[section].get(name)
            if existing is not None:
                problems.append(Problem(
                    f"field {section}.{name} is registered by both {existing.plugin!r} and {plugin!r}"))
                return
            fields[section][name] = FieldSpec(
                section=section, name=name, kind=kind, description=description, plugin=plugin,
                unit=unit, default=default, minimum=minimum, maximum=maximum,
                exclusive_minimum=exclusive_minimum,
                choices=tuple(choices) if choices else None, quantity=quantity)
        return register

    def lever_registrar(plugin: str):
        def register(name, schema, *, description, reference=None):
            if check_name(name):
                raise PluginError(f"plugin {plugin!r}: lever name {name!r}: {check_name(name)}")
            if not attrs.has(schema):
                raise PluginError(f"plugin {plugin!r}: lever {name!r} schema must be an attrs class")
            if name in levers:
                problems.append(Problem(
                    f"lever {name!r} is registered by both {levers[name].plugin!r} and {plugin!r}"))
                return
            levers[name] = LeverInfo(name, schema, description, plugin, reference)
        return register

    def preset_registrar(plugin: str):
        def register(kind, directory):
            if kind not in presets:
                raise PluginError(f"plugin {plugin!r}: preset kind {kind!r} is not 'model' or 'hardware'")
            directory = Path(directory)
            if not directory.is_dir():
                raise PluginError(f"plugin {plugin!r}: preset directory {directory} does not exist")
            for path in sorted(directory.glob("*.toml")):
                name = path.stem
                if name in presets[kind]:
                    other = presets[kind][name]
                    problems.append(Problem(
                        f"{kind} preset {name!r} is provided by both {other.plugin!r} ({other.path}) "
                        f"and {plugin!r} ({path})"))
                    continue
                presets[kind][name] = PresetInfo(kind, name, path, plugin)
        return register

    witnesses: dict[str, WitnessInfo] = {}

    def witness_registrar(plugin: str):
        def register(name, function, *, description, reference=None, options=None):
            from types import MappingProxyType

            from .witnessing import Option

            if check_name(name):
                raise PluginError(f"plugin {plugin!r}: witness name {name!r}: {check_name(name)}")
            if not callable(function):
                raise PluginError(f"plugin {plugin!r}: witness {name!r} needs a callable "
                                  "function(scenario, options)")
            options = dict(options or {})
            for key, option in options.items():
                if not isinstance(key, str) or not NAME_PATTERN.match(key):
                    raise PluginError(f"plugin {plugin!r}: witness {name!r}: option name {key!r} "
                                      "is not a valid key")
                if not isinstance(option, Option):
                    raise PluginError(f"plugin {plugin!r}: witness {name!r}: option {key!r} must "
                                      "be an infermodel.witnessing.Option")
            if name in witnesses:
                problems.append(Problem(
                    f"witness {name!r} is registered by both {witnesses[name].plugin!r} and {plugin!r}"))
                return
            witnesses[name] = WitnessInfo(name, function, description, plugin, reference,
                                          MappingProxyType(options))
        return register

    value_types: dict[type, str] = {}

    def type_registrar(plugin: str):
        def register(type_, function):
            from .schema import CONVERTER

            if not isinstance(type_, type) or not callable(function):
                raise PluginError(f"plugin {plugin!r}: register(type_, function) needs a type "
                                  "and a callable")
            if value_types.get(type_, plugin) != plugin:
                problems.append(Problem(f"value type {type_.__name__} is registered by both "
                                        f"{value_types[type_]!r} and {plugin!r}"))
                return
            value_types[type_] = plugin
            CONVERTER.register_structure_hook(type_, function)
        return register

    headlines: dict[str, HeadlineInfo] = {}

    def headline_registrar(plugin: str):
        def register(group, name, *, label=None):
            if not isinstance(group, str) or not group:
                raise PluginError(f"plugin {plugin!r}: a headline group must be a non-empty string")
            if check_name(name):
                raise PluginError(f"plugin {plugin!r}: headline {name!r}: {check_name(name)}")
            if label is not None and (not isinstance(label, str) or not label):
                raise PluginError(f"plugin {plugin!r}: headline {name!r}: label must be a "
                                  "non-empty string")
            if name in headlines:
                problems.append(Problem(f"headline {name!r} is registered by both "
                                        f"{headlines[name].plugin!r} and {plugin!r}"))
                return
            headlines[name] = HeadlineInfo(group, name, label or name, plugin)
        return register

    host.call_each("infermodel_register_value_types", lambda p: {"register": type_registrar(p)},
                   "registration")
    host.call_each("infermodel_register_fields", lambda p: {"register": field_registrar(p)}, "registration")
    host.call_each("infermodel_register_levers", lambda p: {"register": lever_registrar(p)}, "registration")
    host.call_each("infermodel_register_presets", lambda p: {"register": preset_registrar(p)}, "registration")
    host.call_each("infermodel_register_witnesses", lambda p: {"register": witness_registrar(p)},
                   "registration")
    host.call_each("infermodel_register_headlines", lambda p: {"register": headline_registrar(p)},
                   "registration")
    if problems:
        raise PluginError(problems, heading="plugins declare conflicting names")
    for section in FIELD_SECTIONS:
        for spec in fields[section].values():
            if spec.default is not REQUIRED and spec.default is not None and spec.numeric:
                if isinstance(spec.default, float) and not math.isfinite(spec.default):
                    raise PluginError(f"plugin {spec.plugin!r}: field {spec.path} has a non-finite default")
    return Registries(fields, levers, presets, witnesses, headlines)
