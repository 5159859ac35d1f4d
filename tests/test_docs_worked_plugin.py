"""The worked third-party plugin of the documentation: plugins/infermodel-kv-offload.

It is a separate distribution, installed from its folder by the test command
(``pip install -e plugins/infermodel-kv-offload``) and found through the
``infermodel`` entry-point group like any third-party plugin. Third-party plugins do
not autoload in tests, so these tests use the ``autoload_host`` fixture.

The figures follow from Module 10: Inference and serving (§3 and §11: the case study's
147,456 cache bytes per token, 16 GB cache budget and 18 full-length sequences of 6,000
tokens; §1: a decode step at batch 1 reads 6.23728 GB).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from importlib import metadata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infermodel
from conftest import ROOT, SCENARIOS
from infermodel.errors import ScenarioError

EXAMPLE = SCENARIOS / "kv-offload-example.toml"
INSTALL = "pip install -e plugins/infermodel-kv-offload"


@pytest.fixture
def kv_host(autoload_host):
    if "kv_offload" not in autoload_host.records:
        pytest.fail(f"the worked plugin is not installed; run `{INSTALL}`")
    return autoload_host


def test_worked_plugin_is_a_separate_distribution_installed_from_its_folder():
    try:
        dist = metadata.distribution("infermodel-kv-offload")
    except metadata.PackageNotFoundError:
        pytest.fail(f"the worked plugin is not installed; run `{INSTALL}`")
    (entry,) = [ep for ep in dist.entry_points if ep.group == "infermodel"]
    assert (entry.name, entry.value) == ("kv_offload", "infermodel_kv_offload")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    assert direct.get("url", "").endswith("plugins/infermodel-kv-offload")
    assert (ROOT / "plugins" / "infermodel-kv-offload" / "pyproject.toml").is_file()


def test_worked_plugin_does_not_autoload_in_tests_but_loads_as_third_party(host, kv_host):
    assert "kv_offload" not in host.records  # the suite's default host: built-ins only
    record = kv_host.records["kv_offload"]
    assert (record.builtin, record.distribution, record.error) == (False, "infermodel-kv-offload", None)


def test_plugins_command_lists_the_worked_plugin_as_third_party(kv_host):
    from infermodel.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["plugins"]) == 0
    listed = out.getvalue()
    assert "kv_offload: infermodel_kv_offload from infermodel-kv-offload 0.1.0" in listed
    assert "levers: kv_offload" in listed
    assert "(built-in)" not in listed


def test_offload_doubles_capacity_and_adds_the_link_time_to_each_step(kv_host):
    result = infermodel.evaluate(EXAMPLE)
    plain = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml", {"workload.batch": 36})
    # Half of 147,456 B/token stays on the card: 16 GB / (73,728 · 6,000) → 36 sequences;
    # alone the card holds 18 (Module 10 §11).
    assert plain["max_sequences"] == 18 and not plain["fits"]
    assert result["max_sequences"] == 36 and result["fits"]
    assert result["kv_offload_device_sequences"] == 36
    assert result["kv_offload_host_sequences"] == 1157  # 512 GB / (73,728 · 6,000)
    # Each step copies half of 36 caches at mean context 5,000 over 64 GB/s.
    assert result["kv_offload_bytes_per_step"] == 0.5 * 36 * 5000 * 147_456
    assert result["kv_offload_time"] == pytest.approx(0.20736, rel=1e-12)
    assert result["tpot"] == pytest.approx(plain["tpot"] + 0.20736, rel=1e-12)
    assert result["memory_required"] == pytest.approx(
        plain["memory_required"] - 0.5 * plain["kv_bytes_total"], rel=1e-12)
    changed = {n for n in result.graph.order if "kv_offload" in result.graph[n].changed_by}
    assert changed == {"memory_required", "fits", "max_sequences", "max_context",
                       "decode_step_time", "capacity_step_time"}
    for name in changed | {n for n in result.graph.order if result.graph[n].plugin == "kv_offload"}:
        quantity = result.graph[name]
        assert quantity.unit and quantity.description
        from_field = quantity.history[0].reason.startswith("from hardware.")
        assert from_field or all(c.reference for c in quantity.history if c.plugin == "kv_offload"), name


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(0.05, 1.0), link=st.floats(1e9, 1e12), batch=st.integers(1, 64),
       overlap=st.booleans())
def test_offload_step_time_identities(kv_host, fraction, link, batch, overlap):
    overrides = {"levers.kv_offload.fraction": fraction, "hardware.host_link_bandwidth": link,
                 "workload.batch": batch, "levers.kv_offload.overlap": overlap}
    result = infermodel.evaluate(EXAMPLE, overrides)
    plain = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml", {"workload.batch": batch})
    copy = fraction * batch * 5000 * 147_456 / link
    assert result["kv_offload_time"] == pytest.approx(copy, rel=1e-9)
    if overlap:
        assert result["tpot"] == pytest.approx(max(plain["tpot"], copy), rel=1e-9)
    else:
        assert result["tpot"] == pytest.approx(plain["tpot"] + copy, rel=1e-9)
    # Offloading never lowers capacity below what the card holds alone while host memory lasts.
    assert result["max_sequences"] >= min(plain["max_sequences"], result["kv_offload_host_sequences"])


def test_offload_of_everything_leaves_host_memory_as_the_only_limit(kv_host):
    result = infermodel.evaluate(EXAMPLE, {"levers.kv_offload.fraction": 1.0,
                                           "hardware.host_memory": "100 GB"})
    assert result["kv_offload_device_sequences"] == float("inf")
    assert result["max_sequences"] == 100e9 // (147_456 * 6000)


def test_missing_host_fields_are_reported_at_the_lever_table(kv_host, write_scenario):
    path = write_scenario(f'extends = "{SCENARIOS / "case-study-24gb.toml"}"\n\n'
                          "[levers.kv_offload]\nfraction = 0.5\n")
    with pytest.raises(ScenarioError) as caught:
        infermodel.load_scenario(path)
    problems = caught.value.problems
    assert [p.message for p in problems] == [
        "the kv_offload lever needs hardware.host_link_bandwidth",
        "the kv_offload lever needs hardware.host_memory"]
    assert all(p.line == 3 and p.key == "levers.kv_offload" for p in problems)
    with pytest.raises(ScenarioError, match="fraction in \\(0, 1\\]"):
        infermodel.load_scenario(EXAMPLE, {"levers.kv_offload.fraction": 1.5})


def test_offload_and_prefix_sharing_compose(autoload_host):
    # Offloading half the private cache and sharing the 3,000-token prefix each raise the
    # number of full-length requests; together they compound instead of one discarding
    # the other (Module 10 §11: 18 bf16 requests, 35 with the shared prefix).
    import infermodel
    from conftest import SCENARIOS

    path = SCENARIOS / "kv-offload-example.toml"
    offload = infermodel.evaluate(path)
    both = infermodel.evaluate(path, {"levers.prefix_cache.prefix_tokens": 3000,
                                      "levers.prefix_cache.block_tokens": 1})
    assert both.warnings == []
    assert both["max_sequences"] > offload["max_sequences"] >= 36


OFFLOAD = ('[hardware]\npreset = "h200"\nhost_memory = "512 GB"\nhost_link_bandwidth = "64 GB/s"\n'
           "[levers.kv_offload]\nfraction = 0.5\n")


def _offload_notes(write_scenario, model: str, name: str) -> list[str]:
    path = write_scenario(f"[model]\n{model}\n{OFFLOAD}"
                          "[workload]\nprompt_tokens = 32768\noutput_tokens = 1\n", name)
    return [w for w in infermodel.evaluate(path).warnings if "kv_offload's max_context" in w]


def test_offload_max_context_lower_bound_is_a_result_warning_with_its_size(kv_host, write_scenario):
    # Gemma-3-27B (published config.json): 52 sliding-window layers of 1,024 tokens, 10 full.
    # Past the windows a token costs 10/62 of the all-layers cache counted: up to 6.2x longer.
    hf = f'hf_config = "{ROOT / "tests" / "data" / "hf" / "gemma-3-27b-it.json"}"'
    (note,) = _offload_notes(write_scenario, hf, "gemma.toml")
    assert "52 sliding-window layers keep at most 1,024 tokens" in note
    assert "10 / 62" in note and f"{62 / 10:.1f}×" in note and "lower bound" in note
    # A uniform stack of full-attention layers: max_context is exact, nothing to say.
    assert _offload_notes(write_scenario, 'preset = "llama-3-8b"', "llama.toml") == []


def test_offload_max_context_names_the_uncharged_fixed_state(kv_host, write_scenario):
    # Qwen3-Next-80B-A3B config.json: 36 gated delta-net layers, 16 key heads and 32 value
    # heads of width 128, a 4-wide convolution, state in 16 bits.
    hf = f'hf_config = "{ROOT / "tests" / "data" / "hf" / "qwen3-next-80b-a3b.json"}"'
    (note,) = _offload_notes(write_scenario, hf, "next.toml")
    per_layer = 32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)
    assert f"{36 * per_layer * 2 / 1e6:,.2f} MB" in note and "36 linear layers" in note
    assert "sliding" not in note   # its attention layers are all full
