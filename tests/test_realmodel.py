"""`infermodel validate SCENARIO`: a random decoder of the scenario's shape on this machine.

The cache bytes are exact, and Module 10's Lab 2 and Lab 6 checks must pass; the step
times are only reported (a shared machine's timings vary by several times).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import SCENARIOS  # noqa: E402
from infermodel.accuracy.decoder import (  # noqa: E402
    Shape,
    TinyDecoder,
    cache_bytes,
    check_batch_invariance,
    check_cached_logits,
    generate,
    small_shape,
)
from infermodel.cli import main  # noqa: E402

SHAPE = Shape(layers=2, d_model=128, heads=4, kv_heads=2, head_dim=32, d_ff=256, vocab=512,
              gated=True, tied=False)


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A fixed hardware preset, so the tests do not time a calibration."""
    path = tmp_path_factory.mktemp("hw") / "machine.toml"
    path.write_text('[preset]\ndescription = "test"\nsource = "test"\nt0 = "10 us"\n\n'
                    '[hardware]\nmemory = "16 GB"\nbandwidth = "20 GB/s"\nflops = "100 GFLOP/s"\n')
    return path


def test_cache_holds_exactly_kv_bytes_per_token_per_position():
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2)):
        model = TinyDecoder(SHAPE, cache_dtype=dtype)
        prompt = torch.randint(SHAPE.vocab, (3, 10))
        with torch.inference_mode():
            _, _, cache = generate(model, prompt, 5)
        # Module 10 §3: keys and values of every layer, kv_heads · head_dim values each.
        per_token = 2 * SHAPE.layers * SHAPE.kv_heads * SHAPE.head_dim * size
        assert cache_bytes(cache) == 3 * (10 + 4) * per_token


def test_lab2_cached_logits_agree_and_an_off_by_one_is_caught():
    agree, off_by_one = check_cached_logits(TinyDecoder(SHAPE))
    assert agree.passed and agree.values["tokens_equal"]
    assert agree.values["max_logit_difference"] < 1e-3
    assert off_by_one.passed
    first_token = off_by_one.values["first_token_step"]
    assert first_token is None or off_by_one.values["first_logit_step"] <= first_token


def test_lab6_batch_invariance_with_the_top_two_gap():
    check = check_batch_invariance(TinyDecoder(SHAPE))
    assert check.passed
    assert check.values["smallest_top_two_gap"] > 0


def test_a_broken_cache_fails_the_lab2_check(monkeypatch):
    """The check can fail: a cache that drops its oldest position changes the logits."""
    model = TinyDecoder(SHAPE)
    original = model.forward

    def forgetful(tokens, positions, cache=None, **kw):
        if cache is not None:
            cache = [(k[:, :, 1:], v[:, :, 1:]) for k, v in cache]
        return original(tokens, positions, cache, **kw)

    monkeypatch.setattr(model, "forward", forgetful)
    agree, _ = check_cached_logits(model)
    assert not agree.passed


def test_small_shape_keeps_the_head_ratio_and_block_kind():
    small = small_shape(Shape(32, 4096, 32, 8, 128, 14336, 128256, True, False))
    assert small.heads // small.kv_heads == 4 and small.gated
    assert small.d_model == small.heads * small.head_dim <= 256


@pytest.mark.slow
def test_validate_scenario_command(preset, capsys):
    scenario = str(SCENARIOS / "quant-bf16.toml")
    status = main(["validate", scenario, "--quick", "--hardware-preset", str(preset),
                   "--calibrated", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert status == 0 and data["passed"]
    names = {c["name"] for c in data["checks"]}
    assert names == {"cache bytes", "cached vs uncached logits",
                     "off-by-one position caught by logits", "batch invariance"}
    cache = next(c for c in data["checks"] if c["name"] == "cache bytes")
    assert cache["values"]["measured"] == cache["values"]["predicted"]
    assert data["cache_format"] == "bfloat16"
    assert {t["phase"] for t in data["timings"]} == {"prefill", "decode"}
    assert all(t["measured"] > 0 and t["predicted"] > 0 for t in data["timings"])


def test_validate_needs_a_target(capsys):
    assert main(["validate"]) == 2
    assert "nothing to validate" in capsys.readouterr().err
    assert main(["validate", str(SCENARIOS / "quant-bf16.toml"), "--ledger", "builtin"]) == 2
