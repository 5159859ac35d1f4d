"""Queueing theory checks of the serving simulator, with confidence intervals.

One server admitting one request at a time (``max_running = 1``) is a single-server
FIFO queue: a request's service is its prefill iteration plus its decode iterations
alone, a deterministic function of its lengths.  With fixed lengths the server is
M/D/1, with varied lengths M/G/1, so the simulator's waits must follow
Pollaczek–Khinchine, the M/D/1 waiting-time law and the Lindley recursion; any
stable run obeys Little's law and throughput = λ·E[output]; static slot use follows
E[max of B] (Inference lab, "Many requests, one pass").  Statistical checks use batch
means (20 batches) and a 99.9 % interval, so a correct simulator fails them about once
in a thousand seeds; the seeds are fixed, so the tests are deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from infermodel.simulator import (
    CostModel,
    FixedLength,
    LogNormalLength,
    Policy,
    UniformLength,
    WorkloadSpec,
    run_record,
    static_slot_use,
)

COST = CostModel.lab3()
ONE = Policy("paged", max_running=1)
Z = 3.29  # two-sided 99.9 %


def _service_alone(prompt: int, output: int) -> float:
    """Time one request takes alone on the server: its prefill, then output − 1 decodes
    (a decode is a one-token chunk over the positions cached so far).
    """
    time = COST.iteration_time([], [(prompt, 0)])
    for step in range(1, output):
        time += COST.iteration_time([], [(1, prompt + step - 1)])
    return time


def _interval(sample: np.ndarray, batches: int = 20) -> tuple[float, float]:
    means = np.array([chunk.mean() for chunk in np.array_split(sample, batches)])
    half = Z * means.std(ddof=1) / math.sqrt(batches)
    return means.mean() - half, means.mean() + half


def _md1_wait_cdf(t: float, rate: float, d: float) -> float:
    """P(W ≤ t) in M/D/1: (1 − ρ) Σ_{k=0}^{⌊t/D⌋} (λ(kD − t))^k / k! · e^{−λ(kD − t)}."""
    rho = rate * d
    total = 0.0
    for k in range(int(t // d) + 1):
        x = rate * (k * d - t)
        total += x ** k / math.factorial(k) * math.exp(-x)
    return (1 - rho) * total


def _waits(spec: WorkloadSpec, rate: float, seed: int):
    workload = spec.generate(rate, seed)
    record, metrics = run_record(COST, workload, ONE)
    service = np.array([_service_alone(p, o) for p, o in zip(workload.prompts[:50],
                                                                 workload.outputs[:50])])
    return workload, record, metrics, service


def test_md1_mean_wait_and_percentiles():
    d = COST.iteration_time([], [(1000, 0)])
    rate = 0.6 / d
    spec = WorkloadSpec(FixedLength(1000), FixedLength(1), 20000, "numpy")
    workload, record, _, _ = _waits(spec, rate, seed=3)
    wait = record.first_token - workload.arrivals - d
    assert wait.min() >= -1e-9
    rho = rate * d
    low, high = _interval(wait[1000:])
    assert low <= rho * d / (2 * (1 - rho)) <= high
    # Percentiles: the empirical quantile's CDF value lies within the binomial interval.
    n = wait.size - 1000
    for q in (0.5, 0.9):
        value = float(np.quantile(wait[1000:], q))
        band = Z * math.sqrt(q * (1 - q) / n) * 4  # ×4: positive correlation of queue waits
        assert abs(_md1_wait_cdf(value, rate, d) - q) <= band


def test_mg1_mean_wait_pollaczek_khinchine():
    spec = WorkloadSpec(UniformLength(200, 600), LogNormalLength.from_median(20, 0.5, 1, 80),
                        20000, "numpy")
    workload = spec.generate(1.0, seed=5)
    service = np.array([_service_alone(int(p), int(o))
                        for p, o in zip(workload.prompts, workload.outputs)])
    rate = 0.6 / service.mean()
    workload = spec.generate(rate, seed=5)
    record, _ = run_record(COST, workload, ONE)
    wait = record.first_token - workload.arrivals - np.array(
        [COST.iteration_time([], [(int(p), 0)]) for p in workload.prompts])
    rho = rate * service.mean()
    expected = rate * np.mean(service ** 2) / (2 * (1 - rho))
    low, high = _interval(wait[1000:])
    assert low <= expected <= high


def test_lindley_recursion_is_exact():
    # W_{n+1} = max(0, W_n + S_n − A_{n+1}): bit for bit up to float rounding.
    spec = WorkloadSpec(UniformLength(100, 400), UniformLength(1, 30), 2000, "numpy")
    workload = spec.generate(2.0, seed=11)
    record, _ = run_record(COST, workload, ONE)
    service = np.array([_service_alone(int(p), int(o))
                        for p, o in zip(workload.prompts, workload.outputs)])
    waits = np.empty(workload.count)
    waits[0] = 0.0
    gaps = np.diff(workload.arrivals)
    for n in range(workload.count - 1):
        waits[n + 1] = max(0.0, waits[n] + service[n] - gaps[n])
    prefill = np.array([COST.iteration_time([], [(int(p), 0)]) for p in workload.prompts])
    simulated = record.first_token - workload.arrivals - prefill
    np.testing.assert_allclose(simulated, waits, rtol=0, atol=1e-9 * record.end_time)


@pytest.mark.parametrize("policy", ["paged", "chunked"])
def test_littles_law_and_throughput_with_intervals(policy):
    spec = WorkloadSpec(UniformLength(200, 600), UniformLength(10, 200), 6000, "numpy")
    rate = 2.0
    workload = spec.generate(rate, seed=2)
    record, metrics = run_record(COST, workload, policy)
    assert metrics["overloaded"] == 0.0
    # Little: L = λW over the window, within a percent (edge effects only).
    assert metrics["little_ratio"] == pytest.approx(1.0, abs=0.01)
    # Throughput over the arrival window = λ·E[output]: completed output per second.
    window = record.arrivals[-1]
    done = record.last_token <= window
    produced = workload.outputs[done].sum() / window
    mean_output = 105.0  # (10 + 200) / 2
    low, high = _interval(workload.outputs[done].astype(float))
    realised = workload.count / window
    assert realised * low * 0.97 <= produced <= realised * high * 1.03
    assert low <= mean_output <= high


def test_static_slot_use_within_its_interval():
    law = LogNormalLength.from_median(1500, 0.6, 16, 4000)
    spec = WorkloadSpec(FixedLength(100), law, 4000, "numpy")
    workload = spec.generate(100.0, seed=4)  # always a full batch waiting
    _, metrics = run_record(COST, workload, Policy("static", batch_size=8))
    expected = static_slot_use(law, 8)
    # Per batch: busy slot-steps / (8 · decode steps); a ratio estimate over 500 batches.
    outputs = workload.outputs.reshape(-1, 8)
    busy = (outputs - 1).sum(axis=1).astype(float)
    steps = (outputs.max(axis=1) - 1).astype(float)
    ratio = busy.sum() / (8 * steps.sum())
    assert metrics["slot_use"] == pytest.approx(ratio)
    per_batch = busy / (8 * steps.mean())
    low, high = _interval(per_batch)
    assert low <= expected <= high
