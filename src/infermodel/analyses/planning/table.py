"""The ``[plan]`` table of a scenario, typed: :class:`PlanTable`, read through the strict
converter lever tables go through, every problem at once with its file, key path and
line (as ``[simulation]`` and ``[search]`` are).  A scenario's ``[plan]`` table::

    [plan]
    rate = 20                          # requests/s offered to the whole deployment
    # concurrency = 64                 # ... or closed-loop clients instead of a rate
    ttft = "p95 <= 1 s"                # objectives at any percentile; "1 s" is at `percentile`
    itl = "p95 <= 50 ms"
    # e2e = "p99 <= 20 s"              # tpot too
    goodput_itl = "tpot"               # a request meets the ITL objective by its mean gap
    hardware = ["h100-sxm", "h200", "mi300x"]
    engines = ["vllm"]                 # vllm, sglang, trtllm
    tensor = [1, 2, 4, 8]              # a list per layout degree (space.DEGREES)
    pipeline = [1]
    pools = ["aggregated"]             # or disaggregated units: "1P1D", "1P2D"
    max_gpus = 64
    requests = 1000                    # simulated first; grown fourfold while a verdict is unclear
    max_requests = 16000
    confidence = 0.95                  # of the intervals that decide a verdict
    checkpoint = "meta-llama/Llama-3.1-70B-Instruct"   # what the launch line serves

Every key is optional except the load (``rate`` or ``concurrency``) and one objective.
The degree keys come from :data:`~.space.DEGREES`, so a new layout degree adds its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ...schema import FieldValueError, TableValue
from ..simulation.table import GoodputItl, Objective, Percentile, Seed, Target
from .space import DEGREES, ENGINES, parse_pools

#: The most requests one verdict may simulate (each run holds a few dozen bytes per request).
MAX_PLAN_REQUESTS = 200_000


def _whole(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


class Rate(TableValue):
    """``rate``: requests/s offered to the whole deployment, a finite number > 0."""

    @classmethod
    def structure(cls, value: Any) -> float:
        import math

        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                value > 0 and math.isfinite(value)):
            raise FieldValueError(f"got {value!r}", expected="an arrival rate in requests/s, > 0")
        return float(value)


def _count_reader(name: str, minimum: int, maximum: int | None, expected: str) -> type[TableValue]:
    def structure(cls, value: Any) -> int:
        if not _whole(value, minimum) or (maximum is not None and value > maximum):
            raise FieldValueError(f"got {value!r}", expected=expected)
        return value

    return type(name, (TableValue,), {"structure": classmethod(structure),
                                      "__doc__": f"A whole number: {expected}."})


Clients = _count_reader("Clients", 1, None, "closed-loop clients, a whole number >= 1")
GpuCap = _count_reader("GpuCap", 1, 100_000, "the most GPUs of a deployment, a whole number >= 1")
Requests = _count_reader("Requests", 50, MAX_PLAN_REQUESTS,
                         f"requests per simulated verdict, 50 to {MAX_PLAN_REQUESTS:,}")
Shown = _count_reader("Shown", 1, 10_000, "deployments listed, a whole number >= 1")


class Names(TableValue):
    """A list of names (one name alone is a list of one)."""

    @classmethod
    def structure(cls, value: Any) -> tuple[str, ...]:
        listed = [value] if isinstance(value, str) else value
        if not isinstance(listed, list) or not listed or not all(
                isinstance(v, str) and v for v in listed):
            raise FieldValueError(f"got {value!r}", expected='a list of names, e.g. ["h100-sxm", "h200"]')
        return tuple(dict.fromkeys(listed))


class EngineList(TableValue):
    """``engines``: serving engines of :data:`~.space.ENGINES`."""

    @classmethod
    def structure(cls, value: Any) -> tuple[str, ...]:
        from ...errors import suggest

        names = Names.structure(value)
        for name in names:
            if name not in ENGINES:
                raise FieldValueError(f"no engine named {name!r}",
                                      expected="engines among " + ", ".join(ENGINES),
                                      suggestion=suggest(name, ENGINES))
        return names


class DegreeList(TableValue):
    """A layout degree's values: whole numbers >= 1 (one alone is a list of one)."""

    @classmethod
    def structure(cls, value: Any) -> tuple[int, ...]:
        listed = [value] if _whole(value, 1) else value
        if not isinstance(listed, list) or not listed or not all(_whole(v, 1) and v <= 4096
                                                                for v in listed):
            raise FieldValueError(f"got {value!r}", expected="a list of degrees, e.g. [1, 2, 4, 8]")
        return tuple(sorted(set(listed)))


class PoolList(TableValue):
    """``pools``: ``"aggregated"`` and/or disaggregated units written ``"xPyD"``."""

    @classmethod
    def structure(cls, value: Any) -> tuple:
        listed = [value] if isinstance(value, str) else value
        if not isinstance(listed, list) or not listed:
            raise FieldValueError(f"got {value!r}", expected='a list such as ["aggregated", "1P2D"]')
        out = []
        for text in listed:
            pools = parse_pools(text) if isinstance(text, str) else None
            if pools is None:
                raise FieldValueError(f"got {text!r}", expected='"aggregated", or "xPyD" with x '
                                                                'prefill and y decode servers, e.g. "1P2D"')
            out.append(pools)
        return tuple(dict.fromkeys(out))


