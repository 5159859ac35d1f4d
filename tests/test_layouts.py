"""Expert parallelism and data-parallel attention (the parallelism lever's layouts).

Golden figures are computed here by hand from the published deepseek-ai/DeepSeek-V3 (and
DeepSeek-R1, the same shape) config.json: 61 layers, the first 3 dense (d_ff 18432), 58 MoE
layers of 256 routed experts of width 2048 plus 1 shared, top-8, hidden 7168, 128 heads,
q_lora_rank 1536, kv_lora_rank 512 + qk_rope_head_dim 64 cached per token and layer,
qk_nope_head_dim 128, v_head_dim 128, vocab 129280; FP8 weights with one fp32 scale per
128×128 block (embedding and head in bf16). The layouts follow vLLM's "Expert Parallel
Deployment" (EP = TP × DP, attention weights replicated, experts split) and SGLang's "DP
attention" docs (each rank keeps only its own requests' cache; a latent cache is the same
size at any attention TP).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.analyses.simulation.plan import layered_values
from infermodel.cli import main
from infermodel.simulator import CostModel
from infermodel.simulator.layout import ParallelLayout
from infermodel.simulator.layout import expert_imbalance as simulator_imbalance
from infermodel_builtins.layouts import expert_imbalance as lever_imbalance

DP8 = SCENARIOS / "deepseek-r1-ep8-dp8.toml"
TP8 = SCENARIOS / "deepseek-v3-8xh200-fp8.toml"

D, LAYERS, DENSE, HEADS, VOCAB = 7168, 61, 3, 128, 129280
QR, KVR, NOPE, ROPE, V = 1536, 512, 128, 64, 128
EXPERTS, ACTIVE, EXPERT_FF = 256, 8, 2048
MLA_LAYER = (D * QR + QR * HEADS * (NOPE + ROPE) + D * (KVR + ROPE) + KVR * HEADS * (NOPE + V)
             + HEADS * V * D)
EXPERT = 3 * D * EXPERT_FF
FP8 = (8 + 32 / (128 * 128)) / 8                     # bytes per block-scaled FP8 weight
ROUTED = (LAYERS - DENSE) * EXPERTS * EXPERT * FP8   # every routed expert
SHARED = (LAYERS - DENSE) * 1 * EXPERT * FP8
ATTENTION = LAYERS * MLA_LAYER * FP8
TABLE = VOCAB * D * 2                                # the bf16 input embedding table
LATENT_32K = LAYERS * (KVR + ROPE) * 2 * 32768       # one 32k-token sequence's latent cache
# H200 as the runtime reports it (143,771 MiB), 10 % kept back per card.
USABLE = 0.9 * 143771 * 2**20


@pytest.fixture(scope="module")
def dp8():
    return infermodel.evaluate(DP8)


# ---------------------------------------------------------------------------- memory

def test_each_card_holds_its_attention_copy_and_an_eighth_of_the_experts(host, dp8):
    w = dp8["weight_bytes"]
    # vLLM (dense_weights = "replicated"): every non-expert weight on each of the 8 ranks.
    assert dp8["parallel_weight_bytes_per_card"] == pytest.approx(w - 7 / 8 * ROUTED, rel=1e-12)
    assert dp8["weight_bytes_routed_experts"] == pytest.approx(ROUTED, rel=1e-12)
    assert dp8["parallel_attention_weight_bytes"] == pytest.approx(ATTENTION, rel=1e-12)
    assert dp8["parallel_experts_per_rank"] == 32
    assert dp8["parallel_weight_bytes_replicated"] == pytest.approx(7 * (w - ROUTED), rel=1e-12)


def test_the_latent_cache_is_not_replicated_and_each_rank_holds_whole_sequences(host, dp8):
    assert dp8["kv_bytes_per_sequence"] == LATENT_32K    # one copy, on one rank
    per_rank = math.floor((USABLE - (dp8["weight_bytes"] - 7 / 8 * ROUTED)) / LATENT_32K)
    assert per_rank == 15
    assert dp8["max_sequences"] == 8 * per_rank == 120
    assert dp8["fits"] and dp8["parallel_fits_per_card"]


def test_the_issue_figures_22_under_tp8_179_pooled_and_120_with_dp_attention(
        host, dp8, write_scenario):
    # Issue 25's figures, on 8x H200 (143,771 MiB each, 10 % kept back), FP8 weights,
    # 32,768-token sequences: under TP8 every rank keeps every latent.
    tp8 = infermodel.evaluate(TP8)
    w = tp8["weight_bytes"]
    assert tp8["max_sequences"] == math.floor((8 * USABLE - w) / (8 * LATENT_32K)) == 22
    # "~179": all eight cards' memory pooled with the weights stored once (the scenario
    # without the lever). No engine layout reaches it: DP attention copies the attention
    # weights (vLLM: every non-expert weight) onto each rank.
    pooled = write_scenario(TP8.read_text().replace("[levers.parallelism]\ntensor = 8", ""))
    assert infermodel.evaluate(pooled)["max_sequences"] == math.floor(
        (8 * USABLE - w) / LATENT_32K) == 179
    assert dp8["max_sequences"] == 120
    # SGLang's placement (dense layers and shared experts split over the 8 cards, the
    # input table whole on each) keeps less per card.
    split = infermodel.evaluate(DP8, {"levers.parallelism.dense_weights": "split",
                                      "levers.parallelism.expert_dispatch": "all_gather"})
    dense = w - ATTENTION - TABLE - SHARED - ROUTED
    card = ATTENTION + TABLE + (dense + SHARED + ROUTED) / 8
    assert split["parallel_weight_bytes_per_card"] == pytest.approx(card, rel=1e-12)
    assert split["max_sequences"] == 8 * math.floor((USABLE - card) / LATENT_32K) == 136


def test_a_dp_attention_deployment_admits_more_sequences_in_the_simulator(host, dp8):
    tp8 = infermodel.evaluate(TP8)
    dp_cost = CostModel.from_quantities(layered_values(dp8.values))
    tp_cost = CostModel.from_quantities(layered_values(tp8.values))
    assert dp_cost.cache_tokens() / tp_cost.cache_tokens() > 120 / 23


def test_expert_parallelism_under_tensor_parallelism_keeps_the_memory(host):
    tp8 = infermodel.evaluate(TP8)
    ep = infermodel.evaluate(TP8, {"levers.parallelism.expert": 8})
    for name in ("memory_required", "kv_budget_bytes", "max_sequences"):
        assert ep[name] == pytest.approx(tp8[name], rel=1e-12), name
    assert ep["parallel_weight_bytes_per_card"] == pytest.approx(tp8["weight_bytes"] / 8, rel=1e-12)
    assert ep["tpot"] > tp8["tpot"]                     # the busiest expert rank waits


# ---------------------------------------------------------------------------- time

def test_the_busiest_dp_rank_sets_the_step(host):
    r = infermodel.evaluate(DP8, {"workload.batch": 13})
    assert r["parallel_attention_batch_factor"] == pytest.approx(16 / 13)   # ⌈13/8⌉·8/13
    one = infermodel.evaluate(DP8, {"workload.batch": 1})
    assert one["parallel_attention_batch_factor"] == 8  # a lone request uses one rank


def test_uniform_routing_imbalance_by_hand(host, dp8):
    # 64 tokens, k = 8 of E = 256 on X = 8 ranks of 32: the busiest rank's expected load
    # is at most mean + σ·√(2 ln 8), σ/mean = √((X − 1)(E − k)/((E − 1)·k·t)).
    t = 64
    want = 1 + math.sqrt(2 * math.log(8) * 7 * (256 - 8) / (255 * 8 * t))
    assert dp8["parallel_expert_imbalance"] == pytest.approx(want, rel=1e-12)
    assert lever_imbalance(1, 1, 8, 256, 8) <= 8       # never past all tokens on one rank
    stated = infermodel.evaluate(DP8, {"levers.parallelism.expert_imbalance": 1.3})
    assert stated["parallel_expert_imbalance"] == 1.3
    assert stated["tpot"] > dp8["tpot"]
    assert not [w for w in stated.warnings if w.quantity == "parallel_expert_imbalance"]
    assert [w for w in dp8.warnings if w.quantity == "parallel_expert_imbalance"]


def test_the_lever_and_the_simulator_share_the_imbalance_formula():
    for ranks, experts, active, share in ((8, 256, 8, 1.0), (3, 256, 8, 258 / 256),
                                          (16, 384, 8, 1.0), (4, 8, 2, 1.0)):
        for tokens in (1, 2, 7, 64, 4096):
            assert float(simulator_imbalance(tokens, ranks, experts, active, share)) == \
                pytest.approx(lever_imbalance(share, tokens, ranks, experts, active), rel=1e-14)


def test_dispatch_and_combine_by_hand(host, dp8):
    # 64 tokens, each to 8 experts: 64·8·7168 values, FP8 out (1 byte) and BF16 back.
    assert dp8["parallel_expert_dispatch_bytes"] == 64 * 8 * 7168 * 1
    assert dp8["parallel_expert_combine_bytes"] == 64 * 8 * 7168 * 2
    f, link, latency = dp8["parallel_expert_imbalance"], 450e9, 1e-6  # H200 preset's NVLink
    per_card = 64 / 8 * 8 * 7168 * 7 / 8                 # 7/8 of a card's tokens leave it
    dispatch = f * per_card * 1 / link + 7 * latency
    combine = f * per_card * 2 / link + 7 * latency
    assert dp8["parallel_dispatch_time"] == pytest.approx(dispatch, rel=1e-12)
    assert dp8["parallel_combine_time"] == pytest.approx(combine, rel=1e-12)
    # One card per rank: no all-reduce, no gather; 58 MoE layers each dispatch and combine.
    assert dp8["parallel_decode_comm_time"] == pytest.approx(58 * (dispatch + combine), rel=1e-12)


@pytest.mark.parametrize("changes", [
    {}, {"workload.batch": 13},
    {"levers.parallelism.dense_weights": "split", "levers.parallelism.expert_dispatch": "all_gather"},
    {"levers.parallelism.tensor": 2, "levers.parallelism.attention_data": 4,
     "levers.parallelism.expert": 4},
])
def test_the_simulator_prices_a_decode_step_as_the_lever_does(host, changes):
    changes = {"workload.prompt_tokens": 2000, "workload.output_tokens": 300, **changes}
    r = infermodel.evaluate(DP8, changes)
    cost = CostModel.from_quantities(layered_values(r.values))
    batch, context = int(r["batch"]), int(r["context"])
    assert cost.iteration_time([context] * batch, []) == pytest.approx(
        r["decode_step_time"], rel=1e-12)


def test_a_lone_sequence_on_eight_dp_ranks_reads_its_cache_at_one_card_speed():
    plain = CostModel.lab3()
    spread = CostModel.lab3(layout=ParallelLayout(data_ranks=8))
    assert not spread.simple
    assert spread.iteration_time([5000], []) == pytest.approx(
        (5.5e9 + 8 * 5000 * 147456) / 1e12, rel=1e-12)
    assert spread.iteration_time([5000] * 8, []) == pytest.approx(
        plain.iteration_time([5000] * 8, []), rel=1e-12)


# ---------------------------------------------------------------------------- identities

LAYOUT_MODELS = {"deepseek-v3": (128, 128, 256), "qwen3-235b-a22b": (64, 4, 128),
                 "mixtral-8x7b": (32, 8, 8)}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.sampled_from(sorted(LAYOUT_MODELS)), tensor=st.sampled_from([1, 2, 4]),
       data=st.sampled_from([1, 2, 4]), expert_log=st.integers(0, 4),
       dense=st.sampled_from(["replicated", "split"]), batch=st.integers(1, 40))
def test_layout_identities(host, write_scenario, model, tensor, data, expert_log, dense, batch):
    _heads, kv_heads, experts = LAYOUT_MODELS[model]
    cards = tensor * data
    expert = min(2 ** expert_log, cards, experts)
    path = write_scenario(f"""
