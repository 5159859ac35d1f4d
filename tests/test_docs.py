"""Meta-tests that keep the plugin surface and the documentation honest.

Every hook in :mod:`infermodel.hookspecs` has its own heading in the plugin-author
guide and a test named after it (``test_<hook name>...``), as datasette checks its
hooks (``test_plugin_hooks_are_documented``, ``test_plugin_hooks_have_tests``).
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
from pathlib import Path

import pytest

from conftest import ROOT
from infermodel import hookspecs

DOCS = ROOT / "docs"
TESTS = ROOT / "tests"


def _hooks() -> list[str]:
    return sorted(name for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
                  if hasattr(function, "infermodel_spec"))


def _headings(path) -> list[str]:
    """Section titles of a reStructuredText file (title line, then an underline)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for title, underline in itertools.pairwise(lines):
        if (title.strip() and re.fullmatch(r"([=\-~^\"'`#*+])\1{2,}", underline)
                and len(underline) >= len(title.rstrip())):
            out.append(title.strip())
    return out


def _test_names() -> set[str]:
    names = set()
    for path in TESTS.rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names.update(node.name for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return names


def test_hookspecs_are_found():
    # Guards the two tests below against passing on an empty list.
    assert "infermodel_define_quantities" in _hooks() and len(_hooks()) >= 6


@pytest.mark.parametrize("hook", _hooks())
def test_every_hook_has_a_heading_and_autodoc_in_the_plugin_guide(hook):
    guide = DOCS / "plugin-guide.rst"
    assert hook in _headings(guide), f"docs/plugin-guide.rst has no heading for {hook}"
    text = guide.read_text(encoding="utf-8")
    assert f".. autofunction:: infermodel.hookspecs.{hook}" in text


@pytest.mark.parametrize("hook", _hooks())
def test_every_hook_has_a_test_named_after_it(hook):
    names = _test_names()
    assert any(name.startswith(f"test_{hook}") for name in names), (
        f"no test named test_{hook}... in tests/ (see tests/test_hooks.py)")


def test_docs_pages_are_in_a_table_of_contents():
    # Every hand-written page is reachable: listed in index.rst, levers.rst's glob, or
    # (for scenario pages) generated with their own index.
    index = (DOCS / "index.rst").read_text(encoding="utf-8")
    for page in ("getting-started", "scenario-files", "scenarios/index", "quantities", "levers",
                 "accuracy", "cli", "plugin-guide", "worked-plugin", "sphinx-extension"):
        assert f"   {page}\n" in index, page
        if page != "scenarios/index":
            assert (DOCS / f"{page}.rst").is_file(), page
    assert "   levers/*\n" in (DOCS / "levers.rst").read_text(encoding="utf-8")


def test_generated_scenario_pages_are_not_committed():
    ignore = (DOCS / ".gitignore").read_text(encoding="utf-8").split()
    assert "/scenarios/" in ignore and "/_build/" in ignore


def test_docs_configuration_uses_the_extension_and_generates_scenario_pages():
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    assert '"infermodel.sphinxext"' in conf
    assert 'infermodel_scenario_pages = "../scenarios/*.toml"' in conf


def test_tox_builds_the_docs_with_warnings_as_errors_and_installs_the_worked_plugin():
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    assert "sphinx-build -W -b html docs docs/_build/html" in tox
    assert "plugins/infermodel-kv-offload" in tox
    for env in ("[testenv]", "[testenv:docs]", "[testenv:lint]"):
        assert env in tox


def test_every_analysis_table_key_is_documented_in_the_scenario_file_reference():
    from infermodel.analyses import searching
    from infermodel.analyses.simulation import table as simulation
    from infermodel.sweeping import axes

    page = (Path(__file__).resolve().parents[1] / "docs" / "scenario-files.rst").read_text()
    keys = [*axes.OPTION_KEYS, *searching.SEARCH_KEYS, *simulation.KEYS,
            *simulation.CAPACITY_KEYS, *simulation.SLO_KEYS]
    missing = [key for key in keys if f"``{key}``" not in page]
    assert not missing
    for table in ("[sweep]", "[search]", "[simulation]", "[witness]"):
        assert f"``{table}``" in page and f"   {table}\n" in page  # described, with an example


def test_every_lever_field_has_a_meaning_and_a_type_a_reader_understands():
    import attrs

    from infermodel.host import get_host
    from infermodel.sphinxext.directives import type_text as _type_text

    for name, info in get_host().registries.levers.items():
        attrs.resolve_types(info.schema)
        for field in attrs.fields(info.schema):
            assert field.metadata.get("description"), (name, field.name)
            shown = _type_text(field.type)
            assert shown[:1].islower() and "optional" not in shown, (name, field.name, shown)


def test_registering_an_already_loaded_plugin_says_how_to_isolate(monkeypatch):
    import infermodel_testplugin

    from infermodel.errors import PluginError
    from infermodel.host import PluginHost

    monkeypatch.delenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    host = PluginHost()
    with pytest.raises(PluginError, match="INFERMODEL_DISABLE_PLUGIN_AUTOLOAD"):
        host.register(infermodel_testplugin, "host_overhead")
