"""Error types.

Every mistake a user can make (a bad scenario, an unknown quantity, a broken
plugin) is an :class:`InfermodelError`. The command line prints its message and
exits with status 2; anything else is an internal error (status 1).

One record carries a mistake everywhere: :class:`Problem` (message, file, key path,
line, what was expected, a suggestion). The narrower errors raised while reading a
value (a field, a Hugging Face config) carry theirs in ``.problem``
(:class:`CarriesProblem`); a unit error, raised by the standalone
:mod:`infermodel.units`, has the same fields and :meth:`Problem.of` reads it. The
scenario reader adds the file and line.

This module uses only the standard library, so that the simulator can use it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

#: What a plugin may raise that is its own failure, not the user's or ours: SystemExit
#: and GeneratorExit included, so that a plugin cannot end the command silently.
PLUGIN_FAILURES = (Exception, SystemExit, GeneratorExit)


def close_match(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word``, or None when nothing is close.

    A different case is closest (``L4`` → ``l4``), then the first candidate the word
    begins, in the order given (``int4`` → ``int4-g128``, a family's default first),
    then the nearest spelling.

    >>> close_match("bandwith", ["bandwidth", "memory"])
    'bandwidth'
    >>> close_match("L4", ["l40s", "l4"]), close_match("int4", ["int8", "int4-g128", "int4-g32"])
    ('l4', 'int4-g128')
    """
    ordered = list(dict.fromkeys(candidates))
    folded = word.casefold()
    for candidate in ordered:
        if candidate.casefold() == folded:
            return candidate
    for candidate in ordered:
        if candidate.casefold().startswith(folded) and candidate[len(word):][:1] in ("-", "_", "."):
            return candidate
    import difflib  # only on a mistake, not on every start

    matches = difflib.get_close_matches(word, sorted(ordered), n=1, cutoff=0.6)
    return matches[0] if matches else None


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """"did you mean ...?" for the candidate closest to ``word``, or None.

    >>> suggest("bandwith", ["bandwidth", "memory"])
    "did you mean 'bandwidth'?"
    """
    return did_you_mean(close_match(word, candidates))


def did_you_mean(name: str | None) -> str | None:
    """"did you mean ...?" for a name already found (or None): the one wording of a
    suggestion, for the few places that find the name some other way than
    :func:`suggest`.

    >>> did_you_mean("levers.speculative")
    "did you mean 'levers.speculative'?"
    """
    return f"did you mean {name!r}?" if name else None


#: The longest run of characters without a space that a message repeats from the input
#: (a 100,000-character value is shown by its two ends), and the longest part of a message.
MAX_ECHO = 300
MAX_PART = 4000
_LONG_RUN = re.compile(rf"\S{{{MAX_ECHO + 1},}}")


def shorten(text: str | None) -> str | None:
    """``text`` with every over-long run of characters cut in the middle, the number of
    characters left out said, and the whole capped at :data:`MAX_PART` characters.

    >>> shorten("got " + "x" * 1000)[:12]
    'got xxxxxxxx'
    >>> len(shorten("got " + "x" * 1000)) < 300
    True
    """
    if text is None:
        return None
    text = str(text)
    if len(text) <= MAX_ECHO:
        return text

    def cut(match: re.Match) -> str:
        run = match.group(0)
        return f"{run[:200]}…({len(run) - 260:,} characters)…{run[-60:]}"

    text = _LONG_RUN.sub(cut, text)
    if len(text) > MAX_PART:
        text = f"{text[:MAX_PART - 200]}…({len(text) - MAX_PART + 200:,} characters)…{text[-150:]}"
    return text


def count_text(count: int) -> str:
    """A whole number for a message: with separators, or its order of magnitude when it is
    long (never converting a huge integer to a float or to all its digits).

    >>> count_text(1234567), count_text(10**40)
    ('1,234,567', 'about 10^40')
    """
    if abs(count) < 10**15:
        return f"{count:,}"
    return f"about 10^{len(str(abs(count))) - 1}" if abs(count).bit_length() < 10_000 \
        else f"about 2^{abs(count).bit_length() - 1}"


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with the user's input, with everything needed to fix it.

    Every text is passed through :func:`shorten`, so that a message never repeats a huge
    input value in full.

    >>> Problem("got 0", key="workload.batch", expected="an integer, >= 1").render()
    'workload.batch: got 0 (expected an integer, >= 1)'
    """

    message: str
    file: str | None = None
    key: str | None = None
    line: int | None = None
    expected: str | None = None
    suggestion: str | None = None

    def __post_init__(self) -> None:
        for name in ("message", "file", "key", "expected", "suggestion"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or len(value) > MAX_ECHO):
                object.__setattr__(self, name, shorten(value))

    def render(self) -> str:
        where = ""
        if self.file:
            where = self.file
            if self.line:
                where += f":{self.line}"
            where += ": "
        key = f"{self.key}: " if self.key else ""
        text = f"{where}{key}{self.message}"
        if self.expected:
            text += f" (expected {self.expected})"
        if self.suggestion:
            text += f"; {self.suggestion}"
        return text

    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.file or "", self.line or 0, self.key or "", self.message)

    @classmethod
    def of(cls, error: BaseException) -> Problem:
        """The problem an error carries (:class:`CarriesProblem`), or one made of its
        ``message``, ``expected`` and ``suggestion`` (a unit error), or of its text.
        """
        carried = getattr(error, "problem", None)
        if isinstance(carried, Problem):
            return carried
        return cls(getattr(error, "message", None) or str(error),
                   expected=getattr(error, "expected", None),
                   suggestion=getattr(error, "suggestion", None))

    def located(self, *, file: str | None = None, key: str | None = None,
                line: int | None = None) -> Problem:
        """The same problem placed at a file, key path and line."""
        return dataclasses.replace(self, file=file, key=key, line=line)


class CarriesProblem:
    """Mixin for an exception raised while reading one value: its :class:`Problem`
    (message, what was expected, a suggestion) is in ``.problem``, and the reader that
    catches it adds where the value was written.
    """

    problem: Problem

    @property
    def message(self) -> str:
        return self.problem.message

    @property
    def expected(self) -> str | None:
        return self.problem.expected

    @property
    def suggestion(self) -> str | None:
        return self.problem.suggestion


class InfermodelError(Exception):
    """A mistake in the user's input. The CLI prints it and exits with status 2."""

    exit_code = 2

    def __init__(self, problems: str | Problem | Sequence[Problem], *, heading: str | None = None):
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = sorted(problems, key=Problem.sort_key)
        self.heading = heading
        super().__init__(self.render())

    def render(self) -> str:
        lines = [p.render() for p in self.problems]
        if len(lines) == 1 and not self.heading:
            return lines[0]
        heading = self.heading or f"{len(lines)} errors encountered"
        if len(lines) > 1:
            heading = f"{heading} ({len(lines)} errors encountered)" if self.heading else heading
        return heading + ":\n" + "\n".join(f"  - {line}" for line in lines)


class ScenarioError(InfermodelError):
    """The scenario file (or an override) is malformed or inconsistent."""


class UnknownQuantityError(InfermodelError):
    """A quantity name that no loaded plugin defines."""


class GraphError(InfermodelError):
    """The quantity graph cannot be built: a cycle, an undefined name, a clash."""


class PluginError(InfermodelError):
    """A plugin failed to import, to register, or raised inside a hook."""


class FormulaError(InfermodelError):
    """A formula or constraint written by a user is not acceptable."""
