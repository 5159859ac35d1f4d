"""Witness experiments: the hook, the core that runs them, the command, and the three
built-in witnesses (Inference lab, "Memory that grows with every token", "Fewer bits
per weight" and "Guess ahead, check in one pass").
"""

from __future__ import annotations

import json
import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel import hookimpl
from infermodel.analyses.witnessing import Option, Row, Witness, run_witness, scenario_witnesses
from infermodel.cli import main
from infermodel.errors import InfermodelError, PluginError
from infermodel_builtins import witness_kv_cache as kv
from infermodel_builtins import witness_speculative as spec
from infermodel_builtins import witness_sqnr as wsqnr

BASE = SCENARIOS / "module10-case-base.toml"


def _scenario(path=BASE):
    return infermodel.load_scenario(path)


def _defaults(options):
    return {key: option.default for key, option in options.items()}


# ---------------------------------------------------------------------------------
# infermodel_register_witnesses and the core
# ---------------------------------------------------------------------------------


class _Echo:
    """A witness that reports its typed options back."""

    @hookimpl
    def infermodel_register_witnesses(self, register):
        def echo(scenario, options):
            return Witness(rows=[("count", options["count"], 3, "1"),
                                 Row("ratio", options["ratio"], 1.0, tolerance=0.1, relative=True)],
                           parameters=dict(options))

        register("echo", echo, description="echoes its options", reference="nowhere, §0",
                 options={"count": Option(3, "a count", minimum=1),
                          "ratio": Option(1.0, "a ratio", maximum=2.0),
                          "loud": Option(False, "a switch"),
                          "label": Option(None, "derived unless given", kind=str)})


def test_infermodel_register_witnesses_runs_the_witness_with_typed_options(register_plugin):
    register_plugin(_Echo(), "echo_plugin")
    info = infermodel.get_host().registries.witnesses["echo"]
    assert (info.plugin, info.reference) == ("echo_plugin", "nowhere, §0")
    witness = run_witness(_scenario(), "echo", {"count": "7", "ratio": "1.05", "loud": "true"})
    # The core fills in what the registration says, and types --option text.
    assert (witness.name, witness.plugin, witness.reference) == ("echo", "echo_plugin", "nowhere, §0")
    assert witness.parameters == {"count": 7, "ratio": 1.05, "loud": True, "label": None}
    assert [r.ok for r in witness.rows] == [None, True] and witness.passed
    assert run_witness(_scenario(), "echo", {"ratio": 1.2}).rows[1].ok is False


def test_infermodel_register_witnesses_refuses_unknown_names_and_bad_options(register_plugin):
    register_plugin(_Echo(), "echo_plugin")
    with pytest.raises(InfermodelError, match="no loaded plugin provides a witness named 'ecko'.*"
                                              "did you mean 'echo'"):
        run_witness(_scenario(), "ecko")
    with pytest.raises(InfermodelError) as caught:
        run_witness(_scenario(), "echo", {"cuont": 2, "ratio": "x", "count": 0, "loud": 1})
    text = caught.value.render()
    assert "4 errors encountered" in text
    assert "--option cuont: witness 'echo' has no option 'cuont'" in text and "did you mean 'count'" in text
    assert "--option ratio: got 'x' (expected a number, <= 2)" in text
    assert "--option count: 0 is below 1" in text
    assert "--option loud: got 1 (expected true or false)" in text


def test_infermodel_register_witnesses_same_name_twice_names_both_plugins(register_plugin):
    register_plugin(_Echo(), "first")
    register_plugin(_Echo(), "second")
    with pytest.raises(PluginError, match="witness 'echo' is registered by both 'first' and 'second'"):
        infermodel.get_host().registries  # noqa: B018


class _Broken:
    @hookimpl
    def infermodel_register_witnesses(self, register):
        register("raises", lambda scenario, options: 1 / 0, description="divides by zero")
        register("wrong_type", lambda scenario, options: 42, description="returns a number")


def test_infermodel_register_witnesses_failures_name_the_plugin(register_plugin):
    register_plugin(_Broken(), "broken")
    with pytest.raises(PluginError, match="plugin 'broken' failed in witness 'raises': "
                                          "ZeroDivisionError"):
        run_witness(_scenario(), "raises")
    with pytest.raises(PluginError, match="returned int, not an infermodel.analyses.witnessing.Witness"):
        run_witness(_scenario(), "wrong_type")


def test_infermodel_register_witnesses_checks_what_is_registered(register_plugin):
    class BadOption:
        @hookimpl
        def infermodel_register_witnesses(self, register):
            register("bad", lambda s, o: None, description="x", options={"n": 3})

    register_plugin(BadOption(), "bad_option")
    with pytest.raises(PluginError, match="option 'n' must be an infermodel.analyses.witnessing.Option"):
        infermodel.get_host().registries  # noqa: B018


