"""Prefix caching in the serving simulator: shared blocks, reference counts, LRU eviction
of idle blocks, warm prefill, hit rates, sessions reusing their history, routing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infermodel.cli import main
from infermodel.simulator import (
    CostModel,
    Deployment,
    Policy,
    SimulationError,
    UniformLength,
    Workload,
    WorkloadSpec,
    run_record,
)
from infermodel.simulator.prefixes import PrefixCache
from infermodel.simulator.trace import read_rows
from infermodel.simulator.workload import read_trace

KV = 147456  # Lab 3's cache bytes per position
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
LAB3 = SCENARIOS / "module10-lab3-policies.toml"


def _same(a: dict, b: dict) -> bool:
    return all((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)


# ---------------------------------------------------------------------------- the cache
class _Model:
    """An independent account of a cache: which request references how many blocks."""

    def __init__(self, cache: PrefixCache):
        self.cache = cache

    def check(self) -> None:
        cache, block = self.cache, self.cache.block
        tops: dict[int, int] = {}
        for request, held in enumerate(cache.held):
            if held:
                chain = cache.chain[request]
                tops[chain] = max(tops.get(chain, 0), held)
                assert held <= cache.resident[chain]  # only resident blocks are referenced
        assert {c: t for c, t in cache.top.items() if t} == tops
        assert cache.referenced == sum(tops.values()) * block
        assert cache.holding == sum(cache.held) * block
        idle = sum(cache.resident[c] - tops.get(c, 0) for c in cache.resident) * block
        assert cache.idle == idle >= 0
        assert all(len(cache.stamps.get(c, [])) == n for c, n in cache.resident.items())


operation = st.tuples(st.sampled_from(["take", "register", "leave", "trim"]),
                      st.integers(0, 7), st.integers(1, 80), st.integers(0, 400))


def _replay_trim(cache: PrefixCache, referenced: int, budget: float) -> dict[int, int]:
    """The eviction rule, replayed on a copy: while the cache does not fit, the idle
    chain tail released longest ago (ties: the lower chain) goes.
    """
    resident, stamps = dict(cache.resident), {c: list(v) for c, v in cache.stamps.items()}
    idle = cache.idle
    while idle and referenced + idle > budget:
        tails = [(stamps[c][n - 1], c) for c, n in resident.items() if n > cache.top.get(c, 0)]
        _, chain = min(tails)
        resident[chain] -= 1
        stamps[chain].pop()
        idle -= cache.block
    return resident


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block=st.integers(1, 8), operations=st.lists(operation, max_size=60))
def test_cache_accounting_frees_unreferenced_blocks_and_evicts_least_recent(block, operations):
    # 8 requests on 3 chains with prefixes of various lengths; a random sequence of
    # admissions, prefill completions, departures and trims to a random budget.
    chains = [0, 0, 1, 1, 2, 2, 0, 1]
    limits = [40, 64, 17, 33, 80, 5, 64, 33]
    cache = PrefixCache(8, block, chains, limits)
    model = _Model(cache)
    running = [False] * 8
    clock = 0.0
    for kind, request, positions, budget in operations:
        clock += 1.0
        if kind == "take" and not running[request]:
            hit, revived = cache.probe(request, positions)
            top, idle, total = cache.top.get(chains[request], 0), cache.idle, cache.positions()
            assert cache.take(request, positions) == hit <= positions - 1
            assert revived == max(0, hit // block - top) * block
            assert cache.idle == idle - revived and cache.positions() == total  # nothing copied
            running[request] = True
        elif kind == "register" and running[request]:
            cache.register(request, max(positions, cache.held[request] * block), clock, running=True)
        elif kind == "leave" and running[request]:
            cache.leave(request, max(positions, cache.held[request] * block), clock)
            running[request] = False
            assert cache.held[request] == 0
        elif kind == "trim":
            referenced = cache.referenced
            expected = _replay_trim(cache, referenced, budget)
            before = {c: list(v) for c, v in cache.stamps.items()}
            monotone = all(all(a >= b for a, b in zip(v, v[1:])) for v in before.values())
            cache.trim(referenced, 1.0, budget)
            assert cache.resident == expected
            assert cache.referenced == referenced  # referenced blocks are never evicted
            assert referenced + cache.idle <= budget or cache.idle == 0
            evicted = [s for c, v in before.items() for s in v[len(cache.stamps[c]):]]
            kept = [s for c, v in cache.stamps.items() for s in v[cache.top.get(c, 0):]]
            if monotone and evicted and kept:
                # released no later than any idle block kept: least recently used first
                assert max(evicted) <= min(kept)
        model.check()
    for request in range(8):  # everyone leaves: every block is idle, none referenced
        if running[request]:
            cache.leave(request, cache.held[request] * block, clock + 1)
    model.check()
    assert cache.referenced == cache.holding == 0
    assert cache.idle == cache.positions()


def test_lru_order_among_chains_and_tail_first():
    cache = PrefixCache(3, 4, [0, 1, 2], [16, 16, 16])
    for request in range(3):
        cache.take(request, 20)
        cache.register(request, 16, 0.0, running=True)  # four blocks each
    cache.leave(1, 16, 1.0)  # chain 1 released first
    cache.leave(0, 16, 2.0)
    cache.leave(2, 16, 3.0)
    assert cache.idle == 48 and cache.referenced == 0
    cache.trim(0, 1.0, 40)  # two blocks must go: chain 1's last two
    assert cache.resident == {0: 4, 1: 2, 2: 4} and cache.evicted == 8
    cache.trim(0, 1.0, 24)  # four more: chain 1's last two, then chain 0's last two
    assert cache.resident == {0: 2, 1: 0, 2: 4}
    # A referenced block is never evicted, whatever the pressure.
    cache.take(2, 20)
    cache.trim(16, 1.0, 0)
    assert cache.resident == {0: 0, 1: 0, 2: 4} and cache.idle == 0


def test_shared_blocks_counted_once_and_freed_when_unreferenced():
    cache = PrefixCache(3, 16, [0, 0, 0], [64, 64, 64])
    assert cache.take(0, 100) == 0  # cold: nothing cached
    cache.register(0, 100, 1.0, running=True)  # its prefill completes: four blocks shared
    assert cache.held[0] == 4 and cache.referenced == 64 and cache.excess == 0
    assert cache.take(1, 80) == 64 and cache.take(2, 65) == 64  # warm: 64 positions each
    assert cache.referenced == 64 and cache.holding == 192 and cache.excess == -128
    cache.leave(0, 120, 2.0)
    cache.leave(1, 90, 2.0)
    assert cache.idle == 0  # request 2 still references every block
    cache.leave(2, 70, 3.0)
    assert cache.idle == 64 and cache.referenced == 0
    # At most positions − 1 come from the cache: the last prompt token is computed.
    assert cache.probe(0, 64) == (48, 48)


# ---------------------------------------------------------------------------- engines
def _prefixed(data) -> tuple[Workload, CostModel, Policy]:
    count = data.draw(st.integers(1, 14))
    gaps = data.draw(st.lists(st.floats(0, 2), min_size=count, max_size=count))
    prompts = data.draw(st.lists(st.integers(2, 300), min_size=count, max_size=count))
    outputs = data.draw(st.lists(st.integers(1, 60), min_size=count, max_size=count))
    names = data.draw(st.lists(st.sampled_from(["", "a", "b", "c"]), min_size=count, max_size=count))
    length = data.draw(st.integers(1, 250))
    workload = Workload.from_arrays(np.cumsum(gaps), prompts, outputs).with_prefixes(names, length)
    cache_tokens = data.draw(st.integers(400, 2000))
    cost = CostModel.lab3(cache_memory=cache_tokens * KV)
    kind = data.draw(st.sampled_from(["paged", "chunked", "reserve", "swap"]))
    block = data.draw(st.sampled_from([1, 3, 16]))
    mixed = data.draw(st.booleans())
    if kind == "swap":
        chosen = Policy("paged", preemption="swap", swap_bandwidth=25e9, block_tokens=block,
                        mixed_batches=mixed)
    else:
        whole = kind in ("paged", "reserve") and data.draw(st.booleans())
        chosen = Policy(kind, chunk_tokens=data.draw(st.integers(8, 128)), block_tokens=block,
                        reserve_output_tokens=60, mixed_batches=mixed,
                        max_tokens=data.draw(st.integers(8, 300)) if whole else None)
    return workload, cost, chosen


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_and_reference_agree_with_prefixes(data):
    workload, cost, chosen = _prefixed(data)
    try:
        fast_record, fast = run_record(cost, workload, chosen, series=True)
    except SimulationError as error:
        with pytest.raises(SimulationError):
            run_record(cost, workload, chosen, engine="reference")
        assert "livelock" in str(error) or "never" in str(error) or "cannot" in str(error)
        return
    reference_record, reference = run_record(cost, workload, chosen, engine="reference", series=True)
    assert _same(fast, reference)
    assert np.array_equal(fast_record.prefix_hits, reference_record.prefix_hits)
    # the cache never holds more than it has: shared blocks counted once, idle ones too
    for record in (fast_record, reference_record):
        assert record.series["cache_use"].max() <= 1 + 1e-12


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.integers(2, 4), think=st.floats(0, 20), cache_tokens=st.integers(700, 4000),
       kind=st.sampled_from(["paged", "chunked"]), block=st.sampled_from([1, 16]),
       seed=st.integers(0, 5), mixed=st.booleans())
def test_fast_and_reference_agree_on_sessions(turns, think, cache_tokens, kind, block, seed,
                                              mixed):
    spec = WorkloadSpec(UniformLength(20, 200), UniformLength(5, 60), 4 * turns)
    workload = spec.sessions(0.5, turns, think, seed)
    cost = CostModel.lab3(cache_memory=cache_tokens * KV)
    chosen = Policy(kind, chunk_tokens=64, block_tokens=block, mixed_batches=mixed,
                    max_tokens=128 if kind == "paged" and seed % 2 else None)
    try:
        fast = run_record(cost, workload, chosen)[1]
    except SimulationError:
        with pytest.raises(SimulationError):
            run_record(cost, workload, chosen, engine="reference")
        return
    assert _same(fast, run_record(cost, workload, chosen, engine="reference")[1])


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_warm_prefill_is_the_chunk_after_the_cached_blocks(engine):
    # Two requests alone on Lab 3's card sharing a 1,000-token prefix, blocks of 16:
    # the first prefills all 3,000 tokens; the second finds 62 whole blocks (992
    # positions) and prefills the chunk (2,508 − 992 new, 992 cached).
    cost = CostModel.lab3()
    workload = Workload.from_arrays([0.0, 100.0], [3000, 2508], [1, 1]).with_prefixes(
        ["doc", "doc"], 1000)
    record, metrics = run_record(cost, workload, "paged", engine=engine)
    ttft = record.first_token - record.arrivals
    assert ttft[0] == cost.iteration_time([], [(3000, 0)])
    assert record.first_token[1] == 100.0 + cost.iteration_time([], [(2508 - 992, 992)])
    assert metrics["prefix_hit_tokens"] == 992 and metrics["prefix_request_hit_rate"] == 0.5
    # With the cache switched off the second request prefills everything again.
    cold, _ = run_record(cost, workload, Policy("paged", prefix_caching=False), engine=engine)
    assert cold.first_token[1] == 100.0 + cost.iteration_time([], [(2508, 0)])


def test_lab3_table_has_no_prefix_cache():
    # Lab 3's requests share nothing: no cache is built and every prefix metric is 0.
    record, metrics = run_record(CostModel.lab3(), WorkloadSpec.lab3(60).generate(0.3), "chunked")
    assert record.prefix_hits is None
    assert metrics["prefix_hit_rate"] == metrics["prefix_request_hit_rate"] == 0.0


# ---------------------------------------------------------------------------- sessions
def _turn_ttfts(record, workload):
    first = np.isin(record.arrivals, workload.session_starts)
    ttft = record.first_token - record.arrivals
    return ttft[~first].mean(), ttft[first].mean()


def test_multi_turn_history_is_a_cache_hit_lowering_later_turns_ttft():
    # 60 four-turn sessions of chat-sized messages on Lab 3's card, 5 s of thinking.
    spec = WorkloadSpec(UniformLength(100, 300), UniformLength(50, 150), 240)
    workload = spec.sessions(0.2, turns=4, think_time=5.0)
    on, with_cache = run_record(CostModel.lab3(), workload, "chunked")
    off, without = run_record(CostModel.lab3(), workload, Policy("chunked", prefix_caching=False))
    later_on, _ = _turn_ttfts(on, workload)
    later_off, _ = _turn_ttfts(off, workload)
    print(f"turns >= 2 mean TTFT: {later_on * 1e3:.1f} ms with prefix caching, "
          f"{later_off * 1e3:.1f} ms without; hit rate {with_cache['prefix_hit_rate']:.3f} of "
          f"prompt tokens, {with_cache['prefix_request_hit_rate']:.3f} of requests")
    assert later_on < 0.5 * later_off
    assert without["prefix_hit_rate"] == 0 and without["prefix_request_hit_rate"] == 0
    # every turn after the first finds its history (the cache is large): 3 of 4 requests
    assert with_cache["prefix_request_hit_rate"] == pytest.approx(0.75)
    assert 0.5 < with_cache["prefix_hit_rate"] < 1
    assert with_cache["prefix_evicted_tokens"] == 0
    # The same history recomputed instead (history = "recompute") finds nothing either.
    _, recomputed = run_record(CostModel.lab3(),
                               spec.sessions(0.2, 4, 5.0, reuse_history=False), "chunked")
    assert recomputed["ttft_p50"] == without["ttft_p50"]


def test_thinking_sessions_hold_idle_blocks_that_a_small_cache_evicts():
    # Long histories and long thinking on a cache of 12,000 positions: idle histories
    # are evicted to make room for running requests, so fewer turns find theirs.  (In
    # 16 GB too, finished sessions' histories stay until room is needed, then go.)
    spec = WorkloadSpec(UniformLength(1000, 2000), UniformLength(100, 300), 160)
    workload = spec.sessions(0.05, turns=4, think_time=30.0, seed=3)
    small = CostModel.lab3(cache_memory=12_000 * KV)
    record, tight = run_record(small, workload, "chunked", series=True)
    _, roomy = run_record(CostModel.lab3(), workload, "chunked")
    print(f"hit rate {tight['prefix_hit_rate']:.3f} in 12,000 positions "
          f"({tight['prefix_evicted_tokens']:.0f} evicted), {roomy['prefix_hit_rate']:.3f} in 16 GB")
    assert tight["prefix_evicted_tokens"] > roomy["prefix_evicted_tokens"] > 0
    assert tight["prefix_hit_rate"] < 0.25 * roomy["prefix_hit_rate"]
    assert record.series["cache_use"].max() <= 1 + 1e-12
    assert _same(tight, run_record(small, workload, "chunked", engine="reference")[1])


def test_sessions_past_saturation_are_flagged_by_both_engines():
    # Sessions start as an open stream, so they can overload the server; the reference
    # engine used to call every session run closed (never overloaded).
    spec = WorkloadSpec(UniformLength(1000, 2000), UniformLength(50, 100), 300)
    workload = spec.sessions(1.0, 3, 1.0)
    fast = run_record(CostModel.lab3(), workload, "chunked")[1]
    reference = run_record(CostModel.lab3(), workload, "chunked", engine="reference")[1]
    assert fast["overloaded"] == reference["overloaded"] == 1.0
    assert _same(fast, reference)


# ---------------------------------------------------------------------------- prefixes
def test_prefix_affinity_raises_hits_over_round_robin():
    # 40 system prompts of 2,000 tokens (3,000-token prompts) behind three replicas with
    # room for about six prompts each: round robin caches every prefix on every server
    # and evicts them; prefix affinity keeps each on one.
    rng = np.random.default_rng(7)
    count = 600
    arrivals = np.cumsum(rng.exponential(1 / 1.5, count))
    names = [f"system-{i}" for i in rng.integers(0, 40, count)]
    workload = Workload.from_arrays(arrivals, rng.integers(2800, 3200, count),
                                    rng.integers(50, 150, count)).with_prefixes(names, 2000)
    cost = CostModel.lab3(cache_memory=20_000 * KV)
    rates = {}
    for router in ("round_robin", "least_outstanding", "prefix_affinity"):
        _, metrics = run_record(cost, workload, "chunked", deployment=Deployment(3, router))
        rates[router] = metrics
        print(f"{router}: prefix hit rate {metrics['prefix_hit_rate']:.3f} of tokens, "
              f"{metrics['prefix_request_hit_rate']:.3f} of requests, "
              f"TTFT p50 {metrics['ttft_p50'] * 1e3:.0f} ms")
    affinity, spread = rates["prefix_affinity"], rates["round_robin"]
    assert affinity["prefix_hit_rate"] > spread["prefix_hit_rate"] + 0.1
    assert affinity["prefix_request_hit_rate"] > spread["prefix_request_hit_rate"]


def test_shared_prefix_from_the_spec_is_computed_once_then_hit():
    import attrs

    spec = attrs.evolve(WorkloadSpec.lab3(100), prompt=UniformLength(3500, 6000),
                        prefix_tokens=3000, prefix_hit_rate=1.0)
    workload = spec.generate(0.2)
    assert set(workload.prefixes) == {"shared"} and set(workload.prefix_tokens.tolist()) == {3000}
    _, metrics = run_record(CostModel.lab3(), workload, Policy("paged", block_tokens=1))
    # the first request computes it; every later one finds all 3,000 tokens
    assert metrics["prefix_hit_tokens"] == 99 * 3000
    assert metrics["prefix_request_hit_rate"] == pytest.approx(0.99)


def test_trace_prefix_tokens_column(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival,prompt,output,prefix,prefix_tokens\n0.0,900,20,sys,512\n"
                    "0.5,700,30,sys,512\n1.0,400,10,,\n", encoding="utf-8")
    _, _, _, names, lengths = read_rows(path)
    assert names == ["sys", "sys", ""] and lengths.tolist() == [512, 512, 0]
    workload = read_trace(path)
    _, metrics = run_record(CostModel.lab3(), workload, "paged")
    assert metrics["prefix_hit_tokens"] == 512  # the second request finds the first's blocks
    path.write_text("arrival,prompt,output,prefix,prefix_tokens\n0.0,90,20,sys,512\n",
                    encoding="utf-8")
    with pytest.raises(SimulationError, match="prefix_tokens must be a whole number"):
        read_rows(path)


@settings(max_examples=200, deadline=None)
@given(cells=st.lists(st.tuples(st.sampled_from(["", "a", "b"]),
                                st.one_of(st.integers(-5, 400).map(str),
                                          st.sampled_from(["", "x", "1e3", "nan", "2.5", " 7 "]))),
                      min_size=1, max_size=6))
def test_trace_prefix_tokens_fuzz(tmp_path_factory, cells):
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    rows = "".join(f"{i},300,5,{name},{length}\n" for i, (name, length) in enumerate(cells))
    path.write_text("arrival,prompt,output,prefix,prefix_tokens\n" + rows, encoding="utf-8")
    try:
        workload = read_trace(path)
    except SimulationError as error:
        assert "prefix_tokens" in str(error)
        return
    assert workload.prefix_tokens is None or (
        (workload.prefix_tokens >= 0).all() and (workload.prefix_tokens <= workload.prompts).all())
    run_record(CostModel.lab3(), workload, "chunked")


# ---------------------------------------------------------------------------- scenarios
def test_scenario_block_size_and_switch(write_scenario, capsys):
    prefix = SCENARIOS / "prefix-module10-case.toml"
    assert main(["simulate", str(prefix), "--policy", "chunked", "--rate", "0.2",
                 "--set", "simulation.workload.count=40"]) == 0
    out = capsys.readouterr().out
    assert "prefix cache: blocks of 1 tokens (prefix_block_tokens)" in out
    path = write_scenario(f'extends = "{LAB3}"\n[simulation]\npolicies = ["chunked"]\n'
                          'rates = [0.05]\nturns = 2\nblock_tokens = 32\nthink_time = "2 s"\n'
                          '[simulation.workload]\ncount = 20\n')
    assert main(["simulate", str(path), "--format", "json"]) == 0
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "prefix cache: blocks of 32 tokens (simulation.block_tokens)" in out
    assert "prefix cache, chunked 0.05/s: " in out and "of requests found cached" in out
    off = write_scenario(f'extends = "{LAB3}"\n[simulation]\nturns = 2\nprefix_caching = false\n'
                         '[simulation.workload]\ncount = 20\n')
    assert main(["simulate", str(off), "--policy", "chunked"]) == 0
    assert "prefix cache: off" in capsys.readouterr().out
    for bad in ("block_tokens = 0", 'block_tokens = "16"', 'prefix_caching = "yes"'):
        broken = write_scenario(f'extends = "{LAB3}"\n[simulation]\n{bad}\n')
        assert main(["simulate", str(broken), "--policy", "chunked"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and bad.split()[0] in err
