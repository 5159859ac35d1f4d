"""Today's architectures, from their published config.json files (tests/data/hf/, the shape
keys of each model's published configuration).

Every expected number is computed by hand here from the configuration's values, with the
source cited; published totals come from the model's technical report or model card.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import DATA, ROOT
from infermodel.cli import main
from infermodel.errors import ScenarioError
from infermodel.hf_config import HFConfigError, map_hf_config
from infermodel_builtins.shapes import (
    KINDS,
    PatternError,
    layer_kind_counts,
    parse_layer_pattern,
)

HF = DATA / "hf"
GB = 1e9


def evaluate(write_scenario, model: str, *, prompt=32768, output=1, extra="", hardware="h200",
             name="scenario.toml"):
    path = write_scenario(f"""
[model]
{model}
[hardware]
preset = "{hardware}"
[workload]
prompt_tokens = {prompt}
output_tokens = {output}
sequence_length = {prompt}
{extra}
""", name)
    return infermodel.evaluate(path)


def hf(name: str) -> str:
    return f'hf_config = "{HF / name}.json"'


# ------------------------------------------------------------------------ DeepSeek-V3

# deepseek-ai/DeepSeek-V3 config.json: hidden 7168, 61 layers (first 3 dense, 18432 wide),
# 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head 128,
# 256 routed experts of 2048 + 1 shared, top-8, vocab 129280, untied, FP8 128x128 blocks.
D, LAYERS, DENSE, HEADS = 7168, 61, 3, 128
QR, KVR, NOPE, ROPE, V = 1536, 512, 128, 64, 128
EXPERTS, ACTIVE, EXPERT_FF, DENSE_FF, VOCAB = 256, 8, 2048, 18432, 129280
MLA_LAYER = (D * QR + QR * HEADS * (NOPE + ROPE) + D * (KVR + ROPE) + KVR * HEADS * (NOPE + V)
             + HEADS * V * D)
EXPERT = 3 * D * EXPERT_FF
DS_NORMS = (2 * LAYERS + 1) * D + LAYERS * (QR + KVR)
DS_EMBED = VOCAB * D
# Each MoE layer's router: D x EXPERTS weights (bf16 in the FP8 checkpoint) and, with
# topk_method "noaux_tc", EXPERTS fp32 score-correction biases (e_score_correction_bias).
DS_ROUTER, DS_SCORE = (LAYERS - DENSE) * D * EXPERTS, (LAYERS - DENSE) * EXPERTS
DS_TOTAL = (LAYERS * MLA_LAYER + DENSE * 3 * D * DENSE_FF
            + (LAYERS - DENSE) * ((EXPERTS + 1) * EXPERT + D * EXPERTS) + DS_NORMS + 2 * DS_EMBED
            + DS_SCORE)
DS_ACTIVE = (LAYERS * MLA_LAYER + DENSE * 3 * D * DENSE_FF
             + (LAYERS - DENSE) * ((ACTIVE + 1) * EXPERT + D * EXPERTS) + DS_NORMS + 2 * DS_EMBED
             + DS_SCORE)
# FP8 codes with one fp32 scale per 128x128 block; routers in bf16, score-correction biases
# in fp32; embedding, head and norms in bf16.
DS_FP8_BYTES = ((DS_TOTAL - DS_NORMS - 2 * DS_EMBED - DS_ROUTER - DS_SCORE) * (8 + 32 / (128 * 128)) / 8
                + DS_ROUTER * 2 + DS_SCORE * 4 + (DS_NORMS + 2 * DS_EMBED) * 2)


def test_deepseek_v3_latent_cache_is_70272_bytes_per_token(write_scenario):
    r = evaluate(write_scenario, hf("deepseek-v3"))
    assert r["kv_bytes_per_token"] == 61 * (512 + 64) * 2 == 70_272
    # 25x smaller than ordinary attention over 128 heads of 192 + 128 would be.
    assert 2 * 61 * 128 * 192 * 2 / 70_272 > 25


def test_deepseek_v3_parameters_total_and_active(write_scenario):
    r = evaluate(write_scenario, hf("deepseek-v3"))
    assert r["params_total"] == DS_TOTAL
    assert r["params_active"] == DS_ACTIVE
    # DeepSeek-V3 technical report (arXiv:2412.19437): 671 B total, 37 B activated;
    # README_WEIGHTS: 36.6 B activated counting the head but not the input embedding.
    assert r["params_total"] == pytest.approx(671e9, rel=0.005)
    assert r["params_active"] == pytest.approx(37e9, rel=0.02)
    assert r["params_active"] - r["params_embedding"] == pytest.approx(36.6e9, rel=0.005)


def test_deepseek_v3_fp8_checkpoint_size_from_quantization_config(write_scenario):
    r = evaluate(write_scenario, hf("deepseek-v3"))
    assert r["weight_bytes"] == pytest.approx(DS_FP8_BYTES, rel=1e-9)
    assert r["weight_bytes"] / GB == pytest.approx(673.15, abs=0.01)
    # The derivation says where the format came from.
    assert "quantization_config" in r.quantity("weight_code_bits_linear").description or \
        "weight_format" in r.quantity("weight_code_bits_linear").description
    # The multi-token-prediction module is reported, with its size.
    assert any("multi-token-prediction" in w and "1.6 %" in w for w in r.warnings)


def test_deepseek_v3_absorbed_and_naive_decode_flops(write_scenario):
    absorbed = evaluate(write_scenario, hf("deepseek-v3"), prompt=4096)
    naive = evaluate(write_scenario, hf("deepseek-v3") + '\nmla_decode = "naive"', prompt=4096,
                     name="naive.toml")
    context = 4096 + 0.5
    per_absorbed = 2 * HEADS * (KVR + ROPE) + 2 * HEADS * KVR
    per_naive = 2 * HEADS * (NOPE + ROPE) + 2 * HEADS * V + 2 * KVR * HEADS * (NOPE + V)
    assert absorbed["attention_flops_decode"] == pytest.approx(per_absorbed * LAYERS * context)
    assert naive["attention_flops_decode"] == pytest.approx(per_naive * LAYERS * context)
    # Both read the same latent cache.
    assert absorbed["decode_bytes"] == naive["decode_bytes"]


# ------------------------------------------------------------------------ gpt-oss-120b

# openai/gpt-oss-120b config.json: hidden 2880, 36 layers alternating sliding (128) and
# full, 64 heads of 64, 8 KV heads, attention biases and sinks, 128 experts of 2880
# (biased), top-4, vocab 201088, untied; MXFP4 experts, attention/router/embeddings bf16.
def _oss_counts(d=2880, layers=36, experts=128, vocab=201088):
    attention = 2 * d * 4096 + 2 * d * 512 + (4096 + 2 * 512 + d) + 64
    expert_matrices = 3 * d * 2880
    expert_biases = 2 * 2880 + d
    router = d * experts + experts
    total = (layers * (attention + experts * (expert_matrices + expert_biases) + router)
             + (2 * layers + 1) * d + 2 * vocab * d)
    return total, layers * experts * expert_matrices


def test_gpt_oss_120b_parameters_and_mxfp4_checkpoint(write_scenario):
    r = evaluate(write_scenario, hf("gpt-oss-120b"))
    total, experts = _oss_counts()
    assert r["params_total"] == total
    # gpt-oss model card (arXiv:2508.10925), Table 1: 116.8 B total.
    assert total == pytest.approx(116.8e9, rel=0.001)
    expected = experts * 4.25 / 8 + (total - experts) * 2
    assert r["weight_bytes"] == pytest.approx(expected, rel=1e-9)
    assert r["weight_bytes"] / GB == pytest.approx(65.25, abs=0.01)  # not 234 GB at 16 bits
    assert r["weight_bytes_experts"] == pytest.approx(experts * 4.25 / 8, rel=1e-9)


@pytest.mark.parametrize("length", [32768, 131072])
def test_gpt_oss_120b_alternating_window_cache(write_scenario, length):
    r = evaluate(write_scenario, hf("gpt-oss-120b"), prompt=length)
    per_layer_token = 2 * 8 * 64 * 2
    expected = per_layer_token * (18 * length + 18 * min(length, 128))
    assert r["kv_bytes_per_sequence"] == expected
    # About half the full-attention cache: 18 of 36 layers keep 128 tokens only.
    assert r["kv_bytes_per_sequence"] / (36 * per_layer_token * length) == pytest.approx(
        0.5, abs=0.01)


# ------------------------------------------------------------------------ Gemma-3-27B

def test_gemma_3_27b_published_config_loads_with_model_type_vocab(write_scenario):
    r = evaluate(write_scenario, hf("gemma-3-27b-it"))
    assert r["vocab"] == 262_208  # Gemma3TextConfig default: the published text_config omits it
    assert (r["layers_sliding_window"], r["layers_full_attention"]) == (52, 10)
    # Gemma 3 technical report (arXiv:2503.19786) Table 1: 25,600 M non-embedding parameters.
    assert r["params_total"] - r["params_embedding"] == pytest.approx(25_600e6, rel=0.005)
    assert any("vision encoder" in w for w in r.warnings)


@pytest.mark.parametrize("length", [32768, 131072])
def test_gemma_3_27b_cache_local_and_global(write_scenario, length):
    r = evaluate(write_scenario, hf("gemma-3-27b-it"), prompt=length)
    per_layer_token = 2 * 16 * 128 * 2
    assert r["kv_bytes_per_sequence"] == per_layer_token * (10 * length + 52 * 1024)
    saved = 1 - r["kv_bytes_per_sequence"] / (62 * per_layer_token * length)
    assert saved > 0.8  # the local layers save over 80 % of the cache at 32k and more at 128k


# ------------------------------------------------------------------------ Qwen3-Next

# Qwen/Qwen3-Next-80B-A3B config.json: 48 layers, full_attention_interval 4 (12 full, 36
# gated delta-net), 2 KV heads of 256; linear 16 key heads and 32 value heads of 128,
# convolution kernel 4.
QN_KV_PER_TOKEN = 12 * 2 * 2 * 256 * 2
QN_STATE = 36 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * 2


def test_qwen3_next_cache_grows_with_12_layers_and_state_is_fixed(write_scenario):
    short = evaluate(write_scenario, hf("qwen3-next-80b-a3b"), prompt=32768, name="a.toml")
    long = evaluate(write_scenario, hf("qwen3-next-80b-a3b"), prompt=131072, name="b.toml")
    assert short["kv_bytes_per_token"] == QN_KV_PER_TOKEN == 24_576
    assert short["linear_state_bytes_per_sequence"] == QN_STATE == 39_518_208
    assert long["kv_bytes_per_sequence"] - short["kv_bytes_per_sequence"] == \
        QN_KV_PER_TOKEN * (131072 - 32768)
    assert short["kv_bytes_per_sequence"] == QN_KV_PER_TOKEN * 32768 + QN_STATE


def test_qwen3_next_state_charged_once_per_sequence(write_scenario):
    r = evaluate(write_scenario, hf("qwen3-next-80b-a3b"), prompt=8192,
                 extra="batch = 4")
    assert r["kv_bytes_total"] == 4 * (QN_KV_PER_TOKEN * 8192 + QN_STATE)
    # A decode step reads the cache at the mean context and reads and writes the state.
    context = 8192 + 0.5
    assert r["decode_bytes"] == pytest.approx(
        r["weight_bytes_per_step"] + 4 * (QN_KV_PER_TOKEN * context + 2 * QN_STATE))
    # Published: about 80 B parameters (model card).
    assert r["params_total"] == pytest.approx(80e9, rel=0.005)


# ------------------------------------------------------------------------ golden counts per preset

# (preset, published total, relative tolerance, source). Kimi K2 states "1 T" (rounded);
# Llama 4 Scout's 109 B includes its vision encoder, which is not modelled.
PUBLISHED = [
    ("deepseek-v3", 671e9, 0.005, "DeepSeek-V3 technical report, abstract"),
    ("deepseek-r1", 671e9, 0.005, "DeepSeek-R1 model card"),
    ("kimi-k2", 1.0e12, 0.03, "Kimi K2 model card: 1 T total (rounded)"),
    ("gpt-oss-120b", 116.8e9, 0.005, "gpt-oss model card, Table 1"),
    ("gpt-oss-20b", 20.9e9, 0.005, "gpt-oss model card, Table 1"),
    ("llama-4-scout", 109e9, 0.015, "Llama 4 model card (vision encoder included there)"),
    ("llama-4-maverick", 400e9, 0.005, "Llama 4 model card"),
    ("qwen3-8b", 8.2e9, 0.005, "Qwen3-8B model card"),
    ("qwen3-32b", 32.8e9, 0.005, "Qwen3-32B model card"),
    ("qwen3-235b-a22b", 235e9, 0.005, "Qwen3-235B-A22B model card"),
    ("qwen3-next-80b-a3b", 80e9, 0.005, "Qwen3-Next-80B-A3B model card"),
    ("llama-3.3-70b", 70.6e9, 0.005, "Llama-3.3-70B-Instruct safetensors total"),
]


@pytest.mark.parametrize(("preset", "total", "tolerance", "source"), PUBLISHED,
                         ids=[p[0] for p in PUBLISHED])
def test_preset_parameter_count_matches_published_total(write_scenario, preset, total, tolerance,
                                                        source):
    r = evaluate(write_scenario, f'preset = "{preset}"', prompt=1024)
    assert r["params_total"] == pytest.approx(total, rel=tolerance), source


def test_gemma_3_27b_preset_non_embedding_count(write_scenario):
    r = evaluate(write_scenario, 'preset = "gemma-3-27b"', prompt=1024)
    assert r["params_total"] - r["params_embedding"] == pytest.approx(25_600e6, rel=0.005)


@pytest.mark.parametrize(("preset", "config"), [
    ("deepseek-v3", "deepseek-v3"), ("gpt-oss-120b", "gpt-oss-120b"), ("gemma-3-27b", "gemma-3-27b-it"),
    ("qwen3-next-80b-a3b", "qwen3-next-80b-a3b"), ("llama-4-maverick", "llama-4-maverick-17b-128e"),
])
def test_presets_equal_their_config(write_scenario, preset, config):
    a = evaluate(write_scenario, f'preset = "{preset}"', name="a.toml")
    b = evaluate(write_scenario, hf(config), name="b.toml")
    for name in ("params_total", "weight_bytes", "kv_bytes_per_sequence", "decode_flops"):
        assert a[name] == b[name], name


# ------------------------------------------------------------------------ windows: the longest context

@pytest.mark.parametrize("preset", ["gemma-3-27b", "gpt-oss-120b", "qwen3-next-80b-a3b",
                                    "llama-4-scout"])
def test_max_context_inverts_the_windowed_cache(write_scenario, preset):
    r = evaluate(write_scenario, f'preset = "{preset}"', prompt=1024, hardware="mi355x",
                 extra="batch = 3")
    budget, n = r["kv_budget_bytes"], r["max_context"]
    assert n > 0
    ok = evaluate(write_scenario, f'preset = "{preset}"', prompt=int(n), hardware="mi355x",
                  extra="batch = 3", name="ok.toml")
    over = evaluate(write_scenario, f'preset = "{preset}"', prompt=int(n) + 1, hardware="mi355x",
                    extra="batch = 3", name="over.toml")
    assert 3 * ok["kv_bytes_per_sequence"] <= budget < 3 * over["kv_bytes_per_sequence"]


def test_windowed_prefill_attention_counts_pairs_inside_the_window(write_scenario):
    r = evaluate(write_scenario, hf("gpt-oss-120b"), prompt=1000)
    n, w = 1000, 128
    pairs = 18 * n**2 / 2 + 18 * (n**2 - (n - w) ** 2) / 2
    assert r["attention_flops_prefill"] == pytest.approx(4 * 64 * 64 * pairs)


# ------------------------------------------------------------------------ existing models unchanged

def test_a_plain_model_keeps_the_base_formulas(write_scenario):
    r = evaluate(write_scenario, 'preset = "llama-3.1-8b"', prompt=4000)
    assert "attention_flops_decode" not in r and "kv_layers" not in r
    assert str(r.quantity("kv_bytes_per_token").expression) == "2*head_dim*kv_heads*kv_value_bytes*layers"
    assert str(r.quantity("decode_bytes").expression) == \
        "batch*context*kv_bytes_per_token + weight_bytes_per_step"
    assert r["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2


# ------------------------------------------------------------------------ bad input

def test_layer_pattern_longer_than_layers_is_one_clear_error(write_scenario, capsys):
    path = write_scenario("""
