"""Scenario files as data: a file and everything it ``extends`` merged (later files
override earlier ones), ``--set`` overrides and ``--unset`` removals applied to that data,
and where each value came from (:class:`Origin`), for :mod:`infermodel.scenario` to type.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .errors import Problem, ScenarioError, suggest
from .tomlfile import (
    MAX_NESTING,
    SHIPPED_PREFIX,
    nesting_depth,
    read_toml,
    shipped_scenario,
    shown_path,
)

MAX_EXTENDS_DEPTH = 16


@attrs.frozen
class Origin:
    """Where a value came from: a file and line, or a command-line override."""

    file: str
    line: int | None = None


# ---------------------------------------------------------------------------------
# Raw data (read by infermodel.tomlfile) → merged data, with where each value came from
# ---------------------------------------------------------------------------------


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
    from .output import path_problem

    path = Path(path)
    problem = path_problem(path)
    if problem is not None:
        raise ScenarioError(Problem(f"cannot read file: {problem}", file=shown_path(path)))
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
                                    expected='a file name such as "base.toml", or '
                                             '"infermodel:NAME" for a shipped scenario'))
    from .output import path_problem

    if parent.startswith(SHIPPED_PREFIX):  # a scenario that ships with infermodel
        parent_path = shipped_scenario(parent, file=str(path), key="extends",
                                       line=lines.get("extends"))
    else:
        parent_path = path.parent / parent
    problem = path_problem(parent_path)
    if problem is not None:
        raise ScenarioError(Problem(f"'extends' names a path that cannot exist: {problem}",
                                    file=str(path), key="extends", line=lines.get("extends"),
                                    expected="a scenario file, relative to this one"))
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
    except ValueError:  # not TOML (TOMLDecodeError), or an integer of over 4,300 digits
        value = raw
    except RecursionError:
        value = None
    if value is None or nesting_depth(value) > MAX_NESTING - 2:
        raise ScenarioError(Problem(f"override {key}: the value is nested too deeply",
                                    file="--set", key=key,
                                    expected=f"at most {MAX_NESTING - 2} levels of nested "
                                             "arrays and tables"))
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


def remove_keys(data: dict, origins: dict[str, Origin], keys: Iterable[str]) -> dict:
    """Remove dotted key paths (values or tables) from scenario data, as ``--unset`` does."""
    data = copy.deepcopy(data)
    for key in keys:
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*", key):
            raise ScenarioError(Problem(f"--unset {key!r} is not a dotted key path", file="--unset",
                                        expected="for example levers.speculative"))
        *parents, last = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or last not in node:
            raise ScenarioError(Problem(
                f"cannot unset {key}: the scenario (and the files it extends) does not write it",
                file="--unset", key=key, suggestion=suggest(key, sorted(_flatten(data))),
                expected="a key or table the scenario writes (--set replaces a preset's value)"))
        del node[last]
        for gone in [k for k in origins if k == key or k.startswith(key + ".")]:
            del origins[gone]
    return data


__all__ = ["MAX_EXTENDS_DEPTH", "Origin", "apply_overrides", "load_raw", "parse_assignment",
           "remove_keys"]
