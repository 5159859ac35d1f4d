"""The cookbook page's commands run, and print the lines the page shows."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT
from infermodel.cli import main

PAGE = ROOT / "docs" / "cookbook.rst"


def _examples() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every ``$ infermodel`` line of the page."""
    examples: list[tuple[str, list[str]]] = []
    inside = False
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith(".. code-block:: console"):
            inside = True
            continue
        if inside and line and not line.startswith("   "):
            inside = False
        if not inside or not line.strip():
            continue
        text = line[3:]
        if text.startswith("$ infermodel "):
            examples.append((text[len("$ infermodel "):], []))
        elif text.strip() != "...":
            examples[-1][1].append(text)
    return examples


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip())


def test_the_page_has_ten_questions_and_a_command_for_each():
    headings = re.findall(r"^\d+\. .+\?$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    assert len(headings) == 10
    assert len(_examples()) == 10
    assert all(expected for _, expected in _examples())


@pytest.mark.parametrize("command,expected", _examples(), ids=[c.split()[1] for c, _ in _examples()])
def test_cookbook_command_prints_the_lines_the_page_quotes(command, expected, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)) == 0
    printed = {_squeeze(line) for line in capsys.readouterr().out.splitlines()}
    missing = [line for line in expected if _squeeze(line) not in printed]
    assert not missing, f"{command}: the page quotes lines the command does not print"
