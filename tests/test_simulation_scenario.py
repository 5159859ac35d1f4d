"""The simulator driven by a scenario: its quantities as iteration cost, its [simulation]
table, the CLI (table, JSON, CSV, capacity, plot) and its errors.

Figures from "Module 10: Inference and serving", Lab 3.
"""

from __future__ import annotations

import json

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

LAB3 = SCENARIOS / "module10-lab3-policies.toml"


def test_cost_model_comes_from_the_scenario_quantities():
    from infermodel.analyses.simulation import plan

    chosen = plan(infermodel.load_scenario(LAB3))
    cost = chosen.cost_model
    assert cost.weight_bytes == 5.5e9 and cost.kv_bytes_per_token == 147456
    assert cost.cache_memory == pytest.approx(16e9) and cost.compute == pytest.approx(82.5e12)
    # Lab 3's iteration costs from the scenario's quantities.
    assert f"{cost.iteration_time([], [(4000, 0)]):.3f}" == "0.923"
    assert f"{cost.iteration_time([5000] * 18) * 1000:.2f}" == "18.77"
    assert f"{cost.iteration_time([5000] * 17, [(512, 0)]) * 1000:.2f}" == "116.04"
    assert f"{cost.iteration_time([5000] * 17, [(512, 2000)]) * 1000:.2f}" == "123.36"


