"""Reading scenario files: presets and typing, over the raw layer of
:mod:`infermodel.scenario_files` (TOML, ``extends``, ``--set`` and ``--unset``).

Every problem found is collected with its file, key path and line (best effort from
the raw text, since TOML parsers keep no positions) and raised once as a
:class:`~infermodel.errors.ScenarioError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from .declarations import FIELD_SECTIONS, PRESET_KINDS, REQUIRED, PresetInfo
from .errors import Problem, ScenarioError, close_match, suggest
from .hookspecs import Report
from .host import PluginHost, get_host
from .registry import Registries

# The raw layer (files, extends, --set and --unset) is also read from here by other modules.
from .scenario_files import (  # noqa: F401
    MAX_EXTENDS_DEPTH,
    Origin,
    apply_overrides,
    load_raw,
    parse_assignment,
    remove_keys,
)
from .schema import FieldValueError, converting_with, parse_field, report_structure, structure_table

# read_toml, line_index and MAX_FILE_BYTES are also read from here by other modules.
from .tomlfile import (  # noqa: F401
    MAX_FILE_BYTES,
    MAX_NESTING,
    SHIPPED_PREFIX,
    line_index,
    nesting_depth,
    read_toml,
    shipped_scenario,
    shown_path,
)

TOP_LEVEL = ("extends", "scenario", *FIELD_SECTIONS, "levers", "simulation", "sweep", "search",
             "witness", "plan")
SCENARIO_KEYS = ("name", "description")
#: Keys read by the loader itself rather than declared as fields.
LOADER_KEYS = {"model": ("preset", "hf_config"), "hardware": ("preset",), "efficiency": ("preset",)}
#: Tables an efficiency preset may carry besides [efficiency], and the keys taken from
#: each: an engine's default runtime reserve and its collectives' per-step latency
#: belong to the [hardware] table.
EFFICIENCY_PRESET_EXTRAS = {"hardware": ("reserve", "interconnect_latency")}


# ---------------------------------------------------------------------------------
# The typed scenario
# ---------------------------------------------------------------------------------


@attrs.frozen
class Scenario:
    """A resolved, typed, validated scenario. Immutable; use :meth:`with_overrides`."""

    name: str
    description: str
    path: Path | None
    sections: Mapping[str, Any]
    levers: Mapping[str, Any]
    tables: Mapping[str, Mapping]
    presets: Mapping[str, str]
    origins: Mapping[str, Origin] = attrs.field(repr=False)
    raw: Mapping = attrs.field(repr=False)
    #: The plugin host that read this scenario; analyses use its plugins and registries.
    host: PluginHost = attrs.field(repr=False, eq=False)
    #: What loading the scenario could only approximate (a config.json feature the shape
    #: fields cannot express, with its size); results list these among their warnings.
    notes: tuple[str, ...] = ()

    def value(self, path: str) -> Any:
        """The typed value of a field, e.g. ``scenario.value("workload.batch")``."""
        section, _, name = path.partition(".")
        return getattr(self.sections[section], name)

    def lever(self, name: str) -> Any | None:
        """The lever's structured table, or None when the scenario does not use it."""
        return self.levers.get(name)

    def given(self, path: str) -> bool:
        """Whether the scenario itself (its file, what it extends, ``--set``) writes
        ``path``, a table (``"pricing"``) or a key (``"pricing.utilisation"``), rather
        than leaving it to defaults or presets.

        >>> s.given("workload.batch")  # doctest: +SKIP
        True
        """
        node: Any = self.raw
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        return True

    def preset(self, kind: str, name: str) -> Mapping[str, Any]:
        """The typed fields of a preset, defaults applied, for a lever that refers to a
        second model or card (a speculative draft, say) by preset name.

        Raises :class:`ScenarioError` for an unknown name, with a close match.

        >>> s.preset("model", "llama-3.2-3b")["layers"]  # doctest: +SKIP
        28
        """
        registries = self.host.registries
        known = registries.presets.get(kind, {})
        info = known.get(name)
        if info is None:
            raise ScenarioError(Problem(f"no {kind} preset named {name!r}",
                                        expected=f"a {kind} preset",
                                        suggestion=suggest(str(name), known)))
        data, lines = read_toml(info.path)
        table = data.get(kind, {})
        specs = registries.fields[kind]
        typed: dict[str, Any] = {}
        problems = []
        for key, spec in specs.items():
            if key in table:
                try:
                    typed[key] = parse_field(spec, table[key])
                except FieldValueError as exc:
                    problems.append(Problem(exc.message, file=str(info.path), key=f"{kind}.{key}",
                                            line=lines.get(f"{kind}.{key}"), expected=exc.expected))
            elif spec.default is REQUIRED:
                problems.append(Problem("required field missing", file=str(info.path),
                                        key=f"{kind}.{key}"))
            else:
                typed[key] = spec.default
        if problems:
            raise ScenarioError(problems)
        return MappingProxyType(typed)

    def where(self, key: str) -> Origin | None:
        """Where a key path was written (file and line), walking up to its table."""
        parts = key.split(".")
        while parts:
            found = self.origins.get(".".join(parts))
            if found is not None:
                return found
            parts.pop()
        return None

    def problem(self, key: str, message: str, *, expected=None, suggestion=None) -> Problem:
        origin = self.where(key)
        file = origin.file if origin else (str(self.path) if self.path else None)
        return Problem(message, file=file, key=key, line=origin.line if origin else None,
                       expected=expected, suggestion=suggestion)

    def read_table(self, section: str, schema: type, add) -> Any | None:
        """The ``[section]`` table (``{}`` when the scenario has none) typed as the attrs
        class ``schema`` by the strict converter of the host that read the scenario, as a
        lever table is; each problem goes to ``add(key, message, expected=None,
        suggestion=None)`` with its key path (:meth:`problem` places it at its file and
        line), and the result is None when there was any.

        >>> s.read_table("simulation", SimulationTable, problems.append)  # doctest: +SKIP
        """
        converter = self.host.registries.converter
        with converting_with(converter):
            return structure_table(converter, self.tables.get(section, {}), schema, section,
                                   add)

    def with_overrides(self, overrides: Mapping[str, Any], *,
                       host: PluginHost | None = None) -> Scenario:
        """A new scenario with fields set, as ``--set`` does.

        >>> s2 = s.with_overrides({"workload.batch": 64})  # doctest: +SKIP
        """
        origins = dict(self.origins)
        data = apply_overrides(dict(self.raw), origins, overrides)
        return resolve(data, origins, self.path, host=host or self.host)

    def with_values(self, values: Mapping[str, Any], *, host=None,
                    where: Mapping[str, Origin] | None = None) -> Scenario:
        """A new scenario with fields set (as ``--set`` does) and lever tables removed
        (a value of :data:`REMOVE`); ``where`` names the origin of a set path.

        >>> s2 = s.with_values({"levers.speculative": REMOVE})  # doctest: +SKIP
        """
        if not values:
            return self
        origins = dict(self.origins)
        sets = {k: v for k, v in values.items() if v is not REMOVE}
        data = apply_overrides(dict(self.raw), origins, sets)
        for path, value in values.items():
            if value is REMOVE:
                _remove_path(data, path)
        for path in values:
            found = (where or {}).get(path)
            if found is not None:
                origins[path] = found
            elif path in origins and origins[path].file == "--set":
                origins[path] = Origin("sweep")
            section, _, key = path.partition(".")
            old = self.presets.get(section)
            if key == "preset" and old is not None:
                # Forget where the previous preset's values came from, so that the new
                # preset's file is named as their origin.
                info = (host or self.host).registries.presets[section].get(old)
                if info is not None:
                    stale = str(info.path)
                    for name in [k for k, o in origins.items()
                                 if k.startswith(section + ".") and o.file == stale]:
                        del origins[name]
        return resolve(data, origins, self.path, host=host or self.host)


