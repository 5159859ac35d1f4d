"""Simulating a scenario in the serving simulator, split by job: :mod:`.table` reads and
checks the scenario's ``[simulation]`` table into a plan, :mod:`.runs` runs it (or
searches its capacity), :mod:`.reports` prints, plots and writes what came out.

>>> r = simulate("scenarios/module10-lab3-policies.toml", policies=["chunked"], rates=[0.2])  # doctest: +SKIP
"""

from .reports import (
    REQUEST_COLUMNS,
    CapacityReport,
    CapacityReports,
    plot_latency,
    plot_timeseries,
    requests_csv,
    timeseries_csv,
)
from .runs import SimulationWarning, simulate
from .table import SimulationPlan, lever_defaults, plan, unmodelled_changes, workload_defaults

__all__ = [
    "REQUEST_COLUMNS",
    "CapacityReport",
    "CapacityReports",
    "SimulationPlan",
    "SimulationWarning",
    "lever_defaults",
    "plan",
    "plot_latency",
    "plot_timeseries",
    "requests_csv",
    "simulate",
    "timeseries_csv",
    "unmodelled_changes",
    "workload_defaults",
]
