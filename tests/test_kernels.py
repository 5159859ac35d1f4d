"""Measured kernels: the installed tables read as functions, and scenarios timed by them.

Golden values are read from the installed Parquet files by hand in each test (pyarrow,
no code of infermodel.kernels) and compared with what the lookups and the scenario give:
NVIDIA aiconfigurator-core 0.12, ``systems/data/h200_sxm/.../vllm/0.24.0``.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infermodel
from conftest import ROOT
from infermodel.errors import InfermodelError
from infermodel.plugin import Kernel, S, hookimpl

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None
    or importlib.util.find_spec("pyarrow") is None,
    reason='the measured kernel tables are not installed (pip install "infermodel[kernels]")')

SCENARIO = ROOT / "scenarios" / "measured-llama-3.1-8b-fp8-h200.toml"


def _data() -> Path:
    spec = importlib.util.find_spec("aiconfigurator_core")
    return Path(next(iter(spec.submodule_search_locations))) / "systems" / "data" / "h200_sxm"


def _rows(relative: str, **equal) -> list[dict]:
    """Rows of an installed table where the given columns hold the given values."""
    import pyarrow.parquet as pq

    table = pq.read_table(_data() / relative).to_pylist()
    return [row for row in table if all(row[k] == v for k, v in equal.items())]


def _latency_s(relative: str, **equal) -> float:
    rows = _rows(relative, **equal)
    assert rows, equal
    return min(row["latency"] for row in rows) * 1e-3


def _rotary(result, phase="decode", tokens=16):
    """vLLM's rotary embedding over Llama 3.1 8B's 32 layers (a kernel of its own before
    attention, no table measures it): (32 + 8) heads × 128 values a token read and
    written in 16 bits, three FLOPs each, at the roofline, plus the fixed kernel time.
    """
    values = tokens * 40 * 128 * 32
    return (max(3 * values / result[f"flops_effective_{phase}"],
                2 * 2 * values / result["bandwidth"])
            + 32 * result["elementwise_kernel_latency"])


GEMM = "gemm/vllm/0.24.0/gemm_perf.parquet"
GENERATION = "attention/vllm/0.24.0/generation_attention_perf.parquet"
CONTEXT = "attention/vllm/0.24.0/context_attention_perf.parquet"


@pytest.fixture(scope="module")
def kernels():
    from infermodel import kernels

    return kernels


@pytest.fixture(scope="module")
def gemm(kernels):
    return kernels.lookup("h200_sxm", "vllm", "0.24.0", "gemm", dtype="fp8")


@pytest.fixture(scope="module")
def result():
    return infermodel.evaluate(SCENARIO)


def test_a_measured_gemm_point_is_the_tables_row(gemm):
    expected = _latency_s(GEMM, gemm_dtype="fp8", m=32, n=4096, k=4096)
    assert gemm(32.0, 4096.0, 4096.0) == pytest.approx(expected, rel=1e-12)


def test_between_two_measured_m_the_latency_is_log_log_interpolated(gemm):
    # The table measures m = 257 and 512 (and nothing between).
    assert not _rows(GEMM, gemm_dtype="fp8", m=300)
    low = _latency_s(GEMM, gemm_dtype="fp8", m=257, n=4096, k=4096)
    high = _latency_s(GEMM, gemm_dtype="fp8", m=512, n=4096, k=4096)
    w = (math.log(300) - math.log(257)) / (math.log(512) - math.log(257))
    expected = math.exp((1 - w) * math.log(low) + w * math.log(high))
    assert gemm(300.0, 4096.0, 4096.0) == pytest.approx(expected, rel=1e-12)


def test_between_two_measured_weights_the_configurations_blend_log_log(gemm):
    # n = 28,672 (Llama 3.1 8B's gate and up together) lies between the measured 16,384
    # and 51,200.
    low = _latency_s(GEMM, gemm_dtype="fp8", m=16, n=16384, k=4096)
    high = _latency_s(GEMM, gemm_dtype="fp8", m=16, n=51200, k=4096)
    w = (math.log(28672) - math.log(16384)) / (math.log(51200) - math.log(16384))
    assert gemm(16.0, 28672.0, 4096.0) == pytest.approx(low ** (1 - w) * high ** w, rel=1e-12)


def test_beyond_the_largest_m_a_gemm_is_blocks_of_the_largest(gemm):
    # 65,536 tokens are two blocks of the largest m measured (32,768): the time of the
    # edge row, doubled (compute-bound there: the kernel's efficiency held).
    edge = _latency_s(GEMM, gemm_dtype="fp8", m=32768, n=4096, k=4096)
    assert gemm(65536.0, 4096.0, 4096.0) == pytest.approx(2 * edge, rel=1e-12)
    assert gemm.outside(65536.0, 4096.0, 4096.0) is None
    assert "2 blocks of the largest measured 32768" in gemm.blocks_at(65536.0, 4096.0, 4096.0)
    assert gemm.outside(32.0, 4096.0, 4096.0) is None and gemm.blocks_at(32.0, 4096.0, 4096.0) is None


def test_a_weight_wider_than_any_measured_is_column_blocks(gemm):
    # Llama 3's head (n = 128,256) is wider than the widest n measured (65,536): columns
    # in blocks of 65,536, time proportional to n.
    widest = max(row["n"] for row in _rows(GEMM, gemm_dtype="fp8", k=4096))
    assert widest == 65536
    edge = _latency_s(GEMM, gemm_dtype="fp8", m=16, n=65536, k=4096)
    assert gemm(16.0, 128256.0, 4096.0) == pytest.approx(edge * 128256 / 65536, rel=1e-12)
    assert gemm.outside(16.0, 128256.0, 4096.0) is None
    assert "n 128256: 1.957 blocks" in gemm.blocks_at(16.0, 128256.0, 4096.0)


def test_beyond_the_grid_the_time_scales_by_the_roofline_ratio(kernels):
    # A prompt longer than the longest measured (16,384) is not blocks: causal attention
    # grows with the square of its length; the edge row is scaled by the roofline ratio.
    lookup = kernels.lookup("h200_sxm", "vllm", "0.24.0", "context_attention", kv_dtype="bfloat16")
    edge = _latency_s(CONTEXT, kv_cache_dtype="bfloat16", batch_size=1, isl=16384, num_heads=32,
                      num_key_value_heads=8, head_dim=128, window_size=0)
    card = kernels.card("h200_sxm")

    def roofline(s):
        flops = 4 * 32 * 128 * (s * s - s * s / 2)
        moved = s * (2 * 32 * 128 * 2 + 2 * 8 * 128 * 2)
        return max(flops / card["bfloat16_tc_flops"], moved / card["mem_bw"])

    full = kernels.FULL_WINDOW
    assert lookup(1.0, 32768.0, 32.0, 8.0, 128.0, full) == pytest.approx(
        edge * roofline(32768) / roofline(16384), rel=1e-12)
    assert "2× beyond the measured 16384" in lookup.outside(1.0, 32768.0, 32.0, 8.0, 128.0, full)


def test_arrays_give_the_scalar_paths_numbers(gemm):
    m = np.array([1.0, 7.5, 32.0, 300.0, 5000.0, 65536.0])
    vector = gemm(m, 28672.0, np.array([4096.0]))
    scalar = [gemm.point(float(x), 28672.0, 4096.0) for x in m]
    np.testing.assert_array_equal(vector, scalar)
    # Configurations that differ point by point are grouped, not looped over per point.
    # Whole token counts inside the grid are read from a table of the same numbers.
    counts = np.arange(1.0, 5001.0)
    np.testing.assert_array_equal(gemm(counts, 28672.0, 4096.0),
                                  [gemm.point(float(x), 28672.0, 4096.0) for x in counts])
    n = np.array([4096.0, 6144.0, 4096.0])
    np.testing.assert_array_equal(gemm(32.0, n, 4096.0),
                                  [gemm.point(32.0, float(x), 4096.0) for x in n])


def test_two_axis_arrays_give_the_scalar_paths_numbers(kernels):
    lookup = kernels.lookup("h200_sxm", "vllm", "0.24.0", "generation_attention",
                            kv_dtype="bfloat16")
    rng = np.random.default_rng(3)
    batch = np.exp(rng.uniform(0, 9, 200)).round()
    context = np.exp(rng.uniform(0, 12.5, 200)).round()
    full = kernels.FULL_WINDOW
    both = lookup(batch, context, 32.0, 8.0, 128.0, full)
    one = lookup(batch, 1536.0, 32.0, 8.0, 128.0, full)    # the context held: rows first
    np.testing.assert_array_equal(both, [lookup.point(b, c, 32.0, 8.0, 128.0, full)
                                         for b, c in zip(batch, context)])
    np.testing.assert_array_equal(one, [lookup.point(b, 1536.0, 32.0, 8.0, 128.0, full)
                                        for b in batch])


def test_generation_attention_reads_the_cached_length_as_isl_plus_step(kernels):
    lookup = kernels.lookup("h200_sxm", "vllm", "0.24.0", "generation_attention",
                            kv_dtype="bfloat16")
    expected = _latency_s(GENERATION, kv_cache_dtype="bfloat16", batch_size=32, step=1023,
                          num_heads=32, num_key_value_heads=8, head_dim=128, window_size=0)
    assert lookup(32.0, 1024.0, 32.0, 8.0, 128.0, kernels.FULL_WINDOW) == pytest.approx(
        expected, rel=1e-12)


def test_the_scenarios_decode_projection_is_the_tables_row_times_the_layers(result):
    # Llama 3.1 8B, batch 16: the fused QKV GEMM is m = 16, n = 4096 + 2·1024, k = 4096,
    # all measured, once per layer (32); vLLM's rotary embedding follows it (16 tokens ×
    # 40 heads × 128 values read and written, bandwidth-bound, and 32 fixed kernel times).
    row = _latency_s(GEMM, gemm_dtype="fp8", m=16, n=6144, k=4096)
    assert result["decode_kernel_qkv_projection_time"] == pytest.approx(
        32 * row + _rotary(result), rel=1e-12)
    attention = _latency_s(GENERATION, kv_cache_dtype="bfloat16", batch_size=16, step=1535,
                           num_heads=32, num_key_value_heads=8, head_dim=128, window_size=0) \
        if _rows(GENERATION, step=1535) else None
    assert attention is None  # 1,536 cached positions lie between measured lengths
    assert result["decode_time_kernels"] == pytest.approx(
        result["decode_time_kernels_measured"] + result["decode_time_kernels_roofline"])
    assert result["tpot"] == pytest.approx(
        result["decode_time_kernels"] + result["step_overhead"] + result["t0"])
    # The scenario states no time for a request's way through the server: none is added.
    assert result["request_overhead"] == 0.0
    assert result["ttft"] == pytest.approx(
        result["prefill_time_kernels_at_batch_1"] + result["step_overhead"] + result["t0"])


def test_a_static_scale_checkpoint_is_not_charged_the_tables_amax():
    # TensorRT-LLM's FP8 GEMM rows quantise the activation dynamically (its collector
    # loads no input scale; aiconfigurator's collector/trtllm/collect_gemm.py, and
    # TensorRT-LLM's FP8QDQLinearMethod falls back to quantize_e4m3_per_tensor without
    # one): at m = 16, n = 6144, k = 4096 the row is 19.671 µs, and the
    # amax alone (quantize/computescale_perf, the dynamic cast less the static one) is
    # 7.205 µs. A checkpoint with calibrated input scales runs the rest; one that
    # computes each pass's amax runs the row.
    gemm = _latency_s("gemm/trtllm/1.3.0rc20/gemm_perf.parquet", gemm_dtype="fp8", m=16,
                      n=6144, k=4096)
    amax = _latency_s("quantize/trtllm/1.3.0rc20/computescale_perf.parquet", m=16, k=4096)
    assert (gemm, amax) == (pytest.approx(19.671e-6, rel=1e-3), pytest.approx(7.205e-6, rel=1e-3))
    trt = {"efficiency.engine": "trtllm", "efficiency.engine_version": "1.3.0rc20"}
    static = infermodel.evaluate(SCENARIO, trt)
    dynamic = infermodel.evaluate(SCENARIO, {**trt, "levers.quantization.activation_scales":
                                             "dynamic"})
    name = "decode_kernel_qkv_projection_time"
    assert static[name] == pytest.approx(32 * (gemm - amax), rel=1e-9)
    assert dynamic[name] == pytest.approx(32 * gemm, rel=1e-9)
    # vLLM's FP8 rows are measured with static scales: a static checkpoint runs the row,
    # a dynamic one adds vLLM's own amax (0.75 µs here, its per-token quantisation less the
    # static one).
    row = _latency_s(GEMM, gemm_dtype="fp8", m=16, n=6144, k=4096)
    vllm_amax = _latency_s("quantize/vllm/0.24.0/computescale_perf.parquet", m=16, k=4096)
    plain = infermodel.evaluate(SCENARIO)
    assert plain[name] == pytest.approx(32 * row + _rotary(plain), rel=1e-9)
    assert infermodel.evaluate(SCENARIO, {"levers.quantization.activation_scales": "dynamic"})[
        name] == pytest.approx(32 * (row + vllm_amax) + _rotary(plain), rel=1e-9)
    # Intel's B60 tables time no amax under vLLM: the rows are read as measured (not a
    # fall back to the roofline), and the result says what is not charged.
    b60 = {"hardware.kernel_system": "b60"}
    plain = infermodel.evaluate(SCENARIO, b60)
    unscaled = infermodel.evaluate(SCENARIO, {**b60, "levers.quantization.activation_scales":
                                              "dynamic"})
    assert unscaled[name] == plain[name] > 0
    assert not any("fell back" in str(w) for w in unscaled.warnings)
    assert any("no table times the amax" in str(w) and "0.5–4.5 µs" in str(w)
               for w in unscaled.warnings)
    # SGLang's rows are read as measured whichever scales the scenario states: said so.
    sglang = infermodel.evaluate(SCENARIO, {"efficiency.engine": "sglang",
                                            "levers.quantization.activation_scales": "dynamic"})
    assert any("activation_scales has no effect under sglang" in str(w)
               for w in sglang.warnings)


def test_vllms_block_fp8_gemms_read_its_per_tensor_rows_with_dynamic_quantisation(capsys):
    # vLLM's block-FP8 GEMM rows were collected without CUDA graphs: 4 × 4096 × 4096 takes
    # 57 µs on H200 where its per-tensor FP8 row takes 10 µs — the host's launches. A
    # block-scaled checkpoint under vLLM reads the per-tensor row plus vLLM's own
    # dynamic quantisation (block-scaled activations take their scales on the fly), and
    # the result says so.
    block = _latency_s(GEMM, gemm_dtype="fp8_block", m=4,
                       n=4096, k=4096)
    tensor = _latency_s(GEMM, gemm_dtype="fp8", m=4, n=4096, k=4096)
    assert block > 5 * tensor
    row = _latency_s(GEMM, gemm_dtype="fp8", m=16, n=6144, k=4096)
    amax = _latency_s("quantize/vllm/0.24.0/computescale_perf.parquet", m=16, k=4096)
    blocked = infermodel.evaluate(SCENARIO, {"levers.quantization.linear": "fp8-b128"})
    assert blocked["decode_kernel_qkv_projection_time"] == pytest.approx(
        32 * (row + amax) + _rotary(blocked), rel=1e-9)
    assert any("stand in for block-scaled FP8" in str(w) and "decode qkv_projection" in str(w)
               for w in blocked.warnings)
    # The block rows still bound the kernel from above: at thousands of tokens they are
    # its own time (a prefill that large runs without a graph), and the lesser is charged.
    lookup = infermodel.plugin.kernels.lookup
    rows = {d: lookup("h200_sxm", "vllm", "0.24.0", "gemm", dtype=d) for d in ("fp8", "fp8_block")}
    scale = lookup("h200_sxm", "vllm", "0.24.0", "activation_scale", dtype="fp8")
    for m in (16.0, 16384.0):
        charged = min(rows["fp8"](m, 6144.0, 4096.0) + scale(m, 4096.0),
                      rows["fp8_block"](m, 6144.0, 4096.0))
        phase = "decode" if m == 16 else "prefill"
        assert blocked[f"{phase}_kernel_qkv_projection_time"] == pytest.approx(
            32 * charged + _rotary(blocked, phase, int(m)), rel=1e-9)
    assert rows["fp8_block"](16.0, 6144.0, 4096.0) > 4 * rows["fp8"](16.0, 6144.0, 4096.0)
    # Block-scaled activations take their scales on the fly: a stated scale says so.
    stated = infermodel.evaluate(SCENARIO, {"levers.quantization.linear": "fp8-b128",
                                            "levers.quantization.activation_scales": "static"})
    assert stated["decode_kernel_qkv_projection_time"] == blocked["decode_kernel_qkv_projection_time"]
    assert any("no weights are in per-tensor FP8" in str(w) for w in stated.warnings)
    # The operator table says so beneath it, and its JSON lists it.
    from infermodel.cli import main

    assert main(["ops", str(SCENARIO), "--set", "levers.quantization.linear=fp8-b128"]) == 0
    table = capsys.readouterr().out
    assert "warning: measured kernels: in decode qkv_projection" in table
    assert main(["ops", str(SCENARIO), "--phase", "prefill", "--format", "json", "--set",
                 "levers.quantization.linear=fp8-b128"]) == 0
    listed = json.loads(capsys.readouterr().out)["warnings"]
    assert any("in prefill qkv_projection" in w and "stand in" in w for w in listed)
    # Under an engine whose block-FP8 rows are graph-captured, they are read as measured.
    trt = infermodel.evaluate(SCENARIO, {"levers.quantization.linear": "fp8-b128",
                                         "efficiency.engine": "trtllm",
                                         "efficiency.engine_version": "1.3.0rc20"})
    own = _latency_s("gemm/trtllm/1.3.0rc20/gemm_perf.parquet", gemm_dtype="fp8_block", m=16,
                     n=6144, k=4096)
    assert trt["decode_kernel_qkv_projection_time"] == pytest.approx(32 * own, rel=1e-9)
    assert not any("stand in" in str(w) for w in trt.warnings)


def test_a_simulated_prompt_runs_a_fallen_back_operator_at_the_prefill_rate():
    # No table measures MXFP4 linear weights: the GEMM operators fall back to their
    # roofline, whose compute rate is its pass's. A serving iteration holding a prompt
    # runs them as the prefill pass does (one prompt alone: the time to first token), a
    # decode-only one as the decode step.
    from infermodel.analyses.simulation.plan import iteration_cost
    from infermodel.simulator import CostModel

    result = infermodel.evaluate(SCENARIO, {"levers.quantization.linear": "mxfp4",
                                            "efficiency.prefill_mfu": 0.5,
                                            "efficiency.decode_mfu": 0.9})
    assert any("fell back to the roofline" in str(w) and "qkv_projection" in str(w)
               for w in result.warnings)
    cost = CostModel.from_quantities(result.values,
                                     measured=iteration_cost(result.scenario, result.values))
    cached = int(result["context"]) - 1
    assert cost.iteration_time([cached] * int(result["batch"]), []) == pytest.approx(
        result["decode_step_time"], rel=1e-9)
    # (It read them at the decode rate before: 17.7 ms against 30.5 ms. What remains,
    # 2 µs, is the elementwise operators' rooflines, which read the embedding rows and
    # the norms' share of the weights at the scenario's batch.)
    assert cost.iteration_time([], [(1024, 0)]) == pytest.approx(
        result["ttft"] - result["request_overhead"], rel=1e-4)


def test_rows_timed_at_zero_measure_nothing():
    # SGLang's activation-scale table on H200 times 1,622 of its 1,628 rows at zero: a
    # curve through the other six would be their noise, so it serves no lookup, and the
    # reason says why. vLLM's, every row timed, serves as measured.
    rows = _rows("quantize/sglang/0.5.14/computescale_perf.parquet")
    zero = sum(row["latency"] <= 0 for row in rows)
    assert (zero, len(rows)) == (1622, 1628)
    lookup = infermodel.plugin.kernels.lookup
    found = lookup("h200_sxm", "sglang", "0.5.16", "activation_scale", dtype="fp8")
    assert isinstance(found, infermodel.plugin.kernels.Unavailable)
    assert "1,622 of its 1,628 rows" in found.reason and "measures nothing" in found.reason
    vllm = lookup("h200_sxm", "vllm", "0.24.0", "activation_scale", dtype="fp8")
    values = [vllm(m, k) for m in (1.0, 16.0, 4096.0) for k in (1024.0, 8192.0)]
    assert all(np.isfinite(v) and v > 0 for v in values)


def test_a_table_without_a_window_column_measures_full_attention():
    # A100's attention tables predate the window_size column: their rows are full
    # attention, read as such (the lookup had failed on the missing column); a column a
    # family needs and a table lacks makes that table unavailable, with the reason.
    import pyarrow.parquet as pq

    folder = _data().parent / "a100_sxm" / "attention" / "vllm"
    tables = sorted(folder.glob("*/generation_attention_perf.parquet"))
    assert tables and "window_size" not in pq.read_schema(tables[-1]).names
    result = infermodel.evaluate(SCENARIO, {"hardware.kernel_system": "a100_sxm",
                                            "levers.quantization.linear": "bf16"})
    assert result["decode_kernel_attention_score_time"] > 0
    assert not any("attention" in str(w) and "fell back" in str(w) for w in result.warnings)


def test_the_first_token_takes_the_stated_way_through_the_server(result):
    # No table times a request outside the iterations: ttft (and e2e_latency) add the
    # scenario's efficiency.request_overhead, the step does not; unstated, none is added
    # and a warning gives its size on NVIDIA's measured deployments.
    assert any("efficiency.request_overhead" in str(w) and "257 ms (SGLang)" in str(w)
               for w in result.warnings)
    stated = infermodel.evaluate(SCENARIO, {"efficiency.request_overhead": "10 ms"})
    assert stated["request_overhead"] == pytest.approx(0.010)
    assert stated["ttft"] == pytest.approx(stated["prefill_time_at_batch_1"] + 0.010, rel=1e-12)
    assert stated["e2e_latency"] == pytest.approx(result["e2e_latency"] + 0.010, rel=1e-12)
    # The batch's prefill pass and the card time it costs stay the engine's.
    assert stated["ttft_batch"] == result["ttft_batch"]
    assert stated["tpot"] == result["tpot"]
    # A measured prefill rate's model holds the stated time already: not counted twice.
    rated = infermodel.evaluate(SCENARIO, {"efficiency.request_overhead": "100 ms",
                                           "efficiency.prefill_rate": "10000 token/s"})
    assert rated["request_overhead"] == 0.0
    assert rated["ttft"] == pytest.approx(1024 / 10000 + 0.100, rel=1e-12)
    assert "efficiency.request_overhead" in stated.explain("request_overhead").text()
    assert not any("(SGLang)" in str(w) for w in stated.warnings)
    # Without measured kernels the field still belongs to the measured-rates model.
    roofline = {"efficiency.kernels": "roofline", "efficiency.request_overhead": "10 ms"}
    with pytest.raises(infermodel.InfermodelError, match="prefill_rate"):
        infermodel.evaluate(SCENARIO, roofline)


def test_a_prompt_beside_the_running_decodes_waits_for_their_attention(result):
    # vLLM V1, the scenario's engine, prefills a new prompt in the iteration that carries
    # the running decodes: their attention over their cached positions lengthens it, the
    # other 15 of the 16 sequences' share of the decode step's attention operators.
    assert result["engine_mixed_batches"] == 1
    attention = (result["decode_kernel_attention_score_time"]
                 + result["decode_kernel_attention_value_time"])
    assert attention > 0
    assert result["mixed_iteration_decode_time"] == pytest.approx(15 / 16 * attention, rel=1e-12)
    # None at one sequence, none where prefill iterations run apart (SGLang's default).
    assert infermodel.evaluate(SCENARIO, {"workload.batch": 1})[
        "mixed_iteration_decode_time"] == 0
    apart = infermodel.evaluate(SCENARIO, {"efficiency.mixed_batches": False})
    assert apart["engine_mixed_batches"] == 0 and apart["mixed_iteration_decode_time"] == 0
    # A request alone never waits for it.
    assert apart["ttft"] == result["ttft"]


def test_the_way_through_the_server_grows_with_the_prompt_where_stated(result):
    # efficiency.request_overhead_per_token adds its time for each prompt token (the
    # scenario's 1,024, and 4,096 set): by hand, 10 ms + 20 µs × 1,024 = 30.48 ms.
    stated = infermodel.evaluate(SCENARIO, {"efficiency.request_overhead": "10 ms",
                                            "efficiency.request_overhead_per_token": "20 us"})
    assert stated["request_overhead"] == pytest.approx(0.010 + 20e-6 * 1024, rel=1e-12)
    assert stated["ttft"] == pytest.approx(stated["prefill_time_at_batch_1"] + 0.03048, rel=1e-12)
    assert stated["ttft_batch"] == result["ttft_batch"] and stated["tpot"] == result["tpot"]
    longer = infermodel.evaluate(SCENARIO, {"efficiency.request_overhead": "10 ms",
                                            "efficiency.request_overhead_per_token": "20 us",
                                            "workload.prompt_tokens": 4096})
    assert longer["request_overhead"] == pytest.approx(0.010 + 20e-6 * 4096, rel=1e-12)
    assert "measured_request_overhead_per_token*prompt_tokens" in (
        stated.explain("request_overhead").text().replace(" ", ""))
    # Alone it is the whole time (no fixed part stated, no warning that none is).
    alone = infermodel.evaluate(SCENARIO, {"efficiency.request_overhead_per_token": "20 us"})
    assert alone["request_overhead"] == pytest.approx(20e-6 * 1024, rel=1e-12)
    assert not any("(SGLang)" in str(w) for w in alone.warnings)
    assert "request_overhead_per_token × prompt_tokens" in alone.explain("request_overhead").text()
    # It belongs to the measured kernels' own prefill: the roofline has no request path,
    # and a measured prefill rate holds what grows with the prompt (with or without
    # measured kernels), so stating it there is an error, not a value quietly unread.
    for other, says in (({"efficiency.kernels": "roofline"}, "read only when"),
                        ({"efficiency.kernels": "roofline", "efficiency.request_overhead": "10 ms",
                          "efficiency.prefill_rate": "10000 token/s"}, "read only when"),
                        ({"efficiency.request_overhead": "10 ms",
                          "efficiency.prefill_rate": "10000 token/s"}, "prefill rate")):
        with pytest.raises(infermodel.InfermodelError, match=says):
            infermodel.evaluate(SCENARIO, {**other,
                                           "efficiency.request_overhead_per_token": "20 us"})


def test_the_engines_host_time_per_iteration_is_its_generations_preset(result, kernels):
    # No kernel table times the engine's scheduler: unless the scenario states one, the
    # host time is the one its engine generation's preset was fitted to (vLLM V1's here,
    # not the V0 engine's); a stated one replaces it, once per iteration.
    import tomllib

    from conftest import ROOT
    from infermodel.units import parse_quantity

    preset = tomllib.loads((ROOT / "plugins" / "infermodel_builtins" / "presets" / "efficiency"
                            / "vllm.toml").read_text())
    fitted = parse_quantity(preset["efficiency"]["step_overhead"], "s")
    assert result["step_overhead"] == pytest.approx(fitted, rel=1e-12)
    assert 0 < result["step_overhead"] < 1e-3
    assert "'vllm' efficiency preset" in str(result.explain("step_overhead"))
    stated = infermodel.evaluate(SCENARIO, {"efficiency.step_overhead": "250 us"})
    assert stated["step_overhead"] == pytest.approx(250e-6, rel=1e-12)
    assert stated["prefill_time"] == pytest.approx(
        stated["prefill_time_kernels"] + 250e-6 + stated["t0"], rel=1e-12)
    assert stated["decode_step_time"] - result["decode_step_time"] == pytest.approx(
        250e-6 - fitted, rel=1e-9)


def test_each_elementwise_launch_adds_the_systems_fixed_kernel_time(result, capsys):
    # No table times a norm or the embedding lookup: each keeps its bandwidth roofline,
    # and each launch (two norms a block, the final norm, the lookup) adds the fixed time
    # NVIDIA's system file states for a memory-bound kernel (its estimator's constant).
    import re

    from infermodel.cli import main

    text = (_data().parents[1] / "h200_sxm.yaml").read_text()
    constant = float(re.search(r"mem_empirical_constant_latency:\s*([0-9.eE+-]+)", text)[1])
    assert 1e-6 <= constant <= 1e-5
    assert result["elementwise_kernel_latency"] == constant
    assert main(["ops", str(SCENARIO), "--format", "json"]) == 0
    ops = {o["operator"]: o for o in json.loads(capsys.readouterr().out)["operators"]}
    launches = {"norms": 2 * result["layers"] + 1, "embedding": 1}
    for name, count in launches.items():
        assert ops[name]["charged_by"] == "roofline"
        assert ops[name]["charged"] == pytest.approx(ops[name]["time"] + count * constant,
                                                     rel=1e-9)
        assert result[f"decode_kernel_{name}_time"] == pytest.approx(ops[name]["charged"],
                                                                     rel=1e-9)
    # A card without measured tables keeps the bare roofline.
    other = infermodel.evaluate(SCENARIO, {"hardware.preset": "mi300x"})
    assert other["elementwise_kernel_latency"] == 0
    # TensorRT-LLM's all-reduce adds the residual and normalises: under tensor parallelism
    # only each pipeline stage's first norm is a kernel of its own; on one card every norm
    # is, and vLLM launches its norms apart from the all-reduce. Their roofline is one
    # rank's: the width is not split, so each of the T tensor cards normalises the whole
    # activation (the operator table's roofline over all cards, times T and the stages,
    # as the measured kernels are summed over every layer), the fused norms' share of it
    # moving nothing of its own.
    trt = {"efficiency.engine": "tensorrt-llm", "efficiency.engine_version": "1.3.0rc20"}
    tp2 = {"hardware.count": 2, "levers.parallelism.tensor": 2}
    staged = {**trt, "hardware.count": 4, "levers.parallelism.tensor": 2,
              "levers.parallelism.pipeline": 2}
    every = 2 * result["layers"] + 1

    def charged(overrides):
        assert main(["ops", str(SCENARIO), "--format", "json"]
                    + [f"--set={k}={v}" for k, v in overrides.items()]) == 0
        return next(o for o in json.loads(capsys.readouterr().out)["operators"]
                    if o["operator"] == "norms")

    for overrides, count, cards in ((trt, every, 1), ({**trt, **tp2}, 1, 2), (tp2, every, 2),
                                    (staged, 2, 4)):
        norms = charged(overrides)
        assert norms["charged"] == pytest.approx(
            cards * norms["time"] * count / every + count * constant, rel=1e-9)
    # Two cards without the parallelism lever split the GEMMs as tensor parallelism, and
    # each normalises the whole width too; the lab's parallel efficiency, which slows the
    # cards' summed bandwidth, does not slow one card's own norms.
    alone = charged({"hardware.count": 2})
    assert alone["charged"] == pytest.approx(2 * alone["time"] + every * constant, rel=1e-9)
    assert charged({**tp2, "levers.parallelism.communication": "efficiency"})["charged"] == (
        pytest.approx(charged(tp2)["charged"], rel=1e-12))


def test_the_activation_and_the_rotary_embedding_are_kernels_of_their_own(result, gemm):
    # Between a dense block's two GEMMs every engine launches the activation (SiLU·gate:
    # reads the 2·d_ff gate and up values of a token and writes d_ff, 16-bit); vLLM and
    # SGLang launch the rotary embedding of q and k (reads and writes (h + g)·d_h) before
    # attention, TensorRT-LLM applies it inside its attention op. No table measures
    # either: each is its roofline plus the system's fixed time per launch.
    # Llama 3.1 8B: 32 layers, d = 4096, d_ff = 14,336, 32 heads and 8 KV heads of 128.
    layers, batch, d_ff, width = 32, 16, 14336, (32 + 8) * 128
    fixed, bandwidth = result["elementwise_kernel_latency"], result["bandwidth"]
    rate = result["flops_effective_decode"]
    activation = max(4 * batch * d_ff * layers / rate,
                     2 * 3 * batch * d_ff * layers / bandwidth) + layers * fixed
    gemms = layers * (gemm(16.0, 2.0 * d_ff, 4096.0) + gemm(16.0, 4096.0, 1.0 * d_ff))
    assert result["decode_kernel_ffn_time"] == pytest.approx(gemms + activation, rel=1e-12)
    rotary = max(3 * batch * width * layers / rate,
                 2 * 2 * batch * width * layers / bandwidth) + layers * fixed
    qkv = layers * gemm(16.0, 4096.0 + 2 * 1024, 4096.0)
    assert result["decode_kernel_qkv_projection_time"] == pytest.approx(qkv + rotary,
                                                                        rel=1e-12)
    assert rotary > 30 * 3e-6 and activation > 30 * 3e-6
    trt = infermodel.evaluate(SCENARIO, {"efficiency.engine": "tensorrt-llm",
                                         "efficiency.engine_version": "1.3.0rc20"})

    def formula(evaluated, name):
        text = infermodel.explain(evaluated, name).text()
        return next(line for line in text.splitlines() if "formula:" in line)

    for evaluated, launches in ((result, True), (trt, False)):
        assert "elementwise_kernel_latency" in formula(evaluated, "decode_kernel_ffn_time")
        assert ("elementwise_kernel_latency" in formula(
            evaluated, "decode_kernel_qkv_projection_time")) is launches


def test_the_prefill_attention_at_a_measured_point(kernels):
    result = infermodel.evaluate(SCENARIO, {"workload.batch": 1})
    row = _latency_s(CONTEXT, kv_cache_dtype="bfloat16", batch_size=1, isl=1024, num_heads=32,
                     num_key_value_heads=8, head_dim=128, window_size=0)
    # attention_score and attention_value share the fused kernel half and half.
    assert result["prefill_kernel_attention_score_time"] == pytest.approx(32 * row / 2, rel=1e-12)


def test_the_derivation_names_the_table_and_the_grid_points(result):
    text = infermodel.explain(result, "decode_kernel_qkv_projection_time").text()
    assert "h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet" in text
    assert "grid m 16" in text and "of it" in text


def test_a_sweep_gives_each_points_evaluation():
    batches = [1, 3, 16, 100, 700, 5000, 40000]
    swept = infermodel.sweep(SCENARIO, {"workload.batch": batches}, quantities=["tpot", "ttft"])
    for i, b in enumerate(batches):
        point = infermodel.evaluate(SCENARIO, {"workload.batch": b})
        # To the bit: the array and scalar paths do the same operations.
        assert swept["tpot"][i] == point["tpot"] and swept["ttft"][i] == point["ttft"]


def test_an_unmapped_card_falls_back_with_a_named_warning():
    result = infermodel.evaluate(SCENARIO, {"hardware.preset": "mi300x"})
    warnings = [str(w) for w in result.warnings]
    assert any("fell back to the roofline" in w and "hardware.kernel_system unset" in w
               for w in warnings), warnings


def test_an_unknown_version_lists_the_versions_held():
    with pytest.raises(InfermodelError, match="0.24.0") as caught:
        infermodel.evaluate(SCENARIO, {"efficiency.engine_version": "0.99"})
    assert "engine_version" in str(caught.value)


def test_a_version_older_than_a_family_takes_its_oldest_later_table_with_a_warning():
    # H200's vLLM tables hold 0.19.0 for the MoE and collective families, but GEMM and
    # attention only from 0.24.0: at a stated 0.19.0 those take 0.24.0's rows (the same
    # as at 0.24.0 itself), never the roofline, and the result says which releases.
    older = infermodel.evaluate(SCENARIO, {"efficiency.engine_version": "0.19.0"})
    newest = infermodel.evaluate(SCENARIO, {"efficiency.engine_version": "0.24.0"})
    name = "decode_kernel_qkv_projection_time"
    assert older[name] == pytest.approx(newest[name], rel=1e-12)
    assert older[name] == pytest.approx(32 * _latency_s(GEMM, gemm_dtype="fp8", m=16, n=6144,
                                                        k=4096) + _rotary(older), rel=1e-9)
    warnings = [str(w) for w in older.warnings]
    assert not any("fell back to the roofline" in w for w in warnings), warnings
    stand_in = [w for w in warnings if "no table of the stated 0.19.0 or older" in w]
    assert len(stand_in) == 2 and all("vllm 0.24.0's tables" in w for w in stand_in), warnings
    assert any(w.startswith("measured kernels: in decode qkv_projection") for w in stand_in)
    assert not any("no table of the stated" in str(w) for w in newest.warnings)
    text = infermodel.explain(older, name).text()
    assert "gemm/vllm/0.24.0/gemm_perf.parquet" in text
    assert "release 0.24.0's, standing in for the stated 0.19.0" in text
    # The oldest later release, not the newest: B200's vLLM attention tables are 0.22.0's
    # and 0.24.0's, so at 0.19.0 attention reads 0.22.0's rows (as a stated 0.22.0 does),
    # while the GEMMs, measured at 0.24.0 only, read those.
    b200 = {"hardware.preset": "b200"}
    at = {v: infermodel.evaluate(SCENARIO, {**b200, "efficiency.engine_version": v})
          for v in ("0.19.0", "0.22.0", "0.24.0")}
    score = "decode_kernel_attention_score_time"
    assert at["0.19.0"][score] == pytest.approx(at["0.22.0"][score], rel=1e-12)
    assert at["0.19.0"][score] != pytest.approx(at["0.24.0"][score], rel=1e-3)
    assert at["0.19.0"][name] == pytest.approx(at["0.24.0"][name], rel=1e-12)
    b200_warnings = [str(w) for w in at["0.19.0"].warnings]
    assert any("attention_score" in w and "vllm 0.22.0's tables" in w for w in b200_warnings)


def test_a_category_no_release_serves_names_the_newest_tables_reason():
    from infermodel.kernels import Lookup, lookup

    # B200's SGLang 0.5.10 and 0.5.16 MoE folders hold only the DeepEP tables; 0.5.14's
    # holds the grouped-MoE table, without a "w4afp8" format: the reason given is why that
    # table does not serve it (the formats it holds), not a folder's missing table.
    found = lookup("b200_sxm", "sglang", "0.5.12", "moe", dtype="w4afp8", distribution="balanced")
    assert not isinstance(found, Lookup)
    assert found.reason.startswith("no moe table of sglang 0.5.12 or older serves these kernels, "
                                   "nor a later one: b200_sxm/moe/sglang/0.5.14/moe_perf.parquet "
                                   "has no rows where"), found.reason
    assert "nvfp4" in found.reason and "has no moe_perf table" not in found.reason


def test_an_unknown_schema_is_refused_with_one_message(tmp_path, kernels):
    from infermodel.kernels import source

    (tmp_path / "collection_meta.yaml").write_text("schema_version: 99\n", encoding="utf-8")
    folder = source.Folder("h200_sxm", "gemm", "vllm", "9.9", tmp_path, ("gemm_perf",))
    with pytest.raises(InfermodelError, match="schema_version 99") as caught:
        source.read(folder, "gemm_perf", ("m",))
    assert 'pip install "infermodel[kernels]"' in str(caught.value)


def test_without_the_extra_one_message_names_the_install(monkeypatch):
    from infermodel.kernels import source

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "aiconfigurator_core" else real(name, *a))
    source.root.cache_clear()
    try:
        with pytest.raises(InfermodelError) as caught:
            infermodel.load_scenario(SCENARIO)
    finally:
        source.root.cache_clear()
    message = str(caught.value)
    assert 'pip install "infermodel[kernels]"' in message and "efficiency.kernels" in message


def test_measured_kernels_beside_the_physical_model_is_one_message():
    # Both would price every operator (and both define the engine's host time).
    with pytest.raises(InfermodelError) as caught:
        infermodel.evaluate(SCENARIO, {"efficiency.model": "physical"})
    message = str(caught.value)
    assert "efficiency.model" in message and 'remove efficiency.model = "physical"' in message
    assert "defined by both" not in message
    # An efficiency preset that writes model = "physical" is named as where it came from.
    with pytest.raises(InfermodelError) as caught:
        infermodel.evaluate(SCENARIO, {"efficiency.preset": "vllm"})
    message = str(caught.value)
    assert "efficiency.preset" in message and "remove efficiency.preset" in message


def test_the_simulators_iteration_is_the_scenarios_step_at_the_same_counts(result):
    from infermodel.analyses.simulation.plan import iteration_cost
    from infermodel.simulator import CostModel

    measured = iteration_cost(result.scenario, result.values)
    assert measured is not None and measured.plugin == "measured_kernels"
    cost = CostModel.from_quantities(result.values, measured=measured)
    # 16 decodes at 1,536 cached-plus-new positions each: the scenario's decode step.
    decode = cost.iteration_time([1535] * 16, [])
    assert decode == pytest.approx(result["decode_step_time"], rel=1e-9)
    # One prompt of 1,024 tokens alone: the scenario's time to first token less the
    # request's way through the server, which is no iteration (the embedding
    # rows it reads aside, a few bytes of difference).
    assert cost.iteration_time([], [(1024, 0)]) == pytest.approx(
        result["ttft"] - result["request_overhead"], rel=1e-3)
    # A chunk after cached tokens costs more attention than a fresh one of its size.
    assert cost.iteration_time([], [(512, 512)]) > cost.iteration_time([], [(512, 0)])
    # The vectorised form gives the same numbers as the scalar one.
    times = cost.iteration_times(np.array([16.0, 17.0]), np.array([16 * 1536.0, 16 * 1536.0 + 17]),
                                 np.array([16 * 1535.0, 16 * 1535.0 + 16]),
                                 np.array([16.0, 17.0]), None, np.array([16.0, 17.0]))
    assert times[0] == pytest.approx(decode, rel=1e-12)
    assert any("measured kernels (h200_sxm, vllm 0.24.0)" in line for line in cost.describe())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=st.text(max_size=20), version=st.text(max_size=20))
def test_any_card_or_version_text_is_one_message_or_a_result(system, version):
    overrides = {"hardware.kernel_system": system, "efficiency.engine_version": version}
    try:
        result = infermodel.evaluate(SCENARIO, overrides)
    except InfermodelError as exc:
        assert "\n" not in str(exc) or "errors encountered" in str(exc)
        return
    assert result["tpot"] > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(1, 10**7), prompt=st.integers(1, 10**6), output=st.integers(1, 10**6))
def test_every_workload_gives_finite_positive_measured_times(batch, prompt, output):
    result = infermodel.evaluate(SCENARIO, {"workload.batch": batch, "workload.prompt_tokens": prompt,
                                            "workload.output_tokens": output})
    for name in ("tpot", "ttft", "ttft_batch", "decode_time_kernels", "prefill_time_kernels"):
        assert math.isfinite(result[name]) and result[name] > 0, name


def test_the_custom_all_reduce_scales_with_its_gpus_as_one_synchronisation():
    # The engines' custom all-reduce synchronises every GPU at once through the switch
    # (one-shot, or two-shot above a size): its fixed time does not grow with n as a
    # ring's 2(n − 1) steps do. H200, vLLM 0.24.0's custom all-reduce table: 1,024
    # elements take 1.05× as long on 8 GPUs as on 4, 4,194,304 elements 0.93×. The
    # roofline a missing GPU count is scaled by: 2·(n − 1)/n of the 2-byte message over a
    # 450 GB/s link, plus two 1 µs steps.
    from infermodel.kernels.rooflines import ring

    roofline, _ = ring(2, 2, "two-shot all-reduce", fixed_steps=True)({}, {"intra_node_bw": 450e9})

    def by_hand(n, elements):
        return 2 * (n - 1) / n * 2 * elements / 450e9 + 2e-6

    for elements in (1024, 4194304):
        measured = [_latency_s("comm/vllm/0.24.0/custom_allreduce_perf.parquet", num_gpus=n,
                               message_size=elements) for n in (4, 8)]
        ratio = roofline({"gpus": 8, "elements": elements}) / roofline({"gpus": 4, "elements": elements})
        assert ratio == pytest.approx(by_hand(8, elements) / by_hand(4, elements), rel=1e-12)
        assert abs(math.log(ratio * measured[0] / measured[1])) < math.log(1.3)


def test_the_all_to_all_scales_with_its_ranks_as_one_exchange():
    # Each rank writes to all its peers at once, then signals them: two link latencies
    # whatever the ranks, the bytes in the dispatch's wire format (NVFP4 4 bits and a
    # scale per 16, FP8 one byte, else two). GB200, TensorRT-LLM's one-sided NVLink rows
    # at 64 tokens a rank: 8 → 32 ranks takes 1.16× (dispatch) and 1.30× (combine); a
    # latency per peer (the ring's) would make it 2.8×.
    from infermodel.kernels.rooflines import all_to_all, dispatch

    card = {"intra_node_bw": 900e9}
    shape = {"tokens": 64, "topk": 8, "hidden": 7168}

    def by_hand(ep, wire):
        return 64 * 8 * 7168 * wire * (ep - 1) / ep / 900e9 + 2e-6

    combine, _ = all_to_all({"dtype": "nvfp4"}, card)
    for dtype, wire in (("nvfp4", 0.5625), ("fp8", 1.0), ("bfloat16", 2.0)):
        sent, _ = dispatch({"dtype": dtype}, card)
        for ep in (8, 32):
            assert sent({**shape, "ep": ep}) == pytest.approx(by_hand(ep, wire), rel=1e-12)
    assert combine({**shape, "ep": 32}) == pytest.approx(by_hand(32, 2.0), rel=1e-12)

    path = (Path(next(iter(importlib.util.find_spec("aiconfigurator_core").submodule_search_locations)))
            / "systems/data/gb200/comm/trtllm/1.3.0rc10/trtllm_alltoall_perf.parquet")
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()

    def measured(op, ep):
        return min(r["latency"] for r in rows if r["op_name"] == f"alltoall_{op}"
                   and r["kernel_source"] == "NVLinkOneSided" and r["num_tokens"] == 64
                   and r["moe_ep_size"] == ep)

    for op, roofline in (("dispatch", dispatch({"dtype": "nvfp4"}, card)[0]), ("combine", combine)):
        ratio = roofline({**shape, "ep": 32}) / roofline({**shape, "ep": 8})
        assert abs(math.log(ratio * measured(op, 8) / measured(op, 32))) < math.log(1.3)


def test_an_nvfp4_checkpoints_16_bit_latent_projections_read_the_bf16_gemms(tmp_path, write_scenario):
    # NVIDIA's NVFP4 DeepSeek checkpoints leave q_a, q_b, kv_a_proj_with_mqa and kv_b out
    # of the format (ModelOpt's hf_quant_config.json): those GEMMs are BF16, the output
    # projection and the experts NVFP4; the module measured whole (one format) is refused.
    from test_hf_config import _modelopt_checkpoint

    config = _modelopt_checkpoint(tmp_path)
    path = write_scenario(f"""
