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
import difflib
from collections.abc import Iterable, Sequence


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
    matches = difflib.get_close_matches(word, sorted(ordered), n=1, cutoff=0.6)
    return matches[0] if matches else None


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """"did you mean ...?" for the candidate closest to ``word``, or None.

    >>> suggest("bandwith", ["bandwidth", "memory"])
    "did you mean 'bandwidth'?"
    """
    near = close_match(word, candidates)
    return f"did you mean {near!r}?" if near else None


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with the user's input, with everything needed to fix it.

    >>> Problem("got 0", key="workload.batch", expected="an integer, >= 1").render()
    'workload.batch: got 0 (expected an integer, >= 1)'
    """

    message: str
    file: str | None = None
    key: str | None = None
    line: int | None = None
    expected: str | None = None
    suggestion: str | None = None

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
