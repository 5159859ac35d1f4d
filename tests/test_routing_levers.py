"""The routing, cascade and token-reduction levers, with figures computed by hand on
Module 10's case (§11: 24 GB card, 1 TB/s, 50 % of 165 TFLOP/s in prefill, W = 5.5 GB,
4,000 prompt and 2,000 output tokens, USD 1.00 per hour).
"""

from __future__ import annotations

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

CASE = SCENARIOS / "case-study-24gb.toml"
KV = 147_456
N = 8_927_875_072
PREFILL_F = 0.5 * 165e12


def _case_seconds_per_request(n=4000, m=2000):
    """Module 10's roofline at batch 1: prefill plus (m − 1) decode steps at mean context."""
    prefill = (2 * N * n + 2 * 36 * 4096 * n * n) / PREFILL_F
    step = (5.5e9 + (n + m / 2) * KV) / 1e12
    return prefill, step, prefill + (m - 1) * step


def _qwen_05b_times():
    """Qwen2.5-0.5B (its preset): 494,005,120 parameters, tied, at 16 bits; kv 12,288 B."""
    params = 24 * (2 * 896 * 896 + 2 * 896 * 128 + 3 * 896 * 4864) + 49 * 896 + 151936 * 896
    assert params == 494_005_120
    kv = 2 * 24 * 128 * 2
    prefill = max((2 * params * 4000 + 2 * 24 * 896 * 4000**2) / PREFILL_F,
                  (2 * params + 4000 * (kv + 4 * 896 * 24)) / 1e12)
    step = max((2 * params + 5000 * kv) / 1e12, (2 * params + 4 * 24 * 896 * 5000) / 165e12)
    return prefill, step, prefill + 1999 * step


def test_the_case_costs_what_module10_says(host):
    # 0.923 s prefill + 1,999 × 6.237 ms = 13.39 s a request: USD 0.62 per million tokens.
    _, _, seconds = _case_seconds_per_request()
    base = infermodel.evaluate(CASE)
    assert round(seconds, 2) == 13.39
    assert base["cost_per_million_tokens"] == pytest.approx(seconds / 3600 / 6000 * 1e6, rel=1e-9)


# ---------------------------------------------------------------------------------
# Routing
# ---------------------------------------------------------------------------------


def test_routing_a_share_at_a_relative_cost_blends_the_bill(host):
    base = infermodel.evaluate(CASE)["cost_per_million_tokens"]
    result = infermodel.evaluate(CASE, {"levers.routing.share": 0.3,
                                        "levers.routing.cost_ratio": 0.25})
    assert result["routing_cost_factor"] == pytest.approx(0.7 + 0.3 * 0.25, rel=1e-12)
    assert result["cost_per_million_tokens"] == pytest.approx(base * 0.775, rel=1e-12)


def test_routing_to_a_hosted_price_blends_the_two_prices(host):
    # Module 10 §11's hosted API: USD 0.00186 a cached request of 6,000 tokens, USD 0.31
    # per million tokens.
    base = infermodel.evaluate(CASE)["cost_per_million_tokens"]
    result = infermodel.evaluate(CASE, {"levers.routing.share": 0.3,
                                        "levers.routing.price_per_million_tokens": 0.31})
    assert result["cost_per_million_tokens"] == pytest.approx(0.7 * base + 0.3 * 0.31, rel=1e-12)


def test_routing_to_a_smaller_model_uses_its_roofline_on_the_same_card(host):
    prefill, step, e2e = _qwen_05b_times()
    _, _, case_seconds = _case_seconds_per_request()
    result = infermodel.evaluate(CASE, {"levers.routing.share": 0.3,
                                        "levers.routing.model": "qwen2.5-0.5b"})
    assert result["routed_ttft"] == pytest.approx(prefill, rel=1e-9)
    assert result["routed_tpot"] == pytest.approx(step, rel=1e-9)
    assert result["routed_e2e_latency"] == pytest.approx(e2e, rel=1e-9)
    assert result["routing_cost_ratio"] == pytest.approx(e2e / case_seconds, rel=1e-9)
    assert result["routing_mean_e2e_latency"] == pytest.approx(
        0.7 * result["e2e_latency"] + 0.3 * e2e, rel=1e-12)
    assert any("timed with the documents' roofline" in str(w) for w in result.warnings)


def test_routing_the_long_requests_away_budgets_this_pool_at_the_shorter_length(host):
    # Module 10 §11: the 16 GB budget holds 18 requests of 6,000 tokens; routed away
    # past 5,000 tokens, it holds ⌊16e9 / (5,000 · 147,456)⌋ = 21.
    result = infermodel.evaluate(CASE, {"levers.routing.share": 0.05,
                                        "levers.routing.cost_ratio": 1.0,
                                        "levers.routing.long_context_tokens": 5000})
    assert result["sequence_length"] == 5000
    assert result["max_sequences"] == 16e9 // (5000 * KV) == 21


