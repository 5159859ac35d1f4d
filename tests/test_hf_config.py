"""Reading model shapes from Hugging Face config.json files (infermodel.hf_config).

The JSON files in tests/data/hf/ hold the shape keys of published configurations
(trimmed of tokenizer and training settings that do not matter here).
"""

from __future__ import annotations

import json
import pickle
import tomllib
import warnings
from pathlib import Path

import pytest

from infermodel.hf_config import (
    MAX_CONFIG_BYTES,
    HFConfigError,
    HFConfigWarning,
    map_hf_config,
    read_hf_config,
)

DATA = Path(__file__).parent / "data" / "hf"
PRESETS = Path(__file__).resolve().parents[1] / "plugins" / "infermodel_builtins" / "presets" / "models"


def read(name: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("error", HFConfigWarning)
        return read_hf_config(DATA / f"{name}.json")


def preset(name: str) -> dict:
    with (PRESETS / f"{name}.toml").open("rb") as handle:
        table = tomllib.load(handle)["model"]
    # defaults the engine would apply
    if table.get("shared_experts") == 0:
        del table["shared_experts"]
    return table


def test_llama_3_1_8b():
    assert read("llama-3.1-8b") == {
        "layers": 32, "d_model": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
        "d_ff": 14336, "ffn": "swiglu", "vocab": 128256, "tied_embeddings": False,
    }


def test_smollm2_135m_is_tied_and_gqa():
    shape = read("smollm2-135m")
    assert shape["tied_embeddings"] is True
    assert (shape["heads"], shape["kv_heads"], shape["head_dim"]) == (9, 3, 64)


@pytest.mark.parametrize(
    ("config", "preset_name"),
    [
        ("llama-3.1-8b", "llama-3.1-8b"),
        ("smollm2-135m", "smollm2-135m"),
        ("smollm2-360m", "smollm2-360m"),
        ("mixtral-8x7b", "mixtral-8x7b"),
        ("qwen2.5-0.5b", "qwen2.5-0.5b"),
        ("qwen1.5-moe-a2.7b", "qwen1.5-moe-a2.7b"),
    ],
)
def test_config_matches_shipped_preset(config, preset_name):
    assert read(config) == preset(preset_name)


def test_mistral_sliding_window_is_read_as_every_layer_sliding():
    shape = read("mistral-7b-v0.1")
    assert shape.pop("layer_pattern") == "sliding"
    assert shape == preset("mistral-7b")


def test_mixtral_experts():
    shape = read("mixtral-8x7b")
    assert (shape["experts"], shape["active_experts"]) == (8, 2)
    assert "expert_d_ff" not in shape  # every expert has width d_ff
    assert "shared_experts" not in shape


def test_qwen_moe_shared_expert_becomes_four_expert_widths():
    shape = read("qwen1.5-moe-a2.7b")
    assert shape["experts"] == 60 and shape["active_experts"] == 4
    assert shape["expert_d_ff"] == 1408 and shape["shared_experts"] == 4


def test_deepseek_moe_shared_experts_and_dense_first_layer():
    shape = read("deepseek-moe-16b")
    assert shape["experts"] == 64 and shape["active_experts"] == 6
    assert shape["shared_experts"] == 2 and shape["expert_d_ff"] == 1408
    assert shape["d_ff"] == 10944 and shape["dense_layers"] == 1


def test_gpt2_names_plain_mlp_and_default_tying():
    assert read("gpt2") == {
        "layers": 12, "d_model": 768, "heads": 12, "kv_heads": 12, "head_dim": 64,
        "d_ff": 3072, "ffn": "gelu", "vocab": 50257, "tied_embeddings": True,
    }


def test_gemma_gelu_is_gated_and_head_dim_is_explicit():
    shape = read("gemma-2b")
    assert shape["ffn"] == "swiglu"  # gated GELU: three matrices
    assert shape["head_dim"] == 256 and shape["kv_heads"] == 1
    assert shape["tied_embeddings"] is True


def test_directory_path_reads_config_json(tmp_path):
    (tmp_path / "config.json").write_text((DATA / "smollm2-135m.json").read_text())
    assert read_hf_config(tmp_path) == read("smollm2-135m")


def test_text_config_of_multimodal_model():
    inner = json.loads((DATA / "llama-3.1-8b.json").read_text())
    outer = {"model_type": "llava", "text_config": inner, "vision_config": {"hidden_size": 1024}}
    with pytest.warns(HFConfigWarning, match="vision encoder"):
        assert map_hf_config(outer) == read("llama-3.1-8b")


def test_activation_decides_for_unknown_families():
    base = json.loads((DATA / "unknown-activation.json").read_text())
    assert map_hf_config(dict(base, hidden_act="silu"))["ffn"] == "swiglu"
    assert map_hf_config(dict(base, hidden_act="gelu_pytorch_tanh"))["ffn"] == "gelu"


def test_head_dim_null_and_kv_null_use_defaults():
    base = json.loads((DATA / "llama-3.1-8b.json").read_text())
    shape = map_hf_config(dict(base, head_dim=None, num_key_value_heads=None))
    assert shape["head_dim"] == 128 and shape["kv_heads"] == 32


def test_integral_floats_are_accepted():
    base = json.loads((DATA / "llama-3.1-8b.json").read_text())
    assert map_hf_config(dict(base, hidden_size=4096.0))["d_model"] == 4096


def test_dense_model_with_zero_experts():
    base = json.loads((DATA / "llama-3.1-8b.json").read_text())
    assert "experts" not in map_hf_config(dict(base, num_experts=0))


# ------------------------------------------------------------------------- errors


def error_for(path) -> HFConfigError:
    with pytest.raises(HFConfigError) as info:
        read_hf_config(path)
    return info.value


def test_missing_key_names_file_and_key():
    error = error_for(DATA / "missing-layers.json")
    assert error.key == "num_hidden_layers"
    assert error.path.endswith("missing-layers.json")
    text = str(error)
    assert "missing-layers.json" in text and "num_hidden_layers" in text and "number of decoder layers" in text
    assert isinstance(error, ValueError)


def test_kv_heads_must_divide_heads():
    error = error_for(DATA / "bad-kv-heads.json")
    assert error.key == "num_key_value_heads"
    assert "divide" in error.message


def test_unknown_activation_is_an_error():
    error = error_for(DATA / "unknown-activation.json")
    assert error.key == "hidden_act"
    assert "softplus" in error.message


def test_missing_file(tmp_path):
    error = error_for(tmp_path / "nope.json")
    assert "not found" in error.message and "nope.json" in str(error)


def test_oversized_file_is_refused_before_parsing(tmp_path):
    big = tmp_path / "config.json"
    big.write_text('{"pad": "' + "x" * MAX_CONFIG_BYTES + '"}')
    error = error_for(big)
    assert "limit" in error.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"num_hidden_layers": 32,', "line 1"),
        ("[1, 2, 3]", "list"),
        ('{"num_hidden_layers": NaN}', "NaN"),
        ("\xff\xfe", "UTF-8"),
    ],
)
def test_malformed_files(tmp_path, text, fragment):
    path = tmp_path / "config.json"
    path.write_bytes(text.encode("latin-1"))
    assert fragment in str(error_for(path))


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"num_hidden_layers": -2}, "num_hidden_layers"),
        ({"num_hidden_layers": True}, "num_hidden_layers"),
        ({"hidden_size": "4096"}, "hidden_size"),
        ({"hidden_size": 4096.5}, "hidden_size"),
        ({"vocab_size": None}, "vocab_size"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
        ({"num_local_experts": 8}, "num_experts_per_tok"),
        ({"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok"),
        ({"head_dim": 0}, "head_dim"),
    ],
)
def test_bad_values_name_their_key(change, key):
    base = json.loads((DATA / "llama-3.1-8b.json").read_text())
    with pytest.raises(HFConfigError) as info:
        map_hf_config(dict(base, **change), path="config.json")
    assert info.value.key == key
    assert info.value.expected


