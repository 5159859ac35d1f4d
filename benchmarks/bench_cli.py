"""Cold start of ``infermodel run`` against ``python -c "import sympy, numpy"``.

Both commands run alternately in one session, many times, in fresh processes; the
ratio of their medians is the claim (target ≤ 1.5×). Absolute times drift on a shared
machine; the ratio measured side by side does not.

    python benchmarks/bench_cli.py [--repeat 15] [--scenario scenarios/case-study-24gb.toml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# Measure as a user's machine runs the command: with bytecode caches. (Some shells set
# PYTHONDONTWRITEBYTECODE, which makes every start recompile the package from source
# while sympy and numpy, compiled at install time, do not.)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=ENV)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--scenario", default="scenarios/case-study-24gb.toml")
    args = parser.parse_args()
    baseline = [sys.executable, "-c", "import sympy, numpy"]
    script = Path(sys.executable).with_name("infermodel")
    run = ([str(script)] if script.exists() else [sys.executable, "-m", "infermodel.cli"]) + [
        "run", args.scenario]
    _time(baseline), _time(run), _time(run)  # warm the file-system and bytecode caches
    base_times, run_times = [], []
    for _ in range(args.repeat):
        base_times.append(_time(baseline))
        run_times.append(_time(run))
    base, cli = statistics.median(base_times), statistics.median(run_times)
    print(f"import sympy, numpy : median {base * 1000:7.1f} ms over {args.repeat} runs")
    print(f"infermodel run      : median {cli * 1000:7.1f} ms over {args.repeat} runs")
    print(f"ratio               : {cli / base:.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
