"""Size limits that keep the code readable: no module over 800 lines, no function over 100."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("src", "plugins")
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100


def _modules():
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if ".egg-info" not in str(path):
                yield path


def _long_functions(path: Path, root: Path = ROOT) -> list[str]:
    rel = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{rel}:{node.name} ({length} lines, from line {node.lineno})")
    return found


def test_no_module_is_too_long():
    offenders = []
    for path in _modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            offenders.append(f"{path.relative_to(ROOT).as_posix()} ({lines} lines)")
    assert not offenders, f"modules over {MAX_MODULE_LINES} lines: " + ", ".join(offenders)


def test_no_function_is_too_long():
    offenders = [found for path in _modules() for found in _long_functions(path)]
    assert not offenders, f"functions over {MAX_FUNCTION_LINES} lines: " + ", ".join(offenders)


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n",
                                      encoding="utf-8")
    assert _long_functions(tmp_path / "long.py", tmp_path) == [
        f"long.py:long ({MAX_FUNCTION_LINES + 1} lines, from line 5)"]
