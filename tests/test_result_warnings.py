"""Honest warnings: what a reader must know about the figures, as result records."""

from __future__ import annotations

import json
import warnings

import pytest

import infermodel
from conftest import DATA, SCENARIOS
from infermodel import hookimpl
from infermodel.cli import main
from infermodel.quantity import ResultWarning

CASE = SCENARIOS / "case-study-24gb.toml"
COLLAPSE = SCENARIOS / "spec-batch-collapse.toml"
LAB5 = SCENARIOS / "spec-lab5.toml"


def _about(result, quantity):
    return [w for w in result.warnings if w.quantity == quantity]


def test_speculation_that_slows_decoding_is_a_warning_naming_its_factor(host):
    # Inference lab, "Guess ahead, check in one pass": near the ridge the verification
    # pass turns compute-bound and k = 4 loses to plain decoding.
    r = infermodel.evaluate(COLLAPSE, {"workload.batch": 512})
    assert r["spec_speedup"] < 1
    (warning,) = _about(r, "spec_speedup")
    assert isinstance(warning, ResultWarning)
    assert f"{r['spec_speedup']:.2f}× plain decoding at k = 4" in warning.message
    assert not _about(infermodel.evaluate(COLLAPSE, {"workload.batch": 1}), "spec_speedup")


def test_best_k_says_off_when_no_draft_length_helps(host):
    r = infermodel.evaluate(LAB5, {"levers.speculative.acceptance": 0.0})
    assert r["spec_best_k"] == 0 and r["spec_best_speedup"] < 1
    assert "spec_best_k = 0: switch it off" in _about(r, "spec_speedup")[0].message
    helped = infermodel.evaluate(LAB5)
    assert helped["spec_best_k"] == 3 and not helped.warnings


def test_a_draft_given_by_parameter_count_warns_that_its_cache_is_not_counted(host):
    r = infermodel.evaluate(COLLAPSE, {"levers.speculative.draft_params": 494_032_768,
                                       "levers.speculative.draft_model": None})
    (warning,) = _about(r, "spec_draft_cost")
    assert "KV cache is not counted" in warning.message and "draft_model" in warning.message
    # the estimate: the target's cache scaled by the parameter ratio, for every sequence
    per_token = r["kv_bytes_per_token"] * r["spec_draft_params"] / r["params_total"]
    traffic = r["context"] * per_token
    share = traffic / (traffic + r["spec_draft_weight_bytes"])
    assert f"{share:.0%} of the draft step's bytes" in warning.message
    # with the draft's shape, its cache is counted and nothing is said
    assert not _about(infermodel.evaluate(COLLAPSE), "spec_draft_cost")


def test_unstated_efficiencies_take_the_engines_fitted_model_and_reserve(host, write_scenario):
    path = write_scenario("""
[scenario]
name = "bare"
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[workload]
prompt_tokens = 1000
output_tokens = 500
""")
    r = infermodel.evaluate(path)
    # No convention stated: the physical model with vLLM's fitted values (not the ideal
    # roofline), so there is no "peak rates assumed" warning to give.
    assert not _about(r, "mbu")
    assert r["mbu"] == r["bandwidth_fraction"] <= 0.92 and r["t0"] > 0
    assert "tpot_expected_low" in r
    # Without a stated reserve the engine's own (vLLM's by default) applies: no warning;
    # an engine that keeps nothing back is one.
    assert not _about(r, "memory_reserved") and r["memory_reserved"] > 0
    (reserve,) = _about(infermodel.evaluate(path, {"efficiency.engine": "none"}), "memory_reserved")
    assert "no memory is kept back" in reserve.message
    stated = infermodel.evaluate(path, {"efficiency.mbu": 0.8, "hardware.reserve": 0.1})
    assert stated["mbu"] == 0.8 and not stated.warnings


def test_a_batch_that_does_not_fit_is_a_warning(host):
    # Module 10 §11: 18 full-length sequences fit the 24 GB card; 24 do not.
    r = infermodel.evaluate(CASE, {"workload.batch": 24})
    (warning,) = _about(r, "fits")
    assert "the batch of 24 does not fit" in warning.message and "at most 18" in warning.message
    assert not infermodel.evaluate(CASE, {"workload.batch": 18}).warnings


def test_config_loader_approximation_is_a_result_warning_not_a_python_warning(host, write_scenario,
                                                                             capsys):
    # a multimodal config: only the text decoder is read, the vision encoder is not counted
    inner = json.loads((DATA / "hf" / "llama-3.1-8b.json").read_text())
    config = write_scenario(json.dumps(
        {"model_type": "llava", "text_config": inner, "vision_config": {"hidden_size": 1024}}),
        name="config.json")
    path = write_scenario(f"""
[scenario]
name = "mistral"
[model]
hf_config = "{config}"
[hardware]
preset = "h100-sxm"
reserve = 0.1
[workload]
prompt_tokens = 1000
output_tokens = 500
[efficiency]
mbu = 0.8
""")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a Python warning would fail here
        r = infermodel.evaluate(path)
        assert main(["run", str(path)]) == 0
    out, err = capsys.readouterr()
    assert any("vision encoder" in w and w.quantity is None for w in r.warnings)
    assert "warning: " in out and "vision encoder" in out and "HFConfigWarning" not in err


def test_warnings_appear_in_explain_and_json(host, capsys):
    assert main(["explain", str(CASE), "fits", "--set", "workload.batch=24"]) == 0
    assert "warning: the batch of 24 does not fit" in capsys.readouterr().out
    assert main(["run", str(CASE), "--format", "json", "--set", "workload.batch=24"]) == 0
    assert any("does not fit" in w for w in json.loads(capsys.readouterr().out)["warnings"])


# ---------------------------------------------------------------------------------
# infermodel_check_result
# ---------------------------------------------------------------------------------


class _Checker:
    @hookimpl
    def infermodel_check_result(self, result, warn):
        if result["batch"] > 4:
            warn("batch", f"batch {result['batch']:g} is above what this plugin tested")


def test_infermodel_check_result_adds_records_about_a_quantity(register_plugin):
    register_plugin(_Checker(), "checker")
    assert not infermodel.evaluate(CASE).warnings
    r = infermodel.evaluate(CASE, {"workload.batch": 8})
    assert r.warnings == [ResultWarning("batch", "batch 8 is above what this plugin tested")]


class _BadChecker:
    @hookimpl
    def infermodel_check_result(self, result, warn):
        warn("no_such_quantity", "about nothing")


def test_infermodel_check_result_about_an_unknown_quantity_names_the_plugin(register_plugin):
    from infermodel.errors import PluginError

    register_plugin(_BadChecker(), "bad")
    with pytest.raises(PluginError, match="plugin 'bad' failed in infermodel_check_result"):
        _ = infermodel.evaluate(CASE).warnings


def test_notebook_views_show_the_warnings(host):
    r = infermodel.evaluate(CASE, {"workload.batch": 24})
    assert "> **warning:** the batch of 24 does not fit" in r._repr_markdown_()
    assert "<strong>warning:</strong> the batch of 24 does not fit" in r._repr_html_()
