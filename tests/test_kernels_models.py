"""Measured kernels for the layer model's other mixers and layouts: latent attention,
state-space and linear-attention layers, data-parallel attention and expert parallelism.

Every golden value is read from the installed Parquet files by hand in the test (pyarrow,
no code of infermodel.kernels): NVIDIA aiconfigurator-core 0.12,
``systems/data/h200_sxm/...``; the widths are the published configs' (cited per test).
"""

from __future__ import annotations

import importlib.util
import re
import statistics
from pathlib import Path

import pytest

import infermodel
from conftest import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None
    or importlib.util.find_spec("pyarrow") is None,
    reason='the measured kernel tables are not installed (pip install "infermodel[kernels]")')

DEEPSEEK = ROOT / "scenarios" / "deepseek-v3-8xh200-fp8.toml"
LLAMA_8B = ROOT / "scenarios" / "measured-llama-3.1-8b-fp8-h200.toml"
#: DeepSeek-V3 config.json: 61 layers, 128 heads; TP 8 gives 16 heads per GPU.
LAYERS, HEADS_PER_GPU = 61, 16
LATENT_OPS = ("qkv_projection", "attention_score", "attention_value", "output_projection")


def _data() -> Path:
    spec = importlib.util.find_spec("aiconfigurator_core")
    return Path(next(iter(spec.submodule_search_locations))) / "systems" / "data" / "h200_sxm"


def _rows(relative: str, **equal) -> list[dict]:
    import pyarrow.parquet as pq

    table = pq.read_table((_data() / relative).resolve()).to_pylist()
    return [row for row in table if all(row[k] == v for k, v in equal.items())]


def _latency_s(relative: str, column: str = "latency", unit: float = 1e-3, **equal) -> float:
    rows = _rows(relative, **equal)
    assert rows, equal
    return min(row[column] for row in rows) * unit


#: vLLM 0.24's latent attention module rows (collection_meta.yaml of each folder): B200's
#: re-collected with the engine's fused norms (``norm_dispatch``); these Blackwell cards'
#: the earlier collection of the same release, whose norms ran as PyTorch's native chain,
#: as H200's did.
NATIVE_CHAIN_CARDS = ("b300_sxm", "gb200", "gb300")


def _card_latency_s(system: str, relative: str, **equal) -> float:
    import pyarrow.parquet as pq

    table = pq.read_table((_data().parent / system / relative).resolve()).to_pylist()
    rows = [row for row in table if all(row[k] == v for k, v in equal.items())]
    assert rows, (system, equal)
    return min(row["latency"] for row in rows) * 1e-3


def _less_native_chain(relative: str, **equal) -> float:
    """H200's vLLM decode module row less the native chain's time at the same cell: the
    median of :data:`NATIVE_CHAIN_CARDS`' rows less B200's re-collected row (never below
    zero).
    """
    earlier = statistics.median(_card_latency_s(c, relative, **equal) for c in NATIVE_CHAIN_CARDS)
    chain = earlier - _card_latency_s("b200_sxm", relative, **equal)
    return _latency_s(relative, **equal) - max(chain, 0.0)


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
    # batch 16 at 4,096 positions: the module row's step is the positions attended (on
    # H200 less the native chain's time, as the Blackwell cards' two collections measure it).
    row = _less_native_chain("mla/vllm/0.24.0/mla_generation_module_perf.parquet",
                             kv_cache_dtype="bfloat16", gemm_type="fp8_block",
                             num_heads=HEADS_PER_GPU, batch_size=16, step=4096)
    total = sum(vllm[f"decode_kernel_{op}_time"] for op in LATENT_OPS)
    assert total == pytest.approx(LAYERS * row, rel=1e-12)


def test_the_module_is_shared_among_its_operators_as_their_rooflines(vllm):
    from infermodel.engine.operators import operator_table

    rows = {r.name: r for r in operator_table(vllm, "decode")}
    ratios = [rows[op].time / rows[op].charged for op in LATENT_OPS]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-12)
    assert all(rows[op].charged_by == "measured" for op in LATENT_OPS)


def test_vllms_module_rows_of_the_native_norm_chain_give_way_to_a_same_architecture_card():
    # The package re-collected vLLM 0.24's latent attention module rows on B200 with the
    # engine's fused norms (its collection_meta.yaml states norm_dispatch for both tables);
    # B300's and H200's rows are the earlier collection, whose norms ran as PyTorch's
    # native chain. B300 (compute capability 10.3, as B200's 10.0) reads B200's rows
    # scaled by the roofline's ratio: memory-bound at 16 sequences of 4,096 positions,
    # B200's 7.7 TB/s over B300's 7.75 (their datasheets in the package). H200 has no
    # re-collected card of its architecture: its own decode rows less the native chain's
    # time, which the Blackwell cards hold both ways (the golden values above), and its
    # own prefill rows as measured, both stated.
    import pyarrow.parquet as pq

    table = _data().parent / "b200_sxm" / "mla/vllm/0.24.0/mla_generation_module_perf.parquet"
    rows = [r for r in pq.read_table(table).to_pylist()
            if (r["kv_cache_dtype"], r["gemm_type"], r["num_heads"], r["batch_size"], r["step"])
            == ("bfloat16", "fp8_block", HEADS_PER_GPU, 16, 4096)]
    row = min(r["latency"] for r in rows) * 1e-3
    b300 = _deepseek("vllm", **{"hardware.preset": "b300"})
    total = sum(b300[f"decode_kernel_{op}_time"] for op in LATENT_OPS)
    assert total == pytest.approx(LAYERS * row * 7.7e12 / 7.75e12, rel=1e-9)
    assert any("b200_sxm's rows, a card of the same architecture, stand in" in str(w)
               for w in b300.warnings)
    b200 = _deepseek("vllm", **{"hardware.preset": "b200"})
    assert sum(b200[f"decode_kernel_{op}_time"] for op in LATENT_OPS) == pytest.approx(
        LAYERS * row, rel=1e-12)
    assert not any("native chain" in str(w) for w in b200.warnings)
    h200 = _deepseek("vllm")
    assert any("mla_generation_module_perf rows on h200_sxm" in str(w) and "these rows are read "
               "less the native chain's time at each point as the compute-capability-10.x "
               "cards measure it (the median of the rows of b300_sxm, gb200 and gb300 of the same release "
               "less b200_sxm's re-collected ones" in str(w) for w in h200.warnings)
    assert any("mla_context_module_perf rows on h200_sxm" in str(w) and "grows with the tokens"
               in str(w) and "read as they are" in str(w) for w in h200.warnings)
    # GB300 (10.3) reads B200's 0.24 rows at 0.24, but its own 0.27 rows, collected after
    # B200's re-collection, at 0.27: only rows of the very release read are replaced.
    old = _deepseek("vllm", **{"hardware.preset": "gb300", "efficiency.engine_version": "0.24.0"})
    assert any("b200_sxm's rows, a card of the same architecture" in str(w) for w in old.warnings)
    new = _deepseek("vllm", **{"hardware.preset": "gb300", "efficiency.engine_version": "0.27.0"})
    assert not any("native chain" in str(w) for w in new.warnings)


def test_latent_prefill_in_vllm_is_the_context_module_row():
    result = _deepseek("vllm", **{"workload.batch": 1, "workload.prompt_tokens": 4096})
    # (H200's own row as measured: the native chain's time in prefill grows with the
    # tokens at the card's bandwidth, so Blackwell's two collections do not carry.)
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
    row = _less_native_chain("mla/vllm/0.24.0/mla_generation_module_perf.parquet",
                             kv_cache_dtype="bfloat16", gemm_type="fp8_block", num_heads=8,
                             batch_size=16, step=4096)
    total = sum(result[f"decode_kernel_{op}_time"] for op in LATENT_OPS)
    assert total == pytest.approx(result["layers"] * row, rel=1e-12)


