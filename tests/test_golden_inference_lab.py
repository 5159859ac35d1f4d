"""The roofline of "Inference lab", "Two costs for one answer", and its conventions.

The lab's step is max(t_mem, t_cmp) + t0 with t0 = 0.3 ms at published peak rates;
B* = (W/BW) / ((2P + 4·n_layers·d_q·L)/F − L·kv/BW), infinite when the bracket is ≤ 0.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS

LAB = SCENARIOS / "inference-lab-roofline.toml"


@pytest.fixture(scope="module")
def lab():
    return infermodel.evaluate(LAB)


def test_lab_convention_is_peak_rates_and_t0(lab):
    assert lab["t0"] == pytest.approx(3e-4)
    assert lab["bandwidth"] == pytest.approx(3.35e12)
    assert lab["flops_effective_decode"] == pytest.approx(989e12)
    assert lab["reserve_fraction"] == pytest.approx(0.1)
    # "fits when P·bytes + kv·context·users ≤ (1 − 0.1)·cards·M"
    assert lab["memory_usable"] == pytest.approx(0.9 * 80e9)


def _step(r, batch):
    t_mem = (r["weight_bytes"] + batch * r["context"] * r["kv_bytes_per_token"]) / r["bandwidth"]
    t_cmp = batch * (2 * r["params_matmul"] + 4 * r["layers"] * r["query_width"] * r["context"]) \
        / r["flops_effective_decode"]
    return max(t_mem, t_cmp) + r["t0"]


def test_decode_step_matches_the_lab_formula(lab):
    assert lab["decode_step_time"] == pytest.approx(_step(lab, lab["batch"]), rel=1e-12)
    assert lab["tokens_per_s_total"] == pytest.approx(lab["batch"] / _step(lab, lab["batch"]), rel=1e-12)


def test_critical_batch_where_both_limits_meet():
    # Short context: the bracket is positive, and at B* compute time equals memory time.
    r = infermodel.evaluate(LAB, {"workload.context": 64})
    assert r["critical_batch_bracket"] > 0
    b_star = r["critical_batch"]
    expected = (r["weight_bytes"] / r["bandwidth"]) / (
        (2 * r["params_matmul"] + 4 * r["layers"] * r["query_width"] * 64) / r["flops_effective_decode"]
        - 64 * r["kv_bytes_per_token"] / r["bandwidth"])
    assert b_star == pytest.approx(expected, rel=1e-12)
    at = infermodel.evaluate(LAB, {"workload.context": 64, "workload.batch": math.ceil(b_star)})
    below = infermodel.evaluate(LAB, {"workload.context": 64, "workload.batch": math.floor(b_star)})
    assert at["decode_compute_bound"] is True
    assert below["decode_compute_bound"] is False


def test_bracket_not_positive_means_never_compute_bound(lab):
    # At this context the cache read per sequence outweighs its compute: B* = ∞.
    assert lab["critical_batch_bracket"] <= 0
    assert lab["critical_batch"] == math.inf
    huge = infermodel.evaluate(LAB, {"workload.batch": 4096})
    assert huge["decode_compute_bound"] is False


def test_prefill_is_compute_bound_and_decode_memory_bound_at_batch_one():
    # "The first phase is usually limited by arithmetic, the second by memory bandwidth."
    r = infermodel.evaluate(LAB, {"workload.batch": 1})
    assert r["prefill_time_compute"] > r["prefill_time_memory"]
    assert r["decode_time_memory"] > r["decode_time_compute"]
    assert r["prefill_intensity"] > r["ridge_intensity"] > r["decode_intensity"]


@settings(max_examples=40, deadline=None)
@given(context=st.integers(1, 4096), batch=st.integers(1, 512))
def test_step_is_the_slower_limit_plus_t0(context, batch):
    r = infermodel.evaluate(LAB, {"workload.context": context, "workload.batch": batch})
    assert r["decode_step_time"] == pytest.approx(
        max(r["decode_time_memory"], r["decode_time_compute"]) + r["t0"], rel=1e-12)
    if r["critical_batch"] != math.inf:
        assert r["decode_compute_bound"] == (batch >= r["critical_batch"] * (1 - 1e-12))
