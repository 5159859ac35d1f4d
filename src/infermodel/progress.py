"""A small progress bar on standard error for long sweeps and searches.

It draws only when standard error is a terminal (or when asked), waits half a
second before the first frame so short runs stay silent, redraws at most ten
times a second, and clears its line when done::

    with Progress(total, "sweep", unit="points") as bar:
        for chunk in chunks:
            ...
            bar.update(len(chunk))

A terminal progress library would do this too; this one is a few lines, adds no
dependency and no import time to the command line.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Self, TextIO

_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _count(value: float) -> str:
    for scale, prefix in _PREFIXES:
        if value >= scale:
            return f"{value / scale:.3g}{prefix}"
    return f"{value:.0f}" if value == int(value) else f"{value:.3g}"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """A progress bar for ``total`` units of work, drawn on ``stream`` (stderr).

    ``enabled``: True or False forces it on or off; None (the default) draws only
    when the stream is a terminal and ``INFERMODEL_NO_PROGRESS`` is unset.
    """

    def __init__(self, total: int, description: str = "", *, unit: str = "points",
                 stream: TextIO | None = None, enabled: bool | None = None,
                 delay: float = 0.5, interval: float = 0.1, width: int = 30):
        self.total = max(int(total), 0)
        self.description = description
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty()) and not os.environ.get("INFERMODEL_NO_PROGRESS")
        self.enabled = enabled
        self.delay = delay
        self.interval = interval
        self.width = width
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, amount: int = 1) -> None:
        """Record ``amount`` more units done; redraw if it is time."""
        self.done += amount
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay or now - self._last < self.interval:
            return
        self._last = now
        self._draw(now)

    def line(self, now: float | None = None) -> str:
        """The text of the current frame."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self.start, 1e-9)
        fraction = self.done / self.total if self.total else 1.0
        fraction = min(max(fraction, 0.0), 1.0)
        filled = round(fraction * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        rate = self.done / elapsed
        text = (f"{self.description} [{bar}] {fraction * 100:5.1f}% "
                f"{_count(self.done)}/{_count(self.total)} {self.unit}, {_count(rate)}/s")
        if 0 < self.done < self.total and rate > 0:
            text += f", {_duration((self.total - self.done) / rate)} left"
        return text.strip()

    def _draw(self, now: float) -> None:
        self.stream.write("\r" + self.line(now) + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Clear the bar's line (if one was drawn)."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


__all__ = ["Progress"]
