"""Every user mistake gives one clear message and exit status 2, never a traceback."""

from __future__ import annotations

import contextlib
from importlib import metadata

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import DATA, SCENARIOS
from infermodel import S, hookimpl
from infermodel.cli import main
from infermodel.errors import GraphError, PluginError, ScenarioError
from infermodel.host import PluginHost, set_host
from infermodel.scenario import load_scenario

BAD = DATA / "bad"

# file, fragments the message must contain (file name, key path, line, expectation, hint)
CORPUS = [
    ("malformed.toml", ["malformed.toml:3", "invalid TOML", "']'"]),
    ("unknown_key.toml", ["unknown_key.toml:3", "model.layerz", "did you mean 'layers'?"]),
    ("wrong_type.toml", ["wrong_type.toml:8", "workload.batch", "expected an integer"]),
    ("negative_size.toml", ["negative_size.toml:6", "hardware.memory", "> 0"]),
    ("kv_heads.toml", ["kv_heads.toml:3", "model.kv_heads", "does not divide heads = 32"]),
    ("missing_preset.toml", ["missing_preset.toml:2", "model.preset", "did you mean 'llama-3.1-8b'?"]),
    ("unit_typo.toml", ["unit_typo.toml:6", "hardware.bandwidth", "did you mean 'TB/s'?"]),
    ("missing_field.toml", ["missing_field.toml:7", "workload.output_tokens", "required field missing"]),
    ("efficiency_range.toml", ["efficiency_range.toml:12", "efficiency.prefill_mfu", "<= 1"]),
    ("unknown_lever.toml", ["unknown_lever.toml:11", "levers.number_format", "did you mean 'number_formats'?"]),
    ("lever_value.toml", ["lever_value.toml:12", "levers.number_formats.kv_bits", "1–32 bits"]),
    ("unknown_section.toml", ["unknown_section.toml:4", "hardwar", "did you mean 'hardware'?"]),
    ("float_for_int.toml", ["float_for_int.toml:8", "workload.batch", "expected an integer"]),
    ("extends_missing.toml", ["extends_missing.toml:1", "extends", "does not exist"]),
    ("bool_for_number.toml", ["bool_for_number.toml:6", "got a boolean true"]),
]


@pytest.mark.parametrize("name,fragments", CORPUS, ids=[c[0] for c in CORPUS])
def test_bad_scenario_corpus_gives_one_clear_message(name, fragments, capsys):
    status = main(["run", str(BAD / name)])
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.startswith("error: ")
    assert err.count("\n") == 1, err  # one message
    for fragment in fragments:
        assert fragment in err


def test_corpus_covers_every_file():
    assert {p.name for p in BAD.glob("*.toml")} == {c[0] for c in CORPUS}


