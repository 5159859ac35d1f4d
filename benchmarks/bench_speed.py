"""Interactive speed, every figure a ratio measured side by side in one run.

* **Per-point evaluation.** A value change (``workload.batch``) on a kept structure
  (``infermodel.Model.evaluate``, and ``infermodel.evaluate(path, overrides)`` in a loop)
  against the first evaluation of a structure (read, build, compile, evaluate), against
  the path that rebuilds every time (``evaluation.evaluate``: what ``evaluate``
  did before structures were kept) and against one point of a 10,000-point sweep.
* **Sweep overhead.** ``infermodel.sweep`` of the case study over 10, 1,000 and 10,000
  batch values (every quantity): time per call, the fixed cost (intercept of a
  least-squares line through the three sizes, and the 10-point call itself), points
  per second at 10,000; the same calls planned afresh every time (``plan_sweep(...).run()``:
  what a call paid before plans were kept) and without kept structures at all.
* **Start-up.** ``infermodel run SCENARIO`` against ``python -c "import sympy, numpy"``,
  alternately in fresh processes: medians of wall time and of CPU time.
* **Beside aiconfigurator** (when the ``aiconfigurator`` package is installed:
  ``pip install "aiconfigurator==0.12.*"``, a benchmark dependency only): the same
  deployment (``scenarios/engine-trtllm-llama-3.1-8b.toml``, Llama 3.1 8B on one H100 SXM
  under TensorRT-LLM, 1,024-token prompts, 256-token answers) with the batch changed at
  every point, interleaved in the same rounds: infermodel's ``Model.evaluate`` and
  ``infermodel.evaluate(path, overrides)`` against aiconfigurator's per-point estimate on a
  session built once (``InferenceSession.run_static``, backed by its compiled engine) and
  its public one-call path (``cli.api.cli_estimate``, static mode); and one point of an
  infermodel sweep against each.

Every measurement is repeated in interleaved rounds and the medians are quoted (with
the best round of the in-process ones): on a busy machine absolute times drift, ratios
measured side by side much less. As :mod:`timeit` does, in-process timings run with the
garbage collector paused (collected before each), so that an occasional full collection
of the process's sympy objects does not land in one path's figure.

Targets: ≤ 0.3 ms per point for a value change, and no slower than aiconfigurator's
per-point estimate measured beside it; ≤ 2 ms fixed cost per sweep call and ≥ 2,000,000
points/s at 10,000 points; start-up ≤ 1.15× the import.

    python benchmarks/bench_speed.py [--rounds 9] [--starts 11] [--scenario ...]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (10, 1_000, 10_000)
# Fresh processes run as a user's do: with bytecode caches (see bench_cli.py).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _timed(function, repeat: int = 1) -> float:
    # As timeit does: no garbage collection while timing (a full collection walks every
    # sympy object of the process, ~10 ms, whenever enough objects have piled up).
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(repeat):
            function()
        return (time.perf_counter() - start) / repeat
    finally:
        gc.enable()


def per_point(path: str, rounds: int) -> dict[str, float]:
    import infermodel
    from infermodel.engine import evaluation
    from infermodel.engine.evaluation import evaluate_afresh as evaluate_fresh
    from infermodel.engine.kept import clear_models
    from infermodel.sweeping import Model

    model = Model(path)
    model.evaluate({"workload.batch": 2})
    infermodel.evaluate(path, {"workload.batch": 2})
    batches = iter(range(1, 10**9))
    samples: dict[str, list[float]] = {"model": [], "evaluate": [], "fresh": [], "first": [],
                                       "sweep": []}
    for _ in range(rounds):
        samples["model"].append(_timed(
            lambda: model.evaluate({"workload.batch": next(batches) % 512 + 1}), 200))
        samples["evaluate"].append(_timed(
            lambda: infermodel.evaluate(path, {"workload.batch": next(batches) % 512 + 1}), 200))
        samples["fresh"].append(_timed(
            lambda: evaluate_fresh(path, {"workload.batch": next(batches) % 512 + 1}), 5))

        def first():
            clear_models()
            evaluation._COMPILED.clear()
            infermodel.evaluate(path, {"workload.batch": next(batches) % 512 + 1})

        samples["first"].append(_timed(first))
        # first() forgot the kept models: plan the sweep once, untimed.
        infermodel.sweep(path, {"workload.batch": "1..10000"}, use_table=False)
        samples["sweep"].append(_timed(
            lambda: infermodel.sweep(path, {"workload.batch": "1..10000"}, use_table=False))
            / 10_000)
    # The numbers agree with a fresh evaluation to the bit.
    for batch in (1, 7, 18, 300):
        got = model.evaluate({"workload.batch": batch}).values
        want = evaluate_fresh(path, {"workload.batch": batch}).values
        assert {k: repr(v) for k, v in got.items()} == {k: repr(v) for k, v in want.items()}
    out = {k: _median_ms(v) for k, v in samples.items()}
    out.update({f"{k}_best": min(v) * 1e3 for k, v in samples.items()})
    return out


AICONFIGURATOR_SCENARIO = "scenarios/engine-trtllm-llama-3.1-8b.toml"


def _aiconfigurator_points():
    """(run_static, estimate) per-point callables of aiconfigurator on the scenario's
    deployment, each taking the batch size; None when aiconfigurator is not installed.
    """
    try:
        import logging
        import warnings

        from aiconfigurator.cli.api import cli_estimate
        from aiconfigurator.sdk.backends.factory import get_backend
        from aiconfigurator.sdk.config import RuntimeConfig
        from aiconfigurator.sdk.config_builders import build_model_config
        from aiconfigurator.sdk.inference_session import InferenceSession
        from aiconfigurator.sdk.models import get_model
        from aiconfigurator_core.sdk.perf_database import get_database, get_latest_database_version
    except ImportError:
        return None
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    system, backend, model_path = "h100_sxm", "trtllm", "meta-llama/Meta-Llama-3.1-8B"
    version = get_latest_database_version(system, backend)
    config = build_model_config(1, 1, 1, 1, 1, gemm_quant_mode="bfloat16",
                                kvcache_quant_mode="bfloat16", fmha_quant_mode="bfloat16")
    session = InferenceSession(get_model(model_path, config, backend),
                               get_database(system, backend, version), get_backend(backend))

    def run_static(batch: int) -> None:
        session.run_static(RuntimeConfig(batch_size=batch, isl=1024, osl=256), mode="static")

    def estimate(batch: int) -> None:
        cli_estimate(model_path, system, mode="static", backend_name=backend, batch_size=batch,
                     isl=1024, osl=256, gemm_quant_mode="bfloat16", kvcache_quant_mode="bfloat16",
                     fmha_quant_mode="bfloat16")

    return run_static, estimate


def beside_aiconfigurator(rounds: int) -> dict[str, float] | None:
    """Per-point times of infermodel and aiconfigurator on one deployment, interleaved."""
    import infermodel
    from infermodel.sweeping import Model

    points = _aiconfigurator_points()
    if points is None:
        return None
    run_static, estimate = points
    path = AICONFIGURATOR_SCENARIO
    model = Model(path)
    batches = iter(range(1, 10**9))
    for _ in range(5):  # warm: kept structures, compiled functions, loaded tables
        model.evaluate({"workload.batch": next(batches) % 256 + 1})
        infermodel.evaluate(path, {"workload.batch": next(batches) % 256 + 1})
        run_static(next(batches) % 256 + 1)
    estimate(8)
    infermodel.sweep(path, {"workload.batch": "1..10000"}, use_table=False)
    samples: dict[str, list[float]] = {"model": [], "evaluate": [], "run_static": [],
                                       "estimate": [], "sweep": []}
    for _ in range(rounds):
        samples["model"].append(_timed(
            lambda: model.evaluate({"workload.batch": next(batches) % 256 + 1}), 200))
        samples["evaluate"].append(_timed(
            lambda: infermodel.evaluate(path, {"workload.batch": next(batches) % 256 + 1}), 200))
        samples["run_static"].append(_timed(lambda: run_static(next(batches) % 256 + 1), 50))
        samples["estimate"].append(_timed(lambda: estimate(next(batches) % 256 + 1), 2))
        samples["sweep"].append(_timed(
            lambda: infermodel.sweep(path, {"workload.batch": "1..10000"}, use_table=False))
            / 10_000)
    return {k: _median_ms(v) for k, v in samples.items()}


def report_aiconfigurator(a: dict[str, float] | None, rounds: int) -> None:
    if a is None:
        print("beside aiconfigurator: not installed (pip install \"aiconfigurator==0.12.*\")")
        return
    print(f"beside aiconfigurator ({AICONFIGURATOR_SCENARIO}; batch changed; medians of "
          f"{rounds} interleaved rounds)")
    print(f"  aiconfigurator run_static (session kept)   : {a['run_static']:8.3f} ms")
    print(f"  aiconfigurator cli_estimate (public path)  : {a['estimate']:8.3f} ms")
    print(f"  infermodel Model.evaluate                  : {a['model']:8.3f} ms  -> "
          f"{a['run_static'] / a['model']:.1f}x faster than run_static "
          f"({_verdict(a['model'] <= a['run_static'])} <= run_static)")
    print(f"  infermodel evaluate(path, overrides)       : {a['evaluate']:8.3f} ms  -> "
          f"{a['run_static'] / a['evaluate']:.1f}x faster than run_static "
          f"({_verdict(a['evaluate'] <= a['run_static'])} <= run_static)")
    print(f"  infermodel sweep, one of 10,000 points     : {a['sweep'] * 1e3:8.3f} us  -> "
          f"{a['run_static'] / a['sweep']:,.0f}x run_static, "
          f"{a['estimate'] / a['sweep']:,.0f}x cli_estimate")


def sweep_overhead(path: str, rounds: int) -> dict[str, object]:
    import numpy as np

    import infermodel
    from infermodel.engine.kept import clear_models

    for n in SIZES:
        infermodel.sweep(path, {"workload.batch": f"1..{n}"}, use_table=False)
    from infermodel.sweeping import plan_sweep

    kept: dict[int, list[float]] = {n: [] for n in SIZES}
    afresh: dict[int, list[float]] = {n: [] for n in SIZES}
    cold: dict[int, list[float]] = {n: [] for n in SIZES}
    for _ in range(rounds):
        for n in SIZES:
            over = {"workload.batch": f"1..{n}"}
            # The previous round's clear_models() forgot the kept plans: plan once, untimed.
            infermodel.sweep(path, over, use_table=False)
            kept[n].append(_timed(lambda over=over: infermodel.sweep(path, over, use_table=False),
                                  5))
            afresh[n].append(_timed(
                lambda over=over: plan_sweep(path, over, use_table=False).run(), 5))

            def without_kept_structures(over=over):
                clear_models()
                infermodel.sweep(path, over, use_table=False)

            cold[n].append(_timed(without_kept_structures))
    times = {n: _median_ms(kept[n]) for n in SIZES}
    best = {n: min(kept[n]) * 1e3 for n in SIZES}
    before = {n: _median_ms(cold[n]) for n in SIZES}
    planned = {n: _median_ms(afresh[n]) for n in SIZES}
    slope, intercept = np.polyfit(np.array(SIZES, float), np.array([times[n] for n in SIZES]), 1)
    _, intercept0 = np.polyfit(np.array(SIZES, float), np.array([before[n] for n in SIZES]),
                                    1)
    _, intercept1 = np.polyfit(np.array(SIZES, float), np.array([planned[n] for n in SIZES]),
                               1)
    return {"times": times, "best": best, "before": before, "planned": planned,
            "intercept": float(intercept), "intercept_before": float(intercept0),
            "intercept_planned": float(intercept1), "per_point_us": float(slope) * 1e3,
            "rate": 10_000 / (times[10_000] / 1e3), "rate_best": 10_000 / (best[10_000] / 1e3),
            "rate_before": 10_000 / (before[10_000] / 1e3),
            "rate_planned": 10_000 / (planned[10_000] / 1e3)}


def start_up(scenario: str, starts: int) -> dict[str, float]:
    baseline = [sys.executable, "-c", "import sympy, numpy"]
    script = Path(sys.executable).with_name("infermodel")
    run = ([str(script)] if script.exists() else [sys.executable, "-m", "infermodel.cli"]) + [
        "run", scenario]

    def measure(command: list[str]) -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=ENV)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu

    measure(baseline), measure(run), measure(run)  # file-system and bytecode caches
    walls: dict[str, list[float]] = {"base": [], "run": []}
    cpus: dict[str, list[float]] = {"base": [], "run": []}
    for _ in range(starts):
        for name, command in (("base", baseline), ("run", run)):
            wall, cpu = measure(command)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {"base_wall": _median_ms(walls["base"]), "run_wall": _median_ms(walls["run"]),
            "base_cpu": _median_ms(cpus["base"]), "run_cpu": _median_ms(cpus["run"])}


def _verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved in-process rounds")
    parser.add_argument("--starts", type=int, default=11, help="fresh processes of each kind")
    parser.add_argument("--scenario", default="scenarios/case-study-24gb.toml")
    parser.add_argument("--skip-start-up", action="store_true")
    parser.add_argument("--start-up-only", action="store_true")
    args = parser.parse_args()
    os.chdir(ROOT)
    path = args.scenario

    if args.start_up_only:
        args.rounds = 0
    p = per_point(path, args.rounds) if args.rounds else None
    if p is not None:
        report_in_process(p, sweep_overhead(path, args.rounds), path, args.rounds)
        report_aiconfigurator(beside_aiconfigurator(args.rounds), args.rounds)
    if not args.skip_start_up:
        u = start_up(path, args.starts)
        wall, cpu = u["run_wall"] / u["base_wall"], u["run_cpu"] / u["base_cpu"]
        print(f"start-up (medians of {args.starts} fresh processes each, alternating)")
        print(f"  import sympy, numpy     : wall {u['base_wall']:7.1f} ms, cpu {u['base_cpu']:7.1f} ms")
        print(f"  infermodel run          : wall {u['run_wall']:7.1f} ms, cpu {u['run_cpu']:7.1f} ms")
        print(f"  ratio                   : wall {wall:.2f}x, cpu {cpu:.2f}x "
              f"({_verdict(wall <= 1.15)} <= 1.15x on wall time)")
    return 0


def report_in_process(p: dict, s: dict, path: str, rounds: int) -> None:
    print(f"per-point evaluation ({path}, workload.batch changed; medians of {rounds} rounds)")
    print(f"  Model.evaluate          : {p['model']:8.3f} ms  "
          f"({_verdict(p['model'] <= 0.3)} <= 0.3 ms; best round {p['model_best']:.3f} ms)")
    print(f"  evaluate(path, ...)     : {p['evaluate']:8.3f} ms")
    print(f"  first evaluation        : {p['first']:8.3f} ms  -> {p['first'] / p['model']:,.0f}x "
          "a value change")
    print(f"  rebuilt every time      : {p['fresh']:8.3f} ms  -> {p['fresh'] / p['model']:,.0f}x "
          "a value change (evaluate before structures were kept)")
    print(f"  one point of a sweep    : {p['sweep'] * 1e3:8.3f} us  -> a value change costs "
          f"{p['model'] / p['sweep']:,.0f} sweep points")

    print("sweep calls (every quantity; medians): kept plan | planned afresh | without kept "
          "structures")
    for n in SIZES:
        print(f"  {n:>6,} points         : {s['times'][n]:8.3f} ms (best {s['best'][n]:7.3f})"
              f" | {s['planned'][n]:8.3f} ms ({s['planned'][n] / s['times'][n]:.1f}x)"
              f" | {s['before'][n]:8.3f} ms ({s['before'][n] / s['times'][n]:.0f}x)")
    print(f"  fixed cost per call     : {s['intercept']:8.3f} ms (line through the three sizes; "
          f"{_verdict(max(s['intercept'], 0) <= 2)} <= 2 ms), {s['times'][10]:.3f} ms at 10 points;"
          f" planned afresh {s['intercept_planned']:.3f} ms;"
          f" without kept structures {s['intercept_before']:.3f} ms")
    print(f"  cost per point          : {s['per_point_us']:8.3f} us")
    print(f"  at 10,000 points        : {s['rate']:,.0f} points/s "
          f"({_verdict(s['rate'] >= 2e6)} >= 2,000,000, margin {s['rate'] / 2e6:.1f}x; best round "
          f"{s['rate_best']:,.0f}); planned afresh {s['rate_planned']:,.0f}; "
          f"without kept structures {s['rate_before']:,.0f}")
    print(f"  at 10 points            : {10 / (s['times'][10] / 1e3):,.0f} points/s; planned afresh "
          f"{10 / (s['planned'][10] / 1e3):,.0f}")


if __name__ == "__main__":
    sys.exit(main())
