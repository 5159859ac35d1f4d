"""The cost model: Module 10 §11's rented, owned and hosted-API figures and the
full-load accounting behind them.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

COST = SCENARIOS / "cost-module10-case.toml"
BASE = SCENARIOS / "case-study-24gb.toml"
PREFIX = SCENARIOS / "prefix-module10-case.toml"


@pytest.fixture
def cost(host):
    return infermodel.evaluate(COST)


# Module 10 §11 "Separate quiet-request latency from loaded throughput": each request
# is charged 0.923 s of prefill plus its share of the 18-sequence decode batch.
def test_full_load_accounting(cost):
    assert round(cost["full_load_prefill_seconds"], 3) == 0.923
    assert round(cost["capacity_step_time"] * 1e3, 2) == 18.77
    assert cost["full_load_requests_per_hour"] == pytest.approx(1196, abs=1)     # "about 1,196"
    assert round(cost["full_load_output_tokens_per_hour"] / 1e6, 2) == 2.39     # "2.39 million"
    assert round(cost["full_load_prefill_share"], 2) == 0.31                    # "about 31%"
    assert round(cost["full_load_effective_step_time"] * 1e3) == 27             # "near 27 ms"
    decode_latency = cost["full_load_e2e_latency"] - cost["full_load_prefill_seconds"]
    assert 54 <= decode_latency <= 55 and 54 <= cost["full_load_e2e_latency"] <= 55.5  # "54–55 s"
    # Little's law: 0.332 requests/s × 54.2 s ≈ 18 concurrent requests
    assert round(cost["full_load_requests_per_hour"] / 3600, 3) == 0.332
    assert cost["full_load_requests_in_system"] == pytest.approx(cost["max_sequences"], rel=1e-12)


# §11 "Price output at the utilisation actually purchased".
def test_rented_card(cost, host):
    assert round(cost["cost_per_million_output_tokens_busy"], 2) == 0.42
    assert round(cost["cost_per_million_output_tokens"], 2) == 0.42
    low = infermodel.evaluate(COST, {"pricing.utilisation": 0.3})
    assert round(low["cost_per_million_output_tokens"], 2) == 1.39
    assert round(cost["busy_hours_per_day"], 2) == 1.67
    assert round(cost["always_on_utilisation"], 2) == 0.07                   # "about 7%"
    assert cost["always_on_cost_per_day"] == pytest.approx(24.0)
    assert round(cost["always_on_cost_per_request"], 3) == 0.012
    assert round(cost["always_on_cost_per_million_output_tokens"], 2) == 6.00
    assert cost["cost_per_request"] == pytest.approx(
        cost["cost_per_million_output_tokens"] * 2000 / 1e6, rel=1e-12)


def test_rounded_busy_rate_gives_the_documents_figures(host):
    # "At 2.4 million output tokens per busy hour, cost is 1.00/2.4 ≈ 0.42 USD per million"
    assert round(1.00 / 2.4, 2) == 0.42 and round(1.00 / 2.4 / 0.3, 2) == 1.39


# Module 7's assumed hosted prices, as §11 quotes them.
def test_hosted_api(cost):
    assert cost["api_cost_per_request_uncached"] == pytest.approx(0.0024, rel=1e-12)
    assert cost["api_cost_per_day_uncached"] == pytest.approx(4.80, rel=1e-12)
    assert cost["api_cost_per_request"] == pytest.approx(0.00186, rel=1e-12)
    assert cost["api_cost_per_day"] == pytest.approx(3.72, rel=1e-12)
    assert round(cost["api_break_even_requests_per_day_uncached"], -2) == 10_000
    assert round(cost["api_break_even_requests_per_day"], -2) == 12_900
    assert cost["api_break_even_within_capacity"]
    assert cost["api_input_share"] + cost["api_output_share"] == pytest.approx(1.0)
    assert cost["api_cache_hit_share"] == 0.75
    assert cost["api_cost_per_month"] == pytest.approx(3.72 * 30.4375)


def test_owned_card(cost):
    assert round(cost["owned_depreciation_per_hour"], 3) == 0.076
    assert cost["owned_energy_cost_per_hour"] == pytest.approx(0.09)
    assert round(cost["full_load_tokens_per_s"]) == 665
    assert round(cost["energy_per_token"], 2) == 0.68
    assert cost["owned_cost_per_hour"] == pytest.approx(
        cost["owned_depreciation_per_hour"] + cost["owned_energy_cost_per_hour"])


def test_decode_throughput_is_the_default(host, write_scenario):
    path = write_scenario(f'extends = "{COST.as_posix()}"\n[pricing]\nthroughput = "decode"\n')
    r = infermodel.evaluate(path)
    base = infermodel.evaluate(BASE)
    assert r["busy_tokens_per_s"] == r["tokens_per_s_total"]
    assert r["cost_per_million_output_tokens"] == pytest.approx(base["cost_per_million_output_tokens"])
    assert r["energy_per_token"] == pytest.approx(450 / r["tokens_per_s_total"])


def test_without_a_pricing_table_the_base_cost_is_unchanged(host):
    base = infermodel.evaluate(BASE)
    assert "busy_tokens_per_s" not in base and "full_load_tokens_per_s" not in base
    assert base.graph["cost_per_million_output_tokens"].history[-1].plugin == "physics"


def test_cached_input_follows_the_prefix_cache_lever(host, write_scenario):
    path = write_scenario(f"""
