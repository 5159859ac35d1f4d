"""The README's newcomer commands are what CI runs and what the project ships."""

from __future__ import annotations

import re

from conftest import ROOT


def _commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)


def test_readme_starts_with_install_run_and_test_commands():
    run, test = _commands()[:2]
    assert "pip install -e ." in run and "infermodel run scenarios/" in run
    assert "pytest" in test and "pip install" in test


def test_ci_runs_exactly_the_readme_test_command():
    test = _commands()[1].strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test in [line.strip() for line in ci.splitlines()]


def test_readme_run_command_names_a_shipped_scenario():
    run = _commands()[0]
    scenario = re.search(r"infermodel run (\S+\.toml)", run).group(1)
    assert (ROOT / scenario).is_file()


def test_how_it_is_organised_names_every_package_and_the_plugin_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## How it is organised", 1)[1].split("\n## ", 1)[0]
    packages = sorted(p.parent.name for p in (ROOT / "src" / "infermodel").glob("*/__init__.py"))
    assert packages == ["accuracy", "analyses", "cli", "engine", "hf_config", "kernels",
                        "simulator", "sphinxext", "sweeping"]
    for name in [f"`{p}/`" for p in packages] + ["`infermodel.plugin`", "docs/internals.rst"]:
        assert name in section, name
