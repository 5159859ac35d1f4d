"""Fuzz tests of the simulator's new input surfaces: trace files, closed-loop and
deployment settings.  Any input gives a result or a SimulationError, never another
exception or a hang.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infermodel.simulator import (
    CostModel,
    Deployment,
    SimulationError,
    Workload,
    WorkloadSpec,
    run_record,
)
from infermodel.simulator.workload import read_trace

SMALL = CostModel.lab3(cache_memory=2e9)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_trace_text_is_a_workload_or_a_clear_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text("arrival,prompt,output,prefix\n" + text, encoding="utf-8")
    try:
        workload = read_trace(path)
    except SimulationError:
        return
    assert np.all(np.diff(workload.arrivals) >= 0) and workload.arrivals[0] == 0


@settings(max_examples=40, deadline=None)
@given(clients=st.integers(-2, 12), think=st.one_of(st.floats(-1, 5), st.just(float("nan"))),
       count=st.integers(1, 12), policy=st.sampled_from(["static", "reserve", "paged", "chunked"]),
       engine=st.sampled_from(["fast", "reference"]))
def test_closed_loops_run_or_refuse(clients, think, count, policy, engine):
    spec = WorkloadSpec.lab3(count)
    try:
        workload = spec.closed_loop(clients, think)
        _, metrics = run_record(SMALL, workload, policy, engine=engine)
    except SimulationError:
        return
    assert metrics["requests"] == count


@settings(max_examples=40, deadline=None)
@given(replicas=st.integers(0, 4), prefill=st.integers(0, 2), decode=st.integers(0, 2),
       router=st.sampled_from(["round_robin", "least_outstanding", "prefix_affinity", "x"]),
       arrivals=st.lists(st.floats(0, 50), min_size=1, max_size=10),
       policy=st.sampled_from(["reserve", "paged", "chunked"]))
def test_deployments_run_or_refuse(replicas, prefill, decode, router, arrivals, policy):
    arrivals = sorted(arrivals)
    n = len(arrivals)
    workload = Workload.from_arrays(arrivals, np.full(n, 300), np.arange(1, n + 1))
    workload = workload.with_prefixes([str(i % 2) for i in range(n)])
    try:
        deployment = Deployment(replicas, router, prefill, decode, 1e10, 1e-4)
        record, metrics = run_record(SMALL, workload, policy, deployment=deployment)
    except SimulationError:
        return
    assert metrics["requests"] == n
    assert np.all(record.first_token >= record.arrivals)
    assert np.all(record.last_token >= record.first_token)


@settings(max_examples=30, deadline=None)
@given(turns=st.integers(-1, 4), think=st.floats(0, 5), count=st.integers(1, 12),
       reuse=st.booleans(), policy=st.sampled_from(["static", "reserve", "paged", "chunked"]),
       engine=st.sampled_from(["fast", "reference"]))
def test_sessions_run_or_refuse(turns, think, count, reuse, policy, engine):
    spec = WorkloadSpec.lab3(count)
    try:
        workload = spec.sessions(0.5, turns, think, reuse_history=reuse)
        _, metrics = run_record(SMALL, workload, policy, engine=engine)
    except SimulationError:
        return
    assert metrics["requests"] == count


#: Values of every type a TOML policy table can hold.
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 5000), st.floats(allow_nan=True),
                    st.text(max_size=8), st.lists(st.integers(0, 3), max_size=2))


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(["static", "reserve", "paged", "chunked", "x"]),
       fields=st.dictionaries(st.sampled_from(["max_tokens", "chunk_tokens", "max_running",
                                               "batch_size", "admit_fraction", "timeout",
                                               "reserve_output_tokens", "prefix_caching",
                                               "block_tokens", "preemption", "unknown"]),
                              st.one_of(st.integers(1, 300), _VALUES), max_size=4),
       engine=st.sampled_from(["fast", "reference"]))
def test_any_policy_table_runs_or_refuses(kind, fields, engine):
    from infermodel.simulator import policy as read_policy

    try:
        chosen = read_policy({"kind": kind, **fields})
        _, metrics = run_record(SMALL, WorkloadSpec.lab3(6).generate(0.5, seed=0), chosen,
                                engine=engine)
    except SimulationError:
        return
    assert metrics["requests"] == 6
