"""Reading scenario files: TOML, ``extends``, presets, ``--set`` overrides, typing.

Every problem found is collected with its file, key path and line (best effort from
the raw text, since TOML parsers keep no positions) and raised once as a
:class:`~infermodel.errors.ScenarioError`.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import attrs

from .errors import Problem, ScenarioError, close_match
from .registry import FIELD_SECTIONS, REQUIRED, FieldSpec, Registries
from .schema import CONVERTER, FieldValueError, parse_field, structure_errors

#: Scenario files larger than this are refused (TOML parsing of hostile input can be slow).
MAX_FILE_BYTES = 1_000_000
MAX_EXTENDS_DEPTH = 16

TOP_LEVEL = ("extends", "scenario", *FIELD_SECTIONS, "levers", "simulation", "sweep", "search",
             "witness")
SCENARIO_KEYS = ("name", "description")
#: Keys read by the loader itself rather than declared as fields.
LOADER_KEYS = {"model": ("preset", "hf_config"), "hardware": ("preset",)}


@attrs.frozen
class Origin:
    """Where a value came from: a file and line, or a command-line override."""

    file: str
    line: int | None = None


class _FieldMarker:
    spec: FieldSpec


def _field_hook(value, type_):
    return parse_field(type_.spec, value)


CONVERTER.register_structure_hook_func(
    lambda t: isinstance(t, type) and issubclass(t, _FieldMarker), _field_hook)


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


# ---------------------------------------------------------------------------------
# Raw text → data, with best-effort line numbers
# ---------------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+))*)\s*=""")


def _split_key(text: str) -> list[str]:
    parts = re.findall(r""""([^"]*)"|'([^']*)'|([A-Za-z0-9_\-]+)""", text)
    return [a or b or c for a, b, c in parts]


def line_index(text: str) -> dict[str, int]:
    """Map dotted key paths (and table headers) to the line where they appear."""
    index: dict[str, int] = {}
    table: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _split_key(header.group(1))
            index.setdefault(".".join(table), number)
            continue
        key = _KEY.match(line)
        if key:
            path = ".".join(table + _split_key(key.group(1)))
            index.setdefault(path, number)
    return index


def read_toml(path: Path) -> tuple[dict, dict[str, int]]:
    """Parse one TOML file; return its data and its line index."""
    import tomli

    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ScenarioError(Problem("file not found", file=str(path))) from None
    except OSError as exc:
        raise ScenarioError(Problem(f"cannot read file: {exc.strerror}", file=str(path))) from None
    if size > MAX_FILE_BYTES:
        raise ScenarioError(Problem(
            f"file is {size:,} bytes, larger than the {MAX_FILE_BYTES:,}-byte limit for scenario files",
            file=str(path)))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(Problem("file is not UTF-8 text", file=str(path), expected="a TOML file")) from None
    except OSError as exc:
        raise ScenarioError(Problem(f"cannot read file: {exc.strerror}", file=str(path))) from None
    try:
        data = tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
        message = getattr(exc, "msg", str(exc))
        column = getattr(exc, "colno", None)
        if column:
            message += f" (column {column})"
        raise ScenarioError(Problem(f"invalid TOML: {message}", file=str(path),
                                    line=getattr(exc, "lineno", None), expected="valid TOML")) from None
    return data, line_index(text)


def _flatten(data: Mapping, prefix: str = "") -> Iterable[str]:
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        yield path
        if isinstance(value, Mapping):
            yield from _flatten(value, path)


def _merge(base: dict, override: Mapping) -> dict:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _origins_for(data: Mapping, file: str, lines: Mapping[str, int], prefix: str = "") -> dict[str, Origin]:
    origins = {}
    for path in _flatten(data, prefix):
        relative = path[len(prefix) + 1:] if prefix else path
        origins[path] = Origin(file, lines.get(relative))
    return origins


