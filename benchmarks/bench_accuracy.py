"""Accuracy on NVIDIA's measured deployments, side by side with the tables' own authors.

A fixed stratified sample of the silicon ledger (``infermodel validate --ledger silicon``:
``aiconfigurator-core``'s ``silicon_sample.csv``, measured TTFT and TPOT of 15 models on
six systems under three engines) is predicted in one run by

* infermodel: the ideal roofline, the engine presets and measured kernels (each row's
  engine's tables), each at the point's concurrency in the closed loop the silicon ledger
  uses (``validate``'s default for it, the analytic stand-in);
* aiconfigurator's own estimator in the installed package (its core SDK: the model from
  its bundled config, the perf database of the row's system, engine and version — the
  newest where the package lacks the row's — in strict ``SILICON`` mode, the
  aggregated estimate at the row's per-rank batch size with ``ctx_tokens = isl``, as its
  command line's ``estimate`` does). The core SDK holds no disaggregated estimate (that
  lives in the ``aiconfigurator`` package), so disaggregated rows are left to infermodel
  and counted as not predicted by it. Where a context-attention table lacks the FP8
  FMHA mode, the estimate is retried with the 16-bit one, as its command line resolves
  the FMHA mode against the data.

Both error tables (median and 90th-percentile |error| per metric, overall and per
system, engine and mode, with the number of rows each predicted) are printed from the
one run, then the same on the rows every predictor predicted.

    python benchmarks/bench_accuracy.py [--sample 240] [--no-aiconfigurator]

Benchmarks may import aiconfigurator; the package never does. Needs the ``[kernels]``
extra.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import math
import sys
import time
import warnings
from collections.abc import Sequence

import numpy as np

#: Points in the default sample (two rows each: TTFT and TPOT).
SAMPLE = 240


def _summary(pairs: Sequence[tuple[float, float]]) -> tuple[int, float, float]:
    errors = np.array([abs(p - m) / m for p, m in pairs])
    if not errors.size:
        return 0, math.nan, math.nan
    return int(errors.size), float(np.median(errors)), float(np.percentile(errors, 90))


def _medians(median: float, p90: float) -> str:
    """A metric's median/p90 cell; a dash where the predictor predicted no point."""
    if math.isnan(median):
        return f"{'—':>7}/{'—':<5}"
    return f"{median:>7.0%}/{p90:<5.0%}"


def _table(title: str, predictions: dict[str, dict[str, float | None]], rows,
           keep=lambda row: True) -> str:
    """One block per predictor: overall and per system, engine and mode."""
    groups = [("all", lambda r: "all"), ("system", lambda r: r.hardware),
              ("engine", lambda r: r.family), ("mode", lambda r: r.mode)]
    lines = [title, ""]
    head = f"{'group':<24}" + "".join(f"{name[:30]:>34}" for name in predictions)
    sub = f"{'':<24}" + "".join(f"{'n  ttft med/p90  tpot med/p90':>34}" for _ in predictions)
    lines += [head, sub]
    for heading, group_of in groups:
        names = sorted({group_of(r) for r in rows if keep(r)})
        for group in names:
            label = "all" if heading == "all" else f"{heading} {group}"
            cells = []
            for values in predictions.values():
                by_metric = {}
                for metric in ("ttft_ms", "tpot_ms"):
                    pairs = [(values[r.id], r.value) for r in rows
                             if keep(r) and r.metric == metric and group_of(r) == group
                             and values.get(r.id) is not None]
                    by_metric[metric] = _summary(pairs)
                n = by_metric["ttft_ms"][0]
                cells.append(f"{n:>4} " + "".join(_medians(*by_metric[m][1:])
                                                  for m in ("ttft_ms", "tpot_ms")))
            lines.append(f"{label:<24}" + "".join(f"{c:>34}" for c in cells))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------
# aiconfigurator's own estimator (its core SDK)
# ---------------------------------------------------------------------------------


