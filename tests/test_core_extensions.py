"""Core behaviour lever authors rely on: custom value types, nested lever tables,
presets that carry fields of plugins not loaded.
"""

from __future__ import annotations

import attrs
import pytest

import infermodel
from conftest import SCENARIOS
from infermodel import hookimpl
from infermodel.errors import PluginError, ScenarioError
from infermodel.host import PluginHost, set_host
from infermodel.scenario import load_scenario
from infermodel.schema import FieldValueError, structure

CASE = SCENARIOS / "case-study-24gb.toml"


class Colour(str):
    """A value type: a name from a short list, or a table {r, g, b}."""


def _colour(value, _type):
    if isinstance(value, str) and value in ("red", "green"):
        return Colour(value)
    if isinstance(value, dict):
        rgb = structure(value, RGB)
        return Colour(f"#{rgb.r:02x}{rgb.g:02x}{rgb.b:02x}")
    raise FieldValueError(f"got {value!r}", expected='"red", "green" or a table {r, g, b}')


@attrs.frozen
class RGB:
    r: int
    g: int
    b: int


@attrs.frozen
class Paint:
    colour: Colour = Colour("red")
    inner: RGB = RGB(0, 0, 0)


class _PaintPlugin:
    @hookimpl
    def infermodel_register_value_types(self, register):
        register(Colour, _colour)

    @hookimpl
    def infermodel_register_levers(self, register):
        register("paint", Paint, description="a lever with a custom value type")


def test_infermodel_register_value_types_types_lever_fields(register_plugin, write_scenario):
    register_plugin(_PaintPlugin(), "paint")
    ok = load_scenario(write_scenario(f'extends = "{CASE}"\n[levers.paint]\ncolour = {{r = 1, g = 2, b = 255}}\n'))
    assert ok.lever("paint").colour == "#0102ff"
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(f'extends = "{CASE}"\n[levers.paint]\ncolour = "blue"\n'))
    problem = info.value.problems[0]
    assert problem.key == "levers.paint.colour" and problem.line == 3
    assert 'expected "red", "green"' in str(info.value)


def test_value_type_registered_twice_names_both_plugins(host):
    class Other(_PaintPlugin):
        @hookimpl
        def infermodel_register_levers(self, register):
            pass

    host.register(_PaintPlugin(), "paint")
    host.register(Other(), "other")
    with pytest.raises(PluginError, match="registered by both 'other' and 'paint'|registered by both 'paint' and 'other'"):
        _ = host.registries


def test_unknown_key_in_a_nested_lever_table_is_named_at_its_path(register_plugin, write_scenario):
    register_plugin(_PaintPlugin(), "paint")
    path = write_scenario(f'extends = "{CASE}"\n[levers.paint.inner]\nr = 1\ng = 2\nbb = 3\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    text = str(info.value)
    assert "levers.paint.inner.bb: unknown key 'bb'" in text and "did you mean 'b'?" in text
    assert "scenario.toml:5: levers.paint.inner.bb" in text


def test_presets_carrying_fields_of_unloaded_plugins_still_load(monkeypatch):
    # h100-sxm declares interconnect and native-format fields owned by lever plugins.
    monkeypatch.setenv("INFERMODEL_LOAD_PLUGINS", "physics")
    host = PluginHost()
    set_host(host)
    try:
        result = infermodel.evaluate(SCENARIOS / "inference-lab-roofline.toml")
        assert result["card_memory"] == 80e9
    finally:
        set_host(None)


def test_unknown_keys_in_a_users_own_table_stay_errors(write_scenario):
    path = write_scenario(f'extends = "{CASE}"\n[hardware]\nnative_fp9 = true\n')
    with pytest.raises(ScenarioError, match="hardware.native_fp9"):
        load_scenario(path)


def test_given_tells_written_keys_from_defaults():
    s = load_scenario(CASE, ["pricing.utilisation=0.5"])
    assert s.given("model.weight_bytes") and s.given("pricing") and s.given("pricing.utilisation")
    assert not s.given("efficiency.missing") and not s.given("levers")
    assert not load_scenario(CASE).given("pricing")


def test_a_sweep_over_a_table_a_plugin_switches_on_matches_scalar_evaluation():
    result = infermodel.sweep(CASE, {"pricing.utilisation": [0.5, 1.0]},
                              quantities=["busy_tokens_per_s", "cost_per_million_output_tokens"])
    for i, utilisation in enumerate([0.5, 1.0]):
        scalar = infermodel.evaluate(CASE, {"pricing.utilisation": utilisation})
        assert result.columns["cost_per_million_output_tokens"][i] == pytest.approx(
            scalar["cost_per_million_output_tokens"], rel=1e-12)
        assert result.columns["busy_tokens_per_s"][i] == pytest.approx(scalar["busy_tokens_per_s"], rel=1e-12)


def test_levers_switch_off_and_on_with_booleans():
    artifact = SCENARIOS / "module10-case-artifact.toml"
    off = load_scenario(artifact, ["levers.number_formats=false"])
    assert off.lever("number_formats") is None
    assert infermodel.evaluate(off)["weight_bytes"] == 2 * 9_550_729_216
    on = load_scenario(CASE, ["levers.number_formats=true"])
    assert on.lever("number_formats") is not None


def test_scenario_preset_gives_typed_fields_with_defaults():
    s = load_scenario(CASE)
    draft = s.preset("model", "llama-3.2-3b")
    assert draft["layers"] == 28 and draft["ffn"] == "swiglu" and draft["experts"] == 1
    card = s.preset("hardware", "h100-sxm")
    assert card["memory"] == 81559 * 2**20 and card["bandwidth"] == 3.35e12
    with pytest.raises(ScenarioError, match="did you mean 'llama-3.2-3b'"):
        s.preset("model", "llama-3.2-3bb")
