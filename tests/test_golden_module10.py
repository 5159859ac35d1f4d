"""Golden figures from "Module 10: Inference and serving", reproduced from shipped scenarios.

Each test cites the section the figure is printed in; values are checked to the
document's printed precision.
"""

from __future__ import annotations

import pytest

import infermodel
from conftest import SCENARIOS

CASE = SCENARIOS / "case-study-24gb.toml"


@pytest.fixture(scope="module")
def case():
    return infermodel.evaluate(CASE)


def test_case_parameter_counts(case):
    # §11 "Account for the whole weight artifact" and Lab 1: N and N_matmul.
    assert case["params_total"] == 9_550_729_216
    assert case["params_matmul"] == 8_927_875_072
    assert case["params_block_linear"] == 8_304_721_920
    # §11: each block's attention holds 41,943,040 and its SwiGLU 188,743,680 parameters.
    assert case["params_attention"] / 36 == 41_943_040
    assert case["params_ffn"] / 36 == 188_743_680
    assert case["params_embedding"] == 622_854_144


def test_mixed_format_artifact_size():
    # §11: int4 + fp16 scale per 128 (4.125 bits) block linears, bf16 norms, 8-bit
    # embedding and head → about 5.528429 GB (Lab 1 prints 5.528429).
    r = infermodel.evaluate(SCENARIOS / "module10-case-artifact.toml")
    assert f"{r['weight_bytes'] / 1e9:.6f}" == "5.528429"


def test_bf16_everything_artifact_size():
    # §11: bf16 for every parameter would use about 19.101 GB.
    r = infermodel.evaluate(SCENARIOS / "module10-lab1-bf16-weights.toml")
    assert f"{r['weight_bytes'] / 1e9:.3f}" == "19.101"


def test_kv_cache_per_token_and_full_request(case):
    # §3 and Lab 1: 147,456 B/token (73,728 at one byte); 6,000 tokens → 0.884736 GB.
    assert case["kv_bytes_per_token"] == 147_456
    assert case["sequence_length"] == 6000
    assert f"{case['kv_bytes_per_token'] * 6000 / 1e9:.6f}" == "0.884736"
    one_byte = infermodel.evaluate(CASE, {"levers.number_formats.kv_bits": 8})
    assert one_byte["kv_bytes_per_token"] == 73_728


def test_capacity_on_the_24gb_card(case):
    # §11 "Budget memory at the accepted maximum length": 24 − 5.5 − 2.5 = 16 GB → 18
    # full-length requests; an ideal one-byte cache admits 36.
    assert case["kv_budget_bytes"] == pytest.approx(16e9)
    assert case["max_sequences"] == 18
    one_byte = infermodel.evaluate(CASE, {"levers.number_formats.kv_bits": 8})
    assert one_byte["max_sequences"] == 36


def test_ttft_and_decode_step(case):
    # §11 "Separate quiet-request latency from loaded throughput": cold 4,000-token
    # prompt about 0.923 s; at mean context 5,000, 6.23728 GB per step, about 6.24 ms.
    assert f"{case['ttft']:.3f}" == "0.923"
    assert case["context"] == 5000
    assert f"{case['decode_bytes'] / 1e9:.5f}" == "6.23728"
    assert f"{case['tpot'] * 1e3:.2f}" == "6.24"
    # The low-load end-to-end estimate: 0.923 + 1999 × 0.006237 ≈ 13.4 s.
    assert f"{case['e2e_latency']:.1f}" == "13.4"


def test_eighteen_sequences(case):
    # §11: at 18 sequences the step is about 18.77 ms, 959 aggregate tokens/s.
    r = infermodel.evaluate(CASE, {"workload.batch": 18})
    assert f"{r['decode_step_time'] * 1e3:.2f}" == "18.77"
    assert f"{r['tokens_per_s_total']:.0f}" == "959"
    # §3 "Capacity and traffic": the cache read is about 13.27 GB per step.
    assert f"{(r['decode_bytes'] - r['weight_bytes']) / 1e9:.2f}" == "13.27"


LAB1_TABLE = [
    # Lab 1 card table: card, free GB, B, TTFT s, solo tok/s, batch tok/s.
    ("case-study-24gb.toml", "16.0", 18, "0.923", "160.3", "958.9"),
    ("module10-lab1-24gb-0.3.toml", "16.0", 18, "1.259", "48.1", "287.7"),
    ("module10-lab1-48gb.toml", "40.0", 45, "0.421", "138.5", "1005.2"),
    ("module10-lab1-80gb-2.039.toml", "72.0", 81, "0.488", "326.9", "2532.3"),
    ("module10-lab1-80gb-3.35.toml", "72.0", 81, "0.154", "537.1", "4160.6"),
]


