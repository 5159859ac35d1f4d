"""Public entry points: :func:`simulate` and :func:`run_policy` (the capacity search is
:mod:`.capacity`).
"""

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
from .policies import POLICY_KINDS, SLO, Policy
from .policies import policy as as_policy
from .records import RunRecord
from .workload import Workload, WorkloadSpec, check_rate

__all__ = [
    "ENGINES",
    "Run",
    "SimulationResult",
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


def json_number(value: Any, nan: Any = None) -> Any:
    """A float for JSON: infinities as ``"inf"``/``"-inf"``; NaN as ``nan`` (``null``
    for a field that does not apply, such as a closed-loop run's rate).
    """
    if isinstance(value, float):
        if math.isnan(value):
            return nan
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value


def metrics_json(metrics: Mapping[str, float]) -> dict[str, Any]:
    return {name: json_number(value, NAN_JSON) for name, value in metrics.items()}


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise SimulationError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return engine


def check_cost(cost_model: Any) -> CostModel:
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
    check_cost(cost_model)
    policy = as_policy(policy)
    slo = SLO() if slo is None else slo
    if deployment is not None and not deployment.single:
        if check_engine(engine) != "fast":
            raise SimulationError("several servers are simulated by the fast engine only")
        record = run_deployment(workload, cost_model, policy, deployment, max_iterations, series)
    elif check_engine(engine) == "fast":
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
        data = {"policy": self.policy, "rate": json_number(self.rate),
                "overloaded": self.overloaded, "slo_met": bool(self.metrics.get("slo_met", 0.0)),
                "metrics": metrics_json(self.metrics)}
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
    check_cost(cost_model)
    check_engine(engine)
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
