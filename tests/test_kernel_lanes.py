"""Which attention kernel a configuration reads where a table timed several: the one the
tables name as the engine's default (``attention_lane_defaults.yaml``, beside them), else
the kernel that measured the most configurations.

Golden values are read from the installed Parquet files by hand (pyarrow, no code of
infermodel.kernels): NVIDIA aiconfigurator-core 0.12, ``systems/data/<card>/attention``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None
    or importlib.util.find_spec("pyarrow") is None,
    reason='the measured kernel tables are not installed (pip install "infermodel[kernels]")')

FULL = float(2**30)


def _rows(card: str, engine: str, version: str, phase: str, **equal) -> list[dict]:
    import pyarrow.parquet as pq

    spec = importlib.util.find_spec("aiconfigurator_core")
    path = (Path(next(iter(spec.submodule_search_locations))) / "systems" / "data" / card
            / "attention" / engine / version / f"{phase}_attention_perf.parquet")
    return [r for r in pq.read_table(path).to_pylist()
            if all(r[k] == v for k, v in equal.items())]


def _fastest_ms(rows, kernel=None) -> float:
    return min(r["latency"] for r in rows if kernel is None or r["kernel_source"] == kernel)


def test_sglang_on_b200_prefills_with_the_triton_kernel_the_tables_name_as_its_default():
    # Qwen3.5-397B's full-attention layer on four B200s (8 query heads, 1 KV head of 256
    # per card, FP8 cache), one 8,192-token prompt: SGLang 0.5.14 runs Triton attention on
    # SM 100 (the tables' attention_lane_defaults.yaml), not the TRT-LLM kernel the same
    # table holds, which is about five times faster there.
    from infermodel.kernels.families import lookup

    rows = _rows("b200_sxm", "sglang", "0.5.14", "context", num_heads=8, num_key_value_heads=1,
                 head_dim=256, window_size=0, kv_cache_dtype="fp8", batch_size=1, isl=8192)
    triton, trtllm = _fastest_ms(rows, "triton"), _fastest_ms(rows, "trtllm_mha")
    assert triton > 3 * trtllm   # the fastest row of the cell would have been TRT-LLM's
    found = lookup("b200_sxm", "sglang", "0.5.14", "context_attention", kv_dtype="fp8")
    assert found.point(1, 8192, 8, 1, 256, FULL) == pytest.approx(triton * 1e-3, rel=1e-12)
    text = "\n".join(found.explain(1, 8192, 8, 1, 256, FULL))
    assert "kernel triton" in text
    assert "triton, the engine's default (sglang 0.5.14 on SM 100" in text


def test_a_configuration_the_default_did_not_measure_reads_the_densest_kernel():
    # Triton was measured for Qwen3.5's and MiMo's head widths only; a Llama-shaped layer
    # (8 query heads, 1 KV head of 128) reads trtllm_mha, the kernel that measured the
    # most configurations, not flashinfer, which measured fewer, even where it is faster.
    from infermodel.kernels.families import lookup

    rows = _rows("b200_sxm", "sglang", "0.5.14", "generation", num_heads=8,
                 num_key_value_heads=1, head_dim=128, window_size=0, kv_cache_dtype="fp8")
    assert {r["kernel_source"] for r in rows} == {"flashinfer", "trtllm_mha"}
    found = lookup("b200_sxm", "sglang", "0.5.14", "generation_attention", kv_dtype="fp8")
    cells = {}
    for r in rows:
        cells.setdefault((r["batch_size"], r["isl"] + r["step"]), {}).setdefault(
            r["kernel_source"], []).append(r["latency"])
    faster = [(b, c) for (b, c), k in cells.items() if len(k) == 2
              and min(k["flashinfer"]) < min(k["trtllm_mha"])]
    assert faster   # cells where taking the fastest row would have read flashinfer
    for batch, context in faster[:5]:
        expected = min(cells[(batch, context)]["trtllm_mha"]) * 1e-3
        assert found.point(batch, context, 8, 1, 128, FULL) == pytest.approx(expected, rel=1e-12)
    assert "kernel trtllm_mha" in "\n".join(found.explain(*faster[0], 8, 1, 128, FULL))


def test_sglang_on_hopper_reads_fa3_and_tensorrt_llm_the_fastest_row():
    from infermodel.kernels.families import lookup
    from infermodel.kernels.lanes import default_kernel

    assert default_kernel("h200_sxm", "sglang", "0.5.14") == ("fa3", "sglang 0.5.14 on SM 90")
    # A later release reads the entry at or below it; one older than every entry, none.
    assert default_kernel("b300_sxm", "sglang", "0.5.16")[0] == "triton"
    assert default_kernel("b200_sxm", "sglang", "0.5.9") == (None, "")
    # vLLM 0.24.0's entry is "default" (no kernel); TensorRT-LLM has none.
    assert default_kernel("b200_sxm", "vllm", "0.24.0") == (None, "")
    assert default_kernel("b200_sxm", "trtllm", "1.3.0rc20") == (None, "")

    found = lookup("h200_sxm", "sglang", "0.5.14", "generation_attention", kv_dtype="fp8")
    kernels: dict[tuple, set] = {}
    for r in _rows("h200_sxm", "sglang", "0.5.14", "generation", kv_cache_dtype="fp8"):
        config = (r["num_heads"], r["num_key_value_heads"], r["head_dim"],
                  float(r["window_size"]) if r["window_size"] else FULL)
        kernels.setdefault(tuple(float(v) for v in config), set()).add(r["kernel_source"])
    # H200's fa3 and Triton rows measured different configurations: each reads its own.
    assert {c: k.pop() for c, k in kernels.items() if len(k) == 1} == found.lanes
    assert "fa3, the engine's default (sglang 0.5.14 on SM 90" in found.lane_rule
    # Where the tables name no default, every cell keeps its fastest row.
    trt = lookup("b200_sxm", "trtllm", "1.3.0rc20", "context_attention", kv_dtype="fp8")
    assert trt.lanes == {} and trt.lane_rule == ""


def test_vllm_keeps_both_labels_of_its_flashinfer_back_end():
    # vLLM 0.24.0's B200 context table times FlashInfer under two labels for one
    # configuration: trtllmdecode for one-token prompts, trtllmprefill for longer ones.
    # Its entry in the tables' defaults names no kernel ("default"), so every cell keeps
    # its fastest row and the one-token cells are not dropped.
    from infermodel.kernels.families import lookup

    rows = _rows("b200_sxm", "vllm", "0.24.0", "context", num_heads=32, num_key_value_heads=8,
                 head_dim=128, kv_cache_dtype="bfloat16", batch_size=1, window_size=0)
    one = [r for r in rows if r["isl"] == 1]
    assert {r["kernel_source"] for r in one} == {"vllm_flashinfer_trtllmdecode"}
    assert {r["kernel_source"] for r in rows if r["isl"] >= 16} >= {"vllm_flashinfer_trtllmprefill"}
    found = lookup("b200_sxm", "vllm", "0.24.0", "context_attention", kv_dtype="bfloat16")
    assert found.lanes == {}
    assert found.point(1, 1, 32, 8, 128, FULL) == pytest.approx(_fastest_ms(one) * 1e-3, rel=1e-12)
    long = [r for r in rows if r["isl"] == 1024]
    assert found.point(1, 1024, 32, 8, 128, FULL) == pytest.approx(_fastest_ms(long) * 1e-3,
                                                                     rel=1e-12)


def test_the_defaults_file_is_read_line_by_line_and_never_across_engines():
    from infermodel.kernels.lanes import parse_defaults

    text = """# a comment
