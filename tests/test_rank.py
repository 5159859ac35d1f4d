"""``infermodel rank``: every lever at its typical setting, ranked by the cost per million
tokens it saves; and the hook through which plugins declare those settings.
"""

from __future__ import annotations

import json

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel import hookimpl
from infermodel.cli import main
from infermodel.cli.rank import rank
from infermodel.errors import PluginError

COST = SCENARIOS / "cost-module10-case.toml"
KV = 147_456
N = 8_927_875_072


def _seconds(batch=1, n=4000, m=2000):
    """Module 10 §11's roofline: a batch's prefill plus m − 1 steps, per request."""
    prefill = batch * (2 * N * n + 2 * 36 * 4096 * n * n) / (0.5 * 165e12)
    step = (5.5e9 + batch * (n + m / 2) * KV) / 1e12
    return (prefill + (m - 1) * step) / batch


def _per_million(seconds, tokens=6000):
    return seconds / 3600 / tokens * 1e6  # USD 1.00 per card-hour


@pytest.fixture
def ranking(host):
    return rank(infermodel.load_scenario(COST))


def test_batch_to_capacity_leads_with_module10s_three_seconds_a_request(ranking):
    # Module 10 §11: at full load a request costs 0.923 s of prefill plus its share of
    # the 18-sequence batch, about 3.01 s ("2000 × 3.01 / 3600 = 1.67 busy GPU-hours").
    assert round(_seconds(18), 2) == 3.01
    top = ranking.rows[0]
    assert top.name == "batch to capacity" and top.overrides == {"workload.batch": 18}
    assert ranking.base_cost == pytest.approx(_per_million(_seconds(1)), rel=1e-9)
    assert top.cost == pytest.approx(_per_million(_seconds(18)), rel=1e-9)
    assert top.saving == pytest.approx(ranking.base_cost - top.cost, rel=1e-12)


def test_each_lever_saves_what_its_setting_says(ranking):
    rows = {r.name: r for r in ranking.rows}
    base = ranking.base_cost
    assert rows["route to a smaller model"].cost == pytest.approx(base * (0.7 + 0.3 * 0.25))
    assert rows["cascade from a smaller model"].cost == pytest.approx(base * (0.25 + 0.2))
    # Shorter requests: the same requests at 3,200 + 1,600 tokens, per million of the
    # 6,000 tokens they were written with.
    assert rows["shorter prompts and answers"].cost == pytest.approx(
        _per_million(_seconds(1, 3200, 1600)), rel=1e-9)
    # The case fixes its artifact at 5.5 GB: a weight format has nothing to change.
    assert rows["int4 weights"].status == "not applicable"
    savings = [r.saving for r in ranking.rows if r.status == "applied"]
    assert savings == sorted(savings, reverse=True)


def test_rank_prints_the_table_json_and_markdown(host, capsys):
    assert main(["rank", str(COST)]) == 0
    out = capsys.readouterr().out
    assert "batch to capacity" in out and "as written" in out and "not applicable" in out
    assert main(["rank", str(COST), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["metric"] == "cost_per_million_tokens" and data["rows"][0]["name"] == "batch to capacity"
    assert {"cost", "saving", "saving_share", "overrides", "status", "tpot", "ttft"} <= set(data["rows"][0])
    assert main(["rank", str(COST), "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("**cost-module10-case**")


def test_rank_without_a_price_is_one_mistake_with_a_suggestion(host, capsys, write_scenario):
    path = write_scenario("""
[scenario]
name = "unpriced"
[model]
preset = "module10-case"
[hardware]
memory = "24 GB"
bandwidth = "1 TB/s"
flops = "165 TFLOP/s"
[workload]
prompt_tokens = 4000
output_tokens = 2000
""")
    assert main(["rank", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "hardware.price_per_hour" in err and "--set" in err


class _Doubler:
    @hookimpl
    def infermodel_register_typical_settings(self, register):
        register("double the batch", lambda result: {"workload.batch": 2 * int(result["batch"])},
                 description="twice the sequences", reference="a test")
        register("impossible batch", lambda result: {"workload.batch": -1},
                 description="a setting the scenario refuses")
        register("nothing to do", lambda result: None, description="never applies",
                 lever="nope_lever")


def test_infermodel_register_typical_settings_adds_a_ranked_row(register_plugin):
    register_plugin(_Doubler(), "doubler")
    rows = {r.name: r for r in rank(infermodel.load_scenario(COST)).rows}
    assert rows["double the batch"].cost == pytest.approx(_per_million(_seconds(2)), rel=1e-9)
    assert rows["double the batch"].plugin == "doubler"
    assert rows["impossible batch"].status == "rejected"
    assert "workload.batch" in rows["impossible batch"].message or rows["impossible batch"].message
    assert rows["nothing to do"].status == "not applicable"


class _Clash:
    @hookimpl
    def infermodel_register_typical_settings(self, register):
        register("batch to capacity", lambda result: None, description="a second one")


def test_infermodel_register_typical_settings_twice_is_an_error_naming_both(register_plugin, host):
    register_plugin(_Clash(), "clash")
    with pytest.raises(PluginError, match="'batch to capacity' is registered by both") as caught:
        _ = host.registries
    assert "'clash'" in str(caught.value) and "'batching'" in str(caught.value)


class _Broken:
    @hookimpl
    def infermodel_register_typical_settings(self, register):
        register("broken", lambda result: 1 / 0, description="raises")
        register("wrong", lambda result: ["workload.batch", 2], description="a list")


@pytest.mark.parametrize("name", ["broken", "wrong"])
def test_infermodel_register_typical_settings_failures_name_the_plugin(register_plugin, host,
                                                                        name):
    register_plugin(_Broken(), "broken_plugin")
    from infermodel.cli.rank import _apply

    info = host.registries.typical_settings[name]
    with pytest.raises(PluginError, match="plugin 'broken_plugin': typical setting"):
        _apply(info, infermodel.evaluate(COST))


def test_infermodel_register_typical_settings_checks_its_arguments(register_plugin, host):
    class Nameless:
        @hookimpl
        def infermodel_register_typical_settings(self, register):
            register("", lambda result: None, description="x")

    register_plugin(Nameless(), "nameless")
    with pytest.raises(PluginError, match="non-empty name"):
        _ = host.registries
