"""Replaying a recorded request trace: arrival time, prompt and output length per row.

A trace is a CSV file with a header naming at least ``arrival`` (seconds, any origin),
``prompt`` and ``output`` (tokens), and optionally ``prefix`` (an identifier of a
shared prompt prefix: requests naming the same one start with the same tokens) and
``prefix_tokens`` (that prefix's length in tokens, at most the row's prompt).  With
lengths, a server's prefix cache shares the prefix between its requests
(:mod:`infermodel.simulator.prefixes`); without them the identifiers steer only the
``prefix_affinity`` router, unless the workload's ``prefix_tokens`` gives one length
for all.  Rows are sorted by arrival with
each row's prompt and output kept together (the pairing of a recorded request is
never broken); arrivals are shifted so the first is at 0.  The file is only read.

:func:`read_rows` reads the columns; :func:`infermodel.simulator.workload.read_trace`
returns a :class:`~infermodel.simulator.Workload` replaying the trace as recorded; :meth:`WorkloadSpec.generate <infermodel.simulator.WorkloadSpec.generate>`
of a spec with a ``trace`` replays it time-scaled to another mean rate (gaps divided
by rate / recorded rate), which is how a capacity search sweeps a trace.
"""

from __future__ import annotations

import csv
import os

import numpy as np

from .errors import SimulationError

__all__ = ["TRACE_COLUMNS", "read_rows"]

TRACE_COLUMNS = ("arrival", "prompt", "output", "prefix", "prefix_tokens")


def read_rows(path: str | os.PathLike[str],
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str] | None, np.ndarray | None]:
    r"""``(arrivals, prompts, outputs, prefixes, prefix_tokens)`` of a trace file, sorted
    by arrival with each row kept together, arrivals shifted to start at 0; ``prefixes``
    is None when the file names none, ``prefix_tokens`` when it gives no lengths.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "t.csv").write_text("arrival,prompt,output\n2.0,10,3\n1.0,20,4\n")
    >>> arrivals, prompts, outputs, prefixes, lengths = read_rows(folder / "t.csv")
    >>> arrivals.tolist(), prompts.tolist(), outputs.tolist(), prefixes, lengths
    ([0.0, 1.0], [20, 10], [4, 3], None, None)
    """
    name = os.fspath(path)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [row for row in csv.reader(handle) if row and any(cell.strip() for cell in row)]
    except OSError as error:
        raise SimulationError(f"trace: cannot read {name!r}: {error.strerror}") from None
    if len(rows) < 2:
        raise SimulationError(f"trace: {name!r} needs a header row and at least one request")
    header = [cell.strip().lower() for cell in rows[0]]
    missing = [column for column in TRACE_COLUMNS[:3] if column not in header]
    if missing:
        raise SimulationError(f"trace: {name!r} has no column {', '.join(missing)} "
                              f"(columns: {', '.join(header)}; expected arrival, prompt, output "
                              "and optionally prefix and prefix_tokens)")
    where = {column: header.index(column) for column in TRACE_COLUMNS if column in header}
    arrivals, prompts, outputs, prefixes, lengths = [], [], [], [], []
    for number, row in enumerate(rows[1:], start=2):
        try:
            arrival = float(row[where["arrival"]])
            prompt = float(row[where["prompt"]])
            output = float(row[where["output"]])
        except (IndexError, ValueError):
            raise SimulationError(f"trace: {name!r} row {number}: expected numbers for arrival, "
                                  f"prompt and output, got {row!r}") from None
        if not np.isfinite(arrival) or not prompt.is_integer() or not output.is_integer() \
                or prompt < 1 or output < 1:
            raise SimulationError(f"trace: {name!r} row {number}: arrival must be a finite time "
                                  f"and lengths positive whole numbers, got {row!r}")
        arrivals.append(arrival)
        prompts.append(int(prompt))
        outputs.append(int(output))
        prefixes.append(row[where["prefix"]].strip() if "prefix" in where and
                        len(row) > where["prefix"] else "")
        lengths.append(_prefix_length(row, where, name, number, int(prompt)))
    order = np.argsort(np.asarray(arrivals), kind="stable")
    times = np.asarray(arrivals)[order]
    named = [prefixes[i] for i in order] if any(prefixes) else None
    sized = (np.asarray(lengths, dtype=np.int64)[order]
             if named is not None and "prefix_tokens" in where else None)
    return (times - times[0], np.asarray(prompts)[order], np.asarray(outputs)[order], named,
            sized)


def _prefix_length(row: list[str], where: dict[str, int], name: str, number: int,
                   prompt: int) -> int:
    """A row's ``prefix_tokens`` (0 when the column or the cell is empty)."""
    if "prefix_tokens" not in where or len(row) <= where["prefix_tokens"]:
        return 0
    cell = row[where["prefix_tokens"]].strip()
    if not cell:
        return 0
    try:
        value = float(cell)
    except ValueError:
        value = -1.0
    if not value.is_integer() or not 0 <= value <= prompt:
        raise SimulationError(f"trace: {name!r} row {number}: prefix_tokens must be a whole number "
                              f"of tokens from 0 to the row's prompt ({prompt}), got {cell!r}")
    return int(value)