[model]
hf_config = "{config}"
[hardware]
preset = "gb200"
count = 4
[workload]
batch = 8
prompt_tokens = 1024
output_tokens = 64
[efficiency]
kernels = "measured"
engine = "trtllm"
[levers.quantization]
activations = "fp4"
[levers.parallelism]
tensor = 4
""")
    r = infermodel.evaluate(path)
    d, rq, h, nope, rope, rkv, v = 7168, 1536, 128, 128, 64, 512, 128
    latent = d * rq + rq * h * (nope + rope) + d * (rkv + rope) + rkv * h * (nope + v)
    assert r["params_unquantized"] == 61 * latent
    formula = {name: str(r.quantity(f"decode_kernel_{name}_time").expression)
               for name in ("qkv_projection", "output_projection", "ffn")}
    assert "bfloat16" in formula["qkv_projection"] and "nvfp4" not in formula["qkv_projection"]
    assert "nvfp4" in formula["output_projection"] and "nvfp4" in formula["ffn"]
    assert "latent_generation" not in formula["qkv_projection"]
    # Stated in the lever, the format applies to every block linear.
    every = infermodel.evaluate(path, {"levers.quantization.linear": "nvfp4"})
    assert every.values.get("params_unquantized", 0) == 0
    assert "nvfp4" in str(every.quantity("decode_kernel_qkv_projection_time").expression)


def test_layer_wide_query_key_norms_add_a_measured_all_reduce_a_layer(tmp_path, write_scenario):
    # MiniMax-M2.5 under vLLM on four B200s: each attention layer all-reduces the tokens'
    # query and key mean squares (8 bytes a token, four 16-bit elements of the table).
    from test_layers import MINIMAX_M2

    config = tmp_path / "config.json"
    config.write_text(json.dumps(MINIMAX_M2))
    text = f"""