def test_rows_judge_within_tolerance():
    assert Row("exact", 10, 10, tolerance=0).ok is True
    assert Row("exact", 10, 11, tolerance=0).ok is False
    assert Row("relative", 1.09, 1.0, tolerance=0.1, relative=True).ok is True
    assert Row("relative", 1.11, 1.0, tolerance=0.1, relative=True).ok is False
    assert Row("not a number", float("nan"), 1.0, tolerance=1).ok is False
    assert Row("reported only", 3.0, None).ok is None and Row("no tolerance", 3, 4).ok is None
    witness = Witness(rows=[("a", 1, 1, "1"), Row("b", 2, 1, tolerance=0)], name="w")
    assert not witness.passed and [r.label for r in witness.failures] == ["b"]
    assert "FAILED: 1 of 1 checks outside tolerance" in witness.text()
    assert json.loads(json.dumps(witness.to_dict()))["passed"] is False
    with pytest.raises(TypeError):
        Witness(rows=["not a row"])
    with pytest.raises(TypeError):
        Option([1, 2], "a list is not an option kind")


def test_a_scenario_lists_witnesses_in_a_witness_table(write_scenario):
    path = write_scenario(f'extends = "{BASE.as_posix()}"\n[witness]\nsqnr = false\n'
                          'speculative = true\n[witness.kv_cache]\nd = 4\nsteps = 3\n')
    planned = scenario_witnesses(_scenario(path))
    assert planned == [("speculative", {}), ("kv_cache", {"d": 4, "steps": 3})]
    bad = write_scenario(f'extends = "{BASE.as_posix()}"\n[witness]\nkv_cach = true\n'
                         'sqnr = 3\n[witness.speculative]\nsymbols = 1\n', "bad.toml")
    with pytest.raises(InfermodelError) as caught:
        scenario_witnesses(_scenario(bad))
    text = caught.value.render()
    assert "bad.toml:3: witness.kv_cach: no loaded plugin provides a witness named 'kv_cach'" in text
    assert "did you mean 'kv_cache'?" in text
    assert "bad.toml:4: witness.sqnr: got 3" in text
    assert "bad.toml:6: witness.speculative.symbols: 1 is below 2" in text
    # `check` reports the same problems, and accepts the good table.
    assert main(["check", str(bad)]) == 2
    assert main(["check", str(path)]) == 0


# ---------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------


