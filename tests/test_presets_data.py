"""The shipped preset files: well-formed TOML, sourced, parseable, and golden counts.

These tests read the data files directly (not through the engine's preset loader), so
they check the data itself: every file has a description and a source, holds exactly
the table its directory calls for, uses units the units module accepts, and the model
shapes reproduce the parameter counts printed in Module 10 (Inference and serving).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from infermodel.units import parse_quantity

PRESETS = Path(__file__).resolve().parents[1] / "plugins" / "infermodel_builtins" / "presets"
MODEL_FILES = sorted((PRESETS / "models").glob("*.toml"))
HARDWARE_FILES = sorted((PRESETS / "hardware").glob("*.toml"))

MODEL_KEYS = {
    "layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "ffn", "vocab",
    "tied_embeddings", "experts", "active_experts", "shared_experts", "expert_d_ff",
    # per-layer architecture (fields registered by the architecture plugin)
    "layer_pattern", "sliding_window", "attention_chunk", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "linear_key_heads", "linear_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel", "dense_layers",
    "moe_layer_period", "shared_expert_d_ff", "attention_bias", "attention_sinks",
    "attention_output_gate", "qk_norm", "expert_bias", "score_correction_bias",
    "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_dt_rank", "mamba_heads",
    "mamba_head_dim", "mamba_groups", "mamba_conv_bias", "mamba_proj_bias", "mamba_inner_norms",
    "linear_state_bits", "rotary_fraction", "router_dtype",
    # checkpoint formats (fields registered by the quantization lever)
    "weight_format", "expert_weight_format",
}
TEXT_KEYS = {"layer_pattern", "weight_format", "expert_weight_format", "router_dtype"}
FLAG_KEYS = {"attention_bias", "attention_sinks", "attention_output_gate", "qk_norm", "expert_bias",
             "score_correction_bias", "mamba_conv_bias", "mamba_proj_bias", "mamba_inner_norms"}
SHARE_KEYS = {"rotary_fraction"}
MODEL_REQUIRED = {"layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "ffn", "vocab",
                  "tied_embeddings"}
HARDWARE_UNITS = {
    "memory": "B", "bandwidth": "B/s", "flops": "FLOP/s", "power": "W",
    "price_per_hour": "USD/h", "count": "1",
    # card-to-card link (fields registered by the parallelism lever)
    "interconnect_bandwidth": "B/s", "interconnect_latency": "s",
    # dense rates per number format (fields registered by the quantization lever)
    "flops_fp8": "FLOP/s", "flops_fp4": "FLOP/s",
    # 32-bit rates: a GEMM kept in float32 (fields registered by the operators plugin)
    "flops_fp32": "FLOP/s", "flops_tf32": "FLOP/s",
}
HARDWARE_REQUIRED = {"memory", "bandwidth", "flops"}
#: Booleans declaring native 8-bit arithmetic (fields registered by the quantization lever).
HARDWARE_FLAGS = {"native_int8", "native_fp8"}
# Names, not quantities: the measured kernel tables a card reads (the measured_kernels lever)
# and its generation, the group the engine presets' intervals are read by (physical_efficiency).
HARDWARE_NAMES = {"kernel_system", "generation"}

REQUIRED_MODELS = {
    "module10-case", "llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b",
    "llama-3.1-70b", "llama-3.2-3b", "mistral-7b", "mixtral-8x7b", "qwen2.5-0.5b", "qwen2.5-7b",
    "smollm2-135m", "smollm2-360m",
}
REQUIRED_HARDWARE = {
    "h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s", "l4", "rtx-4090", "mi300x",
    "m2-ultra", "ddr5-cpu", "module10-24gb", "module10-24gb-l4", "module10-48gb",
    "module10-80gb-a100", "module10-80gb-h100",
}


def load(path: Path) -> dict:
    with path.open("rb") as handle:
        return tomllib.load(handle)


def model(name: str) -> dict:
    return load(PRESETS / "models" / f"{name}.toml")["model"]


def hardware(name: str) -> dict:
    data = load(PRESETS / "hardware" / f"{name}.toml")["hardware"]
    return {key: parse_quantity(value, HARDWARE_UNITS[key]) for key, value in data.items()
            if key in HARDWARE_UNITS}


def param_count(m: dict) -> int:
    """Module 10's dense count: 4 attention projections, 3 SwiGLU matrices, 2 norms per
    block, a final norm, embeddings and (if untied) an output head.  MoE layers hold
    ``experts + shared_experts`` FFNs of width ``expert_d_ff`` plus a router.
    """
    d, kv = m["d_model"], m["kv_heads"] * m["head_dim"]
    q_out = m["heads"] * m["head_dim"]
    matrices = 3 if m["ffn"] == "swiglu" else 2
    attention = 2 * d * q_out + 2 * d * kv
    if m.get("experts"):
        width = m.get("expert_d_ff", m["d_ff"])
        ffn = (m["experts"] + m.get("shared_experts", 0)) * matrices * d * width + d * m["experts"]
    else:
        ffn = matrices * d * m["d_ff"]
    block = attention + ffn + 2 * d
    return m["layers"] * block + d + m["vocab"] * d * (1 if m["tied_embeddings"] else 2)


def active_count(m: dict) -> int:
    active = dict(m, experts=m["active_experts"])
    # the router still multiplies by all experts
    return param_count(active) + m["layers"] * m["d_model"] * (m["experts"] - m["active_experts"])


# ------------------------------------------------------------------ every file


def test_required_presets_exist():
    assert REQUIRED_MODELS <= {p.stem for p in MODEL_FILES}
    assert REQUIRED_HARDWARE <= {p.stem for p in HARDWARE_FILES}
    # at least one mixture of experts with shared experts
    assert any(model(p.stem).get("shared_experts", 0) > 0 for p in MODEL_FILES)


@pytest.mark.parametrize("path", MODEL_FILES + HARDWARE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_file_is_described_and_sourced(path):
    data = load(path)
    preset = data["preset"]
    assert set(preset) == {"description", "source"}
    assert isinstance(preset["description"], str) and preset["description"].strip()
    assert isinstance(preset["source"], str) and len(preset["source"]) > 10
    wanted = "model" if path.parent.name == "models" else "hardware"
    assert set(data) == {"preset", wanted}
    # names are usable on a command line and as a TOML string without quoting trouble
    assert path.stem == path.stem.lower() and " " not in path.stem


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_model_shape_is_consistent(path):
    m = load(path)["model"]
    assert MODEL_REQUIRED <= set(m) <= MODEL_KEYS
    for key in MODEL_KEYS - {"ffn", "tied_embeddings"} - TEXT_KEYS - FLAG_KEYS - SHARE_KEYS:
        if key in m:
            assert type(m[key]) is int and m[key] >= 0, key
    for key in SHARE_KEYS & set(m):
        assert type(m[key]) is float and 0 <= m[key] <= 1, key
    for key in TEXT_KEYS & set(m):
        assert isinstance(m[key], str) and m[key], key
    for key in FLAG_KEYS & set(m):
        assert isinstance(m[key], bool), key
    assert isinstance(m["tied_embeddings"], bool)
    assert m["ffn"] in ("swiglu", "gelu")
    assert m["heads"] % m["kv_heads"] == 0
    assert m["kv_heads"] <= m["heads"]
    for key in ("layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab"):
        assert m[key] > 0, key
    if "experts" in m or "active_experts" in m:
        assert 1 <= m["active_experts"] <= m["experts"]
    else:
        assert "shared_experts" not in m and "expert_d_ff" not in m


@pytest.mark.parametrize("path", HARDWARE_FILES, ids=lambda p: p.stem)
def test_hardware_values_parse(path):
    h = load(path)["hardware"]
    assert HARDWARE_REQUIRED <= set(h) <= (set(HARDWARE_UNITS) | {"reserve"} | HARDWARE_FLAGS
                                           | HARDWARE_NAMES)
    for key, value in h.items():
        if key == "reserve":
            continue
        if key in HARDWARE_NAMES:
            assert isinstance(value, str) and value, key
            continue
        if key in HARDWARE_FLAGS:
            assert isinstance(value, bool), key
            continue
        assert parse_quantity(value, HARDWARE_UNITS[key]) > 0, key
    if "reserve" in h:
        assert 0 < parse_quantity(h["reserve"], "B") < parse_quantity(h["memory"], "B")
    for key in ("memory", "bandwidth", "flops", "power"):
        if key in h:
            assert isinstance(h[key], str), f"{key} should carry its unit"


# --------------------------------------------------------------- golden counts


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("smollm2-135m", 134_515_008),  # Module 10, Labs 2 and 5
        ("smollm2-360m", 361_821_120),  # Module 10, Lab 5
        ("module10-case", 9_550_729_216),  # Module 10, Lab 1
        # published counts of models without projection biases
        ("llama-2-7b", 6_738_415_616),
        ("llama-2-70b", 68_976_648_192),
        ("llama-3-8b", 8_030_261_248),
        ("llama-3.1-8b", 8_030_261_248),
        ("llama-3-70b", 70_553_706_496),
        ("llama-3.1-70b", 70_553_706_496),
        ("llama-3.2-3b", 3_212_749_824),
        ("mistral-7b", 7_241_732_096),
        ("mixtral-8x7b", 46_702_792_704),
    ],
)
def test_parameter_counts(name, count):
    assert param_count(model(name)) == count


@pytest.mark.parametrize(
    ("name", "count", "qkv_bias"),
    [("qwen2.5-0.5b", 494_032_768, 24 * (896 + 2 * 128)), ("qwen2.5-7b", 7_615_616_512, 28 * (3584 + 2 * 512))],
)
def test_qwen_counts_differ_by_their_biases(name, count, qkv_bias):
    assert param_count(model(name)) + qkv_bias == count


def test_module10_matmul_count():
    case = model("module10-case")
    n_matmul = param_count(case) - case["vocab"] * case["d_model"]
    assert n_matmul == 8_927_875_072


def test_module10_kv_bytes_per_token():
    case = model("module10-case")
    assert 2 * case["layers"] * case["kv_heads"] * case["head_dim"] * 2 == 147_456


def test_mixtral_total_and_active_match_module10_moe_example():
    # Module 10: an illustrative 46.7 B total / 12.9 B active mixture of experts
    m = model("mixtral-8x7b")
    assert round(param_count(m) / 1e9, 1) == 46.7
    assert round(active_count(m) / 1e9, 1) == 12.9


def test_qwen_moe_totals():
    m = model("qwen1.5-moe-a2.7b")
    assert round(param_count(m) / 1e9, 1) == 14.3
    assert round(active_count(m) / 1e9, 1) == 2.7


# ------------------------------------------------------------ hardware golden values

# Module 10's reference profiles (and its DDR5 example) are decimal, as the module states
# them; real cards give the memory the runtime reports (nvidia-smi memory.total in MiB)
# or, where no report is cited, the binary capacity of the data sheet.
MiB, GiB = 2**20, 2**30


def test_real_cards_report_more_than_decimal_and_at_most_binary_capacity():
    # "80 GB" HBM is 80 GiB; the runtime sees that less what the driver keeps (< 5 %).
    for name, nominal in [("h100-sxm", 80), ("a100-80gb", 80), ("h200", 144), ("l4", 24), ("rtx-4090", 24)]:
        memory = hardware(name)["memory"]
        assert 0.9 * nominal * GiB < memory <= nominal * GiB, name
    assert hardware("h100-sxm")["memory"] / 80e9 == pytest.approx(1.069, abs=1e-3)


@pytest.mark.parametrize(
    ("name", "memory", "bandwidth", "flops"),
    [
        ("module10-24gb", 24e9, 1.0e12, 165e12),
        ("module10-24gb-l4", 24e9, 0.30e12, 121e12),
        ("module10-48gb", 48e9, 0.864e12, 362e12),
        ("module10-80gb-a100", 80e9, 2.039e12, 312e12),
        ("module10-80gb-h100", 80e9, 3.35e12, 989e12),
        ("h100-sxm", 81559 * MiB, 3.35e12, 989e12),
        ("h100-pcie", 81559 * MiB, 2.0e12, 756e12),
        ("h200", 143771 * MiB, 4.8e12, 989e12),
        ("a100-40gb", 40960 * MiB, 1.555e12, 312e12),
        ("a100-80gb", 81920 * MiB, 2.039e12, 312e12),
        ("l40s", 46068 * MiB, 0.864e12, 362e12),
        ("l4", 23034 * MiB, 0.300e12, 121e12),
        ("rtx-4090", 24564 * MiB, 1.008e12, 165.2e12),
        ("mi300x", 192 * GiB, 5.3e12, 1307e12),
        ("m2-ultra", 192 * GiB, 0.8e12, 27.2e12),
        ("ddr5-cpu", 128e9, 2 * 8 * 5.6e9, 0.5e12),
    ],
)
def test_hardware_values(name, memory, bandwidth, flops):
    h = hardware(name)
    assert h["memory"] == pytest.approx(memory, rel=1e-12)
    assert h["bandwidth"] == pytest.approx(bandwidth, rel=1e-12)
    assert h["flops"] == pytest.approx(flops, rel=1e-12)


@pytest.mark.parametrize(
    ("name", "ridge"),
    [("module10-24gb", 165.0), ("module10-24gb-l4", 403.3), ("module10-48gb", 419.0),
     ("module10-80gb-a100", 153.0), ("module10-80gb-h100", 295.2)],
)
def test_module10_ridge_points(name, ridge):
    h = hardware(name)
    assert round(h["flops"] / h["bandwidth"], 1) == ridge


def test_module10_prices():
    assert hardware("module10-24gb")["price_per_hour"] == 1.0
    assert hardware("module10-80gb-h100")["price_per_hour"] == 2.5
    assert hardware("module10-24gb-l4")["price_per_hour"] == 0.8
    # Module 10: USD 1 per hour at 2.4 M tokens per hour is about USD 0.42 per million
    assert round(hardware("module10-24gb")["price_per_hour"] / 2.4, 2) == 0.42


def test_module10_cards_keep_the_lab_reserve():
    for path in HARDWARE_FILES:
        if path.stem.startswith("module10-"):
            data = load(path)["hardware"]
            assert parse_quantity(data["reserve"], "B") == 2.5e9
            free = parse_quantity(data["memory"], "B") - 5.5e9 - 2.5e9
            assert free / 1e9 in (16.0, 40.0, 72.0)


# ------------------------------------------------------------------ number formats per card

REAL_CARDS = [p for p in HARDWARE_FILES if not p.stem.startswith("module10-")]
#: Single machines without a card-to-card link (a workstation, a CPU server example).
SINGLE_MACHINES = {"m2-ultra", "ddr5-cpu"}


@pytest.mark.parametrize("path", REAL_CARDS, ids=lambda p: p.stem)
def test_real_cards_declare_the_number_formats_they_support(path):
    raw = load(path)["hardware"]
    h = hardware(path.stem)
    # Each card says whether it multiplies 8-bit operands natively, not by default.
    assert HARDWARE_FLAGS <= set(raw), f"{path.stem}: declare native_int8 and native_fp8"
    # A card with FP8 arithmetic gives its dense FP8 rate; one without gives none.
    assert ("flops_fp8" in h) == raw["native_fp8"], path.stem
    if "flops_fp8" in h:
        # Datasheets: FP8 at one (Gaudi 3) to about two times the dense 16-bit rate.
        assert h["flops"] <= h["flops_fp8"] <= 2.05 * h["flops"], path.stem
    if "flops_fp4" in h:
        assert raw["native_fp8"] and h["flops_fp4"] >= h["flops_fp8"], path.stem
    # Every constant is cited: the file names the datasheet it comes from.
    text = path.read_text()
    assert any(word in text.lower() for word in ("datasheet", "data sheet", "specifications",
                                                 "whitepaper", "announcement", "module 10")), path.stem
    if path.stem not in SINGLE_MACHINES:
        assert "interconnect_bandwidth" in h and "interconnect_latency" in h, path.stem


@pytest.mark.parametrize(
    ("name", "fp8_dense_tflops", "sparse_tflops"),
    [
        # NVIDIA H100 / H200 datasheets: FP8 tensor 3,958 (SXM) and 3,026 (PCIe) with sparsity.
        ("h100-sxm", 1979, 3958), ("h200", 1979, 3958), ("h100-pcie", 1513, 3026),
        # NVIDIA L40S specifications: 733 dense, 1,466 with sparsity.
        ("l40s", 733, 1466),
        # NVIDIA L4 datasheet: 485 with sparsity.
        ("l4", 242.5, 485),
        # Ada Lovelace whitepaper, Appendix A: RTX 4090 FP8 with FP32 accumulation.
        ("rtx-4090", 330.3, 660.6),
        # AMD Instinct MI300X data sheet: 2,614.9 dense, 5,229.8 with sparsity.
        ("mi300x", 2614.9, 5229.8),
    ],
)
def test_existing_cards_fp8_rates_are_half_the_sparse_datasheet_figures(name, fp8_dense_tflops,
                                                                       sparse_tflops):
    assert hardware(name)["flops_fp8"] == pytest.approx(fp8_dense_tflops * 1e12)
    assert sparse_tflops / 2 == pytest.approx(fp8_dense_tflops, rel=1e-3)


def test_cards_without_fp8_say_so():
    # Ampere (A100) has INT8 but no FP8 tensor cores; the workstation and CPU examples neither.
    for name in ("a100-40gb", "a100-80gb", "m2-ultra", "ddr5-cpu"):
        raw = load(PRESETS / "hardware" / f"{name}.toml")["hardware"]
        assert raw["native_fp8"] is False and "flops_fp8" not in raw, name


@pytest.mark.parametrize(("name", "fp8", "bf16"), [("h100-sxm", 1979, 989), ("l40s", 733, 362),
                                                   ("rtx-4090", 330.3, 165.2), ("mi300x", 2614.9, 1307)])
def test_fp8_activations_on_an_existing_card_use_its_datasheet_fp8_rate(write_scenario, name, fp8, bf16):
    import infermodel

    path = write_scenario(f'[model]\npreset = "llama-3-8b"\n[hardware]\npreset = "{name}"\n'
                          "[workload]\nprompt_tokens = 1024\noutput_tokens = 128\n"
                          '[levers.quantization]\nlinear = "fp8-e4m3"\nactivations = "fp8"\n')
    r = infermodel.evaluate(path)
    assert r["activation_speedup"] == pytest.approx(fp8 / bf16)
    assert "flops_fp8" in r.quantity("activation_speedup").description
