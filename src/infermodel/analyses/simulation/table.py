"""The ``[simulation]`` table of a scenario, typed: :class:`SimulationTable` and its
nested tables, read by the strict converter lever tables go through.

Every problem in it (an unknown key, a value of the wrong type or out of range) is
reported at once with its file, key path and line. A scenario's ``[simulation]`` table
(every key optional)::

    [simulation]
    policies = ["static", "reserve", "paged", "chunked"]   # or tables: {kind = "chunked", chunk_tokens = 512}
    rates = [0.10, 0.20, 0.25, 0.30, 0.35, 0.40]            # nominal requests/s
    seed = 0
    engine = "fast"                                         # or "reference"
    cache_memory = "16 GB"                                  # default: kv_budget_bytes
    table = "scheduling"                                    # or "batching": the columns printed

    [simulation.workload]                                   # default: Module 10 Lab 3's
    count = 300
    prompt = { law = "uniform", low = 2000, high = 6000 }
    output = { law = "lognormal", median = 1500, sigma = 0.6, min = 16, max = 4000 }
    sampler = "lab"

    [simulation.slo]                                        # objectives, at a percentile each
    ttft = "p95 <= 1 s"                                     # or "3 s": at `percentile` (99)
    itl = "p95 <= 50 ms"
    e2e = "p99 <= 20 s"                                     # tpot too; none by default
    goodput_itl = "max_gap"                                 # or "tpot": a request's ITL rule
    rule = "joint"                                          # or "percentiles" (Lab 3's)

    [simulation.capacity]
    policy = "chunked"                                      # default: the simulation's policy
    low = 0.01
    high = 4.0
    steps = 10
    neighbour = 0.005
    overload = "fails"                                      # or "reported" (Lab 3's rule)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ...schema import FieldValueError, TableValue

RATES_EXPECTED = "arrival rates in requests/s, each > 0"
CLIENTS_EXPECTED = "closed-loop client counts, whole numbers >= 1 (e.g. [1, 8, 32])"


# ---------------------------------------------------------------------------------
# The [simulation] table's schema, read as a lever table is (infermodel.schema)
# ---------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


class RateList(TableValue):
    """``rates``: one nominal arrival rate or a list of them, each a finite number > 0."""

    @classmethod
    def structure(cls, value: Any) -> tuple[float, ...]:
        listed = [value] if _is_number(value) else value
        if not isinstance(listed, list):
            raise FieldValueError(f"got rate {value!r}", expected=RATES_EXPECTED)
        for rate in listed:
            if not (_is_number(rate) and rate > 0 and _finite(rate)):
                raise FieldValueError(f"got rate {rate!r}", expected=RATES_EXPECTED)
        return tuple(float(rate) for rate in listed)


class ClientCounts(TableValue):
    """``concurrency``: closed-loop client counts, whole numbers >= 1."""

    @classmethod
    def structure(cls, value: Any) -> tuple[int, ...]:
        listed = [value] if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(listed, list | tuple) or not listed or any(
                isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in listed):
            raise FieldValueError(f"got {value!r}", expected=CLIENTS_EXPECTED)
        return tuple(int(n) for n in listed)


class EngineName(TableValue):
    """``engine``: the simulator's engine, ``"fast"`` or ``"reference"``."""

    @classmethod
    def structure(cls, value: Any) -> str:
        if value not in ("fast", "reference"):
            raise FieldValueError(f"got {value!r}", expected='"fast" or "reference"')
        return value


class HistoryMode(TableValue):
    """``history``: a session's earlier turns found in the prefix cache, or recomputed."""

    @classmethod
    def structure(cls, value: Any) -> str:
        if value not in ("reuse", "recompute"):
            raise FieldValueError(f"got {value!r}", expected='"reuse" or "recompute"')
        return value