def test_an_all_reduce_beyond_one_gb200_tray_grows_as_gb300s_rows_measure_it():
    # TensorRT-LLM 1.3.0rc20's custom all-reduce rows on GB200 stop at 4 GPUs (one tray
    # of the NVL72; gb200.yaml: 4 GPUs a node, 72 a rack, NVLink at 900 GB/s beyond the
    # node as within). GB300's of the same release reach 16 and name the kernel there
    # (TRTLLM_MNNVL_oneshot/twoshot). Llama-3.1-8B (d_model 4,096, 32 layers: two
    # all-reduces a layer) at TP 8 and 64 sequences: a message of 262,144 elements, a
    # measured size. GB200's row at 4 GPUs times GB300's 8/4.
    import pyarrow.parquet as pq

    def cell(system, gpus, engine="trtllm/1.3.0rc20"):
        table = _data().parent / system / f"comm/{engine}/custom_allreduce_perf.parquet"
        return min(r["latency"] for r in pq.read_table(table).to_pylist()
                   if r["num_gpus"] == gpus and r["message_size"] == 262144) * 1e-3

    # The rows name their kernel at each GPU count: the same at the edge, another beyond.
    from infermodel import kernels

    along = kernels.lookup("gb300", "trtllm", "1.3.0rc20", "all_reduce").kernels_along("gpus")
    assert along[4.0] == kernels.lookup("gb200", "trtllm", "1.3.0rc20",
                                        "all_reduce").kernels_along("gpus")[4.0] == {"TRTLLM"}
    assert along[8.0] == along[16.0] == {"TRTLLM_MNNVL_oneshot", "TRTLLM_MNNVL_twoshot"}
    grown = cell("gb200", 4) * cell("gb300", 8) / cell("gb300", 4)
    overrides = {"efficiency.kernels": "measured", "efficiency.engine": "trtllm",
                 "hardware.preset": "gb200", "hardware.count": 8,
                 "levers.parallelism.tensor": 8, "workload.batch": 64}
    result = infermodel.evaluate(LLAMA_8B, overrides)
    assert result["decode_kernel_all_reduce_time"] == pytest.approx(2 * 32 * grown, rel=1e-9)
    assert any("gpus 8 beyond these rows (measured to 4): grown from there as gb300's rows"
               in str(w) for w in result.warnings)
    # Within the tray the own rows, with nothing said.
    four = infermodel.evaluate(LLAMA_8B, {**overrides, "hardware.count": 4,
                                          "levers.parallelism.tensor": 4})
    assert four["decode_kernel_all_reduce_time"] == pytest.approx(2 * 32 * cell("gb200", 4),
                                                                  rel=1e-9)
    assert not any("beyond these rows" in str(w) for w in four.warnings)
    # SGLang 0.5.14's rows on GB300 reach 16 GPUs too but name only their launch mode
    # (graph, eager), not the kernel that ran across nodes: GB200's 8-GPU point keeps the
    # roofline ratio from its 4-GPU rows (two-shot: 2·(n − 1)/n of the 2-byte message over
    # 900 GB/s, plus two 1 µs steps), warned as a point beyond the grid.
    sglang = infermodel.evaluate(LLAMA_8B, {**overrides, "efficiency.engine": "sglang",
                                            "efficiency.engine_version": "0.5.14"})

    def roof(n):
        return 2 * (n - 1) / n * 2 * 262144 / 900e9 + 2e-6

    assert sglang["decode_kernel_all_reduce_time"] == pytest.approx(
        2 * 32 * cell("gb200", 4, "sglang/0.5.14") * roof(8) / roof(4), rel=1e-9)
    assert any("gpus 8 (measured 4, 2× away): scaled from the grid's edge by the roofline ratio"
               in str(w) for w in sglang.warnings)
    # B200's rows stop at its node's 8 GPUs, which InfiniBand joins: none of this.
    b200 = infermodel.evaluate(LLAMA_8B, {**overrides, "hardware.preset": "b200",
                                          "hardware.count": 16, "levers.parallelism.tensor": 16})
    assert not any("beyond these rows" in str(w) for w in b200.warnings)


# ---------------------------------------------------------------------------------
# State-space and linear-attention layers
# ---------------------------------------------------------------------------------

QWEN3_NEXT = ROOT / "scenarios" / "qwen3-next-80b-hybrid-state.toml"
NEMOTRON_H = ROOT / "scenarios" / "nemotron-h-8b-one-h100.toml"
JAMBA = ROOT / "scenarios" / "jamba-1.5-mini-256k.toml"


def _gdn(phase: str, kernels: tuple[str, ...], **equal) -> float:
    rows = [r for r in _rows("linear_attention/vllm/0.24.0/gdn_perf.parquet", phase=phase, **equal)
            if r["kernel_source"] in kernels]
    assert rows, equal
    return min(r["latency"] for r in rows) * 1e-3


def _conv_channels(row: dict) -> int:
    """Channels of a gated delta-net convolution: q, k (h_k·d_k each) and v (h_v·d_v)."""
    return 2 * row["num_k_heads"] * row["head_k_dim"] + row["num_v_heads"] * row["head_v_dim"]


def test_a_gated_delta_net_layer_is_its_convolution_plus_its_delta_rule():
    # Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers, 3 in 4 linear (36), 16 key
    # heads and 32 value heads of 128, convolution 4: 2·16·128 + 32·128 = 8,192 channels.
    # A layer's rows are its kernels, summed (not the fastest taken).
    result = infermodel.evaluate(QWEN3_NEXT, {"efficiency.kernels": "measured",
                                              "efficiency.engine": "vllm"})
    conv = min(r["latency"] for r in _rows("linear_attention/vllm/0.24.0/gdn_perf.parquet",
                                           phase="generation", kernel_source="causal_conv1d_update",
                                           d_conv=4, batch_size=8)
               if _conv_channels(r) == 8192) * 1e-3
    rule = _gdn("generation", ("fused_recurrent_gated_delta_rule_packed_decode",), num_k_heads=16,
                head_k_dim=128, num_v_heads=32, head_v_dim=128, batch_size=8)
    assert result["layers_linear_attention"] == 36
    assert result["decode_kernel_state_update_time"] == pytest.approx(
        36 * (conv + rule) + _delta_net_elementwise(result, "decode", 8), rel=1e-12)


def _elementwise(result, flops, moved, launches, phase="decode"):
    """An elementwise kernel's time by hand: its roofline (``flops`` at the phase's rate,
    ``moved`` bytes at the bandwidth) plus the fixed kernel time of each launch.
    """
    return (max(flops / result[f"flops_effective_{phase}"], moved / result["bandwidth"])
            + launches * result["elementwise_kernel_latency"])


def _delta_net_elementwise(result, phase, tokens):
    """Qwen3-Next's two elementwise kernels a delta-net layer (36): its projections'
    outputs reordered (q, k: 16 heads of 128; v, z: 32 of 128; b, a: 32 each, read and
    written in 16 bits) and the gated norm (reads the 32 × 128 output and gate, writes
    the output; six FLOPs a value), each at its roofline plus the fixed kernel time.
    """
    values = 2 * 16 * 128 + 2 * 32 * 128 + 2 * 32
    norm = 32 * 128 * tokens * 36
    return (_elementwise(result, 0, 2 * 2 * values * tokens * 36, 36, phase)
            + _elementwise(result, 6 * norm, 2 * 3 * norm, 36, phase))


def test_a_gated_delta_net_prefill_reads_the_chunked_rule():
    result = infermodel.evaluate(QWEN3_NEXT, {"efficiency.kernels": "measured",
                                              "efficiency.engine": "vllm", "workload.batch": 1,
                                              "workload.prompt_tokens": 4096})
    conv = min(r["latency"] for r in _rows("linear_attention/vllm/0.24.0/gdn_perf.parquet",
                                           phase="context", kernel_source="causal_conv1d_fn",
                                           d_conv=4, batch_size=1, seq_len=4096)
               if _conv_channels(r) == 8192) * 1e-3
    rule = _gdn("context", ("chunk_gated_delta_rule_flashinfer",), num_k_heads=16, head_k_dim=128,
                num_v_heads=32, head_v_dim=128, batch_size=1, seq_len=4096)
    assert result["prefill_kernel_state_update_time"] == pytest.approx(
        36 * (conv + rule) + _delta_net_elementwise(result, "prefill", 4096), rel=1e-12)


def test_a_mamba2_layer_is_its_measured_convolution_and_its_scan_at_the_roofline():
    # nvidia/Nemotron-H-8B-Base-8K config.json: 128 Mamba-2 heads of 64, 8 groups of state
    # 128: 128·64 + 2·8·128 = 10,240 convolution channels (TensorRT-LLM's Mamba-2 table;
    # it holds the convolution only, so the selective scan keeps its roofline).
    result = infermodel.evaluate(NEMOTRON_H, {"efficiency.kernels": "measured",
                                              "efficiency.engine": "tensorrt-llm"})
    rows = [r for r in _rows("../h100_sxm/linear_attention/trtllm/1.3.0rc20/mamba2_perf.parquet",
                             phase="generation", kernel_source="causal_conv1d_update", d_conv=4,
                             batch_size=64)
            if r["nheads"] * r["head_dim"] + 2 * r["n_groups"] * r["d_state"] == 10240]
    conv = min(r["latency"] for r in rows) * 1e-3
    layers, batch = result["layers_mamba2"], 64
    state = batch * layers * 128 * 64 * 128 * 16 / 8          # 16-bit state values
    scan = max(batch * layers * 5 * 128 * 64 * 128 / result["flops_effective_decode"],
               2 * state / result["bandwidth"])
    assert result["decode_kernel_state_update_time"] == pytest.approx(layers * conv + scan, rel=1e-12)
    assert any("Mamba-2's selective scan" in str(w) and "kept their roofline" in str(w)
               for w in result.warnings)


def test_mamba1_and_lightning_recurrences_keep_their_roofline_by_name():
    for path, name in ((JAMBA, "Mamba-1's convolution and selective scan"),
                       (ROOT / "scenarios" / "minimax-m1-1m-context.toml",
                        "lightning attention's recurrence")):
        result = infermodel.evaluate(path, {"efficiency.kernels": "measured",
                                            "efficiency.engine": "vllm"})
        assert any(name in str(w) and "fell back to the roofline" in str(w)
                   for w in result.warnings), path
        # Their projections are GEMMs, measured.
        assert result["decode_kernel_state_mixer_time"] > 0
        formula = str(result.quantity("decode_kernel_state_mixer_time").expression)
        assert "k_gemm" in formula


def test_the_feed_forward_kernels_count_the_layer_models_blocks():
    # Nemotron-H-8B: 52 layers, 24 with an MLP (squared ReLU: one up matrix), the others a
    # Mamba-2 or attention mixer alone; the GEMMs and the activation between them run in
    # the 24, not in every layer (the activation's roofline holds the 24 in its bytes).
    from sympy import Max

    result = infermodel.evaluate(NEMOTRON_H, {"efficiency.kernels": "measured",
                                              "efficiency.engine": "tensorrt-llm"})
    formula = result.quantity("decode_kernel_ffn_time").expression
    dense = sum(row.count for row in _structure(result).rows if row.ffn == "dense")
    assert dense == 24 and result["layers"] == 52
    terms = formula.as_coefficients_dict()
    assert {c for t, c in terms.items() if not isinstance(t, Max)} == {dense}
    # The activation reads and writes m·d_ff 16-bit values a token (m = 2: up, down).
    (roofline,) = (t for t in terms if isinstance(t, Max))
    batch, d_ff = result["batch"], result["d_ff"]
    assert float(roofline.subs({s: result[s.name] for s in roofline.free_symbols})) == \
        pytest.approx(2 * 2 * batch * d_ff * dense / result["bandwidth"], rel=1e-12)


