"""A latent mixture of experts (``moe_latent_size``): NVIDIA's Nemotron 3 Super and Ultra.

Golden values are computed by hand from the published config of
nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 (``tests/data/hf/nemotron-3-super-120b-a12b.json``,
the keys that shape the network): 88 layers, 40 of them mixtures of 512 experts of width
2,688 at a latent width of 1,024 (top 22, ReLU² so two matrices each), one shared expert of
5,376 at the model width 4,096, a router of 4,096 × 512 and the two latent projections of
4,096 × 1,024 in every MoE layer.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

import infermodel
from conftest import ROOT
from infermodel.hf_config.reader import HFConfigError, map_hf_config

CONFIG = ROOT / "tests" / "data" / "hf" / "nemotron-3-super-120b-a12b.json"
D, L, F, E, K, SHARED, MOE_LAYERS = 4096, 1024, 2688, 512, 22, 5376, 40


def _moe_layer(experts: int) -> int:
    return experts * 2 * L * F + 2 * D * SHARED + D * E + 2 * D * L


def _scenario(write_scenario, extra: str = "", tensor: int = 4) -> str:
    return write_scenario(f"""
[model]
hf_config = "{CONFIG}"
[hardware]
preset = "b200"
count = 4
[workload]
batch = 32
prompt_tokens = 4096
output_tokens = 1024
[levers.parallelism]
tensor = {tensor}
{extra}""")


def test_the_config_is_read_with_its_latent_width():
    out = map_hf_config(json.loads(CONFIG.read_text()))
    assert out["moe_latent_size"] == L and out["experts"] == E
    assert out.get("expert_d_ff", out["d_ff"]) == F


def test_the_experts_are_counted_at_the_latent_width(write_scenario):
    r = infermodel.evaluate(_scenario(write_scenario))
    assert r["moe_layers"] == MOE_LAYERS
    assert r["expert_params"] == 2 * L * F
    assert r["params_ffn"] == MOE_LAYERS * _moe_layer(E)                   # 114,923,929,600
    assert r["params_ffn_active"] == MOE_LAYERS * _moe_layer(K)
    # The published "120B-A12B": 120.7 B in all, 12.8 B a token uses (at the model width
    # the routed experts alone would be 2 × 4,096 × 2,688 × 512 × 40 = 451 B).
    assert 120.0e9 < r["params_total"] < 121.5e9
    assert 12.0e9 < r["params_active"] < 13.5e9
    assert not [w for w in r.warnings if "moe_latent_size" in str(w)]
    # The per-layer rows add up to the model, the latent projections in the MoE rows.
    rows = [k for k in r.values if k.startswith("layer_kind_") and k.endswith("_params")]
    assert sum(r[k] for k in rows) + r["params_outside_layers"] == r["params_total"]


def test_a_dense_model_with_a_latent_width_is_refused(write_scenario):
    path = write_scenario("""
[model]
preset = "llama-3.1-8b"
moe_latent_size = 1024
[hardware]
preset = "h100-sxm"
[workload]
batch = 1
prompt_tokens = 128
output_tokens = 16
""")
    with pytest.raises(infermodel.InfermodelError, match="moe_latent_size describes a mixture of "
                                                          "experts"):
        infermodel.evaluate(path)


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                    reason='the measured kernel tables are not installed (pip install "infermodel[kernels]")')
def test_measured_kernels_read_the_latent_moe_shape_and_time_the_projections(write_scenario):
    r = infermodel.evaluate(_scenario(write_scenario, """
[efficiency]
kernels = "measured"
engine = "sglang"
[levers.quantization]
linear = "nvfp4"
activations = "fp4"
"""))
    formula = str(r.quantity("decode_kernel_ffn_time").expression)
    assert "moe_latent_size" in formula
    text = infermodel.explain(r, "decode_kernel_ffn_time").text()
    # SGLang's B200 tables measured Super's latent shape exactly: 32 tokens at hidden
    # 1,024 over 4 cards (MoE TP 4).
    assert "at tokens = 32, hidden = 1024, inter = 2688, topk = 22, experts = 512, tp = 4" in text
    assert "measured configuration (hidden 1024, inter 2688, topk 22, experts 512, tp 4" in text
    # The two projections: 32 × 4,096 → 1,024 and back, each card running them whole.
    assert "at m = 32, n = 1024, k = 4096" in text and "at m = 32, n = 4096, k = 1024" in text
    # Expert parallelism under one attention rank: the layer's output is all-reduced once,
    # after the up projection and with the shared expert's part, at the model width
    # (TensorRT-LLM's NemotronHMOE), not at the latent width the experts work in.
    ep = infermodel.evaluate(_scenario(write_scenario, """expert = 4