def test_hidden_size_not_divisible_without_head_dim():
    base = json.loads((DATA / "llama-3.1-8b.json").read_text())
    with pytest.raises(HFConfigError) as info:
        map_hf_config(dict(base, hidden_size=4100))
    assert info.value.key == "head_dim"


def test_error_pickles():
    error = HFConfigError("missing key", path="a/config.json", key="vocab_size", expected="an int")
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)


# ------------------------------------------------------------------------ more families

def test_gemma_2_alternates_local_and_global_layers():
    shape = read("gemma-2-9b")
    assert (shape["layer_pattern"], shape["sliding_window"]) == ("sliding,full", 4096)
    assert shape["tied_embeddings"] is True and shape["ffn"] == "swiglu"


def test_phi_3_every_layer_slides():
    shape = read("phi-3-mini-4k-instruct")
    assert (shape["layer_pattern"], shape["sliding_window"]) == ("sliding", 2047)


def test_olmoe_and_granite_moe_experts():
    olmoe = read("olmoe-1b-7b-0924")
    assert (olmoe["experts"], olmoe["active_experts"], olmoe["d_ff"]) == (64, 8, 1024)
    granite = read("granite-3.0-1b-a400m")
    assert (granite["experts"], granite["active_experts"], granite["tied_embeddings"]) == (32, 8, True)


