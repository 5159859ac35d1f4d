"""Cold start of ``infermodel run`` against ``python -c "import sympy, numpy"``, and what an
on-disk cache of compiled structures would save ``run --set`` in a shell loop.

Both parts run their commands alternately in one session, many times, in fresh
processes; the ratios of medians are the claims. Absolute times drift on a shared
machine; ratios measured side by side much less.

**Start-up** (default): ``infermodel run SCENARIO`` against the import (target ≤ 1.15×;
``bench_speed.py`` holds the 1.15× target of issue 17 with CPU times too). Measured with
``--repeat 11`` on the case study, three runs in a row on a shared two-core machine under
load (load average 4.6–5.4): 1.19×, 1.12×, 1.08× (median 1.12×); side by side with the
code before the start-up work, 1.24–1.26× before against 1.05–1.10× after (docs page
"Speed", section "Start-up").

**``--set`` in a shell loop** (``--set-loop``): every start is a fresh ``infermodel run
SCENARIO --set workload.batch=K`` with a new K, as a script calling the command line in a
loop runs it. Measured side by side:

* ``import sympy, numpy`` and ``import numpy`` alone (what skipping sympy could at most
  save: every plugin imports sympy to write its formulas, and a run must load the plugins
  to resolve, validate and check the scenario, so no cache can skip it);
* the command itself (a cold cache: it builds the structure and compiles it);
* a **warm-cache prototype** doing what a cache of compiled structures would leave to
  do: load the scenario with the ``--set`` (plugins, resolution, validation), read the
  pickled graph and the generated numpy source of that structure from a file, compile
  the source, evaluate, and print the same summary (checked to be the command's output,
  byte for byte). It verifies nothing and trusts the file, so it is a lower bound on a
  real cache's time and its gain an upper bound.

    python benchmarks/bench_cli.py [--repeat 15] [--scenario scenarios/case-study-24gb.toml]
    python benchmarks/bench_cli.py --set-loop [--repeat 15]
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# Measure as a user's machine runs the command: with bytecode caches. (Some shells set
# PYTHONDONTWRITEBYTECODE, which makes every start recompile the package from source
# while sympy and numpy, compiled at install time, do not.)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _time(command: list[str]) -> float:
    return _times(command)[0]


def _times(command: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of a fresh process running ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _run_command(scenario: str) -> list[str]:
    script = Path(sys.executable).with_name("infermodel")
    return ([str(script)] if script.exists() else [sys.executable, "-m", "infermodel.cli"]) + [
        "run", scenario]


def start_up(scenario: str, repeat: int) -> None:
    baseline = [sys.executable, "-c", "import sympy, numpy"]
    run = _run_command(scenario)
    _time(baseline), _time(run), _time(run)  # warm the file-system and bytecode caches
    base_times, run_times = [], []
    for _ in range(repeat):
        base_times.append(_time(baseline))
        run_times.append(_time(run))
    base, cli = statistics.median(base_times), statistics.median(run_times)
    print(f"import sympy, numpy : median {base * 1000:7.1f} ms over {repeat} runs")
    print(f"infermodel run      : median {cli * 1000:7.1f} ms over {repeat} runs")
    print(f"ratio               : {cli / base:.2f}x (target <= 1.15x)")


# -- the warm-cache prototype -------------------------------------------------------


def _proxy(mapping: dict) -> types.MappingProxyType:
    return types.MappingProxyType(mapping)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if type(obj) is types.MappingProxyType:
            return (_proxy, (dict(obj),))
        return NotImplemented


def write_cache(scenario: str, cache: str) -> None:
    """What a cache entry would hold for the scenario's structure: the graph (pickled)
    and the generated source of its numpy function.
    """
    import inspect

    from infermodel.engine.evaluation import compile_graph
    from infermodel.engine.graph import build_graph
    from infermodel.scenario import load_scenario

    graph = build_graph(load_scenario(scenario))
    compiled = compile_graph(graph)
    buffer = io.BytesIO()
    _Pickler(buffer).dump((graph, compiled.inputs, compiled.outputs,
                           inspect.getsource(compiled.function)))
    Path(cache).write_bytes(buffer.getvalue())


def warm(scenario: str, batch: str, cache: str) -> None:
    """``infermodel run SCENARIO --set workload.batch=BATCH`` as a warm cache would run it."""
    import gc

    gc.set_threshold(100_000, 20, 20)  # as the console script does: no collection until
    gc.disable()  # the plugins are loaded, then the start-up's objects frozen
    import attrs
    import numpy as np

    from infermodel.engine.evaluation import Result, _numpy_namespace, _plain
    from infermodel.host import get_host
    from infermodel.printing import result_summary
    from infermodel.quantity import INPUT, Change
    from infermodel.scenario import load_scenario

    assert get_host().registries  # the plugins loaded, as the command has them before its work
    gc.freeze()
    gc.enable()
    loaded = load_scenario(scenario, [f"workload.batch={batch}"])
    with open(cache, "rb") as handle:
        graph, inputs, outputs, source = pickle.load(handle)
    import builtins
    from functools import reduce

    # What lambdify's namespace adds to the numpy names.
    namespace = {**_numpy_namespace(), "reduce": reduce, "builtins": builtins, "range": range}
    exec(compile(source, cache, "exec"), namespace)  # the prototype trusts its own file
    function = namespace["_lambdifygenerated"]
    quantities = dict(graph.quantities)
    q = quantities["batch"]
    number = float(loaded.value("workload.batch"))
    quantities["batch"] = attrs.evolve(q, value=number, history=(
        Change(INPUT, q.history[0].plugin, number, "from workload.batch",
               field="workload.batch"),))
    graph = attrs.evolve(graph, quantities=types.MappingProxyType(quantities))
    arguments = [np.asarray(quantities[n].value, dtype=float) for n in inputs]
    with np.errstate(all="ignore"):
        raw = function(*arguments)
    result = Result(loaded, graph, {n: _plain(v) for n, v in zip(outputs, raw)})
    sys.stdout.write(result_summary(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


def set_loop(scenario: str, repeat: int) -> None:
    run = _run_command(scenario)
    with tempfile.TemporaryDirectory() as folder:
        cache = str(Path(folder) / "structure.pickle")
        subprocess.run([sys.executable, __file__, "--write-cache", scenario, cache], check=True,
                       cwd=ROOT, env=ENV)
        warm_command = [sys.executable, __file__, "--warm", scenario, "{batch}", cache]

        def output(command):
            return subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT,
                                  env=ENV).stdout

        for batch in (3, 17):  # the prototype prints what the command prints
            cli = output([*run, "--set", f"workload.batch={batch}"])
            proto = output([a.format(batch=batch) for a in warm_command])
            assert cli == proto, (cli, proto)
        commands = {
            "import sympy, numpy": lambda b: [sys.executable, "-c", "import sympy, numpy"],
            "import numpy": lambda b: [sys.executable, "-c", "import numpy"],
            "run --set (cold cache)": lambda b: [*run, "--set", f"workload.batch={b}"],
            "run --set (warm cache)": lambda b: [a.format(batch=b) for a in warm_command],
        }
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for k in range(repeat):
            for name, command in commands.items():
                wall, cpu = _times(command(k + 1))
                walls[name].append(wall)
                cpus[name].append(cpu)
    print(f"--set in a shell loop ({scenario}; medians of {repeat} fresh processes each, "
          "alternating)")
    for kind, samples in (("wall", walls), ("cpu", cpus)):
        median = {name: statistics.median(t) * 1e3 for name, t in samples.items()}
        base, cold, hot = (median["import sympy, numpy"], median["run --set (cold cache)"],
                           median["run --set (warm cache)"])
        for name, ms in median.items():
            print(f"  {name:<24}: {kind} {ms:7.1f} ms  ({ms / base:.2f}x the import)")
        print(f"  {kind}: a warm cache saves at most {cold - hot:.1f} ms of {cold:.1f} ms "
              f"({(cold - hot) / cold:.1%}); importing sympy and numpy is {base / cold:.0%} "
              f"of the run, numpy alone {median['import numpy'] / cold:.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--scenario", default="scenarios/case-study-24gb.toml")
    parser.add_argument("--set-loop", action="store_true",
                        help="measure run --set cold against a warm-cache prototype")
    parser.add_argument("--write-cache", nargs=2, metavar=("SCENARIO", "FILE"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--warm", nargs=3, metavar=("SCENARIO", "BATCH", "FILE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.write_cache:
        write_cache(*args.write_cache)
    elif args.warm:
        warm(*args.warm)
    elif args.set_loop:
        set_loop(args.scenario, args.repeat)
    else:
        start_up(args.scenario, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
