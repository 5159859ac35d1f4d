"""Pages that render anywhere and fit: offline MathJax, tables as wide as the text column,
compact references, wrapping names, folded details, comparisons, depth cuts that keep
their legend and show what levers changed below them, the plugin filter of
``infermodel-command``, and rebuilds when a plugin changes.

Most checks read one build of ``tests/roots/test-infermodel-layout`` (built once for
the module). Its scenarios are Llama 3.1 8B on one H100 SXM at the ideal roofline, in
bf16 and with int4-g128 block linears (scenarios/quant-bf16.toml and quant-int4.toml).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from docutils import nodes

import infermodel
from infermodel.analyses.comparison import compare
from infermodel.printing import show

ROOTS = Path(__file__).resolve().parent / "roots"
LAYOUT = ROOTS / "test-infermodel-layout"


def _warnings(warning) -> str:
    from sphinx.util.console import strip_colors

    return strip_colors(warning.getvalue())


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """The layout root built once; the app is cleaned up at once (its docutils
    registrations undone) so that other Sphinx apps start clean, and its environment and
    output stay readable.
    """
    from sphinx.testing.util import SphinxTestApp

    from infermodel.host import PluginHost, set_host

    set_host(PluginHost())
    srcdir = tmp_path_factory.mktemp("layout") / "src"
    shutil.copytree(LAYOUT, srcdir)
    status, warning = io.StringIO(), io.StringIO()
    app = SphinxTestApp("html", srcdir=srcdir, freshenv=True, status=status, warning=warning)
    try:
        app.build()
    finally:
        app.cleanup()
        set_host(None)
    return app, _warnings(warning)


def _html(app, page: str) -> str:
    return (Path(app.outdir) / f"{page}.html").read_text(encoding="utf-8")


def _tables(app, page: str, kind: str) -> list[nodes.table]:
    return [t for t in app.env.get_doctree(page).findall(nodes.table) if kind in t["classes"]]


def _rows(table: nodes.table) -> list[list[str]]:
    return [[entry.astext().strip() for entry in row.findall(nodes.entry)]
            for row in table.findall(nodes.row)]


def _boxes(app, page: str) -> list[nodes.container]:
    return list(app.env.get_doctree(page).findall(
        lambda n: isinstance(n, nodes.container) and "infermodel-derivation" in n["classes"]))


def _evaluate(name: str):
    return infermodel.evaluate(LAYOUT / name)


def test_the_layout_root_builds_without_warnings(layout):
    _app, warnings = layout
    assert warnings == ""


# ---------------------------------------------------------------------------------
# Formulas without network access
# ---------------------------------------------------------------------------------


def test_formulas_load_the_bundled_mathjax_not_a_cdn(layout):
    app, _ = layout
    static = Path(app.outdir) / "_static"
    assert app.config.mathjax_path == "mathjax/tex-chtml.js"
    assert (static / "mathjax" / "tex-chtml.js").stat().st_size > 500_000
    fonts = list((static / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert len(fonts) > 10
    assert (static / "mathjax" / "input" / "tex" / "extensions" / "ams.js").is_file()
    html = _html(app, "chain")
    assert 'src="_static/mathjax/tex-chtml.js"' in html
    assert "cdn.jsdelivr" not in html and "https://" not in re.sub(r'href="https://[^"]*"', "", html)


def _tiny(tmp_path: Path, body: str, conf: str = "") -> Path:
    srcdir = tmp_path / "tiny"
    srcdir.mkdir(exist_ok=True)
    (srcdir / "conf.py").write_text('extensions = ["infermodel.sphinxext"]\n' + conf,
                                    encoding="utf-8")
    (srcdir / "index.rst").write_text("Tiny\n====\n\n" + body, encoding="utf-8")
    for scenario in LAYOUT.glob("*.toml"):
        shutil.copy(scenario, srcdir / scenario.name)
    return srcdir


def test_the_cdn_or_a_projects_own_mathjax_path_is_kept_when_chosen(make_app, tmp_path):
    from sphinx.ext.mathjax import MATHJAX_URL

    body = ".. math:: a = b\n"
    app = make_app("html", srcdir=_tiny(tmp_path, body, "infermodel_offline_math = False\n"))
    assert app.config.mathjax_path == MATHJAX_URL
    app = make_app("html", srcdir=_tiny(tmp_path, body, 'mathjax_path = "my/mathjax.js"\n'))
    app.build()
    assert app.config.mathjax_path == "my/mathjax.js"
    assert not (Path(app.outdir) / "_static" / "mathjax").exists()


def test_a_missing_bundle_is_a_configuration_error_naming_the_choices(make_app, tmp_path,
                                                                     monkeypatch):
    from infermodel import sphinxext
    from infermodel.sphinxext import assets

    monkeypatch.setattr(assets, "bundled_mathjax", lambda: None)
    with pytest.raises(sphinxext.InfermodelSphinxError,
                       match="sphinx-mathjax-offline.*infermodel_offline_math = False"):
        make_app("html", srcdir=_tiny(tmp_path, ""))


# ---------------------------------------------------------------------------------
# Tables that fit: columns, compact references, names that wrap
# ---------------------------------------------------------------------------------


def test_columns_option_chooses_the_columns_in_order(layout):
    app, _ = layout
    (table,) = _tables(app, "index", "infermodel-results")[:1]
    rows = _rows(table)
    assert rows[0] == ["Quantity", "Value", "Reference"]
    result = _evaluate("int4.toml")
    values = {row[0]: row[1] for row in rows[1:]}
    assert values == {n: show(result[n], result.graph[n].unit)
                      for n in ("tpot", "weight_bytes", "ttft", "kv_bytes_per_sequence")}


def test_a_reference_is_a_short_label_with_the_full_text_on_hover_and_in_a_note(layout):
    app, _ = layout
    (table,) = _tables(app, "index", "infermodel-results")[:1]
    result = _evaluate("int4.toml")
    names = ["tpot", "weight_bytes", "ttft", "kv_bytes_per_sequence"]
    distinct = list(dict.fromkeys(result.graph[n].reference for n in names))
    cells = {row[0]: row[2] for row in _rows(table)[1:]}
    # Module 10 §1 ("Estimate the two times") is tpot's reference.
    assert re.fullmatch(r"Module 10 §1 \[\d\]", cells["tpot"])
    assert all(len(text) < 45 for text in cells.values())
    notes = table.parent[table.parent.index(table) + 1]
    assert "infermodel-notes" in notes["classes"]
    items = [item.astext().replace("‘", "'").replace("’", "'")  # typographic quotes
             for item in notes.findall(nodes.list_item)]
    assert items == distinct  # one note per distinct reference, in full
    titles = re.findall(r'<a class="[^"]*infermodel-reference[^"]*" href="#[^"]+" title="([^"]+)"',
                        _html(app, "index"))
    assert [t.replace("&#x27;", "'").replace("&#39;", "'") for t in titles[:1]] == distinct[:1]


def test_names_wrap_after_underscores_and_tables_keep_their_column_widths(layout):
    app, _ = layout
    html = _html(app, "index")
    assert "kv_<wbr>bytes_<wbr>per_<wbr>sequence" in html
    tables = re.findall(r'<table class="[^"]*infermodel-table[^"]*".*?</table>', html, re.DOTALL)
    assert tables and all("<colgroup>" in t and 'style="width:' in t for t in tables)
    css = (Path(app.outdir) / "_static" / "infermodel.css").read_text(encoding="utf-8")
    assert "table-layout: fixed" in css and "width: 100%" in css
    assert '_static/infermodel.css' in html


def test_summary_option_shows_the_headline_figures_by_group(layout):
    app, _ = layout
    (table,) = _tables(app, "index", "infermodel-summary")
    result = _evaluate("bf16.toml")
    rows = _rows(table)[1:]
    assert [row[3] for row in rows] == [h.name for h in result.graph.headlines
                                        if h.group not in ("assumptions", "limits")]
    # The limits and the assumptions each read as one line under the table, as in `run`.
    html = _html(app, "index")
    assert "Limits: prefill " in html and "Assumptions: " in html
    assert rows[0][0] == "memory" and rows[0][2] == show(result["weight_bytes"], "B")
    assert [row[0] for row in rows if row[0]][:4] == ["memory", "latency", "throughput", "cost"]


def test_details_fold_their_content_in_html_and_print_it_elsewhere(layout, make_app, tmp_path):
    app, _ = layout
    html = _html(app, "index")
    assert re.search(r'<details class="infermodel-details"><summary>Every quantity of bf16'
                     r"</summary>.*?weight_<wbr>bytes_<wbr>per_<wbr>step.*?</details>", html,
                     re.DOTALL)
    text_app = make_app("text", srcdir=_tiny(
        tmp_path, ".. infermodel-details:: The folded part\n   :open:\n\n   Inside it.\n"))
    text_app.build()
    text = (Path(text_app.outdir) / "index.txt").read_text(encoding="utf-8")
    assert "The folded part" in text and "Inside it." in text
    assert text.index("The folded part") < text.index("Inside it.")


def test_a_bad_columns_option_is_a_located_error(make_app, tmp_path):
    app = make_app("html", srcdir=_tiny(
        tmp_path, ".. infermodel:: bf16.toml\n   :columns: quantity, colour\n"))
    app.build()
    text = _warnings(app._warning)
    assert "index.rst:4" in text and "columns are quantity, value, meaning" in text
    assert "not colour" in text


# ---------------------------------------------------------------------------------
# Depth cuts: complete legends, a mark where a lever changed something below
# ---------------------------------------------------------------------------------


def test_a_depth_cut_keeps_every_symbol_in_the_legend(layout):
    app, _ = layout
    decode = _boxes(app, "chain")[2]
    assert "decode_bytes" in decode.next_node(nodes.rubric).astext()
    legend = decode.next_node(lambda n: isinstance(n, nodes.paragraph)
                              and "infermodel-legend" in n["classes"]).astext()
    # decode_bytes = weight_bytes_per_step + batch · L · kv: L and kv are below the cut.
    assert "L is context" in legend and r"\mathrm{kv} is kv_bytes_per_token" in legend
    cut = decode.next_node(lambda n: isinstance(n, nodes.paragraph)
                           and "infermodel-cut" in n["classes"]).astext()
    assert "context = 6,000 tokens" in cut  # 4,000 prompt + 4,000 / 2 output (the mean)


def test_a_lever_below_the_cut_is_marked_and_int4_differs_from_bf16(layout):
    app, _ = layout
    bf16, int4 = (box.astext() for box in _boxes(app, "chain")[:2])
    for text, weights in ((bf16, "bf16.toml"), (int4, "int4.toml")):
        result = _evaluate(weights)
        assert "changed below" in text and "◆" in text
        assert f"weight_bytes = {show(result['weight_bytes'], 'B')} (replaced by quantization" in text
    assert "16.06 GB" in bf16 and "5.701 GB" in int4
    assert bf16.replace("bf16", "x") != int4.replace("int4", "x")
    steps = [s for s in _boxes(app, "chain")[0].findall(nodes.container)
             if "infermodel-step" in s["classes"]]
    marked = [s for s in steps if "infermodel-changed-below" in s["classes"]]
    assert len(steps) == 2 and len(marked) == 1  # decode_step_time, not tpot itself


def test_formulas_keep_the_order_their_plugins_wrote(layout):
    app, _ = layout
    prefill = _boxes(app, "chain")[3]
    (formula,) = [m.astext() for m in prefill.findall(nodes.math_block)]
    first_line = formula.split(r"\\")[0]
    # physics defines t0 + max(compute, memory); the prefix cache wraps it, subtracting
    # the hit rate times the time saved: the wrapped expression comes first.
    assert first_line.index(r"\mathrm{t0}") < first_line.index(r"\max") < formula.index("h \\cdot")


# ---------------------------------------------------------------------------------
# .. infermodel-compare::
# ---------------------------------------------------------------------------------


def test_compare_shows_values_differences_and_ratios(layout):
    app, _ = layout
    first, second = _tables(app, "compare", "infermodel-compare")
    rows = _rows(first)
    assert rows[0] == ["Quantity", "BF16", "INT4", "INT4 − BF16", "INT4 / BF16"]
    bf16, int4 = _evaluate("bf16.toml"), _evaluate("int4.toml")
    cells = {row[0]: row[1:] for row in rows[1:]}  # a name cell reads "name" + meaning
    weights = next(v for k, v in cells.items() if k.startswith("weight_bytes"))
    assert weights[0] == show(bf16["weight_bytes"], "B") and weights[1] == show(int4["weight_bytes"], "B")
    assert weights[2] == "−" + show(bf16["weight_bytes"] - int4["weight_bytes"], "B")
    assert weights[3] == f"{int4['weight_bytes'] / bf16['weight_bytes']:.3g}×"
    fits = next(v for k, v in cells.items() if k.startswith("fits"))
    assert fits == ["yes", "yes", "—", "—"]
    # Three scenarios, ratios only, unchanged quantities left out.
    rows = _rows(second)
    assert rows[0] == ["Quantity", "int4 / bf16", "prefix / bf16"]
    names = [row[0] for row in rows[1:]]
    assert not any(n.startswith("prompt_tokens") for n in names)
    assert any(n.startswith("prefix_hit_rate") for n in names)


def test_the_comparison_function_computes_against_the_first():
    bf16, int4 = _evaluate("bf16.toml"), _evaluate("int4.toml")
    weights, fits = compare([bf16, int4], ["weight_bytes", "fits"])
    assert weights.values == (bf16["weight_bytes"], int4["weight_bytes"])
    assert weights.differences == (int4["weight_bytes"] - bf16["weight_bytes"],)
    assert weights.ratios == (int4["weight_bytes"] / bf16["weight_bytes"],)
    assert weights.changed and not fits.changed
    assert fits.differences == (None,) and fits.ratios == (None,)
    (same,) = compare([bf16, bf16], ["batch"])
    assert same.differences == (0.0,) and same.ratios == (1.0,) and not same.changed
    (missing,) = compare([bf16, _evaluate("prefix.toml")], ["prefix_hit_rate"])
    assert missing.values == (None, 1.0) and missing.changed and missing.ratios == (None,)
    (zero,) = compare([bf16, bf16], ["t0"])
    assert zero.values == (0.0, 0.0) and zero.ratios == (None,)
    assert len(compare([bf16, int4])) == len([n for n in bf16.graph.order if n in int4.values])
    with pytest.raises(ValueError, match="two or more"):
        compare([bf16])


def test_compare_warns_at_the_directive_for_bad_labels_and_unknown_quantities(make_app, tmp_path):
    app = make_app("html", srcdir=_tiny(
        tmp_path, ".. infermodel-compare:: bf16.toml int4.toml\n   :labels: only-one\n\n"
                  ".. infermodel-compare:: bf16.toml int4.toml\n   :quantities: tpott\n\n"
                  ".. infermodel-compare:: bf16.toml missing.toml\n"))
    app.build()
    lines = [line for line in _warnings(app._warning).splitlines() if "WARNING" in line]
    assert len(lines) == 3
    assert "index.rst:4" in lines[0] and "1 labels for 2 scenarios" in lines[0]
    assert "index.rst:7" in lines[1] and "no scenario defines tpott" in lines[1]
    assert "index.rst:10" in lines[2] and "missing.toml not found" in lines[2]


# ---------------------------------------------------------------------------------
# .. infermodel-command:: with a plugin filter; long lines wrap
# ---------------------------------------------------------------------------------


def test_command_plugins_option_loads_only_the_chosen_plugins(layout):
    app, _ = layout
    builtin, chosen, explain = [b.astext() for b in app.env.get_doctree("command").findall(
        nodes.literal_block)]
    assert builtin.startswith("$ infermodel plugins --all") and "physics (built-in)" in builtin
    assert "kv_offload" not in builtin and "testplugin" not in builtin
    assert "kv_offload: infermodel_kv_offload from infermodel-kv-offload" in chosen
    assert "(built-in)" not in chosen and "testplugin" not in chosen
    assert "decode_step_time = 4.715 ms" in explain
    html = _html(app, "command")
    assert html.count('class="infermodel-command highlight-text') == 3
    css = (Path(app.outdir) / "_static" / "infermodel.css").read_text(encoding="utf-8")
    assert re.search(r"div\.infermodel-command pre[^}]*white-space: pre-wrap", css)


def test_an_unknown_plugin_in_the_filter_is_a_located_warning(make_app, tmp_path):
    app = make_app("html", srcdir=_tiny(
        tmp_path, ".. infermodel-command:: plugins\n   :plugins: builtin, kv_ofload\n"))
    app.build()
    text = _warnings(app._warning)
    assert "index.rst:4" in text and "'kv_ofload' (did you mean 'kv_offload'?)" in text


# ---------------------------------------------------------------------------------
# Incremental rebuilds when a plugin changes
# ---------------------------------------------------------------------------------

PLUGIN = '''
from infermodel import hookimpl


@hookimpl
def infermodel_define_quantities(scenario, define):
    define("tiny_tokens", {value}, unit="token", description="{description}")
'''


def _write_plugin(folder: Path, value: int, description: str):
    import importlib.util

    path = folder / "tiny_docs_plugin.py"
    path.write_text(PLUGIN.format(value=value, description=description), encoding="utf-8")
    later = time.time() + value  # a new time stamp even on a coarse clock
    os.utime(path, (later, later))
    spec = importlib.util.spec_from_file_location("tiny_docs_plugin", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.sphinx("html", testroot="infermodel-plugin-change", freshenv=True,
                    srcdir="infermodel-plugin-change-edited")
def test_editing_a_plugin_rereads_the_pages_that_use_the_extension(app, warning, tmp_path):
    import sys

    from infermodel.host import PluginHost, set_host

    def install(value: int, description: str) -> None:
        module = _write_plugin(tmp_path, value, description)
        sys.modules["tiny_docs_plugin"] = module
        host = PluginHost()
        host.register(module, "tiny_docs")
        set_host(host)

    try:
        install(1, "first version")
        app.build()
        assert _warnings(warning) == ""
        assert "first version" in _html(app, "index")
        assert app.env.get_outdated_files(config_changed=False) == (set(), set(), set())
        install(2, "second version")
        app.build()  # incremental: no source file changed, the plugin did
        html = _html(app, "index")
        assert "second version" in html and "first version" not in html
        assert "index" in app.env.infermodel_documents
        assert "plain" not in app.env.infermodel_documents
    finally:
        sys.modules.pop("tiny_docs_plugin", None)
        set_host(None)


def test_the_fingerprint_follows_versions_and_files(tmp_path):
    from infermodel.host import PluginHost
    from infermodel.sphinxext import plugin_fingerprint

    host = PluginHost()
    before = plugin_fingerprint(host)
    assert plugin_fingerprint(host) == before
    module = _write_plugin(tmp_path, 1, "x")
    host.register(module, "tiny_docs")
    with_plugin = plugin_fingerprint(host)
    assert with_plugin != before
    _write_plugin(tmp_path, 3, "x")  # same module file, edited
    assert plugin_fingerprint(host) != with_plugin