def test_awq_and_nvfp4_checkpoints_name_their_formats():
    assert read("qwen3-8b-awq")["weight_format"] == "int4-g128-zp4"
    assert read("qwen3-8b-nvfp4")["weight_format"] == "nvfp4"


def test_a_checkpoint_says_how_its_activations_take_their_scale():
    # DeepSeek-V3's and Qwen3's FP8 configs state "activation_scheme": "dynamic";
    # compressed-tensors says it per input group; ModelOpt calibrates static input scales.
    config = json.loads((DATA / "qwen3-8b.json").read_text())
    for qc, expected in (
            ({"quant_method": "fp8", "activation_scheme": "dynamic",
              "weight_block_size": [128, 128]}, "dynamic"),
            ({"quant_method": "fp8", "activation_scheme": "static"}, "static"),
            ({"quant_method": "modelopt", "quant_algo": "FP8"}, "static"),
            ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}}},
             "dynamic"),
            ({"quant_method": "fp8"}, None)):
        shape = map_hf_config({**config, "quantization_config": qc})
        assert shape.get("activation_scales") == expected, qc


def test_a_checkpoint_that_quantises_its_routed_experts_alone_keeps_the_rest_16_bit():
    # Kimi-K2.5's INT4 checkpoint (compressed-tensors, groups of 32) leaves attention,
    # the shared experts and the dense layers' MLP out of its format: its experts are
    # INT4, every other block linear bf16.
    config = json.loads((DATA / "kimi-k2-instruct.json").read_text())
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                        "weights": {"num_bits": 4, "type": "int",
                                                    "strategy": "group", "group_size": 32,
                                                    "symmetric": True}}},
          "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                     "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]}
    shape = map_hf_config({**config, "quantization_config": qc})
    assert shape["expert_weight_format"] == "int4-g32"
    assert "weight_format" not in shape and "unquantized" not in shape
    # Leaving attention alone out keeps the block linears in the format.
    partial = {**qc, "ignore": ["lm_head", "re:.*self_attn.*"]}
    shape = map_hf_config({**config, "quantization_config": partial})
    assert (shape["weight_format"], shape["unquantized"]) == ("int4-g32", "attention")


