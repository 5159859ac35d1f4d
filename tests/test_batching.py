"""The batching lever: static slot use from the output-length law (analytic, Monte-Carlo
and the serving simulator), paged against contiguous reservation, and its errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main
from infermodel.simulator import (
    QUANTITY_NAMES,
    CostModel,
    FixedLength,
    LogNormalLength,
    Policy,
    WorkloadSpec,
    expected_max,
    run_policy,
    static_slot_use,
)

STATIC = SCENARIOS / "batching-static-vs-continuous.toml"
BASE = SCENARIOS / "case-study-24gb.toml"
LAB3_LAW = LogNormalLength.from_median(1500, 0.6, 16, 4000)


def _fresh_evaluate(path, overrides=None):
    """evaluate() on a fresh host (for hypothesis tests, which cannot take fixtures)."""
    from infermodel.host import PluginHost, set_host

    set_host(PluginHost())
    try:
        return infermodel.evaluate(path, overrides or {})
    finally:
        set_host(None)


# ---------------------------------------------------------------------------- slot use
def test_expected_max_of_one_draw_is_the_mean(host):
    # E[max of 1] = Σ_k (1 − F(k)) = E[o]; a batch of one wastes no slot.
    r = infermodel.evaluate(STATIC, {"workload.batch": 1})
    assert r["batching_expected_max_output"] == pytest.approx(r["batching_output_mean"], rel=1e-12)
    assert r["batching_output_mean"] == pytest.approx(LAB3_LAW.mean(), rel=1e-12)
    assert r["static_slot_use"] == pytest.approx(1.0, rel=1e-12)
    assert not r.warnings


def test_static_slot_use_of_lab3_lengths_in_batches_of_16(host):
    # Inference lab, "Many requests, one pass": (E[o] − 1)/(E[o_max of B] − 1), the
    # expected maximum of 16 long-tailed draws being far above the mean.
    r = infermodel.evaluate(STATIC)
    assert r["batching_expected_max_output"] == pytest.approx(expected_max(LAB3_LAW, 16), rel=1e-12)
    assert r["static_slot_use"] == pytest.approx(static_slot_use(LAB3_LAW, 16), rel=1e-12)
    assert round(r["batching_output_mean"], 1) == 1729.5
    assert round(r["batching_expected_max_output"]) == 3688
    assert round(r["static_slot_use"], 4) == 0.4688
    assert r["batching_busy_slots"] == pytest.approx(16 * r["static_slot_use"])
    assert not r.warnings


@pytest.mark.parametrize("batch", [2, 8, 16, 64])
def test_static_slot_use_matches_a_seeded_monte_carlo_estimate(host, batch):
    # Draw many full static batches from the law; a slot does o − 1 useful steps out of
    # max − 1, so the share is (mean o − 1)/(mean max − 1) over the batches.
    r = infermodel.evaluate(STATIC, {"workload.batch": batch})
    rng = np.random.default_rng(20240611)
    draws = LAB3_LAW.sample_numpy(rng, 40_000 * batch // 4).reshape(-1, batch)
    estimate = (draws.mean() - 1) / (draws.max(axis=1).mean() - 1)
    assert r["static_slot_use"] == pytest.approx(estimate, rel=0.01)
    assert draws.max(axis=1).mean() == pytest.approx(r["batching_expected_max_output"], rel=0.01)


def test_static_policy_against_the_serving_simulator_on_a_long_workload(host):
    # Inference lab, "Many requests, one pass": in full static batches the simulator's
    # busy slot-steps / (slots × decode steps) approaches (E[o] − 1)/(E[o_max of B] − 1).
    # Its output rate, prefill stalls included, approaches back-to-back batch cycles.
    r = infermodel.evaluate(STATIC)
    cost = CostModel.from_quantities({name: r[name] for name in QUANTITY_NAMES if name in r})
    spec = WorkloadSpec(FixedLength(4000), LAB3_LAW, 4000, "numpy")
    metrics = run_policy(cost, spec.generate(50.0, seed=7), Policy("static", batch_size=16))
    assert metrics["slot_use"] == pytest.approx(r["static_slot_use"], rel=0.02)
    assert metrics["throughput_tokens_per_s"] == pytest.approx(
        r["static_tokens_per_s_with_prefill"], rel=0.03)
    # the decode-only rate leaves the prefill stalls out, so it is higher
    assert r["tokens_per_s_total"] > metrics["throughput_tokens_per_s"]


def test_static_policy_scales_the_batch_output_and_continuous_does_not(host):
    static = infermodel.evaluate(STATIC)
    continuous = infermodel.evaluate(STATIC, {"levers.batching.policy": "continuous"})
    assert continuous["batching_slot_use"] == 1
    assert static["batching_slot_use"] == static["static_slot_use"]
    assert static["tokens_per_s_total"] == pytest.approx(
        continuous["tokens_per_s_total"] * static["static_slot_use"], rel=1e-12)
    # per-user speed and the step itself are unchanged
    for name in ("decode_step_time", "tokens_per_s_per_user", "tpot"):
        assert static[name] == pytest.approx(continuous[name], rel=1e-12)
    last = static.graph["tokens_per_s_total"].history[-1]
    assert last.plugin == "batching" and last.order == 500
    assert "longest output" in last.reason
    assert not continuous.graph["tokens_per_s_total"].history[1:]


def test_default_law_is_fixed_at_the_output_tokens(host, write_scenario):
    path = write_scenario(f'extends = "{BASE}"\n[workload]\nbatch = 18\n'
                          '[levers.batching]\npolicy = "static"\nreservation = "full_length"\n')
    r = infermodel.evaluate(path)
    assert r["batching_output_mean"] == r["batching_expected_max_output"] == 2000
    assert r["static_slot_use"] == 1
    base = infermodel.evaluate(BASE, {"workload.batch": 18})
    assert r["tokens_per_s_total"] == pytest.approx(base["tokens_per_s_total"], rel=1e-12)
    # Module 10 §11: 18 full-length (6,000-token) bf16 sequences fit in 16 GB; with the
    # law's longest output equal to output_tokens, the base max_sequences is the
    # contiguous full-length count.
    assert r["max_sequences_contiguous"] == r["max_sequences"] == r["batching_max_sequences"] == 18
    # 6,000 positions are whole 16-token blocks: no tail at all
    assert r["paged_mean_unused_positions"] == 0 and r["max_sequences_paged"] == 18


def test_a_sweep_over_the_batch_recomputes_the_expected_maximum(host):
    result = infermodel.sweep(STATIC, {"workload.batch": [1, 4, 16]},
                              quantities=["batching_expected_max_output", "static_slot_use"])
    maxima = result["batching_expected_max_output"].tolist()
    assert maxima == pytest.approx([expected_max(LAB3_LAW, b) for b in (1, 4, 16)], rel=1e-12)
    assert result["static_slot_use"][0] == pytest.approx(1.0)
    assert list(result["static_slot_use"]) == sorted(result["static_slot_use"], reverse=True)


# ---------------------------------------------------------------------------- reservation
def test_paged_tail_is_at_most_15_positions_at_16_token_blocks(host):
    # Module 10, "Map logical positions to physical blocks": with blocks of 16 tokens the
    # unused tail is at most 15 positions per sequence.
    r = infermodel.evaluate(STATIC)
    assert r["paged_block_tokens"] == 16 and r["paged_max_unused_positions"] == 15
    assert 0 <= r["paged_mean_unused_positions"] <= 15
    assert 0 <= r["paged_reserved_tokens"] - r["batching_final_tokens"] <= 15
    assert r["paged_reserved_bytes_per_sequence"] == pytest.approx(
        r["kv_bytes_per_token"] * r["paged_reserved_tokens"])


def test_contiguous_reservation_holds_the_longest_output(host):
    # Module 10, "A joining prompt can stall everybody": a contiguous region reserved for
    # the maximum length holds prompt + 4,000 positions whatever the output turns out to be.
    r = infermodel.evaluate(STATIC)
    assert r["contiguous_reserved_tokens"] == 8000
    assert r["contiguous_reserved_bytes_per_sequence"] == 8000 * 147456
    assert round(r["contiguous_real_token_share"], 3) == round((4000 + LAB3_LAW.mean()) / 8000, 3) == 0.716
    assert r["paged_real_token_share"] > 0.998
    assert r["max_sequences_contiguous"] == math.floor(16e9 / (8000 * 147456)) == 13
    assert r["max_sequences_paged"] == 18
    assert r["batching_max_sequences"] == r["max_sequences_paged"]
    full = infermodel.evaluate(STATIC, {"levers.batching.reservation": "full_length"})
    assert full["batching_max_sequences"] == 13
    # the base physics' max_sequences is not changed by the lever
    assert full["max_sequences"] == r["max_sequences"] == 18
    assert not full.graph["max_sequences"].history[1:]


@settings(max_examples=30, deadline=None)
@given(block=st.integers(1, 64), prompt=st.integers(1, 3000), median=st.integers(20, 800))
def test_paged_waste_never_exceeds_block_minus_one(block, prompt, median):
    r = _fresh_evaluate(STATIC, {"levers.batching.block_tokens": block,
                                 "workload.prompt_tokens": prompt,
                                 "levers.batching.output": {"law": "lognormal", "median": median,
                                                            "sigma": 0.8, "min": 1, "max": 2000}})
    assert r["paged_max_unused_positions"] == block - 1
    assert -1e-9 <= r["paged_mean_unused_positions"] <= block - 1 + 1e-9
    assert r["max_sequences_paged"] >= r["max_sequences_contiguous"]
    assert r["paged_real_token_share"] >= r["contiguous_real_token_share"] - 1e-12
    # exact against a direct count over the law
    law = LogNormalLength.from_median(median, 0.8, 1, 2000)
    values, probabilities = law.pmf()
    lengths = prompt + values
    expected = float(np.dot(np.ceil(lengths / block) * block - lengths, probabilities))
    assert r["paged_mean_unused_positions"] == pytest.approx(expected, abs=1e-9)


def test_other_laws_and_an_empirical_file_next_to_the_scenario(host, tmp_path, write_scenario):
    (tmp_path / "lengths.csv").write_text("output\n100\n300\n200\n", encoding="utf-8")
    path = write_scenario(f'extends = "{BASE}"\n[workload]\nbatch = 3\n[levers.batching]\n'
                          'policy = "static"\noutput = { law = "empirical", file = "lengths.csv", '
                          'column = "output" }\n')
    r = infermodel.evaluate(path)
    assert r["batching_output_mean"] == 200 and r["batching_output_longest"] == 300
    # max of 3 draws from {100, 200, 300}: P(max ≤ 100) = 1/27, P(max ≤ 200) = 8/27
    assert r["batching_expected_max_output"] == pytest.approx(100 + 100 * (26 / 27) + 100 * (19 / 27))
    uniform = infermodel.evaluate(path, {"levers.batching.output": {"law": "uniform", "low": 10,
                                                                    "high": 30}})
    assert uniform["batching_output_mean"] == 20
    fixed = infermodel.evaluate(path, {"levers.batching.output": 50})
    assert fixed["static_slot_use"] == 1


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("setting, needles", [
    ("levers.batching.block_tokens=0", ["block_tokens", "at least 1 token"]),
    ("levers.batching.policy='statc'", ["levers.batching.policy", "did you mean 'static'"]),
    ("levers.batching.reservation='page'", ["levers.batching.reservation", "did you mean 'paged'"]),
    ("levers.batching.output={law='lognorml',median=10,sigma=1,min=1,max=20}",
     ["levers.batching.output", "did you mean 'lognormal'"]),
    ("levers.batching.output={law='lognormal',median=1500,min=16,max=4000}",
     ["levers.batching.output", "needs 'sigma'"]),
    ("levers.batching.output={law='uniform',low=10,high=5}", ["high (5) is below low (10)"]),
    ("levers.batching.output='long'", ["levers.batching.output", "length-law table"]),
    ("levers.batching.output={law='empirical',file='missing.csv'}",
     ["levers.batching.output", "cannot read"]),
    ("levers.batching.polcy='static'", ["did you mean 'policy'"]),
])
def test_bad_values_are_reported(host, capsys, setting, needles):
    assert main(["run", str(STATIC), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)