[efficiency]
kernels = "measured"
engine = "sglang"
"""))
    gather = str(ep.quantity("decode_kernel_attention_gather_time").expression)
    assert "d_model" in gather and "moe_latent_size" not in gather


def test_a_nemotron_h_config_without_a_layer_count_has_as_many_layers_as_blocks():
    # Nemotron 3 Ultra's config lists its 108 blocks in layers_block_type and writes no
    # num_hidden_layers (Transformers counts the list).
    config = json.loads(CONFIG.read_text())
    names = {"M": "mamba", "E": "moe", "*": "attention"}
    blocks = [names[c] for c in config.pop("hybrid_override_pattern")]
    del config["num_hidden_layers"]
    out = map_hf_config({**config, "layers_block_type": blocks})
    assert out["layers"] == 88 == len(blocks)
    with pytest.raises(HFConfigError, match="num_hidden_layers"):
        map_hf_config(config)   # neither the count nor the list: the count is asked for


def test_the_experts_traffic_and_scales_are_at_the_latent_width(write_scenario):
    # Expert parallelism with an all-to-all dispatch: each of the 32 tokens' 22 routes
    # carries an l-wide vector (B·k·l·a), not a d-wide one; the projections are replicated
    # on every card (whole in each card's weights); per-channel expert scales are one per
    # output row of an expert, f + l (its up and down projections, ReLU² so two matrices).
    r = infermodel.evaluate(_scenario(write_scenario, """
expert = 4
expert_dispatch = "all_to_all"
communication = "all_reduce"
dispatch_activation_bytes = 1
[levers.quantization]
experts = "int8"
"""))
    assert r["parallel_expert_dispatch_bytes"] == 32 * K * L * 1          # 720,896
    # 16-bit block linears (the fixture states no quantization): 671,088,640 bytes.
    assert r["parallel_latent_projection_weight_bytes"] == MOE_LAYERS * 2 * D * L * 2
    assert r["weight_scales_experts"] == MOE_LAYERS * E * (F + L)          # 76,021,760


def test_under_data_parallel_attention_only_the_moe_layers_gather(write_scenario):
    # Four attention ranks of one card each over four expert ranks: Super's 48 layers
    # without a feed-forward block (40 Mamba-2, 8 attention) reduce within their rank (one
    # card: nothing), and only its 40 MoE layers gather and scatter the 32 tokens (every
    # layer that is not a MoE layer had been counted a dense feed-forward layer and
    # gathered too). With the dense and shared-expert weights split over the stage the
    # shared expert needs every token at d; with them on each rank (replicated), the
    # routed experts' tokens alone travel, at l.
    for dense, width in (("split", D), ("replicated", L)):
        r = infermodel.evaluate(_dp_scenario(write_scenario, dense))
        link, latency = r["parallel_link_bandwidth"], r["parallel_link_latency"]
        ring = 2 * 3 / 4 * 32 * width * 2 / link + 2 * 3 * latency
        assert r["parallel_decode_comm_time"] == pytest.approx(MOE_LAYERS * ring, rel=1e-12), dense


def _dp_scenario(write_scenario, dense: str) -> str:
    return _scenario(write_scenario, f"attention_data = 4\nexpert = 4\ndense_weights = \"{dense}\"\n"
                     "communication = \"all_reduce\"\n", tensor=1)


def test_plain_tensor_parallelism_holds_the_projections_whole_on_each_card(write_scenario):
    # Four tensor cards, no layout: each card holds a quarter of the weights and, beyond
    # it, three quarters more of the replicated projections; the roofline step reads them
    # once, and the result says by how much that is short.
    r = infermodel.evaluate(_scenario(write_scenario))
    projections = MOE_LAYERS * 2 * D * L * 2                               # 16-bit
    assert r["parallel_latent_projection_weight_bytes"] == projections
    assert r["parallel_weight_bytes_per_card"] == pytest.approx(
        r["weight_bytes"] / 4 + projections * 3 / 4, rel=1e-12)
    assert [w for w in r.warnings if "replicated on the 4 tensor cards" in str(w)
            and f"{3 * projections / 1e9:.3g} GB a step" in str(w)]