def test_unknown_quantization_method_is_a_note_not_an_error():
    config = json.loads((DATA / "qwen3-8b.json").read_text())
    config["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    with pytest.warns(HFConfigWarning, match="not one this reader knows"):
        shape = map_hf_config(config)
    assert "weight_format" not in shape


def test_dense_layers_listed_one_by_one_are_reported_with_their_count():
    config = json.loads((DATA / "qwen3-235b-a22b.json").read_text())
    config["mlp_only_layers"] = [0, 1]
    with pytest.warns(HFConfigWarning, match="2 of 94 layers are dense"):
        map_hf_config(config)


def _modelopt_checkpoint(tmp_path, name="config.json", exclude=None):
    """DeepSeek-V3's shape with ModelOpt's NVFP4 export beside it: config.json without a
    quantization_config and its formats in hf_quant_config.json, the latent-attention
    projections of every layer left out (NVIDIA's NVFP4 DeepSeek checkpoints' list).
    """
    config = json.loads((DATA / "deepseek-v3.json").read_text())
    config.pop("quantization_config", None)
    (tmp_path / name).write_text(json.dumps(config))
    if exclude is None:
        exclude = ["lm_head", "model.layers.61*"] + [f"model.layers.{i}.self_attn.{m}" for i in range(61)
                                 for m in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")]
    quant = {"producer": {"name": "modelopt"},
             "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
                              "group_size": 16, "exclude_modules": exclude}}
    (tmp_path / name.replace("config.json", "hf_quant_config.json")).write_text(json.dumps(quant))
    return tmp_path / name


@pytest.mark.parametrize("name", ["config.json", "nvidia--DeepSeek-V3.1-NVFP4_config.json"])
def test_modelopts_quantisation_file_beside_the_config_gives_its_formats(tmp_path, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shape = read_hf_config(_modelopt_checkpoint(tmp_path, name))
    # The multi-token-prediction layer (index 61 of 61) is not counted, so its exclusion
    # says nothing about the counted groups.
    assert not [w for w in caught if "matches no parameter group" in str(w.message)]
    assert (shape["weight_format"], shape["unquantized"], shape["activation_scales"]) == (
        "nvfp4", "latent", "static")
    # With o_proj left out too the whole attention layer is 16-bit.
    with_output = [f"model.layers.{i}.self_attn.{m}" for i in range(61)
                   for m in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")]
    other = tmp_path / "other"
    other.mkdir()
    assert read_hf_config(_modelopt_checkpoint(other, exclude=with_output))["unquantized"] == "attention"
    # A quantization_config in config.json wins: the file beside it is not read.
    config = json.loads((DATA / "deepseek-v3.json").read_text())
    (tmp_path / name).write_text(json.dumps({**config, "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128]}}))
    assert read_hf_config(tmp_path / name)["weight_format"] == "fp8-b128"


def test_a_broken_quantisation_file_is_an_error_naming_it(tmp_path):
    path = _modelopt_checkpoint(tmp_path)
    (tmp_path / "hf_quant_config.json").write_text('{"producer": {}}')
    with pytest.raises(HFConfigError, match="quantization") as caught:
        read_hf_config(path)
    assert "hf_quant_config.json" in str(caught.value)
    (tmp_path / "hf_quant_config.json").write_text("{not json")
    with pytest.raises(HFConfigError, match="invalid JSON"):
        read_hf_config(path)


def test_a_modelopt_stub_or_mixed_formats_in_the_quantisation_file(tmp_path):
    config = json.loads((DATA / "deepseek-v3.json").read_text())
    config.pop("quantization_config", None)
    # ModelOpt's stub in config.json (no quant_method, its quant_algo) is read as ModelOpt.
    stub = {"quant_algo": "FP8", "producer": {"name": "modelopt"}, "ignore": ["lm_head"]}
    assert map_hf_config({**config, "quantization_config": stub})["weight_format"] == "fp8-e4m3"
    # A null quantization_config leaves the file beside it to say.
    (tmp_path / "config.json").write_text(json.dumps({**config, "quantization_config": None}))
    quant = {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.experts.0.up_proj": {"quant_algo": "W4A16_NVFP4"},
        "model.layers.0.mlp.experts.1.up_proj": {"quant_algo": "W4A16_NVFP4"},
        "model.layers.0.self_attn.o_proj": {"quant_algo": "FP8"}},
        "exclude_modules": ["mtp*", "mtp.layers.0*"]}}
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(quant))
    with pytest.warns(HFConfigWarning) as caught:
        shape = read_hf_config(tmp_path / "config.json")
    assert "weight_format" not in shape
    text = " ".join(str(w.message) for w in caught)
    assert "hf_quant_config.json: quantization" in text and "2 W4A16_NVFP4, 1 FP8" in text
    assert "mtp" not in text   # multi-token-prediction modules are not counted
    # Only the KV cache quantised (quant_algo null): 16-bit weights, nothing to note.
    quant["quantization"] = {"quant_algo": None, "kv_cache_quant_algo": "FP8"}
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(quant))
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("always")
        shape = read_hf_config(tmp_path / "config.json")
    assert "weight_format" not in shape
    assert not [w for w in quiet if "quant" in str(w.message)]


def test_llama4s_weightless_qk_norm_adds_no_norm_weights():
    config = json.loads((DATA / "llama-4-scout-17b-16e.json").read_text())
    assert (config.get("text_config") or config).get("use_qk_norm") is True
    assert not map_hf_config(config).get("qk_norm")


SHIPPED = Path(__file__).resolve().parents[1] / "src" / "infermodel" / "data" / "configs"


@pytest.mark.parametrize("path, share", [
    (DATA / "qwen3-next-80b-a3b.json", 0.25),                  # partial_rotary_factor 0.25
    (SHIPPED / "minimax-m1.json", 0.5),                        # rotary_dim 64, head_dim 128
    (SHIPPED / "nemotron-h-8b-base-8k.json", 0.0),             # NoPE attention
    (SHIPPED / "ai21-jamba-1.5-mini.json", 0.0),
    (SHIPPED / "nvidia-nemotron-3-nano-30b-a3b.json", 0.0),    # factor 1.0, still NoPE
    (DATA / "llama-3.1-8b.json", None),                        # the whole head (default 1)
])
def test_the_rotary_share_is_read_from_the_config(path, share):
    config = json.loads(path.read_text())
    inner = config.get("text_config") or config
    assert map_hf_config(config).get("rotary_fraction") == share, inner.get("model_type")