class Aiconfigurator:
    """aiconfigurator's aggregated estimate of a silicon point (see the module docstring)."""

    def __init__(self) -> None:
        from aiconfigurator_core.sdk.backends.factory import get_backend
        from aiconfigurator_core.sdk.config import RuntimeConfig
        from aiconfigurator_core.sdk.config_builders import build_model_config
        from aiconfigurator_core.sdk.models import get_model
        from aiconfigurator_core.sdk.perf_database import (
            get_database_view,
            get_latest_database_version,
        )

        self.get_backend, self.RuntimeConfig = get_backend, RuntimeConfig
        self.build_model_config, self.get_model = build_model_config, get_model
        self.get_database_view = get_database_view
        self.latest = get_latest_database_version
        self.databases: dict[tuple, object] = {}

    def database(self, system: str, backend: str, version: str | None):
        key = (system, backend, version)
        if key not in self.databases:
            chosen = version
            database = None
            if version:
                with contextlib.suppress(Exception):
                    database = self.get_database_view(system, backend, version,
                                                      allow_missing_data=False,
                                                      database_mode="SILICON")
            if database is None:
                chosen = self.latest(system=system, backend=backend)
                database = self.get_database_view(system, backend, chosen,
                                                  allow_missing_data=False,
                                                  database_mode="SILICON")
            self.databases[key] = database
        return self.databases[key]

    def estimate(self, cells: dict[str, str]) -> tuple[float, float] | str:
        """(TTFT ms, TPOT ms) of one point of the silicon file, or why there is none."""
        if cells["mode"] != "agg":
            return "disaggregated: the core SDK holds no disaggregated estimate"

        def whole(name: str, default: int | None = None) -> int | None:
            try:
                return int(float(cells[name]))
            except ValueError:
                return default

        gemm = cells["gemm_quant_mode"] or None
        moe = cells["moe_quant_mode"] or None
        try:
            database = self.database(cells["system"], cells["backend"],
                                     cells["backend_version"] or None)
        except Exception as exc:  # its own errors, reported as they come
            return f"database: {type(exc).__name__}: {str(exc)[:120]}"
        tried = []
        for fmha in (None, "bfloat16"):
            try:
                config = self.build_model_config(
                    whole("tp_size", 1), whole("pp_size", 1), whole("attention_dp_size", 1) or 1,
                    whole("moe_tp_size", 1) or 1, whole("moe_ep_size", 1) or 1,
                    gemm_quant_mode=gemm, moe_quant_mode=moe, fmha_quant_mode=fmha)
                model = self.get_model(cells["model_path"], config, cells["backend"])
                runtime = self.RuntimeConfig(isl=int(cells["isl"]), osl=int(cells["osl"]),
                                             batch_size=whole("batch_size", 1))
                summary = self.get_backend(cells["backend"]).run_agg(
                    model, database, runtime, ctx_tokens=int(cells["isl"]))
                result = summary.get_result_dict()
                return float(result["ttft"]), float(result["tpot"])
            except Exception as exc:
                tried.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                if "fmha" not in str(exc).lower() and "context" not in str(exc).lower():
                    break
        return tried[-1]


# ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=SAMPLE, help="points to predict")
    parser.add_argument("--no-aiconfigurator", action="store_true",
                        help="skip aiconfigurator's estimator")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)

    import csv

    from infermodel.accuracy.predictions import predict_rows
    from infermodel.accuracy.silicon import read_silicon, silicon_path
    from infermodel.host import get_host

    host = get_host()
    ledger = read_silicon(sample=args.sample)
    rows = [r for r in ledger.rows]
    points = {r.id.rsplit("-", 1)[0] for r in rows}
    print(f"silicon ledger: {ledger.points} points of {silicon_path()} "
          f"({len({r.hardware for r in rows})} systems, {len({r.family for r in rows})} engines, "
          f"{sum(1 for r in rows if r.mode == 'disaggregated') // 2} disaggregated points)")
    predictions: dict[str, dict[str, float | None]] = {}
    seconds: dict[str, float] = {}
    for name, calibrated, kernels in (("infermodel ideal roofline", False, None),
                                      ("infermodel engine presets", True, None),
                                      ("infermodel measured kernels", False, "measured")):
        begin = time.perf_counter()
        validation = predict_rows(rows, calibrated=calibrated, kernels=kernels, loop="analytic",
                                  host=host)
        seconds[name] = time.perf_counter() - begin
        predictions[name] = {p.row.id: p.predicted for p in validation.points}
    if not args.no_aiconfigurator:
        begin = time.perf_counter()
        estimator = Aiconfigurator()
        with silicon_path().open(newline="", encoding="utf-8") as handle:
            cells = {r["id"]: r for r in csv.DictReader(handle) if r["id"] in points}
        ours: dict[str, float | None] = {}
        reasons: dict[str, int] = {}
        for point in sorted(points):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                found = estimator.estimate(cells[point])
            if isinstance(found, str):
                reasons[found.split(":")[0]] = reasons.get(found.split(":")[0], 0) + 1
                ours[f"{point}-ttft"] = ours[f"{point}-tpot"] = None
            else:
                ours[f"{point}-ttft"], ours[f"{point}-tpot"] = found
        seconds["aiconfigurator (SILICON)"] = time.perf_counter() - begin
        predictions["aiconfigurator (SILICON)"] = ours
        predicted = sum(v is not None for v in ours.values()) // 2
        print(f"aiconfigurator predicted {predicted} of {len(points)} points; not predicted: "
              + ", ".join(f"{n} × {why}" for why, n in sorted(reasons.items(), key=lambda i: -i[1])))
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
    print()
    print(_table(f"Every row each predictor predicted ({ledger.points} points)", predictions, rows))
    both = {r.id for r in rows if all(v.get(r.id) is not None for v in predictions.values())}
    print()
    print(_table(f"Rows every predictor predicted ({len(both) // 2} points)", predictions, rows,
                 keep=lambda r: r.id in both))
    return 0


if __name__ == "__main__":
    sys.exit(main())
