"""Serving simulator: the event-skipping engine against the step-by-step reference.

Times Module 10 Lab 3's 24-run policy table (4 policies × 6 rates, 300 requests each)
with both engines side by side in one process, checks that every metric agrees, and
prints the speed ratio (target ≥ 30×).  Then times one long run with the fast engine
(100,000 requests, chunked policy, a stable nominal 0.2 requests/s on Lab 3's device;
target: seconds, not minutes).  Absolute times drift on a shared machine; the ratio
measured side by side does not.

Last, the peak resident memory of that long run at 10⁴, 10⁵ and 10⁶ requests, each in
a fresh subprocess (``ru_maxrss`` of the child), beside the resident size of
``python -c "import numpy"`` measured the same way (targets: 10⁵ requests ≤ 300 MB,
10⁶ ≤ 1 GB).

    python benchmarks/bench_simulator.py [--repeat 3] [--requests 100000] [--rate 0.2]
        [--memory 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time

from infermodel.simulator import CostModel, WorkloadSpec, run_policy

POLICIES = ("static", "reserve", "paged", "chunked")
RATES = (0.10, 0.20, 0.25, 0.30, 0.35, 0.40)


def _table(engine: str, workloads, cost) -> tuple[float, dict]:
    start = time.perf_counter()
    results = {
        (policy, rate): run_policy(cost, workloads[rate], policy, engine=engine)
        for policy in POLICIES
        for rate in RATES
    }
    return time.perf_counter() - start, results


def _differences(fast: dict, reference: dict) -> list[str]:
    problems = []
    for key, expected in reference.items():
        for name, value in expected.items():
            other = fast[key][name]
            same = (math.isnan(value) and math.isnan(other)) or other == value or (
                abs(other - value) <= 1e-9 * abs(value)
            )
            if not same:
                problems.append(f"{key} {name}: fast {other!r} reference {value!r}")
    return problems


# One long run in a child process; prints its wall time, iterations and ITL p99.
_CHILD = """
import sys, time
from infermodel.simulator import CostModel, WorkloadSpec, run_policy
start = time.perf_counter()
workload = WorkloadSpec.lab3(int(sys.argv[1])).generate(float(sys.argv[2]), seed=0)
metrics = run_policy(CostModel.lab3(), workload, "chunked")
print(time.perf_counter() - start, metrics["iterations"], metrics["itl_p99"])
"""


def peak_resident(code: str, *arguments: str) -> tuple[float, str]:
    """Peak resident memory (bytes) of ``python -c code arguments…`` and its output.

    ``ru_maxrss`` of the children is a running maximum over every child waited for,
    so each measurement runs in its own intermediate process.
    """
    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
        "print(done.stdout, end='')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, sys.executable, "-c", code, *arguments],
                          capture_output=True, text=True, check=True)
    first, _, rest = done.stdout.partition("\n")
    return float(first), rest.strip()


def memory_report(sizes: list[int], rate: float) -> None:
    baseline, _ = peak_resident("import numpy")
    print(f"peak resident memory (python -c \"import numpy\": {baseline / 2**20:.0f} MB)")
    for size in sizes:
        peak, output = peak_resident(_CHILD, str(size), str(rate))
        seconds, iterations, itl_p99 = (float(x) for x in output.split())
        print(f"    {size:>9,} requests : {peak / 2**20:7.0f} MB  ({peak / baseline:5.1f}x numpy; "
              f"{seconds:6.1f} s, {iterations:,.0f} iterations, p99 ITL {1000 * itl_p99:.2f} ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="fast-engine repeats (best is kept)")
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--memory", default="10000,100000,1000000",
                        help="request counts whose peak memory is measured (empty: none)")
    args = parser.parse_args()

    cost = CostModel.lab3()
    spec = WorkloadSpec.lab3()
    workloads = {rate: spec.generate(rate, seed=0) for rate in RATES}

    _table("fast", workloads, cost)  # warm caches and imports
    fast_time, fast = min((_table("fast", workloads, cost) for _ in range(max(args.repeat, 1))),
                          key=lambda pair: pair[0])
    reference_time, reference = _table("reference", workloads, cost)
    problems = _differences(fast, reference)
    print(f"Lab 3 table, 24 runs, reference engine : {reference_time:8.3f} s")
    print(f"Lab 3 table, 24 runs, fast engine      : {fast_time:8.3f} s (best of {max(args.repeat, 1)})")
    print(f"speed-up                               : {reference_time / fast_time:8.1f}x (target >= 30x)")
    print(f"metrics identical                      : {'yes' if not problems else 'NO'}")
    for problem in problems[:10]:
        print("   ", problem)

    start = time.perf_counter()
    long = WorkloadSpec.lab3(args.requests).generate(args.rate, seed=0)
    drawn = time.perf_counter()
    metrics = run_policy(cost, long, "chunked")
    done = time.perf_counter()
    print(
        f"{args.requests:,} requests, chunked, nominal {args.rate}/s : {done - start:6.2f} s "
        f"(workload {drawn - start:.2f} s, simulation {done - drawn:.2f} s; "
        f"{metrics['iterations']:,.0f} iterations, {metrics['n_itl_samples']:,.0f} gaps)"
    )
    print(
        f"    p99 TTFT {metrics['ttft_p99']:.2f} s, p99 ITL {1000 * metrics['itl_p99']:.1f} ms, "
        f"{metrics['throughput_tokens_per_s']:.1f} tok/s, Little ratio {metrics['little_ratio']:.4f}"
    )
    if args.memory:
        memory_report([int(size) for size in args.memory.split(",")], args.rate)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
