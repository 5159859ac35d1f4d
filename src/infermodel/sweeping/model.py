"""``infermodel.Model``: a scenario kept for evaluating again and again, and sweeping.

>>> import infermodel
>>> model = infermodel.Model("scenarios/case-study-24gb.toml")  # doctest: +SKIP
>>> [model.evaluate(workload__batch=b)["tpot"] for b in (1, 8, 18)]  # doctest: +SKIP
>>> model.sweep({"workload.batch": "1..64"}, quantities=["tpot"])  # doctest: +SKIP
"""

from __future__ import annotations

from ..engine.kept import KeptScenario
from .entry import sweep
from .result import SweepResult


class Model(KeptScenario):
    """A scenario (a path or a :class:`~infermodel.scenario.Scenario`) ready to be
    evaluated many times with changed fields, and swept.

    ``evaluate`` takes overrides as :func:`infermodel.evaluate` does (a mapping of
    dotted field paths, or ``--set`` style ``"key=value"`` strings) and as keywords,
    with ``__`` for the dot: ``model.evaluate(workload__batch=18)``. A value change
    reuses the structure (graph and compiled function); a structural change (a lever, a
    preset, a choice, a field a plugin reads) builds its structure once and keeps it.
    The results are a fresh evaluation's to the bit. Not safe to share between threads.

    >>> model = Model("scenarios/case-study-24gb.toml")  # doctest: +SKIP
    >>> model.evaluate({"workload.batch": 18})["tokens_per_s_total"]  # doctest: +SKIP
    958.9...
    """

    def sweep(self, over=None, **kwargs) -> SweepResult:
        """:func:`infermodel.sweep` over this model's scenario (the same arguments)."""
        return sweep(self.scenario, over, host=self.host, **kwargs)