def _structure(result):
    from infermodel_builtins.shapes import structure

    return structure(result.scenario)


@pytest.mark.parametrize("path, engine", [(QWEN3_NEXT, "vllm"), (DEEPSEEK, "sglang")])
def test_a_simulated_iteration_at_the_scenarios_counts_is_its_step(path, engine):
    # Recurrences and latent attention follow the iteration's sequences: a decode-only
    # iteration at the scenario's batch and context is its decode step; one prompt alone
    # its time to first token.
    from infermodel.analyses.simulation.plan import iteration_cost
    from infermodel.simulator import CostModel

    result = infermodel.evaluate(path, {"efficiency.kernels": "measured", "efficiency.engine": engine,
                                        "workload.prompt_tokens": 4000,
                                        "workload.output_tokens": 192})
    cost = CostModel.from_quantities(result.values,
                                     measured=iteration_cost(result.scenario, result.values))
    batch = int(result["batch"])
    cached = int(result["context"]) - 1
    assert cost.iteration_time([cached] * batch, []) == pytest.approx(result["decode_step_time"],
                                                                       rel=1e-9)
    assert cost.iteration_time([], [(4000, 0)]) == pytest.approx(
        result["ttft"] - result["request_overhead"], rel=1e-3)


# ---------------------------------------------------------------------------------
# Layouts: data-parallel attention and expert parallelism
# ---------------------------------------------------------------------------------

EP8_DP8 = ROOT / "scenarios" / "deepseek-r1-ep8-dp8.toml"
#: DeepSeek-R1 config.json: 61 layers (3 dense, 58 MoE), 256 routed experts of width
#: 2,048, 8 active, width 7,168. The scenario: 8 attention ranks of 1 card, 8 expert
#: ranks, batch 64 (8 sequences a rank).
MOE_LAYERS = 58


@pytest.fixture(scope="module")
def ep8_dp8():
    return infermodel.evaluate(EP8_DP8, {"efficiency.kernels": "measured", "efficiency.engine": "vllm",
                                         "workload.prompt_tokens": 4000,
                                         "workload.output_tokens": 192})


def _table_calls(result, quantity):
    """(function name, its numeric arguments, its value) of each table call in a
    quantity's formula, shared kernels written out.
    """
    from infermodel.plugin import table_of, tabulated_calls
    from infermodel_builtins.measured_kernels import plan

    expression = plan(result.scenario).expand(result.quantity(quantity).expression)
    out = []
    for call in tabulated_calls(expression):
        values = tuple(float(a.xreplace({s: result[s.name] for s in a.free_symbols}))
                       for a in call.args)
        out.append((call.func.__name__, values, table_of(call)(*values)))
    return out


def test_the_moe_kernel_runs_every_token_at_the_layouts_ep_size(ep8_dp8):
    # All 64 tokens of the stage reach the experts (vLLM's all-gather, aiconfigurator's
    # tokens × attention_dp), MoE TP 8/8 = 1 over EP 8.
    row = _latency_s("moe/vllm/0.24.0/moe_perf.parquet", moe_dtype="fp8_block",
                     distribution="power_law_1.01", num_tokens=64, hidden_size=7168,
                     inter_size=2048, topk=8, num_experts=256, moe_tp_size=1, moe_ep_size=8)
    calls = [c for c in _table_calls(ep8_dp8, "decode_kernel_ffn_time") if c[0].startswith("k_moe")]
    assert [c[1] for c in calls] == [(64.0, 7168.0, 2048.0, 8.0, 256.0, 1.0, 8.0)]
    assert calls[0][2] == pytest.approx(row, rel=1e-12)


def test_the_expert_selection_is_charged_where_the_moe_rows_leave_it_out(ep8_dp8, capsys):
    # vLLM's MoE tables before 0.24 time fused_experts on expert ids chosen before the
    # timed call (aiconfigurator's collector/vllm/collect_moe.py, up to its 0.24 rewrite);
    # the engine selects the experts in a kernel of its own after the router's GEMM. Read
    # from those rows, each of the 58 MoE layers adds it: each token's 256 scores read in
    # 32 bits, its 8 ids and weights written in 4 bytes each, 4 operations a score, at
    # the roofline (the stage's 64 tokens over its eight cards) plus the fixed kernel time.
    older = infermodel.evaluate(EP8_DP8, {"efficiency.kernels": "measured",
                                          "efficiency.engine": "vllm",
                                          "efficiency.engine_version": "0.19.0",
                                          "workload.prompt_tokens": 4000,
                                          "workload.output_tokens": 192})
    row = _latency_s("moe/vllm/0.19.0/moe_perf.parquet", moe_dtype="fp8_block",
                     distribution="power_law_1.01", num_tokens=64, hidden_size=7168,
                     inter_size=2048, topk=8, num_experts=256, moe_tp_size=1, moe_ep_size=8)
    selection = max(64 * (4 * 256 + 8 * 8) / older["bandwidth"],
                    4 * 64 * 256 / older["flops_effective_decode"]) + 3e-6
    assert older["elementwise_kernel_latency"] == 3e-6
    calls = _table_calls(older, "decode_kernel_ffn_time")
    moe = [c for c in calls if c[0].startswith("k_moe")]
    share = [c for c in calls if c[0].startswith("k_msel")]
    assert moe[0][2] == pytest.approx(row, rel=1e-12)
    assert [c[1] for c in share] == [c[1] for c in moe] and share[0][2] == 1.0
    # The command line shows it, and the checks that follow a result pass over the share.
    from infermodel.cli import main

    assert main(["explain", str(EP8_DP8), "decode_kernel_ffn_time",
                 "--set=efficiency.kernels=measured", "--set=efficiency.engine=vllm",
                 "--set=efficiency.engine_version=0.19.0", "--set=workload.prompt_tokens=4000",
                 "--set=workload.output_tokens=192"]) == 0
    assert "selection is charged beside them: 1 (h200_sxm/moe/vllm/0.19.0" in capsys.readouterr().out
    # Their 0.24 tables time the FusedMoE module, which selects the experts itself, and
    # SGLang's collector calls select_experts inside its timed op: nothing is added.
    assert [c[2] for c in _table_calls(ep8_dp8, "decode_kernel_ffn_time")
            if c[0].startswith("k_msel")] in ([], [0.0])
    sglang = _sglang_ep8_dp8()
    assert not [c for c in _table_calls(sglang, "decode_kernel_ffn_time")
                if c[0].startswith("k_msel")]
    # It is one elementwise kernel beside each MoE layer's row: with the share read as
    # none, the ffn operator of the older tables is 58 selections shorter (the routed
    # experts stay the longer of the two streams the shared experts overlap).
    from infermodel.plugin import table_of, tabulated_calls
    from infermodel_builtins.measured_kernels import plan

    expression = plan(older.scenario).expand(older.quantity("decode_kernel_ffn_time").expression)
    values = {s: older[s.name] for s in expression.free_symbols}

    def number(call, share):
        if call.func.__name__.startswith("k_msel"):
            return share
        return table_of(call)(*(float(a.xreplace(values)) for a in call.args))

    def ffn(share):
        calls = {c: number(c, share) for c in tabulated_calls(expression)}
        return float(expression.xreplace(calls).xreplace(values).evalf())

    assert ffn(1.0) == pytest.approx(older["decode_kernel_ffn_time"], rel=1e-9)
    assert ffn(1.0) - ffn(0.0) == pytest.approx(MOE_LAYERS * selection, rel=1e-9)


