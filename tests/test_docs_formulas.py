"""Printed formulas: terms in the order their plugins wrote them, wide ones broken at
their top-level + and −, and derivations cut by a depth that still decode every symbol
and keep a lever's change below the cut.
"""

from __future__ import annotations

import sympy

import infermodel
from conftest import SCENARIOS
from infermodel.derivation import derive
from infermodel.printing import (
    WRAP_WIDTH,
    derivation_latex,
    derivation_legend,
    formula_latex,
    formula_text,
    latex_width,
    step_rows,
    written,
)
from infermodel.quantity import Change

U, W, M, C = sympy.symbols("memory_usable weight_bytes prefill_memory comm_time")


class _Step:
    def __init__(self, history):
        self.history = history
        self.expression = history[-1].expression


def test_latex_keeps_the_stored_order_where_sympys_default_sorts():
    usable, weights, prefill = sympy.symbols("usable weights prefill")
    expression = usable - weights - prefill
    # sympy's default order sorts the names: the formula would open with a minus
    assert sympy.latex(expression) == r"- prefill + usable - weights"
    assert formula_latex(expression) == (r"\mathrm{usable} - \mathrm{prefill}"
                                         r" - \mathrm{weights}")


def test_a_wrap_prints_the_wrapped_expression_first_then_what_it_added():
    history = (Change("define", "physics", U - W), Change("wrap", "lever", U - W - M))
    assert formula_text(written(_Step(history))) == "memory_usable - weight_bytes - prefill_memory"
    history = (Change("define", "physics", U + W), Change("wrap", "lever", C + U + W))
    assert formula_text(written(_Step(history))) == "memory_usable + weight_bytes + comm_time"
    # a product: old * p / m keeps old first
    history = (Change("define", "physics", U + W), Change("wrap", "lever", (U + W) * C / M))
    shown = written(_Step(history))
    assert sympy.simplify(shown - history[-1].expression) == 0
    assert formula_text(shown).startswith("(memory_usable + weight_bytes)*comm_time")
    # a replace is printed as the replacement
    history = (Change("define", "physics", U - W), Change("replace", "lever", M + C))
    assert written(_Step(history)) == M + C


def test_a_shipped_wrap_reads_in_its_authors_order():
    # parallelism wraps prefill_time as old + parallel_prefill_comm_time.
    result = infermodel.evaluate(SCENARIOS / "parallel-70b-allreduce.toml")
    (step,) = derive(result, "prefill_time", depth=0).steps
    assert formula_text(step.expression).startswith("parallel_prefill_comm_time + ")
    assert formula_text(written(step)) == ("t0 + Max(prefill_time_compute, prefill_time_memory)"
                                           " + parallel_prefill_comm_time")


def test_a_wide_formula_is_broken_at_top_level_plus_and_minus():
    result = infermodel.evaluate(SCENARIOS / "parallel-70b-allreduce.toml")
    (step,) = derive(result, "prefill_time", depth=0).steps
    rows = step_rows(step, result.values, {})
    assert rows[0].startswith(r"\mathrm{prefill\_time} &= \mathrm{t0} + \max")
    assert rows[1] == r"&\quad + \mathrm{parallel\_prefill\_comm\_time}"
    assert all(latex_width(row) <= WRAP_WIDTH + 8 for row in rows)
    # the value closes the last row
    assert rows[-1].endswith(r"= \text{12.21 s}")
    # a narrow formula stays on one row each
    (tpot,) = derive(result, "tpot", depth=0).steps
    assert len(step_rows(tpot, result.values, {})) == 2


def test_widths_count_what_renders():
    assert latex_width(r"\mathrm{ab} \cdot \mathrm{cd}") == latex_width("ab x cd")
    assert latex_width(r"\frac{\mathrm{abcdef}}{\mathrm{g}}") == 6


def test_a_cut_derivation_keeps_its_symbols_and_the_levers_below():
    int4 = infermodel.evaluate(SCENARIOS / "quant-int4.toml")
    derivation = derive(int4, "decode_bytes", depth=0)
    assert [s.name for s in derivation.steps] == ["decode_bytes"]
    assert {s.name for s in derivation.cut} == set(int4.graph["decode_bytes"].dependencies)
    legend = {name for _symbol, name, _ in derivation_legend(derivation)}
    assert {"context", "kv_bytes_per_token"} <= legend
    changes = derivation.changed_below["weight_bytes_per_step"]
    assert ("weight_bytes", "quantization", "replace") in {(c.quantity, c.plugin, c.kind)
                                                           for c in changes}
    latex = derivation_latex(derivation)
    assert r"L = \text{context}" in latex
    # without a depth nothing is cut
    assert derive(int4, "decode_bytes").cut == ()


class _Derived:
    def __init__(self, name, expression, value, unit="s"):
        self.name, self.expression, self.value, self.unit = name, expression, value, unit
        self.history = (Change("define", "physics", expression),)
        self.is_input = False


def test_a_wide_max_is_broken_between_its_arguments():
    first = sympy.Symbol("prefill_time_compute_of_every_layer_together") / sympy.Symbol("flops")
    second = sympy.Symbol("prefill_time_memory_of_every_layer_together") / sympy.Symbol("bandwidth")
    step = _Derived("operator_time", sympy.Max(first, second), 0.5)
    values = {"prefill_time_compute_of_every_layer_together": 1.0, "flops": 2.0,
              "prefill_time_memory_of_every_layer_together": 3.0, "bandwidth": 4.0}
    rows = step_rows(step, values, {}, width=60)
    assert rows[0].startswith(r"\mathrm{operator\_time} &= \max\biggl(") and rows[0].endswith(",")
    assert rows[1].startswith(r"&\quad \frac{") and rows[1].endswith(r"\biggr)")
    # the numbers fit on one row: no break there
    assert rows[2] == (r"\mathrm{operator\_time} &= \max\left(\frac{3}{4}, \frac{1}{2}\right)"
                       r" = \text{500 ms}")


def test_a_wide_product_with_a_sum_is_broken_inside_its_bracket():
    # DeepSeek-V3: params_ffn_active = moe_layers · (router + routed + shared) + dense part.
    result = infermodel.evaluate(SCENARIOS / "deepseek-v3-8xh200-fp8.toml")
    (step,) = derive(result, "params_ffn_active", depth=0).steps
    rows = step_rows(step, result.values, {})
    assert rows[0].startswith(r"\mathrm{params\_ffn\_active} &= \mathrm{moe\_layers} \cdot \biggl(")
    assert sum(r"\biggr)" in row for row in rows) == 1
    assert len(rows) >= 4 and all(latex_width(row) <= WRAP_WIDTH + 8 for row in rows)
