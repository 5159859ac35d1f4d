"""Reading one TOML file for a scenario or a preset: bounded, with line numbers.

TOML parsers keep no positions, so :func:`line_index` finds each key path's line in
the raw text (best effort) for messages. :func:`read_toml` refuses what could make the
reader slow or deep before parsing: a path that cannot exist, a file that is not a
regular file or is over :data:`MAX_FILE_BYTES`, values nested past :data:`MAX_NESTING`
levels, an integer of more digits than Python reads.

The scenarios that ship with infermodel are installed with it (the
``infermodel_scenarios`` package, the repository's ``scenarios/`` folder) and are
named ``"infermodel:NAME"`` wherever a scenario path goes: :func:`shipped_scenario`
finds one, :func:`shipped_scenarios` lists them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import Problem, ScenarioError

#: Scenario files larger than this are refused (TOML parsing of hostile input can be slow).
MAX_FILE_BYTES = 1_000_000
#: Arrays and tables nested deeper than this are refused (the TOML reader itself stops
#: near 400 levels; nothing in a scenario needs more than a handful).
MAX_NESTING = 32

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

    from .output import note_read, path_problem

    problem = path_problem(path)
    if problem is not None:
        raise ScenarioError(Problem(f"cannot read file: {problem}", file=shown_path(path)))
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ScenarioError(Problem("file not found", file=str(path))) from None
    except OSError as exc:
        raise ScenarioError(Problem(f"cannot read file: {exc.strerror}", file=str(path))) from None
    if not path.is_file():
        raise ScenarioError(Problem("not a regular file", file=str(path),
                                    expected="a TOML scenario file"))
    if size > MAX_FILE_BYTES:
        raise ScenarioError(Problem(
            f"file is {size:,} bytes, larger than the {MAX_FILE_BYTES:,}-byte limit for scenario files",
            file=str(path)))
    try:
        with path.open("rb") as handle:  # at most the limit, whatever the size said
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ScenarioError(Problem(
                f"file is larger than the {MAX_FILE_BYTES:,}-byte limit for scenario files",
                file=str(path)))
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads
    except UnicodeDecodeError:
        raise ScenarioError(Problem("file is not UTF-8 text", file=str(path), expected="a TOML file")) from None
    except OSError as exc:
        raise ScenarioError(Problem(f"cannot read file: {exc.strerror}", file=str(path))) from None
    note_read(path)
    try:
        data = tomli.loads(text)
    except RecursionError:
        raise ScenarioError(Problem("invalid TOML: values are nested too deeply", file=str(path),
                                    expected=f"at most {MAX_NESTING} levels of nested arrays "
                                             "and tables")) from None
    except tomli.TOMLDecodeError as exc:
        message = getattr(exc, "msg", str(exc))
        column = getattr(exc, "colno", None)
        if column:
            message += f" (column {column})"
        raise ScenarioError(Problem(f"invalid TOML: {message}", file=str(path),
                                    line=getattr(exc, "lineno", None), expected="valid TOML")) from None
    except ValueError as exc:  # Python's limit on an integer's digits (4,300) stops the reader
        raise ScenarioError(Problem(f"invalid TOML: {str(exc).partition(';')[0]}", file=str(path),
                                    expected="numbers of at most a few dozen digits")) from None
    if nesting_depth(data) > MAX_NESTING:
        raise ScenarioError(Problem("values are nested too deeply", file=str(path),
                                    expected=f"at most {MAX_NESTING} levels of nested arrays "
                                             "and tables"))
    return data, line_index(text)


def nesting_depth(value: Any, limit: int = MAX_NESTING + 1) -> int:
    """How deeply ``value`` nests lists and tables (counting stops past ``limit``)."""
    deepest, level, stack = 0, 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            break
        if isinstance(item, Mapping):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def shown_path(path: Any) -> str:
    """A path for a message: long ones are shortened."""
    text = str(path)
    return text if len(text) <= 160 else text[:100] + " … " + text[-40:]


#: How a shipped scenario is named where a path goes: ``extends = "infermodel:case-study-24gb"``.
SHIPPED_PREFIX = "infermodel:"
#: The package the shipped scenarios are installed as.
SHIPPED_PACKAGE = "infermodel_scenarios"
_SHIPPED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def shipped_folder() -> Path | None:
    """The folder of the shipped scenarios as installed, or None when it is not."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(SHIPPED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


def shipped_scenarios() -> dict[str, Path]:
    """Every shipped scenario, by name (the file name without ``.toml``)."""
    folder = shipped_folder()
    if folder is None:
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.toml"))}


def shipped_scenario(text: str, *, file: str | None = None, key: str | None = None,
                     line: int | None = None) -> Path:
    """The installed file of the shipped scenario ``"infermodel:NAME"`` (``NAME`` or
    ``NAME.toml``); an unknown name is one problem, at ``file``, ``key`` and ``line``,
    with the closest name.

    >>> shipped_scenario("infermodel:case-study-24gb").name  # doctest: +SKIP
    'case-study-24gb.toml'
    """
    from .errors import suggest

    name = text[len(SHIPPED_PREFIX):].removesuffix(".toml")
    known = shipped_scenarios()
    if _SHIPPED_NAME.fullmatch(name) and name in known:
        return known[name]
    hint = suggest(name, known) if known else None
    raise ScenarioError(Problem(
        f"no shipped scenario is named {name!r}" if known
        else f"{text!r} names a shipped scenario, and none is installed",
        file=file, key=key, line=line,
        expected=f'"{SHIPPED_PREFIX}NAME", NAME one of the shipped scenarios'
                 + (f" ({len(known)}: {', '.join(list(known)[:4])}, …)" if known else ""),
        suggestion=hint or ("`infermodel presets scenarios` lists them" if known
                            else "reinstall infermodel, or name the file by its path")))
