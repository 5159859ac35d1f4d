"""Load shapes and deployments of the serving simulator: closed-loop clients on the
case study, replicas behind a router, disaggregated prefill and decode pools.

The qualitative result checked last is the one reported for disaggregated serving
(DistServe, Zhong et al., OSDI 2024, §2 and §6): separating prefill from decode wins
when a tight inter-token objective conflicts with the time-to-first-token objective,
and colocation is as good or better when traffic is light.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main
from infermodel.simulator import (
    SLO,
    CostModel,
    Deployment,
    SimulationError,
    Workload,
    WorkloadSpec,
    run_record,
    simulate,
)

LAB3 = SCENARIOS / "module10-lab3-policies.toml"
COST = CostModel.lab3()
SPEC = WorkloadSpec.lab3()
SPLIT = Deployment(prefill=1, decode=1, link_bandwidth=50e9, link_latency=1e-4)
PAIR = Deployment(2, "least_outstanding")


def _queueing(deployment, rate) -> float:
    """Mean time from arrival to the start of the request's own prefill."""
    workload = SPEC.generate(rate, seed=0)
    record, _ = run_record(COST, workload, "chunked", deployment=deployment)
    prefill = np.array([COST.iteration_time([], [(int(p), 0)]) for p in workload.prompts])
    return float(np.mean(record.first_token - record.arrivals - prefill))


def test_closed_loop_on_the_case_study():
    result = infermodel.simulate(LAB3, policies=["chunked"], concurrency=[1, 8],
                                 overrides={"simulation.workload.count": 80})
    one, eight = result.closed("chunked", 1), result.closed("chunked", 8)
    # One client: never more than one request in the system, so no queueing at all
    # and each request's TTFT is its own prefill.
    assert one.metrics["ttft_p50"] == pytest.approx(1.0, abs=0.2)
    assert one.metrics["mean_batch"] == pytest.approx(1.0)
    # Eight clients keep up to eight requests running: more throughput, Little's law
    # L = X·W holds with L <= 8.
    m = eight.metrics
    assert m["throughput_tokens_per_s"] > 3 * one.metrics["throughput_tokens_per_s"]
    assert m["mean_batch"] <= 8 and m["overloaded"] == 0.0
    data = result.to_dict()
    assert data["runs"][1]["concurrency"] == 8 and data["runs"][1]["rate"] is None


def test_closed_loop_keeps_at_most_n_in_the_system_and_think_time_spaces_requests():
    workload = SPEC.generate(1.0, 0)
    spec = WorkloadSpec.lab3(40)
    record, _ = run_record(COST, spec.closed_loop(4, think_time=5.0), "paged")
    events = np.concatenate([np.c_[record.arrivals, np.ones(40)], np.c_[record.last_token, -np.ones(40)]])
    events = events[np.lexsort((events[:, 1], events[:, 0]))]
    assert np.cumsum(events[:, 1]).max() == 4
    # every request after the first four follows some finish by exactly the think time
    finishes = np.sort(record.last_token)
    later = np.sort(record.arrivals)[4:]
    assert np.all(np.isin(np.round(later - 5.0, 9), np.round(finishes, 9)))
    assert workload.count == 300  # the open stream's lengths are the ones drawn


def test_two_replicas_halve_queueing_at_the_same_per_replica_load():
    single = _queueing(None, 0.2)
    assert _queueing(Deployment(2, "round_robin"), 0.4) <= single / 2
    assert _queueing(PAIR, 0.4) <= 0.6 * single


def test_one_replica_is_the_single_server():
    workload = SPEC.generate(0.3, 0)
    _, alone = run_record(COST, workload, "chunked")
    _, one = run_record(COST, workload, "chunked", deployment=Deployment(1))
    assert one == alone or all(
        (math.isnan(alone[k]) and math.isnan(one[k])) or alone[k] == one[k] for k in alone)


