"""The deployment planner: the cheapest deployments that meet percentile objectives at a
load, split by job: :mod:`.table` reads ``[plan]``, :mod:`.space` spans the candidates
(layout degrees and engines as data), :mod:`.analytic` bounds them, :mod:`.search`
simulates the finalists, :mod:`.result` and :mod:`.report` rank and print the answer,
:mod:`.launch` writes the engine's launch line and :mod:`.figure` draws the Pareto plot.

>>> found = plan("scenarios/plan-70b-chat.toml")  # doctest: +SKIP
>>> print(found.text())  # doctest: +SKIP
"""

from .planner import candidate_overrides, plan, read_plan
from .result import Planned, PlanResult
from .space import DEGREES, ENGINES, Candidate, Degree, EngineSpec
from .table import PlanTable

__all__ = ["DEGREES", "ENGINES", "Candidate", "Degree", "EngineSpec", "PlanResult", "PlanTable",
           "Planned", "candidate_overrides", "plan", "read_plan"]
