"""The measured-rates latency mode: ``[efficiency] prefill_rate``, ``decode_rate`` and
``request_overhead``, with figures computed by hand.
"""

from __future__ import annotations

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

COST = SCENARIOS / "cost-module10-case.toml"
CASE = SCENARIOS / "case-study-24gb.toml"

MEASURED = {"efficiency.prefill_rate": "8000 token/s", "efficiency.decode_rate": 40,
            "efficiency.request_overhead": "50 ms"}


def test_ttft_is_the_prompt_over_the_rate_plus_the_overhead_and_tpot_one_over_the_rate(host):
    result = infermodel.evaluate(CASE, MEASURED)
    assert result["ttft"] == pytest.approx(4000 / 8000 + 0.05, rel=1e-12)
    assert result["tpot"] == pytest.approx(1 / 40, rel=1e-12)
    assert result["tokens_per_s_per_user"] == pytest.approx(40, rel=1e-12)
    assert result["e2e_latency"] == pytest.approx(0.55 + 1999 / 40, rel=1e-12)
    # At a batch of 4 the batch's prompts take 4 · 4,000 / 8,000 s plus the overhead;
    # one request alone still takes 0.55 s.
    batch = infermodel.evaluate(CASE, {**MEASURED, "workload.batch": 4})
    assert batch["ttft_batch"] == pytest.approx(2.05, rel=1e-12)
    assert batch["ttft"] == pytest.approx(0.55, rel=1e-12)
    assert batch["tokens_per_s_total"] == pytest.approx(160, rel=1e-12)


def test_prefix_cache_hits_come_off_the_uncached_prompt(host):
    # Module 10's 3,000-token stable prefix in 16-token blocks: 187 whole blocks, 2,992
    # tokens reused, so a hit prefills 1,008 tokens.
    result = infermodel.evaluate(CASE, {**MEASURED, "levers.prefix_cache.prefix_tokens": 3000})
    assert result["measured_uncached_prompt_tokens"] == 4000 - 2992
    assert result["ttft"] == pytest.approx(1008 / 8000 + 0.05, rel=1e-12)
    half = infermodel.evaluate(CASE, {**MEASURED, "levers.prefix_cache.prefix_tokens": 3000,
                                      "levers.prefix_cache.hit_rate": 0.5})
    assert half["ttft"] == pytest.approx((4000 - 0.5 * 2992) / 8000 + 0.05, rel=1e-12)


def test_machine_hours_reproduce_module10_busy_hours_at_its_own_rates(host):
    # Module 10 §11 'Price output at the utilisation actually purchased': at 2,000
    # requests a day, about 2000 × 3.01 / 3600 = 1.67 busy GPU-hours a day. Measured
    # rates equal to the case's roofline figures at a full batch of 18 (prefill 4,000
    # tokens in 0.92336 s, a 18.77 ms decode step) give the same 3.01 s a request.
    prefill_time = 4000 * 8_927_875_072 * 2 / (0.5 * 165e12) + 2 * 36 * 4096 * 4000**2 / (0.5 * 165e12)
    step = (5.5e9 + 18 * 5000 * 147_456) / 1e12
    seconds = (18 * prefill_time + 1999 * step) / 18
    assert round(seconds, 2) == 3.01
    result = infermodel.evaluate(COST, {"workload.batch": 18,
                                        "efficiency.prefill_rate": 4000 / prefill_time,
                                        "efficiency.decode_rate": 1 / step})
    assert result["machine_seconds_per_request"] == pytest.approx(seconds, rel=1e-9)
    per_day = 2000 * seconds / 3600
    assert round(per_day, 2) == 1.67
    assert result["machine_hours_per_month"] == pytest.approx(per_day * 30.4375, rel=1e-9)
    assert result["machine_cost_per_month"] == pytest.approx(per_day * 30.4375 * 1.0, rel=1e-9)


def test_every_replaced_derivation_says_it_is_the_measured_rates_model(host, capsys):
    path = str(CASE)
    sets = [f"--set={k}={v}" if not isinstance(v, str) else f"--set={k}=\"{v}\""
            for k, v in MEASURED.items()]
    assert main(["explain", path, "tpot", *sets]) == 0
    out = capsys.readouterr().out
    assert "measured-rates model (the simplest one)" in out and "1/measured_decode_rate" in out
    assert main(["run", path, *sets]) == 0
    out = capsys.readouterr().out
    assert "limits: prefill measured rate · decode measured rate" in out
    assert "latency comes from the measured rates" in out
    # 25 ms against the roofline's 6.237 ms: called out as far from the ceiling.
    assert "the measured tpot (25 ms) is 4.01× the roofline's (6.237 ms)" in out


def test_only_decode_measured_keeps_the_roofline_prefill(host):
    roofline = infermodel.evaluate(CASE)
    result = infermodel.evaluate(CASE, {"efficiency.decode_rate": 100})
    assert result["ttft"] == pytest.approx(roofline["ttft"], rel=1e-12)
    assert result["tpot"] == pytest.approx(0.01, rel=1e-12)
    assert "machine_hours_per_month" not in result  # no request volume given


def test_an_overhead_without_a_prefill_rate_is_one_clear_mistake(host, capsys):
    status = main(["run", str(CASE), "--set", "efficiency.request_overhead=0.03"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("error:") == 1
    assert "efficiency.request_overhead" in err and "prefill_rate" in err


@pytest.mark.parametrize("value", ["0", "-5", "\"fast\""])
def test_a_rate_must_be_positive(host, capsys, value):
    assert main(["run", str(CASE), "--set", f"efficiency.decode_rate={value}"]) == 2
    assert "efficiency.decode_rate" in capsys.readouterr().err


def test_a_sweep_of_the_batch_follows_the_measured_model(host):
    scenario = infermodel.load_scenario(CASE, MEASURED)
    result = infermodel.sweep(scenario, {"workload.batch": [1, 2, 4]},
                              quantities=["tokens_per_s_total", "ttft_batch"])
    assert list(result["tokens_per_s_total"]) == pytest.approx([40, 80, 160])
    assert list(result["ttft_batch"]) == pytest.approx([0.55, 1.05, 2.05])
