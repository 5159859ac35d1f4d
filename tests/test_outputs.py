"""Output files: clear errors for bad targets, never over an input, nothing partial."""

from __future__ import annotations

import shutil

import pytest

from conftest import SCENARIOS
from infermodel.cli import main

CASE = str(SCENARIOS / "case-study-24gb.toml")


@pytest.mark.parametrize("command", [
    ["run", CASE, "--output", "{missing}"],
    ["explain", CASE, "tpot", "--output", "{missing}"],
    ["graph", CASE, "--output", "{missing}"],
    ["run", CASE, "--output", "{directory}"],
    ["simulate", str(SCENARIOS / "module10-lab3-policies.toml"), "--policy", "chunked",
     "--rate", "0.2", "--plot", "{missing}"],
    ["simulate", str(SCENARIOS / "module10-lab3-policies.toml"), "--plot", "{jpg}"],
])
def test_bad_output_targets_are_user_errors(command, tmp_path, capsys):
    names = {"missing": str(tmp_path / "no" / "such" / "x.png"), "directory": str(tmp_path),
             "jpg": str(tmp_path / "x.jpg")}
    args = [a.format(**names) for a in command]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: ")


def test_never_writes_over_a_scenario_it_reads(tmp_path, capsys):
    base = tmp_path / "base.toml"
    child = tmp_path / "child.toml"
    shutil.copy(SCENARIOS / "module10-case-base.toml", base)
    child.write_text('extends = "base.toml"\n[model]\nweight_bytes = "5.5 GB"\n')
    before = (base.read_text(), child.read_text())
    for target in (child, base):
        assert main(["run", str(child), "--output", str(target)]) == 2
        assert "refusing to write over" in capsys.readouterr().err
    assert (base.read_text(), child.read_text()) == before