[model]
preset = "llama-3.1-8b"
layer_pattern = "40*sliding,full"
sliding_window = 4096
[hardware]
preset = "h200"
[workload]
prompt_tokens = 100
output_tokens = 10
""")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "model.layer_pattern" in err and "41 layers but the model has 32" in err
    assert "Traceback" not in err


def test_config_layer_types_longer_than_layer_count_is_an_error(tmp_path, write_scenario, capsys):
    config = json.loads((HF / "gpt-oss-20b.json").read_text())
    config["layer_types"] = config["layer_types"] + ["full_attention"] * 2
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(config))
    with pytest.raises(HFConfigError, match="26 layer kinds but num_hidden_layers is 24"):
        map_hf_config(config)
    path = write_scenario(f"""
[model]
hf_config = "{bad}"
[hardware]
preset = "h200"
[workload]
prompt_tokens = 100
output_tokens = 10
""", "bad.toml")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "layer_types" in err and "Traceback" not in err


def test_a_window_larger_than_the_context_is_fine(write_scenario):
    r = evaluate(write_scenario, 'preset = "gpt-oss-20b"\nsliding_window = 1000000', prompt=2048)
    assert r["kv_bytes_per_sequence"] == 24 * 2 * 8 * 64 * 2 * 2048


@pytest.mark.parametrize(("extra", "key"), [
    ('layer_pattern = "sliding,full"', "model.sliding_window"),
    ('layer_pattern = "linear,full"', "model.linear_key_heads"),
    ('layer_pattern = "chunked,full"', "model.attention_chunk"),
    ('layer_pattern = "full,bogus"', "model.layer_pattern"),
    ('layer_pattern = "linear"\nlinear_key_heads = 1\nlinear_value_heads = 1\n'
     'linear_key_head_dim = 8\nlinear_value_head_dim = 8', "model.layer_pattern"),
    ("qk_rope_head_dim = 64", "model.qk_rope_head_dim"),
    ("kv_lora_rank = 512", "model.qk_nope_head_dim"),
])
def test_inconsistent_architecture_fields_are_reported(write_scenario, extra, key):
    path = write_scenario(f"""