@pytest.mark.parametrize("scenario,free,batch,ttft,solo,total", LAB1_TABLE)
def test_lab1_card_table(scenario, free, batch, ttft, solo, total):
    r = infermodel.evaluate(SCENARIOS / scenario)
    assert f"{r['kv_budget_bytes'] / 1e9:5.1f}".strip() == free
    assert r["max_sequences"] == batch
    assert f"{r['ttft']:.3f}" == ttft
    assert f"{r['tokens_per_s_per_user']:.1f}" == solo
    assert f"{r['tokens_per_s_at_capacity']:.1f}" == total
    # The batch figure is the same as evaluating decode at B = max_sequences.
    at_b = infermodel.evaluate(SCENARIOS / scenario, {"workload.batch": batch})
    assert at_b["tokens_per_s_total"] == pytest.approx(r["tokens_per_s_at_capacity"], rel=1e-12)


@pytest.mark.parametrize("scenario,batch,solo", [
    ("module10-lab1-bf16-weights.toml", 2, "50.4"),
    ("module10-lab1-int8-weights.toml", 13, "97.2"),
])
def test_lab1_weight_precision_rows(scenario, batch, solo):
    # Lab 1: bf16 weights → B = 2, solo 50.4 tok/s; int8 weights → B = 13, solo 97.2.
    r = infermodel.evaluate(SCENARIOS / scenario)
    assert r["max_sequences"] == batch
    assert f"{r['tokens_per_s_per_user']:.1f}" == solo


def test_h100_ridge():
    # §2: for the H100 SXM profile, I* = 989/3.35 ≈ 295 FLOP/byte (Lab 1 prints 295.2).
    r = infermodel.evaluate(SCENARIOS / "module10-lab1-80gb-3.35.toml")
    assert f"{r['ridge_intensity']:.1f}" == "295.2"


def test_lab1_ridges():
    # Lab 1 prints the ridge of each card.
    expected = {"case-study-24gb.toml": "165.0", "module10-lab1-24gb-0.3.toml": "403.3",
                "module10-lab1-48gb.toml": "419.0", "module10-lab1-80gb-2.039.toml": "153.0"}
    for scenario, ridge in expected.items():
        assert f"{infermodel.evaluate(SCENARIOS / scenario)['ridge_intensity']:.1f}" == ridge


def test_cost_per_million_output_tokens():
    # §11 "Price output at the utilisation actually purchased": cost per million output
    # tokens is the hourly price over the tokens produced in an hour; at 30 % utilisation
    # of paid hours the same work costs 1/0.3 times as much (0.42 → 1.39 in the text).
    r = infermodel.evaluate(CASE, {"workload.batch": 18})
    assert r["cost_per_hour"] == 1.0
    # 958.9 tokens/s at USD 1.00/h → 1e6 / (3600 × 958.9) = USD 0.290 per million.
    assert f"{r['cost_per_million_output_tokens']:.3f}" == "0.290"
    r30 = infermodel.evaluate(CASE, {"workload.batch": 18, "pricing.utilisation": 0.3})
    assert r30["cost_per_million_output_tokens"] == pytest.approx(
        r["cost_per_million_output_tokens"] / 0.3, rel=1e-12)


def test_mm1_knee():
    # §12 "Queueing rises sharply near saturation": S/(1 − ρ) = 2, 5, 10, 20 × S at
    # ρ = 0.5, 0.8, 0.9, 0.95.
    base = infermodel.evaluate(CASE, {"workload.requests_per_day": 1000})
    service = base["e2e_latency"]
    for rho, factor in [(0.5, 2), (0.8, 5), (0.9, 10), (0.95, 20)]:
        per_day = rho * 86400 / service  # batch 1: ρ = λ·S
        r = infermodel.evaluate(CASE, {"workload.requests_per_day": per_day})
        assert r["slot_utilisation"] == pytest.approx(rho, rel=1e-12)
        assert r["mm1_time_in_system"] / service == pytest.approx(factor, rel=1e-9)


def test_littles_law_quantity():
    # §12: Little's law n = λ·w; the case's full-load check 0.332 × 54.2 ≈ 18.
    r = infermodel.evaluate(CASE, {"workload.requests_per_day": 0.332 * 86400})
    assert r["requests_in_system"] == pytest.approx(0.332 * r["e2e_latency"], rel=1e-12)
    assert f"{0.332 * 54.2:.0f}" == "18"
