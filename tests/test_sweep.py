"""Sweeps: grids over fields, vectorised evaluation equal to the scalar path, outputs."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from infermodel import hookimpl
from infermodel.cli import main
from infermodel.engine.evaluation import evaluate_afresh as evaluate
from infermodel.engine.reads import plugin_reads
from infermodel.errors import ScenarioError, UnknownQuantityError
from infermodel.scenario import load_scenario
from infermodel.sweeping import (
    REMOVE,
    expand_range,
    parse_over,
    plan_sweep,
    sweep,
)

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "scenarios" / "module10-case-base.toml"
CASE = ROOT / "scenarios" / "case-study-24gb.toml"


def same(a, b) -> bool:
    """Equal to 1e-12 relative (infinities equal, NaN equal to NaN)."""
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


# -- ranges and --over ----------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("1..512 log2", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]),
    ("1..5", [1, 2, 3, 4, 5]),
    ("2..10 step 4", [2, 6, 10]),
    ("0.5..1 step 0.1", [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]),
    ("1..1000 log10", [1, 10, 100, 1000]),
    ("3..100 times 3", [3, 9, 27, 81]),
    ("0..1 5 points", [0.0, 0.25, 0.5, 0.75, 1.0]),
    ("1..100 3 points log", [1.0, 10.0, 100.0]),
    ("7..7", [7]),
    ("1..600 log2", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]),
])
def test_expand_range(text, expected):
    got = expand_range(text)
    assert got == expected
    assert [type(v) for v in got] == [type(v) for v in expected]


def test_expand_range_units():
    assert expand_range("40 GB..80 GB step 20 GB", "B") == [40e9, 60e9, 80e9]


@pytest.mark.parametrize("text, message", [
    ("8..1 log2", "empty"),
    ("8..1", "empty"),
    ("1..5 step 0", "step"),
    ("0.5..1", "needs a step"),
    ("0..8 log2", "above 0"),
    ("1..8 times 1", "greater than 1"),
    ("a..b", "not a number"),
    ("1..10 0 points", "empty"),
    ("1..1000000000000", "more than"),
])
def test_expand_range_errors(text, message):
    with pytest.raises(ValueError, match=message):
        expand_range(text)


def test_integer_field_range_refuses_fractions():
    with pytest.raises(ValueError, match="takes integers"):
        expand_range("1..2 3 points", integer=True)


def test_parse_over():
    assert parse_over(["workload.batch=1,2,4", "hardware.preset=h100-sxm,h200",
                       "hardware.memory=24 GB", "workload.prompt_tokens=1..8 log2",
                       "levers.number_formats=[false, {kv_bits = 8}]"]) == {
        "workload.batch": [1, 2, 4], "hardware.preset": ["h100-sxm", "h200"],
        "hardware.memory": ["24 GB"], "workload.prompt_tokens": "1..8 log2",
        "levers.number_formats": [False, {"kv_bits": 8}]}
    for bad in ["workload.batch", "=1,2", "workload.batch=", "workload.batch=1,,2"]:
        with pytest.raises(ScenarioError):
            parse_over([bad])


# -- values equal the scalar path ------------------------------------------------------


def test_vectorised_points_equal_scalar_evaluate():
    """A random sample of points equals infermodel.evaluate at that point, to 1e-12."""
    over = {"workload.batch": "1..256 log2",
            "workload.prompt_tokens": [512, 4000],
            "hardware.memory": ["24 GB", "48 GB"],
            "efficiency.mbu": [0.5, 1.0],
            "hardware.preset": ["module10-24gb", "module10-48gb"],
            "levers.number_formats.kv_bits": [8, 16]}
    base = load_scenario(BASE)
    result = sweep(base, over)
    assert len(result) == 9 * 2 * 2 * 2 * 2 * 2
    plan = result.plan
    vector = {plan.axes[i].name for i in plan.vector}
    assert {"workload.batch", "hardware.memory", "efficiency.mbu"} <= vector
    structural = {plan.axes[i].name for i in plan.structural}
    assert {"hardware.preset", "levers.number_formats.kv_bits"} <= structural
    assert len(plan.blocks) == 4
    rng = random.Random(6)
    for index in rng.sample(range(len(result)), 25):
        scalar = evaluate(base, result.overrides(index))
        for name in result.quantities:
            if not result.defined(name)[index]:
                assert name not in scalar
                continue
            assert same(result[name][index], scalar[name]), (index, name)


def test_sweep_matches_run_of_each_point_for_a_shipped_scenario():
    result = sweep(CASE, {"workload.batch": [1, 18]}, quantities=["tokens_per_s_total", "ttft"])
    # Module 10, Lab 1 row "24GB-1.0": solo 160.3 tokens/s, 18 sequences 958.9 tokens/s.
    assert round(result["tokens_per_s_total"][0], 1) == 160.3
    assert round(result["tokens_per_s_total"][1], 1) == 958.9
    assert list(result.columns) == ["workload.batch", "tokens_per_s_total", "ttft"]


def test_chunk_size_does_not_change_numbers():
    over = {"workload.batch": "1..20", "hardware.preset": ["module10-24gb", "module10-48gb"],
            "efficiency.mbu": [0.3, 0.7, 1.0]}
    one = sweep(BASE, over, quantities=["tpot", "fits", "max_sequences"])
    other = sweep(BASE, over, quantities=["tpot", "fits", "max_sequences"], chunk_size=7)
    for name in one.columns:
        assert np.array_equal(one[name], other[name])
    assert one["fits"].dtype == bool


def test_grid_order_first_axis_slowest():
    result = sweep(BASE, {"workload.batch": [1, 2, 3], "hardware.preset": ["module10-24gb",
                                                                           "module10-48gb"]},
                   quantities=["batch", "card_memory"])
    assert result["workload.batch"].tolist() == [1, 1, 2, 2, 3, 3]
    assert result["hardware.preset"].tolist() == ["module10-24gb", "module10-48gb"] * 3
    assert result["batch"].tolist() == [1, 1, 2, 2, 3, 3]
    assert result["card_memory"].tolist() == [24e9, 48e9] * 3
    assert result.labels(3) == {"workload.batch": 2, "hardware.preset": "module10-48gb"}


def test_lever_on_and_off():
    result = sweep(BASE, {"levers.number_formats": [False, {"kv_bits": 8}]},
                   quantities=["kv_bytes_per_token"])
    assert result["kv_bytes_per_token"].tolist() == [147456, 73728]  # Module 10 §3 / §11
    assert result.overrides(0) == {"levers.number_formats": REMOVE}
    assert result["levers.number_formats"].tolist() == ["off", "{kv_bits = 8}"]


def test_choice_axis_sets_several_fields():
    choices = {"card": {"small": {"hardware.memory": "24 GB", "hardware.bandwidth": "1 TB/s"},
                        "big": {"hardware.memory": "80 GB", "hardware.bandwidth": "3.35 TB/s"}}}
    result = sweep(BASE, {"workload.batch": [1, 4]}, choices=choices,
                   quantities=["memory_bytes", "tpot"])
    assert result["card"].tolist() == ["small", "big", "small", "big"]
    assert result["memory_bytes"].tolist() == [24e9, 80e9, 24e9, 80e9]
    for index in range(4):
        assert same(result["tpot"][index], evaluate(BASE, result.overrides(index))["tpot"])


def test_quantity_missing_in_some_blocks_is_undefined():
    result = sweep(BASE, {"hardware.preset": ["module10-24gb", "module10-48gb"]},
                   quantities=["cost_per_hour", "tpot"])
    assert result.defined("cost_per_hour").tolist() == [True, False]
    rows = list(csv.reader(io.StringIO(result.to_csv())))
    assert rows[0] == ["hardware.preset", "cost_per_hour", "tpot"]
    assert rows[2][1] == ""
    data = json.loads(result.to_json())
    assert data["points"][1]["cost_per_hour"] is None
    assert data["points"][0]["cost_per_hour"] == 1


def test_unknown_quantity_suggests():
    with pytest.raises(UnknownQuantityError, match="did you mean 'tpot'"):
        sweep(BASE, {"workload.batch": [1]}, quantities=["tpto"])


def test_sweep_of_nothing_is_the_scenario():
    result = sweep(CASE, quantities=["tpot"])
    assert len(result) == 1
    assert same(result["tpot"][0], evaluate(CASE)["tpot"])


def test_package_attribute_is_the_function():
    import infermodel.sweeping

    assert callable(infermodel.sweep) and infermodel.sweep is sweep
    assert callable(infermodel.search)


# -- the [sweep] table -------------------------------------------------------------------


SCENARIO = """\
extends = "{base}"

