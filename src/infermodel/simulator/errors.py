"""The simulator's error type.

Every bad input (a non-positive rate, a malformed length law, a request that can never
fit the cache, an empty workload) and every bounded loop that runs out of budget raises
:class:`SimulationError`.  It is an :class:`infermodel.errors.InfermodelError`, so the
command line reports it as a user mistake (exit status 2), and a :class:`ValueError`,
so plain library callers can catch it as one.
"""

from __future__ import annotations

from infermodel.errors import InfermodelError

__all__ = ["SimulationError"]


class SimulationError(InfermodelError, ValueError):
    """A simulation cannot run as asked; the message says which value and why."""
