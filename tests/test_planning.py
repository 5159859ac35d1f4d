"""The deployment planner: its [plan] table, its answer reproduced by `simulate`, its
JSON, launch line and plot, and the property its replica search rests on.

The full example (Llama 3.1 70B FP8 at 20 requests/s on three cards,
scenarios/plan-70b-chat.toml) is answered in docs/planning.rst and timed against brute
force in benchmarks/bench_plan.py; the tests use a 3B model at 25 requests/s
(tests/data/plan-small.toml), which asks the same questions in a few seconds.
"""

from __future__ import annotations

import json
import shlex

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import DATA, SCENARIOS
from infermodel.cli import main

SMALL = DATA / "plan-small.toml"
EXAMPLE = SCENARIOS / "plan-70b-chat.toml"


@pytest.fixture(scope="module")
def found():
    from infermodel.analyses.planning import plan

    # A load that needs more than one replica of the best card (one fewer must miss).
    return plan(SMALL, overrides={"rate": 50})


def _simulated(capsys, command: str, replicas: int) -> dict:
    """Run a plan's reproduce line through the command line, with ``replicas`` servers."""
    words = shlex.split(command)[1:]
    words[words.index("--replicas") + 1] = str(replicas)
    capsys.readouterr()
    assert main([*words, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["runs"][0]


def test_best_deployment_is_reproduced_by_simulate_and_one_replica_fewer_misses(found, capsys):
    best = found.best
    assert best is not None and best.replicas >= 2
    command = best.command(str(SMALL))
    met = _simulated(capsys, command, best.replicas)
    assert met["slo_met"] is True
    # The same numbers the plan judged: same seed, same requests, same servers.
    for name in ("ttft_p95", "itl_p95", "goodput_fraction"):
        assert met["metrics"][name] == best.trial.metrics[name]
    fewer = _simulated(capsys, command, best.replicas - 1)
    assert fewer["slo_met"] is False
    assert best.below is not None and not best.below.met
    assert fewer["metrics"]["itl_p95"] == best.below.metrics["itl_p95"]


def test_answer_ranks_feasible_deployments_by_monthly_cost(found):
    costs = [d.cost.per_month for d in found.deployments]
    assert costs == sorted(costs) and len(costs) >= 2
    assert all(d.trial.met for d in found.deployments)
    cards = found.per_card()
    assert set(cards) <= {"l4", "l40s", "a100-40gb"} and found.best in cards.values()
    # Every figure of the best deployment has an interval around it, within its objective.
    for target in found.best.trial.verdict.targets:
        assert target.low <= target.value <= target.high and target.value <= target.limit


def test_plan_json_has_the_issue_shape(found):
    data = found.to_dict()
    best = data["best"]
    for key in ("hardware", "engine", "tp", "pp", "ep", "dp", "replicas", "gpus", "feasible",
                "cost_per_month", "cost_per_million_tokens", "cost_per_million_output_tokens",
                "metrics", "overrides"):
        assert key in best, key
    assert best["feasible"] is True and best["ep"] == 1 and best["dp"] == 1
    assert best["gpus"] == best["replicas"] * best["tp"] * best["pp"]
    assert {"ttft_p95", "itl_p95", "goodput_fraction"} <= set(best["metrics"])
    assert best["overrides"]["hardware.preset"] == best["hardware"]
    assert "at the planned load" in best["cost"]["assumption"]
    assert [d["cost_per_month"] for d in data["deployments"] if d["feasible"]] == sorted(
        d["cost_per_month"] for d in data["deployments"] if d["feasible"])
    json.dumps(data, allow_nan=False)


def test_plan_command_prints_launch_line_and_draws_the_plot(tmp_path, capsys):
    picture = tmp_path / "plan.png"
    assert main(["plan", str(SMALL), "--rate", "25", "--launch", "--plot", str(picture)]) == 0
    out = capsys.readouterr().out
    assert "best: " in out and "reproduce: infermodel simulate" in out
    launch = out.split("launch:\n", 1)[1]
    assert "vllm serve meta-llama/Llama-3.2-3B-Instruct --tensor-parallel-size" in launch
    assert "--max-num-batched-tokens" in launch and "--gpu-memory-utilization 0.9" in launch
    assert "vLLM 0.8.5" in launch
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plan_table_problems_are_reported_together(write_scenario, capsys):
    path = write_scenario(f'''
extends = "{SMALL}"
[plan]
rate = -3
ttft = "p120 <= 1 s"
tensr = [1, 2]
engines = ["vllmm"]
''')
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "4 errors" in err
    assert "plan.rate" in err and "plan.ttft" in err and "did you mean 'tensor'" in err
    assert "did you mean 'vllm'" in err and f"{path}:" in err


def test_a_plan_needs_a_load_and_an_objective(write_scenario, capsys):
    path = write_scenario(f'extends = "{SMALL}"\n[plan]\nrate = 0.5\nconcurrency = 8\nttft = "none"\n'
                          'itl = "none"\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "rate (requests/s) or concurrency" in err and "no latency objective" in err
    assert main(["plan", str(SCENARIOS / "case-study-24gb.toml")]) == 2
    assert "has no [plan] table" in capsys.readouterr().err


def test_candidates_that_cannot_load_are_set_aside_with_the_reason():
    from infermodel.analyses.planning import plan

    result = plan(EXAMPLE, overrides={"hardware": ["l4"], "requests": 100, "max_requests": 100,
                                      "max_gpus": 2})
    assert result.best is None
    reasons = " ".join(result.notes.values())
    assert "leave no memory for the KV cache" in reasons
    assert "no deployment within 2 GPUs" in result.text()


def test_each_engine_is_simulated_with_its_own_policy_on_the_cards_it_runs_on():
    # TensorRT-LLM admits a request at its full length (GUARANTEED_NO_EVICT) and, without
    # chunked prefill, carries whole prompts up to max_num_tokens an iteration: the reserve
    # policy with that budget. vLLM pages its cache in and chunks: the chunked policy. And
    # TensorRT-LLM runs on NVIDIA cards only: an MI300X candidate is set aside, not priced.
    from infermodel.analyses.planning.planner import _consider, read_plan
    from infermodel.analyses.planning.space import Candidate

    scenario = infermodel.load_scenario(SMALL)
    table = read_plan(scenario, {"engines": ["trtllm", "vllm"]})
    layout = {"tensor": 1, "pipeline": 1}
    trt, finalist = _consider(scenario, table, Candidate("l40s", "trtllm", layout), 0)
    assert finalist is not None, trt.reason
    assert trt.overrides["simulation.policies"] == [
        {"kind": "reserve", "max_tokens": 8192, "max_running": 2048}]
    assert (finalist.policy.kind, finalist.policy.max_tokens) == ("reserve", 8192)
    assert not any("admits" in w for w in trt.warnings), trt.warnings
    vllm, _ = _consider(scenario, table, Candidate("l40s", "vllm", layout), 1)
    assert vllm.overrides["simulation.policies"][0]["kind"] == "chunked"
    # SGLang chunks but runs a batch of prompts apart from the running decodes; its chunk
    # is its own on the card (4,096 tokens below 60 GiB since 0.5.3), its running requests
    # bounded by the cache alone (the plan's cap stands in).
    sglang, found = _consider(scenario, table, Candidate("l40s", "sglang", layout), 5)
    assert sglang.overrides["simulation.policies"] == [
        {"kind": "chunked", "chunk_tokens": 4096, "max_running": 4096, "mixed_batches": False}]
    assert found.policy.mixed_batches is False
    assert not any("apart from the running decodes" in w for w in sglang.warnings), sglang.warnings
    amd, none = _consider(scenario, table, Candidate("mi300x", "trtllm", layout), 2)
    assert none is None
    assert amd.reason.startswith("trtllm runs on NVIDIA hardware only, not amd-cdna3")
    assert _consider(scenario, table, Candidate("mi300x", "vllm", layout), 3)[1] is not None
    # vLLM runs on Apple silicon's CPU only, not on the GPU the m2-ultra preset describes.
    apple, _ = _consider(scenario, table, Candidate("m2-ultra", "vllm", layout), 4)
    assert apple.reason.startswith("vllm runs on NVIDIA, AMD, Google TPU, Intel or CPU hardware "
                                   "only, not apple-m2"), apple.reason


def test_a_card_whose_every_candidate_is_set_aside_says_so():
    from infermodel.analyses.planning import plan

    result = plan(SMALL, overrides={"engines": ["trtllm"], "hardware": ["l40s", "mi300x"],
                                    "tensor": [1], "requests": 100, "max_requests": 100})
    text = result.text()
    assert "mi300x     none: every candidate set aside (below)" in text
    # So does a card whose candidates all miss an objective alone (the analytic screen).
    missed = plan(SMALL, overrides={"hardware": ["l40s", "l4"], "tensor": [1], "requests": 100,
                                    "max_requests": 100, "ttft": "p95 <= 85 ms"}).text()
    assert "l4 vllm TP1: one request alone already has TTFT" in missed
    assert "l4         none: every candidate set aside (below)" in missed
    assert "mi300x trtllm TP1: trtllm runs on NVIDIA hardware only" in text


def test_the_launch_line_gives_the_budget_of_the_policy_simulated():
    # TensorRT-LLM's reserve policy carries its whole prompts up to max_num_tokens.
    from infermodel.analyses.planning import plan
    from infermodel.analyses.planning.launch import launch_lines

    result = plan(SMALL, overrides={"engines": ["trtllm"], "hardware": ["l40s"], "tensor": [1],
                                    "requests": 100, "max_requests": 100})
    line = launch_lines(result)[-1]
    assert "--max_num_tokens 8192 --max_batch_size 2048" in line, line


def test_the_planning_modules_docstring_examples_run():
    import doctest

    from infermodel.analyses.planning import planner, space

    for module in (planner, space):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_the_screen_bounds_an_engine_that_runs_prompts_apart():
    # Prompts apart from the decodes stop them less often, for longer: on Lab 3's card with
    # a p99 ITL of 50 ms the mixed bound (0.092/s) is below what such an engine carries
    # (0.2/s meets the objectives in the simulation); its own bound stays above that.
    from infermodel.analyses.planning.analytic import screen
    from infermodel.simulator import SLO, CostModel, Policy, WorkloadSpec, run_record

    cost, spec, slo = CostModel.lab3(), WorkloadSpec.lab3(), SLO(ttft=10.0, itl=0.05)
    mixed = screen(cost, spec, slo, 256, 256).capacity
    apart = screen(cost, spec, slo, 256, 256, mixed=False).capacity
    _, metrics = run_record(cost, spec.generate(0.2, seed=0),
                            Policy("chunked", mixed_batches=False), slo=slo)
    assert metrics["slo_met"] and mixed < 0.2 < apart, (mixed, apart)


def test_layout_degrees_are_data():
    # Each degree of the space has a [plan] key, a JSON name, a field it sets and a
    # launch flag per engine; the table's keys are built from it.
    from infermodel.analyses.planning import DEGREES, ENGINES
    from infermodel.analyses.planning.table import PLAN_KEYS

    for degree in DEGREES:
        assert degree.key in PLAN_KEYS
        assert set(degree.flags) <= set(ENGINES)
    from infermodel.analyses.planning.space import Candidate

    server = Candidate("h200", "vllm", {"tensor": 4, "pipeline": 2})
    assert server.gpus == 8 and server.json_degrees() == {"tp": 4, "pp": 2, "ep": 1, "dp": 1}
    assert server.layout_overrides()["levers.parallelism.pipeline"] == 2


def _finalist(card: str):
    from infermodel.analyses.planning.planner import _consider, read_plan
    from infermodel.analyses.planning.space import Candidate

    scenario = infermodel.load_scenario(SMALL)
    _, finalist = _consider(scenario, read_plan(scenario),
                            Candidate(card, "vllm", {"tensor": 1, "pipeline": 1}), 0)
    return finalist


@settings(max_examples=12, deadline=None)
@given(card=st.sampled_from(["l4", "l40s"]), rate=st.floats(2, 70), replicas=st.integers(1, 6))
def test_adding_a_replica_never_makes_a_deployment_infeasible(card, rate, replicas):
    from infermodel.analyses.planning.search import Settings, trial

    finalist = attrs.evolve(_finalist(card), rate=rate)
    chosen = Settings(requests=200, max_requests=200)
    fewer = trial(finalist, replicas, chosen, grow=False)
    more = trial(finalist, replicas + 1, chosen, grow=False)
    assert not fewer.met or more.met, (card, rate, replicas)


def test_brute_force_finds_the_same_best_deployment():
    from infermodel.analyses.planning import plan

    quick = {"rate": 25, "requests": 200, "max_requests": 400, "hardware": ["l40s", "a100-40gb"]}
    planned = plan(SMALL, overrides=quick)
    brute = plan(SMALL, overrides={**quick, "max_gpus": 6}, brute_force=True)
    assert (planned.best.label, planned.best.replicas) == (brute.best.label, brute.best.replicas)
    assert planned.runs < brute.runs


def test_read_plan_overrides_come_from_the_command_line():
    from infermodel.analyses.planning import read_plan

    table = read_plan(infermodel.load_scenario(SMALL), {"rate": 40.0, "itl": "p99 <= 60 ms"})
    assert table.rate == 40.0 and table.itl.percentile == 99 and table.itl.limit == pytest.approx(0.06)


def test_expert_and_attention_data_degrees_are_candidates_and_launch(write_scenario):
    # Expert parallelism and data-parallel attention are layout degrees like the others:
    # listed in [plan], set on the parallelism lever, launched with each engine's flags.
    from infermodel.analyses.planning import plan

    path = write_scenario('''
[scenario]
name = "moe-plan"
[model]
preset = "qwen1.5-moe-a2.7b"
[hardware]
preset = "h100-sxm"
[workload]
prompt_tokens = 600
output_tokens = 80
[efficiency]
preset = "sglang"
[plan]
rate = 4
ttft = "p95 <= 2 s"
engines = ["sglang"]
tensor = [1]
attention_data = [2]
expert = [2]
requests = 100
max_requests = 100
checkpoint = "Qwen/Qwen1.5-MoE-A2.7B"
''')
    found = plan(path)
    best = found.best
    assert best is not None and best.candidate.gpus_per_server == 2
    assert best.to_dict()["dp"] == 2 and best.to_dict()["ep"] == 2
    assert best.overrides["levers.parallelism.expert"] == 2
    launch = found.launch()
    assert "--dp-size 2" in launch and "--enable-dp-attention" in launch and "--ep-size 2" in launch


def test_disaggregated_units_are_planned_and_reproduced():
    from infermodel.analyses.planning import plan
    from infermodel.analyses.simulation import simulate

    found = plan(SMALL, overrides={"rate": 25, "pools": ["1P1D"], "hardware": ["l40s"],
                                   "tensor": [1], "requests": 200, "max_requests": 400})
    best = found.best
    assert best is not None and best.candidate.pools.disaggregated and best.gpus == 2 * best.replicas
    assert best.overrides["simulation.disaggregation.decode"] == best.replicas
    run = simulate(SMALL, overrides=best.overrides).runs[0]
    assert run.metrics["slo_met"] == 1.0
    assert run.metrics["itl_p95"] == best.trial.metrics["itl_p95"]
    assert "prefill and" in found.launch()


def test_cards_searched_on_worker_processes_give_the_same_answer():
    from infermodel.analyses.planning import plan

    quick = {"rate": 25, "requests": 200, "max_requests": 400, "hardware": ["l4", "l40s"]}
    serial = plan(SMALL, overrides=quick)
    spread = plan(SMALL, overrides=quick, scheduler="processes")
    assert [(d.label, d.trial.metrics) for d in serial.deployments] == [
        (d.label, d.trial.metrics) for d in spread.deployments]


def test_a_concurrency_load_is_split_over_replicas_and_reproduced():
    # concurrency = N: N closed-loop clients shared evenly by the replicas; the overrides
    # reproduce one replica with its share.
    from infermodel.analyses.planning import plan
    from infermodel.analyses.simulation import simulate

    scenario = infermodel.load_scenario(SMALL, unset=["plan.rate"])
    found = plan(scenario, overrides={"concurrency": 64, "requests": 200, "max_requests": 800})
    best = found.best
    clients = best.overrides["simulation.concurrency"]
    assert clients == [-(-64 // best.replicas)] and "--replicas" not in best.command(str(SMALL))
    run = simulate(scenario, overrides=best.overrides).runs[0]
    assert run.concurrency == clients[0] and run.metrics["slo_met"] == 1.0


def test_a_warning_alike_on_several_candidates_is_printed_once_with_their_count():
    # The quantisation lever's note differs between tensor degrees only in its numbers.
    from types import SimpleNamespace

    from infermodel.analyses.planning.report import warning_lines

    def considered(label, *warnings):
        return SimpleNamespace(candidate=SimpleNamespace(label=label), warnings=warnings)

    result = SimpleNamespace(considered=[
        considered("h200 vllm TP1", "peak 2.968e+14, 2x", "the same everywhere"),
        considered("h200 vllm TP2", "peak 5.937e+14, 2x", "the same everywhere"),
        considered("mi300x vllm TP1", "card mi300x only", "the same everywhere")])
    assert warning_lines(result) == [
        "warning (h200 vllm TP1, and 1 other candidate alike): peak 2.968e+14, 2x",
        "warning: the same everywhere",
        "warning (mi300x vllm TP1): card mi300x only"]


def test_the_answer_carries_the_efficiency_models_own_interval(found):
    # Issue 25: the sampling intervals say how sure the simulation is; the physical vllm
    # preset's held-out errors say how far a real card may be.  Each latency objective's
    # simulated percentile is scaled by the ratios the scenario carries at the answer's
    # simulated mean batch per replica (which chooses the concurrency band).
    best, found_intervals = found.best, found.model_intervals
    assert found_intervals is not None
    batch = max(1, round(best.trial.metrics["mean_batch"]))
    assert found_intervals.batch == batch
    scenario = infermodel.load_scenario(SMALL).with_overrides({**best.overrides, "workload.batch": batch})
    result = infermodel.evaluate(scenario)
    targets = {t.metric: t for t in best.trial.verdict.targets}
    kinds = {"ttft": "ttft", "itl": "itl"}
    assert [i.metric for i in found_intervals.items] == [m for m in targets if m in kinds]
    for item in found_intervals.items:
        kind = kinds[item.metric]
        value = targets[item.metric].value
        assert item.value == value
        assert item.low == pytest.approx(value * result[f"{kind}_interval_low_ratio"], rel=1e-12)
        assert item.high == pytest.approx(value * result[f"{kind}_interval_high_ratio"], rel=1e-12)
        assert item.low < item.high and item.may_miss == (item.high > item.limit)
    text = found.text()
    assert "efficiency model: 80 % interval of a measurement" in text
    data = found.to_dict()["model_intervals"]
    assert data["batch"] == batch and set(data["objectives"]) == {"ttft_p95", "itl_p95"}


def test_a_fixed_efficiency_convention_gets_no_invented_model_interval(write_scenario):
    from infermodel.analyses.planning import plan

    path = write_scenario(f'extends = "{SMALL}"\n[efficiency]\nmodel = "fixed"\n'
                          "prefill_mfu = 0.5\ndecode_mfu = 0.5\nmbu = 0.8\n")
    found = plan(path, overrides={"rate": 25, "requests": 200, "max_requests": 400,
                                  "hardware": ["l40s"]})
    assert found.best is not None and found.model_intervals is None
    assert "efficiency model:" not in found.text()
    assert found.to_dict()["model_intervals"] is None


def test_the_analytic_bound_holds_at_every_light_load_on_every_tensor_degree():
    """The mean-field steady state exists at every rate below a candidate's capacity, on
    wide tensor-parallel layouts too: fewer than one decoding sequence on average is
    priced as one sequence's (graph-replayed) step, so the fixed point does not jump
    between a replayed and an eager step and give up at a light load (which made 8-card
    layouts' bounds 100-odd replicas).
    """
    from infermodel.analyses.planning import analytic
    from infermodel.analyses.planning import planner as planning
    from infermodel.analyses.planning.space import Pools
    from infermodel.scenario import load_scenario

    scenario = load_scenario(SMALL)
    table = planning.read_plan(scenario, {"tensor": [1, 4, 8], "hardware": ["a100-40gb"],
                                          "max_gpus": 64})
    spanned = planning.candidates(table.hardware, ("vllm",), {"tensor": (1, 4, 8)}, (Pools(),),
                                  table.max_gpus)
    bounds = {}
    for index, candidate in enumerate(spanned):
        considered, finalist = planning._consider(scenario, table, candidate, index)
        assert finalist is not None, considered.reason
        found = considered.screen
        cost, workload = finalist.cost_model, finalist.workload
        prompt, output = analytic.mean_lengths(workload)
        budget = finalist.policy.chunk_tokens
        for share in (1e-4, 1e-3, 0.01, 0.1, 0.5, 0.99):
            assert analytic.steady(cost, share * found.capacity, prompt, output, budget) is not None
        # The decode step grows with the sequences, never jumping down past one.
        steps = [analytic._iteration(cost, b, 0.0, prompt, prompt + output / 2)
                 for b in (0.1, 0.3, 0.7, 1.0, 1.5, 2.0)]
        assert steps == sorted(steps), steps
        bounds[candidate.degrees["tensor"]] = finalist.lower * candidate.gpus
    # A wider layout's GPU count stays within a small factor of one card's.
    assert max(bounds.values()) <= 8 * bounds[1], bounds