def test_simulate_json_shape(capsys):
    assert main(["simulate", str(LAB3), "--policy", "chunked", "--rate", "0.2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (run,) = data["runs"]
    assert run["policy"] == "chunked" and run["rate"] == 0.2
    m = run["metrics"]
    for key in ("realised_rate", "ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "itl_max",
                "tpot_p50", "e2e_p50", "throughput_tokens_per_s", "goodput", "preemptions"):
        assert key in m
    # Lab 3's table row "chunked 0.20": 0.224, 1.09/2.89 s, 10.1/61.6/65.9 ms, 384.3 tok/s.
    assert f"{m['realised_rate']:.3f}" == "0.224"
    assert (f"{m['ttft_p50']:.2f}", f"{m['ttft_p99']:.2f}") == ("1.09", "2.89")
    assert f"{m['itl_p99'] * 1000:.1f}" == "61.6" and f"{m['throughput_tokens_per_s']:.1f}" == "384.3"


def test_simulate_csv_and_plot(tmp_path, capsys):
    plot = tmp_path / "latency.png"
    assert main(["simulate", str(LAB3), "--policy", "static", "--policy", "chunked", "--rate", "0.1",
                 "--rate", "0.2", "--format", "csv", "--plot", str(plot)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("policy,rate,") and len(lines) == 5
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("overrides,rate,throughput,cost", [
    ([], "0.244", "466.3", "0.596"),
    (["--set", "levers.number_formats.kv_bits=8"], "0.252", "482.1", "0.576"),
    (["--set", "hardware.preset=module10-80gb-h100"], "2.196", "3500.0", "0.198"),
    (["--set", "hardware.preset=module10-24gb-l4"], "0.065", "124.0", "1.792"),
])
def test_capacity_profiles_from_scenarios(overrides, rate, throughput, cost, capsys):
    # Lab 3 capacity: 24GB-bf16, 24GB-int8, H100-bf16, L4-bf16, each with neighbours [True, False].
    assert main(["simulate", str(LAB3), "--capacity", "--format", "json", *overrides]) == 0
    data = json.loads(capsys.readouterr().out)
    assert f"{data['rate']:.3f}" == rate
    assert f"{data['metrics']['throughput_tokens_per_s']:.1f}" == throughput
    assert f"{data['usd_per_million_output_tokens']:.3f}" == cost
    assert [n["passes"] for n in data["neighbours"]] == [True, False]


def test_python_api_mirrors_the_cli():
    result = infermodel.simulate(LAB3, policies=["static"], rates=[0.1])
    m = result.runs[0].metrics
    assert (f"{m['ttft_p50']:.2f}", f"{m['ttft_p99']:.2f}") == ("13.04", "52.59")


def test_levers_change_the_simulation():
    # An 8-bit cache halves kv bytes: the same workload runs with more room and less traffic.
    base = infermodel.simulate(LAB3, policies=["paged"], rates=[0.3])
    int8 = infermodel.simulate(LAB3, policies=["paged"], rates=[0.3],
                               overrides={"levers.number_formats.kv_bits": 8})
    assert int8.runs[0].metrics["preemptions"] < base.runs[0].metrics["preemptions"]


@pytest.mark.parametrize("table,fragment", [
    ("[simulation]\nratez = [0.1]\n", "did you mean 'rates'?"),
    ("[simulation]\nrates = [0.0]\n", "rate"),
    ("[simulation]\npolicies = [\"statik\"]\n", "statik"),
    ("[simulation.workload]\noutput = { law = \"triangle\", value = 3 }\n", "triangle"),
    ("[simulation.workload]\ncount = 0\n", "count"),
    ("[simulation.slo]\nttft = \"3 parsecs\"\n", "simulation.slo.ttft"),
    ("[simulation]\nseed = 1.5\n", "simulation.seed"),
])
def test_bad_simulation_tables_are_clear_errors(table, fragment, write_scenario, capsys):
    path = write_scenario(f'extends = "{LAB3}"\n{table}')
    assert main(["simulate", str(path), "--policy", "chunked", "--rate", "0.2"] if "rates" not in table
                else ["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and fragment in err and str(path) in err



def test_every_problem_of_a_simulation_table_is_reported_at_once(write_scenario, capsys):
    # The [simulation] table is read as a lever table is: each mistake at its own key
    # path and line, nested tables included, in one message.
    path = write_scenario(f'extends = "{LAB3}"\n[simulation]\nratez = [0.1]\nseed = 1.5\n'
                          'engine = "quick"\npolicies = ["statik"]\n'
                          '[simulation.slo]\ntfft = "3 s"\n[simulation.capacity]\nsteps = "ten"\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "6 errors encountered" in err and "Traceback" not in err
    for line, fragment in [(3, "simulation.ratez: unknown key 'ratez'"),
                           (4, "simulation.seed: got 1.5"),
                           (5, "simulation.engine: got 'quick'"),
                           (6, "simulation.policies: policy must be one of"),
                           (8, "simulation.slo.tfft: unknown key 'tfft'"),
                           (10, "simulation.capacity.steps: got a string 'ten'")]:
        assert f"scenario.toml:{line}: {fragment}" in err, (fragment, err)
    assert "did you mean 'rates'?" in err and "did you mean 'ttft'?" in err


def test_a_nested_simulation_table_written_as_a_value_is_named(write_scenario, capsys):
    path = write_scenario(f'extends = "{LAB3}"\n[simulation]\nslo = 3\ndisaggregation = "x"\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "simulation.slo: got 3 (expected a [simulation.slo] table)" in err
    assert "simulation.disaggregation: got 'x' (expected a [simulation.disaggregation] table)" in err


def test_a_request_that_cannot_fit_is_named(write_scenario, capsys):
    path = write_scenario(f'extends = "{LAB3}"\n[simulation]\ncache_memory = "0.5 GB"\n')
    assert main(["simulate", str(path), "--policy", "chunked", "--rate", "0.2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "cache" in err


def test_lever_changes_the_simulation_leaves_out_are_reported(autoload_host, capsys, write_scenario):
    # The test suite's third-party lever adds host time to every decode step in a way
    # the iteration cost does not follow: the run says so, naming the change.
    path = write_scenario(f'extends = "{LAB3}"\n[levers.host_overhead]\nper_step = "1 ms"\n')
    assert main(["simulate", str(path), "--policy", "chunked", "--rate", "0.2"]) == 0
    err = capsys.readouterr().err
    assert "warning: decode_step_time is changed by plugin" in err
    # Speculative decoding is simulated (verification steps): only the parts it leaves
    # out are warnings, each with its size.
    assert main(["simulate", str(SCENARIOS / "spec-lab5.toml"), "--policy", "chunked",
                 "--rate", "0.5"]) == 0
    captured = capsys.readouterr()
    assert "plugin 'speculative'" not in captured.err and "note: speculative decoding" in captured.out
    assert "warning: speculative decoding: the draft model's prefill" in captured.err
    # Mixtral's expert routing is priced by the simulator itself (expert coverage at the
    # iteration's tokens): a note in the output, no warning.
    assert main(["simulate", str(SCENARIOS / "moe-mixtral-int4.toml"), "--policy", "chunked",
                 "--rate", "0.5"]) == 0
    captured = capsys.readouterr()
    assert "moe" not in captured.err and "note: expert coverage" in captured.out
    # The Lab 3 scenario has nothing of the kind.
    assert main(["simulate", str(LAB3), "--policy", "chunked", "--rate", "0.2"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_latency_plot_draws_the_p50_lines_its_legend_names_on_plain_log_axes(tmp_path, monkeypatch):
    import matplotlib.figure

    drawn = {}
    original = matplotlib.figure.Figure.savefig

    def keep(self, *args, **kwargs):
        drawn["figure"] = self
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    assert main(["simulate", str(LAB3), "--policy", "chunked", "--rate", "0.1", "--rate", "0.2",
                 "--plot", str(tmp_path / "latency.png")]) == 0
    top, bottom = drawn["figure"].axes[:2]
    for panel in (top, bottom):
        labels = [line.get_label() for line in panel.get_lines() if not line.get_label().startswith("_")]
        assert labels == ["chunked p99", "chunked p50"]
        legend = [t.get_text() for t in panel.get_legend().get_texts()]
        assert legend == labels
        assert panel.get_yscale() == "log"
        # ticks read as plain numbers (0.5, 2, 30), never 10^x
        assert panel.yaxis.get_major_formatter()(0.5, 0) == "0.5"
        assert panel.yaxis.get_major_formatter()(100, 0) == "100"
