"""A request's way through the server, per engine: estimated on one source of NVIDIA's
measured deployments, checked on the other.

No kernel table times what a request does outside the engine's iterations (API server,
tokenisation, the engine's queues, the first token's return through the streaming
response); under measured kernels ``ttft`` adds the scenario's
``efficiency.request_overhead``, and the silicon ledger's rows state their deployments'
time per engine (``infermodel.accuracy.silicon.REQUEST_PATH``). This script redoes that
estimate and its check from the installed ``silicon_sample.csv``:

* the aggregated first-token points of the silicon ledger, predicted with measured
  kernels in the analytic closed loop ``validate`` uses, at every candidate time per
  request from 0 to 400 ms (1 ms apart; one evaluation of each row's compiled scenario);
* the points split by source: the aiconfigurator gap-analysis runs (their own benchmark
  client) and the InferenceMAX runs (SemiAnalysis' client, other teams and dates); a
  gap-analysis point that repeats an InferenceMAX one (same model, card, engine, lengths
  and clients, or the same measured time) is left out of both;
* per engine, the time that minimises the median |error| on one source, and the median
  |error| it gives on the other (held out), both ways; the first way is what ships.

    python benchmarks/bench_request_path.py

Needs the ``[kernels]`` extra. About two minutes on two cores.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import defaultdict

import numpy as np

#: Candidate times per request (s).
GRID = np.round(np.arange(0.0, 0.4005, 0.001), 3)
ENGINES = ("vllm", "trtllm", "sglang")
FAR = 1e-3


def _engine(row) -> str:
    name = row.engine.split()[0].lower()
    return {"tensorrt-llm": "trtllm"}.get(name, name)


def _key(row) -> tuple:
    return (_engine(row), str(row.hf_config), row.hardware, row.isl, row.osl, row.concurrency)


def predictions(rows, host) -> dict[str, np.ndarray]:
    """Each row's first-token time (ms) at every candidate of :data:`GRID`."""
    from infermodel.accuracy import predictions as P

    structures: dict = {}
    efficiencies: dict = {}
    out = {}
    for row in rows:
        model = P.row_model(row, kernels="measured", host=host, structures=structures)
        if isinstance(model, str):
            continue
        name = "measured_request_overhead"
        if name not in model.inputs:
            raise SystemExit(f"{row.id}: the row's scenario states no efficiency.request_overhead")
        if row.family not in efficiencies:
            efficiencies[row.family] = P.kernels_efficiency(row.family, host=host)
        candidates = {n: np.full(GRID.size, v) for n, v in efficiencies[row.family].values}
        candidates[name] = GRID
        values = P.predict_arrays(model, row, candidates)
        if np.all(np.isfinite(values)) and np.all(values > 0):
            out[row.id] = values
    return out


def medians(rows, predicted) -> np.ndarray:
    """The median |error| at each candidate over ``rows``."""
    errors = np.array([np.abs(predicted[r.id] / r.value - 1.0) for r in rows if r.id in predicted])
    return np.median(errors, axis=0) if errors.size else np.full(GRID.size, np.nan)


def main() -> int:
    warnings.simplefilter("ignore")
    from infermodel.accuracy.silicon import REQUEST_PATH, read_silicon
    from infermodel.host import get_host

    start = time.perf_counter()
    host = get_host()
    rows = [r for r in read_silicon().rows
            if r.metric == "ttft_ms" and r.pools is None and not r.unexpressed]
    inferencemax = [r for r in rows if r.client == "inferencemax"]
    keys = {_key(r) for r in inferencemax}
    values = {round(r.value, 3) for r in inferencemax}
    gap = [r for r in rows if r.client != "inferencemax"
           and _key(r) not in keys and round(r.value, 3) not in values]
    predicted = predictions(gap + inferencemax, host)
    sources = {"gap-analysis": gap, "InferenceMAX": inferencemax}
    print(f"{len(predicted):,} aggregated first-token points predicted "
          f"({time.perf_counter() - start:.0f} s); gap-analysis {len(gap):,} "
          f"(repeats of InferenceMAX points left out), InferenceMAX {len(inferencemax):,}\n")
    shipped_ok = True
    for fit_on, check_on in (("gap-analysis", "InferenceMAX"), ("InferenceMAX", "gap-analysis")):
        print(f"estimated on {fit_on}, checked on {check_on} (held out):")
        print(f"  {'engine':<8} {'points':>7} {'time':>7} {'fit: 0 →':>10} {'':>6}"
              f" {'held out':>10} {'0 →':>6} {'':>6}")
        chosen = {}
        for engine in ENGINES:
            train = [r for r in sources[fit_on] if _engine(r) == engine]
            test = [r for r in sources[check_on] if _engine(r) == engine]
            fit, held = medians(train, predicted), medians(test, predicted)
            best = int(np.nanargmin(fit))
            chosen[engine] = GRID[best]
            print(f"  {engine:<8} {len(train):>7,} {GRID[best] * 1e3:>5.0f} ms {fit[0]:>9.1%} →"
                  f" {fit[best]:>5.1%} {len(test):>9,} {held[0]:>6.1%} → {held[best]:>5.1%}")
        by_system: dict[str, list] = defaultdict(list)
        before, after = [], []
        for r in sources[check_on]:
            if r.id in predicted:
                index = int(np.argmin(np.abs(GRID - chosen[_engine(r)])))
                error = abs(predicted[r.id][index] / r.value - 1.0)
                by_system[r.hardware].append(error)
                after.append(error)
                before.append(abs(predicted[r.id][0] / r.value - 1.0))
        print(f"  {check_on} overall: {np.median(before):.1%} → {np.median(after):.1%}; by card: "
              + ", ".join(f"{k} {np.median(v):.1%} ({len(v):,})"
                       for k, v in sorted(by_system.items())))
        if fit_on == "gap-analysis":
            for engine, value in chosen.items():
                if abs(REQUEST_PATH[engine] - value) > FAR:
                    shipped_ok = False
                    print(f"  note: {engine}'s REQUEST_PATH is "
                          f"{REQUEST_PATH[engine] * 1e3:.0f} ms, this estimate {value * 1e3:.0f} ms")
        print()
    print("the silicon ledger's values (silicon.REQUEST_PATH): "
          + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in REQUEST_PATH.items())
          + (" — the estimate above" if shipped_ok else " — differ from the estimate above"))
    return 0 if shipped_ok else 1


if __name__ == "__main__":
    sys.exit(main())
