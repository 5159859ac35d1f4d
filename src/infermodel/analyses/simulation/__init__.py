"""Simulating a scenario in the serving simulator, split by job: :mod:`.table` types the
scenario's ``[simulation]`` table, :mod:`.plan` reads it with the scenario's quantities
into what to simulate, :mod:`.runs` runs that (or searches its capacity) and
:mod:`.reports` prints, plots and writes what came out; :mod:`.contract` says which
evaluated quantities the simulation reads and what it leaves out.

>>> r = simulate("scenarios/module10-lab3-policies.toml", policies=["chunked"], rates=[0.2])  # doctest: +SKIP
"""

from .contract import CONTRACT, layered_values, simulator_quantities, unmodelled_changes
from .defaults import lever_defaults
from .plan import (
    SimulationPlan,
    plan,
    simulation_warnings,
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
    "CONTRACT",
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
    "simulation_warnings",
    "simulator_quantities",
    "timeseries_csv",
    "unmodelled_changes",
    "workload_defaults",
]