def load_raw(path: Path, _chain: tuple[Path, ...] = ()) -> tuple[dict, dict[str, Origin]]:
    """Read a scenario and everything it ``extends``; later files override earlier ones."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _chain:
        cycle = " -> ".join(str(p) for p in (*_chain, resolved))
        raise ScenarioError(Problem(f"'extends' forms a cycle: {cycle}", file=str(path), key="extends"))
    if len(_chain) >= MAX_EXTENDS_DEPTH:
        raise ScenarioError(Problem(f"'extends' is nested more than {MAX_EXTENDS_DEPTH} deep",
                                    file=str(path), key="extends"))
    data, lines = read_toml(path)
    origins = _origins_for(data, str(path), lines)
    parent = data.pop("extends", None)
    if parent is None:
        return data, origins
    if not isinstance(parent, str):
        raise ScenarioError(Problem("'extends' must be a path string", file=str(path),
                                    key="extends", line=lines.get("extends"),
                                    expected='a file name such as "base.toml"'))
    parent_path = (path.parent / parent)
    if not parent_path.is_file():
        raise ScenarioError(Problem(f"'extends' names {parent!r}, which does not exist",
                                    file=str(path), key="extends", line=lines.get("extends"),
                                    expected="a scenario file, relative to this one"))
    base, base_origins = load_raw(parent_path, (*_chain, resolved))
    base_origins.update(origins)
    return _merge(base, data), base_origins


def parse_assignment(text: str) -> tuple[str, Any]:
    """Parse a ``--set key.path=value`` override; the value is read as TOML when it can be.

    >>> parse_assignment("workload.batch=64")
    ('workload.batch', 64)
    >>> parse_assignment("hardware.memory=80 GB")
    ('hardware.memory', '80 GB')
    """
    import tomli

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(Problem(f"override {text!r} is not of the form key.path=value",
                                    file="--set", expected="for example workload.batch=64"))
    if not re.fullmatch(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*", key):
        raise ScenarioError(Problem(f"override key {key!r} is not a dotted key path",
                                    file="--set", expected="for example hardware.memory"))
    raw = raw.strip()
    try:
        value = tomli.loads(f"v = {raw}")["v"]
    except tomli.TOMLDecodeError:
        value = raw
    return key, value


def apply_overrides(data: dict, origins: dict[str, Origin], overrides: Mapping[str, Any]) -> dict:
    data = copy.deepcopy(data)
    for key, value in overrides.items():
        parts = key.split(".")
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if not isinstance(child, dict):
                if child is not None:
                    raise ScenarioError(Problem(
                        f"cannot set {key}: {'.'.join(parts[:i + 1])} is not a table", file="--set", key=key))
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
        origins[key] = Origin("--set")
    return data


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
    host: Any = attrs.field(default=None, repr=False, eq=False)
    #: What reading the scenario approximated (a config.json feature the shape fields
    #: cannot express); results show each as a warning.
    notes: tuple[str, ...] = attrs.field(default=(), repr=False, eq=False)

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
        from .host import get_host

        registries = (self.host or get_host()).registries
        known = registries.presets.get(kind, {})
        info = known.get(name)
        if info is None:
            near = close_match(str(name), known)
            raise ScenarioError(Problem(f"no {kind} preset named {name!r}",
                                        expected=f"a {kind} preset",
                                        suggestion=f"did you mean {near!r}?" if near else None))
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

    def with_overrides(self, overrides: Mapping[str, Any], *, host=None) -> "Scenario":
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
                from .host import get_host

                info = (host or get_host()).registries.presets[section].get(old)
                if info is not None:
                    stale = str(info.path)
                    for name in [k for k, o in origins.items()
                                 if k.startswith(section + ".") and o.file == stale]:
                        del origins[name]
        return resolve(data, origins, self.path, host=host)


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


def _load_preset(kind: str, name: Any, registries: Registries, key: str, origins, default_file,
                 problems: list[Problem]) -> tuple[dict, dict[str, Origin]]:
    known = registries.presets[kind]
    if not isinstance(name, str):
        problems.append(_problem(origins, default_file, key, f"got {name!r}",
                                 expected=f"a {kind} preset name"))
        return {}, {}
    info = known.get(name)
    if info is None:
        near = close_match(name, known)
        hint = f"did you mean {near!r}?" if near else None
        listing = f"`infermodel presets {kind if kind == 'hardware' else 'models'}` lists them"
        problems.append(_problem(origins, default_file, key, f"no {kind} preset named {name!r}",
                                 expected=f"a known {kind} preset ({listing})", suggestion=hint))
        return {}, {}
    data, lines = read_toml(info.path)
    table = data.get(kind)
    if not isinstance(table, dict):
        problems.append(Problem(f"preset file has no [{kind}] table", file=str(info.path)))
        return {}, {}
    extra = set(data) - {"preset", kind}
    if extra:
        problems.append(Problem(f"preset file has unexpected tables {sorted(extra)}", file=str(info.path)))
    origins_out = {f"{kind}.{k}": Origin(str(info.path), lines.get(f"{kind}.{k}")) for k in table}
    return table, origins_out


def _load_hf(path_text: Any, scenario_path: Path | None, key: str, origins, default_file,
             problems: list[Problem], notes: list[str]) -> tuple[dict, dict[str, Origin]]:
    from .hf_config import HFConfigError, read_hf_config_notes

    if not isinstance(path_text, str):
        problems.append(_problem(origins, default_file, key, f"got {path_text!r}",
                                 expected="a path to a Hugging Face config.json"))
        return {}, {}
    base = scenario_path.parent if scenario_path else Path.cwd()
    path = (base / path_text)
    try:
        table, found = read_hf_config_notes(path)
        notes.extend(f"{path_text}: {note}" for note in found)
    except HFConfigError as exc:
        problems.append(_problem(origins, default_file, key, str(exc),
                                 expected="a readable Hugging Face config.json"))
        return {}, {}
    return table, {f"model.{k}": Origin(str(path)) for k in table}


def resolve(data: Mapping, origins: Mapping[str, Origin], path: Path | None, *, host=None) -> Scenario:
    """Type and validate merged raw scenario data; raise every problem at once."""
    from .host import get_host

    host = host or get_host()
    host.check_loaded()
    registries: Registries = host.registries
    origins = dict(origins)
    default_file = str(path) if path else None
    problems: list[Problem] = []
    notes: list[str] = []

    def add(key, message, expected=None, suggestion=None):
        problems.append(_problem(origins, default_file, key, message, expected, suggestion))

    if not isinstance(data, Mapping):
        raise ScenarioError(Problem("a scenario must be a TOML table", file=default_file))
    for key in data:
        if key not in TOP_LEVEL:
            near = close_match(key, TOP_LEVEL)
            add(key, f"unknown section {key!r}", expected="one of " + ", ".join(TOP_LEVEL),
                suggestion=f"did you mean {near!r}?" if near else None)

    meta = data.get("scenario", {})
    name = path.stem if path else "scenario"
    description = ""
    if not isinstance(meta, Mapping):
        add("scenario", "expected a table", expected="[scenario] with name and description")
        meta = {}
    for key, value in meta.items():
        if key not in SCENARIO_KEYS:
            near = close_match(key, SCENARIO_KEYS)
            add(f"scenario.{key}", f"unknown key {key!r}", expected="name or description",
                suggestion=f"did you mean {near!r}?" if near else None)
        elif not isinstance(value, str):
            add(f"scenario.{key}", f"got {value!r}", expected="a string")
        elif key == "name":
            name = value
        else:
            description = value

    sections: dict[str, Any] = {}
    presets: dict[str, str] = {}
    # A failed preset or a misspelt section name explains missing fields: don't list them.
    quiet = {close_match(k, FIELD_SECTIONS) for k in data if k not in TOP_LEVEL} - {None}
    resolved_raw = {}
    for section in FIELD_SECTIONS:
        table = data.get(section, {})
        if not isinstance(table, Mapping):
            add(section, f"got {table!r}", expected=f"a [{section}] table")
            continue
        table = dict(table)
        merged: dict = {}
        if section in ("model", "hardware") and "preset" in table:
            preset_name = table.pop("preset")
            preset_table, preset_origins = _load_preset(section, preset_name, registries,
                                                        f"{section}.preset", origins, default_file, problems)
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
                    origins[k] = v
            if isinstance(preset_name, str):
                presets[section] = preset_name
        if section == "model" and "hf_config" in table:
            if "model" in presets:
                add("model.hf_config", "give either model.preset or model.hf_config, not both")
            hf_table, hf_origins = _load_hf(table.pop("hf_config"), path, "model.hf_config",
                                            origins, default_file, problems, notes)
            merged.update(hf_table)
            for k, v in hf_origins.items():
                if k.partition(".")[2] not in table:
                    origins[k] = v
        # Values written in the scenario override the preset's.
        for k in table:
            if k in merged:
                origins[f"{section}.{k}"] = origins.get(f"{section}.{k}") or Origin(default_file or "")
        merged.update(table)
        resolved_raw[section] = merged
        specs = registries.fields[section]
        cls = registries._section_classes.get(section)
        if cls is None:
            cls = registries._section_classes[section] = section_class(section, specs)
        try:
            sections[section] = CONVERTER.structure(merged, cls)
        except Exception as exc:  # cattrs groups every field's failure
            _report_structure(exc, section, merged, specs.keys(), add, quiet=section in quiet)

    levers: dict[str, Any] = {}
    lever_tables = data.get("levers", {})
    if not isinstance(lever_tables, Mapping):
        add("levers", f"got {lever_tables!r}", expected="[levers.<name>] tables")
        lever_tables = {}
    for lever_name, table in lever_tables.items():
        info = registries.levers.get(lever_name)
        key = f"levers.{lever_name}"
        if info is None:
            near = close_match(lever_name, registries.levers)
            add(key, f"no loaded plugin provides a lever named {lever_name!r}",
                expected="one of " + (", ".join(sorted(registries.levers)) or "(no levers loaded)"),
                suggestion=f"did you mean {near!r}?" if near else "`infermodel plugins` lists loaded plugins")
            continue
        if table is False:
            continue  # switched off (handy with --set and extends)
        if table is True:
            table = {}  # switched on with its defaults
        if not isinstance(table, Mapping):
            add(key, f"got {table!r}", expected=f"a [levers.{lever_name}] table, or true/false "
                                                "to switch it on with defaults or off")
            continue
        try:
            levers[lever_name] = CONVERTER.structure(dict(table), info.schema)
        except Exception as exc:
            keys = [a.name for a in attrs.fields(info.schema)]
            _report_structure(exc, key, table, keys, add, schema=info.schema)

    tables = {}
    for section in ("simulation", "sweep", "search", "witness"):
        table = data.get(section)
        if table is None:
            continue
        if not isinstance(table, Mapping):
            add(section, f"got {table!r}", expected=f"a [{section}] table")
            continue
        tables[section] = MappingProxyType(dict(table))

    if problems:
        raise ScenarioError(problems)

    raw = dict(data)
    scenario = Scenario(name=name, description=description, path=path,
                        sections=MappingProxyType(sections), levers=MappingProxyType(levers),
                        tables=MappingProxyType(tables), presets=MappingProxyType(presets),
                        origins=MappingProxyType(origins), raw=MappingProxyType(raw), host=host,
                        notes=tuple(notes))

    def report_maker(plugin):
        def report(key, message, *, expected=None, suggestion=None):
            problems.append(scenario.problem(key, message, expected=expected, suggestion=suggestion))
        return report

    host.call_each("infermodel_validate_scenario",
                   lambda p: {"scenario": scenario, "report": report_maker(p)}, "validation")
    if problems:
        raise ScenarioError(problems)
    return scenario


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


def _report_structure(exc: BaseException, prefix: str, table: Mapping, known: Iterable[str], add,
                      quiet: bool = False, schema: type | None = None) -> None:
    known = list(known)
    for relative, message in structure_errors(exc):
        if quiet and message == "required field missing":
            continue
        if relative and message.startswith("unknown key(s) "):
            # An unknown key inside a nested table: name it at its own path.
            nested = _nested_keys(schema, relative) or []
            for extra in message.removeprefix("unknown key(s) ").split(", "):
                near = close_match(extra, nested) if nested else None
                add(f"{prefix}.{relative}.{extra}", f"unknown key {extra!r}",
                    expected="one of " + ", ".join(sorted(nested)) if nested else None,
                    suggestion=f"did you mean {near!r}?" if near else None)
            continue
        if not relative:
            # A schema validator's message names its field first: point at that key.
            first = re.match(r"'?([A-Za-z_][A-Za-z0-9_]*)", message)
            if first and first.group(1) in known:
                relative = first.group(1)
        key = f"{prefix}.{relative}" if relative else prefix
        if message.startswith("unknown key(s) "):
            for extra in message.removeprefix("unknown key(s) ").split(", "):
                near = close_match(extra, known)
                add(f"{prefix}.{extra}", f"unknown key {extra!r}",
                    expected="one of " + ", ".join(sorted(known)),
                    suggestion=f"did you mean {near!r}?" if near else None)
            continue
        add(key, message)


def remove_keys(data: dict, origins: dict[str, Origin], keys: Iterable[str]) -> dict:
    """Remove dotted key paths (a value or a whole table) from merged scenario data, as
    ``--unset`` does; a key the files do not write is an error with a suggestion.

    >>> remove_keys({"levers": {"a": {"k": 1}}, "workload": {"batch": 4}}, {}, ["levers.a"])
    {'levers': {}, 'workload': {'batch': 4}}
    """
    data = copy.deepcopy(data)
    for key in keys:
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*", key):
            raise ScenarioError(Problem(f"--unset {key!r} is not a dotted key path", file="--unset",
                                        expected="for example levers.speculative"))
        parts = key.split(".")
        node: Any = data
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node:
            near = close_match(key, sorted(_flatten(data)))
            raise ScenarioError(Problem(
                f"cannot unset {key}: the scenario (and the files it extends) does not write it",
                file="--unset", key=key,
                expected="a key or table the scenario writes (a preset's values are replaced "
                         "with --set, not removed)",
                suggestion=f"did you mean {near!r}?" if near else None))
        del node[parts[-1]]
        for origin_key in [k for k in origins if k == key or k.startswith(key + ".")]:
            del origins[origin_key]
    return data


def load_scenario(path: str | Path, overrides: Mapping[str, Any] | Iterable[str] | None = None,
                  *, host=None, unset: Iterable[str] = ()) -> Scenario:
    """Read, merge, type and validate a scenario file.

    ``overrides`` maps dotted key paths to values (or is a list of ``"key=value"``
    strings, as ``--set`` takes them). ``unset`` lists dotted key paths (a value or a
    whole table, such as a lever's) removed before the overrides apply, as ``--unset``
    does.

    >>> s = load_scenario("scenarios/case-study-24gb.toml", {"workload.batch": 4})  # doctest: +SKIP
    >>> s.value("workload.batch")  # doctest: +SKIP
    4
    """
    path = Path(path)
    data, origins = load_raw(path)
    if unset:
        data = remove_keys(data, origins, unset)
    if overrides:
        if not isinstance(overrides, Mapping):
            overrides = dict(parse_assignment(o) for o in overrides)
        data = apply_overrides(data, origins, overrides)
    return resolve(data, origins, path, host=host)
