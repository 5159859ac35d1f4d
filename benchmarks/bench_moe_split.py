"""A MoE layout no table measured, read from one that splits the experts as many ways:
checked on every installed MoE table, each configuration held out in turn.

Where a MoE kernel table has no row at a point's tensor-parallel size (TensorRT-LLM's
MXFP4 tables on H200 and B200 measure gpt-oss's shape only at TP 1), measured kernels
read the point's layout (TP ``t``, EP ``e``) from the layouts that split the experts'
weights over as many GPUs with less tensor parallelism (TP ``t/2``, EP ``2e``; then
``t/4``, ``4e``; … down to TP 1), the nearest first
(:func:`infermodel.kernels.catalog.same_split`); before, they scaled the TP 1
configuration at the same EP by the roofline ratio, which divides its time by ``t``.

This script checks both readings on the tables' own rows: for every measured
configuration with TP > 1 (a table's dtype, shape, routing distribution, TP, EP) and
token count, each reading of it from the other configurations of the same table and
shape, against its own latency (the fastest row of each cell, as the lookups read):

* **roofline ratio** from TP 1: ``latency(TP 1, EP e) · R(t, e) / R(1, e)``;
* **same split**: ``latency(TP t/f, EP f·e) · R(t, e) / R(t/f, f·e)`` for the smallest
  ``f`` measured (the ratio is 1: the same bytes and FLOPs per GPU).

It prints, by TP and by tokens per layer, the median ratio of each reading to the
measurement and its median |log ratio| (0.10 is about 10 %).

    python benchmarks/bench_moe_split.py

Needs the ``[kernels]`` extra. About a minute on two cores.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import numpy as np

COLUMNS = ("moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "distribution",
           "moe_tp_size", "moe_ep_size", "num_tokens", "latency")
BANDS = ((1, 16, "1–16 tokens"), (17, 256, "17–256"), (257, 1 << 40, "257 or more"))


def _cells(folder, table: str):
    """(dtype, shape…, distribution) -> {(tp, ep, tokens): fastest latency}."""
    from infermodel.kernels.source import read

    data = read(folder, table, COLUMNS)
    if "moe_tp_size" not in data or not len(data["latency"]):
        return {}
    out: dict[tuple, dict[tuple, float]] = defaultdict(dict)
    rows = zip(*(data[c].tolist() for c in COLUMNS), strict=True)
    for dtype, h, i, k, e, dist, tp, ep, n, latency in rows:
        cell = out[(str(dtype), float(h), float(i), float(k), float(e), str(dist))]
        at = (float(tp), float(ep), float(n))
        cell[at] = min(latency, cell.get(at, np.inf))
    return out


def _roofline(dtype: str, system: str):
    from infermodel.kernels.rooflines import moe
    from infermodel.kernels.source import card

    return moe({"dtype": dtype}, card(system))[0]


def main() -> int:
    from infermodel.kernels.source import TablesUnavailable, folders, systems

    start = time.perf_counter()
    ratios: dict[str, dict[tuple, list[float]]] = {"roofline": defaultdict(list),
                                                    "split": defaultdict(list)}
    tables = 0
    for system in systems():
        for engine in ("trtllm", "sglang", "vllm"):
            for folder in folders(system, "moe", engine):
                if "moe_perf" not in folder.tables:
                    continue
                try:
                    cells = _cells(folder, "moe_perf")
                except TablesUnavailable:
                    continue
                tables += 1
                for (dtype, h, i, k, e, _), cell in cells.items():
                    roof = _roofline(dtype, system)

                    def r(tp, ep, n, h=h, i=i, k=k, e=e, roof=roof):
                        return float(roof({"tokens": n, "hidden": h, "inter": i, "topk": k,
                                           "experts": e, "tp": tp, "ep": ep}))

                    for (tp, ep, n), latency in cell.items():
                        if tp <= 1:
                            continue
                        band = next(b for lo, hi, b in BANDS if lo <= n <= hi)
                        base = cell.get((1.0, ep, n))
                        if base is not None:
                            read = base * r(tp, ep, n) / r(1.0, ep, n)
                            ratios["roofline"][(tp, band)].append(read / latency)
                        f = 2.0
                        while tp / f >= 1.0:
                            alike = cell.get((tp / f, ep * f, n))
                            if alike is not None:
                                read = alike * r(tp, ep, n) / r(tp / f, ep * f, n)
                                ratios["split"][(tp, band)].append(read / latency)
                                break
                            f *= 2.0
    print(f"{tables} MoE tables; each configuration with TP > 1 held out and read from the "
          "others of its table and shape\n")
    print(f"{'TP':>4}  {'tokens':<12} {'points':>9}  {'roofline ratio from TP 1':>26}  "
          f"{'same split':>20}")
    keys = sorted(set(ratios["roofline"]) | set(ratios["split"]),
                  key=lambda kv: (kv[0], [b for _, _, b in BANDS].index(kv[1])))
    for key in keys:
        cols = []
        for how in ("roofline", "split"):
            found = np.asarray(ratios[how].get(key, []))
            cols.append(f"{np.median(found):6.3f}× |log| {np.median(np.abs(np.log(found))):5.3f}"
                        if len(found) else f"{'—':>20}")
        n = len(ratios["split"].get(key, []))
        print(f"{key[0]:4.0f}  {key[1]:<12} {n:9d}  {cols[0]:>26}  {cols[1]:>20}")
    for how in ("roofline", "split"):
        every = np.concatenate([np.asarray(v) for v in ratios[how].values()])
        print(f"\nall, {how:9s}: {len(every)} points, median {np.median(every):.3f}×, median "
              f"|log| {np.median(np.abs(np.log(every))):.3f}")
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