class _Remove:
    def __repr__(self) -> str:
        return "REMOVE"


#: A value for :meth:`Scenario.with_values` that removes a lever table
#: (``"levers.speculative" = [false, {k = 4}]`` in a sweep).
REMOVE: Any = _Remove()


def _remove_path(data: dict, path: str) -> None:
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    if isinstance(node, dict):
        node.pop(parts[-1], None)


class _Reading:
    """Problems found while typing one scenario, each placed at its file and line."""

    def __init__(self, origins: Mapping[str, Origin], path: Path | None) -> None:
        self.origins = dict(origins)
        self.path = path
        self.default_file = str(path) if path else None
        self.problems: list[Problem] = []
        #: Approximations noted while reading (config.json features not modelled).
        self.notes: list[str] = []

    def problem(self, key: str, message: str, expected: str | None = None,
                suggestion: str | None = None) -> Problem:
        return _problem(self.origins, self.default_file, key, message, expected, suggestion)

    def add(self, key: str, message: str, expected: str | None = None,
            suggestion: str | None = None) -> None:
        self.problems.append(self.problem(key, message, expected, suggestion))

    def raise_any(self, causes: Iterable[Problem] = ()) -> None:
        """Raise every problem found, with ``causes`` that may explain them (a plugin
        that failed to import may be the one providing what is missing).
        """
        if self.problems:
            raise ScenarioError([*self.problems, *causes])


