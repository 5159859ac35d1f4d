"""Speculative decoding in the serving simulator: verification steps of k + 1 positions,
seeded per-request acceptance draws, both engines equal, and the figures of Module 10:
Inference and serving ("Derive the speed-up rather than naming an acceptance rate") and
the Inference lab ("Guess ahead, check in one pass") reproduced by simulation.
"""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infermodel
from infermodel.simulator import (
    QUANTITY_NAMES,
    CostModel,
    Deployment,
    Policy,
    SimulationError,
    Workload,
    WorkloadSpec,
    run_record,
)
from infermodel.simulator.engines import run_reference
from infermodel.simulator.engines.fast import run_fast
from infermodel.simulator.speculation import Acceptance, Draft, Speculation
from simcheck import assert_same_run

ROOT = Path(__file__).resolve().parents[1]
COLLAPSE = ROOT / "scenarios" / "spec-batch-collapse.toml"
LAB5 = ROOT / "scenarios" / "spec-lab5.toml"

SPECS = [
    Speculation(4, 0.8, draft_cost=0.1),
    Speculation(3, 0.6, draft=Draft(1e9, 5e8, 20000.0, 24, 896)),
    Speculation(2, 0.0, draft_cost=0.2, verify_cost=1.3),
    Speculation(5, 1.0, draft=Draft(4e8, 4e8)),
]


def _cost(scenario, overrides=None) -> tuple[CostModel, dict]:
    r = infermodel.evaluate(scenario, overrides or {})
    return CostModel.from_quantities({n: r[n] for n in QUANTITY_NAMES if n in r}), r


def _one_at_a_time(count: int, prompt: int, output: int) -> Workload:
    """Requests far enough apart that each runs alone (batch 1, no queueing)."""
    return Workload(np.arange(count) * 1000.0, np.full(count, prompt), np.full(count, output),
                    0.001, 0, output)


# ---------------------------------------------------------------------------- the law
def test_draws_follow_the_independent_acceptance_law():
    # Module 10, "Derive the speed-up ...": a step keeps the leading accepted proposals
    # and adds one token, P(L = j) = α^j (1 − α) for j < k, P(L = k) = α^k.
    spec = Speculation(4, 0.8, draft_cost=0.1)
    draws = np.concatenate([spec.draws(7, r, 2000) for r in range(50)])
    a, k, n = 0.8, 4, draws.size
    law = np.array([a ** j * (1 - a) for j in range(k)] + [a ** k])
    counts = np.bincount(draws - 1, minlength=k + 1)
    assert draws.min() == 1 and draws.max() == k + 1
    chi2 = float(((counts - n * law) ** 2 / (n * law)).sum())
    assert chi2 < 20.5  # 4 degrees of freedom: P(χ² > 20.5) < 0.0004
    # E = (1 − α^(k+1))/(1 − α) = 3.3616 tokens per step, within 4 standard errors
    expected = (1 - a ** (k + 1)) / (1 - a)
    assert spec.expected_tokens == pytest.approx(expected)
    assert abs(draws.mean() - expected) < 4 * draws.std() / math.sqrt(n)


def test_draws_are_seeded_per_request():
    spec = Speculation(4, 0.7, draft_cost=0.1)
    assert np.array_equal(spec.draws(3, 11, 100), spec.draws(3, 11, 100))
    assert not np.array_equal(spec.draws(3, 11, 100), spec.draws(4, 11, 100))
    assert not np.array_equal(spec.draws(3, 11, 100), spec.draws(3, 12, 100))
    assert (Speculation(4, 0.0, draft_cost=0.1).draws(0, 0, 50) == 1).all()
    assert (Speculation(4, 1.0, draft_cost=0.1).draws(0, 0, 50) == 5).all()
    accept = Acceptance(spec, 3, [10])
    assert accept.tokens(0, 2) <= 2  # never more than the request still has to produce


def test_bad_speculation_is_a_clear_error():
    with pytest.raises(SimulationError, match="k must be"):
        Speculation(0, 0.5, draft_cost=0.1)
    with pytest.raises(SimulationError, match="acceptance must be in"):
        Speculation(4, 1.5, draft_cost=0.1)
    with pytest.raises(SimulationError, match="exactly one"):
        Speculation(4, 0.5)
    with pytest.raises(SimulationError, match="draft_cost must be a positive"):
        Speculation(4, 0.5, draft_cost=-1.0)


