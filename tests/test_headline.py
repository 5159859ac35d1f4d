"""A planner's answer at a glance: one request's TTFT, the whole bill, the summary."""

from __future__ import annotations

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

CASE = SCENARIOS / "case-study-24gb.toml"
COST = SCENARIOS / "cost-module10-case.toml"
PREFIX = SCENARIOS / "prefix-module10-case.toml"


def test_ttft_is_one_request_and_ttft_batch_is_the_batch_prefilled_together():
    # Module 10 §1 'Estimate the two times': one 4,000-token prompt is compute-bound,
    # 2·N_matmul·n + 2·L·d_q·n² FLOPs at 165 TFLOP/s × 0.5 MFU.
    one = infermodel.evaluate(CASE)
    twenty = infermodel.evaluate(CASE, {"workload.batch": 20})
    n, flops = 4000, 82.5e12
    by_hand = (2 * one["params_matmul"] * n + 2 * 36 * 4096 * n**2) / flops
    assert one["ttft"] == pytest.approx(by_hand, rel=1e-12)
    assert round(one["ttft"], 3) == 0.923
    # one request's TTFT does not grow with the batch; the batch's prefill does
    assert twenty["ttft"] == pytest.approx(one["ttft"], rel=1e-12)
    assert twenty["ttft_batch"] == pytest.approx(20 * by_hand, rel=1e-12)
    assert one["ttft_batch"] == one["ttft"]  # at batch 1 the two are the same figure


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_ttft_equals_the_batch_prefill_of_the_same_scenario_at_batch_one(batch):
    # levers' changes to prefill (here a cached prefix) reach the one-request figure too
    at_batch = infermodel.evaluate(PREFIX, {"workload.batch": batch})
    alone = infermodel.evaluate(PREFIX, {"workload.batch": 1})
    assert at_batch["ttft"] == pytest.approx(alone["ttft_batch"], rel=1e-12)
    assert round(at_batch["ttft"], 3) == 0.241  # Module 10 §11: a warm prefix, about 0.241 s


def test_ttft_derivation_shows_the_held_batch():
    result = infermodel.evaluate(CASE, {"workload.batch": 8})
    text = result.explain("ttft").text()
    assert "ttft = prefill_time_at_batch_1" in text
    assert "(with batch = 1)" in text


def test_whole_bill_charges_prefill_and_counts_every_token():
    r = infermodel.evaluate(CASE, {"workload.batch": 18})
    seconds = (r["ttft_batch"] + 1999 * r["tpot"]) / 18
    assert r["device_seconds_per_request"] == pytest.approx(seconds, rel=1e-12)
    assert r["cost_per_million_tokens"] == pytest.approx(seconds / 3600 / 6000 * 1e6, rel=1e-12)
    # decode-only output pricing is dearer per token (it counts output tokens only)
    assert r["cost_per_million_output_tokens"] > r["cost_per_million_tokens"]


def test_api_comparison_in_the_same_units():
    # Module 10 §11 (Module 7's prices): USD 0.00186 per request with the 3,000-token
    # prefix billed as cached, over 6,000 tokens.
    r = infermodel.evaluate(COST)
    assert r["api_cost_per_million_tokens"] == pytest.approx(
        (1000 * 0.20 + 3000 * 0.02 + 2000 * 0.80) / 6000, rel=1e-12)


def test_summary_names_its_accounting_and_shows_the_api_beside_it(capsys):
    assert main(["run", str(COST)]) == 0
    out = capsys.readouterr().out
    assert "per 1M output tokens" in out and "per 1M tokens in + out (prefill paid)" in out
    assert "hosted API per 1M tokens, input + output" in out
    assert len(out.splitlines()) <= 40


def test_quantities_option_still_selects_rows(capsys):
    assert main(["run", str(CASE), "--quantities", "ttft,tpot"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[4:] if line.strip()]
    assert rows == ["ttft", "tpot"]


def test_sweep_table_marks_the_rows_that_do_not_fit(capsys):
    # 24 GB card, 5.5 GB weights, 2.5 GB reserve, 884.7 MB per sequence: 18 fit, 24 do not
    assert main(["sweep", str(CASE), "--over", "workload.batch=1,18,24", "--quantities", "tpot"]) == 0
    rows = capsys.readouterr().out.splitlines()
    marked = [row.split()[0] for row in rows if row.endswith("✗ does not fit")]
    assert marked == ["24"]


def test_notebook_objects_table_quantity_and_html_headline_first():
    result = infermodel.evaluate(CASE)
    table = result.table(["tpot", "ttft"])
    assert "tpot" in str(table) and "\n" in str(table)
    assert "<table>" in table._repr_html_() and "| `tpot` |" in table._repr_markdown_()
    tpot = result.quantity("tpot")
    assert tpot.value == result["tpot"] == pytest.approx(0.00623728)
    assert tpot.unit == "s" and tpot.changed_by == () and float(tpot) == tpot.value
    assert str(tpot).startswith("tpot = 6.237 ms")
    page = result._repr_html_()
    assert page.index("headline") < page.index("every quantity")
    assert "<td style='text-align:left'>time to first token, one request</td>" in page


def test_search_marks_choices_that_do_not_fit_when_no_constraint_asks(capsys):
    # maximising throughput without a fits constraint: 24 and 32 sequences win on
    # paper but do not fit the 24 GB card (18 do)
    assert main(["search", str(CASE), "--no-table", "--over", "workload.batch=1,16,24,32",
                 "--maximise", "tokens_per_s_total"]) == 0
    lines = capsys.readouterr().out.splitlines()
    marked = [line for line in lines if line.endswith("✗ does not fit")]
    assert len(marked) == 2 and marked[0].startswith("best: workload.batch = 32")
    assert not any("= 16" in line for line in marked)