def _problem(origins: Mapping[str, Origin], default_file: str | None, key: str, message: str,
             expected=None, suggestion=None) -> Problem:
    parts = key.split(".")
    origin = None
    while parts and origin is None:
        origin = origins.get(".".join(parts))
        parts.pop()
    file = origin.file if origin else default_file
    return Problem(message, file=file, key=key, line=origin.line if origin else None,
                   expected=expected, suggestion=suggestion)


def _load_preset(kind: str, name: Any, registries: Registries, key: str,
                 reading: _Reading) -> tuple[dict, dict[str, Origin]]:
    known = registries.presets[kind]
    if not isinstance(name, str):
        reading.add(key, f"got {name!r}", expected=f"a {kind} preset name")
        return {}, {}
    info = known.get(name)
    if info is None and name.endswith(".toml"):
        # A preset file of one's own (``infermodel calibrate --output`` writes one),
        # relative to the scenario that names it.
        from .output import path_problem

        candidate = (reading.path.parent if reading.path else Path.cwd()) / name
        problem = path_problem(candidate)
        if problem is not None:
            reading.add(key, f"cannot read the preset file: {problem}",
                        expected=f"a {kind} preset name or a .toml file relative to the scenario")
            return {}, {}
        if not candidate.is_file():
            reading.add(key, f"preset file {str(candidate)!r} does not exist",
                        expected=f"a {kind} preset name or a .toml file relative to the scenario")
            return {}, {}
        info = PresetInfo(kind, name, candidate, "(file)")
    if info is None:
        listing = f"`infermodel presets {'models' if kind == 'model' else kind}` lists them"
        reading.add(key, f"no {kind} preset named {name!r}",
                    expected=f"a known {kind} preset ({listing})", suggestion=suggest(name, known))
        return {}, {}
    data, lines = read_toml(info.path)
    table = data.get(kind)
    if not isinstance(table, dict):
        reading.problems.append(Problem(f"preset file has no [{kind}] table", file=str(info.path)))
        return {}, {}
    extra = set(data) - {"preset", kind, *(EFFICIENCY_PRESET_EXTRAS if kind == "efficiency" else ())}
    if extra:
        reading.problems.append(Problem(f"preset file has unexpected tables {sorted(extra)}",
                                        file=str(info.path)))
    origins_out = {f"{kind}.{k}": Origin(str(info.path), lines.get(f"{kind}.{k}")) for k in table}
    return table, origins_out