def test_the_selection_share_follows_each_configurations_table():
    # The share is per measured configuration: vLLM 0.24's B200 FP8 table holds the
    # selection for its own configurations, and leaves it out for those it inherits
    # from 0.22's and 0.19's folders (the fused_experts collector); between two
    # configurations the blend weights split it. MXFP4 rows were timed through FusedMoE
    # in every release, Intel's XPU collector passes precomputed ids in every release,
    # and SGLang's tables are read as timing it.
    import numpy as np

    from infermodel import kernels
    from infermodel_builtins.moe_selection import SelectionLeftOut, selection_left_out

    fp8 = kernels.lookup("b200_sxm", "vllm", "0.24.0", "moe", dtype="fp8",
                         distribution="power_law_1.01")
    own = next(tuple(map(float, c)) for c in fp8.configs if tuple(map(float, c)) not in fp8.inherited)
    inherited = next(iter(fp8.inherited))
    assert re.search(r"/0\.(1\d|2[0-3])\.\d+/", fp8.inherited[inherited])   # a pre-0.24 folder
    assert "/0.24.0/" in fp8.table
    share = SelectionLeftOut(fp8, "vllm")
    assert (share.share(own), share.share(inherited)) == (0.0, 1.0)
    # On arrays: one share per point, configurations varying point by point; a constant
    # configuration over a varying token count; and plain numbers, which give a float.
    columns = {n: np.array([own[i], inherited[i]]) for i, n in enumerate(fp8.config_names)}
    args = [columns.get(n, np.array([64.0, 64.0])) for n in fp8.arguments]
    assert share(*args).tolist() == [0.0, 1.0]
    tokens = np.array([1.0, 64.0, 4096.0])
    assert share(*[tokens if n not in fp8.config_names else float(inherited[fp8.config_names.index(n)])
                   for n in fp8.arguments]).tolist() == [1.0, 1.0, 1.0]
    for config, expected in ((own, 0.0), (inherited, 1.0)):
        value = share(*[64.0 if n not in fp8.config_names else config[fp8.config_names.index(n)]
                        for n in fp8.arguments])
        assert type(value) is float and value == expected
    mxfp4 = kernels.lookup("h200_sxm", "vllm", "0.19.0", "moe", dtype="w4a16_mxfp4",
                           distribution="power_law_1.01")
    assert selection_left_out(mxfp4, "vllm") is None
    xpu = kernels.lookup("b60", "vllm", "0.26.0", "moe", dtype="w4a16_mxfp4",
                         distribution="power_law_1.01")
    assert xpu.kernel_sources == ("vllm_xpu_moe_mxfp4",)
    assert selection_left_out(xpu, "vllm").share(xpu.configs[0]) == 1.0
    sglang = kernels.lookup("h200_sxm", "sglang", "0.5.10", "moe", dtype="fp8_block",
                            distribution="power_law_1.01")
    assert selection_left_out(sglang, "sglang") is None
    # A stated older release with a stated backend reads long table names: the share's
    # function keeps the names' 64-character bound.
    older = infermodel.evaluate(EP8_DP8, {"efficiency.kernels": "measured",
                                          "efficiency.engine": "vllm",
                                          "efficiency.engine_version": "0.14.0",
                                          "efficiency.moe_backend": "triton",
                                          "workload.prompt_tokens": 4000,
                                          "workload.output_tokens": 192})
    shares = [c for c in _table_calls(older, "decode_kernel_ffn_time") if c[0].startswith("k_msel_")]
    assert [c[2] for c in shares] == [1.0] and older["decode_kernel_ffn_time"] > 0


def _sglang_ep8_dp8(**more):
    return infermodel.evaluate(EP8_DP8, {"efficiency.kernels": "measured",
                                         "efficiency.engine": "sglang",
                                         "workload.prompt_tokens": 4000,
                                         "workload.output_tokens": 192, **more})


def test_sglangs_all_to_all_runs_the_experts_on_deepeps_own_moe_kernel():
    # SGLang behind DeepEP computes the routed experts with its own MoE kernel
    # (kernel_source deepepmoe), measured in the wide-EP tables: 64 tokens of the stage,
    # EP 8, block-scaled FP8 experts, read in the newest folder that holds the table.
    row = _latency_s("moe/sglang/0.5.10/wideep_generation_moe_perf.parquet",
                     moe_dtype="fp8_block", distribution="power_law_1.01", num_tokens=64,
                     hidden_size=7168, inter_size=2048, topk=8, num_experts=256,
                     moe_tp_size=1, moe_ep_size=8)
    result = _sglang_ep8_dp8()
    calls = [c for c in _table_calls(result, "decode_kernel_ffn_time")
             if c[0].startswith(("k_moe", "k_dmoe"))]
    assert [(c[0].split("_")[1], c[1]) for c in calls] == [
        ("dmoeg", (64.0, 7168.0, 2048.0, 8.0, 256.0, 1.0, 8.0))]
    assert calls[0][2] == pytest.approx(row, rel=1e-12)
    # A prompt's experts: the prefill (normal-dispatch) table.
    prefill = [c for c in _table_calls(result, "prefill_kernel_ffn_time")
               if c[0].startswith(("k_moe", "k_dmoe"))]
    assert [c[0].split("_")[1] for c in prefill] == ["dmoec"]


def test_a_stated_moe_backend_leaves_deepeps_own_moe_kernel_as_measured():
    # The DeepEP tables time SGLang's own kernel (deepepmoe): a stated runner restricts
    # the grouped-MoE tables only.
    plain, stated = _sglang_ep8_dp8(), _sglang_ep8_dp8(**{"efficiency.moe_backend": "triton"})
    for result in (plain, stated):
        calls = [c for c in _table_calls(result, "decode_kernel_ffn_time")
                 if c[0].startswith(("k_moe", "k_dmoe"))]
        assert [c[0].split("_")[1] for c in calls] == ["dmoeg"]
    assert stated["decode_kernel_ffn_time"] == plain["decode_kernel_ffn_time"]


def test_sglangs_gathered_experts_keep_the_grouped_moe_kernel():
    # Gathering every rank's tokens (SGLang's default backend) runs the grouped MoE kernel.
    result = _sglang_ep8_dp8(**{"levers.parallelism.expert_dispatch": "all_gather"})
    calls = [c[0] for c in _table_calls(result, "decode_kernel_ffn_time")
             if c[0].startswith(("k_moe", "k_dmoe"))]
    assert len(calls) == 1 and calls[0].startswith("k_moe_"), calls


def test_unmeasured_expert_formats_behind_deepep_read_its_rows_scaled_by_the_roofline():
    # NVFP4 experts behind DeepEP on B200: SGLang runs them on the tokens each rank
    # receives, but its wide-EP MoE tables time block-scaled FP8 experts only. Their row
    # at the point is read, times the MoE roofline's ratio between the formats. At 64
    # tokens a step the kernel is memory-bound in both, so the ratio is the bytes'
    # (DeepSeek-R1: width 7,168, experts 2,048 wide, 8 of 256 active, EP 8): each rank
    # touches 256/8 · (1 − (1 − 8/256)^64) of its experts, three 7,168 × 2,048 matrices
    # each, at 0.5625 bytes a weight (NVFP4: 4 bits and an 8-bit scale per 16) against 1,
    # plus 4 × 7,168 bytes of activations a token either way.
    from infermodel import kernels
    from infermodel.plugin import tabulated_calls
    from infermodel_builtins.measured_kernels import plan

    result = _sglang_ep8_dp8(**{"hardware.preset": "b200",
                                "levers.quantization.experts": "nvfp4"})
    calls = [c for c in _table_calls(result, "decode_kernel_ffn_time")
             if c[0].startswith(("k_moe", "k_dmoe"))]
    assert len(calls) == 1
    name, args, value = calls[0]
    assert name.startswith("k_dmoeg_b200") and "nvfp4" in name and name.endswith("fp8_block")
    assert args == (64.0, 7168.0, 2048.0, 8.0, 256.0, 1.0, 8.0)
    newest = kernels.engine_versions("b200_sxm", "sglang")[-1]
    measured = kernels.lookup("b200_sxm", "sglang", newest, "deepep_moe_generation",
                              dtype="fp8_block", distribution="power_law_1.01")
    touched = 256 / 8 * (1 - (1 - 8 / 256) ** 64)
    weights, activations = touched * 3 * 7168 * 2048, 64 * 4 * 7168
    ratio = (weights * 0.5625 + activations) / (weights * 1.0 + activations)
    assert value == pytest.approx(measured(*args) * ratio, rel=1e-9)
    assert 0.55 < ratio < 0.57
    assert any("DeepEP MoE kernel for nvfp4 experts" in str(w) for w in result.warnings)
    # A sweep calls the table once on arrays, the configuration varying point by point:
    # the same numbers as point by point; and a second scenario reads the same table.
    import numpy as np

    from infermodel.plugin import table_of

    table = table_of(next(c for c in tabulated_calls(plan(result.scenario).expand(
        result.quantity("decode_kernel_ffn_time").expression)) if c.func.__name__ == name))
    tokens, ep = np.array([8.0, 64.0, 512.0, 4096.0]), np.array([8.0, 8.0, 16.0, 32.0])
    swept = table(tokens, 7168.0, 2048.0, 8.0, 256.0, 1.0, ep)
    assert swept.tolist() == pytest.approx(
        [table(float(t), 7168.0, 2048.0, 8.0, 256.0, 1.0, float(e)) for t, e in zip(tokens, ep)],
        rel=1e-12)
    again = _sglang_ep8_dp8(**{"hardware.preset": "b200", "levers.quantization.experts": "nvfp4"})
    assert [c for c in _table_calls(again, "decode_kernel_ffn_time") if c[0] == name][0][2] == value
    assert "read as the measured rows below, scaled from dtype fp8_block to nvfp4" in str(
        result.explain("decode_kernel_ffn_time"))


def test_attention_runs_on_the_busiest_ranks_sequences(ep8_dp8):
    # ⌈64/8⌉ = 8 sequences a rank, 128 heads on its one card.
    row = _less_native_chain("mla/vllm/0.24.0/mla_generation_module_perf.parquet",
                             kv_cache_dtype="bfloat16", gemm_type="fp8_block", num_heads=128,
                             batch_size=8, step=4096)
    total = sum(ep8_dp8[f"decode_kernel_{op}_time"] for op in LATENT_OPS)
    assert ep8_dp8["kernel_rank_batch"] == 8
    assert total == pytest.approx(LAYERS * row, rel=1e-12)


