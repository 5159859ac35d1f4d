"""Writing results: atomically, never over an input, with user errors for bad targets.

An interrupted run never leaves a partial file (the text goes to a temporary file
beside the target, renamed into place at the end), and no command ever writes over a
scenario file it read (the file itself, what it extends, its presets).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from .errors import InfermodelError, Problem

_PROTECTED: set[Path] = set()


def protect(paths: Iterable[str | os.PathLike]) -> None:
    """Refuse, from now on in this process, to write over any of ``paths``."""
    for path in paths:
        with contextlib.suppress(OSError):
            _PROTECTED.add(Path(path).resolve())


def protect_scenario(scenario) -> None:
    """Protect a scenario's own file and every file its values came from."""
    files = {origin.file for origin in scenario.origins.values() if origin.file != "--set"}
    if scenario.path is not None:
        files.add(str(scenario.path))
    protect(f for f in files if f and os.path.isfile(f))


def check_target(path: str | os.PathLike) -> Path:
    """The path to write, or a clear error when it cannot or must not be written."""
    target = Path(path)
    if target.resolve() in _PROTECTED:
        raise InfermodelError(Problem(f"refusing to write over {str(target)!r}, which this run "
                                      "reads as a scenario or preset",
                                      expected="an output file that is not an input"))
    if target.is_dir():
        raise InfermodelError(Problem(f"cannot write {str(target)!r}: it is a directory",
                                      expected="a file name"))
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InfermodelError(Problem(f"cannot write {str(target)!r}: the directory "
                                      f"{str(parent)!r} does not exist",
                                      expected="a file in an existing directory"))
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class atomic_stream:
    r"""Open a temporary file beside ``path``; rename it into place on success only.

    An exception (a KeyboardInterrupt included) removes the temporary file.

    >>> with atomic_stream("out.csv") as handle:  # doctest: +SKIP
    ...     handle.write("a,b\n")
    """

    #: The open temporary file (text, or bytes with ``binary``).
    handle: IO[Any]

    def __init__(self, path: str | os.PathLike, *, binary: bool = False):
        self.path = check_target(path)
        self.binary = binary

    def __enter__(self):
        directory = self.path.parent if str(self.path.parent) else Path(".")
        try:
            fd, self.temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp",
                                                  dir=directory)
        except OSError as exc:
            raise InfermodelError(Problem(f"cannot write {str(self.path)!r}: {exc.strerror}")) from None
        # mkstemp creates the file private (0600); give it the permissions of a new file.
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666 & ~_umask())
        if self.binary:
            self.handle = os.fdopen(fd, "wb")
        else:
            self.handle = os.fdopen(fd, "w", encoding="utf-8", newline="")
        return self.handle

    def __exit__(self, kind, value, traceback):
        try:
            self.handle.close()
        finally:
            if kind is None:
                try:
                    os.replace(self.temporary, self.path)
                except OSError as exc:
                    os.unlink(self.temporary)
                    raise InfermodelError(Problem(
                        f"cannot write {str(self.path)!r}: {exc.strerror}")) from None
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.temporary)
        return False


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    >>> atomic_write("out.json", "{}")  # doctest: +SKIP
    """
    with atomic_stream(path, binary=isinstance(data, bytes)) as handle:
        handle.write(data)


def emit(text: str, output: str | None) -> None:
    """Print ``text``, or write it atomically to ``output`` when given."""
    if output:
        atomic_write(output, text if text.endswith("\n") else text + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