def _efficiency_preset_defaults(data: Mapping, registries: Registries
                                ) -> tuple[dict[str, dict[str, Any]], dict[str, Origin]]:
    """The [hardware] defaults (the runtime reserve, the all-reduce step latency) an
    efficiency preset carries.

    They sit between the hardware preset and the scenario's own [hardware] values: an
    engine family's reserve replaces the card's default, and a scenario that writes
    ``reserve`` keeps its own.
    """
    table = data.get("efficiency")
    name = table.get("preset") if isinstance(table, Mapping) else None
    info = registries.presets.get("efficiency", {}).get(name) if isinstance(name, str) else None
    if info is None:
        return {}, {}
    raw, lines = read_toml(info.path)
    defaults: dict[str, dict[str, Any]] = {}
    where: dict[str, Origin] = {}
    for section, keys in EFFICIENCY_PRESET_EXTRAS.items():
        extra = raw.get(section)
        if not isinstance(extra, Mapping):
            continue
        for key in keys:
            # Like a hardware preset's keys: a field no loaded plugin declares is left out.
            if key in extra and key in registries.fields[section]:
                defaults.setdefault(section, {})[key] = extra[key]
                where[f"{section}.{key}"] = Origin(str(info.path), lines.get(f"{section}.{key}"))
    return defaults, where


def _load_hf(path_text: Any, key: str, reading: _Reading) -> tuple[dict, dict[str, Origin]]:
    import warnings

    from .hf_config import HFConfigError, HFConfigWarning, read_hf_config

    if not isinstance(path_text, str):
        reading.add(key, f"got {path_text!r}", expected="a path to a Hugging Face config.json")
        return {}, {}
    base = reading.path.parent if reading.path else Path.cwd()
    path = (base / path_text)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", HFConfigWarning)
            table = read_hf_config(path)
        reading.notes.extend(str(w.message) for w in caught
                             if issubclass(w.category, HFConfigWarning))
    except HFConfigError as exc:
        where = f"{exc.path}: " if exc.path else ""
        inside = f"{exc.key}: " if exc.key else ""
        reading.add(key, f"{where}{inside}{exc.message}",
                    expected=exc.expected or "a readable Hugging Face config.json")
        return {}, {}
    return table, {f"model.{k}": Origin(str(path)) for k in table}


def _check_top_level(data: Mapping, reading: _Reading) -> None:
    for key in data:
        if key not in TOP_LEVEL:
            reading.add(key, f"unknown section {key!r}", expected="one of " + ", ".join(TOP_LEVEL),
                        suggestion=suggest(key, TOP_LEVEL))


def _read_meta(data: Mapping, reading: _Reading) -> tuple[str, str]:
    """The ``[scenario]`` table's name (the file stem by default) and description."""
    meta = data.get("scenario", {})
    name = reading.path.stem if reading.path else "scenario"
    description = ""
    if not isinstance(meta, Mapping):
        reading.add("scenario", "expected a table", expected="[scenario] with name and description")
        meta = {}
    for key, value in meta.items():
        if key not in SCENARIO_KEYS:
            reading.add(f"scenario.{key}", f"unknown key {key!r}", expected="name or description",
                        suggestion=suggest(key, SCENARIO_KEYS))
        elif not isinstance(value, str):
            reading.add(f"scenario.{key}", f"got {value!r}", expected="a string")
        elif key == "name":
            name = value
        else:
            description = value
    return name, description


