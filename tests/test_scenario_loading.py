"""Scenario loading: units, presets and overrides, extends, --set, Hugging Face configs."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import DATA, SCENARIOS
from infermodel.errors import ScenarioError
from infermodel.scenario import line_index, load_scenario, parse_assignment

BASE = """
[model]
preset = "module10-case"
[hardware]
memory = "24 GiB"
bandwidth = "1.0 TB/s"
flops = "165 TFLOP/s"
[workload]
prompt_tokens = 100
output_tokens = 10
"""


def test_unit_strings_and_binary_prefixes(write_scenario):
    s = load_scenario(write_scenario(BASE))
    assert s.value("hardware.memory") == 24 * 2**30
    assert s.value("hardware.bandwidth") == 1e12 and s.value("hardware.flops") == 165e12


def test_numbers_in_base_units(write_scenario):
    s = load_scenario(write_scenario(BASE.replace('"24 GiB"', "24000000000")))
    assert s.value("hardware.memory") == 24e9


def test_fields_beside_a_preset_override_it(write_scenario):
    s = load_scenario(write_scenario(BASE.replace('preset = "module10-case"',
                                                  'preset = "module10-case"\nlayers = 2')))
    assert s.value("model.layers") == 2 and s.value("model.d_model") == 4096
    assert s.presets["model"] == "module10-case"


def test_extends_inherits_and_overrides(write_scenario):
    base = write_scenario(BASE, "base.toml")
    child = write_scenario('extends = "base.toml"\n[workload]\nbatch = 7\n', "child.toml")
    s = load_scenario(child)
    assert s.value("workload.batch") == 7 and s.value("workload.prompt_tokens") == 100
    assert s.where("workload.batch").file == str(child)
    assert s.where("workload.prompt_tokens").file == str(base)


def test_set_overrides_are_typed():
    s = load_scenario(SCENARIOS / "case-study-24gb.toml",
                      ["workload.batch=64", "hardware.preset=h100-sxm", "efficiency.mbu=0.8"])
    assert s.value("workload.batch") == 64 and s.value("hardware.memory") == 81559 * 2**20
    assert s.value("efficiency.mbu") == 0.8 and s.where("workload.batch").file == "--set"


@pytest.mark.parametrize("text,expected", [
    ("workload.batch=64", ("workload.batch", 64)),
    ("hardware.memory=80 GB", ("hardware.memory", "80 GB")),
    ('hardware.memory="80 GB"', ("hardware.memory", "80 GB")),
    ("model.tied_embeddings=true", ("model.tied_embeddings", True)),
    ("efficiency.mbu = 0.8", ("efficiency.mbu", 0.8)),
])
def test_parse_assignment(text, expected):
    assert parse_assignment(text) == expected


def test_scenario_files_are_never_modified(autoload_host):
    paths = sorted(SCENARIOS.glob("*.toml"))
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    for p in paths:
        infermodel.evaluate(p, {"workload.batch": 3})
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


#: Shipped scenarios that show a warning on purpose: the quantity it is about.
EXPECTED_WARNINGS = {
    # Module 10's MoE example: 28.6 GB of weights cannot fit the 24 GB card
    "moe-module10-example.toml": ["fits"],
    # 128k tokens on Llama 4 Scout: chunked-local layers counted at min(L, 8,192), stated
    # with the size of the overcount
    "llama-4-scout-int4-one-h100.toml": ["kv_bytes_read_per_sequence", "kv_weight_parity_context"],
    # Windowed (sliding or chunked-local) or fixed-state layers: the parity context W / kv
    # assumes every layer grows with every token, and says by how much it does not
    "gemma-3-27b-128k-local-layers.toml": ["kv_weight_parity_context"],
    "gpt-oss-120b-one-h100.toml": ["kv_weight_parity_context"],
    "qwen3-next-80b-hybrid-state.toml": ["kv_weight_parity_context"],
    "nemotron-h-8b-one-h100.toml": ["kv_weight_parity_context"],
    # A second model timed by the roofline alone, its answers' quality not modelled
    "module10-cascade.toml": ["cascade_mean_e2e_latency"],
    "module10-routing.toml": ["routing_mean_e2e_latency"],
    # Latency from measured rates, which do not follow batch, prompt or context
    "module10-measured-rates.toml": ["tpot"],
    # Measured kernels: the step with the cache full (468 sequences at 1,536 positions)
    # reads generation-attention cells the table did not measure (its collector skips the
    # largest batch × length products), filled by the roofline ratio. The output head's
    # 128,256 columns are column blocks of the widest measured GEMM: stated, not warned.
    # Its first-token time carries no per-request time (the server's path, which the
    # scenario does not state), with its size on NVIDIA's measured deployments.
    "measured-llama-3.1-8b-fp8-h200.toml": ["ttft", "capacity_step_time"],
    # Expert parallelism with the uniform-routing imbalance, sized against a measured skew
    "deepseek-r1-ep8-dp8.toml": ["parallel_expert_imbalance"],
    # Fitted engine presets: one request's first-token interval rests on held-out rows of
    # every load (no group of one-client rows from four sources yet), ×93,000 wide
    "engine-llama-3-8b.toml": ["ttft"],
    "engine-trtllm-llama-3.1-8b.toml": ["ttft"],
    "plan-70b-chat.toml": ["ttft"],
    # MiniMax-M1's router multiplies in 32 bits, which the step roofline counts at the
    # step's rate: the warning gives its time at the card's FP32 rate (1.5 % of the prefill)
    "minimax-m1-1m-context.toml": ["router_matmul_rate"],
}


def test_every_shipped_scenario_evaluates_without_warnings(autoload_host):
    # Shipped scenarios state their efficiencies and reserve; only a deliberate
    # lesson (a model that does not fit) warns.
    for path in sorted(SCENARIOS.glob("*.toml")):
        result = infermodel.evaluate(path)
        assert [w.quantity for w in result.warnings] == EXPECTED_WARNINGS.get(path.name, []), path


def test_hf_config_model(write_scenario):
    config = DATA / "hf" / "llama-3.1-8b.json"
    if not config.exists():
        pytest.skip("no HF config fixture")
    s = load_scenario(write_scenario(BASE.replace('preset = "module10-case"', f'hf_config = "{config}"')))
    assert s.value("model.layers") == 32 and s.value("model.kv_heads") == 8
    r = infermodel.evaluate(s)
    assert r["params_total"] == pytest.approx(8.03e9, rel=1e-3)


def test_preset_and_hf_config_together_is_an_error(write_scenario):
    config = DATA / "hf" / "llama-3.1-8b.json"
    text = BASE.replace('preset = "module10-case"', f'preset = "module10-case"\nhf_config = "{config}"')
    with pytest.raises(ScenarioError, match="either model.preset or model.hf_config"):
        load_scenario(write_scenario(text))


def test_line_index_finds_keys_in_tables_and_dotted_keys():
    text = '[a]\nx = 1\n[b.c]\n"q.r" = 2\ny.z = 3\n'
    index = line_index(text)
    assert index["a.x"] == 2 and index["b.c.q.r"] == 4 and index["b.c.y.z"] == 5 and index["b.c"] == 3


@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 10_000), prompt=st.integers(1, 100_000), output=st.integers(1, 100_000))
def test_default_contexts_follow_the_workload(batch, prompt, output):
    r = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml", {
        "workload.batch": batch, "workload.prompt_tokens": prompt, "workload.output_tokens": output})
    assert r["context"] == prompt + output / 2
    assert r["sequence_length"] == prompt + output
    assert r["kv_bytes_total"] == r["kv_bytes_per_token"] * (prompt + output) * batch
    assert r["fits"] == (r["memory_required"] <= r["memory_bytes"])


def test_changing_a_preset_by_override_updates_value_sources():
    r = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml", {"hardware.preset": "h100-sxm"})
    step = next(s for s in infermodel.explain(r, "card_memory").steps if s.name == "card_memory")
    assert "h100-sxm.toml" in step.source


def test_output_files_get_ordinary_permissions(tmp_path):
    import os
    import stat

    from infermodel.output import atomic_write

    target = tmp_path / "out.txt"
    atomic_write(target, "x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
