"""Reliability: every reproduction of issue 16 ("no traceback, hang, runaway memory or
overwritten input") as a regression test.

Each test runs the command line in-process (``main(argv)``) and asserts what the
reliability page of the docs promises: exit status 0 or 2, one ``error:`` message, no
traceback, and no input file changed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import stat
import time
from importlib import metadata
from pathlib import Path

import pytest
import sympy

from conftest import DATA, SCENARIOS
from infermodel import S, hookimpl
from infermodel.cli import main
from infermodel.host import PluginHost, set_host

QUANT = SCENARIOS / "quant-bf16.toml"
LAB3 = SCENARIOS / "module10-lab3-policies.toml"


def _run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return status, out, err


def _one_error(err: str, *fragments: str) -> None:
    assert err.startswith("error: "), err
    for fragment in fragments:
        assert fragment in err, err


def _preset_path(kind: str, name: str) -> Path:
    from infermodel.host import get_host

    return Path(get_host().registries.presets[kind][name].path)


# ---------------------------------------------------------------------------------
# Inputs are never overwritten
# ---------------------------------------------------------------------------------


def test_sweep_output_over_a_preset_named_by_an_over_axis_is_refused(host, capsys):
    h200 = _preset_path("hardware", "h200")
    before = h200.read_bytes()
    status, _, err = _run(capsys, "sweep", QUANT, "--over", "hardware.preset=h100-sxm,h200",
                          "-o", h200, "--format", "csv")
    assert status == 2
    _one_error(err, "refusing to write over", "h200.toml")
    assert h200.read_bytes() == before


def _lengths_scenario(tmp_path: Path) -> tuple[Path, Path]:
    lengths = tmp_path / "lengths.csv"
    lengths.write_text((DATA / "sim_lengths.csv").read_text())
    scenario = tmp_path / "lengths.toml"
    scenario.write_text(f'extends = "{QUANT}"\n[simulation]\nrates = [0.2]\n'
                        'policies = ["chunked"]\n[simulation.workload]\ncount = 20\n'
                        'output = {law = "empirical", file = "lengths.csv", column = "output_tokens"}\n')
    return scenario, lengths


def test_simulate_output_over_its_length_file_is_refused(host, tmp_path, capsys):
    scenario, lengths = _lengths_scenario(tmp_path)
    before = lengths.read_bytes()
    status, _, err = _run(capsys, "simulate", scenario, "--format", "csv", "-o", lengths)
    assert status == 2
    # (the simulator's notes on the scenario's engine conventions may come first)
    err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("warning:"))
    _one_error(err, "refusing to write over", "lengths.csv")
    assert lengths.read_bytes() == before
    # The same run written elsewhere works (the length file is readable and used).
    status, _, err = _run(capsys, "simulate", scenario, "--format", "csv", "-o", tmp_path / "out.csv")
    assert status == 0, err


def test_extends_chain_and_hf_config_are_protected(host, tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text((DATA / "hf" / "llama-3.1-8b.json").read_text())
    base = tmp_path / "base.toml"
    base.write_text('[hardware]\npreset = "h100-sxm"\n[workload]\nbatch = 1\n'
                    'prompt_tokens = 100\noutput_tokens = 100\n')
    child = tmp_path / "child.toml"
    child.write_text('extends = "base.toml"\n[model]\nhf_config = "config.json"\n')
    status, _, err = _run(capsys, "run", child)
    assert status == 0, err
    for target in (base, config, child):
        before = target.read_bytes()
        status, _, err = _run(capsys, "run", child, "--format", "json", "-o", target)
        assert status == 2
        _one_error(err, "refusing to write over")
        assert target.read_bytes() == before


# ---------------------------------------------------------------------------------
# Only regular files are written: devices and pipes are refused before the work
# ---------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mknod") or os.geteuid() != 0,
                    reason="making device nodes needs root (where the bug bit)")
def test_device_file_targets_are_refused_and_left_alone(host, tmp_path, capsys):
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    link = tmp_path / "stdout"
    link.symlink_to(null)
    for target in (null, link):
        status, _, err = _run(capsys, "run", QUANT, "-o", target)
        assert status == 2
        _one_error(err, "a character device, not a regular file")
    assert stat.S_ISCHR(os.stat(null).st_mode) and link.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_named_pipe_target_is_refused_at_once_without_a_reader(host, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    status, _, err = _run(capsys, "run", QUANT, "--format", "latex", "-o", fifo)
    assert status == 2 and time.monotonic() - start < 10
    _one_error(err, "a named pipe, not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# ---------------------------------------------------------------------------------
# Hangs
# ---------------------------------------------------------------------------------


def test_explain_with_a_huge_depth_stops_at_the_inputs(host, capsys):
    start = time.monotonic()
    status, deep, err = _run(capsys, "explain", QUANT, "ttft", "--depth", "999999999")
    assert status == 0, err
    assert time.monotonic() - start < 30
    status, full, _ = _run(capsys, "explain", QUANT, "ttft")
    assert sorted(deep.splitlines()) == sorted(full.splitlines())
    status, _, err = _run(capsys, "explain", QUANT, "ttft", "--depth", "-1")
    assert status == 2
    _one_error(err, "depth -1")


# ---------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count", ["1000000000", str(10**40)])
@pytest.mark.parametrize("command", [["check"], ["simulate"]])
def test_workload_request_count_is_capped_before_allocating(host, tmp_path, capsys, count, command):
    scenario = tmp_path / "count.toml"
    scenario.write_text(f'extends = "{LAB3}"\n[simulation.workload]\ncount = {count}\n')
    status, _, err = _run(capsys, *command, scenario)
    assert status == 2
    _one_error(err, "simulation.workload.count", "over the limit of 1,000,000")
    assert len(err) < 600


# ---------------------------------------------------------------------------------
# Tracebacks
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "[simulation]\nrates = " + "[" * 5000 + "]" * 5000 + "\n",
    "[sweep]\nx = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n",
    "[sweep]\nx = " + "[" * 100 + "]" * 100 + "\n",
])
def test_values_nested_too_deeply_are_a_scenario_error(host, tmp_path, capsys, text):
    path = tmp_path / "deep.toml"
    path.write_text(f'extends = "{QUANT}"\n' + text)
    status, _, err = _run(capsys, "check", path)
    assert status == 2
    _one_error(err, "deep.toml", "nested too deeply")


def test_set_value_nested_too_deeply_is_a_scenario_error(host, capsys):
    status, _, err = _run(capsys, "run", QUANT, "--set", "sweep.x=" + "[" * 2000 + "]" * 2000)
    assert status == 2
    _one_error(err, "nested too deeply")


def test_path_components_too_long_are_user_errors(host, tmp_path, capsys):
    long = "a" * 300
    extends = tmp_path / "extends.toml"
    extends.write_text(f'extends = "{long}.toml"\n')
    status, _, err = _run(capsys, "check", extends)
    assert status == 2
    _one_error(err, "extends", "255-byte limit")
    hf = tmp_path / "hf.toml"
    hf.write_text(f'[model]\nhf_config = "{long}.json"\n[hardware]\npreset = "h100-sxm"\n'
                  '[workload]\nbatch = 1\nprompt_tokens = 10\noutput_tokens = 10\n')
    status, _, err = _run(capsys, "check", hf)
    assert status == 2
    _one_error(err, "model.hf_config", "255-byte limit")
    assert err.count("\n") == 1, err  # the missing model fields are not listed as well
    status, _, err = _run(capsys, "run", QUANT, "-o", tmp_path / ("b" * 300))
    assert status == 2
    _one_error(err, "cannot write", "255-byte limit")
    status, _, err = _run(capsys, "run", tmp_path / ("c" * 300 + ".toml"))
    assert status == 2
    _one_error(err, "cannot read file", "255-byte limit")


def test_nul_byte_in_hf_config_is_a_user_error(host, tmp_path, capsys):
    path = tmp_path / "nul.toml"
    path.write_text('[model]\nhf_config = "a\\u0000b.json"\n[hardware]\npreset = "h100-sxm"\n'
                    '[workload]\nbatch = 1\nprompt_tokens = 10\noutput_tokens = 10\n')
    status, _, err = _run(capsys, "check", path)
    assert status == 2
    _one_error(err, "model.hf_config", "NUL byte", "a\\x00b.json")
    assert "\x00" not in err


@pytest.mark.parametrize("command", [["simulate", "--capacity"], ["check"]])
def test_simulation_capacity_that_is_not_a_table_is_a_user_error(host, tmp_path, capsys, command):
    path = tmp_path / "capacity.toml"
    path.write_text(f'extends = "{LAB3}"\n[simulation]\ncapacity = 5\n')
    status, _, err = _run(capsys, command[0], path, *command[1:])
    assert status == 2
    _one_error(err, "simulation.capacity", "got 5", "[simulation.capacity] table")


class _UndefinedFunction:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("mystery", sympy.Function("warp")(S.batch), unit="1", description="a mystery")


class _UnprintableFunction:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("mystery", sympy.lowergamma(S.batch, 2), unit="1", description="a mystery")


@pytest.mark.parametrize("plugin,fragment", [(_UndefinedFunction, "undefined function(s) warp"),
                                             (_UnprintableFunction, "lowergamma")])
def test_plugin_formula_with_an_unknown_function_names_the_plugin(register_plugin, capsys, plugin,
                                                                  fragment):
    register_plugin(plugin(), "mystic")
    status, _, err = _run(capsys, "run", QUANT)
    assert status == 2
    _one_error(err, "plugin 'mystic'", "'mystery'", fragment)


class _Exiting:
    def __init__(self, exception):
        self.exception = exception

    @hookimpl
    def infermodel_validate_scenario(self, scenario, report):
        raise self.exception


@pytest.mark.parametrize("exception", [SystemExit(3), SystemExit(0), GeneratorExit()])
def test_plugin_raising_systemexit_or_generatorexit_in_a_hook_is_reported(register_plugin, capsys,
                                                                          exception):
    register_plugin(_Exiting(exception), "quitter")
    status, _, err = _run(capsys, "run", QUANT)
    assert status == 2
    _one_error(err, "plugin 'quitter' failed in infermodel_validate_scenario",
               type(exception).__name__)


def test_plugin_raising_systemexit_on_import_is_a_load_failure(monkeypatch, tmp_path, capsys):
    module = tmp_path / "quitting_plugin_for_infermodel.py"
    module.write_text("raise SystemExit('bye')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _with_extra_entry_point(monkeypatch, "quitting", "quitting_plugin_for_infermodel")
    set_host(PluginHost())
    try:
        status, _, err = _run(capsys, "run", QUANT)
        assert status == 0
        assert "warning: Error importing plugin 'quitting'" in err and "SystemExit: bye" in err
    finally:
        set_host(None)


# ---------------------------------------------------------------------------------
# Surprises
# ---------------------------------------------------------------------------------


def test_messages_cut_a_huge_echoed_value(host, tmp_path, capsys):
    path = tmp_path / "long.toml"
    path.write_text(f'extends = "{QUANT}"\n[workload]\nbatch = "{"x" * 100_000}"\n')
    status, _, err = _run(capsys, "check", path)
    assert status == 2
    _one_error(err, "workload.batch", "characters)")
    assert len(err) < 1000


def _with_extra_entry_point(monkeypatch, name, module):
    real = metadata.entry_points

    def entry_points(**kwargs):
        found = list(real(**kwargs))
        if kwargs.get("group") == "infermodel":
            found.append(metadata.EntryPoint(name, module, "infermodel"))
        return found

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    monkeypatch.delenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", raising=False)


def test_an_import_broken_plugin_fails_only_the_scenarios_that_need_it(monkeypatch, tmp_path, capsys):
    _with_extra_entry_point(monkeypatch, "broken", "no_such_module_for_infermodel")
    set_host(PluginHost())
    try:
        status, out, err = _run(capsys, "run", QUANT, "--quantities", "tpot")
        assert status == 0 and "tpot" in out
        assert err.count("warning: Error importing plugin 'broken'") == 1
        needs = tmp_path / "needs.toml"
        needs.write_text(f'extends = "{QUANT}"\n[levers.warp_drive]\nfactor = 2\n')
        status, _, err = _run(capsys, "check", needs)
        assert status == 2
        _one_error(err, "levers.warp_drive", "Error importing plugin 'broken'")
    finally:
        set_host(None)


@pytest.mark.parametrize("value,third_party", [("0", True), ("false", True), ("No", True),
                                               ("", True), ("1", False), ("yes", False)])
def test_disable_autoload_reads_false_values_as_off(monkeypatch, value, third_party):
    _with_extra_entry_point(monkeypatch, "broken", "no_such_module_for_infermodel")
    monkeypatch.setenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", value)
    host = PluginHost()
    # A third-party entry point is tried only when autoload is on.
    assert ("broken" in host.records) is third_party


def test_an_empty_plugin_list_says_that_it_loads_nothing(monkeypatch, capsys):
    monkeypatch.setenv("INFERMODEL_LOAD_PLUGINS", "")
    set_host(PluginHost())
    try:
        status, _, err = _run(capsys, "run", QUANT)
        assert status == 2
        _one_error(err, "no plugins are loaded", "INFERMODEL_LOAD_PLUGINS is set but empty")
        assert "expected one of )" not in err and err.count("\n") == 1
    finally:
        set_host(None)


@pytest.mark.parametrize("formula,fragment", [("fitz", "'fitz'"), ("tpot <", "tpot <"),
                                              ("__import__('os')", "__import__")])
def test_check_rejects_the_search_formulas_that_search_rejects(host, tmp_path, capsys, formula,
                                                                fragment):
    # The planner's sweep narrowed to one card (its four weight formats remain): both
    # commands plan every block before they read the formulas.
    path = tmp_path / "search.toml"
    path.write_text(f'extends = "{SCENARIOS / "planner-70b-32-users.toml"}"\n'
                    '[sweep]\n"hardware.preset" = ["h100-sxm"]\n"hardware.count" = [4]\n'
                    f'[search]\nconstraints = ["fits", {json.dumps(formula)}]\n')
    searched, _, search_err = _run(capsys, "search", path)
    checked, _, check_err = _run(capsys, "check", path)
    assert searched == checked == 2
    _one_error(check_err, "search.constraints", fragment)
    assert check_err == search_err


def test_a_device_named_as_a_scenario_is_refused_without_reading_it(host, capsys):
    start = time.monotonic()
    status, _, err = _run(capsys, "check", "/dev/zero")
    assert status == 2
    _one_error(err, "/dev/zero", "not a regular file")
    assert time.monotonic() - start < 10


def test_a_plot_with_too_many_lines_is_refused_before_the_sweep_runs(host, tmp_path, capsys):
    start = time.monotonic()
    status, _, err = _run(capsys, "plot", QUANT, "throughput", "-o", tmp_path / "p.png",
                          "--over", "workload.prompt_tokens=1..1e300 log2")
    assert status == 2
    _one_error(err, "997 lines, more than 24")
    assert time.monotonic() - start < 10
    assert not (tmp_path / "p.png").exists()


def test_output_over_any_preset_file_is_refused(host, tmp_path, capsys):
    unused = _preset_path("model", "llama-2-7b")  # a preset this scenario does not read
    before = unused.read_bytes()
    status, _, err = _run(capsys, "graph", QUANT, "-o", unused)
    assert status == 2
    _one_error(err, "refusing to write over")
    assert unused.read_bytes() == before


# ---------------------------------------------------------------------------------
# Sweeps: axis, grid, block and in-memory caps, checked before allocating
# ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _address_space(limit: int = 3 * 2**30):
    """Fail with MemoryError instead of swapping, should a cap regress."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as handle:
        held = int(handle.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (held + limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_an_axis_over_its_cap_is_refused_before_it_is_built(host, tmp_path, capsys):
    start = time.monotonic()
    with _address_space():
        status, _, err = _run(capsys, "sweep", QUANT, "--over", "workload.batch=1..100000000",
                              "-o", tmp_path / "x.csv")
    assert status == 2
    _one_error(err, "100,000,000 values", "more than the 1,000,000 one axis may hold",
               "split the range")
    assert time.monotonic() - start < 10 and not (tmp_path / "x.csv").exists()


def test_a_list_of_ranges_counts_against_one_axis_cap(host, tmp_path, capsys):
    path = tmp_path / "ranges.toml"
    path.write_text(f'extends = "{QUANT}"\n[sweep]\n"workload.batch" = '
                    + json.dumps(["1..900000"] * 50) + "\n")
    with _address_space():
        status, _, err = _run(capsys, "check", path)
    assert status == 2
    _one_error(err, "sweep.workload.batch", "one axis may hold")


@pytest.mark.parametrize("overs", [
    ["workload.batch=1..1e9 log2", "workload.prompt_tokens=1..1e9 log2",
     "workload.output_tokens=1..1e9 log2", "hardware.count=1..1e9 log2",
     "efficiency.mbu=0.01..1 step 0.01"],
    ["workload.batch=1..1000000", "workload.prompt_tokens=1..1000000"],
])
def test_a_grid_over_its_cap_is_refused_before_planning(host, tmp_path, capsys, overs):
    start = time.monotonic()
    argv = ["sweep", QUANT, "-o", tmp_path / "x.csv"]
    for over in overs:
        argv += ["--over", over]
    with _address_space():
        status, _, err = _run(capsys, *argv)
    assert status == 2
    _one_error(err, "more than the 10,000,000 one sweep may have", "run one sweep per value")
    assert time.monotonic() - start < 10


def test_structural_combinations_are_capped(host, capsys):
    from infermodel.errors import InfermodelError
    from infermodel.sweeping import MAX_BLOCKS, plan_sweep

    # kv_bits is read while the graph is built: every value is a block of its own.
    with pytest.raises(InfermodelError, match=f"more than the {MAX_BLOCKS:,} one sweep may build"):
        plan_sweep(SCENARIOS / "case-study-24gb.toml",
                   {"levers.number_formats.kv_bits": "1..32",
                    "hardware.preset": ["h100-sxm", "h200"],
                    "levers.number_formats.weight_bits_linear": "1..32 1000 points"},
                   select=False)


def test_the_python_sweep_refuses_a_result_too_large_to_hold(host):
    from infermodel import sweep
    from infermodel.errors import InfermodelError
    from infermodel.sweeping import plan_sweep

    grid = {"workload.batch": "1..1000000", "workload.prompt_tokens": "1..9"}
    start = time.monotonic()
    with _address_space(), pytest.raises(InfermodelError, match="SweepPlan.write"):
        sweep(QUANT, grid)
    assert time.monotonic() - start < 30
    # The same grid streams through write() in bounded memory.
    plan = plan_sweep(QUANT, {"workload.batch": "1..1000", "workload.prompt_tokens": "1..9"},
                      quantities=["tpot"])
    stream = io.StringIO()
    plan.write(None, "csv", stream=stream)
    assert stream.getvalue().count("\n") == 9001


@pytest.mark.parametrize("chunk_size", [-1, 0, 10**12, 2.5, True])
def test_the_python_sweep_checks_its_chunk_size(host, chunk_size):
    from infermodel import sweep
    from infermodel.errors import InfermodelError

    with pytest.raises(InfermodelError, match="chunk size"):
        sweep(QUANT, {"workload.batch": [1, 2]}, quantities=["tpot"], chunk_size=chunk_size)


# ---------------------------------------------------------------------------------
# The reliability page lists every cap, with the value the code uses
# ---------------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _caps():
    import importlib

    found = {}
    for module in ("infermodel.scenario", "infermodel.hf_config", "infermodel.output",
                   "infermodel.errors", "infermodel.analyses.formula", "infermodel.sweeping",
                   "infermodel.analyses.plots", "infermodel.analyses.simulation.plan",
                   "infermodel.cli.sweep",
                   "infermodel.sweeping.ranges", "infermodel.sweeping.plan",
                   "infermodel.schema", "infermodel.accuracy.ledger", "infermodel.tomlfile",
                   "infermodel.simulator.cluster"):
        loaded = importlib.import_module(module)  # a module that moves is renamed here
        for name in dir(loaded):
            if (name.startswith("MAX_") or name in ("NAME_MAX", "PATH_MAX")) \
                    and isinstance(getattr(loaded, name), int):
                found[f"{module}.{name}"] = (name, getattr(loaded, name))
    return found


def test_the_reliability_page_lists_every_cap_with_its_value():
    page = (DOCS / "reliability.rst").read_text(encoding="utf-8")
    caps = _caps()
    assert len(caps) >= 20
    for where, (name, value) in caps.items():
        assert f"``{name}``" in page, f"docs/reliability.rst does not list {where}"
        assert f"{value:,}" in page, f"docs/reliability.rst does not give {where} = {value:,}"


def test_a_usage_error_cuts_a_huge_echoed_value(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["run", str(QUANT), "--format", "y" * 100_000])
    err = capsys.readouterr().err
    assert exit.value.code == 2
    assert "invalid choice" in err and "characters)" in err and len(err) < 1500


def test_a_link_to_standard_output_is_refused_not_replaced(host, tmp_path, capsys):
    captured = tmp_path / "captured.txt"
    with open(captured, "w", encoding="utf-8") as handle:
        link = tmp_path / "stdout"  # what /dev/stdout is when output goes to a file
        link.symlink_to(f"/proc/self/fd/{handle.fileno()}")
        status, _, err = _run(capsys, "run", QUANT, "--format", "json", "-o", link)
    assert status == 2
    _one_error(err, "a stream of this process")
    assert link.is_symlink() and captured.read_text() == ""


def test_a_link_to_a_regular_file_replaces_the_file_and_keeps_the_link(host, tmp_path, capsys):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    status, _, err = _run(capsys, "run", QUANT, "--format", "json", "-o", link)
    assert status == 0, err
    assert link.is_symlink() and real.read_text().lstrip().startswith("{")


# ---------------------------------------------------------------------------------
# Found by the 10,000-case fuzz: integers too long for Python or too large for float64
# ---------------------------------------------------------------------------------


def test_an_integer_longer_than_python_reads_is_a_toml_error(host, tmp_path, capsys):
    path = tmp_path / "digits.toml"
    path.write_text(f'extends = "{QUANT}"\n[workload]\nbatch = {"9" * 5000}\n')
    status, _, err = _run(capsys, "check", path)
    assert status == 2
    _one_error(err, "digits.toml", "invalid TOML", "4300 digits")
    status, _, err = _run(capsys, "check", QUANT, "--set", "workload.batch=" + "9" * 5000)
    assert status == 2
    _one_error(err, "workload.batch", "characters)")


@pytest.mark.parametrize("override,fragment", [
    (f"workload.batch={10**400}", "integer of 401 digits"),
    (f"model.vocab={10**400}", "integer of 401 digits"),
    (f"workload.sequence_length={2**53 + 1}", "at most 9,007,199,254,740,992"),
    (f"hardware.memory={10**400}", "hardware.memory"),
    (f"simulation.rates=[{10**400}]", "simulation.rates"),
    (f"simulation.workload.count={10**400}", "about 10^400 requests"),
])
@pytest.mark.parametrize("command", ["check", "run", "simulate"])
def test_integers_too_large_for_float64_are_user_errors(host, capsys, override, fragment, command):
    if command == "run" and override.startswith("simulation."):
        pytest.skip("run does not read [simulation]")
    status, _, err = _run(capsys, command, LAB3, "--set", override)
    assert status == 2
    _one_error(err, fragment)


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/absolute", "a" * 400, "..", "😀 x"])
def test_a_plot_named_after_its_scenario_stays_in_the_working_directory(host, tmp_path, capsys,
                                                                        monkeypatch, name):
    path = tmp_path / "s" / "named.toml"
    path.parent.mkdir()
    path.write_text(f'extends = "{QUANT}"\n[scenario]\nname = {json.dumps(name, ensure_ascii=False)}\n')
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    status, out, err = _run(capsys, "plot", path, "memory")
    assert status == 0, err
    written = [p.name for p in work.iterdir()]
    assert len(written) == 1 and written[0].endswith("-memory.png") and f"wrote {written[0]}" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s", "work"]


@pytest.mark.parametrize("text,fragment", [
    ("1e300..1e308 step 1e-300", "too many values"),
    ("1..2 step 1e-320", "too many values"),
    ("1e-300..1e308 times 1.0000000001", "more than the 1,000,000"),
    ("-1e308..1e308 1000 points", "spans more than float64"),
    ("1.." + "9" * 400, "not finite"),
    ("1.." + "9" * 400 + " log2", "not finite"),
])
def test_ranges_at_the_ends_of_float64_are_user_errors(text, fragment):
    from infermodel.sweeping import expand_range

    with pytest.raises(ValueError, match=fragment):
        expand_range(text)


def test_a_geometric_range_across_float64_is_built_without_overflow():
    from infermodel.sweeping import expand_range

    values = expand_range("1e-300..1e308 log2")
    assert len(values) == 2020 and values[0] == 1e-300 and values[-1] < 1e308


def test_a_device_named_as_a_ledger_is_refused_without_reading_it(host, capsys):
    start = time.monotonic()
    status, _, err = _run(capsys, "validate", "--ledger", "/dev/zero")
    assert status == 2
    _one_error(err, "/dev/zero", "not a regular file")
    assert time.monotonic() - start < 10


def test_calibrate_cannot_write_over_a_preset(host, capsys):
    preset = _preset_path("hardware", "module10-48gb")
    before = preset.read_bytes()
    status, _, err = _run(capsys, "calibrate", "--quick", "-o", preset)
    assert status == 2
    _one_error(err, "refusing to write over")
    assert preset.read_bytes() == before


# ---------------------------------------------------------------------------------
# Found by the 10,000-case fuzz on the merged simulator
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [["--replicas", "2147483647"],
                                   ["--prefill", "1000", "--decode", "1000", "--set",
                                    "simulation.disaggregation.link_bandwidth=50 GB/s"]])
def test_server_count_is_capped_before_servers_are_built(host, capsys, flags):
    from infermodel.simulator.cluster import MAX_SERVERS

    scenario = str(SCENARIOS / "module10-lab3-policies.toml")
    status, _, err = _run(capsys, "simulate", scenario, "--policy", "chunked", "--rate", "0.2",
                          *flags, "--set", "simulation.workload.count=5")
    assert status == 2
    assert f"limit of {MAX_SERVERS:,} servers" in err
    assert err.count("error:") == 1 and "Traceback" not in err


def test_a_local_dask_cluster_that_cannot_start_is_one_message(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from infermodel.simulator import SimulationError
    from infermodel.simulator.grid import execute

    def refuse(*args, **kwargs):
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    with pytest.raises(SimulationError, match="cannot start a local Dask cluster.*--scheduler serial"):
        execute(abs, [(1,)], scheduler="dask")


def test_dask_logs_of_a_failed_start_are_one_message_naming_the_cause(monkeypatch, capfd):
    # Found by the 10,000-case fuzz in a pool worker: Dask logs each nanny's failure
    # with its traceback on standard error, then raises; the cause is in the message.
    distributed = pytest.importorskip("distributed")
    import logging

    from infermodel.simulator import SimulationError
    from infermodel.simulator.grid import execute

    def refuse(*args, **kwargs):
        try:
            raise AssertionError("daemonic processes are not allowed to have children")
        except AssertionError:
            logging.getLogger("distributed.nanny").exception("Failed to start process")
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    with pytest.raises(SimulationError) as caught:
        execute(abs, [(1,)], scheduler="dask")
    assert "Nanny failed to start. AssertionError: daemonic processes" in str(caught.value)
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out and "Failed to start process" not in err + out
    assert not any(type(h).__name__ == "_Keep" for h in logging.getLogger("distributed").handlers)


@pytest.mark.parametrize("address", ["-1", "nosuchprotocol://host:1"])
def test_a_scheduler_address_dask_cannot_read_is_one_message(address):
    # Found by the 10,000-case fuzz: `--address -1` ended in Dask's ValueError traceback.
    pytest.importorskip("distributed")
    from infermodel.simulator import SimulationError
    from infermodel.simulator.grid import execute

    with pytest.raises(SimulationError, match=r"cannot reach the Dask scheduler at .*tcp://host:8786"):
        execute(abs, [(1,)], scheduler="dask", address=address)


def test_unreadable_scheduler_addresses_one_after_another_do_not_hang():
    # Seen in CI: a half-built client left to a later garbage collection closed itself
    # inside the next client's start, which held the lock of Dask's loop runners that
    # closing waits for. Within one process it hung after about twenty such addresses.
    pytest.importorskip("distributed")
    import subprocess
    import sys

    code = ("from infermodel.simulator import SimulationError\n"
            "from infermodel.simulator.grid import execute\n"
            "for _ in range(60):\n"
            "    for address in ('-1', 'nosuchprotocol://host:1'):\n"
            "        try:\n"
            "            execute(abs, [(1,)], scheduler='dask', address=address)\n"
            "        except SimulationError:\n"
            "            pass\n"
            "print('done')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "done", done.stderr[-2000:]


def test_a_dask_client_whose_loop_does_not_start_is_one_message(monkeypatch):
    # Seen in CI on a loaded machine: Dask's client asserts that its event loop started
    # within 10 s, and the bare AssertionError escaped as a traceback.
    distributed = pytest.importorskip("distributed")
    from infermodel.simulator import SimulationError
    from infermodel.simulator.grid import execute

    def slow_loop(*_args, **_kwargs):
        raise AssertionError

    monkeypatch.setattr(distributed, "Client", slow_loop)
    with pytest.raises(SimulationError, match="event loop did not start"):
        execute(abs, [(1,)], scheduler="dask", address="tcp://host:8786")



def _start_in_a_pool_worker(_):
    import io
    import sys

    sys.stderr = io.StringIO()  # before Dask's handler is made
    from infermodel.simulator import SimulationError
    from infermodel.simulator.grid import start_local_cluster

    try:
        start_local_cluster(1)
    except SimulationError as error:
        return str(error), sys.stderr.getvalue()
    return "started", sys.stderr.getvalue()


@pytest.mark.slow
def test_a_local_cluster_from_a_daemonic_pool_worker_is_one_message():
    pytest.importorskip("distributed")
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        message, err = pool.map(_start_in_a_pool_worker, [0])[0]
    assert "cannot start a local Dask cluster" in message and "daemonic" in message
    assert "Traceback" not in err


@pytest.mark.parametrize("value", ["{a = " * 500, "[" * 500, "[1" + "0" * 5000 + "]"])
def test_over_values_nested_too_deeply_or_too_long_are_one_message(host, capsys, value):
    status, _, err = _run(capsys, "sweep", QUANT, "--over", f"model.layers={value}")
    assert status == 2
    assert err.count("error:") == 1 and "--over" in err


def test_a_preset_file_path_too_long_for_the_file_system_is_one_message(host, tmp_path, capsys):
    name = "/".join(["d" * 200] * 30) + "/x.toml"
    scenario = tmp_path / "long.toml"
    scenario.write_text(f'[model]\npreset = "{name}"\n[hardware]\npreset = "h100-sxm"\n',
                        encoding="utf-8")
    status, _, err = _run(capsys, "graph", scenario)
    assert status == 2
    assert "model.preset: cannot read the preset file: the path is" in err
    assert err.count("error:") == 1
