"""Writing results: atomically, never over an input, with user errors for bad targets.

An interrupted run never leaves a partial file (the text goes to a temporary file
beside the target, renamed into place at the end), and no command ever writes over a
file it read: every reader of user files (scenarios and what they extend, presets,
``hf_config`` files, length files) records the file with :func:`note_read`, and a
target is checked against those files both before the work and again just before the
rename. Only regular files are written: a target that exists and is not one (a named
pipe, a device such as ``/dev/null``, a socket, a directory) or that is a stream reached
through ``/proc`` or ``/dev/fd`` (``/dev/stdout``) is refused before any work starts —
opening a named pipe waits for a reader, and a rename would replace a device node.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from .errors import InfermodelError, Problem

_PROTECTED: set[Path] = set()
#: Inputs recorded but not yet resolved (absolute paths): most commands write no file, so
#: the links of a hundred preset paths are followed only when a write asks.
_PENDING: list[str] = []

#: The limits, in bytes, of one path component and of a whole path on Linux (and of one
#: name on the other common file systems): checked before the file system sees a path.
NAME_MAX = 255
PATH_MAX = 4096


def path_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot name a file on this system, or None when it can.

    Checked before the file system sees the path, so that a NUL byte or an over-long
    name is a user error rather than a ``ValueError`` or ``OSError`` from deep inside.

    >>> path_problem("out.csv") is None
    True
    >>> path_problem("a" + chr(0) + "b")
    'the path contains a NUL byte'
    """
    try:
        text = os.fspath(path)
    except TypeError:
        return f"got {type(path).__name__}, not a path"
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\x00" in text:
        return "the path contains a NUL byte"
    size = len(os.fsencode(text))
    if size >= PATH_MAX:
        return f"the path is {size:,} bytes long, over the {PATH_MAX:,}-byte limit"
    for part in Path(text).parts:
        length = len(os.fsencode(part))
        if length > NAME_MAX:
            return (f"a component of the path is {length:,} bytes long, over the file "
                    f"system's {NAME_MAX}-byte limit for one name")
    return None


def _key(path: str | os.PathLike) -> Path | None:
    if path_problem(path) is not None:
        return None
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def protect(paths: Iterable[str | os.PathLike]) -> None:
    """Refuse, from now on in this process, to write over any of ``paths``."""
    for path in paths:
        if path_problem(path) is None:
            _PENDING.append(os.path.abspath(path))


def _protected() -> set[Path]:
    while _PENDING:
        key = _key(_PENDING.pop())
        if key is not None:
            _PROTECTED.add(key)
    return _PROTECTED


def note_read(path: str | os.PathLike) -> None:
    """Record that this run reads ``path``: no output of the run may replace it.

    Every reader of a user-named or preset file calls this (a plugin that reads files
    of its own should too).
    """
    protect([path])


def reset_protection() -> None:
    """Forget the files recorded so far (the command line does this at the start of each
    command, so that one in-process run's inputs do not bind the next).
    """
    _PROTECTED.clear()
    _PENDING.clear()


def protect_scenario(scenario) -> None:
    """Protect a scenario's own file, every file its values came from, and every preset
    file of the loaded plugins (a sweep or a lever may read any of them).
    """
    files = {origin.file for origin in scenario.origins.values() if origin.file != "--set"}
    if scenario.path is not None:
        files.add(str(scenario.path))
    host = getattr(scenario, "host", None)
    if host is not None:
        for presets in host.registries.presets.values():
            files.update(str(info.path) for info in presets.values())
    protect(f for f in files if f and _is_file(f))


def _is_file(path: str | os.PathLike) -> bool:
    try:
        return path_problem(path) is None and os.path.isfile(path)
    except (OSError, ValueError):
        return False


def _refuse_input(target: Path) -> None:
    if _key(target) in _protected():
        raise InfermodelError(Problem(f"refusing to write over {_show(target)}, which this run "
                                      "reads as an input (a scenario, preset, config or "
                                      "length file)",
                                      expected="an output file that is not an input"))


def _show(path: str | os.PathLike) -> str:
    text = repr(str(path))
    return text if len(text) <= 200 else text[:120] + " … " + text[-60:]