[model]
hf_config = "{config}"
[hardware]
preset = "b200"
count = 4
[workload]
batch = 4
prompt_tokens = 1024
output_tokens = 64
[efficiency]
kernels = "measured"
engine = "vllm"
[levers.parallelism]
tensor = 4
"""
    r = infermodel.evaluate(write_scenario(text))
    head = infermodel.evaluate(write_scenario(text.replace('"\n[hardware]', '"\nqk_norm_scope = "head"\n[hardware]'),
                                              "head.toml"))
    formula = str(r.quantity("decode_kernel_all_reduce_time").expression)
    assert "kv_layers*k_ar_" in formula and "(4*batch, kernel_tensor_degree)" in formula
    assert "kv_layers" not in str(head.quantity("decode_kernel_all_reduce_time").expression)
    added = r["decode_kernel_all_reduce_time"] - head["decode_kernel_all_reduce_time"]
    assert 62 * 1e-6 < added < 62 * 30e-6   # a latency-bound all-reduce a layer: µs each
    # The step grows by it, by one more elementwise launch a layer (the mean squares
    # before the all-reduce and the scaling after it, where vLLM normalises per-head
    # queries and keys in one kernel) and by the wider norms' few kB of weights.
    launch = r["elementwise_kernel_latency"]
    assert r["tpot"] - head["tpot"] == pytest.approx(added + 62 * launch, rel=1e-3)


def test_a_kernels_weight_class_resolves_or_says_why_not():
    # The groups and the experts follow the block linears unless the lever or the
    # checkpoint gives them their own format; a name no class has is a reason, which keeps
    # the kernel at its roofline with a warning rather than reading the 16-bit tables.
    from infermodel_builtins.formats import NAMED_FORMATS as F
    from infermodel_builtins.kernel_dtypes import weight_class_format

    formats = {"linear": F["nvfp4"], "embedding": F["bf16"], "norm": F["bf16"],
               "latent": F["bf16"]}
    assert weight_class_format(formats, "experts") == F["nvfp4"]
    assert weight_class_format(formats, "attention") == F["nvfp4"]
    assert weight_class_format(formats, "latent") == F["bf16"]
    assert weight_class_format(formats, None) == F["bf16"]
    assert weight_class_format({}, "linear") == F["bf16"]
    assert "unknown weight class 'expert'" in weight_class_format(formats, "expert")


MXFP4_MOE = "moe/trtllm/1.3.0rc20/moe_perf.parquet"


def _moe_row(tokens: int, tp: int, ep: int) -> float:
    """gpt-oss-120b's expert layer (hidden 2,880, inter 2,880, top-4 of 128), MXFP4
    weights with 16-bit activations, in TensorRT-LLM's H200 table (seconds).
    """
    return _latency_s(MXFP4_MOE, moe_dtype="w4a16_mxfp4", hidden_size=2880, inter_size=2880,
                      topk=4, num_experts=128, moe_tp_size=tp, moe_ep_size=ep,
                      num_tokens=tokens, distribution="power_law_1.01")


@pytest.mark.parametrize("tp", [2, 8])
def test_a_moe_layout_no_table_measured_reads_the_one_that_splits_the_experts_alike(kernels, tp):
    # The table measures gpt-oss's experts at TP 1 only (EP 1 to 128). Split 8 ways
    # within each expert, a GPU holds as many weights and does as many FLOPs as split 8
    # ways over the experts: the roofline is the same, so the time is the TP 1, EP 8
    # row's itself (at TP 2 the TP 1, EP 2 row's). At a few tokens the TP 1 row scaled
    # by the roofline (an 8th of it) is far less than that measured layout.
    assert not _rows(MXFP4_MOE, moe_dtype="w4a16_mxfp4", hidden_size=2880, moe_tp_size=tp)
    lookup = kernels.lookup("h200_sxm", "trtllm", "1.3.0rc23", "moe", dtype="w4a16_mxfp4",
                            distribution="power_law_1.01")
    shape = (2880.0, 2880.0, 4.0, 128.0)
    for tokens in (1, 16, 256):
        alike = _moe_row(tokens, 1, tp)
        assert lookup(float(tokens), *shape, float(tp), 1.0) == pytest.approx(alike, rel=1e-9)
        if tp == 8 and tokens <= 16:
            assert _moe_row(tokens, 1, 1) / tp < 0.6 * alike
    why = lookup.outside(16.0, *shape, float(tp), 1.0)
    assert f"tp {tp}, ep 1 is not measured: read as tp 1, ep {tp}" in why
    text = "\n".join(lookup.explain(16.0, *shape, float(tp), 1.0))
    assert f"measured configuration (hidden 2880, inter 2880, topk 4, experts 128, tp 1, ep {tp})" in text


def test_a_tensor_parallel_size_the_table_measured_for_other_shapes_keeps_the_nearest(kernels):
    # vLLM's H200 table measures TP 8 for another expert width (1,024), not MiniMax-M2's
    # 1,536: the nearest configuration keeps the point's own TP and EP.
    lookup = kernels.lookup("h200_sxm", "vllm", "0.24.0", "moe", dtype="fp8_block",
                            distribution="power_law_1.01")
    why = lookup.outside(64.0, 3072.0, 1536.0, 8.0, 256.0, 8.0, 1.0)
    assert "inter 1536 (measured 1024" in why and "read as" not in why


def _split_lookup(latency: dict[tuple[float, float, float], float]):
    """A MoE-like lookup over (width, tp, ep) with stand-in layouts: each configuration
    measured at 1 and 64 tokens (twice the time at 64), its roofline the same per GPU for
    every split of the weights.
    """
    from infermodel.kernels.catalog import SAME_SPLIT, same_split
    from infermodel.kernels.grids import Lookup

    configs = list(latency)
    rows = {"width": np.array([c[0] for c in configs for _ in (1, 2)]),
            "tp": np.array([c[1] for c in configs for _ in (1, 2)]),
            "ep": np.array([c[2] for c in configs for _ in (1, 2)]),
            "tokens": np.array([1.0, 64.0] * len(configs)),
            "latency": np.array([latency[c] * t for c in configs for t in (1.0, 2.0)])}

    def roofline(v):
        return v["width"] / (v["tp"] * v["ep"]) * np.sqrt(v["tokens"]) * 1e-4

    return Lookup(name="moe", arguments=("tokens", "width", "tp", "ep"),
                  configs=("width", "tp", "ep"), curve=("tokens",), table="demo",
                  categories={}, kernel_sources=("demo",), rows=rows, roofline=roofline,
                  describe_roofline=lambda v: "demo", stand_ins=same_split,
                  stand_in_rule=SAME_SPLIT)


def test_a_configuration_scaled_from_another_warns_of_the_fixed_time_it_scales_too():
    # One measured width (10): 5 ms at 1 token, 10 ms at 64, against a roofline of
    # width·√tokens·1e-4 s (1 ms and 8 ms). The least time above the roofline is 2 ms (at
    # 64 tokens). Width 5 reads it halved (r = 0.5): a fixed 2 ms would be halved too, so
    # the call may miss up to 2·(1 − 0.5) = 1 ms; width 20 doubles it (r = 2), counting up
    # to 2·(2 − 1) = 2 ms too much. A measured width says nothing of the kind.
    from infermodel.kernels.grids import Lookup

    rows = {"width": np.array([10.0, 10.0]), "tokens": np.array([1.0, 64.0]),
            "latency": np.array([5e-3, 10e-3])}
    lookup = Lookup(name="demo", arguments=("tokens", "width"), configs=("width",),
                    curve=("tokens",), table="demo", categories={}, kernel_sources=("demo",),
                    rows=rows, roofline=lambda v: v["width"] * np.sqrt(v["tokens"]) * 1e-4,
                    describe_roofline=lambda v: "demo")
    assert lookup(1.0, 5.0) == pytest.approx(2.5e-3, rel=1e-9)
    assert lookup(1.0, 20.0) == pytest.approx(10e-3, rel=1e-9)
    low, high = lookup.outside(1.0, 5.0), lookup.outside(1.0, 20.0)
    assert "least time above its roofline, 2 ms" in low and "may be up to 1 ms short" in low
    assert "may be up to 2 ms too long" in high
    assert lookup.outside(1.0, 10.0) is None
    # The ratio is the point's own: beyond the measured tokens the same halving holds.
    assert "may be up to 1 ms short" in lookup.outside(256.0, 5.0)
    # Where the point's time is not a positive number the bound is left out, never an error.
    assert lookup._fixed_note((5.0,), lookup.blend((5.0,)), [0.0]) == ""


def test_rows_less_work_the_engine_does_not_do_never_go_under_nothing_or_the_roofline():
    # Rows of this card with the work: 50 µs at 1 token, 100 µs at 1,024. Three cards
    # that hold the collection with the work: 40/90, 44/70 and 120/95 µs (median 44/90;
    # the mean, 68/85, would let one card's outlier carry), the card without it 10/94 µs.
    # At 1 token the work took 44 − 10 = 34 µs: 16 µs are left. At 1,024 the card
    # without it reads slower than the median with it (94 > 90): no work is taken off,
    # never time added. A point whose rows less the work would go under the roofline
    # (8 µs at 4,096 tokens, where 40 − 34 = 6 µs of rows are left) reads the roofline.
    # Arrays evaluate as points do.
    from infermodel.kernels.grids import Lookup
    from infermodel.kernels.rescaled import Offset

    def rows(latency):
        return Lookup(name="demo", arguments=("tokens",), configs=(), curve=("tokens",),
                      table="demo", categories={}, kernel_sources=("demo",),
                      rows={"tokens": np.array([1.0, 1024.0, 4096.0]),
                            "latency": np.array(latency)},
                      roofline=lambda v: np.asarray(v["tokens"]) / 4096.0 * 8e-6,
                      describe_roofline=lambda v: "demo")

    here = rows([50e-6, 100e-6, 40e-6])
    less = Offset(here, {"A": rows([40e-6, 90e-6, 38e-6]), "B": rows([44e-6, 70e-6, 38e-6]),
                         "D": rows([120e-6, 95e-6, 38e-6])},
                  rows([10e-6, 94e-6, 4e-6]), "C", here.roofline, here.describe_roofline,
                  "a chain no engine runs")
    assert less(1.0) == pytest.approx(16e-6, rel=1e-9)
    assert less(1024.0) == pytest.approx(100e-6, rel=1e-9)
    assert less(4096.0) == pytest.approx(8e-6, rel=1e-9)
    assert np.allclose(less(np.array([1.0, 1024.0, 4096.0])), [16e-6, 100e-6, 8e-6], rtol=1e-9)
    assert [less.point(t) for t in (1.0, 1024.0, 4096.0)] == pytest.approx([16e-6, 100e-6, 8e-6])
    lines = less.explain(4096.0)
    assert ("these rows less its time at this point, 34 µs: the median of the rows of A, B and "
            "D, 38 µs, less those of C, 4 µs") in lines[0]
    assert "the roofline: the rows less the work go under it" in lines[-1]
    assert less.outside(1.0) is None
    # Beyond every grid alike (8,192 tokens) the reason is given once, not once a card; a
    # card whose grid stops short (E, measured to 1,024 tokens) is named with its own.
    assert less.outside(8192.0) == here.outside(8192.0)
    partial = Offset(here, {"A": rows([40e-6, 90e-6, 38e-6]), "E": Lookup(
        name="demo", arguments=("tokens",), configs=(), curve=("tokens",), table="demo",
        categories={}, kernel_sources=("demo",),
        rows={"tokens": np.array([1.0, 1024.0]), "latency": np.array([44e-6, 70e-6])},
        roofline=here.roofline, describe_roofline=here.describe_roofline)},
        rows([10e-6, 94e-6, 4e-6]), "C", here.roofline, here.describe_roofline, "a chain")
    assert partial.outside(4096.0) == ("the work's time on E: tokens 4096 is 4× beyond the "
                                       "measured 1024: scaled by the roofline ratio")
    with pytest.raises(ValueError, match="at least one card"):
        Offset(here, {}, here, "C", here.roofline, here.describe_roofline, "nothing")


def test_rows_that_stop_at_one_node_grow_beyond_it_as_a_card_of_the_same_rack_measured():
    # This card's rows reach 4 GPUs (10 and 12 µs at 2 and 4 for a small message, 20 and
    # 30 µs for a large one); a card of the same rack design reaches 16 (its 4 → 8 GPUs:
    # 11 → 9 µs and 28 → 21 µs, a kernel that gets faster across nodes). At 8 GPUs the
    # own time at 4 grows by the other card's ratio: 12·9/11 and 30·21/28 µs; at 16 by
    # its 16/4 ratio. Inside the edge the own rows as they are; arrays evaluate as points
    # do. Beyond the other card's grid too (32 GPUs) both reasons are given.
    from infermodel.kernels.grids import Lookup
    from infermodel.kernels.rescaled import Extended
    from infermodel.kernels.rooflines import ring

    roofline, describe = ring(2, 2, "two-shot all-reduce", fixed_steps=True)({}, {"intra_node_bw": 9e11})

    def rows(cells):
        gpus, elements, latency = (np.array(c, dtype=float) for c in zip(*cells))
        return Lookup(name="demo", arguments=("elements", "gpus"), configs=("gpus",),
                      curve=("elements",), table="demo", categories={}, kernel_sources=("demo",),
                      rows={"gpus": gpus, "elements": elements, "latency": latency},
                      roofline=roofline, describe_roofline=describe)

    own = rows([(2, 1024, 10e-6), (2, 1 << 20, 20e-6), (4, 1024, 12e-6), (4, 1 << 20, 30e-6)])
    other = rows([(n, e, t) for n, small, large in ((2, 9e-6, 19e-6), (4, 11e-6, 28e-6),
                                                    (8, 9e-6, 21e-6), (16, 10e-6, 35e-6))
                  for e, t in ((1024, small), (1 << 20, large))])
    wider = Extended(own, other, "B", "gpus", "a faster kernel across nodes")
    assert wider.edge == 4.0
    assert wider(1024.0, 2.0) == pytest.approx(10e-6, rel=1e-12)
    assert wider(1024.0, 8.0) == pytest.approx(12e-6 * 9 / 11, rel=1e-12)
    assert wider(float(1 << 20), 8.0) == pytest.approx(30e-6 * 21 / 28, rel=1e-12)
    assert wider(float(1 << 20), 16.0) == pytest.approx(30e-6 * 35 / 28, rel=1e-12)
    grid = wider(np.array([1024.0, 1024.0, float(1 << 20)]), np.array([2.0, 8.0, 16.0]))
    assert np.allclose(grid, [10e-6, 12e-6 * 9 / 11, 30e-6 * 35 / 28], rtol=1e-12)
    # A scalar GPU count beside an array of sizes, and the other way round.
    assert np.allclose(wider(np.array([1024.0, float(1 << 20)]), 8.0),
                       [12e-6 * 9 / 11, 30e-6 * 21 / 28], rtol=1e-12)
    assert np.allclose(wider(1024.0, np.array([4.0, 8.0])), [12e-6, 12e-6 * 9 / 11], rtol=1e-12)
    assert wider.outside(1024.0, 4.0) is None
    assert wider.outside(1024.0, 8.0) == ("gpus 8 beyond these rows (measured to 4): grown from "
                                          "there as B's rows of the same release measure it "
                                          "(×0.818)")
    assert wider.outside(1024.0, 32.0).endswith(
        "; the growth on B: gpus 32 (measured 16, 2× away): scaled from the grid's edge by the "
        "roofline ratio")
    lines = wider.explain(1024.0, 8.0)
    assert lines[0] == ("a faster kernel across nodes: these rows at gpus 4, the most they reach, "
                        "grown to 8 by B's rows, 9 µs at 8 over 11 µs at 4 (×0.8182)")
    assert lines[-1].startswith("grown: latency 0.0098182 ms")
    assert wider.explain(1024.0, 2.0) == own.explain(1024.0, 2.0)


def test_a_stand_in_read_inside_the_grid_comes_before_a_nearer_one_read_at_its_edge():
    # Configurations (width, tp, ep): TP 4/EP 2 measured only at another width, TP 1/EP 8
    # at the point's own. The point (width 10, TP 8, EP 1) reads TP 1/EP 8 at its width.
    lookup = _split_lookup({(20.0, 4.0, 2.0): 5e-3, (10.0, 1.0, 8.0): 3e-3,
                            (10.0, 1.0, 1.0): 8e-3})
    assert lookup(1.0, 10.0, 8.0, 1.0) == pytest.approx(3e-3, rel=1e-12)
    assert lookup(64.0, 10.0, 8.0, 1.0) == pytest.approx(6e-3, rel=1e-12)
    assert "read as tp 1, ep 8" in lookup.outside(1.0, 10.0, 8.0, 1.0)
    # At width 20 only TP 4/EP 2 is measured: read there, the same per GPU.
    assert lookup(1.0, 20.0, 8.0, 1.0) == pytest.approx(5e-3, rel=1e-12)
    assert "read as tp 4, ep 2" in lookup.outside(1.0, 20.0, 8.0, 1.0)
    # A layout measured as such (TP 1, EP 1) is read by the grid's own rules.
    assert lookup(1.0, 10.0, 1.0, 1.0) == pytest.approx(8e-3, rel=1e-12)


def test_a_layout_measured_only_for_another_shape_still_reads_its_stand_in():
    # TP 8/EP 1 is measured at width 10 only; at width 100 the nearest configuration
    # (TP 1/EP 1, the point's TP 8 lost) would be scaled by an eighth, while TP 1/EP 8
    # at width 100 splits the experts as many ways and is read instead.
    lookup = _split_lookup({(10.0, 8.0, 1.0): 2e-3, (100.0, 1.0, 8.0): 3e-3,
                            (100.0, 1.0, 1.0): 8e-3})
    assert lookup(1.0, 100.0, 8.0, 1.0) == pytest.approx(3e-3, rel=1e-12)
    assert "read as tp 1, ep 8" in lookup.outside(1.0, 100.0, 8.0, 1.0)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([1.0, 2.0, 4096.0, 7168.0, math.nan]),
                               st.sampled_from([0.0, 8.0, 128.0])), max_size=40),
       seen=st.sets(st.tuples(st.sampled_from([1.0, 2.0, 4096.0]),
                              st.sampled_from([0.0, 8.0])), max_size=4))
def test_a_folders_unseen_configurations_are_those_a_row_by_row_check_finds(rows, seen):
    # The folders of a table are merged by configuration: a row is kept where no newer
    # folder measured its configuration. The check runs once per distinct configuration;
    # it must keep exactly the rows a row-by-row check keeps (a NaN never matches).
    from infermodel.kernels.families import _unseen

    named = {"latency": np.ones(len(rows)),
             "n": np.array([r[0] for r in rows], dtype=float),
             "k": np.array([r[1] for r in rows], dtype=float)}
    configs, fresh, keep = _unseen(named, ("n", "k"), seen)
    expected = [not any(all(a == b for a, b in zip(r, s)) for s in seen) for r in rows]
    assert keep.tolist() == expected
    distinct = {r for r in rows if not any(math.isnan(v) for v in r)}
    assert {c for c in configs if not any(math.isnan(v) for v in c)} == distinct
    assert [c for c, f in zip(configs, fresh) if f and not math.isnan(sum(c))] == [
        c for c in configs if c not in seen and not math.isnan(sum(c))]
    assert _unseen(named, (), set())[2].tolist() == [True] * len(rows)
    assert _unseen(named, (), {()})[2].tolist() == [False] * len(rows)


def test_configurations_of_many_columns_are_told_apart_past_the_integer_range():
    # Seventy two-valued columns: the columns' ranks as one integer would need 70 bits,
    # so the keys are renumbered on the way. Rows that differ only in the first column
    # must stay apart (without the renumbering, its bit is shifted out of 64).
    from infermodel.kernels.families import _unseen

    rng = np.random.default_rng(7)
    table = rng.integers(0, 2, size=(400, 70)).astype(float)
    table[200:] = table[:200]
    table[200:, 0] = 1.0 - table[:200, 0]  # each row's twin differs in the first column
    names = tuple(f"c{i}" for i in range(70))
    named = {"latency": np.ones(len(table)), **{n: table[:, i] for i, n in enumerate(names)}}
    seen = {tuple(row) for row in table[:20].tolist()}
    configs, fresh, keep = _unseen(named, names, seen)
    assert sorted(configs) == sorted({tuple(row) for row in table.tolist()})
    assert keep.tolist() == [tuple(row) not in seen for row in table.tolist()]
    assert fresh.tolist() == [c not in seen for c in configs]



class _Scaler:
    """A third-party operator: a GEMM the tables time and, beside it, an elementwise
    kernel of 1 GB, half of it this operator's (``share``), ``whole`` or not.
    """

    def __init__(self, name: str, whole: bool):
        self.name, self.whole = name, whole

    @hookimpl
    def infermodel_define_operators(self, scenario, define):
        define("decode", self.name, flops=2 * S.batch * S.d_model * 16,
               bytes=S.d_model * 16 * 2, description="a rank-16 projection and a scale",
               kernels=(Kernel("gemm", {"m": S.batch, "n": 16, "k": S.d_model}, label="down"),
                        Kernel("elementwise", {"flops": 0, "bytes": 1e9}, share=0.5,
                               whole=self.whole, label="scale")))


def test_a_plugins_whole_elementwise_kernel_is_one_cards(register_plugin):
    # Beside a measured GEMM, an elementwise kernel's roofline is the cards' even share of
    # its work (two cards: half of 1 GB at their summed bandwidth), or, declared whole (a
    # norm over the model width), one card's at its own; the operator takes its share (half).
    register_plugin(_Scaler("even_scale", False), "even_scale")
    register_plugin(_Scaler("whole_scale", True), "whole_scale")
    result = infermodel.evaluate(SCENARIO, {"hardware.count": 2, "levers.parallelism.tensor": 2})
    card = result["card_bandwidth"] * result["mbu"]
    even, whole = result["decode_kernel_even_scale_time"], result["decode_kernel_whole_scale_time"]
    assert whole - even == pytest.approx(0.5 * 1e9 / card - 0.5 * 1e9 / (2 * card), rel=1e-9)
    assert even > 0.5 * 1e9 / (2 * card)
