"""Every layer as the published config declares it: hybrid, heterogeneous and state-space
families (src/infermodel/data/configs/), and the ``infermodel layers`` table.

Every expected number is computed by hand here from the configuration's values, with the
source cited; published totals come from the model's report or model card (each rounded
as published, so the tolerance is the rounding).
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import infermodel
from conftest import ROOT
from infermodel.cli import main
from infermodel.hf_config import HFConfigError, map_hf_config, read_hf_config
from infermodel.hf_config.layers import SHAPING_KEYS, decilm_width

CONFIGS = ROOT / "src" / "infermodel" / "data" / "configs"


def evaluate(write_scenario, model: str, *, prompt=8192, output=1, extra="", hardware="h200",
             count=8, name="scenario.toml"):
    path = write_scenario(f"""
[model]
{model}
[hardware]
preset = "{hardware}"
count = {count}
[workload]
prompt_tokens = {prompt}
output_tokens = {output}
sequence_length = {prompt}
{extra}
""", name)
    return infermodel.evaluate(path)


def hf(name: str) -> str:
    return f'hf_config = "{CONFIGS / name}.json"'


def rows(result) -> dict[str, dict[str, float]]:
    from infermodel.cli.layers import layer_rows

    return {row["kind"]: row for row in layer_rows(result)}


# ------------------------------------------------------------------------ Jamba-1.5-Mini

# ai21labs/AI21-Jamba-1.5-Mini config.json: 32 layers of width 4096; attention (32 heads of
# 128, 8 KV heads) where i % 8 == 4, Mamba-1 elsewhere (d_state 16, d_conv 4, expand 2,
# dt_rank 256, convolution biases, no projection biases; Jamba's norms of Δ, B and C); a
# mixture of 16 experts (2 active, SwiGLU 14336) where i % 2 == 1, a dense SwiGLU 14336
# elsewhere; vocab 65536, untied.
J_D, J_FF, J_V, J_N, J_R, J_K = 4096, 14336, 65536, 16, 256, 4
J_DI = 2 * J_D
J_ATTENTION = 2 * J_D * 4096 + 2 * J_D * 1024
J_MAMBA = (J_D * 2 * J_DI + J_DI * J_K + J_DI + J_DI * (J_R + 2 * J_N) + J_R * J_DI + J_DI
           + J_DI * J_N + J_DI + J_DI * J_D)
J_MAMBA_NORMS = J_R + 2 * J_N
J_DENSE = 3 * J_D * J_FF
J_MOE = 16 * J_DENSE + J_D * 16
# layers 4, 12, 20, 28 are attention (all even: dense); of the 28 Mamba layers 16 are odd (MoE).
J_TOTAL = (4 * (J_ATTENTION + J_DENSE + 2 * J_D) + 12 * (J_MAMBA + J_MAMBA_NORMS + J_DENSE + 2 * J_D)
           + 16 * (J_MAMBA + J_MAMBA_NORMS + J_MOE + 2 * J_D) + 2 * J_V * J_D + J_D)
J_STATE = 28 * (J_DI * J_N + (J_K - 1) * J_DI) * 2


def test_jamba_mini_parameters_cache_and_state(write_scenario):
    r = evaluate(write_scenario, hf("ai21-jamba-1.5-mini"))
    assert r["params_total"] == J_TOTAL
    # Jamba-1.5 report (arXiv:2408.12570): 52 B total, 12 B active (both rounded).
    assert r["params_total"] == pytest.approx(52e9, rel=0.01)
    assert r["params_active"] == pytest.approx(12e9, rel=0.02)
    # Only the 4 attention layers cache keys and values: 8x less than 32 would.
    assert r["kv_bytes_per_token"] == 4 * 2 * 8 * 128 * 2 == 16_384
    assert r["linear_state_bytes_per_sequence"] == J_STATE == 8_716_288
    table = rows(r)
    assert {k: v["count"] for k, v in table.items()} == {"mamba_dense": 12, "mamba_moe": 16,
                                                          "full_dense": 4}
    assert table["full_dense"]["cache_bytes_per_token"] == 16_384
    assert table["mamba_moe"]["state_bytes"] == 16 * (J_DI * J_N + 3 * J_DI) * 2


def test_jamba_state_is_the_same_at_every_context_length(write_scenario):
    short = evaluate(write_scenario, hf("ai21-jamba-1.5-mini"), prompt=8192, name="a.toml")
    long = evaluate(write_scenario, hf("ai21-jamba-1.5-mini"), prompt=262144, name="b.toml")
    assert short["linear_state_bytes_per_sequence"] == long["linear_state_bytes_per_sequence"]
    assert long["kv_bytes_per_sequence"] - short["kv_bytes_per_sequence"] == 16_384 * (262144 - 8192)
    # A decode step reads each sequence's cache and reads and writes its state.
    assert short["decode_bytes"] == pytest.approx(
        short["weight_bytes_per_step"] + 16_384 * (8192 + 0.5) + 2 * J_STATE)


# ------------------------------------------------------------------------ MiniMax-M1

# MiniMaxAI/MiniMax-M1-80k config.json (MiniMax-Text-01's architecture): 80 layers of width
# 6144, attn_type_list 0 (lightning) x 7 then 1 (softmax); 64 heads of 128 (8 KV heads in the
# softmax layers); every layer a mixture of 32 SwiGLU experts of 9216, 2 active; vocab 200064.
M_D, M_W, M_V = 6144, 64 * 128, 200064
M_LIGHTNING = 3 * M_D * M_W + M_D * M_W + M_W * M_D          # q/k/v, output gate, output
M_SOFTMAX = 2 * M_D * M_W + 2 * M_D * 8 * 128
M_EXPERT = 3 * M_D * 9216
M_MOE = 32 * M_EXPERT + M_D * 32
M_TOTAL = (70 * (M_LIGHTNING + M_W + M_MOE + 2 * M_D) + 10 * (M_SOFTMAX + M_MOE + 2 * M_D)
           + 2 * M_V * M_D + M_D)


def test_minimax_lightning_and_softmax_layers(write_scenario):
    r = evaluate(write_scenario, hf("minimax-m1"))
    assert r["params_total"] == M_TOTAL
    # MiniMax-01 (arXiv:2501.08313) and the M1 / Text-01 model cards: 456 B total, 45.9 B
    # activated (without the embedding and the head).
    assert r["params_total"] == pytest.approx(456e9, rel=0.001)
    assert r["params_active"] - r["params_embedding"] - r["params_head"] == pytest.approx(
        45.9e9, rel=0.002)
    assert r["kv_bytes_per_token"] == 10 * 2 * 8 * 128 * 2 == 40_960
    # One 128 x 128 state per head and lightning layer, 2 bytes a value.
    assert r["linear_state_bytes_per_sequence"] == 70 * 64 * 128 * 128 * 2
    assert {k: v["count"] for k, v in rows(r).items()} == {"lightning_moe": 70, "full_moe": 10}


# ------------------------------------------------------------------------ Nemotron-H

# nvidia/Nemotron-H-8B-Base-8K config.json: 52 blocks from hybrid_override_pattern (24 M,
# 4 *, 24 -), width 4096; Mamba-2 with 128 heads of 64, 8 groups, state 128, conv 4 (with
# biases, no projection biases); attention 32 heads of 128, 8 KV heads; squared-ReLU MLP
# (mlp_hidden_act relu2: two matrices) of 21504; vocab 131072, untied; time_step_limit
# [0.0, Infinity].
def _nemotron(d, heads, mamba_heads, state, ff, attention, mamba, mlp, vocab=131072):
    di, conv = mamba_heads * 64, mamba_heads * 64 + 2 * 8 * state
    mixer = d * (2 * di + 2 * 8 * state + mamba_heads) + conv * 4 + conv + 3 * mamba_heads + di * d
    attn = 2 * d * heads * 128 + 2 * d * 8 * 128
    total = (mamba * (mixer + di + d) + attention * (attn + d) + mlp * (2 * d * ff + d)
             + 2 * vocab * d + d)
    state_bytes = mamba * (mamba_heads * 64 * state + 3 * conv) * 2
    return total, state_bytes


def test_nemotron_h_8b_blocks_with_one_mixer_or_one_mlp(write_scenario):
    r = evaluate(write_scenario, hf("nemotron-h-8b-base-8k"))
    total, state = _nemotron(4096, 32, 128, 128, 21504, attention=4, mamba=24, mlp=24)
    assert r["params_total"] == total
    assert r["params_total"] == pytest.approx(8e9, rel=0.02)   # Nemotron-H report: "8B"
    assert r["ffn_matrices"] == 2                                 # relu2, not gated
    assert r["kv_bytes_per_token"] == 4 * 2 * 8 * 128 * 2
    assert r["linear_state_bytes_per_sequence"] == state
    assert {k: v["count"] for k, v in rows(r).items()} == {
        "mamba2_none": 24, "none_dense": 24, "full_none": 4}
    # One norm per block (each has one sub-layer) and a final one.
    assert r["sublayers"] == 52


def test_nemotron_h_56b(write_scenario):
    r = evaluate(write_scenario, hf("nemotron-h-56b-base-8k"))
    total, state = _nemotron(8192, 64, 256, 256, 32768, attention=10, mamba=54, mlp=54)
    assert r["params_total"] == total
    assert r["params_total"] == pytest.approx(56e9, rel=0.01)  # Nemotron-H report: "56B"
    assert r["linear_state_bytes_per_sequence"] == state


# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json: 52 blocks from
# hybrid_override_pattern (23 M, 6 *, 23 E), width 2688; Mamba-2 with 64 heads of 64, 8
# groups, state 128, conv 4, its state cached in float32 (mamba_ssm_cache_dtype); attention
# 32 heads of 128, 2 KV heads; 128 squared-ReLU experts of 1856 (6 active), one shared of
# 3712, a router of 128; vocab 131072, untied. Model card: 31.6 B parameters, about 3.6 B
# used per token with the embeddings.
def test_nemotron_3_nano_mamba_attention_and_experts(write_scenario):
    r = evaluate(write_scenario, 'preset = "nemotron-3-nano-30b-a3b"')
    d, di, conv = 2688, 64 * 64, 64 * 64 + 2 * 8 * 128
    mixer = d * (2 * di + 2 * 8 * 128 + 64) + conv * 4 + conv + 3 * 64 + di * d + di + d
    attention = 2 * d * 32 * 128 + 2 * d * 2 * 128 + d
    expert, shared, router = 2 * d * 1856, 2 * d * 3712, d * 128
    outside = 2 * 131072 * d + d
    assert r["params_total"] == 23 * mixer + 6 * attention + 23 * (
        128 * expert + shared + router + d) + outside
    assert r["params_active"] == 23 * mixer + 6 * attention + 23 * (
        6 * expert + shared + router + d) + outside
    assert r["params_total"] == pytest.approx(31.6e9, rel=0.002)
    assert r["params_active"] == pytest.approx(3.6e9, rel=0.01)
    assert r["kv_bytes_per_token"] == 6 * 2 * 2 * 128 * 2
    assert r["linear_state_bytes_per_sequence"] == 23 * (64 * 64 * 128 + 3 * conv) * 4
    assert {k: v["count"] for k, v in rows(r).items()} == {
        "mamba2_none": 23, "none_moe": 23, "full_none": 6}


def test_fp32_state_from_the_config_or_the_field(write_scenario):
    r16 = evaluate(write_scenario, 'preset = "nemotron-h-8b"', name="a.toml")
    r32 = evaluate(write_scenario, 'preset = "nemotron-h-8b"\nlinear_state_bits = 32', name="b.toml")
    assert r32["linear_state_bytes_per_sequence"] == 2 * r16["linear_state_bytes_per_sequence"]
    config = json.loads((CONFIGS / "nemotron-h-8b-base-8k.json").read_text())
    config["mamba_ssm_cache_dtype"] = "float32"   # as Nemotron-H-based Nano v2 configs write it
    assert map_hf_config(config)["linear_state_bits"] == 32


def test_infinity_in_a_config_is_read_as_python_reads_it():
    text = (CONFIGS / "nemotron-h-8b-base-8k.json").read_text()
    assert "Infinity" in text
    assert json.loads(text)["time_step_limit"][1] == math.inf
    assert read_hf_config(CONFIGS / "nemotron-h-8b-base-8k.json")["layers"] == 52


# ------------------------------------------------------------------------ Llama-3.3-Nemotron-Super-49B

# nvidia/Llama-3_3-Nemotron-Super-49B-v1 config.json (block_configs): 80 DeciLM blocks of
# width 8192, 64 heads of 128; 49 keep attention (n_heads_in_group 8: 8 KV heads), 31 have
# none (no_op); each block's SwiGLU width from ffn_mult: 28672 (5.25) x 48 + 1 without
# attention, 14336 (2.625) x 1 + 5, 17920 (3.28125) x 1, 7168 (1.3125) x 10, 5632 (1.0) x 8,
# 2816 (0.5) x 6; vocab 128256, untied.
S_WIDTHS = 28672 * 49 + 14336 * 6 + 17920 + 7168 * 10 + 5632 * 8 + 2816 * 6
S_TOTAL = (49 * (2 * 8192 * 8192 + 2 * 8192 * 1024) + 3 * 8192 * S_WIDTHS
           + (49 + 80 + 1) * 8192 + 2 * 128256 * 8192)


def test_nemotron_super_per_block_attention_and_widths(write_scenario):
    r = evaluate(write_scenario, hf("llama-3.3-nemotron-super-49b-v1"))
    assert r["params_total"] == S_TOTAL == 49_867_145_216
    # 49.9 B in the safetensors-derived metadata of its GGUF conversion; the card says 49 B.
    assert r["params_total"] == pytest.approx(49.9e9, rel=0.001)
    assert r["kv_bytes_per_token"] == 49 * 2 * 8 * 128 * 2 == 200_704
    table = rows(r)
    assert sum(row["count"] for row in table.values()) == 80
    assert table["full_dense28672"]["count"] == 48 and table["none_dense2816"]["count"] == 6


def test_decilm_width_from_the_multiplier():
    # DeciLM remote code: _ffn_mult_to_intermediate_size(m, d) = multiple of 256 above
    # int(2·m·d/3).
    assert decilm_width(5.25, 8192, None, 0) == 28672
    assert decilm_width(0.5, 8192, None, 0) == 2816       # int(2730.67) -> 2816
    assert decilm_width(1.0, 8192, None, 0) == 5632


def test_decilm_projection_blocks_and_differing_key_value_heads(write_scenario):
    config = json.loads((CONFIGS / "llama-3.3-nemotron-super-49b-v1.json").read_text())
    config["block_configs"][1]["attention"].update(replace_with_linear=True)
    config["block_configs"][2]["ffn"].update(replace_with_linear=True)
    shape = map_hf_config(config)
    assert "projection+dense:28672" in shape["layer_pattern"]
    assert "full+projection" in shape["layer_pattern"]
    config["block_configs"][0]["attention"]["n_heads_in_group"] = 4
    with pytest.raises(HFConfigError, match="one count per model") as caught:
        map_hf_config(config)
    assert "n_heads_in_group" in caught.value.key


def test_projection_layers_weigh_d_squared(write_scenario):
    base = evaluate(write_scenario, 'preset = "llama-3.1-8b"\nlayer_pattern = "full+dense"',
                    name="a.toml")
    swapped = evaluate(write_scenario, 'preset = "llama-3.1-8b"\n'
                       'layer_pattern = "31*full+dense,projection+projection"', name="b.toml")
    attention, mlp = 2 * 4096 * 4096 + 2 * 4096 * 1024, 3 * 4096 * 14336
    assert base["params_total"] - swapped["params_total"] == attention + mlp - 2 * 4096**2
    assert swapped["kv_bytes_per_token"] == 31 * 2 * 8 * 128 * 2


# ------------------------------------------------------------------------ every mixer in the table

def test_layer_table_of_the_earlier_families(write_scenario):
    # gpt-oss-120b: sliding and full alternate, every layer MoE.
    oss = rows(evaluate(write_scenario, 'preset = "gpt-oss-120b"', name="a.toml"))
    assert {k: v["count"] for k, v in oss.items()} == {"sliding_moe": 18, "full_moe": 18}
    assert oss["sliding_moe"]["cache_bytes_per_token"] == 18 * 2 * 8 * 64 * 2
    # Llama 4 Maverick: 3 chunked then 1 full; MoE every other layer.
    mav = rows(evaluate(write_scenario, 'preset = "llama-4-maverick"', name="b.toml"))
    assert {k: v["count"] for k, v in mav.items()} == {"chunked_dense": 24, "chunked_moe": 12,
                                                        "full_moe": 12}
    # DeepSeek-V3: latent attention, 3 dense layers then MoE.
    ds = evaluate(write_scenario, 'preset = "deepseek-v3"', name="c.toml")
    table = rows(ds)
    assert {k: v["count"] for k, v in table.items()} == {"full_dense": 3, "full_moe": 58}
    assert table["full_dense"]["label"].startswith("latent attention")
    assert table["full_dense"]["cache_bytes_per_token"] == 3 * (512 + 64) * 2
    # Qwen3-Next: gated delta-net 3 of 4.
    qn = rows(evaluate(write_scenario, 'preset = "qwen3-next-80b-a3b"', name="d.toml"))
    assert qn["linear_moe"]["state_bytes"] == 36 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * 2


SUMS = ["jamba-1.5-mini", "minimax-m1", "nemotron-h-8b", "llama-3.3-nemotron-super-49b",
        "deepseek-v3", "gemma-3-27b", "gpt-oss-120b", "llama-4-maverick", "qwen3-next-80b-a3b",
        "mixtral-8x7b", "llama-3.1-8b", "nemotron-3-nano-30b-a3b"]


@pytest.mark.parametrize("preset", SUMS)
def test_the_rows_add_up_to_the_model(write_scenario, preset):
    r = evaluate(write_scenario, f'preset = "{preset}"', prompt=20000, extra="batch = 3")
    table = list(rows(r).values())
    assert sum(t["count"] for t in table) == r["layers"]
    assert sum(t["params"] for t in table) + r["params_outside_layers"] == r["params_total"]
    assert sum(t["cache_bytes_per_token"] for t in table) == pytest.approx(r["kv_bytes_per_token"])
    assert sum(t["state_bytes"] for t in table) == pytest.approx(
        r.values.get("linear_state_bytes_per_sequence", 0))
    assert sum(t["flops_per_token"] for t in table) + r["flops_per_token_outside_layers"] == \
        pytest.approx(r["decode_flops"] / r["batch"], rel=1e-12)


def test_the_rows_add_up_with_the_sparse_attention_indexer(write_scenario):
    # DeepSeek-V3.2's shape: each layer's row carries the indexer's 132 cache bytes a token
    # beside its latent, and its weights; the rows still add up to the model.
    config = json.loads((ROOT / "tests" / "data" / "hf" / "deepseek-v3.json").read_text())
    config.update(model_type="deepseek_v32", index_n_heads=64, index_head_dim=128, index_topk=2048)
    path = write_scenario(json.dumps(config), "deepseek-v3.2.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate(write_scenario, f'hf_config = "{path}"', prompt=20000, extra="batch = 3")
    table = list(rows(r).values())
    assert sum(t["cache_bytes_per_token"] for t in table) == pytest.approx(r["kv_bytes_per_token"])
    assert r["kv_bytes_per_token"] == 61 * ((512 + 64) * 2 + 132)
    assert sum(t["params"] for t in table) + r["params_outside_layers"] == r["params_total"]
    assert sum(t["flops_per_token"] for t in table) + r["flops_per_token_outside_layers"] == \
        pytest.approx(r["decode_flops"] / r["batch"], rel=1e-12)


@pytest.mark.parametrize(("preset", "config"), [
    ("jamba-1.5-mini", "ai21-jamba-1.5-mini"), ("minimax-m1", "minimax-m1"),
    ("nemotron-h-8b", "nemotron-h-8b-base-8k"), ("nemotron-h-56b", "nemotron-h-56b-base-8k"),
    ("llama-3.3-nemotron-super-49b", "llama-3.3-nemotron-super-49b-v1"),
    ("nemotron-3-nano-30b-a3b", "nvidia-nemotron-3-nano-30b-a3b"),
])
def test_hybrid_presets_equal_their_config(write_scenario, preset, config):
    a = evaluate(write_scenario, f'preset = "{preset}"', name="a.toml")
    b = evaluate(write_scenario, hf(config), name="b.toml")
    for name in ("params_total", "weight_bytes", "kv_bytes_per_sequence", "decode_flops",
                 "linear_state_bytes_per_sequence"):
        assert a.values.get(name) == b.values.get(name), name


# ------------------------------------------------------------------------ the command

def test_layers_command_table_and_json(capsys):
    scenario = str(ROOT / "scenarios" / "nemotron-h-8b-one-h100.toml")
    assert main(["layers", scenario]) == 0
    out = capsys.readouterr().out
    assert "Mamba-2 state space + no feed-forward" in out and "51.81 MB" in out
    assert main(["layers", scenario, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {row["kind"] for row in data["rows"]} == {"mamba2_none", "none_dense", "full_none"}
    assert data["model"]["params"] == sum(r["params"] for r in data["rows"]) + \
        data["outside_layers"]["params"]


def test_every_number_the_table_prints_is_explained(capsys):
    scenario = str(ROOT / "scenarios" / "jamba-1.5-mini-256k.toml")
    assert main(["explain", scenario, "layer_kind_mamba_moe_state_bytes"]) == 0
    assert "mamba_state_values_per_layer" in capsys.readouterr().out


def test_layers_command_user_mistake_exits_2(capsys, tmp_path):
    assert main(["layers", str(tmp_path / "nope.toml")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_hybrid_scenarios_simulate_with_the_layer_models_figures():
    from infermodel.analyses.simulation import layered_values

    r = infermodel.evaluate(ROOT / "scenarios" / "nemotron-h-8b-one-h100.toml")
    values = layered_values(r.values)
    assert values["kv_bytes_per_token"] == r["kv_bytes_per_sequence"] / r["sequence_length"]
    assert values["layers"] == pytest.approx(r["attention_flops_decode"]
                                             / (4 * r["query_width"] * r["context"]))
    plain = infermodel.evaluate(ROOT / "scenarios" / "module10-case-base.toml")
    assert layered_values(plain.values) is plain.values


# ------------------------------------------------------------------------ never silent

def test_a_family_that_cannot_be_read_is_refused_by_name():
    config = json.loads((CONFIGS / "nemotron-h-8b-base-8k.json").read_text())
    config["model_type"] = "falcon_h1"
    with pytest.raises(HFConfigError, match="falcon_h1.*side by side") as caught:
        map_hf_config(config)
    assert caught.value.key == "model_type"


@pytest.mark.parametrize(("model_type", "architecture", "reason"), [
    ("deepseek_v4", "DeepseekV4ForCausalLM", "compress_ratios"),
    ("deepseek_ref", "DeepseekV4ForCausalLM", "compress_ratios"),   # a re-quantised V4
    ("kimi_linear", "KimiLinearForCausalLM", "Kimi Delta Attention"),
    ("minimax_m3", "MiniMaxM3ForCausalLM", "block-sparse attention"),
    ("mimo_v2_flash", "MiMoV2FlashForCausalLM", "swa_num_key_value_heads"),
    ("gemma4_text", "Gemma4ForCausalLM", "global_head_dim"),
    # By architecture whatever the model_type beside it says:
    ("minimax_m3_vl", "MiniMaxM3SparseForConditionalGeneration", "block-sparse attention"),
    ("mimo", "MiMoV2FlashForCausalLM", "swa_num_key_value_heads"),
    ("kimi", "KimiLinearForCausalLM", "Kimi Delta Attention"),
    ("gemma", "Gemma4ForConditionalGeneration", "global_head_dim"),
])
def test_families_the_fields_cannot_express_are_refused_not_misread(model_type, architecture,
                                                                    reason):
    # Each would otherwise be read as something else: DeepSeek-V4 as plain sliding-window
    # attention (a cache of 128 positions a layer), the others with an error about their
    # activation or their layer list that does not say what is missing.
    config = json.loads((ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json").read_text())
    config.update(model_type=model_type, architectures=["LlamaForCausalLM", architecture])
    with pytest.raises(HFConfigError, match=f"not a family infermodel can read: .*{reason}") as caught:
        map_hf_config(config)
    if caught.value.key == "architectures":   # named by the architecture that matched
        assert f"architecture {architecture!r}" in str(caught.value)


def test_a_full_attention_interval_that_agrees_with_the_layer_list_is_read(recwarn):
    # Qwen3.5 writes both layer_types and full_attention_interval: when they agree the
    # interval is read (no warning); when they do not, the list is followed and the
    # interval named in a warning.
    config = json.loads((ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json").read_text())
    types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8
    config.update(model_type="qwen3_5_text", layer_types=types, full_attention_interval=4,
                  linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
                  linear_value_head_dim=128, linear_conv_kernel_dim=4)
    out = map_hf_config(config)
    assert out["layer_pattern"] == "3*linear,full"
    assert not [w for w in recwarn if "full_attention_interval" in str(w.message)]
    with pytest.warns(UserWarning, match="full_attention_interval = 2 shapes the network"):
        map_hf_config({**config, "full_attention_interval": 2})


def test_qwen3_5_attention_is_gated_normalised_and_turns_a_quarter():
    # Qwen/Qwen3.5-397B-A17B config.json (text_config): attn_output_gate true, its
    # full-attention layers are Qwen3-Next's (per-head q/k norms), and Transformers 5's
    # rope_parameters hold partial_rotary_factor 0.25. Before, all three were left out:
    # a query projection half as wide as the checkpoint's (the gate's 32 x 256 columns).
    config = json.loads((ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json").read_text())
    types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8
    config.update(model_type="qwen3_5_moe_text", layer_types=types, attn_output_gate=True,
                  linear_num_key_heads=16, linear_num_value_heads=64, linear_key_head_dim=128,
                  linear_value_head_dim=128, linear_conv_kernel_dim=4,
                  rope_parameters={"rope_type": "default", "rope_theta": 10_000_000,
                                   "partial_rotary_factor": 0.25})
    out = map_hf_config(config)
    assert (out["attention_output_gate"], out["qk_norm"], out["rotary_fraction"]) == (True, True, 0.25)
    # A top-level factor wins over the rotary parameters'; no gate where none is stated.
    plain = map_hf_config({**config, "model_type": "llama", "attn_output_gate": False,
                           "partial_rotary_factor": 0.5})
    assert plain["rotary_fraction"] == 0.5
    assert "attention_output_gate" not in plain and "qk_norm" not in plain
    # Rotary parameters without a factor turn every value; Qwen3-Next's gate is its
    # default, which a stated false turns off.
    whole = map_hf_config({**config, "model_type": "llama", "attn_output_gate": False,
                           "rope_parameters": {"rope_type": "default", "rope_theta": 500_000}})
    assert "rotary_fraction" not in whole
    next_types = {**config, "model_type": "qwen3_next", "full_attention_interval": 4}
    del next_types["attn_output_gate"]
    assert map_hf_config(next_types)["attention_output_gate"] is True
    assert "attention_output_gate" not in map_hf_config({**next_types, "attn_output_gate": False})


def test_an_unread_shaping_key_is_a_warning_naming_it(write_scenario):
    config = json.loads((ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json").read_text())
    config["attn_layer_indices"] = [3, 7]          # Bamba's key: no reader uses it here
    with pytest.warns(UserWarning, match="attn_layer_indices"):
        map_hf_config(config)


def test_scores_correction_biases_and_routers_in_16_bits(write_scenario):
    # DeepSeek-V3's topk_method "noaux_tc": e_score_correction_bias, 256 fp32 values in each
    # of the 58 MoE layers; its router gate stays bf16 in the FP8 checkpoint.
    r = evaluate(write_scenario, 'hf_config = "' + str(ROOT / "tests" / "data" / "hf" / "deepseek-v3.json")
                 + '"')
    assert r["params_router_fp32"] == 58 * 256
    assert r["weight_bytes_router"] == 2 * 58 * 7168 * 256 + 4 * 58 * 256


def test_expert_biases_are_read_for_the_chosen_experts_only(write_scenario):
    # gpt-oss-120b: each expert's biases (2 x 2880 + 2880, bf16) are read with its matrices.
    one = evaluate(write_scenario, 'preset = "gpt-oss-120b"', extra="batch = 1", name="a.toml")
    assert one["expert_bias_params"] == 3 * 2880
    unread = 36 * (128 - 4) * (one["expert_params"] * one["expert_bytes_per_param"] + 3 * 2880 * 2)
    assert one["weight_bytes_total"] - one["weight_bytes_active"] == pytest.approx(unread)


_BASES = {name: json.loads((CONFIGS / f"{name}.json").read_text())
          for name in ("nemotron-h-8b-base-8k", "ai21-jamba-1.5-mini")}
_MUTABLE = sorted(SHAPING_KEYS - {"topk_method"})
_VALUES = st.one_of(st.integers(2, 300), st.integers(-5, -1), st.just(2.5), st.just("abc"),
                    st.just([5, 6]), st.just({"a": 1}), st.just(math.nan), st.just(math.inf))


def _quiet_map(config):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shape = map_hf_config(config)
    return shape, " ".join(str(w.message) for w in caught)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(sorted(_BASES)), st.sampled_from(_MUTABLE), _VALUES)
def test_a_mutated_architectural_key_is_used_warned_about_or_refused(base, key, value):
    config = json.loads(json.dumps(_BASES[base]))
    assume(config.get(key) != value)
    expected, _ = _quiet_map(config)
    config[key] = value
    try:
        shape, notes = _quiet_map(config)
    except HFConfigError as exc:
        assert exc.key and exc.message
        return
    assert shape != expected or key in notes, (key, value)


def test_a_checkpoints_exclusions_stay_16_bit(write_scenario, tmp_path):
    # An FP8 checkpoint of Nemotron-H-8B that leaves its attention and Mamba mixers out of
    # the format (modules_to_not_convert): only the 24 MLPs are FP8, the mixers 16-bit
    # (the per-tensor fp32 scales, a few kB, are counted as for a uniform stack).
    config = json.loads((CONFIGS / "nemotron-h-8b-base-8k.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "modules_to_not_convert": [
        "backbone.layers.7.mixer.q_proj", "backbone.layers.0.mixer.in_proj", "lm_head"]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    r = evaluate(write_scenario, f'hf_config = "{path}"')
    assert r.scenario.value("model.unquantized") == "attention,mixers"
    mlp = 24 * 2 * 4096 * 21504
    assert r["weight_bytes_linear"] == pytest.approx(mlp, rel=1e-6)
    assert r["params_unquantized"] == r["params_attention"]
    config["quantization_config"]["modules_to_not_convert"].append("something_else")
    with pytest.warns(UserWarning, match="something_else"):
        map_hf_config(config)


@pytest.mark.parametrize("fields, key, mentions", [
    ('weight_format = "nvfp4"\nunquantized = "latent"', "model.unquantized", "kv_lora_rank"),
    ('qk_norm_scope = "layer"', "model.qk_norm_scope", "qk_norm"),
])
def test_model_fields_that_need_another_feature_are_refused(write_scenario, capsys, fields, key,
                                                             mentions):
    # Latent projections kept 16-bit need latent attention; a layer-wide norm scope needs
    # query/key norms. Llama-3.1-8B has neither.
    path = write_scenario(f"""