@pytest.mark.parametrize("batch", [1, 17, 200])
def test_a_simulated_iteration_under_data_parallel_attention_follows_its_own_counts(ep8_dp8, batch):
    # The simulator's iteration is priced at its own counts, each rank running the busiest
    # rank's share of them (⌈n/8⌉ decodes; a prompt whole on one rank), not at the batch of
    # the scenario it was built from (64): n decodes are the step at batch n, one prompt
    # alone the time to first token, whose all-to-all is DeepEP's normal kernel.
    from infermodel.analyses.simulation.plan import iteration_cost
    from infermodel.simulator import CostModel

    cost = CostModel.from_quantities(ep8_dp8.values,
                                     measured=iteration_cost(ep8_dp8.scenario, ep8_dp8.values))
    other = infermodel.evaluate(EP8_DP8, {"efficiency.kernels": "measured",
                                          "efficiency.engine": "vllm",
                                          "workload.prompt_tokens": 4000,
                                          "workload.output_tokens": 192,
                                          "workload.batch": batch})
    cached = int(other["context"]) - 1
    # (The elementwise operators' rooflines read quantities at the scenario's batch — the
    # embedding rows a step reads, the norms' share of the weights' bytes: under 0.1 µs
    # of a 23 ms step at batch 1.)
    assert cost.iteration_time([cached] * batch, []) == pytest.approx(other["decode_step_time"],
                                                                      rel=1e-5)
    assert cost.iteration_time([], [(4000, 0)]) == pytest.approx(
        ep8_dp8["ttft"] - ep8_dp8["request_overhead"], rel=1e-4)


def test_the_expert_all_to_all_is_deepeps_low_latency_rows(ep8_dp8):
    # One card's 8 tokens dispatched to 8 expert ranks (vLLM's DeepEP table, microseconds).
    for phase in ("dispatch", "combine"):
        row = _latency_s("comm/vllm/0.24.0/moe_a2a_perf.parquet", "transmit_us", 1e-6,
                         comm_backend="deepep_ll", phase=phase, num_tokens=8, hidden_size=7168,
                         topk=8, num_experts=256, ep_size=8)
        assert ep8_dp8[f"decode_kernel_expert_{phase}_time"] == pytest.approx(MOE_LAYERS * row,
                                                                              rel=1e-12)


def test_tensorrt_llms_all_to_all_is_its_nvlink_kernel_on_the_rack():
    # TensorRT-LLM on GB200: its NVLink all-to-all rows, one card's 8 tokens over 8 expert
    # ranks. FP8 experts run the two-sided kernel (the one-sided one is measured for NVFP4
    # only), whose dispatch follows a prepare step; NVFP4 experts the one-sided kernel.
    def row(op, source, dtype):
        return _latency_s("../gb200/comm/trtllm/1.3.0rc10/trtllm_alltoall_perf.parquet",
                          op_name=f"alltoall_{op}", kernel_source=source, moe_dtype=dtype,
                          num_tokens=8, hidden_size=7168, topk=8, num_experts=256,
                          moe_ep_size=8)

    more = {"efficiency.kernels": "measured", "efficiency.engine": "trtllm",
            "hardware.preset": "gb200", "workload.prompt_tokens": 4000,
            "workload.output_tokens": 192}
    result = infermodel.evaluate(EP8_DP8, more)
    two = "NVLinkTwoSided"
    assert result["decode_kernel_expert_dispatch_time"] == pytest.approx(
        MOE_LAYERS * (row("dispatch", two, "fp8") + row("prepare", two, "fp8")), rel=1e-12)
    assert result["decode_kernel_expert_combine_time"] == pytest.approx(
        MOE_LAYERS * row("combine", two, "fp8"), rel=1e-12)
    fp4 = infermodel.evaluate(EP8_DP8, {**more, "levers.quantization.experts": "nvfp4"})
    for phase in ("dispatch", "combine"):
        assert fp4[f"decode_kernel_expert_{phase}_time"] == pytest.approx(
            MOE_LAYERS * row(phase, "NVLinkOneSided", "nvfp4"), rel=1e-12)
    # On one 8-GPU node no table measures it: the roofline, said.
    node = infermodel.evaluate(EP8_DP8, {"efficiency.kernels": "measured",
                                         "efficiency.engine": "trtllm"})
    from infermodel_builtins.measured_kernels import plan

    timed = {(t.phase, t.name): t for t in plan(node.scenario)}
    assert timed[("decode", "expert_dispatch")].how == "fallback"
    assert any("expert_dispatch" in w for w in node.warnings)


def test_the_layouts_step_is_its_operators_once(ep8_dp8):
    # The lever's collectives (communication = "all_reduce") are the measured ones, added
    # once: the step is every operator's charged time plus the engine's host time and t0.
    from infermodel.engine.operators import operator_table

    rows = operator_table(ep8_dp8, "decode")
    assert ep8_dp8["parallel_decode_comm_time"] == pytest.approx(
        ep8_dp8["decode_kernel_expert_dispatch_time"] + ep8_dp8["decode_kernel_expert_combine_time"],
        rel=1e-12)
    assert ep8_dp8["decode_step_time"] == pytest.approx(
        sum(r.charged for r in rows) + ep8_dp8["step_overhead"] + ep8_dp8["t0"], rel=1e-12)


def test_dense_layers_split_over_the_stage_gather_with_nccl():
    # SGLang's placement: the 3 dense layers run across the 8 cards on all 64 tokens,
    # gathered and scattered by NCCL (64·7,168 = 458,752 elements lies between the
    # measured 262,144 and 524,288: log-log).
    import math

    result = infermodel.evaluate(EP8_DP8, {"efficiency.kernels": "measured",
                                           "efficiency.engine": "sglang",
                                           "levers.parallelism.dense_weights": "split"})
    elements = 64 * 7168
    w = (math.log(elements) - math.log(262144)) / (math.log(524288) - math.log(262144))
    total = 0.0
    for op in ("all_gather", "reduce_scatter"):
        low, high = (_latency_s("comm/nccl/2.29.2/nccl_perf.parquet", op_name=op, nccl_dtype="half",
                                num_gpus=8, message_size=m) for m in (262144, 524288))
        total += math.exp((1 - w) * math.log(low) + w * math.log(high))
    assert result["decode_kernel_attention_gather_time"] == pytest.approx(3 * total, rel=1e-12)



def test_experts_on_one_attention_rank_are_summed_by_the_custom_all_reduce():
    # TP 8 with EP 8 and no attention DP (D = 1): every card holds all 64 tokens after the
    # attention's all-reduce, so nothing is gathered; each of the 58 MoE layers sums its
    # cards' expert outputs with one all-reduce of 64·7,168 = 458,752 elements over the 8
    # cards — vLLM's custom all-reduce table (between the measured 262,144 and 524,288
    # elements: log-log), not NCCL's all-gather and reduce-scatter.
    import math

    result = infermodel.evaluate(DEEPSEEK, {"efficiency.kernels": "measured",
                                            "efficiency.engine": "vllm",
                                            "levers.parallelism.expert": 8, "workload.batch": 64,
                                            "workload.prompt_tokens": 4000,
                                            "workload.output_tokens": 192})
    elements = 64 * 7168
    w = (math.log(elements) - math.log(262144)) / (math.log(524288) - math.log(262144))
    low, high = (_latency_s("comm/vllm/0.24.0/custom_allreduce_perf.parquet", num_gpus=8,
                            message_size=m) for m in (262144, 524288))
    one = math.exp((1 - w) * math.log(low) + w * math.log(high))
    assert result["decode_kernel_attention_gather_time"] == pytest.approx(MOE_LAYERS * one,
                                                                          rel=1e-12)

# ---------------------------------------------------------------------------------
# The step with the cache full
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path, engine", [(ROOT / "scenarios" / "measured-llama-3.1-8b-fp8-h200.toml",
                                           "vllm"),
                                          (QWEN3_NEXT, "vllm"), (EP8_DP8, "vllm"),
                                          (EP8_DP8, "sglang")])
def test_the_full_cache_step_is_the_decode_step_at_max_sequences(path, engine):
    # capacity_step_time is the same operators at max(1, max_sequences) sequences: at a
    # batch of max_sequences the two are the same number.
    overrides = {"efficiency.kernels": "measured", "efficiency.engine": engine}
    first = infermodel.evaluate(path, overrides)
    full = int(first["max_sequences"])
    assert first["capacity_step_time"] > 0 and full > 1
    again = infermodel.evaluate(path, overrides | {"workload.batch": full})
    assert again["max_sequences"] == full
    assert again["capacity_step_time"] == pytest.approx(again["decode_step_time"], rel=1e-12)


GPT_OSS = ROOT / "scenarios" / "gpt-oss-120b-one-h100.toml"


def _gpt_oss_moe_row(system: str, version: str, dtype: str) -> float:
    # openai/gpt-oss-120b config.json: hidden 2880, expert width 2880, 128 experts, top-4.
    import pyarrow.parquet as pq

    path = _data().parent / system / "moe" / "trtllm" / version / "moe_perf.parquet"
    rows = [r for r in pq.read_table(path).to_pylist()
            if (r["moe_dtype"], r["num_tokens"], r["hidden_size"], r["inter_size"], r["topk"],
                r["num_experts"], r["moe_tp_size"], r["moe_ep_size"], r["distribution"])
            == (dtype, 16, 2880, 2880, 4, 128, 1, 1, "power_law_1.01")]
    assert rows
    return min(r["latency"] for r in rows) * 1e-3


@pytest.mark.parametrize("card, system, dtype", [("b200", "b200_sxm", "w4a8_mxfp4_mxfp8"),
                                                 ("h200", "h200_sxm", "w4a16_mxfp4")])
