"""Simulating a scenario in the serving simulator, split by job: :mod:`.table` types the
scenario's ``[simulation]`` table, :mod:`.plan` reads it with the scenario's quantities
into what to simulate, :mod:`.runs` runs that (or searches its capacity) and
:mod:`.reports` prints, plots and writes what came out.

>>> r = simulate("scenarios/module10-lab3-policies.toml", policies=["chunked"], rates=[0.2])  # doctest: +SKIP
"""

from .plan import (
    SimulationPlan,
    layered_values,
    lever_defaults,
    plan,
    unmodelled_changes,
    workload_defaults,
)
from .reports import (
    REQUEST_COLUMNS,
    CapacityReport,
    CapacityReports,
    plot_latency,
    plot_timeseries,
    requests_csv,
    run_cost,
    timeseries_csv,
)
from .runs import SimulationWarning, simulate
from .table import SimulationTable

__all__ = [
    "REQUEST_COLUMNS",
    "CapacityReport",
    "CapacityReports",
    "SimulationPlan",
    "SimulationTable",
    "SimulationWarning",
    "layered_values",
    "lever_defaults",
    "plan",
    "plot_latency",
    "plot_timeseries",
    "requests_csv",
    "run_cost",
    "simulate",
    "timeseries_csv",
    "unmodelled_changes",
    "workload_defaults",
]