def test_errors_are_collected_and_raised_once(write_scenario):
    path = write_scenario(
        '[model]\npreset = "module10-case"\nlayerz = 3\n[hardware]\npreset = "module10-24gb"\n'
        'count = 0\n[workload]\nbatch = -1\nprompt_tokens = 10\noutput_tokens = 10\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert len(info.value.problems) == 3
    assert "3 errors encountered" in str(info.value)
    keys = [p.key for p in info.value.problems]
    assert keys == sorted(keys, key=lambda k: [p.line for p in info.value.problems if p.key == k][0])


def test_unknown_quantity_in_explain_suggests(capsys):
    status = main(["explain", str(SCENARIOS / "case-study-24gb.toml"), "tpott"])
    err = capsys.readouterr().err
    assert status == 2 and "no quantity named 'tpott'" in err and "did you mean 'tpot'?" in err


def test_bad_set_override(capsys):
    status = main(["run", str(SCENARIOS / "case-study-24gb.toml"), "--set", "workload.bacth=3"])
    err = capsys.readouterr().err
    assert status == 2 and "workload.bacth" in err and "did you mean 'batch'?" in err and "--set" in err
    status = main(["run", str(SCENARIOS / "case-study-24gb.toml"), "--set", "nonsense"])
    assert status == 2


def test_missing_file(capsys):
    assert main(["check", "no/such/file.toml"]) == 2
    assert "file not found" in capsys.readouterr().err


def test_oversized_file_is_refused(tmp_path, capsys):
    path = tmp_path / "big.toml"
    path.write_text("# " + "x" * 1_100_000 + "\n")
    assert main(["check", str(path)]) == 2
    assert "limit" in capsys.readouterr().err


def test_extends_cycle(tmp_path, capsys):
    (tmp_path / "a.toml").write_text('extends = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extends = "a.toml"\n')
    assert main(["check", str(tmp_path / "a.toml")]) == 2
    assert "cycle" in capsys.readouterr().err


# -- plugins that misbehave ---------------------------------------------------------


class _Cyclic:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("loop_a", S.loop_b + 1, unit="1", description="a")
        define("loop_b", 2 * S.loop_a, unit="1", description="b")


class _Undefined:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("needs_ghost", S.ghost_quantity * 2, unit="1", description="uses an undefined name")


class _Raises:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        raise RuntimeError("boom")


class _Nonsense:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("nonsense", "not a formula", unit="1", description="a string is not a definition")


class _Clash:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("tpot", sympy.Integer(1), unit="s", description="a second definition")


CASE = SCENARIOS / "case-study-24gb.toml"


def _run(capsys):
    status = main(["run", str(CASE)])
    return status, capsys.readouterr().err


def test_cycle_is_printed_as_a_path(register_plugin, capsys):
    register_plugin(_Cyclic(), "cyclic")
    status, err = _run(capsys)
    assert status == 2 and "Traceback" not in err
    assert "dependency cycle: loop_a -> loop_b -> loop_a" in err and "cyclic" in err


def test_undefined_name_names_quantity_and_plugin(register_plugin, capsys):
    register_plugin(_Undefined(), "undefined")
    status, err = _run(capsys)
    assert status == 2
    assert "'needs_ghost' (defined by 'undefined') uses 'ghost_quantity'" in err


def test_plugin_raising_in_a_hook_is_named(register_plugin, capsys):
    register_plugin(_Raises(), "raiser")
    status, err = _run(capsys)
    assert status == 2
    assert "plugin 'raiser' failed in infermodel_define_quantities" in err and "boom" in err


def test_plugin_returning_nonsense_is_named(register_plugin):
    register_plugin(_Nonsense(), "nonsense")
    import infermodel

    with pytest.raises(PluginError, match="plugin 'nonsense' defined 'nonsense' with a str"):
        infermodel.evaluate(CASE)


def test_two_plugins_defining_one_name(register_plugin):
    register_plugin(_Clash(), "clash")
    import infermodel

    with pytest.raises(GraphError, match="'tpot' is defined by both 'clash' and 'physics'"):
        infermodel.evaluate(CASE)


def test_plugin_failing_on_import_is_reported_and_others_load(monkeypatch, capsys):
    real = metadata.entry_points

    def entry_points(**kwargs):
        found = list(real(**kwargs))
        if kwargs.get("group") == "infermodel":
            found.append(metadata.EntryPoint("broken", "no_such_module_for_infermodel", "infermodel"))
        return found

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    monkeypatch.delenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    host = PluginHost()
    set_host(host)
    try:
        assert "physics" in host.records and host.records["physics"].error is None
        assert host.records["broken"].error.startswith("Error importing plugin 'broken'")
        # The scenario does not need it: the run goes on, with one warning naming it.
        status, err = _run(capsys)
        assert status == 0 and "Traceback" not in err
        assert err.count("warning: Error importing plugin 'broken'") == 1
        assert "ModuleNotFoundError" in err
    finally:
        set_host(None)


# -- fuzzing the loader -------------------------------------------------------------

_keys = st.sampled_from(["model", "hardware", "workload", "efficiency", "levers", "scenario",
                         "preset", "layers", "batch", "memory", "bandwidth", "t0", "kv_bits",
                         "number_formats", "x", "extends", "sweep"])
_scalars = st.one_of(st.integers(-10, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                     st.booleans(), st.text(max_size=12), st.sampled_from(["24 GB", "1 TB/s", "-1 ms",
                                                                           "module10-case", "h100-sxm"]))
_tables = st.recursive(_scalars, lambda inner: st.dictionaries(_keys, inner, max_size=5), max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.dictionaries(_keys, _tables, max_size=6))
def test_loader_fuzz_raises_only_scenario_errors(data, host, tmp_path):
    from infermodel.scenario import resolve

    try:
        resolve(data, {}, tmp_path / "fuzz.toml", host=host)
    except ScenarioError as exc:
        assert exc.problems and str(exc)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200))
def test_arbitrary_text_files_never_crash(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "any.toml"
    path.write_text(text, encoding="utf-8")
    with contextlib.suppress(ScenarioError):
        load_scenario(path)


def test_unknown_plugin_name_in_the_environment_is_named(monkeypatch, capsys):
    monkeypatch.setenv("INFERMODEL_LOAD_PLUGINS", "physics,physic")
    monkeypatch.delenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    set_host(PluginHost())
    try:
        status, err = _run(capsys)
        assert status == 2 and "INFERMODEL_LOAD_PLUGINS names 'physic'" in err
        assert "did you mean 'physics'?" in err
    finally:
        set_host(None)


def test_a_reserve_as_large_as_memory_is_refused(capsys):
    status = main(["run", str(CASE), "--set", "hardware.reserve=24 GB"])
    err = capsys.readouterr().err
    assert status == 2 and "hardware.reserve" in err and "smaller than one card's memory" in err


def test_capacity_throughput_is_zero_when_nothing_fits():
    import infermodel

    r = infermodel.evaluate(CASE, {"hardware.memory": "8 GB"})
    assert r["max_sequences"] == 0 and r["tokens_per_s_at_capacity"] == 0


def test_a_cross_field_error_points_at_the_value_the_scenario_wrote(write_scenario, capsys):
    # heads = 7 beside the preset's kv_heads = 8: the user's line is named, not the preset's.
    path = write_scenario('[model]\npreset = "llama-3-8b"\nheads = 7\n[hardware]\npreset = "h100-sxm"\n'
                          '[workload]\nprompt_tokens = 10\noutput_tokens = 10\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: model.heads: kv_heads = 8 does not divide heads = 7" in err
