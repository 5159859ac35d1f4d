"""Data, not strings: converters owned by their registries, structured origins and
warnings, one JSON number convention, one error carrier.
"""

from __future__ import annotations

import json
import math

import attrs
import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.errors import Problem
from infermodel.formatting import json_number, json_value, plain_number
from infermodel.hf_config import HFConfigError
from infermodel.host import PluginHost
from infermodel.plugin import FieldValueError, hookimpl, structure
from infermodel.quantity import ResultWarning
from infermodel.scenario import load_scenario
from infermodel.schema import BASE_CONVERTER
from infermodel.units import UnitError, parse_quantity

CASE = SCENARIOS / "case-study-24gb.toml"


class Shade(str):
    """A value type only one host knows."""


@attrs.frozen
class Paint:
    shade: Shade = Shade("grey")


class _ShadePlugin:
    @hookimpl
    def infermodel_register_value_types(self, register):
        register(Shade, lambda value, _type: Shade(f"shade:{value}"))

    @hookimpl
    def infermodel_register_levers(self, register):
        register("paint", Paint, description="a lever with a custom value type")


def test_each_registries_owns_its_converter_and_section_classes():
    with_shade = PluginHost()
    with_shade.register(_ShadePlugin(), "shade")
    plain = PluginHost()
    assert with_shade.registries.converter is not plain.registries.converter
    assert with_shade.registries.converter is not BASE_CONVERTER
    scenario = load_scenario(CASE, {"levers.paint.shade": "blue"}, host=with_shade)
    assert scenario.lever("paint").shade == "shade:blue"
    # The other host, and the base converter, never learnt the plugin's hook.
    for converter in (plain.registries.converter, BASE_CONVERTER):
        try:
            structured = converter.structure("blue", Shade)
        except Exception:  # cattrs may refuse the type outright
            structured = None
        assert structured != "shade:blue"
    assert set(plain.registries.section_classes) == {
        "model", "hardware", "workload", "efficiency", "pricing"}
    assert plain.registries.section_classes is not with_shade.registries.section_classes


def test_structure_outside_a_scenario_uses_the_base_converter():
    assert structure(4, int) == 4
    with pytest.raises(Exception):  # noqa: B017 (cattrs groups the strict hook's error)
        structure("4", int)


def test_an_inputs_history_names_its_field_as_data():
    result = infermodel.evaluate(CASE)
    batch = result.graph["batch"]
    assert batch.field == "workload.batch" and batch.history[0].field == "workload.batch"
    assert batch.history[0].reason == "from workload.batch"     # the words, for people
    derived = result.graph["tpot"]
    assert derived.field is None


def test_derivations_read_the_field_not_the_reason():
    from types import MappingProxyType

    result = infermodel.evaluate(CASE)
    batch = result.graph["batch"]
    misleading = attrs.evolve(batch.history[0], reason="from model.layers")
    quantities = dict(result.graph.quantities, batch=attrs.evolve(batch, history=(misleading,)))
    graph = attrs.evolve(result.graph, quantities=MappingProxyType(quantities))
    step = next(s for s in infermodel.explain(attrs.evolve(result, graph=graph), "tpot").steps
                if s.name == "batch")
    assert step.source.startswith("workload.batch (") and ".toml:" in step.source


def test_result_warnings_are_records_naming_their_quantity(register_plugin):
    class NotANumber:
        @hookimpl
        def infermodel_define_quantities(self, scenario, define):
            define("broken", sympy.sqrt(-infermodel.S.batch), unit="1",
                   description="the square root of a negative number")

    register_plugin(NotANumber(), "nan_maker")
    result = infermodel.evaluate(CASE)
    warnings = [w for w in result.warnings if w.quantity == "broken"]
    assert len(warnings) == 1 and isinstance(warnings[0], ResultWarning)
    assert warnings[0].message == "quantity 'broken' evaluated to NaN (last defined by plugin 'nan_maker')"
    assert "evaluated to NaN" in warnings[0] and str(warnings[0]) == warnings[0].message
    assert json.loads(result.to_json())["warnings"] == [w.message for w in result.warnings]


