"""Which limit binds (the ``limits`` plugin) and the cache measured against the weights
(the ``cache_ratios`` plugin), against figures computed by hand from the documents.
"""

from __future__ import annotations

import json

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel import hookimpl
from infermodel.cli import main
from infermodel.errors import PluginError

CASE = SCENARIOS / "case-study-24gb.toml"
LAB = SCENARIOS / "inference-lab-roofline.toml"

# Module 10 case (§11): W = 5.5 GB, kv = 2 · 36 layers · 8 heads · 128 · 2 B.
W = 5.5e9
KV = 2 * 36 * 8 * 128 * 2


def test_case_cache_per_token_is_the_documents():
    assert KV == 147_456


# ---------------------------------------------------------------------------------
# Which limit binds
# ---------------------------------------------------------------------------------


def test_module10_case_prefill_is_compute_bound_decode_memory_bound_batch_capacity(host):
    # Module 10 §11: a 4,000-token prefill at 50 % of 165 TFLOP/s takes about 0.923 s of
    # compute; its bytes, W + 4,000·(kv + 4·d·layers), take under 10 ms at 1 TB/s.
    prefill_memory = (W + 4000 * (KV + 4 * 4096 * 36)) / 1e12
    assert prefill_memory < 0.01 < 0.923
    # Decode at context 5,000: 6.23728 GB at 1 TB/s = 6.24 ms; compute is
    # 2·8,927,875,072 + 4·36·4,096·5,000 FLOP at 165 TFLOP/s, about 0.12 ms.
    decode_compute = (2 * 8_927_875_072 + 4 * 36 * 4096 * 5000) / 165e12
    assert decode_compute < 6.23728e9 / 1e12
    result = infermodel.evaluate(CASE)
    choice = result.graph.choice
    assert choice("prefill_limit", result["prefill_limit"]) == "compute"
    assert choice("decode_limit", result["decode_limit"]) == "memory bandwidth"
    # 18 full-length sequences fill the 16 GB budget, and a cache-dominated step never
    # turns compute-bound (critical_batch = ∞): capacity binds.
    assert result["max_sequences"] == 18 and result["critical_batch"] == float("inf")
    assert choice("batch_limit", result["batch_limit"]) == "memory capacity"


def test_a_tiny_model_on_the_inference_lab_convention_is_bound_by_the_fixed_step_time(host):
    # Inference lab, 'Two costs for one answer': t0 = 0.3 ms per step. SmolLM2-135M
    # (Module 10 Lab 4/5's model, 134,515,008 parameters, tied) reads W = 269,030,016 B:
    # 80 µs at 3.35 TB/s, so the fixed step time dominates a batch-1 decode step.
    params = 30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) + 61 * 576 + 49152 * 576
    assert params == 134_515_008
    kv = 2 * 30 * 192 * 2
    memory = (2 * params + 160 * kv) / 3.35e12
    assert memory < 0.3e-3
    result = infermodel.evaluate(LAB, {"model.preset": "smollm2-135m", "workload.batch": 1,
                                       "workload.prompt_tokens": 128,
                                       "workload.output_tokens": 64})
    assert result["decode_time_memory"] == pytest.approx(memory, rel=1e-12)
    assert result.graph.choice("decode_limit", result["decode_limit"]) == "fixed step time"


def test_the_limits_line_sits_under_the_summary_and_explain_names_the_outcome(host, capsys):
    assert main(["run", str(CASE)]) == 0
    out = capsys.readouterr().out
    assert "limits: prefill compute · decode memory bandwidth · batch memory capacity" in out
    assert main(["explain", str(CASE), "decode_limit", "--depth", "0"]) == 0
    assert "decode_limit = 0 (memory bandwidth)" in capsys.readouterr().out
    assert main(["run", str(CASE), "--format", "json", "--quantities", "batch_limit"]) == 0
    entry = json.loads(capsys.readouterr().out)["quantities"]["batch_limit"]
    assert entry["value"] == 5 and entry["choice"] == "memory capacity"


def test_a_lever_that_adds_step_time_can_bind(host):
    # A collective as large as the roofline term: the step is the larger of the two.
    from sympy import Float

    from infermodel import S
    from infermodel_builtins.limits import ADDED, FIXED, MEMORY, step_limit

    # memory 1 s, compute 0.5 s, a step of 3 s + t0: 2 s added by a lever.
    limit = step_limit(Float(1.0), Float(0.5), Float(3.0) + S.t0)
    assert limit.subs(S.t0, 0) == ADDED and limit.subs(S.t0, 5) == FIXED
    assert step_limit(Float(1.0), Float(0.5), Float(1.0) + S.t0).subs(S.t0, 0) == MEMORY


