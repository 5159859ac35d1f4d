"""A third-party plugin installed as a real distribution works with no change to the core.

``tests/plugins/infermodel-testplugin`` is installed by the README's test command; it
adds the ``host_overhead`` lever through the ``infermodel`` entry-point group.
"""

from __future__ import annotations

import json
import re
from importlib import metadata

import pytest

import infermodel
from conftest import SCENARIOS
from infermodel.cli import main
from infermodel.host import PluginHost


def test_the_test_plugin_is_an_installed_distribution():
    dist = metadata.distribution("infermodel-testplugin")
    names = [ep.name for ep in dist.entry_points if ep.group == "infermodel"]
    assert names == ["testplugin"]


def test_plugins_lists_it_with_distribution_and_version(autoload_host, capsys):
    assert main(["plugins", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    (row,) = [r for r in rows if r["name"] == "testplugin"]
    assert row["distribution"] == "infermodel-testplugin" and row["version"] == "0.0.1"
    assert row["levers"] == ["host_overhead"] and row["builtin"] is False
    assert main(["plugins"]) == 0
    text = capsys.readouterr().out
    assert "testplugin: infermodel_testplugin from infermodel-testplugin 0.0.1" in text
    assert "physics" not in text  # built-ins are listed only with --all
    assert main(["plugins", "--all"]) == 0
    assert "physics (built-in)" in capsys.readouterr().out


def test_its_lever_works_in_a_scenario_and_explain_shows_it(autoload_host, write_scenario, capsys):
    path = write_scenario(
        f'extends = "{SCENARIOS / "case-study-24gb.toml"}"\n'
        '[levers.host_overhead]\nper_step = "1 ms"\n')
    base = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml")
    result = infermodel.evaluate(path)
    assert result["decode_step_time"] == pytest.approx(base["decode_step_time"] + 1e-3, rel=1e-12)
    assert result.graph["decode_step_time"].changed_by == ("testplugin",)
    assert main(["explain", str(path), "tpot"]) == 0
    text = capsys.readouterr().out
    assert "wrapd by:" not in text
    assert re.search(r"wrapped by:\s+testplugin: the host adds a fixed time to every step", text)
    assert "host_overhead_time = 1 ms" in text


def test_restricting_plugins_by_environment(monkeypatch):
    monkeypatch.setenv("INFERMODEL_LOAD_PLUGINS", "physics")
    monkeypatch.delenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    host = PluginHost()
    assert sorted(host.records) == ["physics"]


def test_tracing_hook_calls_for_plugin_authors():
    import subprocess
    import sys

    from conftest import SCENARIOS as scenarios

    done = subprocess.run(
        [sys.executable, "-m", "infermodel.cli", "check", str(scenarios / "case-study-24gb.toml")],
        capture_output=True, text=True,
        env={**__import__("os").environ, "INFERMODEL_TRACE_PLUGINS": "1"})
    assert done.returncode == 0
    assert "infermodel_define_quantities" in done.stderr
