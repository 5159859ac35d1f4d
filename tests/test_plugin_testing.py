"""Testing a plugin through the door: infermodel.testing's fixtures, the shipped scenarios
named ``"infermodel:NAME"``, a lever table's problems all at once and its fields' bounds.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from infermodel.cli import main
from infermodel.declarations import validator_bounds
from infermodel.plugin import S, accepts, hookimpl
from infermodel.testing import plugin_host, read_scenario
from infermodel.tomlfile import shipped_scenarios

CASE = "infermodel:case-study-24gb"


@accepts("≥ 0")
def _not_negative(instance, attribute, value):
    if value < 0:
        raise ValueError(f"{attribute.name} = {value!r} must not be negative")


@attrs.frozen
class Delay:
    per_step: float = attrs.field(default=0.001, validator=_not_negative)
    steps: int = attrs.field(default=1, validator=attrs.validators.ge(1))


class DelayLever:
    @hookimpl
    def infermodel_register_levers(self, register):
        register("delay", Delay, description="a fixed time per decode step")

    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        lever = scenario.lever("delay")
        if lever is not None:
            transform.wrap("decode_step_time", lambda old: old + lever.per_step * lever.steps,
                           reason="a fixed delay")


@pytest.fixture(scope="session")  # session-scoped, as infermodel.testing's own fixtures are
def infermodel_plugins():
    return {"delay": DelayLever()}


def test_the_host_holds_the_built_ins_and_the_plugin_under_test_only(infermodel_host, monkeypatch):
    names = set(infermodel_host.records)
    assert {"physics", "quantization", "delay"} <= names
    assert "kv_offload" not in names  # installed here, but not what is under test
    # the environment does not change what a testing host loads
    monkeypatch.setenv("INFERMODEL_LOAD_PLUGINS", "physics")
    assert set(plugin_host({"delay": DelayLever()}).records) == names


def test_a_scenario_from_text_extends_a_shipped_one_by_name(infermodel_scenario):
    text = f'extends = "{CASE}"\n[levers.delay]\nper_step = 0.002\n'
    base = infermodel.evaluate(infermodel_scenario(CASE))
    slowed = infermodel.evaluate(infermodel_scenario(text))
    assert slowed.graph["decode_step_time"].changed_by == ("delay",)
    assert slowed["decode_step_time"] == pytest.approx(base["decode_step_time"] + 0.002)
    # Module 10's case study: 6.237 ms per decode step at mean context 5,000
    assert base["decode_step_time"] == pytest.approx(6.23728e-3, rel=1e-5)


@settings(max_examples=10, deadline=None)
@given(st.floats(min_value=0, max_value=0.05), st.integers(min_value=1, max_value=4))
def test_fixtures_work_under_hypothesis(infermodel_scenario, per_step, steps):
    text = f'extends = "{CASE}"\n[levers.delay]\n'
    result = infermodel.evaluate(infermodel_scenario(
        text, {"levers.delay.per_step": per_step, "levers.delay.steps": steps}))
    assert result["tpot"] >= 6.23728e-3 + per_step * steps - 1e-12


def test_every_problem_of_a_lever_table_is_reported_at_once(infermodel_scenario):
    text = f'extends = "{CASE}"\n[levers.delay]\nper_step = -1\nsteps = 0\n'
    with pytest.raises(infermodel.InfermodelError) as caught:
        infermodel_scenario(text)
    message = str(caught.value)
    assert "levers.delay.per_step" in message and "must not be negative" in message
    assert "levers.delay.steps" in message
    # a type error does not hide a bound elsewhere, nor an unknown key
    text = f'extends = "{CASE}"\n[levers.delay]\nper_step = -1\nsteps = "x"\nstep = 2\n'
    with pytest.raises(infermodel.InfermodelError) as caught:
        infermodel_scenario(text)
    message = str(caught.value)
    assert "3 errors" in message and "must not be negative" in message
    assert "levers.delay.steps: got a string 'x'" in message and "did you mean 'steps'" in message


def test_a_fields_bounds_are_said_in_words():
    fields = {a.name: a for a in attrs.fields(Delay)}
    assert validator_bounds(fields["per_step"].validator) == "≥ 0"
    assert validator_bounds(fields["steps"].validator) == "≥ 1"
    from infermodel.sphinxext.directives import accepts_text

    assert accepts_text(fields["steps"]) == "integer, ≥ 1"
    # the built-in levers' own validators say theirs
    from infermodel_builtins.speculative import Speculative

    attrs.resolve_types(Speculative)  # as the lever directive does
    k = next(a for a in attrs.fields(Speculative) if a.name == "k")
    assert accepts_text(k) == "integer, 0 to 32"


def test_shipped_scenarios_are_installed_and_named(tmp_path, capsys):
    shipped = shipped_scenarios()
    assert "case-study-24gb" in shipped and shipped["case-study-24gb"].is_file()
    result = infermodel.evaluate(read_scenario(CASE, {"workload.batch": 18}, host=plugin_host()))
    assert result["tokens_per_s_total"] == pytest.approx(958.9, abs=0.05)  # Module 10 Lab 1
    assert main(["presets", "scenarios"]) == 0
    assert "infermodel:case-study-24gb" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('extends = "infermodel:case-study-24g"\n')
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml:1: extends: no shipped scenario is named 'case-study-24g'" in err
    assert "did you mean 'case-study-24gb'" in err
    bad.write_text('extends = "infermodel:../../etc/passwd"\n')
    assert main(["check", str(bad)]) == 2
    assert "no shipped scenario is named" in capsys.readouterr().err
    assert main(["run", CASE, "--quantities", "max_sequences", "--format", "json"]) == 0
    assert '"value": 18' in capsys.readouterr().out


def test_text_needs_a_folder_outside_pytest():
    with pytest.raises(infermodel.InfermodelError, match="needs a folder"):
        read_scenario(f'extends = "{CASE}"\n', host=plugin_host())


def test_a_plugin_that_does_not_match_the_hooks_is_named():
    class Wrong:
        @hookimpl
        def infermodel_register_levers(self, register, extra):
            pass

    with pytest.raises(infermodel.InfermodelError, match="'wrong' does not match"):
        plugin_host({"wrong": Wrong()})


def test_the_eviction_quantity_is_one_symbol():
    assert str(S.kv_positions_per_sequence) == "kv_positions_per_sequence"