extends = "{PREFIX.as_posix()}"
[workload]
requests_per_day = 2000
[pricing]
api_input_per_million = 0.20
api_cached_input_per_million = 0.02
api_output_per_million = 0.80
[levers.prefix_cache]
hit_rate = 0.5
""")
    r = infermodel.evaluate(path)
    assert r["api_cached_input_tokens"] == 1500
    assert r["api_cost_per_request"] == pytest.approx((2500 * 0.2 + 1500 * 0.02 + 2000 * 0.8) / 1e6)
    # prefix reuse also shortens the prefill that full-load accounting charges
    assert r["full_load_prefill_seconds"] == pytest.approx(r["ttft"])


def test_cached_price_defaults_to_the_fresh_price(host, write_scenario):
    text = COST.read_text().replace("extends = \"", f"extends = \"{SCENARIOS.as_posix()}/")
    path = write_scenario("\n".join(line for line in text.splitlines()
                                    if not line.startswith("api_cached_input_per_million")))
    r = infermodel.evaluate(path)
    assert r["api_cached_input_price"] == r["api_input_price"]
    assert r["api_cost_per_request"] == pytest.approx(r["api_cost_per_request_uncached"])


@settings(max_examples=25, deadline=None)
@given(per_day=st.floats(1.0, 1e6), utilisation=st.floats(0.01, 1.0))
def test_identities(per_day, utilisation):
    from infermodel.host import PluginHost, set_host

    set_host(PluginHost())
    try:
        r = infermodel.evaluate(COST, {"workload.requests_per_day": per_day,
                                       "pricing.utilisation": utilisation})
    finally:
        set_host(None)
    # an always-on card divided over the day's requests
    assert r["always_on_cost_per_request"] * per_day == pytest.approx(24.0, rel=1e-9)
    # the API bill equals the always-on rent exactly at the break-even volume
    assert r["api_cost_per_request"] * r["api_break_even_requests_per_day"] == pytest.approx(24.0)
    assert r["cost_per_million_output_tokens"] * utilisation == pytest.approx(
        r["cost_per_million_output_tokens_busy"], rel=1e-12)
    assert bool(r["volume_within_capacity"]) == (per_day <= r["capacity_requests_per_day"])


@pytest.mark.parametrize("sets, needle", [
    (["pricing.depreciation_years=0"], "pricing.depreciation_years"),
    (["pricing.api_output_per_million=\"USD 0.80/h\""], "pricing.api_output_per_million"),
    (["pricing.api_cached_input_tokens=5000"], "exceed the prompt of 4,000 tokens"),
    (["pricing.throughput=\"busy\""], "expected one of 'decode', 'full_load'"),
    (["pricing.purchase_price=\"USD 2000\"", "pricing.depreciation_years=-1"], "depreciation_years"),
])
def test_mistakes_are_reported_without_traceback(host, capsys, sets, needle):
    argv = ["run", str(COST)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_missing_companions_are_reported(host, write_scenario, capsys):
    path = write_scenario(f"""
extends = "{BASE.as_posix()}"
[pricing]
api_input_per_million = 0.2
purchase_price = "USD 2000"
electricity_price = 0.2
""")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "api_output_per_million is missing" in err
    assert "depreciation period" in err
    assert "power draw" in err