def test_mxfp4_experts_under_tensorrt_llm_read_mxfp8_activations_where_the_card_has_fp4(
        card, system, dtype):
    # TensorRT-LLM's deployment guide for GPT-OSS, "MoE Backend Support Matrix": on
    # Blackwell its default MoE backend runs MXFP4 experts with MXFP8 activations, on
    # Hopper with BF16 ones. The newest B200 folder (1.3.0rc23) re-measures the W4A8 kernel
    # for other models' shapes only: gpt-oss's own configuration is 1.3.0rc20's row.
    result = infermodel.evaluate(GPT_OSS, {"hardware.preset": card, "efficiency.kernels": "measured",
                                           "efficiency.engine": "tensorrt-llm",
                                           "workload.batch": 16})
    quantity = result.quantity("decode_kernel_ffn_time")
    assert result["decode_kernel_ffn_time"] == pytest.approx(
        36 * _gpt_oss_moe_row(system, "1.3.0rc20", dtype), rel=1e-9)
    assert dtype.replace("_", "") in str(quantity.expression).replace("_", "")


def test_mxfp4_experts_under_vllm_stay_weight_only_on_blackwell():
    result = infermodel.evaluate(GPT_OSS, {"hardware.preset": "b200", "efficiency.kernels": "measured",
                                           "efficiency.engine": "vllm", "workload.batch": 16})
    assert "w4a16_mxfp4" in str(result.quantity("decode_kernel_ffn_time").expression)


def test_stated_mxfp8_activations_read_the_w4a8_moe_kernel_where_the_card_has_fp4():
    # vLLM runs MXFP4 experts weight-only unless VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1
    # (efficiency.mxfp4_activations = "mxfp8"); TensorRT-LLM's Blackwell default is
    # MXFP8, which "bf16" overrides. A card without FP4 tensor cores widens to bf16
    # whatever is stated, and says so.
    def ffn(card, engine, stated):
        result = infermodel.evaluate(GPT_OSS, {
            "hardware.preset": card, "efficiency.kernels": "measured",
            "efficiency.engine": engine, "efficiency.mxfp4_activations": stated,
            "workload.batch": 16})
        return str(result.quantity("decode_kernel_ffn_time").expression), result.warnings

    vllm, _ = ffn("b200", "vllm", "mxfp8")
    assert "w4a8_mxfp4_mxfp8" in vllm
    trtllm, _ = ffn("b200", "tensorrt-llm", "bf16")
    assert "w4a16_mxfp4" in trtllm
    hopper, warnings = ffn("h200", "vllm", "mxfp8")
    assert "w4a16_mxfp4" in hopper
    assert any("mxfp4_activations = 'mxfp8' has no effect: the card has no FP4" in str(w)
               for w in warnings)


def test_stated_mxfp4_activations_on_a_model_without_mxfp4_experts_warn():
    result = infermodel.evaluate(MEASURED_LLAMA, {"efficiency.mxfp4_activations": "mxfp8"})
    assert any("has no effect: the model has no MXFP4 experts" in str(w)
               for w in result.warnings)


def test_a_stated_moe_backend_reads_its_kernels_from_the_newest_folder_that_measured_them():
    # vLLM 0.24.0's B200 table times block-FP8 experts with FlashInfer's TensorRT-LLM
    # kernels only; Triton's fused MoE (vllm_fused_moe) is 0.22.0's. A backend no folder
    # holds is unavailable, naming the kernels the tables hold.
    import pyarrow.parquet as pq

    from infermodel.kernels import MOE_BACKENDS, Unavailable, lookup
    from infermodel_builtins.measured_kernels import MOE_BACKEND_CHOICES

    assert set(MOE_BACKEND_CHOICES) == set(MOE_BACKENDS)
    config = dict(moe_dtype="fp8_block", num_tokens=4096, hidden_size=3072, inter_size=1536,
                  topk=8, num_experts=256, moe_tp_size=4, moe_ep_size=1,
                  distribution="power_law_1.01")
    base = _data().parent / "b200_sxm" / "moe" / "vllm"

    def fastest(version, kernel):
        rows = [r for r in pq.read_table(base / version / "moe_perf.parquet").to_pylist()
                if all(r[k] == v for k, v in config.items()) and kernel in r["kernel_source"]]
        assert rows
        return min(r["latency"] for r in rows) * 1e-3

    point = (4096.0, 3072.0, 1536.0, 8.0, 256.0, 4.0, 1.0)
    triton = lookup("b200_sxm", "vllm", "0.24.0", "moe", dtype="fp8_block",
                    distribution="power_law_1.01", moe_backend="triton")
    assert triton(*point) == pytest.approx(fastest("0.22.0", "vllm_fused_moe"), rel=1e-9)
    assert tuple(triton.kernel_sources) == ("vllm_fused_moe",)
    text = "\n".join(triton.explain(*point))
    assert "b200_sxm/moe/vllm/0.22.0/moe_perf.parquet" in text and "moe_backend = triton" in text
    default = lookup("b200_sxm", "vllm", "0.24.0", "moe", dtype="fp8_block",
                     distribution="power_law_1.01")
    assert default(*point) == pytest.approx(fastest("0.24.0", "flashinfer_trtllm"), rel=1e-9)
    assert default(*point) < 0.7 * triton(*point)
    none = lookup("b200_sxm", "trtllm", "1.3.0rc23", "moe", dtype="w4a8_mxfp4_mxfp8",
                  distribution="power_law_1.01", moe_backend="triton")
    assert isinstance(none, Unavailable)
    assert "has no triton kernel" in none.reason and "moe_torch_flow" in none.reason


def test_every_installed_moe_kernel_names_at_most_one_backend():
    # Each kernel name of the installed MoE tables is one backend's or none: the words are
    # matched on the name's _-separated parts, so vLLM's unquantizedfusedmoe (one part)
    # is FlashInfer's CUTLASS kernel there, not Triton's fused MoE.
    import pyarrow.parquet as pq

    from infermodel.kernels.families import backend_of

    names = set()
    for path in _data().parent.glob("*/moe/*/*/moe_perf.parquet"):
        names |= set(pq.read_table(path, columns=["kernel_source"]).column(0).to_pylist())
    expected = {"vllm_fused_moe": "triton", "sglang_fused_moe_triton": "triton",
                "sglang_flashinfer_trtllm_moe": "flashinfer_trtllm",
                "vllm_unquantizedfusedmoe_flashinfer_cutlass_flashinferexperts":
                    "flashinfer_cutlass",
                "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts": "marlin",
                "moe_torch_flow": ""}
    assert set(expected) <= names
    assert {n: backend_of(n) for n in expected} == expected
    by = {n: backend_of(n) for n in names}
    assert {b for b in by.values()} <= {"", "triton", "flashinfer_trtllm", "flashinfer_cutlass",
                                         "marlin"}
    with pytest.raises(ValueError, match="no MoE backend 'cutlass'"):
        from infermodel.kernels import lookup

        lookup("b200_sxm", "vllm", "0.24.0", "moe", dtype="fp8_block", moe_backend="cutlass")


def _minimax(tmp_path, name: str, *, batch: int, prompt: int, output: int,
             efficiency: str = "") -> Path:
    """MiniMax-M2.5 from its published config on one B200 under vLLM's measured kernels,
    in block FP8 with FP8 activations.
    """
    config = _data().parent.parent.parent / "model_configs" / "MiniMaxAI--MiniMax-M2.5_config.json"
    scenario = tmp_path / "minimax.toml"
    scenario.write_text(f"""[scenario]
name = "{name}"
[model]
hf_config = "{config}"
[hardware]
preset = "b200"
[workload]
batch = {batch}
prompt_tokens = {prompt}
output_tokens = {output}
[efficiency]
kernels = "measured"
engine = "vllm"
{efficiency}[levers.quantization]
linear = "fp8-b128"
activations = "fp8"
""")
    return scenario


def test_a_stated_moe_backend_notes_an_older_releases_table_and_warns_where_it_does_nothing(
        tmp_path):
    scenario = _minimax(tmp_path, "minimax triton", batch=16, prompt=1024, output=1024,
                        efficiency='moe_backend = "triton"\n')
    result = infermodel.evaluate(scenario)
    assert any("time the triton MoE kernels (efficiency.moe_backend) from vllm 0.22.0's "
               "table, the newest at or below 0.24.0" in str(w) for w in result.warnings)
    dense = infermodel.evaluate(MEASURED_LLAMA, {"efficiency.moe_backend": "triton"})
    assert any("moe_backend = 'triton' has no effect: the model has no routed experts"
               in str(w) for w in dense.warnings)
    roofline = infermodel.evaluate(GPT_OSS, {"efficiency.moe_backend": "triton",
                                             "efficiency.mxfp4_activations": "mxfp8"})
    for field in ("moe_backend", "mxfp4_activations"):
        assert any(f"efficiency.{field} chooses a measured kernel and has no effect" in str(w)
                   for w in roofline.warnings)