@pytest.mark.parametrize("value, expected", [
    (math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (3.0, 3), (0.5, 0.5),
    (True, True), (2.0**53, 2.0**53)])
def test_one_json_convention_for_numbers(value, expected):
    assert json_value(value) == expected
    assert json.dumps(json_value(value), allow_nan=False)


def test_numpy_scalars_follow_the_same_convention():
    import numpy as np

    assert json_number(np.float64("nan")) == "nan" and json_number(np.int64(7)) == 7
    assert json_number(np.bool_(True)) is True and json_number(np.float32(0.5)) == 0.5


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_every_float_has_strict_json(value):
    text = json.dumps(json_value(value), allow_nan=False)
    back = json.loads(text)
    if math.isfinite(value):
        assert float(back) == value
    else:
        assert back in ("nan", "inf", "-inf")
    assert plain_number(value)


def test_one_error_carrier_for_unit_field_and_config_errors(tmp_path):
    with pytest.raises(UnitError) as unit:
        parse_quantity("24 Gb", "B")
    problem = Problem.of(unit.value)
    assert problem.message == unit.value.message and problem.suggestion == "GB"
    field = FieldValueError("got 0", expected="an integer, >= 1")
    assert Problem.of(field) is field.problem and field.expected == "an integer, >= 1"
    missing = tmp_path / "config.json"
    with pytest.raises(HFConfigError) as config:
        infermodel.hf_config.read_hf_config(missing)
    assert Problem.of(config.value).file == str(missing)
    assert config.value.path == str(missing) and str(config.value) == config.value.problem.render()


@attrs.frozen
class Inner:
    a: int


@attrs.frozen
class Outer:
    inner: Inner
    size: int


def test_structure_errors_carry_unknown_keys_and_missing_fields_as_data():
    from infermodel.schema import structure_errors

    problems = []
    try:
        BASE_CONVERTER.structure({"inner": {"a": 1, "b @ c": 2, "z": 3}}, Outer)
    except Exception as exc:
        problems = structure_errors(exc)
    by_path = {p.path: p for p in problems}
    assert by_path["inner"].unknown_keys == ("b @ c", "z")   # a key the message format uses
    assert by_path["size"].missing and by_path["size"].message == "required field missing"


def test_a_capacity_report_with_no_throughput_writes_strict_json():
    from infermodel.analyses.simulation import CapacityReport
    from infermodel.simulator import SLO, CapacityResult

    stalled = CapacityResult("chunked", 0.1, {"throughput_tokens_per_s": 0.0}, False, (), (), SLO())
    data = CapacityReport(stalled, 2.0).to_dict()
    assert data["usd_per_million_output_tokens"] == "inf"
    assert json.loads(json.dumps(data, allow_nan=False))["price_per_hour"] == 2.0
    assert CapacityReport(stalled, None).to_dict()["usd_per_million_output_tokens"] is None


def _odd(instance, attribute, value):
    raise ValueError(f"an odd number of widgets, please (got {value})")


@attrs.frozen
class Widgets:
    count: int = 1
    spares: int = attrs.field(default=0, validator=_odd)


class _WidgetPlugin:
    @hookimpl
    def infermodel_register_levers(self, register):
        register("widgets", Widgets, description="a lever whose validator names no field")


def test_a_schema_validator_failure_is_placed_at_its_field_without_reading_the_message(
        register_plugin, tmp_path):
    register_plugin(_WidgetPlugin(), "widgets")
    scenario = tmp_path / "widgets.toml"
    scenario.write_text(f'extends = "{CASE.as_posix()}"\n\n[levers.widgets]\ncount = 3\n'
                        "spares = 2\n", encoding="utf-8")
    with pytest.raises(infermodel.InfermodelError) as caught:
        load_scenario(scenario)
    (problem,) = caught.value.problems
    assert problem.key == "levers.widgets.spares" and problem.line == 5
    assert problem.message.startswith("an odd number of widgets, please (got 2)")
