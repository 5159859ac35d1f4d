"""The simulator's two engines, each with and without speculative decoding.

Both engines apply the same rules (:mod:`infermodel.simulator.policies` states them,
:mod:`infermodel.simulator.rules` holds their shared parts) and fill the same
:class:`~infermodel.simulator.records.RunRecord`; their metrics agree exactly.  The
grid, one module per cell:

=========  =======================================  ==============================
           plain decoding                           speculative decoding
=========  =======================================  ==============================
reference  :mod:`~.reference`                       :mod:`~.reference_speculative`
fast       :mod:`~.fast`, :mod:`~.fast_continuous`  :mod:`~.fast_speculative`
=========  =======================================  ==============================

``reference`` takes one loop turn per model iteration and keeps every token
timestamp: simple enough to check by reading, and the yardstick.  ``fast`` advances
over runs of identical-composition iterations with vectorised arithmetic; its entry
point, pricing and static policy are in :mod:`~.fast`, its continuous policies' state
in :mod:`~.fast_continuous`.  Each speculative state subclasses its engine's plain one.

The entry points: :func:`run_fast` (defined in :mod:`~.fast`) and :func:`run_reference`
(defined here, as the speculative reference state imports the plain one); each picks
the speculative state when the cost model speculates.
"""

from __future__ import annotations

from ..cost import CostModel
from ..policies import Policy
from ..records import RunRecord
from ..rules import check_fits, default_iteration_limit
from ..workload import Workload
from .fast import run_fast
from .reference import Reference
from .reference_speculative import SpeculativeReference

__all__ = ["run_fast", "run_reference"]


def run_reference(
    workload: Workload, cost: CostModel, policy: Policy, max_iterations: int | None = None,
    series: bool = False,
) -> tuple[RunRecord, list[list[float]]]:
    """Simulate ``workload`` under ``policy`` one iteration at a time.

    Returns the run record and every request's token timestamps.
    """
    check_fits(workload, cost, policy)
    limit = default_iteration_limit(workload) if max_iterations is None else int(max_iterations)
    state: Reference
    if cost.speculation is None:
        state = Reference(workload, cost, policy, limit, series)
    else:
        state = SpeculativeReference(cost.speculation, workload, cost, policy, limit, series)
    state.run()
    return state.record(), state.stamps
