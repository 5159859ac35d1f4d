"""The project's documentation builds with warnings as errors, and its generated pages
cover what the plugins provide: a page per shipped scenario, every quantity any loaded
plugin defines in them in the catalogue, every field and lever in the scenario-file
reference, every command in the CLI reference and every hook in the plugin guide.

The build renders the worked third-party plugin, so it needs it installed
(``pip install -e plugins/infermodel-kv-offload``), as ``docs/conf.py`` says.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from docutils import nodes

import infermodel
from conftest import ROOT, SCENARIOS

DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build docs/ once into a temporary folder; yield (app, warnings, host)."""
    from sphinx.application import Sphinx
    from sphinx.util.console import strip_colors
    from sphinx.util.docutils import docutils_namespace

    from infermodel.host import set_host

    patch = pytest.MonkeyPatch()
    # docs/conf.py chooses the plugins (built-ins and the worked plugin) and installs a
    # host; restore the suite's settings afterwards.
    patch.delenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    patch.setenv("INFERMODEL_LOAD_PLUGINS", "")
    out = tmp_path_factory.mktemp("docs")
    warnings = io.StringIO()
    # docutils keeps directives in a global registry: restore it afterwards, as
    # sphinx.testing's apps do, so later Sphinx tests start clean.
    try:
        with docutils_namespace():
            app = Sphinx(srcdir=DOCS, confdir=DOCS, outdir=out / "html",
                         doctreedir=out / "doctrees", buildername="html", status=io.StringIO(),
                         warning=warnings, freshenv=True, warningiserror=True)
            app.build()
            host = infermodel.get_host()
            yield app, strip_colors(warnings.getvalue()), host
    finally:
        set_host(None)
        patch.undo()


def _ids(app, docname) -> set[str]:
    doctree = app.env.get_doctree(docname)
    return {i for node in doctree.findall(nodes.Element) for i in node["ids"]}


def _id(text: str) -> str:
    return nodes.make_id(text)


pytestmark = pytest.mark.slow


def test_docs_build_without_warnings(built):
    app, warnings, _host = built
    assert warnings == ""
    assert app.statuscode == 0
    assert (Path(app.outdir) / "index.html").is_file()


def test_every_shipped_scenario_has_a_rendered_page(built):
    app, _warnings, _host = built
    for path in sorted(SCENARIOS.glob("*.toml")):
        docname = f"scenarios/{path.stem}"
        assert docname in app.env.found_docs, path.name
        doctree = app.env.get_doctree(docname)
        assert any("infermodel-results" in t["classes"] for t in doctree.findall(nodes.table))
        assert (Path(app.outdir) / "scenarios" / f"{path.stem}.html").is_file()


def test_catalogue_lists_every_quantity_any_plugin_defines_in_the_shipped_scenarios(built):
    app, _warnings, host = built
    ids = _ids(app, "quantities")
    seen = set()
    for path in sorted(SCENARIOS.glob("*.toml")):
        result = infermodel.evaluate(path, host=host)
        seen.update(result.graph.order)
    missing = sorted(name for name in seen if _id(f"quantity-{name}") not in ids)
    assert not missing, f"quantities missing from docs/quantities: {missing}"
    assert {"tpot", "kv_offload_time"} <= seen  # built-in and third-party plugins alike


def test_scenario_file_reference_lists_every_field_and_lever(built):
    app, _warnings, host = built
    ids = _ids(app, "scenario-files")
    registries = host.registries
    for spec in registries.all_fields():
        assert _id(f"field-{spec.path}") in ids, spec.path
    for lever in registries.levers:
        assert _id(f"lever-{lever}") in ids, lever
        assert _id(f"lever-{lever}") in _ids(app, "levers"), lever


def test_cli_reference_has_a_section_per_command(built):
    app, _warnings, _host = built
    from infermodel.cli import build_parser
    from infermodel.sphinxext import _subcommands

    ids = _ids(app, "cli")
    for name in _subcommands(build_parser()):
        assert _id(f"cli-{name}") in ids, name


def test_plugin_guide_has_a_section_per_hook(built):
    app, _warnings, _host = built
    from test_docs import _hooks

    ids = _ids(app, "plugin-guide")
    for hook in _hooks():
        assert _id(hook) in ids, hook


def test_worked_plugin_is_rendered_with_its_derivation(built):
    app, _warnings, _host = built
    doctree = app.env.get_doctree("worked-plugin")
    text = doctree.astext()
    assert "kv_offload: infermodel_kv_offload from infermodel-kv-offload" in text  # plugins command
    assert "wrapped by" in text and "kv_offload" in text
    assert any("kv\\_offload\\_time" in m.astext() for m in doctree.findall(nodes.math_block))


def test_pages_load_mathjax_from_the_build_not_a_cdn(built):
    app, _warnings, _host = built
    out = Path(app.outdir)
    assert (out / "_static" / "mathjax" / "tex-chtml.js").is_file()
    for page in ("scenarios/quant-int4", "worked-plugin", "sphinx-extension", "plugin-guide"):
        html = (out / f"{page}.html").read_text(encoding="utf-8")
        assert "cdn.jsdelivr" not in html, page
        # a page with formulas loads the copy (one without, such as the guide, loads none)
        assert ("_static/mathjax/tex-chtml.js" in html) == ('class="math' in html), page
    assert 'class="math' in (out / "worked-plugin.html").read_text(encoding="utf-8")


def test_the_extension_page_compares_bf16_and_int4(built):
    app, _warnings, _host = built
    doctree = app.env.get_doctree("sphinx-extension")
    tables = [t for t in doctree.findall(nodes.table) if "infermodel-compare" in t["classes"]]
    assert len(tables) == 1
    header = [e.astext() for e in next(tables[0].findall(nodes.thead)).findall(nodes.entry)]
    assert header == ["Quantity", "BF16", "INT4", "INT4 − BF16", "INT4 / BF16"]
