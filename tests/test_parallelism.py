"""The parallelism lever: the Inference lab planner's step and memory check, the
explicit ring all-reduce, KV-head replication, pipeline stages and the errors.
"""

from __future__ import annotations

import re

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

PLANNER = SCENARIOS / "planner-70b-32-users.toml"
ALLREDUCE = SCENARIOS / "parallel-70b-allreduce.toml"
PIPELINE = SCENARIOS / "parallel-70b-pipeline.toml"

# Llama 3.1 70B shape and one H100 SXM, as the presets give them.
LAYERS, D, HEADS, KV_HEADS, HEAD_DIM = 80, 8192, 64, 8, 128
# M: the preset's memory as the runtime reports it (81,559 MiB), not the decimal 80 GB.
BW, F, M, PRICE = 3.35e12, 989e12, 81559 * 2**20, 2.5


def lab_planner(r, cards, e):
    """Inference lab, 'What it costs to keep it running': the planner's formulas."""
    users, L = r["batch"], r["context"]
    W, P, kv = r["weight_bytes"], r["params_matmul"], r["kv_bytes_per_token"]
    fits = W + kv * L * users <= 0.9 * cards * M
    step = max((W + users * L * kv) / (cards * e * BW),
               users * (2 * P + 4 * LAYERS * HEADS * HEAD_DIM * L) / (cards * e * F)) + 0.3e-3
    cost = (PRICE * cards / 3600) / (users / step / 1e6)
    return fits, 1 / step, users / step, cost


@pytest.mark.parametrize("cards, e, fits", [(2, 0.9, False), (4, 0.8, True), (8, 0.7, True)])
def test_planner_matches_the_inference_lab_formulas(host, cards, e, fits):
    r = infermodel.evaluate(PLANNER, {"hardware.count": cards})
    assert r["kv_bytes_per_token"] == 2 * LAYERS * KV_HEADS * HEAD_DIM * 2  # no replication
    assert r["parallel_efficiency"] == e
    want_fits, per_user, total, cost = lab_planner(r, cards, e)
    assert bool(r["fits"]) is want_fits is fits
    assert r["tokens_per_s_per_user"] == pytest.approx(per_user, rel=1e-12)
    assert r["tokens_per_s_total"] == pytest.approx(total, rel=1e-12)
    assert r["cost_per_million_output_tokens"] == pytest.approx(cost, rel=1e-12)


def test_planner_choice_as_shipped_meets_the_target(host):
    r = infermodel.evaluate(PLANNER)
    assert r["fits"] and r["parallel_fits_per_card"]
    assert r["max_sequences"] >= 32
    assert r["tokens_per_s_per_user"] >= 25
    assert r["parallel_tensor_degree"] == 4 and r["parallel_pipeline_degree"] == 1


def test_memory_is_checked_per_card(host):
    r = infermodel.evaluate(PLANNER)
    per_card = r["parallel_memory_required_per_card"]
    assert per_card == pytest.approx(r["weight_bytes"] / 4 + r["kv_bytes_total"] / 4 + 0.1 * M)
    assert bool(r["parallel_fits_per_card"]) == bool(r["fits"]) == (per_card <= M)


def test_absolute_reserve_is_kept_on_every_card(host):
    r = infermodel.evaluate(PLANNER, {"hardware.reserve": "2.5 GB"})
    assert r["memory_reserved"] == pytest.approx(4 * 2.5e9)


def test_more_ranks_than_kv_heads_replicate_the_cache(host):
    r16 = infermodel.evaluate(PLANNER, {"hardware.count": 16, "levers.parallelism.efficiency": 0.6})
    assert r16["parallel_kv_heads_per_card"] == 1
    assert r16["parallel_kv_storage_factor"] == 2
    assert r16["kv_bytes_per_token"] == 2 * 2 * LAYERS * KV_HEADS * HEAD_DIM * 2
    assert r16["parallel_kv_bytes_per_card"] == pytest.approx(
        r16["batch"] * r16["sequence_length"] * 2 * LAYERS * 1 * HEAD_DIM * 2)


def test_one_card_with_the_lever_is_the_base_physics(host, write_scenario):
    lever = infermodel.evaluate(PLANNER, {"hardware.count": 1})
    text = re.sub(r"\[levers\.parallelism\]\n(?:[a-z].*\n)*", "", PLANNER.read_text())
    path = write_scenario(text.replace("count = 4", "count = 1"))
    base = infermodel.evaluate(path)
    assert "parallel_efficiency" not in base
    for name in ("tpot", "ttft", "max_sequences", "memory_required", "fits",
                 "cost_per_million_output_tokens"):
        assert lever[name] == pytest.approx(base[name], rel=1e-12), name


# ---------------------------------------------------------------------------------
# Explicit communication (ring all-reduce twice per layer)
# ---------------------------------------------------------------------------------


