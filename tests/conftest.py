"""Shared fixtures.

Third-party plugins installed in the environment are not autoloaded in tests
(``INFERMODEL_DISABLE_PLUGIN_AUTOLOAD``); the built-in plugins are. Tests that
need a plugin register it with the ``register_plugin`` fixture, which unregisters
it afterwards.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", "1")

pytest_plugins = ("sphinx.testing.fixtures",)
pytest.register_assert_rewrite("simcheck")  # its asserts report their values

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def host():
    """A fresh plugin host (built-ins only) installed as the process-wide host."""
    from infermodel.host import PluginHost, set_host

    fresh = PluginHost()
    set_host(fresh)
    try:
        yield fresh
    finally:
        set_host(None)


@pytest.fixture
def register_plugin(host):
    """Register a plugin object on the fresh host for the duration of a test."""
    names = []

    def register(plugin, name):
        host.register(plugin, name)
        names.append(name)
        return plugin

    try:
        yield register
    finally:
        for name in names:
            if name in host.records:
                host.unregister(name)


@pytest.fixture
def write_scenario(tmp_path):
    """Write a scenario file from text and return its path."""

    def write(text: str, name: str = "scenario.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def rootdir():
    """Sphinx test roots live in tests/roots."""
    return Path(__file__).resolve().parent / "roots"


@pytest.fixture
def autoload_host(monkeypatch):
    """A host that also loads installed third-party plugins (the worked examples)."""
    from infermodel.host import PluginHost, set_host

    monkeypatch.delenv("INFERMODEL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    fresh = PluginHost()
    set_host(fresh)
    try:
        yield fresh
    finally:
        set_host(None)


@pytest.fixture(scope="session")
def shipped_calibrated(tmp_path_factory):
    """``infermodel validate --ledger builtin --calibrated --jobs 2 --format json`` on the
    shipped ledger, run once a session (about half a minute on two cores): its JSON report
    and the seconds it took (charged to whichever test asks for it first).
    """
    import json
    import time

    from infermodel.cli import main

    out = tmp_path_factory.mktemp("calibrated") / "v.json"
    begin = time.perf_counter()
    assert main(["validate", "--ledger", "builtin", "--format", "json", "--calibrated",
                 "--jobs", "2", "--output", str(out)]) == 0
    return json.loads(out.read_text()), time.perf_counter() - begin
