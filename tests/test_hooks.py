"""One test per hook in :mod:`infermodel.hookspecs`, named after it, checking its contract
with a tiny plugin registered through the ``register_plugin`` fixture.

``tests/test_docs.py`` checks that every hook has such a test and a heading in the
plugin-author guide.
"""

from __future__ import annotations

import json

import attrs
import pytest
import sympy

import infermodel
import infermodel.plugin
from infermodel import S, hookimpl
from infermodel.errors import GraphError, PluginError, ScenarioError

BASE = """
[scenario]
name = "hooks"

[model]
preset = "module10-case"
weight_bytes = "5.5 GB"

[hardware]
preset = "module10-24gb"

[workload]
prompt_tokens = 4000
output_tokens = 2000
"""


# ---------------------------------------------------------------------------------
# infermodel_register_fields
# ---------------------------------------------------------------------------------


class _ThinkTime:
    @hookimpl
    def infermodel_register_fields(self, register):
        register("workload", "think_time", kind="quantity", unit="s", default=0.0, minimum=0,
                 quantity="think_time", description="time a user waits between requests")


def test_infermodel_register_fields_adds_a_typed_field_that_feeds_an_input_quantity(
        register_plugin, write_scenario):
    register_plugin(_ThinkTime(), "think")
    spec = infermodel.get_host().registries.field("workload.think_time")
    assert spec.plugin == "think" and spec.unit == "s"
    result = infermodel.evaluate(write_scenario(BASE + 'think_time = "2.5 s"\n'))
    quantity = result.graph["think_time"]
    assert result["think_time"] == 2.5 and quantity.is_input and quantity.plugin == "think"
    assert quantity.history[0].reason == "from workload.think_time"
    # The default applies when the key is absent; the unit and the range are enforced.
    assert infermodel.evaluate(write_scenario(BASE, "default.toml"))["think_time"] == 0.0
    with pytest.raises(ScenarioError, match=r"workload\.think_time"):
        infermodel.load_scenario(write_scenario(BASE + 'think_time = "2 GB"\n', "bad.toml"))


def test_infermodel_register_fields_twice_is_an_error_naming_both_plugins(register_plugin):
    register_plugin(_ThinkTime(), "first")
    register_plugin(_ThinkTime(), "second")
    with pytest.raises(PluginError, match=r"workload\.think_time.*'first'.*'second'"):
        _ = infermodel.get_host().registries


# ---------------------------------------------------------------------------------
# infermodel_register_levers
# ---------------------------------------------------------------------------------


def _positive(instance, attribute, value):
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive")


@attrs.frozen
class _Knob:
    strength: float = attrs.field(default=1.0, validator=_positive)
    label: str = "default"


class _KnobPlugin:
    @hookimpl
    def infermodel_register_levers(self, register):
        register("knob", _Knob, description="a test lever", reference="nowhere, §0")


def test_infermodel_register_levers_structures_the_table_strictly(register_plugin, write_scenario):
    register_plugin(_KnobPlugin(), "knob_plugin")
    info = infermodel.get_host().registries.levers["knob"]
    assert (info.plugin, info.reference) == ("knob_plugin", "nowhere, §0")
    scenario = infermodel.load_scenario(write_scenario(BASE + "\n[levers.knob]\nstrength = 2.5\n"))
    assert scenario.lever("knob") == _Knob(strength=2.5)
    # An unknown key, a wrong type and a validator's refusal, each with file, key and line.
    text = BASE + "\n[levers.knob]\nstrenght = 2\nlabel = 3\n"
    with pytest.raises(ScenarioError) as caught:
        infermodel.load_scenario(write_scenario(text, "bad.toml"))
    rendered = caught.value.render()
    assert "bad.toml:17: levers.knob.strenght: unknown key 'strenght'" in rendered
    assert "did you mean 'strength'?" in rendered
    assert "bad.toml:18: levers.knob.label: got an integer 3 (expected a string)" in rendered
    with pytest.raises(ScenarioError, match="strength must be positive"):
        infermodel.load_scenario(write_scenario(BASE + "\n[levers.knob]\nstrength = -1\n", "neg.toml"))


def test_infermodel_register_levers_unknown_lever_names_the_loaded_ones(register_plugin, write_scenario):
    register_plugin(_KnobPlugin(), "knob_plugin")
    with pytest.raises(ScenarioError, match="no loaded plugin provides a lever named 'knobb'.*did you mean 'knob'"):
        infermodel.load_scenario(write_scenario(BASE + "\n[levers.knobb]\n"))


# ---------------------------------------------------------------------------------
# infermodel_register_presets
# ---------------------------------------------------------------------------------


class _Presets:
    def __init__(self, directory):
        self.directory = directory

    @hookimpl
    def infermodel_register_presets(self, register):
        register("hardware", self.directory)