def test_a_router_kept_in_32_bits_is_its_16_bit_row_or_its_flops_at_the_32_bit_rate(tmp_path):
    # MiniMax-M2.5 (62 layers, width 3,072, 256 experts) on one B200 under vLLM: its gate
    # runs in float32 (vLLM's models/minimax_m2.py), which no table times. An 8,192-token
    # prompt's router reads vLLM 0.24's bf16 GEMM row at m = 8,192, n = 256, k = 3,072, or
    # its 2·m·n·k FLOPs at the HGX B200 datasheet's 75 TFLOP/s FP32 (600 for 8 GPUs) where
    # longer; under TF32 (VLLM_FLOAT32_MATMUL_PRECISION=high) at 1,125 TFLOP/s (18,000
    # with sparsity for 8 GPUs).
    scenario = _minimax(tmp_path, "minimax fp32 router", batch=1, prompt=8192, output=64)
    row = _card_latency_s("b200_sxm", "gemm/vllm/0.24.0/gemm_perf.parquet", gemm_dtype="bfloat16",
                          m=8192, n=256, k=3072)
    flops = 2 * 8192 * 256 * 3072
    ieee = infermodel.evaluate(scenario)
    assert flops / 75e12 > row
    assert ieee["prefill_kernel_router_time"] == pytest.approx(62 * flops / 75e12, rel=1e-9)
    assert any("in prefill router" in str(w) and "multiplies in 32-bit floats, which no table "
               "times" in str(w) for w in ieee.warnings)
    tf32 = infermodel.evaluate(scenario, {"efficiency.fp32_matmul": "tf32"})
    assert tf32["prefill_kernel_router_time"] == pytest.approx(
        62 * max(row, flops / 1125e12), rel=1e-9)
    assert ieee["ttft"] - tf32["ttft"] == pytest.approx(
        ieee["prefill_kernel_router_time"] - tf32["prefill_kernel_router_time"], rel=1e-9)
    # In decode (one sequence) the bf16 row is the longer: it stands.
    assert ieee["decode_kernel_router_time"] == pytest.approx(
        62 * _card_latency_s("b200_sxm", "gemm/vllm/0.24.0/gemm_perf.parquet",
                             gemm_dtype="bfloat16", m=1, n=256, k=3072), rel=1e-9)
    plain = infermodel.evaluate(scenario, {"model.router_dtype": "bf16"})
    assert plain["prefill_kernel_router_time"] == pytest.approx(62 * row, rel=1e-9)
    # A card without tables (H100 PCIe: its datasheet's FP32 is 51 TFLOP/s) falls back to
    # the roofline, the router's at that rate: every card of four multiplies every token.
    pcie = infermodel.evaluate(scenario, {"hardware.preset": "h100-pcie", "hardware.count": 4,
                                          "levers.parallelism.tensor": 4})
    assert pcie["prefill_kernel_router_time"] == pytest.approx(62 * flops / 51e12, rel=1e-9)
    # A card whose preset states no 32-bit rate (GB300): its 16-bit rows stand, said.
    gb300 = infermodel.evaluate(scenario, {"hardware.preset": "gb300"})
    assert gb300["prefill_kernel_router_time"] == pytest.approx(
        62 * _card_latency_s("gb300", "gemm/vllm/0.24.0/gemm_perf.parquet", gemm_dtype="bfloat16",
                             m=8192, n=256, k=3072), rel=1e-9)
    assert any("states no hardware.flops_fp32: its FLOPs are counted at the step's rate "
               "(flops_effective_prefill), or read from the tables' 16-bit rows where measured "
               "kernels read them" in str(w) for w in gb300.warnings)


def test_a_stated_moe_backend_the_tables_lack_falls_back_and_says_why():
    result = infermodel.evaluate(GPT_OSS, {"hardware.preset": "b200", "efficiency.kernels": "measured",
                                           "efficiency.engine": "tensorrt-llm",
                                           "efficiency.moe_backend": "triton", "workload.batch": 16})
    assert any("fell back to the roofline" in str(w) and "has no triton kernel" in str(w)
               and "moe_torch_flow" in str(w) for w in result.warnings)
    stated = infermodel.evaluate(GPT_OSS, {"hardware.preset": "b200", "efficiency.kernels": "measured",
                                           "efficiency.engine": "vllm",
                                           "efficiency.moe_backend": "flashinfer_trtllm",
                                           "workload.batch": 16})
    from infermodel.kernels import lookup

    # gpt-oss's experts (36 MoE layers) at 16 tokens: FlashInfer's rows, read as stated.
    flashinfer = lookup("b200_sxm", "vllm", "0.24.0", "moe", dtype="w4a16_mxfp4",
                        distribution="power_law_1.01", moe_backend="flashinfer_trtllm")
    assert stated["decode_kernel_ffn_time"] == pytest.approx(
        36 * flashinfer(16.0, 2880.0, 2880.0, 4.0, 128.0, 1.0, 1.0), rel=1e-9)
    assert not any("fell back" in str(w) for w in stated.warnings)


def test_a_configuration_the_newest_folder_lacks_is_the_older_folders_row_and_says_so():
    from infermodel.kernels import lookup

    table = lookup("b200_sxm", "trtllm", "1.3.0rc23", "moe", dtype="w4a8_mxfp4_mxfp8",
                   distribution="power_law_1.01")
    point = (16.0, 2880.0, 2880.0, 4.0, 128.0, 1.0, 1.0)
    assert table(*point) == pytest.approx(
        _gpt_oss_moe_row("b200_sxm", "1.3.0rc20", "w4a8_mxfp4_mxfp8"), rel=1e-9)
    text = "\n".join(table.explain(*point))
    assert "in b200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet" in text
    assert "outside the measured grid" not in text


# ---------------------------------------------------------------------------------
# Elementwise kernels inside measured operators
# ---------------------------------------------------------------------------------

MEASURED_LLAMA = ROOT / "scenarios" / "measured-llama-3.1-8b-fp8-h200.toml"
PIPELINE = ROOT / "scenarios" / "parallel-70b-pipeline.toml"


def _launches(path, name, **overrides) -> bool:
    """Whether an operator's measured time holds an elementwise kernel's fixed time."""
    settings = {"efficiency.kernels": "measured", **overrides}
    result = infermodel.evaluate(path, settings)
    return "elementwise_kernel_latency" in str(result.quantity(name).expression)


@pytest.mark.parametrize("path, engine, more, rotary", [
    (MEASURED_LLAMA, "vllm", {}, True), (MEASURED_LLAMA, "sglang", {}, True),
    (MEASURED_LLAMA, "tensorrt-llm", {}, False),
    # TensorRT-LLM runs q/k norms and the rotary embedding as one kernel of their own
    # (Qwen3's fuse_qk_norm_rope).
    (MEASURED_LLAMA, "tensorrt-llm", {"model.qk_norm": True}, True),
    # Attention without a position embedding (Nemotron-H, Jamba) launches no rotary kernel.
    (NEMOTRON_H, "vllm", {}, False), (JAMBA, "sglang", {}, False),
    (MEASURED_LLAMA, "vllm", {"model.rotary_fraction": 0}, False),
    # Latent attention by its parts (SGLang) rotates q_pe and k_pe; the measured module
    # (vLLM) holds it.
    (DEEPSEEK, "sglang", {}, True), (DEEPSEEK, "vllm", {}, False),
])
def test_the_rotary_embedding_is_a_kernel_where_the_engine_launches_one(path, engine, more,
                                                                       rotary):
    assert _launches(path, "decode_kernel_qkv_projection_time",
                     **{"efficiency.engine": engine, **more}) is rotary


def _launch_count(path, name, **overrides) -> int:
    """How many elementwise launches an operator's measured time holds (its derivative
    by the fixed time of one).
    """
    import sympy

    result = infermodel.evaluate(path, {"efficiency.kernels": "measured", **overrides})
    expression = result.quantity(name).expression
    fixed = [s for s in expression.free_symbols if s.name == "elementwise_kernel_latency"]
    if not fixed:
        return 0
    count = sympy.diff(expression, fixed[0])
    return int(count.subs({s: result[s.name] for s in count.free_symbols}))


@pytest.mark.parametrize("engine, qkv, gate, plain", [
    # vLLM: the rotary embedding and both norms in one kernel; SGLang: the norms apart,
    # its gate as a copy, a sigmoid and a product; TensorRT-LLM turns Qwen3-Next's rotary
    # embedding apart (its gated output rules out the fused q/k-norm-and-rope kernel).
    ("vllm", 12 + 12, 12, 12), ("sglang", 12 + 2 * 12, 3 * 12, 12),
    ("tensorrt-llm", 12 + 2 * 12, 12, 0)])
def test_query_key_norms_gates_and_delta_net_kernels_are_launched(engine, qkv, gate, plain):
    # Qwen3-Next-80B-A3B: 12 full-attention layers, 36 gated delta-nets, each of which
    # launches its projections' reordering and its gated norm under every engine.
    settings = {"efficiency.engine": engine}
    assert _launch_count(QWEN3_NEXT, "decode_kernel_qkv_projection_time", **settings) == qkv
    assert _launch_count(QWEN3_NEXT, "decode_kernel_output_projection_time", **settings) == gate
    assert _launch_count(QWEN3_NEXT, "decode_kernel_state_update_time", **settings) == 2 * 36
    # Without the norms and the gate: the rotary embedding alone (inside TensorRT-LLM's
    # attention op).
    bare = {**settings, "model.qk_norm": False, "model.attention_output_gate": False}
    assert _launch_count(QWEN3_NEXT, "decode_kernel_qkv_projection_time", **bare) == plain
    assert _launch_count(QWEN3_NEXT, "decode_kernel_output_projection_time", **bare) == 0


def test_tensorrt_llm_applies_qwen3s_norms_with_the_rotary_embedding():
    # Qwen3 (q/k norms, no gated output) under TensorRT-LLM: one kernel a layer for the
    # norms and the rotary embedding (fuse_qk_norm_rope), none more; over the layer
    # (MiniMax-M2) its two kernels around the all-reduce stay.
    trt = {"efficiency.engine": "tensorrt-llm", "model.qk_norm": True}
    assert _launch_count(MEASURED_LLAMA, "decode_kernel_qkv_projection_time", **trt) == 32
    layer = {**trt, "model.qk_norm_scope": "layer"}
    assert _launch_count(MEASURED_LLAMA, "decode_kernel_qkv_projection_time", **layer) == 32 + 64


def _normed(path, engine, **more):
    return infermodel.evaluate(path, {"efficiency.kernels": "measured",
                                      "efficiency.engine": engine, **more})


