"""Public entry points: :func:`simulate`, :func:`run_policy` and :func:`capacity_search`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from .cluster import Deployment, run_deployment
from .cost import CostModel
from .engines import run_fast, run_reference
from .errors import SimulationError
from .metrics import compute_metrics
from .policies import POLICY_KINDS, SLO, Policy, percentile_key
from .policies import policy as as_policy
from .records import RunRecord
from .workload import Workload, WorkloadSpec, check_rate

__all__ = [
    "ENGINES",
    "CapacityResult",
    "Run",
    "SimulationResult",
    "capacity_search",
    "run_policy",
    "run_record",
    "simulate",
]

ENGINES = ("fast", "reference")
Progress = Callable[[int, int], None]


#: A NaN metric in JSON, as :mod:`infermodel.formatting` writes it for ``run``,
#: ``sweep`` and ``search`` (the simulator imports nothing of the project's but
#: ``errors``, so the strings are repeated here and a test holds them equal).
NAN_JSON = "nan"


def _json_number(value: Any, nan: Any = None) -> Any:
    """A float for JSON: infinities as ``"inf"``/``"-inf"``; NaN as ``nan`` (``null``
    for a field that does not apply, such as a closed-loop run's rate).
    """
    if isinstance(value, float):
        if math.isnan(value):
            return nan
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


def _metrics_json(metrics: Mapping[str, float]) -> dict[str, Any]:
    return {name: _json_number(value, NAN_JSON) for name, value in metrics.items()}


def _check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise SimulationError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return engine


def _check_cost(cost_model: Any) -> CostModel:
    if not isinstance(cost_model, CostModel):
        raise SimulationError(
            f"cost_model must be a CostModel (see CostModel.from_quantities), got {type(cost_model).__name__}"
        )
    return cost_model


def run_policy(
    cost_model: CostModel,
    workload: Workload,
    policy: Policy | str = "chunked",
    slo: SLO | None = None,
    engine: str = "fast",
    max_iterations: int | None = None,
) -> dict[str, float]:
    """Simulate one drawn workload under one policy and return its metrics.

    >>> w = WorkloadSpec.lab3().generate(0.2, seed=0)
    >>> m = run_policy(CostModel.lab3(), w, "chunked")
    >>> round(m["ttft_p50"], 2), round(m["ttft_p99"], 2), round(m["throughput_tokens_per_s"], 1)
    (1.09, 2.89, 384.3)
    """
    return run_record(cost_model, workload, policy, slo, engine, max_iterations)[1]


def run_record(
    cost_model: CostModel,
    workload: Workload,
    policy: Policy | str = "chunked",
    slo: SLO | None = None,
    engine: str = "fast",
    max_iterations: int | None = None,
    series: bool = False,
    deployment: Deployment | None = None,
) -> tuple[RunRecord, dict[str, float]]:
    """Like :func:`run_policy`, also returning the run's :class:`RunRecord` (every
    request's arrival, first and last token, evictions; the pooled inter-token gaps as
    distinct values with counts; with ``series``, the time series of waiting and running requests and
    cache use at every scheduling decision).
    """
    _check_cost(cost_model)
    policy = as_policy(policy)
    slo = SLO() if slo is None else slo
    if deployment is not None and not deployment.single:
        if _check_engine(engine) != "fast":
            raise SimulationError("several servers are simulated by the fast engine only")
        record = run_deployment(workload, cost_model, policy, deployment, max_iterations, series)
    elif _check_engine(engine) == "fast":
        record = run_fast(workload, cost_model, policy, max_iterations, series)
    else:
        record, _ = run_reference(workload, cost_model, policy, max_iterations, series)
    return record, compute_metrics(record, slo)


@attrs.frozen
class Run:
    """One simulated run: the policy, the nominal arrival rate and its metrics."""

    policy: str
    rate: float
    metrics: dict[str, float] = attrs.field(eq=False)
    settings: Policy = attrs.field(eq=False, repr=False)
    concurrency: int | None = None
    record: Any = attrs.field(default=None, eq=False, repr=False)
    seed: int | None = None

    @property
    def overloaded(self) -> bool:
        """Past saturation (see :func:`infermodel.simulator.metrics.overloaded`)."""
        return bool(self.metrics.get("overloaded", 0.0))

    def to_dict(self) -> dict[str, Any]:
        data = {"policy": self.policy, "rate": _json_number(self.rate),
                "overloaded": self.overloaded, "slo_met": bool(self.metrics.get("slo_met", 0.0)),
                "metrics": _metrics_json(self.metrics)}
        if self.concurrency is not None:
            data["concurrency"] = self.concurrency
        if self.seed is not None:
            data["seed"] = self.seed
        return data


# title, width, decimals, metric, scale (ITL in ms as Lab 3 prints it)
_SCHEDULING_COLUMNS = (
    ("real", 6, 3, "realised_rate", 1),
    ("TTFT p50 s", 10, 2, "ttft_p50", 1),
    ("p99 s", 8, 2, "ttft_p99", 1),
    ("ITL p50 ms", 10, 1, "itl_p50", 1000),
    ("p99 ms", 7, 1, "itl_p99", 1000),
    ("max ms", 9, 1, "itl_max", 1000),
    ("tok/s", 7, 1, "throughput_tokens_per_s", 1),
    ("preempt", 7, 0, "preemptions", 1),
    ("rollback", 8, 0, "rollbacks", 1),
)
# The Inference lab's "Many requests, one pass" table: tokens/s, mean latency, p95,
# wait and slot use per policy (with the requests the stop rule let in).
_BATCHING_COLUMNS = (
    ("requests", 8, 0, "requests", 1),
    ("tok/s", 8, 1, "throughput_tokens_per_s", 1),
    ("mean lat s", 10, 2, "e2e_mean", 1),
    ("p95 s", 8, 2, "e2e_p95", 1),
    ("wait s", 8, 2, "queue_wait_mean", 1),
    ("slot use", 8, 3, "slot_use", 1),
)
#: Table layouts :meth:`SimulationResult.table` prints.
TABLE_LAYOUTS = {"scheduling": _SCHEDULING_COLUMNS, "batching": _BATCHING_COLUMNS}


@attrs.frozen
class SimulationResult:
    """The runs of :func:`simulate`, in policy-major order, with what produced them."""

    runs: tuple[Run, ...]
    seed: int
    slo: SLO
    engine: str
    cost_model: CostModel = attrs.field(repr=False)
    workload: WorkloadSpec | Workload = attrs.field(repr=False)
    notes: tuple[str, ...] = ()
    #: Rent per hour of every server simulated (None when the cards have no price).
    price_per_hour: float | None = None

    def run(self, policy: str, rate: float) -> Run:
        """The run of ``policy`` at nominal ``rate``."""
        for run in self.runs:
            if run.policy == policy and math.isclose(run.rate, rate, rel_tol=1e-12, abs_tol=1e-15):
                return run
        raise KeyError((policy, rate))

    def closed(self, policy: str, concurrency: int) -> Run:
        """The closed-loop run of ``policy`` at ``concurrency`` clients."""
        for run in self.runs:
            if run.policy == policy and run.concurrency == concurrency:
                return run
        raise KeyError((policy, concurrency))

    def to_dict(self) -> dict[str, Any]:
        """``{"runs": [{"policy", "rate", "metrics": {...}}], "seed", "engine", "slo"}``;
        metrics in base units (s, tokens/s, requests/s); NaN → "nan", ∞ → "inf".
        """
        return {
            "runs": [run.to_dict() for run in self.runs],
            "notes": list(self.notes),
            "seed": self.seed,
            "engine": self.engine,
            "slo": {
                **self.slo.to_dict(),
                "goodput_rule": _goodput_rule(self.slo),
            },
        }

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def table(self, layout: str = "scheduling") -> str:
        """A plain-text table: ``"scheduling"`` is laid out like Module 10 Lab 3's policy
        table (TTFT and ITL percentiles, tokens/s, preemptions), ``"batching"`` like the
        Inference lab's "Many requests, one pass" (tokens/s, mean latency, p95, wait,
        slot use).
        """
        if layout not in TABLE_LAYOUTS:
            raise SimulationError(f"table layout must be one of {', '.join(TABLE_LAYOUTS)}, "
                                  f"got {layout!r}")
        columns = TABLE_LAYOUTS[layout]
        lines = [" ".join(["policy  ", "nominal"] + [f"{title:>{width}}" for title, width, *_ in columns])]
        for run in self.runs:
            load = f"{run.rate:>7.2f}" if run.concurrency is None else f"{'N=' + str(run.concurrency):>7}"
            cells = [f"{run.policy:<8}", load]
            for _, width, decimals, key, scale in columns:
                cells.append(f"{run.metrics[key] * scale:>{width}.{decimals}f}")
            if run.overloaded:
                cells.append(" OVERLOADED")
            lines.append(" ".join(cells))
        return "\n".join(lines)

    @property
    def footnotes(self) -> list[str]:
        """Lines explaining the table's flags (printed after it by the command line), and
        the prefix cache's hit rates where requests shared a prefix.
        """
        lines = [f"objectives ({self.slo.describe()}): " + "; ".join(
            f"{'met' if run.metrics.get('slo_met') else 'not met'} at {_load_label(run)}"
            for run in self.runs)]
        if any(run.overloaded for run in self.runs):
            lines.append("OVERLOADED: past saturation, the queue grows while requests arrive; "
                         "its percentiles depend on how many requests were simulated")
        for run in self.runs:
            m = run.metrics
            if m.get("prefix_hit_tokens", 0) > 0:
                load = f"N={run.concurrency}" if run.concurrency is not None else f"{run.rate:g}/s"
                lines.append(f"prefix cache, {run.policy} {load}: {m['prefix_hit_rate']:.1%} of "
                             f"prompt tokens and {m['prefix_request_hit_rate']:.1%} of requests "
                             f"found cached ({m['prefix_evicted_tokens']:.0f} positions evicted)")
        return lines


def _load_label(run: Run) -> str:
    where = f"N={run.concurrency}" if run.concurrency is not None else f"{run.rate:g}/s"
    return f"{run.policy} {where}"


def _goodput_rule(slo: SLO) -> str:
    """The per-request rule goodput counts, in words."""
    parts = [f"TTFT <= {slo.ttft:g} s"]
    parts.append(f"every inter-token gap <= {slo.itl:g} s" if slo.goodput_itl == "max_gap"
                 else f"TPOT (mean gap) <= {slo.itl:g} s")
    parts += [f"{m.upper()} <= {limit:g} s" for m, _, limit in slo.targets() if m in ("tpot", "e2e")]
    return " and ".join(parts) + ", per request"


def _policies(policies: Iterable[Policy | str | Mapping[str, Any]] | Policy | str) -> list[Policy]:
    if isinstance(policies, (str, Policy, Mapping)):
        policies = [policies]
    chosen = [as_policy(p) for p in policies]
    if not chosen:
        raise SimulationError("choose at least one policy")
    return chosen


def _rates(rates: Iterable[float] | float) -> list[float]:
    # one rate, or several (check_rate refuses anything that is not a number)
    chosen = [check_rate(rate) for rate in (rates if isinstance(rates, Iterable) else [rates])]
    if not chosen:
        raise SimulationError("choose at least one arrival rate")
    return chosen


def simulate(
    cost_model: CostModel,
    workload_spec: WorkloadSpec | Workload | None = None,
    policies: Sequence[Policy | str] | Policy | str = POLICY_KINDS,
    rates: Sequence[float] | float = (0.2,),
    seed: int = 0,
    slo: SLO | None = None,
    engine: str = "fast",
    progress: Progress | None = None,
    max_iterations: int | None = None,
    concurrency: Sequence[int] | int | None = None,
    think_time: float = 0.0,
    keep_records: bool = False,
    deployment: Deployment | None = None,
    seeds: Sequence[int] | None = None,
    scheduler: str = "serial",
    address: str | None = None,
    turns: int = 1,
    reuse_history: bool = True,
) -> SimulationResult:
    """Simulate every policy at every nominal arrival rate on one seeded workload.

    :param cost_model: the iteration cost (e.g. :meth:`CostModel.from_quantities`).
    :param workload_spec: a :class:`WorkloadSpec` (default: Lab 3's), drawn once per
        rate with ``seed`` and shared by all policies; or a drawn :class:`Workload`,
        in which case ``rates`` is ignored and its own rate is reported.
    :param policies: policy names (``static``, ``reserve``, ``paged``, ``chunked``)
        or :class:`Policy` objects.
    :param rates: nominal arrival rates in requests/s.
    :param seed: the workload seed.
    :param slo: objectives for goodput (default 3 s TTFT, 0.1 s per gap).
    :param engine: ``"fast"`` (event-skipping) or ``"reference"`` (one loop turn per
        iteration); both give the same metrics.
    :param progress: called as ``progress(done, total)`` after each run.
    :param max_iterations: bound on model iterations per run (default: generous).
    :param concurrency: closed-loop load instead of rates: for each ``N``, ``N``
        clients each send a request, then their next one ``think_time`` seconds after
        the previous one's last token, until the spec's ``count`` requests are sent.
    :param think_time: seconds between a client's response and its next request.
    :param keep_records: keep each run's :class:`RunRecord` (``Run.record``) for
        per-request and time-series outputs.
    :param deployment: several servers (:class:`Deployment`: replicas behind a router,
        or disaggregated prefill and decode pools); one server by default.
    :param seeds: several workload seeds (a run per seed, ``Run.seed`` set) instead of
        ``seed``.
    :param turns: multi-turn sessions: ``rates`` are sessions/s, each session sends
        ``turns`` requests, each ``think_time`` after the previous one's last token, its
        prompt the session's history plus a new message (cached when
        ``reuse_history``).
    :param scheduler: ``"serial"`` (default) or ``"dask"``: the runs on a Dask cluster
        (a local one, or the scheduler at ``address``), same results in the same order.

    Reproducing a row of Module 10 Lab 3's table::

        >>> result = simulate(CostModel.lab3(), WorkloadSpec.lab3(), ["static"], [0.10])
        >>> m = result.runs[0].metrics
        >>> round(m["ttft_p50"], 2), round(m["ttft_p99"], 2), round(m["throughput_tokens_per_s"], 1)
        (13.04, 52.59, 193.3)
        >>> sorted(result.to_dict()["runs"][0])
        ['metrics', 'overloaded', 'policy', 'rate', 'slo_met']
    """
    _check_cost(cost_model)
    _check_engine(engine)
    chosen = _policies(policies)
    slo = SLO() if slo is None else slo
    spec = WorkloadSpec.lab3() if workload_spec is None else workload_spec
    from .grid import execute

    several = seeds is not None
    seed_list = [seed] if seeds is None else [int(s) for s in seeds]
    if several and not seed_list:
        raise SimulationError("choose at least one seed")
    keys: list[tuple[Policy, float, int | None, int | None]] = []
    tasks: list[tuple[Any, ...]] = []
    for policy in chosen:
        for one_seed in seed_list:
            for rate, clients, workload in drawn_loads(spec, rates, one_seed, concurrency, think_time,
                                                       turns, reuse_history):
                keys.append((policy, rate, clients, one_seed if several else None))
                tasks.append((cost_model, workload, policy, slo, engine, max_iterations,
                              keep_records, deployment))
    outcomes = execute(_one_run, tasks, scheduler, address, progress)
    runs = [Run(policy.name, float(rate), metrics, policy, clients, record, one_seed)
            for (policy, rate, clients, one_seed), (record, metrics) in zip(keys, outcomes)]
    return SimulationResult(tuple(runs), int(seed_list[0]), slo, engine, cost_model, spec)


def _one_run(cost_model: CostModel, workload: Workload, policy: Policy, slo: SLO, engine: str,
             max_iterations: int | None, keep_records: bool,
             deployment: Deployment | None) -> tuple[RunRecord | None, dict[str, float]]:
    """One run of a grid (a module-level function, so a Dask worker can call it)."""
    record, metrics = run_record(cost_model, workload, policy, slo, engine, max_iterations,
                                 keep_records, deployment)
    return (record if keep_records else None), metrics


def drawn_loads(spec: WorkloadSpec | Workload, rates: Sequence[float] | float, seed: int,
                concurrency: Sequence[int] | int | None = None, think_time: float = 0.0,
                turns: int = 1, reuse_history: bool = True,
                ) -> list[tuple[float, int | None, Workload]]:
    """``(rate, clients, workload)`` for every load of a grid: one drawn workload per
    nominal rate, or per closed-loop concurrency (rate NaN).
    """
    if isinstance(spec, Workload):
        return [(spec.rate, spec.clients, spec)]
    if not isinstance(spec, WorkloadSpec):
        raise SimulationError(
            f"workload_spec must be a WorkloadSpec or a Workload, got {type(spec).__name__}"
        )
    if concurrency is not None:
        counts = (list(concurrency) if isinstance(concurrency, Iterable) else [concurrency])
        if not counts:
            raise SimulationError("choose at least one concurrency")
        return [(math.nan, int(n), spec.closed_loop(n, think_time, seed)) for n in counts]
    if turns != 1:
        return [(rate, None, spec.sessions(rate, turns, think_time, seed, reuse_history))
                for rate in _rates(rates)]
    return [(rate, None, spec.generate(rate, seed)) for rate in _rates(rates)]


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
            "range": [_json_number(value) for value in self.range],
            "widened": self.widened,
            "pool": self.pool,
            "overload": self.overload,
            "overloaded": self.overloaded,
            "metrics": _metrics_json(self.metrics),
            "neighbours": [
                {"rate": rate, "passes": passed, "metrics": _metrics_json(metrics)}
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
    _check_cost(cost_model)
    _check_engine(engine)
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
