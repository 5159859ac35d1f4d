"""infermodel.plugin, the one door for plugin authors, and the hook contracts behind it."""

from __future__ import annotations

import inspect
import typing

import pytest

import infermodel
from infermodel import hookspecs, plugin
from infermodel.engine.graph import DEFAULT_ORDER
from infermodel.errors import PluginError
from infermodel.plugin import S, Stage, hookimpl

CASE = "scenarios/case-study-24gb.toml"


def test_the_door_exports_what_a_plugin_may_use():
    promised = {"hookimpl", "S", "REQUIRED", "Seconds", "Bytes", "BytesPerSecond",
                "FlopsPerSecond", "Dollars", "DollarsPerHour", "Watts", "Fraction", "unit_type",
                "structure", "FieldValueError", "Option", "Row", "Witness", "InfermodelError",
                "Problem", "suggest", "close_match", "Stage"}
    assert promised <= set(plugin.__all__)
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None, name


def test_the_door_hands_out_the_same_objects_as_the_package():
    assert plugin.hookimpl is infermodel.hookimpl
    assert plugin.S is infermodel.S
    assert plugin.REQUIRED is infermodel.REQUIRED


def test_the_simulator_loads_through_the_door_only_when_asked():
    from infermodel import simulator

    assert plugin.simulator is simulator
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = plugin.nothing_here


def test_suggest_names_the_closest_candidate_or_nothing():
    assert plugin.suggest("bandwith", ["bandwidth", "memory"]) == "did you mean 'bandwidth'?"
    assert plugin.suggest("zzz", ["bandwidth"]) is None


def test_stages_are_the_documented_transformation_orders():
    # hookspecs.infermodel_transform_quantities documents these numbers.
    assert [(s.name, int(s)) for s in Stage] == [
        ("NUMBER_FORMATS", 100), ("MODEL_STRUCTURE", 200), ("PARALLELISM", 300),
        ("ALGORITHMS", 400), ("DEFAULT", 500), ("COST", 900)]
    assert DEFAULT_ORDER == Stage.DEFAULT


class _Doubler:
    def __init__(self, order):
        self.order = order

    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.wrap("tpot", lambda old: old * 2, reason="twice", order=self.order)


def test_a_stage_orders_a_transformation_as_its_number(register_plugin):
    register_plugin(_Doubler(Stage.COST + 1), "late_doubler")
    result = infermodel.evaluate(CASE)
    change = result.graph["tpot"].history[-1]
    assert change.order == 901 and type(change.order) is int
    assert result["tpot"] == pytest.approx(2 * result["decode_step_time"], rel=1e-12)


@pytest.mark.parametrize("option", ["tryfirst", "trylast", "wrapper", "hookwrapper"])
def test_hookimpl_options_the_host_does_not_honour_are_refused(host, option):
    def wrapper(scenario, define):
        yield  # a wrapper is a generator; never called here

    def plain(scenario, define):
        define("never", 1.0, unit="1", description="never defined")

    function = wrapper if option in ("wrapper", "hookwrapper") else plain
    Ordered = type("Ordered", (), {
        "infermodel_define_quantities": staticmethod(hookimpl(**{option: True})(function))})
    with pytest.raises(PluginError) as caught:
        host.register(Ordered(), "impatient")
    message = str(caught.value)
    assert "'impatient'" in message and option in message
    assert "infermodel_define_quantities" in message
    assert "impatient" not in host.records
    assert host.pm.get_plugin("impatient") is None


def test_plain_hookimpl_options_are_accepted(register_plugin):
    class Optional:
        @hookimpl(optionalhook=True)
        def infermodel_define_quantities(self, scenario, define):
            define("harmless", 3.0, unit="1", description="a harmless constant")

    register_plugin(Optional(), "optional")
    assert infermodel.evaluate(CASE)["harmless"] == 3.0


def test_every_hookspec_parameter_is_annotated():
    specs = [f for name, f in vars(hookspecs).items() if name.startswith("infermodel_")]
    assert len(specs) == 16
    for function in specs:
        signature = inspect.signature(function)
        assert signature.return_annotation == "None", function.__name__
        for parameter in signature.parameters.values():
            assert parameter.annotation is not inspect.Parameter.empty, (function.__name__,
                                                                          parameter.name)