class Confidence(TableValue):
    """``confidence``: the confidence of the intervals that decide a verdict, in [0.5, 1)."""

    @classmethod
    def structure(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.5 <= value < 1:
            raise FieldValueError(f"got {value!r}", expected="a confidence in [0.5, 1), e.g. 0.95")
        return float(value)


class Router(TableValue):
    """``router``: how requests reach replicas (the simulator's routers)."""

    @classmethod
    def structure(cls, value: Any) -> str:
        from ...errors import suggest
        from ...simulator import ROUTERS

        if value not in ROUTERS:
            raise FieldValueError(f"got {value!r}", expected="one of " + ", ".join(ROUTERS),
                                  suggestion=suggest(value, ROUTERS) if isinstance(value, str) else None)
        return value


class Checkpoint(TableValue):
    """``checkpoint``: the model path or identifier the launch line serves."""

    @classmethod
    def structure(cls, value: Any) -> str:
        if not isinstance(value, str) or not value or len(value) > 300 or any(
                c.isspace() or c in "'\"`$;&|<>\\" for c in value):
            raise FieldValueError(f"got {value!r}", expected="a model path or identifier without "
                                                             "spaces or shell characters")
        return value


def _fields() -> dict[str, Any]:
    fields: dict[str, Any] = {
        "rate": attrs.field(type=Rate, default=None),
        "concurrency": attrs.field(type=Clients, default=None),
        "ttft": attrs.field(type=Objective, default=None),
        "itl": attrs.field(type=Objective, default=None),
        "tpot": attrs.field(type=Objective, default=None),
        "e2e": attrs.field(type=Objective, default=None),
        "percentile": attrs.field(type=Percentile, default=99.0),
        "goodput_itl": attrs.field(type=GoodputItl, default="max_gap"),
        "hardware": attrs.field(type=Names, default=None),
        "engines": attrs.field(type=EngineList, default=None),
        "pools": attrs.field(type=PoolList, default=None),
        "max_gpus": attrs.field(type=GpuCap, default=64),
        "requests": attrs.field(type=Requests, default=1000),
        "max_requests": attrs.field(type=Requests, default=16000),
        "confidence": attrs.field(type=Confidence, default=0.95),
        "seed": attrs.field(type=Seed, default=0),
        "router": attrs.field(type=Router, default="round_robin"),
        "checkpoint": attrs.field(type=Checkpoint, default=None),
        "show": attrs.field(type=Shown, default=10),
    }
    for degree in DEGREES:  # a key per layout degree: the space's data
        fields[degree.key] = attrs.field(type=DegreeList, default=None)
    return fields


if TYPE_CHECKING:
    class PlanTable:
        """The ``[plan]`` table, typed (see the module docstring)."""

        rate: float | None
        concurrency: int | None
        ttft: Target | None
        itl: Target | None
        tpot: Target | None
        e2e: Target | None
        percentile: float
        goodput_itl: str
        hardware: tuple[str, ...] | None
        engines: tuple[str, ...] | None
        pools: tuple | None
        max_gpus: int
        requests: int
        max_requests: int
        confidence: float
        seed: int
        router: str
        checkpoint: str | None
        show: int

        def __init__(self, **kwargs: Any) -> None: ...
else:
    PlanTable = attrs.make_class("PlanTable", _fields(), frozen=True)
    PlanTable.__doc__ = "The ``[plan]`` table, typed (see the module docstring)."

PLAN_KEYS = tuple(a.name for a in attrs.fields(PlanTable))  # type: ignore[arg-type]


def check_table(table: PlanTable, scenario, add) -> None:
    """What the types alone cannot say: one load, at least one objective, known cards,
    a request range that grows.
    """
    from ...errors import suggest

    if (table.rate is None) == (table.concurrency is None):
        add("plan.rate", "give the load as rate (requests/s) or concurrency (clients), one of them",
            expected="rate = 20 or concurrency = 64")
    if not objectives(table):
        add("plan", "no latency objective to plan for",
            expected='at least one of ttft, itl, tpot, e2e, e.g. ttft = "p95 <= 1 s"')
    known = scenario.host.registries.presets.get("hardware", {})
    for name in table.hardware or ():
        if name not in known:
            add("plan.hardware", f"no hardware preset named {name!r}", expected="a hardware preset",
                suggestion=suggest(name, known) or "`infermodel presets hardware` lists them")
    if table.max_requests < table.requests:
        add("plan.max_requests", f"max_requests = {table.max_requests:,} is below requests = "
                                 f"{table.requests:,}", expected="max_requests >= requests")


def objectives(table: PlanTable) -> dict[str, Target]:
    """The objectives the table sets (``"none"`` sets none)."""
    import math

    return {m: t for m in ("ttft", "itl", "tpot", "e2e")
            if (t := getattr(table, m)) is not None and math.isfinite(t.limit)}


def degree_values(table: PlanTable) -> Mapping[str, tuple[int, ...] | None]:
    """Each degree's listed values (None where the table lists none)."""
    return {d.key: getattr(table, d.key) for d in DEGREES}


__all__ = ["MAX_PLAN_REQUESTS", "PLAN_KEYS", "PlanTable", "check_table", "degree_values",
           "objectives"]
