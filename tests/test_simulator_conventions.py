"""The simulator's iteration cost on the engine conventions: input-table rows read per
position (``efficiency.embedding_reads = "rows"``) and the head applied once per
scheduled sequence (``efficiency.prefill_logits = "last"``); the documents' scenarios
keep Module 10 Lab 3's whole-model arithmetic.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infermodel.simulator import CostModel, Policy, WorkloadSpec, run_policy

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

# Llama-3-8B-like numbers: vocab 128,256, d 4,096, 16-bit rows of 8,192 bytes.
VOCAB, D = 128256, 4096
ROW = 2 * D
HEAD = VOCAB * D
ENGINE = CostModel.lab3(embedding_row_bytes=ROW, embedding_rows=VOCAB, head_params=HEAD,
                        overhead=2e-4)


def test_decode_reads_rows_not_the_table():
    # 18 decodes at 5,000: memory-bound; 18 rows of the table read, vocab − 18 not.
    time = ENGINE.iteration_time([5000] * 18, [])
    memory = (5.5e9 - ROW * (VOCAB - 18) + 18 * 5000 * 147456) / 1e12
    assert time == pytest.approx(memory + 2e-4, rel=1e-12)
    # Lab 3's convention reads the whole 5.5 GB.
    lab = CostModel.lab3(overhead=2e-4)
    assert lab.iteration_time([5000] * 18, []) - time == pytest.approx(ROW * (VOCAB - 18) / 1e12)


def test_prefill_scores_one_position_per_sequence_with_the_head():
    # A 4,000-token prompt: compute-bound; the head scores its last position only.
    time = ENGINE.iteration_time([], [(4000, 0)])
    flops = (2 * (8927875072 - HEAD) * 4000 + 2 * HEAD * 1
             + 4 * 36 * 4096 * 4000 * 4001 / 2)
    assert time == pytest.approx(flops / (0.5 * 165e12) + 2e-4, rel=1e-12)
    # Three chunks (two prompts' pieces and a decode) score three positions.
    mixed = ENGINE.iteration_time([3000], [(500, 0), (700, 1000)])
    attention = 3000 + 500 * 501 // 2 + 700 * 1000 + 700 * 701 // 2
    flops = 2 * (8927875072 - HEAD) * 1201 + 2 * HEAD * 3 + 4 * 36 * 4096 * attention
    memory = (5.5e9 - ROW * (VOCAB - 1201) + 147456 * 4000) / 1e12
    assert mixed == pytest.approx(max(flops / (0.5 * 165e12), memory) + 2e-4, rel=1e-12)


def test_more_positions_than_rows_read_the_whole_table():
    assert ENGINE.weights_read(VOCAB + 5) == 5.5e9
    assert ENGINE.weights_read(1) == 5.5e9 - ROW * (VOCAB - 1)


@given(
    contexts=st.lists(st.integers(0, 20000), max_size=40),
    chunks=st.lists(st.tuples(st.integers(1, 4096), st.integers(0, 20000)), max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_vectorised_times_equal_scalar_times_on_the_engine_conventions(contexts, chunks):
    positions = len(contexts) + sum(k for k, _ in chunks)
    attention = sum(contexts) + sum(k * c + k * (k + 1) // 2 for k, c in chunks)
    cached = sum(contexts) + sum(c for _, c in chunks)
    sequences = len(contexts) + len(chunks)
    vector = ENGINE.iteration_times(np.array([positions]), np.array([attention]),
                                    np.array([cached]), np.array([sequences]))
    assert vector[0] == ENGINE.iteration_time(contexts, chunks)


@pytest.mark.parametrize("kind", ["static", "reserve", "paged", "chunked"])
def test_fast_and_reference_engines_agree_bit_for_bit(kind):
    workload = WorkloadSpec.lab3(40).generate(0.3, seed=3)
    fast = run_policy(ENGINE, workload, Policy(kind), engine="fast")
    reference = run_policy(ENGINE, workload, Policy(kind), engine="reference")
    assert all((math.isnan(fast[k]) and math.isnan(reference[k])) or fast[k] == reference[k]
               for k in fast)
    # and the engine conventions are cheaper than Lab 3's whole-model arithmetic
    lab = run_policy(CostModel.lab3(overhead=2e-4), workload, Policy(kind))
    assert fast["e2e_p50"] < lab["e2e_p50"]


def _cost(path: str) -> CostModel:
    from infermodel.analyses.simulation import plan
    from infermodel.scenario import load_scenario

    return plan(load_scenario(SCENARIOS / path)).cost_model


def test_a_scenario_on_the_engine_conventions_prices_them(autoload_host):
    from infermodel.engine.evaluation import evaluate_afresh as evaluate
    from infermodel.scenario import load_scenario

    values = evaluate(load_scenario(SCENARIOS / "engine-llama-3-8b.toml")).values
    cost = _cost("engine-llama-3-8b.toml")
    assert cost.embedding_row_bytes == pytest.approx(float(values["embedding_row_bytes"]))
    assert cost.embedding_rows == float(values["vocab"])
    assert cost.head_params == float(values["params_head_matmul"]) > 0
    assert not cost.simple
    assert any("input-table rows" in line for line in cost.describe())
    assert any("output head" in line for line in cost.describe())


def test_the_documents_scenarios_keep_lab3_arithmetic(autoload_host):
    cost = _cost("module10-lab3-policies.toml")
    assert cost.simple
    assert cost.embedding_row_bytes == 0 and cost.head_params == 0


def test_simulate_no_longer_warns_about_the_conventions(autoload_host):
    from infermodel.analyses.simulation import simulate

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        simulate(SCENARIOS / "engine-llama-3-8b.toml", policies=["chunked"], rates=[0.5],
                 overrides={"simulation.workload.count": 20})
    assert not [w for w in caught if "head" in str(w.message) or "embedding" in str(w.message)]


@pytest.mark.parametrize("kind", ["paged", "chunked"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_engines_agree_on_prefixes_and_sessions_with_the_engine_conventions(kind, seed):
    from infermodel.simulator import UniformLength, Workload, run_record

    cost = attrs.evolve(ENGINE, cache_memory=3000 * 147456)
    policy = Policy(kind, chunk_tokens=64, block_tokens=16)
    sessions = WorkloadSpec(UniformLength(20, 200), UniformLength(5, 60), 12).sessions(
        0.5, 3, 2.0, seed)
    rng = np.random.default_rng(seed)
    prefixed = Workload.from_arrays(np.cumsum(rng.uniform(0, 2, 12)), rng.integers(2, 300, 12),
                                    rng.integers(1, 60, 12)).with_prefixes(
        list("aabbcaabcc" + "ab"), 120)
    for workload in (sessions, prefixed):
        fast = run_record(cost, workload, policy)[1]
        reference = run_record(cost, workload, policy, engine="reference")[1]
        assert all((math.isnan(fast[k]) and math.isnan(reference[k])) or fast[k] == reference[k]
                   for k in fast)