def test_the_callbacks_given_to_plugins_match_their_protocols(register_plugin):
    seen = {}

    class Recorder:
        @hookimpl
        def infermodel_define_quantities(self, scenario, define):
            seen["define"] = inspect.signature(define)

        @hookimpl
        def infermodel_transform_quantities(self, scenario, transform):
            seen["replace"] = inspect.signature(transform.replace)
            seen["wrap"] = inspect.signature(transform.wrap)
            seen["warn"] = inspect.signature(transform.warn)

        @hookimpl
        def infermodel_define_operators(self, scenario, define):
            seen["operator"] = inspect.signature(define)

        @hookimpl
        def infermodel_validate_scenario(self, scenario, report):
            seen["report"] = inspect.signature(report)

        @hookimpl
        def infermodel_register_fields(self, register):
            seen["fields"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_levers(self, register):
            seen["levers"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_value_types(self, register):
            seen["value_types"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_presets(self, register):
            seen["presets"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_witnesses(self, register):
            seen["witnesses"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_number_formats(self, register):
            seen["number_formats"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_quantisers(self, register):
            seen["quantisers"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_headlines(self, register):
            seen["headlines"] = inspect.signature(register)

        @hookimpl
        def infermodel_register_typical_settings(self, register):
            seen["typical_settings"] = inspect.signature(register)

    register_plugin(Recorder(), "recorder")
    plugin.operator_table(infermodel.evaluate(CASE), "decode")
    protocols = {"define": hookspecs.Define.__call__, "replace": hookspecs.Transform.replace,
                 "wrap": hookspecs.Transform.wrap, "warn": hookspecs.Transform.warn,
                 "operator": hookspecs.OperatorDefine.__call__, "report": hookspecs.Report.__call__,
                 "fields": hookspecs.FieldRegistrar.__call__,
                 "levers": hookspecs.LeverRegistrar.__call__,
                 "value_types": hookspecs.ValueTypeRegistrar.__call__,
                 "presets": hookspecs.PresetRegistrar.__call__,
                 "witnesses": hookspecs.WitnessRegistrar.__call__,
                 "number_formats": hookspecs.NumberFormatRegistrar.__call__,
                 "quantisers": hookspecs.QuantiserRegistrar.__call__,
                 "headlines": hookspecs.HeadlineRegistrar.__call__,
                 "typical_settings": hookspecs.TypicalSettingRegistrar.__call__}
    assert set(seen) == set(protocols)
    for name, method in protocols.items():
        promised = [p for p in inspect.signature(method).parameters if p != "self"]
        assert list(seen[name].parameters) == promised, name


def test_the_plugin_guide_names_everything_the_door_exports():
    # docs/plugin-guide.rst documents infermodel.plugin as the stable interface.
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "plugin-guide.rst").read_text(
        encoding="utf-8")
    missing = [name for name in plugin.__all__ if f"``{name}" not in guide]
    assert missing == []


def test_protocols_are_protocols():
    for name in ("FieldRegistrar", "LeverRegistrar", "ValueTypeRegistrar", "PresetRegistrar",
                 "WitnessRegistrar", "NumberFormatRegistrar", "QuantiserRegistrar", "Quantiser",
                 "Report", "Define", "Transform", "OperatorDefine"):
        assert typing.Protocol in getattr(hookspecs, name).__mro__, name
        assert getattr(plugin, name) is getattr(hookspecs, name)


def test_symbols_through_the_door_build_formulas():
    assert str(S.layers * S.d_model) == "d_model*layers"


def test_a_scenario_carries_its_host_into_evaluation_and_witnesses():
    # A host the process-wide one knows nothing of: reading with it is enough.
    from infermodel.host import PluginHost, get_host

    class Extra:
        @hookimpl
        def infermodel_define_quantities(self, scenario, define):
            define("only_on_my_host", 5.0, unit="1", description="defined by one host's plugin")

    mine = PluginHost()
    mine.register(Extra(), "extra")
    scenario = infermodel.load_scenario(CASE, host=mine)
    assert scenario.host is mine and get_host() is not mine
    assert infermodel.evaluate(scenario)["only_on_my_host"] == 5.0
    assert infermodel.evaluate(scenario.with_overrides({"workload.batch": 2}))["only_on_my_host"] == 5.0
    assert "only_on_my_host" not in infermodel.evaluate(CASE)
    assert infermodel.run_witness(scenario, "kv_cache").plugin == "witness_kv_cache"
