"""Measured kernels against the roofline, side by side in one run: the cost of reading
NVIDIA's kernel tables on every path a user takes.

The same scenario twice: as shipped (``efficiency.kernels = "measured"``) and the file
that ``extends`` it with ``kernels = "roofline"`` (what it costs without the tables).

* **Per point.** A value change (``workload.batch``) on a kept structure
  (``infermodel.Model.evaluate``); target: measured ≤ 1.5× the roofline.
* **Sweep.** ``Model.sweep`` over 10,000 batch values (every quantity computed); target:
  ≥ 1,000,000 points/s with measured kernels.
* **Cold start.** ``infermodel run`` of each file in fresh processes, alternately;
  target: measured ≤ 1.5× the roofline (it imports pyarrow and reads the tables it needs).

Every in-process measurement is repeated in interleaved rounds with the garbage collector
paused (as :mod:`timeit` does) and medians are quoted: on a busy machine absolute times
drift, ratios measured side by side much less. In-process times are this process's
processor time by default (``--clock cpu``): on a machine shared with other work, elapsed
time counts the others' turns on the cores too (``--clock wall`` measures that). The
numbers of both paths are checked to be those of a fresh evaluation.

    python benchmarks/bench_kernels.py [--rounds 7] [--starts 9] [--clock cpu] [--scenario ...]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/measured-llama-3.1-8b-fp8-h200.toml"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
POINTS = 10_000


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK = CLOCKS["cpu"]


def _timed(function, repeat: int = 1) -> float:
    gc.collect()
    gc.disable()
    try:
        start = CLOCK()
        for _ in range(repeat):
            function()
        return (CLOCK() - start) / repeat
    finally:
        gc.enable()


def _roofline_twin(path: Path, folder: Path) -> Path:
    twin = folder / "roofline-twin.toml"
    twin.write_text(f'extends = "{path.resolve()}"\n\n[scenario]\nname = "roofline-twin"\n\n'
                    '[efficiency]\nkernels = "roofline"\n', encoding="utf-8")
    return twin


def in_process(measured: Path, roofline: Path, rounds: int) -> dict[str, list[float]]:
    from infermodel.engine.evaluation import evaluate_afresh
    from infermodel.sweeping import Model

    models = {"measured": Model(measured), "roofline": Model(roofline)}
    batches = iter(range(1, 10**9))
    grid = {"workload.batch": list(range(1, POINTS + 1))}
    for model in models.values():
        model.evaluate({"workload.batch": 2})
        model.sweep(grid, quantities=["tpot"])
    samples: dict[str, list[float]] = {f"{k}_{n}": [] for k in ("point", "sweep")
                                       for n in models}
    for _ in range(rounds):
        for name, model in models.items():
            samples[f"point_{name}"].append(_timed(
                lambda model=model: model.evaluate(
                    {"workload.batch": next(batches) % 512 + 1}), 200))
            samples[f"sweep_{name}"].append(_timed(lambda model=model: model.sweep(grid), 3))
    for name, model in models.items():
        for batch in (1, 7, 100, 3000):
            got = model.evaluate({"workload.batch": batch}).values
            want = evaluate_afresh(model.path, {"workload.batch": batch}).values
            assert {k: repr(v) for k, v in got.items()} == {k: repr(v) for k, v in want.items()}
        swept = model.sweep({"workload.batch": [5, 500]}, quantities=["tpot"])
        assert swept["tpot"][1] == model.evaluate({"workload.batch": 500})["tpot"], name
    return samples


def start_up(measured: Path, roofline: Path, starts: int) -> dict[str, list[float]]:
    script = Path(sys.executable).with_name("infermodel")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "infermodel.cli"]
    commands = {"measured": [*base, "run", str(measured)],
                "roofline": [*base, "run", str(roofline)]}

    def measure(command: list[str]) -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=ENV)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    for command in commands.values():  # file-system and bytecode caches
        measure(command)
    out: dict[str, list[float]] = {f"{k}_{n}": [] for k in ("wall", "cpu") for n in commands}
    for _ in range(starts):
        for name, command in commands.items():
            wall, cpu = measure(command)
            out[f"wall_{name}"].append(wall)
            out[f"cpu_{name}"].append(cpu)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default=SCENARIO)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--starts", type=int, default=9)
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="cpu",
                        help="in-process times: this process's processor time or elapsed time")
    args = parser.parse_args()
    global CLOCK
    CLOCK = CLOCKS[args.clock]
    sys.path.insert(0, str(ROOT / "src"))
    with tempfile.TemporaryDirectory() as folder:
        measured = (ROOT / args.scenario).resolve()
        roofline = _roofline_twin(measured, Path(folder))
        samples = in_process(measured, roofline, args.rounds)
        cold = start_up(measured, roofline, args.starts)

    def median(key, table):
        return statistics.median(table[key])

    point = {n: median(f"point_{n}", samples) * 1e3 for n in ("measured", "roofline")}
    sweep = {n: median(f"sweep_{n}", samples) for n in ("measured", "roofline")}
    wall = {n: median(f"wall_{n}", cold) for n in ("measured", "roofline")}
    cpu = {n: median(f"cpu_{n}", cold) for n in ("measured", "roofline")}
    ratio_point = point["measured"] / point["roofline"]
    rate = POINTS / sweep["measured"]
    ratio_cold = wall["measured"] / wall["roofline"]
    print(f"scenario: {args.scenario} ({args.rounds} rounds, {args.starts} starts; medians; "
          f"in-process {args.clock} time)")
    print(f"per point (Model.evaluate, value change): measured {point['measured']:.3f} ms, "
          f"roofline {point['roofline']:.3f} ms, ratio {ratio_point:.2f}× "
          f"({'meets' if ratio_point <= 1.5 else 'MISSES'} ≤ 1.5×)")
    print(f"sweep of {POINTS:,} points: measured {sweep['measured'] * 1e3:.2f} ms "
          f"({rate:,.0f} points/s; {'meets' if rate >= 1e6 else 'MISSES'} ≥ 1,000,000), "
          f"roofline {sweep['roofline'] * 1e3:.2f} ms ({POINTS / sweep['roofline']:,.0f} points/s), "
          f"ratio {sweep['measured'] / sweep['roofline']:.2f}×")
    print(f"cold infermodel run: measured {wall['measured'] * 1e3:.0f} ms wall "
          f"({cpu['measured'] * 1e3:.0f} ms CPU), roofline {wall['roofline'] * 1e3:.0f} ms wall "
          f"({cpu['roofline'] * 1e3:.0f} ms CPU), ratio {ratio_cold:.2f}× wall, "
          f"{cpu['measured'] / cpu['roofline']:.2f}× CPU "
          f"({'meets' if ratio_cold <= 1.5 else 'MISSES'} ≤ 1.5×)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
