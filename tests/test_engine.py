"""The engine: symbols, transformations and their order, compiled evaluation, results."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import ROOT, SCENARIOS
from infermodel import S, hookimpl
from infermodel.engine.evaluation import compile_graph
from infermodel.engine.graph import build_graph
from infermodel.quantity import check_name, symbol

CASE = SCENARIOS / "case-study-24gb.toml"


@pytest.mark.parametrize("name", ["import os", "__class__", "a-b", "1abc", "", "lambda", "print",
                                  "exp", "select", "x" * 65, "a b", "é"])
def test_symbol_names_that_could_reach_generated_code_are_refused(name):
    assert check_name(name) is not None
    with pytest.raises(ValueError):
        symbol(name)


@settings(max_examples=200)
@given(st.text(max_size=20))
def test_accepted_names_are_plain_identifiers(name):
    if check_name(name) is None:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) and name.isidentifier()


class _Wrapper:
    def __init__(self, factor, order, label):
        self.factor, self.order, self.label = factor, order, label

    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.wrap("tpot", lambda old: old * self.factor, reason=self.label, order=self.order)


def test_transformations_apply_in_documented_order(register_plugin):
    # order first, then plugin name — registration order does not matter.
    register_plugin(_Wrapper(3, 500, "late"), "a_late")
    register_plugin(_Wrapper(2, 100, "early"), "z_early")
    register_plugin(_Wrapper(5, 500, "late too"), "b_late")
    result = infermodel.evaluate(CASE)
    history = result.graph["tpot"].history
    assert [c.plugin for c in history] == ["physics", "z_early", "a_late", "b_late"]
    assert [c.kind for c in history] == ["define", "wrap", "wrap", "wrap"]
    assert result["tpot"] == pytest.approx(result["decode_step_time"] * 30, rel=1e-12)
    assert str(history[-1].expression) == "30*decode_step_time"


class _ReplaceUnknown:
    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.replace("tpott", S.decode_step_time, reason="typo")


def test_transforming_an_unknown_quantity_is_an_error(register_plugin):
    register_plugin(_ReplaceUnknown(), "typo")
    with pytest.raises(infermodel.InfermodelError, match="'typo' tried to replace 'tpott'.*did you mean 'tpot'"):
        infermodel.evaluate(CASE)


def test_compiled_function_is_cached_by_structure():
    a = build_graph(infermodel.load_scenario(CASE))
    b = build_graph(infermodel.load_scenario(CASE, {"workload.batch": 7}))
    assert compile_graph(a) is compile_graph(b)


@settings(max_examples=10, deadline=None)
@given(batch=st.lists(st.integers(1, 512), min_size=1, max_size=6),
       context=st.floats(1, 100_000))
def test_vectorised_evaluation_equals_scalar(batch, context):
    graph = build_graph(infermodel.load_scenario(CASE, {"workload.context": 1.0}))
    compiled = compile_graph(graph)
    inputs = {n: graph[n].value for n in compiled.inputs}
    assert "context" in inputs and "batch" in inputs
    inputs["batch"] = np.array(batch, dtype=float)
    inputs["context"] = context
    arrays = compiled(inputs)
    for i, b in enumerate(batch):
        scalar = infermodel.evaluate(CASE, {"workload.batch": b, "workload.context": context})
        for name in ("decode_step_time", "tokens_per_s_total", "max_context", "fits", "critical_batch"):
            got = np.broadcast_to(arrays[name], (len(batch),))[i]
            if isinstance(scalar[name], bool):
                assert bool(got) == scalar[name]
            elif math.isinf(scalar[name]):
                assert math.isinf(got)
            else:
                assert got == pytest.approx(scalar[name], rel=1e-12)


def test_result_representations():
    result = infermodel.evaluate(CASE)
    assert "<table>" in result._repr_html_() and "<code>tpot</code>" in result._repr_html_()
    assert "| `tpot` | 6.237 ms |" in result._repr_markdown_()
    assert result._repr_latex_().startswith("$$\\begin{aligned}")
    assert "tpot" in str(result)
    with pytest.raises(infermodel.InfermodelError, match="did you mean 'tpot'"):
        result["tpott"]


def test_no_user_text_is_evaluated_as_code():
    # Scenario text must never reach eval/exec/sympify/parse_expr.
    pattern = re.compile(r"\b(eval|exec)\(|sympify\(|parse_expr\(")
    offenders = []
    for folder in ("src", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_edge_values_are_defined_not_crashes():
    # A model that does not fit: zero sequences, fits is false, no exception.
    r = infermodel.evaluate(CASE, {"hardware.memory": "4 GB"})
    assert r["fits"] is False and r["max_sequences"] == 0 and r["max_context"] == 0
    assert r["kv_budget_bytes"] < 0
    assert math.isfinite(r["tokens_per_s_at_capacity"])


class _Redescribe:
    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.wrap("tpot", lambda old: old * 2, reason="twice as slow",
                       description="time per output token on a halved machine")


def test_a_transformation_may_restate_the_meaning(register_plugin):
    register_plugin(_Redescribe(), "redescribe")
    result = infermodel.evaluate(CASE)
    assert result.graph["tpot"].description == "time per output token on a halved machine"
    assert result.graph["tpot"].history[-1].reason == "twice as slow"


class _ReplaceAfterWrap:
    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.wrap("tpot", lambda old: old * 2, reason="first", order=100)


class _Replacer:
    @hookimpl
    def infermodel_transform_quantities(self, scenario, transform):
        transform.replace("tpot", S.decode_step_time * 3, reason="second", order=200)


def test_a_replacement_that_discards_another_levers_change_is_reported(register_plugin):
    register_plugin(_ReplaceAfterWrap(), "wrapper")
    register_plugin(_Replacer(), "replacer")
    result = infermodel.evaluate(CASE)
    assert result["tpot"] == pytest.approx(3 * result["decode_step_time"], rel=1e-12)
    assert any("'replacer' replaced 'tpot', discarding the change(s) by 'wrapper'" in w
               for w in result.warnings)
