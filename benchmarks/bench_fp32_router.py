"""MiniMax-M2.5's 32-bit router, checked on runs the model was not fitted on: the same
InferenceMAX configurations measured before and after their scripts turned TF32 on.

vLLM builds MiniMax-M2's router gate in float32 and, unless
``VLLM_FLOAT32_MATMUL_PRECISION`` says otherwise, PyTorch multiplies it in IEEE FP32 on
the CUDA cores; InferenceMAX's vLLM scripts for MiniMax-M2.5 on B200 and B300 exported
``VLLM_FLOAT32_MATMUL_PRECISION=high`` (TF32) from 21–22 April 2026
(``infermodel.accuracy.script_settings.TF32_MATMUL``). This script takes the silicon
ledger's aggregated MiniMax-M2.5 points on those cards measured with vLLM 0.19.0 on both
sides of that change, pairs the points of one configuration (card, format, lengths,
tensor, attention-data and expert degrees, clients), and prints, per metric and prompt
length, the median over the pairs of the measured time after the change over the time
before it, beside the same ratio of the predictions with measured kernels (each side
predicted with its own ``efficiency.fp32_matmul``), and the pairs themselves:

    python benchmarks/bench_fp32_router.py

Needs the ``[kernels]`` extra. About fifteen seconds on two cores.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
import warnings
from collections import defaultdict

MODEL = "MiniMaxAI/MiniMax-M2.5"
IMAGE = "v0.19.0"
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")


def _key(row) -> tuple:
    found = _CONCURRENCY.search(row.source)
    clients = int(found.group(1)) if found else row.concurrency
    return (row.hardware, row.weights, row.isl, row.osl, row.tensor, row.attention_dp,
            row.expert, clients)


def main() -> int:
    from infermodel.accuracy.predictions import predict_rows
    from infermodel.accuracy.silicon import read_silicon
    from infermodel.host import PluginHost

    start = time.perf_counter()
    rows = [r for r in read_silicon().rows
            if r.model_label == MODEL and r.pools is None and r.hardware in ("b200", "b300")
            and IMAGE in r.source and not r.unexpressed]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        validation = predict_rows(rows, kernels="measured", host=PluginHost(), loop="analytic",
                                  calibrated=False)
    sides: dict[tuple, dict[bool, list[tuple[float, float]]]] = defaultdict(dict)
    for point in validation.points:
        if not isinstance(point.predicted, float):
            continue
        row = point.row
        sides[(row.metric, *_key(row))].setdefault(bool(row.fp32_matmul), []).append(
            (row.value, point.predicted))
    pairs: dict[tuple[str, int], list[tuple[float, float, tuple]]] = defaultdict(list)
    for key, by in sorted(sides.items()):
        if True in by and False in by:
            measured = (statistics.median(v for v, _ in by[True])
                        / statistics.median(v for v, _ in by[False]))
            predicted = (statistics.median(p for _, p in by[True])
                         / statistics.median(p for _, p in by[False]))
            pairs[(key[0], key[3])].append((measured, predicted, key[1:]))
    print("After TF32 over before, the same configuration (median over its pairs):")
    print(f"{'metric':8} {'prompt':>6} {'pairs':>5} {'measured':>9} {'predicted':>9}")
    for metric in ("ttft_ms", "tpot_ms"):
        every = [p for (m, _), ps in pairs.items() if m == metric for p in ps]
        for prompt in sorted({isl for (m, isl) in pairs if m == metric}):
            got = pairs[(metric, prompt)]
            print(f"{metric:8} {prompt:>6} {len(got):>5} "
                  f"{statistics.median(m for m, _, _ in got):>9.3f} "
                  f"{statistics.median(p for _, p, _ in got):>9.3f}")
        if every:
            print(f"{metric:8} {'all':>6} {len(every):>5} "
                  f"{statistics.median(m for m, _, _ in every):>9.3f} "
                  f"{statistics.median(p for _, p, _ in every):>9.3f}")
    print("\nThe pairs (card, weights, prompt, output, tensor, attention data, expert, clients):")
    for (metric, _), got in sorted(pairs.items()):
        for measured, predicted, key in got:
            print(f"  {metric:8} {key}  measured {measured:.3f}  predicted {predicted:.3f}")
    print(f"\n{len(rows)} points, {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
