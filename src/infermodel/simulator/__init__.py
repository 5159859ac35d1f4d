"""Serving simulator: one server, a seeded stream of requests, four scheduling policies.

A discrete-event simulation of Module 10: Inference and serving, Lab 3 ("Compare
scheduling policies on an identical seeded workload, then find capacity under two
latency objectives"), written for this project from the rules that lab states, with
the cross-checks of the Inference lab's "Many requests, one pass" (Little's law,
static slot use, E[max of B]).

Pieces
======

* :class:`CostModel` — the time of one iteration: the maximum of its memory time
  (weights once + every scheduled sequence's cache) and its compute time (matrix
  products for every position + attention of every new query to its cached and
  causal keys).  Build it from scenario quantities with
  :meth:`CostModel.from_quantities` (names in :data:`QUANTITY_NAMES`), or use
  :meth:`CostModel.lab3` for the lab's device.
* :class:`WorkloadSpec` — Poisson arrivals and prompt/output length laws
  (:class:`FixedLength`, :class:`UniformLength`, :class:`LogNormalLength`,
  :class:`EmpiricalLength`; :func:`length_law` reads them from a mapping).  The default
  ``"lab"`` sampler draws exactly the seeded sequence of Lab 3 (Python's
  ``random.Random(seed)``: for each request ``expovariate(rate)``, the prompt, then the
  output), so the lab's printed table is matched cell by cell.
* :class:`Policy` — ``static``, ``reserve``, ``paged`` or ``chunked`` with their
  limits; :class:`SLO` — the objectives for goodput and capacity.
* :func:`simulate` — every policy × every nominal rate → :class:`SimulationResult`
  (``.runs``, ``.to_dict()``, ``.to_json()``, ``.table()``); :func:`capacity_search`
  — the highest rate meeting p99 TTFT and p99 ITL objectives, with the neighbouring
  rates re-checked → :class:`CapacityResult`.
* :class:`Speculation` (and :class:`Draft`) — speculative decoding on a cost model
  (``CostModel(..., speculation=Speculation(k, α, draft_cost=c))``): every decode is a
  verification step of k + 1 positions that emits a seeded random number of tokens.
* :func:`expected_max` and :func:`static_slot_use` — E[max of B] = Σ_k (1 − F(k)^B)
  and (E[o] − 1)/(E[max of B] − 1) for a length law.

Two engines apply identical rules: ``engine="reference"`` takes one loop turn per
model iteration and keeps every timestamp; ``engine="fast"`` (the default) advances
over runs of identical-composition iterations with vectorised arithmetic.  Their
metrics agree exactly on Lab 3's 24 runs.

Example, two cells of Lab 3's table and its capacity figure::

    >>> from infermodel.simulator import CostModel, WorkloadSpec, simulate, capacity_search
    >>> result = simulate(CostModel.lab3(), WorkloadSpec.lab3(), ["chunked"], [0.20, 0.25])
    >>> [round(run.metrics["ttft_p99"], 2) for run in result.runs]
    [2.89, 3.07]
    >>> round(capacity_search(CostModel.lab3()).rate, 3)
    0.244

Errors in the inputs raise :class:`SimulationError` (an
:class:`infermodel.errors.InfermodelError` and a :class:`ValueError`).
"""

from .api import (
    ENGINES,
    TABLE_LAYOUTS,
    Run,
    SimulationResult,
    run_policy,
    run_record,
    simulate,
)
from .capacity import CapacityResult, capacity_search
from .cluster import ROUTERS, Deployment
from .cost import (
    CONVENTION_QUANTITIES,
    EXTENSION_QUANTITIES,
    PHYSICAL_QUANTITIES,
    QUANTITY_NAMES,
    Collectives,
    CostModel,
    Physical,
)
from .errors import SimulationError
from .metrics import METRIC_NAMES, weighted_quantile
from .policies import POLICY_KINDS, SLO, Policy, policy
from .prefixes import DEFAULT_BLOCK_TOKENS, PrefixCache, prefix_policies
from .speculation import Draft, Speculation
from .workload import (
    EmpiricalLength,
    FixedLength,
    LogNormalLength,
    UniformLength,
    Workload,
    WorkloadSpec,
    expected_max,
    length_law,
    static_slot_use,
)

__all__ = [
    "CONVENTION_QUANTITIES",
    "DEFAULT_BLOCK_TOKENS",
    "ENGINES",
    "EXTENSION_QUANTITIES",
    "METRIC_NAMES",
    "PHYSICAL_QUANTITIES",
    "POLICY_KINDS",
    "QUANTITY_NAMES",
    "ROUTERS",
    "SLO",
    "TABLE_LAYOUTS",
    "CapacityResult",
    "Collectives",
    "CostModel",
    "Deployment",
    "Draft",
    "EmpiricalLength",
    "FixedLength",
    "LogNormalLength",
    "Physical",
    "Policy",
    "PrefixCache",
    "Run",
    "SimulationError",
    "SimulationResult",
    "Speculation",
    "UniformLength",
    "Workload",
    "WorkloadSpec",
    "capacity_search",
    "expected_max",
    "length_law",
    "policy",
    "prefix_policies",
    "run_policy",
    "run_record",
    "simulate",
    "static_slot_use",
    "weighted_quantile",
]
