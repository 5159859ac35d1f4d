"""Grid speed-up: the same simulation grid run serially and on a local Dask cluster.

Runs Module 10 Lab 3's workload under four policies at several rates and seeds (one
task per run), first in this process, then on a local cluster of single-threaded
worker processes, and checks that the two give identical metrics.  The cluster's
start-up (processes spawned, the simulator imported on every worker) is timed apart
from the grid, since a long-lived cluster pays it once.

    python benchmarks/bench_grid.py [--workers N] [--seeds S] [--count C] [--engine E]

Prints the serial time, the cluster start-up, the Dask time and the ratio.  The ratio
is bounded by the cores actually free: on a machine shared with other work it is
lower than the worker count.
"""

from __future__ import annotations

import argparse
import os
import time

import attrs

from infermodel.simulator import CostModel, WorkloadSpec, simulate
from infermodel.simulator.grid import start_local_cluster

POLICIES = ["static", "reserve", "paged", "chunked"]
RATES = [0.15, 0.2, 0.25, 0.3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--count", type=int, default=600, help="requests per run")
    parser.add_argument("--engine", choices=("fast", "reference"), default="fast")
    args = parser.parse_args()
    cost = CostModel.lab3()
    spec = attrs.evolve(WorkloadSpec.lab3(), count=args.count)
    seeds = list(range(args.seeds))
    runs = len(POLICIES) * len(RATES) * len(seeds)

    started = time.perf_counter()
    cpu = time.process_time()
    serial = simulate(cost, spec, POLICIES, RATES, seeds=seeds, engine=args.engine)
    serial_s = time.perf_counter() - started
    serial_cpu = time.process_time() - cpu

    started = time.perf_counter()
    cluster, client = start_local_cluster(args.workers)
    startup_s = time.perf_counter() - started
    try:
        before = sum(client.run(time.process_time).values())
        started = time.perf_counter()
        spread = simulate(cost, spec, POLICIES, RATES, seeds=seeds, scheduler="dask",
                          address=cluster.scheduler_address, engine=args.engine)
        dask_s = time.perf_counter() - started
        workers_cpu = sum(client.run(time.process_time).values()) - before
    finally:
        client.close()
        cluster.close()
    same = [a.metrics for a in serial.runs] == [b.metrics for b in spread.runs]
    print(f"grid: {runs} runs ({len(POLICIES)} policies x {len(RATES)} rates x {len(seeds)} seeds, "
          f"{args.count} requests each, {args.engine} engine); cores {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"serial            {serial_s:8.2f} s  ({serial_cpu:.2f} CPU s)")
    print(f"dask start-up     {startup_s:8.2f} s  ({args.workers} worker processes x 1 thread, "
          "simulator imported on each)")
    print(f"dask grid         {dask_s:8.2f} s  ({workers_cpu:.2f} CPU s in the workers: the "
          f"cores they got averaged {workers_cpu / dask_s:.2f})")
    print(f"speed-up          {serial_s / dask_s:8.2f}x  grid only; "
          f"{serial_s / (dask_s + startup_s):.2f}x counting the start-up")
    print(f"identical results {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