def _merge_section(section: str, table: dict, registries: Registries, reading: _Reading,
                   presets: dict[str, str], quiet: set[str],
                   engine: tuple[dict[str, dict[str, Any]], dict[str, Origin]]) -> dict:
    """One section's values: its preset's (or config.json's), an efficiency preset's
    engine defaults, then the scenario's own.
    """
    merged: dict = {}
    if section in PRESET_KINDS and "preset" in table:
        preset_name = table.pop("preset")
        preset_table, preset_origins = _load_preset(section, preset_name, registries,
                                                    f"{section}.preset", reading)
        # A preset may carry fields of plugins that are not loaded now (hardware
        # interconnects, native formats): those keys are left out, not errors. The
        # preset data tests check every key against the full set of built-in fields.
        known_here = registries.fields[section]
        preset_table = {k: v for k, v in preset_table.items() if k in known_here}
        merged.update(preset_table)
        if not preset_table:
            quiet.add(section)
        for k, v in preset_origins.items():
            if k.partition(".")[2] not in table:  # (a changed preset replaces old sources)
                reading.origins[k] = v
        if isinstance(preset_name, str):
            presets[section] = preset_name
    engine_defaults, engine_origins = engine
    for k, v in engine_defaults.get(section, {}).items():
        if k not in table:
            merged[k] = v
            reading.origins[f"{section}.{k}"] = engine_origins[f"{section}.{k}"]
    if section == "model" and "hf_config" in table:
        if "model" in presets:
            reading.add("model.hf_config", "give either model.preset or model.hf_config, not both")
        hf_table, hf_origins = _load_hf(table.pop("hf_config"), "model.hf_config", reading)
        merged.update(hf_table)
        if not hf_table:
            quiet.add(section)
        for k, v in hf_origins.items():
            if k.partition(".")[2] not in table:
                reading.origins[k] = v
    # Values written in the scenario override the preset's.
    for k in table:
        if k in merged:
            key = f"{section}.{k}"
            reading.origins[key] = reading.origins.get(key) or Origin(reading.default_file or "")
    merged.update(table)
    return merged


def _read_sections(data: Mapping, registries: Registries,
                   reading: _Reading) -> tuple[dict[str, Any], dict[str, str]]:
    """The typed field sections and the presets they name."""
    sections: dict[str, Any] = {}
    presets: dict[str, str] = {}
    # A failed preset or a misspelt section name explains missing fields: don't list them.
    quiet = {near for k in data if k not in TOP_LEVEL
             if (near := close_match(k, FIELD_SECTIONS)) is not None}
    engine = _efficiency_preset_defaults(data, registries)
    for section in FIELD_SECTIONS:
        table = data.get(section, {})
        if not isinstance(table, Mapping):
            reading.add(section, f"got {table!r}", expected=f"a [{section}] table")
            continue
        merged = _merge_section(section, dict(table), registries, reading, presets, quiet,
                                engine)
        specs = registries.fields[section]
        try:
            sections[section] = registries.converter.structure(
                merged, registries.section_classes[section])
        except Exception as exc:  # cattrs groups every field's failure
            report_structure(exc, section, merged, specs.keys(), reading.add,
                             quiet=section in quiet)
    return sections, presets


def _read_levers(data: Mapping, registries: Registries, reading: _Reading) -> dict[str, Any]:
    """Each ``[levers.<name>]`` table structured into its lever's schema."""
    levers: dict[str, Any] = {}
    lever_tables = data.get("levers", {})
    if not isinstance(lever_tables, Mapping):
        reading.add("levers", f"got {lever_tables!r}", expected="[levers.<name>] tables")
        lever_tables = {}
    for lever_name, table in lever_tables.items():
        info = registries.levers.get(lever_name)
        key = f"levers.{lever_name}"
        if info is None:
            reading.add(key, f"no loaded plugin provides a lever named {lever_name!r}",
                        expected="one of " + (", ".join(sorted(registries.levers))
                                              or "(no levers loaded)"),
                        suggestion=suggest(lever_name, registries.levers)
                        or "`infermodel plugins` lists loaded plugins")
            continue
        if table is False:
            continue  # switched off (handy with --set and extends)
        if table is True:
            table = {}  # switched on with its defaults
        if not isinstance(table, Mapping):
            reading.add(key, f"got {table!r}", expected=f"a [levers.{lever_name}] table, or "
                                                        "true/false to switch it on with defaults or off")
            continue
        typed = structure_table(registries.converter, table, info.schema, key, reading.add)
        if typed is not None:
            levers[lever_name] = typed
    return levers