[model]
preset = "llama-3.1-8b"
{extra}
[hardware]
preset = "h200"
[workload]
prompt_tokens = 100
output_tokens = 10
""")
    with pytest.raises(ScenarioError) as info:
        infermodel.load_scenario(path)
    assert key in str(info.value)


# ------------------------------------------------------------------------ pure helpers

def test_layer_kind_counts_repeat_from_the_first_layer():
    assert layer_kind_counts(parse_layer_pattern("3*chunked,full"), 48) == {
        "full": 12, "sliding": 0, "chunked": 36, "linear": 0}
    assert layer_kind_counts(parse_layer_pattern("sliding,full"), 7)["sliding"] == 4


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_pattern_parser_fuzz_only_raises_pattern_errors(text):
    try:
        kinds = parse_layer_pattern(text)
    except PatternError:
        return
    assert kinds and all(k in KINDS for k in kinds)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["full", "sliding", "chunked", "linear"]), min_size=1, max_size=12),
       st.integers(min_value=1, max_value=200))
def test_counts_add_up_to_the_layers(pattern, extra):
    layers = len(pattern) + extra
    counts = layer_kind_counts(tuple(pattern), layers)
    assert sum(counts.values()) == layers


def test_every_shipped_preset_config_reads_without_errors():
    for path in sorted(HF.glob("*.json")):
        if path.stem in ("bad-kv-heads", "missing-layers", "unknown-activation"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            infermodel.hf_config.read_hf_config(path)



# ------------------------------------------------------------------------ levers see the windows

def test_prefix_sharing_keeps_only_full_layers_prefix(write_scenario):
    extra = "[levers.prefix_cache]\nprefix_tokens = 4096\nblock_tokens = 16\n"
    r = evaluate(write_scenario, hf("gemma-3-27b-it"), prompt=32768, extra="batch = 2\n" + extra)
    per_layer_token = 2 * 16 * 128 * 2
    shared = 10 * per_layer_token * 4096       # only the 10 global layers keep the prefix
    assert r["prefix_shared_bytes"] == shared
    held = per_layer_token * (10 * 32768 + 52 * 1024)
    assert r["kv_bytes_per_sequence"] == held - shared
    assert r["kv_bytes_total"] == shared + 2 * (held - shared)


def test_tensor_parallel_replicates_the_latent_cache(write_scenario):
    path = write_scenario("""