def test_infermodel_register_presets_makes_each_file_a_named_preset(register_plugin, write_scenario,
                                                                    tmp_path):
    directory = tmp_path / "presets"
    directory.mkdir()
    (directory / "test-card.toml").write_text(
        '[preset]\ndescription = "a test card"\nsource = "this test"\n\n'
        '[hardware]\nmemory = "48 GB"\nbandwidth = "2 TB/s"\nflops = "300 TFLOP/s"\n',
        encoding="utf-8")
    register_plugin(_Presets(directory), "preset_plugin")
    info = infermodel.get_host().registries.presets["hardware"]["test-card"]
    assert info.plugin == "preset_plugin"
    result = infermodel.evaluate(write_scenario(BASE.replace('"module10-24gb"', '"test-card"')))
    assert result["card_memory"] == 48e9 and result["card_bandwidth"] == 2e12
    # Where each value came from is the preset file and its line.
    assert result.scenario.where("hardware.memory").file.endswith("test-card.toml")


def test_infermodel_register_presets_duplicate_name_is_an_error_naming_both(register_plugin, tmp_path):
    directory = tmp_path / "presets"
    directory.mkdir()
    (directory / "module10-24gb.toml").write_text("[preset]\n[hardware]\n", encoding="utf-8")
    register_plugin(_Presets(directory), "copycat")
    with pytest.raises(PluginError, match="'module10-24gb' is provided by both") as caught:
        _ = infermodel.get_host().registries
    assert "'copycat'" in str(caught.value) and "'physics'" in str(caught.value)


# ---------------------------------------------------------------------------------
# infermodel_validate_scenario
# ---------------------------------------------------------------------------------


class _Validator:
    @hookimpl
    def infermodel_validate_scenario(self, scenario, report):
        if scenario.value("workload.output_tokens") > scenario.value("workload.prompt_tokens"):
            report("workload.output_tokens", "more output than prompt", expected="at most the prompt",
                   suggestion="lower output_tokens")
        if scenario.value("workload.batch") > 8:
            report("workload.batch", "batch above 8")


def test_infermodel_validate_scenario_reports_every_problem_with_file_and_line(register_plugin,
                                                                               write_scenario):
    register_plugin(_Validator(), "validator")
    assert infermodel.load_scenario(write_scenario(BASE)).value("workload.batch") == 1
    text = BASE.replace("output_tokens = 2000", "output_tokens = 5000") + "batch = 9\n"
    with pytest.raises(ScenarioError) as caught:
        infermodel.load_scenario(write_scenario(text, "bad.toml"))
    problems = caught.value.problems
    assert len(problems) == 2  # collected, raised once
    by_key = {p.key: p for p in problems}
    assert by_key["workload.output_tokens"].line == 14
    assert by_key["workload.output_tokens"].expected == "at most the prompt"
    assert by_key["workload.output_tokens"].suggestion == "lower output_tokens"
    assert by_key["workload.batch"].file.endswith("bad.toml") and by_key["workload.batch"].line == 15


# ---------------------------------------------------------------------------------
# infermodel_register_headlines
# ---------------------------------------------------------------------------------


class _Headline:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("answer_share", S.output_tokens / S.sequence_length, unit="1",
               description="share of a sequence that is answer")

    @hookimpl
    def infermodel_register_headlines(self, register):
        register("my lever", "answer_share", label="answer share")
        register("my lever", "not_defined_here", label="absent")


def test_infermodel_register_headlines_adds_a_summary_row_under_its_group(register_plugin,
                                                                          write_scenario):
    from infermodel.printing import result_summary

    register_plugin(_Headline(), "headliner")
    text = result_summary(infermodel.evaluate(write_scenario(BASE)))
    lines = text.splitlines()
    group = lines.index("my lever")
    assert lines.index("cost") < group  # the physics' groups come first
    assert lines[group + 1].split()[:3] == ["answer", "share", "0.3333"]
    assert "absent" not in text  # a quantity the scenario lacks has no row


class _HeadlineClash:
    @hookimpl
    def infermodel_register_headlines(self, register):
        register("mine", "tpot")


def test_infermodel_register_headlines_twice_is_an_error_naming_both(register_plugin, host):
    register_plugin(_HeadlineClash(), "clash")
    with pytest.raises(PluginError, match="'tpot' is registered by both") as caught:
        _ = host.registries
    assert "'clash'" in str(caught.value) and "'physics'" in str(caught.value)


# ---------------------------------------------------------------------------------
# infermodel_register_number_formats
# ---------------------------------------------------------------------------------


#: Symmetric int3 codes: −3 … 3 in units of the scale.
_INT3 = infermodel.plugin.Encoding("int3", "int", 3, largest=3, lowest=-3, smallest_normal=1,
                                   smallest_subnormal=None, epsilon=1, infinity=False,
                                   nan=False, overflow="clamped")
