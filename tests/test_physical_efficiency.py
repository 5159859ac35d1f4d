"""The physical efficiency model: bounded, shape-aware terms of a step, the collectives by
message size, the engine's scheduler defaults, and the intervals and warnings an engine
preset's fit gives a scenario.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

# Priors and bounds of the model (plugins/infermodel_builtins/efficiency_parameters.py).
BOUNDS = {"bandwidth_fraction": (0.5, 0.92), "expert_bandwidth_fraction": (0.2, 0.92),
          "gemm_fraction": (0.3, 0.85), "attention_fraction": (0.15, 0.75),
          "dequant_fraction": (0.3, 1.0), "kernel_time": (0.5e-6, 10e-6),
          "launch_time": (2e-6, 40e-6), "step_overhead": (0.0, 8e-3),
          "sequence_overhead": (0.0, 60e-6), "collective_latency": (1e-6, 50e-6)}


def bare(write_scenario, model="llama-3.1-8b", hardware="h100-sxm", batch=1, efficiency="",
         levers=""):
    return write_scenario(
        f'[model]\npreset = "{model}"\n[hardware]\npreset = "{hardware}"\n'
        f"[workload]\nbatch = {batch}\nprompt_tokens = 1024\noutput_tokens = 256\n"
        f"[efficiency]\n{efficiency}\n{levers}")


# ---------------------------------------------------------------- which model, which values


def test_a_scenario_stating_no_efficiency_is_priced_physically(write_scenario):
    r = infermodel.evaluate(bare(write_scenario))
    assert r["mbu"] == r["bandwidth_fraction"] <= 0.92
    assert r["prefill_mfu"] == r["gemm_fraction"] * r["gemm_format_fraction"] <= 0.85
    # t0 is a decode step's fixed time: every kernel's latency and the engine's host work.
    assert r["t0"] == pytest.approx(r["kernels_per_step"] * r["kernel_time"] + r["step_overhead"]
                                    + r["sequence_overhead"] * r["batch"], rel=1e-12)


def test_a_stated_convention_keeps_the_fixed_model(write_scenario):
    r = infermodel.evaluate(bare(write_scenario, efficiency="prefill_mfu = 0.5"))
    assert "bandwidth_fraction" not in r and r["mbu"] == 1 and r["t0"] == 0
    assert "kernels_per_step" not in infermodel.evaluate(SCENARIOS / "case-study-24gb.toml")


def test_a_fixed_efficiency_under_a_stated_physical_model_is_replaced_with_a_warning(write_scenario):
    # The vllm preset states model = "physical": a prefill_mfu the scenario writes beside it
    # is replaced like the rest, and the result says so (it was silent).
    r = infermodel.evaluate(bare(write_scenario, efficiency='preset = "vllm"\nprefill_mfu = 0.5'))
    assert r["prefill_mfu"] == r["gemm_fraction"] * r["gemm_format_fraction"] != 0.5
    found = [w for w in r.warnings if w.quantity == "prefill_mfu"]
    assert len(found) == 1 and 'efficiency.model = "fixed"' in found[0].message
    plain = infermodel.evaluate(bare(write_scenario, efficiency='preset = "vllm"'))
    assert not [w for w in plain.warnings if w.quantity in ("prefill_mfu", "decode_mfu", "mbu", "t0")]


def test_parameters_are_the_engines_fitted_values_inside_their_bounds(write_scenario):
    import tomllib

    from infermodel_builtins.efficiency_parameters import PARAMETERS

    found = {p.name: (p.low, p.high) for p in PARAMETERS}
    assert sorted(found) == sorted(BOUNDS)
    for name, bound in BOUNDS.items():
        assert found[name] == pytest.approx(bound), name
    preset = tomllib.loads((SCENARIOS.parent / "plugins" / "infermodel_builtins" / "presets"
                            / "efficiency" / "sglang.toml").read_text())
    r = infermodel.evaluate(bare(write_scenario, efficiency='engine = "sglang"'))
    assert r["gemm_fraction"] == pytest.approx(preset["efficiency"]["gemm_fraction"])
    for name, (low, high) in BOUNDS.items():
        assert low <= r[name] <= high, name


def test_a_value_outside_its_physical_bound_is_refused(write_scenario, capsys):
    path = bare(write_scenario, efficiency="bandwidth_fraction = 0.97")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "efficiency.bandwidth_fraction" in err and "0.92" in err


# ---------------------------------------------------------------- the terms


def test_small_transfers_are_latency_bound(write_scenario):
    r = infermodel.evaluate(bare(write_scenario))
    # A kernel of s bytes streams at fraction · s / (s + s½), s½ = τ · BW · fraction.
    assert r["bandwidth_half_bytes"] == pytest.approx(
        r["kernel_time"] * r["card_bandwidth"] * r["bandwidth_fraction"], rel=1e-12)
    assert r["decode_time_gpu"] == pytest.approx(
        max(r["decode_time_weights"], r["decode_time_gemm"])
        + max(r["decode_time_cache"], r["decode_time_attention"]) + r["kernel_fixed_time"], rel=1e-12)


@pytest.mark.parametrize("batch,padded", [(1, 16), (3, 16), (16, 16), (17, 32)])
def test_gemm_rows_are_padded_to_tiles(write_scenario, batch, padded):
    r = infermodel.evaluate(bare(write_scenario, batch=batch))
    assert r["decode_gemm_padding"] == pytest.approx(padded / batch)
    assert r["decode_mfu"] == pytest.approx(r["gemm_fraction"] / r["decode_gemm_padding"])


def test_mxfp4_experts_without_fp4_are_read_at_fp4_and_computed_by_widening(write_scenario):
    path = write_scenario('[model]\npreset = "gpt-oss-120b"\n[hardware]\npreset = "h100-sxm"\n'
                          "[workload]\nprompt_tokens = 1024\noutput_tokens = 256\n")
    hopper = infermodel.evaluate(path)
    fixed = infermodel.evaluate(path, {"efficiency.model": "fixed"})
    assert hopper["weight_bytes"] == fixed["weight_bytes"]  # MXFP4 bytes either way
    assert hopper["gemm_format_fraction"] < 1  # the experts' products dequantise
    assert "mxfp4" in hopper.graph["gemm_format_fraction"].description
    blackwell = infermodel.evaluate(path, {"hardware.preset": "b200"})
    assert blackwell["gemm_format_fraction"] == 1 and blackwell["native_format_speedup"] > 1


def test_fp8_is_native_on_hopper_and_widened_on_ampere(write_scenario):
    levers = '[levers.quantization]\nlinear = "fp8-e4m3"\nactivations = "fp8"\n'
    hopper = infermodel.evaluate(bare(write_scenario, levers=levers))
    ampere = infermodel.evaluate(bare(write_scenario, hardware="a100-80gb", levers=levers))
    assert hopper["gemm_format_fraction"] == 1
    assert ampere["gemm_format_fraction"] == pytest.approx(ampere["dequant_fraction"])


def test_moe_decode_at_a_small_batch_has_a_cost_of_its_own(write_scenario):
    levers = "[levers.parallelism]\ntensor = 8\n"
    path = write_scenario('[model]\npreset = "deepseek-r1"\n[hardware]\npreset = "h200"\ncount = 8\n'
                          "[workload]\nbatch = 4\nprompt_tokens = 3200\noutput_tokens = 800\n"
                          f"[efficiency]\nengine = \"vllm\"\n{levers}")
    r = infermodel.evaluate(path)
    dense = infermodel.evaluate(bare(write_scenario, model="llama-3.1-70b", batch=4))
    # Latent attention and routed experts launch many more kernels than a dense layer.
    assert r["kernels_per_step"] / r["layers"] > 3 * dense["kernels_per_step"] / dense["layers"]
    # Each expert read gets T·k / E_read rows, padded to a whole tile.
    rows = 4 * 8 / r["experts_read_per_layer"]
    assert r["decode_expert_rows"] == pytest.approx(rows)
    assert r["decode_expert_padding"] == pytest.approx(16 * math.ceil(rows / 16) / rows)
    # The grouped products stream the experts at their own, lower share.
    assert r["expert_bandwidth_fraction"] <= r["bandwidth_fraction"]
    assert r["tpot"] > r["decode_time_memory"] + r["kernel_fixed_time"]


def test_graph_capture_and_eager_launches(write_scenario):
    path = bare(write_scenario, batch=8)
    captured = infermodel.evaluate(path)
    eager = infermodel.evaluate(path, {"efficiency.graph_max_batch": 0})
    assert captured["decode_graph_captured"] == 1 and eager["decode_graph_captured"] == 0
    assert eager["tpot"] == pytest.approx(
        max(eager["decode_time_gpu"], eager["launch_bound_time"]) + eager["host_time_decode"])
    assert eager["tpot"] >= captured["tpot"]


# ---------------------------------------------------------------- collectives


def test_collectives_are_one_shot_below_the_limit_and_ring_above(write_scenario):
    path = write_scenario('[model]\npreset = "llama-3.1-70b"\n[hardware]\npreset = "h100-sxm"\n'
                          "count = 8\n[workload]\nbatch = 1\nprompt_tokens = 1024\n"
                          "output_tokens = 256\n[levers.parallelism]\ntensor = 8\n")
    one = infermodel.evaluate(path)
    n, d = 8, 8192
    rate = one["parallel_link_bandwidth"] * one["collective_bandwidth_fraction"]
    size = d * 2
    oneshot = one["parallel_collective_latency"] + one["parallel_link_latency"] + (n - 1) * size / rate
    assert one["collective_oneshot_bytes"] == 256 * 1024
    assert one["parallel_allreduce_time"] == pytest.approx(oneshot, rel=1e-12)
    # SGLang-style batch 1 on 8 cards: the all-reduces are a small share of the step.
    assert one["parallel_decode_comm_time"] < 0.3 * one["tpot"]
    big = infermodel.evaluate(path, {"workload.batch": 64})
    size = 64 * d * 2
    ring = (big["parallel_collective_latency"] + 2 * (n - 1) * big["parallel_link_latency"]
            + 2 * (n - 1) / n * size / rate)
    assert big["parallel_allreduce_time"] == pytest.approx(ring, rel=1e-12)


def test_the_lab_scenarios_state_the_labs_efficiency_table():
    s = infermodel.load_scenario(SCENARIOS / "planner-70b-32-users.toml")
    assert s.lever("parallelism").communication == "efficiency"
    assert infermodel.evaluate(SCENARIOS / "planner-70b-32-users.toml")["parallel_efficiency"] == 0.8


# ---------------------------------------------------------------- the simulator prices the same


def test_the_simulators_decode_iteration_is_the_graphs_decode_step(write_scenario):
    from infermodel.simulator import CostModel

    for batch in (1, 7, 40):
        r = infermodel.evaluate(bare(write_scenario, batch=batch))
        cost = CostModel.from_quantities(r.values)
        context = int(r["context"])
        step = cost.iteration_time([context] * batch, [])
        assert step == pytest.approx(r["decode_step_time"], rel=1e-9), batch


def test_one_iteration_in_floats_is_the_vectorised_one_to_the_bit(write_scenario):
    from infermodel.simulator import CostModel

    r = infermodel.evaluate(bare(write_scenario, model="qwen1.5-moe-a2.7b", batch=8))
    cost = CostModel.from_quantities(r.values)
    rng = np.random.default_rng(0)
    for _ in range(200):
        positions = float(rng.integers(1, 9000))
        sequences = positions if rng.random() < 0.5 else float(rng.integers(1, positions + 1))
        args = [np.array([x]) for x in (positions, float(rng.integers(0, 10**7)),
                                        float(rng.integers(0, 10**6)), sequences)]
        one = cost.iteration_times(*args)
        two = cost.iteration_times(*[np.repeat(a, 2) for a in args])
        assert one[0] == two[0]


def test_engine_scheduler_defaults_cap_the_sequences(write_scenario):
    r = infermodel.evaluate(bare(write_scenario, model="smollm2-135m"))
    assert r["engine_max_sequences"] == 1024 and r["engine_chunk_tokens"] == 8192
    assert r["max_sequences"] == 1024  # the cache would hold far more
    small = infermodel.evaluate(bare(write_scenario, model="smollm2-135m", hardware="l4"))
    assert small["engine_max_sequences"] == 256 and small["engine_chunk_tokens"] == 2048



def test_a_scheduler_that_reads_new_requests_every_n_decode_steps_holds_them(write_scenario):
    # SGLang's --scheduler-recv-interval N: an arrival waits for the next read, (N − 1)/2
    # decode steps more on average than a read at every step; alone, the idle engine
    # reads it at once. Unstated, no hold is defined and nothing moves.
    path = bare(write_scenario, batch=16, efficiency='engine = "sglang"\nrecv_interval = 30')
    r = infermodel.evaluate(path)
    assert r["recv_interval"] == 30
    assert r["scheduler_recv_hold"] == pytest.approx(14.5 * r["decode_step_time"], rel=1e-12)
    alone = infermodel.evaluate(path, {"workload.batch": 1})
    assert alone["scheduler_recv_hold"] == 0.0
    plain = infermodel.evaluate(bare(write_scenario, batch=16, efficiency='engine = "sglang"'))
    assert "scheduler_recv_hold" not in plain.values
    assert (plain["ttft"], plain["tpot"]) == (r["ttft"], r["tpot"])
    every = infermodel.evaluate(path, {"efficiency.recv_interval": 1})
    assert every["scheduler_recv_hold"] == 0.0
    assert "scheduler_recv_interval" in r.explain("scheduler_recv_hold").text()
    assert not any("recv_interval" in str(w) for w in r.warnings)
    # Stated for an engine without the setting: priced, and warned.
    vllm = infermodel.evaluate(path, {"efficiency.engine": "vllm", "efficiency.recv_interval": 30})
    assert any("SGLang's --scheduler-recv-interval" in str(w) and "'vllm'" in str(w)
               for w in vllm.warnings)


def test_a_scheduler_that_waits_for_more_prompts_holds_them(write_scenario):
    # TensorRT-LLM's batch_wait_timeout_iters T: a wait opens with the first prompt, which
    # waits T iterations; the λT that arrive during it wait T/2 on average (λ arrivals per
    # iteration by Little's law at the batch). By hand at batch 32.
    path = bare(write_scenario, batch=32,
                efficiency='engine = "trtllm"\nbatch_wait_iterations = 20')
    r = infermodel.evaluate(path)
    step, e2e = r["decode_step_time"], r["e2e_latency"]
    rate = 32 * step / e2e
    assert r["batch_wait_arrivals"] == pytest.approx(rate, rel=1e-12)
    assert r["batch_wait_hold"] == pytest.approx(step * 20 * (1 + rate * 10) / (1 + rate * 20),
                                                 rel=1e-12)
    assert 10 * step < r["batch_wait_hold"] < 20 * step
    assert infermodel.evaluate(path, {"workload.batch": 1})["batch_wait_hold"] == 0.0
    assert infermodel.evaluate(path, {"efficiency.batch_wait_iterations": 0})[
        "batch_wait_hold"] == 0.0
    plain = infermodel.evaluate(bare(write_scenario, batch=32, efficiency='engine = "trtllm"'))
    assert "batch_wait_hold" not in plain.values and plain["ttft"] == r["ttft"]
    assert "batch_wait_timeout_iters" in r.explain("batch_wait_hold").text()


def test_attention_ranks_balanced_hold_a_prompt_until_each_holds_one(write_scenario):
    # TensorRT-LLM's attention-DP balance (enable_balance, timeout_iters T,
    # batching_wait_iters W) on D = 8 ranks: each new request goes to the rank whose
    # sequence finished, so every rank holds one after D·H_D arrivals (the coupon
    # collector: 8 · (1 + 1/2 + … + 1/8) = 21.743); at λ arrivals per iteration (Little's
    # law) the ranks fill first where λT ≥ that, a prompt then waiting (K − 1)/(2λ) + W
    # iterations; else the timeout releases them, T/2 on average. By hand at batch 64.
    def ranked(efficiency):
        return write_scenario(
            '[model]\npreset = "gpt-oss-20b"\n[hardware]\npreset = "h100-sxm"\ncount = 8\n'
            "[workload]\nbatch = 64\nprompt_tokens = 1024\noutput_tokens = 256\n"
            f'[efficiency]\nengine = "trtllm"\n{efficiency}\n'
            "[levers.parallelism]\ntensor = 1\nattention_data = 8\nexpert = 8")

    path = ranked("dp_balance_timeout = 60\ndp_balance_batching = 0")
    r = infermodel.evaluate(path)
    step, e2e = r["decode_step_time"], r["e2e_latency"]
    rate = 64 * step / e2e
    fill = 8 * sum(1 / i for i in range(1, 9))
    assert r["dp_balance_fill"] == pytest.approx(21.742857, rel=1e-6) == fill
    assert r["dp_balance_arrivals"] == pytest.approx(rate, rel=1e-12)
    assert rate * 60 < fill and r["dp_balance_hold"] == pytest.approx(30 * step, rel=1e-12)
    # Below two sequences a rank, a rank left without one releases at once.
    assert infermodel.evaluate(path, {"workload.batch": 15})["dp_balance_hold"] == 0.0
    vllm = infermodel.evaluate(path, {"efficiency.engine": "vllm"})
    assert any("attention_dp_config" in str(w) for w in vllm.warnings)
    # A longer timeout: the ranks fill first, then the batching wait (TensorRT-LLM's
    # default 10 where the scenario does not state it).
    long = infermodel.evaluate(ranked("dp_balance_timeout = 100000"))
    assert long["dp_balance_batching"] == 10
    assert long["dp_balance_hold"] == pytest.approx(
        long["decode_step_time"] * ((fill - 1) / (2 * long["dp_balance_arrivals"]) + 10),
        rel=1e-12)
    plain = infermodel.evaluate(ranked(""))
    assert "dp_balance_hold" not in plain.values and plain["ttft"] == r["ttft"]
    assert "_balance_adp_requests" in r.explain("dp_balance_hold").text()
    # Without attention ranks nothing is balanced, and the result says so.
    alone = infermodel.evaluate(bare(write_scenario, efficiency='dp_balance_timeout = 60'))
    assert "dp_balance_hold" not in alone.values
    assert any("has none" in str(w) for w in alone.warnings)
    off = infermodel.evaluate(bare(write_scenario, efficiency='dp_balance_batching = 5'))
    assert any("the attention-DP balance is off" in str(w) for w in off.warnings)


def test_vllm_before_0_8_is_its_own_generation_with_its_own_preset(write_scenario):
    """vLLM's V0 engine (before 0.8) keeps its defaults and its fitted preset apart from
    V1's: at most 256 sequences, unchunked prompts, decode graphs up to 256, and the host
    time its generation's published runs carry (the V1 preset's is far smaller).
    """
    import tomllib

    from conftest import ROOT
    from infermodel.accuracy.ledger import DEFAULT_LEDGER, read_ledger

    v0 = infermodel.evaluate(bare(write_scenario, model="smollm2-135m",
                                  efficiency='engine = "vllm-v0"'))
    v1 = infermodel.evaluate(bare(write_scenario, model="smollm2-135m"))
    assert (v0["engine_max_sequences"], v0["engine_chunked_prefill"], v0["graph_max_batch"]) == (
        256, 0, 256)
    assert (v1["engine_max_sequences"], v1["engine_chunked_prefill"], v1["graph_max_batch"]) == (
        1024, 1, 512)
    presets = ROOT / "plugins" / "infermodel_builtins" / "presets" / "efficiency"
    stated = {}
    for family in ("vllm", "vllm-v0"):
        data = tomllib.loads((presets / f"{family}.toml").read_text())
        stated[family] = data
    assert v0["step_overhead"] == pytest.approx(
        _seconds(stated["vllm-v0"]["efficiency"]["step_overhead"]), rel=1e-3)
    assert v1["step_overhead"] == pytest.approx(
        _seconds(stated["vllm"]["efficiency"]["step_overhead"]), rel=1e-3)
    assert v1["step_overhead"] < v0["step_overhead"] / 10
    # Each preset rests only on its own generation's rows.
    engines = {r.id: r.engine for r in read_ledger(DEFAULT_LEDGER)}
    for family, data in stated.items():
        families = {read_ledger_family(engines[i]) for i in data["preset"]["rows"]}
        assert families == {family}, family


def read_ledger_family(engine: str) -> str:
    from infermodel.accuracy.ledger import LedgerRow

    return LedgerRow("r", "u", engine, "h100-sxm", 1, "llama-3.1-8b", None, "", "", 1, 1, 1, 1, 1,
                     "ttft_ms", "mean", 1.0).family


def _seconds(text: str) -> float:
    from infermodel.units import parse_quantity

    return float(parse_quantity(text, "s"))


# ---------------------------------------------------------------- intervals and the domain


def test_headlines_carry_the_presets_interval(write_scenario, capsys):
    path = bare(write_scenario, batch=8, efficiency='engine = "tensorrt-llm"')
    r = infermodel.evaluate(path)
    low, high = r["itl_interval_low_ratio"], r["itl_interval_high_ratio"]
    assert low < high
    assert r["tpot_expected_low"] == pytest.approx(r["tpot"] * low)
    from infermodel.plugin import intervals

    assert intervals.interval(r, "tpot") == pytest.approx(
        (r["tpot_expected_low"], r["tpot_expected_high"]))
    assert main(["run", str(path)]) == 0
    assert "(80 %:" in capsys.readouterr().out


def test_a_scenario_outside_the_presets_rows_is_warned_with_the_doubt(write_scenario):
    import tomllib

    preset = tomllib.loads((SCENARIOS.parent / "plugins" / "infermodel_builtins" / "presets"
                            / "efficiency" / "trtllm.toml").read_text())
    if "moe" in preset["preset"]["domain"]["models"]:
        pytest.skip("the TensorRT-LLM preset now rests on mixture-of-experts rows too")
    path = write_scenario('[model]\npreset = "mixtral-8x7b"\n[hardware]\npreset = "h100-sxm"\n'
                          "count = 2\n[workload]\nprompt_tokens = 1024\noutput_tokens = 256\n"
                          '[efficiency]\nengine = "tensorrt-llm"\n[levers.parallelism]\ntensor = 2\n')
    (warning,) = [w for w in infermodel.evaluate(path).warnings if "efficiency preset" in w.message]
    assert "mixture-of-experts" in warning.message and "×" in warning.message


def test_presets_efficiency_shows_bounds_sources_and_held_out_errors(capsys):
    assert main(["presets", "efficiency"]) == 0
    out = capsys.readouterr().out
    assert "bandwidth_fraction" in out and "[0.5, 0.92]" in out
    assert "held-out |error|" in out and "sources:" in out
