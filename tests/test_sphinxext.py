"""The Sphinx extension: one small test root per case (tests/roots/test-infermodel-*).

Numbers rendered on the pages are checked against the engine and against Module 10:
Inference and serving (§1 "Estimate the two times": the case model decodes in about
6.24 ms on the 24 GB reference card; §11: 18 full-length sequences fit beside a 5.5 GB
artifact).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from docutils import nodes

import infermodel
from infermodel import sphinxext

ROOTS = Path(__file__).resolve().parent / "roots"


def _doctree(app, docname="index"):
    return app.env.get_doctree(docname)


def _table_rows(table: nodes.table) -> list[list[str]]:
    return [[entry.astext().strip() for entry in row.findall(nodes.entry)]
            for row in table.findall(nodes.row)]


def _results(app, docname="index") -> list[dict[str, list[str]]]:
    """Each results table on the page as {quantity: [value, meaning, plugin, reference]}."""
    out = []
    for table in _doctree(app, docname).findall(nodes.table):
        if "infermodel-results" not in table["classes"]:
            continue
        rows = _table_rows(table)
        assert rows[0][:2] == ["Quantity", "Value"]
        out.append({row[0]: row[1:] for row in rows[1:]})
    return out


def _warnings(warning) -> str:
    from sphinx.util.console import strip_colors

    return strip_colors(warning.getvalue())


# ---------------------------------------------------------------------------------
# Results of chosen quantities
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-quantities", freshenv=True)
def test_quantities_option_renders_exactly_the_chosen_quantities(app, warning):
    app.build()
    assert _warnings(warning) == ""
    (table,) = _results(app)
    assert list(table) == ["tpot", "ttft", "max_sequences"]
    # Module 10 §1: 6.23728 GB per step at 1 TB/s → 6.24 ms; §11: 18 sequences.
    assert table["tpot"][0] == "6.237 ms"
    assert table["max_sequences"][0] == "18 seq"
    assert table["ttft"][2] == "physics"
    assert "Module 10" in table["tpot"][3]
    html = (app.outdir / "index.html").read_text(encoding="utf-8")
    assert "6.237 ms" in html and "root-case" in html


@pytest.mark.sphinx("html", testroot="infermodel-quantities", freshenv=True)
def test_extension_declares_parallel_safety_and_its_version(app):
    metadata = app.extensions["infermodel.sphinxext"]
    assert metadata.parallel_read_safe is True
    assert metadata.parallel_write_safe is True
    assert metadata.version == infermodel.__version__


# ---------------------------------------------------------------------------------
# Derivation chains
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-chain", freshenv=True)
def test_chain_renders_every_step_as_display_math_down_to_the_inputs(app, warning):
    app.build()
    assert _warnings(warning) == ""
    doctree = _doctree(app)
    first, second = list(doctree.findall(
        lambda n: isinstance(n, nodes.container) and "infermodel-derivation" in n["classes"]))
    result = infermodel.evaluate(ROOTS / "test-infermodel-chain" / "scenario.toml")
    derived = [n for n in result.graph.ancestors("tpot") if not result.graph[n].is_input]
    inputs = [n for n in result.graph.ancestors("tpot") if result.graph[n].is_input]
    maths = list(first.findall(nodes.math_block))
    # One display block (formula, then formula with values = result) per derived step.
    assert len(maths) == len(derived) + 1
    tpot_math = maths[0].astext()
    assert r"\mathrm{TPOT} &= \mathrm{decode\_step\_time}" in tpot_math
    assert r"\text{6.237 ms}" in tpot_math
    assert all(m["nowrap"] is False and m["docname"] == "index" for m in maths)
    # The inputs follow in a table with the file and line each was read from.
    (inputs_table,) = [t for t in first.findall(nodes.table) if "infermodel-inputs" in t["classes"]]
    rows = {row[0]: row for row in _table_rows(inputs_table)[1:]}
    assert set(rows) == set(inputs)
    assert re.fullmatch(r"workload\.prompt_tokens \(.*scenario\.toml:\d+\)", rows["prompt_tokens"][3])
    assert "presets/models/module10-case.toml" in rows["layers"][3]
    # Provenance: the defining plugin and the published reference.
    provenance = first.next_node(
        lambda n: isinstance(n, nodes.field_list) and "infermodel-provenance" in n["classes"])
    assert "physics" in provenance.astext() and "Module 10: Inference and serving" in provenance.astext()
    # :depth: 1 stops one level below ttft.
    result_ttft = [n for n in result.graph["ttft"].dependencies]
    assert len(list(second.findall(nodes.math_block))) == 1 + sum(
        not result.graph[n].is_input for n in result_ttft)


@pytest.mark.sphinx("html", testroot="infermodel-chain", freshenv=True)
def test_chain_shows_a_levers_change_with_its_reason(app, warning, tmp_path):
    app.build()
    path = Path(app.srcdir) / "quantised.toml"
    path.write_text('extends = "scenario.toml"\n[levers.number_formats]\nkv_bits = 8\n',
                    encoding="utf-8")
    (Path(app.srcdir) / "lever.rst").write_text(
        ":orphan:\n\nLever\n=====\n\n.. infermodel:: quantised.toml\n   :quantities: kv_value_bytes\n"
        "   :chain:\n   :depth: 0\n", encoding="utf-8")
    app.build()
    text = _doctree(app, "lever").astext()
    assert "replaced by" in text and "number_formats" in text
    assert "originally" in text


# ---------------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-override", freshenv=True)
def test_set_option_overrides_fields_like_the_command_line(app, warning):
    app.build()
    assert _warnings(warning) == ""
    one, two = _results(app)
    path = ROOTS / "test-infermodel-override" / "scenario.toml"
    expected = infermodel.evaluate(path, {"workload.batch": 18})
    from infermodel.printing import show

    assert one["batch"][0] == "18"
    assert one["tokens_per_s_total"][0] == show(expected["tokens_per_s_total"], "token/s")
    assert two["batch"][0] == "4" and two["card_count"][0] == "2"
    # The table says which overrides it shows.
    titles = [t.next_node(nodes.title).astext() for t in _doctree(app).findall(nodes.table)
              if "infermodel-results" in t["classes"]]
    assert titles == ["root-case (workload.batch=18)", "root-case (workload.batch=4; hardware.count=2)"]
    (inputs,) = [t for t in _doctree(app).findall(nodes.table) if "infermodel-inputs" in t["classes"]]
    (row,) = _table_rows(inputs)[1:]
    assert row[:2] == ["weight_bytes", "11 GB"]
    assert row[3] == "model.weight_bytes (the :set: option)"


def test_override_text_splits_on_semicolons_and_newlines():
    assert sphinxext._split_overrides("a.b=1; c.d=2\n e.f = 3 ;") == ["a.b=1", "c.d=2", "e.f = 3"]
    assert sphinxext._split_names("tpot, ttft  max_sequences") == ["tpot", "ttft", "max_sequences"]


# ---------------------------------------------------------------------------------
# Broken scenarios: located warnings, never a crash
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-broken", freshenv=True)
def test_broken_scenarios_give_located_warnings_and_the_page_still_builds(app, warning):
    app.build()
    text = _warnings(warning)
    index = str(Path(app.srcdir) / "index.rst")
    lines = [line for line in text.splitlines() if "WARNING" in line]
    # invalid TOML: the directive's line, and the scenario's file and line.
    assert any(line.startswith(f"{index}:4:") and "invalid-toml.toml:4" in line
               and "invalid TOML" in line and "[infermodel.scenario]" in line for line in lines)
    # a value of the wrong type: the key path and its line in the file.
    assert any(line.startswith(f"{index}:6:") and "wrong-value.toml:14" in line
               and "workload.batch" in line for line in lines)
    # an unknown quantity, with the closest name.
    assert any(line.startswith(f"{index}:8:") and "'tpott'" in line and "did you mean 'tpot'" in line
               and "[infermodel.quantity]" in line for line in lines)
    assert any(line.startswith(f"{index}:11:") and "missing.toml" in line
               and "[infermodel.file]" in line for line in lines)
    assert any(line.startswith(f"{index}:13:") and ":set: workload.batches: unknown key" in line
               and "did you mean 'batch'" in line for line in lines)
    assert len(lines) == 5
    # The good directive after them rendered.
    (table,) = _results(app)
    assert table["tpot"][0] == "6.237 ms"


@pytest.mark.sphinx("html", testroot="infermodel-broken", freshenv=True, warningiserror=True)
def test_broken_scenario_fails_a_build_with_warnings_as_errors(app):
    app.build()
    assert app.statuscode == 1


def test_configuration_values_are_checked_when_read(make_app, rootdir, tmp_path):
    from sphinx.testing.util import SphinxTestApp  # noqa: F401  (make_app builds one)

    srcdir = tmp_path / "bad-config"
    srcdir.mkdir()
    (srcdir / "conf.py").write_text('extensions = ["infermodel.sphinxext"]\n', encoding="utf-8")
    (srcdir / "index.rst").write_text("Index\n=====\n", encoding="utf-8")
    with pytest.raises(sphinxext.InfermodelSphinxError, match="infermodel_scenario_pages_dir"):
        make_app("html", srcdir=srcdir, confoverrides={"infermodel_scenario_pages_dir": "../outside"})
    with pytest.raises(sphinxext.InfermodelSphinxError, match="infermodel_headline_quantities"):
        make_app("html", srcdir=srcdir, confoverrides={"infermodel_headline_quantities": [1, 2]})
    app = make_app("html", srcdir=srcdir, confoverrides={"infermodel_default_quantities": "tpot, ttft"})
    assert app.config.infermodel_default_quantities == ["tpot", "ttft"]
    assert issubclass(sphinxext.InfermodelSphinxError, __import__("sphinx.errors").errors.SphinxError)


# ---------------------------------------------------------------------------------
# Parallel build
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-parallel", freshenv=True, parallel=2)
def test_parallel_build_reads_in_parallel_with_the_same_results(app, warning):
    app.build()
    text = _warnings(warning)
    assert "parallel" not in text  # no "extension is not safe for parallel reading"
    assert text == ""
    assert app.parallel == 2 and app.is_parallel_allowed("read") and app.is_parallel_allowed("write")
    path = ROOTS / "test-infermodel-parallel" / "scenario.toml"
    from infermodel.printing import show

    for i in range(1, 9):
        (table,) = _results(app, f"page{i}")
        expected = infermodel.evaluate(path, {"workload.batch": i})
        assert table["tokens_per_s_total"][0] == show(expected["tokens_per_s_total"], "token/s")
        assert (app.outdir / f"page{i}.html").is_file()
    # Dependencies noted in worker processes were merged back.
    assert all(any(str(d).endswith("scenario.toml") for d in app.env.dependencies[f"page{i}"])
               for i in range(1, 9))


# ---------------------------------------------------------------------------------
# Rebuilds when the TOML changes
# ---------------------------------------------------------------------------------


def _touch_later(path: Path) -> None:
    later = time.time() + 5
    os.utime(path, (later, later))


@pytest.mark.sphinx("html", testroot="infermodel-rebuild", freshenv=True,
                    srcdir="infermodel-rebuild-edited")
def test_editing_the_scenario_or_a_file_it_extends_outdates_the_page(app, warning):
    app.build()
    assert _warnings(warning) == ""
    assert _results(app)[0]["batch"][0] == "2"
    assert app.env.get_outdated_files(config_changed=False) == (set(), set(), set())

    scenario = Path(app.srcdir) / "scenario.toml"
    scenario.write_text(scenario.read_text(encoding="utf-8").replace("batch = 2", "batch = 3"),
                        encoding="utf-8")
    _touch_later(scenario)
    added, changed, removed = app.env.get_outdated_files(config_changed=False)
    assert changed == {"index"} and not added and not removed
    app.build()
    assert _results(app)[0]["batch"][0] == "3"

    # The file it extends is a dependency too (output_tokens changes tpot).
    base = Path(app.srcdir) / "base.toml"
    before = _results(app)[0]["tpot"][0]
    base.write_text(base.read_text(encoding="utf-8").replace("output_tokens = 2000",
                                                             "output_tokens = 4000"),
                    encoding="utf-8")
    _touch_later(base)
    assert app.env.get_outdated_files(config_changed=False)[1] == {"index"}
    app.build()
    assert _results(app)[0]["tpot"][0] != before


# ---------------------------------------------------------------------------------
# Reference directives: fields, levers, catalogue, command line, commands
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-reference", freshenv=True)
def test_reference_directives_render_the_registries_catalogue_and_cli(app, warning, host):
    app.build()
    assert _warnings(warning) == ""
    doctree = _doctree(app)
    tables = list(doctree.findall(nodes.table))
    field_tables = [t for t in tables if "infermodel-fields" in t["classes"]]
    assert [t.next_node(nodes.title).astext() for t in field_tables] == ["[model]", "[workload]"]
    model = {row[0]: row for row in _table_rows(field_tables[0])[1:]}
    registries = host.registries
    assert set(model) == set(registries.fields["model"])
    assert model["layers"][3] == "required" and model["layers"][5] == "layers"
    assert model["tied_embeddings"][3] == "false"
    # Every lever's table, with its keys.
    ids = {i for node in doctree.findall(nodes.Element) for i in node["ids"]}
    for lever in registries.levers:
        assert f"lever-{lever.replace('_', '-')}" in ids
    lever_text = doctree.astext()
    assert "weight_bits_linear" in lever_text and "kv_bits" in lever_text
    # The catalogue has every quantity of the scenario.
    result = infermodel.evaluate(ROOTS / "test-infermodel-reference" / "scenario.toml")
    for name in result.graph.order:
        assert f"quantity-{name.replace('_', '-')}" in ids, name
    # The command-line sections.
    assert "cli-run" in ids and "cli-explain" in ids and "cli-graph" not in ids
    literal = [b.astext() for b in doctree.findall(nodes.literal_block)]
    assert any(text.startswith("usage: infermodel run") for text in literal)
    assert any(text.startswith("$ infermodel run scenario.toml --quantities tpot")
               and "6.237 ms" in text for text in literal)


def test_lever_types_are_described_in_words():
    from infermodel.schema import Bytes, Fraction

    assert sphinxext._type_text(Bytes) == "quantity in B (a number or a string with a unit)"
    assert sphinxext._type_text(Fraction) == "fraction in (0, 1]"
    # an optional key's default column says "not set"; its type reads as the value
    assert sphinxext._type_text(float | None) == "number"
    assert sphinxext._type_text(bool) == "true or false"
    from infermodel_builtins.formats import FormatSpec

    assert sphinxext._type_text(FormatSpec | None).startswith("number format name")


# ---------------------------------------------------------------------------------
# Generated scenario pages
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-pages", freshenv=True, srcdir="infermodel-pages-gen")
def test_a_page_is_generated_per_scenario_and_stale_pages_are_removed(app, warning):
    app.build()
    assert _warnings(warning) == ""
    generated = Path(app.srcdir) / "generated"
    assert sorted(p.name for p in generated.glob("*.rst")) == ["alpha.rst", "beta.rst", "index.rst"]
    beta = (generated / "beta.rst").read_text(encoding="utf-8")
    assert beta.startswith(sphinxext.GENERATED_MARKER)
    assert ".. infermodel:: ../scenarios/beta.toml" in beta and ":chain:" in beta
    assert "alpha with 18 sequences" in beta
    # Summary first; every long part folded below it.
    assert beta.index("   :summary:") < beta.index(".. infermodel-details:: Every quantity")
    assert ".. infermodel-details:: The scenario file" in beta
    assert re.search(r"\.\. infermodel-details:: tpot = [\d.]+ ms — time per output token", beta)
    html = (app.outdir / "generated" / "beta.html").read_text(encoding="utf-8")
    assert html.index("infermodel-summary") < html.index('<details class="infermodel-details">')
    assert (app.outdir / "generated" / "beta.html").is_file()
    (table,) = _results(app, "generated/beta")[:1]
    assert table["batch"][0] == "18"

    # An unchanged page keeps its time stamp; a removed scenario's page goes, a
    # hand-written page in the folder stays.
    stamp = (generated / "alpha.rst").stat().st_mtime_ns
    (generated / "notes.rst").write_text("Notes\n=====\n", encoding="utf-8")
    (Path(app.srcdir) / "scenarios" / "beta.toml").unlink()
    sphinxext.generate_scenario_pages(app)
    assert (generated / "alpha.rst").stat().st_mtime_ns == stamp
    assert not (generated / "beta.rst").exists()
    assert (generated / "notes.rst").exists()


# ---------------------------------------------------------------------------------
# .. infermodel-ops::
# ---------------------------------------------------------------------------------


@pytest.mark.sphinx("html", testroot="infermodel-ops", freshenv=True)
def test_ops_directive_renders_the_operator_table(app, warning):
    app.build()
    # The only warning: the missing file, located at its directive.
    lines = [line for line in _warnings(warning).splitlines() if line.strip()]
    assert len(lines) == 1 and "missing.toml not found" in lines[0] and "index.rst:10" in lines[0]
    doctree = _doctree(app)
    tables = [t for t in doctree.findall(nodes.table) if "infermodel-operators" in t["classes"]]
    assert [t.next_node(nodes.title).astext() for t in tables] == [
        "root-case: decode operators", "root-case: prefill operators (efficiency.roofline=operator)"]
    decode = _table_rows(tables[0])
    assert decode[0][:5] == ["Operator", "FLOPs", "Bytes", "Intensity", "Bound"]
    assert [row[0] for row in decode[1:]] == ["embedding", "norms", "qkv_projection",
                                              "attention_score", "attention_value",
                                              "output_projection", "ffn", "head"]
    text = doctree.astext()
    # Module 10 §1: the case study's decode step, 6.24 ms on the whole-step roofline.
    assert re.search(r"decode_step_time = 6\.237 ms \(roofline = .step.\)", text)
    # Under the operator roofline the prefill time is the sum of the operators' times.
    assert re.search(r"sum of operator times (\S+ ms) .*prefill_time = \1 \(roofline = .operator.\)", text)