@pytest.mark.parametrize(("sets", "words"), [
    (["levers.routing.share=0.3"], "give one of model, cost_ratio or price_per_million_tokens"),
    (["levers.routing.share=0.3", "levers.routing.cost_ratio=0.2",
      "levers.routing.model=\"qwen2.5-0.5b\""], "not model and cost_ratio"),
    (["levers.routing.share=0.3", "levers.routing.model=\"qwen2.5-05b\""], "qwen2.5-0.5b"),
    (["levers.routing.share=0.3", "levers.routing.model=\"mixtral-8x7b\""], "mixture of experts"),
    (["levers.routing.share=1.5", "levers.routing.cost_ratio=0.2"], "not a share"),
    (["levers.routing.share=0.3", "levers.routing.cost_ratio=0.2",
      "levers.routing.weight_bits=4"], "weight_bits applies only"),
])
def test_routing_mistakes_are_one_clear_message(host, capsys, sets, words):
    argv = ["run", str(CASE)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and words in err and "levers.routing" in err


def test_a_routed_price_needs_this_pools_rent(host, capsys):
    unpriced = SCENARIOS / "module10-case-base.toml"
    assert main(["run", str(unpriced), "--unset", "hardware.preset", "--set",
                 "hardware.memory=24 GB", "--set", "hardware.bandwidth=1 TB/s", "--set",
                 "hardware.flops=165 TFLOP/s", "--set", "levers.routing.share=0.3", "--set",
                 "levers.routing.price_per_million_tokens=0.3"]) == 2
    assert "hardware.price_per_hour" in capsys.readouterr().err


# ---------------------------------------------------------------------------------
# Cascade
# ---------------------------------------------------------------------------------


def test_a_cascade_pays_the_small_model_for_all_and_this_one_for_the_escalated(host):
    base = infermodel.evaluate(CASE)["cost_per_million_tokens"]
    result = infermodel.evaluate(CASE, {"levers.cascade.escalation": 0.2,
                                        "levers.cascade.cost_ratio": 0.25})
    assert result["cascade_cost_factor"] == pytest.approx(0.45, rel=1e-12)
    assert result["cost_per_million_tokens"] == pytest.approx(0.45 * base, rel=1e-12)


def test_a_cascade_from_a_small_model_preset(host):
    _, _, small = _qwen_05b_times()
    _, _, case_seconds = _case_seconds_per_request()
    result = infermodel.evaluate(CASE, {"levers.cascade.escalation": 0.2,
                                        "levers.cascade.model": "qwen2.5-0.5b"})
    assert result["cascade_cost_factor"] == pytest.approx(small / case_seconds + 0.2, rel=1e-9)
    assert result["cascade_mean_e2e_latency"] == pytest.approx(
        small + 0.2 * result["e2e_latency"], rel=1e-12)


def test_a_cascade_that_costs_more_says_so(host):
    result = infermodel.evaluate(CASE, {"levers.cascade.escalation": 0.9,
                                        "levers.cascade.cost_ratio": 0.5})
    assert any("at least 1" in str(w) for w in result.warnings)


def test_a_cascade_needs_its_small_model(host, capsys):
    assert main(["run", str(CASE), "--set", "levers.cascade.escalation=0.2"]) == 2
    assert "give one of model or cost_ratio" in capsys.readouterr().err


# ---------------------------------------------------------------------------------
# Token reduction
# ---------------------------------------------------------------------------------


def test_token_reduction_shortens_prompts_and_answers_and_everything_follows(host):
    result = infermodel.evaluate(CASE, {"levers.token_reduction.prompt_share": 0.2,
                                        "levers.token_reduction.output_share": 0.2})
    assert result["prompt_tokens"] == 3200 and result["output_tokens"] == 1600
    assert result["context"] == 3200 + 800 and result["sequence_length"] == 4800
    prefill, step, seconds = _case_seconds_per_request(3200, 1600)
    assert result["ttft"] == pytest.approx(prefill, rel=1e-9)
    assert result["tpot"] == pytest.approx(step, rel=1e-9)
    assert result["kv_bytes_per_sequence"] == 4800 * KV
    # the bill per request: seconds at USD 1.00/h
    per_request = result["cost_per_million_tokens"] * 4800 / 1e6
    assert per_request == pytest.approx(seconds / 3600, rel=1e-9)


def test_token_reduction_scales_a_stated_context_and_length(host):
    result = infermodel.evaluate(CASE, {"workload.context": 4500, "workload.sequence_length": 7000,
                                        "levers.token_reduction.prompt_share": 0.5})
    assert result["context"] == pytest.approx(4500 * (2000 + 1000) / (4000 + 1000), rel=1e-12)
    assert result["sequence_length"] == pytest.approx(7000 * 4000 / 6000, rel=1e-12)


def test_token_reduction_explains_the_written_lengths(host, capsys):
    assert main(["explain", str(CASE), "prompt_tokens", "--set",
                 "levers.token_reduction.prompt_share=0.25"]) == 0
    out = capsys.readouterr().out
    assert "prompt_tokens = 3,000" in out and "prompt_tokens_before_reduction" in out


def test_a_reduction_of_everything_is_refused(host, capsys):
    assert main(["run", str(CASE), "--set", "levers.token_reduction.output_share=1"]) == 2
    assert "not a share in [0, 1)" in capsys.readouterr().err
