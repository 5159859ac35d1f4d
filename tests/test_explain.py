"""``infermodel explain`` prints the derivation chain down to the inputs."""

from __future__ import annotations

import json

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main

CASE = SCENARIOS / "case-study-24gb.toml"


def test_explain_tpot_on_the_case_study(capsys):
    assert main(["explain", str(CASE), "tpot"]) == 0
    text = capsys.readouterr().out
    blocks = text.strip().split("\n\n")
    # The asked quantity comes first, with formula, numbers, value and provenance.
    assert blocks[0].splitlines() == [
        "tpot = 6.237 ms    (time per output token after the first)",
        "  formula:     tpot = decode_step_time",
        "  with values: tpot = 0.00623728",
        "  defined by:  physics  [Module 10: Inference and serving, §1 'Estimate the two times']",
    ]
    assert ("  with values: decode_step_time = 0 + Max(0.00012609, 0.00623728)" in text)
    assert "  with values: decode_bytes = 5.5e9 + 1*5000*147456" in text
    assert "  with values: kv_bytes_per_token = 2*128*8*2*36" in text
    # ... down to the inputs, each with where it was written.
    assert "layers = 36    (number of decoder blocks)" in text
    assert "model.layers (" in text and "module10-case.toml:" in text
    assert "weight_bytes = 5.5 GB" in text and "case-study-24gb.toml:10" in text
    assert "workload.batch (" in text and "module10-case-base.toml:17" in text
    # Every quantity tpot depends on appears exactly once.
    result = infermodel.evaluate(CASE)
    names = [b.split(" = ")[0] for b in blocks]
    assert sorted(names) == sorted(("tpot",) + result.graph.ancestors("tpot"))


def test_explain_shows_a_lever_change_after_the_base_definition(capsys):
    assert main(["explain", str(SCENARIOS / "module10-case-artifact.toml"), "weight_bytes",
                 "--depth", "1"]) == 0
    text = capsys.readouterr().out
    assert "  base:        weight_bytes = params_total*weight_value_bytes" in text
    assert "replaced by: number_formats: each parameter class stored at its own number of bits" in text
    assert "with values: weight_bytes = 8.30472e9*4.125/8 + 299008*16/8 + 8*(6.22854e8 + 6.22854e8)/8" in text


def test_explain_formats(capsys):
    assert main(["explain", str(CASE), "tpot", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["quantity"] == "tpot" and data["steps"][0]["value"] == 0.00623728
    assert data["steps"][0]["history"][0]["plugin"] == "physics"
    assert main(["explain", str(CASE), "ttft", "--format", "latex", "--depth", "1"]) == 0
    latex = capsys.readouterr().out
    assert latex.startswith(r"\begin{aligned}") and r"\mathrm{TTFT}" in latex
    assert main(["explain", str(CASE), "ttft", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("### Derivation of `ttft`")


def test_python_api_explain_mirrors_cli():
    result = infermodel.evaluate(CASE)
    derivation = infermodel.explain(result, "max_sequences")
    assert derivation.steps[0].value == 18
    assert "max_sequences = 18 seq" in str(derivation)
    assert derivation._repr_markdown_().startswith("### Derivation")


def test_latex_derivation_of_bandwidth_multiplies_its_factors_with_cdot():
    # the three named factors must not run together into one word
    latex = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml").explain("bandwidth").latex()
    assert (r"\mathrm{BW} &= \mathrm{card\_bandwidth} \cdot \mathrm{card\_count} \cdot "
            r"\mathrm{mbu}") in latex


def test_latex_derivation_has_a_legend_for_every_symbol_alias():
    derivation = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml").explain("tpot")
    latex = derivation.latex()
    legend = latex[latex.index(r"\text{where }"):]
    for symbol, name in [("L", "context"), (r"\mathrm{kv}", "kv_bytes_per_token"),
                         (r"\mathrm{BW}", "bandwidth"), ("F", "flops_peak"),
                         (r"N_{\mathrm{matmul}}", "params_matmul"), ("d_q", "query_width")]:
        assert f"{symbol} = \\text{{{name.replace('_', chr(92) + '_')}}}" in legend, symbol


def test_cost_formula_prints_as_written_not_rearranged():
    # Module 10 §11: price per hour over 3,600 s of output at the utilisation, per million
    r = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml")
    text = r.explain("cost_per_million_output_tokens").text()
    assert ("cost_per_million_output_tokens = cost_per_hour*1000000/"
            "(3600*tokens_per_s_total*utilisation)") in text
    assert "2500" not in text
    assert round(r["cost_per_million_output_tokens"], 3) == 1.733  # the value is unchanged


def test_as_written_leaves_evaluated_expressions_alone():
    import sympy

    from infermodel import S
    from infermodel.printing import as_written

    evaluated = S.card_bandwidth * S.card_count * S.mbu
    assert as_written(evaluated) is evaluated
    with sympy.evaluate(False):
        nested = (S.a * S.b) * S.c
    assert str(as_written(nested)) == "a*b*c"
