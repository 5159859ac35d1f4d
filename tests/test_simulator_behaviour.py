"""The serving simulator's behaviour: analytic cross-checks, determinism, the two
engines' agreement on arbitrary small workloads, the result format and bad input.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infermodel.errors import InfermodelError
from infermodel.simulator import (
    METRIC_NAMES,
    SLO,
    CostModel,
    FixedLength,
    LogNormalLength,
    Policy,
    SimulationError,
    UniformLength,
    Workload,
    WorkloadSpec,
    capacity_search,
    run_policy,
    simulate,
    static_slot_use,
)
from infermodel.simulator.engines import run_reference
from infermodel.simulator.engines.fast import run_fast
from simcheck import assert_same_run

LAB = CostModel.lab3()


# ---------------------------------------------------------------------------- analytic checks
def test_static_slot_use_matches_the_expected_maximum():
    # Inference lab, "Many requests, one pass": in full static batches a slot does
    # o − 1 useful decode steps out of max − 1, so slot use ≈ (E[o] − 1)/(E[max of B] − 1).
    law = LogNormalLength.from_median(1500, 0.6, 16, 4000)
    spec = WorkloadSpec(FixedLength(500), law, 4000, "numpy")
    metrics = run_policy(LAB, spec.generate(50.0, seed=1), Policy("static", batch_size=16))
    assert metrics["slot_use"] == pytest.approx(static_slot_use(law, 16), rel=0.02)
    assert metrics["mean_batch"] == pytest.approx(16 * metrics["slot_use"])


def test_continuous_slot_use_counts_against_the_running_limit():
    workload = WorkloadSpec.lab3().generate(0.2)
    metrics = run_policy(LAB, workload, "reserve")
    assert metrics["slot_use"] * 256 == pytest.approx(metrics["mean_batch"])
    # busy slot-steps are exactly the tokens after each request's first
    record = run_fast(workload, LAB, Policy("reserve"))
    assert record.busy_slot_steps == int((workload.outputs - 1).sum())
    assert metrics["mean_batch"] == pytest.approx(record.busy_slot_steps / record.decode_steps)


@pytest.mark.parametrize("policy, rate", [("chunked", 0.10), ("chunked", 0.20), ("reserve", 0.10), ("paged", 0.20)])
def test_littles_law_holds_for_stable_runs(policy, rate):
    workload = WorkloadSpec.lab3().generate(rate)
    metrics = run_policy(LAB, workload, policy)
    assert metrics["little_ratio"] == pytest.approx(1.0, abs=0.03)
    # the time integral itself, sampled independently on a fine grid
    arrivals = workload.arrivals
    departures = arrivals + _e2e(workload, policy)
    grid = np.linspace(0, arrivals[-1], 200_001)[:-1] + arrivals[-1] / 400_000
    in_system = np.searchsorted(arrivals, grid, side="right") - np.searchsorted(np.sort(departures), grid, side="right")
    assert in_system.mean() == pytest.approx(metrics["little_l"], rel=0.01)
    assert metrics["in_system_growth_per_s"] == pytest.approx(0.0, abs=0.02)


def _e2e(workload: Workload, policy: str) -> np.ndarray:
    record = run_fast(workload, LAB, Policy(policy))
    return record.last_token - record.arrivals


def test_littles_law_check_fails_past_capacity():
    metrics = run_policy(LAB, WorkloadSpec.lab3().generate(0.40), "static")
    assert metrics["little_ratio"] < 0.7


def test_queue_grows_at_lambda_minus_mu_past_capacity():
    # Inference lab: "queue grows at about (λ − μ) per second when λ > μ".  μ is the
    # completion rate of a saturated server (every request waiting from the start).
    spec = WorkloadSpec(UniformLength(2000, 6000), LogNormalLength.from_median(1500, 0.6, 16, 4000), 3000, "numpy")
    saturated = run_policy(LAB, spec.generate(100.0, seed=2), "reserve")
    service_rate = saturated["requests_per_s"]
    overloaded = run_policy(LAB, spec.generate(0.6, seed=2), "reserve")
    growth = overloaded["in_system_growth_per_s"]
    assert growth == pytest.approx(overloaded["realised_rate"] - service_rate, rel=0.1)
    assert growth > 0.2


def test_goodput_counts_requests_meeting_both_objectives():
    workload = WorkloadSpec.lab3().generate(0.2)
    record = run_fast(workload, LAB, Policy("chunked"))
    strict, loose = SLO(ttft=1.0, itl=0.05), SLO(ttft=100.0, itl=100.0)
    good = np.count_nonzero((record.first_token - record.arrivals <= 1.0) & (record.max_gap <= 0.05))
    assert run_policy(LAB, workload, "chunked", strict)["goodput"] == pytest.approx(good / record.end_time)
    assert run_policy(LAB, workload, "chunked", loose)["goodput_fraction"] == 1.0


def test_preempted_requests_keep_their_first_token_time():
    workload = WorkloadSpec.lab3().generate(0.30)
    record, stamps = run_reference(workload, LAB, Policy("paged"))
    assert record.preemptions == 46
    counts = np.array([len(s) for s in stamps])
    assert np.array_equal(counts, workload.outputs)  # one timestamp per output token
    assert all(np.all(np.diff(s) > 0) for s in stamps)
    assert record.recomputed_tokens > 0
    # the longest gap is an eviction: the evicted request waited seconds between tokens
    assert record.max_gap.max() > 10


# ---------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_same_seed_gives_bit_identical_metrics(engine):
    spec = WorkloadSpec.lab3(80)
    first = simulate(LAB, spec, ["paged", "chunked"], [0.3], seed=4, engine=engine)
    again = simulate(LAB, spec, ["paged", "chunked"], [0.3], seed=4, engine=engine)
    other = simulate(LAB, spec, ["paged", "chunked"], [0.3], seed=5, engine=engine)
    assert first.to_json() == again.to_json()
    for a, b in zip(first.runs, other.runs):
        assert a.metrics["ttft_p50"] != b.metrics["ttft_p50"]


# ---------------------------------------------------------------------------- engines agree
@st.composite
def small_cases(draw):
    count = draw(st.integers(1, 18))
    gaps = draw(st.lists(st.floats(0.0, 0.4), min_size=count, max_size=count))
    prompts = draw(st.lists(st.integers(1, 120), min_size=count, max_size=count))
    outputs = draw(st.lists(st.integers(1, 60), min_size=count, max_size=count))
    workload = Workload.from_arrays(np.cumsum(gaps), prompts, outputs, rate=1.0)
    kv = draw(st.sampled_from([1.0, 3.0, 1000.0]))
    tokens = draw(st.integers(max(prompts) + max(outputs), 2000))
    cost = CostModel(
        weight_bytes=draw(st.sampled_from([1e3, 5e5])),
        kv_bytes_per_token=kv,
        params_matmul=draw(st.sampled_from([1e3, 1e5])),
        layers=2,
        query_width=draw(st.sampled_from([8, 64])),
        bandwidth=1e7,
        compute=draw(st.sampled_from([1e7, 1e9])),
        cache_memory=tokens * kv,
        overhead=draw(st.sampled_from([0.0, 1e-4])),
    )
    kind = draw(st.sampled_from(["static", "reserve", "paged", "chunked"]))
    policy = Policy(
        kind,
        max_tokens=draw(st.none() | st.integers(1, 150)) if kind in ("reserve", "paged") else None,
        mixed_batches=kind == "static" or draw(st.booleans()),
        batch_size=draw(st.integers(1, 6)),
        timeout=draw(st.sampled_from([0.0, 0.05, 2.0])),
        max_running=draw(st.integers(1, 12)),
        chunk_tokens=draw(st.integers(1, 40)),
        admit_fraction=draw(st.sampled_from([0.99, 1.0, 0.8])),
        static_memory_check=draw(st.booleans()),
    )
    return workload, cost, policy


@given(small_cases())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_engine_equals_reference_engine_on_small_workloads(case):
    workload, cost, policy = case
    try:
        expected, _ = run_reference(workload, cost, policy, max_iterations=200_000)
    except SimulationError as error:
        with pytest.raises(SimulationError) as caught:
            run_fast(workload, cost, policy, max_iterations=200_000)
        assert str(caught.value).split(":")[0] == str(error).split(":")[0]
        return
    actual = run_fast(workload, cost, policy, max_iterations=200_000)
    assert_same_run(actual, expected)


# ---------------------------------------------------------------------------- a whole-prompt budget
@pytest.mark.parametrize("kind", ["reserve", "paged"])
def test_a_whole_prompt_budget_spreads_a_burst_over_iterations(kind):
    # Three 60-token prompts at once under max_tokens = 100 (an engine that does not chunk,
    # TensorRT-LLM's max_num_tokens): the first iteration prefills one prompt (the second
    # does not fit beside it whole, and the third waits behind it); the next carries one
    # decode and the second prompt; the last two decodes and the third. Without the
    # budget (Lab 3's rule) all three are prefilled in the first iteration.
    workload = Workload.from_arrays([0.0, 0.0, 0.0], [60, 60, 60], [3, 3, 3], rate=1.0)
    t1 = LAB.iteration_time([], [(60, 0)])
    t2 = t1 + LAB.iteration_time([], [(1, 60), (60, 0)])
    t3 = t2 + LAB.iteration_time([], [(1, 61), (1, 60), (60, 0)])
    budgeted = Policy(kind, max_tokens=100)
    reference, _ = run_reference(workload, LAB, budgeted)
    assert reference.first_token == pytest.approx([t1, t2, t3], rel=1e-12)
    assert_same_run(run_fast(workload, LAB, budgeted), reference)
    free, _ = run_reference(workload, LAB, Policy(kind))
    assert free.first_token == pytest.approx([LAB.iteration_time([], [(60, 0)] * 3)] * 3, rel=1e-12)


def test_a_prompt_longer_than_the_budget_runs_alone():
    # 150 tokens under max_tokens = 100: it runs in an iteration of its own (an engine
    # would refuse it; simulate warns), and the 10-token prompt behind it waits.
    workload = Workload.from_arrays([0.0, 0.0], [150, 10], [1, 1], rate=1.0)
    policy = Policy("reserve", max_tokens=100)
    record, _ = run_reference(workload, LAB, policy)
    first = LAB.iteration_time([], [(150, 0)])
    assert record.first_token == pytest.approx([first, first + LAB.iteration_time([], [(10, 0)])],
                                              rel=1e-12)
    assert_same_run(run_fast(workload, LAB, policy), record)


def test_prompts_apart_from_the_decodes_stop_them_but_a_handed_over_request_does_not():
    # Two requests: the second's 2,000-token prompt arrives while the first decodes.
    # With mixed_batches=False its prefill runs alone and the first waits for it; mixed,
    # the first gets a token in that iteration. In a disaggregated unit the decode server
    # receives each prompt's cache (one position left to fill): that is a decode's work,
    # and the running decodes do not wait for it.
    from infermodel.simulator import Deployment, run_record

    workload = Workload.from_arrays([0.0, 0.5], [100, 2000], [200, 20], rate=1.0)
    apart, _ = run_reference(workload, LAB, Policy("paged", mixed_batches=False))
    mixed, _ = run_reference(workload, LAB, Policy("paged"))
    assert apart.max_gap[0] > mixed.max_gap[0]
    assert apart.max_gap[0] >= LAB.iteration_time([], [(2000, 0)])
    assert_same_run(run_fast(workload, LAB, Policy("paged", mixed_batches=False)), apart)
    unit = Deployment(prefill=1, decode=1, link_bandwidth=50e9, link_latency=1e-4)
    handed = [run_record(LAB, workload, Policy("chunked", chunk_tokens=512, mixed_batches=m),
                         deployment=unit)[0] for m in (True, False)]
    assert np.array_equal(handed[0].last_token, handed[1].last_token)


def test_max_tokens_belongs_to_the_whole_prompt_policies():
    with pytest.raises(SimulationError, match="the chunked policy's budget is chunk_tokens"):
        Policy("chunked", max_tokens=512)
    with pytest.raises(SimulationError, match=r"\(reserve or paged\), not static"):
        Policy("static", max_tokens=512)
    with pytest.raises(SimulationError, match="whole number"):
        Policy("paged", max_tokens=0)
    with pytest.raises(SimulationError, match="continuous policies"):
        Policy("static", mixed_batches=False)
    assert Policy("reserve", max_tokens=8192).token_budget == 8192
    assert Policy("chunked", chunk_tokens=512).token_budget == 512
    assert Policy("paged").token_budget == math.inf


# ---------------------------------------------------------------------------- results
def test_json_result_shape_and_units():
    result = simulate(LAB, WorkloadSpec.lab3(60), ["static", "chunked"], [0.2, 0.3], seed=1)
    document = json.loads(result.to_json())
    assert [(run["policy"], run["rate"]) for run in document["runs"]] == [
        ("static", 0.2), ("static", 0.3), ("chunked", 0.2), ("chunked", 0.3)
    ]
    metrics = document["runs"][0]["metrics"]
    assert list(metrics) == list(METRIC_NAMES)
    for name in ("realised_rate", "ttft_p50", "ttft_p90", "ttft_p99", "ttft_max", "itl_p50", "itl_p90",
                 "itl_p99", "itl_max", "tpot_p50", "e2e_p50", "e2e_p99", "throughput_tokens_per_s",
                 "requests_per_s", "goodput", "preemptions", "slot_use", "little_l", "little_lambda_w",
                 "n_itl_samples"):
        assert isinstance(metrics[name], (int, float)), name
    assert metrics["ttft_p50"] < 100  # seconds, not milliseconds
    assert metrics["n_ttft_samples"] == 60
    assert document["slo"]["ttft"] == 3.0 and document["slo"]["itl"] == 0.1


def test_undefined_metrics_are_written_as_the_project_writes_nan_in_json():
    from infermodel import formatting
    from infermodel.simulator import api

    workload = Workload.from_arrays([0.0, 0.0], [10, 20], [1, 1])  # one token each, no gaps
    result = simulate(LAB, workload, ["paged"])
    metrics = json.loads(result.to_json())["runs"][0]["metrics"]
    assert metrics["itl_p50"] == "nan" and metrics["tpot_p50"] == "nan"
    assert api.NAN_JSON == formatting.NAN_JSON == formatting.json_value(math.nan)
    assert metrics["realised_rate"] == "inf" == formatting.json_value(math.inf)
    assert metrics["n_itl_samples"] == 0


def test_progress_reports_every_run():
    seen = []
    simulate(LAB, WorkloadSpec.lab3(20), ["static", "paged"], [0.1, 0.2, 0.3], progress=lambda d, t: seen.append((d, t)))
    assert seen == [(i, 6) for i in range(1, 7)]
    calls = []
    capacity_search(LAB, WorkloadSpec.lab3(30), steps=4, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (7, 7) and len(calls) == 7


def test_policies_accept_names_tables_and_objects():
    result = simulate(LAB, WorkloadSpec.lab3(20), [{"kind": "chunked", "chunk_tokens": 512}, Policy("static")], 0.2)
    assert [run.policy for run in result.runs] == ["chunked", "static"]
    assert result.runs[0].settings.chunk_tokens == 512


def test_chunk_budget_trades_stalls_for_ttft():
    workload = WorkloadSpec.lab3().generate(0.2)
    small = run_policy(LAB, workload, Policy("chunked", chunk_tokens=64))
    large = run_policy(LAB, workload, Policy("chunked", chunk_tokens=2048))
    assert small["itl_p99"] < large["itl_p99"]
    assert small["ttft_p50"] > large["ttft_p50"]


def test_memory_aware_static_batches_fit_the_cache():
    workload = WorkloadSpec.lab3().generate(0.4)
    checked = run_policy(LAB, workload, Policy("static", static_memory_check=True))
    unchecked = run_policy(LAB, workload, Policy("static"))
    # 16 full-length reservations of up to 10,000 tokens cannot fit 16 GB: smaller
    # batches, less throughput than Lab 3's unchecked (favourable) static batches
    assert checked["mean_batch"] < unchecked["mean_batch"]
    assert checked["throughput_tokens_per_s"] < unchecked["throughput_tokens_per_s"]


# ---------------------------------------------------------------------------- bad input
def test_request_that_can_never_fit_names_its_size_and_the_budget():
    small = CostModel.lab3(cache_memory=5e8)
    workload = WorkloadSpec.lab3(20).generate(0.2)
    with pytest.raises(SimulationError) as caught:
        run_policy(small, workload, "paged")
    message = str(caught.value)
    assert "request 0" in message and f"{int(workload.prompts[0]):,} tokens" in message
    assert "500,000,000" in message and isinstance(caught.value, InfermodelError)
    with pytest.raises(SimulationError, match="can never fit the cache"):
        run_policy(CostModel.lab3(cache_memory=1.2e9), workload, "reserve")
    # Lab 3's static batches are not memory-checked unless asked
    run_policy(small, workload, "static")
    with pytest.raises(SimulationError, match="can never fit"):
        run_policy(small, workload, Policy("static", static_memory_check=True))


def test_every_loop_is_bounded():
    workload = WorkloadSpec.lab3(30).generate(0.2)
    for engine in ("fast", "reference"):
        with pytest.raises(SimulationError, match="stopped after 100 iterations"):
            run_policy(LAB, workload, "chunked", engine=engine, max_iterations=100)


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_rolled_back_admission_waits_for_the_next_iteration(engine):
    # 30 short requests admitted together into a 1,000-token cache: when it fills, the
    # evicted request would fit admission again at once and overflow the cache again,
    # forever.  A request rolled back in a scheduling turn waits for the next
    # iteration, so this servable workload (each request fits alone) completes.
    workload = Workload.from_arrays(np.zeros(30), np.full(30, 20), np.full(30, 100))
    tiny = CostModel(1e3, 1.0, 1e3, 2, 8, 1e7, 1e9, 1000.0)
    metrics = run_policy(tiny, workload, "paged", engine=engine)
    assert metrics["requests"] == 30 and metrics["preemptions"] > 0
    assert metrics == run_policy(tiny, workload, "paged", engine="reference")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: simulate(LAB, WorkloadSpec.lab3(10), ["fifo"]), "policy must be one of"),
        (lambda: simulate(LAB, WorkloadSpec.lab3(10), [], [0.2]), "at least one policy"),
        (lambda: simulate(LAB, WorkloadSpec.lab3(10), "static", []), "at least one arrival rate"),
        (lambda: simulate(LAB, WorkloadSpec.lab3(10), "static", [0.0]), "arrival rate"),
        (lambda: simulate(LAB, WorkloadSpec.lab3(10), "static", [-1]), "arrival rate"),
        (lambda: simulate(LAB, WorkloadSpec.lab3(10), engine="turbo"), "engine must be"),
        (lambda: simulate({"bandwidth": 1}, WorkloadSpec.lab3(10)), "CostModel"),
        (lambda: simulate(LAB, "lab3"), "WorkloadSpec"),
        (lambda: Policy("chunked", chunk_tokens=0), "chunk_tokens"),
        (lambda: Policy("static", timeout=-1), "timeout"),
        (lambda: Policy("paged", admit_fraction=1.5), "admit_fraction"),
        (lambda: SLO(ttft=0), "ttft"),
        (lambda: capacity_search(LAB, low=1.0, high=0.5), "low < high"),
        (lambda: capacity_search(LAB, steps=0), "steps"),
    ],
)
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(SimulationError, match=message):
        call()
