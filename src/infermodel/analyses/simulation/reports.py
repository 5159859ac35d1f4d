"""Reports of a simulation: a capacity search priced with the scenario's cost, the
latency and time-series plots, and the per-request and time-series CSV files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs

from ...formatting import non_finite_json


@attrs.frozen
class CapacityReports:
    """Several capacity searches (one per policy and seed)."""

    reports: tuple
    seeds: tuple

    def to_dict(self) -> dict:
        return {"searches": [dict(r.to_dict(), seed=s) for r, s in zip(self.reports, self.seeds)]}

    def text(self) -> str:
        return "\n\n".join(f"seed {s}: {r.text()}" for r, s in zip(self.reports, self.seeds))


@attrs.frozen
class CapacityReport:
    """A capacity search result priced with the scenario's hourly cost."""

    search: Any
    price_per_hour: float | None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        if self.price_per_hour is None:
            return None
        return self.search.usd_per_million_output_tokens(self.price_per_hour)

    def cost(self):
        """The price of the searched rate as a :class:`~infermodel.analyses.costs.CostBasis`
        (None without a price, or when no rate passed).
        """
        from ..costs import CostBasis

        s, m = self.search, self.search.metrics
        if self.price_per_hour is None or not s.passes:
            return None
        return CostBasis(self.price_per_hour, m["throughput_tokens_per_s"],
                         m["requests_per_s"] * m["mean_prompt_tokens"],
                         rate=f"at the capacity rate meeting the objectives ({s.rate:.4g} requests/s "
                              "nominal, its simulated throughput)")

    def to_dict(self) -> dict:
        data = self.search.to_dict()
        data["price_per_hour"] = self.price_per_hour
        cost = self.usd_per_million_output_tokens
        # Nothing finished (no throughput) prices at infinity: JSON writes it as "inf".
        data["usd_per_million_output_tokens"] = (
            non_finite_json(cost) if cost is not None and not math.isfinite(cost) else cost)
        basis = self.cost()
        data["cost"] = None if basis is None else basis.to_dict()
        return data

    def text(self) -> str:
        from ...simulator.policies import percentile_key

        s = self.search
        m = s.metrics
        slo = s.slo
        ttft = f"{percentile_key(slo.ttft_percentile)} TTFT <= {slo.ttft:g} s"
        itl = f"{percentile_key(slo.itl_percentile)} ITL <= {slo.itl * 1000:g} ms"
        judged = {"both": slo.describe(), "prefill": f"prefill pool: {ttft}",
                  "decode": f"decode pool: {itl}"}[s.pool]
        head = f"capacity ({s.policy}, {judged}):"
        if not s.passes:
            return "\n".join([head, f"  {s.message}",
                               "  try looser objectives, another policy or more hardware"])
        lines = [
            head,
            f"  nominal rate      {s.rate:.3f} requests/s ({s.rate * 3600:.0f} requests/h)",
            f"  realised rate     {m['realised_rate']:.3f} requests/s",
            f"  output            {m['throughput_tokens_per_s']:.1f} tokens/s",
            f"  goodput           {m['goodput']:.3f} requests/s, {m['goodput_fraction']:.1%} of "
            "requests meeting every objective",
            f"  TTFT p50/p95/p99  {m['ttft_p50']:.2f} / {m['ttft_p95']:.2f} / {m['ttft_p99']:.2f} s",
            f"  ITL p50/p95/p99/max {m['itl_p50'] * 1000:.1f} / {m['itl_p95'] * 1000:.1f} / "
            f"{m['itl_p99'] * 1000:.1f} / {m['itl_max'] * 1000:.1f} ms",
        ]
        for rate, passed, _ in s.neighbours:
            lines.append(f"  neighbour {rate:.3f}/s  {'passes' if passed else 'fails'}")
        if not s.monotone:
            lines.append("  note: the neighbours do not bracket a clean pass/fail boundary here")
        if s.overloaded:
            lines.append(
                f"  warning: this run is past saturation (TTFT rising {m['ttft_trend'] * 1000:.1f} ms "
                f"per second of arrivals, t = {m['ttft_trend_t']:.1f}; queue growth "
                f"{m['queue_growth_per_s']:.3f}/s, t = {m['queue_growth_t']:.1f}): its percentiles "
                f"depend on how many requests were simulated; judged by the objectives alone "
                f"([simulation.capacity] overload = \"reported\")")
        if s.widened:
            lines.append(f"  note: {s.message}")
        basis = self.cost()
        if basis is not None:
            lines.append("  cost")
            lines += basis.lines(indent="    ")
        return "\n".join(lines)


def run_cost(result, run):
    """The price of one simulated run's deployment at its simulated rate, as a
    :class:`~infermodel.analyses.costs.CostBasis` (None when the cards have no price).
    """
    from ..costs import CostBasis

    if result.price_per_hour is None:
        return None
    m = run.metrics
    load = (f"{run.concurrency} clients" if run.concurrency is not None
            else f"{run.rate:g} requests/s nominal")
    verdict = "meeting the objectives" if m.get("slo_met") else "NOT meeting the objectives"
    return CostBasis(result.price_per_hour, m["throughput_tokens_per_s"],
                     m["requests_per_s"] * m["mean_prompt_tokens"],
                     rate=f"at the simulated load ({run.policy}, {load}, {verdict})")


