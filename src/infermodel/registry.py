"""Registries filled by the registration hooks: scenario fields, levers, presets, witnesses,
headlines, number formats and quantisers.

:func:`build_registries` calls each registration hook with a ``register`` callback
that knows the calling plugin, collects every name declared twice, and raises once.
The records themselves live in :mod:`infermodel.declarations`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs
import cattrs

from .declarations import (
    ENCODING_KINDS,
    FIELD_KINDS,
    FIELD_SECTIONS,
    PRESET_KINDS,
    REQUIRED,
    UNIT_WORDS,
    Encoding,
    FieldSpec,
    HeadlineInfo,
    LeverInfo,
    NumberFormatInfo,
    Option,
    PresetInfo,
    QuantiserInfo,
    TypicalSettingInfo,
    WitnessInfo,
)
from .errors import PluginError, Problem
from .hookspecs import (
    FieldRegistrar,
    HeadlineRegistrar,
    LeverRegistrar,
    NumberFormatRegistrar,
    PresetRegistrar,
    QuantiserRegistrar,
    TypicalSettingRegistrar,
    ValueTypeRegistrar,
    WitnessRegistrar,
)
from .quantity import NAME_PATTERN, check_name
from .schema import BASE_CONVERTER, section_class, section_structure_hook
from .units import EXAMPLES

if TYPE_CHECKING:  # the host imports this module; this import is for annotations only
    from .host import PluginHost


@attrs.define
class Registries:
    """What the loaded plugins declared, and the converter that reads scenarios with it.

    ``converter`` is this registries' own copy of the strict converter, holding the
    value types the plugins registered; ``section_classes`` holds one attrs class per
    field section, built from the registered fields.
    """

    fields: dict[str, dict[str, FieldSpec]]
    levers: dict[str, LeverInfo]
    presets: dict[str, dict[str, PresetInfo]]
    witnesses: dict[str, WitnessInfo] = attrs.field(factory=dict)
    headlines: dict[str, HeadlineInfo] = attrs.field(factory=dict)
    number_formats: dict[str, NumberFormatInfo] = attrs.field(factory=dict)
    quantisers: dict[str, QuantiserInfo] = attrs.field(factory=dict)
    typical_settings: dict[str, TypicalSettingInfo] = attrs.field(factory=dict)
    converter: cattrs.Converter = attrs.field(factory=BASE_CONVERTER.copy, repr=False)
    section_classes: Mapping[str, type] = attrs.field(factory=dict, repr=False)

    def field(self, path: str) -> FieldSpec | None:
        section, _, name = path.partition(".")
        return self.fields.get(section, {}).get(name)

    def all_fields(self) -> list[FieldSpec]:
        return [spec for section in FIELD_SECTIONS for spec in self.fields[section].values()]


class _Collector:
    """What the registration hooks declare, plugin by plugin, with every clash."""

    def __init__(self) -> None:
        self.fields: dict[str, dict[str, FieldSpec]] = {s: {} for s in FIELD_SECTIONS}
        self.levers: dict[str, LeverInfo] = {}
        self.presets: dict[str, dict[str, PresetInfo]] = {kind: {} for kind in PRESET_KINDS}
        self.witnesses: dict[str, WitnessInfo] = {}
        self.headlines: dict[str, HeadlineInfo] = {}
        self.number_formats: dict[str, NumberFormatInfo] = {}
        self.quantisers: dict[str, QuantiserInfo] = {}
        self.typical_settings: dict[str, TypicalSettingInfo] = {}
        self.value_types: dict[type, str] = {}
        self.converter = BASE_CONVERTER.copy()
        self.problems: list[Problem] = []

    # Each ``*_registrar(plugin)`` is the ``register`` callback handed to that plugin.

    def field_registrar(self, plugin: str) -> FieldRegistrar:
        def register(section, name, *, kind, description, unit="1", default=REQUIRED,
                     minimum=None, maximum=None, exclusive_minimum=False, choices=None,
                     quantity=None):
            _check_field(plugin, section, name, kind, quantity, choices)
            existing = self.fields[section].get(name)
            if existing is not None:
                self.problems.append(Problem(
                    f"field {section}.{name} is registered by both {existing.plugin!r} and {plugin!r}"))
                return
            self.fields[section][name] = FieldSpec(
                section=section, name=name, kind=kind, description=description, plugin=plugin,
                unit=unit, default=default, minimum=minimum, maximum=maximum,
                exclusive_minimum=exclusive_minimum,
                choices=tuple(choices) if choices else None, quantity=quantity,
                example=EXAMPLES.get(unit) if kind == "quantity" else None)
        return register

    def headline_registrar(self, plugin: str) -> HeadlineRegistrar:
        def register(group, name, *, label=None, choices=None, interval=None):
            if interval is not None and (isinstance(interval, str) or len(interval) != 2
                                         or any(check_name(n) for n in interval)):
                raise PluginError(f"plugin {plugin!r}: headline {name!r}: interval must name "
                                  "two quantities (the low and the high end)")
            if not isinstance(group, str) or not group:
                raise PluginError(f"plugin {plugin!r}: a headline group must be a non-empty string")
            if check_name(name):
                raise PluginError(f"plugin {plugin!r}: headline {name!r}: {check_name(name)}")
            if label is not None and (not isinstance(label, str) or not label):
                raise PluginError(f"plugin {plugin!r}: headline {name!r}: label must be a "
                                  "non-empty string")
            if choices is not None and (isinstance(choices, str) or not choices or not all(
                    isinstance(c, str) and c for c in choices)):
                raise PluginError(f"plugin {plugin!r}: headline {name!r}: choices must be a "
                                  "non-empty sequence of non-empty strings")
            if name in self.headlines:
                self.problems.append(Problem(f"headline {name!r} is registered by both "
                                             f"{self.headlines[name].plugin!r} and {plugin!r}"))
                return
            self.headlines[name] = HeadlineInfo(group, name, label or name, plugin,
                                                tuple(choices) if choices is not None else None,
                                                tuple(interval) if interval is not None else None)
        return register

    def typical_setting_registrar(self, plugin: str) -> TypicalSettingRegistrar:
        def register(name, setting, *, description, lever=None, reference=None):
            if not isinstance(name, str) or not name.strip():
                raise PluginError(f"plugin {plugin!r}: a typical setting needs a non-empty name")
            if not callable(setting):
                raise PluginError(f"plugin {plugin!r}: typical setting {name!r} needs a callable "
                                  "setting(result)")
            if not isinstance(description, str) or not description:
                raise PluginError(f"plugin {plugin!r}: typical setting {name!r} needs a "
                                  "description")
            if lever is not None and check_name(lever):
                raise PluginError(f"plugin {plugin!r}: typical setting {name!r}: lever "
                                  f"{lever!r}: {check_name(lever)}")
            if name in self.typical_settings:
                self.problems.append(Problem(
                    f"typical setting {name!r} is registered by both "
                    f"{self.typical_settings[name].plugin!r} and {plugin!r}"))
                return
            self.typical_settings[name] = TypicalSettingInfo(name, setting, description, plugin,
                                                             lever, reference)
        return register

    def lever_registrar(self, plugin: str) -> LeverRegistrar:
        def register(name, schema, *, description, reference=None):
            if check_name(name):
                raise PluginError(f"plugin {plugin!r}: lever name {name!r}: {check_name(name)}")
            if not attrs.has(schema):
                raise PluginError(f"plugin {plugin!r}: lever {name!r} schema must be an attrs class")
            if name in self.levers:
                self.problems.append(Problem(
                    f"lever {name!r} is registered by both {self.levers[name].plugin!r} and {plugin!r}"))
                return
            self.levers[name] = LeverInfo(name, schema, description, plugin, reference)
        return register

    def preset_registrar(self, plugin: str) -> PresetRegistrar:
        def register(kind, directory):
            if kind not in self.presets:
                raise PluginError(f"plugin {plugin!r}: preset kind {kind!r} is not one of "
                                  + ", ".join(repr(k) for k in PRESET_KINDS))
            directory = Path(directory)
            if not directory.is_dir():
                raise PluginError(f"plugin {plugin!r}: preset directory {directory} does not exist")
            for path in sorted(directory.glob("*.toml")):
                name = path.stem
                if name in self.presets[kind]:
                    other = self.presets[kind][name]
                    self.problems.append(Problem(
                        f"{kind} preset {name!r} is provided by both {other.plugin!r} ({other.path}) "
                        f"and {plugin!r} ({path})"))
                    continue
                self.presets[kind][name] = PresetInfo(kind, name, path, plugin)
        return register

    def witness_registrar(self, plugin: str) -> WitnessRegistrar:
        def register(name, function, *, description, reference=None, options=None):
            options = _check_witness(plugin, name, function, options)
            if name in self.witnesses:
                self.problems.append(Problem(
                    f"witness {name!r} is registered by both {self.witnesses[name].plugin!r} and {plugin!r}"))
                return
            self.witnesses[name] = WitnessInfo(name, function, description, plugin, reference,
                                               MappingProxyType(options))
        return register

    def number_format_registrar(self, plugin: str) -> NumberFormatRegistrar:
        def register(name, *, description, bits, element, metadata_bits=0.0, granularity="none",
                     values_per_scale=None, scale=None, reference=None):
            _check_number_format(plugin, name, element, scale, granularity, values_per_scale)
            if name in self.number_formats:
                self.problems.append(Problem(
                    f"number format {name!r} is registered by both "
                    f"{self.number_formats[name].plugin!r} and {plugin!r}"))
                return
            self.number_formats[name] = NumberFormatInfo(
                name, description, float(bits), element, plugin, float(metadata_bits),
                granularity, values_per_scale, scale, reference)
        return register

    def quantiser_registrar(self, plugin: str) -> QuantiserRegistrar:
        def register(name, function, *, description, reference=None):
            if check_name(name):
                raise PluginError(f"plugin {plugin!r}: quantiser name {name!r}: {check_name(name)}")
            if not callable(function):
                raise PluginError(f"plugin {plugin!r}: quantiser {name!r} needs a callable "
                                  "function(values, *, bits, zero_point)")
            if name in self.quantisers:
                self.problems.append(Problem(
                    f"quantiser {name!r} is registered by both {self.quantisers[name].plugin!r} "
                    f"and {plugin!r}"))
                return
            self.quantisers[name] = QuantiserInfo(name, function, description, plugin, reference)
        return register

    def type_registrar(self, plugin: str) -> ValueTypeRegistrar:
        def register(type_, function):
            if not isinstance(type_, type) or not callable(function):
                raise PluginError(f"plugin {plugin!r}: register(type_, function) needs a type "
                                  "and a callable")
            if self.value_types.get(type_, plugin) != plugin:
                self.problems.append(Problem(f"value type {type_.__name__} is registered by both "
                                             f"{self.value_types[type_]!r} and {plugin!r}"))
                return
            self.value_types[type_] = plugin
            self.converter.register_structure_hook(type_, function)
        return register


def _check_field(plugin: str, section: Any, name: Any, kind: Any, quantity: Any, choices: Any) -> None:
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


def _check_witness(plugin: str, name: Any, function: Any, options: Any) -> dict[str, Option]:
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
                              "be an infermodel.analyses.witnessing.Option")
    return options


#: How many values may share a number format's scale.
_GRANULARITIES = ("none", "tensor", "channel", "group")


def _check_number_format(plugin: str, name: Any, element: Any, scale: Any, granularity: Any,
                         values_per_scale: Any) -> None:
    where = f"plugin {plugin!r}: number format {name!r}"
    if not isinstance(name, str) or not name or len(name) > 64 or not name.isprintable():
        raise PluginError(f"plugin {plugin!r}: a number format needs a printable name "
                          "of at most 64 characters")
    for label, encoding in (("element", element), ("scale", scale)):
        if encoding is None and label == "scale":
            continue
        if not isinstance(encoding, Encoding) or encoding.kind not in ENCODING_KINDS:
            raise PluginError(f"{where}: {label} must be an infermodel.plugin.Encoding of kind "
                              + " or ".join(repr(k) for k in ENCODING_KINDS))
    if granularity not in _GRANULARITIES:
        raise PluginError(f"{where}: granularity {granularity!r} is not one of "
                          + ", ".join(map(repr, _GRANULARITIES)))
    if (granularity == "none") != (scale is None):
        raise PluginError(f"{where}: a scale encoding goes with a granularity other than "
                          "'none', and only with one")
    if values_per_scale is not None and (isinstance(values_per_scale, bool)
                                         or not isinstance(values_per_scale, int)
                                         or values_per_scale < 1):
        raise PluginError(f"{where}: values_per_scale must be a positive integer or None")


def _check_defaults(fields: Mapping[str, Mapping[str, FieldSpec]]) -> None:
    for section in FIELD_SECTIONS:
        for spec in fields[section].values():
            # (REQUIRED and None are not floats: only a given number is checked.)
            if (spec.numeric and isinstance(spec.default, float)
                    and not math.isfinite(spec.default)):
                raise PluginError(f"plugin {spec.plugin!r}: field {spec.path} has a non-finite default")


#: Registration hooks in the order they are called, with the registrar each receives.
_REGISTRATION_HOOKS = (
    ("infermodel_register_value_types", _Collector.type_registrar),
    ("infermodel_register_fields", _Collector.field_registrar),
    ("infermodel_register_levers", _Collector.lever_registrar),
    ("infermodel_register_presets", _Collector.preset_registrar),
    ("infermodel_register_witnesses", _Collector.witness_registrar),
    ("infermodel_register_headlines", _Collector.headline_registrar),
    ("infermodel_register_number_formats", _Collector.number_format_registrar),
    ("infermodel_register_quantisers", _Collector.quantiser_registrar),
    ("infermodel_register_typical_settings", _Collector.typical_setting_registrar),
)


def build_registries(host: PluginHost) -> Registries:
    """Call the registration hooks of every plugin and check what they declared."""
    collected = _Collector()
    for hook_name, registrar in _REGISTRATION_HOOKS:
        def arguments(plugin: str, registrar=registrar) -> dict[str, Any]:
            return {"register": registrar(collected, plugin)}

        host.call_each(hook_name, arguments, "registration")
    if collected.problems:
        raise PluginError(collected.problems, heading="plugins declare conflicting names")
    _check_defaults(collected.fields)
    classes = {section: section_class(section, collected.fields[section])
               for section in FIELD_SECTIONS}
    for cls in classes.values():
        collected.converter.register_structure_hook(
            cls, section_structure_hook(cls, collected.converter))
    return Registries(collected.fields, collected.levers, collected.presets, collected.witnesses,
                      collected.headlines, collected.number_formats, collected.quantisers,
                      collected.typical_settings,
                      converter=collected.converter, section_classes=MappingProxyType(classes))


__all__ = [
    "FIELD_KINDS",
    "FIELD_SECTIONS",
    "REQUIRED",
    "UNIT_WORDS",
    "FieldSpec",
    "HeadlineInfo",
    "LeverInfo",
    "PresetInfo",
    "Registries",
    "TypicalSettingInfo",
    "WitnessInfo",
    "build_registries",
]
