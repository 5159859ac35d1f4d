"""The simulator prices what the graph says: the quantities it reads (its contract), a
third-party lever that shrinks each sequence's cache raising the simulated capacity,
and a warning for a lever change the simulation cannot follow.

The levers here are built in the test from ``infermodel.plugin`` alone, and read through
``infermodel.testing``'s host, as a third party's test would.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest
import sympy

import infermodel
from infermodel.analyses.simulation import plan, simulation_warnings
from infermodel.analyses.simulation.contract import reads, simulator_quantities
from infermodel.cli import main
from infermodel.plugin import S, accepts, hookimpl
from infermodel.testing import plugin_host

ROOT = Path(__file__).resolve().parents[1]
LAB3 = "infermodel:module10-lab3-policies"


@accepts("0 to 1")
def _share(instance, attribute, value):
    if not 0 < value <= 1:
        raise ValueError(f"{attribute.name} = {value!r} is not a share in (0, 1]")


@attrs.frozen
class Eviction:
    keep: float = attrs.field(default=0.5, validator=_share)
    floor: int = 1024


class EvictionLever:
    """Keep a share of each sequence's cache, at least ``floor`` positions (a third
    party's eviction rule: it changes what a sequence holds, not what a step reads).
    """

    @hookimpl
    def infermodel_register_levers(self, register):
        register("kv_evict", Eviction, description="keep a share of each sequence's cache")

    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        lever = scenario.lever("kv_evict")
        if lever is None:
            return
        kept = sympy.Min(S.sequence_length, sympy.Max(lever.floor, lever.keep * S.sequence_length))
        transform.wrap("kv_bytes_per_sequence", lambda old: old * kept / S.sequence_length,
                       reason="only a share of each sequence's cache is kept")


class TrafficLever:
    """Reads half the cache in each decode step: a change to ``decode_bytes``, which the
    simulation does not read (it prices reads from ``kv_bytes_per_token``).
    """

    @hookimpl
    def infermodel_register_levers(self, register):
        register("half_reads", Eviction, description="read half of the cache per step")

    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        if scenario.lever("half_reads") is not None:
            transform.wrap("decode_bytes", lambda old: old - S.batch * S.context * S.kv_bytes_per_token / 2,
                           reason="half the cache is read")


@pytest.fixture(scope="module")
def host():
    return plugin_host({"kv_evict": EvictionLever(), "half_reads": TrafficLever()})


#: A 12 GB card leaves 4 GB of cache: capacity is bound by memory, not by compute.
SMALL_CARD = {"simulation.workload.count": 100, "hardware.memory": "12 GB",
              "simulation.slo.ttft": "10 s"}


def test_a_lever_that_shrinks_each_sequences_cache_raises_the_simulated_capacity(host, tmp_path):
    path = tmp_path / "evict.toml"
    path.write_text(f'extends = "{LAB3}"\n[levers.kv_evict]\nkeep = 0.5\n')
    base = infermodel.load_scenario(LAB3, SMALL_CARD, host=host)
    evicting = infermodel.load_scenario(path, SMALL_CARD, host=host)
    assert infermodel.evaluate(evicting)["kv_bytes_per_sequence"] == pytest.approx(
        infermodel.evaluate(base)["kv_bytes_per_sequence"] / 2)
    # the cache budget is the same, each position takes half the memory: twice the positions
    assert plan(evicting).cost_model.cache_memory == pytest.approx(2 * plan(base).cost_model.cache_memory)
    before = infermodel.simulate(base, capacity=True, policies=["paged"]).search.rate
    after = infermodel.simulate(evicting, capacity=True, policies=["paged"]).search.rate
    assert after > 1.5 * before
    # the traffic is not the lever's: a decode step still reads every cached position
    assert plan(evicting).cost_model.kv_bytes_per_token == plan(base).cost_model.kv_bytes_per_token
    assert not plan(evicting).warnings
    assert any(n.startswith("cache storage: a cached position takes 73,728 B")
               for n in plan(evicting).notes)


def test_a_change_the_simulation_does_not_read_is_a_warning_with_its_size(host, tmp_path):
    path = tmp_path / "reads.toml"
    path.write_text(f'extends = "{LAB3}"\n[levers.half_reads]\n')
    warnings = plan(infermodel.load_scenario(path, host=host)).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith("decode_bytes is changed by plugin 'half_reads' (half the cache is "
                                  "read); the simulation reads neither decode_bytes nor anything")
    assert re.search(r"without it [0-9.e+]+: 0\.\d+x", warnings[0])


def test_every_result_warning_reaches_simulate_sweep_and_search(capsys):
    scenario = ROOT / "scenarios" / "module10-measured-rates.toml"
    expected = [str(w) for w in infermodel.evaluate(infermodel.load_scenario(scenario)).warnings]
    assert expected  # the measured-rates mode says what it leaves out
    runs = (["simulate", str(scenario), "--policy", "chunked", "--rate", "0.2", "--set",
             "simulation.workload.count=10"],
            ["sweep", str(scenario), "--over", "workload.batch=1,2", "--quantities", "tpot"],
            ["search", str(scenario), "--over", "workload.batch=1,2", "--minimise", "tpot"])
    for argv in runs:
        assert main(argv) == 0
        err = capsys.readouterr().err
        for message in expected:
            assert message in err, (argv[0], message)
    # JSON search output lists the winner's warnings as run's JSON does
    assert main([*runs[2], "--format", "json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["warnings"] == expected


def test_simulation_warnings_list_a_result_warning_once():
    result = infermodel.evaluate(ROOT / "scenarios" / "module10-measured-rates.toml")
    found = simulation_warnings(result)
    assert len(found) == len(set(found))
    assert str(result.warnings[0]) in found


def test_simulation_warnings_say_the_scheduler_holds_no_request():
    # A stated interval between the scheduler's reads of new requests, or a stated wait
    # for more prompts, is not simulated: the warning names it; one read per iteration
    # (the default) warns of nothing.
    path = ROOT / "scenarios" / "engine-llama-3-8b.toml"
    held = infermodel.evaluate(path, {"efficiency.engine": "sglang", "efficiency.recv_interval": 30})
    assert any("efficiency.recv_interval (30" in w for w in simulation_warnings(held))
    every = infermodel.evaluate(path, {"efficiency.recv_interval": 1})
    assert not any("recv_interval" in w for w in simulation_warnings(every))
    waits = infermodel.evaluate(path, {"efficiency.engine": "trtllm",
                                       "efficiency.batch_wait_iterations": 20})
    assert any("efficiency.batch_wait_iterations (20" in w for w in simulation_warnings(waits))


@pytest.mark.parametrize("engine, count, says", [
    ("tensorrt-llm", 1, ["admits a request only when its prompt and whole output fit",
                         "the paged and chunked policies admit on demand"]),
    ("sglang", 3, ["the reserve policy holds each request's whole output",
                   "runs a prompt's prefill apart from the running decodes",
                   "the reserve, paged and chunked policies run it beside them",
                   "an estimated share of the running requests' remaining outputs"]),
    ("vllm", 1, ["the reserve policy holds each request's whole output"])])
def test_a_simulated_policy_that_admits_or_batches_unlike_the_named_engine_says_so(engine, count,
                                                                                   says):
    # TensorRT-LLM reserves each request's whole output (GUARANTEED_NO_EVICT), vLLM and
    # SGLang page it in; every continuous policy runs a prompt beside the decodes, which
    # SGLang does not: Lab 3's four policies against each engine the scenario names.
    from infermodel.analyses.simulation.plan import engine_policy_warnings
    from infermodel.simulator import Policy

    policies = [Policy(kind) for kind in ("static", "reserve", "paged", "chunked")]
    path = ROOT / "scenarios" / "module10-lab3-policies.toml"
    result = infermodel.evaluate(path, {"efficiency.engine": engine})
    found = engine_policy_warnings(result.scenario, result.values, policies)
    for phrase in says:
        assert any(phrase in w for w in found), (engine, phrase, found)
    assert len(found) == count
    # A policy that admits and batches as the engine does says nothing; nor does a
    # scenario that names no engine (the lab's own: its policies are the model).
    same = {"tensorrt-llm": "reserve", "vllm": "chunked", "sglang": "static"}[engine]
    assert engine_policy_warnings(result.scenario, result.values, [Policy(same)]) == ()
    lab = infermodel.evaluate(path)
    assert engine_policy_warnings(lab.scenario, lab.values, policies) == ()
    # A setting the scenario states is named as its own; one policy reads as one.
    stated = infermodel.evaluate(path, {"efficiency.engine": engine, "efficiency.admission":
                                        "paged" if engine == "tensorrt-llm" else "reserve"})
    one = engine_policy_warnings(stated.scenario, stated.values,
                                 [Policy("reserve" if engine == "tensorrt-llm" else "paged")])
    assert any("with efficiency.admission = " in w for w in one), one
    assert all(" policies " not in w for w in one if "admits a request only" in w), one


def test_a_whole_prompt_budget_takes_the_engines_and_warns_of_longer_prompts():
    # A scenario that names TensorRT-LLM simulates its reserve policy with the engine's
    # max_num_tokens as the iteration's budget; prompts beyond it would be refused.
    from infermodel.analyses.simulation import plan as simulation_plan

    path = ROOT / "scenarios" / "engine-trtllm-llama-3.1-8b.toml"
    scenario = infermodel.load_scenario(path).with_overrides({
        "efficiency.engine": "tensorrt-llm", "simulation.policies": ["reserve", "chunked"]})
    read = simulation_plan(scenario)
    reserve, chunked = read.policies
    assert (reserve.kind, reserve.max_tokens) == ("reserve", 8192)
    assert (chunked.chunk_tokens, chunked.max_tokens) == (8192, None)
    assert not any("max_tokens" in w for w in read.warnings)
    # The derivation says what each request holds and what an iteration carries.
    assert ("reserve policy: a request is admitted when its prompt and 1,024 output tokens fit "
            "the cache (the output law's maximum, as a client's max_tokens); an iteration "
            "carries at most 8,192 tokens, each prompt whole (max_tokens)") in read.notes
    assert not any(n.startswith("chunked policy") for n in read.notes)
    # It prefills whole prompts: a chunked policy is named as unlike it where a prompt is
    # longer than its chunks (here none is: prompts of 512-1,536 tokens, chunks of 8,192).
    assert not any("the chunked policy splits" in w for w in read.warnings), read.warnings
    long = simulation_plan(scenario.with_overrides(
        {"simulation.workload.prompt": {"law": "uniform", "low": 4000, "high": 12000}}))
    said = [w for w in long.warnings if "max_tokens = 8,192" in w]
    assert len(said) == 1 and "the reserve policy" in said[0] and "12,000 tokens" in said[0]
    assert any("prefills each prompt whole; the chunked policy splits a prompt longer than its "
               "chunk_tokens" in w for w in long.warnings), long.warnings


def test_the_whole_prompt_budget_is_an_engine_that_does_not_chunk_and_its_overruns_are_said():
    # vLLM chunks every prompt: its budget is not one for whole prompts, and a paged policy
    # under it keeps Lab 3's rule. Under TensorRT-LLM, a session's history and a preempted
    # request's re-prefill can overrun the budget too, and simulate says so.
    from infermodel.analyses.simulation import plan as simulation_plan

    path = ROOT / "scenarios" / "engine-trtllm-llama-3.1-8b.toml"
    vllm = infermodel.load_scenario(path).with_overrides({
        "efficiency.engine": "vllm", "efficiency.preset": "vllm",
        "simulation.policies": ["paged", "reserve"]})
    assert [p.max_tokens for p in simulation_plan(vllm).policies] == [None, None]
    trt = infermodel.load_scenario(path).with_overrides({
        "efficiency.engine": "tensorrt-llm", "simulation.policies": ["paged"],
        "simulation.workload.prompt": {"law": "uniform", "low": 2000, "high": 4000},
        "simulation.workload.output": {"law": "uniform", "low": 100, "high": 5000}})
    said = simulation_plan(trt).warnings
    assert any("a preempted request re-prefills up to 8,999 tokens" in w for w in said), said
    sessions = simulation_plan(trt.with_overrides({"simulation.turns": 3}))
    assert any("a session's prompt, its history included, reaches 22,000 tokens" in w
               for w in sessions.warnings), sessions.warnings


def test_a_named_engine_gives_its_policies_whether_it_mixes_prompts_with_decodes():
    # SGLang runs a batch of waiting prompts apart from the running decodes (no
    # enable_mixed_chunk): its scenario's continuous policies take mixed_batches = false
    # and say nothing; a policy that states the other way is named, and so is a policy
    # that prefills apart under an engine that mixes (vLLM V1).
    from infermodel.analyses.simulation import plan as simulation_plan

    path = ROOT / "scenarios" / "module10-lab3-policies.toml"
    sglang = infermodel.load_scenario(path).with_overrides({"efficiency.engine": "sglang"})
    read = simulation_plan(sglang.with_overrides({"simulation.policies": ["paged", "chunked"]}))
    assert [p.mixed_batches for p in read.policies] == [False, False]
    assert not any("prefill" in w and "apart" in w for w in read.warnings), read.warnings
    stated = simulation_plan(sglang.with_overrides(
        {"simulation.policies": [{"kind": "chunked", "mixed_batches": True}]}))
    assert any("the chunked policy runs it beside them (mixed_batches = true)" in w
               for w in stated.warnings), stated.warnings
    vllm = infermodel.load_scenario(path).with_overrides({
        "efficiency.engine": "vllm",
        "simulation.policies": ["chunked", {"kind": "paged", "mixed_batches": False}]})
    read = simulation_plan(vllm)
    assert [p.mixed_batches for p in read.policies] == [True, False]
    said = [w for w in read.warnings if "the paged policy runs prompts alone" in w]
    assert len(said) == 1 and "the longest longer" in said[0]
    # An efficiency preset names its engine too: the TensorRT-LLM preset's scenario is
    # told of a policy that admits on demand, without restating the engine.
    trt = simulation_plan(infermodel.load_scenario(
        ROOT / "scenarios" / "engine-trtllm-llama-3.1-8b.toml").with_overrides(
        {"simulation.policies": ["paged"]}))
    assert any(w.startswith("the efficiency preset 'trtllm' (engine 'tensorrt-llm') admits")
               for w in trt.warnings), trt.warnings


def test_the_contract_is_documented_name_by_name():
    text = (ROOT / "src" / "infermodel" / "simulator" / "README.rst").read_text(encoding="utf-8")
    documented = set(re.findall(r"``([a-z_0-9]+)``", text))
    missing = [name for name in simulator_quantities() if name not in documented]
    assert not missing, f"quantities the simulation reads but the simulator's page does not name: {missing}"


def test_every_contract_quantity_the_base_physics_defines_is_read():
    result = infermodel.evaluate(ROOT / "scenarios" / "case-study-24gb.toml")
    read = reads(result.values)
    assert {"weight_bytes", "kv_bytes_per_token", "kv_bytes_per_sequence",
            "kv_positions_per_sequence", "kv_budget_bytes", "params_matmul"} <= read
    # a uniform model reads no per-layer sums; lengths whose laws the table gives are not read
    assert "attention_flops_decode" not in read
    assert "prompt_tokens" not in reads(result.values, {"prompt": 100})