[sweep]
"workload.batch" = "1..8 log2"
quantities = ["tpot", "fits"]

[sweep.hardware]
preset = ["module10-24gb", "module10-48gb"]

[sweep.choices.weights]
bf16 = {{ "levers.number_formats.weight_bits_linear" = 16 }}
int4 = {{ "levers.number_formats.weight_bits_linear" = 4.125 }}
"""


def test_sweep_table(write_scenario):
    path = write_scenario(SCENARIO.format(base=BASE.as_posix()))
    result = sweep(path)
    assert [a.name for a in result.axes] == ["workload.batch", "hardware.preset", "weights"]
    assert len(result) == 4 * 2 * 2
    assert result.quantities == ["tpot", "fits"]
    overridden = sweep(path, {"workload.batch": [16]})
    assert overridden["workload.batch"].tolist() == [16] * 4
    assert [a.name for a in overridden.axes][-1] == "workload.batch"
    only = sweep(path, {"workload.batch": [2]}, use_table=False)
    assert [a.name for a in only.axes] == ["workload.batch"]


@pytest.mark.parametrize("table, message, line", [
    ('"workload.bach" = [1, 2]', "did you mean 'workload.batch'", 4),
    ('batch = [1, 2]', "did you mean 'workload.batch'", 4),
    ('"workload.batch" = []', "empty", 4),
    ('"workload.batch" = [1, 2.5]', "integer", 4),
    ('"workload.batch" = "16..1 log2"', "empty", 4),
    ('"hardware.preset" = ["h100"]', "did you mean", 4),
    ('"hardware.memory" = ["24 GX"]', "24 GX", 4),
    ('"levers.nuber_formats.kv_bits" = [8]', "number_formats", 4),
    ('quantities = "tpot"', "list of quantity names", 4),
    ('"efficiency.mbu" = [0.5, 2]', "<= 1", 4),
])
def test_sweep_table_errors(write_scenario, table, message, line):
    path = write_scenario(f'extends = "{BASE.as_posix()}"\n\n[sweep]\n{table}\n')
    with pytest.raises(ScenarioError) as caught:
        sweep(path)
    text = str(caught.value)
    assert message in text
    assert f"scenario.toml:{line}" in text


def test_two_axes_on_one_field(write_scenario):
    path = write_scenario(f'extends = "{BASE.as_posix()}"\n\n[sweep]\n'
                          '"hardware.memory" = ["24 GB"]\n'
                          '[sweep.choices.card]\nbig = {"hardware.memory" = "80 GB"}\n')
    with pytest.raises(ScenarioError, match="set by two axes"):
        sweep(path)


def test_invalid_structural_point_names_the_point():
    with pytest.raises(ScenarioError, match=r"at the sweep point levers.number_formats.kv_bits = 40"):
        sweep(BASE, {"levers.number_formats.kv_bits": [8, 40]})


# -- fields plugins read ----------------------------------------------------------------


class ReadsOutputTokens:
    """Defines a quantity whose formula depends on a field it reads."""

    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        from infermodel import S

        if scenario.value("workload.output_tokens") > 1000:
            define("answer_weight", S.output_tokens * 2, unit="1", description="long answers")
        else:
            define("answer_weight", S.output_tokens + 1, unit="1", description="short answers")


class ValidatesOutputTokens:
    @hookimpl
    def infermodel_validate_scenario(self, scenario, report):
        if scenario.value("workload.output_tokens") > 3000:
            report("workload.output_tokens", "answers longer than 3000 tokens are refused here")


def test_field_read_while_building_is_structural(register_plugin):
    register_plugin(ReadsOutputTokens(), "reads_output_tokens")
    base = load_scenario(BASE)
    assert "workload.output_tokens" in plugin_reads(base).build
    result = sweep(base, {"workload.output_tokens": [500, 2000], "workload.batch": [1, 2]},
                   quantities=["answer_weight", "e2e_latency"])
    plan = result.plan
    assert [plan.axes[i].name for i in plan.structural] == ["workload.output_tokens"]
    assert result["answer_weight"].tolist() == [501, 501, 4000, 4000]
    for index in range(len(result)):
        scalar = evaluate(base, result.overrides(index))
        assert same(result["e2e_latency"][index], scalar["e2e_latency"])


def test_field_read_only_by_validation_stays_vector_and_is_checked(register_plugin):
    register_plugin(ValidatesOutputTokens(), "validates_output_tokens")
    base = load_scenario(BASE)
    reads = plugin_reads(base)
    assert "workload.output_tokens" in reads.validation
    assert "workload.output_tokens" not in reads.build
    result = sweep(base, {"workload.output_tokens": [1000, 2000]}, quantities=["e2e_latency"])
    assert result.plan.vector == [0]
    with pytest.raises(ScenarioError) as caught:
        sweep(base, {"workload.output_tokens": [1000, 4000], "workload.batch": [1, 2]})
    assert "at the sweep point workload.output_tokens = 4000" in str(caught.value)
    assert "refused here" in str(caught.value)


# -- writing -------------------------------------------------------------------------------


def test_csv_and_json_outputs(tmp_path):
    plan = plan_sweep(CASE, {"workload.batch": [1, 18, 64]},
                      quantities=["tokens_per_s_total", "fits", "critical_batch"])
    plan.write(tmp_path / "out.csv", "csv")
    rows = list(csv.reader((tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()))
    assert rows[0] == ["workload.batch", "tokens_per_s_total", "fits", "critical_batch"]
    assert [r[0] for r in rows[1:]] == ["1", "18", "64"]
    assert [r[2] for r in rows[1:]] == ["true", "true", "false"]
    assert rows[1][3] == "inf"
    assert math.isclose(float(rows[2][1]), 958.9, abs_tol=0.05)
    plan.write(tmp_path / "out.json", "json")
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["count"] == 3
    assert data["axes"][0] == {"name": "workload.batch", "fields": ["workload.batch"],
                               "values": [1, 18, 64]}
    assert data["quantities"]["fits"]["unit"] == "bool"
    assert data["points"][0]["critical_batch"] == "inf"
    assert data["points"][2]["fits"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "out.json"]


def test_interrupted_write_leaves_no_file(tmp_path, monkeypatch):
    plan = plan_sweep(CASE, {"workload.batch": "1..100"}, quantities=["tpot"])
    target = tmp_path / "out.csv"
    calls = []
    original = plan.evaluate_range

    def interrupted(start, stop):
        calls.append(start)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(start, stop)

    monkeypatch.setattr(plan, "evaluate_range", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plan.write(target, "csv", chunk_size=10)
    assert list(tmp_path.iterdir()) == []


def test_existing_file_survives_an_interrupted_write(tmp_path, monkeypatch):
    target = tmp_path / "out.csv"
    target.write_text("previous\n")
    plan = plan_sweep(CASE, {"workload.batch": "1..100"}, quantities=["tpot"])

    def interrupted(start, stop):
        raise KeyboardInterrupt

    monkeypatch.setattr(plan, "evaluate_range", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plan.write(target, "csv")
    assert target.read_text() == "previous\n"
    assert list(tmp_path.iterdir()) == [target]


def test_table():
    result = sweep(CASE, {"workload.batch": [1, 18]}, quantities=["tpot", "fits"])
    lines = result.table().splitlines()
    assert lines[0].split() == ["workload.batch", "tpot", "[s]", "fits"]
    assert lines[2].split() == ["1", "6.237", "ms", "yes"]


# -- the command line ----------------------------------------------------------------------


def run_cli(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_sweep_csv(tmp_path, capsys):
    target = tmp_path / "grid.csv"
    status, _out, err = run_cli(capsys, "sweep", CASE, "--over", "workload.batch=1..4 log2",
                               "--over", "hardware.memory=24 GB,48 GB",
                               "--quantities", "fits,max_sequences", "-o", target)
    assert status == 0, err
    rows = list(csv.reader(target.read_text(encoding="utf-8").splitlines()))
    assert rows[0] == ["workload.batch", "hardware.memory", "fits", "max_sequences"]
    assert rows[1:3] == [["1", "24000000000", "true", "18"], ["1", "48000000000", "true", "45"]]  # Module 10 Lab 1: 18 and 45
    assert len(rows) == 1 + 3 * 2


def test_cli_sweep_table_and_json(capsys):
    status, out, err = run_cli(capsys, "sweep", CASE, "--over", "workload.batch=1,18")
    assert status == 0, err
    assert "tokens_per_s_total" in out.splitlines()[0]
    assert "958.9 tokens/s" in out
    status, out, err = run_cli(capsys, "sweep", CASE, "--over", "workload.batch=1,18",
                               "--format", "json", "--quantities", "tpot")
    assert status == 0, err
    assert [p["workload.batch"] for p in json.loads(out)["points"]] == [1, 18]


@pytest.mark.parametrize("arguments, message", [
    (["--over", "workload.bach=1,2"], "did you mean 'workload.batch'"),
    (["--over", "workload.batch=8..1 log2"], "empty"),
    (["--over", "workload.batch=1,2", "--quantities", "tpot,tpto"], "did you mean 'tpot'"),
    ([], "nothing to sweep"),
    (["--over", "hardware.preset=h100"], "did you mean"),
    (["--over", "workload.batch=1,2", "--chunk-size", "0"], "at least 1"),
    (["--over", "workload.batch=1..1000000", "--format", "table"], "not readable"),
    (["--over", "levers.speculatve.k=1,2"], "lever named 'speculatve'"),
])
def test_cli_sweep_errors(capsys, arguments, message):
    status, _out, err = run_cli(capsys, "sweep", CASE, *arguments)
    assert status == 2
    assert message in err
    assert "Traceback" not in err


def test_progress_bar_draws_and_clears():
    from infermodel.progress import Progress

    stream = io.StringIO()
    with Progress(1000, "sweep", stream=stream, enabled=True, delay=0, interval=0) as bar:
        bar.update(250)
        assert "25.0%" in stream.getvalue()
        assert "250/1k points" in bar.line()
    assert stream.getvalue().endswith("\r\x1b[K")
    quiet = io.StringIO()
    with Progress(10, stream=quiet) as bar:  # not a terminal: silent
        bar.update(10)
    assert quiet.getvalue() == ""


# -- scale -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_ten_million_points_in_bounded_memory(tmp_path):
    """A 10,000,000-point sweep written as CSV stays under 2 GiB resident.

    The child reports its own peak: ``VmHWM`` of its address space where Linux gives it.
    ``getrusage``'s ``ru_maxrss`` is kept across ``execve``, so a child spawned from a
    test process that had grown past 2 GiB reported the parent's size, not the sweep's.
    """
    import subprocess
    import sys

    target = tmp_path / "big.csv"
    code = f"""
import resource
from pathlib import Path
from infermodel.sweeping import plan_sweep
plan = plan_sweep({str(CASE)!r}, {{"workload.batch": "1..10000", "workload.prompt_tokens": "1..1000"}},
                  quantities=["tpot", "fits", "tokens_per_s_total"])
assert plan.total == 10_000_000
plan.write({str(target)!r}, "csv")
result = plan_sweep({str(CASE)!r}, {{"workload.batch": "1..10000", "workload.prompt_tokens": "1..1000"}},
                    quantities=["tpot"]).run()
assert len(result) == 10_000_000
status = Path("/proc/self/status")
peaks = [line.split()[1] for line in status.read_text().splitlines()
         if line.startswith("VmHWM:")] if status.exists() else []
print(peaks[0] if peaks else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    peak_kib = int(done.stdout.strip().splitlines()[-1])
    assert peak_kib < 2 * 1024 * 1024, f"peak resident {peak_kib / 1024:.0f} MiB"
    with open(target, encoding="utf-8") as handle:
        header = handle.readline()
        count = sum(1 for _ in handle)
    assert header.strip() == "workload.batch,workload.prompt_tokens,tpot,fits,tokens_per_s_total"
    assert count == 10_000_000