[model]
preset = "deepseek-v3"
[hardware]
preset = "h200"
count = 8
[workload]
prompt_tokens = 32768
output_tokens = 1
sequence_length = 32768
[levers.parallelism]
tensor = 8
""")
    r = infermodel.evaluate(path)
    assert r["parallel_kv_storage_factor"] == 8   # one latent per token on each of 8 ranks
    assert r["kv_bytes_per_token"] == 8 * 70_272


def test_batching_reservations_follow_the_windows(write_scenario):
    r = evaluate(write_scenario, hf("gpt-oss-120b"), prompt=4096, output=1024,
                 extra="[levers.batching]\npolicy = \"static\"\n")
    per_layer_token = 2 * 8 * 64 * 2
    tokens = r["contiguous_reserved_tokens"]
    assert r["contiguous_reserved_bytes_per_sequence"] == pytest.approx(
        per_layer_token * (18 * tokens + 18 * 128))


# ------------------------------------------------------------------------ shipped scenarios

def test_deepseek_v3_sessions_on_8_h200_in_fp8():
    r = infermodel.evaluate(ROOT / "scenarios" / "deepseek-v3-8xh200-fp8.toml")
    weights = DS_FP8_BYTES
    usable = 8 * r["card_memory"] * 0.9
    per_session = 8 * 70_272 * 32768          # the latent replicated on 8 tensor ranks
    assert r["max_sequences"] == math.floor((usable - weights) / per_session)
    # With H200's 143,771 MiB per card as the runtime reports it (18 with a decimal 141 GB).
    assert r["max_sequences"] == 22


def test_gemma_3_27b_scenario_local_layers_save_83_percent():
    r = infermodel.evaluate(ROOT / "scenarios" / "gemma-3-27b-128k-local-layers.toml")
    full = 62 * 8192 * 131072
    assert r["kv_bytes_per_sequence"] == 8192 * (10 * 131072 + 52 * 1024)
    assert 1 - r["kv_bytes_per_sequence"] / full == pytest.approx(0.832, abs=0.001)


def test_gpt_oss_120b_fits_one_h100():
    r = infermodel.evaluate(ROOT / "scenarios" / "gpt-oss-120b-one-h100.toml")
    assert r["fits"] and r["weight_bytes"] / GB == pytest.approx(65.25, abs=0.01)
    assert r["kv_bytes_per_sequence"] == 2048 * (18 * 9216 + 18 * 128)


def test_expert_parallel_split_per_card_weight_bytes(write_scenario):
    r = evaluate(write_scenario, 'preset = "deepseek-v3"', prompt=1024,
                 extra="[levers.moe]\nexpert_parallel = 64\n")
    bits = 8 + 32 / (128 * 128)
    routed = (LAYERS - DENSE) * EXPERTS * EXPERT * bits / 8
    mine = (LAYERS - DENSE) * 4 * EXPERT * bits / 8     # 256 / 64 = 4 experts per layer
    assert r["moe_experts_per_card"] == 4
    assert r["weight_bytes_per_card_expert_parallel"] == pytest.approx(
        r["weight_bytes"] - routed + mine, rel=1e-12)


def test_fp4_activations_use_the_cards_fp4_rate(write_scenario):
    r = evaluate(write_scenario, 'preset = "llama-3.3-70b"', prompt=1024, hardware="b200",
                 extra='[levers.quantization]\nlinear = "nvfp4"\nactivations = "fp4"\n')
    assert r["activation_speedup"] == pytest.approx(9000 / 2250)
    slow = evaluate(write_scenario, 'preset = "llama-3.3-70b"', prompt=1024, hardware="h200",
                    extra='[levers.quantization]\nlinear = "nvfp4"\nactivations = "fp4"\n',
                    name="h200.toml")
    assert slow["activation_speedup"] == 1


def test_a_sweep_over_context_and_layers_matches_scalar_evaluation_with_windows():
    path = ROOT / "scenarios" / "gemma-3-27b-128k-local-layers.toml"
    grid = {"workload.prompt_tokens": [1000, 30000], "model.layers": [62, 48]}
    swept = infermodel.sweep(path, grid, quantities=["kv_bytes_per_sequence", "max_context"])
    i = 0
    for prompt in grid["workload.prompt_tokens"]:
        for layers in grid["model.layers"]:
            one = infermodel.evaluate(path, {"workload.prompt_tokens": prompt, "model.layers": layers})
            assert swept.columns["kv_bytes_per_sequence"][i] == one["kv_bytes_per_sequence"]
            assert swept.columns["max_context"][i] == one["max_context"]
            i += 1


_BASE = json.loads((HF / "qwen3-next-80b-a3b.json").read_text())
_KEYS = ["full_attention_interval", "linear_num_key_heads", "linear_conv_kernel_dim", "layer_types",
         "sliding_window", "kv_lora_rank", "first_k_dense_replace", "quantization_config",
         "shared_expert_intermediate_size", "num_hidden_layers", "decoder_sparse_step"]
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 100), st.floats(allow_nan=True),
                    st.text(max_size=5), st.lists(st.sampled_from(["full_attention", "linear_attention",
                                                                   "bogus"]), max_size=60),
                    st.dictionaries(st.sampled_from(["quant_method", "bits", "group_size",
                                                     "weight_block_size"]),
                                    st.one_of(st.integers(0, 200), st.text(max_size=4)), max_size=3))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=4))
def test_config_reader_fuzz_new_keys_give_a_shape_or_a_config_error(changes):
    config = dict(_BASE, **changes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            shape = map_hf_config(config)
        except HFConfigError:
            return
    assert shape["layers"] >= 1


def test_a_huge_layer_period_is_a_config_error_not_an_allocation():
    # Found by the fuzz test above: 5.4e11 layers with an interval as long.
    config = dict(_BASE, num_hidden_layers=543930351616.0, full_attention_interval=543930351616.0)
    with pytest.raises(HFConfigError, match="a period of 543,930,351,616 layers") as caught:
        map_hf_config(config)
    assert caught.value.key == "full_attention_interval"


def test_awq_checkpoint_bytes_from_quantization_config(write_scenario):
    r = evaluate(write_scenario, hf("qwen3-8b-awq"), prompt=1024)
    # Qwen3-8B: 36 layers, d 4096, 32 heads of 128, 8 KV heads, SwiGLU 12288, vocab 151936.
    linear = 36 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288)
    rest = r["params_total"] - linear
    # int4 codes, an fp16 scale and a 4-bit zero point per 128 weights: 4.15625 bits.
    assert r["weight_bytes"] == pytest.approx(linear * (4 + 20 / 128) / 8 + rest * 2, rel=1e-9)


def test_gemma_2_cache_alternates(write_scenario):
    r = evaluate(write_scenario, hf("gemma-2-9b"), prompt=8192)
    assert r["kv_bytes_per_sequence"] == 2 * 8 * 256 * 2 * (21 * 8192 + 21 * 4096)


def test_mistral_7b_cache_stops_growing_at_its_window(write_scenario):
    short = evaluate(write_scenario, 'preset = "mistral-7b"', prompt=4096, name="a.toml")
    long = evaluate(write_scenario, 'preset = "mistral-7b"', prompt=32768, name="b.toml")
    assert short["kv_bytes_per_sequence"] == long["kv_bytes_per_sequence"] == 32 * 2 * 8 * 128 * 2 * 4096
    assert long["max_context"] == math.inf or long["max_context"] > 10**9


# ------------------------------------------------------------------------ new cards and formats

GIB = 2**30
# (preset, memory as the runtime reports it, bandwidth, dense BF16, dense FP8, dense FP4), each
# from the datasheet cited in the preset file (dense = half the "with sparsity" figure).
CARDS = [
    ("b200", 180 * GIB, 8e12, 2250e12, 4500e12, 9000e12),
    ("gb200", 186 * GIB, 8e12, 2500e12, 5000e12, 10000e12),
    ("b300", 288 * GIB, 8e12, 2250e12, 4500e12, 13125e12),
    ("h20", 96 * GIB, 4.0e12, 148e12, 296e12, None),
    ("mi325x", 256 * GIB, 6e12, 1307e12, 2615e12, None),
    ("mi355x", 288 * GIB, 8e12, 2500e12, 5000e12, 10000e12),
    ("tpu-v5e", 16 * GIB, 819e9, 197e12, None, None),
    ("tpu-v6e", 32 * GIB, 1640e9, 918e12, None, None),
    ("gaudi3", 128 * GIB, 3.7e12, 1835e12, 1835e12, None),
]


@pytest.mark.parametrize(("card", "memory", "bandwidth", "bf16", "fp8", "fp4"), CARDS,
                         ids=[c[0] for c in CARDS])
def test_new_hardware_presets(write_scenario, card, memory, bandwidth, bf16, fp8, fp4):
    path = write_scenario(f"""
