"""Loading and evaluating scenarios for the directives, cached per build."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def split_names(text: str) -> list[str]:
    return [n for n in re.split(r"[\s,]+", text or "") if n]


def split_overrides(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"[;\n]", text or "") if part.strip()]


def quantity_list(argument: str | None) -> list[str]:
    names = split_names(argument or "")
    if not names:
        raise ValueError("give one or more quantity names, separated by commas")
    return names


def overrides_option(argument: str | None) -> str:
    if not argument or not argument.strip():
        raise ValueError("give overrides as key.path=value, separated by ';' or newlines")
    return argument


def scenario_files(path: Path) -> set[str]:
    """The files a scenario reads: itself and what it extends, even when it is broken."""
    files = {str(path)}
    try:
        from ..scenario import load_raw

        _data, origins = load_raw(path)
    except Exception:
        return files
    files.update(o.file for o in origins.values() if o.file and o.file != "--set")
    return files


def note_dependencies(env, files: Iterable[str]) -> None:
    for file in sorted(set(files)):
        if file and os.path.isfile(file):
            env.note_dependency(os.path.abspath(file))


#: Evaluated scenarios of this process, keyed by (path, overrides, host), each kept with
#: the size and time stamp of every file it read: a page that shows a scenario twice,
#: the generated pages and the catalogue evaluate it once per build, and an edited file
#: is read again.
_RESULTS: dict[tuple, tuple[tuple, Any]] = {}
_RESULTS_LIMIT = 256


def _fingerprint(files: Iterable[str]) -> tuple:
    out: list[tuple[str, int | None, int | None]] = []
    for file in sorted(set(files)):
        try:
            stat = os.stat(file)
            out.append((file, stat.st_mtime_ns, stat.st_size))
        except OSError:
            out.append((file, None, None))
    return tuple(out)


def cached_result(path: Path, overrides: list[str] | None = None, *, host=None):
    """Load and evaluate a scenario, reusing this process's earlier result when no file
    it read has changed since.
    """
    from .. import evaluate, load_scenario
    from ..host import get_host

    host = host or get_host()
    key = (str(Path(path).resolve()), tuple(overrides or ()), id(host))
    cached = _RESULTS.get(key)
    if cached is not None and cached[0] == _fingerprint(f for f, _, _ in cached[0]):
        return cached[1]
    result = evaluate(load_scenario(path, overrides or None, host=host), host=host)
    files = {str(path), *(o.file for o in result.scenario.origins.values()
                          if o.file and o.file != "--set")}
    if len(_RESULTS) >= _RESULTS_LIMIT:
        _RESULTS.pop(next(iter(_RESULTS)))
    _RESULTS[key] = (_fingerprint(files), result)
    return result


def problem_text(exc: BaseException, *, overrides_as: str | None = None) -> str:
    """The error as the page's warning says it; with ``overrides_as``, a problem in the
    ``--set`` overrides is placed there instead (``":set"``, the directive's option).
    """
    from ..errors import InfermodelError

    if isinstance(exc, InfermodelError):
        if overrides_as is None:
            return exc.render()
        problems = [p.located(file=overrides_as, key=p.key, line=p.line) if p.file == "--set"
                    else p for p in exc.problems]
        return InfermodelError(problems, heading=exc.heading).render()
    return f"{type(exc).__name__}: {exc}"


class Shower:
    """Formats paths relative to the project so pages do not depend on the machine."""

    def __init__(self, srcdir):
        self.root = Path(srcdir).resolve().parent

    def path(self, file: str | None) -> str:
        if not file:
            return ""
        if file == "--set":
            return "the :set: option"
        try:
            return Path(file).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return file