def test_query_key_norms_are_their_roofline_and_the_engines_launches():
    # The norms read and write the 16 + 2 heads of 256 values of each of the 8 sequences
    # in 12 layers (16-bit), four FLOPs a value, plus vLLM's one launch a layer.
    normed, plain = (_normed(QWEN3_NEXT, "vllm", **{"model.qk_norm": flag})
                     for flag in (True, False))
    values = 8 * (16 + 2) * 256 * 12
    norms = _elementwise(normed, 4 * values, 2 * 2 * values, 12)
    assert (normed["decode_kernel_qkv_projection_time"]
            - plain["decode_kernel_qkv_projection_time"]) == pytest.approx(norms, rel=1e-9)


def test_a_gated_output_is_its_roofline_and_the_engines_launches():
    # The gate's product reads the attention's 16 heads of 256 values and the gate's, and
    # writes one (16-bit), five FLOPs a value, in each of the 12 full-attention layers for
    # the 8 sequences: three launches a layer under SGLang.
    gated, plain = (_normed(QWEN3_NEXT, "sglang", **{"model.attention_output_gate": flag})
                    for flag in (True, False))
    values = 8 * 16 * 256 * 12
    gate = _elementwise(gated, 5 * values, 3 * 2 * values, 36)
    assert (gated["decode_kernel_output_projection_time"]
            - plain["decode_kernel_output_projection_time"]) == pytest.approx(gate, rel=1e-9)


def test_a_partial_rotary_embedding_turns_its_share():
    # Qwen3-Next turns a quarter of each head (partial_rotary_factor 0.25): its rotary
    # kernel moves a quarter of the bytes a whole one would, at the same launches (none
    # at all where it turns nothing).
    def rotary(share):
        result = infermodel.evaluate(QWEN3_NEXT, {"efficiency.kernels": "measured",
                                                  "efficiency.engine": "vllm",
                                                  "workload.prompt_tokens": 4000,
                                                  "model.rotary_fraction": share})
        return result["prefill_kernel_qkv_projection_time"]

    assert infermodel.evaluate(QWEN3_NEXT).scenario.value("model.rotary_fraction") == 0.25
    none, quarter, half, whole = rotary(0.0), rotary(0.25), rotary(0.5), rotary(1.0)
    assert none < quarter < half < whole
    assert (whole - quarter) / (whole - half) == pytest.approx(0.75 / 0.5, rel=1e-9)


def test_the_elementwise_roofline_is_one_pipeline_stages():
    # The measured kernels are summed over every layer for one rank of a stage: the
    # activation's roofline, the whole model's work over one stage's cards, does not
    # shrink as the stages grow (it did, by the stages, over all cards).
    def ffn(pipeline):
        result = infermodel.evaluate(PIPELINE, {"efficiency.kernels": "measured",
                                                "efficiency.engine": "vllm",
                                                "hardware.count": 2 * pipeline,
                                                "levers.parallelism.tensor": 2,
                                                "levers.parallelism.pipeline": pipeline})
        return result["prefill_kernel_ffn_time"]

    assert ffn(2) == pytest.approx(ffn(1), rel=1e-9)
    assert ffn(4) == pytest.approx(ffn(1), rel=1e-9)


def test_shared_experts_have_their_activation():
    # DeepSeek-V3's shared expert is a gated MLP: its activation is a kernel of its own
    # (the routed experts' is inside the measured MoE kernel).
    result = infermodel.evaluate(DEEPSEEK, {"efficiency.kernels": "measured",
                                            "efficiency.engine": "vllm"})
    text = str(result.quantity("decode_kernel_ffn_time").expression)
    assert "elementwise_kernel_latency" in text and "shared_expert_d_ff" in text


def _ffn(engine: str, phase: str = "decode", **more) -> float:
    return _deepseek(engine, **more)[f"{phase}_kernel_ffn_time"]


@pytest.mark.parametrize("engine", ["tensorrt-llm", "sglang", "vllm"])
def test_the_shared_expert_runs_beside_the_routed_ones_in_decode(engine):
    # TensorRT-LLM and SGLang run DeepSeek-V3's shared expert on a second stream in the
    # decode batches they capture as CUDA graphs, vLLM in passes of at most 256 tokens.
    # At 16 sequences the routed experts' kernel outlasts the shared expert's two GEMMs
    # and activation on H200, so the block takes what it takes without the shared
    # expert; one after another it takes the shared expert's time more.
    alone = _ffn(engine, **{"model.shared_experts": 0})
    beside = _ffn(engine)
    assert beside == pytest.approx(alone, rel=1e-12)
    graphs = {"efficiency.graph_max_batch": 8} if engine != "vllm" else {}
    if graphs:
        # Above the captured batches the streams are one.
        assert _ffn(engine, **graphs) > beside * 1.05


def test_one_after_another_where_the_engine_does_not_overlap():
    # vLLM above 256 tokens a pass, every engine's prefill but vLLM's short ones, and
    # SGLang's all-to-all (DeepEP) path: the shared expert's time adds to the block's.
    def shared_cost(engine, phase="decode", **more):
        return (_ffn(engine, phase, **more)
                - _ffn(engine, phase, **{"model.shared_experts": 0, **more}))

    assert shared_cost("vllm", **{"workload.batch": 300}) > 0
    assert shared_cost("tensorrt-llm", "prefill", **{"workload.batch": 1}) > 0
    wide = {"levers.parallelism.tensor": 1, "levers.parallelism.attention_data": 8,
            "levers.parallelism.expert": 8, "levers.parallelism.expert_dispatch": "all_to_all"}
    assert shared_cost("sglang", **wide) > 0
    assert shared_cost("tensorrt-llm", **wide) == pytest.approx(0.0, abs=1e-15)


def _iteration(engine, decodes, chunk, **more):
    """A serving iteration's time (the simulator's measured pricing) of ``decodes``
    sequences at 4,095 cached tokens and, where ``chunk``, one fresh prompt's chunk.
    """
    from infermodel.analyses.simulation.plan import iteration_cost
    from infermodel.simulator import CostModel

    result = _deepseek(engine, **more)
    cost = CostModel.from_quantities(result.values,
                                     measured=iteration_cost(result.scenario, result.values))
    return cost.iteration_time([4095] * decodes, [(chunk, 0)] if chunk else [])


@pytest.mark.parametrize("engine, mixed_overlaps", [("tensorrt-llm", False), ("vllm", True)])
def test_an_iteration_with_a_prompt_overlaps_only_where_the_engine_does(engine, mixed_overlaps):
    # TensorRT-LLM replays only decode-only batches as CUDA graphs, and overlaps the shared
    # expert only there: 16 decodes and a 50-token chunk run it one after the other. vLLM's
    # rule is the pass's tokens (66 ≤ 256), prompt or not.
    def shared_cost(decodes, chunk):
        return (_iteration(engine, decodes, chunk)
                - _iteration(engine, decodes, chunk, **{"model.shared_experts": 0}))

    # (to a nanosecond: the norms' share of the step's weight bytes moves by picoseconds)
    assert shared_cost(16, 0) == pytest.approx(0.0, abs=1e-9)
    if mixed_overlaps:
        assert shared_cost(16, 50) == pytest.approx(0.0, abs=1e-9)
    else:
        assert shared_cost(16, 50) > 1e-4


def test_the_overlap_reads_the_busiest_ranks_sequences():
    # 1,000 sequences over eight attention ranks: 125 a rank, inside TensorRT-LLM's 128
    # captured; with a stated imbalance of 1.5 the busiest rank runs 187.5, beyond them.
    wide = {"levers.parallelism.tensor": 1, "levers.parallelism.attention_data": 8,
            "levers.parallelism.expert": 8, "workload.batch": 1000}

    def shared_cost(**more):
        return (_ffn("tensorrt-llm", **wide, **more)
                - _ffn("tensorrt-llm", **wide, **{"model.shared_experts": 0, **more}))

    assert shared_cost() == pytest.approx(0.0, abs=1e-12)
    assert shared_cost(**{"levers.parallelism.attention_imbalance": 1.5}) > 0


def test_the_overlap_says_what_it_saves():
    # The warning's saving is the shorter stream: the shared expert's time one after
    # the other, which the block without shared experts does not pay.
    result = _deepseek("tensorrt-llm")
    saved = _ffn("tensorrt-llm", **{"efficiency.graph_max_batch": 8}) - result[
        "decode_kernel_ffn_time"]
    [text] = [str(w) for w in result.warnings if "second stream" in str(w)]
    assert f"saves {saved * 1e3:.4g} ms" in text
    assert not [w for w in _deepseek("tensorrt-llm", **{"efficiency.graph_max_batch": 8}).warnings
                if "second stream" in str(w)]


def test_an_expert_only_layouts_norms_at_a_full_cache_do_not_follow_the_batch():
    # With one attention rank (experts over eight ranks, attention over eight tensor
    # cards) every card normalises the whole batch: the full-cache step's norms are those
    # of the cache's sequences whatever the scenario's batch (the busiest-rank share only
    # applies to data-parallel attention ranks). It had read the batch's 64 against the
    # cache's 22: 465.9 µs at batch 64, 383.9 µs at batch 8.
    path = ROOT / "scenarios" / "deepseek-r1-ep8-dp8.toml"
    layout = {"efficiency.kernels": "measured", "efficiency.engine": "sglang",
              "levers.parallelism.attention_data": 1, "levers.parallelism.tensor": 8}
    small, large = (infermodel.evaluate(path, {**layout, "workload.batch": b})
                    ["capacity_time_kernels_roofline"] for b in (8, 64))
    assert large == pytest.approx(small, rel=0.01)
