"""The Inference lab's "Many requests, one pass" table in the serving simulator: the stop
rule (a time window or a request count, whichever first), queue wait, mean and p95
latency and slot use per policy.
"""

from __future__ import annotations

import json

import attrs
import numpy as np
import pytest

from conftest import SCENARIOS
from infermodel.cli import main
from infermodel.simulator import CostModel, SimulationError, WorkloadSpec, policy, run_record
from infermodel.simulator.workload import FixedLength, Workload

EXHIBIT = SCENARIOS / "inference-lab-batching.toml"

#: Every iteration takes 0.1 s (the fixed time; bytes and FLOPs are negligible).
STEP = 0.1
COST = CostModel(weight_bytes=1.0, kv_bytes_per_token=1.0, params_matmul=1.0, layers=1.0,
                 query_width=1.0, bandwidth=1e15, compute=1e30, cache_memory=1e9,
                 overhead=STEP)
#: Three one-token prompts, two output tokens each, arriving at 0, 0.5 and 3 s.
STREAM = Workload.from_arrays([0.0, 0.5, 3.0], [1, 1, 1], [2, 2, 2])


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_static_batches_wait_for_a_full_batch_or_the_timeout(engine):
    # Batches of 2, dispatched when two wait or the oldest has waited 1 s: requests 0
    # and 1 leave together at 0.5 s (waits 0.5 and 0), prefill to 0.6 and finish at 0.7;
    # request 2 waits alone until its timeout at 4.0 s and finishes at 4.2 s.
    record, metrics = run_record(COST, STREAM, policy({"kind": "static", "batch_size": 2,
                                                       "timeout": 1.0}), engine=engine)
    assert record.admitted == pytest.approx([0.5, 0.5, 4.0], abs=1e-9)
    waits, e2e = [0.5, 0.0, 1.0], [0.7, 0.2, 1.2]
    assert metrics["queue_wait_mean"] == pytest.approx(0.5, abs=1e-9)
    assert metrics["queue_wait_p95"] == pytest.approx(0.5 + 0.9 * 0.5, abs=1e-9)  # linear
    assert metrics["e2e_mean"] == pytest.approx(np.mean(e2e), abs=1e-9)
    assert metrics["e2e_p95"] == pytest.approx(0.7 + 0.9 * 0.5, abs=1e-9)
    assert metrics["queue_wait_p95"] == pytest.approx(float(np.quantile(waits, 0.95)), abs=1e-9)
    # One useful decode step per request over 2 slots and 2 decode steps.
    assert metrics["slot_use"] == pytest.approx(3 / (2 * 2))


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_continuous_batching_admits_an_arrival_at_once_when_a_slot_is_free(engine):
    record, metrics = run_record(COST, STREAM, "paged", engine=engine)
    assert list(record.admitted) == [0.0, 0.5, 3.0]
    assert metrics["queue_wait_mean"] == 0 and metrics["e2e_mean"] == pytest.approx(2 * STEP)


def test_the_window_or_the_count_stops_the_arrivals_whichever_comes_first():
    spec = WorkloadSpec(FixedLength(10), FixedLength(5), 400, "numpy", window=60.0)
    for rate in (4.0, 8.0):
        whole = attrs.evolve(spec, window=None).generate(rate, seed=0)
        cut = spec.generate(rate, seed=0)
        inside = int(np.count_nonzero(whole.arrivals <= 60.0))
        assert cut.count == min(400, inside)
        assert np.array_equal(cut.arrivals, whole.arrivals[: cut.count])
    assert spec.generate(4.0).count < 400          # the 60 s window closes first
    eight = spec.generate(8.0)
    assert eight.count == 400 and eight.arrivals[-1] < 60  # the 400 requests come first


def test_a_window_before_the_first_arrival_or_with_a_closed_loop_is_refused():
    with pytest.raises(SimulationError, match="no request arrives within"):
        WorkloadSpec(FixedLength(10), FixedLength(5), 10, "numpy", window=1e-9).generate(0.01)
    with pytest.raises(SimulationError, match="a closed loop sends every request"):
        WorkloadSpec(window=60.0).closed_loop(4)
    with pytest.raises(SimulationError, match="arrival window"):
        WorkloadSpec(window=-1.0)


def test_the_exhibit_scenario_prints_the_exhibits_table(host, capsys):
    assert main(["simulate", str(EXHIBIT)]) == 0
    out = capsys.readouterr().out
    for title in ("requests", "tok/s", "mean lat s", "p95 s", "wait s", "slot use"):
        assert title in out
    assert main(["simulate", str(EXHIBIT), "--table", "scheduling"]) == 0
    assert "TTFT p50 s" in capsys.readouterr().out


def test_the_exhibit_static_batching_waits_and_continuous_refills(host, capsys):
    assert main(["simulate", str(EXHIBIT), "--format", "json"]) == 0
    runs = {(r["policy"], r["rate"]): r["metrics"] for r in json.loads(capsys.readouterr().out)["runs"]}
    static, paged = runs[("static", 4.0)], runs[("paged", 4.0)]
    assert static["requests"] == paged["requests"] < 400       # the window binds at 4/s
    assert runs[("paged", 8.0)]["requests"] == 400             # the count binds at 8/s
    assert paged["queue_wait_mean"] < static["queue_wait_mean"]
    assert paged["e2e_mean"] < static["e2e_mean"] and paged["e2e_p95"] < static["e2e_p95"]
    # Little's law holds while the system is stable (Inference lab, 'The maths': L = λW).
    assert paged["little_ratio"] == pytest.approx(1.0, abs=0.05)


def test_a_bad_table_layout_or_window_is_one_clear_mistake(host, capsys):
    assert main(["simulate", str(EXHIBIT), "--set", "simulation.table=\"wide\""]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "simulation.table" in err
    assert main(["simulate", str(EXHIBIT), "--set", "simulation.table=\"batchng\""]) == 2
    assert "did you mean 'batching'?" in capsys.readouterr().err
    assert main(["simulate", str(EXHIBIT), "--set", "simulation.workload.window=\"soon\""]) == 2
    assert "simulation.workload.window" in capsys.readouterr().err
    assert main(["simulate", str(EXHIBIT), "--concurrency", "4"]) == 2
    assert "closed loop" in capsys.readouterr().err
