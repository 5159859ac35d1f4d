"""The capacity search: the highest arrival rate whose run meets the objectives
(Module 10 Lab 3's bisection, its neighbours re-checked), and its result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .api import Progress, check_cost, check_engine, json_number, metrics_json, run_record
from .cluster import Deployment
from .cost import CostModel
from .errors import SimulationError
from .policies import SLO, Policy, percentile_key
from .policies import policy as as_policy
from .workload import WorkloadSpec, check_rate

__all__ = ["OVERLOAD_RULES", "POOLS", "WIDENINGS", "CapacityResult", "capacity_search"]


@attrs.frozen
class CapacityResult:
    """The outcome of :func:`capacity_search`.

    ``rate`` is the highest nominal rate found to pass (the search's lower bracket),
    ``metrics`` its run, ``passes`` whether that run meets the objectives (false only
    when nothing passed and ``rate`` is the search's starting low end),
    ``neighbours`` the ``(rate, passes, metrics)`` checks at ``rate ± step``, and
    ``history`` every ``(rate, passes)`` the bisection tried.
    """

    policy: str
    rate: float
    metrics: dict[str, float] = attrs.field(eq=False)
    passes: bool
    neighbours: tuple[tuple[float, bool, dict[str, float]], ...] = attrs.field(eq=False)
    history: tuple[tuple[float, bool], ...]
    slo: SLO
    widened: bool = False
    range: tuple[float, float] = (math.nan, math.nan)
    pool: str = "both"
    overload: str = "fails"

    @property
    def overloaded(self) -> bool:
        """Whether the run at ``rate`` is past saturation (:func:`.metrics.overloaded`):
        possible only where ``overload = "reported"`` judged the objectives alone.
        """
        return bool(self.metrics.get("overloaded", 0.0))

    @property
    def neighbour_passes(self) -> list[bool]:
        """Pass/fail of the neighbouring rates, lower first (Lab 3 prints [True, False])."""
        return [passed for _, passed, _ in self.neighbours]

    @property
    def monotone(self) -> bool:
        """Whether the neighbours agree with a monotone pass/fail boundary at ``rate``."""
        return self.neighbour_passes == [True, False]

    def usd_per_million_output_tokens(self, price_per_hour: float) -> float:
        """Price of a million output tokens at the measured throughput.

        >>> r = CapacityResult("chunked", 0.244, {"throughput_tokens_per_s": 466.3}, True, (), (), SLO())
        >>> round(r.usd_per_million_output_tokens(1.0), 3)
        0.596
        """
        throughput = self.metrics["throughput_tokens_per_s"]
        return price_per_hour * 1e6 / (3600 * throughput) if throughput > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "rate": self.rate if self.passes else None,
            "lowest_rate_tried": None if self.passes else self.rate,
            "passes": self.passes,
            "message": self.message,
            "range": [json_number(value) for value in self.range],
            "widened": self.widened,
            "pool": self.pool,
            "overload": self.overload,
            "overloaded": self.overloaded,
            "metrics": metrics_json(self.metrics),
            "neighbours": [
                {"rate": rate, "passes": passed, "metrics": metrics_json(metrics)}
                for rate, passed, metrics in self.neighbours
            ],
            "history": [{"rate": rate, "passes": passed} for rate, passed in self.history],
            "slo": {**{name: limit for name, (_, _, limit) in zip(self.slo.names(), self.slo.targets())},
                    "rule": self.slo.rule},
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @property
    def message(self) -> str:
        """One sentence on what the search found."""
        low, high = self.range
        if not self.passes:
            found = ", ".join(f"{percentile_key(q)} {metric.upper()} {self.metrics.get(name, math.nan):.3g} s"
                              for name, (metric, q, _) in zip(self.slo.names(), self.slo.targets()))
            return (f"no rate in [{low:g}, {high:g}] requests/s meets {self.slo.describe()}: "
                    f"even {self.rate:.4g} requests/s gives {found}")
        if self.widened:
            return (f"every rate of the first range passed; the range was widened to "
                    f"[{low:g}, {high:g}] requests/s")
        return f"highest passing rate in [{low:g}, {high:g}] requests/s"


def _search_range(low: float, high: float, steps: int, neighbour: float) -> tuple[float, float]:
    low, high = check_rate(low), check_rate(high)
    if high <= low:
        raise SimulationError(f"capacity search needs low < high, got low={low} and high={high}")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 60:
        raise SimulationError(f"capacity search steps must be a whole number in 1..60, got {steps!r}")
    if not (isinstance(neighbour, (int, float)) and math.isfinite(neighbour) and 0 < neighbour < low + high):
        raise SimulationError(f"neighbour step must be a small positive rate, got {neighbour!r}")
    return low, high


def _judge(slo: SLO, pool: str, overload: str = "fails") -> Callable[[Mapping[str, float]], bool]:
    """Whether a run passes: both objectives (and, unless ``overload = "reported"``, not
    past saturation), or one pool's own.
    """
    if pool not in POOLS:
        raise SimulationError(f"pool must be one of {', '.join(POOLS)}, got {pool!r}")
    if overload not in OVERLOAD_RULES:
        raise SimulationError(f"overload must be one of {', '.join(OVERLOAD_RULES)}, got {overload!r}")
    if pool == "prefill":
        ttft = f"ttft_{percentile_key(slo.ttft_percentile)}"
        return lambda m: bool(m[ttft] <= slo.ttft)
    if pool == "decode":
        itl = f"itl_{percentile_key(slo.itl_percentile)}"
        return lambda m: bool(m[itl] <= slo.itl)
    if overload == "reported":
        return lambda m: bool(slo.passes(m))
    return lambda m: bool(slo.passes(m) and not m.get("overloaded"))


#: What a capacity search judges: both objectives, or one pool's own.
POOLS = ("both", "prefill", "decode")

#: What an overloaded run means to a capacity search: it ``"fails"`` (the default: a rate
#: whose queue or TTFT still grows has no steady percentiles), or it is ``"reported"``
#: only (Module 10 Lab 3's search, which judges the percentiles alone).
OVERLOAD_RULES = ("fails", "reported")

#: Times the capacity search may multiply its upper end by 4 when every rate passes.
WIDENINGS = 12


def capacity_search(
    cost_model: CostModel,
    workload_spec: WorkloadSpec | None = None,
    policy: Policy | str = "chunked",
    slo: SLO | None = None,
    low: float = 0.01,
    high: float = 4.0,
    steps: int = 10,
    neighbour: float = 0.005,
    seed: int = 0,
    engine: str = "fast",
    progress: Progress | None = None,
    max_iterations: int | None = None,
    deployment: Deployment | None = None,
    pool: str = "both",
    overload: str = "fails",
) -> CapacityResult:
    """Highest nominal arrival rate whose run meets p99 TTFT ≤ ``slo.ttft`` and pooled
    p99 ITL ≤ ``slo.itl``, by ``steps`` bisections of [``low``, ``high``], then the
    neighbouring rates ``rate ± neighbour`` re-checked (Module 10 Lab 3's search).

    ``pool`` judges one pool of a disaggregated deployment by its own objective:
    ``"prefill"`` by p99 TTFT alone, ``"decode"`` by p99 ITL alone (default ``"both"``).
    An overloaded run (:func:`.metrics.overloaded`) fails ``"both"`` unless
    ``overload="reported"`` (Lab 3's rule: the percentiles alone; ``.overloaded`` says so).
    Bisection assumes pass/fail is monotone in the rate; the neighbours show where not.

    >>> r = capacity_search(CostModel.lab3())              # Lab 3's 24 GB bf16 profile
    >>> round(r.rate, 3), round(r.metrics["throughput_tokens_per_s"], 1), r.neighbour_passes
    (0.244, 466.3, [True, False])
    """
    check_cost(cost_model)
    check_engine(engine)
    chosen = as_policy(policy)
    slo = SLO() if slo is None else slo
    judge = _judge(slo, pool, overload)
    spec = WorkloadSpec.lab3() if workload_spec is None else workload_spec
    if not isinstance(spec, WorkloadSpec):
        raise SimulationError("capacity_search needs a WorkloadSpec (it draws one workload per rate)")
    low, high = _search_range(low, high, steps, neighbour)

    total = steps + 3
    done = 0
    cache: dict[float, dict[str, float]] = {}

    def measure(rate: float) -> dict[str, float]:
        nonlocal done
        if rate not in cache:
            workload = spec.generate(rate, seed)
            cache[rate] = run_record(cost_model, workload, chosen, slo, engine, max_iterations,
                                     deployment=deployment)[1]
        done += 1
        if progress is not None:
            progress(min(done, total), total)
        return cache[rate]

    history: list[tuple[float, bool]] = []
    first = (low, high)

    def bisect(low: float, high: float) -> tuple[float, float]:
        for _ in range(steps):
            middle = (low + high) / 2
            passed = judge(measure(middle))
            history.append((middle, passed))
            if passed:
                low = middle
            else:
                high = middle
        return low, high

    low, high = bisect(low, high)
    widened = False
    top = first[1]
    if all(passed for _, passed in history):
        # Every rate passed: the capacity lies above the range.  Move up by factors
        # of 4 until a rate fails, then bisect between the last pass and it.
        for _ in range(WIDENINGS):
            top = high
            passed = judge(measure(top))
            history.append((top, passed))
            widened = True
            if not passed:
                break
            low, high = top, top * 4
        total += len(history) + steps
        low, high = bisect(low, high)
    metrics = measure(low)
    neighbours: list[tuple[float, bool, dict[str, float]]] = []
    for rate in (low - neighbour, low + neighbour):
        if rate <= 0:
            neighbours.append((rate, False, {}))
            done += 1
            if progress is not None:
                progress(min(done, total), total)
            continue
        nearby = measure(rate)
        neighbours.append((rate, judge(nearby), nearby))
    span = (first[0], top) if widened else first
    return CapacityResult(chosen.name, low, metrics, judge(metrics), tuple(neighbours),
                          tuple(history), slo, widened, span, pool, overload)
