"""The simulator's cost model, length laws and workload generator."""

from __future__ import annotations

import doctest
import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infermodel import simulator
from infermodel.errors import InfermodelError
from infermodel.simulator import (
    CostModel,
    EmpiricalLength,
    FixedLength,
    LogNormalLength,
    SimulationError,
    UniformLength,
    Workload,
    WorkloadSpec,
    expected_max,
    length_law,
    static_slot_use,
)

DATA = Path(__file__).resolve().parent / "data"


# ---------------------------------------------------------------------------- cost model
def test_iteration_cost_goldens_from_module10():
    # Module 10, Lab 3 and "A joining prompt can stall everybody": prefill of 4,000
    # tokens 0.923 s; 18 decodes at 5,000 → 18.77 ms; 17 decodes at 5,000 plus a 512
    # chunk 116.04 ms opening / 123.36 ms after 2,000 cached; 128 chunk 32.05 / 33.88 ms.
    lab = CostModel.lab3()
    assert f"{lab.iteration_time([], [(4000, 0)]):.3f}" == "0.923"
    assert f"{1000 * lab.iteration_time([5000] * 18, []):.2f}" == "18.77"
    assert f"{1000 * lab.iteration_time([5000] * 17, [(512, 0)]):.2f}" == "116.04"
    assert f"{1000 * lab.iteration_time([5000] * 17, [(512, 2000)]):.2f}" == "123.36"
    assert f"{1000 * lab.iteration_time([5000] * 17, [(128, 0)]):.2f}" == "32.05"
    assert f"{1000 * lab.iteration_time([5000] * 17, [(128, 2000)]):.2f}" == "33.88"


def test_iteration_time_is_the_max_of_memory_and_compute_time():
    lab = CostModel.lab3()
    # 18 decodes at 5,000: 5.5e9 + 18·5000·147456 bytes at 1 TB/s is the memory time
    assert lab.iteration_time([5000] * 18, []) == pytest.approx((5.5e9 + 18 * 5000 * 147456) / 1e12)
    # a 4,000-token prefill is compute-bound: 2N·4000 + 4·L·d·4000·4001/2 FLOPs
    flops = 2 * 8927875072 * 4000 + 4 * 36 * 4096 * 4000 * 4001 / 2
    assert lab.iteration_time([], [(4000, 0)]) == pytest.approx(flops / (0.5 * 165e12))


