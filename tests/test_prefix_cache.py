"""The prefix-caching lever: Module 10 §11 golden figures, block boundaries, hit-rate
edge cases and the prefix-longer-than-prompt error.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

IDEAL = SCENARIOS / "prefix-module10-case.toml"
PAGED = SCENARIOS / "prefix-module10-paged.toml"
BASE = SCENARIOS / "case-study-24gb.toml"


# Module 10: Inference and serving, §11 "Separate quiet-request latency from loaded
# throughput": a cold 4,000-token prompt takes about 0.923 s, a warm-prefix prompt
# about 0.241 s in the ideal model.
def test_warm_prefix_ttft_module10(host):
    r = infermodel.evaluate(IDEAL)
    assert round(r["prefix_ttft_cold"], 3) == 0.923
    assert round(r["prefix_ttft_warm"], 3) == 0.241
    assert r["ttft"] == pytest.approx(r["prefix_ttft_warm"], rel=1e-12)  # every request hits
    assert r["prefix_effective_prefill_tokens"] == 1000


# Module 10 §11 "Budget memory at the accepted maximum length": 18 full-length bf16
# requests fit in 16 GB; sharing the 3,000-token prefix permits about 35.
@pytest.mark.parametrize("path", [IDEAL, PAGED])
def test_sharing_the_prefix_fits_35_requests_instead_of_18(host, path):
    base = infermodel.evaluate(BASE)
    r = infermodel.evaluate(path)
    assert base["max_sequences"] == 18
    assert r["max_sequences"] == 35
    assert r["kv_budget_bytes"] == pytest.approx(16e9)


def test_only_whole_blocks_are_shared_and_skipped(host):
    r = infermodel.evaluate(PAGED)
    assert r["prefix_block_aligned_tokens"] == 2992  # 187 whole 16-token blocks
    assert r["prefix_reused_tokens"] == 2992
    assert r["prefix_shared_bytes"] == 2992 * r["kv_bytes_per_token"]
    assert r["prefix_private_tokens_per_sequence"] == 6000 - 2992
    ideal = infermodel.evaluate(IDEAL)
    assert ideal["prefix_ttft_warm"] < r["prefix_ttft_warm"] < ideal["prefix_ttft_cold"]
    assert round(r["prefix_ttft_warm"], 3) == 0.243


def test_warm_prefill_counts_the_new_tokens_attending_to_the_whole_prompt(host):
    r = infermodel.evaluate(IDEAL)
    n, p = 4000, 3000
    flops = 2 * r["params_matmul"] * (n - p) + 2 * r["layers"] * r["query_width"] * (n * n - p * p)
    assert r["prefill_flops"] - r["prefix_saved_prefill_flops"] == pytest.approx(flops, rel=1e-12)
    assert r["prefix_ttft_warm"] == pytest.approx(flops / r["flops_effective_prefill"], rel=1e-12)


def test_decode_traffic_is_not_reduced(host):
    # storage sharing and traffic reuse are kept separate: every query still reads the prefix
    base = infermodel.evaluate(BASE)
    r = infermodel.evaluate(IDEAL)
    for name in ("decode_bytes", "tpot", "tokens_per_s_total"):
        assert r[name] == pytest.approx(base[name], rel=1e-12)


def test_hit_rate_zero_is_the_cold_case(host):
    base = infermodel.evaluate(BASE)
    r = infermodel.evaluate(PAGED, {"levers.prefix_cache.hit_rate": 0.0})
    for name in ("ttft", "prefill_time", "max_sequences", "kv_bytes_total", "memory_required"):
        assert r[name] == pytest.approx(base[name], rel=1e-12), name
    assert r["prefix_shared_bytes"] == 0 and r["prefix_cached_input_tokens"] == 0
    assert not r.warnings


@settings(max_examples=25, deadline=None)
@given(h=st.floats(0.0, 1.0))
def test_expected_ttft_lies_between_warm_and_cold(h):
    from infermodel.host import PluginHost, set_host

    set_host(PluginHost())
    try:
        r = infermodel.evaluate(PAGED, {"levers.prefix_cache.hit_rate": h})
    finally:
        set_host(None)
    expected = h * r["prefix_ttft_warm"] + (1 - h) * r["prefix_ttft_cold"]
    assert r["ttft"] == pytest.approx(expected, rel=1e-12)
    assert r["prefix_ttft_warm"] - 1e-15 <= r["ttft"] <= r["prefix_ttft_cold"] + 1e-15
    # the resident prefix costs its blocks once; at low hit rates that can cost a sequence
    worst = math.floor((r["kv_budget_bytes"] - r["prefix_shared_bytes"])
                       / (r["kv_bytes_per_token"] * r["sequence_length"]))
    assert worst <= r["max_sequences"] <= 35


def test_prefix_as_long_as_the_prompt_still_computes_the_last_token(host):
    r = infermodel.evaluate(IDEAL, {"levers.prefix_cache.prefix_tokens": 4000})
    assert r["prefix_reused_tokens"] == 3999
    assert r["prefix_effective_prefill_tokens"] == 1
    assert 0 < r["prefix_ttft_warm"] < 0.01 and not r.warnings


def test_share_memory_off_keeps_capacity_but_saves_prefill(host):
    r = infermodel.evaluate(PAGED, {"levers.prefix_cache.share_memory": False})
    assert r["max_sequences"] == 18
    assert r["ttft"] < 0.25


def test_prefix_longer_than_the_prompt_is_an_error(host, capsys):
    status = main(["run", str(IDEAL), "--set", "levers.prefix_cache.prefix_tokens=5000"])
    err = capsys.readouterr().err
    assert status == 2
    assert "longer than the prompt of 4,000 tokens" in err and "prefix_tokens" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("setting, needle", [
    ("levers.prefix_cache.hit_rate=1.5", "not a share in [0, 1]"),
    ("levers.prefix_cache.block_tokens=0", "at least 1 token"),
    ("levers.prefix_cache.prefix_tokens=-1", "must not be negative"),
    ("levers.prefix_cache.hitrate=0.5", "did you mean 'hit_rate'"),
])
def test_bad_values_are_reported(host, capsys, setting, needle):
    assert main(["run", str(IDEAL), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_derivation_shows_the_lever(host):
    r = infermodel.evaluate(IDEAL)
    history = r.graph["prefill_time"].history
    assert history[-1].plugin == "prefix_cache" and history[-1].order == 400
    # Sharing reaches max_sequences through the base physics' shared and per-sequence parts.
    assert r.graph["kv_bytes_shared"].history[-1].plugin == "prefix_cache"
    assert r.graph["kv_bytes_per_sequence"].history[-1].plugin == "prefix_cache"
    text = str(infermodel.explain(r, "max_sequences"))
    assert "prefix_shared_bytes" in text and "replaced by: prefix_cache" in text
