"""The mixture-of-experts plugin: total vs active bytes, expected experts read at batch B,
and the checks on expert counts.

Golden figures: Module 10: Inference and serving, mixture-of-experts paragraph ("Other
proposals and smaller models"): an illustrative 46.7 B-total, 12.9 B-active model at
4.9 bits per parameter stores about 28.6 GB and reads about 7.9 GB per token, and cannot
fit in a 24 GB budget.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main


def mixtral(write_scenario, body: str = "", hardware: str = "h100-sxm", name: str = "m.toml"):
    text = f"""
[model]
preset = "mixtral-8x7b"
[hardware]
preset = "{hardware}"
[workload]
prompt_tokens = 2000
output_tokens = 1000
{body}"""
    return write_scenario(text, name)


@pytest.fixture(scope="module")
def at_4_9_bits():
    return SCENARIOS / "moe-module10-example.toml"


def test_mixtral_total_and_active_parameters():
    # The preset's shape gives the published 46.7 B total and 12.9 B active.
    r = infermodel.evaluate(SCENARIOS / "moe-mixtral-int4.toml")
    assert f"{r['params_total'] / 1e9:.1f}" == "46.7"
    assert f"{r['params_active'] / 1e9:.1f}" == "12.9"


def test_module10_moe_example(at_4_9_bits):
    # 46.7 B total and 12.9 B active at 4.9 bits → about 28.6 GB stored, 7.9 GB read per token.
    r = infermodel.evaluate(at_4_9_bits)
    assert r["bits_per_weight_effective"] == pytest.approx(4.9)
    assert f"{r['weight_bytes_total'] / 1e9:.1f}" == "28.6"
    assert f"{r['weight_bytes_active'] / 1e9:.1f}" == "7.9"
    assert r["weight_bytes_total"] == r["weight_bytes"]
    assert r["weight_bytes_per_step"] == pytest.approx(r["weight_bytes_active"])  # batch 1
    # "It cannot fit in a 24 GB budget even though its single-token traffic looks smaller."
    assert not r["fits"]
    assert r["kv_budget_bytes"] < 0


def test_experts_read_formula(at_4_9_bits):
    for batch, expected in [(1, 2.0), (2, 8 * (1 - 0.75**2)), (4, 5.46875), (64, 8 * (1 - 0.75**64))]:
        r = infermodel.evaluate(at_4_9_bits, {"workload.batch": batch})
        assert r["experts_read_per_layer"] == pytest.approx(expected)
    assert r["weight_bytes_per_step"] == pytest.approx(r["weight_bytes_total"], rel=1e-7)


@pytest.mark.parametrize("experts, active, batch", [(8, 2, 4), (60, 4, 16), (64, 6, 3), (16, 1, 40)])
def test_uniform_routing_matches_a_seeded_simulation(experts, active, batch):
    # Each token picks `active` distinct experts uniformly at random; count the distinct
    # experts a batch reads and compare the mean with E·(1 − (1 − k/E)^B).
    rng = np.random.default_rng(experts * 1000 + batch)
    trials = 4000
    keys = rng.random((trials, batch, experts))
    chosen = np.argsort(keys, axis=2)[:, :, :active]
    read = np.zeros((trials, experts), dtype=bool)
    np.put_along_axis(read, chosen.reshape(trials, -1), True, axis=1)
    measured = read.sum(axis=1).mean()
    predicted = experts * (1 - (1 - active / experts) ** batch)
    assert measured == pytest.approx(predicted, rel=0.02)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 256))
def test_traffic_grows_from_active_to_total(at_4_9_bits, batch):
    r, smaller = (infermodel.evaluate(at_4_9_bits, {"workload.batch": b}) for b in (batch, max(1, batch - 1)))
    assert r["weight_bytes_active"] <= r["weight_bytes_per_step"] <= r["weight_bytes_total"]
    assert smaller["weight_bytes_per_step"] <= r["weight_bytes_per_step"]


def test_batch_1_agrees_with_the_base_physics_share(write_scenario):
    # Without a format lever the active bytes are W · params_active / params_total, less
    # the input-table rows the step does not read (embedding_reads = "rows").
    r = infermodel.evaluate(mixtral(write_scenario, hardware="h200"))
    unread = (r["vocab"] - 1) * r["d_model"] * 2
    assert r["embedding_bytes_unread"] == unread
    assert r["weight_bytes_per_step"] == pytest.approx(
        r["weight_bytes"] * r["params_active"] / r["params_total"] - unread, rel=1e-12)


def test_compute_uses_active_parameters(write_scenario):
    path = mixtral(write_scenario, hardware="h200")
    one, many = (infermodel.evaluate(path, {"workload.batch": b}) for b in (1, 16))
    assert one["params_matmul"] == one["params_active"] - one["params_embedding"]
    assert many["decode_flops"] == pytest.approx(16 * one["decode_flops"])


@pytest.mark.parametrize("routing, share", [("all", "weight_bytes_total"), ("active", "weight_bytes_active")])
def test_routing_assumptions(write_scenario, routing, share):
    path = mixtral(write_scenario, f'[levers.moe]\nrouting = "{routing}"\n', hardware="h200")
    r = infermodel.evaluate(path, {"workload.batch": 8})
    assert r["weight_bytes_per_step"] == pytest.approx(r[share] - r["embedding_bytes_unread"])


def test_capacity_reads_experts_at_max_sequences():
    r = infermodel.evaluate(SCENARIOS / "moe-mixtral-int4.toml")
    full = r["max_sequences"]
    assert full > 100
    assert r["experts_read_at_capacity"] == pytest.approx(8 * (1 - 0.75**full))
    assert r["experts_read_per_layer"] == 2
    assert r["weight_bytes_read_at_capacity"] > r["weight_bytes_per_step"]


def test_quantised_expert_bytes(write_scenario):
    # With a format lever, a routed-expert weight costs the block linears' bytes per weight.
    r = infermodel.evaluate(SCENARIOS / "moe-mixtral-int4.toml")
    assert r["expert_bytes_per_param"] == pytest.approx(4.125 / 8)
    assert r["weight_bytes_total"] - r["weight_bytes_active"] == pytest.approx(
        32 * 6 * r["expert_params"] * 4.125 / 8)


def test_shared_experts_count_as_active():
    # Qwen1.5-MoE-A2.7B: 60 routed experts (4 active) plus an always-active shared expert,
    # published as about 14.3 B total and 2.7 B active.
    path = SCENARIOS / "moe-mixtral-int4.toml"
    r = infermodel.evaluate(path, {"model.preset": "qwen1.5-moe-a2.7b", "workload.batch": 1})
    assert f"{r['params_total'] / 1e9:.1f}" == "14.3"
    assert f"{r['params_active'] / 1e9:.1f}" == "2.7"
    assert r["experts_read_per_layer"] == pytest.approx(4)


def test_explain_shows_the_moe_step(capsys):
    assert main(["explain", str(SCENARIOS / "moe-mixtral-int4.toml"), "weight_bytes_per_step",
                 "--set", "workload.batch=8"]) == 0
    out = capsys.readouterr().out
    assert "replaced by: moe" in out
    assert "experts_read_per_layer = " in out and "weight_bytes_expected_read = " in out


def test_dense_models_are_untouched():
    r = infermodel.evaluate(SCENARIOS / "module10-case-base.toml")
    assert "experts_read_per_layer" not in r
    assert r.quantity("weight_bytes_per_step").changed_by == ()


def test_active_experts_above_experts_is_one_clear_error(write_scenario, capsys):
    path = mixtral(write_scenario, "")
    path.write_text(path.read_text().replace('preset = "mixtral-8x7b"', 'preset = "mixtral-8x7b"\nactive_experts = 9'))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "active_experts = 9 exceeds experts = 8" in err
    assert err.count("exceeds") == 1 and "Traceback" not in err


def test_moe_table_on_a_dense_model(write_scenario, capsys):
    path = write_scenario(f'extends = "{(SCENARIOS / "module10-case-base.toml").as_posix()}"\n'
                          '[levers.moe]\nrouting = "all"\n')
    assert main(["check", str(path)]) == 2
    assert "needs a mixture-of-experts model" in capsys.readouterr().err


def test_bad_routing_name(write_scenario, capsys):
    path = mixtral(write_scenario, '[levers.moe]\nrouting = "uniformly"\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "levers.moe.routing" in err and "did you mean 'uniform'?" in err


def test_per_channel_and_per_tensor_scales_count_experts_and_routers(write_scenario):
    # Per row: q (4096) + k, v (2·1024) + o (4096) + 8 experts · (gate, up 2·14336 + down
    # 4096) + the router's 8 rows, in each of 32 layers; per tensor: 4 + 8·3 + 1 per layer.
    per_row = infermodel.evaluate(mixtral(write_scenario, '[levers.quantization]\nlinear = "int8"\n'))
    assert per_row["weight_scales_linear"] == 32 * (4096 + 2048 + 4096 + 8 * (2 * 14336 + 4096) + 8)
    per_tensor = infermodel.evaluate(
        mixtral(write_scenario, '[levers.quantization]\nlinear = { bits = 8 }\n', name="t.toml"))
    assert per_tensor["weight_scales_linear"] == 32 * (4 + 8 * 3 + 1)


def test_number_formats_lever_sets_the_expert_bytes(write_scenario):
    path = mixtral(write_scenario, "[levers.number_formats]\nweight_bits_linear = 4\n")
    r = infermodel.evaluate(path, {"workload.batch": 4})
    assert r["expert_bytes_per_param"] == 0.5
    missed = 32 * (8 - r["experts_read_per_layer"]) * r["expert_params"] * 0.5
    assert r["weight_bytes_per_step"] == pytest.approx(r["weight_bytes"] - missed
                                                       - (r["vocab"] - 4) * r["d_model"] * 2)


def test_given_artifact_size_spreads_evenly(write_scenario):
    path = mixtral(write_scenario, "")
    path.write_text(path.read_text().replace('preset = "mixtral-8x7b"',
                                             'preset = "mixtral-8x7b"\nweight_bytes = "26 GB"'))
    r = infermodel.evaluate(path)
    assert r["expert_bytes_per_param"] == pytest.approx(26e9 / r["params_total"])
    assert r["weight_bytes_active"] == pytest.approx(26e9 * r["params_active"] / r["params_total"])