@given(
    contexts=st.lists(st.integers(0, 20000), max_size=40),
    chunks=st.lists(st.tuples(st.integers(1, 4096), st.integers(0, 20000)), max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_vectorised_times_equal_scalar_times(contexts, chunks):
    lab = CostModel.lab3(overhead=3e-4)
    positions = len(contexts) + sum(k for k, _ in chunks)
    attention = sum(contexts) + sum(k * c + k * (k + 1) // 2 for k, c in chunks)
    cached = sum(contexts) + sum(c for _, c in chunks)
    vector = lab.iteration_times(np.array([positions]), np.array([attention]), np.array([cached]))
    assert vector[0] == lab.iteration_time(contexts, chunks)


def test_cost_model_from_scenario_quantities():
    quantities = {
        "weight_bytes": 5.5e9, "kv_bytes_per_token": 147456, "params_matmul": 8927875072,
        "layers": 36, "query_width": 4096, "bandwidth": 1e12, "flops_peak": 165e12,
        "prefill_mfu": 0.5, "memory_bytes": 24e9, "reserve_bytes": 2.5e9,
    }
    built = CostModel.from_quantities(quantities)
    assert built == CostModel.lab3(
        weight_bytes=5.5e9, kv_bytes_per_token=147456.0, params_matmul=8927875072.0,
        layers=36.0, query_width=4096.0, compute=82.5e12, cache_memory=16e9,
    )
    effective = CostModel.from_quantities({**quantities, "flops_effective_prefill": 1e14, "kv_budget_bytes": 1e10})
    assert effective.compute == 1e14 and effective.cache_memory == 1e10
    assert CostModel.from_quantities(quantities, cache_memory=5e9).cache_memory == 5e9
    assert CostModel.from_quantities({**quantities, "t0": 3e-4}).overhead == 3e-4


def test_cost_model_from_quantities_names_what_is_missing():
    with pytest.raises(SimulationError, match="query_width") as caught:
        CostModel.from_quantities({"weight_bytes": 1e9, "kv_bytes_per_token": 1, "params_matmul": 1,
                                   "layers": 1, "bandwidth": 1, "flops_peak": 1, "memory_bytes": 2e9})
    assert isinstance(caught.value, InfermodelError)
    with pytest.raises(SimulationError, match="no memory left for the KV cache"):
        CostModel.from_quantities({"weight_bytes": 30e9, "kv_bytes_per_token": 1, "params_matmul": 1,
                                   "layers": 1, "query_width": 1, "bandwidth": 1, "flops_peak": 1,
                                   "memory_bytes": 24e9})


@pytest.mark.parametrize("field, value", [("bandwidth", 0), ("compute", -1.0), ("cache_memory", math.nan),
                                          ("layers", "36"), ("overhead", -1.0), ("weight_bytes", True)])
def test_cost_model_rejects_bad_values(field, value):
    with pytest.raises(SimulationError, match=field):
        CostModel.lab3(**{field: value})


# ---------------------------------------------------------------------------- length laws
def test_lab_compatible_sampler_draws_the_labs_sequence():
    # The documented lab-compatible order: expovariate, randint(2000, 6000), then the
    # clipped log-normal, per request, from random.Random(seed).
    rng = random.Random(7)
    expected = []
    now = 0.0
    for _ in range(50):
        now += rng.expovariate(0.3)
        prompt = rng.randint(2000, 6000)
        output = min(4000, max(16, int(rng.lognormvariate(math.log(1500), 0.6))))
        expected.append((now, prompt, output))
    workload = WorkloadSpec.lab3(50).generate(0.3, seed=7)
    assert list(zip(workload.arrivals.tolist(), workload.prompts.tolist(), workload.outputs.tolist())) == expected


def test_lengths_are_the_same_at_every_rate():
    spec = WorkloadSpec.lab3()
    slow, fast = spec.generate(0.1, 3), spec.generate(0.4, 3)
    assert np.array_equal(slow.prompts, fast.prompts) and np.array_equal(slow.outputs, fast.outputs)
    assert np.allclose(slow.arrivals, 4 * fast.arrivals)


@pytest.mark.parametrize("sampler", ["lab", "numpy"])
def test_samplers_are_deterministic_and_seed_sensitive(sampler):
    spec = WorkloadSpec(UniformLength(10, 20), LogNormalLength.from_median(50, 0.5, 4, 400), 200, sampler)
    a, b, c = spec.generate(1.0, 1), spec.generate(1.0, 1), spec.generate(1.0, 2)
    assert np.array_equal(a.arrivals, b.arrivals) and np.array_equal(a.outputs, b.outputs)
    assert not np.array_equal(a.arrivals, c.arrivals)
    assert a.prompts.min() >= 10 and a.prompts.max() <= 20
    assert a.outputs.min() >= 4 and a.outputs.max() <= 400


def test_numpy_sampler_follows_the_laws():
    spec = WorkloadSpec(FixedLength(100), LogNormalLength.from_median(1500, 0.6, 16, 4000), 100_000, "numpy")
    workload = spec.generate(2.0, seed=0)
    assert np.all(workload.prompts == 100)
    assert workload.mean_output == pytest.approx(spec.output.mean(), rel=0.01)
    assert workload.realised_rate == pytest.approx(2.0, rel=0.02)


def test_log_normal_pmf_matches_its_sampler():
    law = LogNormalLength.from_median(300, 0.8, 16, 2000)
    _, probabilities = law.pmf()
    assert probabilities.sum() == pytest.approx(1.0)
    draws = law.sample_numpy(np.random.default_rng(5), 200_000)
    assert draws.mean() == pytest.approx(law.mean(), rel=0.01)
    assert np.mean(draws == 16) == pytest.approx(probabilities[0], abs=0.003)
    assert np.mean(draws == 2000) == pytest.approx(probabilities[-1], abs=0.003)


def test_empirical_law_from_csv():
    law = length_law({"law": "empirical", "file": "sim_lengths.csv", "column": "output_tokens"}, base_dir=DATA)
    assert law.values == (120, 45, 800, 120, 16)
    assert law.maximum == 800 and law.mean() == pytest.approx(220.2)
    values, probabilities = law.pmf()
    assert values.tolist() == [16, 45, 120, 800] and probabilities.tolist() == [0.2, 0.2, 0.4, 0.2]
    by_index = EmpiricalLength.from_csv(DATA / "sim_lengths.csv", 1)
    assert by_index.values[0] == 900
    drawn = WorkloadSpec(by_index, law, 20).generate(1.0)
    assert set(drawn.outputs.tolist()) <= {120, 45, 800, 16}


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"law": "uniform", "low": 10}, "needs 'high'"),
        ({"law": "uniform", "low": 10, "high": 5}, "below low"),
        ({"law": "lognormal", "median": 10, "mu": 2, "sigma": 1, "min": 1, "max": 9}, "exactly one"),
        ({"law": "lognormal", "median": -3, "sigma": 1, "min": 1, "max": 9}, "median"),
        ({"law": "lognormal", "median": 30, "sigma": 1, "min": 10, "max": 9}, "below min"),
        ({"law": "fixed", "value": 0}, "between 1"),
        ({"law": "fixed", "value": 2.5}, "whole number"),
        ({"law": "fixed", "value": 3, "extra": 1}, "unknown keys"),
        ({"law": "gamma", "shape": 2}, "'law' must be one of"),
        ({"law": "empirical", "values": []}, "at least one"),
        ({"law": "empirical", "values": "12"}, "list"),
        ({"law": "empirical", "file": "missing.csv"}, "cannot read"),
        ({"law": "empirical", "file": "sim_lengths.csv", "column": "nope"}, "no column"),
        ("uniform", "expected a table"),
    ],
)
def test_malformed_length_laws_are_clear_errors(spec, message):
    with pytest.raises(SimulationError, match=message):
        length_law(spec, what="output law", base_dir=DATA)


