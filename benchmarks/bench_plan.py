"""The deployment planner against brute force, on the issue's example.

Plans scenarios/plan-70b-chat.toml (Llama 3.1 70B FP8, 2,000-token prompts, 300-token
answers, 20 requests/s, p95 TTFT <= 1 s, p95 ITL <= 50 ms, H100 / H200 / MI300X under
vLLM, up to 64 GPUs) twice in one run:

* **planned** — the planner as shipped: analytic bounds, finalists only, replica counts
  found by a climb and bisection, requests doubled only where a verdict is unclear;
* **brute force** — every candidate that loads simulated at every replica count up to
  the GPU cap, each count judged exactly as the planner judges one (the same seed, the
  same growth of requests), with no bound, order or pruning.

Both must name the same best deployment.  Prints their best deployments, runs, wall and
CPU seconds and the speed-up; with ``--scheduler processes`` the planner spreads the
cards over worker processes (the issue's "three-card plan on two cores").

    python benchmarks/bench_plan.py [--scheduler serial|processes] [--skip-brute-force]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "scenarios" / "plan-70b-chat.toml"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(**options):
    from infermodel.analyses.planning import plan

    started, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    found = plan(EXAMPLE, **options)
    return (found, time.perf_counter() - started,
            time.process_time() - cpu + _children_cpu() - children)


def _line(name: str, found, wall: float, cpu: float) -> str:
    best = found.best
    shown = "none" if best is None else f"{best.label} ({best.gpus} GPUs, USD {best.cost.per_month:,.0f}/month)"
    return (f"{name:<12} {wall:8.1f} s wall {cpu:8.1f} s CPU  {found.runs:5d} judged counts  "
            f"best: {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheduler", choices=("serial", "processes"), default="serial")
    parser.add_argument("--skip-brute-force", action="store_true")
    args = parser.parse_args()
    import infermodel  # noqa: F401  (imported before the clocks start, as a CLI run would be)

    print(f"{EXAMPLE.name}: cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    planned, wall, cpu = _timed(scheduler=args.scheduler)
    print(_line("planned", planned, wall, cpu))
    if args.skip_brute_force:
        return
    brute, brute_wall, brute_cpu = _timed(brute_force=True, scheduler=args.scheduler)
    print(_line("brute force", brute, brute_wall, brute_cpu))
    same = (planned.best is not None and brute.best is not None
            and (planned.best.label, planned.best.replicas) == (brute.best.label, brute.best.replicas))
    print(f"same best deployment: {same}; speed-up {brute_wall / wall:.1f}x wall, "
          f"{brute_cpu / cpu:.1f}x CPU")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
