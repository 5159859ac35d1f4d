"""Writing results: atomically, so an interrupted run never leaves a partial file."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    >>> atomic_write("out.json", "{}")  # doctest: +SKIP
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as handle:
            handle.write(data)
        # mkstemp creates the file private (0600); give it the permissions of a new file.
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def emit(text: str, output: str | None) -> None:
    """Print ``text``, or write it atomically to ``output`` when given."""
    if output:
        atomic_write(output, text if text.endswith("\n") else text + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
