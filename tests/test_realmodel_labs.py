"""Module 10's Labs 2, 5 and 6 on a real random decoder (``validate SCENARIO --lab N``).

Correctness is asserted (positions, padding, prefix reuse, speculative decoding's output
and rollback); times are only reported. The lab scenarios' own figures are checked by
hand from the lab's numbers.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import SCENARIOS  # noqa: E402
from infermodel.accuracy import labs  # noqa: E402
from infermodel.accuracy.decoder import Shape, TinyDecoder  # noqa: E402
from infermodel.cli import main  # noqa: E402

SMALL = Shape(layers=2, d_model=128, heads=4, kv_heads=2, head_dim=32, d_ff=256, vocab=512,
              gated=True, tied=False)
#: Module 10 Lab 2's untrained decoder: four blocks, width 256, eight query heads of 32,
#: two KV heads, a 688-wide SwiGLU, a 512-token vocabulary.
LAB2_TOY = Shape(layers=4, d_model=256, heads=8, kv_heads=2, head_dim=32, d_ff=688, vocab=512,
                 gated=True, tied=False)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyDecoder(SMALL)


@pytest.fixture(autouse=True)
def no_grad():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small products: one thread, no contention on a shared machine
    with torch.inference_mode():
        yield
    torch.set_num_threads(threads)


def test_lab2_frozen_position_and_reused_prefix_offset_are_caught_by_logits(model):
    frozen = labs.lab2_frozen_position(model, steps=16)
    assert frozen.passed, frozen.detail
    assert frozen.values["first_logit_step"] is not None
    check, table = labs.lab2_prefix(model, prefix=24, suffixes=(6, 5), repeats=1)
    assert check.passed, check.detail
    assert check.values["max_logit_error"] < 1e-3 < check.values["offset_min_difference"]
    assert table.columns[:3] == ("suffix", "cold ms", "warm ms") and len(table.rows) == 2


def test_lab2_left_padding_needs_the_mask_not_the_column_positions(model):
    check = labs.lab2_left_padding(model, lengths=(12, 19, 14), steps=8)
    assert check.passed, check.detail
    assert check.values["tokens_equal"]
    assert check.values["unmasked_min_difference"] > 1e-3
    # rotary attention sees distances: a shift shared by a row's tokens changes rounding only
    assert check.values["column_positions_difference"] < 1e-3


def test_lab2_cache_after_generation_is_the_labs_555008_bytes():
    # Module 10, Lab 2: a 16-token prompt and 256 greedy tokens leave 271 cached positions
    # (the last emitted token is not forwarded); float32 keys and values of 2 KV heads of
    # 32 in 4 layers: 2 · 4 · 2 · 32 · 4 = 2,048 bytes a position, 555,008 bytes.
    toy = TinyDecoder(LAB2_TOY)
    assert sum(p.numel() for p in toy.parameters()) == 3_033_344  # "Toy parameters: 3033344"
    # the cache of 271 positions, as the generation leaves it (one forward of them here)
    from infermodel.accuracy.decoder import cache_bytes

    _, cache = toy(labs._random_tokens(512, (1, 271), 1), torch.arange(271)[None])
    assert cache_bytes(cache) == 555_008 == 271 * 2 * 4 * 2 * 32 * 4


def test_lab2_cache_bytes_after_a_generation(model):
    # 2 · 2 layers · 2 KV heads · 32 · 4 bytes = 1,024 bytes a position, 10 + 12 − 1 positions
    check = labs.lab2_cache_bytes(model, 1024, prompt=10, steps=12)
    assert check.passed and check.values["positions"] == 21 and check.values["measured"] == 21_504


def test_lab2_scenario_states_the_toy_decoder():
    import infermodel

    result = infermodel.evaluate(SCENARIOS / "module10-lab2-toy-decoder.toml")
    assert result["params_total"] == 3_033_344
    assert result["kv_bytes_per_token"] == 2_048
    assert result["kv_bytes_per_sequence"] == 555_008  # 271 positions, the lab's figure


def test_lab2_timing_table_reports_both_paths(model):
    table = labs.lab2_timing(model, (4, 8), prompt=6)
    assert [row[0] for row in table.rows] == [4, 8]
    assert all(row[1] > 0 and row[2] > 0 for row in table.rows)


def test_lab5_speculative_decoding_with_rollback_equals_the_target(model):
    prompts = [labs._random_tokens(SMALL.vocab, (1, 10), 40 + i) for i in range(2)]
    baseline = [labs.generate(model, x, 14)[0] for x in prompts]
    accepted = rejected = 0
    for propose in (lambda: labs.layer_skip_draft(model, 1), labs.ngram_draft):
        for gamma in (2, 4):
            for x, base in zip(prompts, baseline):
                run = labs.speculative_greedy(model, x, 14, propose(), gamma)
                assert torch.equal(run["tokens"], base)
                accepted += run["accepted"]
                rejected += run["rejected"]
    # the rollback was exercised: proposals were both accepted and refused
    assert accepted > 0 and rejected > 0


def test_lab5_a_draft_that_always_agrees_commits_gamma_plus_one_tokens(model):
    prompt = labs._random_tokens(SMALL.vocab, (1, 8), 3)
    truth = labs.generate(model, prompt, 16)[0][0].tolist()

    def oracle(ids, gamma):  # proposes the target's own continuation
        done = ids.shape[1] - 8
        return truth[done:done + gamma]

    run = labs.speculative_greedy(model, prompt, 16, oracle, 3)
    assert run["tokens"][0].tolist() == truth
    assert run["iterations"] == 4 and run["rejected"] == 0  # 16 tokens, 4 per iteration


def test_lab5_costs_and_tables(model):
    checks, tables = labs.lab5(model, steps=8, prompts=1, gammas=(2,), repeats=1)
    assert all(c.passed for c in checks) and len(checks) == 2
    costs, runs = tables
    assert costs.rows[1][2] > 0  # c measured
    assert [row[0] for row in runs.rows] == ["layer-skip draft", "n-gram draft"]
    alpha, gamma, predicted = runs.rows[0][2], runs.rows[0][1], runs.rows[0][5]
    assert predicted == pytest.approx(sum(alpha ** k for k in range(gamma + 1)))


def test_the_ngram_draft_proposes_what_followed_the_last_match():
    ids = torch.tensor([[5, 6, 7, 8, 9, 5, 6, 7]])
    assert labs.ngram_draft(3)(ids, 2) == [8, 9]
    assert labs.ngram_draft(3)(torch.tensor([[1, 2, 3]]), 2) == []


def test_lab6_table_and_padded_invariance(model):
    table = labs.lab6_batches(model, lambda phase, b, ctx: 0.01 + 1e-4 * b, batches=(1, 2, 4),
                              steps=6)
    assert [row[0] for row in table.rows] == [1, 2, 4]
    for b, _ttft, step, per_seq, total, predicted, ratio in table.rows:
        assert total == pytest.approx(b * per_seq) and per_seq == pytest.approx(1e3 / step)
        assert predicted == pytest.approx(10 + 0.1 * b) and ratio == pytest.approx(step / predicted)
    check = labs.lab6_padded_invariance(model, steps=8)
    assert check.passed and check.values["padding_columns"] == 7  # 12 tokens padded to 19


@pytest.mark.parametrize(("batch", "context", "predicted_ms"),
                         [(1, 44, 11.20), (2, 51, 11.25), (4, 51, 11.35), (8, 51, 11.54),
                          (16, 51, 11.93)])
def test_lab6_scenario_reproduces_the_labs_predicted_steps(batch, context, predicted_ms):
    # Module 10, Lab 6: memory = (4n + b · 46080 · ctx) / (48.24 GB/s), n = 134,515,008,
    # ctx = padded length + 32 (12 for the first prompt alone, 19 for the first 2–16).
    import infermodel

    by_hand = (4 * 134_515_008 + batch * 46_080 * context) / 48.24e9
    assert round(by_hand * 1e3, 2) == predicted_ms
    result = infermodel.evaluate(SCENARIOS / "module10-lab6-batching.toml",
                                 {"workload.batch": batch, "workload.context": context})
    assert result["decode_step_time"] == pytest.approx(by_hand, rel=1e-12)


def test_validate_lab_arguments_are_checked(capsys, tmp_path):
    toy = str(SCENARIOS / "module10-lab2-toy-decoder.toml")
    assert main(["validate", toy, "--plot", str(tmp_path / "x.png")]) == 2
    assert "--lab 6" in capsys.readouterr().err
    assert main(["validate", "--ledger", "builtin", "--lab", "2"]) == 2
    assert "--lab applies to SCENARIO" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # argparse refuses a lab it does not know
        main(["validate", toy, "--lab", "3"])
    assert stopped.value.code == 2


@pytest.mark.slow
def test_validate_runs_every_lab_on_the_toy_decoder(capsys, tmp_path):
    machine = tmp_path / "machine.toml"
    machine.write_text('[preset]\ndescription = "test"\nsource = "test"\nt0 = "10 us"\n\n'
                       '[hardware]\nmemory = "16 GB"\nbandwidth = "20 GB/s"\nflops = "100 GFLOP/s"\n')
    plot = tmp_path / "lab6.png"
    status = main(["validate", str(SCENARIOS / "module10-lab2-toy-decoder.toml"), "--quick",
                   "--lab", "2", "--lab", "5", "--lab", "6", "--hardware-preset", str(machine),
                   "--plot", str(plot), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert status == 0 and data["passed"]
    assert {t["title"] for t in data["tables"]} == {
        "Lab 2: a reused prefix, cold and warm", "Lab 2: cached against recomputed generation",
        "Lab 5: draft and verification costs", "Lab 5: greedy speculative decoding",
        "Lab 6: batches of left-padded prompts"}
    assert plot.read_bytes().startswith(b"\x89PNG")
