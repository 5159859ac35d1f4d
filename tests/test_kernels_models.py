"""Measured kernels for the layer model's other mixers and layouts: latent attention,
state-space and linear-attention layers, data-parallel attention and expert parallelism.

Every golden value is read from the installed Parquet files by hand in the test (pyarrow,
no code of infermodel.kernels): NVIDIA aiconfigurator-core 0.12,
``systems/data/h200_sxm/...``; the widths are the published configs' (cited per test).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import infermodel
from conftest import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None
    or importlib.util.find_spec("pyarrow") is None,
    reason='the measured kernel tables are not installed (pip install "infermodel[kernels]")')

DEEPSEEK = ROOT / "scenarios" / "deepseek-v3-8xh200-fp8.toml"
#: DeepSeek-V3 config.json: 61 layers, 128 heads; TP 8 gives 16 heads per GPU.
LAYERS, HEADS_PER_GPU = 61, 16
LATENT_OPS = ("qkv_projection", "attention_score", "attention_value", "output_projection")


def _data() -> Path:
    spec = importlib.util.find_spec("aiconfigurator_core")
    return Path(next(iter(spec.submodule_search_locations))) / "systems" / "data" / "h200_sxm"


def _rows(relative: str, **equal) -> list[dict]:
    import pyarrow.parquet as pq

    table = pq.read_table(_data() / relative).to_pylist()
    return [row for row in table if all(row[k] == v for k, v in equal.items())]


def _latency_s(relative: str, column: str = "latency", unit: float = 1e-3, **equal) -> float:
    rows = _rows(relative, **equal)
    assert rows, equal
    return min(row[column] for row in rows) * unit


def _deepseek(engine: str, **more):
    # 4,000 prompt tokens and 192 output tokens: a mean decode context of 4,096 positions,
    # a measured step of the generation tables.
    return infermodel.evaluate(DEEPSEEK, {"efficiency.kernels": "measured", "efficiency.engine": engine,
                                          "workload.prompt_tokens": 4000,
                                          "workload.output_tokens": 192, **more})


@pytest.fixture(scope="module")
def vllm():
    return _deepseek("vllm")


def test_latent_attention_in_vllm_is_the_module_row_times_the_layers(vllm):
    # DeepSeek-V3 FP8 (128×128 blocks: gemm_type fp8_block), bf16 cache, 16 heads per GPU,
    # batch 16 at 4,096 positions: the module row's step is the positions attended.
    row = _latency_s("mla/vllm/0.24.0/mla_generation_module_perf.parquet",
                     kv_cache_dtype="bfloat16", gemm_type="fp8_block", num_heads=HEADS_PER_GPU,
                     batch_size=16, step=4096)
    total = sum(vllm[f"decode_kernel_{op}_time"] for op in LATENT_OPS)
    assert total == pytest.approx(LAYERS * row, rel=1e-12)


def test_the_module_is_shared_among_its_operators_as_their_rooflines(vllm):
    from infermodel.engine.operators import operator_table

    rows = {r.name: r for r in operator_table(vllm, "decode")}
    ratios = [rows[op].time / rows[op].charged for op in LATENT_OPS]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-12)
    assert all(rows[op].charged_by == "measured" for op in LATENT_OPS)


def test_latent_prefill_in_vllm_is_the_context_module_row():
    result = _deepseek("vllm", **{"workload.batch": 1, "workload.prompt_tokens": 4096})
    row = _latency_s("mla/vllm/0.24.0/mla_context_module_perf.parquet", kv_cache_dtype="bfloat16",
                     gemm_type="fp8_block", num_heads=HEADS_PER_GPU, batch_size=1, isl=4096)
    total = sum(result[f"prefill_kernel_{op}_time"] for op in LATENT_OPS)
    assert total == pytest.approx(LAYERS * row, rel=1e-12)


def test_latent_attention_in_sglang_is_its_parts():
    # SGLang's tables hold no module: the attention core (a generation row's positions
    # are isl + step = 4,096) and the absorbed BMMs of 16 tokens over 16 heads (FP8, as
    # the FP8 checkpoint's absorbed weights are).
    result = _deepseek("sglang")
    core = _latency_s("mla/sglang/0.5.14/generation_mla_perf.parquet", kv_cache_dtype="bfloat16",
                      num_heads=HEADS_PER_GPU, batch_size=16, isl=1, step=4095)
    pre = _latency_s("mla_bmm/sglang/0.5.14/mla_bmm_perf.parquet", op_name="mla_gen_pre",
                     bmm_dtype="fp8", num_tokens=16, num_heads=HEADS_PER_GPU)
    post = _latency_s("mla_bmm/sglang/0.5.14/mla_bmm_perf.parquet", op_name="mla_gen_post",
                      bmm_dtype="fp8", num_tokens=16, num_heads=HEADS_PER_GPU)
    assert result["decode_kernel_attention_score_time"] == pytest.approx(
        LAYERS * (core / 2 + pre), rel=1e-12)
    assert result["decode_kernel_attention_value_time"] == pytest.approx(
        LAYERS * (core / 2 + post), rel=1e-12)
    assert not [w for w in result.warnings if "fell back" in str(w)]


def test_kimi_k2_at_tp8_reads_the_rows_of_8_heads():
    # Kimi-K2 (moonshotai/Kimi-K2-Instruct config.json): DeepSeek-V3's latent widths with
    # 64 heads; at TP 8 each GPU has 8 heads, a measured module configuration.
    result = infermodel.evaluate(DEEPSEEK, {"model.preset": "kimi-k2", "efficiency.kernels": "measured",
                                            "efficiency.engine": "vllm",
                                            "workload.prompt_tokens": 4000,
                                            "workload.output_tokens": 192})
    row = _latency_s("mla/vllm/0.24.0/mla_generation_module_perf.parquet",
                     kv_cache_dtype="bfloat16", gemm_type="fp8_block", num_heads=8,
                     batch_size=16, step=4096)
    total = sum(result[f"decode_kernel_{op}_time"] for op in LATENT_OPS)
    assert total == pytest.approx(result["layers"] * row, rel=1e-12)
