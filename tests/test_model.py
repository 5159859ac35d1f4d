"""Kept structures: a Model (and evaluate() in a loop) gives a fresh evaluation's result.

Every comparison is exact: the same values to the bit (and of the same type), the same
scenario (sections, raw data, origins) and the same graph (formulas, input values,
history) as :func:`infermodel.engine.evaluation.evaluate_afresh` (here ``evaluate_fresh``), which
loads, builds and evaluates from scratch.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel import hookimpl
from infermodel.engine.evaluation import evaluate_afresh as evaluate_fresh
from infermodel.engine.kept import clear_models, model_for
from infermodel.errors import InfermodelError
from infermodel.host import PluginHost, set_host
from infermodel.sweeping import Model

CASE = SCENARIOS / "case-study-24gb.toml"
SPEC = SCENARIOS / "spec-lab5.toml"
QUANT = SCENARIOS / "quant-int4.toml"


def _same_value(a, b) -> bool:
    # repr round-trips a float exactly (and tells -0.0 from 0.0 and NaN from a number).
    return type(a) is type(b) and repr(a) == repr(b)


def assert_identical(result, fresh):
    assert list(result.values) == list(fresh.values)
    moved = {n: (result.values[n], fresh.values[n]) for n in fresh.values
             if not _same_value(result.values[n], fresh.values[n])}
    assert not moved
    assert result.scenario == fresh.scenario
    assert result.graph == fresh.graph
    assert result.to_dict() == fresh.to_dict()
    assert result.warnings == fresh.warnings


def _outcome(function):
    try:
        return function(), None
    except InfermodelError as exc:
        return None, (type(exc), exc.render())


def assert_same_outcome(model, path, overrides):
    got, got_error = _outcome(lambda: model.evaluate(overrides))
    want, want_error = _outcome(lambda: evaluate_fresh(path, overrides))
    assert got_error == want_error
    if want is not None:
        assert_identical(got, want)


@pytest.fixture(autouse=True)
def _fresh_models():
    clear_models()
    yield
    clear_models()


def _on_fresh_host():
    set_host(PluginHost())


# -- values: random overrides, exact agreement --------------------------------------

VALUES = {
    "workload.batch": st.integers(1, 512),
    "workload.prompt_tokens": st.integers(1, 200_000),
    "workload.output_tokens": st.integers(1, 20_000),
    "hardware.bandwidth": st.one_of(st.floats(1e9, 1e13), st.sampled_from(["3.35 TB/s", "1 TB/s"])),
    "hardware.flops": st.floats(1e12, 2e15),
    "hardware.memory": st.sampled_from(["24 GB", "80 GB", "80 GiB", 48e9]),
    "hardware.count": st.integers(1, 8),
    "efficiency.mbu": st.floats(0.05, 1.0),
    "efficiency.decode_mfu": st.floats(0.05, 1.0),
    "efficiency.prefill_mfu": st.floats(0.05, 1.0),
    "efficiency.t0": st.sampled_from([0.0, "0.3 ms", 1e-3]),
    "model.layers": st.integers(1, 128),
}


@settings(max_examples=40, deadline=None)
@given(path=st.sampled_from([CASE, SPEC, QUANT]),
       points=st.lists(st.dictionaries(st.sampled_from(sorted(VALUES)), st.none(), max_size=5),
                       min_size=1, max_size=3),
       data=st.data())
def test_value_changes_give_a_fresh_evaluations_result_to_the_bit(path, points, data):
    _on_fresh_host()
    model = Model(path)
    for keys in points:
        overrides = {k: data.draw(VALUES[k], label=k) for k in keys}
        assert_same_outcome(model, path, overrides)


def test_the_case_study_has_its_usual_value_fields():
    fields = Model(CASE).structure().value_fields
    assert {"workload.batch", "workload.prompt_tokens", "workload.output_tokens",
            "hardware.bandwidth", "hardware.flops", "efficiency.mbu"} <= set(fields)


def test_a_value_change_reuses_the_structure(monkeypatch):
    import infermodel.engine.graph as graph_module

    model = Model(CASE)
    model.evaluate({"workload.batch": 2})
    builds = []
    real = graph_module.build_graph
    monkeypatch.setattr(graph_module, "build_graph", lambda *a, **k: builds.append(1) or real(*a, **k))
    for batch in (3, 5, 18, 64):
        assert_identical(model.evaluate(workload__batch=batch),
                         evaluate_fresh(CASE, {"workload.batch": batch}))
    assert model.evaluate({"hardware.bandwidth": "2 TB/s", "workload.batch": 7})["batch"] == 7
    builds.clear()
    model.evaluate({"workload.batch": 9})
    assert builds == []
    assert len(model._structures) == 1


# -- structural changes rebuild --------------------------------------------------------


@pytest.mark.parametrize("overrides", [
    {"levers.speculative": False},                                   # a lever switched off
    {"levers.speculative.k": 2},                                     # a lever setting
    {"levers.number_formats.kv_bits": 8, "workload.batch": 4},        # with a value change too
    {"hardware.preset": "h100-sxm"},                                 # a preset
    {"model.ffn": "gelu"},                                           # a choice field
    {"sweep": {"workload.batch": [1, 2]}},                           # a table given
])
def test_a_structural_change_rebuilds(overrides):
    model = Model(SPEC)
    base = model.evaluate()
    changed = model.evaluate(overrides)
    assert_identical(changed, evaluate_fresh(SPEC, overrides))
    assert len(model._structures) == 2
    # ... and going back finds the first structure again.
    assert_identical(model.evaluate(), base)
    assert len(model._structures) == 2


def test_switching_a_lever_on_rebuilds_and_keeps_values_fast():
    model = Model(CASE)
    on = {"levers.speculative": {"k": 4, "acceptance": 0.8, "draft_cost": 0.1}}
    for batch in (1, 2, 8):
        assert_identical(model.evaluate({**on, "workload.batch": batch}),
                         evaluate_fresh(CASE, {**on, "workload.batch": batch}))
    assert len(model._structures) == 1
    assert "workload.batch" in model.structure(on).value_fields


class _ReadsBatch:
    """A plugin that reads workload.batch while defining: batch becomes structural."""

    @hookimpl
    def infermodel_define_quantities(self, scenario, define):
        batch = scenario.value("workload.batch")
        define("batch_bucket", 1.0 if batch > 8 else 0.0, unit="1",
               description="whether the batch is above 8")


def test_a_field_a_plugin_reads_is_structural(register_plugin):
    register_plugin(_ReadsBatch(), "reads_batch")
    model = Model(CASE)
    assert "workload.batch" not in model.structure().value_fields
    for batch in (4, 16):
        result = model.evaluate({"workload.batch": batch})
        assert result["batch_bucket"] == (1.0 if batch > 8 else 0.0)
        assert_identical(result, evaluate_fresh(CASE, {"workload.batch": batch}))


def test_registering_a_plugin_is_seen_by_evaluate(register_plugin):
    before = infermodel.evaluate(CASE)
    assert "batch_bucket" not in before
    register_plugin(_ReadsBatch(), "reads_batch")
    assert infermodel.evaluate(CASE, {"workload.batch": 9})["batch_bucket"] == 1.0


# -- mistakes are reported as loading reports them ------------------------------------


@pytest.mark.parametrize("overrides", [
    {"workload.batch": 0},
    {"workload.batch": "many"},
    {"workload.batch": 2.5},
    {"workload.batch": True},
    {"efficiency.mbu": 1.5},
    {"hardware.bandwidth": "3 parsecs"},
    {"workload.bacth": 4},
    {"levers.speculative.k": -1},
    {"workload": 3, "workload.batch": 4},
])
def test_mistakes_raise_what_loading_raises(overrides):
    model = Model(SPEC)
    model.evaluate()
    assert_same_outcome(model, SPEC, overrides)
    with pytest.raises(InfermodelError):
        model.evaluate(overrides)


@settings(max_examples=60, deadline=None)
@given(overrides=st.dictionaries(
    st.sampled_from(["workload.batch", "workload.prompt_tokens", "hardware.bandwidth",
                     "efficiency.mbu", "hardware.count", "model.ffn", "levers.speculative",
                     "workload", "workload.batch.x", "nonsense.key"]),
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=True),
              st.text(max_size=8), st.just("2 TB/s"), st.dictionaries(st.text(max_size=3),
                                                                      st.integers(), max_size=2)),
    max_size=3))
def test_fuzzed_overrides_agree_with_a_fresh_evaluation(overrides):
    _on_fresh_host()
    model = Model(CASE)
    assert_same_outcome(model, CASE, overrides)


# -- the kept models behind evaluate() ---------------------------------------------------


def test_evaluate_in_a_loop_reuses_one_model():
    first = infermodel.evaluate(CASE, {"workload.batch": 2})
    model = model_for(CASE)
    for batch in (3, 4):
        assert_identical(infermodel.evaluate(CASE, {"workload.batch": batch}),
                         evaluate_fresh(CASE, {"workload.batch": batch}))
    assert model_for(CASE) is model
    assert first["batch"] == 2


def test_a_changed_file_is_read_again(tmp_path):
    base = tmp_path / "base.toml"
    base.write_text(f'extends = "{CASE}"\n[workload]\nbatch = 2\n', encoding="utf-8")
    top = tmp_path / "top.toml"
    top.write_text('extends = "base.toml"\n', encoding="utf-8")
    assert infermodel.evaluate(top)["batch"] == 2
    base.write_text(f'extends = "{CASE}"\n[workload]\nbatch = 3\n', encoding="utf-8")
    stat = os.stat(base)
    os.utime(base, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a coarse clock
    assert infermodel.evaluate(top)["batch"] == 3
    assert_identical(infermodel.evaluate(top, {"workload.batch": 5}),
                     evaluate_fresh(top, {"workload.batch": 5}))


def test_a_scenario_object_gets_a_model_too():
    scenario = infermodel.load_scenario(CASE)
    for batch in (2, 3):
        assert_identical(infermodel.evaluate(scenario, {"workload.batch": batch}),
                         evaluate_fresh(scenario, {"workload.batch": batch}))
    assert model_for(scenario).scenario is scenario


def test_model_sweep_matches_the_sweep_and_evaluate():
    model = Model(CASE)
    swept = model.sweep({"workload.batch": [1, 8, 18]}, quantities=["tpot"], use_table=False)
    direct = infermodel.sweep(CASE, {"workload.batch": [1, 8, 18]}, quantities=["tpot"],
                              use_table=False)
    assert list(swept["tpot"]) == list(direct["tpot"])
    for i, batch in enumerate((1, 8, 18)):
        assert swept["tpot"][i] == model.evaluate(workload__batch=batch)["tpot"]


def test_keywords_and_set_strings_name_fields():
    model = Model(CASE)
    by_keyword = model.evaluate(workload__batch=18, hardware__bandwidth="2 TB/s")
    by_strings = model.evaluate(["workload.batch=18", "hardware.bandwidth=2 TB/s"])
    assert_identical(by_keyword, by_strings)
    assert_identical(by_keyword, evaluate_fresh(CASE, ["workload.batch=18",
                                                       "hardware.bandwidth=2 TB/s"]))


def test_a_sweep_of_a_path_reads_a_changed_file_again(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(f'extends = "{CASE}"\n[workload]\nprompt_tokens = 1000\n', encoding="utf-8")
    over = {"workload.batch": [1, 2]}
    first = infermodel.sweep(path, over, quantities=["prompt_tokens"], use_table=False)
    assert list(first["prompt_tokens"]) == [1000, 1000]
    path.write_text(f'extends = "{CASE}"\n[workload]\nprompt_tokens = 2000\n', encoding="utf-8")
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = infermodel.sweep(path, over, quantities=["prompt_tokens"], use_table=False)
    assert list(again["prompt_tokens"]) == [2000, 2000]


def test_sweep_columns_are_separate_arrays():
    # One chunk's columns become the result: none may be shared with another column.
    result = infermodel.sweep(CASE, {"workload.batch": [1, 2, 3]}, use_table=False)
    columns = [result[name] for name in result.quantities]
    assert len({id(c) for c in columns}) == len(columns)
    assert all(c.flags.writeable and c.shape == (3,) for c in columns)
    assert result["tpot"] is not result["decode_step_time"]


def test_constant_columns_are_read_as_arrays_of_their_own():
    result = infermodel.sweep(CASE, {"workload.batch": [1, 2, 3]}, use_table=False)
    assert not result.columns["layers"].flags.writeable  # a view of one value
    column = result["layers"]
    assert column.flags.writeable and column.tolist() == [36.0, 36.0, 36.0]
    column[0] = 0.0
    assert result["layers"] is column and result["d_model"][0] == 4096.0


def test_one_chunk_and_many_chunks_give_the_same_columns_to_the_bit():
    import numpy as np

    from infermodel.sweeping import plan_sweep

    over = {"workload.batch": "1..50", "efficiency.mbu": [0.5, 1.0]}
    whole = infermodel.sweep(CASE, over, use_table=False)
    plan = plan_sweep(CASE, over, use_table=False)
    parts = list(plan.chunks(chunk_size=7))
    for name in whole.quantities:
        streamed = np.concatenate([p.columns[name] for p in parts])
        assert whole[name].tobytes() == streamed.tobytes(), name


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2
    return value * 1.37


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_value_field_of_every_shipped_scenario_agrees_to_the_bit(path, autoload_host):
    # Every input of every shipped scenario's compiled function, set through the kept
    # structure (where it may be passed as a numpy scalar), against a fresh evaluation.
    model = Model(path)
    fields = model.structure().value_fields
    assert fields
    for name in sorted(fields):
        value = model.scenario.value(name)
        assert_same_outcome(model, path, {name: _changed(value)})