[model]
preset = "qwen3-8b"
[hardware]
preset = "{card}"
[workload]
prompt_tokens = 100
output_tokens = 10
""")
    scenario = infermodel.load_scenario(path)
    assert scenario.value("hardware.memory") == memory
    assert scenario.value("hardware.bandwidth") == pytest.approx(bandwidth)
    assert scenario.value("hardware.flops") == pytest.approx(bf16)
    assert scenario.value("hardware.flops_fp8") == (None if fp8 is None else pytest.approx(fp8))
    assert scenario.value("hardware.flops_fp4") == (None if fp4 is None else pytest.approx(fp4))
    assert scenario.value("hardware.interconnect_bandwidth") > 0


def test_checkpoint_number_formats_bits():
    from infermodel_builtins.formats import NAMED_FORMATS

    assert NAMED_FORMATS["nvfp4"].effective_bits() == 4 + 8 / 16          # FP8 scale per 16
    assert NAMED_FORMATS["fp8-b128"].effective_bits() == 8 + 32 / (128 * 128)
    assert NAMED_FORMATS["int4-g128-zp4"].effective_bits() == 4 + (16 + 4) / 128
    assert "128×128 block" in NAMED_FORMATS["fp8-b128"].label()


def test_llama_4_scout_longest_context_on_one_h100():
    r = infermodel.evaluate(ROOT / "scenarios" / "llama-4-scout-int4-one-h100.toml")
    per_layer_token = 2 * 8 * 128 * 2
    assert r["kv_bytes_per_sequence"] == per_layer_token * (12 * 131072 + 36 * 8192)
    free = r["card_memory"] * 0.9 - r["weight_bytes"]
    assert r["max_context"] == math.floor((free / per_layer_token - 36 * 8192) / 12)


@settings(max_examples=12, deadline=None)
@given(window=st.integers(1, 50_000), chunk=st.integers(1, 50_000), batch=st.integers(1, 8),
       full=st.booleans())
def test_max_context_inverse_with_two_window_sizes_and_a_state(window, chunk, batch, full):
    # A made-up model with every kind of layer: both windows saturate at different lengths.
    pattern = "sliding,chunked,full,linear" if full else "sliding,chunked,linear"
    base = dict({"model.layer_pattern": pattern, "model.sliding_window": window,
                 "model.attention_chunk": chunk, "model.linear_key_heads": 4,
                 "model.linear_value_heads": 8, "model.linear_key_head_dim": 64,
                 "model.linear_value_head_dim": 64, "workload.batch": batch})
    path = ROOT / "scenarios" / "gemma-3-27b-128k-local-layers.toml"
    r = infermodel.evaluate(path, base)
    budget, n = r["kv_budget_bytes"], r["max_context"]
    if n == math.inf:
        # Without full layers the cache stops growing: every window fits.
        at_cap = infermodel.evaluate(path, dict(base, **{"workload.prompt_tokens": 10**6,
                                                          "workload.output_tokens": 1}))
        assert not full and batch * at_cap["kv_bytes_per_sequence"] <= budget
        return
    def held(length):
        return infermodel.evaluate(path, dict(base, **{"workload.prompt_tokens": length,
                                                        "workload.output_tokens": 1,
                                                        "workload.sequence_length": length}))[
            "kv_bytes_per_sequence"]
    if n >= 1:
        assert batch * held(int(n)) <= budget * (1 + 1e-12)
    assert batch * held(int(n) + 1) > budget


def test_chunked_prefill_iteration_cuts_the_chunks_pairs_at_the_window(write_scenario):
    r = evaluate(write_scenario, hf("gpt-oss-120b"), prompt=4096,
                 extra="[levers.chunked_prefill]\nchunk_tokens = 512\ncached_tokens = 2000\n"
                       "decode_sequences = 0\n")
    k, p, w = 512, 2000, 128
    full = k * p + k * (k + 1) / 2
    windowed = k * w          # every query of the chunk is past the window: w keys each
    attention = 4 * 64 * 64 * (18 * full + 18 * windowed)
    # The head scores the chunk's last position only (prefill_logits = "last").
    head = r["params_head_matmul"]
    assert r["hybrid_flops"] == pytest.approx(2 * (r["params_matmul"] - head) * k + 2 * head + attention)


# ------------------------------------------------------------- approximations, stated

def _chunk_notes(result) -> list[str]:
    return [w for w in result.warnings if "chunked-local cache counted" in w]


def test_chunked_layers_worst_case_is_a_result_warning_with_its_size(write_scenario):
    # Llama 4 Scout config.json: 48 layers, every 4th global (no_rope_layers), the other 36
    # chunked-local with attention_chunk_size 8,192. At a mean context of 32,768 tokens the
    # cache counts 12 x 32,768 + 36 x 8,192 positions; a chunked layer holds 1 to 8,192 of
    # them, so the count is at most 36 x 8,191 positions too large, 36 x 4,096 for
    # sequences spread evenly across a chunk.
    r = evaluate(write_scenario, hf("llama-4-scout-17b-16e"), prompt=32766, output=4,
                 hardware="h200")
    counted = 12 * 32768.0 + 36 * 8192
    assert r["context"] == 32768.0
    (note,) = _chunk_notes(r)
    assert f"{100 * 36 * 8191 / counted:.1f} % too large" in note        # 42.9 %
    assert f"about {100 * 36 * 4096 / counted:.1f} %" in note              # 21.4 %
    assert "36 of 48 layers" in note and "mean context of 32,768 tokens" in note
    assert str(note).endswith("(plugin 'architecture')")
    assert any(w.quantity == "kv_bytes_read_per_sequence" for w in r.warnings
               if "chunked-local" in w)


def test_chunked_warning_only_past_the_first_chunk(write_scenario):
    # Within the first chunk min(L, 8,192) = L is exact: no warning.
    inside = evaluate(write_scenario, hf("llama-4-scout-17b-16e"), prompt=4096, output=1)
    assert _chunk_notes(inside) == []
    # Mean context 4,000 + 8,000/2 = 8,000 within the chunk, full length 12,000 past it:
    # only the full-length cache (max_sequences) is overstated, by at most
    # 36 x 8,191 / (12 x 12,000 + 36 x 8,192).
    path = write_scenario(f"[model]\n{hf('llama-4-scout-17b-16e')}\n[hardware]\npreset = \"h200\"\n"
                          "[workload]\nprompt_tokens = 4000\noutput_tokens = 8000\n", "long.toml")
    (note,) = _chunk_notes(infermodel.evaluate(path))
    assert "mean context" not in note
    assert f"at most {100 * 36 * 8191 / (12 * 12000 + 36 * 8192):.1f} % too large" in note
    # Models without chunked layers never get it (sliding windows are exact).
    assert _chunk_notes(evaluate(write_scenario, hf("gemma-3-27b-it"), name="g.toml")) == []
    assert _chunk_notes(evaluate(write_scenario, 'preset = "llama-3-8b"', name="l.toml")) == []


def test_config_approximations_reach_the_result_with_their_size(write_scenario):
    # Gemma 3's SigLIP encoder (vision_config: 27 layers, width 1152, MLP 4304, 896-pixel
    # images in 14-pixel patches): 27 (4 h^2 + 2 h ff) + 3 p^2 h + (896/14)^2 h weights.
    gemma = evaluate(write_scenario, hf("gemma-3-27b-it"))
    siglip = 27 * (4 * 1152**2 + 2 * 1152 * 4304) + 3 * 14**2 * 1152 + 64**2 * 1152
    assert siglip == pytest.approx(0.4165e9, rel=1e-3)   # SigLIP-So400m: about 400 M
    assert any("vision encoder" in w and f"about {siglip / 1e9:.2f} B parameters" in w
               and f"{2 * siglip / 1e9:.2f} GB at 16 bits" in w for w in gemma.warnings)
    # DeepSeek-V3's multi-token-prediction layer: one more of 61 layers, 1.6 %.
    deepseek = evaluate(write_scenario, hf("deepseek-v3"), name="ds.toml")
    assert any("multi-token-prediction" in w and f"{100 / 61:.1f} %" in w
               for w in deepseek.warnings)
    # DeepSeek-V3.2's sparse-attention indexer (its published config.json: index_n_heads
    # 64, index_head_dim 128, index_topk 2048, on DeepSeek-V3's shape): its weights and
    # cache are counted (test_sparse_attention_indexer_weights_and_cache_by_hand); what it
    # does is not, and the one warning sizes that: 2·64·128 FLOPs a query-key pair, 132
    # bytes read a position and layer, attention over the whole context where a query
    # attends 2,048 positions (the mean decode context here: 32,768 + 1 / 2 tokens).
    v32 = json.loads((HF / "deepseek-v3.json").read_text())
    v32.update(model_type="deepseek_v32", index_n_heads=64, index_head_dim=128, index_topk=2048)
    config = write_scenario(json.dumps(v32), "deepseek-v3.2.json")
    notes = [w for w in evaluate(write_scenario, f'hf_config = "{config}"', name="v32.toml").warnings
             if "Sparse Attention" in w]
    assert len(notes) == 1 and "weights and its FP8 key cache are counted" in notes[0]
    assert "16,384 FLOPs a query-key pair" in notes[0] and "its key reads, 132 bytes" in notes[0]
    assert f"{32768.5 / 2048:.1f} times the 2,048 positions" in notes[0]
    # A config whose features are all modelled carries no such note.
    assert not any("config" in w for w in evaluate(write_scenario, hf("qwen3-8b"),
                                                     name="q.toml").warnings)


def test_sparse_attention_indexer_weights_and_cache_by_hand(write_scenario):
    # DeepSeek-V3.2 is DeepSeek-V3's shape with an indexer (its config.json: index_n_heads
    # 64, index_head_dim 128, index_topk 2048; DeepSeek-V3.2-Exp report §2.1). Per layer
    # it adds q_lora_rank·64·128 + 7168·128 + 7168·64 projection weights and a key
    # LayerNorm of 2·128, and caches one 128-value FP8 key with a 4-byte scale (132 bytes)
    # a token, whatever the latent cache's format: 61 layers of each.
    v32 = json.loads((HF / "deepseek-v3.json").read_text())
    v32.update(model_type="deepseek_v32", index_n_heads=64, index_head_dim=128, index_topk=2048)
    config = write_scenario(json.dumps(v32), "deepseek-v3.2.json")
    for cache, latent_bytes in (("", 2), ('[levers.quantization]\nkv_cache = "fp8-e4m3"\n', 1)):
        plain = evaluate(write_scenario, hf("deepseek-v3"), extra=cache, name="v3.toml")
        sparse = evaluate(write_scenario, f'hf_config = "{config}"', extra=cache, name="v32.toml")
        assert plain["kv_bytes_per_token"] == 61 * (512 + 64) * latent_bytes
        assert sparse["kv_bytes_per_token"] == 61 * ((512 + 64) * latent_bytes + 132)
        assert sparse["index_cache_bytes"] == 132
        per_layer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64
        assert sparse["params_indexer_layer"] == per_layer
        assert sparse["params_total"] - plain["params_total"] == 61 * (per_layer + 2 * 128)
    # A width that is not a multiple of 128 still takes a whole scale for its last group.
    odd = {**v32, "index_head_dim": 130}
    odd_config = write_scenario(json.dumps(odd), "odd.json")
    assert evaluate(write_scenario, f'hf_config = "{odd_config}"', name="odd.toml")[
        "index_cache_bytes"] == 130 + 2 * 4


def test_sparse_attention_fields_come_together_on_latent_attention(write_scenario):
    base = 'preset = "llama-3-8b"\n'
    with pytest.raises(ScenarioError, match="index_heads describes DeepSeek Sparse Attention.s indexer, which works on latent attention, but kv_lora_rank is unset"):
        evaluate(write_scenario, base + "index_heads = 64\nindex_head_dim = 128\nindex_topk = 2048\n")
    v3 = f'{hf("deepseek-v3")}\n'
    with pytest.raises(ScenarioError) as caught:
        evaluate(write_scenario, v3 + "index_heads = 64\n", name="one.toml")
    text = str(caught.value)
    assert "model.index_head_dim" in text and "model.index_topk" in text
    assert "needs its heads, their width and its top-k together" in text


def test_sparse_attention_indexer_projections_are_measured_kernels(write_scenario):
    # Under measured kernels the indexer's three projections are GEMMs of their own in
    # qkv_projection, whole on every tensor-parallel rank (m = batch in decode).
    pytest.importorskip("aiconfigurator_core")
    v32 = json.loads((HF / "deepseek-v3.json").read_text())
    v32.update(model_type="deepseek_v32", index_n_heads=64, index_head_dim=128, index_topk=2048)
    config = write_scenario(json.dumps(v32), "deepseek-v3.2.json")
    def measured(model, name):
        return infermodel.evaluate(write_scenario(f"""