def test_ring_allreduce_cost(host):
    r = infermodel.evaluate(ALLREDUCE)
    n, link, lat = r["parallel_tensor_degree"], r["parallel_link_bandwidth"], r["parallel_link_latency"]
    size = r["batch"] * D * 2
    one = 2 * (n - 1) / n * size / link + 2 * (n - 1) * lat
    assert r["parallel_allreduce_time"] == pytest.approx(one, rel=1e-12)
    assert r["parallel_decode_comm_time"] == pytest.approx(2 * LAYERS * one, rel=1e-12)
    assert r["parallel_efficiency"] == 1
    base = max(r["decode_time_memory"], r["decode_time_compute"]) + r["t0"]
    assert r["decode_step_time"] == pytest.approx(base + 2 * LAYERS * one, rel=1e-12)


def test_a_slow_link_costs_more_than_nvlink(host):
    nvlink = infermodel.evaluate(ALLREDUCE)
    pcie = infermodel.evaluate(ALLREDUCE, {"hardware.interconnect_bandwidth": "32 GB/s",
                                          "hardware.interconnect_latency": "5 us"})
    assert pcie["parallel_decode_comm_time"] > 4 * nvlink["parallel_decode_comm_time"]
    assert pcie["tpot"] > nvlink["tpot"]


def test_lever_link_overrides_the_hardware(host):
    r = infermodel.evaluate(ALLREDUCE, {"levers.parallelism.link_bandwidth": "100 GB/s",
                                        "levers.parallelism.link_latency": "2 us"})
    assert r["parallel_link_bandwidth"] == 100e9 and r["parallel_link_latency"] == 2e-6


# ---------------------------------------------------------------------------------
# Pipeline: capacity adds, one request still traverses every stage
# ---------------------------------------------------------------------------------


def test_one_request_gets_one_stage_group_speed(host, write_scenario):
    staged = infermodel.evaluate(PIPELINE, {"workload.batch": 1})
    single = infermodel.evaluate(PIPELINE, {"workload.batch": 1, "hardware.count": 2,
                                            "levers.parallelism.pipeline": 1})
    # four cards as 2 stages × 2 ranks, e = 0.9 either way: the same per-token time
    assert staged["parallel_microbatches"] == 1
    assert staged["tpot"] == pytest.approx(single["tpot"], rel=1e-12)
    assert staged["memory_bytes"] == 2 * single["memory_bytes"]
    assert staged["max_sequences"] > 2 * single["max_sequences"]


def test_pipeline_throughput_grows_with_micro_batches(host):
    one = infermodel.evaluate(PIPELINE, {"workload.batch": 1})
    full = infermodel.evaluate(PIPELINE)
    assert full["parallel_microbatches"] == full["parallel_pipeline_degree"]
    assert full["tokens_per_s_total"] > 10 * one["tokens_per_s_total"]
    p = full["parallel_pipeline_degree"]
    memory = (p * full["weight_bytes"] + full["batch"] * full["context"] * full["kv_bytes_per_token"]) \
        / full["bandwidth"]
    assert full["decode_time_memory"] == pytest.approx(memory, rel=1e-12)


def test_uneven_stages_are_limited_by_the_largest(host):
    r = infermodel.evaluate(PIPELINE, {"hardware.count": 3, "levers.parallelism.tensor": 1,
                                       "levers.parallelism.pipeline": 3})
    assert r["parallel_stage_layers"] == 27
    assert r["parallel_weight_bytes_per_card"] == pytest.approx(r["weight_bytes"] * 27 / 80)
    assert r["memory_required"] == pytest.approx(
        3 * r["parallel_weight_bytes_per_card"] + r["kv_bytes_total"] + r["memory_reserved"])


# ---------------------------------------------------------------------------------
# Mistakes
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sets, needle", [
    (["hardware.count=3"], "does not divide the 64 attention heads"),
    (["hardware.count=6", "levers.parallelism.tensor=6"], "does not divide the 64 attention heads"),
    (["levers.parallelism.tensor=2"], "tensor × pipeline = 2 × 1 = 2 cards, but hardware.count = 4"),
    (["levers.parallelism.pipeline=3"], "cannot form 3 equal pipeline stages"),
    (["hardware.count=16"], "no entry for tensor degree 16"),
    (["levers.parallelism.communication=\"ring\""], "not one of"),
    (["levers.parallelism.efficiency=1.5"], "not an efficiency in (0, 1]"),
    (["levers.parallelism.efficiency_table={ four = 0.8 }"], "not a tensor degree"),
    (["levers.parallelism.communication=\"all_reduce\"", "hardware.preset=\"module10-80gb-h100\""],
     "needs the link bandwidth"),
])
def test_mistakes_are_reported_without_traceback(host, capsys, sets, needle):
    argv = ["run", str(PLANNER)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_custom_efficiency_table(host):
    r = infermodel.evaluate(PLANNER, {"levers.parallelism.efficiency_table": {"4": 0.5}})
    assert r["parallel_efficiency"] == 0.5
    assert r["bandwidth"] == pytest.approx(4 * BW * 0.5)