def test_cost_model_reads_the_levers_quantities():
    cost, _ = _cost(COLLAPSE)
    spec = cost.speculation
    assert (spec.k, spec.acceptance, spec.verify_cost, spec.draft_cost) == (4, 0.8, None, None)
    assert spec.draft.kv_bytes_per_token > 0 and spec.draft.layers == 24
    measured, _ = _cost(LAB5)
    assert (measured.speculation.draft_cost, measured.speculation.verify_cost) == (0.447, 1.224)
    off, _ = _cost(COLLAPSE, {"levers.speculative.k": 0})
    assert off.speculation is None  # k = 0 is plain decoding


def test_verification_scores_every_position_with_the_head_on_the_engine_convention():
    # prefill_logits = "last": a prompt chunk's head scores one position, a
    # verification's all k + 1 (each proposal is checked against the target's logits).
    cost = CostModel.lab3(head_params=151936 * 4096, compute=1e12)  # compute-bound
    spec = Speculation(4, 0.8, draft_cost=0.1)
    contexts, chunks = [1000, 2000], [(300, 0)]
    target = spec.step_time(cost, contexts, chunks) - spec.draft_time(cost, contexts)
    counts = dict(positions=5 + 5 + 300, cached=3000,
                  attention=5 * 1000 + 15 + 5 * 2000 + 15 + 300 * 301 // 2, sequences=3)
    assert target == cost.time_from_counts(**counts, scored=5 + 5 + 1)
    assert target > cost.time_from_counts(**counts)  # more than one head position each


# ---------------------------------------------------------------------------- engines agree
@pytest.mark.parametrize("spec", SPECS, ids=["ratio", "draft-model", "alpha0-measured-v", "alpha1-params"])
@pytest.mark.parametrize("policy", ["static", "reserve", "paged", "chunked",
                                    Policy("paged", max_running=4), Policy("chunked", chunk_tokens=64),
                                    Policy("reserve", max_tokens=256)],
                         ids=["static", "reserve", "paged", "chunked", "paged4", "chunked64",
                              "reserve256"])
def test_fast_and_reference_engines_agree_exactly(spec, policy):
    cost = CostModel.lab3(speculation=spec)
    workload = attrs.evolve(WorkloadSpec.lab3(), count=60).generate(0.4, seed=1)
    expected, _ = run_reference(workload, cost, Policy(policy) if isinstance(policy, str) else policy)
    actual = run_fast(workload, cost, Policy(policy) if isinstance(policy, str) else policy)
    assert_same_run(actual, expected)


@pytest.mark.parametrize("load", ["closed", "sessions"])
def test_engines_agree_on_closed_loops_and_sessions(load):
    cost = CostModel.lab3(speculation=Speculation(4, 0.7, draft_cost=0.1))
    spec = attrs.evolve(WorkloadSpec.lab3(), count=40)
    workload = spec.closed_loop(4, think_time=1.0) if load == "closed" else spec.sessions(0.3, 4, 1.0)
    for policy in ("paged", "chunked"):
        _, fast = run_record(cost, workload, policy)
        _, reference = run_record(cost, workload, policy, engine="reference")
        assert all(fast[k] == reference[k] or (math.isnan(fast[k]) and math.isnan(reference[k]))
                   for k in fast)


@st.composite
def speculative_cases(draw):
    count = draw(st.integers(1, 14))
    gaps = draw(st.lists(st.floats(0.0, 0.4), min_size=count, max_size=count))
    prompts = draw(st.lists(st.integers(1, 100), min_size=count, max_size=count))
    outputs = draw(st.lists(st.integers(1, 60), min_size=count, max_size=count))
    workload = attrs.evolve(Workload.from_arrays(np.cumsum(gaps), prompts, outputs, rate=1.0),
                            seed=draw(st.integers(0, 5)))
    kv = draw(st.sampled_from([1.0, 1000.0]))
    tokens = draw(st.integers(max(prompts) + max(outputs), 1500))
    draft = draw(st.sampled_from([None, Draft(300.0, 200.0, 0.5, 1, 8)]))
    spec = Speculation(draw(st.integers(1, 6)), draw(st.sampled_from([0.0, 0.3, 0.8, 1.0])),
                       draft=draft, draft_cost=None if draft else draw(st.sampled_from([0.05, 0.5])),
                       verify_cost=draw(st.sampled_from([None, 1.2])))
    cost = CostModel(weight_bytes=draw(st.sampled_from([1e3, 5e5])), kv_bytes_per_token=kv,
                     params_matmul=1e4, layers=2, query_width=draw(st.sampled_from([8, 64])),
                     bandwidth=1e7, compute=draw(st.sampled_from([1e7, 1e9])),
                     cache_memory=tokens * kv, overhead=draw(st.sampled_from([0.0, 1e-4])),
                     speculation=spec)
    kind = draw(st.sampled_from(["static", "reserve", "paged", "chunked"]))
    policy = Policy(kind, max_tokens=(draw(st.none() | st.integers(1, 120))
                                      if kind in ("reserve", "paged") else None),
                    mixed_batches=kind == "static" or draw(st.booleans()),
                    batch_size=draw(st.integers(1, 6)), timeout=draw(st.sampled_from([0.0, 0.05])),
                    max_running=draw(st.integers(1, 10)), chunk_tokens=draw(st.integers(1, 40)),
                    admit_fraction=draw(st.sampled_from([0.99, 1.0])),
                    preemption=draw(st.sampled_from(["recompute", "swap"])), swap_bandwidth=1e9)
    return workload, cost, policy


@given(speculative_cases())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_engines_agree_on_arbitrary_small_speculative_workloads(case):
    workload, cost, policy = case
    try:
        expected, stamps = run_reference(workload, cost, policy, max_iterations=100_000)
    except SimulationError as error:
        with pytest.raises(SimulationError) as caught:
            run_fast(workload, cost, policy, max_iterations=100_000)
        assert str(caught.value).split(":")[0] == str(error).split(":")[0]
        return
    assert_same_run(run_fast(workload, cost, policy, max_iterations=100_000), expected)
    # every output token is stamped once; a step's tokens share its time
    assert [len(s) for s in stamps] == workload.outputs.tolist()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_engines_agree_with_shared_prefixes_and_their_time_series(data):
    count = data.draw(st.integers(1, 12))
    gaps = data.draw(st.lists(st.floats(0, 2), min_size=count, max_size=count))
    prompts = data.draw(st.lists(st.integers(2, 300), min_size=count, max_size=count))
    outputs = data.draw(st.lists(st.integers(1, 60), min_size=count, max_size=count))
    names = data.draw(st.lists(st.sampled_from(["", "a", "b"]), min_size=count, max_size=count))
    workload = Workload.from_arrays(np.cumsum(gaps), prompts, outputs).with_prefixes(
        names, data.draw(st.integers(1, 250)))
    spec = Speculation(data.draw(st.integers(1, 5)), data.draw(st.sampled_from([0.0, 0.6, 0.9])),
                       draft_cost=0.1)
    cost = CostModel.lab3(cache_memory=data.draw(st.integers(400, 2000)) * 147456.0, speculation=spec)
    policy = Policy(data.draw(st.sampled_from(["paged", "chunked"])),
                    chunk_tokens=data.draw(st.integers(8, 128)),
                    block_tokens=data.draw(st.sampled_from([1, 16])))
    try:
        fast, _ = run_record(cost, workload, policy, series=True)
    except SimulationError:
        with pytest.raises(SimulationError):
            run_record(cost, workload, policy, engine="reference")
        return
    reference, _ = run_record(cost, workload, policy, engine="reference", series=True)
    assert_same_run(fast, reference)
    assert np.array_equal(fast.prefix_hits, reference.prefix_hits)
    for key in ("time", "waiting", "running", "cache_use"):
        assert np.array_equal(fast.series[key], reference.series[key])


# ---------------------------------------------------------------------------- figures
def test_batch_one_time_per_token_is_the_levers_within_a_confidence_interval():
    # Module 10, "Derive the speed-up ...": at batch 1 a token costs
    # (k·c + v)·t_step / E = tpot as `run` prints it.  200 requests of 2,048 decoded
    # tokens each run alone; per-request TPOTs are independent, so their mean lies
    # within 4 standard errors of the expectation (the last, capped step adds at most
    # one step per request: 0.16 % here, inside the interval).
    cost, r = _cost(COLLAPSE, {"workload.output_tokens": 2048})
    n = 200
    record = run_fast(_one_at_a_time(n, 512, 2049), cost, Policy("chunked", chunk_tokens=8192))
    tpot = (record.last_token - record.first_token) / 2048
    mean, error = tpot.mean(), tpot.std(ddof=1) / math.sqrt(n)
    assert abs(mean - r["tpot"]) < 4 * error
    assert error / mean < 0.003  # the interval is tight: ±1.2 % at 4 standard errors
    # the pooled per-token gaps have the same mean (tokens arriving together: gaps of 0)
    gaps = np.repeat(record.gap_values, record.gap_weights)
    assert gaps.size == n * 2048
    assert gaps.mean() == pytest.approx(mean, rel=1e-9)
    assert np.median(gaps) == 0.0  # at α = 0.8 most tokens arrive with another


def test_acceptance_zero_gives_one_token_per_more_expensive_step():
    cost, _ = _cost(COLLAPSE, {"levers.speculative.acceptance": 0.0})
    plain = attrs.evolve(cost, speculation=None)
    workload = _one_at_a_time(5, 512, 65)
    spec_record = run_fast(workload, cost, Policy("paged"))
    plain_record = run_fast(workload, plain, Policy("paged"))
    assert spec_record.iterations == plain_record.iterations == 5 * 65  # one token per step
    assert (spec_record.gap_values > 0).all()
    step = cost.speculation.step_time(cost, [512])
    assert spec_record.gap_values.min() == pytest.approx(step, rel=1e-3)
    assert step > cost.iteration_time([512])
    slower = np.mean(spec_record.last_token - spec_record.first_token)
    assert slower > 1.2 * np.mean(plain_record.last_token - plain_record.first_token)


def _decode_speedup(batch: int) -> tuple[float, float]:
    """Simulated and `run`'s speed-up of decoding for ``batch`` requests decoding together."""
    cost, r = _cost(COLLAPSE, {"workload.batch": batch})
    workload = Workload(np.zeros(batch), np.full(batch, 512), np.full(batch, 257), 1.0, 0, 257)
    times = []
    for model in (cost, attrs.evolve(cost, speculation=None)):
        record = run_fast(workload, model, Policy("paged", max_running=batch))
        times.append(np.mean(record.last_token - record.first_token))
    return times[1] / times[0], r["spec_speedup"]


def test_speedup_collapses_at_large_batch():
    # Module 10, "Derive the speed-up ..." (verification at high serving load) and
    # scenarios/spec-batch-collapse.toml: a large gain at batch 1, a loss at batch 512.
    one, lever_one = _decode_speedup(1)
    many, lever_many = _decode_speedup(512)
    assert one > 1.8 and lever_one > 1.8
    assert many < 1 and lever_many < 1
    assert one == pytest.approx(lever_one, rel=0.05)


def test_replicas_and_disaggregated_pools_speculate():
    cost = CostModel.lab3(speculation=Speculation(4, 0.8, draft_cost=0.1))
    workload = attrs.evolve(WorkloadSpec.lab3(), count=40).generate(0.4, seed=2)
    for deployment in (Deployment(replicas=2), Deployment(prefill=1, decode=1)):
        record, metrics = run_record(cost, workload, "paged", deployment=deployment)
        assert metrics["requests"] == 40
        assert int(record.gap_weights.sum()) == int((workload.outputs - 1).sum())


# ---------------------------------------------------------------------------- simulate
def test_simulate_prices_speculation_instead_of_warning():
    from infermodel.analyses.simulation import plan

    chosen = plan(infermodel.load_scenario(LAB5), policies=["paged"], rates=[0.5])
    text = "\n".join(chosen.warnings)
    assert "tpot is changed" not in text
    assert "rejected proposals" in text and "prefill of every prompt is not priced" in text
    assert any("verification step" in note for note in chosen.notes)
    assert chosen.cost_model.speculation.k == 4


def test_disaggregated_pools_name_the_plain_first_decode_step_with_its_size():
    from infermodel.analyses.simulation import plan

    scenario = infermodel.load_scenario(
        LAB5, overrides={"simulation.disaggregation.link_bandwidth": "50 GB/s"})
    colocated = plan(scenario, policies=["paged"], rates=[0.5])
    assert not any("decode pool" in w for w in colocated.warnings)
    split = plan(scenario, policies=["paged"], rates=[0.5],
                 deployment={"prefill": 1, "decode": 1})
    [note] = [w for w in split.warnings if "decode pool" in w]
    mean = float(split.workload.output.mean())
    assert f"mean {mean:.0f} output tokens" in note and f"{1 / mean:.2%}" in note


# ---------------------------------------------------------------------------- fuzz
@pytest.mark.filterwarnings("ignore::infermodel.analyses.simulation.SimulationWarning")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 16), alpha=st.floats(0, 1), cost=st.floats(0.01, 3), verify=st.floats(0.5, 4),
       policy=st.sampled_from(["static", "reserve", "paged", "chunked"]),
       engine=st.sampled_from(["fast", "reference"]))
def test_any_lever_setting_simulates_or_is_one_clear_error(k, alpha, cost, verify, policy, engine):
    from infermodel.analyses.simulation import simulate
    from infermodel.errors import InfermodelError

    overrides = {"levers.speculative.k": k, "levers.speculative.acceptance": alpha,
                 "levers.speculative.draft_cost": cost, "levers.speculative.verify_cost": verify,
                 "simulation.workload.count": 12}
    try:
        result = simulate(LAB5, policies=[policy], rates=[0.5], engine=engine, overrides=overrides)
    except InfermodelError as error:  # a refused setting names its key
        assert "levers.speculative" in str(error)
        return
    metrics = result.runs[0].metrics
    assert metrics["requests"] == 12 and metrics["tpot_p50"] > 0