[model]
{model}
[hardware]
preset = "b200"
count = 8
[workload]
batch = 8
prompt_tokens = 1024
output_tokens = 64
[efficiency]
kernels = "measured"
engine = "sglang"
[levers.parallelism]
tensor = 8
[levers.quantization]
linear = "fp8-b128"
kv_cache = "fp8-e4m3"
""", name))

    plain = measured(hf("deepseek-v3"), "v3.toml")
    sparse = measured(f'hf_config = "{config}"', "v32.toml")
    assert sparse["decode_kernel_qkv_projection_time"] > plain["decode_kernel_qkv_projection_time"]
    assert sparse["decode_kernel_attention_score_time"] == plain["decode_kernel_attention_score_time"]
    formula = str(sparse.explain("decode_kernel_qkv_projection_time")).split("with values:")[0]
    for shape in ("(batch, index_head_dim*index_heads, q_lora_rank)", "(batch, index_head_dim, d_model)",
                  "(batch, index_heads, d_model)"):
        assert shape in formula


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["hidden_size", "intermediate_size", "num_hidden_layers",
                                        "patch_size", "image_size"]),
                       st.one_of(st.integers(-5, 10**12), st.floats(allow_nan=True), st.text(max_size=3),
                                 st.booleans(), st.none())))
def test_any_vision_config_gives_a_sized_note_never_an_error(vision):
    config = json.loads((HF / "gemma-3-27b-it.json").read_text())
    config["vision_config"] = vision
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        map_hf_config(config)
    (note,) = [str(w.message) for w in caught if "vision encoder" in str(w.message)]
    assert "B parameters" in note or "not given" in note