def test_witness_command_lists_runs_and_prints_json(capsys):
    assert main(["witness", str(BASE), "--list"]) == 0
    listing = capsys.readouterr().out
    for name in ("kv_cache", "speculative", "sqnr"):
        assert f"{name}: " in listing
    assert "    steps = 12: tokens generated, N" in listing
    assert main(["witness", str(BASE), "kv_cache", "--option", "d=8", "--option", "steps=5"]) == 0
    text = capsys.readouterr().out
    assert "d = 8, vocab = 32, steps = 5" in text and "passed: 8 of 8" in text
    assert main(["witness", str(BASE), "kv_cache", "--option", "d=8", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "kv_cache" and data["passed"] is True
    assert data["reference"] == "Inference lab, 'Memory that grows with every token'"


def test_witness_command_user_mistakes_exit_2(capsys, write_scenario):
    assert main(["witness", str(BASE), "kv_cahce"]) == 2
    assert "did you mean 'kv_cache'?" in capsys.readouterr().err
    assert main(["witness", str(BASE), "kv_cache", "--option", "d"]) == 2
    assert "is not KEY=VALUE" in capsys.readouterr().err
    assert main(["witness", str(BASE), "kv_cache", "--option", "d=2000"]) == 2
    assert "--option d: 2000 is above 1024" in capsys.readouterr().err
    assert main(["witness", str(BASE)]) == 2
    assert "no [witness] table" in capsys.readouterr().err
    path = write_scenario(f'extends = "{BASE.as_posix()}"\n[witness.kv_cache]\nsteps = 4\n'
                          '[witness.sqnr]\nhidden = 4\n')
    assert main(["witness", str(path), "--format", "json"]) == 0
    assert [w["name"] for w in json.loads(capsys.readouterr().out)] == ["kv_cache", "sqnr"]


def test_witness_command_exits_1_when_a_check_fails(monkeypatch, capsys):
    # A formula that disagrees with the experiment is a bug: reported, exit status 1.
    monkeypatch.setattr(kv, "total_cached", lambda d, vocab, steps: 1)
    assert main(["witness", str(BASE), "kv_cache"]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "1 of 8 checks outside tolerance" in captured.err


# ---------------------------------------------------------------------------------
# kv_cache: Inference lab, "Memory that grows with every token"
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d, vocab, steps", [(1, 2, 1), (4, 7, 3), (16, 32, 12), (8, 100, 30),
                                             (33, 5, 17)])
def test_kv_cache_counted_multiply_adds_equal_the_closed_forms(d, vocab, steps):
    weights = kv.decoder_weights(d, vocab, steps, seed=d + steps)
    tokens_c, logits_c, counts_c = kv.generate(weights, steps, cached=True)
    tokens_u, logits_u, counts_u = kv.generate(weights, steps, cached=False)
    assert counts_c == [4 * d * d + 2 * d * (t + 1) + d * vocab for t in range(steps)]
    assert counts_u == [2 * d * d + 2 * d * d * (t + 1) + 2 * d * (t + 1) + d * vocab
                        for t in range(steps)]
    assert sum(counts_c) == steps * (4 * d * d + d * vocab) + d * steps * (steps + 1)
    assert sum(counts_u) == steps * (2 * d * d + d * vocab) + (d * d + d) * steps * (steps + 1)
    assert tokens_c == tokens_u
    np.testing.assert_allclose(logits_c, logits_u, rtol=1e-12, atol=1e-12)


@given(d=st.integers(1, 4096), vocab=st.integers(1, 200_000), steps=st.integers(1, 10_000))
def test_kv_cache_sums_of_the_step_forms_are_the_closed_sums(d, vocab, steps):
    # The closed sums are the step forms summed over t = 0 .. N−1 (exact integers).
    t = np.arange(steps, dtype=object)
    assert kv.total_cached(d, vocab, steps) == sum(kv.step_cached(d, vocab, t))
    assert kv.total_uncached(d, vocab, steps) == sum(kv.step_uncached(d, vocab, t))


def test_kv_cache_counter_counts_from_shapes():
    counter = kv.MacCounter()
    counter.matmul(np.ones(3), np.ones((3, 5)))          # vector × matrix: 15
    counter.matmul(np.ones((4, 3)), np.ones((3, 5)))     # matrix × matrix: 60
    counter.matmul(np.ones((4, 3)), np.ones(3))          # matrix × vector: 12
    counter.matmul(np.ones(4), np.ones((4, 2)))          # weights × values: 8
    assert counter.total == 95
    with pytest.raises(ValueError, match="do not multiply"):
        counter.matmul(np.ones(3), np.ones((4, 5)))


def test_kv_cache_witness_passes_and_uses_the_scenario_scaled_down():
    scenario = _scenario()
    witness = run_witness(scenario, "kv_cache", {"scale": 512, "steps": 6})
    assert witness.passed and len(witness.judged) == 8
    # d_model 4,096 and vocab 152,064 (Module 10 case model) divided by 512.
    assert (witness.parameters["d"], witness.parameters["vocab"]) == (8, 297)
    full = {row.label: row.predicted for row in witness.rows if row.measured is None}
    # The closed forms at the scenario's own sizes (output_tokens 2,000), for scale.
    assert full["closed form with the cache at d = 4,096, V = 152,064, N = 2,000"] == \
        kv.total_cached(4096, 152064, 2000)
    with pytest.raises(InfermodelError, match="larger than this witness runs"):
        run_witness(scenario, "kv_cache", {"scale": 2})


def test_kv_cache_witness_fails_when_the_cache_changes_the_result(monkeypatch):
    original = kv.generate

    def stale(weights, steps, *, cached, start=0):
        tokens, logits, counts = original(weights, steps, cached=cached, start=start)
        return tokens, logits + (1e-6 if cached else 0.0), counts

    monkeypatch.setattr(kv, "generate", stale)
    witness = run_witness(_scenario(), "kv_cache", {})
    assert [row.label for row in witness.failures] == ["largest logit difference (relative)"]


# ---------------------------------------------------------------------------------
# speculative: Inference lab, "Guess ahead, check in one pass"
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("m, p", [(1, 0.3), (2, 0.5), (7, 0.2), (30, 0.05), (50, 0.9), (12, 1 / 3)])
def test_speculative_binomial_mean_absolute_deviation_is_exact(m, p):
    brute = math.fsum(math.comb(m, x) * p**x * (1 - p) ** (m - x) * abs(x - m * p)
                      for x in range(m + 1))
    assert spec.mean_absolute_deviation(m, p) == pytest.approx(brute, rel=1e-9, abs=1e-12)
    assert spec.mean_absolute_deviation(m, 0.0) == spec.mean_absolute_deviation(m, 1.0) == 0.0


@pytest.mark.parametrize("seed, blend, k", [(0, 0.5, 4), (1, 0.2, 2), (2, 0.9, 6), (3, 0.0, 3)])
def test_speculative_witness_reproduces_the_target(seed, blend, k):
    options = {**_defaults(spec.OPTIONS), "seed": seed, "blend": blend, "k": k, "samples": 20_000}
    witness = run_witness(_scenario(), "speculative", options)
    assert witness.passed, witness.text()
    tvs = [row.measured for row in witness.rows if row.label.startswith("TV(emitted")]
    assert len(tvs) == 3 and tvs[-1] < tvs[0]


def test_speculative_acceptance_is_the_overlap_of_the_two_laws():
    target, draft = spec.markov_models(8, 0.5, seed=5)
    alpha = spec.acceptance(target, draft)
    assert np.allclose(alpha, 1 - 0.5 * np.abs(target - draft).sum(axis=1))   # α = 1 − TV
    run = spec.speculative_decode(target, draft, k=3, n=50_000, seed=5)
    measured = run.accepted.sum() / run.checked.sum()
    expected = run.checked @ alpha / run.checked.sum()
    error = math.sqrt(run.checked @ (alpha * (1 - alpha))) / run.checked.sum()
    assert abs(measured - expected) < 5 * error
    # min(p, q) + max(0, p − q) = p: accepted mass plus residual mass is the target.
    rebuilt = np.minimum(target, draft) + (1 - alpha)[:, None] * spec.residual(target, draft)
    assert np.allclose(rebuilt, target)


def test_speculative_draft_equal_to_target_accepts_everything():
    target, draft = spec.markov_models(8, 0.0, seed=1)
    run = spec.speculative_decode(target, draft, k=4, n=1_000, seed=1)
    assert run.accepted.sum() == run.checked.sum()
    assert len(run.tokens) == 5 * run.target_passes          # k + 1 tokens every pass


def test_speculative_witness_catches_a_wrong_rule(monkeypatch):
    # Replacing a rejected token with a draw from the target instead of the residual
    # biases the output; the witness must see it.
    monkeypatch.setattr(spec, "residual", lambda target, draft: target)
    options = {**_defaults(spec.OPTIONS), "k": 4}
    witness = run_witness(_scenario(), "speculative", options)
    assert not witness.passed
    assert "TV(emitted, target), n = 100,000" in [row.label for row in witness.failures]


def test_speculative_witness_takes_k_from_the_scenario_lever(write_scenario):
    path = write_scenario(f'extends = "{(SCENARIOS / "spec-lab5.toml").as_posix()}"\n'
                          "[levers.speculative]\nk = 2\n")
    witness = run_witness(_scenario(path), "speculative", {"samples": 1000, "points": 1})
    assert witness.parameters["k"] == 2
    assert run_witness(_scenario(path), "speculative", {"samples": 1000, "points": 1, "k": 6}) \
        .parameters["k"] == 6
    assert run_witness(_scenario(), "speculative", {"samples": 1000, "points": 1}) \
        .parameters["k"] == 4


# ---------------------------------------------------------------------------------
# sqnr: Inference lab, "Fewer bits per weight"
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bits, group", list(product([3, 4, 8], [8, 32, 128, 4096])))
def test_sqnr_witness_measured_matches_predicted(bits, group):
    witness = run_witness(_scenario(), "sqnr", {"bits": bits, "group_size": group, "seed": bits})
    assert witness.passed, witness.text()
    assert witness.parameters["weights"] >= 64 * group


def test_sqnr_outlier_network_computes_the_same_function_and_loses_its_small_weights():
    witness = run_witness(_scenario(), "sqnr", {"bits": 4})
    rows = {row.label: row for row in witness.rows}
    assert rows["network output change after ×20 / ÷20"].measured < 1e-12
    plain = rows["ordinary first-layer weights rounded to zero, plain"].measured
    outlier = rows["ordinary first-layer weights rounded to zero, with the outlier"].measured
    assert outlier > plain and outlier > 0.9         # almost every small weight is gone
    error_plain = rows["network output error, RMS relative, plain"].measured
    error_outlier = rows["network output error, RMS relative, with the outlier"].measured
    assert error_outlier > 5 * error_plain
    # Exactness of the rescaling, for any positive factor.
    net = wsqnr.network(2, 16, 2, seed=3)
    x = np.random.default_rng(0).standard_normal((200, 2))
    np.testing.assert_allclose(wsqnr.forward(wsqnr.with_outlier(net, 5, 20.0), x),
                               wsqnr.forward(net, x), rtol=1e-12, atol=1e-12)


def test_sqnr_witness_takes_bits_and_group_from_the_quantization_lever():
    witness = run_witness(_scenario(SCENARIOS / "quant-int4.toml"), "sqnr", {"hidden": 4})
    assert (witness.parameters["bits"], witness.parameters["group_size"]) == (4, 128)
    assert witness.passed


@settings(max_examples=10, deadline=None)
@given(bits=st.integers(3, 8), seed=st.integers(0, 2**16))
def test_sqnr_witness_passes_for_any_seed(bits, seed):
    assert run_witness(_scenario(), "sqnr", {"bits": bits, "seed": seed}).passed
