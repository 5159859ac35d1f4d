"""A request's way through the server, per engine: estimated on one source of NVIDIA's
measured deployments, checked on the other.

No kernel table times what a request does outside the engine's iterations (API server,
tokenising and processing the prompt, the engine's queues, the first token's return
through the streaming response); under measured kernels ``ttft`` adds the scenario's
``request_overhead``: ``efficiency.request_overhead``, plus
``efficiency.request_overhead_per_token`` for each prompt token where a scenario states
one. The silicon ledger's rows state their deployments' time per request by engine
(``infermodel.accuracy.silicon.REQUEST_PATH``) and no time per prompt token. This script
redoes that estimate and its check from the
installed ``silicon_sample.csv``:

* the aggregated first-token points of the silicon ledger, predicted with measured
  kernels in the analytic closed loop ``validate`` uses, at every candidate time per
  request from 0 to 1,000 ms (1 ms apart; one evaluation of each row's compiled scenario);
  a pair (time per request, time per prompt token) is read at the candidate nearest the
  time it gives the row's mean prompt;
* the points split by source: the aiconfigurator gap-analysis runs (their own benchmark
  client) and the InferenceMAX runs (SemiAnalysis' client, other teams and dates); a
  gap-analysis point that repeats an InferenceMAX one (same model, card, engine, lengths
  and clients, or the same measured time) is left out of both;
* per engine, the time per request that minimises the median |error| on one source
  (0–400 ms, 1 ms apart), and the median |error| it gives on the other (held out), both
  ways; the first way is what ships;
* beside it, the pair (time per request, per prompt token 0–40 µs, 0.5 µs apart) that
  minimises it, and the check of that form: the median signed error at InferenceMAX's
  8,192-token prompts, at four clients or fewer and above. A time that grows with the prompt but not
  with the load turns those errors apart where the missing time grows with both (the
  prefill, queued), which is why the rows state none.

    python benchmarks/bench_request_path.py

Needs the ``[kernels]`` extra. About two minutes on two cores.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import defaultdict

import numpy as np

#: Candidate request times a row is predicted at (s): up to the largest pair searched at
#: the file's longest prompt (15,000 tokens: 400 ms + 40 µs × 15,000).
GRID = np.round(np.arange(0.0, 1.0005, 0.001), 3)
#: The pairs searched: time per request (s) and per prompt token (s).
FIXED = np.round(np.arange(0.0, 0.4005, 0.001), 3)
PER_TOKEN = np.round(np.arange(0.0, 40.25e-6, 0.5e-6), 7)
ENGINES = ("vllm", "trtllm", "sglang")
FAR = 1e-3


def _engine(row) -> str:
    name = row.engine.split()[0].lower()
    return {"tensorrt-llm": "trtllm"}.get(name, name)


def _key(row) -> tuple:
    return (_engine(row), str(row.hf_config), row.hardware, row.isl, row.osl, row.concurrency)


def predictions(rows, host) -> dict[str, tuple[np.ndarray, float]]:
    """Each row's first-token time (ms) at every candidate request time of :data:`GRID`
    (no time per prompt token), and the prompt length it is evaluated at.
    """
    from infermodel.accuracy import predictions as P
    from infermodel.accuracy.row_simulation import CLIENTS

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
        if "measured_request_overhead_per_token" in model.inputs:
            candidates["measured_request_overhead_per_token"] = np.zeros(GRID.size)
        values = P.predict_arrays(model, row, candidates)
        client = CLIENTS[row.client]
        drawn = client.range_ratio < 1 and model.lengths_are_values
        prompt = client.mean_length(row.isl) if drawn else float(row.isl)
        if np.all(np.isfinite(values)) and np.all(values > 0):
            out[row.id] = (values, prompt)
    return out


def errors(rows, predicted, per_token: float) -> np.ndarray:
    """|error| of each of ``rows`` (rows × :data:`FIXED`) at ``per_token``."""
    kept = [r for r in rows if r.id in predicted]
    if not kept:
        return np.full((0, FIXED.size), np.nan)
    values = np.array([predicted[r.id][0] for r in kept])
    prompts = np.array([predicted[r.id][1] for r in kept])
    index = np.rint((FIXED[None, :] + per_token * prompts[:, None]) / 0.001).astype(int)
    index = np.clip(index, 0, GRID.size - 1)
    measured = np.array([r.value for r in kept])
    return np.abs(np.take_along_axis(values, index, axis=1) / measured[:, None] - 1.0)


def best(rows, predicted, per_tokens=PER_TOKEN) -> tuple[float, float, float]:
    """The (time per request, per prompt token, median |error|) that fits ``rows`` best."""
    found = (0.0, 0.0, np.inf)
    for per_token in per_tokens:
        medians = np.median(errors(rows, predicted, per_token), axis=0)
        i = int(np.nanargmin(medians))
        if medians[i] < found[2]:
            found = (float(FIXED[i]), float(per_token), float(medians[i]))
    return found


def held(rows, predicted, fixed: float, per_token: float) -> float:
    """The median |error| of ``rows`` at one pair."""
    error = errors(rows, predicted, per_token)[:, int(np.rint(fixed / 0.001))]
    return float(np.median(error)) if error.size else float("nan")


def _error(row, predicted, pairs) -> float:
    """The row's signed error at its engine's pair of ``pairs`` (its prediction at the
    candidate nearest the request time the pair gives its mean prompt).
    """
    fixed, per_token = pairs[_engine(row)]
    trace, prompt = predicted[row.id]
    index = min(int(np.rint((fixed + per_token * prompt) / 0.001)), GRID.size - 1)
    return float(trace[index] / row.value - 1.0)


def _signed(rows, predicted, pairs) -> str:
    """Median signed error of ``rows`` at each engine's pair of ``pairs``."""
    errors = [_error(r, predicted, pairs) for r in rows if r.id in predicted]
    return f"{np.median(errors):+.1%} ({len(errors):,})" if errors else "—"


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
        print(f"  {'engine':<8} {'points':>7} {'per request':>12} {'fit':>6} {'points':>7}"
              f" {'held out: none →':>16} {'':>6}   {'with a time per prompt token':>30}"
              f" {'fit':>6} {'held out':>9}")
        alone, pairs = {}, {}
        for engine in ENGINES:
            train = [r for r in sources[fit_on] if _engine(r) == engine]
            test = [r for r in sources[check_on] if _engine(r) == engine]
            fixed, _, fit = best(train, predicted, per_tokens=(0.0,))
            pair = best(train, predicted)
            alone[engine], pairs[engine] = (fixed, 0.0), pair[:2]
            counted = (sum(r.id in predicted for r in train), sum(r.id in predicted for r in test))
            print(f"  {engine:<8} {counted[0]:>7,} {fixed * 1e3:>9.0f} ms {fit:>6.1%} {counted[1]:>7,}"
                  f" {held(test, predicted, 0.0, 0.0):>14.1%} → {held(test, predicted, fixed, 0.0):>5.1%}"
                  f"   {pair[0] * 1e3:>14.0f} ms + "
                  f"{pair[1] * 1e6:>5.1f} µs/token {pair[2]:>6.1%}"
                  f" {held(test, predicted, *pair[:2]):>9.1%}")
        for name, chosen in (("per request", alone), ("with a time per prompt token", pairs)):
            by_system: dict[str, list] = defaultdict(list)
            before, after = [], []
            for r in sources[check_on]:
                if r.id in predicted:
                    error = abs(_error(r, predicted, chosen))
                    by_system[r.hardware].append(error)
                    after.append(error)
                    before.append(abs(predicted[r.id][0][0] / r.value - 1.0))
            print(f"  {check_on} overall, {name}: {np.median(before):.1%} → {np.median(after):.1%};"
                  " by card: " + ", ".join(f"{k} {np.median(v):.1%} ({len(v):,})"
                                           for k, v in sorted(by_system.items())))
        # The form's own check on InferenceMAX's 8,192-token prompts (the gap-analysis
        # shapes are too scattered for it): a time per request does not grow with the
        # load, so its signed error there should not turn with the clients.
        longest = 8192
        for engine in ENGINES if check_on == "InferenceMAX" else ():
            long = [r for r in sources[check_on] if _engine(r) == engine and r.isl == longest]
            few = [r for r in long if r.concurrency <= 4]
            more = [r for r in long if r.concurrency > 4]
            print(f"  {engine:<8} {longest:,}-token prompts, median signed error at ≤ 4 clients /"
                  f" more: per request {_signed(few, predicted, alone)} /"
                  f" {_signed(more, predicted, alone)}; with a time per prompt token"
                  f" {_signed(few, predicted, pairs)} / {_signed(more, predicted, pairs)}")
        if fit_on == "gap-analysis":
            for engine, (fixed, _) in alone.items():
                if abs(REQUEST_PATH[engine] - fixed) > FAR:
                    shipped_ok = False
                    print(f"  note: {engine}'s REQUEST_PATH is {REQUEST_PATH[engine] * 1e3:.0f} ms,"
                          f" this estimate {fixed * 1e3:.0f} ms")
        print()
    print("the silicon ledger's values (silicon.REQUEST_PATH, no time per prompt token): "
          + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in REQUEST_PATH.items())
          + (" — the estimate above" if shipped_ok else " — differ from the estimate above"))
    return 0 if shipped_ok else 1


if __name__ == "__main__":
    sys.exit(main())
