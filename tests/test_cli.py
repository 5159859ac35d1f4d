"""The command line: formats, overrides, validation, listings, graph output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SCENARIOS
from infermodel.cli import main

CASE = str(SCENARIOS / "case-study-24gb.toml")


def test_run_prints_a_short_summary_with_the_headline_figures(capsys):
    assert main(["run", CASE]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 40
    rows = {line.split()[-1]: line for line in lines if line.startswith("  ")}
    assert "922.9 ms" in rows["ttft"] and "922.9 ms" in rows["ttft_batch"]
    assert "6.237 ms" in rows["tpot"] and "18 seq" in rows["max_sequences"]
    # Module 10 §11: USD 1/h over 160.3 tokens/s is USD 1.733 per million output tokens.
    assert "USD 1.733" in rows["cost_per_million_output_tokens"]
    # the whole bill: (0.9229 s + 1999 × 6.2373 ms) of USD 1/h over 6,000 tokens
    whole = (0.92293 + 1999 * 0.00623728) / 3600 / 6000 * 1e6
    assert f"USD {whole:.2f}" in rows["cost_per_million_tokens"]
    assert [g for g in ("memory", "latency", "throughput", "cost") if g in lines] == [
        "memory", "latency", "throughput", "cost"]
    assumptions = next(line for line in lines if line.startswith("assumptions:"))
    assert "prefill MFU 0.5" in assumptions and "reserve 2.5 GB" in assumptions


def test_run_all_prints_every_quantity(capsys):
    assert main(["run", CASE, "--all"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("case-study-24gb — Module 10 case study")
    row = next(line for line in out.splitlines() if line.startswith("max_sequences "))
    assert "18 seq" in row and "most full-length sequences" in row
    assert next(line for line in out.splitlines() if line.startswith("ttft ")).split()[1:3] == ["922.9", "ms"]


def test_run_json_shape(capsys):
    assert main(["run", CASE, "--format", "json", "--set", "workload.batch=18"]) == 0
    data = json.loads(capsys.readouterr().out)
    q = data["quantities"]
    assert q["tokens_per_s_total"]["unit"] == "token/s"
    assert q["tokens_per_s_total"]["value"] == pytest.approx(958.9, abs=0.05)
    assert q["fits"]["value"] is True
    assert q["critical_batch"]["value"] == "inf"
    assert q["kv_bytes_per_token"]["value"] == 147456
    assert q["batch"]["value"] == 18


@pytest.mark.parametrize("fmt,marker", [("markdown", "| `tpot` |"), ("latex", r"\begin{aligned}"),
                                         ("table", "quantity")])
def test_run_formats(fmt, marker, capsys):
    assert main(["run", CASE, "--format", fmt, "--quantities", "tpot,ttft"]) == 0
    assert marker in capsys.readouterr().out


def test_set_is_typed_by_the_schema(capsys):
    assert main(["run", CASE, "--set", "hardware.memory=48 GB", "--set", "efficiency.t0=0.3 ms",
                 "--quantities", "card_memory,t0", "--format", "json"]) == 0
    q = json.loads(capsys.readouterr().out)["quantities"]
    assert q["card_memory"]["value"] == 48e9 and q["t0"]["value"] == pytest.approx(3e-4)
    assert main(["run", CASE, "--set", "workload.batch=2.5"]) == 2
    assert "expected an integer" in capsys.readouterr().err


def test_output_file_is_written(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", CASE, "--format", "json", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["quantities"]["tpot"]["value"] == 0.00623728
    assert list(tmp_path.iterdir()) == [out]  # no temporary left behind


def test_check(capsys):
    assert main(["check", CASE]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {CASE} is valid")


def test_presets_list_sources(capsys):
    assert main(["presets", "models"]) == 0
    out = capsys.readouterr().out
    assert "module10-case" in out and "llama-3.1-8b" in out and "source:" in out
    assert main(["presets", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"model", "hardware", "efficiency"} == {r["kind"] for r in rows}
    assert all(r["source"] for r in rows)


def test_graph_formats(capsys):
    assert main(["graph", CASE, "--format", "dot"]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith("digraph infermodel {") and '"decode_step_time" -> "tpot";' in dot
    assert main(["graph", CASE, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert ["decode_step_time", "tpot"] in data["edges"]
    assert main(["graph", CASE]) == 0
    assert "tpot [s] <- decode_step_time" in capsys.readouterr().out


def test_usage_errors_exit_2():
    done = subprocess.run([sys.executable, "-m", "infermodel.cli", "run"], capture_output=True, text=True)
    assert done.returncode == 2 and "usage:" in done.stderr


def test_console_script_runs_the_shipped_scenario():
    done = subprocess.run([sys.executable, "-m", "infermodel.cli", "run", CASE, "--quantities", "tpot"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "6.237 ms" in done.stdout


def test_every_shipped_scenario_passes_check_tables_included(autoload_host, capsys):
    for path in sorted(SCENARIOS.glob("*.toml")):
        assert main(["check", str(path)]) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_check_reports_every_broken_table_at_once(write_scenario, capsys):
    path = write_scenario(f'extends = "{CASE}"\n[sweep]\n"workload.bacth" = [1, 2]\n'
                          '[simulation]\nratez = [0.1]\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 errors encountered" in err
    assert "did you mean 'workload.batch'?" in err and "did you mean 'rates'?" in err


def test_graph_draws_png_and_svg(tmp_path, capsys):
    png, svg = tmp_path / "g.png", tmp_path / "g.svg"
    assert main(["graph", CASE, "--format", "png", "--output", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["graph", CASE, "--format", "svg", "--output", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()[:2000]
    assert main(["graph", CASE, "--format", "png"]) == 2
    assert "--output FILE.png" in capsys.readouterr().err


def test_unset_removes_a_lever_table_the_scenario_writes(capsys):
    spec = str(SCENARIOS / "spec-lab5.toml")
    assert main(["run", spec, "--format", "json"]) == 0
    assert "spec_speedup" in json.loads(capsys.readouterr().out)["quantities"]
    assert main(["run", spec, "--unset", "levers.speculative", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "spec_speedup" not in data["quantities"]
    assert data["scenario"]["levers"] == ["number_formats"]


def test_unset_a_value_falls_back_to_the_default_and_set_applies_after_it(capsys):
    spec = str(SCENARIOS / "spec-lab5.toml")
    assert main(["run", spec, "--unset", "levers.speculative.verify_cost", "--quantities",
                 "spec_verify_cost", "--format", "json"]) == 0
    derived = json.loads(capsys.readouterr().out)["quantities"]["spec_verify_cost"]
    assert derived["value"] != 1.224 and not derived["input"]
    assert main(["run", spec, "--unset", "levers.speculative", "--set", "levers.speculative.k=2",
                 "--set", "levers.speculative.acceptance=0.8", "--set", "levers.speculative.draft_cost=0.1",
                 "--quantities", "spec_k",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quantities"]["spec_k"]["value"] == 2


def test_unset_of_a_key_the_scenario_does_not_write_suggests_the_nearest(capsys):
    assert main(["run", str(SCENARIOS / "spec-lab5.toml"), "--unset", "levers.speculativ"]) == 2
    err = capsys.readouterr().err
    assert "cannot unset levers.speculativ" in err and "did you mean 'levers.speculative'?" in err
    assert main(["run", CASE, "--unset", "levers..x"]) == 2
    assert "not a dotted key path" in capsys.readouterr().err


@pytest.mark.parametrize("key,wrong,right", [
    ("hardware.preset", "L4", "l4"),
    ("hardware.preset", "H100-SXM", "h100-sxm"),
])
def test_preset_names_are_suggested_across_case(key, wrong, right, capsys):
    assert main(["run", CASE, "--set", f"{key}={wrong}"]) == 2
    assert f"did you mean {right!r}?" in capsys.readouterr().err


def test_a_format_family_name_suggests_its_default_format(capsys):
    quant = str(SCENARIOS / "quant-int4.toml")
    assert main(["run", quant, "--set", "levers.quantization.linear=int4"]) == 2
    assert "did you mean 'int4-g128'?" in capsys.readouterr().err


def test_header_shows_the_set_overrides(capsys):
    assert main(["run", CASE, "--set", "workload.batch=20"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "with --set workload.batch=20"


def test_check_lists_what_each_lever_did(capsys):
    assert main(["check", str(SCENARIOS / "spec-lab5.toml")]) == 0
    out = capsys.readouterr().out
    assert "speculative (defines" in out and "changes 3)" in out


def test_presets_listing_shows_each_presets_figures(capsys):
    assert main(["presets", "hardware"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["h100-sxm"])
    # the figures the preset file writes: the 81,559 MiB the runtime reports for the
    # "80 GB" card, and the datasheet's 3.35 TB/s and 989 TFLOP/s dense
    assert lines[at + 1].split() == ["memory", "81559", "MiB", "·", "bandwidth", "3.35", "TB/s", "·",
                                     "flops", "989", "TFLOP/s", "·", "price", "USD", "2.5/h"]
    assert main(["presets", "models", "--format", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["llama-3.1-8b"]["values"]["d_ff"] == 14336


def test_presets_show_prints_one_preset_and_suggests_a_near_name(capsys):
    assert main(["presets", "show", "l4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hardware preset l4") and "[hardware]" in out
    assert main(["presets", "show", "L4"]) == 2
    assert "did you mean 'l4'?" in capsys.readouterr().err
    assert main(["presets", "show"]) == 2


def test_remove_keys_removes_a_table_and_its_origins():
    from infermodel.scenario import Origin, remove_keys

    origins = {"levers.a.k": Origin("f.toml", 3), "workload.batch": Origin("f.toml", 5)}
    data = remove_keys({"levers": {"a": {"k": 1}}, "workload": {"batch": 4}}, origins, ["levers.a"])
    assert data == {"levers": {}, "workload": {"batch": 4}} and list(origins) == ["workload.batch"]