def check_target(path: str | os.PathLike) -> Path:
    """The path to write, or a clear error when it cannot or must not be written."""
    problem = path_problem(path)
    if problem is not None:
        raise InfermodelError(Problem(f"cannot write {_show(path)}: {problem}",
                                      expected="a valid file name"))
    target = Path(path)
    _refuse_input(target)
    try:
        if target.is_dir():
            raise InfermodelError(Problem(f"cannot write {_show(target)}: it is a directory",
                                          expected="a file name"))
        kind = not_regular(target)
        if kind is not None:
            raise InfermodelError(Problem(
                f"cannot write {_show(target)}: it is {kind}, not a regular file",
                expected="a regular file or a new file name (outputs are written through a "
                         "temporary file renamed into place)",
                suggestion="leave out the output option to print to the terminal"))
        parent = target.parent if str(target.parent) else Path(".")
        if not parent.is_dir():
            raise InfermodelError(Problem(f"cannot write {_show(target)}: the directory "
                                          f"{_show(parent)} does not exist",
                                          expected="a file in an existing directory"))
    except OSError as exc:
        raise InfermodelError(Problem(f"cannot write {_show(target)}: "
                                      f"{exc.strerror or exc}")) from None
    return target


#: What a file of each non-regular kind is called in a message.
_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))
#: Places whose files are streams or views of the process, never regular files to replace.
_STREAMS = ("/proc/", "/dev/fd/", "/dev/stdin", "/dev/stdout", "/dev/stderr")
_MAX_LINKS = 40


def _link_hops(path: Path) -> list[str]:
    """``path`` made absolute and every target its chain of symbolic links passes through."""
    hops = [os.path.abspath(path)]
    for _ in range(_MAX_LINKS):
        try:
            target = os.readlink(hops[-1])
        except OSError:
            break
        hops.append(os.path.normpath(os.path.join(os.path.dirname(hops[-1]), target)))
    return hops


def not_regular(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``"a named pipe"``,
    ``"a character device"``, ...), or None: a regular file, a new name, or a link to one.

    >>> not_regular("/dev/null")
    'a character device'
    >>> not_regular("no-such-file.csv") is None
    True
    """
    for hop in _link_hops(Path(path)):
        if hop.startswith(_STREAMS) or hop + "/" in _STREAMS:
            return "a stream of this process (under /proc or /dev/fd)"
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a file"


#: What a full, failing or read-only target reports while it is written.
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class atomic_stream:
    r"""Open a temporary file beside ``path``; rename it into place on success only.

    An exception (a KeyboardInterrupt included) removes the temporary file. A target
    that is not a regular file (a named pipe, a device, ``/dev/stdout``) is refused by
    :func:`check_target` before anything is opened.

    >>> with atomic_stream("out.csv") as handle:  # doctest: +SKIP
    ...     handle.write("a,b\n")
    """

    #: The open temporary file (text, or bytes with ``binary``).
    handle: IO[Any]

    def __init__(self, path: str | os.PathLike, *, binary: bool = False):
        self.path = check_target(path)
        self.binary = binary
        self.temporary: str | None = None
        if self.path.is_symlink():
            # Replace what the link names, never the link itself.
            self.path = check_target(Path(os.path.realpath(self.path)))

    def __enter__(self):
        directory = self.path.parent if str(self.path.parent) else Path(".")
        try:
            fd, self.temporary = tempfile.mkstemp(prefix=f".{self.path.name[:64]}.",
                                                  suffix=".tmp", dir=directory)
        except OSError as exc:
            raise InfermodelError(Problem(f"cannot write {_show(self.path)}: "
                                          f"{exc.strerror or exc}")) from None
        # mkstemp creates the file private (0600); give it the permissions of a new file.
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666 & ~_umask())
        self.handle = self._open(fd)
        return self.handle

    def _open(self, file: int | Path) -> IO[Any]:
        if self.binary:
            return open(file, "wb")
        return open(file, "w", encoding="utf-8", newline="")

    def __exit__(self, kind, value, traceback):
        try:
            self.handle.close()
        except OSError as exc:
            self._discard()
            if kind is None:
                raise InfermodelError(Problem(
                    f"cannot write {_show(self.path)}: {exc.strerror or exc}")) from None
            return False
        if kind is not None:
            self._discard()
            if isinstance(value, OSError) and value.errno in _WRITE_ERRORS:
                raise InfermodelError(Problem(
                    f"cannot write {_show(self.path)}: {value.strerror or value}")) from None
            return False
        if self.temporary is None:
            return False
        # A file read during the work (a preset of a later sweep block) is still an input.
        try:
            _refuse_input(self.path)
        except InfermodelError:
            self._discard()
            raise
        try:
            os.replace(self.temporary, self.path)
        except OSError as exc:
            self._discard()
            raise InfermodelError(Problem(
                f"cannot write {_show(self.path)}: {exc.strerror or exc}")) from None
        return False

    def _discard(self) -> None:
        if self.temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temporary)


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