def test_disaggregated_run_prices_the_cache_transfer():
    workload = SPEC.generate(0.2, 0)
    record, metrics = run_record(COST, workload, "chunked", deployment=SPLIT)
    expected = workload.prompts * 147456 / 50e9 + 1e-4
    np.testing.assert_allclose(record.transfer, expected)
    assert metrics["transfer_time_mean"] == pytest.approx(float(expected.mean()))
    # every request's tokens: the first from the prefill server, the rest after the transfer
    assert np.all(record.last_token - record.first_token >= expected * (workload.outputs > 1))
    assert metrics["requests"] == 300


def test_disaggregated_transfer_is_in_the_derivation(write_scenario, capsys):
    path = write_scenario(f'extends = "{LAB3}"\n[simulation.disaggregation]\nprefill = 1\n'
                          'decode = 1\nlink_bandwidth = "50 GB/s"\nlink_latency = "0.1 ms"\n')
    assert main(["simulate", str(path), "--policy", "chunked", "--rate", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "cache transfer prefill -> decode" in out and "50 GB/s" in out
    assert "= 11.9 ms for the mean prompt" in out  # 4,000 × 147,456 B / 50 GB/s + 0.1 ms


def test_disaggregation_wins_when_objectives_conflict_and_loses_when_light():
    tight = SLO(ttft=3.0, itl=0.03)  # the decode objective a joining prompt breaks
    heavy = {dep.label: simulate(COST, SPEC, ["chunked"], [0.3], slo=tight, deployment=dep)
             .runs[0].metrics for dep in (PAIR, SPLIT)}
    assert heavy["1P1D"]["goodput"] > 2 * heavy[PAIR.label]["goodput"]
    loose = SLO(ttft=1.5, itl=0.1)
    light = {dep.label: simulate(COST, SPEC, ["chunked"], [0.05], slo=loose, deployment=dep)
             .runs[0].metrics for dep in (PAIR, SPLIT)}
    assert light[PAIR.label]["goodput"] > light["1P1D"]["goodput"]
    assert light[PAIR.label]["ttft_p99"] < light["1P1D"]["ttft_p99"]


def test_prefix_affinity_keeps_a_prefix_on_one_server():
    workload = Workload.from_arrays(np.arange(12) * 0.5, np.full(12, 500), np.full(12, 50))
    workload = workload.with_prefixes(["a", "b", "a", "c"] * 3)
    _, metrics = run_record(COST, workload, "paged", deployment=Deployment(3, "prefix_affinity"))
    assert metrics["requests"] == 12
    from infermodel.simulator.cluster import _serve  # the routing itself
    from infermodel.simulator.engines.fast import RunTimes

    states = _serve(workload, COST, __import__("infermodel").simulator.policy("paged"),
                    workload.arrivals.tolist(), range(12), workload.prefixes, "prefix_affinity",
                    3, 10**6, RunTimes(COST))
    owner = {r: i for i, state in enumerate(states) for r in state.source.requests}
    for prefix in "abc":
        assert len({owner[r] for r in range(12) if workload.prefixes[r] == prefix}) == 1


@pytest.mark.parametrize("call, message", [
    (lambda: Deployment(2, "random"), "router must be one of"),
    (lambda: Deployment(prefill=1), "both prefill and decode"),
    (lambda: Deployment(0), "replicas"),
    (lambda: run_record(COST, SPEC.generate(0.2), "static", deployment=PAIR), "continuous policy"),
    (lambda: run_record(COST, SPEC.closed_loop(4), "paged", deployment=PAIR), "closed loop"),
])
def test_bad_deployments_are_clear_errors(call, message):
    with pytest.raises(SimulationError, match=message):
        call()


def test_dask_grid_equals_the_serial_grid():
    pytest.importorskip("distributed")
    from infermodel.simulator.grid import execute  # noqa: F401  (the scheduler under test)

    spec = WorkloadSpec.lab3(60)
    kwargs = dict(seeds=[0, 1], deployment=None)
    serial = simulate(COST, spec, ["paged", "chunked"], [0.2, 0.3], **kwargs)
    calls = []
    spread = simulate(COST, spec, ["paged", "chunked"], [0.2, 0.3], scheduler="dask",
                      progress=lambda done, total: calls.append((done, total)), **kwargs)
    assert [r.to_dict() for r in spread.runs] == [r.to_dict() for r in serial.runs]
    assert [run.seed for run in serial.runs] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert calls[-1] == (8, 8) and len(calls) == 8


def test_a_started_local_cluster_serves_several_grids_with_plain_allocator_settings():
    pytest.importorskip("distributed")
    import os

    from infermodel.simulator.grid import start_local_cluster

    cluster, client = start_local_cluster(1)
    try:
        # Dask's nanny would set MALLOC_TRIM_THRESHOLD_ (20-28 % more CPU per run)
        environment = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        assert list(environment.values()) == [os.environ.get("MALLOC_TRIM_THRESHOLD_")]
        assert "infermodel.simulator.api" in next(iter(client.run(
            lambda: sorted(__import__("sys").modules)).values()))
        spec = WorkloadSpec.lab3(30)
        serial = simulate(COST, spec, ["paged"], [0.2, 0.3])
        for _ in range(2):  # the same cluster, two grids
            spread = simulate(COST, spec, ["paged"], [0.2, 0.3], scheduler="dask",
                              address=cluster.scheduler_address)
            assert [r.to_dict() for r in spread.runs] == [r.to_dict() for r in serial.runs]
    finally:
        client.close()
        cluster.close()


def test_unknown_scheduler_is_a_clear_error():
    with pytest.raises(SimulationError, match="scheduler must be one of"):
        simulate(COST, WorkloadSpec.lab3(10), ["paged"], [0.2], scheduler="spark")


def test_swap_to_host_preemption_keeps_the_cache_and_engines_agree():
    workload = WorkloadSpec.lab3(150).generate(0.35, seed=0)
    swap = {"kind": "paged", "preemption": "swap", "swap_bandwidth": 25e9}
    _, fast = run_record(COST, workload, swap)
    _, reference = run_record(COST, workload, swap, engine="reference")
    assert all((math.isnan(fast[k]) and math.isnan(reference[k])) or fast[k] == reference[k]
               for k in fast)
    _, recompute = run_record(COST, workload, "paged")
    assert recompute["recompute_preemptions"] > 0 and recompute["recomputed_tokens"] > 0
    assert fast["recomputed_tokens"] == 0 and fast["swapped_tokens"] > 0
    # a swapped request resumes after a copy, not a re-prefill: its longest gap is shorter
    assert fast["itl_max"] < recompute["itl_max"]


def test_swap_needs_a_bandwidth():
    from infermodel.simulator import Policy

    with pytest.raises(SimulationError, match="swap_bandwidth"):
        Policy("paged", preemption="swap")
    with pytest.raises(SimulationError, match="preemption must be one of"):
        Policy("paged", preemption="discard")


def test_capacity_searches_per_policy_and_seed_on_dask_equal_serial(write_scenario, capsys):
    pytest.importorskip("distributed")
    path = write_scenario(f'extends = "{LAB3}"\n[simulation.workload]\ncount = 60\n'
                          '[simulation.capacity]\nsteps = 4\n')
    args = ["simulate", str(path), "--capacity", "--policy", "paged", "--policy", "chunked",
            "--seed", "0", "--seed", "1", "--format", "json"]
    assert main(args) == 0
    serial = json.loads(capsys.readouterr().out)
    assert main([*args, "--scheduler", "dask"]) == 0
    spread = json.loads(capsys.readouterr().out)
    assert spread == serial
    assert [(s["policy"], s["seed"]) for s in serial["searches"]] == [
        ("paged", 0), ("paged", 1), ("chunked", 0), ("chunked", 1)]


def test_multi_turn_sessions_reuse_their_history():
    from infermodel.simulator import UniformLength

    spec = WorkloadSpec(UniformLength(100, 300), UniformLength(50, 150), 120)
    reused = spec.sessions(0.2, turns=4, think_time=5.0)
    record, fast = run_record(COST, reused, "chunked")
    _, reference = run_record(COST, reused, "chunked", engine="reference")
    assert all((math.isnan(fast[k]) and math.isnan(reference[k])) or fast[k] == reference[k]
               for k in fast)
    # Every later turn's prompt holds an earlier turn's prompt and output, and arrives
    # exactly the think time after that turn's last token.
    drawn = spec.generate(0.2, 0)
    finishes = {round(t + 5.0, 9): (p, o) for t, p, o in
                zip(record.last_token, record.prompts, record.outputs)}
    later = [i for i in range(120) if record.prompts[i] > 300]
    assert len(later) >= 80  # three of every four turns carry history
    for i in later:
        before, output = finishes[round(float(record.arrivals[i]), 9)]
        message = record.prompts[i] - before - output
        assert 100 <= message <= 300 and message == drawn.prompts[i]
    # A cached history is not prefilled again: first tokens come sooner.
    _, again = run_record(COST, spec.sessions(0.2, 4, 5.0, reuse_history=False), "chunked")
    assert fast["ttft_p50"] < again["ttft_p50"] / 2


def test_sessions_from_a_scenario(write_scenario, capsys):
    path = write_scenario(f'extends = "{LAB3}"\n[simulation]\npolicies = ["chunked"]\n'
                          'rates = [0.05]\nturns = 3\nthink_time = "10 s"\n'
                          '[simulation.workload]\ncount = 30\n')
    assert main(["simulate", str(path)]) == 0
    assert "multi-turn sessions" in capsys.readouterr().out
    bad = write_scenario(f'extends = "{LAB3}"\n[simulation]\nturns = 0\n')
    assert main(["check", str(bad)]) == 2 and "simulation.turns" in capsys.readouterr().err


def test_per_pool_capacity_finds_the_bottleneck(write_scenario, capsys):
    from infermodel.simulator import capacity_search

    spec = WorkloadSpec.lab3(150)
    slo = SLO(3.0, 0.03)
    rates = {pool: capacity_search(COST, spec, "chunked", slo, steps=6, deployment=SPLIT,
                                   pool=pool).rate for pool in ("prefill", "decode", "both")}
    assert rates["prefill"] < rates["decode"]
    assert rates["both"] == rates["prefill"]
    path = write_scenario(f'extends = "{LAB3}"\n[simulation.disaggregation]\nprefill = 1\n'
                          'decode = 1\nlink_bandwidth = "50 GB/s"\n[simulation.workload]\n'
                          'count = 60\n[simulation.capacity]\nsteps = 4\n')
    assert main(["simulate", str(path), "--capacity", "--pool", "decode"]) == 0
    assert "decode pool: p99 ITL" in capsys.readouterr().out
    with pytest.raises(SimulationError, match="pool must be one of"):
        capacity_search(COST, spec, pool="middle")


@pytest.mark.parametrize("servers, labels", [
    (["--replicas", "2"], {"replica 0", "replica 1"}),
    (["--prefill", "1", "--decode", "2", "--set", 'simulation.disaggregation.link_bandwidth="50 GB/s"'],
     {"prefill 0", "decode 0", "decode 1"})])
def test_timeseries_of_several_servers_has_one_labelled_series_each(tmp_path, capsys, servers, labels):
    args = ["simulate", str(LAB3), "--policy", "chunked", "--rate", "0.3", *servers,
            "--set", "simulation.workload.count=30"]
    assert main([*args, "--timeseries", str(tmp_path / "t.csv")]) == 0
    rows = [line.split(",") for line in (tmp_path / "t.csv").read_text().splitlines()]
    assert rows[0][-1] == "server" and {row[-1] for row in rows[1:]} == labels
    for label in labels:
        times = [float(row[3]) for row in rows[1:] if row[-1] == label]
        use = [float(row[6]) for row in rows[1:] if row[-1] == label]
        assert times == sorted(times) and 0 <= min(use) and max(use) <= 1
    # every request is admitted by one server of each pool: the running counts of a
    # pool never exceed its requests
    assert max(int(row[5]) for row in rows[1:]) <= 30
    assert main([*args, "--timeseries", str(tmp_path / "t.svg")]) == 0
    drawing = (tmp_path / "t.svg").read_text()
    assert all(f"chunked 0.3/s {label}" in drawing for label in labels)