class _Outcomes:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("coin", 1.0, unit="1", description="a two-sided outcome")

    @hookimpl
    def infermodel_register_headlines(self, register):
        register("limits", "coin", label="coin", choices=("heads", "tails"))


def test_infermodel_register_headlines_choices_name_the_outcome_of_a_value(register_plugin):
    from infermodel.printing import limits_line

    register_plugin(_Outcomes(), "outcomes")
    result = infermodel.evaluate(CASE)
    assert result.graph.choice("coin", 1.0) == "tails"
    assert result.graph.choice("coin", 0.5) is None and result.graph.choice("coin", 7) is None
    assert "coin tails" in limits_line(result)


class _BadChoices:
    @hookimpl
    def infermodel_register_headlines(self, register):
        register("limits", "tpot_choice", choices="fast")


def test_infermodel_register_headlines_choices_must_be_strings(register_plugin, host):
    register_plugin(_BadChoices(), "bad")
    with pytest.raises(PluginError, match="choices must be a non-empty sequence"):
        _ = host.registries


# ---------------------------------------------------------------------------------
# The cache against the weights
# ---------------------------------------------------------------------------------


def test_module10_parity_context_and_the_32k_request(host):
    # Module 10 §11 'Budget memory at the accepted maximum length': a 6,000-token
    # request holds 0.884736 GB; "a 32,000-token request needs 4.72 GB", close to the
    # 5.5 GB of weights. One sequence's cache equals the weights at W / kv tokens.
    result = infermodel.evaluate(CASE)
    assert result["kv_weight_parity_context"] == pytest.approx(W / KV, rel=1e-12)
    assert round(result["kv_weight_parity_context"]) == 37_299
    assert result["kv_sequence_weight_ratio"] == pytest.approx(0.884736e9 / W, rel=1e-12)
    long = infermodel.evaluate(CASE, {"workload.sequence_length": 32000})
    assert round(long["kv_bytes_per_sequence"] / 1e9, 2) == 4.72
    assert long["kv_sequence_weight_ratio"] == pytest.approx(32000 * KV / W, rel=1e-12)


def test_module10_cache_read_per_step_and_its_share(host):
    # Module 10 §11: at mean context 5,000 weight plus cache traffic is 6.23728 GB, so
    # the cache read per step is 5,000 · 147,456 B = 0.73728 GB; 18 sequences read
    # 13.27104 GB (the 18.77 ms step at 1 TB/s).
    one = infermodel.evaluate(CASE)
    assert one["decode_cache_read_bytes"] == pytest.approx(5000 * KV, rel=1e-12)
    assert one["decode_cache_share"] == pytest.approx(0.73728 / 6.23728, rel=1e-9)
    full = infermodel.evaluate(CASE, {"workload.batch": 18})
    assert full["decode_cache_read_bytes"] == pytest.approx(13.27104e9, rel=1e-12)
    assert round((W + full["decode_cache_read_bytes"]) / 1e12 * 1e3, 2) == 18.77
    assert full["kv_batch_weight_ratio"] == pytest.approx(18 * 6000 * KV / W, rel=1e-12)


def test_llama_31_8b_cache_reaches_its_weights_near_its_128k_window(host):
    # Llama 3.1 8B (its config): 8,030,261,248 parameters at 2 bytes; kv = 2·32·8·128·2.
    params = (32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 65 * 4096
              + 2 * 128256 * 4096)
    assert params == 8_030_261_248
    result = infermodel.evaluate(LAB)
    assert result["kv_weight_parity_context"] == pytest.approx(2 * params / 131_072, rel=1e-12)
    assert 120_000 < result["kv_weight_parity_context"] < 131_072


def test_a_windowed_model_warns_that_parity_assumes_linear_growth(host):
    result = infermodel.evaluate(SCENARIOS / "gemma-3-27b-128k-local-layers.toml")
    warned = [w for w in result.warnings if w.quantity == "kv_weight_parity_context"]
    assert warned and "reaches the weights later" in str(warned[0])
    # A fixed state (Qwen3-Next's linear-attention layers) holds its size from the first
    # token: one sequence's cache is above the linear figure, so parity comes sooner.
    hybrid = infermodel.evaluate(SCENARIOS / "qwen3-next-80b-hybrid-state.toml")
    assert hybrid["kv_bytes_per_sequence"] > (hybrid["kv_bytes_per_token"]
                                              * hybrid["sequence_length"])
    warned = [w for w in hybrid.warnings if w.quantity == "kv_weight_parity_context"]
    assert warned and "reaches the weights sooner" in str(warned[0])
    assert not [w for w in infermodel.evaluate(CASE).warnings
                if w.quantity == "kv_weight_parity_context"]