def _read_tables(data: Mapping, reading: _Reading) -> dict[str, Mapping]:
    """The tables other commands read (``[simulation]``, ``[sweep]``, ...), kept as written."""
    tables: dict[str, Mapping] = {}
    for section in ("simulation", "sweep", "search", "witness", "plan"):
        table = data.get(section)
        if table is None:
            continue
        if not isinstance(table, Mapping):
            reading.add(section, f"got {table!r}", expected=f"a [{section}] table")
            continue
        tables[section] = MappingProxyType(dict(table))
    return tables


def _validate(scenario: Scenario, host: PluginHost, reading: _Reading) -> None:
    """Every plugin's cross-field rules (``infermodel_validate_scenario``)."""
    def report_maker(plugin: str) -> Report:
        def report(key, message, *, expected=None, suggestion=None):
            reading.problems.append(scenario.problem(key, message, expected=expected,
                                                     suggestion=suggestion))
        return report

    host.call_each("infermodel_validate_scenario",
                   lambda p: {"scenario": scenario, "report": report_maker(p)}, "validation")


def resolve(data: Mapping, origins: Mapping[str, Origin], path: Path | None, *,
            host: PluginHost) -> Scenario:
    """Type and validate merged raw scenario data; raise every problem at once.

    The steps: unknown sections, ``[scenario]``, the field sections (presets and
    config.json merged under what the file writes), the levers, the other tables;
    then, once all of that is well typed, the plugins' validation.
    """
    host.check_loaded()
    registries = host.registries
    reading = _Reading(origins, path)
    if not isinstance(data, Mapping):
        raise ScenarioError(Problem("a scenario must be a TOML table", file=reading.default_file))
    _check_top_level(data, reading)
    name, description = _read_meta(data, reading)
    with converting_with(registries.converter):
        sections, presets = _read_sections(data, registries, reading)
        levers = _read_levers(data, registries, reading)
    tables = _read_tables(data, reading)
    reading.raise_any(host.load_problems())
    scenario = Scenario(name=name, description=description, path=path,
                        sections=MappingProxyType(sections), levers=MappingProxyType(levers),
                        tables=MappingProxyType(tables), presets=MappingProxyType(presets),
                        origins=MappingProxyType(reading.origins),
                        raw=MappingProxyType(dict(data)), host=host, notes=tuple(reading.notes))
    _validate(scenario, host, reading)
    reading.raise_any(host.load_problems())
    host.warn_load_errors()
    return scenario


def load_scenario(path: str | Path, overrides: Mapping[str, Any] | Iterable[str] | None = None,
                  *, host: PluginHost | None = None, unset: Iterable[str] = ()) -> Scenario:
    """Read, merge, type and validate a scenario file (or ``"infermodel:NAME"``, a
    scenario that ships with infermodel).

    ``overrides`` maps dotted key paths to values (or is a list of ``"key=value"``
    strings, as ``--set`` takes them); ``unset`` lists key paths removed first (``--unset``).

    >>> s = load_scenario("scenarios/case-study-24gb.toml", {"workload.batch": 4})  # doctest: +SKIP
    >>> s.value("workload.batch")  # doctest: +SKIP
    4
    """
    path = shipped_scenario(str(path)) if str(path).startswith(SHIPPED_PREFIX) else Path(path)
    data, origins = load_raw(path)
    if unset:
        data = remove_keys(data, origins, unset)
    if overrides:
        if not isinstance(overrides, Mapping):
            overrides = dict(parse_assignment(o) for o in overrides)
        data = apply_overrides(data, origins, overrides)
    # An entry point: without a host, the process-wide one.
    return resolve(data, origins, path, host=host or get_host())
