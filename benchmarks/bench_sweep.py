"""Vectorised sweep against the scalar per-point path of the same engine.

A grid of about a million points over numeric fields of a shipped scenario
(batch, prompt and output lengths, bandwidth, compute, MBU, decode MFU), every
quantity of the scenario computed at every point:

* the sweep (``infermodel.sweep``: plan, compile once, evaluate in chunks, keep
  every column in memory) — points per second, best of ``--repeat``;
* the same evaluation streamed chunk by chunk (what ``infermodel sweep -o x.csv``
  does before formatting) — points per second;
* the scalar path that builds every point, ``evaluation.evaluate_afresh(scenario,
  overrides)`` once per point (what ``infermodel.evaluate`` did before it kept
  structures), on a random sample of the same points, extrapolated to the whole grid;
* the kept-structure scalar path, ``infermodel.Model(scenario).evaluate(overrides)``,
  on the same sample (reported; ``benchmarks/bench_speed.py`` has its targets);
* and a check that the sample's numbers agree (exact equality counted, largest
  relative difference shown; the claim is at most 1e-12).

Targets (SPEC §11): at least 1,000,000 points/s, and at least 200 times the
scalar path. Both are measured in one run so the ratio does not depend on how
busy the machine is.

    python benchmarks/bench_sweep.py [--repeat 3] [--sample 200] [--scenario ...]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GRID = {
    "workload.batch": "1..128",
    "workload.prompt_tokens": "512..4096 8 points",
    "workload.output_tokens": "256..2048 8 points",
    "hardware.bandwidth": ["1 TB/s", "2 TB/s", "3.35 TB/s", "4.8 TB/s"],
    "hardware.flops": ["165 TFLOP/s", "312 TFLOP/s", "989 TFLOP/s", "1307 TFLOP/s"],
    "efficiency.mbu": [0.6, 0.7, 0.8, 1.0],
    "efficiency.decode_mfu": [0.5, 1.0],
}


def _relative(a: float, b: float) -> float:
    if (math.isnan(a) and math.isnan(b)) or a == b:
        return 0.0
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=200, help="points timed on the scalar path")
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "case-study-24gb.toml"))
    args = parser.parse_args()

    import numpy as np

    from infermodel import Model, load_scenario
    from infermodel.engine.evaluation import evaluate_afresh as evaluate
    from infermodel.sweeping import plan_sweep, sweep

    scenario = load_scenario(args.scenario)
    sweep(scenario, {"workload.batch": [1, 2]})  # warm the compile cache and imports

    timings = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = sweep(scenario, GRID)
        timings.append(time.perf_counter() - start)
        points = len(result)
        if len(timings) < args.repeat:
            del result
    vector = min(timings)
    names = result.quantities
    inputs = [n for n in names if result.plan.all_quantities[n].is_input]

    plan = plan_sweep(scenario, GRID)
    streamed = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        for _chunk in plan.chunks():
            pass
        streamed.append(time.perf_counter() - start)
    stream = min(streamed)

    rng = random.Random(11)
    sample = rng.sample(range(points), args.sample)
    evaluate(scenario, result.overrides(sample[0]))  # warm
    start = time.perf_counter()
    scalars = [evaluate(scenario, result.overrides(i)) for i in sample]
    per_point = (time.perf_counter() - start) / len(sample)
    scalar_total = per_point * points
    model = Model(scenario)
    model.evaluate(result.overrides(sample[0]))  # warm
    start = time.perf_counter()
    kept = [model.evaluate(result.overrides(i)) for i in sample]
    kept_per_point = (time.perf_counter() - start) / len(sample)
    assert all({n: repr(v) for n, v in k.values.items()} == {n: repr(v) for n, v in s.values.items()}
               for k, s in zip(kept, scalars))

    exact = compared = 0
    worst = 0.0
    for index, scalar in zip(sample, scalars):
        for name in names:
            got = result[name][index]
            want = scalar[name]
            got = float(got) if not isinstance(want, bool) else bool(got)
            compared += 1
            if got == want or (isinstance(got, float) and math.isnan(got) and math.isnan(want)):
                exact += 1
            else:
                worst = max(worst, _relative(float(got), float(want)))

    rate = points / vector
    print(f"scenario            : {scenario.name}, {len(names)} quantities "
          f"({len(inputs)} inputs), {len(result.plan.blocks)} compiled block(s)")
    print(f"grid                : {points:,} points over {len(GRID)} fields")
    print(f"sweep (in memory)   : {vector:.3f} s  -> {rate:,.0f} points/s (target >= 1,000,000)")
    print(f"streamed chunks     : {stream:.3f} s  -> {points / stream:,.0f} points/s")
    print(f"scalar evaluate()   : {per_point * 1e3:.2f} ms/point on {len(sample)} points "
          f"-> {scalar_total:,.0f} s for the grid (extrapolated)")
    print(f"ratio               : {scalar_total / vector:,.0f}x the scalar path (target >= 200x)")
    print(f"kept structure      : {kept_per_point * 1e3:.3f} ms/point (Model.evaluate) -> the "
          f"sweep is {kept_per_point * points / vector:,.0f}x quicker per point")
    print(f"identical numbers   : {exact:,} of {compared:,} values bit-identical, largest "
          f"relative difference {worst:.1e} (claim <= 1e-12)")
    ok = rate >= 1e6 and scalar_total / vector >= 200 and worst <= 1e-12
    del np
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
