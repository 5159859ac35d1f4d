"""``infermodel compare``: values, differences and ratios of two or more columns, against
ratios the documents state, computed by hand.
"""

from __future__ import annotations

import json

import pytest

from conftest import SCENARIOS
from infermodel.cli import main
from infermodel.cli.compare import ratio

CASE = SCENARIOS / "case-study-24gb.toml"
LAB = SCENARIOS / "inference-lab-roofline.toml"


def _json(capsys, argv):
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_32k_request_needs_more_than_five_ordinary_ones(host, capsys):
    # Module 10 §11: "A 32,000-token request needs 4.72 GB of cache, more than five
    # ordinary requests" of 6,000 tokens (0.884736 GB): 32,000 / 6,000 = 5.33.
    data = _json(capsys, ["compare", str(CASE), "--against", "workload.sequence_length=32000",
                          "--quantities", "kv_bytes_per_sequence,max_sequences"])
    row = data["quantities"]["kv_bytes_per_sequence"]
    assert row["values"] == [884_736_000, 4_718_592_000]
    assert row["ratios"][1] == pytest.approx(32000 / 6000, rel=1e-12)
    assert row["differences"] == [None, 4_718_592_000 - 884_736_000]
    assert data["quantities"]["max_sequences"]["values"] == [18, 3]


def test_a_one_byte_cache_doubles_the_requests_that_fit(host, capsys):
    # Module 10 §11: "An ideal one-byte cache permits 36" where bf16 permits 18.
    data = _json(capsys, ["compare", str(CASE), "--against",
                          'levers.quantization.kv_cache={ bits = 8, granularity = "none" }',
                          "--quantities", "kv_bytes_per_token,max_sequences"])
    assert data["quantities"]["kv_bytes_per_token"]["values"] == [147_456, 73_728]
    assert data["quantities"]["max_sequences"]["values"] == [18, 36]
    assert data["quantities"]["max_sequences"]["ratios"][1] == 2


def test_a_quote_at_batch_256_and_1k_is_not_a_price_for_32_users_at_8k(host, capsys):
    # Inference lab, 'What it costs to keep it running' ("Watch out"): Llama-3.1-8B on
    # one H100 SXM with the lab's convention (peak rates, t0 = 0.3 ms, the whole artifact
    # read each step). Both batches read the same cache bytes (256 · 1,024 = 32 · 8,192
    # positions) and both steps are bandwidth-bound, so the steps are equal and a token
    # for 32 users at 8k costs 256 / 32 = 8 times the quote.
    params = (32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 65 * 4096
              + 2 * 128256 * 4096)
    weights, matmul, kv = 2 * params, params - 128256 * 4096, 131_072

    def per_token(batch, length):
        step = max((weights + batch * length * kv) / 3.35e12,
                   batch * (2 * matmul + 4 * 32 * 4096 * length) / 989e12) + 0.3e-3
        return step / batch

    expected = per_token(32, 8192) / per_token(256, 1024)
    data = _json(capsys, ["compare", str(LAB), "--set", "workload.batch=256", "--set",
                          "workload.context=1024", "--set", "workload.sequence_length=1024",
                          "--against", "workload.batch=32", "workload.context=8192",
                          "workload.sequence_length=8192",
                          "--quantities", "cost_per_million_output_tokens,tpot"])
    row = data["quantities"]["cost_per_million_output_tokens"]
    assert row["ratios"][1] == pytest.approx(expected, rel=1e-9)
    assert row["ratios"][1] == pytest.approx(8.0, rel=1e-12)
    assert data["columns"][1]["overrides"] == ["workload.batch=32", "workload.context=8192",
                                               "workload.sequence_length=8192"]


def test_two_files_side_by_side_and_the_headline_default(host, capsys):
    bf16, int4 = SCENARIOS / "quant-bf16.toml", SCENARIOS / "quant-int4.toml"
    assert main(["compare", str(bf16), str(int4)]) == 0
    out = capsys.readouterr().out
    assert "quant-bf16" in out and "quant-int4" in out and "weight_bytes" in out and "×" in out
    data = _json(capsys, ["compare", str(bf16), str(int4)])
    assert [c["label"] for c in data["columns"]] == ["quant-bf16", "quant-int4"]
    # A limit names an outcome: it has no difference or ratio.
    assert data["quantities"]["decode_limit"]["ratios"] == [None, None]
    # A lever's headline that only one column has is shown as absent in the other.
    data = _json(capsys, ["compare", str(CASE), str(SCENARIOS / "prefix-module10-case.toml")])
    hits = data["quantities"]["prefix_hit_rate"]
    assert hits["values"][0] is None and hits["shown"][0] == "—" and hits["ratios"] == [None, None]
    assert main(["compare", str(bf16), str(int4), "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("| quantity |")


def test_one_column_is_one_clear_mistake(host, capsys):
    assert main(["compare", str(CASE)]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "two or more columns" in err


def test_an_unknown_quantity_suggests_a_close_one(host, capsys):
    assert main(["compare", str(CASE), "--against", "workload.batch=2", "--quantities", "tpott"]) == 2
    assert "did you mean 'tpot'" in capsys.readouterr().err


def test_ratios_of_zero_and_infinity_are_defined():
    assert ratio(0.0, 0.0) == 1.0 and ratio(-1.0, 0.0) == float("-inf")
    assert ratio(float("inf"), float("inf")) != ratio(float("inf"), float("inf"))  # NaN