class Seed(TableValue):
    """``seed``: the random seed, a whole number."""

    @classmethod
    def structure(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldValueError(f"got {value!r}", expected="a whole number")
        return value


class TurnCount(TableValue):
    """``turns``: turns per session, a whole number >= 1."""

    @classmethod
    def structure(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FieldValueError(f"got {value!r}", expected="a whole number of turns >= 1")
        return value


class ThinkTime(TableValue):
    """``think_time``: a client's pause between a response and its next request."""

    @classmethod
    def structure(cls, value: Any) -> float:
        from ...schema import Seconds as SecondsType
        from ...schema import structure

        seconds = float(structure(value, SecondsType))
        if seconds < 0:
            raise FieldValueError(f"got {seconds!r}", expected='a non-negative time such as "2 s"')
        return seconds


class PolicyEntry(TableValue):
    """A policy: its kind's name or a table with ``kind`` and its limits (checked by the
    simulator once the levers' proposals are known).
    """

    @classmethod
    def structure(cls, value: Any) -> Any:
        if not isinstance(value, str | Mapping):
            raise FieldValueError(f"got {value!r}", expected=(
                'a policy: "static", "reserve", "paged", "chunked" or a table such as '
                '{kind = "chunked", chunk_tokens = 512}'))
        return value


class PolicyList(TableValue):
    """``policies``: one policy or a list of them."""

    @classmethod
    def structure(cls, value: Any) -> tuple:
        return tuple(PolicyEntry.structure(p) for p in
                     (value if isinstance(value, list) else [value]))


class TableLayout(TableValue):
    """``table``: the columns ``simulate`` prints, a layout of
    :data:`infermodel.simulator.TABLE_LAYOUTS` (``"scheduling"`` or ``"batching"``).
    """

    @classmethod
    def structure(cls, value: Any) -> str:
        from ...errors import suggest
        from ...simulator import TABLE_LAYOUTS

        if not isinstance(value, str) or value not in TABLE_LAYOUTS:
            raise FieldValueError(
                f"got {value!r}", expected="one of " + ", ".join(map(repr, TABLE_LAYOUTS)),
                suggestion=suggest(value, TABLE_LAYOUTS) if isinstance(value, str) else None)
        return value


class WorkloadTable(TableValue):
    """``[simulation.workload]``: kept as written; the simulator's reader types it."""

    @classmethod
    def structure(cls, value: Any) -> dict:
        if not isinstance(value, Mapping):
            raise FieldValueError(f"got {value!r}", expected="a [simulation.workload] table")
        return dict(value)


@attrs.frozen
class Target:
    """One latency objective: its limit in seconds and the percentile it is judged at
    (None: the table's ``percentile``).
    """

    limit: float
    percentile: float | None = None


OBJECTIVE_EXPECTED = ('a time such as "1 s", a percentile objective such as "p95 <= 1 s", or '
                      '"none"')
_OBJECTIVE = re.compile(r"\s*p(\d+(?:\.\d+)?)\s*<=\s*(.+)")


class Objective(TableValue):
    """A latency objective: a time (``"3 s"``, ``0.1``), judged at the table's percentile,
    or ``"pQ <= TIME"`` (``"p95 <= 1 s"``, ``"p99.9 <= 200 ms"``), any percentile in (0, 100);
    ``"none"``: no objective on this metric.

    >>> Objective.structure("p95 <= 50 ms")
    Target(limit=0.05, percentile=95.0)
    """

    @classmethod
    def structure(cls, value: Any) -> Target:
        from ...units import UnitError, parse_quantity

        if value == "none":  # no objective on this metric (a default one switched off)
            return Target(math.inf)
        percentile = None
        if isinstance(value, str) and (found := _OBJECTIVE.fullmatch(value)) is not None:
            percentile = float(found.group(1))
            if not 0 < percentile < 100:
                raise FieldValueError(f"p{found.group(1)} is not a percentile in (0, 100)",
                                      expected=OBJECTIVE_EXPECTED)
            value = found.group(2).strip()
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise FieldValueError(f"got {value!r}", expected=OBJECTIVE_EXPECTED)
        try:
            limit = float(parse_quantity(value, "s"))
        except UnitError as exc:
            raise FieldValueError(exc.message, expected=OBJECTIVE_EXPECTED) from None
        if not (limit > 0 and _finite(limit)):
            raise FieldValueError(f"got {value!r}", expected="a positive, finite time")
        return Target(limit, percentile)


class Percentile(TableValue):
    """``percentile``: the percentile of objectives written without one, in (0, 100)."""

    @classmethod
    def structure(cls, value: Any) -> float:
        if not _is_number(value) or not 0 < value < 100:
            raise FieldValueError(f"got {value!r}", expected="a percentile in (0, 100), e.g. 95")
        return float(value)


def _choice_reader(name: str, choices: tuple[str, ...], doc: str) -> type[TableValue]:
    def structure(cls, value: Any) -> str:
        from ...errors import suggest

        if value not in choices:
            raise FieldValueError(f"got {value!r}", expected="one of " + ", ".join(map(repr, choices)),
                                  suggestion=suggest(value, choices) if isinstance(value, str) else None)
        return value

    return type(name, (TableValue,), {"structure": classmethod(structure), "__doc__": doc})


GoodputItl = _choice_reader("GoodputItl", ("max_gap", "tpot"),
                            "``goodput_itl``: a request meets the ITL objective when every gap "
                            "does (``max_gap``) or its mean gap, TPOT, does (``tpot``).")
SloRule = _choice_reader("SloRule", ("joint", "percentiles"),
                         "``rule``: the percentiles and the goodput share (``joint``), or the "
                         "percentiles alone (``percentiles``, Module 10 Lab 3's capacity rule).")
CapacityOverload = _choice_reader(
    "CapacityOverload", ("fails", "reported"),
    "``overload``: a rate whose run is past saturation fails the capacity search (``fails``), "
    "or is only reported (``reported``, Module 10 Lab 3's search, which judges the "
    "percentiles alone).")


if TYPE_CHECKING:
    # To a type checker each field holds what its type's reader returns.
    Bytes = float
    BytesPerSecond = float
    Seconds = float
    Rates = tuple[float, ...]
    Clients = tuple[int, ...]
    Policy = Any
    Policies = tuple
    Workload = dict
    Engine = str
    History = str
    SeedValue = int
    Turns = int
    Think = float
    Layout = str
    ObjectiveValue = Target
    PercentileValue = float
    ItlRule = str
    Rule = str
    OverloadRule = str
else:
    from ...schema import Bytes, BytesPerSecond, Seconds

    Rates, Clients, Policy, Policies, Workload = (RateList, ClientCounts, PolicyEntry,
                                                  PolicyList, WorkloadTable)
    Engine, History, SeedValue, Turns, Think = EngineName, HistoryMode, Seed, TurnCount, ThinkTime
    Layout = TableLayout
    ObjectiveValue, PercentileValue, ItlRule, Rule = Objective, Percentile, GoodputItl, SloRule
    OverloadRule = CapacityOverload


@attrs.frozen
class SloTable:
    """``[simulation.slo]``: the objectives a run is judged by, each at a percentile
    (``percentile``, 99, unless written ``"p95 <= 1 s"``), the per-request ITL rule of
    goodput and whether goodput's share counts (``rule``).
    """

    ttft: ObjectiveValue = Target(3.0)
    itl: ObjectiveValue = Target(0.1)
    tpot: ObjectiveValue | None = None
    e2e: ObjectiveValue | None = None
    percentile: PercentileValue = 99.0
    goodput_itl: ItlRule = "max_gap"
    rule: Rule = "joint"

    def slo(self):
        """The simulator's :class:`~infermodel.simulator.SLO` of this table."""
        from ...simulator import SLO

        fields: dict[str, Any] = {"goodput_itl": self.goodput_itl, "rule": self.rule}
        for metric in ("ttft", "itl", "tpot", "e2e"):
            target = getattr(self, metric)
            fields[metric] = math.inf if target is None else target.limit  # inf: none
            fields[f"{metric}_percentile"] = (self.percentile if target is None or target.percentile is None
                                              else target.percentile)
        return SLO(**fields)


@attrs.frozen
class CapacityTable:
    """``[simulation.capacity]``: the capacity search's policy and rate bracket (no policy:
    the simulation's own, its chunked one if it has one).
    """

    policy: Policy | None = None
    low: float = 0.01
    high: float = 4.0
    steps: int = 10
    neighbour: float = 0.005
    overload: OverloadRule = "fails"


@attrs.frozen
class DisaggregationTable:
    """``[simulation.disaggregation]``: prefill and decode servers and the link between."""

    prefill: int = 0
    decode: int = 0
    link_bandwidth: BytesPerSecond | None = None
    link_latency: Seconds | None = None


@attrs.frozen
class SimulationTable:
    """The ``[simulation]`` table, typed (every key optional; see the module docstring)."""

    policies: Policies | None = None
    rates: Rates | None = None
    concurrency: Clients | None = None
    think_time: Think = 0.0
    seed: SeedValue = 0
    engine: Engine = "fast"
    cache_memory: Bytes | None = None
    replicas: int = 1
    router: str = "round_robin"
    disaggregation: DisaggregationTable = DisaggregationTable()
    turns: Turns = 1
    history: History = "reuse"
    prefix_caching: bool = True
    block_tokens: int | None = None
    workload: Workload = attrs.Factory(dict)
    slo: SloTable = SloTable()
    capacity: CapacityTable = CapacityTable()
    table: Layout = "scheduling"


def _keys(schema: type) -> tuple[str, ...]:
    return tuple(a.name for a in attrs.fields(schema))


KEYS = _keys(SimulationTable)
DISAGGREGATION_KEYS = _keys(DisaggregationTable)
CAPACITY_KEYS = _keys(CapacityTable)
SLO_KEYS = _keys(SloTable)
