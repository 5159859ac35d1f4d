"""The chunked-prefill lever: Module 10's hybrid-iteration figures, agreement with the
serving simulator's cost model, and its errors.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main
from infermodel.simulator import QUANTITY_NAMES, CostModel

CHUNKED = SCENARIOS / "module10-chunked-prefill.toml"
BASE = SCENARIOS / "case-study-24gb.toml"


def _ms(value: float) -> float:
    return round(1000 * value, 2)


# Module 10: Inference and serving, "A joining prompt can stall everybody" and Lab 3's
# cost model (printed: "chunk 512 17 decodes: 116.04ms opening, 123.36ms after2000",
# "chunk 128 17 decodes: 32.05ms opening, 33.88ms after2000").
@pytest.mark.parametrize("chunk, cached, expected", [
    (512, 0, 116.04), (512, 2000, 123.36), (128, 0, 32.05), (128, 2000, 33.88),
])
def test_hybrid_iteration_module10_lab3(host, chunk, cached, expected):
    r = infermodel.evaluate(CHUNKED, {"levers.chunked_prefill.chunk_tokens": chunk,
                                      "levers.chunked_prefill.cached_tokens": cached})
    assert _ms(r["hybrid_iteration_time"]) == expected
    assert r["chunk_decode_sequences"] == 17 and r["chunk_decode_context"] == 5000
    # compute-bound at 50 % of 165 TFLOP/s, as Lab 3 runs every iteration
    assert r["flops_effective_prefill"] == pytest.approx(0.5 * 165e12)
    assert r["hybrid_time_compute"] > r["hybrid_time_memory"]
    assert not r.warnings


def test_the_plain_decode_step_and_the_stall(host):
    # Lab 3 prints "decode18 18.77ms": the step of all 18 sequences without a chunk.
    r = infermodel.evaluate(CHUNKED)
    assert _ms(r["decode_step_time"]) == 18.77
    assert r["chunk_stall_vs_decode"] == pytest.approx(r["hybrid_iteration_time"] / r["decode_step_time"])
    assert round(r["chunk_stall_vs_decode"], 2) == 6.18
    assert r["prefill_chunks"] == 8
    assert infermodel.evaluate(CHUNKED, {"levers.chunked_prefill.chunk_tokens": 128})["prefill_chunks"] == 32
    assert infermodel.evaluate(CHUNKED, {"levers.chunked_prefill.chunk_tokens": 300})["prefill_chunks"] == 14


def test_counts_follow_lab3(host):
    r = infermodel.evaluate(CHUNKED, {"levers.chunked_prefill.cached_tokens": 2000})
    d, c, k, p = 17, 5000, 512, 2000
    assert r["hybrid_positions"] == d + k
    assert r["hybrid_attention_pairs"] == d * c + k * p + k * (k + 1) / 2
    assert r["hybrid_bytes"] == pytest.approx(5.5e9 + 147456 * (d * c + p), rel=1e-12)
    flops = 2 * 8927875072 * (d + k) + 4 * 36 * 4096 * r["hybrid_attention_pairs"]
    assert r["hybrid_flops"] == pytest.approx(flops, rel=1e-12)


def test_a_whole_prompt_as_one_chunk_is_lab3s_prefill(host):
    # Lab 3 prints "prefill4000 0.923s": one 4,000-token chunk and no decodes.
    r = infermodel.evaluate(CHUNKED, {"workload.batch": 1, "levers.chunked_prefill.chunk_tokens": 4000})
    assert r["chunk_decode_sequences"] == 0
    assert round(r["hybrid_iteration_time"], 3) == 0.923
    assert r["prefill_chunks"] == 1


@settings(max_examples=40, deadline=None)
@given(decodes=st.integers(0, 64), context=st.integers(0, 20000), chunk=st.integers(1, 4000),
       cached=st.integers(0, 4000), t0=st.sampled_from([0.0, 3e-4]), mbu=st.sampled_from([1.0, 0.7]))
def test_same_time_as_the_simulators_cost_model(decodes, context, chunk, cached, t0, mbu):
    cached = min(cached, 4000 - chunk)
    from infermodel.host import PluginHost, set_host

    set_host(PluginHost())
    try:
        r = infermodel.evaluate(CHUNKED, {
            "levers.chunked_prefill.chunk_tokens": chunk, "levers.chunked_prefill.cached_tokens": cached,
            "levers.chunked_prefill.decode_sequences": decodes,
            "levers.chunked_prefill.decode_context": context,
            "efficiency.t0": t0, "efficiency.mbu": mbu})
    finally:
        set_host(None)
    cost = CostModel.from_quantities({name: r[name] for name in QUANTITY_NAMES if name in r})
    expected = cost.iteration_time([context] * decodes, [(chunk, cached)])
    assert r["hybrid_iteration_time"] == pytest.approx(expected, rel=1e-12)
    assert r["prefill_chunks"] == math.ceil(4000 / chunk)


def test_defaults_follow_the_scenario(host, write_scenario):
    path = write_scenario(f'extends = "{BASE}"\n[workload]\nbatch = 5\n[levers.chunked_prefill]\n')
    r = infermodel.evaluate(path)
    assert r["chunk_tokens"] == 256 and r["chunk_cached_tokens"] == 0
    assert r["chunk_decode_sequences"] == 4 and r["chunk_decode_context"] == r["context"] == 5000
    one = infermodel.evaluate(path, {"workload.batch": 1})
    assert one["chunk_decode_sequences"] == 0


def test_the_lever_changes_no_base_quantity(host):
    base = infermodel.evaluate(BASE, {"workload.batch": 18})
    r = infermodel.evaluate(CHUNKED)
    for name in ("ttft", "tpot", "tokens_per_s_total", "max_sequences", "prefill_time"):
        assert r[name] == pytest.approx(base[name], rel=1e-12)
        assert not r.graph[name].history[1:]


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("setting, needles", [
    ("levers.chunked_prefill.chunk_tokens=5000",
     ["levers.chunked_prefill.chunk_tokens", "larger than the prompt of 4,000 tokens"]),
    ("levers.chunked_prefill.cached_tokens=3600",
     ["levers.chunked_prefill.cached_tokens", "run past the prompt", "at most 3,488"]),
    ("levers.chunked_prefill.chunk_tokens=0", ["chunk_tokens = 0 must be at least 1"]),
    ("levers.chunked_prefill.decode_sequences=-1", ["decode_sequences = -1 must be at least 0"]),
    ("levers.chunked_prefill.decode_context=-5", ["decode_context = -5.0 must be at least 0"]),
    ("levers.chunked_prefill.chunk_tokens=12.5", ["chunk_tokens", "an integer"]),
    ("levers.chunked_prefill.chunk_token=128", ["did you mean 'chunk_tokens'"]),
])
def test_bad_values_are_reported(host, capsys, setting, needles):
    assert main(["run", str(CHUNKED), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_check_accepts_the_shipped_scenario(host, capsys):
    assert main(["check", str(CHUNKED)]) == 0
    assert "chunked_prefill" in capsys.readouterr().out
