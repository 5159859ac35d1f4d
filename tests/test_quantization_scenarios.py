"""The shipped quantisation scenario pair: weight-only int4 against bf16, at batch 1 and at
a cache-dominated batch, and what an 8-bit cache adds.

Module 10: Inference and serving ("Reducing stored weight bits can cut bandwidth-bound
decode traffic"; "Quantise the cache and evaluate the final artifact"): the gain of
smaller weights is a gain on the weight read only, so it shrinks as the cache grows.
"""

from __future__ import annotations

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel_builtins.quantization import weight_bytes_by_class

NAMES = ("bf16", "int4", "int4-kv8")
KV_BATCH = 32


@pytest.fixture(scope="module")
def results():
    out = {}
    for name in NAMES:
        path = SCENARIOS / f"quant-{name}.toml"
        out[name, 1] = infermodel.evaluate(path)
        out[name, KV_BATCH] = infermodel.evaluate(path, {"workload.batch": KV_BATCH})
    return out


def speedup(results, name, batch):
    return results["bf16", batch]["tpot"] / results[name, batch]["tpot"]


def test_weight_byte_ratio(results):
    bf16, int4 = results["bf16", 1], results["int4", 1]
    assert bf16["weight_bytes"] == 2 * 8_030_261_248
    assert int4["bits_per_weight_linear"] == 4.125
    by_class = weight_bytes_by_class(int4)
    assert by_class["embedding"] == weight_bytes_by_class(bf16)["embedding"]  # kept bf16
    ratio = bf16["weight_bytes"] / int4["weight_bytes"]
    assert 2.7 < ratio < 2.9


def test_batch_1_gain_approaches_the_byte_ratio(results):
    # Bytes a step reads: the artifact less the input-table rows it does not use.
    ratio = results["bf16", 1]["weight_bytes_per_step"] / results["int4", 1]["weight_bytes_per_step"]
    gain = speedup(results, "int4", 1)
    assert not results["int4", 1]["decode_compute_bound"]
    assert 0.9 * ratio < gain < ratio  # the cache read keeps it just under


def test_cache_dominated_batch_gain_is_well_under_the_byte_ratio(results):
    bf16 = results["bf16", KV_BATCH]
    cache = bf16["decode_bytes"] - bf16["weight_bytes_per_step"]
    assert cache > bf16["weight_bytes"]  # the batch really is cache-dominated
    ratio = bf16["weight_bytes"] / results["int4", KV_BATCH]["weight_bytes"]
    gain = speedup(results, "int4", KV_BATCH)
    assert not results["int4", KV_BATCH]["decode_compute_bound"]
    assert gain < 0.5 * ratio
    assert 1.2 < gain < 1.5


def test_quantising_the_cache_adds_most_at_the_large_batch(results):
    # 8 + 16/32 = 8.5 bits per cached value, metadata included.
    assert results["int4-kv8", 1]["kv_bytes_per_token"] == 131_072 * 8.5 / 16
    add_1 = speedup(results, "int4-kv8", 1) / speedup(results, "int4", 1)
    add_kv = speedup(results, "int4-kv8", KV_BATCH) / speedup(results, "int4", KV_BATCH)
    assert add_1 < 1.1
    assert add_kv > 1.5
    assert speedup(results, "int4-kv8", KV_BATCH) > 2
    # ... and it nearly doubles the full-length sequences the memory holds.
    assert results["int4-kv8", 1]["max_sequences"] > 1.8 * results["int4", 1]["max_sequences"]