def test_bad_csv_rows_are_named(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("length\n12\n-4\n")
    with pytest.raises(SimulationError, match="row 3"):
        EmpiricalLength.from_csv(bad)


@pytest.mark.parametrize("rate", [0, -0.2, math.nan, math.inf, "0.2", None])
def test_rate_must_be_positive(rate):
    with pytest.raises(SimulationError, match="arrival rate"):
        WorkloadSpec.lab3().generate(rate)


def test_empty_workload_is_an_error():
    with pytest.raises(SimulationError, match="empty"):
        WorkloadSpec(count=0)
    with pytest.raises(SimulationError, match="empty"):
        Workload.from_arrays([], [], [])
    with pytest.raises(SimulationError, match="non-decreasing"):
        Workload.from_arrays([2.0, 1.0], [5, 5], [5, 5])
    with pytest.raises(SimulationError, match="sampler"):
        WorkloadSpec(sampler="torch")


# ---------------------------------------------------------------------------- E[max of B]
def test_expected_max_of_the_lab_output_law():
    law = LogNormalLength.from_median(1500, 0.6, 16, 4000)
    assert expected_max(law, 1) == pytest.approx(law.mean(), rel=1e-12)
    # E[max of 16] sits near the 4,000 clip, far above the mean (Inference lab,
    # "Many requests, one pass": the waste static batching pays).
    assert 3600 < expected_max(law, 16) < 4000
    assert static_slot_use(law, 16) == pytest.approx((law.mean() - 1) / (expected_max(law, 16) - 1))
    assert static_slot_use(FixedLength(50), 16) == 1.0


def test_expected_max_small_example_by_enumeration():
    values, probabilities = [2, 5, 9], [0.5, 0.3, 0.2]
    by_enumeration = sum(
        max(a, b, c) * pa * pb * pc
        for a, pa in zip(values, probabilities)
        for b, pb in zip(values, probabilities)
        for c, pc in zip(values, probabilities)
    )
    assert expected_max((values, probabilities), 3) == pytest.approx(by_enumeration)


@st.composite
def discrete_laws(draw):
    values = draw(st.lists(st.integers(0, 500), min_size=1, max_size=12, unique=True))
    weights = draw(st.lists(st.integers(1, 100), min_size=len(values), max_size=len(values)))
    total = sum(weights)
    return values, [w / total for w in weights]


@given(law=discrete_laws(), batch=st.integers(1, 64))
@settings(max_examples=150, deadline=None)
def test_expected_max_identities(law, batch):
    values, probabilities = law
    mean = float(np.dot(values, probabilities))
    one = expected_max(law, 1)
    assert one == pytest.approx(mean, rel=1e-9, abs=1e-9)  # E[max of 1] = E[o]
    many = expected_max(law, batch)
    assert mean - 1e-9 <= many <= max(values) + 1e-9
    assert expected_max(law, batch + 1) >= many - 1e-9
    # Σ_k (1 − F(k)^B) equals Σ_v v·(F(v)^B − F(v⁻)^B)
    order = np.argsort(values)
    sorted_values = np.asarray(values)[order]
    cumulative = np.cumsum(np.asarray(probabilities)[order])
    cumulative[-1] = 1.0
    below = np.r_[0.0, cumulative[:-1]]
    assert many == pytest.approx(float(np.dot(sorted_values, cumulative**batch - below**batch)), rel=1e-9, abs=1e-9)


def test_expected_max_rejects_bad_laws():
    with pytest.raises(SimulationError, match="sum to 1"):
        expected_max(([1, 2], [0.5, 0.6]), 2)
    with pytest.raises(SimulationError, match="batch size"):
        expected_max(FixedLength(3), 0)


def test_module_docstring_examples_run():
    modules = [simulator, simulator.api, simulator.capacity, simulator.cost, simulator.lengths,
               simulator.metrics, simulator.policies, simulator.rules,
               simulator.workload]
    for module in modules:
        failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert failures == 0, module.__name__


def test_workload_spec_from_a_scenario_table():
    spec = WorkloadSpec.from_mapping(
        {"count": 40, "prompt": 512, "output": {"law": "empirical", "file": "sim_lengths.csv"}},
        base_dir=DATA,
    )
    assert spec.prompt == FixedLength(512) and spec.output.values[0] == 120 and spec.count == 40
    assert WorkloadSpec.from_mapping({}) == WorkloadSpec.lab3()
    with pytest.raises(SimulationError, match="unknown keys promt.*did you mean 'prompt'"):
        WorkloadSpec.from_mapping({"promt": 512})
    with pytest.raises(SimulationError, match="output law: a fixed law needs 'value'"):
        WorkloadSpec.from_mapping({"output": {"law": "fixed"}})