def plot_latency(result, output: str | Path) -> Path:
    """Latency percentiles vs offered load, one line per policy (PNG or SVG)."""
    from ..figures import new_figure, save

    figure, axes = new_figure(rows=2)
    top, bottom = axes
    for name in dict.fromkeys(run.policy for run in result.runs):
        runs = sorted((r for r in result.runs if r.policy == name), key=lambda r: r.rate)
        rates = [r.rate for r in runs]
        line, = top.plot(rates, [r.metrics["ttft_p99"] for r in runs], marker="o", label=f"{name} p99")
        top.plot(rates, [r.metrics["ttft_p50"] for r in runs], linestyle=":", color=line.get_color(),
                 label=f"{name} p50")
        bottom.plot(rates, [r.metrics["itl_p99"] * 1000 for r in runs], marker="o",
                    color=line.get_color(), label=f"{name} p99")
        bottom.plot(rates, [r.metrics["itl_p50"] * 1000 for r in runs], linestyle=":",
                    color=line.get_color(), label=f"{name} p50")
    top.axhline(result.slo.ttft, color="black", linestyle="--", linewidth=0.8)
    bottom.axhline(result.slo.itl * 1000, color="black", linestyle="--", linewidth=0.8)
    # Log axes with plain numbers (0.5, 2, 30), not powers of ten.
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _position: f"{value:g}")
    for panel in (top, bottom):
        panel.set_yscale("log")
        panel.yaxis.set_major_formatter(plain)
        panel.yaxis.set_minor_formatter(FuncFormatter(lambda _value, _position: ""))
    top.set_ylabel("TTFT (s)")
    bottom.set_ylabel("ITL (ms)")
    bottom.set_xlabel("nominal arrival rate (requests/s)")
    top.legend(fontsize=7, ncol=2)
    bottom.legend(fontsize=7, ncol=2)
    top.set_title("Latency percentiles vs offered load (dashed: objective)")
    return save(figure, output)


REQUEST_COLUMNS = ("policy", "rate", "concurrency", "request", "arrival", "first_token", "finish",
                   "prompt_tokens", "output_tokens", "preemptions", "rollbacks")


def requests_csv(result) -> str:
    """One row per request of every run (runs kept with ``keep_records``): times in
    seconds from the start of the run; ``preemptions`` counts evictions that discarded
    the request's cached positions, ``rollbacks`` admissions undone with nothing cached.
    """
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(REQUEST_COLUMNS)
    for run in result.runs:
        r = run.record
        zeros = [0] * r.arrivals.size
        evicted = r.request_preemptions if r.request_preemptions is not None else zeros
        undone = r.request_rollbacks if r.request_rollbacks is not None else zeros
        rate = "" if math.isnan(run.rate) else repr(run.rate)
        clients = "" if run.concurrency is None else run.concurrency
        for i in range(r.arrivals.size):
            writer.writerow([run.policy, rate, clients, i, repr(float(r.arrivals[i])),
                             repr(float(r.first_token[i])), repr(float(r.last_token[i])),
                             int(r.prompts[i]), int(r.outputs[i]), int(evicted[i]), int(undone[i])])
    return buffer.getvalue()


def _series_of(run) -> tuple[dict, list[str]]:
    """A run's time series and each point's server: ``server``, ``replica i``, ``prefill i``..."""
    series = run.record.series
    return series, list(series.get("server", ["server"] * len(series["time"])))


def timeseries_csv(result) -> str:
    """Every run's time series: at each scheduling decision, the requests waiting, the
    requests running and the share of the cache in use.
    """
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["policy", "rate", "concurrency", "time", "waiting", "running", "cache_use", "server"])
    for run in result.runs:
        series, servers = _series_of(run)
        rate = "" if math.isnan(run.rate) else repr(run.rate)
        clients = "" if run.concurrency is None else run.concurrency
        for t, w, n, c, server in zip(series["time"], series["waiting"], series["running"],
                                      series["cache_use"], servers):
            writer.writerow([run.policy, rate, clients, repr(float(t)), int(w), int(n),
                             repr(float(c)), server])
    return buffer.getvalue()


def plot_timeseries(result, output: str | Path) -> Path:
    """Waiting requests, running batch and cache use over time, one line per run and server."""
    from ..figures import new_figure, save

    figure, axes = new_figure(rows=3)
    for run in result.runs:
        series, servers = _series_of(run)
        label = run.policy + (f" N={run.concurrency}" if run.concurrency is not None
                              else f" {run.rate:g}/s")
        for server in dict.fromkeys(servers):
            at = [i for i, s in enumerate(servers) if s == server]
            name = label if server == "server" else f"{label} {server}"
            line, = axes[0].step(series["time"][at], series["waiting"][at], where="post", label=name)
            axes[1].step(series["time"][at], series["running"][at], where="post", color=line.get_color())
            axes[2].plot(series["time"][at], series["cache_use"][at], color=line.get_color())
    axes[0].set_ylabel("waiting")
    axes[1].set_ylabel("running")
    axes[2].set_ylabel("cache use")
    axes[2].set_xlabel("time (s)")
    axes[0].legend(fontsize=7, ncol=2)
    axes[0].set_title("Queue, running batch and cache use over time")
    return save(figure, output)