[model]
preset = "llama-3.1-8b"
{fields}
[hardware]
preset = "b200"
[workload]
prompt_tokens = 128
output_tokens = 16
""")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert key in err and mentions in err


#: MiniMaxAI/MiniMax-M2.5's published config.json (its shape and query/key norm keys).
MINIMAX_M2 = {"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
              "num_hidden_layers": 62, "hidden_size": 3072, "num_attention_heads": 48,
              "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 1536,
              "vocab_size": 200064, "num_experts_per_tok": 8, "num_local_experts": 256,
              "hidden_act": "silu", "tie_word_embeddings": False, "use_qk_norm": True,
              "qk_norm_type": "per_layer", "rotary_dim": 64, "scoring_func": "sigmoid"}


def test_layer_wide_query_key_norms_all_reduce_once_a_layer_under_tensor_parallelism(
        write_scenario, tmp_path):
    # MiniMax-M2 normalises all of a layer's queries together and all its keys together:
    # split over T cards, each attention layer all-reduces the tokens' two fp32 mean squares
    # (8 bytes a token), a latency-bound collective the per-head norms of Qwen3 never need.
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MINIMAX_M2))
    shape = read_hf_config(path)
    assert (shape["qk_norm"], shape["qk_norm_scope"]) == (True, "layer")
    tp = '[levers.parallelism]\ntensor = 4\n'
    r = evaluate(write_scenario, f'hf_config = "{path}"', prompt=1024, output=2, count=4,
                 extra=tp)
    # The norms' weights span the heads: (48 + 8)·128 a layer.
    assert r["params_norm_attention"] == 62 * (48 + 8) * 128
    head = evaluate(write_scenario, f'hf_config = "{path}"\nqk_norm_scope = "head"', prompt=1024,
                    output=2, count=4, extra=tp, name="head.toml")
    assert head["params_norm_attention"] == 62 * 2 * 128
    n, batch = 4, r["batch"]
    one = (r["parallel_collective_latency"] + r["parallel_link_latency"]
           + (n - 1) * 8 * batch / (r["collective_bandwidth_fraction"] * r["parallel_link_bandwidth"]))
    assert r["parallel_decode_comm_time"] - head["parallel_decode_comm_time"] == pytest.approx(
        62 * one, rel=1e-9)
    # On one card nothing is reduced.
    alone = evaluate(write_scenario, f'hf_config = "{path}"', prompt=1024, output=2, count=1,
                     name="one.toml")
    assert "parallel_decode_comm_time" not in alone.values or alone["parallel_decode_comm_time"] == 0


def test_a_router_kept_in_32_bits_runs_at_the_cards_32_bit_rate_or_says_what_it_costs(
        write_scenario, tmp_path):
    # vLLM and SGLang build MiniMax-M2's gate in float32 and feed it float32 states
    # (models/minimax_m2.py), and vLLM keeps PyTorch's IEEE FP32 unless
    # VLLM_FLOAT32_MATMUL_PRECISION says otherwise: on an H200 (datasheet FP32 67,
    # TF32 989 with sparsity) an 8,192-token prompt's router is 2·8192·62·3072·256 FLOPs.
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MINIMAX_M2))
    assert read_hf_config(path)["router_dtype"] == "fp32"
    flops = 2 * 8192 * 62 * 3072 * 256
    step = evaluate(write_scenario, f'hf_config = "{path}"', count=1)
    assert step["prefill_router_time_fp32"] == pytest.approx(flops / 67e12, rel=1e-12)
    said = [str(w) for w in step.warnings if "router multiplies in 32 bits" in str(w)]
    assert len(said) == 1 and "at hardware.flops_fp32 they take 11.92 ms a prefill" in said[0]
    operator = evaluate(write_scenario, f'hf_config = "{path}"', count=1, name="op.toml",
                        extra='[efficiency]\nroofline = "operator"')
    assert operator["prefill_op_router_time"] == pytest.approx(flops / 67e12, rel=1e-12)
    assert not any("router multiplies" in str(w) for w in operator.warnings)
    tf32 = evaluate(write_scenario, f'hf_config = "{path}"', count=1, name="tf32.toml",
                    extra='[efficiency]\nroofline = "operator"\nfp32_matmul = "tf32"')
    assert tf32["router_matmul_rate"] == pytest.approx(494.5e12)
    assert tf32["prefill_op_router_time"] == pytest.approx(flops / 494.5e12, rel=1e-12)
    # The gate is on every tensor card, over all the tokens: at TP 4 each card's router takes
    # the whole prompt's FLOPs. Under data-parallel attention (4 ranks, the dense layers on
    # each, vLLM's way) each card's takes its rank's prompts: 4 prompts, one a rank.
    tp = evaluate(write_scenario, f'hf_config = "{path}"', count=4, name="tp.toml",
                  extra='[efficiency]\nroofline = "operator"\n[levers.parallelism]\ntensor = 4')
    assert tp["prefill_op_router_time"] == pytest.approx(flops / 67e12, rel=1e-12)
    dp = evaluate(write_scenario, f'hf_config = "{path}"', count=4, name="dp.toml",
                  extra='batch = 4\n[efficiency]\nroofline = "operator"\nengine = "vllm"\n'
                        '[levers.parallelism]\nattention_data = 4\nexpert = 4')
    assert dp["prefill_router_time_fp32"] == pytest.approx(flops / 67e12, rel=1e-12)
    assert dp["prefill_op_router_time"] == pytest.approx(flops / 67e12, rel=1e-12)
    # Two pipeline stages: each card's router multiplies its stage's 31 layers, and the
    # operator roofline counts the whole model over every card, as it does the others.
    pp = evaluate(write_scenario, f'hf_config = "{path}"', count=2, name="pp.toml",
                  extra='[efficiency]\nroofline = "operator"\n[levers.parallelism]\npipeline = 2')
    assert pp["prefill_op_router_time"] == pytest.approx(flops / 2 / 67e12, rel=1e-12)
    # A card that states no 32-bit rate: the router's FLOPs stay at the 16-bit one, said.
    bare = evaluate(write_scenario, f'hf_config = "{path}"', count=1, name="bare.toml",
                    hardware="mi300x")
    assert "router_matmul_rate" not in bare.values
    assert any("states no hardware.flops_fp32" in str(w) for w in bare.warnings)
    # A 16-bit router (the field's default, every other model) changes nothing.
    plain = evaluate(write_scenario, f'hf_config = "{path}"\nrouter_dtype = "bf16"', count=1,
                     name="plain.toml")
    assert "prefill_router_time_fp32" not in plain.values
    assert plain["prefill_time"] == step["prefill_time"]
    # Other mixtures of experts keep the 16-bit router.
    other = {**MINIMAX_M2, "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"]}
    for key in ("use_qk_norm", "qk_norm_type", "rotary_dim", "scoring_func"):
        other.pop(key)
    qwen = tmp_path / "qwen.json"
    qwen.write_text(json.dumps(other))
    assert "router_dtype" not in read_hf_config(qwen)


def test_layer_wide_norms_under_data_parallel_attention_and_a_lone_tensor_rank(write_scenario, tmp_path):
    # Under data-parallel attention the norms' all-reduce runs within each rank's cards and
    # is part of the all_reduce operator the step adds; one card per stage reduces nothing.
    from infermodel.cli import main as cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(MINIMAX_M2))
    dp = ('[workload]\nbatch = 8\nprompt_tokens = 1024\noutput_tokens = 64\n'
          '[levers.parallelism]\ntensor = 2\nattention_data = 2\nexpert = 4\n')
    results, ops = {}, {}
    for scope in ("layer", "head"):
        scenario = write_scenario(f'[model]\nhf_config = "{path}"\nqk_norm_scope = "{scope}"\n'
                                  f'[hardware]\npreset = "b200"\ncount = 4\n{dp}', f"{scope}.toml")
        results[scope] = infermodel.evaluate(scenario)
        out = tmp_path / f"{scope}.json"
        assert cli(["ops", str(scenario), "--format", "json", "--output", str(out)]) == 0
        ops[scope] = {o["operator"]: o for o in json.loads(out.read_text())["operators"]}
    step = results["layer"]["decode_step_time"] - results["head"]["decode_step_time"]
    reduce = ops["layer"]["all_reduce"]["time"] - ops["head"]["all_reduce"]["time"]
    assert step > 0 and reduce == pytest.approx(step, rel=1e-3)
    # tensor = 1 stated: no all-reduce at all, as without the lever.
    one = '[workload]\nbatch = 4\nprompt_tokens = 1024\noutput_tokens = 64\n'
    base = write_scenario(f'[model]\nhf_config = "{path}"\n[hardware]\npreset = "b200"\n{one}', "b.toml")
    lone = write_scenario(f'[model]\nhf_config = "{path}"\n[hardware]\npreset = "b200"\n{one}'
                          '[levers.parallelism]\ntensor = 1\n', "l.toml")
    assert infermodel.evaluate(lone)["tpot"] == pytest.approx(infermodel.evaluate(base)["tpot"], rel=1e-12)


def test_deepseek_sparse_attention_layers_read_as_full_attention_with_the_indexer():
    # NVIDIA's GLM-5.2 and 5.3 checkpoints list every layer as "deepseek_sparse_attention":
    # full (latent) attention with DeepSeek Sparse Attention's indexer, which the index_*
    # keys describe and its fields take. Without those keys the type means nothing.
    config = json.loads((ROOT / "tests" / "data" / "hf" / "deepseek-v3.json").read_text())
    layers = config["num_hidden_layers"]
    sparse = {**config, "layer_types": ["deepseek_sparse_attention"] * layers,
              "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}
    with pytest.warns(UserWarning, match="multi-token-prediction"):
        out = map_hf_config(sparse)
    assert out.get("layer_pattern", "full") == "full" and out["kv_lora_rank"] == 512
    assert (out["index_heads"], out["index_head_dim"], out["index_topk"]) == (64, 128, 2048)
    broken = {**sparse, "index_topk": 0}
    with pytest.raises(HFConfigError, match="index_topk"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        map_hf_config(broken)
    partial = {**sparse, "index_topk": None}
    with pytest.raises(HFConfigError, match="without index_topk: DeepSeek Sparse Attention's "
                                            "indexer needs all three"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        map_hf_config(partial)
    qwen = json.loads((ROOT / "tests" / "data" / "hf" / "qwen3-8b.json").read_text())
    plain = {**qwen, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}
    with pytest.warns(UserWarning, match="works on latent attention .* not read"):
        assert "index_heads" not in map_hf_config(plain)
    for key in ("index_n_heads", "index_head_dim", "index_topk"):
        del sparse[key]
    with pytest.raises(HFConfigError, match="unknown layer type.*deepseek_sparse_attention"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        map_hf_config(sparse)


def test_modules_left_out_of_the_quantization_that_match_no_group_are_one_note():
    from infermodel.hf_config.quantization import unquantized_groups

    notes: list[str] = []
    names = [f"model.layers.{i}.mlp.shared_experts*" for i in range(40)]
    assert unquantized_groups({"ignore": [*names, "model.layers.3.self_attn*"]}, "c.json", notes,
                              layers=61) == "attention"
    assert notes == ["c.json: 40 modules 'model.layers.0.mlp.shared_experts*', 'model.layers.1.mlp."
                     "shared_experts*', 'model.layers.2.mlp.shared_experts*' and 37 more are left "
                     "out of the quantization but match no parameter group; counted in the "
                     "checkpoint's format"]