sglang:
  "0.5.14":
    # FIXME: verify
    90: fa3
    "100": 'triton'   # quoted
"vllm":
  0.24.0:
    100: default
other: {flow: mapping}
  "9.9":
    100: nope
"""
    assert parse_defaults(text) == {"sglang": {"0.5.14": {90: "fa3", 100: "triton"}},
                                    "vllm": {"0.24.0": {100: "default"}}}
    # A top-level key with a value of its own is no engine: nothing under it is read.
    assert parse_defaults("") == {} and parse_defaults("sglang: [fa3]\n  1: x\n") == {}


def test_the_choice_follows_the_default_then_the_most_configurations_then_the_name():
    from infermodel.kernels.lanes import choose

    configs = np.array([[1.0], [1.0], [2.0], [2.0], [3.0], [3.0], [4.0]])
    sources = np.array(["a", "b", "a", "c", "b", "c", "c"])
    # c measured three configurations, a and b two each (a before b by name).
    keep, picked, order = choose(configs, sources, None)
    assert order == ("c", "a", "b")
    assert picked == {(1.0,): "a", (2.0,): "c", (3.0,): "c", (4.0,): "c"}
    assert keep.tolist() == [True, False, False, True, False, True, True]
    # A named default comes first wherever it measured the configuration.
    keep, picked, order = choose(configs, sources, "b")
    assert order == ("b", "c", "a")
    assert picked == {(1.0,): "b", (2.0,): "c", (3.0,): "b", (4.0,): "c"}
    # A default the table does not hold changes nothing.
    assert choose(configs, sources, "z")[1] == choose(configs, sources, None)[1]


def test_other_families_keep_the_fastest_row_of_each_cell():
    from infermodel.kernels.families import lookup

    gemm = lookup("b200_sxm", "vllm", "0.24.0", "gemm", dtype="fp8_block")
    assert gemm.lanes == {} and gemm.lane_rule == ""
    assert "the fastest row of each cell)" in gemm.explain(64, 7168, 2048)[0]