[model]
preset = "{model}"
[hardware]
preset = "h200"
count = {cards}
[workload]
batch = {batch}
prompt_tokens = 1000
output_tokens = 100
[levers.parallelism]
tensor = {tensor}
attention_data = {data}
expert = {expert}
dense_weights = "{dense}"
efficiency = 0.8
""")
    r = infermodel.evaluate(path)
    w = r["weight_bytes"]
    # Every weight is stored somewhere: the cards hold at least one copy, the fullest at
    # least its even share.
    assert cards * r["parallel_weight_bytes_per_card"] >= w * (1 - 1e-12)
    assert r.values.get("parallel_weight_bytes_replicated", 0) >= -1e-6 * w
    if data == 1 and experts % expert == 0:
        assert r["parallel_weight_bytes_per_card"] == pytest.approx(w / cards, rel=1e-12)
    # The cache splits by KV head over the attention cards only (a latent: none).
    per_card = 1 if model == "deepseek-v3" else math.ceil(kv_heads / tensor)
    share = tensor * per_card / (1 if model == "deepseek-v3" else kv_heads)
    assert r["parallel_kv_storage_factor"] == pytest.approx(share)
    assert r["max_sequences"] % data == 0
    for name in ("parallel_attention_batch_factor", "parallel_expert_imbalance"):
        if name in r:
            assert r[name] >= 1


def test_explicit_degrees_of_one_change_nothing(host):
    for path in (SCENARIOS / "planner-70b-32-users.toml", SCENARIOS / "parallel-70b-allreduce.toml",
                 TP8):
        before = infermodel.evaluate(path)
        after = infermodel.evaluate(path, {"levers.parallelism.attention_data": 1,
                                           "levers.parallelism.expert": 1})
        assert after.values == before.values


# ---------------------------------------------------------------------------- mistakes

@pytest.mark.parametrize("sets, needle", [
    (["levers.parallelism.tensor=2"],
     "tensor × attention_data × pipeline = 2 × 8 × 1 = 16 cards, but hardware.count = 8"),
    (["levers.parallelism.tensor=1", "levers.parallelism.attention_data=3"],
     "tensor × attention_data × pipeline = 1 × 3 × 1 = 3 cards"),
    (["levers.parallelism.expert=3"], "does not divide the 8 cards of a stage"),
    (["levers.parallelism.expert=0"], "must be at least 1"),
    (["levers.parallelism.expert_imbalance=9"], "exceeds the 8 expert ranks"),
    (["levers.parallelism.expert_imbalance=0.5"], "must be at least 1"),
    (["levers.parallelism.attention_imbalance=12"], "exceeds the 8 data-parallel attention ranks"),
    (["levers.parallelism.dense_weights=\"sharded\""], "not one of 'replicated', 'split'"),
    (["levers.parallelism.expert_dispatch=\"deepep\""], "not one of 'all_gather', 'all_to_all'"),
    (["levers.moe.expert_parallel=4"], "give two expert-parallel degrees"),
    (["model.preset=\"llama-3.1-70b\"", "levers.parallelism.attention_data=1",
      "levers.parallelism.tensor=8"], "a dense model has no experts to split"),
])
def test_layout_mistakes_are_one_clear_message(host, capsys, sets, needle):
    argv = ["check", str(DP8)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert sum(line.startswith("error") for line in err.splitlines()) <= 1


def test_experts_that_do_not_divide_are_counted_at_the_fullest_rank(host, write_scenario):
    # 256 experts over 6 ranks: 4 ranks hold 43, 2 hold 42 (tensor 1, 6 attention ranks).
    path = write_scenario(DP8.read_text().replace("count = 8", "count = 6")
                          .replace("attention_data = 8", "attention_data = 6")
                          .replace("expert = 8", "expert = 6").replace("batch = 64", "batch = 12"))
    r = infermodel.evaluate(path)
    assert r["parallel_experts_per_rank"] == 43
    assert r["parallel_expert_rank_share"] == pytest.approx(6 * 43 / 256)
    card = r["weight_bytes"] - ROUTED + 6 * 43 / 256 * ROUTED / 6
    assert r["parallel_weight_bytes_per_card"] == pytest.approx(card, rel=1e-12)
    assert any("256 experts over 6 expert ranks" in w.message for w in r.warnings)


# ---------------------------------------------------------------------------- commands

def test_layers_ops_and_run_show_the_layout(host, capsys):
    assert main(["layers", str(DP8)]) == 0
    out = capsys.readouterr().out
    assert "parameters/card" in out
    assert main(["ops", str(DP8)]) == 0
    out = capsys.readouterr().out
    assert "expert_dispatch" in out and "expert_combine" in out
    assert main(["run", str(DP8)]) == 0
    out = capsys.readouterr().out
    assert "weights on the fullest card" in out and "busiest expert rank / mean" in out
    assert main(["explain", str(DP8), "parallel_weight_bytes_per_card"]) == 0
    assert "parallel_attention_weight_bytes" in capsys.readouterr().out


def test_layers_per_card_adds_up(host):
    import json

    from infermodel.cli.layers import format_json, layer_rows

    r = infermodel.evaluate(DP8)
    rows = layer_rows(r)
    total = json.loads(format_json(r, rows))["model"]["params_per_card"]
    # Every weight but the routed experts is on each card, plus a 1/8 of those.
    routed_params = (LAYERS - DENSE) * EXPERTS * EXPERT
    assert total == pytest.approx(r["params_total"] - 7 / 8 * routed_params, rel=1e-12)
    assert np.isfinite([row["params_per_card"] for row in rows]).all()