_HALF = infermodel.plugin.Encoding("half", "float", 16, largest=65504.0, lowest=-65504.0,
                                   smallest_normal=2.0**-14, smallest_subnormal=2.0**-24,
                                   epsilon=2.0**-10, infinity=True, nan=True, overflow="inf")


class _Int3:
    @hookimpl
    def infermodel_register_number_formats(self, register):
        register("int3-g64", description="symmetric int3, one fp16 scale per 64", bits=3,
                 element=_INT3, metadata_bits=16, granularity="group", values_per_scale=64,
                 scale=_HALF, reference="test, §2")


def test_infermodel_register_number_formats_lists_the_format_in_formats_json(register_plugin,
                                                                            capsys):
    from infermodel.cli import main

    register_plugin(_Int3(), "int3")
    info = infermodel.get_host().registries.number_formats["int3-g64"]
    assert info.plugin == "int3" and info.bits_per_value == 3 + 16 / 64
    assert main(["formats", "int3-g64", "--format", "json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["range"] == [-3, 3] and listed["epsilon"] == 1 and listed["bits_per_value"] == 3.25
    assert listed["scale"]["largest_finite"] == 65504.0 and listed["plugin"] == "int3"


class _BadFormat:
    @hookimpl
    def infermodel_register_number_formats(self, register):
        register("int3-tensor", description="a scale without granularity", bits=3,
                 element=_INT3, scale=_HALF)


def test_infermodel_register_number_formats_refuses_inconsistent_and_repeated_formats(
        register_plugin, host):
    register_plugin(_BadFormat(), "bad")
    with pytest.raises(PluginError, match="'bad'.*int3-tensor.*granularity"):
        _ = host.registries
    host.unregister("bad")
    register_plugin(_Int3(), "first")
    register_plugin(_Int3(), "second")
    with pytest.raises(PluginError, match="'int3-g64' is registered by both 'first' and 'second'"):
        _ = host.registries


# ---------------------------------------------------------------------------------
# infermodel_register_quantisers
# ---------------------------------------------------------------------------------


def _halving(values, *, bits, zero_point):
    """Codes of every value at a scale of one half (a toy grid)."""
    codes = tuple(round(2 * v) for v in values)
    back = tuple(c / 2 for c in codes)
    errors = [b - v for b, v in zip(back, values)]
    return infermodel.plugin.Quantisation(
        method="halves", bits=bits, values=tuple(values), scale=0.5, zero_point=0,
        lowest_code=-(2 ** (bits - 1)), highest_code=2 ** (bits - 1) - 1, codes=codes,
        reconstruction=back, rms_error=(sum(e * e for e in errors) / len(errors)) ** 0.5,
        max_error=max(abs(e) for e in errors))


class _Halves:
    @hookimpl
    def infermodel_register_quantisers(self, register):
        register("halves", _halving, description="round to halves", reference="test, §3")


def test_infermodel_register_quantisers_runs_the_chosen_quantiser_from_quantize(register_plugin,
                                                                                capsys):
    from infermodel.cli import main

    register_plugin(_Halves(), "halves")
    assert infermodel.get_host().registries.quantisers["halves"].plugin == "halves"
    assert main(["quantize", "--bits", "4", "--method", "halves", "0.3", "-0.8",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["codes"] == [1, -2] and data["reconstruction"] == [0.5, -1.0]
    assert data["quantiser"] == "halves" and data["plugin"] == "halves"
    # With two quantisers loaded, quantize asks which one.
    assert main(["quantize", "--bits", "4", "0.3"]) == 2
    assert "--method" in capsys.readouterr().err


class _BrokenQuantiser:
    @hookimpl
    def infermodel_register_quantisers(self, register):
        register("broken", lambda values, *, bits, zero_point: 1 / 0, description="fails")


def test_infermodel_register_quantisers_failure_names_the_plugin(register_plugin, capsys):
    from infermodel.cli import main

    register_plugin(_BrokenQuantiser(), "breaker")
    assert main(["quantize", "--bits", "4", "--method", "broken", "0.3"]) != 0
    assert "'breaker' failed in quantiser 'broken'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------
# infermodel_define_quantities
# ---------------------------------------------------------------------------------


class _Definer:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("prompt_share", S.prompt_tokens / S.sequence_length, unit="1",
               description="share of a sequence that is prompt", reference="test, §1",
               latex=r"s_p")
        define("answer_budget", 250, unit="token", description="a plugin-set input")


def test_infermodel_define_quantities_adds_derived_and_input_quantities(register_plugin,
                                                                        write_scenario):
    register_plugin(_Definer(), "definer")
    result = infermodel.evaluate(write_scenario(BASE))
    share = result.graph["prompt_share"]
    assert result["prompt_share"] == pytest.approx(4000 / 6000)
    assert (share.plugin, share.unit, share.reference, share.latex) == ("definer", "1", "test, §1", "s_p")
    assert share.dependencies == ("prompt_tokens", "sequence_length")
    assert result.graph["answer_budget"].is_input and result["answer_budget"] == 250


class _Duplicate:
    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        define("tpot", S.decode_step_time * 2, unit="s", description="a clash")


def test_infermodel_define_quantities_clash_is_an_error_naming_both(register_plugin, write_scenario):
    register_plugin(_Duplicate(), "clash")
    with pytest.raises(GraphError, match="'tpot' is defined by both") as caught:
        infermodel.evaluate(write_scenario(BASE))
    assert "'clash'" in str(caught.value) and "'physics'" in str(caught.value)


# ---------------------------------------------------------------------------------
# infermodel_transform_quantities
# ---------------------------------------------------------------------------------


class _Transformer:
    def __init__(self, order):
        self.order = order

    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.wrap("decode_step_time", lambda old: old * 2, reason="twice as slow",
                       reference="test, §2", order=self.order)
        transform.replace("context", S.prompt_tokens, reason="context is the prompt",
                          order=self.order)


def test_infermodel_transform_quantities_wraps_and_replaces_with_recorded_history(register_plugin,
                                                                                  write_scenario):
    # The documents' convention: one roofline per step, so that the step is one formula.
    path = write_scenario(BASE + '\n[efficiency]\nmodel = "fixed"\n')
    plain = infermodel.evaluate(path)
    register_plugin(_Transformer(400), "slow")
    changed = infermodel.evaluate(path)
    step = changed.graph["decode_step_time"]
    assert [c.kind for c in step.history] == ["define", "wrap"]
    assert step.history[-1].reason == "twice as slow" and step.history[-1].reference == "test, §2"
    assert step.changed_by == ("slow",)
    assert changed["context"] == 4000 and plain["context"] == 5000
    # The wrap applies to the definition as it stands, whose inputs the replace changed.
    assert changed["decode_step_time"] == pytest.approx(
        2 * max(changed["decode_time_memory"], changed["decode_time_compute"]))
    assert changed["tpot"] == changed["decode_step_time"]
    assert isinstance(step.expression, sympy.Expr)


class _Warner:
    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.warn("host overhead is not modelled: about 0.2 ms per step",
                       quantity="decode_step_time")


def test_infermodel_transform_quantities_warn_becomes_a_result_warning(register_plugin,
                                                                        write_scenario):
    path = write_scenario(BASE)
    before = infermodel.evaluate(path).warnings
    assert not [w for w in before if w.quantity == "decode_step_time"]
    register_plugin(_Warner(), "warner")
    result = infermodel.evaluate(path)
    [warning] = [w for w in result.warnings if w not in before]
    assert warning.quantity == "decode_step_time"
    assert str(warning) == "host overhead is not modelled: about 0.2 ms per step (plugin 'warner')"
    assert "0.2 ms" in str(result.to_dict()["warnings"])


def test_infermodel_transform_quantities_warn_needs_text(register_plugin, write_scenario):
    class Empty:
        @hookimpl
        def infermodel_transform_quantities(self, scenario, transform):
            transform.warn("")

    register_plugin(Empty(), "empty")
    with pytest.raises(infermodel.InfermodelError, match="non-empty string"):
        infermodel.evaluate(write_scenario(BASE))


class _FlatCost:
    @hookimpl
    def infermodel_iteration_cost(self, scenario, values, register):
        class Flat:
            def times(self, tokens, decodes, decode_cached, chunks, chunk_tokens, chunk_cached,
                      scored):
                return 1e-3 + 0 * (tokens + decodes + chunks)

            def describe(self):
                return ["one millisecond a pass"]

        register(Flat())


def test_infermodel_iteration_cost_prices_the_simulators_iterations(register_plugin,
                                                                   write_scenario):
    from infermodel.analyses.simulation.plan import iteration_cost
    from infermodel.simulator import CostModel

    register_plugin(_FlatCost(), "flat")
    result = infermodel.evaluate(write_scenario(BASE))
    measured = iteration_cost(result.scenario, result.values)
    assert measured.plugin == "flat"
    cost = CostModel.from_quantities(result.values, measured=measured)
    assert cost.iteration_time([100] * 8, [(512, 0)]) == pytest.approx(1e-3 + result["t0"])
    assert "one millisecond a pass" in cost.describe()
    register_plugin(_FlatCost(), "flat_again")
    with pytest.raises(PluginError, match="registered by both 'flat' and 'flat_again'"):
        iteration_cost(result.scenario, result.values)
