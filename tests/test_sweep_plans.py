"""Kept sweep plans: ``infermodel.sweep`` called again with the same arguments reuses its
plan, and gives what planning afresh gives, to the bit.

A plan is kept by the scenario's kept model (so it is planned again when a file the
scenario was read from changes) under a key of the sweep's arguments that keeps apart
every pair of arguments that could plan a different grid.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS
from infermodel.engine.kept import clear_models, model_for
from infermodel.errors import InfermodelError
from infermodel.scenario import REMOVE
from infermodel.sweeping import plan_sweep
from infermodel.sweeping.entry import PLANS_KEPT, _sweep_key

CASE = SCENARIOS / "case-study-24gb.toml"


def _planned_afresh(over, **kwargs):
    return plan_sweep(CASE, over, use_table=False, **kwargs).run()


def assert_same_columns(result, fresh):
    assert list(result.columns) == list(fresh.columns)
    for name in fresh.columns:
        got, want = np.asarray(result[name]), np.asarray(fresh[name])
        assert got.dtype == want.dtype, name
        if got.dtype == object:  # labels: compare the objects
            assert got.tolist() == want.tolist(), name
        else:  # numbers: to the bit
            assert got.tobytes() == want.tobytes(), name
        assert result.defined(name).tolist() == fresh.defined(name).tolist(), name


@pytest.mark.parametrize("over", [
    {"workload.batch": "1..10000"},
    {"workload.batch": [1, 2, 3], "efficiency.mbu": [0.5, 1.0]},
    {"hardware.preset": ["rtx-4090", "h100-sxm"], "workload.batch": [1, 64]},
    {"levers.number_formats": [False, {"kv_bits": 8}], "workload.batch": [1, 8]},
])
def test_a_kept_plan_gives_what_planning_afresh_gives(over):
    clear_models()
    first = infermodel.sweep(CASE, over, use_table=False)
    again = infermodel.sweep(CASE, over, use_table=False)
    fresh = _planned_afresh(over)
    assert_same_columns(first, fresh)
    assert_same_columns(again, fresh)


def test_the_plan_is_kept_and_each_result_has_its_own_copy():
    clear_models()
    over = {"workload.batch": [1, 2, 3]}
    first = infermodel.sweep(CASE, over, use_table=False)
    again = infermodel.sweep(CASE, over, use_table=False)
    assert first.plan is not again.plan
    assert first.plan.blocks is again.plan.blocks  # planned once
    assert len(model_for(CASE).sweep_plans) == 1
    # Choosing other quantities on one result's plan leaves the kept plan alone.
    first.plan.select(["tpot"])
    third = infermodel.sweep(CASE, over, use_table=False)
    assert third.quantities == again.quantities and len(third.quantities) > 1


def test_columns_of_a_kept_plan_are_not_shared_between_results():
    clear_models()
    over = {"workload.batch": [1, 2, 3]}
    first = infermodel.sweep(CASE, over, use_table=False)
    for name in first.columns:
        column = first[name]
        column[...] = 0 if column.dtype != object else "x"
    again = infermodel.sweep(CASE, over, use_table=False)
    assert_same_columns(again, _planned_afresh(over))
    assert again["workload.batch"].tolist() == [1.0, 2.0, 3.0]


def test_other_arguments_plan_again():
    clear_models()
    a = infermodel.sweep(CASE, {"workload.batch": [1, 2]}, use_table=False)
    b = infermodel.sweep(CASE, {"workload.batch": [1, 2]}, quantities=["tpot"],
                         use_table=False)
    c = infermodel.sweep(CASE, {"workload.batch": [1, 4]}, use_table=False)
    d = infermodel.sweep(CASE, {"workload.batch": [1, 2], "efficiency.mbu": [0.5]},
                         use_table=False)
    assert b.quantities == ["tpot"] and len(a.quantities) > 1
    assert c["workload.batch"].tolist() == [1.0, 4.0]
    assert [x.name for x in d.axes] == ["workload.batch", "efficiency.mbu"]
    assert len(model_for(CASE).sweep_plans) == 4


def test_arguments_not_keyed_are_planned_afresh_every_time():
    clear_models()
    result = infermodel.sweep(CASE, {"efficiency.mbu": [np.float64(0.5)]}, use_table=False)
    assert result["efficiency.mbu"].tolist() == [0.5]
    for _ in range(2):  # an iterator of --over strings is read once, by planning
        again = infermodel.sweep(CASE, (item for item in ["workload.batch=1,2"]),
                                 use_table=False)
        assert again["workload.batch"].tolist() == [1.0, 2.0]
    assert len(model_for(CASE).sweep_plans) == 0


def test_a_mistake_is_reported_every_time_and_not_kept():
    clear_models()
    for _ in range(2):
        with pytest.raises(InfermodelError, match="workload.bacth"):
            infermodel.sweep(CASE, {"workload.bacth": [1, 2]}, use_table=False)
    assert len(model_for(CASE).sweep_plans) == 0


def test_at_most_so_many_plans_are_kept():
    clear_models()
    for batch in range(1, PLANS_KEPT + 6):
        infermodel.sweep(CASE, {"workload.batch": [batch]}, quantities=["tpot"],
                         use_table=False)
    assert len(model_for(CASE).sweep_plans) == PLANS_KEPT


def test_an_integer_field_swept_with_floats_is_refused_even_after_integers():
    # 1 == 1.0 in Python: a key that did not keep types apart would reuse the plan of
    # the integers and accept the floats.
    clear_models()
    infermodel.sweep(CASE, {"workload.batch": [1, 2]}, use_table=False)
    with pytest.raises(InfermodelError):
        infermodel.sweep(CASE, {"workload.batch": [1.5, 2.5]}, use_table=False)


def test_keys_keep_apart_types_signs_and_order():
    assert _sweep_key([1, 2]) != _sweep_key([1.0, 2.0]) != _sweep_key([True, 2])
    assert _sweep_key([0.0, 1.0]) != _sweep_key([-0.0, 1.0])
    assert _sweep_key(0.0) != _sweep_key(-0.0)
    assert _sweep_key({"a": 1, "b": 2}) != _sweep_key({"b": 2, "a": 1})
    assert _sweep_key([REMOVE]) != _sweep_key([False]) != _sweep_key([None])
    assert _sweep_key(("x",)) != _sweep_key(["x"])
    assert _sweep_key(np.float64(1.0)) is None
    assert _sweep_key([np.float64(1.0)]) is None
    assert _sweep_key({1: "a"}) is None
    assert _sweep_key(iter(["a=1"])) is None


def _exact(value):
    """A description of a value that two values share only when they are the same."""
    if isinstance(value, dict):
        return ("dict", tuple((k, _exact(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_exact(v) for v in value))
    return (type(value).__name__, repr(value))


_SCALARS = (st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False) | st.booleans()
            | st.sampled_from(["a", "b", "1..4", None, 0.0, -0.0, 0, False]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                       max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_VALUES, _VALUES)
def test_equal_keys_only_for_the_same_arguments(a, b):
    key_a, key_b = _sweep_key(a), _sweep_key(b)
    assert key_a is not None and key_b is not None
    hash(key_a)
    assert (key_a == key_b) == (_exact(a) == _exact(b))


def test_a_file_an_axis_reads_that_changes_is_read_again(tmp_path):
    # The Hugging Face configs are read while the blocks are planned, not by the scenario
    # itself: a kept plan notices that one changed, as a fresh plan would read it.
    import json
    import os
    import shutil

    from conftest import DATA

    clear_models()
    for name in ("a", "b"):
        shutil.copy(DATA / "hf" / "smollm2-135m.json", tmp_path / f"{name}.json")
    path = tmp_path / "s.toml"
    path.write_text(f'[model]\nhf_config = "{tmp_path / "a.json"}"\n[hardware]\n'
                    'preset = "h200"\n[workload]\nprompt_tokens = 100\noutput_tokens = 10\n',
                    encoding="utf-8")
    over = {"model.hf_config": [str(tmp_path / "a.json"), str(tmp_path / "b.json")]}
    first = infermodel.sweep(path, over, quantities=["layers"], use_table=False)
    config = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
    config["num_hidden_layers"] += 2
    (tmp_path / "b.json").write_text(json.dumps(config), encoding="utf-8")
    stat = os.stat(tmp_path / "b.json")
    os.utime(tmp_path / "b.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = infermodel.sweep(path, over, quantities=["layers"], use_table=False)
    assert again["layers"].tolist() == [first["layers"][0], first["layers"][1] + 2]
